"""How answers are assembled and checked: :class:`AnswerOptions`."""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..retrieve.options import RETRIEVAL_FIELDS, RetrievalOptions, split_options
from ..text.tokens import estimate_tokens
from ..types import Hit
from .conflicts import Conflict
from .distill import as_distiller
from .stages import StageHook
from .verify import LLMJudge

__all__ = ["ANSWER_FIELDS", "AnswerOptions", "parse_options"]


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
    judge : LLMJudge or None
        Judge faithfulness with a model (falls back to the rules); default rules.
    detect_conflicts : bool or callable, default True
        Look for sources that state different numbers for the same thing:
        True for the rules, or a checker ``check(hits) -> list[Conflict]``
        such as :class:`~fastrag.answer.conflicts.LLMConflictCheck` (it is
        given the redacted hits when ``redact``).
    on_stage : callable, optional
        ``on_stage(name, seconds, info)`` after each stage, for tracing.
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
    judge: LLMJudge | None = None
    detect_conflicts: bool | Callable[[Sequence[Hit]], list[Conflict]] = True
    on_stage: StageHook | None = None
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

        as_distiller(self.distill)  # raises ConfigError on anything else

    def replace(self, **changes: Any) -> AnswerOptions:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


ANSWER_FIELDS = frozenset(f.name for f in dataclasses.fields(AnswerOptions))
"""Field names of :class:`AnswerOptions`."""

_DEFAULT_ANSWER = AnswerOptions()


_DEFAULTS: dict[type, Any] = {}
_PARSED: dict[Any, tuple[RetrievalOptions, AnswerOptions]] = {}
_PARSED_MAX = 1024
"""Options of calls by their (hashable) shorthand: resolved and validated once, then reused
(the objects are frozen, so sharing them is safe)."""


def _given(value: Any, cls: type, name: str) -> Any:
    if value is None:
        default = _DEFAULTS.get(cls)
        if default is None:
            default = _DEFAULTS[cls] = cls()
        return default
    if not isinstance(value, cls):
        raise ConfigError(f"{name}= must be a fastrag.{cls.__name__}, got {type(value).__name__}")
    return value


def parse_options(
    shorthand: Mapping[str, Any],
    retrieval: RetrievalOptions | None,
    answer: AnswerOptions | None = None,
    *,
    answers: bool = True,
) -> tuple[RetrievalOptions, AnswerOptions]:
    """The options of a call: the objects passed, with keyword shorthand applied to each.

    Parameters
    ----------
    shorthand : mapping
        The call's keyword arguments (fields of either options class).
    retrieval : RetrievalOptions, optional
        The ``retrieval=`` object (default ``RetrievalOptions()``).
    answer : AnswerOptions, optional
        The ``options=`` object (default ``AnswerOptions()``).
    answers : bool, default True
        Whether the call answers (False: answer options are unknown options).

    Returns
    -------
    tuple
        The retrieval and answer options.

    Raises
    ------
    ConfigError
        On an option no class knows, naming it, or an object of the wrong class.
    """
    if not shorthand:  # the common call: the objects as given (checked), no copies
        r = _given(retrieval, RetrievalOptions, "retrieval")
        return r, (_given(answer, AnswerOptions, "options") if answers else _DEFAULT_ANSWER)
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
        groups.append(("answer options", _given(answer, AnswerOptions, "options"), ANSWER_FIELDS))
    parsed = split_options(shorthand, groups)
    out = parsed[0], (parsed[1] if answers else _DEFAULT_ANSWER)
    if key is not None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = out
    return out
