"""``KnowledgeBase``: build, update, save, load and search a knowledge base."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ._fs import sha256_file
from ._native import fusion as _fusion_kernels
from ._native import topk as _topk_kernels
from ._native.chunking import join_windows
from ._threads import threads as _threads
from .answer.generate import Generator, as_generator
from .answer.pipeline import check_options, finish, is_model_bound, prepare
from .answer.redact import Redactor
from .answer.stages import StageTimer
from .answer.structured import answer_json, check_schema_support
from .embed.base import (
    Embedder,
    check_embedder,
    check_embedder_matches,
    document_vectors,
    embedder_from_config,
    query_vectors,
    utf8_embedder,
)
from .embed.vocabulary import CodepointCounter, VocabularyEmbedder
from .errors import (
    ConfigError,
    DocumentError,
    DocumentNotFoundError,
    DuplicateDocumentError,
    StoreCorruptedError,
)
from .index.exact import exact_topk
from .index.hnsw import AUTO_MIN_ROWS, HnswConfig, HnswIndex, auto_choice
from .index.keyword import BM25_FILE, BM25Index
from .models.concurrency import STREAM_BLOCK as _STREAM_BLOCK
from .models.concurrency import generate_stream, streams
from .retrieve.filters import Principal, acl_mask, canonical_key, where_mask
from .retrieve.options import RetrievalConfig, check_mode, vector_weight_for
from .retrieve.rerank import LLMReranker, Reranker, apply_reranker
from .retrieve.rewrite import LLMRewriter, QueryRewriter, RewrittenQuery
from .store.chunks import ChunkStore, build_batch, metadata_of
from .store.documents import DocBatch, iter_batches
from .store.snapshots import (
    SnapshotInfo,
    list_snapshots,
    prune_snapshots,
    read_manifest,
    snapshot_entry,
    write_snapshot,
)
from .text.chunking import Chunker
from .text.tokenize import Tokenizer
from .text.utf8 import utf8_buffers
from .types import Answer, Generation, Hit

__all__ = ["ANSWER_BATCH_SCHEMA", "BuildProgress", "KnowledgeBase"]

INDEX_KINDS = ("exact", "hnsw")
HNSW_FILE = "hnsw.bin"
BM25_DOCS_FILE = "bm25_docs.arrow"
COMPACT_HNSW_SHARE = 0.2
"""compact() rebuilds the HNSW graph when this share of its elements is deleted."""
_FILTER_CACHE_SIZE = 32

ANSWER_BATCH_SCHEMA = pa.schema(
    [
        pa.field("query_index", pa.int32(), nullable=False),
        pa.field("question", pa.string()),
        pa.field("answer", pa.string()),
        pa.field("found", pa.bool_(), nullable=False),
        pa.field("chunk_ids", pa.list_(pa.int64())),
        pa.field("scores", pa.list_(pa.float32())),
        pa.field("citations", pa.list_(pa.int64())),
        pa.field("confidence", pa.float32()),
        pa.field("faithfulness", pa.float32()),
        pa.field("high_risk", pa.bool_(), nullable=False),
        pa.field("error", pa.string()),
    ]
)
"""Columns of :meth:`KnowledgeBase.answer_batch`."""

_BATCH_SCHEMA = pa.schema(
    [
        pa.field("query_index", pa.int32(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("chunk_id", pa.int64(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class BuildProgress:
    """What a long build has done so far (passed to ``progress=`` callbacks)."""

    stage: str  # "chunk", "embed" or "done"
    documents: int
    chunks: int
    text_bytes: int
    seconds: float


@dataclass(slots=True)
class _Pending:
    docs: DocBatch
    chunks: Any  # fastrag.text.chunking.Chunks


def _check_index(index: str, *, allow_auto: bool) -> str:
    kinds = INDEX_KINDS + (("auto",) if allow_auto else ())
    if index not in kinds:
        raise ConfigError(f"index must be one of {', '.join(map(repr, kinds))}; got {index!r}")
    return index


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k must be a positive int, got {k!r}")
    return int(k)


def _check_question(question: object, where: str = "question") -> str:
    if not isinstance(question, str):
        raise ConfigError(f"{where} must be a str, got {type(question).__name__}")
    if not question.strip():
        raise ConfigError(f"{where} is empty")
    return question


class KnowledgeBase:
    """Chunks, vectors, keyword index and metadata of a document collection, searchable.

    Create one with :meth:`build` or :meth:`load`; the constructor is internal.
    """

    def __init__(
        self,
        *,
        store: ChunkStore,
        embedder: Embedder,
        chunker: Chunker,
        index: str = "exact",
        hnsw: HnswIndex | None = None,
        hnsw_config: HnswConfig | None = None,
        bm25: BM25Index | None = None,
        doc_bm25: BM25Index | None = None,
        retrieval: RetrievalConfig | None = None,
        rewriter: Any = None,
        path: Path | None = None,
        snapshot: str | None = None,
        auto: dict[str, Any] | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._chunker = chunker
        self._index = _check_index(index, allow_auto=False)
        self._hnsw = hnsw
        self._hnsw_config = hnsw_config or HnswConfig()
        self._bm25 = bm25
        self._doc_bm25 = doc_bm25
        self._retrieval = retrieval or RetrievalConfig()
        self.rewriter = rewriter if rewriter is not None else QueryRewriter()
        self._path = path
        self._snapshot = snapshot
        self._dirty = path is None
        self._auto = auto
        self._lock = threading.RLock()  # writers (add, delete, compact, save) take it
        self.redactor = Redactor()
        """PII redaction of model-bound text; replace it to add ``extra_pii_patterns``."""
        self._metrics_lock = threading.Lock()
        self._metrics = {"retrievals": 0, "answers": 0, "answers_citing": 0}

    # -- construction ----------------------------------------------------------
    @classmethod
    def build(
        cls,
        docs: Iterable[Any],
        *,
        window: int = 200,
        overlap: int = 40,
        embedder: Embedder | None = None,
        index: str = "exact",
        hnsw: HnswConfig | dict[str, Any] | None = None,
        keyword: bool = True,
        tokenizer: Tokenizer | None = None,
        retrieval: RetrievalConfig | None = None,
        rewriter: Any = None,
        threads: int | None = None,
        progress: Callable[[BuildProgress], None] | None = None,
    ) -> KnowledgeBase:
        """Chunk, embed and index documents.

        Parameters
        ----------
        docs : iterable
            :class:`~fastrag.Document` objects or dicts with ``id`` and ``text``
            (plus optional ``title``, ``source``, ``updated_at``, ``acl`` and
            any other metadata). Consumed once, in batches: a generator over
            a large corpus is never held in memory whole.
        window, overlap : int
            Chunk size and overlap, in characters (``window > overlap >= 0``).
        embedder : Embedder, optional
            Default: a :class:`~fastrag.VocabularyEmbedder` fitted on the chunks.
            An unfitted ``VocabularyEmbedder`` is fitted on the chunks too.
        index : {"exact", "hnsw", "auto"}
            Vector index. ``"auto"`` keeps exact search below
            :data:`~fastrag.index.hnsw.AUTO_MIN_ROWS` chunks, and above it builds
            HNSW but keeps exact search when HNSW's recall@10 on a sample of
            the corpus's own chunks is under 0.95.
        hnsw : HnswConfig or dict, optional
            HNSW parameters (``M``, ``ef_construction``, ``ef_search``,
            ``random_seed``).
        keyword : bool, default True
            Build the BM25 keyword index (needed by the ``keyword`` and
            ``hybrid`` modes).
        tokenizer : Tokenizer, optional
            Keyword tokenizer; default ``Tokenizer(stem="porter")``: English
            stop words dropped and Porter-stemmed, CJK characters + bigrams.
        retrieval : RetrievalConfig, optional
            Default mode and fusion settings.
        rewriter : callable, optional
            Query rewriter; default :class:`~fastrag.QueryRewriter` (no synonyms).
        threads : int, optional
            Threads for chunking, embedding and index building.
        progress : callable, optional
            Called with a :class:`BuildProgress` after each batch.

        Returns
        -------
        KnowledgeBase
            In memory; :meth:`save` writes it to disk.
        """
        chunker = Chunker(window=window, overlap=overlap)
        index = _check_index(index, allow_auto=True)
        hnsw_config = _hnsw_config(hnsw)
        emb = VocabularyEmbedder() if embedder is None else embedder
        check_embedder(emb)
        if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
            raise ConfigError(f"tokenizer must be a fastrag.Tokenizer, got {type(tokenizer).__name__}")
        fit = isinstance(emb, VocabularyEmbedder) and not emb.fitted
        t0 = time.perf_counter()
        counter = CodepointCounter(threads=threads) if fit else None
        pending: list[_Pending] = []
        n_docs = n_chunks = n_bytes = 0
        for batch in iter_batches(docs):
            chunks = _chunk_batch(chunker, batch, threads)
            if counter is not None:
                counter.add(chunks.text_data, 0, int(chunks.text_offsets[-1]))
            pending.append(_Pending(batch, chunks))
            n_docs += len(batch)
            n_chunks += len(chunks)
            n_bytes += int(chunks.text_offsets[-1] - chunks.text_offsets[0])
            if progress is not None:
                progress(BuildProgress("chunk", n_docs, n_chunks, n_bytes, time.perf_counter() - t0))
        if counter is not None:
            if n_chunks == 0:
                raise DocumentError(
                    "no document has any text: cannot fit a vocabulary; pass documents "
                    "with text or a fitted embedder"
                )
            emb.fit_counts(counter.total())  # type: ignore[union-attr]
        del counter
        batch = _assemble(pending, emb, first_chunk_id=0, threads=threads)
        del pending
        if batch is not None:
            store = ChunkStore(batch.schema.field("vector").type.list_size)
            store.append(batch)
        else:
            store = ChunkStore(emb.dim)
        if progress is not None:
            progress(BuildProgress("index", n_docs, n_chunks, n_bytes, time.perf_counter() - t0))
        bm25 = doc_bm25 = None
        if keyword:
            tok = tokenizer or Tokenizer(stem="porter")
            bm25, doc_bm25 = BM25Index(tok), BM25Index(tok)
            for seg in store.segments:
                _index_keywords(seg.batch, chunker.overlap, bm25, doc_bm25, threads)
        kind, graph, auto = _choose_index(store, index, hnsw_config, threads)
        if progress is not None:
            progress(BuildProgress("done", n_docs, n_chunks, n_bytes, time.perf_counter() - t0))
        return cls(
            store=store, embedder=emb, chunker=chunker, index=kind, hnsw=graph,
            hnsw_config=hnsw_config, bm25=bm25, doc_bm25=doc_bm25, retrieval=retrieval,
            rewriter=rewriter, auto=auto,
        )  # fmt: skip

    def set_index(
        self,
        index: str,
        *,
        hnsw: HnswConfig | dict[str, Any] | None = None,
        threads: int | None = None,
    ) -> str:
        """Switch the vector index of this knowledge base (``"exact"``, ``"hnsw"`` or ``"auto"``).

        Building HNSW reads every live vector; the exact index needs nothing.
        Saved with the next :meth:`save`. Returns the index now in use.
        """
        index = _check_index(index, allow_auto=True)
        config = _hnsw_config(hnsw) if hnsw is not None else self._hnsw_config
        with self._lock:
            kind, graph, auto = _choose_index(self._store, index, config, threads)
            self._index, self._hnsw, self._hnsw_config, self._auto = kind, graph, config, auto
            self._dirty = True
            return kind

    # -- updates ---------------------------------------------------------------
    def add(self, docs: Iterable[Any], *, threads: int | None = None) -> int:
        """Add documents; return the number of chunks added.

        Every document is validated, chunked and embedded before anything
        changes: on any error the knowledge base is exactly as it was.
        Ids already in the knowledge base raise
        :class:`~fastrag.errors.DuplicateDocumentError` (delete them first to
        replace them). Characters outside a vocabulary embedder's vocabulary
        are ignored. The keyword and HNSW indexes are updated too.
        """
        with self._lock:
            index = self._store.doc_index()
            pending = []
            for batch in iter_batches(docs):
                for doc_id in batch.ids:
                    if doc_id in index:
                        raise DuplicateDocumentError(
                            f"document id {doc_id!r} is already in the knowledge base; delete it "
                            "first to replace it"
                        )
                pending.append(_Pending(batch, _chunk_batch(self._chunker, batch, threads)))
            batch = _assemble(
                pending, self._embedder, first_chunk_id=self._store.next_chunk_id, threads=threads
            )
            if batch is None:
                return 0
            vectors = np.asarray(batch.column("vector").values).reshape(batch.num_rows, -1)
            labels = batch.column("chunk_id").to_numpy()
            # Index updates first (they can fail: then nothing is appended); a
            # failure of a later one leaves the earlier with rows nothing ever
            # points at, which is harmless and undone by the next compaction.
            if self._bm25 is not None and self._doc_bm25 is not None:
                _index_keywords(batch, self._chunker.overlap, self._bm25, self._doc_bm25, threads)
            if self._hnsw is not None:
                self._hnsw.add(vectors, labels, threads=threads)
            self._store.append(batch)
            self._dirty = True
            return batch.num_rows

    def delete(self, doc_ids: str | Iterable[str], *, missing_ok: bool = False) -> int:
        """Delete documents (all their chunks); return the number of chunks deleted.

        Deleted chunks are never returned again, by any mode or index, also
        after :meth:`save` and :meth:`load`; :meth:`compact` reclaims their space.

        Parameters
        ----------
        doc_ids : str or iterable of str
            Ids to delete.
        missing_ok : bool, default False
            Ignore ids the knowledge base does not hold instead of raising
            :class:`~fastrag.errors.DocumentNotFoundError` (which changes nothing).
        """
        ids = [doc_ids] if isinstance(doc_ids, str) else list(doc_ids)
        for d in ids:
            if not isinstance(d, str):
                raise DocumentError(f"document ids are strings, got {type(d).__name__}")
        ids = list(dict.fromkeys(ids))
        with self._lock:
            index = self._store.doc_index()
            missing = [d for d in ids if d not in index]
            if missing and not missing_ok:
                shown = ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else "")
                raise DocumentNotFoundError(
                    f"{len(missing)} document id(s) not in the knowledge base: {shown}"
                )
            present = [d for d in ids if d in index]
            spans = [index[d] for d in present]
            if self._hnsw is not None and spans:
                rows = np.concatenate([np.arange(sp.start, sp.start + sp.count) for sp in spans])
                self._hnsw.mark_deleted(self._store.chunk_ids()[rows])
            killed = self._store.delete_docs(present)
            if killed:
                self._dirty = True
            return killed

    def compact(self, *, threads: int | None = None) -> int:
        """Drop deleted chunks for good; return how many were dropped.

        The store keeps only live rows (copying the segments that had
        deletions), the keyword index is renumbered to match, and the HNSW
        graph is rebuilt when a fifth or more of its elements are deleted
        (hnswlib keeps deleted elements in the graph). Chunk ids do not change.
        """
        with self._lock:
            dead = self._store.n_dead
            if dead == 0:
                return 0
            keep = self._store.alive_mask()
            keep_docs = keep[self._store.doc_starts()[:-1]]
            new_store = self._store.compacted()
            bm25 = self._bm25.compact(keep, threads=threads) if self._bm25 is not None else None
            doc_bm25 = (
                self._doc_bm25.compact(keep_docs, threads=threads)
                if self._doc_bm25 is not None
                else None
            )
            graph = self._hnsw
            if graph is not None and graph.n_deleted >= COMPACT_HNSW_SHARE * max(1, len(graph) + graph.n_deleted):
                graph = _build_hnsw(new_store, self._hnsw_config, threads)
            self._store, self._bm25, self._doc_bm25, self._hnsw = new_store, bm25, doc_bm25, graph
            self._dirty = True
            return dead

    # -- persistence -----------------------------------------------------------
    def _header(self) -> dict[str, Any]:
        from . import __version__

        index: dict[str, Any] = {"type": self._index, "hnsw": self._hnsw_config.to_dict()}
        if self._auto is not None:
            index["auto"] = self._auto
        return {
            "fastrag_version": __version__,
            "dim": self._store.dim,
            "embedder": self._embedder.config(),
            "chunking": {"window": self._chunker.window, "overlap": self._chunker.overlap},
            "index": index,
            "keyword": None if self._bm25 is None else self._bm25.config(),
            "retrieval": self._retrieval.to_dict(),
        }

    def save(
        self,
        path: str | Path,
        *,
        keep: int | None = 2,
        overwrite: bool = False,
        compact_share: float = 0.2,
    ) -> str:
        """Write the knowledge base to ``path`` as a new snapshot; return its id.

        The save is atomic: a crash at any point leaves the previous snapshot
        current and intact, and readers of older snapshots keep working.

        Parameters
        ----------
        path : str or Path
            Knowledge-base directory (created if missing).
        keep : int or None, default 2
            Snapshots to keep, the new one included; ``None`` keeps every one.
        overwrite : bool, default False
            Replace a knowledge base of a different embedder or dimension.
        compact_share : float, default 0.2
            :meth:`compact` first when at least this share of the chunks is
            deleted (1.0 never compacts on save).
        """
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise ConfigError(f"keep must be a positive int or None, got {keep!r}")
        root = Path(path)
        with self._lock:
            if not self._dirty and self._path is not None and root.resolve() == self._path.resolve():
                return str(self._snapshot)
            if self._store.n_rows and self._store.n_dead >= compact_share * self._store.n_rows:
                self.compact()
            extras: dict[str, Callable[[Path], dict[str, Any]]] = {}
            if self._bm25 is not None:
                extras[BM25_FILE] = self._bm25.save
            if self._doc_bm25 is not None:
                extras[BM25_DOCS_FILE] = self._doc_bm25.save
            if self._hnsw is not None:
                extras[HNSW_FILE] = self._hnsw.save
            sid = write_snapshot(
                root, self._store, self._header(), keep=keep, overwrite=overwrite, extras=extras
            )
            self._path, self._snapshot, self._dirty = root, sid, False
            return sid

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        snapshot: str | None = None,
        embedder: Embedder | None = None,
        verify: bool = False,
        rewriter: Any = None,
    ) -> KnowledgeBase:
        """Open a saved knowledge base; its vectors and keyword index are memory-mapped.

        Parameters
        ----------
        path : str or Path
            The directory given to :meth:`save`.
        snapshot : str, optional
            A snapshot id from :meth:`snapshots`; default the current one.
        embedder : Embedder, optional
            Needed for embedders whose configuration holds no weights or
            secrets (HTTP embedders read their key from ``FASTRAG_API_KEY``
            otherwise); must match the one the knowledge base was built
            with, or :class:`~fastrag.errors.EmbedderMismatchError`.
        verify : bool, default False
            Check every file's SHA-256 and every vector (reads all bytes).
        rewriter : callable, optional
            Query rewriter (not saved: synonym tables belong to the caller).
        """
        root = Path(path)
        manifest = read_manifest(root)
        entry = snapshot_entry(manifest, snapshot)
        if embedder is None:
            emb = embedder_from_config(manifest["embedder"])
        else:
            check_embedder(embedder)
            check_embedder_matches(manifest["embedder"], embedder)
            emb = embedder
        snap_dir = root / "snapshots" / entry["id"]
        dim = int(manifest["dim"])
        store = ChunkStore.read(
            snap_dir,
            dim=dim,
            next_chunk_id=int(entry["next_chunk_id"]),
            files=entry["files"],
            verify=verify,
        )
        files = entry["files"]
        bm25 = None
        if BM25_FILE in files:
            _check_file(snap_dir / BM25_FILE, files[BM25_FILE], verify)
            bm25 = BM25Index.load(snap_dir / BM25_FILE)
            if bm25.n_rows != store.n_rows:
                raise StoreCorruptedError(
                    f"{snap_dir / BM25_FILE}: {bm25.n_rows} rows, the chunk store has {store.n_rows}"
                )
        doc_bm25 = None
        if BM25_DOCS_FILE in files:
            _check_file(snap_dir / BM25_DOCS_FILE, files[BM25_DOCS_FILE], verify)
            doc_bm25 = BM25Index.load(snap_dir / BM25_DOCS_FILE)
            n_docs = store.doc_starts().size - 1
            if doc_bm25.n_rows != n_docs:
                raise StoreCorruptedError(
                    f"{snap_dir / BM25_DOCS_FILE}: {doc_bm25.n_rows} rows, the store has {n_docs} "
                    "documents"
                )
        index_info = manifest["index"]
        hnsw_config = HnswConfig.from_dict(index_info.get("hnsw", {}))
        graph = None
        if index_info["type"] == "hnsw":
            if HNSW_FILE not in files:
                raise StoreCorruptedError(f"{snap_dir}: the manifest names no {HNSW_FILE}")
            info = files[HNSW_FILE]
            _check_file(snap_dir / HNSW_FILE, info, False)
            # Mapped and checked in a background thread: exact search answers
            # until the graph is in (ready() / wait_ready()).
            graph = HnswIndex.load(
                snap_dir / HNSW_FILE, dim, hnsw_config, sha256=info["sha256"] if verify else None,
                background=not verify,
            )
        chunking = manifest["chunking"]
        kb = cls(
            store=store,
            embedder=emb,
            chunker=Chunker(window=int(chunking["window"]), overlap=int(chunking["overlap"])),
            index=index_info["type"],
            hnsw=graph,
            hnsw_config=hnsw_config,
            bm25=bm25,
            doc_bm25=doc_bm25,
            retrieval=RetrievalConfig.from_dict(manifest.get("retrieval") or {}),
            rewriter=rewriter,
            path=root,
            snapshot=entry["id"],
            auto=index_info.get("auto"),
        )
        # An older snapshot saved back to its own path becomes current again;
        # keyword indexes of an older format are rewritten by the next save.
        upgraded = any(x is not None and x.upgraded for x in (bm25, doc_bm25))
        kb._dirty = entry["id"] != manifest["current"] or upgraded
        return kb

    @classmethod
    def upgrade(cls, path: str | Path) -> str | None:
        """Rewrite a knowledge base saved by an older fastrag in the current formats.

        Returns
        -------
        str or None
            The new snapshot's id, or None when nothing needed rewriting.
        """
        kb = cls.load(path)
        try:
            return kb.save(path) if kb._dirty else None
        finally:
            kb.close()

    def ready(self) -> bool:
        """Whether every index is in: False while the HNSW graph still loads after :meth:`load`.

        Until then vector search is exact: the same results, only slower.
        """
        return self._hnsw is None or self._hnsw.ready()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`ready` (at most ``timeout`` seconds); return it.

        Raises
        ------
        SearchIndexError
            The HNSW graph failed to load (its file is damaged); searches
            stay exact.
        """
        return self._hnsw is None or self._hnsw.wait_ready(timeout)

    def snapshots(self) -> list[SnapshotInfo]:
        """The saved snapshots at this knowledge base's path, oldest first."""
        if self._path is None:
            return []
        return list_snapshots(self._path)

    def prune(self, keep: int = 1) -> list[str]:
        """Remove all but the ``keep`` newest snapshots (never the current one)."""
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError(f"keep must be a positive int, got {keep!r}")
        if self._path is None:
            return []
        return prune_snapshots(self._path, keep)

    # -- search ----------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """The embedder documents and questions are embedded with."""
        return self._embedder

    @property
    def index(self) -> str:
        """The vector index in use: ``"exact"`` or ``"hnsw"``."""
        return self._index

    def embed_questions(self, questions: Sequence[str], *, threads: int | None = None) -> np.ndarray:
        """Embed questions with the knowledge base's embedder: float32 ``(m, dim)``."""
        for i, q in enumerate(questions):
            _check_question(q, f"question {i}")
        return query_vectors(self._embedder, questions, threads=threads)

    def _segment_masks(
        self, where: Mapping[str, Any] | None, principal: Principal | None
    ) -> list[np.ndarray | None]:
        """Eligible rows per segment: alive, and admitted by ``where`` and ``principal``."""
        if where is None and principal is None:
            return self._store.alive_masks()
        if principal is not None and not isinstance(principal, Principal):
            raise ConfigError(f"principal must be a fastrag.Principal, got {type(principal).__name__}")
        key = canonical_key(where, principal)
        out: list[np.ndarray | None] = []
        for seg in self._store.segments:
            mask = seg.filter_cache.get(key)
            if mask is None:
                mask = np.ones(len(seg), dtype=np.bool_)
                if where is not None:
                    mask &= where_mask(seg.batch, where)
                if principal is not None:
                    mask &= acl_mask(seg.batch, principal)
                mask.flags.writeable = False
                if len(seg.filter_cache) >= _FILTER_CACHE_SIZE:
                    seg.filter_cache.pop(next(iter(seg.filter_cache)))
                seg.filter_cache[key] = mask
            alive = seg.alive
            out.append(mask if alive is None else mask & alive)
        return out

    def search(
        self,
        query_vectors: np.ndarray,
        k: int,
        *,
        exact: bool = False,
        where: Mapping[str, Any] | None = None,
        principal: Principal | None = None,
        threads: int | None = None,
        _masks: list[np.ndarray | None] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The vector leg: top-``k`` eligible chunks per query vector (global rows, cosines).

        Parameters
        ----------
        query_vectors : numpy.ndarray
            float32 ``(m, dim)``, L2-normalised rows.
        k : int
            Results per query (fewer when fewer chunks are eligible).
        exact : bool, default False
            Exact search even when the knowledge base has an HNSW index.
        where, principal
            Filters (see :mod:`fastrag.retrieve.filters`).
        threads : int, optional
            Threads.

        Returns
        -------
        tuple of numpy.ndarray
            int64 rows and float32 scores, both ``(m, k')``, best first.
        """
        k = _check_k(k)
        masks = self._segment_masks(where, principal) if _masks is None else _masks
        filtered = where is not None or principal is not None
        m = query_vectors.shape[0]
        graph = self._hnsw
        if graph is not None and not exact:
            eligible = None
            if filtered:
                eligible = np.zeros(max(graph.label_bound, self._store.next_chunk_id), np.bool_)
                ids = self._store.chunk_ids()
                full = np.concatenate(
                    [mk if mk is not None else np.ones(len(s), np.bool_) for mk, s in zip(masks, self._store.segments)]
                ) if masks else np.zeros(0, np.bool_)
                eligible[ids[full]] = True
            result = graph.search(query_vectors, k, eligible=eligible, threads=threads)
            if result is not None:
                labels, scores = result
                return self._store.rows_of(labels), scores
        parts_ids, parts_scores = [], []
        bases = self._store.bases
        for s, seg in enumerate(self._store.segments):
            mask = masks[s]
            if len(seg) == 0 or (mask is not None and not mask.any()):
                continue
            ids, scores = exact_topk(query_vectors, seg.vectors, k, mask=mask, threads=threads)
            parts_ids.append(ids + bases[s])
            parts_scores.append(scores)
        if not parts_ids:
            return np.zeros((m, 0), dtype=np.int64), np.zeros((m, 0), dtype=np.float32)
        if len(parts_ids) == 1:
            return parts_ids[0], parts_scores[0]
        ids = np.ascontiguousarray(np.concatenate(parts_ids, axis=1))
        scores = np.ascontiguousarray(np.concatenate(parts_scores, axis=1))
        with _threads(threads, work=ids.size * 12):
            return _topk_kernels.merge_topk(ids, scores, min(k, ids.shape[1]))

    def _retrieve_rows(
        self,
        queries: list[RewrittenQuery],
        k: int,
        *,
        mode: str,
        where: Mapping[str, Any] | None,
        principal: Principal | None,
        group_by: str | None,
        exact: bool,
        threads: int | None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows (``-1`` padded), ranking scores and relevances of rewritten queries."""
        if group_by not in (None, "doc"):
            raise ConfigError(f"group_by must be None or 'doc', got {group_by!r}")
        if mode != "vector" and self._bm25 is None:
            raise ConfigError(
                f"mode {mode!r} needs the keyword index: build with keyword=True, or use mode='vector'"
            )
        cfg = self._retrieval
        masks = self._segment_masks(where, principal)
        fused = mode == "hybrid" or group_by is not None
        width = k * cfg.oversample if fused else k
        if group_by:
            width = max(width, 10 * k)  # documents have several chunks each
        n_rows = self._store.n_rows
        while True:
            legs = self._legs(queries, k, width, mode, where, principal, group_by, exact, threads, masks)
            rows, vec_rows, key_rows = legs[0], legs[6], legs[3]
            # Grouping can leave fewer than k documents when a few long
            # documents took every candidate: widen and search again, as long
            # as some leg had more candidates to give (a full list).
            full = any(
                x is not None and x.shape[1] >= width and bool((x[:, -1] >= 0).any())
                for x in (vec_rows, key_rows)
            )
            short = ((rows >= 0).sum(axis=1) < min(k, n_rows)).any()
            if not group_by or not short or not full or width >= n_rows:
                break
            width = min(n_rows, width * 4)
        rows, scores, vectors, key_rows, key_scores, key_weight, _ = legs
        rows = rows[:, :k]
        scores = scores[:, :k]
        relevance = np.zeros(rows.shape, dtype=np.float32)
        if mode == "vector":  # the scores are the cosines already
            relevance = np.clip(scores, 0.0, 1.0).astype(np.float32)
        elif vectors is not None:
            relevance = np.clip(self._row_cosines(vectors, rows), 0.0, 1.0)
        if key_rows is not None and key_weight is not None:
            share = _lookup(rows, key_rows, key_scores, 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                share = np.where(key_weight[:, None] > 0, share / key_weight[:, None], 0.0)
            relevance = np.maximum(relevance, np.clip(share, 0.0, 1.0).astype(np.float32))
        relevance[rows < 0] = 0.0
        return rows, scores.astype(np.float32), relevance

    def _legs(
        self,
        queries: list[RewrittenQuery],
        k: int,
        width: int,
        mode: str,
        where: Mapping[str, Any] | None,
        principal: Principal | None,
        group_by: str | None,
        exact: bool,
        threads: int | None,
        masks: list[np.ndarray | None],
    ) -> tuple[Any, ...]:
        """Run the legs of ``mode`` with ``width`` candidates each, then fuse or pass through."""
        cfg = self._retrieval
        fused = mode == "hybrid" or group_by is not None
        m = len(queries)
        vectors = vec_rows = vec_scores = None
        vector_weight = vector_weight_for(cfg, self._embedder)
        if mode in ("vector", "hybrid") and (mode == "vector" or vector_weight > 0):
            vectors = self.embed_questions([q.text for q in queries], threads=threads)
            vec_rows, vec_scores = self.search(
                vectors, width, exact=exact, where=where, principal=principal, threads=threads,
                _masks=masks,
            )  # fmt: skip
        key_rows = key_scores = key_weight = doc_rows = None
        if mode in ("keyword", "hybrid"):
            assert self._bm25 is not None
            tokens = self._bm25.tokenizer.tokenize([q.keywords for q in queries])
            global_mask = None
            if any(mk is not None for mk in masks):
                global_mask = np.concatenate(
                    [mk if mk is not None else np.ones(len(sg), np.bool_)
                     for mk, sg in zip(masks, self._store.segments)]
                )  # fmt: skip
            key_rows, key_scores = self._bm25.search_tokens(
                tokens, width, mask=global_mask, threads=threads
            )
            key_weight = self._bm25.query_weights(tokens)
            if mode == "hybrid" and self._doc_bm25 is not None and cfg.document_weight > 0:
                doc_mask = None
                if global_mask is not None:
                    doc_mask = np.zeros(self._doc_bm25.n_rows, dtype=np.bool_)
                    doc_mask[self._store.row_docs()[global_mask]] = True
                doc_rows, _ = self._doc_bm25.search_tokens(
                    tokens, width, mask=doc_mask, threads=threads
                )
        if not fused:
            rows, scores = (vec_rows, vec_scores) if mode == "vector" else (key_rows, key_scores)
            assert rows is not None and scores is not None
        else:
            lists, weights = [], []
            if vec_rows is not None:
                lists.append(vec_rows)
                weights.append(vector_weight if mode == "hybrid" else 1.0)
            if key_rows is not None:
                lists.append(key_rows)
                weights.append(cfg.keyword_weight if mode == "hybrid" else 1.0)
            c = max(1, max(x.shape[1] for x in lists))
            stacked = np.full((len(lists), m, c), -1, dtype=np.int64)
            for i, x in enumerate(lists):
                stacked[i, :, : x.shape[1]] = x
            if doc_rows is not None:
                group_lists = np.ascontiguousarray(doc_rows[None, :, :])
                group_weights = np.array([cfg.document_weight], dtype=np.float64)
            else:
                group_lists = np.zeros((0, m, 1), dtype=np.int64)
                group_weights = np.zeros(0, dtype=np.float64)
            needs_groups = doc_rows is not None or group_by is not None
            groups = self._store.row_docs() if needs_groups else np.zeros(0, np.int64)
            with _threads(threads, work=stacked.size * 64):
                rows, scores = _fusion_kernels.rrf_fuse(
                    stacked, np.array(weights, dtype=np.float64), group_lists, group_weights,
                    np.ascontiguousarray(groups), float(cfg.rrf_k), k, group_by == "doc",
                )  # fmt: skip
            if mode != "hybrid":  # one leg, grouped: report that leg's own scores
                source = vec_scores if mode == "vector" else key_scores
                scores = _lookup(rows, lists[0], source, -np.inf)
        return rows, scores, vectors, key_rows, key_scores, key_weight, vec_rows

    def _row_cosines(self, vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cosine of each query vector with the vectors of its result rows (0 for padding)."""
        out = np.zeros(rows.shape, dtype=np.float32)
        valid = rows >= 0
        if not valid.any():
            return out
        q_index = np.nonzero(valid)[0]
        flat = rows[valid]
        seg, local = self._store.locate(flat)
        values = np.empty(flat.size, dtype=np.float32)
        for s in np.unique(seg).tolist():
            pick = seg == s
            gathered = self._store.segments[s].vectors[local[pick]]
            values[pick] = np.einsum("ij,ij->i", gathered, vectors[q_index[pick]])
        out[valid] = values
        return out

    def _rewrite(
        self, questions: Sequence[str], rewrite: bool, redact: bool = True
    ) -> list[RewrittenQuery]:
        rewriter = self.rewriter
        if rewrite and rewriter is not None:
            if redact and isinstance(rewriter, LLMRewriter):
                rewriter = dataclasses.replace(
                    rewriter, chat=_redacting_chat(rewriter.chat, self.redactor)
                )
            with self._metrics_lock:
                self._metrics["retrievals"] += len(questions)
            return [rewriter(q) for q in questions]
        with self._metrics_lock:
            self._metrics["retrievals"] += len(questions)
        return [RewrittenQuery(original=q, text=q, keywords=q) for q in questions]

    def retrieve(
        self,
        question: str,
        k: int = 5,
        *,
        mode: str | None = None,
        where: Mapping[str, Any] | None = None,
        principal: Principal | None = None,
        group_by: str | None = None,
        exact: bool = False,
        rewrite: bool = True,
        reranker: Reranker | None = None,
        threads: int | None = None,
    ) -> list[Hit]:
        """The ``k`` chunks that best match ``question``, best first.

        Parameters
        ----------
        question : str
            The question.
        k : int, default 5
            Number of hits (fewer if fewer chunks are eligible).
        mode : {"hybrid", "vector", "keyword"}, optional
            Default: the knowledge base's (``hybrid`` unless configured).
        where : mapping, optional
            Metadata filter (see :mod:`fastrag.retrieve.filters`).
        principal : Principal, optional
            The caller: chunks whose ``acl`` does not admit it are never returned.
        group_by : {None, "doc"}
            ``"doc"``: the best chunk of each of the ``k`` best documents.
        exact : bool, default False
            Exact vector search even when the knowledge base has an HNSW index.
        rewrite : bool, default True
            Pass the question through the knowledge base's query rewriter.
        reranker : callable, optional
            ``reranker(question, hits) -> hits``; on any failure the
            retrieval order is kept.
        threads : int, optional
            Threads.

        Returns
        -------
        list of Hit
            Each with its text, score, relevance and document metadata.
        """
        _check_question(question)
        k = _check_k(k)
        mode = check_mode(self._retrieval.mode if mode is None else mode)
        queries = self._rewrite([question], rewrite)
        rows, scores, relevance = self._retrieve_rows(
            queries, k, mode=mode, where=where, principal=principal, group_by=group_by,
            exact=exact, threads=threads,
        )  # fmt: skip
        hits = self.hits(rows[0], scores[0], relevance[0])
        return apply_reranker(reranker, question, hits)

    def hits(
        self, rows: np.ndarray, scores: np.ndarray, relevance: np.ndarray | None = None
    ) -> list[Hit]:
        """Materialise :class:`Hit` objects for global rows (``-1`` padding is skipped)."""
        keep = rows >= 0
        if not keep.all():
            rows, scores = rows[keep], scores[keep]
            relevance = None if relevance is None else relevance[keep]
        if rows.size == 0:
            return []
        records = self._store.records(rows)
        rel = [None] * rows.size if relevance is None else relevance.tolist()
        return [
            Hit(
                chunk_id=r["chunk_id"],
                doc_id=r["doc_id"],
                ord=r["ord"],
                start=r["start"],
                end=r["end"],
                text=r["text"],
                score=float(s),
                metadata=metadata_of(r),
                relevance=rv,
            )
            for r, s, rv in zip(records, scores.tolist(), rel)
        ]

    def retrieve_batch(
        self,
        questions: Sequence[str],
        k: int = 5,
        *,
        mode: str | None = None,
        where: Mapping[str, Any] | None = None,
        principal: Principal | None = None,
        group_by: str | None = None,
        exact: bool = False,
        rewrite: bool = True,
        threads: int | None = None,
    ) -> pa.Table:
        """Retrieve for many questions at once (one embedding call, one batched search per leg).

        Options as for :meth:`retrieve`.

        Returns
        -------
        pyarrow.Table
            One row per (question, hit): ``query_index``, ``rank`` (1 = best),
            ``chunk_id``, ``doc_id``, ``score``, ``text``; ordered by question,
            then rank.
        """
        if isinstance(questions, str):
            raise ConfigError("retrieve_batch() takes a sequence of questions; use retrieve()")
        questions = list(questions)
        k = _check_k(k)
        mode = check_mode(self._retrieval.mode if mode is None else mode)
        if not questions:
            return _BATCH_SCHEMA.empty_table()
        for i, q in enumerate(questions):
            _check_question(q, f"question {i}")
        rows, scores, _ = self._retrieve_rows(
            self._rewrite(questions, rewrite), k, mode=mode, where=where, principal=principal,
            group_by=group_by, exact=exact, threads=threads,
        )  # fmt: skip
        m, kk = rows.shape
        valid = rows >= 0
        if not valid.any():
            return _BATCH_SCHEMA.empty_table()
        q_index = np.repeat(np.arange(m, dtype=np.int32), kk).reshape(m, kk)[valid]
        rank = np.tile(np.arange(1, kk + 1, dtype=np.int32), m).reshape(m, kk)[valid]
        found = self._store.rows(rows[valid], ["chunk_id", "doc_id", "text"])
        return pa.table(
            [
                pa.array(q_index),
                pa.array(rank),
                found.column("chunk_id"),
                found.column("doc_id").cast(pa.string()),
                pa.array(scores[valid]),
                found.column("text"),
            ],
            schema=_BATCH_SCHEMA,
        )

    # -- answers -----------------------------------------------------------------
    def answer(
        self,
        question: str,
        k: int = 5,
        *,
        generator: Generator | Callable[..., Any] | None = None,
        mode: str | None = None,
        where: Mapping[str, Any] | None = None,
        principal: Principal | None = None,
        exact: bool = False,
        rewrite: bool = True,
        reranker: Reranker | None = None,
        schema: Mapping[str, Any] | None = None,
        threads: int | None = None,
        **options: Any,
    ) -> Answer:
        """Answer a question from the knowledge base, citing the chunks it uses.

        The stages: rewrite, retrieve (and filter), rerank, context (merge
        overlapping windows, pack within the token budget, PII redaction of
        model-bound text, freshness and conflict notes), generate, verify
        (confidence, faithfulness), audit (digest). ``Answer.timings`` has
        the seconds of each.

        Parameters
        ----------
        question : str
            The question.
        k : int, default 5
            Chunks retrieved.
        generator : callable, optional
            ``generator(question, hits) -> Generation | str``; default the
            offline :class:`~fastrag.ExtractiveGenerator`. Use
            :class:`~fastrag.OpenAIChatGenerator` for a model.
        mode, where, principal, exact, rewrite, reranker, threads
            As for :meth:`retrieve`.
        schema : mapping, optional
            A JSON Schema: the chat generator answers with JSON that matches
            it (``Answer.data``); the extractive generator declines.
        **options
            :class:`~fastrag.answer.pipeline.AnswerOptions`: ``budget`` (3000
            tokens), ``estimator``, ``redact`` (True), ``max_age_days``
            (180), ``min_faithfulness`` (0.5), ``replace_unfaithful``
            (False), ``judge``, ``detect_conflicts`` (True), ``on_stage``,
            ``now``.

        Returns
        -------
        Answer
            The text, whether it was found, the hits, citations, confidence,
            faithfulness, warnings and the audit digest.
        """
        t0 = time.perf_counter()
        _check_question(question)
        k = _check_k(k)
        mode = check_mode(self._retrieval.mode if mode is None else mode)
        opts = check_options(options)
        if schema is not None:
            check_schema_support(generator)
        generate = as_generator(generator)
        timings: dict[str, float] = {}
        timer = StageTimer(timings, opts.on_stage)
        with timer("rewrite"):
            queries = self._rewrite([question], rewrite, opts.redact)
        with timer("retrieve") as info:
            rows, scores, relevance = self._retrieve_rows(
                queries, k, mode=mode, where=where, principal=principal, group_by=None,
                exact=exact, threads=threads,
            )  # fmt: skip
            hits = self.hits(rows[0], scores[0], relevance[0])
            info.update(hits=len(hits), mode=mode)
        with timer("rerank"):
            hits = apply_reranker(self._safe_reranker(reranker, opts.redact), question, hits)
        model_bound = is_model_bound(generator)
        prep = prepare(question, hits, opts, self.redactor, model_bound=model_bound, timer=timer)
        with timer("generate"):
            if schema is not None:
                structured = answer_json(generator, prep.model_question, prep.blocks, schema)
                generation = Generation(structured.raw, True, (), prep.prompt, getattr(generator, "model", None))
            else:
                generation = generate(prep.model_question if model_bound else question, prep.blocks)
        ans = finish(
            prep, generation, opts, snapshot=self._snapshot, timings=timings, timer=timer,
            query=queries[0],
        )  # fmt: skip
        if schema is not None:
            ans = dataclasses.replace(ans, data=structured.data)
        timings["total"] = time.perf_counter() - t0
        self._count(1, int(bool(ans.citations)))
        return ans

    def answer_batch(
        self,
        questions: Sequence[str],
        k: int = 5,
        *,
        generator: Generator | Callable[..., Any] | None = None,
        mode: str | None = None,
        where: Mapping[str, Any] | None = None,
        principal: Principal | None = None,
        exact: bool = False,
        rewrite: bool = True,
        reranker: Reranker | None = None,
        threads: int | None = None,
        max_concurrency: int | None = None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        **options: Any,
    ) -> pa.Table:
        """Answer many questions: one embedding call and one batched search per leg for all.

        Generation then runs concurrently: a generator with an async form
        (:class:`~fastrag.OpenAIChatGenerator`) keeps up to
        ``max_concurrency`` model calls in flight on one event loop, a plain
        callable runs on that many threads (see :mod:`fastrag.models.concurrency`),
        within the optional ``requests_per_minute`` and ``tokens_per_minute``.
        A question that fails (an empty question, a model error after the
        client's retries) gets its ``error`` column filled and ``found``
        False; the others are answered, in input order. Identical questions
        are answered once and the answer repeated. Other options as for
        :meth:`answer`.

        Parameters
        ----------
        max_concurrency : int, optional
            Generator calls in flight; default the generator's own
            ``max_concurrency`` for model clients, 1 for the extractive
            generator and plain callables.
        requests_per_minute, tokens_per_minute : float, optional
            Rate limits for the generator calls.

        Returns
        -------
        pyarrow.Table
            One row per question, in input order: ``query_index``,
            ``question``, ``answer``, ``found``, ``chunk_ids``, ``scores``,
            ``citations`` (chunk ids the answer cites), ``confidence``,
            ``faithfulness``, ``high_risk``, ``error``.
        """
        if isinstance(questions, str):
            raise ConfigError("answer_batch() takes a sequence of questions; use answer()")
        questions = list(questions)
        k = _check_k(k)
        mode = check_mode(self._retrieval.mode if mode is None else mode)
        opts = check_options(options)
        generate = as_generator(generator)
        m = len(questions)
        errors: list[str | None] = [None] * m
        valid = []
        for i, q in enumerate(questions):
            try:
                _check_question(q)
                valid.append(i)
            except ConfigError as exc:
                errors[i] = str(exc)
        # Identical questions are retrieved and answered once.
        unique: dict[str, int] = {}
        for i in valid:
            unique.setdefault(questions[i], len(unique))
        texts = list(unique)
        queries = self._rewrite(texts, rewrite, opts.redact)
        safe_reranker = self._safe_reranker(reranker, opts.redact)
        model_bound = is_model_bound(generator)
        if max_concurrency is None:
            max_concurrency = _default_concurrency(generator)
        # With a model client, retrieval runs in blocks while the model answers the
        # blocks before: the batch takes about the longer of the two, not their sum.
        # The first block is small, so the first calls start at once.
        n = len(texts)
        if streams(generator, max_concurrency) and n > 2 * _STREAM_BLOCK:
            first = min(max_concurrency, _STREAM_BLOCK)
            bounds = [0, *range(first, n, _STREAM_BLOCK), n]
        else:
            bounds = [0, n] if n else [0]
        preps, timers = [], []

        def prepared_blocks() -> Iterator[list[tuple[str, list[Hit]]]]:
            for lo, hi in zip(bounds, bounds[1:]):
                rows, scores, relevance = self._retrieve_rows(
                    queries[lo:hi], k, mode=mode, where=where, principal=principal,
                    group_by=None, exact=exact, threads=threads,
                )  # fmt: skip
                items = []
                for text, hits in zip(texts[lo:hi], self._hits_matrix(rows, scores, relevance)):
                    timings: dict[str, float] = {}
                    timer = StageTimer(timings, opts.on_stage)
                    hits = apply_reranker(safe_reranker, text, hits)
                    prep = prepare(
                        text, hits, opts, self.redactor, model_bound=model_bound, timer=timer
                    )
                    preps.append(prep)
                    timers.append((timings, timer))
                    items.append((prep.model_question if model_bound else prep.question, prep.blocks))
                yield items

        results = generate_stream(
            generator,
            prepared_blocks(),
            call=generate,
            max_concurrency=max_concurrency,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
        )
        u_out: list[Answer | str] = []
        for prep, result, (timings, timer), query in zip(preps, results, timers, queries):
            if isinstance(result, Generation):
                u_out.append(
                    finish(prep, result, opts, snapshot=self._snapshot, timings=timings,
                           timer=timer, query=query)  # fmt: skip
                )
            else:
                u_out.append(f"{type(result).__name__}: {result}")
        answers: list[Answer | None] = [None] * m
        for i in valid:
            out = u_out[unique[questions[i]]]
            if isinstance(out, str):
                errors[i] = out
            else:
                answers[i] = out
        done = [a for a in answers if a is not None]
        self._count(len(done), sum(1 for a in done if a.citations))
        hits_of = [list(a.hits) if a is not None else [] for a in answers]
        return pa.table(
            [
                pa.array(np.arange(m, dtype=np.int32)),
                pa.array([q if isinstance(q, str) else repr(q) for q in questions], pa.string()),
                pa.array([a.text if a else None for a in answers], pa.string()),
                pa.array([bool(a and a.found) for a in answers], pa.bool_()),
                pa.array([[h.chunk_id for h in hs] for hs in hits_of], pa.list_(pa.int64())),
                pa.array([[h.score for h in hs] for hs in hits_of], pa.list_(pa.float32())),
                pa.array(
                    [[h.chunk_id for h in a.citations.values()] if a else [] for a in answers],
                    pa.list_(pa.int64()),
                ),
                pa.array([a.confidence if a else None for a in answers], pa.float32()),
                pa.array([a.faithfulness if a else None for a in answers], pa.float32()),
                pa.array([bool(a and a.high_risk) for a in answers], pa.bool_()),
                pa.array(errors, pa.string()),
            ],
            schema=ANSWER_BATCH_SCHEMA,
        )

    def _safe_reranker(self, reranker: Reranker | None, redact: bool) -> Reranker | None:
        """An LLM reranker sees redacted text (PII never reaches a model)."""
        if redact and isinstance(reranker, LLMReranker):
            return dataclasses.replace(reranker, chat=_redacting_chat(reranker.chat, self.redactor))
        return reranker

    def _count(self, answers: int, cited: int) -> None:
        with self._metrics_lock:
            self._metrics["answers"] += answers
            self._metrics["answers_citing"] += cited

    def metrics(self) -> dict[str, Any]:
        """Lifetime counters of this knowledge base object.

        Returns
        -------
        dict
            ``retrievals`` (questions retrieved for), ``answers``,
            ``answers_citing`` and ``hit_rate``: the share of answers that
            cite a retrieved chunk (the operational hit rate).
        """
        with self._metrics_lock:
            out: dict[str, Any] = dict(self._metrics)
        out["hit_rate"] = out["answers_citing"] / out["answers"] if out["answers"] else 0.0
        return out

    def _hits_matrix(
        self, rows: np.ndarray, scores: np.ndarray, relevance: np.ndarray | None = None
    ) -> list[list[Hit]]:
        """Hits for every row of a search result, materialised in one table read."""
        m, kk = rows.shape
        if kk == 0:
            return [[] for _ in range(m)]
        valid = rows >= 0
        counts = valid.sum(axis=1)
        flat = self.hits(
            rows[valid], scores[valid], None if relevance is None else relevance[valid]
        )
        out, start = [], 0
        for c in counts.tolist():
            out.append(flat[start : start + c])
            start += c
        return out

    # -- verification ----------------------------------------------------------
    def verify(
        self, questions: Sequence[str], k: int = 10, *, threads: int | None = None
    ) -> dict[str, Any]:
        """Recall@k of the HNSW index against exact search, with the latency of each.

        Returns
        -------
        dict
            ``recall`` (mean share of the exact top-k the index returns),
            ``questions``, ``k``, ``index``, and per path ``*_ms_p50`` /
            ``*_ms_p99`` (single-question latency) and ``*_batch_qps``.
        """
        if isinstance(questions, str):
            raise ConfigError("verify() takes a sequence of questions")
        questions = list(questions)
        if not questions:
            raise ConfigError("verify() needs at least one question")
        k = _check_k(k)
        self.wait_ready()  # measure the graph, not the exact fallback of a loading one
        vectors = self.embed_questions(questions, threads=threads)
        report: dict[str, Any] = {"questions": len(questions), "k": k, "index": self._index}
        truth_rows, _ = self.search(vectors, k, exact=True, threads=threads)
        found_rows, _ = self.search(vectors, k, threads=threads)
        hits = sum(
            len(set(a[a >= 0].tolist()) & set(b[b >= 0].tolist())) for a, b in zip(found_rows, truth_rows)
        )
        expected = int((truth_rows >= 0).sum())
        report["recall"] = hits / expected if expected else 1.0
        for name, exact in (("exact", True), ("index", False)):
            lat = []
            for i in range(len(questions)):
                t = time.perf_counter()
                self.search(vectors[i : i + 1], k, exact=exact, threads=threads)
                lat.append(time.perf_counter() - t)
            t = time.perf_counter()
            self.search(vectors, k, exact=exact, threads=threads)
            batch = time.perf_counter() - t
            ms = np.array(lat) * 1e3
            report[f"{name}_ms_p50"] = float(np.percentile(ms, 50))
            report[f"{name}_ms_p99"] = float(np.percentile(ms, 99))
            report[f"{name}_batch_qps"] = len(questions) / batch if batch > 0 else float("inf")
        return report

    # -- lifetime ----------------------------------------------------------------
    def close(self) -> None:
        """Close the embedder's network connections, if it has any (HTTP embedders reopen them
        when used again, so the knowledge base stays usable).
        """
        close = getattr(self._embedder, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- introspection -----------------------------------------------------------
    def __len__(self) -> int:
        return len(self._store)

    def stats(self) -> dict[str, Any]:
        """Sizes and settings: chunks, documents, deletions, bytes, embedder, indexes, path."""
        store = self._store
        text_bytes = sum(
            int(s.batch.column("text").buffers()[2].size) if len(s) else 0 for s in store.segments
        )
        return {
            "chunks": len(store),
            "documents": store.n_docs,
            "deleted_chunks": store.n_dead,
            "segments": len(store.segments),
            "dim": store.dim,
            "vector_bytes": int(sum(s.vectors.nbytes for s in store.segments)),
            "text_bytes": text_bytes,
            "window": self._chunker.window,
            "overlap": self._chunker.overlap,
            "embedder": {k: v for k, v in self._embedder.config().items() if k != "vocabulary"},
            "index": self._index,
            "hnsw": None if self._hnsw is None else {**self._hnsw_config.to_dict(), "elements": len(self._hnsw), "deleted": self._hnsw.n_deleted},
            "auto": self._auto,
            "keyword": None if self._bm25 is None else {**self._bm25.config(), "terms": self._bm25.n_terms},
            "retrieval": self._retrieval.to_dict(),
            "path": str(self._path) if self._path is not None else None,
            "snapshot": self._snapshot,
            "unsaved_changes": self._dirty,
        }

    def __repr__(self) -> str:
        where = f", path={str(self._path)!r}" if self._path is not None else ""
        return (
            f"KnowledgeBase(chunks={len(self)}, dim={self._store.dim}, "
            f"index={self._index!r}{where})"
        )


def _redacting_chat(chat: Callable[..., Any], redactor: Redactor) -> Callable[..., Any]:
    """Wrap a ``chat(messages, **kw)`` callable so every message it sends is redacted."""

    def redacted(messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        clean = [
            {**msg, "content": redactor.redact(msg["content"]).text}
            if isinstance(msg.get("content"), str)
            else dict(msg)
            for msg in messages
        ]
        return chat(clean, **kwargs)

    return redacted


def _default_concurrency(generator: Any) -> int:
    """Model clients: their configured concurrency; anything else: one call at a time."""
    config = getattr(generator, "client_config", None)
    return int(getattr(config, "max_concurrency", 1)) if config is not None else 1


def _lookup(rows: np.ndarray, keys: np.ndarray, values: np.ndarray, default: float) -> np.ndarray:
    """Per question, the value ``keys``/``values`` give each of ``rows`` (``default`` if absent)."""
    if rows.size == 0 or keys.size == 0:
        return np.full(rows.shape, default, dtype=np.float32)
    match = (rows[:, :, None] == keys[:, None, :]) & (rows[:, :, None] >= 0)
    found = match.any(axis=2)
    picked = np.take_along_axis(values, match.argmax(axis=2), axis=1)
    return np.where(found, picked, default).astype(np.float32)


def _index_keywords(
    batch: pa.RecordBatch, overlap: int, bm25: BM25Index, doc_bm25: BM25Index, threads: int | None
) -> None:
    """Add a segment's chunks to the chunk keyword index and its documents to the document one."""
    data, offsets = utf8_buffers(batch.column("text"))
    bm25.add(data, offsets, threads=threads)
    codes = batch.column("doc_id").indices.to_numpy(zero_copy_only=False)
    if codes.size == 0:
        return
    starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    doc_starts = np.append(starts, codes.size).astype(np.int64)
    doc_data, doc_offsets = join_windows(data, offsets, doc_starts, overlap)
    doc_bm25.add(doc_data, doc_offsets, threads=threads)


def _hnsw_config(hnsw: HnswConfig | Mapping[str, Any] | None) -> HnswConfig:
    if hnsw is None:
        return HnswConfig()
    if isinstance(hnsw, HnswConfig):
        return hnsw
    if isinstance(hnsw, Mapping):
        return HnswConfig.from_dict(hnsw)
    raise ConfigError(f"hnsw must be an HnswConfig or a dict, got {type(hnsw).__name__}")


def _build_hnsw(store: ChunkStore, config: HnswConfig, threads: int | None) -> HnswIndex:
    """An HNSW graph over the live vectors of every segment (labels: chunk ids)."""
    graph: HnswIndex | None = None
    for seg in store.segments:
        vectors, labels = seg.vectors, seg.chunk_ids
        if seg.alive is not None:
            vectors, labels = vectors[seg.alive], labels[seg.alive]
        if graph is None:
            graph = HnswIndex.build(vectors, labels, config, threads=threads, max_elements=len(store))
        elif len(labels):
            graph.add(vectors, labels, threads=threads)
    if graph is None:
        graph = HnswIndex.build(np.zeros((0, store.dim), np.float32), np.zeros(0, np.int64), config)
    return graph


def _choose_index(
    store: ChunkStore, index: str, config: HnswConfig, threads: int | None
) -> tuple[str, HnswIndex | None, dict[str, Any] | None]:
    """Resolve ``"auto"`` and build the graph when HNSW is the answer."""
    if index == "exact":
        return "exact", None, None
    if index == "hnsw":
        return "hnsw", _build_hnsw(store, config, threads), None
    n = len(store)
    if n < AUTO_MIN_ROWS:
        return "exact", None, {"rows": n, "reason": f"fewer than {AUTO_MIN_ROWS} chunks"}
    graph = _build_hnsw(store, config, threads)
    seg = max(store.segments, key=len)
    vectors = seg.vectors if seg.alive is None else seg.vectors[seg.alive]
    labels = seg.chunk_ids if seg.alive is None else seg.chunk_ids[seg.alive]
    use, recall = auto_choice(vectors, labels, config, threads=threads, index=graph)
    info = {"rows": n, "recall_at_10": round(float(recall), 4)}
    if use:
        return "hnsw", graph, {**info, "reason": "recall at ef_search >= 0.95"}
    return "exact", None, {**info, "reason": "HNSW recall under 0.95 on these vectors"}


def _check_file(path: Path, info: Mapping[str, Any], verify: bool) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise StoreCorruptedError(f"{path}: file is missing") from exc
    if size != info["bytes"]:
        raise StoreCorruptedError(
            f"{path}: {size} bytes on disk, {info['bytes']} recorded: truncated or overwritten"
        )
    if verify and sha256_file(path) != info["sha256"]:
        raise StoreCorruptedError(f"{path}: SHA-256 checksum mismatch: the file is corrupt")


def _chunk_batch(chunker: Chunker, batch: DocBatch, threads: int | None) -> Any:
    """Chunk a batch of documents and drop their raw text (the chunks hold it now)."""
    chunks = chunker.chunk(batch.texts, threads=threads)
    batch.texts.clear()  # the strings (and the UTF-8 copies CPython caches) can go
    return chunks


def _assemble(
    pending: list[_Pending], embedder: Embedder, *, first_chunk_id: int, threads: int | None
) -> pa.RecordBatch | None:
    """Embed pending chunk batches into one matrix and build one segment.

    The pending batches' arrays are copied into the segment's columns one
    batch at a time and released as they go, so the text is never held
    twice in full.
    """
    n = sum(len(p.chunks) for p in pending)
    if n == 0:
        return None
    vectors: np.ndarray | None = None
    row = 0
    for p in pending:
        c = p.chunks
        if len(c) == 0:
            continue
        kernel = utf8_embedder(embedder)
        if kernel is not None:
            if vectors is None:
                vectors = np.empty((n, kernel.dim), dtype=np.float32)
            out = vectors[row : row + len(c)]
            kernel.embed_utf8(c.text_data, c.text_offsets, out=out, threads=threads)
        else:
            # An HTTP embedder may learn its dimension from its first answer.
            batch_vectors = document_vectors(embedder, c.texts())
            if vectors is None:
                vectors = np.empty((n, batch_vectors.shape[1]), dtype=np.float32)
            vectors[row : row + len(c)] = batch_vectors
        row += len(c)
    assert vectors is not None
    dim = vectors.shape[1]

    nbytes = sum(int(p.chunks.text_offsets[-1]) for p in pending)
    data = np.empty(nbytes, dtype=np.uint8)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    chunk_doc = np.empty(n, dtype=np.int64)
    chunk_ord = np.empty(n, dtype=np.int32)
    chunk_start = np.empty(n, dtype=np.int64)
    chunk_end = np.empty(n, dtype=np.int64)
    row = byte = docs = 0
    for p in pending:
        c = p.chunks
        k, b = len(c), int(c.text_offsets[-1])
        data[byte : byte + b] = c.text_data[:b]
        offsets[row + 1 : row + k + 1] = c.text_offsets[1:] + byte
        chunk_doc[row : row + k] = c.chunk_doc + docs
        chunk_ord[row : row + k] = c.chunk_ord
        chunk_start[row : row + k] = c.chunk_start
        chunk_end[row : row + k] = c.chunk_end
        p.chunks = None  # release this batch's buffers now
        row, byte, docs = row + k, byte + b, docs + len(p.docs)
    text = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))

    def docs_field(name: str) -> list[Any]:
        return [v for p in pending for v in getattr(p.docs, name)]

    return build_batch(
        dim=dim,
        first_chunk_id=first_chunk_id,
        doc_ids=docs_field("ids"),
        chunk_doc=chunk_doc,
        chunk_ord=chunk_ord,
        chunk_start=chunk_start,
        chunk_end=chunk_end,
        text=text,
        vectors=vectors,
        titles=docs_field("titles"),
        sources=docs_field("sources"),
        updated_at=docs_field("updated_at"),
        acl=docs_field("acl"),
        metadata=docs_field("metadata"),
    )
