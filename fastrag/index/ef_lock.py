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

    Readers of the current ``ef`` enter and leave without taking the mutex:
    each appends to (and pops from) one list, ``list.append`` and
    ``list.pop`` being atomic, and the list's length is the readers inside.
    Anyone who needs the readers out (a writer, a reader of another ``ef``)
    first closes the *gate* under the mutex, then waits for the list to
    empty; a reader checks the gate again after it appended, and backs out
    to the mutex if it closed meanwhile. So concurrent searches at one
    ``ef`` never queue on a lock (whose holder, descheduled between two
    bytecodes, would stall every other caller), and a reader who leaves
    takes the mutex only when someone waits.
    """

    __slots__ = (
        "_cond",
        "_ef",
        "_gate",
        "_inside",
        "_mutex",
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
        self._inside: list[None] = []  # one item per reader inside
        self._gate = False  # closed: readers take the mutex (someone needs them out)
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

    def _update_gate(self) -> None:
        """Under the mutex: close the gate while a writer or a reader of another ef waits."""
        self._gate = bool(self._writer or self._writers_waiting or self._waiting_other)

    def acquire_read(self, ef: int | None) -> None:
        """Enter as a reader that searches with ``ef`` (``None``: any ef, e.g. saving)."""
        if not self._gate and (ef is None or ef == self._ef):
            inside = self._inside
            inside.append(None)
            if not self._gate and (ef is None or ef == self._ef):
                return
            self._leave()  # the gate closed meanwhile: queue at the mutex
        with self._mutex:
            if (
                self._writer
                or self._writers_waiting
                or self._waiting_other
                or not (ef is None or ef == self._ef or not self._inside)
            ):
                self._wait_read(ef)
            if ef is not None and ef != self._ef:
                # No reader inside, and the gate shut while checking: none can enter.
                self._waiting_other += 1
                self._update_gate()
                try:
                    while self._inside:  # a fast reader in flight backs out at once
                        self._wait()
                    self._set_ef(ef)
                    self._ef = ef
                finally:
                    self._waiting_other -= 1
                    self._update_gate()
                if self._sleepers:
                    self._cond.notify_all()  # waiters for this ef may now join
            self._inside.append(None)

    def _wait_read(self, ef: int | None) -> None:
        other = ef is not None and ef != self._ef
        self._waiting_other += other
        self._update_gate()
        try:
            while (
                self._writer
                or self._writers_waiting
                or (ef is not None and ef != self._ef and self._inside)
                or (not other and self._waiting_other > 0)
            ):
                self._wait()
        finally:
            self._waiting_other -= other
            self._update_gate()

    def forget_ef(self) -> None:
        """Under :meth:`write`: the index changed, its ef is unknown (the next reader sets it)."""
        self._ef = -1

    def _leave(self) -> None:
        self._inside.pop()
        if self._gate:  # someone waits for the readers to leave
            with self._mutex:
                if self._sleepers:
                    self._cond.notify_all()

    def release_read(self) -> None:
        """Leave as a reader."""
        self._leave()

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
            self._update_gate()
            try:
                while self._writer or self._inside:
                    self._wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
            self._update_gate()
        try:
            yield
        finally:
            with self._mutex:
                self._writer = False
                self._update_gate()
                if self._sleepers:
                    self._cond.notify_all()
