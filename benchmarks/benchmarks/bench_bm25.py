"""BM25: tokenisation, index build and batched search (fastrag.index.keyword, fastrag.text.tokenize).

Rows are short chunks cut from ``common.texts`` (mixed English/Chinese) by
``Chunker(200, 40)``; questions are seeded word/character samples of those
rows. The searched indexes are built once per run (``_Indexes.setup_cache``)
and loaded by each benchmark; kernels are warmed in ``setup``: compile time
is never timed.
"""

from __future__ import annotations

import numpy as np
from fastrag._native import bm25 as bm25_kernels
from fastrag._native import tokenize as tokenize_kernels

from fastrag.index.keyword import BM25Index
from fastrag.text.chunking import Chunker
from fastrag.text.tokenize import Tokenizer

from .common import COLD_COMPILE_TIMEOUT, Compiled, compile_kernels, texts


def _rows(chars: int):
    return Chunker(200, 40).chunk(list(texts(chars)))


def _questions(rows: list[str], m: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    tok = Tokenizer(stopwords=None, cjk="unigram")
    out = []
    while len(out) < m:
        words = tok.tokens(rows[int(rng.integers(0, len(rows)))])
        if words:
            pick = rng.choice(len(words), min(len(words), 4), replace=False)
            out.append(" ".join(words[j] for j in sorted(pick)))
    return out


class Tokenize(Compiled):
    """``Tokenizer.tokenize_utf8`` over 2 MB of chunk text, with and without stemming."""

    params = [[None, "porter"]]
    param_names = ["stem"]

    def setup(self, stem: str | None) -> None:
        tokenize_kernels.warmup()
        self.chunks = _rows(1_400_000)
        self.tokenizer = Tokenizer(stem=stem)
        self.tokenizer.tokenize_utf8(self.chunks.text_data, self.chunks.text_offsets)

    def time_tokenize(self, stem: str | None) -> None:
        self.tokenizer.tokenize_utf8(self.chunks.text_data, self.chunks.text_offsets)


class Build(Compiled):
    """``BM25Index.build`` from chunk text (tokenisation included)."""

    params = [[1_400_000]]
    param_names = ["chars"]

    def setup(self, chars: int) -> None:
        tokenize_kernels.warmup()
        bm25_kernels.warmup()
        self.chunks = _rows(chars)
        self.tokenizer = Tokenizer()
        BM25Index.build(self.chunks.text_data[:1000], self.chunks.text_offsets[:2], self.tokenizer)

    def time_build(self, chars: int) -> None:
        BM25Index.build(self.chunks.text_data, self.chunks.text_offsets, self.tokenizer)

    def peakmem_build(self, chars: int) -> None:
        BM25Index.build(self.chunks.text_data, self.chunks.text_offsets, self.tokenizer)


class _Indexes:
    """The two indexes :class:`Search` and :class:`Pruning` search, built once per run.

    ``setup_cache`` (shared by both classes: asv keys it by this function)
    compiles the kernels, builds the chunk index and the 200,000-document
    Zipfian one, and saves them in asv's cache directory; each benchmark
    process memory-maps them in ``setup``, as a loaded knowledge base does,
    instead of building them again.
    """

    timeout = 300.0

    def setup_cache(self) -> dict:
        import os

        from fastrag.datasets.synthetic import zipf_documents

        compile_kernels()
        chunks = _rows(1_400_000)
        chunk_path = os.path.abspath("bm25-chunks.arrow")
        BM25Index.build(chunks.text_data, chunks.text_offsets, Tokenizer()).save(chunk_path)
        docs = [d["text"] for d in zipf_documents(200_000, seed=3)]
        zipf_path = os.path.abspath("bm25-zipf.arrow")
        BM25Index.from_texts(docs, Tokenizer()).save(zipf_path)
        rng = np.random.default_rng(0)
        zipf_questions = []
        for i in rng.integers(0, len(docs), 64):
            words = docs[int(i)].rstrip(".").lower().split()
            zipf_questions.append(" ".join(words[: int(rng.integers(1, 7))]))
        return {
            "chunks": chunk_path,
            "questions": _questions(chunks.texts(), 256),
            "zipf": zipf_path,
            "zipf_questions": zipf_questions,
        }

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]


class Search(_Indexes):
    """``BM25Index.search`` from question text: one question (latency) and a batch."""

    params = [[1, 256], [10]]
    param_names = ["batch", "k"]

    def setup(self, data: dict, batch: int, k: int) -> None:
        tokenize_kernels.warmup()
        bm25_kernels.warmup()
        self.index = BM25Index.load(data["chunks"])
        self.questions = data["questions"][:batch]
        self.mask = np.ones(self.index.n_rows, dtype=bool)
        self.mask[::7] = False
        self.index.search(self.questions, k)
        self.index.search(self.questions, k, mask=self.mask)

    def time_search(self, data: dict, batch: int, k: int) -> None:
        self.index.search(self.questions, k)

    def time_search_masked(self, data: dict, batch: int, k: int) -> None:
        self.index.search(self.questions, k, mask=self.mask)


class Pruning(_Indexes):
    """Block-max MaxScore against the exhaustive kernel on a Zipfian corpus (same results).

    200,000 short documents of ``fastrag.datasets.synthetic.zipf_documents``;
    one question per call, questions of 1-6 words drawn from a document.
    """

    params = [["maxscore", "exhaustive"]]
    param_names = ["method"]

    def setup(self, data: dict, method: str) -> None:
        bm25_kernels.warmup()
        self.index = BM25Index.load(data["zipf"])
        self.queries = [self.index.tokenizer.tokenize([q]) for q in data["zipf_questions"]]
        for q in self.queries:  # the postings it reads paged in: not timed
            self.index.search_tokens(q, 10, threads=1, method=method)

    def time_single_questions(self, data: dict, method: str) -> None:
        for q in self.queries:
            self.index.search_tokens(q, 10, threads=1, method=method)
