"""An external vector store behind ``VectorIndex``: FAISS in process, through ``KnowledgeBase``.

The shared user knowledge base's 1,000 documents (about 12,000 chunks) built
with ``index="faiss:HNSW32"`` (a flat ``index="faiss"`` runs the same
path, and its recall is 1 by construction), saved (the FAISS index goes into the snapshot) and loaded as a service
would. The vector leg goes to FAISS, the filter and the principal as its id
selector; fusion, the keyword legs and the hits are fastrag's. FAISS is the
cheapest store to run here (no server, no SQLite); ``benchmarks/compare_stores.py``
puts LanceDB, Qdrant and Milvus beside it at 100,000 vectors.

Skipped (``NotImplementedError``) where ``faiss-cpu`` is not installed.
"""

from __future__ import annotations

import importlib.util
import os

from fastrag import KnowledgeBase, Principal

from .common import (
    COLD_COMPILE_TIMEOUT,
    UserKB,
    build_user_kb,
    compile_kernels,
    user_documents,
    user_questions,
)

SPECS = ("faiss:HNSW32",)
"""The store's index: a graph, so ``track_recall_at_10`` measures something (a flat index is
exact; the id mapping and selectors it would check run here too)."""


class FaissStore:
    """``retrieve`` (vector; hybrid with a ``where`` filter and a principal) and a 256 batch."""

    params = [list(SPECS)]
    param_names = ["index"]
    timeout = 300.0

    def setup_cache(self) -> dict:
        if importlib.util.find_spec("faiss") is None:
            return {"paths": {}, "questions": []}
        compile_kernels()
        paths = {
            spec: build_user_kb(os.path.abspath(spec.replace(":", "-")), UserKB.N_DOCS, index=spec)
            for spec in SPECS
        }
        questions = user_questions(user_documents(UserKB.N_DOCS), UserKB.N_QUESTIONS)
        return {"paths": paths, "questions": questions}

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]

    def setup(self, data: dict, index: str) -> None:
        if not data["paths"]:
            raise NotImplementedError("faiss-cpu is not installed")
        self.kb = KnowledgeBase.load(data["paths"][index])
        self.questions = data["questions"]
        self.filtered = {
            "where": {"team": "hr", "updated_at": {">=": "2025-06-01"}},
            "principal": Principal(user="u", groups=("hr",)),
        }
        for q in self.questions[:8]:  # first calls build per-process tables: not timed
            self.kb.retrieve(q, k=10, mode="vector")
            self.kb.retrieve(q, k=10, mode="hybrid", **self.filtered)
        self.kb.retrieve_batch(self.questions[:32], k=10, mode="vector")

    def teardown(self, data: dict, index: str) -> None:
        self.kb.close()

    def time_retrieve_vector(self, data: dict, index: str) -> None:
        self.kb.retrieve(self.questions[1], k=10, mode="vector")

    def time_retrieve_hybrid_filtered(self, data: dict, index: str) -> None:
        self.kb.retrieve(self.questions[2], k=10, mode="hybrid", **self.filtered)

    def time_retrieve_batch_256(self, data: dict, index: str) -> None:
        self.kb.retrieve_batch(self.questions, k=10, mode="vector")

    def track_recall_at_10(self, data: dict, index: str) -> float:
        """``kb.verify``: the store's top-10 against fastrag's exact search over the vectors."""
        return float(self.kb.verify(self.questions[:64])["recall"])

    track_recall_at_10.unit = "recall@10"  # type: ignore[attr-defined]
