from __future__ import annotations

import os

import numpy as np
import pytest
from fastrag._native import topk as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import topk as naive
from numpy.testing import assert_allclose, assert_array_equal

from fastrag._threads import max_threads
from fastrag.errors import ConfigError
from fastrag.index import exact
from fastrag.index.exact import exact_topk, merge_topk

JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")
RTOL, ATOL = 1e-5, 1e-6
TWO_THREADS = pytest.mark.skipif(max_threads() < 2, reason="needs NUMBA_NUM_THREADS >= 2")


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1, norms)


def frozen(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.fixture(params=["scan", "blas"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Force one of the two paths, whatever the batch size."""
    monkeypatch.setattr(exact, "BLAS_MIN_BATCH", 1 if request.param == "blas" else 10**9)
    return request.param


def check(queries, corpus, k, ids, scores, mask=None) -> None:
    """Compare with the reference: scores to tolerance, ids where unambiguous."""
    ref_ids, ref_scores = naive.exact_topk(queries, corpus, k, mask)
    assert ids.dtype == np.int64 and scores.dtype == np.float32
    assert ids.shape == scores.shape == ref_ids.shape
    assert ids.flags.c_contiguous and scores.flags.c_contiguous
    assert not np.isnan(scores).any()
    assert_allclose(scores, ref_scores, rtol=RTOL, atol=ATOL)
    full = naive.scores(queries, corpus)
    eligible = np.ones(corpus.shape[0], bool) if mask is None else mask
    kk = ids.shape[1]
    _, nxt = naive.exact_topk(queries, corpus, kk + 1, mask)
    tol = ATOL + RTOL * 2
    for q in range(ids.shape[0]):
        assert len(set(ids[q].tolist())) == kk
        assert eligible[ids[q]].all()
        # every returned id carries its own score
        assert_allclose(scores[q], full[q, ids[q]], rtol=RTOL, atol=ATOL)
        ref = np.concatenate([ref_scores[q], nxt[q, kk:], [-np.inf]])
        for p in range(kk):
            gap_prev = np.inf if p == 0 else ref[p - 1] - ref[p]
            gap_next = ref[p] - ref[p + 1]
            if gap_prev > tol and gap_next > tol:
                assert ids[q, p] == ref_ids[q, p], (q, p)


# --- sizes and both paths -------------------------------------------------

SIZES = [  # n, d, m, k
    (1, 1, 1, 1),
    (1, 5, 3, 10),
    (7, 3, 2, 10),
    (13, 8, 9, 5),
    (100, 16, 1, 10),
    (100, 16, 17, 1),
    (257, 64, 33, 10),
    (1000, 32, 70, 10),
    (2049, 24, 4, 7),
    (3001, 40, 12, 10),
    (5000, 64, 1, 10),
    (5000, 64, 300, 10),
    (4099, 8, 65, 5000),
]


@pytest.mark.parametrize(("n", "d", "m", "k"), SIZES)
def test_matches_reference(n, d, m, k, rng):
    if JIT_DISABLED and n * m > 20_000:
        pytest.skip("too slow without the JIT")
    corpus = frozen(unit(rng, n, d))
    queries = unit(rng, m, d)
    ids, scores = exact_topk(queries, corpus, k)
    check(queries, corpus, k, ids, scores)


@pytest.mark.parametrize(("n", "d", "m", "k"), [s for s in SIZES if s[0] * s[2] <= 300_000])
def test_each_path_matches_reference(n, d, m, k, rng, path):
    if JIT_DISABLED and n * m > 20_000:
        pytest.skip("too slow without the JIT")
    corpus = unit(rng, n, d)
    queries = unit(rng, m, d)
    for threads in (1, max_threads()):
        ids, scores = exact_topk(queries, corpus, k, threads=threads)
        check(queries, corpus, k, ids, scores)


def test_blas_path_without_threadpoolctl(rng, monkeypatch):
    # threadpoolctl is optional: without it one worker runs and BLAS keeps its threads
    corpus = frozen(unit(rng, 2000, 24))
    queries = unit(rng, 70, 24)
    expected = exact_topk(queries, corpus, 10, threads=1)
    monkeypatch.setattr(exact, "_controller", False)
    for threads in (1, max_threads()):
        ids, scores = exact_topk(queries, corpus, 10, threads=threads)
        assert_array_equal(ids, expected[0])
        assert_allclose(scores, expected[1], rtol=RTOL, atol=ATOL)


def test_paths_agree(rng, monkeypatch):
    corpus = frozen(unit(rng, 3000, 48))
    queries = unit(rng, 80, 48)
    monkeypatch.setattr(exact, "BLAS_MIN_BATCH", 10**9)
    scan_ids, scan_scores = exact_topk(queries, corpus, 10)
    monkeypatch.setattr(exact, "BLAS_MIN_BATCH", 1)
    blas_ids, blas_scores = exact_topk(queries, corpus, 10)
    assert_allclose(scan_scores, blas_scores, rtol=RTOL, atol=ATOL)
    gaps = np.abs(np.diff(scan_scores, axis=1))
    clear = np.ones_like(scan_ids, dtype=bool)
    clear[:, 1:] &= gaps > 1e-5
    clear[:, :-1] &= gaps > 1e-5
    assert_array_equal(scan_ids[clear], blas_ids[clear])


def test_blas_path_many_blocks_and_query_chunks(rng, monkeypatch, path):
    monkeypatch.setattr(exact, "_BLAS_BUFFER_BYTES", 4096)  # 256-row blocks
    monkeypatch.setattr(exact, "_BLAS_QUERY_CHUNK", 32)  # 3 balanced chunks of 24, 23, 23
    corpus = frozen(unit(rng, 1500, 20))
    queries = unit(rng, 70, 20)
    ids, scores = exact_topk(queries, corpus, 12, threads=max_threads())
    check(queries, corpus, 12, ids, scores)


# --- ties, zeros, masks ----------------------------------------------------


def test_duplicates_lower_id_first(rng, path):
    base = unit(rng, 5, 16)
    corpus = frozen(np.tile(base, (41, 1)))  # rows i and i + 5 are identical
    queries = unit(rng, 11, 16)
    ids, scores = exact_topk(queries, corpus, 30)
    ref_ids, _ = naive.exact_topk(queries, corpus, 30)
    assert_array_equal(ids, ref_ids)
    # equal scores are bit-identical and ordered by id
    for q in range(ids.shape[0]):
        for p in range(1, 30):
            assert scores[q, p] <= scores[q, p - 1]
            if scores[q, p] == scores[q, p - 1]:
                assert ids[q, p] > ids[q, p - 1]


def test_integer_vectors_tie_exactly(rng, path):
    # small integers: every dot product is exact, so ties are real ties
    corpus = rng.integers(-2, 3, size=(203, 6)).astype(np.float32)
    queries = rng.integers(-2, 3, size=(13, 6)).astype(np.float32)
    for k in (1, 10, 203):
        ids, scores = exact_topk(queries, corpus, k)
        ref_ids, ref_scores = naive.exact_topk(queries, corpus, k)
        assert_array_equal(ids, ref_ids)
        assert_array_equal(scores, ref_scores)


@pytest.mark.parametrize("m", [1, 5, 12])
def test_zero_vectors(rng, m, path):
    corpus = unit(rng, 50, 8)
    corpus[[3, 7, 20]] = 0.0
    queries = unit(rng, m, 8)
    queries[0] = 0.0
    ids, scores = exact_topk(queries, corpus, 10)
    assert not np.isnan(scores).any()
    assert_array_equal(ids[0], np.arange(10))
    assert_array_equal(scores[0], np.zeros(10, np.float32))
    check(queries, corpus, 10, ids, scores)
    zero_corpus = np.zeros((9, 8), np.float32)
    ids, scores = exact_topk(queries, zero_corpus, 4)
    assert_array_equal(ids, np.tile(np.arange(4), (m, 1)))
    assert_array_equal(scores, np.zeros((m, 4), np.float32))


@pytest.mark.parametrize("m", [1, 9, 70])
def test_mask(rng, m, path):
    corpus = frozen(unit(rng, 600, 12))
    queries = unit(rng, m, 12)
    mask = rng.random(600) < 0.3
    ids, scores = exact_topk(queries, corpus, 10, mask=frozen(mask))
    check(queries, corpus, 10, ids, scores, mask)
    few = np.zeros(600, bool)
    few[[5, 77, 599]] = True
    ids, scores = exact_topk(queries, corpus, 10, mask=few)
    assert ids.shape == (m, 3)
    assert set(ids[0].tolist()) == {5, 77, 599}
    check(queries, corpus, 10, ids, scores, few)
    ids, scores = exact_topk(queries, corpus, 10, mask=np.zeros(600, bool))
    assert ids.shape == scores.shape == (m, 0)
    assert ids.dtype == np.int64 and scores.dtype == np.float32
    ids_all, _ = exact_topk(queries, corpus, 10, mask=np.ones(600, bool))
    assert_array_equal(ids_all, exact_topk(queries, corpus, 10)[0])


def test_empty_inputs(rng):
    corpus = unit(rng, 10, 4)
    ids, scores = exact_topk(np.empty((0, 4), np.float32), corpus, 3)
    assert ids.shape == scores.shape == (0, 3)
    ids, scores = exact_topk(unit(rng, 2, 4), np.empty((0, 4), np.float32), 3)
    assert ids.shape == scores.shape == (2, 0)


# --- input handling ----------------------------------------------------------


def test_read_only_inputs_are_untouched(rng, path):
    corpus = frozen(unit(rng, 300, 10))
    queries = frozen(unit(rng, 6, 10))
    mask = frozen(rng.random(300) < 0.5)
    before = (corpus.copy(), queries.copy(), mask.copy())
    ids, scores = exact_topk(queries, corpus, 5, mask=mask)
    check(queries, corpus, 5, ids, scores, mask)
    for a, b in zip((corpus, queries, mask), before, strict=False):
        assert_array_equal(a, b)


def test_queries_are_coerced(rng):
    corpus = unit(rng, 200, 16)
    wide = unit(rng, 5, 32)
    strided = wide[:, ::2]  # not contiguous
    assert not strided.flags.c_contiguous
    ids, scores = exact_topk(strided, corpus, 7)
    check(np.ascontiguousarray(strided), corpus, 7, ids, scores)
    ids64, _ = exact_topk(strided.astype(np.float64), corpus, 7)
    assert_array_equal(ids64, ids)
    ids_f, _ = exact_topk(np.asfortranarray(strided), corpus, 7)
    assert_array_equal(ids_f, ids)
    ids_list, _ = exact_topk(strided.tolist(), corpus, 7)
    assert_array_equal(ids_list, ids)


@pytest.mark.parametrize(
    "corpus",
    [
        np.zeros((10, 4), np.float64),
        np.zeros((10, 8), np.float32)[:, ::2],
        np.asfortranarray(np.zeros((10, 4), np.float32)),
        np.zeros(40, np.float32),
        np.zeros((10, 0), np.float32),
        [[0.0] * 4] * 10,
    ],
    ids=["float64", "strided", "fortran", "1-D", "d=0", "list"],
)
def test_bad_corpus_raises(corpus):
    with pytest.raises(ConfigError):
        exact_topk(np.zeros((1, 4), np.float32), corpus, 3)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_query_raises(rng, bad):
    queries = unit(rng, 3, 4)
    queries[1, 2] = bad
    with pytest.raises(ConfigError, match="NaN or infinity"):
        exact_topk(queries, unit(rng, 10, 4), 3)


def test_float64_overflow_query_raises(rng):
    with pytest.raises(ConfigError):
        exact_topk(np.full((1, 4), 1e300), unit(rng, 10, 4), 3)


@pytest.mark.parametrize(
    "queries",
    [np.zeros(4, np.float32), np.zeros((2, 5), np.float32), np.zeros((2, 4), np.complex64)],
    ids=["1-D", "dim-mismatch", "complex"],
)
def test_bad_queries_raise(rng, queries):
    with pytest.raises(ConfigError):
        exact_topk(queries, unit(rng, 10, 4), 3)


@pytest.mark.parametrize("k", [True, False, 0, -1, 2.5, "3", None])
def test_bad_k_raises(rng, k):
    with pytest.raises(ConfigError):
        exact_topk(unit(rng, 1, 4), unit(rng, 10, 4), k)


def test_numpy_integer_k(rng):
    ids, _ = exact_topk(unit(rng, 1, 4), unit(rng, 10, 4), np.int64(3))
    assert ids.shape == (1, 3)


@pytest.mark.parametrize(
    "mask",
    [np.ones(9, bool), np.ones(10, np.uint8), np.ones((10, 1), bool), [True] * 10],
    ids=["length", "dtype", "2-D", "list"],
)
def test_bad_mask_raises(rng, mask):
    if isinstance(mask, list):  # a list of bools is accepted
        ids, _ = exact_topk(unit(rng, 1, 4), unit(rng, 10, 4), 3, mask=mask)
        assert ids.shape == (1, 3)
        return
    with pytest.raises(ConfigError):
        exact_topk(unit(rng, 1, 4), unit(rng, 10, 4), 3, mask=mask)


@pytest.mark.parametrize("threads", [0, -1, True, 1.5, 10**6])
def test_bad_threads_raise(rng, threads):
    with pytest.raises(ConfigError):
        exact_topk(unit(rng, 1, 4), unit(rng, 10, 4), 3, threads=threads)


# --- determinism ------------------------------------------------------------


@TWO_THREADS
@pytest.mark.parametrize("m", [1, 3, 20, 90])
def test_deterministic_across_calls_and_threads(rng, m, monkeypatch):
    monkeypatch.setattr(exact, "_BLAS_BUFFER_BYTES", 64 << 10)  # several blocks
    corpus = frozen(unit(rng, 9000 if not JIT_DISABLED else 900, 24))
    queries = unit(rng, m, 24)
    first = exact_topk(queries, corpus, 10, threads=1)
    for threads in (1, 2, 2, 1):
        ids, scores = exact_topk(queries, corpus, 10, threads=threads)
        assert_array_equal(ids, first[0])
        assert_array_equal(scores, first[1])


# --- merge_topk ----------------------------------------------------------------


def random_candidates(rng, m, a, pad_share=0.3):
    ids = rng.permutation(10 * a)[:a].astype(np.int64)
    ids = np.tile(ids, (m, 1))
    for row in ids:
        rng.shuffle(row)
    scores = rng.integers(-3, 4, size=(m, a)).astype(np.float32) / 4  # many ties
    pad = rng.random((m, a)) < pad_share
    ids[pad] = -1
    scores[pad] = -np.inf
    return ids, scores


@pytest.mark.parametrize(("m", "a", "k"), [(1, 1, 1), (4, 10, 3), (7, 25, 25), (3, 8, 20)])
def test_merge_matches_reference(rng, m, a, k):
    ids, scores = random_candidates(rng, m, a)
    got_ids, got_scores = merge_topk(ids, scores, k)
    ref_ids, ref_scores = naive.merge_topk(ids, scores, k)
    assert got_ids.shape == (m, min(k, a))
    assert_array_equal(got_ids, ref_ids)
    assert_array_equal(got_scores, ref_scores)
    kern_ids, kern_scores = kernels.merge_topk(ids, scores, k)
    assert_array_equal(kern_ids, ref_ids)
    assert_array_equal(kern_scores, ref_scores)


def test_merge_padding_sorts_last_even_against_minus_inf():
    ids = np.array([[-1, 7, -1, 3]], np.int64)
    scores = np.array([[5.0, -np.inf, 9.0, -np.inf]], np.float32)
    got_ids, got_scores = merge_topk(ids, scores, 4)
    assert_array_equal(got_ids, [[3, 7, -1, -1]])
    assert_array_equal(got_scores, [[-np.inf, -np.inf, -np.inf, -np.inf]])


def test_merge_of_segments_equals_whole(rng):
    corpus = unit(rng, 900, 16)
    queries = unit(rng, 6, 16)
    parts = []
    for lo, hi in ((0, 250), (250, 251), (251, 900)):
        ids, scores = exact_topk(queries, corpus[lo:hi], 10)
        pad = 10 - ids.shape[1]
        ids = np.pad(ids + lo, ((0, 0), (0, pad)), constant_values=-1)
        scores = np.pad(scores, ((0, 0), (0, pad)), constant_values=-np.inf)
        parts.append((ids, scores))
    ids, scores = merge_topk(
        np.concatenate([p[0] for p in parts], axis=1),
        np.concatenate([p[1] for p in parts], axis=1),
        10,
    )
    whole_ids, whole_scores = exact_topk(queries, corpus, 10)
    assert_array_equal(ids, whole_ids)
    assert_array_equal(scores, whole_scores)


def test_merge_validation():
    ids = np.zeros((2, 3), np.int64)
    scores = np.zeros((2, 3), np.float32)
    with pytest.raises(ConfigError):
        merge_topk(ids, scores[:, :2], 2)
    with pytest.raises(ConfigError):
        merge_topk(ids.astype(np.float32), scores, 2)
    with pytest.raises(ConfigError):
        merge_topk(ids, np.full((2, 3), np.nan, np.float32), 2)
    with pytest.raises(ConfigError):
        merge_topk(ids, scores, 0)
    got_ids, _ = merge_topk(frozen(ids), frozen(scores), 2)
    assert_array_equal(got_ids, [[0, 0], [0, 0]])


# --- properties --------------------------------------------------------------


@st.composite
def problems(draw):
    n = draw(st.integers(1, 120))
    d = draw(st.integers(1, 12))
    m = draw(st.integers(1, 20))
    k = draw(st.integers(1, 130))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()):  # small integers: exact scores, real ties
        corpus = rng.integers(-2, 3, size=(n, d)).astype(np.float32)
        queries = rng.integers(-2, 3, size=(m, d)).astype(np.float32)
    else:
        corpus = unit(rng, n, d)
        queries = unit(rng, m, d)
    mask = None
    if draw(st.booleans()):
        mask = rng.random(n) < draw(st.floats(0.0, 1.0))
    return corpus, queries, k, mask


@settings(max_examples=60, deadline=None)
@given(problem=problems(), blas=st.booleans())
def test_property_matches_reference(problem, blas):
    corpus, queries, k, mask = problem
    saved = exact.BLAS_MIN_BATCH
    exact.BLAS_MIN_BATCH = 1 if blas else 10**9
    try:
        ids, scores = exact_topk(queries, corpus, k, mask=mask)
    finally:
        exact.BLAS_MIN_BATCH = saved
    check(queries, corpus, k, ids, scores, mask)


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 6),
    a=st.integers(1, 30),
    k=st.integers(1, 35),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_merge(m, a, k, seed):
    ids, scores = random_candidates(np.random.default_rng(seed), m, a)
    got = merge_topk(ids, scores, k)
    ref = naive.merge_topk(ids, scores, k)
    assert_array_equal(got[0], ref[0])
    assert_array_equal(got[1], ref[1])


# --- compilation ---------------------------------------------------------------


@pytest.mark.skipif(JIT_DISABLED, reason="no signatures without the JIT")
def test_warmup_covers_every_signature(rng):
    kernels.warmup()
    counts = {
        f: len(f.signatures)
        for f in (
            kernels.scan_topk,
            kernels.select_block,
            kernels.merge_topk,
            kernels.init_heaps,
            kernels.finalize_heaps,
        )
    }
    corpus = unit(rng, 300, 8)
    for c in (corpus, frozen(corpus)):
        for q in (unit(rng, 3, 8), frozen(unit(rng, 70, 8)), unit(rng, 12, 8)):
            for mask in (None, rng.random(300) < 0.5, frozen(rng.random(300) < 0.5)):
                exact_topk(q, c, 5, mask=mask)
    assert {f: len(f.signatures) for f in counts} == counts
    assert counts[kernels.scan_topk] == 1  # the corpus always arrives as a read-only view
    assert counts[kernels.select_block] == 1


def test_concurrent_blas_calls_agree_and_restore_blas_threads(rng):
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    corpus = frozen(unit(rng, 3000, 32))
    batches = [unit(rng, 64, 32) for _ in range(8)]
    expected = [exact_topk(q, corpus, 5, threads=1) for q in batches]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda q: exact_topk(q, corpus, 5), batches * 3))
    for (ids, scores), (e_ids, e_scores) in zip(got, expected * 3, strict=False):
        assert_array_equal(ids, e_ids)
        assert_allclose(scores, e_scores, rtol=RTOL, atol=ATOL)
    assert blas_threads() == before
