from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from fastrag.answer.fallback import Attempt, ChainResult, FallbackChain, Level
from fastrag.answer.prompt import NOT_FOUND_EN
from fastrag.errors import ConfigError, ModelTimeoutError
from fastrag.types import Answer


@dataclasses.dataclass(frozen=True)
class ScoredAnswer:
    """An Answer-like object with a confidence (until Answer has one)."""

    question: str
    text: str
    found: bool = True
    confidence: float | None = None


def answer(text: str, found: bool = True) -> Answer:
    return Answer("q", text, found, (), {}, "", {})


class Slow:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.finished = threading.Event()

    def __call__(self, question: str) -> Answer:
        time.sleep(self.seconds)
        self.finished.set()
        return answer("too late")


def failing(question: str) -> Answer:
    raise RuntimeError("index offline")


def low(question: str) -> ScoredAnswer:
    return ScoredAnswer(question, "a guess", confidence=0.4)


def good(question: str) -> ScoredAnswer:
    return ScoredAnswer(question, "the answer [1]", confidence=0.9)


def test_slow_failing_low_then_good():
    slow = Slow(3.0)
    chain = FallbackChain(
        [
            Level(slow, "slow", timeout=0.05),
            Level(failing, "failing"),
            Level(low, "low"),
            Level(good, "good"),
        ]
    )
    result = chain("How many days?")
    assert isinstance(result, ChainResult) and result.accepted
    assert result.level == "good" and result.answer.text == "the answer [1]"
    assert [(a.level, a.outcome) for a in result.attempts] == [
        ("slow", "timeout"),
        ("failing", "error"),
        ("low", "low_confidence"),
        ("good", "answered"),
    ]
    slow_attempt, fail_attempt, low_attempt, good_attempt = result.attempts
    assert "0.05 s" in slow_attempt.detail  # it timed out ...
    assert fail_attempt.detail == "RuntimeError: index offline"
    assert low_attempt.detail == "confidence 0.400 below 0.7"
    assert good_attempt.detail == ""
    assert not slow.finished.is_set()  # ... and the chain answered before the slow call ended
    assert slow.finished.wait(10)  # ... and it ends by itself


def test_first_good_level_wins_and_later_levels_are_not_called():
    calls = []

    def second(question):
        calls.append(question)
        return good(question)

    result = FallbackChain([good, second])("q")
    assert result.level == "level1" and calls == []
    assert [a.outcome for a in result.attempts] == ["answered"]


def test_not_found_moves_on():
    result = FallbackChain([lambda q: answer(NOT_FOUND_EN, found=False), good])("q")
    assert [a.outcome for a in result.attempts] == ["not_found", "answered"]


def test_answers_without_confidence_pass():
    result = FallbackChain([lambda q: answer("plain [1]")])("q")
    assert result.accepted and result.answer.text == "plain [1]"
    none = FallbackChain([lambda q: ScoredAnswer(q, "x", confidence=None)])("q")
    assert none.accepted


def test_no_level_passes_returns_the_most_confident_answer():
    lower = lambda q: ScoredAnswer(q, "lower", confidence=0.2)  # noqa: E731
    result = FallbackChain([failing, lower, low, lambda q: answer(NOT_FOUND_EN, False)])("q")
    assert not result.accepted
    assert result.answer.text == "a guess" and result.level == "level3"
    assert [a.outcome for a in result.attempts] == [
        "error",
        "low_confidence",
        "low_confidence",
        "not_found",
    ]


def test_no_level_passes_and_none_answered_returns_not_found():
    nf = answer(NOT_FOUND_EN, found=False)
    result = FallbackChain([failing, lambda q: nf])("q")
    assert not result.accepted and result.answer is nf and result.level == "level2"
    result = FallbackChain([failing, failing])("How long?")
    assert not result.accepted and result.level is None
    assert result.answer.found is False and result.answer.text == NOT_FOUND_EN
    assert len(result.attempts) == 2


def test_level_thresholds_override_the_chain():
    chain = FallbackChain([Level(low, min_confidence=0.3), good], min_confidence=0.7)
    assert chain("q").level == "level1"
    chain = FallbackChain([low, good], min_confidence=None)
    assert chain("q").level == "level1"
    chain = FallbackChain([Level(good, min_confidence=0.95), low], min_confidence=0.1)
    assert chain("q").level == "level2"


def test_a_level_own_timeout_error_is_a_timeout():
    def model_timeout(question):
        raise ModelTimeoutError("POST /chat: no answer within 30 s", attempts=3)

    result = FallbackChain([model_timeout, good])("q")
    assert result.attempts[0].outcome == "timeout"
    assert result.attempts[0].detail.startswith("ModelTimeoutError")


def test_wrong_return_type_is_an_error():
    result = FallbackChain([lambda q: "just text", good])("q")
    assert (
        result.attempts[0].outcome == "error"
        and "expected fastrag.Answer" in result.attempts[0].detail
    )


def test_knowledge_base_levels_get_options():
    class FakeKB:
        def __init__(self):
            self.calls = []

        def answer(self, question, **options):
            self.calls.append((question, options))
            return ScoredAnswer(question, "kb answer", confidence=0.8)

    kb = FakeKB()
    result = FallbackChain([Level(kb, "kb", options={"k": 3, "mode": "hybrid"})], timeout=None)(
        "q?"
    )
    assert result.level == "kb" and kb.calls == [("q?", {"k": 3, "mode": "hybrid"})]


def test_real_knowledge_base(kb):
    chain = FallbackChain([Level(kb, "local", options={"k": 3})], timeout=30, min_confidence=None)
    result = chain("How many days of paid annual leave do employees receive?")
    assert result.accepted and result.answer.found and "15 days" in result.answer.text
    assert result.attempts == (Attempt("local", "answered", result.attempts[0].seconds),)


def test_timeout_none_runs_inline():
    seen = []
    chain = FallbackChain(
        [lambda q: seen.append(threading.current_thread()) or good(q)], timeout=None
    )
    chain("q")
    assert seen == [threading.current_thread()]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"levels": []},
        {"levels": "kb"},
        {"levels": [good], "timeout": 0},
        {"levels": [good], "timeout": -1},
        {"levels": [good], "min_confidence": 1.5},
        {"levels": [good], "min_confidence": True},
        {"levels": [42]},
    ],
)
def test_bad_configuration(kwargs):
    with pytest.raises(ConfigError):
        FallbackChain(**kwargs)


def test_bad_level():
    with pytest.raises(ConfigError):
        Level(good, options=[("k", 3)])  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Level(good, timeout="1")  # type: ignore[arg-type]
    assert "level1" in repr(FallbackChain([good]))


def test_levels_take_the_options_objects():
    from fastrag.datasets import demo_documents

    from fastrag import AnswerOptions, KnowledgeBase, RetrievalOptions

    kb = KnowledgeBase.build(demo_documents())
    seen = []

    def spy(question, **options):
        seen.append(options)
        return kb.answer(question, **options)

    level = Level(
        spy, "spy", retrieval=RetrievalOptions(mode="keyword"),
        answer_options=AnswerOptions(budget=200), options={"k": 2},
    )  # fmt: skip
    result = FallbackChain([level], timeout=None, min_confidence=0.0).answer("年假怎么申请？")
    assert result.level == "spy" and len(result.answer.hits) <= 2
    assert seen[0]["retrieval"].mode == "keyword" and seen[0]["answer"].budget == 200
    with pytest.raises(ConfigError):
        Level(kb, retrieval={"mode": "keyword"})
