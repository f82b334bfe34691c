"""An hnswlib index file searched where it lies: memory-mapped, no copy, no parse.

:class:`MappedGraph` answers the part of the ``hnswlib.Index`` interface that
:class:`~fastrag.index.hnsw.HnswIndex` uses for searching, deleting and saving,
over the saved file itself (see :mod:`fastrag._native.hnsw`): opening it
costs one pass over the links (a Numba kernel that releases the GIL, so it
can run in a background thread while the caller keeps answering), and
memory grows only by the file pages searches touch, which the page cache
shares between processes. hnswlib's own ``load_index`` instead copies the
whole file into private memory while holding the GIL.

Inserting needs hnswlib: :meth:`MappedGraph.to_hnswlib` loads the file (with
the deletions made since) into an ``hnswlib.Index``.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import struct
import tempfile
import threading
from pathlib import Path

import hnswlib
import numpy as np

from .. import _native  # noqa: F401  (the package must import before its submodules)
from .._fs import sha256_file
from .._native import frozen, readonly
from .._native import hnsw as _kernels
from .._threads import threads as _threads
from ..errors import SearchIndexError

__all__ = ["HEADER", "MappedGraph", "read_header"]

HEADER = struct.Struct("<QQQQQQiIQQQdQ")
"""hnswlib's index-file header (``HierarchicalNSW::saveIndex``): offsetLevel0,
max_elements, cur_element_count, size_data_per_element, label_offset,
offsetData, maxlevel (int32), enterpoint_node (uint32), maxM, maxM0, M, mult
(double), ef_construction."""

_DELETE_MARK = 0x01
"""hnswlib marks a deleted element in the third byte of its level-0 link header."""

_PARALLEL_MIN_QUERIES = 4
"""Batches of fewer queries per thread run serially (hnswlib's own rule)."""

_POOL_SIZE = 8
"""Visited-tag arrays of finished searches kept for reuse (per kind: serial, parallel)."""

_NO_MASK = readonly(np.zeros(0, np.bool_))
"""The ``allowed`` of a search without a filter (the kernels read size 0 as "all")."""


def read_header(path: Path, dim: int, M: int) -> dict[str, int]:  # noqa: N803
    """Read and check the header of an hnswlib file against ``dim`` and ``M``.

    Returns
    -------
    dict
        ``count``, ``per_elem``, ``label_off``, ``data_off``, ``maxlevel``,
        ``entry``, ``max_m``, ``max_m0`` and the file ``size`` in bytes.

    Raises
    ------
    SearchIndexError
        Missing, unreadable, truncated or inconsistent file (named).
    """
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(HEADER.size)
    except FileNotFoundError as exc:
        raise SearchIndexError(f"HNSW index {path} does not exist") from exc
    except OSError as exc:
        raise SearchIndexError(f"cannot read HNSW index {path}: {exc}") from exc
    if len(head) < HEADER.size:
        raise corrupt(path, f"{size} bytes, shorter than the {HEADER.size}-byte header")
    (off0, _cap, count, per_elem, label_off, data_off, maxlevel, entry, max_m, max_m0, m_, _mult,
     _efc) = HEADER.unpack(head)  # fmt: skip
    links0 = 4 * max_m0 + 4
    if m_ != M or max_m != M or max_m0 != 2 * M:
        raise corrupt(
            path, f"built with M={m_} (maxM={max_m}, maxM0={max_m0}), the config says M={M}"
        )
    expected = (0, links0, links0 + 4 * dim, links0 + 4 * dim + 8)
    if (off0, data_off, label_off, per_elem) != expected:
        raise corrupt(
            path,
            f"element layout (offsets {off0}, {data_off}, {label_off}, size {per_elem}) "
            f"does not match dim={dim}",
        )
    if count * (per_elem + 4) > size - HEADER.size or size % 4:
        raise corrupt(path, f"{count} elements do not fit in {size} bytes (truncated?)")
    if count and not (0 <= entry < count and 0 <= maxlevel < 64):
        raise corrupt(path, f"entry point {entry} / top level {maxlevel} out of range")
    return {
        "count": count, "per_elem": per_elem, "label_off": label_off, "data_off": data_off,
        "maxlevel": maxlevel, "entry": entry, "max_m": max_m, "max_m0": max_m0, "size": size,
    }  # fmt: skip


def corrupt(path: Path, why: str) -> SearchIndexError:
    """The error for a damaged or foreign index file."""
    return SearchIndexError(f"HNSW index {path} is corrupt or not an hnswlib index: {why}")


class MappedGraph:
    """An hnswlib graph file, memory-mapped and searched in place.

    Open one with :meth:`open`. Searches are thread-safe and release the
    GIL; :meth:`mark_deleted` must not run concurrently with them (the
    caller's lock sees to that, as it does for hnswlib).
    """

    def __init__(self, path: Path, dim: int, head: dict[str, int], mm: mmap.mmap) -> None:
        self.path = path
        self.dim = dim
        self._mm = mm
        count = head["count"]
        self._count = count
        words = np.frombuffer(mm, dtype=np.uint32)  # read-only: the map is
        self._words = words
        self._vecs = words.view(np.float32)
        per_w, label_w = head["per_elem"] // 4, head["label_off"] // 4
        self._layout = (per_w, head["data_off"] // 4, label_w, head["max_m"], head["entry"],
                        head["maxlevel"])  # fmt: skip
        err, at, labels, deleted, upper_off, levels = _kernels.graph_layout(
            words,
            count,
            per_w,
            label_w,
            head["max_m0"],
            head["max_m"],
            head["maxlevel"],
            head["entry"],
        )
        if err:
            raise corrupt(path, f"{_kernels.LAYOUT_ERRORS[err]} (element {at})")
        if count and labels.max() >= 2**62:
            raise corrupt(path, "a label exceeds 2**62")
        if np.unique(labels).size != count:
            raise corrupt(path, "duplicate labels")
        self._labels = labels
        self._deleted = deleted  # our copy: later deletions are marked here
        self._saved_deleted = deleted.copy()  # as in the file
        self._upper_off = upper_off
        self._levels = levels
        self._n_deleted = int(np.count_nonzero(deleted))
        bound = int(labels.max()) + 1 if count else 0
        self._ids = np.full(bound, -1, dtype=np.int64)  # label -> internal id
        self._ids[labels] = np.arange(count, dtype=np.int64)
        self._ef = 10
        self._pool: list[np.ndarray] = []  # visited tags of finished parallel searches, reused
        self._pool_lock = threading.Lock()
        self._serial_pool: list[np.ndarray] = []  # one-row tags: list.pop/append, no lock
        self._fixed = self._serial_args()

    def _serial_args(self) -> tuple[object, ...]:
        """The graph's arguments of the serial search kernel: read-only views, int64 scalars.

        Made once (``deleted`` is viewed, so later deletions show through), so a
        search passes them as they are instead of re-viewing eight arrays per call.
        """
        per_w, data_w, label_w, max_m, _, _ = self._layout
        words, vecs, upper_off, levels, labels, deleted = frozen(
            self._words, self._vecs, self._upper_off, self._levels, self._labels, self._deleted
        )
        return (words, vecs, np.int64(per_w), np.int64(data_w), np.int64(label_w),
                np.int64(max_m), upper_off, levels, labels, deleted)  # fmt: skip

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        dim: int,
        M: int,
        *,
        sha256: str | None = None,  # noqa: N803
    ) -> MappedGraph:
        """Map and check an hnswlib file (header, every link, labels; ``sha256`` if given).

        Raises
        ------
        SearchIndexError
            The file is missing, unreadable, truncated, corrupt, or does not
            match ``dim`` / ``M``; the message names it.
        """
        p = Path(path)
        head = read_header(p, dim, M)
        if sha256 is not None:
            try:
                actual = sha256_file(p)
            except OSError as exc:
                raise SearchIndexError(f"cannot read HNSW index {p}: {exc}") from exc
            if actual != sha256:
                raise SearchIndexError(
                    f"HNSW index {p} is corrupt: SHA-256 {actual} differs from the expected "
                    f"{sha256}"
                )
        try:
            with open(p, "rb") as fh:  # the map keeps its own descriptor
                mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise SearchIndexError(f"cannot map HNSW index {p}: {exc}") from exc
        try:
            return cls(p, dim, head, mm)
        except BaseException:
            _close(mm)
            raise

    # -- the hnswlib.Index interface HnswIndex uses ---------------------------------

    def get_current_count(self) -> int:
        """Elements in the graph, deleted ones included."""
        return self._count

    def get_max_elements(self) -> int:
        """Capacity: the element count (a mapped graph does not grow)."""
        return self._count

    def set_ef(self, ef: int) -> None:
        """Search breadth of the following searches."""
        self._ef = int(ef)

    def get_ids_list(self) -> np.ndarray:
        """Every label in the graph, deleted ones included."""
        return self._labels

    def labels_and_deleted(self) -> tuple[np.ndarray, np.ndarray]:
        """Labels of all elements and whether each is deleted (read-only views)."""
        return self._labels, self._deleted

    def knn_query(
        self, queries: np.ndarray, k: int, num_threads: int = 1, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``knn_query`` of hnswlib: labels and distances ``1 - ip``, nearest first.

        ``allowed`` is a bool mask by label (hnswlib takes a callable): only
        those labels are returned. Raises ``RuntimeError`` when the walk finds
        fewer than ``k`` results, as hnswlib does.
        """
        q = queries
        if type(q) is not np.ndarray or q.dtype != np.float32 or not q.flags.c_contiguous:
            q = np.ascontiguousarray(queries, dtype=np.float32)
        m = q.shape[0]
        ef = max(self._ef, k)
        workers = max(1, min(num_threads, m // _PARALLEL_MIN_QUERIES))
        if workers == 1:
            return self._serial(q, k, ef, allowed)
        mask = _NO_MASK if allowed is None else allowed
        visited = self._take(workers)
        try:
            with _threads(workers):
                labels, dist, found = _kernels.search(
                    self._words, self._vecs, self._layout, self._upper_off, self._levels,
                    self._labels, self._deleted, self._n_deleted, mask, q, k, ef, visited,
                )  # fmt: skip
        finally:
            self._give(visited)
        if m and int(found.min()) < k:
            raise RuntimeError(
                "Cannot return the results in a contiguous 2D array. Probably ef or M is too small"
            )
        return labels, dist

    def _serial(
        self, q: np.ndarray, k: int, ef: int, allowed: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`knn_query` on this thread: one kernel call, no lock, no thread setting.

        The serial kernel runs on the calling thread whatever Numba's thread
        count, so no scope sets it; a one-row visited array comes from a pool
        that ``list.pop``/``list.append`` keep without a lock (each is atomic).
        """
        pool = self._serial_pool
        try:
            visited = pool.pop()
        except IndexError:
            visited = np.zeros(self._count + 1, dtype=np.uint16)
        try:
            labels, dist, fewest = _kernels.search_serial(
                *self._fixed, np.int64(self._n_deleted),
                _NO_MASK if allowed is None else readonly(allowed),
                np.int64(self._layout[4]), np.int64(self._layout[5]),
                readonly(q), np.int64(k), np.int64(ef), visited,
            )  # fmt: skip
        finally:
            if len(pool) < _POOL_SIZE:
                pool.append(visited)
        if fewest < k:
            raise RuntimeError(
                "Cannot return the results in a contiguous 2D array. Probably ef or M is too small"
            )
        return labels, dist

    def mark_deleted(self, label: int) -> None:
        """Mark ``label`` deleted: never returned again (the file is not changed)."""
        i = int(self._ids[label]) if 0 <= label < self._ids.size else -1
        if i < 0:
            raise RuntimeError("Label not found")
        if not self._deleted[i]:
            self._deleted[i] = True
            self._n_deleted += 1

    def get_items(self, labels: np.ndarray, return_type: str = "numpy") -> np.ndarray:
        """Vectors of ``labels`` (float32 ``(n, dim)``, a copy)."""
        ids = self._ids[np.asarray(labels, dtype=np.int64)]
        per_w, data_w = self._layout[0], self._layout[1]
        start = _kernels.HEADER_WORDS + data_w
        rows = self._vecs[start : start + self._count * per_w].reshape(-1, per_w)[: self._count]
        return rows[ids, : self.dim].copy() if ids.size else np.zeros((0, self.dim), np.float32)

    def save_index(self, path: str) -> None:
        """Write the graph to ``path``: the file's bytes, with the deletions made since."""
        shutil.copyfile(self.path, path)
        changed = np.flatnonzero(self._deleted != self._saved_deleted)
        if changed.size:
            per_elem = self._layout[0] * 4
            with open(path, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as out:
                flags = np.frombuffer(out, dtype=np.uint8)
                at = HEADER.size + changed * per_elem + 2
                flags[at] = np.where(self._deleted[changed], flags[at] | _DELETE_MARK,
                                     flags[at] & ~np.uint8(_DELETE_MARK))  # fmt: skip
                del flags
                out.flush()

    def to_hnswlib(self, max_elements: int) -> hnswlib.Index:
        """The same graph as an ``hnswlib.Index`` (which can grow), deletions included."""
        fd, tmp = tempfile.mkstemp(prefix="fastrag-hnsw-", suffix=".bin")
        os.close(fd)
        try:
            self.save_index(tmp)
            index = hnswlib.Index(space="ip", dim=self.dim)
            index.load_index(tmp, max_elements=max(max_elements, self._count, 1))
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return index

    def close(self) -> None:
        """Drop this object's views of the file; the map closes once no array uses it."""
        self._words = np.zeros(0, np.uint32)
        self._vecs = self._words.view(np.float32)
        self._fixed = ()
        _close(self._mm)

    # -- visited tags ---------------------------------------------------------------

    def _take(self, workers: int) -> np.ndarray:
        with self._pool_lock:
            for i, arr in enumerate(self._pool):
                if arr.shape[0] == workers:
                    return self._pool.pop(i)
        return np.zeros((workers, self._count + 1), dtype=np.uint16)

    def _give(self, visited: np.ndarray) -> None:
        with self._pool_lock:
            if len(self._pool) < _POOL_SIZE:
                self._pool.append(visited)


def _close(mm: mmap.mmap) -> None:
    with contextlib.suppress(BufferError, OSError, ValueError):  # views still alive: GC closes it
        mm.close()
