"""Keyword (BM25) retrieval on a BEIR-layout set, each system with its default tokenisation.

Every system gets the same chunks: the documents (title + text, as
``BeirSet.documents()`` gives them) cut into 200/40 windows; fastrag cuts
them itself, the others get ``plain_chunks`` (the same strings). A
document's rank is its best chunk's: fastrag ranks documents itself
(``group_by="doc"``); for the others the top ``CANDIDATES`` chunks are
retrieved and de-duplicated by document, best first.
"""

from __future__ import annotations

from typing import Any

from .common import plain_chunk_docs

CANDIDATES = 100


def _dedupe(doc_ids: list[str], k: int) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for d in doc_ids:
        if d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) == k:
                break
    return out


class BM25Runner:
    name = "?"
    label = "?"
    tokenisation = "?"
    batch_api = "loop"

    @classmethod
    def check(cls) -> None:
        pass

    @classmethod
    def version(cls) -> str:
        return ""

    def index(self, docs: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def search(self, questions: list[str], k: int = 10) -> list[list[str]]:
        raise NotImplementedError


class FastragBM25(BM25Runner):
    name = "fastrag"
    label = 'fastrag mode="keyword", group_by="doc"'
    tokenisation = (
        'default Tokenizer(stem="porter"): CJK unigrams + bigrams, English stop words, Porter'
    )
    batch_api = "retrieve_batch"

    @classmethod
    def check(cls) -> None:
        import fastrag  # noqa: F401

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version

        return f"fastrag-engine {version('fastrag-engine')}"

    def index(self, docs: list[dict[str, Any]]) -> None:
        from fastrag import KnowledgeBase

        # The default build (it also fits the default embedder and embeds: included in the time).
        self.kb = KnowledgeBase.build(docs)
        self.n_chunks = len(self.kb)

    def search(self, questions: list[str], k: int = 10) -> list[list[str]]:
        t = self.kb.retrieve_batch(questions, k=k, mode="keyword", group_by="doc")
        out: list[list[str]] = [[] for _ in questions]
        for q, d in zip(
            t.column("query_index").to_pylist(), t.column("doc_id").to_pylist(), strict=True
        ):
            out[q].append(d)
        return out


class LlamaIndexBM25(BM25Runner):
    name = "llamaindex"
    label = "LlamaIndex BM25Retriever (llama-index-retrievers-bm25)"
    tokenisation = "defaults: bm25s regex (?u)\\b\\w\\w+\\b, English stop words, English stemmer"
    batch_api = "loop of retrieve"

    @classmethod
    def check(cls) -> None:
        import llama_index.retrievers.bm25  # noqa: F401

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version

        return (
            f"llama-index-retrievers-bm25 {version('llama-index-retrievers-bm25')}, "
            f"bm25s {version('bm25s')}"
        )

    def index(self, docs: list[dict[str, Any]]) -> None:
        from llama_index.core.schema import TextNode
        from llama_index.retrievers.bm25 import BM25Retriever

        texts, doc_ids = plain_chunk_docs(docs)
        nodes = [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(texts)]
        self.doc_of = {f"n{i}": d for i, d in enumerate(doc_ids)}
        self.retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=CANDIDATES)
        self.n_chunks = len(nodes)

    def search(self, questions: list[str], k: int = 10) -> list[list[str]]:
        return [
            _dedupe([self.doc_of[n.node.node_id] for n in self.retriever.retrieve(q)], k)
            for q in questions
        ]


class HaystackBM25(BM25Runner):
    name = "haystack"
    label = "Haystack InMemoryBM25Retriever"
    tokenisation = "defaults: InMemoryDocumentStore regex (words; CJK characters one by one), BM25L"
    batch_api = "loop of run"

    @classmethod
    def check(cls) -> None:
        import haystack  # noqa: F401

    @classmethod
    def version(cls) -> str:
        from importlib.metadata import version

        return f"haystack-ai {version('haystack-ai')}"

    def index(self, docs: list[dict[str, Any]]) -> None:
        from haystack import Document
        from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
        from haystack.document_stores.in_memory import InMemoryDocumentStore

        texts, doc_ids = plain_chunk_docs(docs)
        self.store = InMemoryDocumentStore()
        self.store.write_documents(
            [
                Document(content=t, meta={"doc_id": d, "chunk": i})
                for i, (t, d) in enumerate(zip(texts, doc_ids, strict=True))
            ]
        )
        self.retriever = InMemoryBM25Retriever(document_store=self.store, top_k=CANDIDATES)
        self.n_chunks = len(texts)

    def search(self, questions: list[str], k: int = 10) -> list[list[str]]:
        return [
            _dedupe([d.meta["doc_id"] for d in self.retriever.run(query=q)["documents"]], k)
            for q in questions
        ]
