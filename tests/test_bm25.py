"""BM25Index and its kernels against the reference (tests/naive/bm25.py) and bm25s."""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import examples
from fastrag._native import bm25 as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import bm25 as naive
from numpy.testing import assert_allclose

from fastrag._threads import max_threads
from fastrag.errors import ConfigError, DocumentError, StoreCorruptedError
from fastrag.index.keyword import BM25Index
from fastrag.text.tokenize import Tokenizer

JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")
RTOL, ATOL = 1e-5, 1e-6

TEXTS = [
    "Annual leave requests must be submitted at least 3 working days in advance.",
    "Employees receive 15 days of paid annual leave per year.",
    "Expense reports must be submitted within 15 days with the original receipts.",
    "年假申请需提前3天提交。工作未满五年的员工每年享有15天带薪年假。",
    "",
    "Passwords must be at least 12 characters long and are changed every 180 days.",
    "leave leave leave",
    "!!!",
    "报销单需在15天内提交，并附上原始收据。",
]
QUESTIONS = [
    "how many days of annual leave",
    "年假提前几天申请",
    "password length",
    "nothing matches zzzz",
    "",
    "leave leave days",
    "报销 收据 receipts",
]

WORDS = ["leave", "days", "cat", "dog", "年", "假", "年假", "x", "y", "z", "mat", "on"]
docs_strategy = st.lists(st.lists(st.sampled_from(WORDS), max_size=8), min_size=1, max_size=12)


def token_lists(tok: Tokenizer, texts: list[str]) -> list[list[str]]:
    return tok.token_strings(texts)


def check(index: BM25Index, doc_tokens, query_tokens, k, rows, scores, mask=None) -> None:
    """Compare with the reference: scores to tolerance, rows where scores differ."""
    full = naive.scores(doc_tokens, query_tokens, index.k1, index.b)
    ref_rows, ref_scores = naive.topk(full, k, mask)
    n = len(doc_tokens)
    assert rows.dtype == np.int64 and scores.dtype == np.float32
    assert rows.shape == scores.shape == (len(query_tokens), min(k, n))
    for q in range(len(query_tokens)):
        c = len(ref_rows[q])
        assert (rows[q, c:] == -1).all() and np.isneginf(scores[q, c:]).all()
        got_rows, got_scores = rows[q, :c], scores[q, :c]
        assert_allclose(got_scores, ref_scores[q], rtol=RTOL, atol=ATOL)
        # every returned row carries its own score, is eligible and unique
        assert_allclose(got_scores, full[q, got_rows], rtol=RTOL, atol=ATOL)
        assert len(set(got_rows.tolist())) == c
        if mask is not None:
            assert mask[got_rows].all()
        # best first; ties by lower row
        for a in range(c - 1):
            assert got_scores[a] >= got_scores[a + 1]
            if got_scores[a] == got_scores[a + 1]:
                assert got_rows[a] < got_rows[a + 1]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer()


@pytest.mark.parametrize("k", [1, 3, 100])
@pytest.mark.parametrize("threads", [1, 2])
def test_search_matches_reference(tok, k, threads):
    threads = min(threads, max_threads())
    index = BM25Index.from_texts(TEXTS, tok)
    rows, scores = index.search(QUESTIONS, k, threads=threads)
    check(index, token_lists(tok, TEXTS), token_lists(tok, QUESTIONS), k, rows, scores)
    # one question at a time gives the same
    for q, question in enumerate(QUESTIONS):
        r1, s1 = index.search(question, k)
        assert r1[0].tolist() == rows[q].tolist()
        assert_allclose(s1[0], scores[q])


def test_scores_match_bm25s(tok):
    bm25s = pytest.importorskip("bm25s")
    doc_tokens = token_lists(tok, TEXTS)
    query_tokens = token_lists(tok, QUESTIONS)
    for k1, b in [(0.9, 0.4), (1.2, 0.75), (0.0, 1.0)]:
        index = BM25Index.from_texts(TEXTS, tok, k1=k1, b=b)
        ref = bm25s.BM25(k1=k1, b=b, method="lucene")
        ref.index(doc_tokens, show_progress=False)
        rows, scores = index.search_tokens(query_tokens, len(TEXTS))
        for q, qt in enumerate(query_tokens):
            known = [t for t in qt if t in ref.vocab_dict]
            expected = ref.get_scores(known) if known else np.zeros(len(TEXTS))
            got = np.zeros(len(TEXTS))
            valid = rows[q] >= 0
            got[rows[q][valid]] = scores[q][valid]
            assert_allclose(got, expected, rtol=RTOL, atol=ATOL)


@settings(max_examples=examples(60) if not JIT_DISABLED else 10, deadline=None)
@given(
    docs=docs_strategy,
    queries=st.lists(st.lists(st.sampled_from(WORDS + ["unknown"]), max_size=4), max_size=5),
    k=st.integers(1, 15),
    mask_seed=st.integers(0, 2**32 - 1),
    use_mask=st.booleans(),
)
def test_property_mask_and_reference(docs, queries, k, mask_seed, use_mask):
    tok = Tokenizer(stopwords=None)
    texts = [" ".join(d) for d in docs]
    index = BM25Index.from_tokens(tok.tokenize(texts), tok)
    mask = np.random.default_rng(mask_seed).random(len(docs)) < 0.5 if use_mask else None
    rows, scores = index.search_tokens(queries, k, mask=mask)
    check(index, tok.token_strings(texts), queries, k, rows, scores, mask)


def test_add_equals_fresh_build(tok):
    fresh = BM25Index.from_texts(TEXTS, tok)
    grown = BM25Index.from_texts(TEXTS[:3], tok)
    grown.add_texts(TEXTS[3:5])
    grown.add_texts([])
    grown.add_texts(TEXTS[5:])
    empty_first = BM25Index.from_texts(["", "!!!"], tok)
    empty_first.add_texts(TEXTS)
    for a, b in [(fresh, grown)]:
        for name in range(len(a._state)):
            assert np.array_equal(a._state[name], b._state[name])
        assert a.avgdl == b.avgdl
    assert empty_first.n_rows == len(TEXTS) + 2
    r_fresh, s_fresh = fresh.search(QUESTIONS, 5)
    r_grown, s_grown = grown.search(QUESTIONS, 5)
    assert np.array_equal(r_fresh, r_grown) and np.array_equal(s_fresh, s_grown)
    ref = BM25Index.from_texts(["", "!!!", *TEXTS], tok)
    r1, s1 = empty_first.search(QUESTIONS, 5)
    r2, s2 = ref.search(QUESTIONS, 5)
    assert np.array_equal(r1, r2) and np.array_equal(s1, s2)


@settings(max_examples=examples(30) if not JIT_DISABLED else 5, deadline=None)
@given(docs=docs_strategy, split=st.integers(0, 12), keep_seed=st.integers(0, 2**32 - 1))
def test_property_add_and_compact(docs, split, keep_seed):
    tok = Tokenizer(stopwords=None)
    texts = [" ".join(d) for d in docs]
    split = min(split, len(texts))
    grown = BM25Index.from_texts(texts[:split], tok)
    grown.add_texts(texts[split:])
    fresh = BM25Index.from_texts(texts, tok)
    for i in range(len(fresh._state)):
        assert np.array_equal(grown._state[i], fresh._state[i])
    keep = np.random.default_rng(keep_seed).random(len(texts)) < 0.6
    compacted = fresh.compact(keep)
    kept = BM25Index.from_texts([t for t, k in zip(texts, keep) if k], tok)
    for i in range(len(kept._state)):
        assert np.array_equal(compacted._state[i], kept._state[i])


def test_remove_rows(tok):
    index = BM25Index.from_texts(TEXTS, tok)
    smaller = index.remove_rows([0, 3, 3])
    ref = BM25Index.from_texts([t for i, t in enumerate(TEXTS) if i not in (0, 3)], tok)
    r1, s1 = smaller.search(QUESTIONS, 4)
    r2, s2 = ref.search(QUESTIONS, 4)
    assert np.array_equal(r1, r2) and np.array_equal(s1, s2)
    assert index.n_rows == len(TEXTS)  # unchanged
    with pytest.raises(ConfigError):
        index.remove_rows([len(TEXTS)])


def test_save_load_round_trip(tmp_path, tok):
    index = BM25Index.from_texts(TEXTS, tok, k1=1.1, b=0.6)
    info = index.save(tmp_path / "bm25.arrow")
    assert info["bytes"] == (tmp_path / "bm25.arrow").stat().st_size
    import hashlib

    assert info["sha256"] == hashlib.sha256((tmp_path / "bm25.arrow").read_bytes()).hexdigest()
    assert [p.name for p in tmp_path.iterdir()] == ["bm25.arrow"]  # no temp file left
    loaded = BM25Index.load(tmp_path / "bm25.arrow")
    assert loaded.config() == index.config()
    assert loaded.n_rows == index.n_rows and loaded.avgdl == index.avgdl
    assert not loaded.upgraded
    for i in range(len(index._state)):
        assert np.array_equal(loaded._state[i], index._state[i])
        assert not loaded._state[i].flags.writeable
        assert not loaded._state[i].flags.owndata  # a view of the mapped file
    r1, s1 = index.search(QUESTIONS, 5)
    r2, s2 = loaded.search(QUESTIONS, 5)
    assert np.array_equal(r1, r2) and np.array_equal(s1, s2)
    # a loaded index can grow and be saved again
    loaded.add_texts(["annual leave policy"])
    loaded.save(tmp_path / "bm25.arrow")
    assert BM25Index.load(tmp_path / "bm25.arrow").n_rows == len(TEXTS) + 1


def test_empty_index_round_trip(tmp_path):
    index = BM25Index.from_texts([])
    assert index.n_rows == 0
    rows, scores = index.search(["anything"], 5)
    assert rows.shape == (1, 0) and scores.shape == (1, 0)
    index.save(tmp_path / "e.arrow")
    loaded = BM25Index.load(tmp_path / "e.arrow")
    assert loaded.n_rows == 0
    loaded.add_texts(["cat"])
    assert loaded.search(["cat"], 3)[0].tolist() == [[0]]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "flip_magic", "missing"])
def test_corrupt_file_names_it(tmp_path, tok, damage):
    path = tmp_path / "bm25.arrow"
    BM25Index.from_texts(TEXTS, tok).save(path)
    raw = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not an arrow file at all" * 10)
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "flip_magic":
        path.write_bytes(b"XRROW1" + raw[6:])
    else:
        path.unlink()
    with pytest.raises(StoreCorruptedError, match="bm25.arrow"):
        BM25Index.load(path)


def test_inconsistent_arrays_are_refused(tmp_path, tok):
    import pyarrow as pa

    path = tmp_path / "bm25.arrow"
    BM25Index.from_texts(TEXTS, tok).save(path)
    table = pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all()  # not mapped
    cols = table.columns
    rows_col = cols[2].chunk(0)
    shorter = pa.LargeListArray.from_arrays(
        pa.array([0, len(rows_col.values) - 1], pa.int64()), rows_col.values.slice(1)
    )
    bad = pa.table(cols[:2] + [shorter] + cols[3:], schema=table.schema)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, bad.schema) as w:
        w.write_table(bad)
    with pytest.raises(StoreCorruptedError, match="bm25.arrow"):
        BM25Index.load(path)


def test_zero_match_and_k_beyond_n(tok):
    index = BM25Index.from_texts(TEXTS, tok)
    rows, scores = index.search(["zzzz qqqq", "the and of"], 50)
    assert rows.shape == (2, len(TEXTS))
    assert (rows == -1).all() and np.isneginf(scores).all()
    rows, _ = index.search(["leave"], 50)
    assert sorted(rows[0][rows[0] >= 0].tolist()) == [0, 1, 6]


def test_mask_excludes_rows(tok):
    index = BM25Index.from_texts(TEXTS, tok)
    mask = np.ones(len(TEXTS), dtype=bool)
    mask[6] = False
    rows, _ = index.search(["leave"], 5, mask=mask)
    assert 6 not in rows[0].tolist()
    assert index.search(["leave"], 5, mask=np.zeros(len(TEXTS), bool))[0].max() == -1
    with pytest.raises(ConfigError):
        index.search(["leave"], 5, mask=np.ones(3, bool))
    with pytest.raises(ConfigError):
        index.search(["leave"], 5, mask=np.ones(len(TEXTS), np.int8))


def test_validation(tok):
    index = BM25Index.from_texts(TEXTS, tok)
    for k in [0, -1, 1.5, True, "3"]:
        with pytest.raises(ConfigError):
            index.search(["x"], k)
    for k1, b in [(-1, 0.4), (0.9, 1.5), (float("nan"), 0.4), ("1", 0.4)]:
        with pytest.raises(ConfigError):
            BM25Index(tok, k1=k1, b=b)
    with pytest.raises(ConfigError):
        BM25Index("tokenizer")
    with pytest.raises(DocumentError):
        index.search_tokens("leave", 3)
    with pytest.raises(DocumentError):
        index.search_tokens([[1, 2]], 3)
    with pytest.raises(DocumentError):
        BM25Index.from_texts(["ok", None])


def test_config_and_repr(tok):
    index = BM25Index.from_texts(TEXTS, tok)
    cfg = index.config()
    assert cfg == {"k1": 0.9, "b": 0.4, "tokenizer": tok.config()}
    assert "BM25Index(9 rows" in repr(index)


@pytest.mark.skipif(JIT_DISABLED, reason="large input")
def test_parallel_batch_equals_serial():
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(vocab, rng.integers(1, 30))) for _ in range(3000)]
    queries = [" ".join(rng.choice(vocab, 3)) for _ in range(64)]
    index = BM25Index.from_texts(texts, Tokenizer(stopwords=None))
    r1, s1 = index.search(queries, 20, threads=1)
    r2, s2 = index.search(queries, 20, threads=max_threads())
    assert np.array_equal(r1, r2) and np.array_equal(s1, s2)


def test_warmup_runs():
    kernels.warmup()


# -- pruning: block-max MaxScore against the exhaustive kernel and the reference --

# a skewed vocabulary: a few words in most rows, most words in few
ZIPF_WORDS = ["a"] * 12 + ["b"] * 6 + ["c"] * 4 + ["d"] * 3 + ["e", "e", "f", "g", "h", "i", "j"]
MASKS = ["none", "random", "all", "none_eligible", "one_eligible", "one_masked"]


def make_mask(kind: str, n: int, seed: int) -> np.ndarray | None:
    rng = np.random.default_rng(seed)
    if kind == "none":
        return None
    if kind == "random":
        return rng.random(n) < 0.5
    if kind == "all":
        return np.ones(n, dtype=bool)
    if kind == "none_eligible":
        return np.zeros(n, dtype=bool)
    mask = np.zeros(n, dtype=bool) if kind == "one_eligible" else np.ones(n, dtype=bool)
    mask[int(rng.integers(0, n))] = kind == "one_eligible"
    return mask


def kernel_search(
    index, queries, k, mask, *, block_size, window, method, threads=1, cells=None, cell_shift=5
):
    """The search kernel with block maxima of ``block_size`` and windows of ``window`` rows."""
    st = index._state
    q = index.tokenizer.hash([t for qq in queries for t in qq]) if any(queries) else None
    hashes = q if q is not None else np.zeros(0, np.uint64)
    offsets = np.zeros(len(queries) + 1, dtype=np.int64)
    np.cumsum([len(qq) for qq in queries], out=offsets[1:])
    block_offsets, block_max = kernels.block_maxima(st.term_offsets, st.weights, block_size)
    return kernels.search(
        st.term_offsets, st.rows, st.weights, st.max_weight, block_offsets, block_max, st.vocab,
        hashes, offsets, index.n_rows, min(k, index.n_rows), np.zeros(0, bool) if mask is None
        else mask, threads, block_size=block_size, method=method, window=window, stats=True,
        cells=cells, cell_shift=cell_shift,
    )  # fmt: skip


@settings(max_examples=examples(150) if not JIT_DISABLED else 15, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(ZIPF_WORDS), max_size=10), min_size=1, max_size=60),
    queries=st.lists(
        st.lists(st.sampled_from(ZIPF_WORDS + ["unknown", "zzz"]), max_size=7), max_size=6
    ),
    k=st.integers(1, 25),
    block_size=st.integers(1, 6),
    window=st.integers(1, 24),
    mask_kind=st.sampled_from(MASKS),
    seed=st.integers(0, 2**32 - 1),
    threads=st.sampled_from([1, 2]),
)
def test_property_pruned_equals_exhaustive(
    docs, queries, k, block_size, window, mask_kind, seed, threads
):
    tok = Tokenizer(stopwords=None)
    texts = [" ".join(d) for d in docs]
    index = BM25Index.from_tokens(tok.tokenize(texts), tok)
    mask = make_mask(mask_kind, len(docs), seed)
    threads = min(threads, max_threads())
    opts = {"block_size": block_size, "window": window, "threads": threads}
    r1, s1, st1 = kernel_search(index, queries, k, mask, method="maxscore", **opts)
    r2, s2, st2 = kernel_search(index, queries, k, mask, method="exhaustive", **opts)
    assert np.array_equal(r1, r2)
    assert np.array_equal(s1, s2)  # bit for bit: the same fixed-point sums
    check(index, tok.token_strings(texts), queries, k, r2, s2, mask)
    assert np.array_equal(st1[:, 1], st2[:, 1])  # the postings of the query terms
    assert np.array_equal(st2[:, 0], st2[:, 1])  # the exhaustive kernel reads every posting


@settings(max_examples=examples(150) if not JIT_DISABLED else 15, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(ZIPF_WORDS), max_size=10), min_size=1, max_size=90),
    queries=st.lists(
        st.lists(st.sampled_from(ZIPF_WORDS + ["unknown", "zzz"]), max_size=7), max_size=6
    ),
    k=st.integers(1, 25),
    shift=st.integers(0, 6),
    min_df=st.integers(1, 40),
    mask_kind=st.sampled_from(MASKS),
    seed=st.integers(0, 2**32 - 1),
    threads=st.sampled_from([1, 2]),
)
def test_property_cells_equal_exhaustive_and_reference(
    docs, queries, k, shift, min_df, mask_kind, seed, threads
):
    """The row-cells kernel (any cell width, any long-term cut) returns the exhaustive top k."""
    tok = Tokenizer(stopwords=None)
    texts = [" ".join(d) for d in docs]
    index = BM25Index.from_tokens(tok.tokenize(texts), tok)
    s = index._state
    cells = kernels.cell_maxima(s.term_offsets, s.rows, s.weights, index.n_rows, shift, min_df)
    want = naive.cell_maxima(s.term_offsets, s.rows, s.weights, index.n_rows, shift, min_df)
    assert cells[0].tolist() == want[0] and cells[1].tolist() == want[1]
    pos = naive.cell_positions(s.term_offsets, s.rows, index.n_rows, shift, min_df)
    assert cells[2].tolist() == pos
    mask = make_mask(mask_kind, len(docs), seed)
    opts = {"block_size": 3, "window": 16, "threads": min(threads, max_threads())}
    r1, s1, st1 = kernel_search(
        index, queries, k, mask, method="maxscore", cells=cells, cell_shift=shift, **opts
    )
    r2, s2, _ = kernel_search(index, queries, k, mask, method="exhaustive", **opts)
    assert np.array_equal(r1, r2)
    assert np.array_equal(s1, s2)  # bit for bit: the same fixed-point sums
    check(index, tok.token_strings(texts), queries, k, r2, s2, mask)
    # without cells, or cells of another index (wrong size): the block-max kernel, same
    # result; without positions (computed for the call), or with none (binary searches)
    no_pos = np.zeros(0, np.int32)
    for other in (None, (cells[0][:-1], cells[1]), cells[:2], (cells[0], cells[1], no_pos)):
        r3, s3, _ = kernel_search(
            index, queries, k, mask, method="maxscore", cells=other, cell_shift=shift, **opts
        )
        assert np.array_equal(r3, r2) and np.array_equal(s3, s2)


def test_cells_of_an_index_are_made_once_and_follow_its_arrays():
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(300)]
    p = 1.0 / np.arange(1, 301) ** 1.1
    p /= p.sum()
    texts = [" ".join(rng.choice(vocab, int(rng.integers(3, 25)), p=p)) for _ in range(4000)]
    queries = [" ".join(rng.choice(vocab, int(rng.integers(1, 6)), p=p)) for _ in range(40)]
    queries += ["w0 w1 w2 w299", "w0"]
    index = BM25Index.from_texts(texts, Tokenizer(stopwords=None))
    assert index.n_postings >= kernels.PRUNE_MIN_POSTINGS
    first = index.search(queries, 10)
    cells = index._cells_of
    assert cells is not None and cells[0] is index._state
    assert (cells[1][0] >= 0).any()  # the common words have cells
    index.search(queries, 10)
    assert index._cells_of is cells  # made once
    full = index.search(queries, 10, method="exhaustive")
    assert np.array_equal(first[0], full[0]) and np.array_equal(first[1], full[1])
    index.add_texts(texts[:500])  # new arrays: new cells, results as a fresh build's
    again = index.search(queries, 10)
    assert index._cells_of is not cells and index._cells_of[0] is index._state
    fresh = BM25Index.from_texts(texts + texts[:500], Tokenizer(stopwords=None))
    want = fresh.search(queries, 10, method="exhaustive")
    assert np.array_equal(again[0], want[0]) and np.array_equal(again[1], want[1])
    # most postings of the common words are never read
    tokens = index.tokenizer.tokenize(["w0 w1 w2", "w0 w1 w299"])
    read = index.postings_read(tokens, 10)
    assert read[:, 0].sum() < 0.5 * read[:, 1].sum()


def test_pruning_skips_postings_and_keeps_results():
    rng = np.random.default_rng(5)
    vocab = [f"w{i}" for i in range(400)]
    weights = 1.0 / np.arange(1, 401) ** 1.1
    weights /= weights.sum()
    texts = [" ".join(rng.choice(vocab, int(rng.integers(3, 25)), p=weights)) for _ in range(4000)]
    queries = [" ".join(rng.choice(vocab, int(rng.integers(1, 6)), p=weights)) for _ in range(80)]
    queries += ["w0", "w0 w1", "w0 w0 w0 w399", "w1 w2 w3 w4 w5 w6 w7"]
    index = BM25Index.from_texts(texts, Tokenizer(stopwords=None))
    for k in (1, 10, 50):
        pruned = index.search(queries, k, method="maxscore")
        full = index.search(queries, k, method="exhaustive")
        assert np.array_equal(pruned[0], full[0]) and np.array_equal(pruned[1], full[1])
        mask = rng.random(index.n_rows) < 0.3
        pruned = index.search(queries, k, mask=mask, method="maxscore")
        full = index.search(queries, k, mask=mask, method="exhaustive")
        assert np.array_equal(pruned[0], full[0]) and np.array_equal(pruned[1], full[1])
    read = index.postings_read(index.tokenizer.tokenize(queries), 10, method="maxscore")
    assert index.n_postings >= kernels.PRUNE_MIN_POSTINGS  # so "auto" prunes here
    assert np.array_equal(index.postings_read(index.tokenizer.tokenize(queries), 10), read)
    full = index.postings_read(index.tokenizer.tokenize(queries), 10, method="exhaustive")
    assert np.array_equal(full[:, 0], full[:, 1]) and np.array_equal(full[:, 1], read[:, 1])
    # windows of 256 rows (the corpus is smaller than one default window)
    words = [q.split() for q in queries]
    *_, small = kernel_search(index, words, 10, None, block_size=16, window=256, method="maxscore")
    assert small[:, 0].sum() < 0.5 * small[:, 1].sum()  # most postings are never scored


def test_auto_scores_long_queries_in_full_and_keeps_results():
    rng = np.random.default_rng(9)
    vocab = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(vocab, int(rng.integers(5, 30)))) for _ in range(3000)]
    index = BM25Index.from_texts(texts, Tokenizer(stopwords=None))
    assert index.n_postings >= kernels.PRUNE_MIN_POSTINGS
    long_q = " ".join(rng.choice(vocab, kernels.PRUNE_MAX_TOKENS + 1))
    queries = ["w1 w2", long_q, "w7", long_q + " w8", "w3 w4 w5"]
    mask = rng.random(index.n_rows) < 0.5
    for m in (None, mask):
        auto = index.search(queries, 7, mask=m)
        full = index.search(queries, 7, mask=m, method="exhaustive")
        assert np.array_equal(auto[0], full[0]) and np.array_equal(auto[1], full[1])
    read = index.postings_read(index.tokenizer.tokenize(queries), 7)
    pruned = index.postings_read(index.tokenizer.tokenize(queries), 7, method="maxscore")
    assert np.array_equal(read[[1, 3], 0], read[[1, 3], 1])  # long: every posting
    assert np.array_equal(read[[0, 2, 4]], pruned[[0, 2, 4]])  # short: pruned as before


def test_auto_scores_a_small_index_in_full(tok):
    index = BM25Index.from_texts(TEXTS, tok)
    assert index.n_postings < kernels.PRUNE_MIN_POSTINGS
    tokens = index.tokenizer.tokenize(["leave policy days", "expense"])
    full = index.postings_read(tokens, 3, method="exhaustive")
    assert np.array_equal(index.postings_read(tokens, 3), full)  # "auto": every posting
    assert np.array_equal(full[:, 0], full[:, 1])
    assert np.array_equal(
        index.search(["leave policy days"], 3)[0],
        index.search(["leave policy days"], 3, method="maxscore")[0],
    )


@pytest.mark.parametrize("block_size", [1, 2, 3, 128])
def test_block_maxima_match_reference(tok, block_size):
    index = BM25Index.from_texts(TEXTS * 3, tok)
    st = index._state
    offsets, maxima = kernels.block_maxima(st.term_offsets, st.weights, block_size)
    ref_offsets, ref_maxima = naive.block_maxima(st.term_offsets, st.weights, block_size)
    assert offsets.tolist() == ref_offsets and maxima.tolist() == ref_maxima
    assert kernels.term_maxima(st.term_offsets, st.weights).tolist() == [
        max(st.weights[a:b]) for a, b in zip(st.term_offsets[:-1], st.term_offsets[1:])
    ]
    if block_size == kernels.BLOCK_SIZE:
        assert np.array_equal(st.block_offsets, offsets) and np.array_equal(st.block_max, maxima)
        assert np.array_equal(st.max_weight, kernels.term_maxima(st.term_offsets, st.weights))


def test_weights_are_fixed_point_scores(tok):
    """Every weight is ceil(idf * impact * 2**26): within 2**-26 of the posting's share."""
    index = BM25Index.from_texts(TEXTS, tok)
    st = index._state
    imp = kernels.impacts(st.rows, st.tfs, st.doc_len, index.k1, index.b, index.avgdl)
    term = np.repeat(np.arange(st.idf.size), np.diff(st.term_offsets))
    exact = st.idf[term].astype(np.float64) * imp.astype(np.float64) * kernels.WEIGHT_SCALE
    assert np.array_equal(st.weights, np.ceil(exact).astype(np.int32))
    assert st.weights.dtype == np.int32 and (st.weights >= 1).all()


def test_method_is_validated(tok):
    index = BM25Index.from_texts(TEXTS, tok)
    with pytest.raises(ConfigError, match="method"):
        index.search(["leave"], 3, method="wand")


def write_v1(path, index: BM25Index) -> None:
    """Write ``index`` as a version-1 file (no block maxima), as older fastrag did."""
    import orjson
    import pyarrow as pa

    from fastrag.index import keyword

    st = index._state
    imp = kernels.impacts(st.rows, st.tfs, st.doc_len, index.k1, index.b, index.avgdl or 1.0)
    v1 = [st.vocab, st.term_offsets, st.rows, st.tfs, imp, st.idf, st.doc_len,
          kernels.term_maxima(st.term_offsets, imp)]  # fmt: skip
    meta = {
        "format": keyword.FORMAT, "version": 1, "k1": index.k1, "b": index.b,
        "n_rows": index.n_rows, "avgdl": index.avgdl, "tokenizer": index.tokenizer.config(),
    }  # fmt: skip
    columns = [
        pa.LargeListArray.from_arrays(
            pa.array(np.array([0, len(a)], np.int64)), pa.array(a, type=typ)
        )
        for a, (_, typ) in zip(v1, keyword._V1_COLUMNS, strict=True)
    ]
    schema = keyword._SCHEMAS[1].with_metadata({b"fastrag": orjson.dumps(meta)})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        writer.write_batch(pa.RecordBatch.from_arrays(columns, schema=schema))


def test_version1_file_loads_and_is_upgraded_on_save(tmp_path, tok):
    index = BM25Index.from_texts(TEXTS, tok)
    path = tmp_path / "bm25.arrow"
    write_v1(path, index)
    old = BM25Index.load(path)
    assert old.upgraded
    for i in range(len(index._state)):
        assert np.array_equal(old._state[i], index._state[i])  # block maxima computed
    r1, s1 = old.search(QUESTIONS, 5)
    r2, s2 = index.search(QUESTIONS, 5)
    assert np.array_equal(r1, r2) and np.array_equal(s1, s2)
    old.save(path)
    again = BM25Index.load(path)
    assert not again.upgraded
    assert not again._state.block_max.flags.owndata  # mapped, not recomputed
    assert not again._state.weights.flags.owndata


def test_inconsistent_block_maxima_are_refused(tmp_path, tok):
    import pyarrow as pa

    path = tmp_path / "bm25.arrow"
    BM25Index.from_texts(TEXTS, tok).save(path)
    table = pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all()
    cols = table.columns
    offsets = cols[8].chunk(0).values.to_numpy().copy()
    offsets[1] += 1
    bad_col = pa.LargeListArray.from_arrays(
        pa.array([0, offsets.size], pa.int64()), pa.array(offsets)
    )
    bad = pa.table(cols[:8] + [bad_col] + cols[9:], schema=table.schema)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, bad.schema) as w:
        w.write_table(bad)
    with pytest.raises(StoreCorruptedError, match="block maxima"):
        BM25Index.load(path)


def test_knowledge_base_with_version1_indexes_is_upgraded(tmp_path, capsys):
    """An older knowledge base loads, answers the same, and `fastrag upgrade` rewrites it."""
    import hashlib
    import json

    from fastrag import KnowledgeBase
    from fastrag.cli import main

    root = tmp_path / "kb"
    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(TEXTS) if t]
    KnowledgeBase.build(docs, window=40, overlap=8).save(root)
    manifest = json.loads((root / "manifest.json").read_text())
    entry = manifest["snapshots"][-1]
    for name in ("bm25.arrow", "bm25_docs.arrow"):  # as an older fastrag saved them
        path = root / "snapshots" / entry["id"] / name
        write_v1(tmp_path / name, BM25Index.load(path))  # not over the mapped file
        (tmp_path / name).replace(path)
        entry["files"][name] = {
            "bytes": path.stat().st_size,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    (root / "manifest.json").write_text(json.dumps(manifest))
    old = KnowledgeBase.load(root)
    assert old._corpus.keyword.upgraded and old._corpus.documents.upgraded
    hits = [h.chunk_id for h in old.retrieve("annual leave days", k=5, mode="keyword")]
    assert main(["upgrade", str(root)]) == 0
    assert "rewritten" in capsys.readouterr().out
    new = KnowledgeBase.load(root)
    assert not new._corpus.keyword.upgraded and not new._corpus.documents.upgraded
    assert [h.chunk_id for h in new.retrieve("annual leave days", k=5, mode="keyword")] == hits
    assert main(["upgrade", str(root)]) == 0
    assert "already" in capsys.readouterr().out


@settings(max_examples=examples(40) if not JIT_DISABLED else 8, deadline=None)
@given(
    docs=docs_strategy,
    queries=st.lists(st.lists(st.sampled_from(WORDS + ["unknown"]), max_size=5), max_size=5),
)
def test_query_weights_match_reference(docs, queries):
    tok = Tokenizer(stopwords=None)
    texts = [" ".join(d) for d in docs]
    index = BM25Index.from_tokens(tok.tokenize(texts), tok)
    q_texts = [" ".join(q) for q in queries]
    got = [float(index.query_weights(tok.tokenize([q]))[0]) for q in q_texts]
    want = naive.query_weights(tok.token_strings(texts), tok.token_strings(q_texts))
    assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    batch = tok.tokenize(q_texts)
    assert_allclose(index.query_weights(batch), got, rtol=0, atol=0)
