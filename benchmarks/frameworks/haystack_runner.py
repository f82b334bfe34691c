"""Haystack: RecursiveDocumentSplitter (characters) + InMemoryDocumentStore + embedding retriever.

Haystack's ``DocumentSplitter`` has no character unit (word, sentence,
passage, page, line, period, token, function); with ``split_by="word"`` a
run of Chinese without spaces is one "word". Its ``RecursiveDocumentSplitter``
with ``split_unit="char"`` is Haystack's character splitter, so that one is
used at 200/40.
"""

# No "from __future__ import annotations": Haystack reads the components' run() annotations.

from pathlib import Path
from typing import Any

import numpy as np

from .base import Runner


def _components() -> tuple[type, type]:
    from haystack import Document, component

    @component
    class HashedBigramDocumentEmbedder:
        """A custom document-embedder component over the shared embedder."""

        def __init__(self, core: Any) -> None:
            self.core = core

        @component.output_types(documents=list[Document])
        def run(self, documents: list[Document]) -> dict[str, Any]:
            vectors = self.core.embed([d.content or "" for d in documents])
            for d, v in zip(documents, vectors.tolist(), strict=True):
                d.embedding = v
            return {"documents": documents}

    @component
    class HashedBigramTextEmbedder:
        """A custom text-embedder component over the shared embedder."""

        def __init__(self, core: Any) -> None:
            self.core = core

        @component.output_types(embedding=list[float])
        def run(self, text: str) -> dict[str, Any]:
            return {"embedding": self.core.embed([text])[0].tolist()}

    return HashedBigramDocumentEmbedder, HashedBigramTextEmbedder


def _punkt_available() -> bool:
    """Whether NLTK finds punkt_tab (Haystack downloads it at run time; offline it cannot).

    llama-index-core ships a copy in its wheel (``_static/nltk_cache``); when
    NLTK's own search path has none, that copy is added, so that Haystack's
    default separators (with "sentence") work as they would online.
    """
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab")
        return True
    except LookupError:
        pass
    try:
        import importlib.util

        spec = importlib.util.find_spec("llama_index.core")
    except ModuleNotFoundError:
        spec = None
    if spec is not None and spec.origin:
        cache = Path(spec.origin).parent / "_static" / "nltk_cache"
        if (cache / "tokenizers" / "punkt_tab").is_dir():
            nltk.data.path.append(str(cache))
            return True
    return False


class Haystack(Runner):
    name = "haystack"
    label = "Haystack InMemoryDocumentStore"
    chunker = 'RecursiveDocumentSplitter(split_length=200, split_overlap=40, split_unit="char")'
    batch_api = "loop of query Pipeline.run (no batch API)"

    @classmethod
    def check(cls) -> None:
        import haystack  # noqa: F401

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version

        return f"haystack-ai {version('haystack-ai')}"

    def __init__(self, embedder: Any, workdir: Path) -> None:
        super().__init__(embedder, workdir)
        if not _punkt_available():
            self.chunker += ' with separators ["\\n\\n", "\\n", " "] (no NLTK punkt_tab)'
        self.doc_embedder_cls, self.text_embedder_cls = _components()

    @staticmethod
    def _splitter() -> Any:
        from haystack.components.preprocessors import RecursiveDocumentSplitter

        if _punkt_available():
            s = RecursiveDocumentSplitter(split_length=200, split_overlap=40, split_unit="char")
        else:  # the "sentence" separator needs NLTK's punkt_tab model
            s = RecursiveDocumentSplitter(
                split_length=200,
                split_overlap=40,
                split_unit="char",
                separators=["\n\n", "\n", " "],
            )
        s.warm_up()
        return s

    @staticmethod
    def _docs(docs: list[dict[str, Any]]) -> list[Any]:
        from haystack import Document

        return [Document(content=d["text"], meta={"doc_id": d["id"]}) for d in docs]

    def chunk(self, docs: list[dict[str, Any]]) -> int:
        return len(self._splitter().run(self._docs(docs))["documents"])

    def ingest(self, docs: list[dict[str, Any]]) -> None:
        from haystack import Pipeline
        from haystack.components.writers import DocumentWriter
        from haystack.document_stores.in_memory import InMemoryDocumentStore

        self.store = InMemoryDocumentStore()
        p = Pipeline()
        p.add_component("splitter", self._splitter())
        p.add_component("embedder", self.doc_embedder_cls(self.emb))
        p.add_component("writer", DocumentWriter(document_store=self.store))
        p.connect("splitter.documents", "embedder.documents")
        p.connect("embedder.documents", "writer.documents")
        p.run({"splitter": {"documents": self._docs(docs)}})
        self._query_pipeline()

    def _query_pipeline(self) -> None:
        from haystack import Pipeline
        from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever

        q = Pipeline()
        q.add_component("text_embedder", self.text_embedder_cls(self.emb))
        q.add_component(
            "retriever", InMemoryEmbeddingRetriever(document_store=self.store, top_k=10)
        )
        q.connect("text_embedder.embedding", "retriever.query_embedding")
        self.pipeline = q

    def chunk_table(self) -> tuple[list[Any], np.ndarray, list[str]]:
        docs = list(self.store.storage.values())
        vectors = np.array([d.embedding for d in docs], dtype=np.float32)
        return [d.id for d in docs], vectors, [d.meta["doc_id"] for d in docs]

    def query(self, question: str) -> list[Any]:
        out = self.pipeline.run({"text_embedder": {"text": question}})
        return [d.id for d in out["retriever"]["documents"]]

    def persist(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.store.save_to_disk(str(path / "store.json"))

    def reload(self, path: Path) -> None:
        from haystack.document_stores.in_memory import InMemoryDocumentStore

        self.store = InMemoryDocumentStore.load_from_disk(str(path / "store.json"))
        self._query_pipeline()
