"""fastrag: ``KnowledgeBase.build`` (exact, and ``index="hnsw"``), vector mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .base import Runner


class FastragExact(Runner):
    name = "fastrag"
    label = "fastrag (exact)"
    chunker = "fastrag Chunker(200, 40)"
    batch_api = "KnowledgeBase.retrieve_batch"
    batch_is_loop = False
    index = "exact"
    hnsw: dict[str, Any] | None = None  # HnswConfig overrides (--hnsw-ef-search)

    @classmethod
    def check(cls) -> None:
        import fastrag  # noqa: F401

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version

        return version("fastrag-engine")

    def prepare(self) -> None:
        import fastrag

        fastrag.warmup()  # load the compiled kernels, as the README tells services to

    def chunk(self, docs: list[dict[str, Any]]) -> int:
        from fastrag import Chunker

        return len(Chunker(200, 40).chunk([d["text"] for d in docs]))

    def ingest(self, docs: list[dict[str, Any]]) -> None:
        from fastrag import KnowledgeBase

        # keyword=False: the vector comparison builds no BM25 index (no other
        # system builds one); the harness times keyword=True apart.
        self.kb = KnowledgeBase.build(
            docs, embedder=self.emb, index=self.index, hnsw=self.hnsw, keyword=False
        )

    def chunk_table(self) -> tuple[list[Any], np.ndarray, list[str]]:
        store = self.kb._corpus.store  # benchmark code: read the stored vectors directly
        vectors = np.concatenate([seg.vectors for seg in store.segments])
        rows = np.arange(store.n_rows)
        table = store.rows(rows, ["chunk_id", "doc_id"])
        return (
            table.column("chunk_id").to_pylist(),
            vectors,
            [str(d) for d in table.column("doc_id").to_pylist()],
        )

    def query(self, question: str) -> list[Any]:
        # rewrite=False: every system embeds the very same question string.
        hits = self.kb.retrieve(question, k=10, mode="vector", rewrite=False)
        return [h.chunk_id for h in hits]

    def batch(self, questions: list[str]) -> Any:
        return self.kb.retrieve_batch(questions, k=10, mode="vector", rewrite=False)

    def batch_keys(self, native: Any) -> list[list[Any]]:
        qi = native.column("query_index").to_numpy()
        ids = native.column("chunk_id").to_pylist()
        out: list[list[Any]] = [[] for _ in range(int(qi.max()) + 1 if len(qi) else 0)]
        for q, c in zip(qi.tolist(), ids, strict=True):
            out[q].append(c)
        return out

    def persist(self, path: Path) -> None:
        self.kb.save(path)

    def reload(self, path: Path) -> None:
        from fastrag import KnowledgeBase

        self.kb = KnowledgeBase.load(path, embedder=self.emb)

    def close(self) -> None:
        kb = getattr(self, "kb", None)
        if kb is not None:
            kb.close()


class FastragHnsw(FastragExact):
    name = "fastrag-hnsw"
    label = "fastrag (HNSW)"
    index = "hnsw"
