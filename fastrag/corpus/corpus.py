"""What retrieval searches: :class:`Corpus`, one immutable version of a knowledge base's data.

A corpus is the chunk store, its vector index (exact, or an HNSW graph, or
an external store) and its keyword indexes (chunk BM25 and document BM25),
all describing the same rows, with the embedder that made the vectors.
How the next version is made is :mod:`fastrag.corpus.build`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..index.base import VectorIndex
from ..index.exact import ExactIndex
from ..index.graph import GraphIndex
from ..index.hnsw import HnswIndex
from ..index.keyword import BM25Index
from ..index.stores import StoreIndex, VectorStore
from ..store.chunks import ChunkStore
from .ontology import Ontology

__all__ = ["Corpus", "live_blocks", "make_corpus", "next_corpus"]


@dataclass(frozen=True, eq=False)
class Corpus:
    """One version of what retrieval searches (never changed once built).

    Attributes
    ----------
    store : ChunkStore
        The chunks, their vectors and metadata.
    vectors : VectorIndex
        The vector index over the store's rows.
    embedder : Embedder
        Embeds the questions (the one the chunks were embedded with).
    keyword : BM25Index or None
        Chunk BM25 over the store's rows (needed by ``keyword`` and ``hybrid``).
    documents : BM25Index or None
        Document BM25: one row per document instance of the store
        (:meth:`~fastrag.store.chunks.ChunkStore.row_docs`).
    graph : HnswIndex or None
        The HNSW graph behind :attr:`vectors`, when there is one.
    external : VectorStore or None
        The external vector store behind :attr:`vectors`, when there is one
        (shared by the versions, changed in place like the graph).
    ontology : Ontology or None
        Entities and aliases expanding the keyword legs' queries
        (:mod:`fastrag.corpus.ontology`), saved with the snapshot.
    """

    store: ChunkStore
    vectors: VectorIndex
    embedder: Any
    keyword: BM25Index | None = None
    documents: BM25Index | None = None
    graph: HnswIndex | None = None
    external: VectorStore | None = None
    ontology: Ontology | None = None


def make_corpus(
    store: ChunkStore,
    embedder: Any,
    *,
    graph: HnswIndex | None = None,
    keyword: BM25Index | None = None,
    documents: BM25Index | None = None,
    external: VectorStore | None = None,
    ontology: Ontology | None = None,
) -> Corpus:
    """A corpus over ``store``: its exact index, or ``graph`` / ``external`` seen by its rows."""
    exact = ExactIndex([s.vectors for s in store.segments], store.dim, store.alive_mask())
    vectors: VectorIndex = exact
    if external is not None:
        vectors = StoreIndex(external, store.chunk_ids(), exact)  # type: ignore[assignment]
    elif graph is not None:
        vectors = GraphIndex(graph, store.chunk_ids(), exact)
    return Corpus(store, vectors, embedder, keyword, documents, graph, external, ontology)


def next_corpus(corpus: Corpus, store: ChunkStore, **changes: Any) -> Corpus:
    """The corpus of ``store`` with the indexes of ``corpus`` unless ``changes`` says otherwise."""
    fields: dict[str, Any] = {
        "graph": corpus.graph,
        "keyword": corpus.keyword,
        "documents": corpus.documents,
        "external": corpus.external,
        "ontology": corpus.ontology,
    }
    fields.update(changes)
    return make_corpus(store, corpus.embedder, **fields)


def live_blocks(store: ChunkStore) -> list[tuple[np.ndarray, np.ndarray]]:
    """(vectors, chunk ids) of the live rows of every segment."""
    out = []
    for s in store.segments:
        keep = s.alive
        out.append(
            (s.vectors, s.chunk_ids) if keep is None else (s.vectors[keep], s.chunk_ids[keep])
        )
    return out
