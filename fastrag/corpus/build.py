"""How the next corpus is made: build, add, delete, compact, another vector index.

A :class:`~fastrag.corpus.corpus.Corpus` is never changed once built:
:func:`build_corpus`, :func:`add_documents`, :func:`delete_documents`,
:func:`compact` and :func:`with_index` return the next version, sharing
what did not change (segments, postings, the graph), so a reader holding a
corpus sees one consistent state whatever runs beside it.

The one object versions share and change in place is the HNSW graph:
adding inserts the new chunks into it (under its write lock) and deleting
marks them deleted there. A reader of an older version meets labels it does
not hold and drops them (:class:`~fastrag.index.graph.GraphIndex`), and
stops seeing deleted chunks at once, which is what a delete asks for.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..embed.base import document_vectors, utf8_embedder
from ..embed.vocabulary import CodepointCounter, VocabularyEmbedder
from ..errors import DocumentError, DocumentNotFoundError, DuplicateDocumentError
from ..index.graph import COMPACT_GRAPH_SHARE, build_graph, choose_index
from ..index.hnsw import HnswConfig
from ..index.keyword import BM25Index, add_with_documents
from ..index.stores import VectorStore, is_store_spec, parse_store
from ..index.stores.base import payload_table, store_errors, write_rows
from ..store.chunks import ChunkStore, instance_starts
from ..store.ingest import BuildProgress, Pending, assemble, chunk_batches, keyword_texts
from ..text.chunking import Chunker, Chunks
from ..text.tokenize import Tokenizer
from .corpus import Corpus, live_blocks, make_corpus, next_corpus

__all__ = [
    "add_documents",
    "build_corpus",
    "compact",
    "delete_documents",
    "fill_store",
    "with_index",
]


def _store_rows(
    external: VectorStore, batch: Any, dim: int, keep: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, Any]:
    """(chunk ids, vectors, payload) of a chunk batch's rows (``keep``: a row mask)."""
    vectors = np.asarray(batch.column("vector").values).reshape(batch.num_rows, dim)
    ids = batch.column("chunk_id").to_numpy()
    payload = payload_table(batch)
    if keep is not None:
        vectors, ids = vectors[keep], ids[keep]
        payload = payload.filter(keep)
    return ids, vectors, payload


def fill_store(spec: str | VectorStore, store: ChunkStore) -> VectorStore:
    """A new external store holding the live rows of ``store`` (written in batches).

    Raises
    ------
    SearchIndexError
        The store failed.
    """
    external = parse_store(spec)
    external.create(store.dim)
    blocks = live_blocks(store)
    if blocks and any(len(ids) for _, ids in blocks):
        with store_errors(external, "train"):
            external.train(np.concatenate([v for v, _ in blocks]))
    for seg in store.segments:
        if len(seg):
            write_rows(external, *_store_rows(external, seg.batch, store.dim, seg.alive))
    with store_errors(external, "index"):
        external.finish()
    return external


def _embed(embedder: Any, threads: int | None) -> Callable[[Chunks, np.ndarray | None], np.ndarray]:
    """The ``embed`` callback of :func:`~fastrag.store.ingest.assemble` for ``embedder``."""
    kernel = utf8_embedder(embedder)

    def embed(chunks: Chunks, out: np.ndarray | None) -> np.ndarray:
        if kernel is not None:
            return kernel.embed_utf8(  # type: ignore[no-any-return]
                chunks.text_data, chunks.text_offsets, out=out, threads=threads
            )
        return document_vectors(embedder, chunks.texts())

    return embed


def _index_keywords(
    keyword: BM25Index | None,
    documents: BM25Index | None,
    batch: Any,
    overlap: int,
    threads: int | None,
) -> None:
    if keyword is None or documents is None:
        return
    chunk_texts, doc_texts = keyword_texts(batch, overlap)
    if batch.num_rows == 0:
        keyword.add(*chunk_texts, threads=threads)
        documents.add(*doc_texts, threads=threads)
        return
    # the documents' tokens come from the chunks' (tokenised once)
    add_with_documents(
        keyword,
        documents,
        *chunk_texts,
        batch.column("start").to_numpy(zero_copy_only=False),
        batch.column("end").to_numpy(zero_copy_only=False),
        np.append(instance_starts(batch), batch.num_rows).astype(np.int64),
        *doc_texts,
        threads=threads,
    )


def build_corpus(
    docs: Iterable[Any],
    chunker: Chunker,
    embedder: Any,
    *,
    index: str | VectorStore = "exact",
    hnsw: HnswConfig | None = None,
    tokenizer: Tokenizer | None = None,
    keyword: bool = True,
    threads: int | None = None,
    progress: Callable[[BuildProgress], None] | None = None,
) -> tuple[Corpus, str, dict[str, Any] | None]:
    """Chunk, embed and index documents into a first corpus.

    Parameters
    ----------
    docs : iterable
        Documents (consumed once, in batches).
    chunker : Chunker
        How to cut them.
    embedder : Embedder
        An unfitted :class:`~fastrag.VocabularyEmbedder` is fitted on the chunks.
    index : str or VectorStore
        ``"exact"``, ``"hnsw"``, ``"auto"`` (see
        :func:`~fastrag.index.graph.choose_index`), or an external store
        (:func:`~fastrag.index.stores.parse_store`).
    hnsw : HnswConfig, optional
        Graph parameters.
    tokenizer : Tokenizer, optional
        Keyword tokenizer; default ``Tokenizer(stem="porter")``.
    keyword : bool
        Build the BM25 indexes.
    threads : int, optional
        Threads for chunking, embedding and indexing.
    progress : callable, optional
        Called with a :class:`~fastrag.store.ingest.BuildProgress` as the build goes.

    Returns
    -------
    tuple
        The corpus, the vector index chosen, and the ``auto`` record (or None).
    """
    import time

    t0 = time.perf_counter()
    fit = isinstance(embedder, VocabularyEmbedder) and not embedder.fitted
    counter = CodepointCounter(threads=threads) if fit else None
    pending: list[Pending] = []
    for p in chunk_batches(docs, chunker, threads=threads, progress=progress):
        if counter is not None and p.chunks is not None:
            counter.add(p.chunks.text_data, 0, int(p.chunks.text_offsets[-1]))
        pending.append(p)
    n_docs = sum(len(p.docs) for p in pending)
    n_chunks = sum(len(p.chunks) for p in pending if p.chunks is not None)
    if counter is not None:
        if n_chunks == 0:
            raise DocumentError(
                "no document has any text: cannot fit a vocabulary; pass documents "
                "with text or a fitted embedder"
            )
        embedder.fit_counts(counter.total())
    elif getattr(embedder, "fitted", True) is False and callable(
        getattr(embedder, "fit_utf8", None)
    ):
        # An embedder that learns from the chunks: a static table distilled from a teacher.
        embedder.fit_utf8(
            [(p.chunks.text_data, p.chunks.text_offsets) for p in pending if p.chunks is not None],
            threads=threads,
        )
    dim = embedder.dim if utf8_embedder(embedder) is not None else None
    batch = assemble(pending, _embed(embedder, threads), dim=dim, first_chunk_id=0)
    del pending, counter
    store = ChunkStore(batch.schema.field("vector").type.list_size if batch else embedder.dim)
    if batch is not None:
        store.append(batch)
    n_bytes = sum(int(s.batch.column("text").buffers()[2].size) for s in store.segments if len(s))

    def report(stage: str) -> None:
        if progress is not None:
            progress(BuildProgress(stage, n_docs, n_chunks, n_bytes, time.perf_counter() - t0))

    report("index")
    chunk_bm25 = doc_bm25 = None
    if keyword:
        tok = tokenizer or Tokenizer(stem="porter")
        chunk_bm25, doc_bm25 = BM25Index(tok), BM25Index(tok)
        for seg in store.segments:
            _index_keywords(chunk_bm25, doc_bm25, seg.batch, chunker.overlap, threads)
    external = None
    if is_store_spec(index):
        external = fill_store(index, store)
        kind, graph, auto = external.engine, None, None
    else:
        assert isinstance(index, str)
        kind, graph, auto = choose_index(
            live_blocks(store), store.dim, index, hnsw or HnswConfig(), threads=threads
        )
    report("done")
    corpus = make_corpus(
        store, embedder, graph=graph, keyword=chunk_bm25, documents=doc_bm25, external=external
    )
    return corpus, kind, auto


def add_documents(
    corpus: Corpus,
    docs: Iterable[Any],
    chunker: Chunker,
    *,
    replace: Iterable[str] = (),
    threads: int | None = None,
) -> tuple[Corpus, int]:
    """The next corpus with ``docs`` added; every document is checked and embedded first.

    Ids already stored raise :class:`~fastrag.errors.DuplicateDocumentError`
    and nothing changes, unless listed in ``replace``: the stored documents
    of those ids are deleted in the same step (a sync's replacements and
    deletions), once the new ones are ready. Returns the new corpus and the
    number of chunks added.
    """
    stored = corpus.store.doc_index()
    removed = [d for d in dict.fromkeys(replace) if d in stored]
    replaced = set(removed)

    def fresh(batch: Any) -> None:
        for doc_id in batch.ids:
            if doc_id in stored and doc_id not in replaced:
                raise DuplicateDocumentError(
                    f"document id {doc_id!r} is already in the knowledge base; delete it "
                    "first to replace it"
                )

    pending = list(chunk_batches(docs, chunker, threads=threads, seen=fresh))
    learn = getattr(corpus.embedder, "learn_utf8", None)
    if callable(learn):  # a static table asks its teacher for the items it lacks
        for p in pending:
            if p.chunks is not None:
                learn(p.chunks.text_data, p.chunks.text_offsets, threads=threads)
    dim = corpus.store.dim if utf8_embedder(corpus.embedder) is not None else None
    batch = assemble(
        pending,
        _embed(corpus.embedder, threads),
        dim=dim,
        first_chunk_id=corpus.store.next_chunk_id,
    )
    if batch is None and not removed:
        return corpus, 0
    external = corpus.external
    if external is not None:  # the store first: a failure there changes nothing here
        _store_add(corpus, external, batch, [stored[d] for d in removed])
    # The keyword indexes swap in new arrays on add(): shallow copies keep the old ones intact.
    keyword, documents = copy.copy(corpus.keyword), copy.copy(corpus.documents)
    if batch is not None:
        _index_keywords(keyword, documents, batch, chunker.overlap, threads)
        if corpus.graph is not None:
            vectors = np.asarray(batch.column("vector").values).reshape(batch.num_rows, -1)
            corpus.graph.add(vectors, batch.column("chunk_id").to_numpy(), threads=threads)
    store = corpus.store.copy()
    if removed:
        if corpus.graph is not None:
            spans = [stored[d] for d in removed]
            rows = np.concatenate([np.arange(sp.start, sp.start + sp.count) for sp in spans])
            corpus.graph.mark_deleted(store.chunk_ids()[rows])
        store.delete_docs(removed)
    if batch is not None:
        store.append(batch)
    added = 0 if batch is None else batch.num_rows
    return next_corpus(corpus, store, keyword=keyword, documents=documents), added


def _span_rows(spans: Sequence[Any]) -> np.ndarray:
    if not spans:
        return np.zeros(0, np.int64)
    return np.concatenate([np.arange(sp.start, sp.start + sp.count) for sp in spans])


def _store_add(corpus: Corpus, external: VectorStore, batch: Any, spans: Sequence[Any]) -> None:
    """Write an add (and the deletes of what it replaces) to the external store, or nothing.

    Raises
    ------
    SearchIndexError
        The store failed; what this call wrote there is removed again.
    """
    new_ids = None
    if batch is not None:
        new_ids, vectors, payload = _store_rows(external, batch, corpus.store.dim)
        write_rows(external, new_ids, vectors, payload)
    if spans:
        try:
            with store_errors(external, "delete"):
                external.delete(corpus.store.chunk_ids()[_span_rows(spans)])
        except Exception:
            if new_ids is not None:
                with contextlib.suppress(Exception):
                    external.delete(new_ids)
            raise


def delete_documents(
    corpus: Corpus, doc_ids: Sequence[str], *, missing_ok: bool = False
) -> tuple[Corpus, int]:
    """The next corpus without the chunks of ``doc_ids``; returns it and the chunks deleted.

    Ids not stored raise :class:`~fastrag.errors.DocumentNotFoundError` (and
    nothing changes) unless ``missing_ok``.
    """
    index = corpus.store.doc_index()
    missing = [d for d in doc_ids if d not in index]
    if missing and not missing_ok:
        shown = ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else "")
        raise DocumentNotFoundError(
            f"{len(missing)} document id(s) not in the knowledge base: {shown}"
        )
    present = [d for d in doc_ids if d in index]
    if not present:
        return corpus, 0
    if corpus.external is not None:  # the store first: a failure there changes nothing here
        with store_errors(corpus.external, "delete"):
            ids = corpus.store.chunk_ids()[_span_rows([index[d] for d in present])]
            corpus.external.delete(ids)
    store = corpus.store.copy()
    if corpus.graph is not None:
        spans = [index[d] for d in present]
        rows = np.concatenate([np.arange(sp.start, sp.start + sp.count) for sp in spans])
        corpus.graph.mark_deleted(store.chunk_ids()[rows])
    killed = store.delete_docs(present)
    return next_corpus(corpus, store), killed


def compact(corpus: Corpus, hnsw: HnswConfig, *, threads: int | None = None) -> tuple[Corpus, int]:
    """The next corpus without deleted chunks; returns it and how many were dropped.

    The keyword indexes are renumbered to match, and the HNSW graph is
    rebuilt when :data:`~fastrag.index.graph.COMPACT_GRAPH_SHARE` of it is
    deleted. Chunk ids do not change. An external store is compacted even
    when no chunk is deleted (LanceDB folds the rows added since its ANN
    index was built into it, and builds one once adds took the table past
    ``ann_rows``): the corpus is then returned as it was, the store changed
    in place.
    """
    old = corpus.store
    dead = old.n_dead
    if dead == 0:
        if corpus.external is not None:
            with store_errors(corpus.external, "compact"):
                corpus.external.compact(old.chunk_ids())
        return corpus, 0
    keep = old.alive_mask()
    assert keep is not None
    keep_docs = keep[old.doc_starts()[:-1]]
    store = old.compacted()
    keyword = corpus.keyword.compact(keep, threads=threads) if corpus.keyword is not None else None
    documents = (
        corpus.documents.compact(keep_docs, threads=threads)
        if corpus.documents is not None
        else None
    )
    if corpus.external is not None:
        with store_errors(corpus.external, "compact"):
            corpus.external.compact(store.chunk_ids())
    graph = corpus.graph
    if graph is not None and graph.n_deleted >= COMPACT_GRAPH_SHARE * max(
        1, len(graph) + graph.n_deleted
    ):
        graph = build_graph(
            live_blocks(store), store.dim, hnsw, capacity=len(store), threads=threads
        )
    return next_corpus(corpus, store, graph=graph, keyword=keyword, documents=documents), dead


def with_index(
    corpus: Corpus, index: str | VectorStore, hnsw: HnswConfig, *, threads: int | None = None
) -> tuple[Corpus, str, dict[str, Any] | None]:
    """The corpus with another vector index (``"exact"``, ``"hnsw"``, ``"auto"`` or a store)."""
    store = corpus.store
    if is_store_spec(index):
        external = fill_store(index, store)
        return next_corpus(corpus, store, graph=None, external=external), external.engine, None
    assert isinstance(index, str)
    kind, graph, auto = choose_index(live_blocks(store), store.dim, index, hnsw, threads=threads)
    return next_corpus(corpus, store, graph=graph, external=None), kind, auto
