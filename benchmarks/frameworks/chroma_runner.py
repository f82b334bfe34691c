"""Chroma: in-process PersistentClient, our embedding_function, cosine space.

Chroma has no splitter: it gets the plain 200/40 windows (fastrag's chunks).
Its only vector index is HNSW (no flat search), so agree@10 < 1 is expected.
``PersistentClient`` writes while adding: ingestion includes persisting,
and the store directory is the one reloaded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .base import Runner
from .common import plain_chunk_docs


def _ef_class() -> type:
    from chromadb import Documents, EmbeddingFunction, Embeddings

    class HashedBigramEF(EmbeddingFunction):
        """Chroma's custom embedding_function over the shared embedder."""

        core: Any = None

        def __init__(self) -> None:
            pass

        def __call__(self, input: Documents) -> Embeddings:  # noqa: A002
            return list(type(self).core.embed(list(input)))

        @staticmethod
        def name() -> str:
            return "hashed-bigram-384"

        def get_config(self) -> dict[str, Any]:
            return {}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> Any:
            return HashedBigramEF()

    return HashedBigramEF


class Chroma(Runner):
    name = "chroma"
    label = "Chroma (PersistentClient)"
    chunker = "Python windows 200/40 (Chroma has no splitter)"
    batch_api = "collection.query(query_texts=[...])"
    batch_is_loop = False
    persist_note = "written during ingestion"

    @classmethod
    def check(cls) -> None:
        import chromadb  # noqa: F401

    @classmethod
    def version(cls) -> str:
        import chromadb

        return f"chromadb {chromadb.__version__}"

    def __init__(self, embedder: Any, workdir: Path) -> None:
        super().__init__(embedder, workdir)
        self.ef_cls = _ef_class()
        self.ef_cls.core = embedder
        self.path = self.workdir / "store"

    def _client(self) -> Any:
        import chromadb
        from chromadb.config import Settings

        return chromadb.PersistentClient(
            path=str(self.path), settings=Settings(anonymized_telemetry=False)
        )

    def chunk(self, docs: list[dict[str, Any]]) -> int:
        return len(plain_chunk_docs(docs)[0])

    def ingest(self, docs: list[dict[str, Any]]) -> None:
        self.texts, self.doc_ids = plain_chunk_docs(docs)
        self.client = self._client()
        self.col = self.client.create_collection(
            "chunks", embedding_function=self.ef_cls(), configuration={"hnsw": {"space": "cosine"}}
        )
        step = self.client.get_max_batch_size()
        for lo in range(0, len(self.texts), step):
            hi = min(lo + step, len(self.texts))
            self.col.add(
                ids=[str(i) for i in range(lo, hi)],
                documents=self.texts[lo:hi],
                metadatas=[{"doc_id": d} for d in self.doc_ids[lo:hi]],
            )

    def chunk_table(self) -> tuple[list[Any], np.ndarray, list[str]]:
        # The embedder is deterministic: the vectors Chroma was given.
        return [str(i) for i in range(len(self.texts))], self.emb.embed(self.texts), self.doc_ids

    def query(self, question: str) -> list[Any]:
        return self.col.query(query_texts=[question], n_results=10)["ids"][0]

    def batch(self, questions: list[str]) -> Any:
        return self.col.query(query_texts=questions, n_results=10)

    def batch_keys(self, native: Any) -> list[list[Any]]:
        return native["ids"]

    def persist(self, path: Path) -> None:
        # Already on disk at self.path (PersistentClient); nothing to do.
        pass

    def reload(self, path: Path) -> None:
        self.path = path
        self.client = self._client()
        self.col = self.client.get_collection("chunks", embedding_function=self.ef_cls())
