"""The one place where Numba compilation is configured.

Every kernel in ``fastrag._native`` is decorated with :func:`kernel` or
:func:`parallel_kernel` from this module, never with a bare ``numba.njit``:

- ``cache=True`` unless ``FASTRAG_NUMBA_CACHE=0`` (the escape hatch for
  read-only installs or a suspected stale cache);
- ``nogil=True``, so callers in other Python threads keep running while a
  kernel does;
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

__all__ = ["CACHE", "FASTMATH", "kernel", "parallel_kernel"]

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

parallel_kernel = partial(
    numba.njit, cache=CACHE, nogil=True, fastmath=set(FASTMATH), parallel=True
)
"""Decorator for a kernel with ``prange`` loops."""
