"""native/heap.py, the one heap of the kernels: push, pop and sort against sorted()."""

from __future__ import annotations

import numpy as np
import pytest
from fastrag._native import heap


def _filled(scores, rows):
    hs = np.empty(len(scores), np.float32)
    hr = np.empty(len(rows), np.int64)
    size = 0
    for s, r in zip(scores, rows, strict=True):
        size = heap.push(hs, hr, size, s, r)
    return hs, hr, size


@pytest.mark.parametrize("seed", range(5))
def test_pop_takes_the_worst_first(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    scores = rng.integers(0, 6, n).astype(np.float32)  # many ties
    rows = rng.permutation(1000)[:n]
    hs, hr, size = _filled(scores, rows)
    popped = []
    while size:
        popped.append((float(hs[0]), int(hr[0])))
        size = heap.pop(hs, hr, size)
    # worst first: the lowest score, then the highest row among equals
    want = sorted(zip(scores.tolist(), rows.tolist()), key=lambda p: (p[0], -p[1]))
    assert popped == want


def test_negated_distances_pop_as_hnswlibs_max_heap():
    # hnswlib's std::pair max-heap of (dist, id) pops the largest pair first
    dist = np.array([0.5, 0.25, 0.5, 1.0, 0.25], np.float32)
    ids = np.array([3, 9, 7, 1, 2])
    hs, hr, size = _filled(-dist, ids)
    out = []
    while size:
        out.append((float(-hs[0]), int(hr[0])))
        size = heap.pop(hs, hr, size)
    assert out == sorted(zip(dist.tolist(), ids.tolist()), reverse=True)


def test_sort_leaves_it_best_first():
    hs, hr, size = _filled(np.array([1, 3, 3, 2], np.float32), np.array([5, 8, 4, 0]))
    heap.sort(hs, hr, size)
    assert hr.tolist() == [4, 8, 0, 5] and hs.tolist() == [3, 3, 2, 1]
