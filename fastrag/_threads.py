"""Per-call thread control.

``numba.set_num_threads`` is thread-local, so setting it for the length of one
call and restoring it in ``finally`` never disturbs other callers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numba

from .errors import ConfigError

__all__ = ["max_threads", "resolve_threads", "threads"]


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
        return int(numba.get_num_threads())
    if isinstance(n, bool) or not isinstance(n, int):
        raise ConfigError(f"threads must be a positive int or None, got {n!r}")
    if not 1 <= n <= max_threads():
        raise ConfigError(
            f"threads must be between 1 and {max_threads()} (NUMBA_NUM_THREADS), got {n}"
        )
    return n


@contextmanager
def threads(n: int | None) -> Iterator[int]:
    """Run the body with ``n`` Numba threads in this Python thread, then restore.

    Parameters
    ----------
    n : int or None
        Thread count; ``None`` leaves the current setting alone.

    Yields
    ------
    int
        The thread count in force inside the block.
    """
    count = resolve_threads(n)
    previous = int(numba.get_num_threads())
    if count == previous:
        yield count
        return
    numba.set_num_threads(count)
    try:
        yield count
    finally:
        numba.set_num_threads(previous)
