"""``KnowledgeBase``: the facade that wires the store, the indexes, the retriever and the answers.

It holds no algorithm of its own: corpus versions are made in
:mod:`fastrag.corpus.build`, saved and opened by
:mod:`fastrag.corpus.persist`, searched by the
:class:`~fastrag.retrieve.Retriever` and answered by the
:class:`~fastrag.answer.AnswerPipeline`.

Concurrency: what readers search is one immutable
:class:`~fastrag.corpus.Corpus` (store, vector index, keyword indexes).
Writers (``add``, ``delete``, ``compact``, ``sync``, ``set_index``,
``save``) take one lock, build the next corpus from copies and publish it
with one attribute assignment; readers never lock and never see a
half-written state.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import pyarrow as pa

from ._threads import OPEN, admission
from .answer.generate import Generator
from .answer.pipeline import AnswerEvent, AnswerPipeline, Item
from .answer.rows import rows_per_question, with_rows
from .answer.stages import StageTimer
from .answer.table import answers_table
from .corpus import build as corpora
from .corpus.corpus import Corpus
from .corpus.ontology import Ontology, as_ontology
from .corpus.persist import Settings, describe, open_corpus, save_corpus
from .embed.base import Embedder, check_embedder, query_vectors
from .embed.static import StaticEmbedder
from .embed.vocabulary import VocabularyEmbedder
from .errors import (
    ConfigError,
    DocumentError,
    SearchIndexError,
    SnapshotNotFoundError,
    StoreCorruptedError,
)
from .index.hnsw import HnswConfig
from .index.stores import StoreIndex, VectorStore, is_store_spec, parse_store
from .options import (
    DEFAULT_K,
    AnswerOptions,
    RetrievalConfig,
    RetrievalOptions,
    check_k,
    check_question,
    parse_options,
)
from .retrieve.filters import pushdown
from .retrieve.masks import eligible_rows
from .retrieve.multimodal import MultimodalContext
from .retrieve.quality import verify_index
from .retrieve.retriever import Retriever
from .retrieve.rewrite import QueryRewriter
from .retrieve.tune import FusionChoice, check_tune, tune_at_build, tune_corpus
from .store.ingest import BuildProgress
from .store.rows import HIT_TABLE, hits_table
from .store.snapshots import (
    MANIFEST,
    SnapshotInfo,
    check_tag,
    hold_snapshot,
    list_snapshots,
    prune_snapshots,
    read_manifest,
)
from .store.sync import SyncPlan, plan_sync, stored_documents
from .text.chunking import Chunker
from .text.pii import Redactor
from .text.tokenize import Tokenizer
from .types import Answer, Hit

__all__ = ["BuildProgress", "KnowledgeBase"]

INDEX_KINDS = ("exact", "hnsw")
SNAPSHOT_CACHE = 4
"""Kept snapshots a loaded knowledge base holds open for ``snapshot=`` calls (least recently
used first out)."""
AnyGenerator = Generator | Callable[..., Any] | None


def _check_index(index: str | VectorStore, *, allow_auto: bool) -> str | VectorStore:
    if is_store_spec(index):
        return parse_store(index)  # type: ignore[arg-type]
    kinds = INDEX_KINDS + (("auto",) if allow_auto else ())
    if index not in kinds:
        raise ConfigError(
            f"index must be one of {', '.join(map(repr, kinds))} or a vector store "
            f"('faiss', 'lancedb:/dir', 'qdrant:/dir', 'qdrant-edge:/dir', 'milvus:/file.db', "
            f"...); got {index!r}"
        )
    return index


def _hnsw_config(hnsw: HnswConfig | Mapping[str, Any] | None) -> HnswConfig:
    if hnsw is None or isinstance(hnsw, HnswConfig):
        return hnsw or HnswConfig()
    if isinstance(hnsw, Mapping):
        return HnswConfig.from_dict(hnsw)
    raise ConfigError(f"hnsw must be an HnswConfig or a dict, got {type(hnsw).__name__}")


def _positive(name: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{name} must be a positive int, got {value!r}")


_LOCAL_EMBEDDERS = (VocabularyEmbedder, StaticEmbedder)
"""Embedders whose questions are embedded by a kernel in this process (no model call)."""


class KnowledgeBase:
    """Chunks, vectors, keyword index and metadata of a document collection, searchable.

    Create one with :meth:`build` or :meth:`load`; the constructor is internal.
    """

    def __init__(
        self, corpus: Corpus, settings: Settings, *, rewriter: Any = None,
        path: Path | None = None, snapshot: str | None = None,
    ) -> None:  # fmt: skip
        self._corpus, self._settings = corpus, settings
        self._path, self._snapshot, self._dirty = path, snapshot, path is None
        self._lock = threading.RLock()  # writers take it; readers never do
        self._retriever = Retriever(settings.retrieval, rewriter, Redactor())
        self._pipeline = AnswerPipeline(self._retriever.redactor)
        self._metrics_lock = threading.Lock()
        self._metrics = {"retrievals": 0, "answers": 0, "answers_citing": 0}
        # Kept snapshots opened for ``snapshot=`` calls: id -> corpus (LRU), and the
        # ids of the names asked for, valid while the manifest file is unchanged.
        self._views_lock = threading.RLock()
        self._views: OrderedDict[str, Corpus] = OrderedDict()
        self._names: dict[str, str] = {}
        self._names_stamp: tuple[int, int, int] | None = None

    # -- construction and updates ----------------------------------------------
    @classmethod
    def build(
        cls, docs: Iterable[Any], *, window: int = 200, overlap: int = 40,
        chunking: str = "auto", embedder: Embedder | None = None,
        index: str | VectorStore = "exact",
        hnsw: HnswConfig | dict[str, Any] | None = None, keyword: bool = True,
        tokenizer: Tokenizer | None = None, retrieval: RetrievalConfig | None = None,
        rewriter: Any = None, threads: int | None = None,
        progress: Callable[[BuildProgress], None] | None = None,
        ontology: Ontology | Mapping[str, Any] | str | Path | None = None,
        tune: bool | str = "auto",
    ) -> KnowledgeBase:  # fmt: skip
        """Chunk, embed and index documents (see README, "Library quick start").

        ``docs`` (:class:`~fastrag.Document` objects or dicts with ``id`` and
        ``text``) are consumed once, in batches. ``chunking`` is ``"auto"``
        (structure for documents a PDF, HTML, Word or Markdown loader read,
        by their ``format``; windows for every other), ``"windows"``
        (``window``/``overlap`` characters) or ``"structure"`` (whole
        headings, paragraphs, list items and table rows packed up to
        ``window``, each chunk with its heading path as ``section``; a
        loader's table row is a chunk of its own with ``table`` and ``row``).
        ``embedder`` defaults to a :class:`~fastrag.VocabularyEmbedder`
        fitted on the chunks; ``index`` is ``"exact"``, ``"hnsw"``,
        ``"auto"`` (exact below 5,000 chunks or when HNSW recall@10 is under
        0.95), or an external vector store: ``"faiss"``,
        ``"faiss:IVF1024,Flat"``, ``"lancedb:/abs/dir"``, ``"qdrant:/abs/dir"``,
        ``"qdrant://host:6333"``, ``"qdrant-edge:/abs/dir"``, ``"milvus:/abs/file.db"``,
        ``"milvus://host:19530"`` or a :class:`~fastrag.index.stores.VectorStore`
        (README, "Vector stores"); ``keyword`` builds the BM25 indexes (``tokenizer`` default
        ``Tokenizer(stem="porter")``); ``retrieval`` sets the default mode,
        fusion and limits; ``progress`` gets a :class:`BuildProgress` per batch;
        ``ontology`` (a YAML or JSON path, a dict or an
        :class:`~fastrag.corpus.ontology.Ontology`) expands the keyword
        legs' queries (see :meth:`set_ontology`). ``tune`` chooses the hybrid
        fusion from pseudo-questions of the corpus (:mod:`fastrag.retrieve.tune`):
        ``"auto"`` when ``retrieval`` leaves the fusion and weights unset and
        the corpus has at least 200 documents, in at most 10 % of the build's
        time; ``True`` always; ``False`` keeps the embedder kind's fixed
        weights. ``stats()["fusion_tuning"]`` says what it chose or why it
        did not run.
        """
        check_tune(tune)  # before any work
        t0 = time.perf_counter()
        onto = as_ontology(ontology)  # a bad ontology fails before any work
        chunker = Chunker(window=window, overlap=overlap, mode=chunking)
        index = _check_index(index, allow_auto=True)
        config = _hnsw_config(hnsw)
        emb = VocabularyEmbedder() if embedder is None else embedder
        check_embedder(emb)
        if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
            raise ConfigError(
                f"tokenizer must be a fastrag.text.Tokenizer, got {type(tokenizer).__name__}"
            )
        corpus, kind, auto = corpora.build_corpus(
            docs, chunker, emb, index=index, hnsw=config, tokenizer=tokenizer,
            keyword=keyword, threads=threads, progress=progress,
        )  # fmt: skip
        settings = Settings(chunker, kind, config, auto, retrieval or RetrievalConfig())
        if onto is not None:
            corpus = dataclasses.replace(corpus, ontology=onto)
        kb = cls(corpus, settings, rewriter=rewriter)
        kb._tune_at_build(tune, time.perf_counter() - t0)
        return kb

    def _tune_at_build(self, tune: bool | str, build_seconds: float) -> None:
        """Apply :func:`~fastrag.retrieve.tune.tune_at_build` and keep its report."""
        choice, report = tune_at_build(
            self._corpus, self._retriever, tune=tune, build_seconds=build_seconds
        )
        self._apply_tuning(choice, report)

    def _apply_tuning(self, choice: FusionChoice | None, report: dict[str, Any]) -> None:
        """Make ``choice`` the retrieval settings unless it kept the default; keep ``report``."""
        cfg = self._settings.retrieval
        if choice is not None and not choice.kept_default:
            cfg = choice.config(cfg)
            self._retriever.config = cfg
        self._settings = dataclasses.replace(self._settings, retrieval=cfg, fusion_tuning=report)

    @property
    def ontology(self) -> Ontology | None:
        """The ontology expanding the keyword legs' queries (None: none)."""
        return self._corpus.ontology

    def set_ontology(self, ontology: Ontology | Mapping[str, Any] | str | Path | None) -> None:
        """Replace the ontology (no rebuild; ``None`` removes it); the next :meth:`save` keeps it.

        A question naming an entity (name or alias) gains its canonical name
        on the keyword legs, and a relation-aware one the related entities'
        terms (:mod:`fastrag.corpus.ontology`); the vector leg embeds the
        question as asked. Raises :class:`~fastrag.errors.OntologyError`
        (:class:`~fastrag.errors.DuplicateAliasError`,
        :class:`~fastrag.errors.UnknownRelationTargetError`) and changes
        nothing when ``ontology`` is malformed.
        """
        onto = as_ontology(ontology)
        with self._lock:
            self._publish(dataclasses.replace(self._corpus, ontology=onto))

    def _publish(self, corpus: Corpus) -> None:
        """Make ``corpus`` current (the caller holds the writer lock)."""
        self._corpus, self._dirty = corpus, True

    def set_index(
        self,
        index: str | VectorStore,
        *,
        hnsw: HnswConfig | dict[str, Any] | None = None,
        threads: int | None = None,
    ) -> str:
        """Switch the vector index (exact, hnsw, auto or a store); return the kind in use."""
        index = _check_index(index, allow_auto=True)
        config = _hnsw_config(hnsw) if hnsw is not None else self._settings.hnsw
        with self._lock:
            corpus, kind, auto = corpora.with_index(self._corpus, index, config, threads=threads)
            self._settings = self._settings.replace(index=kind, hnsw=config, auto=auto)
            self._publish(corpus)
            return kind

    def add(
        self, docs: Iterable[Any], *, replace: Iterable[str] = (), threads: int | None = None
    ) -> int:
        """Add documents; return the number of chunks added.

        Every document is validated, chunked and embedded before anything
        changes: on any error the knowledge base is exactly as it was. Ids
        already stored raise :class:`~fastrag.errors.DuplicateDocumentError`
        unless listed in ``replace``, whose stored documents are deleted in
        the same step.
        """
        with self._lock:
            corpus, added = corpora.add_documents(
                self._corpus, docs, self._settings.chunker, replace=replace, threads=threads
            )
            if corpus is not self._corpus:
                self._publish(corpus)
            return added

    def sync(
        self, documents: Iterable[Any], *, delete_missing: bool = True,
        on_error: Callable[[Any, str], None] | None = None, threads: int | None = None,
    ) -> SyncPlan:  # fmt: skip
        """Make the knowledge base hold exactly ``documents``: add, replace, delete what changed.

        ``documents`` are documents or the lazy sources of
        :func:`fastrag.store.loaders.resolve_sources` (a file is hashed, and
        parsed only when its hash changed), compared by ``origin_sha256``.
        With ``delete_missing`` stored documents nothing yields any more are
        deleted; ``on_error(source, reason)`` hears of a file that cannot be
        read (its stored documents are kept; without it the error is raised).
        Every change is one :meth:`add` with ``replace``: on any error nothing
        changes. Returns the :class:`~fastrag.store.sync.SyncPlan` applied.
        """
        with self._lock:
            stored = stored_documents(self._corpus.store)
            plan = plan_sync(stored, documents, delete_missing=delete_missing, on_error=on_error)
            if plan.changed:
                self.add(plan.documents(), replace=plan.removed_ids(), threads=threads)
            return plan

    def delete(self, doc_ids: str | Iterable[str], *, missing_ok: bool = False) -> int:
        """Delete documents (all their chunks); return the number of chunks deleted.

        Deleted chunks are never returned again, by any mode or index, also
        after :meth:`save` and :meth:`load`; :meth:`compact` reclaims their
        space. Ids not stored raise :class:`~fastrag.errors.DocumentNotFoundError`
        (which changes nothing) unless ``missing_ok``.
        """
        ids = [doc_ids] if isinstance(doc_ids, str) else list(doc_ids)
        for d in ids:
            if not isinstance(d, str):
                raise DocumentError(f"document ids are strings, got {type(d).__name__}")
        with self._lock:
            corpus, killed = corpora.delete_documents(
                self._corpus, list(dict.fromkeys(ids)), missing_ok=missing_ok
            )
            if killed:
                self._publish(corpus)
            return killed

    def compact(self, *, threads: int | None = None) -> int:
        """Drop deleted chunks for good; return how many were dropped (chunk ids do not change)."""
        with self._lock:
            corpus, dropped = corpora.compact(self._corpus, self._settings.hnsw, threads=threads)
            if dropped:
                self._publish(corpus)
            return dropped

    def tune_fusion(self, *, queries: int = 60, seed: int = 0, apply: bool = True) -> Any:
        """Choose the fusion from pseudo-questions of this corpus (:mod:`fastrag.retrieve.tune`).

        With ``apply`` the choice becomes the retrieval settings (saved in the
        manifest by the next :meth:`save`); returns the
        :class:`~fastrag.retrieve.tune.FusionChoice`.
        """
        choice = tune_corpus(self._corpus, self._retriever, queries=queries, seed=seed)
        if apply:
            with self._lock:
                self._apply_tuning(choice, choice.report(applied=not choice.kept_default))
                self._dirty = True
        return choice

    # -- persistence -----------------------------------------------------------
    def save(
        self, path: str | Path, *, keep: int | None = 2, overwrite: bool = False,
        compact_share: float = 0.2, tag: str | None = None,
    ) -> str:  # fmt: skip
        """Write the knowledge base to ``path`` as a new snapshot; return its id.

        Atomic: a crash at any point leaves the previous snapshot current and
        intact. ``keep`` snapshots are kept (``None``: all); ``overwrite``
        replaces a knowledge base of another embedder or dimension; the save
        compacts first when ``compact_share`` of the chunks are deleted.
        ``tag`` names the new snapshot (``"fanuc-0imd-v3.2"``: a letter,
        then letters, digits, ``.``, ``_``, ``-``), unique among the kept
        snapshots; calls then ask for it with ``snapshot="fanuc-0imd-v3.2"``.
        A tagged save always writes a snapshot, even without changes.
        """
        _positive("keep", keep)
        if tag is not None:
            check_tag(tag)
        root = Path(path)
        with self._lock:
            if (
                tag is None
                and not self._dirty
                and self._path is not None
                and root.resolve() == self._path.resolve()
            ):
                return str(self._snapshot)
            store = self._corpus.store
            if store.n_rows and store.n_dead >= compact_share * store.n_rows:
                self.compact()
            sid = save_corpus(
                root, self._corpus, self._settings, keep=keep, overwrite=overwrite, tag=tag
            )
            self._path, self._snapshot, self._dirty = root, sid, False
            return sid

    @classmethod
    def load(
        cls, path: str | Path, *, snapshot: str | None = None, embedder: Embedder | None = None,
        verify: bool = False, rewriter: Any = None,
    ) -> KnowledgeBase:  # fmt: skip
        """Open a saved knowledge base; its vectors and keyword indexes are memory-mapped.

        ``snapshot`` picks an older one (:meth:`snapshots`); ``embedder`` is
        needed for embedders whose configuration holds no weights or secrets
        and must match the one it was built with
        (:class:`~fastrag.errors.EmbedderMismatchError`); ``verify`` checks
        every file's SHA-256 and every vector; ``rewriter`` is not saved.
        """
        with hold_snapshot(Path(path), snapshot) as held:  # pruning waits while files open
            corpus, settings, dirty = open_corpus(
                held, retrieval=RetrievalConfig.from_dict, embedder=embedder, verify=verify
            )
        kb = cls(
            corpus, settings, rewriter=rewriter, path=held.manifest.root, snapshot=held.entry.id
        )
        kb._dirty = (
            dirty  # an older snapshot saved back becomes current; older formats are rewritten
        )
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
        graph = self._corpus.graph
        return graph is None or graph.ready()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`ready` (at most ``timeout`` seconds); return it.

        Raises
        ------
        StoreCorruptedError
            The HNSW graph failed its checks (its file is damaged); searches
            stay exact.
        """
        graph = self._corpus.graph
        try:
            return graph is None or graph.wait_ready(timeout)
        except SearchIndexError as exc:  # a damaged file is a damaged store, as at load
            raise StoreCorruptedError(str(exc)) from exc

    def snapshots(self) -> list[SnapshotInfo]:
        """The saved snapshots at this knowledge base's path, oldest first."""
        return [] if self._path is None else list_snapshots(self._path)

    def _resolve(self, name: object) -> str:
        """The id of the kept snapshot ``name`` (an id or a tag) names."""
        if not isinstance(name, str) or not name:
            raise ConfigError(f"snapshot must be a snapshot id or tag, got {name!r}")
        if self._path is None:
            raise SnapshotNotFoundError(
                f"no snapshot {name[:80]!r}: this knowledge base was never saved or loaded"
            )
        try:
            st = os.stat(self._path / MANIFEST)
            stamp: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        with self._views_lock:
            if stamp is not None and stamp == self._names_stamp and name in self._names:
                return self._names[name]
        sid = read_manifest(self._path).snapshot(name).id
        with self._views_lock:
            if stamp != self._names_stamp:
                self._names, self._names_stamp = {}, stamp
            self._names[name] = sid  # only listed ids and tags: bounded by the manifest
        return sid

    def _open_view(self, sid: str) -> Corpus:
        """Open kept snapshot ``sid`` memory-mapped (held against pruning while it opens)."""
        assert self._path is not None
        with hold_snapshot(self._path, sid) as held:
            current = self._corpus.embedder
            same = dict(held.manifest.embedder) == current.config()
            corpus, _, _ = open_corpus(
                held, retrieval=RetrievalConfig.from_dict, embedder=current if same else None
            )
            if corpus.graph is not None:  # map the whole graph while its files are held
                corpus.graph.wait_ready()
        return corpus

    def snapshot_id(self, snapshot: str | None = None) -> str | None:
        """The id of the snapshot a call with ``snapshot=`` reads (None: the loaded one's id).

        Raises
        ------
        SnapshotNotFoundError
            No kept snapshot has that id or tag.
        """
        return self._snapshot if snapshot is None else self._resolve(snapshot)

    def _at(self, snapshot: str | None) -> tuple[Corpus, str | None]:
        """The corpus and snapshot id a call reads: the loaded one, or a kept snapshot.

        Raises
        ------
        SnapshotNotFoundError
            No kept snapshot has that id or tag (or the knowledge base was never saved).
        """
        if snapshot is None:
            return self._corpus, self._snapshot
        sid = self._resolve(snapshot)
        corpus = self._corpus
        if sid == self._snapshot and not self._dirty:
            return corpus, sid
        with self._views_lock:
            view = self._views.get(sid)
            if view is None:
                view = self._open_view(sid)
                self._views[sid] = view
                while len(self._views) > SNAPSHOT_CACHE:
                    self._views.popitem(last=False)
            else:
                self._views.move_to_end(sid)
            return view, sid

    def prune(self, keep: int = 1) -> list[str]:
        """Remove all but the ``keep`` newest snapshots (never the current one)."""
        _positive("keep", keep)
        return [] if self._path is None else prune_snapshots(self._path, keep)

    # -- settings --------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """The embedder documents and questions are embedded with."""
        return self._corpus.embedder  # type: ignore[no-any-return]

    @property
    def index(self) -> str:
        """The vector index in use: ``"exact"``, ``"hnsw"`` or a store's engine (``"faiss"``...)."""
        return self._settings.index

    @property
    def rewriter(self) -> Any:
        """The query rewriter (a :class:`~fastrag.QueryRewriter` unless replaced)."""
        return self._retriever.rewriter

    @rewriter.setter
    def rewriter(self, value: Any) -> None:
        self._retriever.rewriter = value

    @property
    def redactor(self) -> Redactor:
        """PII redaction of model-bound text; replace it to add ``extra_pii_patterns``."""
        return self._retriever.redactor

    @redactor.setter
    def redactor(self, value: Redactor) -> None:
        if not isinstance(value, Redactor):
            raise ConfigError(f"redactor must be a fastrag.Redactor, got {type(value).__name__}")
        self._retriever.redactor = self._pipeline.redactor = value

    # -- retrieval ---------------------------------------------------------------
    def _question(self, question: object, where: str = "question") -> str:
        return check_question(question, self._retriever.config.max_question_chars, where)

    def _questions(self, questions: Sequence[Any], method: str, single: str) -> list[Any]:
        if isinstance(questions, str):
            raise ConfigError(f"{method}() takes a sequence of questions; use {single}()")
        return list(questions)

    def _count(self, retrievals: int = 0, answers: Sequence[Answer] = ()) -> None:
        with self._metrics_lock:
            self._metrics["retrievals"] += retrievals
            if answers:
                self._metrics["answers"] += len(answers)
                self._metrics["answers_citing"] += sum(1 for a in answers if a.citations)

    def embed_questions(
        self, questions: Sequence[str], *, threads: int | None = None
    ) -> np.ndarray:
        """Embed questions with the knowledge base's embedder: float32 ``(m, dim)``."""
        for i, q in enumerate(questions):
            self._question(q, f"question {i}")
        return query_vectors(self._corpus.embedder, questions, threads=threads)

    def search(
        self, query_vectors: np.ndarray, k: int, *, exact: bool = False,
        where: Mapping[str, Any] | None = None, principal: Any = None, threads: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """The vector leg alone: top-``k`` eligible rows and cosines per query vector."""
        c = self._corpus
        k = min(check_k(k), max(1, c.store.n_rows))
        mask = eligible_rows(c.store, where, principal)
        if isinstance(c.vectors, StoreIndex):
            return c.vectors.search(
                query_vectors, k, mask=mask, exact=exact, threads=threads,
                pushdown=pushdown(where, principal),
            )  # fmt: skip
        return c.vectors.search(query_vectors, k, mask=mask, exact=exact, threads=threads)

    def hits(
        self, rows: np.ndarray, scores: np.ndarray, relevance: np.ndarray | None = None
    ) -> list[Hit]:
        """:class:`~fastrag.Hit` objects of global rows (``-1`` padding is skipped)."""
        return self._corpus.store.hits(rows, scores, relevance)

    def retrieve(
        self,
        question: str,
        k: int = DEFAULT_K,
        *,
        retrieval: RetrievalOptions | None = None,
        snapshot: str | None = None,
        **shorthand: Any,
    ) -> list[Hit]:
        """The ``k`` chunks that best match ``question``, best first.

        Options are ``retrieval=`` (a :class:`~fastrag.RetrievalOptions`)
        and its fields as keywords: ``mode``, ``where``, ``principal``,
        ``exact``, ``rewrite``, ``reranker``, ``group_by``, ``threads``,
        ``acl_statistics`` (the old ``options=`` still works, with a
        :class:`DeprecationWarning`).
        ``snapshot`` (an id or a tag, see :meth:`snapshots`) searches that
        kept snapshot instead of the loaded state: opened memory-mapped on
        first use, then kept open (the :data:`SNAPSHOT_CACHE` most recently
        used); an unknown one raises
        :class:`~fastrag.errors.SnapshotNotFoundError`.

        Safe to call from many threads at once. With ``FASTRAG_ADMISSION=auto``
        (or a count; :func:`fastrag._threads.set_admission`; off by default) a
        call that runs wholly in this process (see :meth:`_gate`) first passes
        the process's admission gate, :class:`fastrag._threads.Admission`: at
        most that many callers search at once, the others sleep until one
        leaves. Results do not depend on it.
        """
        opts, _ = parse_options(shorthand, retrieval, answers=False)
        question, k = self._question(question), check_k(k)
        corpus, _ = self._at(snapshot)
        with self._gate(corpus, opts):
            hits, _ = self._retriever.retrieve(corpus, [question], k, opts)
            self._count(retrievals=1)
        return hits[0]

    def _gate(self, corpus: Corpus, opts: RetrievalOptions) -> Any:
        """The admission gate (:func:`fastrag._threads.admission`) of a call that stays in-process.

        Only a retrieval whose every step runs here (the rule rewriter, a
        kernel embedder or none, fastrag's own index, no reranker) waits at
        the gate: one that may wait on a model or a store over the network
        must not hold a place meanwhile. With the gate off (the default) nothing is checked.
        """
        gate = admission()
        if gate is OPEN or opts.reranker is not None:
            return OPEN
        rewriter = self._retriever.rewriter
        if opts.rewrite and rewriter is not None and type(rewriter) is not QueryRewriter:
            return OPEN
        mode = self._retriever.config.mode if opts.mode is None else opts.mode
        if mode != "keyword" and (
            type(corpus.embedder) not in _LOCAL_EMBEDDERS or isinstance(corpus.vectors, StoreIndex)
        ):
            return OPEN
        return gate

    @overload
    def retrieve_batch(
        self, questions: Sequence[str], k: int = DEFAULT_K, *,
        retrieval: RetrievalOptions | None = None, snapshot: str | None = None,
        output: Literal["table"] = "table", **shorthand: Any,
    ) -> pa.Table: ...  # fmt: skip

    @overload
    def retrieve_batch(
        self, questions: Sequence[str], k: int = DEFAULT_K, *,
        retrieval: RetrievalOptions | None = None, snapshot: str | None = None,
        output: Literal["hits"], **shorthand: Any,
    ) -> list[list[Hit]]: ...  # fmt: skip

    def retrieve_batch(
        self, questions: Sequence[str], k: int = DEFAULT_K, *,
        retrieval: RetrievalOptions | None = None, snapshot: str | None = None,
        output: str = "table", **shorthand: Any,
    ) -> pa.Table | list[list[Hit]]:  # fmt: skip
        """Retrieve for many questions at once: one row per (question, hit), by question then rank.

        Columns ``query_index``, ``rank`` (1 = best), ``chunk_id``,
        ``doc_id``, ``score``, ``text``; options and ``snapshot`` as for
        :meth:`retrieve`. ``output="hits"``: per question its list of
        :class:`~fastrag.Hit` (as :meth:`retrieve` returns), from one batched search.
        """
        if output not in ("table", "hits"):
            raise ConfigError(f"output must be 'table' or 'hits', got {output!r}")
        opts, _ = parse_options(shorthand, retrieval, answers=False)
        questions = self._questions(questions, "retrieve_batch", "retrieve")
        k, (corpus, _) = check_k(k), self._at(snapshot)
        questions = [self._question(q, f"question {i}") for i, q in enumerate(questions)]
        if not questions:
            return HIT_TABLE.empty_table() if output == "table" else []
        self._count(retrievals=len(questions))
        if output == "hits":
            return self._retriever.retrieve(corpus, questions, k, opts)[0]
        if opts.reranker is None:
            queries = self._retriever.rewrite(questions, opts, ontology=corpus.ontology)
            ranked = self._retriever.rank(corpus, queries, k, opts)
            return corpus.store.hit_table(ranked.rows, ranked.scores)
        return hits_table(self._retriever.retrieve(corpus, questions, k, opts)[0])

    # -- answers -------------------------------------------------------------------
    def _items(
        self,
        corpus: Corpus,
        questions: list[str],
        k: int,
        ropts: RetrievalOptions,
        aopts: AnswerOptions,
    ) -> list[Item]:
        """Rewrite, retrieve and rerank ``questions`` for the answer stages (one block)."""
        timings: dict[str, float] = {}
        timer = StageTimer(timings, aopts.on_stage)
        gate = self._gate(corpus, ropts) if aopts.on_stage is None else OPEN  # a hook is user code
        with gate:
            hits, ranked = self._retriever.retrieve(
                corpus, questions, k, ropts, redact=aopts.redact, timer=timer
            )
        share = {name: s / len(questions) for name, s in timings.items()}
        return [
            (q, h, r, dict(share)) for q, h, r in zip(questions, hits, ranked.queries, strict=True)
        ]

    def answer(
        self, question: str, k: int = DEFAULT_K, *, generator: AnyGenerator = None,
        retrieval: RetrievalOptions | None = None, answer: AnswerOptions | None = None,
        snapshot: str | None = None, rows: Any = None, **shorthand: Any,
    ) -> Answer:  # fmt: skip
        """Answer a question from the knowledge base, citing the chunks it uses.

        Stages: rewrite, retrieve (and filter), rerank, context, freshness,
        conflicts, redact, generate, verify, audit (``Answer.timings``).
        ``generator`` defaults to the offline extractive answerer.
        ``retrieval=`` / ``answer=`` are :class:`~fastrag.RetrievalOptions`
        and :class:`~fastrag.AnswerOptions`; their fields are accepted as
        keywords too (``mode``, ``where``, ``principal``, ``budget``,
        ``schema``, ``min_faithfulness``, ...); the old ``options=`` still
        works, with a :class:`DeprecationWarning`. Unknown options raise a
        :class:`~fastrag.errors.ConfigError` naming them. ``snapshot`` answers
        from a kept snapshot (as for :meth:`retrieve`); ``Answer.snapshot``
        is the id of the snapshot answered from. ``rows`` (a
        :class:`~fastrag.SqlResult` or several) puts SQL rows in the context
        before the chunks, each cited as ``sql:<table>#<key>`` (see
        :mod:`fastrag.answer.rows`).
        """
        ropts, aopts = parse_options(shorthand, retrieval, answer)
        question, k = self._question(question), check_k(k)
        corpus, sid = self._at(snapshot)
        ((q, hits, query, before),) = self._items(corpus, [question], k, ropts, aopts)
        ans = self._pipeline.answer(
            q, with_rows(hits, rows), query=query, timings=before, generator=generator,
            options=aopts, snapshot=sid,
        )  # fmt: skip
        self._count(retrievals=1, answers=[ans])
        return ans

    def answer_stream(
        self, question: str, k: int = DEFAULT_K, *, generator: AnyGenerator = None,
        retrieval: RetrievalOptions | None = None, answer: AnswerOptions | None = None,
        snapshot: str | None = None, rows: Any = None, **shorthand: Any,
    ) -> Iterator[AnswerEvent]:  # fmt: skip
        """:meth:`answer` as events: the context hits, the text as it is generated, the Answer.

        The question is checked and retrieval runs before the first event
        (errors are raised at once); see :meth:`fastrag.answer.AnswerPipeline.stream`.
        """
        ropts, aopts = parse_options(shorthand, retrieval, answer)
        question, k = self._question(question), check_k(k)
        corpus, sid = self._at(snapshot)
        ((q, hits, query, before),) = self._items(corpus, [question], k, ropts, aopts)
        events = self._pipeline.stream(
            q, with_rows(hits, rows), query=query, timings=before, generator=generator,
            options=aopts, snapshot=sid,
        )  # fmt: skip

        def counted() -> Iterator[AnswerEvent]:
            for event in events:
                if event.answer is not None:
                    self._count(retrievals=1, answers=[event.answer])
                yield event

        return counted()

    def multimodal_query(
        self, context: MultimodalContext, k: int = DEFAULT_K, **options: Any
    ) -> Answer:
        """Answer a :class:`~fastrag.MultimodalContext`: its fused text through :meth:`answer`.

        Images are read with Tesseract first (see :mod:`fastrag.retrieve.multimodal`);
        ``options`` are :meth:`answer`'s.
        """
        if not isinstance(context, MultimodalContext):
            raise ConfigError(
                "multimodal_query() takes a fastrag.MultimodalContext, got "
                f"{type(context).__name__}"
            )
        return self.answer(context.fuse(), k, **options)

    @overload
    def answer_batch(
        self, questions: Sequence[str], k: int = DEFAULT_K, *, generator: AnyGenerator = None,
        retrieval: RetrievalOptions | None = None, answer: AnswerOptions | None = None,
        max_concurrency: int | None = None, requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None, output: Literal["table"] = "table",
        snapshot: str | None = None, rows: Any = None, **shorthand: Any,
    ) -> pa.Table: ...  # fmt: skip

    @overload
    def answer_batch(
        self, questions: Sequence[str], k: int = DEFAULT_K, *, generator: AnyGenerator = None,
        retrieval: RetrievalOptions | None = None, answer: AnswerOptions | None = None,
        max_concurrency: int | None = None, requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None, output: Literal["answers"],
        snapshot: str | None = None, rows: Any = None, **shorthand: Any,
    ) -> list[Answer | None]: ...  # fmt: skip

    @overload
    def answer_batch(
        self, questions: Sequence[str], k: int = DEFAULT_K, *, generator: AnyGenerator = None,
        retrieval: RetrievalOptions | None = None, answer: AnswerOptions | None = None,
        max_concurrency: int | None = None, requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None, output: Literal["results"],
        snapshot: str | None = None, rows: Any = None, **shorthand: Any,
    ) -> list[tuple[Answer | None, str | None]]: ...  # fmt: skip

    @overload
    def answer_batch(
        self, questions: Sequence[str], k: int = DEFAULT_K, *, generator: AnyGenerator = None,
        retrieval: RetrievalOptions | None = None, answer: AnswerOptions | None = None,
        max_concurrency: int | None = None, requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None, output: str = "table",
        snapshot: str | None = None, rows: Any = None, **shorthand: Any,
    ) -> pa.Table | list[Answer | None] | list[tuple[Answer | None, str | None]]: ...  # fmt: skip

    def answer_batch(
        self, questions: Sequence[str], k: int = DEFAULT_K, *, generator: AnyGenerator = None,
        retrieval: RetrievalOptions | None = None, answer: AnswerOptions | None = None,
        max_concurrency: int | None = None, requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None, output: str = "table",
        snapshot: str | None = None, rows: Any = None, **shorthand: Any,
    ) -> pa.Table | list[Answer | None] | list[tuple[Answer | None, str | None]]:  # fmt: skip
        """Answer many questions: the same stages as :meth:`answer`, batched where a stage allows.

        One embedding call and one search per leg for each block of
        questions; generation runs concurrently (``max_concurrency`` calls
        in flight, within ``requests_per_minute`` / ``tokens_per_minute``),
        overlapped with retrieval of the next block when a model client
        answers; with a local generator (the extractive one) and no rate
        limits, a batch of more than 2,048 questions is answered in blocks
        of 1,024, the next retrieved on a worker thread meanwhile
        (:func:`fastrag.answer.pipeline.block_bounds`). Identical questions
        are answered once. A question that fails (empty, too long, a model
        error after retries) gets ``error`` filled and ``found`` False; the
        others are answered, in input order.
        Returns a :class:`pyarrow.Table` (``output="table"``, see
        :data:`~fastrag.answer.table.ANSWER_BATCH_SCHEMA`) or, with
        ``output="answers"``, a list of :class:`~fastrag.Answer` (``None``
        for a failed question), or with ``output="results"`` a list of
        ``(answer, error)`` pairs (the answer None and the error's text set
        for a failed question). ``snapshot`` answers every question from a
        kept snapshot (as for :meth:`retrieve`). ``rows`` puts SQL rows in the
        context as :meth:`answer` does: one :class:`~fastrag.SqlResult` for
        every question, or a list with one entry per question (``None`` for
        none; see :func:`fastrag.answer.rows.rows_per_question`).
        """
        if output not in ("table", "answers", "results"):
            raise ConfigError(f"output must be 'table', 'answers' or 'results', got {output!r}")
        ropts, aopts = parse_options(shorthand, retrieval, answer)
        questions = self._questions(questions, "answer_batch", "answer")
        k, (corpus, sid) = check_k(k), self._at(snapshot)
        answers, errors = self._pipeline.answer_questions(
            questions, lambda block: self._items(corpus, block, k, ropts, aopts), self._question,
            generator=generator, options=aopts, snapshot=sid,
            max_concurrency=max_concurrency, requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute, rows=rows_per_question(rows, len(questions)),
        )  # fmt: skip
        done = [a for a in answers if a is not None]
        self._count(retrievals=len({a.question for a in done}), answers=done)
        if output == "results":
            return list(zip(answers, errors, strict=True))
        return answers if output == "answers" else answers_table(questions, answers, errors)

    # -- introspection -------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """Lifetime counters: ``retrievals``, ``answers``, ``answers_citing`` and ``hit_rate``.

        ``hit_rate`` is the share of answers that cite a retrieved chunk
        (the operational hit rate).
        """
        with self._metrics_lock:
            out: dict[str, Any] = dict(self._metrics)
        out["hit_rate"] = out["answers_citing"] / out["answers"] if out["answers"] else 0.0
        return out

    def verify(
        self, questions: Sequence[str], k: int = 10, *, threads: int | None = None
    ) -> dict[str, Any]:
        """Recall@k of the vector index against exact search, with the latency of each."""
        questions = self._questions(questions, "verify", "retrieve")
        if not questions:
            raise ConfigError("verify() needs at least one question")
        self.wait_ready()  # measure the graph, not the exact fallback of a loading one
        vectors = self.embed_questions(questions, threads=threads)
        return verify_index(
            self._corpus, vectors, min(check_k(k), max(1, len(self))), threads=threads
        )

    def close(self) -> None:
        """Close the embedder's and the vector store's connections (reopened when used again)."""
        close = getattr(self._corpus.embedder, "close", None)
        if callable(close):
            close()
        if self._corpus.external is not None:
            self._corpus.external.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._corpus.store)

    def stats(self) -> dict[str, Any]:
        """Sizes and settings: chunks, documents, deletions, bytes, embedder, indexes, path."""
        return {
            **describe(self._corpus, self._settings),
            "path": str(self._path) if self._path is not None else None,
            "snapshot": self._snapshot,
            "unsaved_changes": self._dirty,
        }

    def __repr__(self) -> str:
        where = f", path={str(self._path)!r}" if self._path is not None else ""
        return (
            f"KnowledgeBase(chunks={len(self)}, dim={self._corpus.store.dim}, "
            f"index={self._settings.index!r}{where})"
        )
