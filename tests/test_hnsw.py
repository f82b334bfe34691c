from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from fastrag.datasets.synthetic import random_unit_vectors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import topk as naive
from numpy.testing import assert_allclose, assert_array_equal

from fastrag._threads import max_threads
from fastrag.errors import ConfigError, SearchIndexError
from fastrag.index import hnsw as hnsw_mod
from fastrag.index.hnsw import (
    HnswConfig,
    HnswIndex,
    auto_choice,
    exact_over_rows,
    filter_strategy,
    recall_at_k,
)

N, DIM, CLUSTERS, NQ, K = 8000, 48, 100, 100, 10


def split_data(
    n: int = N, dim: int = DIM, nq: int = NQ, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Corpus and held-out queries from one Gaussian mixture."""
    v = random_unit_vectors(n + nq, dim, seed=seed, clusters=CLUSTERS)
    return v[:n], np.ascontiguousarray(v[n:])


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    corpus, queries = split_data()
    corpus.flags.writeable = False
    return corpus, queries


@pytest.fixture(scope="module")
def index(data: tuple[np.ndarray, np.ndarray]) -> HnswIndex:
    """Built once, on one thread (a deterministic graph); tests that mutate build their own."""
    return HnswIndex.build(data[0], np.arange(N), threads=1)


@pytest.fixture(scope="module")
def truth(data: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return naive.exact_topk(data[1], data[0], K)[0]


def check_result(
    labels: np.ndarray,
    scores: np.ndarray,
    queries: np.ndarray,
    vectors_by_label: np.ndarray,
    allowed: np.ndarray,
    k: int,
) -> None:
    """Shapes, dtypes, allowed labels only, no duplicates, true scores, best first."""
    kk = min(k, int(allowed.sum()))
    assert labels.shape == scores.shape == (queries.shape[0], kk)
    assert labels.dtype == np.int64 and scores.dtype == np.float32
    if kk == 0:
        return
    assert allowed[labels].all()
    for row in labels:
        assert np.unique(row).size == kk
    want = np.einsum("md,mkd->mk", queries, vectors_by_label[labels])
    assert_allclose(scores, want, rtol=1e-5, atol=1e-5)
    assert (np.diff(scores, axis=1) <= 1e-6).all()


# -- config ---------------------------------------------------------------


def test_config_defaults_and_round_trip():
    c = HnswConfig()
    assert (c.M, c.ef_construction, c.ef_search, c.random_seed) == (16, 200, 64, 100)
    d = HnswConfig(M=8, ef_construction=50, ef_search=20, random_seed=np.int64(3)).to_dict()
    assert d == {"M": 8, "ef_construction": 50, "ef_search": 20, "random_seed": 3}
    assert type(d["random_seed"]) is int
    assert HnswConfig.from_dict(d) == HnswConfig(
        M=8, ef_construction=50, ef_search=20, random_seed=3
    )
    assert HnswConfig.from_dict({}) == HnswConfig()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"M": 1},
        {"M": 16.0},
        {"M": True},
        {"M": 5000},
        {"ef_construction": 0},
        {"ef_search": 0},
        {"ef_search": "64"},
        {"random_seed": -1},
    ],
)
def test_config_rejects_bad_values(kwargs):
    with pytest.raises(ConfigError):
        HnswConfig(**kwargs)


def test_config_from_dict_rejects_unknown_keys():
    with pytest.raises(ConfigError, match="unknown"):
        HnswConfig.from_dict({"M": 16, "efSearch": 10})
    with pytest.raises(ConfigError):
        HnswConfig.from_dict([("M", 16)])


# -- recall and scores ----------------------------------------------------


def test_recall_at_default_params(index, data, truth):
    corpus, queries = data
    labels, scores = index.search(queries, K)
    assert recall_at_k(labels, truth) >= 0.95
    check_result(labels, scores, queries, corpus, np.ones(N, bool), K)


def test_batch_and_single_queries_agree(index, data):
    corpus, queries = data
    labels, scores = index.search(queries[:20], K, threads=max_threads())
    for i in range(20):
        li, si = index.search(queries[i : i + 1], K, threads=1)
        assert_array_equal(li[0], labels[i])
        assert_array_equal(si[0], scores[i])


def test_k_larger_than_index_and_ef(index, data):
    corpus, queries = data
    small = HnswIndex.build(corpus[:30], np.arange(30))
    labels, scores = small.search(queries[:3], 50)
    assert labels.shape == (3, 30)
    for row in labels:
        assert sorted(row) == list(range(30))
    # default ef (64) below k is raised to k; an explicit ef below k is an error
    labels, _ = index.search(queries[:2], 100)
    assert labels.shape == (2, 100)
    with pytest.raises(ConfigError, match="ef must be >= k"):
        index.search(queries[:2], 100, ef=50)
    labels, _ = index.search(queries[:2], 5, ef=5)
    assert labels.shape == (2, 5)


def test_set_ef_changes_default(data):
    corpus, queries = data
    idx = HnswIndex.build(corpus[:2000], np.arange(2000))
    assert idx.ef == 64
    idx.set_ef(10)
    assert idx.ef == 10
    with pytest.raises(ConfigError):
        idx.set_ef(0)
    idx.search(queries[:3], 10)


def test_readonly_memmap_vectors_are_accepted(tmp_path, data):
    corpus = data[0][:1000]
    path = tmp_path / "v.f32"
    corpus.tofile(path)
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=corpus.shape)
    idx = HnswIndex.build(mm, np.arange(1000))
    labels, _ = idx.search(corpus[:5], 1)
    assert_array_equal(labels[:, 0], np.arange(5))


# -- persistence ----------------------------------------------------------


def test_save_load_round_trip(tmp_path, index, data):
    corpus, queries = data
    path = tmp_path / "hnsw.bin"
    info = index.save(path)
    assert info["bytes"] == path.stat().st_size
    assert len(info["sha256"]) == 64
    assert os.listdir(tmp_path) == ["hnsw.bin"]  # no temporary file left behind
    loaded = HnswIndex.load(path, DIM, HnswConfig(), sha256=info["sha256"])
    assert len(loaded) == N and loaded.config == index.config
    a = index.search(queries, K)
    b = loaded.search(queries, K)  # the mapped file, searched by fastrag's kernel
    assert_array_equal(a[0], b[0])
    assert_allclose(a[1], b[1], rtol=1e-6)  # dot products summed in another order
    # the loaded index still grows
    loaded.add(queries[:5], np.arange(N, N + 5))
    assert len(loaded) == N + 5
    assert_array_equal(loaded.search(queries[:5], 1)[0][:, 0], np.arange(N, N + 5))


def test_empty_index_saves_and_loads(tmp_path):
    idx = HnswIndex.build(np.empty((0, 8), np.float32), np.empty(0, np.int64))
    q = np.eye(8, dtype=np.float32)[:2]
    labels, scores = idx.search(q, 3)
    assert labels.shape == scores.shape == (2, 0)
    idx.save(tmp_path / "e.bin")
    loaded = HnswIndex.load(tmp_path / "e.bin", 8)
    assert len(loaded) == 0
    loaded.add(q, [7, 9])
    assert_array_equal(loaded.search(q[:1], 5)[0], [[7, 9]])


@pytest.fixture(scope="module")
def saved(tmp_path_factory, data) -> Path:
    corpus = data[0][:3000]
    path = tmp_path_factory.mktemp("saved") / "hnsw.bin"
    HnswIndex.build(corpus, np.arange(3000)).save(path)
    return path


def test_load_missing_file(tmp_path):
    missing = tmp_path / "nope.bin"
    with pytest.raises(SearchIndexError, match="nope.bin"):
        HnswIndex.load(missing, DIM)


@pytest.mark.parametrize("cut", [0, 10, 95, 96, 5000, -1, -100])
def test_load_truncated_file(tmp_path, saved, cut):
    blob = saved.read_bytes()
    bad = tmp_path / "cut.bin"
    bad.write_bytes(blob[:cut] if cut >= 0 else blob[: len(blob) + cut])
    with pytest.raises(SearchIndexError, match="cut.bin"):
        HnswIndex.load(bad, DIM)


def test_load_garbage_and_corrupt_links(tmp_path, saved):
    blob = bytearray(saved.read_bytes())
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(np.random.default_rng(0).bytes(len(blob)))
    with pytest.raises(SearchIndexError, match="garbage.bin"):
        HnswIndex.load(garbage, DIM)
    # A base-layer link pointing past the last element would crash hnswlib.
    per_elem = int.from_bytes(blob[24:32], "little")
    off = 96 + 7 * per_elem + 4  # element 7, first neighbour slot
    blob[off : off + 4] = (10**9).to_bytes(4, "little")
    links = tmp_path / "links.bin"
    links.write_bytes(bytes(blob))
    with pytest.raises(SearchIndexError, match="links.bin"):
        HnswIndex.load(links, DIM)


def test_load_checks_dim_config_and_checksum(tmp_path, saved):
    with pytest.raises(SearchIndexError, match="dim=32"):
        HnswIndex.load(saved, 32)
    with pytest.raises(SearchIndexError, match="M=8"):
        HnswIndex.load(saved, DIM, HnswConfig(M=8))
    blob = bytearray(saved.read_bytes())
    blob[-3] ^= 0xFF  # an upper-layer link: only the checksum notices
    flipped = tmp_path / "flipped.bin"
    flipped.write_bytes(bytes(blob))
    good = HnswIndex.load(saved, DIM)
    assert len(good) == 3000
    with pytest.raises(SearchIndexError, match="flipped.bin.*SHA-256"):
        HnswIndex.load(flipped, DIM, sha256="0" * 64)


def test_save_error_names_file(index, tmp_path):
    with pytest.raises(SearchIndexError, match="missing-dir"):
        index.save(tmp_path / "missing-dir" / "hnsw.bin")


# -- adds and deletes -----------------------------------------------------


def test_add_grows_and_delete_hides(tmp_path, data):
    corpus, queries = data
    idx = HnswIndex.build(corpus[:3000], np.arange(3000), threads=1)
    cap = idx.max_elements
    idx.add(corpus[3000:5000], np.arange(3000, 5000), threads=1)
    idx.add(corpus[5000:N], np.arange(5000, N), threads=1)
    assert len(idx) == N and idx.max_elements >= N > cap
    labels, _ = idx.search(queries, K)
    assert recall_at_k(labels, naive.exact_topk(queries, corpus, K)[0]) >= 0.95

    dead = np.random.default_rng(1).choice(N, size=N * 3 // 10, replace=False)
    assert idx.mark_deleted(dead) == dead.size
    assert idx.mark_deleted(dead[:10]) == 0  # idempotent
    assert idx.mark_deleted([N + 100, -1]) == 0  # unknown labels are ignored
    assert len(idx) == N - dead.size and idx.n_deleted == dead.size
    assert int(dead[0]) not in idx and int(np.setdiff1d(np.arange(N), dead)[0]) in idx
    alive = np.ones(N, bool)
    alive[dead] = False
    labels, scores = idx.search(queries, K)
    check_result(labels, scores, queries, corpus, alive, K)
    assert recall_at_k(labels, naive.exact_topk(queries, corpus, K, alive)[0]) >= 0.95

    # chunk ids are never reused: re-adding a deleted (or live) label is an error
    with pytest.raises(ConfigError, match="already"):
        idx.add(corpus[:1], [int(dead[0])])
    with pytest.raises(ConfigError, match="already"):
        idx.add(corpus[:1], [int(np.flatnonzero(alive)[0])])

    # deletions survive save/load
    idx.save(tmp_path / "d.bin")
    loaded = HnswIndex.load(tmp_path / "d.bin", DIM)
    assert len(loaded) == N - dead.size and loaded.n_deleted == dead.size
    labels, scores = loaded.search(queries, K)
    check_result(labels, scores, queries, corpus, alive, K)
    assert_array_equal(loaded.labels(), np.flatnonzero(alive))


def test_delete_everything(data):
    corpus, queries = data
    idx = HnswIndex.build(corpus[:50], np.arange(50))
    idx.mark_deleted(np.arange(50))
    labels, scores = idx.search(queries[:4], K)
    assert labels.shape == scores.shape == (4, 0)


def test_sparse_labels(data):
    corpus, queries = data
    labels = np.arange(500) * 7 + 3
    idx = HnswIndex.build(corpus[:500], labels)
    assert idx.label_bound == labels[-1] + 1
    found, _ = idx.search(corpus[:5], 1)
    assert_array_equal(found[:, 0], labels[:5])
    by_label = np.zeros((idx.label_bound, DIM), np.float32)
    by_label[labels] = corpus[:500]
    eligible = np.zeros(idx.label_bound, bool)
    eligible[labels[::3]] = True
    got = idx.search(queries[:5], K, eligible=eligible, allow_exact=False)
    check_result(*got, queries[:5], by_label, eligible, K)


# -- filters --------------------------------------------------------------


def test_filter_strategy_rule():
    assert filter_strategy(100_000, 100_000, 10, 1) == "hnsw"
    assert filter_strategy(100_000, 3, 10, 1) == "exact"
    assert filter_strategy(100_000, 10, 10, 1000) == "exact"
    # the measured crossovers at n=100k, k=10 (see the constants' comment)
    assert filter_strategy(100_000, 2_000, 10, 1) == "exact"
    assert filter_strategy(100_000, 5_000, 10, 1) == "oversample"
    assert filter_strategy(100_000, 10_000, 10, 64) == "exact"
    assert filter_strategy(100_000, 20_000, 10, 64) == "oversample"
    assert filter_strategy(100_000, 50_000, 10, 1) == "oversample"
    # monotone: fewer eligible or more queries never moves exact -> oversample
    for n_e in (10, 100, 1_000, 10_000, 99_999):
        for m in (1, 8, 64, 1024):
            if filter_strategy(100_000, n_e, 10, m) == "exact":
                assert filter_strategy(100_000, n_e // 2, 10, m) == "exact"
                assert filter_strategy(100_000, n_e, 10, 2 * m) == "exact"


def test_exact_over_rows(data):
    corpus, queries = data
    rows = np.arange(3, N, 11)
    ids, scores = exact_over_rows(queries[:5], corpus, rows, K)
    mask = np.zeros(N, bool)
    mask[rows] = True
    want_ids, want_scores = naive.exact_topk(queries[:5], corpus, K, mask)
    assert_array_equal(ids, want_ids)
    assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError):
        exact_over_rows(queries[:5], corpus, rows.astype(float), K)


def test_exact_plan_returns_none(index, data):
    queries = data[1]
    eligible = np.zeros(N, bool)
    eligible[:5] = True
    assert index.plan(K, 1, eligible) == "exact"
    assert index.search(queries[:3], K, eligible=eligible) is None
    labels, _ = index.search(queries[:3], K, eligible=eligible, allow_exact=False)
    assert labels.shape == (3, 5)
    assert index.plan(K) == "hnsw"


@pytest.mark.parametrize("strategy", [None, "oversample", "filter"])
def test_filtered_recall_and_no_starvation(index, data, strategy):
    corpus, queries = data
    rng = np.random.default_rng(5)
    for n_e in (4000, 800, 60, 10, 7):
        eligible = np.zeros(N, bool)
        eligible[rng.choice(N, n_e, replace=False)] = True
        got = index.search(queries, K, eligible=eligible, strategy=strategy, allow_exact=False)
        check_result(*got, queries, corpus, eligible, K)
        truth = naive.exact_topk(queries, corpus, K, eligible)[0]
        assert recall_at_k(got[0], truth) >= 0.9, (strategy, n_e)


def test_correlated_filter_does_not_starve(index, data):
    """Eligible rows far from the queries: oversampling must fall back, never starve."""
    corpus, queries = data
    far = np.argsort(corpus @ queries[0])[:300]  # the rows least like query 0
    eligible = np.zeros(N, bool)
    eligible[far] = True
    for strategy in ("oversample", "filter"):
        got = index.search(queries[:1], K, eligible=eligible, strategy=strategy, allow_exact=False)
        check_result(*got, queries[:1], corpus, eligible, K)


def test_eligible_checked(index, data):
    q = data[1][:2]
    with pytest.raises(ConfigError, match="bool"):
        index.search(q, K, eligible=np.ones(N, np.uint8))
    with pytest.raises(ConfigError, match="largest label"):
        index.search(q, K, eligible=np.ones(N - 1, bool))
    with pytest.raises(ConfigError, match="strategy"):
        index.search(q, K, eligible=np.ones(N, bool), strategy="magic")
    labels, _ = index.search(q, K, eligible=np.zeros(N + 10, bool))
    assert labels.shape == (2, 0)
    a = index.search(q, K, eligible=np.ones(N + 10, bool))
    b = index.search(q, K)
    assert_array_equal(a[0], b[0])


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    selectivity=st.sampled_from([0.0, 1e-4, 5e-4, 1e-3, 0.003, 0.01, 0.05, 0.2, 0.6, 1.0]),
    k=st.integers(1, 20),
    m=st.integers(1, 4),
    strategy=st.sampled_from([None, "oversample", "filter"]),
)
def test_filter_property(index, data, seed, selectivity, k, m, strategy):
    corpus, queries = data
    rng = np.random.default_rng(seed)
    eligible = rng.random(N) < selectivity
    q = queries[rng.choice(NQ, m, replace=False)]
    got = index.search(q, k, eligible=eligible, strategy=strategy, allow_exact=False)
    check_result(*got, q, corpus, eligible, k)
    plan = index.search(q, k, eligible=eligible)
    if plan is not None:
        check_result(*plan, q, corpus, eligible, k)
    else:
        assert filter_strategy(N, int(eligible.sum()), k, m) == "exact"


# -- errors ---------------------------------------------------------------


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3"])
def test_bad_k(index, data, k):
    with pytest.raises(ConfigError):
        index.search(data[1][:1], k)


def test_bad_queries_and_threads(index, data):
    q = data[1][:2]
    with pytest.raises(ConfigError, match="dimension"):
        index.search(np.ones((1, DIM + 1), np.float32), K)
    with pytest.raises(ConfigError, match="2-D"):
        index.search(q[0], K)
    bad = q.copy()
    bad[1, 3] = np.nan
    with pytest.raises(ConfigError, match="NaN"):
        index.search(bad, K)
    bad[1, 3] = np.inf
    with pytest.raises(ConfigError, match="NaN"):
        index.search(bad, K)
    with pytest.raises(ConfigError, match="threads"):
        index.search(q, K, threads=0)
    with pytest.raises(ConfigError, match="ef"):
        index.search(q, K, ef=0)
    # float64 and lists are converted
    assert_array_equal(index.search(q.astype(np.float64), K)[0], index.search(q.tolist(), K)[0])


def test_bad_build_inputs(data):
    corpus = data[0][:100]
    with pytest.raises(ConfigError, match="unique"):
        HnswIndex.build(corpus, np.zeros(100, np.int64))
    with pytest.raises(ConfigError, match="non-negative"):
        HnswIndex.build(corpus, np.arange(100) - 1)
    with pytest.raises(ConfigError, match="shape"):
        HnswIndex.build(corpus, np.arange(99))
    with pytest.raises(ConfigError, match="integers"):
        HnswIndex.build(corpus, np.arange(100.0))
    with pytest.raises(ConfigError, match="normalised"):
        HnswIndex.build(corpus * 2, np.arange(100))
    with pytest.raises(ConfigError, match="2-D"):
        HnswIndex.build(corpus[0], np.arange(1))
    with pytest.raises(ConfigError, match="config"):
        HnswIndex.build(corpus, np.arange(100), {"M": 16})
    nan = corpus.copy()
    nan[3, 0] = np.nan
    with pytest.raises(ConfigError, match="NaN"):
        HnswIndex.build(nan, np.arange(100))
    idx = HnswIndex.build(corpus, np.arange(100))
    with pytest.raises(ConfigError, match="dimension"):
        idx.add(np.ones((1, DIM + 1), np.float32), [100])
    zero = np.zeros((1, DIM), np.float32)  # an empty text embeds to zeros: allowed
    idx.add(zero, [100])
    assert 100 in idx


def test_hnswlib_errors_are_mapped(index, data):
    class Broken:
        def knn_query(self, *args, **kwargs):
            raise RuntimeError("Cannot return the results in a contiguous 2D array")

        def set_ef(self, ef):
            pass

    idx = HnswIndex.build(data[0][:100], np.arange(100))
    idx._index = Broken()
    idx._lock = hnsw_mod.EfLock(idx._index.set_ef)
    with pytest.raises(SearchIndexError, match="contiguous") as info:
        idx.search(data[1][:1], K)
    assert isinstance(info.value.__cause__, RuntimeError)


# -- determinism, concurrency, auto ---------------------------------------


def test_single_thread_build_is_deterministic(tmp_path, data):
    corpus, queries = data
    a = HnswIndex.build(corpus[:3000], np.arange(3000), threads=1)
    b = HnswIndex.build(corpus[:3000], np.arange(3000), threads=1)
    ra, rb = a.search(queries, K), b.search(queries, K)
    assert_array_equal(ra[0], rb[0])
    assert_array_equal(ra[1], rb[1])
    assert a.save(tmp_path / "a.bin")["sha256"] == b.save(tmp_path / "b.bin")["sha256"]
    c = HnswIndex.build(corpus[:3000], np.arange(3000), HnswConfig(random_seed=7), threads=1)
    assert c.save(tmp_path / "c.bin")["sha256"] != a.save(tmp_path / "a.bin")["sha256"]


def test_concurrent_searches_with_writes(data):
    corpus, queries = data
    idx = HnswIndex.build(corpus[:2000], np.arange(2000))
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader(ef: int) -> None:
        try:
            while not stop.is_set():
                labels, scores = idx.search(queries[:8], K, ef=ef, threads=1)
                assert labels.shape == (8, K)
                assert (labels >= 0).all() and (labels < N).all()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(ef,)) for ef in (10, 10, 40, 80)]
    for t in threads:
        t.start()
    try:
        for lo in range(2000, 4000, 500):
            idx.add(corpus[lo : lo + 500], np.arange(lo, lo + 500), threads=1)
            idx.mark_deleted(np.arange(lo - 2000, lo - 1900))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert len(idx) == 4000 - 400


def test_recall_at_k_helper():
    assert recall_at_k(np.array([[1, 2, 3]]), np.array([[3, 2, 1]])) == 1.0
    assert recall_at_k(np.array([[1, 9, -1]]), np.array([[1, 2, -1]])) == 0.5
    assert recall_at_k(np.zeros((1, 0), int), np.full((1, 2), -1)) == 1.0
    with pytest.raises(ConfigError):
        recall_at_k(np.zeros((2, 3)), np.zeros((3, 3)))


def test_auto_choice(monkeypatch, index, data):
    corpus = data[0]
    assert auto_choice(corpus[:100], np.arange(100)) == (False, 1.0)
    monkeypatch.setattr(hnsw_mod, "AUTO_MIN_ROWS", 1000)
    use, recall = auto_choice(corpus, np.arange(N), sample=200, index=index)
    assert use and recall >= 0.95
    poor = HnswIndex.build(
        corpus[:3000], np.arange(3000), HnswConfig(M=4, ef_construction=8, ef_search=1), threads=1
    )
    use, recall = auto_choice(
        corpus[:3000],
        np.arange(3000),
        HnswConfig(M=4, ef_construction=8, ef_search=1),
        sample=200,
        index=poor,
    )
    assert not use and recall < 0.95


def test_unreachable_rows_fall_back(data):
    """A graph too poor to return k results: oversampling and the callback still fill every row."""
    corpus, queries = data
    idx = HnswIndex.build(
        corpus[:3000], np.arange(3000), HnswConfig(M=2, ef_construction=2, ef_search=1), threads=1
    )
    eligible = np.zeros(3000, bool)
    eligible[::7] = True
    for strategy in ("oversample", "filter"):
        got = idx.search(queries[:5], K, eligible=eligible, strategy=strategy)
        check_result(*got, queries[:5], corpus, eligible, K)
    # plain search: answered, retried wider if hnswlib falls short at ef=1
    labels, scores = idx.search(queries[:5], K)
    check_result(labels, scores, queries[:5], corpus, np.ones(3000, bool), K)


# -- the mapped file and background loading -------------------------------


@pytest.fixture(scope="module")
def small_graph(tmp_path_factory, data) -> tuple[Path, np.ndarray]:
    corpus = data[0][:600]
    config = HnswConfig(M=6, ef_construction=40)
    idx = HnswIndex.build(corpus, np.arange(600) * 3 + 1, config, threads=1)
    idx.mark_deleted([4, 31, 100])
    path = tmp_path_factory.mktemp("small") / "hnsw.bin"
    idx.save(path)
    return path, corpus


@pytest.mark.parametrize("ef", [6, 30])
@pytest.mark.parametrize("filtered", [False, True])
def test_mapped_search_matches_reference(small_graph, data, ef, filtered):
    from fastrag._native import hnsw as kernels
    from naive import hnsw as naive

    from fastrag.index.hnsw_mapped import MappedGraph

    path, _ = small_graph
    graph = MappedGraph.open(path, DIM, 6)
    ref = naive.parse(path.read_bytes())
    labels, deleted = graph.labels_and_deleted()
    assert labels.tolist() == ref["labels"] and deleted.tolist() == ref["deleted"]
    allowed = None
    if filtered:
        allowed = np.zeros(labels.max() + 1, bool)
        allowed[::2] = True
    graph.set_ef(ef)
    queries = data[1][:40]
    got_l, got_d = graph.knn_query(queries, 5, 1, allowed)
    same = 0
    for q, gl, gd in zip(queries, got_l, got_d):
        want = naive.search(ref, q, 5, ef, allowed)
        same += gl.tolist() == [lab for _, lab in want]
        assert_allclose(np.sort(gd), [d for d, _ in want][: len(gd)], atol=1e-4)
    assert same >= 38  # float32 sums vs float64: a near-tie may go the other way
    assert set(got_l.ravel().tolist()).isdisjoint({4, 31, 100})
    if filtered:
        assert allowed[got_l].all()
    kernels.warmup()


def test_background_load_and_waiting(tmp_path, index, data, monkeypatch):
    from fastrag.index import hnsw_mapped

    corpus, queries = data
    path = tmp_path / "hnsw.bin"
    index.save(path)
    gate = threading.Event()
    real_open = hnsw_mapped.MappedGraph.open
    monkeypatch.setattr(
        hnsw_mapped.MappedGraph, "open", lambda *a, **kw: gate.wait(30) and real_open(*a, **kw)
    )
    loaded = HnswIndex.load(path, DIM, background=True)
    assert not loaded.ready() and not loaded.wait_ready(0.01)
    assert loaded.search(queries[:3], K) is None  # the caller searches exactly meanwhile
    assert loaded.label_bound == 0 and "loading" in repr(loaded)
    waiter = threading.Thread(target=lambda: loaded.search(queries[:3], K, allow_exact=False))
    waiter.start()
    gate.set()
    waiter.join(30)
    assert loaded.wait_ready(30) and loaded.ready() and len(loaded) == N
    assert_array_equal(loaded.search(queries, K)[0], index.search(queries, K)[0])


def test_background_load_failure_is_reported(tmp_path, saved, data):
    blob = bytearray(saved.read_bytes())
    per_elem = int.from_bytes(blob[24:32], "little")
    blob[96 + 9 * per_elem + 4 : 96 + 9 * per_elem + 8] = (10**9).to_bytes(4, "little")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes(blob))
    loaded = HnswIndex.load(bad, DIM, background=True)  # the header is fine: returns
    with pytest.raises(SearchIndexError, match="bad.bin"):
        loaded.wait_ready(30)
    assert not loaded.ready() and "failed" in repr(loaded)
    assert loaded.search(data[1][:2], K) is None
    with pytest.raises(SearchIndexError, match="bad.bin"):
        loaded.search(data[1][:2], K, allow_exact=False)
    with pytest.raises(SearchIndexError, match="bad.bin"):
        len(loaded)
    with pytest.raises(SearchIndexError, match="past the last element"):
        HnswIndex.load(bad, DIM)


def test_deletions_on_a_mapped_graph_are_saved(tmp_path, saved, data):
    import hnswlib

    queries = data[1][:20]
    original = saved.read_bytes()
    loaded = HnswIndex.load(saved, DIM)
    hits = loaded.search(queries, K)[0]
    victims = np.unique(hits[:, :3])
    assert loaded.mark_deleted(victims) == victims.size and loaded.n_deleted == victims.size
    after = loaded.search(queries, K)[0]
    assert not np.isin(after, victims).any()
    assert saved.read_bytes() == original  # the mapped file is untouched
    loaded.save(tmp_path / "again.bin")
    again = HnswIndex.load(tmp_path / "again.bin", DIM)
    assert again.n_deleted == victims.size and len(again) == 3000 - victims.size
    assert_array_equal(again.search(queries, K)[0], after)
    raw = hnswlib.Index(space="ip", dim=DIM)  # hnswlib reads the file we wrote
    raw.load_index(str(tmp_path / "again.bin"))
    labels, _ = raw.knn_query(queries, K)
    assert not np.isin(labels.astype(np.int64), victims).any()
    # growing hands the graph to hnswlib, deletions included
    again.add(queries[:2], [5000, 5001])
    assert len(again) == 3000 - victims.size + 2
    assert not np.isin(again.search(queries, K)[0], victims).any()
    assert_array_equal(again.search(queries[:2], 1)[0][:, 0], [5000, 5001])
