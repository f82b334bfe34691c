"""LangChain: RecursiveCharacterTextSplitter(200, 40) + InMemoryVectorStore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .base import Runner


def _embeddings_class() -> type:
    from langchain_core.embeddings import Embeddings

    class HashedBigramEmbeddings(Embeddings):
        """LangChain's custom-embedding interface over the shared embedder."""

        def __init__(self, core: Any) -> None:
            self.core = core

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return self.core.embed(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return self.core.embed([text])[0].tolist()

    return HashedBigramEmbeddings


class LangChain(Runner):
    name = "langchain"
    label = "LangChain InMemoryVectorStore"
    chunker = "RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=40)"
    batch_api = "VectorStoreRetriever.batch (Runnable.batch: a thread pool)"
    batch_is_loop = True  # threads over single searches

    @classmethod
    def check(cls) -> None:
        import langchain_core.vectorstores  # noqa: F401
        import langchain_text_splitters  # noqa: F401

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version

        import langchain_core
        import langchain_text_splitters  # noqa: F401

        splitters = version("langchain-text-splitters")
        return f"langchain-core {langchain_core.__version__}, text-splitters {splitters}"

    def __init__(self, embedder: Any, workdir: Path) -> None:
        super().__init__(embedder, workdir)
        self.embeddings = _embeddings_class()(embedder)

    def _splitter(self) -> Any:
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        return RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=40)

    @staticmethod
    def _docs(docs: list[dict[str, Any]]) -> list[Any]:
        from langchain_core.documents import Document

        return [
            Document(page_content=d["text"], metadata={"doc_id": d["id"], "title": d.get("title")})
            for d in docs
        ]

    def chunk(self, docs: list[dict[str, Any]]) -> int:
        return len(self._splitter().split_documents(self._docs(docs)))

    def ingest(self, docs: list[dict[str, Any]]) -> None:
        from langchain_core.vectorstores import InMemoryVectorStore

        chunks = self._splitter().split_documents(self._docs(docs))
        self.vs = InMemoryVectorStore.from_documents(chunks, self.embeddings)
        self.retriever = self.vs.as_retriever(search_kwargs={"k": 10})

    def chunk_table(self) -> tuple[list[Any], np.ndarray, list[str]]:
        keys = list(self.vs.store.keys())
        recs = [self.vs.store[k] for k in keys]
        vectors = np.array([r["vector"] for r in recs], dtype=np.float32)
        return keys, vectors, [r["metadata"]["doc_id"] for r in recs]

    def query(self, question: str) -> list[Any]:
        return [d.id for d in self.vs.similarity_search(question, k=10)]

    def batch(self, questions: list[str]) -> Any:
        return self.retriever.batch(questions)

    def batch_keys(self, native: Any) -> list[list[Any]]:
        return [[d.id for d in docs] for docs in native]

    def persist(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.vs.dump(str(path / "store.json"))

    def reload(self, path: Path) -> None:
        from langchain_core.vectorstores import InMemoryVectorStore

        self.vs = InMemoryVectorStore.load(str(path / "store.json"), self.embeddings)
