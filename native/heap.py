"""Bounded heaps of ``(score, row)`` pairs: the one heap of the kernels.

A heap is two parallel arrays, scores ``hs`` and rows ``hr``, of which the
first ``size`` slots are in use. It keeps its *worst* entry at slot 0 (the
root), so the root is the threshold a new candidate must beat, and a heap
sort leaves the array best first. The order is the kernels' one ranking
rule: higher score first, ties broken by the *lower* row; a negative row is
padding, which ranks after every real entry (exact top-k fills empty slots
with ``(-inf, -1)``; the keyword and fusion kernels never hold padding).
Scores are never NaN.

Used by :mod:`.topk` (exact top-k's per-query heaps and their merge),
:mod:`.bm25` (the keyword search's top ``k``), :mod:`.fusion` (ranking the
fused candidates) and :mod:`.hnsw` (the beam search's two priority queues, as
hnswlib's ``std::pair`` max-heaps: see there); ``tests/naive`` holds the
references they are compared to.

Numba's on-disk cache tracks a kernel's own source file only: after an edit
here, clear the cache (or touch ``topk.py``, ``bm25.py``, ``fusion.py`` and ``hnsw.py``)
so that their cached kernels are compiled again with the new heap.
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel

__all__ = ["contains", "heapify", "offer", "pop", "push", "sift_down", "sort", "worse"]


@kernel(inline="always")
def worse(s1, r1, s2, r2):  # pragma: no cover - inlined
    """Whether ``(s1, r1)`` ranks strictly after ``(s2, r2)``.

    Padding (a negative row) ranks after every real entry; otherwise a lower
    score, or an equal score and a higher row, ranks after.
    """
    if r1 < 0:
        return r2 >= 0
    if r2 < 0:
        return False
    if s1 != s2:
        return s1 < s2
    return r1 > r2


@kernel
def sift_down(hs: np.ndarray, hr: np.ndarray, size: int, pos: int, s: float, r: int) -> None:
    """Put ``(s, r)`` at slot ``pos`` and restore heap order below it.

    With ``pos = 0`` this replaces the root (the worst entry) of a full heap.

    Parameters
    ----------
    hs : numpy.ndarray
        Scores, shape ``(>= size,)``, writable.
    hr : numpy.ndarray
        int64 rows, shape ``(>= size,)``, writable.
    size : int
        Number of slots in use.
    pos : int
        The slot to fill, ``0 <= pos < size``.
    s : float
        Score of the entry.
    r : int
        Row of the entry.
    """
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        right = child + 1
        if right < size and worse(hs[right], hr[right], hs[child], hr[child]):
            child = right
        if worse(hs[child], hr[child], s, r):
            hs[pos] = hs[child]
            hr[pos] = hr[child]
            pos = child
        else:
            break
    hs[pos] = s
    hr[pos] = r


@kernel
def push(hs: np.ndarray, hr: np.ndarray, size: int, s: float, r: int) -> int:
    """Add ``(s, r)`` to a heap of ``size`` entries (room is guaranteed); return the new size."""
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        if worse(s, r, hs[parent], hr[parent]):
            hs[pos] = hs[parent]
            hr[pos] = hr[parent]
            pos = parent
        else:
            break
    hs[pos] = s
    hr[pos] = r
    return size + 1


@kernel
def offer(hs: np.ndarray, hr: np.ndarray, size: int, k: int, s: float, r: int) -> int:
    """Offer ``(s, r)`` to a heap of at most ``k`` entries; return the new size.

    A heap not yet full takes it; a full one takes it in place of its root
    when it ranks strictly before the root.
    """
    if size < k:
        return push(hs, hr, size, s, r)
    if worse(hs[0], hr[0], s, r):
        sift_down(hs, hr, size, np.int64(0), s, r)
    return size


@kernel
def pop(hs: np.ndarray, hr: np.ndarray, size: int) -> int:
    """Remove the root (the worst entry) of a heap of ``size >= 1`` entries; return the new size."""
    size -= 1
    if size > 0:
        sift_down(hs, hr, size, np.int64(0), hs[size], np.int64(hr[size]))
    return size


@kernel(inline="always")
def contains(hr, size, r):  # pragma: no cover - inlined
    """Whether row ``r`` is among the ``size`` rows of the heap (a linear scan)."""
    for i in range(size):
        if hr[i] == r:
            return True
    return False


@kernel
def heapify(hs: np.ndarray, hr: np.ndarray, size: int) -> None:
    """Arrange ``size`` arbitrary entries into heap order (bottom up, ``O(size)``)."""
    for pos in range(size // 2 - 1, -1, -1):
        sift_down(hs, hr, size, pos, hs[pos], np.int64(hr[pos]))


@kernel
def sort(hs: np.ndarray, hr: np.ndarray, size: int) -> None:
    """Heap-sort a heap of ``size`` entries in place, best first (``O(size log size)``)."""
    # the worst goes to the end first, so the array ends up best first
    for end in range(size - 1, 0, -1):
        s = hs[end]
        r = np.int64(hr[end])  # rows go in as int64 whatever ``hr`` holds: one signature each
        hs[end] = hs[0]
        hr[end] = hr[0]
        sift_down(hs, hr, end, np.int64(0), s, r)
