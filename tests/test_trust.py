from __future__ import annotations

import datetime as dt
import logging
import threading
import time

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrag.answer.generate import ExtractiveGenerator
from fastrag.answer.prompt import NOT_FOUND_EN, NOT_FOUND_ZH
from fastrag.answer.stages import StageTimer, call_with_timeout
from fastrag.answer.verify import (
    Faithfulness,
    LLMJudge,
    check_faithfulness,
    confidence,
    freshness_warnings,
)
from fastrag.errors import ConfigError, StageTimeoutError
from fastrag.text.sentences import split_cited as split_sentences
from fastrag.types import Hit

UTC = dt.timezone.utc

# -- confidence ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "used", "provided", "expected"),
    [
        ([0.9, 0.7], 2, 4, 0.6 * 0.8 + 0.4 * 0.5),
        ([1.0], 1, 1, 1.0),
        ([0.5], 1, 5, 0.6 * 0.5 + 0.4 * 0.2),
        ([], 0, 5, 0.0),  # no citations: 0.6 x 0 + 0.4 x 0
        ([], 0, 0, 0.0),
        ([None, 0.8], 2, 2, 0.6 * 0.4 + 0.4),  # None counts as 0
        ([1.7, -0.2], 2, 2, 0.6 * 0.5 + 0.4),  # clamped to [0, 1]
        ([0.5], 3, 2, 0.6 * 0.5 + 0.4),  # share capped at 1
        ([float("nan")], 1, 1, 0.4),
    ],
)
def test_confidence(rel, used, provided, expected):
    assert confidence(rel, used, provided) == pytest.approx(expected)
    assert 0.0 <= confidence(rel, used, provided) <= 1.0


# -- sentences -------------------------------------------------------------------------------------


def test_split_sentences_english_markers_after_the_full_stop():
    text = (
        "Employees receive 15 days. [1] Leave over 10 days needs approval [2]. "
        "Costs 3.5 CNY. [1][3]"
    )
    assert split_sentences(text) == [
        ("Employees receive 15 days.", (1,)),
        ("Leave over 10 days needs approval .", (2,)),
        ("Costs 3.5 CNY.", (1, 3)),
    ]


def test_split_sentences_chinese():
    text = "年假申请需提前3天提交。[1]满五年的员工享有20天！[2]没有标记的句子；最后一句"
    assert split_sentences(text) == [
        ("年假申请需提前3天提交。", (1,)),
        ("满五年的员工享有20天！", (2,)),
        ("没有标记的句子；", ()),
        ("最后一句", ()),
    ]


def test_split_sentences_line_breaks_and_empty():
    assert split_sentences("") == []
    assert split_sentences("first line\nsecond line [2]\n\n") == [
        ("first line", ()),
        ("second line", (2,)),
    ]


# -- faithfulness ----------------------------------------------------------------------------------

SOURCES = [
    "Annual leave requests must be submitted at least 3 working days in advance.",
    "Expense reports must be submitted within 15 days with the original receipts attached.",
    "年假申请需提前3天提交。工作未满五年的员工每年享有15天带薪年假。",
]


def test_supported_and_unsupported_sentences():
    answer = (
        "Expense reports are submitted within 15 days. [2] "
        "The company pays for a yearly ski trip to Switzerland. [2]"
    )
    f = check_faithfulness(answer, SOURCES)
    assert f.score == 0.5
    assert f.supported == ("Expense reports are submitted within 15 days.",)
    assert f.unsupported == ("The company pays for a yearly ski trip to Switzerland.",)
    assert f.judge == "rules"


def test_a_sentence_is_checked_against_the_sources_it_cites():
    text = "Annual leave requests must be submitted 3 working days in advance."
    assert check_faithfulness(text + " [1]", SOURCES).score == 1.0
    assert check_faithfulness(text + " [3]", SOURCES).score == 0.0  # cites the wrong source
    assert check_faithfulness(text, SOURCES).score == 1.0  # no marker: all sources
    assert check_faithfulness(text + " [9]", SOURCES).score == 1.0  # no source [9]: all sources


def test_chinese_bigrams():
    good = "工作未满五年的员工每年享有15天带薪年假。[3]"
    bad = "员工每月可以领取一千元交通补贴和免费午餐。[3]"
    assert check_faithfulness(good, SOURCES).score == 1.0
    f = check_faithfulness(good + bad, SOURCES)
    assert f.score == 0.5 and f.unsupported == ("员工每月可以领取一千元交通补贴和免费午餐。",)


def test_threshold_is_thirty_percent():
    # content terms: expens, report, late, fine, penalt, apply, strict -> 2 of 7 (28%) in source 2
    text = "Expense reports late: fines, penalties apply strictly."
    assert check_faithfulness(text, {1: SOURCES[1]}).score == 0.0
    assert check_faithfulness(text, {1: SOURCES[1]}, threshold=0.25).score == 1.0


def test_mapping_sources_and_markers():
    f = check_faithfulness("Receipts are attached. [7]", {7: SOURCES[1]})
    assert f.score == 1.0


@pytest.mark.parametrize("text", ["", "   ", NOT_FOUND_EN, NOT_FOUND_ZH])
def test_empty_and_not_found_answers_score_one(text):
    assert check_faithfulness(text, SOURCES) == Faithfulness(1.0)


def test_found_flag_overrides_detection_and_sentences_without_terms_are_skipped():
    assert check_faithfulness("Ski trips. [1]", SOURCES, found=False).score == 1.0
    assert check_faithfulness("是的。[1]", SOURCES, found=True).score == 1.0  # nothing to check


def test_extractive_answers_are_faithful():
    hits = [Hit(i, f"d{i}", 0, 0, len(t), t, 1.0, relevance=0.9) for i, t in enumerate(SOURCES)]
    for q in ["When must expense reports be submitted?", "年假申请需要提前几天提交？"]:
        gen = ExtractiveGenerator()(q, hits)
        assert gen.found
        assert check_faithfulness(gen.text, [h.text for h in hits]).score == 1.0


def test_bad_sources():
    with pytest.raises(ConfigError):
        check_faithfulness("text", "a single string")
    with pytest.raises(ConfigError):
        check_faithfulness(None, SOURCES)  # type: ignore[arg-type]


# -- LLM judge -------------------------------------------------------------------------------------


class FakeChat:
    def __init__(self, reply=None, exc=None, delay=0.0):
        self.reply, self.exc, self.delay, self.calls = reply, exc, delay, []

    def chat(self, messages, **params):
        self.calls.append(messages)
        if self.delay:
            time.sleep(self.delay)
        if self.exc is not None:
            raise self.exc
        return self.reply, {}


ANSWER = "Expense reports are submitted within 15 days. [2] Ski trips are free. [2]"


def test_llm_judge_uses_the_model():
    chat = FakeChat(
        'Sure: {"faithfulness_score": 0.5, "unsupported_claims": ["Ski trips are free."], '
        '"grounded_claims": ["Expense reports are submitted within 15 days."]}'
    )
    f = LLMJudge(chat.chat)(ANSWER, SOURCES)
    assert f == Faithfulness(
        0.5, ("Ski trips are free.",), ("Expense reports are submitted within 15 days.",), "llm"
    )
    assert "[2] Expense reports" in chat.calls[0][1]["content"]


@pytest.mark.parametrize(
    "chat",
    [
        FakeChat(exc=RuntimeError("server down")),
        FakeChat("no json here"),
        FakeChat('{"faithfulness_score": 1.5, "unsupported_claims": [], "grounded_claims": []}'),
        FakeChat('{"faithfulness_score": "high"}'),
        FakeChat('{"faithfulness_score": true}'),
        FakeChat('{"faithfulness_score": 0.5, "unsupported_claims": "none"}'),
        FakeChat('{"unsupported_claims": []}'),
        FakeChat("{not json}"),
    ],
)
def test_llm_judge_falls_back_to_the_rules(chat, caplog):
    with caplog.at_level(logging.INFO, logger="fastrag.answer.verify"):
        f = LLMJudge(chat.chat)(ANSWER, SOURCES)
    assert f == check_faithfulness(ANSWER, SOURCES)
    assert f.judge == "rules"


def test_llm_judge_timeout_falls_back():
    release, done = threading.Event(), threading.Event()

    def slow_chat(messages, **params):
        release.wait(10)
        done.set()
        return '{"faithfulness_score": 1.0}', {}

    f = LLMJudge(slow_chat, timeout=0.05)(ANSWER, SOURCES)
    # The judge gave up on the call while it was still running (not after it finished).
    assert f.judge == "rules" and not done.is_set()
    release.set()


def test_llm_judge_skips_the_model_for_not_found():
    chat = FakeChat(exc=AssertionError("must not be called"))
    assert LLMJudge(chat.chat)(NOT_FOUND_EN, SOURCES).score == 1.0
    assert chat.calls == []


# -- freshness -------------------------------------------------------------------------------------

NOW = dt.datetime(2026, 1, 1, tzinfo=UTC)


def dated(i: int, updated) -> Hit:
    meta = {} if updated is None else {"updated_at": updated}
    return Hit(i, f"d{i}", 0, 0, 4, "text", 1.0, meta)


def test_freshness_warnings():
    hits = [
        dated(1, dt.datetime(2025, 1, 2, 8, 0, tzinfo=UTC)),  # 364 days old
        dated(2, dt.datetime(2025, 12, 1, tzinfo=UTC)),  # fresh
        dated(3, None),
        dated(4, dt.datetime(2025, 7, 4, tzinfo=UTC)),  # 181 days
        dated(5, dt.datetime(2025, 7, 5, tzinfo=UTC)),  # exactly 180 days: still fresh
        dated(6, dt.datetime(2027, 1, 1, tzinfo=UTC)),  # future
    ]
    warnings = freshness_warnings(hits, now=NOW)
    assert [w.marker for w in warnings] == [1, 4]
    assert warnings[0].message == "this information dates from 2025-01-02; it may be outdated"
    assert warnings[0].hit is hits[0] and warnings[0].age_days == pytest.approx(363 + 16 / 24)
    zh = freshness_warnings(hits, now=NOW, question="年假有几天？")
    assert zh[0].message == "该信息更新于2025-01-02，可能已过时"
    en = freshness_warnings(hits, now=NOW, question="How many days of leave?")
    assert en[0].message.startswith("this information dates from")


def test_freshness_threshold_and_value_types():
    hits = [
        dated(1, dt.date(2025, 12, 1)),
        dated(2, "2025-11-01T00:00:00Z"),
        dated(3, dt.datetime(2025, 12, 20)),  # naive: UTC
        dated(4, "not a date"),
        dated(5, 12345),
    ]
    assert [w.marker for w in freshness_warnings(hits, now=NOW, max_age_days=31)] == [2]
    assert [w.marker for w in freshness_warnings(hits, now=NOW, max_age_days=0)] == [1, 2, 3]
    assert freshness_warnings(hits, now=dt.datetime(2026, 1, 1), max_age_days=10)[0].marker == 1


def test_freshness_default_now_is_the_clock():
    old = dated(1, dt.datetime(2000, 1, 1, tzinfo=UTC))
    assert len(freshness_warnings([old])) == 1


@pytest.mark.parametrize("bad", [-1, "180", None, float("nan"), True])
def test_freshness_bad_threshold(bad):
    with pytest.raises(ConfigError):
        freshness_warnings([], max_age_days=bad)


def test_freshness_on_the_demo_knowledge_base():
    from fastrag.datasets import demo_documents

    import fastrag

    kb = fastrag.KnowledgeBase.build(demo_documents())
    hits = kb.retrieve("出差住宿费每晚最高报销多少？", k=3)
    late = dt.datetime(2027, 6, 1, tzinfo=UTC)
    warnings = freshness_warnings(hits, now=late, question="出差住宿费每晚最高报销多少？")
    assert len(warnings) == 3 and all(w.message.startswith("该信息更新于2026-") for w in warnings)


# -- stage timer and deadlines ---------------------------------------------------------------------


def test_stage_timer_records_and_reports():
    seen = []
    timings: dict[str, float] = {"rewrite": 0.5}
    timer = StageTimer(timings, on_stage=lambda name, s, info: seen.append((name, s, dict(info))))
    with timer("context") as info:
        info["blocks"] = 3
    with timer("context"):
        pass
    with pytest.raises(ValueError), timer("verify"):
        raise ValueError("boom")
    assert set(timings) == {"rewrite", "context", "verify"}
    assert timings["context"] == pytest.approx(seen[0][1] + seen[1][1])
    assert seen[0][0] == "context" and seen[0][2] == {"blocks": 3}
    assert seen[2][2] == {"error": "ValueError"}


def test_stage_timer_swallows_hook_errors(caplog):
    def hook(name, seconds, info):
        raise RuntimeError("metrics down")

    timer = StageTimer(on_stage=hook)
    with caplog.at_level(logging.WARNING, logger="fastrag.answer.stages"), timer("audit"):
        pass
    assert "audit" in timer.timings and "metrics down" in caplog.text


def test_call_with_timeout():
    assert call_with_timeout(lambda: 42, None) == 42
    assert call_with_timeout(lambda: 42, 1.0) == 42
    with pytest.raises(KeyError):
        call_with_timeout(lambda: {}["x"], 1.0)
    release, done = threading.Event(), threading.Event()

    def slow():
        release.wait(10)
        done.set()

    with pytest.raises(StageTimeoutError) as info:
        call_with_timeout(slow, 0.05)
    assert isinstance(info.value, TimeoutError)
    assert not done.is_set()  # the wait ended while the call was still running
    release.set()


# The sentence pattern one character at a time (the splitter takes runs of ordinary
# characters whole): the reference its matches must equal.
_REFERENCE_BODY = r"(?:[^。！？!?；;…\n.]|\.(?=[^\s\[]))*(?:[。！？!?；;….]+|\n+|$)"


@settings(max_examples=examples(500), deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .。！？!?；;…\n[]1 \t\r年x")), max_size=40))
def test_the_sentence_splitter_equals_the_reference_pattern(text):
    import re

    from fastrag.text import sentences

    for ours, suffix in ((sentences._SENTENCE, ""), (sentences._CITED, r"(?:[ \t]*\[\d{1,4}\])*")):
        reference = re.compile(_REFERENCE_BODY + suffix)
        assert [m.span() for m in ours.finditer(text)] == [
            m.span() for m in reference.finditer(text)
        ]
