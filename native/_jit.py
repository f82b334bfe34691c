"""The one place where Numba compilation is configured.

Every kernel in ``fastrag._native`` is decorated with :func:`kernel` or
:func:`parallel_kernel` from this module, never with a bare ``numba.njit``:

- ``cache=True`` unless ``FASTRAG_NUMBA_CACHE=0`` (the escape hatch for
  read-only installs or a suspected stale cache);
- ``nogil=True``, so callers in other Python threads keep running while a
  kernel does (``held_kernel``: the GIL kept, for microsecond kernels);
- a *safe* fastmath flag set: ``reassoc`` and ``contract`` let LLVM vectorise
  dot products and sums, while ``nnan``/``ninf`` are left out so that NaN and
  infinity checks are never compiled away.

This module reads the environment exactly once, at import. It never changes
``numba.config``.
"""

from __future__ import annotations

import os
from functools import partial

import numba
import numpy as np

__all__ = ["CACHE", "FASTMATH", "frozen", "held_kernel", "kernel", "parallel_kernel", "readonly"]

CACHE: bool = os.environ.get("FASTRAG_NUMBA_CACHE", "1").strip().lower() not in {
    "0",
    "false",
    "no",
    "off",
}
"""Whether compiled kernels are cached on disk (``FASTRAG_NUMBA_CACHE``)."""

FASTMATH: frozenset[str] = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})
"""LLVM fast-math flags: no ``nnan``/``ninf``, so NaN/inf handling stays exact."""

kernel = partial(numba.njit, cache=CACHE, nogil=True, fastmath=set(FASTMATH))
"""Decorator for a serial kernel."""

held_kernel = partial(numba.njit, cache=CACHE, nogil=False, fastmath=set(FASTMATH))
"""Decorator for a serial kernel that keeps the GIL: for the microsecond calls of one question.

Releasing the GIL lets other threads run, but with many caller threads each
release hands the GIL to another thread and queues for it back (a context
switch or two); a kernel shorter than that hand-off is better run with the
GIL held.
"""

parallel_kernel = partial(
    numba.njit, cache=CACHE, nogil=True, fastmath=set(FASTMATH), parallel=True
)
"""Decorator for a kernel with ``prange`` loops."""


def readonly(a: np.ndarray) -> np.ndarray:
    """``a`` itself if read-only, else a read-only view of it (no copy).

    Drivers pass every input to the kernels read-only, so each kernel has one
    compiled signature whether the caller's arrays are writable (fresh) or
    read-only (Arrow buffers, memory-mapped files): half the compile time.
    """
    if not a.flags.writeable:
        return a
    view = a.view()
    view.flags.writeable = False
    return view


def frozen(*arrays: np.ndarray) -> list[np.ndarray]:
    """:func:`readonly` of each array."""
    return [readonly(a) for a in arrays]
