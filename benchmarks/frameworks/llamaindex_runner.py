"""LlamaIndex: SentenceSplitter(200, 40) + VectorStoreIndex (default SimpleVectorStore)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .base import Runner


def _embedding_class() -> type:
    from llama_index.core.embeddings import BaseEmbedding
    from pydantic import PrivateAttr

    class HashedBigramEmbedding(BaseEmbedding):
        """LlamaIndex's custom-embedding interface over the shared embedder."""

        _core: Any = PrivateAttr()

        def __init__(self, core: Any, **kwargs: Any) -> None:
            super().__init__(model_name="hashed-bigram-384", **kwargs)
            self._core = core

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._core.embed([query])[0].tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._core.embed([text])[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return self._core.embed(texts).tolist()

    return HashedBigramEmbedding


class LlamaIndex(Runner):
    name = "llamaindex"
    label = "LlamaIndex VectorStoreIndex"
    # chunk_size / chunk_overlap count tokens of `tokenizer`; tokenizer=list makes them
    # characters (the default tiktoken tokens would give chunks of about 500 characters).
    chunker = "SentenceSplitter(chunk_size=200, chunk_overlap=40, tokenizer=list)"
    batch_api = "loop of retriever.retrieve (no batch API)"

    @classmethod
    def check(cls) -> None:
        import llama_index.core  # noqa: F401

    @classmethod
    def version(cls) -> str:
        import llama_index.core

        return f"llama-index-core {llama_index.core.__version__}"

    def __init__(self, embedder: Any, workdir: Path) -> None:
        super().__init__(embedder, workdir)
        self.embed_model = _embedding_class()(embedder)  # embed_batch_size: the default (10)

    @staticmethod
    def _splitter() -> Any:
        from llama_index.core.node_parser import SentenceSplitter

        return SentenceSplitter(chunk_size=200, chunk_overlap=40, tokenizer=list)

    @staticmethod
    def _docs(docs: list[dict[str, Any]]) -> list[Any]:
        from llama_index.core import Document

        # No metadata: LlamaIndex would prepend it to the text it embeds.
        return [Document(text=d["text"], id_=d["id"]) for d in docs]

    def chunk(self, docs: list[dict[str, Any]]) -> int:
        return len(self._splitter().get_nodes_from_documents(self._docs(docs)))

    def ingest(self, docs: list[dict[str, Any]]) -> None:
        from llama_index.core import VectorStoreIndex

        self.index = VectorStoreIndex.from_documents(
            self._docs(docs), transformations=[self._splitter()], embed_model=self.embed_model
        )
        self.retriever = self.index.as_retriever(similarity_top_k=10)

    def chunk_table(self) -> tuple[list[Any], np.ndarray, list[str]]:
        data = self.index.vector_store.data
        keys = list(data.embedding_dict.keys())
        vectors = np.array([data.embedding_dict[k] for k in keys], dtype=np.float32)
        return keys, vectors, [data.text_id_to_ref_doc_id[k] for k in keys]

    def query(self, question: str) -> list[Any]:
        return [n.node.node_id for n in self.retriever.retrieve(question)]

    def persist(self, path: Path) -> None:
        self.index.storage_context.persist(persist_dir=str(path))

    def reload(self, path: Path) -> None:
        from llama_index.core import StorageContext, load_index_from_storage

        ctx = StorageContext.from_defaults(persist_dir=str(path))
        self.index = load_index_from_storage(ctx, embed_model=self.embed_model)
        self.retriever = self.index.as_retriever(similarity_top_k=10)
