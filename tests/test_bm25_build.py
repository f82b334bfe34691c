"""The parallel fresh-index build (``build_postings``) against the serial one it replaced.

``tests/naive/bm25.py`` keeps both references: ``postings`` (dictionaries)
and ``serial_postings`` (the kernels ``BM25Index`` ran before: per-text
sorted pairs, one serial hash table over all pairs, a serial counting sort).
Every array of an index built today must equal the reference's, bit for bit,
and so must every search.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import JIT_DISABLED
from fastrag._native import bm25 as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import bm25 as naive
from naive import bm25_serial

from fastrag._threads import threads
from fastrag.index.keyword import BM25Index
from fastrag.text.tokenize import Tokenizer

WORDS = [
    "leave", "leaves", "leaving", "annual", "the", "of", "running", "runs", "report", "x",
    "Reports", "passwords", "é", "naïve", "12", "3rd",
]  # fmt: skip
CJK = ["年假", "申请", "的", "报销单", "提前", "天", "工作", "了"]

EXAMPLES = 40 if not JIT_DISABLED else 8


def _hash_lists(draw_lists: list[list[int]], top: bool) -> tuple[np.ndarray, np.ndarray]:
    """Token lists to CSR; ``top`` spreads the hashes over every partition."""
    offsets = np.zeros(len(draw_lists) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in draw_lists], out=offsets[1:])
    flat = np.array([t for d in draw_lists for t in d], dtype=np.uint64)
    if top:  # a bijection of uint64: small drawn values land in every top-bits partition
        with np.errstate(over="ignore"):
            flat = (flat * np.uint64(0x9E3779B97F4A7C15)) ^ (flat << np.uint64(7))
    return flat, offsets


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(
    docs=st.lists(st.lists(st.integers(0, 40), max_size=30), max_size=40),
    top=st.booleans(),
    row0=st.integers(0, 5),
    n_threads=st.sampled_from([1, 2]),
)
def test_build_postings_equals_references(docs, top, row0, n_threads):
    hashes, offsets = _hash_lists(docs, top)
    with threads(n_threads):
        got = kernels.build_postings(hashes, offsets, row0)
    lists = [hashes[offsets[i] : offsets[i + 1]].tolist() for i in range(len(docs))]
    for ref in (naive.postings(lists, row0), naive.serial_postings(hashes, offsets, row0)):
        for g, r in zip(got, ref, strict=True):
            assert g.dtype == r.dtype
            assert np.array_equal(g, r)


def test_build_postings_large_texts_and_extremes():
    rng = np.random.default_rng(3)
    # long texts (tables larger than the first 16 slots), hashes 0 and 2**64 - 1, one
    # partition holding everything, and texts without tokens between them
    pool = np.concatenate([
        np.array([0, 2**64 - 1, 2**63, 1], dtype=np.uint64),
        rng.integers(0, 2**64, 500, dtype=np.uint64, endpoint=False),
        np.arange(100, dtype=np.uint64),
    ])  # fmt: skip
    lens = rng.integers(0, 400, 70)
    lens[::7] = 0
    offsets = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    hashes = pool[rng.integers(0, pool.size, int(offsets[-1]))]
    got = kernels.build_postings(hashes, offsets)
    ref = naive.serial_postings(hashes, offsets)
    for g, r in zip(got, ref, strict=True):
        assert np.array_equal(g, r)
    empty = kernels.build_postings(np.zeros(0, np.uint64), np.zeros(1, np.int64))
    assert [a.size for a in empty] == [0, 1, 0, 0]


def _reference_index(texts: list[str], tok: Tokenizer) -> BM25Index:
    """An index built the way ``BM25Index.build`` built one before (the serial kernels)."""
    tokens = tok.tokenize(texts)
    vocab, term_offsets, rows, tfs = naive.serial_postings(tokens.hashes, tokens.offsets)
    index = BM25Index(tok)
    index._set(vocab, term_offsets, rows, tfs, tokens.lengths().astype(np.int32))
    return index


def _same(a: BM25Index, b: BM25Index) -> None:
    for x, y in zip(a._state, b._state, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert a.avgdl == b.avgdl


texts_strategy = st.lists(
    st.lists(st.sampled_from(WORDS + CJK + ["", "，", "!"]), max_size=25).map(
        lambda parts: " ".join(parts) if len(parts) % 2 else "".join(parts)
    ),
    max_size=30,
)


@pytest.fixture(scope="module")
def tokenizers() -> list[Tokenizer]:
    return [
        Tokenizer(stem="porter"),
        Tokenizer(stopwords=None),
        Tokenizer(stopwords="lucene", cjk="bigram"),
        Tokenizer(stem="porter", cjk="unigram", lowercase=False),
    ]


@settings(max_examples=EXAMPLES, deadline=None)
@given(texts=texts_strategy, which=st.integers(0, 3), n_threads=st.sampled_from([1, 2]))
def test_index_equals_serial_build(tokenizers, texts, which, n_threads):
    tok = tokenizers[which]
    with threads(n_threads):
        index = BM25Index.from_texts(texts, tok)
    ref = _reference_index(texts, tok)
    _same(index, ref)
    queries = ["leave annual 年假", "running reports 申请的", "naïve x 12", ""]
    for method in ("exhaustive", "maxscore"):
        r1, s1 = index.search(queries, 5, method=method)
        r2, s2 = ref.search(queries, 5, method=method)
        assert np.array_equal(r1, r2) and np.array_equal(s1, s2)


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(
    texts=texts_strategy,
    added=texts_strategy,
    keep_seed=st.integers(0, 2**32 - 1),
    which=st.integers(0, 3),
)
def test_deleted_and_replaced_rows(tokenizers, texts, added, keep_seed, which):
    # a store's life: build, delete some documents (compact), add replacements
    tok = tokenizers[which]
    keep = np.random.default_rng(keep_seed).random(len(texts)) < 0.6
    index = BM25Index.from_texts(texts, tok).compact(keep)
    index.add_texts(added)
    survivors = [t for t, k in zip(texts, keep, strict=True) if k]
    _same(index, _reference_index(survivors + added, tok))


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    old=st.lists(st.lists(st.integers(0, 30), max_size=20), max_size=20),
    new=st.lists(st.lists(st.integers(0, 30), max_size=20), max_size=20),
    top=st.booleans(),
)
def test_merge_indexes_equals_one_build(old, new, top):
    h_old, o_old = _hash_lists(old, top)
    h_new, o_new = _hash_lists(new, top)
    a = kernels.build_postings(h_old, o_old)
    b = kernels.build_postings(h_new, o_new, len(old))
    got = kernels.merge_indexes(*a, *b)
    both = np.concatenate([h_old, h_new])
    offsets = np.concatenate([o_old, o_new[1:] + o_old[-1]])
    for g, r in zip(got, naive.serial_postings(both, offsets), strict=True):
        assert g.dtype == r.dtype and np.array_equal(g, r)
    # and the serial merge it replaced: the new rows' doc-major pairs appended term by term
    vocab = got[0]
    pair_hash, pair_tf, pair_offsets = bm25_serial.doc_terms(h_new, o_new)
    remap = np.searchsorted(vocab, a[0]).astype(np.int64)
    pair_term = np.searchsorted(vocab, pair_hash).astype(np.int64)
    ref = bm25_serial.merge_postings(
        a[1], a[2], a[3], remap, pair_term, pair_tf, pair_offsets, len(old), vocab.size
    )
    for g, r in zip(got[1:], ref, strict=True):
        assert g.dtype == r.dtype and np.array_equal(g, r)
