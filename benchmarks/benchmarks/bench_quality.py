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


# -- the bundled demo set (fastrag.datasets.demo_documents): real sentences, hand-labelled ----

DEMO_QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("How many days in advance must annual leave be requested?", ("leave-en", "leave-zh")),
    ("How much paid leave after five years of service?", ("leave-en", "leave-zh")),
    ("Until when can unused leave be carried over?", ("leave-en", "leave-zh")),
    ("年假需要提前几天申请？", ("leave-zh", "leave-en")),
    ("未休年假可以顺延到什么时候？", ("leave-zh", "leave-en")),
    ("Within how many days must an expense report be submitted?", ("expense-en", "expense-zh")),
    ("What is the daily limit for meals on business travel?", ("expense-en", "expense-zh")),
    ("When are taxi fares reimbursed?", ("expense-en", "expense-zh")),
    ("报销超过5000元需要谁审批？", ("expense-zh", "expense-en")),
    ("How many days per week can I work remotely?", ("remote-en", "remote-zh")),
    ("What are the core working hours for remote work?", ("remote-en", "remote-zh")),
    ("远程办公可以用个人电脑吗？", ("remote-zh", "remote-en")),
    ("How long must a password be?", ("security-en", "security-zh")),
    ("Which systems require multi-factor authentication?", ("security-en", "security-zh")),
    ("设备丢失后多久必须报告？", ("security-zh", "security-en")),
    ("When is business class allowed on flights?", ("travel-en", "travel-zh")),
    ("What is the hotel limit per night in first-tier cities?", ("travel-en", "travel-zh")),
    ("出差订票之前需要做什么？", ("travel-zh", "travel-en")),
    ("How long is the probation period?", ("onboarding-en", "onboarding-zh")),
    ("What do new employees receive on the first day?", ("onboarding-en", "onboarding-zh")),
    ("新员工第一周要完成什么培训？", ("onboarding-zh", "onboarding-en")),
    ("When is the IT help desk open?", ("it-support-en",)),
    ("What extension reaches the IT help desk?", ("it-support-en",)),
    ("How are software installation requests handled?", ("it-support-en",)),
    ("How do I book a meeting room?", ("meeting-rooms-en",)),
    ("When is an unused room booking released?", ("meeting-rooms-en",)),
    ("公司提供哪些保险？", ("benefits-zh",)),
    ("员工生日有什么福利？", ("benefits-zh",)),
    ("子女教育补贴每月多少钱？", ("benefits-zh",)),
    ("每年有免费体检吗？", ("benefits-zh",)),
)
"""30 questions over the 15 bundled demo documents, each with the documents that answer it
(a policy's English and Chinese versions both answer a question about it)."""


class DemoNDCG:
    """nDCG@10 per mode on the bundled demo set (:data:`DEMO_QUESTIONS`), documents ranked by
    their best chunk.

    Small and real (15 documents, default build as ``fastrag demo``): 0.797 hybrid, 0.655
    vector, 0.729 keyword when added (a policy's twin in the other language counts as
    relevant, and is often ranked below other same-language policies); a change is a change
    of ranking on real sentences.
    """

    params = [["hybrid", "vector", "keyword"]]
    param_names = ["mode"]
    timeout = 300.0

    def setup_cache(self) -> str:
        from fastrag.datasets import demo_documents

        compile_kernels()
        path = os.path.abspath("demo-kb")
        kb = KnowledgeBase.build(demo_documents())  # as `fastrag demo` builds it
        kb.save(path)
        kb.close()
        return path

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]

    def setup(self, path: str, mode: str) -> None:
        self.kb = KnowledgeBase.load(path)

    def teardown(self, path: str, mode: str) -> None:
        self.kb.close()

    def track_ndcg_at_10(self, path: str, mode: str) -> float:
        questions = [q for q, _ in DEMO_QUESTIONS]
        table = self.kb.retrieve_batch(questions, k=K, mode=mode, group_by="doc")
        ranked: list[list[str]] = [[] for _ in questions]
        for i, doc_id in zip(
            table.column("query_index").to_pylist(), table.column("doc_id").to_pylist(), strict=True
        ):
            ranked[i].append(doc_id)
        total = sum(
            ndcg_at_k(r, dict.fromkeys(rel, 1), K)
            for r, (_, rel) in zip(ranked, DEMO_QUESTIONS, strict=True)
        )
        return total / len(DEMO_QUESTIONS)

    track_ndcg_at_10.unit = "nDCG@10"  # type: ignore[attr-defined]
