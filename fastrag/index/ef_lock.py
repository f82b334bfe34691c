"""The HNSW graph's lock: readers share one search breadth ``ef``, writers are exclusive."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["EfLock"]


class EfLock:
    """A readers-writer lock whose readers share one ``ef``.

    hnswlib reads the search breadth from the index, so concurrent searches
    may overlap only when they want the same value. A reader that wants
    another ``ef`` waits until the readers inside leave, sets it, and enters;
    while it waits, new readers queue behind it (no starvation). A writer
    waits for every reader and blocks new ones.
    """

    __slots__ = (
        "_cond",
        "_ef",
        "_mutex",
        "_readers",
        "_set_ef",
        "_sleepers",
        "_waiting_other",
        "_writer",
        "_writers_waiting",
    )

    def __init__(self, set_ef: Any) -> None:
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._set_ef = set_ef
        self._ef = -1  # the ef set in hnswlib
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._waiting_other = 0
        self._sleepers = 0  # threads in wait(): notify only when someone listens

    def _wait(self) -> None:
        self._sleepers += 1
        try:
            self._cond.wait()
        finally:
            self._sleepers -= 1

    def acquire_read(self, ef: int | None) -> None:
        """Enter as a reader that searches with ``ef`` (``None``: any ef, e.g. saving)."""
        with self._mutex:
            if (
                self._writer
                or self._writers_waiting
                or self._waiting_other
                or not (ef is None or ef == self._ef or self._readers == 0)
            ):
                self._wait_read(ef)
            if ef is not None and ef != self._ef:
                self._set_ef(ef)
                self._ef = ef
                if self._sleepers:
                    self._cond.notify_all()  # waiters for this ef may now join
            self._readers += 1

    def _wait_read(self, ef: int | None) -> None:
        other = ef is not None and ef != self._ef
        self._waiting_other += other
        try:
            while (
                self._writer
                or self._writers_waiting
                or (ef is not None and ef != self._ef and self._readers > 0)
                or (not other and self._waiting_other > 0)
            ):
                self._wait()
        finally:
            self._waiting_other -= other

    def forget_ef(self) -> None:
        """Under :meth:`write`: the index changed, its ef is unknown (the next reader sets it)."""
        self._ef = -1

    def release_read(self) -> None:
        """Leave as a reader."""
        with self._mutex:
            self._readers -= 1
            if self._readers == 0 and self._sleepers:
                self._cond.notify_all()

    @contextlib.contextmanager
    def read(self, ef: int | None) -> Iterator[None]:
        """Hold the index for searching with ``ef`` (see :meth:`acquire_read`)."""
        self.acquire_read(ef)
        try:
            yield
        finally:
            self.release_read()

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """Hold the index exclusively (insertions, deletions, resizing)."""
        with self._mutex:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._mutex:
                self._writer = False
                if self._sleepers:
                    self._cond.notify_all()
