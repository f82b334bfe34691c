"""Plain data types that cross fastrag's public API."""

from __future__ import annotations

import datetime as _dt
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

__all__ = ["Answer", "Document", "Generation", "Hit", "Hits"]


@dataclass(frozen=True, slots=True)
class Document:
    """A document to index.

    Parameters
    ----------
    id : str
        Unique, non-empty identifier; used to delete or replace the document.
    text : str
        The document's text (any white space; it is normalised when chunked).
    metadata : mapping, optional
        ``title`` (str), ``source`` (str), ``updated_at`` (datetime, date,
        ISO-8601 string or epoch seconds), ``acl`` (list of principals that may
        read it; absent means everyone), and any other JSON-serialisable
        fields, which are kept and returned with each hit.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] | None = None


_DEFAULT = object()  # ``metadata`` not given: a new empty dict (what ``default_factory`` gave)


@dataclass(frozen=True, slots=True, init=False)
class Hit:
    """One retrieved chunk.

    Attributes
    ----------
    chunk_id : int
        Stable id of the chunk in its knowledge base.
    doc_id : str
        Id of the document the chunk was cut from.
    ord : int
        Position of the chunk in its document (0, 1, ...).
    start, end : int
        Character offsets of the chunk in the normalised document text.
    text : str
        The chunk's text.
    score : float
        The ranking score of the retrieval mode (higher is better): cosine
        similarity (vector), BM25 (keyword) or the fused reciprocal-rank score
        (hybrid).
    metadata : dict
        ``title``, ``source``, ``updated_at``, ``acl`` when set, and the
        document's other metadata fields.
    relevance : float or None
        How well the chunk matches, in ``[0, 1]`` whatever the mode (see
        :mod:`fastrag.options`); used for thresholds and confidence.
    """

    chunk_id: int
    doc_id: str
    ord: int
    start: int
    end: int
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)
    relevance: float | None = None

    def __init__(
        self, chunk_id: int, doc_id: str, ord: int, start: int, end: int, text: str,
        score: float, metadata: Any = _DEFAULT, relevance: float | None = None,
    ) -> None:  # fmt: skip
        # The dataclass's own __init__ of a frozen class sets each field through
        # ``object.__setattr__`` (a global, an attribute and a call per field); the slot
        # descriptors' setters do the same in half the time, and a retrieval builds ten
        # hits per question. Same fields, defaults, order and immutability.
        _set_chunk_id(self, chunk_id)
        _set_doc_id(self, doc_id)
        _set_ord(self, ord)
        _set_start(self, start)
        _set_end(self, end)
        _set_text(self, text)
        _set_score(self, score)
        _set_metadata(self, {} if metadata is _DEFAULT else metadata)
        _set_relevance(self, relevance)

    def to_dict(self) -> dict[str, Any]:
        """Every field as a dict (metadata as stored; ``json.dumps`` it with ``default=str``)."""
        return {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "ord": self.ord,
            "start": self.start,
            "end": self.end,
            "score": self.score,
            "relevance": self.relevance,
            "text": self.text,
            "metadata": self.metadata,
        }

    @property
    def title(self) -> str | None:
        """The document's title, if it has one."""
        return self.metadata.get("title")

    @property
    def updated_at(self) -> _dt.datetime | None:
        """When the document was last updated, if known."""
        return self.metadata.get("updated_at")


def with_text(hit: Hit, text: str) -> Hit:
    """``dataclasses.replace(hit, text=text)`` without its field introspection.

    The answer stages give hits new text (redacted, with notes) several
    times per answer; a subclass of :class:`Hit` goes through ``replace``.
    """
    if type(hit) is not Hit:
        return replace(hit, text=text)
    return Hit(
        hit.chunk_id, hit.doc_id, hit.ord, hit.start, hit.end, text, hit.score, hit.metadata,
        hit.relevance,
    )  # fmt: skip


# the slots' setters, in field order
(
    _set_chunk_id, _set_doc_id, _set_ord, _set_start, _set_end, _set_text, _set_score,
    _set_metadata, _set_relevance,
) = (getattr(Hit, f.name).__set__ for f in fields(Hit))  # fmt: skip


class LazyMetadata:
    """A hit's metadata not decoded yet: ``decode(row)`` gives it on first read.

    The question path builds ten hits per call and most callers read a hit's
    text and score only; the metadata (dictionary columns and the JSON of the
    extra fields, ~1.5 us a hit) is decoded when ``Hit.metadata`` is first
    read, once per hit, under a lock so that every reader of one hit gets the
    same dict. Equality, ``repr``, ``replace``, ``fields`` and pickling read
    the attribute, so they see the dict.
    """

    __slots__ = ("decode", "row")

    def __init__(self, decode: Callable[[int], dict[str, Any]], row: int) -> None:
        self.decode = decode
        self.row = row


_get_metadata = Hit.__dict__["metadata"].__get__  # the slot itself: a dict or a LazyMetadata
_metadata_lock = threading.Lock()


def _metadata(self: Hit) -> dict[str, Any]:
    value = _get_metadata(self)
    if type(value) is LazyMetadata:
        with _metadata_lock:
            value = _get_metadata(self)
            if type(value) is LazyMetadata:
                value = value.decode(value.row)
                _set_metadata(self, value)
    return value  # type: ignore[no-any-return]


Hit.metadata = property(_metadata, doc="The chunk's metadata (decoded on first read).")  # type: ignore[assignment,method-assign,misc]


class Hits(list):  # type: ignore[type-arg]
    """The hits of one question, best first: a ``list`` of :class:`Hit` plus its arrays.

    It indexes, iterates, compares and serialises exactly like the list of
    hits it holds; the arrays give the same results without touching a
    :class:`Hit`, for callers that only rank, count or join.

    Attributes
    ----------
    ids : numpy.ndarray
        int64 chunk ids, in hit order.
    scores : numpy.ndarray
        float32 ranking scores.
    relevance : numpy.ndarray
        float32 relevances in ``[0, 1]``.
    rows : numpy.ndarray
        int64 rows of the searched store (valid for that version of the
        knowledge base only).
    """

    __slots__ = ("ids", "relevance", "rows", "scores")

    def __init__(
        self,
        hits: Any = (),
        *,
        rows: np.ndarray | None = None,
        scores: np.ndarray | None = None,
        relevance: np.ndarray | None = None,
    ) -> None:
        super().__init__(hits)
        n = len(self)
        self.ids = np.fromiter((h.chunk_id for h in self), dtype=np.int64, count=n)
        self.scores = (
            np.asarray(scores, dtype=np.float32)
            if scores is not None
            else np.fromiter((h.score for h in self), dtype=np.float32, count=n)
        )
        self.relevance = (
            np.asarray(relevance, dtype=np.float32)
            if relevance is not None
            else np.fromiter(
                (np.nan if h.relevance is None else h.relevance for h in self),
                dtype=np.float32, count=n,
            )
        )  # fmt: skip
        self.rows = (
            np.asarray(rows, dtype=np.int64) if rows is not None else np.full(n, -1, np.int64)
        )

    @classmethod
    def _of(
        cls, hits: list[Hit], ids: np.ndarray, rows: np.ndarray, scores: np.ndarray,
        relevance: np.ndarray,
    ) -> Hits:  # fmt: skip
        """Hits with the arrays the caller has already: the question path's constructor.

        ``ids`` and ``rows`` int64, ``scores`` and ``relevance`` float32, one
        entry per hit; nothing is checked or copied.
        """
        out = cls.__new__(cls)
        list.extend(out, hits)
        out.ids, out.rows, out.scores, out.relevance = ids, rows, scores, relevance
        return out

    def to_arrow(self) -> Any:
        """The hits as a ``pyarrow.Table``: rank, chunk_id, doc_id, score, relevance, text."""
        import pyarrow as pa

        return pa.table(
            {
                "rank": pa.array(np.arange(1, len(self) + 1, dtype=np.int32)),
                "chunk_id": pa.array(self.ids),
                "doc_id": pa.array([h.doc_id for h in self], type=pa.string()),
                "score": pa.array(self.scores),
                "relevance": pa.array(self.relevance),
                "text": pa.array([h.text for h in self], type=pa.large_string()),
            }
        )


@dataclass(frozen=True, slots=True, init=False)
class Generation:
    """What a generator returns for one question.

    Attributes
    ----------
    text : str
        The answer, citing hits as ``[1]``, ``[2]``, ... (``[n]`` is the
        n-th hit the generator was given).
    found : bool
        False when the generator says the knowledge base does not hold the
        answer.
    citations : tuple of int
        The markers the text cites, in order of first use, each in
        ``1..len(hits)``.
    prompt : str or None
        What a model was (or would be) sent, for audit and debugging.
    model : str or None
        Name of the model that wrote the text, if any.
    usage : dict
        Token counts and similar accounting reported by the model server.
    data : object
        The parsed JSON of a structured (``schema=``) answer, else None.
    """

    text: str
    found: bool
    citations: tuple[int, ...] = ()
    prompt: str | None = None
    model: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    data: Any = None

    def __init__(
        self, text: str, found: bool, citations: tuple[int, ...] = (), prompt: str | None = None,
        model: str | None = None, usage: Any = _DEFAULT, data: Any = None,
    ) -> None:  # fmt: skip
        # The slots' setters, as Hit's __init__ does.
        _g_text(self, text)
        _g_found(self, found)
        _g_citations(self, citations)
        _g_prompt(self, prompt)
        _g_model(self, model)
        _g_usage(self, {} if usage is _DEFAULT else usage)
        _g_data(self, data)


(_g_text, _g_found, _g_citations, _g_prompt, _g_model, _g_usage, _g_data) = (
    getattr(Generation, f.name).__set__ for f in fields(Generation)
)


@dataclass(frozen=True, slots=True, init=False)
class Answer:
    """An answer and everything it stands on.

    Attributes
    ----------
    question : str
        The question asked.
    text : str
        The answer, citing hits as ``[n]`` (``[1]`` is ``hits[0]``); the
        "not found" message when ``found`` is False.
    found : bool
        False when the knowledge base does not hold the answer.
    hits : tuple of Hit
        The retrieved chunks, best first, that the answer was drawn from.
    citations : dict of int to Hit
        The markers the text cites and the hits they point at.
    prompt : str
        What a model was (or, for the extractive generator, would be) sent.
    timings : dict of str to float
        Seconds spent per stage (``rewrite``, ``retrieve``, ``hits``,
        ``generate``, ``total``).
    model : str or None
        The model that wrote the text, if any.
    query : RewrittenQuery or None
        The question as retrieval saw it: normalised text, keywords,
        synonym expansions and the intent label.
    confidence : float or None
        ``0.6 x mean relevance of the cited hits + 0.4 x share of the
        provided hits the answer cites`` (0 for a not-found answer; None
        for an answer made outside the pipeline).
    faithfulness : float
        Share of the answer's sentences backed by the sources they cite
        (rules: 30 % of a sentence's content terms; or an LLM judge).
    unsupported : tuple of str
        The sentences that are not backed.
    flagged : bool
        The answer was found but its faithfulness is below the threshold.
    warnings : tuple of str
        Freshness and conflict warnings about the sources.
    conflicts : tuple of Conflict
        Sources that state different numbers for the same thing.
    high_risk : bool
        Whether any conflict was found.
    pii : dict of str to int
        PII found and redacted from model-bound text, counted by type.
    audit_digest : str
        SHA-256 over the question, snapshot, cited chunks, prompt and answer
        (recompute it with :func:`fastrag.answer.audit.verify_answer`).
    snapshot : str or None
        The knowledge-base snapshot the answer was drawn from (None for a
        knowledge base never saved).
    dropped : tuple of Hit
        Retrieved hits left out of the context by the token budget.
    data : object
        The parsed JSON of a structured (``schema=``) answer, else None.
    level : str or None
        The fallback-chain level that answered (see :class:`~fastrag.FallbackChain`).
    distilled : Distilled or None
        With ``distill=``: the facts the prompt carried instead of the
        context blocks, with their citation ids and chunk ids, and the
        estimated tokens before and after (see :mod:`fastrag.answer.distill`).
    """

    question: str
    text: str
    found: bool
    hits: tuple[Hit, ...]
    citations: dict[int, Hit]
    prompt: str
    timings: dict[str, float]
    model: str | None = None
    query: Any = None
    confidence: float | None = None
    faithfulness: float = 1.0
    unsupported: tuple[str, ...] = ()
    flagged: bool = False
    warnings: tuple[str, ...] = ()
    conflicts: tuple[Any, ...] = ()
    high_risk: bool = False
    pii: dict[str, int] = field(default_factory=dict)
    audit_digest: str = ""
    snapshot: str | None = None
    dropped: tuple[Hit, ...] = ()
    data: Any = None
    level: str | None = None
    distilled: Any = None

    def __init__(
        self, question: str, text: str, found: bool, hits: tuple[Hit, ...],
        citations: dict[int, Hit], prompt: str, timings: dict[str, float],
        model: str | None = None, query: Any = None, confidence: float | None = None,
        faithfulness: float = 1.0, unsupported: tuple[str, ...] = (), flagged: bool = False,
        warnings: tuple[str, ...] = (), conflicts: tuple[Any, ...] = (), high_risk: bool = False,
        pii: Any = _DEFAULT, audit_digest: str = "", snapshot: str | None = None,
        dropped: tuple[Hit, ...] = (), data: Any = None, level: str | None = None,
        distilled: Any = None,
    ) -> None:  # fmt: skip
        # The slots' setters, as Hit's __init__ does (one answer per call, 23 fields).
        _a_question(self, question)
        _a_text(self, text)
        _a_found(self, found)
        _a_hits(self, hits)
        _a_citations(self, citations)
        _a_prompt(self, prompt)
        _a_timings(self, timings)
        _a_model(self, model)
        _a_query(self, query)
        _a_confidence(self, confidence)
        _a_faithfulness(self, faithfulness)
        _a_unsupported(self, unsupported)
        _a_flagged(self, flagged)
        _a_warnings(self, warnings)
        _a_conflicts(self, conflicts)
        _a_high_risk(self, high_risk)
        _a_pii(self, {} if pii is _DEFAULT else pii)
        _a_audit_digest(self, audit_digest)
        _a_snapshot(self, snapshot)
        _a_dropped(self, dropped)
        _a_data(self, data)
        _a_level(self, level)
        _a_distilled(self, distilled)

    @property
    def route(self) -> str | None:
        """The question's routing class (``RetrievalOptions(route=...)``; None when off)."""
        return getattr(self.query, "route", None)

    @property
    def rewrites(self) -> dict[str, Any]:
        """How retrieval rewrote the question: keywords, synonym and ontology expansions.

        ``{"keywords": str, "expansions": [...], "ontology": [...]}`` (empty
        when the answer was made without a rewritten query); the vector leg
        always embedded the question as asked (or an LLM rewriter's query).
        """
        q = self.query
        if q is None:
            return {"keywords": None, "expansions": [], "ontology": []}
        return {
            "keywords": getattr(q, "keywords", None),
            "expansions": list(getattr(q, "expansions", ())),
            "ontology": list(getattr(q, "ontology", ())),
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (hits as dicts, citations as marker -> chunk id)."""
        return {
            "question": self.question,
            "answer": self.text,
            "found": self.found,
            "citations": {str(m): h.chunk_id for m, h in self.citations.items()},
            "hits": [{"marker": i, **h.to_dict()} for i, h in enumerate(self.hits, 1)],
            "intent": None if self.query is None else self.query.intent,
            "rewrites": self.rewrites,
            "route": self.route,
            "confidence": self.confidence,
            "faithfulness": self.faithfulness,
            "unsupported": list(self.unsupported),
            "flagged": self.flagged,
            "warnings": list(self.warnings),
            "high_risk": self.high_risk,
            "pii": self.pii,
            "audit_digest": self.audit_digest,
            "data": self.data,
            "level": self.level,
            "distilled": None if self.distilled is None else self.distilled.to_dict(),
            "model": self.model,
            "timings": self.timings,
        }


# the slots' setters of Answer, in field order
(
    _a_question,
    _a_text,
    _a_found,
    _a_hits,
    _a_citations,
    _a_prompt,
    _a_timings,
    _a_model,
    _a_query,
    _a_confidence,
    _a_faithfulness,
    _a_unsupported,
    _a_flagged,
    _a_warnings,
    _a_conflicts,
    _a_high_risk,
    _a_pii,
    _a_audit_digest,
    _a_snapshot,
    _a_dropped,
    _a_data,
    _a_level,
    _a_distilled,
) = (getattr(Answer, f.name).__set__ for f in fields(Answer))
