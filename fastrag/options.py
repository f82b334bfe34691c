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

:class:`AnswerOptions` are the per-call choices of the answer stages (context
budget, redaction, freshness, faithfulness, conflicts, schema, distillation).

This module is the one home of both option classes, their defaults (the
field defaults below, also as :data:`RETRIEVAL_DEFAULTS`, :data:`ANSWER_DEFAULTS`
and :data:`DEFAULT_K`) and the keyword shorthand (:func:`parse_options`).
Every way in passes them under the same two keywords, ``retrieval=`` and
``answer=`` (the ``KnowledgeBase`` methods, batch files, Ray, the LangChain
and LlamaIndex retrievers, ``fastrag serve`` and the CLI), and reads its
defaults from here. It stands below ``retrieve/`` and ``answer/``: it
imports only the base modules and ``text/``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ._threads import resolve_threads
from .errors import ConfigError
from .text.route import ROUTES
from .text.tokens import estimate_tokens
from .text.utf8 import unicode_problem
from .types import Hit

__all__ = [
    "ACL_STATISTICS",
    "ANSWER_DEFAULTS",
    "ANSWER_FIELDS",
    "DEFAULT_K",
    "MAX_HISTORY_TURNS",
    "MAX_K",
    "MAX_QUESTION_CHARS",
    "MODES",
    "RETRIEVAL_DEFAULTS",
    "RETRIEVAL_FIELDS",
    "AnswerOptions",
    "Judge",
    "Principal",
    "RetrievalConfig",
    "RetrievalOptions",
    "check_history",
    "check_k",
    "check_mode",
    "check_question",
    "parse_options",
    "shorthand_of",
    "split_options",
]

DEFAULT_K = 5
"""Chunks a call retrieves when it does not say (every way in reads it from here)."""

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


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: a user and the groups they belong to.

    Parameters
    ----------
    user : str, optional
        The user's principal name.
    groups : iterable of str
        Group names.
    """

    user: str | None = None
    groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.user is not None and not isinstance(self.user, str):
            raise ConfigError(f"Principal.user must be a str, got {type(self.user).__name__}")
        groups = self.groups
        if isinstance(groups, str) or not isinstance(groups, Iterable):
            raise ConfigError("Principal.groups must be a list of group names, not a string")
        groups = tuple(groups)
        if not all(isinstance(g, str) for g in groups):
            raise ConfigError("Principal.groups must hold strings")
        object.__setattr__(self, "groups", groups)

    def names(self) -> frozenset[str]:
        """Every name that can admit this principal (the user and the groups)."""
        return frozenset(([self.user] if self.user else []) + list(self.groups))


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


RETRIEVAL_FIELDS = frozenset(f.name for f in dataclasses.fields(RetrievalOptions))
"""Field names of :class:`RetrievalOptions`."""


class Judge(Protocol):
    """A faithfulness judge: ``judge(answer_text, sources, *, found=None) -> Faithfulness``.

    :class:`~fastrag.LLMJudge` is one; the result is a
    :class:`~fastrag.answer.verify.Faithfulness`.
    """

    def __call__(
        self, answer_text: str, sources: Sequence[str] | Mapping[int, str], *,
        found: bool | None = None,
    ) -> Any:  # fmt: skip
        """Judge ``answer_text`` against ``sources`` (numbered from 1)."""


def check_distill(value: Any) -> Any:
    """Validate :attr:`AnswerOptions.distill`: None, ``"extractive"``, a distiller or a model.

    A distiller has a ``facts(question, blocks)`` method
    (:mod:`fastrag.answer.distill`); a model is a chat client (a ``chat``
    method) or a callable. The answer stages turn the value into a distiller
    (:func:`fastrag.answer.distill.as_distiller`).
    """
    if value is None:
        return value
    if isinstance(value, str):
        if value == "extractive":
            return value
        raise ConfigError(f"distill must be None, 'extractive' or a model, got {value!r}")
    if not (
        callable(getattr(value, "facts", None))
        or callable(getattr(value, "chat", None))
        or callable(value)
    ):
        raise ConfigError(
            "distill= must be 'extractive', a chat client (with chat(messages)) or a "
            f"generator(question, hits), got {type(value).__name__}"
        )
    return value


@dataclass(frozen=True)
class AnswerOptions:
    """How answers are assembled and checked (keyword arguments of ``answer`` are shorthand).

    Parameters
    ----------
    budget : int or None, default 3000
        Context token budget (see :func:`fastrag.text.tokens.estimate_tokens`);
        ``None`` packs every hit.
    estimator : callable, default estimate_tokens
        ``estimator(text) -> tokens``, for the context budget and for the
        ``tokens_per_minute`` rate limit alike.
    redact : bool, default True
        Redact PII from every text bound for a model (prompt, rewriter,
        reranker, judge, conflict check).
    max_age_days : float or None, default 180
        Sources older than this get a freshness warning (``None``: never).
    min_faithfulness : float, default 0.5
        An answer whose faithfulness is below this is flagged.
    replace_unfaithful : bool, default False
        Replace a flagged answer with the not-found answer.
    judge : Judge or None
        Judge faithfulness with a model, such as :class:`~fastrag.LLMJudge`
        (it falls back to the rules); default the rules.
    detect_conflicts : bool or callable, default True
        Look for sources that state different numbers for the same thing:
        True for the rules, or a checker ``check(hits) -> list[Conflict]``
        such as :class:`~fastrag.answer.conflicts.LLMConflictCheck` (it is
        given the redacted hits when ``redact``).
    on_stage : callable, optional
        ``on_stage(name, seconds, info)`` after each stage, for tracing
        (:data:`fastrag.answer.stages.StageHook`).
    now : datetime, optional
        The clock for freshness (tests).
    schema : mapping, optional
        A JSON Schema: a chat generator answers with JSON that matches it
        (``Answer.data``); the extractive generator declines with a
        :class:`~fastrag.errors.ConfigError`. Validated with ``jsonschema``.
    distill : None, "extractive", or a model, default None
        Context distillation (:mod:`fastrag.answer.distill`): the prompt
        carries the facts of the context blocks with their ``[n]`` ids
        instead of the blocks (``Answer.distilled``). ``"extractive"``
        (offline: the sentences and table cells that carry the question's
        terms and numbers), an :class:`~fastrag.answer.distill.ExtractiveDistiller`
        with its own budget, or a model (an :class:`~fastrag.OpenAIChatGenerator`,
        any generator, or a :class:`~fastrag.answer.distill.ModelDistiller`),
        which falls back to the extractive distiller on any failure, with
        a warning. ``None``: the whole blocks.
    """

    budget: int | None = 3000
    estimator: Callable[[str], int] = estimate_tokens
    redact: bool = True
    max_age_days: float | None = 180
    min_faithfulness: float = 0.5
    replace_unfaithful: bool = False
    judge: Judge | None = None
    detect_conflicts: bool | Callable[[Sequence[Hit]], list[Any]] = True
    on_stage: Callable[[str, float, dict[str, Any]], None] | None = None
    now: _dt.datetime | None = None
    schema: Mapping[str, Any] | None = None
    distill: Any = None

    def __post_init__(self) -> None:
        if self.budget is not None and (
            isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget < 1
        ):
            raise ConfigError(f"budget must be a positive int or None, got {self.budget!r}")
        if not callable(self.estimator):
            raise ConfigError(f"estimator must be callable, got {type(self.estimator).__name__}")
        for name in ("redact", "replace_unfaithful"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.max_age_days is not None and (
            isinstance(self.max_age_days, bool)
            or not isinstance(self.max_age_days, (int, float))
            or self.max_age_days < 0
        ):
            raise ConfigError(
                f"max_age_days must be a number >= 0 or None, got {self.max_age_days!r}"
            )
        if (
            isinstance(self.min_faithfulness, bool)
            or not isinstance(self.min_faithfulness, (int, float))
            or not 0.0 <= float(self.min_faithfulness) <= 1.0
        ):
            raise ConfigError(f"min_faithfulness must be in [0, 1], got {self.min_faithfulness!r}")
        if self.on_stage is not None and not callable(self.on_stage):
            raise ConfigError("on_stage must be callable as on_stage(name, seconds, info)")
        if not (isinstance(self.detect_conflicts, bool) or callable(self.detect_conflicts)):
            raise ConfigError("detect_conflicts must be a bool or a callable check(hits)")
        if self.schema is not None and not isinstance(self.schema, Mapping):
            raise ConfigError(
                f"schema must be a JSON Schema object (a mapping), got {type(self.schema).__name__}"
            )
        check_distill(self.distill)

    def replace(self, **changes: Any) -> AnswerOptions:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


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


ANSWER_FIELDS = frozenset(f.name for f in dataclasses.fields(AnswerOptions))
"""Field names of :class:`AnswerOptions`."""

RETRIEVAL_DEFAULTS = RetrievalOptions()
"""The retrieval options of a call that sets none (:class:`RetrievalOptions`' field defaults)."""

ANSWER_DEFAULTS = AnswerOptions()
"""The answer options of a call that sets none (the field defaults of :class:`AnswerOptions`)."""

_PARSED: dict[Any, tuple[RetrievalOptions, AnswerOptions]] = {}
_PARSED_MAX = 1024
"""Options of calls by their (hashable) shorthand: resolved and validated once, then reused
(the objects are frozen, so sharing them is safe)."""

_LEGACY = "options"
"""The keyword that carried either object before ``retrieval=`` / ``answer=`` (deprecated)."""


def _given(value: Any, cls: type, name: str) -> Any:
    if value is None:
        return RETRIEVAL_DEFAULTS if cls is RetrievalOptions else ANSWER_DEFAULTS
    if not isinstance(value, cls):
        raise ConfigError(f"{name}= must be a fastrag.{cls.__name__}, got {type(value).__name__}")
    return value


def _legacy(
    shorthand: Mapping[str, Any],
    retrieval: RetrievalOptions | None,
    answer: AnswerOptions | None,
    answers: bool,
    stacklevel: int,
) -> tuple[dict[str, Any], RetrievalOptions | None, AnswerOptions | None]:
    """Move the deprecated ``options=`` object to ``retrieval=`` or ``answer=``, with a warning."""
    rest = dict(shorthand)
    value = rest.pop(_LEGACY)
    if isinstance(value, RetrievalOptions) and retrieval is None:
        new, retrieval = "retrieval", value
    elif isinstance(value, AnswerOptions) and answer is None and answers:
        new, answer = "answer", value
    else:
        wanted = "a RetrievalOptions (now retrieval=)"
        if answers:
            wanted += " or an AnswerOptions (now answer=)"
        raise ConfigError(
            f"options= is the old spelling of retrieval= and answer=; it takes {wanted} not "
            f"given already, got {type(value).__name__}: pass retrieval=RetrievalOptions(...)"
            + (" and answer=AnswerOptions(...)" if answers else "")
        )
    warnings.warn(
        f"options= is deprecated: pass {new}={type(value).__name__}(...) (the same keyword "
        "in every fastrag method, batch file, integration and server)",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    return rest, retrieval, answer


def parse_options(
    shorthand: Mapping[str, Any],
    retrieval: RetrievalOptions | None = None,
    answer: AnswerOptions | None = None,
    *,
    answers: bool = True,
    stacklevel: int = 3,
) -> tuple[RetrievalOptions, AnswerOptions]:
    """The options of a call: the objects passed, with keyword shorthand applied to each.

    Parameters
    ----------
    shorthand : mapping
        The call's keyword arguments (fields of either options class; the
        deprecated ``options=`` object is moved to its new keyword with a
        :class:`DeprecationWarning`).
    retrieval : RetrievalOptions, optional
        The ``retrieval=`` object (default :data:`RETRIEVAL_DEFAULTS`).
    answer : AnswerOptions, optional
        The ``answer=`` object (default :data:`ANSWER_DEFAULTS`).
    answers : bool, default True
        Whether the call answers (False: answer options are unknown options).
    stacklevel : int, default 3
        Of the deprecation warning (3: the caller of the method that called this).

    Returns
    -------
    tuple
        The retrieval and answer options. Calls with equal hashable
        shorthand (values compared with their types) share one resolved pair.

    Raises
    ------
    ConfigError
        On an option no class knows, naming it, or an object of the wrong class.
    """
    if not shorthand:  # the common call: the objects as given (checked), no copies
        r = _given(retrieval, RetrievalOptions, "retrieval")
        return r, (_given(answer, AnswerOptions, "answer") if answers else ANSWER_DEFAULTS)
    if _LEGACY in shorthand:
        shorthand, retrieval, answer = _legacy(shorthand, retrieval, answer, answers, stacklevel)
        return parse_options(shorthand, retrieval, answer, answers=answers)
    key: Any = None
    try:
        # types too: True == 1 and hash alike, but only one of them is a valid ``exact``
        key = (retrieval, answer, answers, frozenset((k, type(v), v) for k, v in shorthand.items()))
        hit = _PARSED.get(key)
    except TypeError:  # an unhashable value (a where= dict, a history list): no caching
        hit = key = None
    if hit is not None:
        return hit
    groups: list[tuple[str, Any, frozenset[str]]] = [
        ("retrieval options", _given(retrieval, RetrievalOptions, "retrieval"), RETRIEVAL_FIELDS)
    ]
    if answers:
        groups.append(("answer options", _given(answer, AnswerOptions, "answer"), ANSWER_FIELDS))
    parsed = split_options(shorthand, groups)
    out = parsed[0], (parsed[1] if answers else ANSWER_DEFAULTS)
    if key is not None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = out
    return out


def shorthand_of(**given: Any) -> dict[str, Any]:
    """The keyword shorthand of the arguments that are set (``None`` means not given).

    For ways in whose own parameters default to ``None`` (``mode=None``,
    ``where=None``): they apply only what the caller set, so a
    ``retrieval=`` object's fields are not overwritten by an unset one.
    """
    return {k: v for k, v in given.items() if v is not None}
