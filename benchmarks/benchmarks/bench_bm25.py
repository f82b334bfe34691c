"""BM25: tokenisation, index build and batched search (fastrag.index.keyword, fastrag.text.tokenize).

Rows are short chunks cut from ``common.texts`` (mixed English/Chinese) by
``Chunker(200, 40)``; questions are seeded word/character samples of those
rows. Kernels are warmed in ``setup``: compile time is never timed.
"""

from __future__ import annotations

import numpy as np
from fastrag._native import bm25 as bm25_kernels
from fastrag._native import tokenize as tokenize_kernels

from fastrag.index.keyword import BM25Index
from fastrag.text.chunking import Chunker
from fastrag.text.tokenize import Tokenizer

from .common import Compiled, texts


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


class Search(Compiled):
    """``BM25Index.search`` from question text: one question (latency) and a batch."""

    params = [[1, 256], [10, 100]]
    param_names = ["batch", "k"]

    def setup(self, batch: int, k: int) -> None:
        tokenize_kernels.warmup()
        bm25_kernels.warmup()
        chunks = _rows(1_400_000)
        rows = chunks.texts()
        self.index = BM25Index.build(chunks.text_data, chunks.text_offsets, Tokenizer())
        self.questions = _questions(rows, batch)
        self.mask = np.ones(self.index.n_rows, dtype=bool)
        self.mask[::7] = False
        self.index.search(self.questions, k)

    def time_search(self, batch: int, k: int) -> None:
        self.index.search(self.questions, k)

    def time_search_masked(self, batch: int, k: int) -> None:
        self.index.search(self.questions, k, mask=self.mask)


class Pruning(Compiled):
    """Block-max MaxScore against the exhaustive kernel on a Zipfian corpus (same results).

    200,000 short documents of ``fastrag.datasets.synthetic.zipf_documents``;
    one question per call, questions of 1-6 words drawn from a document.
    """

    params = [["maxscore", "exhaustive"]]
    param_names = ["method"]

    def setup(self, method: str) -> None:
        from fastrag.datasets.synthetic import zipf_documents

        bm25_kernels.warmup()
        docs = [d["text"] for d in zipf_documents(200_000, seed=3)]
        self.index = BM25Index.from_texts(docs, Tokenizer())
        rng = np.random.default_rng(0)
        self.queries = []
        for i in rng.integers(0, len(docs), 64):
            words = docs[int(i)].rstrip(".").lower().split()
            text = " ".join(words[: int(rng.integers(1, 7))])
            self.queries.append(self.index.tokenizer.tokenize([text]))
        self.index.search_tokens(self.queries[0], 10, method=method)

    def time_single_questions(self, method: str) -> None:
        for q in self.queries:
            self.index.search_tokens(q, 10, threads=1, method=method)
