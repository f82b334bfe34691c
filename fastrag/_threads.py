"""Per-call thread control and a threading layer that is safe for concurrent callers.

``numba.set_num_threads`` is thread-local, so setting it for the length of one
call and restoring it in ``finally`` never disturbs other callers.

Numba's ``workqueue`` threading layer aborts the process when two Python
threads run parallel kernels at once. Before the first kernel runs, fastrag
asks Numba for a thread-safe layer (``NUMBA_THREADING_LAYER=threadsafe``:
OpenMP or TBB) unless the user chose a layer; if only ``workqueue`` can be
loaded, every parallel kernel call holds one process-wide lock instead, so
concurrent callers are serialised rather than crashed.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numba
import numpy as np

from .errors import ConfigError

__all__ = [
    "PARALLEL_MIN_WORK",
    "current_threads",
    "max_threads",
    "resolve_threads",
    "threading_layer",
    "threads",
]

_layer_lock = threading.Lock()
_layer: str | None = None
_workqueue_lock = threading.Lock()
_set_threads: Any = None  # Numba's per-thread setter without its locks (see _setter)


def threading_layer() -> str:
    """The Numba threading layer in use, choosing a thread-safe one on first call."""
    global _layer
    if _layer is not None:
        return _layer
    with _layer_lock:
        if _layer is None and numba.config.DISABLE_JIT:
            _layer = "none (JIT disabled)"
        if _layer is None:
            if numba.config.THREADING_LAYER == "default":
                numba.config.THREADING_LAYER = "threadsafe"
            try:
                _launch()
            except (ValueError, RuntimeError):  # no OpenMP or TBB: fall back, serialised
                numba.config.THREADING_LAYER = "workqueue"
                _launch()
            _layer = str(numba.threading_layer())
    return _layer


def _setter() -> Any:
    """Numba's per-thread ``set_num_threads`` without its Python wrapper.

    ``numba.set_num_threads`` takes two process-wide locks on every call
    (one of them a multiprocessing semaphore) to make sure the threading
    layer is loaded, then calls the layer's C setter through ctypes, which
    releases the GIL for it: two convoys and a GIL hand-off per call, and a
    retrieval narrowing a kernel to one thread pays them twice. Once the
    layer is loaded (:func:`threading_layer`) the same C setter is called
    here through a ``PYFUNCTYPE`` prototype, which keeps the GIL (the store
    of one thread-local int takes nanoseconds). Falls back to
    ``numba.set_num_threads`` should Numba's internals differ.
    """
    global _set_threads
    if _set_threads is None:
        threading_layer()
        setter: Any = numba.set_num_threads
        try:
            from numba.np.ufunc import parallel

            address = None
            if parallel._is_initialized:  # the layer is loaded: its setter is bound
                address = ctypes.cast(parallel._set_num_threads, ctypes.c_void_p).value
            if address:
                setter = ctypes.PYFUNCTYPE(None, ctypes.c_int)(address)
        except (AttributeError, ImportError, TypeError, ctypes.ArgumentError):
            pass
        _set_threads = setter
    return _set_threads


def _launch() -> None:
    """Run a tiny parallel kernel: Numba loads its threading layer on the first launch."""
    from ._native import topk  # lazy: the kernels import this module's users

    topk.init_heaps(np.empty((1, 1), dtype=np.int64), np.empty((1, 1), dtype=np.float32))


def max_threads() -> int:
    """Return the most threads a kernel may use (``NUMBA_NUM_THREADS``)."""
    return int(numba.config.NUMBA_NUM_THREADS)


def resolve_threads(n: int | None) -> int:
    """Validate a ``threads=`` argument and return the count it stands for.

    Parameters
    ----------
    n : int or None
        ``None`` means the current Numba setting of the calling thread.

    Returns
    -------
    int
        A thread count in ``[1, max_threads()]``.
    """
    if n is None:
        return current_threads()
    if isinstance(n, bool) or not isinstance(n, int):
        raise ConfigError(f"threads must be a positive int or None, got {n!r}")
    if not 1 <= n <= max_threads():
        raise ConfigError(
            f"threads must be between 1 and {max_threads()} (NUMBA_NUM_THREADS), got {n}"
        )
    return n


PARALLEL_MIN_WORK = 1 << 21
"""Below this much work (about bytes touched) a call runs on one thread unless told otherwise.

A parallel region waits for every thread of its team: on a busy machine one
descheduled thread stalls a microsecond call for a whole scheduler slice
(measured here: a 25-row scan, p99 8 ms on two threads against 2.6 us on
one, with one other busy process). Small calls gain nothing from a second
thread anyway, so they do not risk it.
"""


_local = threading.local()


def current_threads() -> int:
    """The Numba thread count of the calling thread (read from Numba once, then tracked).

    Numba's own ``get_num_threads`` and ``set_num_threads`` take process-wide
    locks on every call; fastrag is the one changing the setting inside its
    calls, so it keeps the value per thread and sets it without them (see
    :func:`_setter`).
    """
    n = getattr(_local, "n", None)
    if n is None:
        n = _local.n = int(numba.get_num_threads())
    return n


class threads:  # noqa: N801 - used as a context manager, like a function
    """Run the body with ``n`` Numba threads in this Python thread, then restore.

    Parameters
    ----------
    n : int or None
        Thread count; ``None`` leaves the current setting alone, except that
        work below :data:`PARALLEL_MIN_WORK` runs on one thread.
    work : int, optional
        Size of the work inside the block (about bytes touched).

    Notes
    -----
    ``with threads(n) as count:`` yields the thread count in force inside
    the block. The previous count is restored on exit, also on an
    exception. A class rather than a generator: it runs several times per
    retrieval.
    """

    __slots__ = ("count", "guard", "previous")

    def __init__(self, n: int | None, *, work: int | None = None) -> None:
        if n is None and work is not None and work < PARALLEL_MIN_WORK:
            n = 1
        self.count = resolve_threads(n)
        self.previous = self.count
        self.guard: Any = None

    def __enter__(self) -> int:
        layer = _layer if _layer is not None else threading_layer()
        if layer == "workqueue":
            self.guard = _workqueue_lock
            _workqueue_lock.acquire()
        previous = current_threads()
        if previous != self.count:
            (_set_threads or _setter())(self.count)
            _local.n = self.count
        self.previous = previous
        return self.count

    def __exit__(self, *exc: object) -> None:
        try:
            if self.previous != self.count:
                (_set_threads or _setter())(self.previous)
                _local.n = self.previous
        finally:
            if self.guard is not None:
                self.guard.release()
                self.guard = None
