"""BM25Index and its kernels against the reference (tests/naive/bm25.py) and bm25s."""

from __future__ import annotations

import os

import numpy as np
import pytest
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


@settings(max_examples=60 if not JIT_DISABLED else 10, deadline=None)
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
        for name in range(8):
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


@settings(max_examples=30 if not JIT_DISABLED else 5, deadline=None)
@given(docs=docs_strategy, split=st.integers(0, 12), keep_seed=st.integers(0, 2**32 - 1))
def test_property_add_and_compact(docs, split, keep_seed):
    tok = Tokenizer(stopwords=None)
    texts = [" ".join(d) for d in docs]
    split = min(split, len(texts))
    grown = BM25Index.from_texts(texts[:split], tok)
    grown.add_texts(texts[split:])
    fresh = BM25Index.from_texts(texts, tok)
    for i in range(8):
        assert np.array_equal(grown._state[i], fresh._state[i])
    keep = np.random.default_rng(keep_seed).random(len(texts)) < 0.6
    compacted = fresh.compact(keep)
    kept = BM25Index.from_texts([t for t, k in zip(texts, keep) if k], tok)
    for i in range(8):
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
    for i in range(8):
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
