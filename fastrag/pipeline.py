"""``KnowledgeBase``: build, update, save, load and search a knowledge base."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ._native import topk as _topk_kernels
from ._text import encode_utf8
from ._threads import threads as _threads
from .chunking import Chunker
from .documents import DocBatch, iter_batches
from .embedding import (
    CodepointCounter,
    Embedder,
    VocabularyEmbedder,
    check_embedder_matches,
    embedder_from_config,
)
from .errors import (
    ConfigError,
    DocumentError,
    DocumentNotFoundError,
    DuplicateDocumentError,
    EmbedderError,
)
from .exact import exact_topk
from .generation import Generator, as_generator
from .prompt import build_user_message
from .snapshots import (
    SnapshotInfo,
    list_snapshots,
    prune_snapshots,
    read_manifest,
    snapshot_entry,
    write_snapshot,
)
from .store import ChunkStore, build_batch, metadata_of
from .types import Answer, Generation, Hit

__all__ = ["ANSWER_BATCH_SCHEMA", "BuildProgress", "KnowledgeBase"]

INDEX_KINDS = ("exact",)

ANSWER_BATCH_SCHEMA = pa.schema(
    [
        pa.field("query_index", pa.int32(), nullable=False),
        pa.field("question", pa.string()),
        pa.field("answer", pa.string()),
        pa.field("found", pa.bool_(), nullable=False),
        pa.field("chunk_ids", pa.list_(pa.int64())),
        pa.field("scores", pa.list_(pa.float32())),
        pa.field("citations", pa.list_(pa.int64())),
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
    chunks: Any  # fastrag.chunking.Chunks


def _check_index(index: str) -> str:
    if index not in INDEX_KINDS:
        raise ConfigError(f"index must be one of {', '.join(map(repr, INDEX_KINDS))}; got {index!r}")
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
    """Chunks, vectors and metadata of a document collection, searchable.

    Create one with :meth:`build` or :meth:`load`; the constructor is internal.
    """

    def __init__(
        self,
        *,
        store: ChunkStore,
        embedder: Embedder,
        chunker: Chunker,
        index: str = "exact",
        path: Path | None = None,
        snapshot: str | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._chunker = chunker
        self._index = _check_index(index)
        self._path = path
        self._snapshot = snapshot
        self._dirty = path is None

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
        index : {"exact"}
            Search index.
        threads : int, optional
            Numba threads for chunking and embedding.
        progress : callable, optional
            Called with a :class:`BuildProgress` after each batch.

        Returns
        -------
        KnowledgeBase
            In memory; :meth:`save` writes it to disk.
        """
        chunker = Chunker(window=window, overlap=overlap)
        _check_index(index)
        emb = VocabularyEmbedder() if embedder is None else embedder
        _check_embedder(emb)
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
            progress(BuildProgress("done", n_docs, n_chunks, n_bytes, time.perf_counter() - t0))
        return cls(store=store, embedder=emb, chunker=chunker, index=index)

    # -- updates ---------------------------------------------------------------
    def add(self, docs: Iterable[Any], *, threads: int | None = None) -> int:
        """Add documents; return the number of chunks added.

        Every document is validated, chunked and embedded before anything
        changes: on any error the knowledge base is exactly as it was.
        Ids already in the knowledge base raise
        :class:`~fastrag.errors.DuplicateDocumentError` (delete them first to
        replace them). Characters outside a vocabulary embedder's vocabulary
        are ignored.
        """
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
        self._store.append(batch)
        self._dirty = True
        return batch.num_rows

    def delete(self, doc_ids: str | Iterable[str], *, missing_ok: bool = False) -> int:
        """Delete documents (all their chunks); return the number of chunks deleted.

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
        index = self._store.doc_index()
        missing = [d for d in ids if d not in index]
        if missing and not missing_ok:
            shown = ", ".join(map(repr, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise DocumentNotFoundError(
                f"{len(missing)} document id(s) not in the knowledge base: {shown}"
            )
        killed = self._store.delete_docs([d for d in ids if d in index])
        if killed:
            self._dirty = True
        return killed

    # -- persistence -----------------------------------------------------------
    def _header(self) -> dict[str, Any]:
        from . import __version__

        return {
            "fastrag_version": __version__,
            "dim": self._store.dim,
            "embedder": self._embedder.config(),
            "chunking": {"window": self._chunker.window, "overlap": self._chunker.overlap},
            "index": {"type": self._index},
        }

    def save(self, path: str | Path, *, keep: int | None = 2, overwrite: bool = False) -> str:
        """Write the knowledge base to ``path`` as a new snapshot; return its id.

        The save is atomic: a crash leaves the previous snapshot current and
        intact, and readers of older snapshots keep working.

        Parameters
        ----------
        path : str or Path
            Knowledge-base directory (created if missing).
        keep : int or None, default 2
            Snapshots to keep, the new one included; ``None`` keeps every one.
        overwrite : bool, default False
            Replace a knowledge base of a different embedder or dimension.
        """
        if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
            raise ConfigError(f"keep must be a positive int or None, got {keep!r}")
        root = Path(path)
        if not self._dirty and self._path is not None and root.resolve() == self._path.resolve():
            return str(self._snapshot)
        sid = write_snapshot(root, self._store, self._header(), keep=keep, overwrite=overwrite)
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
    ) -> KnowledgeBase:
        """Open a saved knowledge base; its vectors are memory-mapped, not read.

        Parameters
        ----------
        path : str or Path
            The directory given to :meth:`save`.
        snapshot : str, optional
            A snapshot id from :meth:`snapshots`; default the current one.
        embedder : Embedder, optional
            Needed for embedders whose configuration holds no weights or
            secrets (HTTP embedders); must match the one the knowledge base
            was built with, or :class:`~fastrag.errors.EmbedderMismatchError`.
        verify : bool, default False
            Check every file's SHA-256 and every vector (reads all bytes).
        """
        root = Path(path)
        manifest = read_manifest(root)
        entry = snapshot_entry(manifest, snapshot)
        if embedder is None:
            emb = embedder_from_config(manifest["embedder"])
        else:
            _check_embedder(embedder)
            check_embedder_matches(manifest["embedder"], embedder)
            emb = embedder
        store = ChunkStore.read(
            root / "snapshots" / entry["id"],
            dim=int(manifest["dim"]),
            next_chunk_id=int(entry["next_chunk_id"]),
            files=entry["files"],
            verify=verify,
        )
        chunking = manifest["chunking"]
        kb = cls(
            store=store,
            embedder=emb,
            chunker=Chunker(window=int(chunking["window"]), overlap=int(chunking["overlap"])),
            index=manifest["index"]["type"],
            path=root,
            snapshot=entry["id"],
        )
        # An older snapshot saved back to its own path becomes current again.
        kb._dirty = entry["id"] != manifest["current"]
        return kb

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

    def embed_questions(self, questions: Sequence[str], *, threads: int | None = None) -> np.ndarray:
        """Embed questions with the knowledge base's embedder: float32 ``(m, dim)``."""
        for i, q in enumerate(questions):
            _check_question(q, f"question {i}")
        if isinstance(self._embedder, VocabularyEmbedder):
            data, offsets = encode_utf8(questions)
            return self._embedder.embed_utf8(data, offsets, threads=threads)
        return _validated_vectors(self._embedder, list(questions))

    def search(
        self, query_vectors: np.ndarray, k: int, *, threads: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` live chunks for each query vector: global rows and scores, best first.

        Parameters
        ----------
        query_vectors : numpy.ndarray
            float32 ``(m, dim)``, L2-normalised rows.
        k : int
            Results per query (fewer when fewer chunks are live).
        threads : int, optional
            Numba threads.

        Returns
        -------
        tuple of numpy.ndarray
            int64 rows and float32 scores, both ``(m, k')``.
        """
        k = _check_k(k)
        m = query_vectors.shape[0]
        parts_ids, parts_scores = [], []
        bases = self._store.bases
        for s, seg in enumerate(self._store.segments):
            if len(seg) == seg.n_dead:
                continue
            ids, scores = exact_topk(query_vectors, seg.vectors, k, mask=seg.alive, threads=threads)
            parts_ids.append(ids + bases[s])
            parts_scores.append(scores)
        if not parts_ids:
            return np.zeros((m, 0), dtype=np.int64), np.zeros((m, 0), dtype=np.float32)
        if len(parts_ids) == 1:
            return parts_ids[0], parts_scores[0]
        ids = np.ascontiguousarray(np.concatenate(parts_ids, axis=1))
        scores = np.ascontiguousarray(np.concatenate(parts_scores, axis=1))
        with _threads(threads):
            return _topk_kernels.merge_topk(ids, scores, min(k, ids.shape[1]))

    def retrieve(self, question: str, k: int = 5, *, threads: int | None = None) -> list[Hit]:
        """The ``k`` chunks most similar to ``question``, best first.

        Parameters
        ----------
        question : str
            The question.
        k : int, default 5
            Number of hits (fewer if the knowledge base holds fewer chunks).
        threads : int, optional
            Numba threads.

        Returns
        -------
        list of Hit
            Each with its text, score and document metadata.
        """
        _check_question(question)
        k = _check_k(k)
        vectors = self.embed_questions([question], threads=threads)
        rows, scores = self.search(vectors, k, threads=threads)
        return self.hits(rows[0], scores[0])

    def hits(self, rows: np.ndarray, scores: np.ndarray) -> list[Hit]:
        """Materialise :class:`Hit` objects for global rows (as returned by :meth:`search`)."""
        if rows.size == 0:
            return []
        records = self._store.rows(rows).to_pylist()
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
            )
            for r, s in zip(records, scores.tolist())
        ]

    def retrieve_batch(
        self, questions: Sequence[str], k: int = 5, *, threads: int | None = None
    ) -> pa.Table:
        """Retrieve for many questions at once (one embedding call, one batched top-k).

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
        if not questions:
            return _BATCH_SCHEMA.empty_table()
        vectors = self.embed_questions(questions, threads=threads)
        rows, scores = self.search(vectors, k, threads=threads)
        m, kk = rows.shape
        if kk == 0:
            return _BATCH_SCHEMA.empty_table()
        found = self._store.rows(rows.reshape(-1), ["chunk_id", "doc_id", "text"])
        return pa.table(
            [
                pa.array(np.repeat(np.arange(m, dtype=np.int32), kk)),
                pa.array(np.tile(np.arange(1, kk + 1, dtype=np.int32), m)),
                found.column("chunk_id"),
                found.column("doc_id").cast(pa.string()),
                pa.array(scores.reshape(-1)),
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
        threads: int | None = None,
    ) -> Answer:
        """Answer a question from the knowledge base, citing the chunks it uses.

        Parameters
        ----------
        question : str
            The question.
        k : int, default 5
            Chunks retrieved and handed to the generator.
        generator : callable, optional
            ``generator(question, hits) -> Generation | str``; default the
            offline :class:`~fastrag.ExtractiveGenerator`. Use
            :class:`~fastrag.OpenAIChatGenerator` for a model.
        threads : int, optional
            Numba threads for retrieval.

        Returns
        -------
        Answer
            The text, whether it was found, the hits and the citations.
        """
        t0 = time.perf_counter()
        _check_question(question)
        k = _check_k(k)
        generate = as_generator(generator)
        vectors = self.embed_questions([question], threads=threads)
        t1 = time.perf_counter()
        rows, scores = self.search(vectors, k, threads=threads)
        t2 = time.perf_counter()
        hits = self.hits(rows[0], scores[0])
        t3 = time.perf_counter()
        generation = generate(question, hits)
        t4 = time.perf_counter()
        timings = {
            "embed": t1 - t0,
            "search": t2 - t1,
            "hits": t3 - t2,
            "generate": t4 - t3,
            "total": t4 - t0,
        }
        return _make_answer(question, hits, generation, timings)

    def answer_batch(
        self,
        questions: Sequence[str],
        k: int = 5,
        *,
        generator: Generator | Callable[..., Any] | None = None,
        threads: int | None = None,
    ) -> pa.Table:
        """Answer many questions: one embedding call and one batched top-k for all.

        A question that fails (an empty question, a generator error such as a
        model timeout) gets its ``error`` column filled and ``found`` False;
        the others are answered. Identical questions are answered once and
        the answer repeated.

        Returns
        -------
        pyarrow.Table
            One row per question, in input order: ``query_index``,
            ``question``, ``answer``, ``found``, ``chunk_ids``, ``scores``,
            ``citations`` (chunk ids the answer cites), ``error``.
        """
        if isinstance(questions, str):
            raise ConfigError("answer_batch() takes a sequence of questions; use answer()")
        questions = list(questions)
        k = _check_k(k)
        generate = as_generator(generator)
        m = len(questions)
        errors: list[str | None] = [None] * m
        valid = []
        for i, q in enumerate(questions):
            try:
                _check_question(q, f"question {i}")
                valid.append(i)
            except ConfigError as exc:
                errors[i] = str(exc)
        # Identical questions are retrieved and answered once.
        unique: dict[str, int] = {}
        for i in valid:
            unique.setdefault(questions[i], len(unique))
        texts = list(unique)
        u_hits: list[list[Hit]] = [[] for _ in texts]
        if texts:
            vectors = self.embed_questions(texts, threads=threads)
            rows, scores = self.search(vectors, k, threads=threads)
            u_hits = self._hits_matrix(rows, scores)
        u_out: list[Generation | str] = []
        for text, hits in zip(texts, u_hits):
            try:
                u_out.append(generate(text, hits))
            except Exception as exc:  # noqa: BLE001 - one question's failure is reported, not raised
                u_out.append(f"{type(exc).__name__}: {exc}")
        hits_of: list[list[Hit]] = [[] for _ in range(m)]
        answers: list[str | None] = [None] * m
        found = [False] * m
        cited: list[list[int]] = [[] for _ in range(m)]
        for i in valid:
            u = unique[questions[i]]
            hits_of[i] = u_hits[u]
            out = u_out[u]
            if isinstance(out, str):
                errors[i] = out
                continue
            answers[i] = out.text
            found[i] = out.found
            cited[i] = [u_hits[u][c - 1].chunk_id for c in out.citations if 1 <= c <= len(u_hits[u])]
        return pa.table(
            [
                pa.array(np.arange(m, dtype=np.int32)),
                pa.array([q if isinstance(q, str) else repr(q) for q in questions], pa.string()),
                pa.array(answers, pa.string()),
                pa.array(found, pa.bool_()),
                pa.array([[h.chunk_id for h in hs] for hs in hits_of], pa.list_(pa.int64())),
                pa.array([[h.score for h in hs] for hs in hits_of], pa.list_(pa.float32())),
                pa.array(cited, pa.list_(pa.int64())),
                pa.array(errors, pa.string()),
            ],
            schema=ANSWER_BATCH_SCHEMA,
        )

    def _hits_matrix(self, rows: np.ndarray, scores: np.ndarray) -> list[list[Hit]]:
        """Hits for every row of a ``search`` result, materialised in one table read."""
        m, kk = rows.shape
        if kk == 0:
            return [[] for _ in range(m)]
        flat = self.hits(rows.reshape(-1), scores.reshape(-1))
        return [flat[i * kk : (i + 1) * kk] for i in range(m)]

    # -- lifetime ----------------------------------------------------------------
    def close(self) -> None:
        """Close the embedder's network connections, if it has any (HTTP embedders reopen them
        when used again, so the knowledge base stays usable)."""
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
        """Sizes and settings: chunks, documents, deletions, bytes, embedder, index, path."""
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


def _check_embedder(embedder: object) -> None:
    # Checked on the class: reading ``dim`` of an unfitted embedder would raise.
    cls = type(embedder)
    if not (
        callable(getattr(cls, "embed", None))
        and callable(getattr(cls, "config", None))
        and hasattr(cls, "dim")
    ):
        raise ConfigError(
            f"embedder must provide embed(texts), dim and config(); got {type(embedder).__name__}"
        )


def _validated_vectors(embedder: Embedder, texts: list[str]) -> np.ndarray:
    vectors = embedder.embed(texts)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.shape != (len(texts), embedder.dim):
        raise EmbedderError(
            f"embedder returned shape {vectors.shape}, expected {(len(texts), embedder.dim)}"
        )
    if not np.isfinite(vectors).all():
        raise EmbedderError("embedder returned non-finite values")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


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
        if isinstance(embedder, VocabularyEmbedder):
            if vectors is None:
                vectors = np.empty((n, embedder.dim), dtype=np.float32)
            out = vectors[row : row + len(c)]
            embedder.embed_utf8(c.text_data, c.text_offsets, out=out, threads=threads)
        else:
            # An HTTP embedder may learn its dimension from its first answer.
            batch_vectors = _validated_vectors(embedder, c.texts())
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


def _make_answer(
    question: str, hits: list[Hit], generation: Generation, timings: dict[str, float]
) -> Answer:
    return Answer(
        question=question,
        text=generation.text,
        found=generation.found,
        hits=tuple(hits),
        citations={c: hits[c - 1] for c in generation.citations if 1 <= c <= len(hits)},
        prompt=generation.prompt if generation.prompt is not None else build_user_message(question, hits),
        timings=timings,
        model=generation.model,
    )
