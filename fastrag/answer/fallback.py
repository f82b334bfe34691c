"""Fallback chains: try answerers in order until one gives a good answer in time.

A :class:`FallbackChain` holds :class:`Level` s — e.g. a fast local
knowledge base with the extractive generator, then the same with a chat
model, then a larger knowledge base — and for each question tries them in
order. A level is passed over when it

- does not answer within its ``timeout``, or raises a :class:`TimeoutError`
  of its own such as :class:`~fastrag.errors.ModelTimeoutError` (``"timeout"``),
- raises (``"error"``),
- says the knowledge base does not hold the answer (``"not_found"``), or
- answers with ``answer.confidence`` below its ``min_confidence``
  (``"low_confidence"``).

The first answer that passes is returned as a :class:`ChainResult` with every
:class:`Attempt`, so the caller sees which level answered and why the ones
before it did not. When no level passes, the result holds the most confident
answer seen (or else a level's not-found answer, or else a synthesised
not-found answer) with ``accepted=False``.

Timeouts run the level in a daemon worker thread and stop waiting for it;
the call itself is abandoned, not killed (Python cannot kill a thread): it
runs on until it returns by itself, and its result is discarded. Give the
answerers' model clients their own read timeouts so that abandoned calls
end. See :func:`fastrag.answer.stages.call_with_timeout`.

An answer without a ``confidence`` attribute (or with ``None``) passes the
confidence test: levels that do not measure confidence are trusted.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError, StageTimeoutError
from ..options import AnswerOptions, RetrievalOptions
from ..types import Answer
from .prompt import build_user_message, not_found_message
from .stages import call_with_timeout

__all__ = ["Attempt", "ChainResult", "FallbackChain", "Level", "Outcome"]

Outcome = Literal["answered", "timeout", "error", "low_confidence", "not_found"]


@dataclass(frozen=True)
class Level:
    """One answerer in a :class:`FallbackChain`.

    Parameters
    ----------
    answerer : KnowledgeBase or callable
        An object with an ``answer`` method (a
        :class:`~fastrag.KnowledgeBase`: called as
        ``answerer.answer(question, **options)``) or a callable
        ``answerer(question, **options) -> Answer``.
    name : str, optional
        Name in the attempts (default ``"level1"``, ``"level2"``, ... by
        position).
    timeout : float, optional
        Seconds to wait for this level (default: the chain's).
    min_confidence : float, optional
        Least ``answer.confidence`` accepted (default: the chain's).
    options : mapping, optional
        Keyword arguments for every call (``k``, ``generator``, ``mode``, ...).
    retrieval : RetrievalOptions, optional
        Passed as ``retrieval=`` (see :meth:`fastrag.KnowledgeBase.answer`).
    answer_options : AnswerOptions, optional
        Passed as ``answer=``.
    """

    answerer: Any
    name: str | None = None
    timeout: float | None = None
    min_confidence: float | None = None
    options: Mapping[str, Any] | None = None
    retrieval: RetrievalOptions | None = None
    answer_options: AnswerOptions | None = None

    def __post_init__(self) -> None:
        if not (callable(getattr(self.answerer, "answer", None)) or callable(self.answerer)):
            raise ConfigError(
                "a level's answerer must have an answer(question, **options) method or be "
                f"callable as answerer(question), got {type(self.answerer).__name__}"
            )
        _check_timeout(self.timeout)
        _check_confidence(self.min_confidence)
        if self.options is not None and not isinstance(self.options, Mapping):
            raise ConfigError(f"options must be a mapping, got {type(self.options).__name__}")
        if self.retrieval is not None and not isinstance(self.retrieval, RetrievalOptions):
            raise ConfigError(
                f"retrieval must be a fastrag.RetrievalOptions, got {type(self.retrieval).__name__}"
            )
        if self.answer_options is not None and not isinstance(self.answer_options, AnswerOptions):
            raise ConfigError(
                "answer_options must be a fastrag.AnswerOptions, got "
                f"{type(self.answer_options).__name__}"
            )


@dataclass(frozen=True, slots=True)
class Attempt:
    """What happened when one level was tried.

    Attributes
    ----------
    level : str
        The level's name.
    outcome : str
        ``"answered"``, ``"timeout"``, ``"error"``, ``"low_confidence"`` or
        ``"not_found"``.
    seconds : float
        Time spent waiting for the level.
    detail : str
        Why: the exception (``"ModelTimeoutError: ..."``), the confidence
        and the threshold, the timeout; empty for ``"answered"``.
    """

    level: str
    outcome: Outcome
    seconds: float
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ChainResult:
    """The answer a :class:`FallbackChain` settled on, and how.

    Attributes
    ----------
    answer : Answer
        The first accepted answer; when none was accepted, the most
        confident answer seen, else a level's not-found answer, else a
        synthesised not-found answer (``found=False``, no hits).
    level : str or None
        The level whose answer this is (``None`` for a synthesised one).
    attempts : tuple of Attempt
        Every level tried, in order.
    accepted : bool
        Whether ``answer`` passed its level's tests.
    """

    answer: Answer
    level: str | None
    attempts: tuple[Attempt, ...]
    accepted: bool = True


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0
    ):
        raise ConfigError(f"timeout must be a positive number of seconds or None, got {timeout!r}")


def _check_confidence(value: float | None) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1
    ):
        raise ConfigError(f"min_confidence must be in [0, 1] or None, got {value!r}")


def _not_found(question: str) -> Answer:
    return Answer(
        question=question,
        text=not_found_message(question),
        found=False,
        hits=(),
        citations={},
        prompt=build_user_message(question, []),
        timings={},
    )


class FallbackChain:
    """Try levels in order; return the first good answer and the record of every attempt.

    Parameters
    ----------
    levels : sequence of Level, KnowledgeBase or callable
        The answerers, first choice first; anything that is not a
        :class:`Level` is wrapped in one with the defaults.
    timeout : float or None, default 0.8
        Seconds to wait for a level without its own timeout; ``None`` waits
        forever (and runs the level in the calling thread).
    min_confidence : float or None, default 0.7
        Least confidence accepted from a level without its own;
        ``None`` accepts any.

    Raises
    ------
    ConfigError
        For no levels, or a bad timeout, threshold or answerer.

    Notes
    -----
    See the module docstring for the outcomes and for what a timeout does
    to the abandoned call.

    Examples
    --------
    ::

        chain = FallbackChain([Level(fast_kb, "fast"), Level(model_kb, "model", timeout=5)])
        result = chain("How many days of leave?")
        result.level, [a.outcome for a in result.attempts]
        # ('model', ['low_confidence', 'answered'])
    """

    def __init__(
        self,
        levels: Sequence[Level | Any],
        *,
        timeout: float | None = 0.8,
        min_confidence: float | None = 0.7,
    ) -> None:
        if isinstance(levels, (str, bytes)) or not isinstance(levels, Sequence) or not levels:
            raise ConfigError(
                "levels must be a non-empty sequence of Level, KnowledgeBase or callable"
            )
        _check_timeout(timeout)
        _check_confidence(min_confidence)
        self.levels: tuple[Level, ...] = tuple(
            lv if isinstance(lv, Level) else Level(lv) for lv in levels
        )
        self.names: tuple[str, ...] = tuple(
            lv.name or f"level{i}" for i, lv in enumerate(self.levels, 1)
        )
        self.timeout = timeout
        self.min_confidence = min_confidence

    def __repr__(self) -> str:
        return (
            f"FallbackChain(levels={list(self.names)!r}, timeout={self.timeout!r}, "
            f"min_confidence={self.min_confidence!r})"
        )

    def __call__(self, question: str) -> ChainResult:
        """Answer ``question`` (see the class docstring)."""
        return self.answer(question)

    def answer(self, question: str) -> ChainResult:
        """Try the levels in order for ``question``.

        Parameters
        ----------
        question : str
            The question.

        Returns
        -------
        ChainResult
            The settled answer, its level, every attempt and whether it was
            accepted.
        """
        attempts: list[Attempt] = []
        best: tuple[float, Answer, str] | None = None  # most confident rejected answer
        not_found: tuple[Answer, str] | None = None
        for level, name in zip(self.levels, self.names, strict=True):
            call = _caller(level, question)
            timeout = self.timeout if level.timeout is None else level.timeout
            threshold = (
                self.min_confidence if level.min_confidence is None else level.min_confidence
            )
            t0 = time.perf_counter()
            try:
                answer = call_with_timeout(call, timeout)
            except StageTimeoutError:
                attempts.append(
                    Attempt(name, "timeout", time.perf_counter() - t0,
                            f"no answer within {timeout:g} s")
                )  # fmt: skip
                continue
            except TimeoutError as exc:  # the level's own, e.g. a model client's ModelTimeoutError
                attempts.append(
                    Attempt(name, "timeout", time.perf_counter() - t0,
                            f"{type(exc).__name__}: {exc}")
                )  # fmt: skip
                continue
            except Exception as exc:  # noqa: BLE001 - a failing level passes the turn on
                attempts.append(
                    Attempt(name, "error", time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
                )
                continue
            seconds = time.perf_counter() - t0
            found = getattr(answer, "found", None)
            if not isinstance(found, bool):
                attempts.append(
                    Attempt(name, "error", seconds,
                            f"returned {type(answer).__name__}, expected fastrag.Answer")
                )  # fmt: skip
                continue
            if not found:
                attempts.append(Attempt(name, "not_found", seconds, "the answer says not found"))
                if not_found is None:
                    not_found = (answer, name)
                continue
            conf = getattr(answer, "confidence", None)
            if conf is not None and threshold is not None and conf < threshold:
                attempts.append(
                    Attempt(name, "low_confidence", seconds,
                            f"confidence {conf:.3f} below {threshold:g}")
                )  # fmt: skip
                if best is None or conf > best[0]:
                    best = (conf, answer, name)
                continue
            attempts.append(Attempt(name, "answered", seconds))
            return ChainResult(answer, name, tuple(attempts), True)
        if best is not None:
            return ChainResult(best[1], best[2], tuple(attempts), False)
        if not_found is not None:
            return ChainResult(not_found[0], not_found[1], tuple(attempts), False)
        return ChainResult(_not_found(question), None, tuple(attempts), False)


def _caller(level: Level, question: str) -> Callable[[], Any]:
    options = dict(level.options or {})
    if level.retrieval is not None:
        options["retrieval"] = level.retrieval
    if level.answer_options is not None:
        options["answer"] = level.answer_options
    method = getattr(level.answerer, "answer", None)
    target = method if callable(method) else level.answerer
    return lambda: target(question, **options)
