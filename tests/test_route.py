"""Query routing: the question classes of fastrag.text.route and RetrievalOptions(route=...)."""

from __future__ import annotations

import pytest
from fastrag.datasets.maintenance import generate

import fastrag
from fastrag.errors import ConfigError
from fastrag.text.route import ROUTES, classify_question, route_tokens


@pytest.mark.parametrize(
    ("question", "route"),
    [
        ("SV0432", "code"),
        ("SV0432 报警", "code"),
        ("SV0432 怎么处理", "code"),
        ("FANUC-0iMD", "code"),
        ("A06B-6079-H106 price", "code"),
        ("ＳＶ０４３２", "code"),  # full-width forms count as ASCII
        ("alarm OT-0500", "code"),
        ("85℃", "numeric"),
        ("85 °C", "numeric"),
        ("0.3MPa", "numeric"),
        ("1500 rpm spindle", "numeric"),
        ("压力 0.3MPa", "numeric"),
        ("How do I replace the coolant pump on the lathe?", "natural"),
        ("主轴过热怎么处理？", "natural"),
        ("the year 2024", "natural"),
        ("Why does the spindle overheat after 2 hours of running at full load", "natural"),
        ("What does alarm SV0432 mean on the FANUC-0iMD spindle drive?", "mixed"),
        ("Is 85℃ too hot for the spindle bearing grease of this lathe?", "mixed"),
        ("FANUC-0iMD 主轴驱动器报警后应该如何复位和检查", "mixed"),
    ],
)
def test_rules(question, route):
    assert classify_question(question) == route


def test_tokens():
    codes, numeric, words = route_tokens("SV0432 at 85℃ on FANUC-0iMD")
    assert codes == ["sv0432", "fanuc-0imd"] and numeric == ["85°c"] and words == 0


def test_option_records_the_class_and_changes_no_ranking():
    kb = fastrag.KnowledgeBase.build(
        [
            {"id": "a", "text": "Alarm SV0432: the spindle amplifier overheats."},
            {"id": "b", "text": "Coolant temperature must stay below 85℃."},
            {"id": "c", "text": "Replace the coolant pump seal every year."},
        ]
    )
    for q, route in (("SV0432", "code"), ("85℃", "numeric"), ("how to replace a pump", "natural")):
        ans = kb.answer(q, route="auto")
        assert ans.route == route and ans.to_dict()["route"] == route
        assert ans.query.route == route
        # No per-class weights are measured yet: routing leaves the ranking as it was.
        assert [h.chunk_id for h in kb.retrieve(q, 3, route="auto")] == [
            h.chunk_id for h in kb.retrieve(q, 3)
        ]
    assert kb.answer("SV0432").route is None  # off by default
    assert kb.answer("SV0432", route="mixed").route == "mixed"  # an explicit class overrides
    opts = fastrag.RetrievalOptions(route="auto")
    assert kb.answer("SV0432", retrieval=opts).route == "code"
    assert kb.answer("SV0432", route="auto", mode="vector").route == "code"
    assert kb.answer("SV0432", route="auto", rewrite=False).route == "code"
    assert set(ROUTES) == {"code", "numeric", "natural", "mixed"}
    for bad in ("on", "codes", None, 1):
        with pytest.raises(ConfigError, match="route must be"):
            fastrag.RetrievalOptions(route=bad)  # type: ignore[arg-type]


def test_the_rules_agree_with_the_generated_maintenance_questions():
    docs, questions = generate(8, seed=3)
    assert len({d["id"] for d in docs}) == len(docs)
    assert {kind for _, _, kind in questions} == set(ROUTES)
    assert all(classify_question(q) == kind for q, _, kind in questions)
    for q, doc, kind in questions:  # every question's document exists, and codes are in it
        text = next(d["text"] for d in docs if d["id"] == doc)
        assert kind != "code" or q.split()[-1] in text


def test_the_hard_maintenance_set_has_near_codes_cross_references_and_shared_values():
    docs, questions = generate(8, seed=3)
    easy_docs, _ = generate(8, seed=3, hard=False)
    assert docs != easy_docs
    texts = {d["id"]: d["text"] for d in docs}
    codes = sorted({q for q, _, kind in questions if kind == "code" and " " not in q})
    # codes that differ from another document's code by one character
    near = [c for c in codes if any(sum(a != b for a, b in zip(c, o)) == 1 for o in codes)]
    assert len(near) >= len(codes) // 2
    # documents that cite other codes, and alarm lists that cite all of a machine's codes
    for code in codes:
        citing = [i for i, t in texts.items() if code in t]
        assert len(citing) >= 2
    assert sum(1 for i in texts if i.endswith("-alarm-list")) == 8
    # quantities shared across documents, while a part and a quantity name one document
    numeric = [q for q, _, kind in questions if kind == "numeric"]
    assert len(set(numeric)) == len(numeric)
    values = [q.split()[-1] for q in numeric]
    assert max(values.count(v) for v in values) >= 3
    assert generate(8, seed=3) == (docs, questions)  # deterministic
