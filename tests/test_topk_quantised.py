"""Exact search through an int8 copy: the same ids and scores as the float32 scan, bit for bit."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import examples
from fastrag._native import quantised as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import topk as naive
from numpy.testing import assert_allclose, assert_array_equal

from fastrag.index.exact import ExactIndex


def _index(blocks, alive=None, *, quantised: bool):
    dim = blocks[0].shape[1]
    return ExactIndex(blocks, dim, alive, quantised_min_rows=1 if quantised else 10**9)


def _same(a, b):
    assert_array_equal(a[0], b[0])
    assert_array_equal(a[1].view(np.int32), b[1].view(np.int32))  # bit for bit


def _corpus(rng, n, d, kind):
    x = rng.standard_normal((n, d)).astype(np.float32)
    if kind == "ties":  # many duplicate rows: equal scores, the lower id first
        x[rng.integers(0, n, n // 2 + 1)] = x[0]
    elif kind == "norms":  # rows of very different lengths, some zero
        x *= (10.0 ** rng.uniform(-4, 3, n)).astype(np.float32)[:, None]
        x[rng.integers(0, n, n // 5 + 1)] = 0
    elif kind == "unit":
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return np.ascontiguousarray(x, dtype=np.float32)


@settings(max_examples=examples(90), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    d=st.integers(1, 48),
    k=st.integers(1, 60),
    kind=st.sampled_from(["plain", "ties", "norms", "unit"]),
    masking=st.sampled_from(["none", "random", "one", "all-false", "alive"]),
    split=st.booleans(),
)
def test_the_int8_path_gives_the_float32_scans_ids_and_scores(seed, n, d, k, kind, masking, split):
    rng = np.random.default_rng(seed)
    x = _corpus(rng, n, d, kind)
    blocks = [x[: n // 2], x[n // 2 :]] if split and n > 1 else [x]
    alive = rng.random(n) > 0.2 if masking == "alive" else None
    mask = None
    if masking == "random":
        mask = rng.random(n) > 0.5
    elif masking == "one":
        mask = np.zeros(n, dtype=bool)
        mask[rng.integers(0, n)] = True
    elif masking == "all-false":
        mask = np.zeros(n, dtype=bool)
    fast = _index(blocks, alive, quantised=True)
    slow = _index(blocks, alive, quantised=False)
    for q in (x[rng.integers(0, n)][None, :], rng.standard_normal((1, d)).astype(np.float32)):
        got = fast.search(q, k, mask=mask)
        _same(got, slow.search(q, k, mask=mask))
        eligible = np.ones(n, bool) if alive is None else alive.copy()
        if mask is not None:
            eligible &= mask
        ids, _ = naive.exact_topk(q, x, k, eligible)
        assert got[0].shape == ids.shape
        ref = naive.scores(q, x)[0]  # float64: near-ties may order otherwise, by a rounding
        tol = 1e-4 * (np.abs(ref).max() + 1e-30)
        assert_allclose(np.sort(ref[got[0][0]]), np.sort(ref[ids[0]]), rtol=0, atol=tol)


def test_kernel_codes_and_bounds_match_the_reference():
    rng = np.random.default_rng(3)
    x = _corpus(rng, 300, 37, "norms")
    x.flags.writeable = False
    codes = np.empty(x.shape, np.int8)
    scales = np.empty(300, np.float32)
    err = np.empty(300, np.float32)
    kernels.quantise_rows(x, kernels.tolerance(37), codes, scales, err)
    ref_codes, ref_scales, residual = naive.quantise_rows(x)
    assert_array_equal(scales, ref_scales)
    assert np.abs(codes.astype(int) - ref_codes.astype(int)).max() <= 1  # rint at .5 aside
    assert (err.astype(np.float64) >= residual).all()


def test_identical_rows_fall_back_to_the_float32_scan():
    x = np.tile(np.arange(1, 9, dtype=np.float32), (5000, 1))
    fast = _index([x], quantised=True)
    q = np.ones((1, 8), np.float32)
    assert fast._quantised_search(0, q, None, 10, None) is None  # every row could be best
    _same(fast.search(q, 10), _index([x], quantised=False).search(q, 10))
    assert fast.search(q, 10)[0].tolist() == [list(range(10))]  # ties: the lowest ids


def test_the_copy_is_made_once_and_shared_by_threads():
    rng = np.random.default_rng(5)
    x = _corpus(rng, 6000, 24, "unit")
    fast = _index([x], quantised=True)
    slow = _index([x], quantised=False)
    qs = rng.standard_normal((16, 24)).astype(np.float32)
    want = [slow.search(q[None, :], 7) for q in qs]
    got: dict[int, tuple] = {}
    start = threading.Barrier(4)

    def work(t):
        start.wait()
        for i in range(t, 16, 4):
            got[i] = fast.search(qs[i][None, :], 7)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(16):
        _same(got[i], want[i])
    first = fast._block_codes(0)
    assert first is not None and fast._block_codes(0) is first
    # the next snapshot's index over the same (read-only, as a store's) block shares the copy
    x.flags.writeable = False
    a, b = _index([x], quantised=True), _index([x], quantised=True)
    assert a._block_codes(0) is b._block_codes(0) is not None
    _same(b.search(qs[1][None, :], 7), want[1])


@pytest.mark.parametrize("rows", [10, 4095])
def test_small_blocks_keep_no_copy(rows):
    x = np.ones((rows, 4), np.float32)
    ix = ExactIndex([x], 4)  # the default threshold: 4,096 rows
    ix.search(np.ones((1, 4), np.float32), 3)
    assert ix._block_codes(0) is None
