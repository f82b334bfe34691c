"""Pay the JIT cost once, at start-up."""

from __future__ import annotations

import time

from ._native.warmup import compile_all

__all__ = ["warmup"]


def warmup() -> float:
    """Compile every Numba kernel fastrag uses (both writable and read-only inputs).

    Call it when a service starts so that no request pays for compilation.
    With the on-disk cache warm (the normal case after the first run) this
    loads compiled code and takes well under a second.

    Returns
    -------
    float
        Seconds spent.
    """
    t0 = time.perf_counter()
    compile_all()
    return time.perf_counter() - t0
