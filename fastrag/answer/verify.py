"""Trust signals of an answer: confidence, faithfulness and freshness.

- :func:`confidence` — one number in ``[0, 1]`` from how relevant the cited
  hits are and how much of the offered context the answer uses.
- :func:`check_faithfulness` — rule-based: is every sentence of the answer
  backed by the sources it cites? :class:`LLMJudge` asks a chat model
  instead and falls back to the rules on any failure.
- :func:`freshness_warnings` — which sources are older than a threshold,
  with a message in the question's language.

Every function here is cheap (precompiled regexes, no model calls) except
:class:`LLMJudge`.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import ConfigError, ModelResponseError
from ..text.cjk import is_chinese
from ..text.sentences import split_cited
from ..types import Hit
from .chat import is_not_found
from .stages import StageHook, StageTimer, call_chat, content_terms

__all__ = [
    "Faithfulness",
    "FreshnessWarning",
    "LLMJudge",
    "StageHook",
    "StageTimer",
    "check_faithfulness",
    "confidence",
    "freshness_warnings",
]

log = logging.getLogger(__name__)

# -- confidence ------------------------------------------------------------------------------

RELEVANCE_WEIGHT = 0.6
"""Weight of the mean relevance of the cited hits in :func:`confidence`."""

USAGE_WEIGHT = 0.4
"""Weight of the share of offered sources the answer cites in :func:`confidence`."""


def _unit(x: Any) -> float:
    """``x`` as a float clamped to ``[0, 1]``; ``None`` and NaN count as 0."""
    if x is None:
        return 0.0
    x = float(x)
    if x != x:
        return 0.0
    return min(1.0, max(0.0, x))


def confidence(
    cited_relevances: Sequence[float | None], n_cited_used: int, n_provided: int
) -> float:
    """How far to trust an answer: ``0.6 * mean relevance + 0.4 * share of sources used``.

    Parameters
    ----------
    cited_relevances : sequence of float or None
        ``Hit.relevance`` (in ``[0, 1]``) of each hit the answer cites. A
        ``None`` or NaN counts as 0; values are clamped to ``[0, 1]``.
    n_cited_used : int
        How many distinct provided sources (context blocks) the answer cites.
    n_provided : int
        How many sources the generator was offered (context blocks).

    Returns
    -------
    float
        In ``[0, 1]``.

    Notes
    -----
    Edge cases: no citations give a mean relevance of 0, so the first term
    is 0; ``n_provided == 0`` gives a share of 0; the share is capped at 1.
    An answer that cites nothing, including every "not found" answer, thus
    scores 0. The share rewards answers that draw on more of the context:
    one citation out of five offered sources adds only ``0.4 * 0.2``.

    Examples
    --------
    >>> confidence([0.9, 0.7], 2, 4)
    0.68
    """
    mean = (
        math.fsum([_unit(r) for r in cited_relevances]) / len(cited_relevances)
        if cited_relevances
        else 0.0
    )
    share = min(1.0, max(0, n_cited_used) / n_provided) if n_provided > 0 else 0.0
    return round(RELEVANCE_WEIGHT * mean + USAGE_WEIGHT * share, 12)


# -- faithfulness ----------------------------------------------------------------------------

SUPPORT_THRESHOLD = 0.3
"""A sentence with less than this share of its content terms in its sources is unsupported."""


@dataclass(frozen=True, slots=True)
class Faithfulness:
    """How well an answer's sentences are backed by its sources.

    Attributes
    ----------
    score : float
        Share of the checked sentences that are supported, in ``[0, 1]``
        (``1.0`` when there is nothing to check).
    unsupported : tuple of str
        Sentences (markers removed) not backed by their sources.
    supported : tuple of str
        Sentences backed by their sources.
    judge : str
        ``"rules"`` or ``"llm"``: who decided.
    """

    score: float
    unsupported: tuple[str, ...] = ()
    supported: tuple[str, ...] = ()
    judge: str = "rules"


def _source_map(sources: Sequence[str] | Mapping[int, str]) -> Mapping[int, str]:
    if type(sources) is list:  # the answer pipeline's (no ABC check)
        return dict(enumerate(sources, 1))
    if isinstance(sources, Mapping):
        return sources
    if isinstance(sources, str):
        raise ConfigError("sources must be a sequence of texts or a mapping marker -> text")
    return {i: s for i, s in enumerate(sources, 1)}


_NOTHING_TO_CHECK = Faithfulness(1.0)  # frozen: one serves every not-found answer


def check_faithfulness(
    answer_text: str,
    sources: Sequence[str] | Mapping[int, str],
    *,
    found: bool | None = None,
    threshold: float = SUPPORT_THRESHOLD,
) -> Faithfulness:
    """Check, sentence by sentence, that an answer is backed by its sources (rules).

    Parameters
    ----------
    answer_text : str
        The answer, citing sources as ``[n]``.
    sources : sequence of str or mapping of int to str
        The texts the answer may cite: ``sources[0]`` is ``[1]``, or a
        mapping from marker to text.
    found : bool, optional
        Whether the answer claims to answer; ``False`` (a "not found"
        answer) scores 1.0 with nothing to check. By default a not-found
        answer is recognised with :func:`fastrag.answer.chat.is_not_found`.
    threshold : float, default 0.3
        Least share of a sentence's content terms that its sources must
        contain.

    Returns
    -------
    Faithfulness
        The supported share and the sentences on each side.

    Notes
    -----
    The rule, per sentence of :func:`fastrag.text.sentences.split_cited`:

    1. its content terms are those of
       :func:`fastrag.text.terms.question_terms`: lower-cased, stemmed words
       that are not stop words (numbers kept), and CJK character bigrams
       without function characters;
    2. its sources are the ones it cites, when at least one of its markers
       names a source; otherwise (no marker, or only markers that name no
       source) all sources;
    3. it is supported when at least ``threshold`` of its content terms
       occur among the terms of those sources.

    Sentences without content terms ("Yes.", a bare marker) are not
    counted. The score is the supported share of the counted sentences:
    ``1.0`` for an empty answer, a not-found answer, or one with nothing to
    check.
    """
    if not isinstance(answer_text, str):
        raise ConfigError(f"answer_text must be a str, got {type(answer_text).__name__}")
    by_marker = _source_map(sources)
    if found is None:
        found = not is_not_found(answer_text) if answer_text.strip() else False
    if not found:
        return _NOTHING_TO_CHECK

    def terms_of(marker: int) -> frozenset[str]:
        return content_terms(by_marker[marker])

    everything: frozenset[str] | None = None
    supported: list[str] = []
    unsupported: list[str] = []
    for sentence, markers in split_cited(answer_text):
        terms = content_terms(sentence)
        if not terms:
            continue
        cited = [m for m in markers if m in by_marker]
        if cited:
            pool = terms_of(cited[0])
            if len(cited) > 1:
                pool = pool.union(*(terms_of(m) for m in cited[1:]))
        else:
            if everything is None:
                everything = frozenset().union(*(terms_of(m) for m in by_marker))
            pool = everything
        share = len(terms & pool) / len(terms)
        (supported if share >= threshold else unsupported).append(sentence)
    checked = len(supported) + len(unsupported)
    score = len(supported) / checked if checked else 1.0
    return Faithfulness(score, tuple(unsupported), tuple(supported))


_JUDGE_PROMPT = (
    "You check whether an answer is supported by numbered source passages. Split the answer "
    "into claims. A claim is grounded when the passages state it; otherwise it is unsupported. "
    "Answer with JSON only: "
    '{"faithfulness_score": <0..1, share of grounded claims>, '
    '"unsupported_claims": ["..."], "grounded_claims": ["..."]}'
)


def _str_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ModelResponseError(f"{key} must be a list of strings")
    return tuple(value)


@dataclass
class LLMJudge:
    """Judge faithfulness with a chat model, falling back to the rules on any failure.

    Parameters
    ----------
    chat : object
        A chat client such as :class:`~fastrag.OpenAIChatGenerator` (anything
        with ``chat(messages) -> (text, usage)``), or that method itself.
    timeout : float, optional
        Seconds to wait for the model (see
        :func:`fastrag.answer.stages.call_with_timeout`); the client's own timeout
        applies either way.
    max_chars : int, default 2000
        Characters of each source sent.

    Notes
    -----
    The model is asked for ``{"faithfulness_score": 0..1,
    "unsupported_claims": [...], "grounded_claims": [...]}``. Any failure —
    an exception, a timeout, text that holds no JSON object, a missing or
    mistyped field, a score outside ``[0, 1]`` — returns
    :func:`check_faithfulness` instead (``judge="rules"``). A not-found
    answer scores 1.0 without a model call.
    """

    chat: Any
    timeout: float | None = None
    max_chars: int = 2000

    def __call__(
        self,
        answer_text: str,
        sources: Sequence[str] | Mapping[int, str],
        *,
        found: bool | None = None,
    ) -> Faithfulness:
        """Judge ``answer_text`` against ``sources`` (see the class docstring)."""
        by_marker = _source_map(sources)
        if found is None:
            found = not is_not_found(answer_text) if answer_text.strip() else False
        if not found:
            return Faithfulness(1.0, judge="rules")
        try:
            return self._judge(answer_text, by_marker)
        except Exception as exc:  # noqa: BLE001 - any failure means the rules
            log.warning("LLM judge failed (%s: %s); using the rules", type(exc).__name__, exc)
            return check_faithfulness(answer_text, by_marker, found=True)

    def _judge(self, answer_text: str, by_marker: Mapping[int, str]) -> Faithfulness:
        passages = "\n---\n".join(f"[{m}] {t[: self.max_chars]}" for m, t in by_marker.items())
        messages = [
            {"role": "system", "content": _JUDGE_PROMPT},
            {"role": "user", "content": f"Sources:\n{passages}\n\nAnswer:\n{answer_text}"},
        ]
        text = call_chat(self.chat, messages, self.timeout)
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            raise ModelResponseError("no JSON object in the reply")
        try:
            data = orjson.loads(text[start : end + 1])
            score = data["faithfulness_score"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ModelResponseError(f"the judge's reply is malformed: {exc!r}") from exc
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise ModelResponseError("faithfulness_score is not a number")
        if not 0.0 <= score <= 1.0:
            raise ModelResponseError(f"faithfulness_score {score} outside [0, 1]")
        return Faithfulness(
            float(score),
            _str_list(data.get("unsupported_claims", []), "unsupported_claims"),
            _str_list(data.get("grounded_claims", []), "grounded_claims"),
            judge="llm",
        )


# -- freshness -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FreshnessWarning:
    """A source older than the freshness threshold.

    Attributes
    ----------
    marker : int
        The source's marker (its position in the hits given, from 1).
    hit : Hit
        The source.
    updated_at : datetime
        When it was last updated (timezone-aware).
    age_days : float
        Its age at the time of the check.
    message : str
        "this information dates from 2025-01-02; it may be outdated", or
        "该信息更新于2025-01-02，可能已过时" for a Chinese question.
    """

    marker: int
    hit: Hit
    updated_at: _dt.datetime
    age_days: float
    message: str


@functools.lru_cache(maxsize=4096)
def _parse_datetime(value: str) -> _dt.datetime | None:
    """An aware datetime from an ISO-8601 string (naive means UTC), remembered."""
    try:
        parsed = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=_dt.timezone.utc)


@functools.lru_cache(maxsize=64)
def _max_age(days: float) -> _dt.timedelta:
    """``timedelta(days=days)``: one per ``max_age_days`` an options object carries."""
    return _dt.timedelta(days=days)


def _as_datetime(value: Any) -> _dt.datetime | None:
    """An aware datetime from a datetime, date or ISO-8601 string; naive means UTC."""
    if isinstance(value, str):
        return _parse_datetime(value)
    if isinstance(value, _dt.datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=_dt.timezone.utc)
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.timezone.utc)
    return None


def freshness_warnings(
    hits: Sequence[Hit],
    *,
    question: str | None = None,
    now: _dt.datetime | None = None,
    max_age_days: float = 180,
) -> list[FreshnessWarning]:
    """Warn about the hits whose ``metadata["updated_at"]`` is older than ``max_age_days``.

    Parameters
    ----------
    hits : sequence of Hit
        The sources, in marker order (``hits[0]`` is ``[1]``).
    question : str, optional
        The question; a Chinese one (:func:`fastrag.text.cjk.is_chinese`)
        gets Chinese messages. English by default.
    now : datetime, optional
        The time to measure ages against (default: now, UTC); naive means UTC.
    max_age_days : float, default 180
        Oldest age, in days, that is still fresh.

    Returns
    -------
    list of FreshnessWarning
        One per stale hit, in marker order. Hits without a usable
        ``updated_at`` (a datetime, a date or an ISO-8601 string; a naive
        value is taken as UTC) or dated in the future get none.

    Raises
    ------
    ConfigError
        When ``max_age_days`` is negative or not a number.
    """
    if (
        isinstance(max_age_days, bool)
        or not isinstance(max_age_days, (int, float))
        or not (max_age_days >= 0)
    ):
        raise ConfigError(f"max_age_days must be a non-negative number, got {max_age_days!r}")
    if now is None:
        now = _dt.datetime.now(_dt.timezone.utc)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=_dt.timezone.utc)
    limit = _max_age(max_age_days)
    zh = question is not None and is_chinese(question)
    out: list[FreshnessWarning] = []
    for marker, hit in enumerate(hits, 1):
        if not hit.metadata:
            continue
        value = hit.metadata.get("updated_at")
        if type(value) is _dt.datetime and value.tzinfo is not None:  # the store's
            updated: _dt.datetime | None = value
        else:
            updated = _parse_datetime(value) if type(value) is str else _as_datetime(value)
        if updated is None:
            continue
        age = now - updated
        if age <= limit:
            continue
        day = updated.date().isoformat()
        message = (
            f"该信息更新于{day}，可能已过时"
            if zh
            else f"this information dates from {day}; it may be outdated"
        )
        out.append(FreshnessWarning(marker, hit, updated, age.total_seconds() / 86400.0, message))
    return out
