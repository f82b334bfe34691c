"""The document keyword index built from the chunks' tokens against tokenising documents again.

``add_with_documents`` takes every document's tokens from its chunks'
(one tokenisation of the text); the reference (``tests/naive/documents.py``)
joins the documents in Python and builds the index from their strings.
Every array of both indexes must be equal, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import JIT_DISABLED, examples
from fastrag._native import tokenize as kernels
from fastrag._native.structure import join_chunks
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import documents as naive

from fastrag.index.keyword import BM25Index, add_with_documents
from fastrag.text.chunking import Chunker
from fastrag.text.tokenize import Tokenizer

PIECES = [
    "leave", "leaves", "running", "annual", "the", "Reports", "naïve", "e\u0301t\u00e9", "12",
    "年假", "申请的", "报销单", "提前", "天", "，", "。", " ", " ", "  ", "\n", ", ", "-", "x",
    "ＡＢＣ", "\u0301", "données", "ok.", "很长的中文句子没有标点符号",
]  # fmt: skip
TOKENIZERS = [
    Tokenizer(stem="porter"),
    Tokenizer(),
    Tokenizer(cjk="bigram", stopwords=None),
    Tokenizer(cjk="unigram", lowercase=False),
]


def _layout(texts: list[str], chunker: Chunker):
    chunks = chunker.chunk(texts)
    n = len(chunks)
    doc_starts = np.searchsorted(chunks.chunk_doc, np.arange(chunks.n_docs + 1)).astype(np.int64)
    # a document without chunks has no keyword row: keep the documents that have some
    doc_starts = np.unique(doc_starts)
    data, offsets = chunks.text_data, chunks.text_offsets
    strings = [bytes(data[offsets[i] : offsets[i + 1]]).decode() for i in range(n)]
    return chunks, data, offsets, doc_starts, strings


def _same(a: BM25Index, b: BM25Index) -> None:
    for name, x, y in zip(a._state._fields, a._state, b._state, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y), name


def _both(texts, chunker, tok, before=()):
    chunks, data, offsets, doc_starts, strings = _layout(texts, chunker)
    starts, ends = chunks.chunk_start, chunks.chunk_end
    doc_data, doc_offsets = join_chunks(data, offsets, starts, ends, doc_starts)
    joined = naive.documents(strings, starts.tolist(), ends.tolist(), doc_starts.tolist())
    assert [
        bytes(doc_data[a:b]).decode() for a, b in zip(doc_offsets[:-1], doc_offsets[1:])
    ] == joined
    got_c, got_d = BM25Index(tok), BM25Index(tok)
    want_c, want_d = BM25Index(tok), BM25Index(tok)
    for extra in before:  # an index that already holds rows (an add to a built corpus)
        for index in (got_c, got_d, want_c, want_d):
            index.add_texts(extra)
    add_with_documents(got_c, got_d, data, offsets, starts, ends, doc_starts, doc_data, doc_offsets)
    want_c.add_texts(strings)
    want_d.add_texts(joined)
    _same(got_c, want_c)
    _same(got_d, want_d)
    return chunks, data, offsets, doc_starts, doc_data, doc_offsets


@settings(max_examples=examples(120 if not JIT_DISABLED else 12), deadline=None)
@given(
    docs=st.lists(
        st.lists(st.sampled_from(PIECES), max_size=60).map("".join), min_size=1, max_size=12
    ),
    window=st.integers(2, 40),
    overlap=st.integers(0, 15),
    tok=st.sampled_from(TOKENIZERS),
    mode=st.sampled_from(["windows", "structure"]),
    before=st.lists(st.sampled_from(PIECES), max_size=3),
)
def test_documents_from_chunk_tokens(docs, window, overlap, tok, mode, before):
    overlap = min(overlap, window - 1)
    _both(docs, Chunker(window=window, overlap=overlap, mode=mode), tok, [before] if before else ())


def test_pieces_cover_ordinary_documents():
    """English and Chinese text with separators in every overlap: no document is re-tokenised."""
    rng = np.random.default_rng(3)
    words = ["annual", "leave", "request", "年假", "申请", "报销", "，", "days", "the", "policy"]
    texts = [" ".join(rng.choice(words, size=rng.integers(20, 200))) for _ in range(50)]
    tok = Tokenizer(stem="porter")
    chunks, data, offsets, doc_starts, doc_data, doc_offsets = _both(
        texts, Chunker(window=60, overlap=15), tok
    )
    tokens, tok_starts = tok.tokenize_starts(data, offsets)
    _, _, counts = kernels.document_pieces(
        data, offsets, chunks.chunk_start, chunks.chunk_end, doc_starts, doc_data, doc_offsets,
        tokens.offsets, tok_starts, tok.kernel_tables().classes,
    )  # fmt: skip
    assert (counts >= 0).all()
    assert (counts == np.diff(tok.tokenize_utf8(doc_data, doc_offsets).offsets)).all()


@pytest.mark.parametrize(
    "texts",
    [
        ["abcdefghijklmnopqrstuvwxyz" * 4],  # one word longer than the window: no separator
        ["很长的中文句子没有标点符号" * 8],  # a CJK run: no separator either
        ["a " + "é" * 50 + " end"],  # multi-byte characters across cuts
        [""],  # no chunk
        ["one two three four five six seven eight nine ten"] * 3,
    ],
)
def test_documents_edge_cases(texts):
    for tok in TOKENIZERS[:2]:
        _both(texts, Chunker(window=10, overlap=4), tok)


def test_invalid_utf8_documents_are_tokenised_again():
    """Bytes that are not UTF-8: the document is flagged (and still equal to the reference)."""
    tok = Tokenizer()
    data = np.frombuffer(b"ab\xe4 cd ef\xff gh ij", dtype=np.uint8)
    offsets = np.array([0, 8, 14], dtype=np.int64)
    starts = np.array([0, 5], dtype=np.int64)
    ends = np.array([6, 11], dtype=np.int64)
    doc_starts = np.array([0, 2], dtype=np.int64)
    doc_data, doc_offsets = join_chunks(data, offsets, starts, ends, doc_starts)
    tokens, tok_starts = tok.tokenize_starts(data, offsets)
    _, _, counts = kernels.document_pieces(
        data, offsets, starts, ends, doc_starts, doc_data, doc_offsets, tokens.offsets,
        tok_starts, tok.kernel_tables().classes,
    )  # fmt: skip
    assert counts.tolist() == [-1]
    got_c, got_d = BM25Index(tok), BM25Index(tok)
    add_with_documents(got_c, got_d, data, offsets, starts, ends, doc_starts, doc_data, doc_offsets)
    _same(got_c, BM25Index.build(data, offsets, tok))
    _same(got_d, BM25Index.build(doc_data, doc_offsets, tok))


@pytest.mark.skipif(JIT_DISABLED, reason="no signatures without the JIT")
def test_warmup_covers_the_document_kernels():
    kernels.warmup()
    passes = (kernels._doc_pieces_pass, kernels._doc_gather_pass)
    before = [len(p.signatures) for p in passes]
    _both(["annual leave, 年假申请。 " * 9, "x"], Chunker(window=20, overlap=5), Tokenizer())
    assert [len(p.signatures) for p in passes] == before == [1, 1]


def test_knowledge_base_document_index_equals_documents_tokenised_again():
    """A build and an add (windows and structure-aware chunks): the joined texts' index."""
    from fastrag import KnowledgeBase
    from fastrag.store.ingest import keyword_texts

    docs = [
        {"id": "a", "text": "Annual leave requests, 年假申请需提前三天提交。 " * 12},
        {
            "id": "b",
            "text": "# Expenses\n\nReports are filed monthly.\n\n- receipts\n- 报销单\n" * 5,
        },
        {"id": "c", "text": "short"},
    ]
    kb = KnowledgeBase.build(docs, window=60, overlap=15)
    kb.add([{"id": "d", "text": "passwords rotate every ninety days; 密码每九十天更换。 " * 6}])
    corpus = kb._corpus
    tok = corpus.documents.tokenizer
    doc_texts = [keyword_texts(seg.batch)[1] for seg in corpus.store.segments if len(seg)]
    want = BM25Index(tok)
    for data, offsets in doc_texts:
        want.add(data, offsets)
    _same(corpus.documents, want)
    assert corpus.documents.n_rows == 4
