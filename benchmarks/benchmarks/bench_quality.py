"""Retrieval quality next to speed: nDCG@10 per mode and recall@10 of HNSW against exact.

The labelled set is generated, seeded and small (so a regression in
tokenisation, embedding, fusion or the graph shows as a changed number, not
as a judgement of fastrag's quality on real text; BENCHMARKS.md's SciFact
and CMRC 2018 figures are that): 500 ``user_documents`` (seed 23, about
6,500 chunks) in a knowledge base built with ``index="hnsw"``, and 300
questions, each 6 terms drawn in order from a 150-character window of one
document (words, CJK characters), that document being the one relevant
answer. Documents are ranked by their best chunk (``group_by="doc"``).
"""

from __future__ import annotations

import os

import numpy as np
from fastrag.datasets.beir import ndcg_at_k

from fastrag import KnowledgeBase
from fastrag.index.hnsw import recall_at_k
from fastrag.text.tokenize import Tokenizer

from .common import COLD_COMPILE_TIMEOUT, compile_kernels, user_documents

N_DOCS = 500
SEED = 23
N_QUESTIONS = 300
K = 10


def labelled_questions(
    n_docs: int = N_DOCS, m: int = N_QUESTIONS, seed: int = 1
) -> list[tuple[str, str]]:
    """``m`` (question, relevant document id) pairs over ``user_documents(n_docs, SEED)``."""
    docs = user_documents(n_docs, seed=SEED)
    rng = np.random.default_rng(seed)
    tok = Tokenizer(stopwords=None, cjk="unigram")
    out: list[tuple[str, str]] = []
    while len(out) < m:
        doc = docs[int(rng.integers(0, len(docs)))]
        text = doc["text"]
        start = int(rng.integers(0, max(1, len(text) - 150)))
        terms = tok.tokens(text[start : start + 150])
        if len(terms) < 6:
            continue
        pick = np.sort(rng.choice(len(terms), 6, replace=False))
        out.append((" ".join(terms[j] for j in pick), str(doc["id"])))
    return out


class _Labelled:
    timeout = 600.0

    def setup_cache(self) -> str:
        compile_kernels()
        # build_user_kb's documents are user_documents(n, seed=11): build this set's own
        from fastrag import VocabularyEmbedder

        path = os.path.abspath("labelled-kb")
        kb = KnowledgeBase.build(
            user_documents(N_DOCS, seed=SEED), embedder=VocabularyEmbedder(max_features=384),
            index="hnsw",
        )  # fmt: skip
        kb.save(path)
        kb.close()
        return path

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]

    def setup(self, path: str, *params: object) -> None:
        self.kb = KnowledgeBase.load(path)
        self.kb.wait_ready()
        self.labelled = labelled_questions()

    def teardown(self, path: str, *params: object) -> None:
        self.kb.close()


class NDCG(_Labelled):
    params = [["hybrid", "vector", "keyword"]]
    param_names = ["mode"]

    def track_ndcg_at_10(self, path: str, mode: str) -> float:
        questions = [q for q, _ in self.labelled]
        table = self.kb.retrieve_batch(questions, k=K, mode=mode, group_by="doc")
        ranked: list[list[str]] = [[] for _ in questions]
        for i, doc_id in zip(
            table.column("query_index").to_pylist(), table.column("doc_id").to_pylist(), strict=True
        ):
            ranked[i].append(doc_id)  # rows come by question, then rank
        total = sum(
            ndcg_at_k(r, {d: 1}, K) for r, (_, d) in zip(ranked, self.labelled, strict=True)
        )
        return total / len(self.labelled)

    track_ndcg_at_10.unit = "nDCG@10"  # type: ignore[attr-defined]


class HnswRecall(_Labelled):
    """The knowledge base's graph against its exact scan, over the questions' vectors."""

    def track_recall_at_10(self, path: str) -> float:
        vectors = self.kb.embed_questions([q for q, _ in self.labelled])
        graph, _ = self.kb.search(vectors, K)
        exact, _ = self.kb.search(vectors, K, exact=True)
        return float(recall_at_k(graph, exact))

    track_recall_at_10.unit = "recall@10"  # type: ignore[attr-defined]
