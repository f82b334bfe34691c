"""Per-call thread control and a threading layer that is safe for concurrent callers.

``numba.set_num_threads`` is thread-local, so setting it for the length of one
call and restoring it in ``finally`` never disturbs other callers.

Numba's ``workqueue`` threading layer aborts the process when two Python
threads run parallel kernels at once. Before the first kernel runs, fastrag
asks Numba for a thread-safe layer (``NUMBA_THREADING_LAYER=threadsafe``:
OpenMP or TBB) unless the user chose a layer; if only ``workqueue`` can be
loaded, every parallel kernel call holds one process-wide lock instead, so
concurrent callers are serialised rather than crashed.

:class:`Admission` is the process's admission gate: at most as many caller
threads as there are usable cores inside the GIL-heavy part of a call at
once, the others asleep in the kernel (see its docstring).
"""

from __future__ import annotations

import _thread
import collections
import ctypes
import os
import threading
from typing import Any

import numba
import numpy as np

from .errors import ConfigError

__all__ = [
    "PARALLEL_MIN_WORK",
    "Admission",
    "admission",
    "admitted",
    "set_admission",
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


# -- the admission gate ---------------------------------------------------------------


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


class Admission:
    """At most ``n`` caller threads inside at once; the others sleep in the kernel, in turn.

    A retrieval holds the GIL for most of its Python and gives it up a few
    times for its kernels. With many more caller threads than cores, each
    give-up hands the GIL to one of a crowd of waiters, and the threads in
    GIL-free kernels time-slice the cores with the one holding the GIL (and
    with each other's caches): 16 callers on two cores did less than two.
    Behind the gate the crowd waits on OS locks, which sleep without the
    GIL and cost nothing while they wait, so the threads inside behave as
    ``n`` callers do.

    A caller finding a free place takes it; otherwise it queues on a lock of
    its own, and a caller leaving hands its place straight to the first in
    the queue (releasing that lock): nobody waits behind a later arrival,
    and no place goes back to the free count while someone waits (it is
    idle only until the woken caller is scheduled). The count and the queue
    change only under one short ``_thread`` mutex, and a hand-over is one
    release of a lock its waiter already holds the other end of, so no
    wake-up can be lost. Re-entrant per thread: a call made inside an
    admitted call (an answer that retrieves, a callback that retrieves)
    passes straight through, so a thread never waits for a place it holds.
    A forked child starts with a fresh gate.

    Parameters
    ----------
    n : int
        Places, ``>= 1``.
    """

    __slots__ = ("_free", "_mutex", "_waiters", "n")

    def __init__(self, n: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"admission must be a positive int, got {n!r}")
        self.n = n
        self._free = n
        self._mutex = _thread.allocate_lock()
        self._waiters: collections.deque[Any] = collections.deque()

    def __repr__(self) -> str:
        return f"Admission({self.n})"

    @property
    def inside(self) -> int:
        """Callers inside the gate now."""
        return self.n - self._free

    @property
    def waiting(self) -> int:
        """Callers queued at the gate now."""
        return len(self._waiters)

    def __enter__(self) -> None:
        depth = getattr(_local, "depth", 0)
        if depth:  # already admitted in this thread (by this gate or an earlier one)
            _local.depth = depth + 1
            return
        mutex = self._mutex
        mutex.acquire()
        if self._free:
            self._free -= 1
            mutex.release()
        else:
            turn = _new_lock()
            turn.acquire()
            self._waiters.append(turn)
            mutex.release()
            self._wait(turn)
        _local.gate = self
        _local.depth = 1

    def _wait(self, turn: Any) -> None:
        """Sleep until a leaver hands this caller its place (releases ``turn``).

        A wait cut short (Ctrl-C interrupts a blocking acquire in the main
        thread) leaves the queue; if the place was handed over meanwhile, it
        is given back, so no place is lost to a caller that has gone.
        """
        try:
            turn.acquire()
        except BaseException:
            with self._mutex:
                try:
                    self._waiters.remove(turn)
                    handed = False
                except ValueError:  # popped by a leaver: the place is this caller's
                    handed = True
            if handed:
                self._give_back()
            raise

    def __exit__(self, *exc: object) -> None:
        _leave()

    def _give_back(self) -> None:
        """A place is given back: to the first waiter, or to the free count."""
        with self._mutex:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._free += 1


_new_lock = _thread.allocate_lock  # a waiter's own lock (tests interrupt its acquire)


def _leave() -> None:
    """Leave the gate: the outermost admitted call of the thread gives back its place."""
    depth = getattr(_local, "depth", 0)
    if depth > 1:
        _local.depth = depth - 1
    elif depth == 1:
        gate = _local.gate
        _local.gate = None
        _local.depth = 0
        if gate is not None:
            gate._give_back()


class _Open:
    """The gate when admission is off: lets every caller in."""

    __slots__ = ()
    n = 0

    def __enter__(self) -> None:
        depth = getattr(_local, "depth", 0)
        if depth:  # inside a gate that was on when the thread entered
            _local.depth = depth + 1

    def __exit__(self, *exc: object) -> None:
        _leave()


OPEN = _Open()


def _from_env() -> Admission | _Open:
    # Off unless asked for: on the quiet 2-core machine the gate did not raise 16 callers'
    # throughput in any mode (BENCHMARKS.md, "Session 9 on the quiet machine"); the
    # first-come gate of session 11 cut their p99 to a third, not their throughput.
    raw = os.environ.get("FASTRAG_ADMISSION", "off").strip().lower()
    if raw in ("auto", "on"):
        return Admission(usable_cores())
    if raw in ("", "0", "off", "no", "false"):
        return OPEN
    try:
        return Admission(int(raw))
    except (ValueError, ConfigError):
        raise ConfigError(
            f"FASTRAG_ADMISSION must be auto, off or a positive int, got {raw!r}"
        ) from None


_gate: Admission | _Open = _from_env()


def admission() -> Admission | _Open:
    """Return the process's gate (enter it with a with statement to be admitted)."""
    return _gate


def set_admission(n: int | str | None) -> None:
    """Set the gate: ``n`` threads at once, ``"auto"`` (usable cores) or ``None`` (off).

    The default comes from ``FASTRAG_ADMISSION`` (``auto``, ``off`` or a
    count; ``off`` when unset). Threads inside the old gate leave it as
    they entered it.
    """
    global _gate
    if n is None:
        _gate = OPEN
    elif n == "auto":
        _gate = Admission(usable_cores())
    elif isinstance(n, str):
        raise ConfigError(f"admission must be a positive int, 'auto' or None, got {n!r}")
    else:
        _gate = Admission(n)


def admitted() -> bool:
    """Whether the calling thread is inside the gate."""
    return getattr(_local, "depth", 0) > 0


def _after_fork() -> None:
    # Places held by threads that do not exist in the child would block it for good.
    global _gate
    _local.gate = None
    _local.depth = 0
    if isinstance(_gate, Admission):
        _gate = Admission(_gate.n)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
