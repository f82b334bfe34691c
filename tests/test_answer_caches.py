"""The answer stages' caches (per chunk text) change no answer: warm equals cold, keys are whole."""

from __future__ import annotations

import dataclasses
import random

import pytest
from fastrag.datasets import demo_documents

from fastrag import ExtractiveGenerator, Hit, KnowledgeBase
from fastrag.answer.conflicts import detect_conflicts
from fastrag.answer.stages import clear_caches
from fastrag.text.pii import Redactor

QUESTIONS = [
    "年假怎么申请？",
    "How many days do I have to submit an expense report?",
    "费用报销须在费用发生后多少天内提交？",
    "How many days of paid annual leave do employees receive?",
    "设备丢失后多久内要报告？",
    "公司食堂几点开门？",
    "Who won the 1998 World Cup?",
]


def _documents():
    docs = demo_documents()
    expense = next(d for d in docs if d["id"] == "expense-zh")
    old = dict(expense, id="expense-zh-2023", text=str(expense["text"]).replace("15天", "10天"))
    return [*docs, old]


def _fields(answer):
    out = dataclasses.asdict(answer)
    out.pop("timings")
    return out


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.build(_documents())


def test_warm_answers_equal_cold_ones(kb):
    cold = []
    for q in QUESTIONS:
        clear_caches()
        fresh = KnowledgeBase.build(_documents())  # its own redactor: an empty cache
        cold.append(_fields(fresh.answer(q)))
    assert any(a["conflicts"] for a in cold)  # the conflict stage has something to say
    order = QUESTIONS * 3
    random.Random(5).shuffle(order)
    for q in order:  # warm, in another order, answer and batch alike
        assert _fields(kb.answer(q)) == cold[QUESTIONS.index(q)]
    for q, a in zip(QUESTIONS, kb.answer_batch(QUESTIONS, output="answers"), strict=True):
        assert _fields(a) == cold[QUESTIONS.index(q)]


def test_a_cut_window_start_is_part_of_the_sentence_cache():
    text = "reports are due within 15 days. Meals are free on Fridays."
    whole = Hit(1, "a", 0, 0, len(text), text, 1.0, relevance=0.9)
    cut = dataclasses.replace(whole, start=40, end=40 + len(text))
    gen = ExtractiveGenerator()
    q = "When are reports due?"
    for _ in range(2):  # either order, either warm
        assert gen(q, [whole]).text == "reports are due within 15 days. [1]"
        assert not gen(q, [cut]).found  # its first sentence was cut by the window


def test_a_cut_window_start_is_part_of_the_redaction_cache():
    text = "4111 1111 1111 1111 is on file. Call 020-12345678."
    redactor = Redactor()
    whole = Hit(1, "a", 0, 0, len(text), text, 1.0)
    cut = dataclasses.replace(whole, start=10, end=10 + len(text))
    for _ in range(2):
        (a,), counts_a = redactor.redact_hits([whole])
        (b,), counts_b = redactor.redact_hits([cut])
        assert counts_a == Redactor().redact_hits([whole])[1]
        assert counts_b == Redactor().redact_hits([cut])[1]
        assert a.text == Redactor().redact_hits([whole])[0][0].text
        assert b.text == Redactor().redact_hits([cut])[0][0].text


def test_remembered_conflicts_name_the_hits_given():
    a = Hit(1, "old", 0, 0, 17, "费用报销须在费用发生后十五日内提交", 1.0)
    b = Hit(2, "new", 0, 0, 16, "费用报销须在费用发生后十日内提交", 0.9)
    first = detect_conflicts([a, b])
    a2, b2 = dataclasses.replace(a, chunk_id=7, score=0.5), dataclasses.replace(b, chunk_id=8)
    again = detect_conflicts([a2, b2])  # the same texts and documents: from the cache
    assert [c.hits for c in again] == [(a2, b2)]
    assert [(c.subject, c.unit, c.values, c.markers) for c in again] == [
        (c.subject, c.unit, c.values, c.markers) for c in first
    ]
    same_doc = dataclasses.replace(b, doc_id="old")
    assert detect_conflicts([a, same_doc]) == []  # the documents are part of the key
