"""How retrieval is configured: per knowledge base (:class:`RetrievalConfig`) and per call.

Modes:

- ``vector``: cosine similarity of the question's vector with every chunk's
  (exact batched top-k, or the HNSW index when the knowledge base has one);
- ``keyword``: BM25 over the chunks' tokens (see :mod:`fastrag.index.keyword`);
- ``hybrid`` (default): both legs, each oversampled to ``oversample * k``
  candidates, fused by weighted reciprocal rank fusion::

      score(chunk) = sum over legs of  weight(leg) / (rrf_k + rank(leg, chunk))

  with ranks starting at 1 and ``rrf_k = 60`` by default. A chunk a leg did
  not return contributes nothing for that leg.

Every leg applies the same row mask (deletions, ``where`` filters, the
caller's :class:`~fastrag.Principal`) before ranking, so an ineligible chunk
can never be returned, whatever the mode or index.

Each hit carries ``score`` (the ranking score of the mode: cosine, BM25, or
fused) and ``relevance`` in ``[0, 1]`` for thresholds and confidence:

- vector: the cosine, clipped to ``[0, 1]``;
- keyword: the BM25 score over the question's keyword weight (the sum of
  its tokens' idf, an upper bound of any chunk's score): the share of the
  question's weight the chunk matches;
- hybrid: the larger of the two (the keyword share is 0 for a chunk the
  keyword leg did not return).

:class:`RetrievalOptions` are the per-call choices (mode, filters, principal,
exact search, rewriting, reranking, grouping, threads); keyword arguments of
``KnowledgeBase.retrieve`` and friends are shorthand for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._threads import resolve_threads
from ..errors import ConfigError
from ..text.route import ROUTES
from ..text.utf8 import unicode_problem
from .filters import Principal

__all__ = [
    "ACL_STATISTICS",
    "MAX_K",
    "MAX_HISTORY_TURNS",
    "MAX_QUESTION_CHARS",
    "MODES",
    "RetrievalConfig",
    "RetrievalOptions",
    "check_k",
    "check_mode",
    "check_question",
    "split_options",
]

MODES = ("hybrid", "vector", "keyword")

MAX_K = 100_000
"""Largest ``k`` a call may ask for (results are also capped by the eligible chunks)."""

MAX_QUESTION_CHARS = 10_000
"""Default longest question, in characters (:attr:`RetrievalConfig.max_question_chars`)."""

MAX_HISTORY_TURNS = 20
"""Most earlier turns :attr:`RetrievalOptions.history` holds (each at most
:data:`MAX_QUESTION_CHARS` characters)."""

HISTORY_ROLES = ("user", "assistant")

GROUP_BY = (None, "doc")

ACL_STATISTICS = (None, "per_principal", "global")
"""Values of :attr:`RetrievalOptions.acl_statistics` (``None``: per principal when one is given)."""


@dataclass(frozen=True)
class RetrievalConfig:
    """How a knowledge base retrieves by default (saved in the manifest).

    Parameters
    ----------
    mode : {"hybrid", "vector", "keyword"}
        Default retrieval mode.
    rrf_k : int, default 60
        Reciprocal rank fusion constant.
    oversample : int, default 3
        Each leg returns ``oversample * k`` candidates for fusion.
    vector_weight : float or None
        Weight of the vector leg. ``None`` (default) chooses by embedder
        kind and fusion method (:data:`fastrag.retrieve.fusion.DEFAULTS`):
        with RRF 0.05 for the :class:`~fastrag.VocabularyEmbedder`
        (character counts rank poorly on their own: they only break
        near-ties and reach questions with no known keyword) and 1.0 for
        any other embedder.
    keyword_weight : float or None
        Weight of the chunk-level keyword leg (RRF default 1.0).
    document_weight : float or None
        Weight of the document-level keyword leg (BM25 over whole documents;
        every chunk of a ranked document receives its document's share);
        RRF default 3.0. BENCHMARKS.md ("Hybrid retrieval") has the grid these
        defaults were chosen from.
    max_question_chars : int, default MAX_QUESTION_CHARS
        Longer questions are refused with a :class:`~fastrag.errors.ConfigError`
        (every stage's work grows with the question's length).
    fusion : {"rrf", "convex"} or None
        How the legs are fused: weighted reciprocal rank fusion, or a
        weighted sum of min-max-normalised scores (see
        :mod:`fastrag.retrieve.fusion`); ``None`` (default) chooses by
        embedder kind.
    """

    mode: str = "hybrid"
    rrf_k: int = 60
    oversample: int = 3
    vector_weight: float | None = None
    keyword_weight: float | None = None
    document_weight: float | None = None
    fusion: str | None = None
    max_question_chars: int = MAX_QUESTION_CHARS

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.fusion is not None and self.fusion not in ("rrf", "convex"):
            raise ConfigError(f"fusion must be 'rrf', 'convex' or None, got {self.fusion!r}")
        for name in ("rrf_k", "oversample", "max_question_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        for name in ("vector_weight", "keyword_weight", "document_weight"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{name} must be a non-negative number, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalConfig:
        """Inverse of :meth:`to_dict` (unknown keys are ignored)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"retrieval settings must be a mapping, got {type(data).__name__}")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


VOCABULARY_VECTOR_WEIGHT = 0.05
"""Vector-leg weight with the character-count embedder (see :class:`RetrievalConfig`)."""


def vector_weight_for(config: RetrievalConfig, embedder: object) -> float:
    """The vector leg's weight: the configured one, or the embedder-dependent default."""
    from .fusion import fusion_plan

    return fusion_plan(config, embedder).vector


def check_mode(mode: object) -> str:
    """Validate a retrieval mode."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(map(repr, MODES))}; got {mode!r}")
    return str(mode)


def check_k(k: object, limit: int = MAX_K) -> int:
    """Validate ``k``: an int (not a bool) in ``[1, limit]``.

    The one rule for ``k``: the library uses it with ``limit=MAX_K``, and
    ``fastrag serve`` (HTTP and MCP) with its ``max_k``.
    """
    if isinstance(k, bool) or not isinstance(k, int) and not hasattr(k, "__index__"):
        raise ConfigError(f"k must be an int, got {k!r}")
    try:
        value = int(k.__index__())  # type: ignore[union-attr]
    except (TypeError, AttributeError) as exc:
        raise ConfigError(f"k must be an int, got {k!r}") from exc
    if not 1 <= value <= limit:
        raise ConfigError(f"k must be between 1 and {limit:,}, got {value:,}")
    return value


def check_question(question: object, limit: int, where: str = "question") -> str:
    """Validate one question: a non-empty str of at most ``limit`` characters, valid Unicode."""
    if not isinstance(question, str):
        raise ConfigError(f"{where} must be a str, got {type(question).__name__}")
    if not question.strip():
        raise ConfigError(f"{where} is empty")
    if len(question) > limit:
        raise ConfigError(
            f"{where} has {len(question):,} characters, more than the limit of {limit:,} "
            "(RetrievalConfig.max_question_chars)"
        )
    problem = unicode_problem(question)
    if problem:
        raise ConfigError(f"{where} {problem}")
    return question


@dataclass(frozen=True)
class RetrievalOptions:
    """Per-call retrieval choices (keyword arguments of the retrieve and answer methods).

    Parameters
    ----------
    mode : {"hybrid", "vector", "keyword"} or None
        ``None``: the knowledge base's default mode.
    where : mapping, optional
        Metadata filter (see :mod:`fastrag.retrieve.filters`).
    principal : Principal, optional
        The caller: chunks whose ``acl`` does not admit it are never returned.
    exact : bool, default False
        Exact vector search even when the knowledge base has an HNSW index.
    rewrite : bool, default True
        Pass the question through the query rewriter (its keywords feed the
        keyword legs; the vector leg embeds the question as asked, or an
        LLM rewriter's query).
    reranker : callable, optional
        ``reranker(question, hits) -> hits``; on any failure the retrieval
        order is kept. An LLM reranker sees redacted text.
    group_by : {None, "doc"}
        ``"doc"``: the best chunk of each of the ``k`` best documents.
    threads : int, optional
        Threads for the kernels of this call.
    acl_statistics : {None, "per_principal", "global"}, default None
        Which rows BM25's statistics (row count, term document frequencies,
        mean length) are counted over. ``"per_principal"``: the rows
        ``where`` and ``principal`` admit, so keyword scores, relevance and
        confidence depend only on what the caller may read and cannot reveal
        whether a document it may not read contains a query term.
        ``"global"``: every row (the fastest; with a principal it *leaks*:
        a caller can test words against hidden documents by watching a
        visible hit's score). ``None`` (default): ``"per_principal"``
        whenever a ``principal`` is given, ``"global"`` otherwise (a trusted
        caller, for whom there is nothing hidden; a ``where`` filter alone
        is not an access boundary). See :attr:`keyword_statistics`.
    route : {"off", "auto", "code", "numeric", "natural", "mixed"}, default "off"
        Query routing: ``"auto"`` classifies each question with the rules of
        :mod:`fastrag.text.route` (code/identifier, numeric with units,
        natural language, mixed) and records the class in
        :attr:`~fastrag.RewrittenQuery.route` and :attr:`~fastrag.Answer.route`;
        a class name sets it. Per-class fusion weights are not applied yet
        (none are measured): routing changes no ranking, hence the default "off".
    """

    mode: str | None = None
    where: Mapping[str, Any] | None = None
    principal: Principal | None = None
    exact: bool = False
    rewrite: bool = True
    reranker: Callable[..., Any] | None = None
    group_by: str | None = None
    threads: int | None = None
    acl_statistics: str | None = None
    history: tuple[tuple[str, str], ...] = ()
    route: str = "off"

    def __post_init__(self) -> None:
        if self.route not in ("off", "auto", *ROUTES):
            raise ConfigError(
                f"route must be 'off', 'auto' or one of {', '.join(map(repr, ROUTES))}; "
                f"got {self.route!r}"
            )
        object.__setattr__(self, "history", check_history(self.history))
        if self.acl_statistics not in ACL_STATISTICS:
            raise ConfigError(
                "acl_statistics must be None, 'per_principal' or 'global', got "
                f"{self.acl_statistics!r}"
            )
        if self.mode is not None:
            check_mode(self.mode)
        if self.where is not None and not isinstance(self.where, Mapping):
            raise ConfigError(f"where must be a mapping, got {type(self.where).__name__}")
        if self.principal is not None and not isinstance(self.principal, Principal):
            raise ConfigError(
                f"principal must be a fastrag.Principal, got {type(self.principal).__name__}"
            )
        for name in ("exact", "rewrite"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.reranker is not None and not callable(self.reranker):
            raise ConfigError(
                f"reranker must be callable as reranker(question, hits), got "
                f"{type(self.reranker).__name__}"
            )
        if self.group_by not in GROUP_BY:
            raise ConfigError(f"group_by must be None or 'doc', got {self.group_by!r}")
        resolve_threads(self.threads)

    @property
    def keyword_statistics(self) -> str:
        """``acl_statistics`` resolved: ``"per_principal"`` or ``"global"``.

        ``None`` resolves to ``"per_principal"`` when a principal is given.
        """
        if self.acl_statistics is not None:
            return self.acl_statistics
        return "global" if self.principal is None else "per_principal"

    def replace(self, **changes: Any) -> RetrievalOptions:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


_RETRIEVAL_FIELDS = frozenset(f.name for f in dataclasses.fields(RetrievalOptions))


def split_options(
    given: Mapping[str, Any],
    groups: Sequence[tuple[str, Any, frozenset[str]]],
) -> list[Any]:
    """Sort keyword shorthand into option objects, naming any option no group knows.

    Parameters
    ----------
    given : mapping
        The keyword arguments of a call.
    groups : sequence of (label, base, fields)
        Per option class: a label for messages, the object the call passed
        (a frozen dataclass instance of that class) and its field names.

    Returns
    -------
    list
        Per group, ``base`` with the keyword arguments of its fields applied.

    Raises
    ------
    ConfigError
        On an argument that is no group's field.
    """
    if not given:
        return [base for _, base, _ in groups]
    known = set().union(*(fields for _, _, fields in groups))
    unknown = sorted(set(given) - known)
    if unknown:
        listing = "; ".join(f"{label}: {', '.join(sorted(fields))}" for label, _, fields in groups)
        raise ConfigError(f"unknown option(s) {', '.join(map(repr, unknown))} ({listing})")
    out = []
    for _, base, fields in groups:
        mine = {k: v for k, v in given.items() if k in fields}
        out.append(dataclasses.replace(base, **mine) if mine else base)
    return out


RETRIEVAL_FIELDS = _RETRIEVAL_FIELDS
"""Field names of :class:`RetrievalOptions`."""


def check_history(history: Any) -> tuple[tuple[str, str], ...]:
    """Earlier conversation turns as ``((role, content), ...)``, or :class:`ConfigError`."""
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise ConfigError(
            f"history must be a sequence of (role, content) turns, got {type(history).__name__}"
        )
    if len(history) > MAX_HISTORY_TURNS:
        raise ConfigError(
            f"history holds {len(history)} turns; at most {MAX_HISTORY_TURNS} (keep the latest)"
        )
    turns = []
    for i, turn in enumerate(history):
        if isinstance(turn, Mapping):
            role, content = turn.get("role"), turn.get("content")
        elif isinstance(turn, (tuple, list)) and len(turn) == 2:
            role, content = turn
        else:
            raise ConfigError(f"history[{i}] must be a (role, content) pair or a mapping")
        if role not in HISTORY_ROLES:
            raise ConfigError(f"history[{i}]: role must be 'user' or 'assistant', got {role!r}")
        if not isinstance(content, str):
            raise ConfigError(f"history[{i}]: content must be a str, got {type(content).__name__}")
        if len(content) > MAX_QUESTION_CHARS:
            raise ConfigError(
                f"history[{i}] has {len(content):,} characters, more than {MAX_QUESTION_CHARS:,}"
            )
        turns.append((role, content))
    return tuple(turns)
