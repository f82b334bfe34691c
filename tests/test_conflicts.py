from __future__ import annotations

import pytest

from fastrag.answer.conflicts import (
    Conflict,
    LLMConflictCheck,
    detect_conflicts,
    find_quantities,
    parse_chinese_numeral,
)
from fastrag.errors import ConfigError
from fastrag.types import Hit


def hit(i: int, doc: str, text: str, **meta) -> Hit:
    return Hit(i, doc, 0, 0, len(text), text, 1.0 - i / 100, dict(meta))


OLD = "费用报销须在费用发生后十五日内提交，并附原始发票。"
NEW = "费用报销须在费用发生后十日内提交，并附原始发票。"


# -- numbers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("十", 10), ("十五", 15), ("二十", 20), ("二十五", 25), ("一百", 100), ("两", 2),
        ("一百零五", 105), ("三千", 3000), ("一万二千", 12000), ("十万", 100000), ("五", 5),
        ("零", 0), ("二〇二五", 2025), ("两百", 200), ("一亿二千万", 120_000_000),
        ("三五", None), ("万", None), ("一二十", None), ("", None), ("十x", None),
    ],
)  # fmt: skip
def test_parse_chinese_numeral(text, value):
    assert parse_chinese_numeral(text) == value


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("十五日内", [(15, "day")]),
        ("5天和10天", [(5, "day"), (10, "day")]),
        ("200元，五千元，5万元", [(200, "CNY"), (5000, "CNY"), (50000, "CNY")]),
        (
            "15 days, 10 working days, 3 business days",
            [(15, "day"), (10, "working day"), (3, "working day")],
        ),
        (
            "CNY 300, ¥40, $12.5 and 5,000 CNY",
            [(300, "CNY"), (40, "CNY"), (12.5, "USD"), (5000, "CNY")],
        ),
        ("two days, one week", []),  # spelled-out English numbers are not read
        ("A4 pages, v1.5 days, 3.14.15 days", []),
        (
            "六小时以内，三个月，12位，15%",
            [(6, "hour"), (3, "month"), (12, "character"), (15, "percent")],
        ),
        ("次年3月31日，2025年，第一天，第3天", []),  # dates and ordinals
        ("3月份，22:00以后，10点", []),  # no quantity unit
        ("15 dayspring, 12 yearsx", []),
        ("统一五天", []),  # 一五 is no number
    ],
)  # fmt: skip
def test_find_quantities(text, found):
    assert [(q.value, q.unit) for q in find_quantities(text)] == found


def test_window_is_the_clause_before_the_number():
    (q,) = find_quantities("出差期间，餐费每天最高报销200元")
    assert q.window == "餐费每天最高报销"


# -- rules -----------------------------------------------------------------------------------------


def test_seed_example_is_detected():
    hits = [
        hit(1, "expense-2024", OLD),
        hit(2, "other", "密码长度不得少于12位。"),
        hit(3, "expense-2025", NEW),
    ]
    (c,) = detect_conflicts(hits)
    assert c.unit == "day" and c.values == (15.0, 10.0)
    assert c.markers == (1, 3) and c.hits == (hits[0], hits[2])
    assert "报销" in c.subject.split()
    assert c.description == f"Sources [1] and [3] disagree: 15 days vs 10 days for {c.subject}"
    assert c.describe(chinese=True).startswith("来源[1]和[3]不一致")
    assert "15天与10天" in c.describe(chinese=True)


def test_versions_of_one_document_under_different_ids():
    hits = [
        hit(1, "expense@v1", OLD, title="费用报销规定", source="finance/expenses.md"),
        hit(2, "expense@v2", NEW, title="费用报销规定", source="finance/expenses.md"),
    ]
    assert len(detect_conflicts(hits)) == 1


def test_english():
    a = hit(1, "a", "Expense reports must be submitted within 15 days of the expense.")
    b = hit(2, "b", "Expense reports must be submitted within 10 days of the expense.")
    (c,) = detect_conflicts([a, b])
    assert (
        c.description
        == "Sources [1] and [2] disagree: 15 days vs 10 days for expense reports submitted"
    )
    meals = [
        hit(1, "a", "Meals are reimbursed up to 200 CNY per day."),
        hit(2, "b", "Meals are reimbursed up to 300 CNY per day."),
    ]
    (m,) = detect_conflicts(meals)
    assert m.values == (200, 300) and m.unit == "CNY"
    assert "200 CNY vs 300 CNY" in m.description


def test_mixed_numerals():
    a = hit(1, "a", "年假申请需提前5天提交。")
    b = hit(2, "b", "年假申请需提前十天提交。")
    (c,) = detect_conflicts([a, b])
    assert c.values == (5, 10)
    a = hit(1, "a", "出差期间餐费每天最高报销200元。")
    b = hit(2, "b", "出差期间餐费每天最高报销三百元。")
    assert detect_conflicts([a, b])[0].values == (200, 300)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (OLD, OLD.replace("十五日", "15天")),  # the same number
        (OLD, OLD.replace("十五日", "十五小时")),  # different units
        (OLD, "密码须在设备丢失后十日内更换。"),  # unrelated subject
        ("Expense reports are due within 15 days.", "Passwords are changed every 180 days."),
        (
            "Meals are reimbursed up to 200 CNY per day.",
            "Hotels are reimbursed up to 600 CNY per night.",
        ),
    ],
)
def test_no_conflict(first, second):
    assert detect_conflicts([hit(1, "a", first), hit(2, "b", second)]) == []


def test_same_document_is_never_compared():
    assert detect_conflicts([hit(1, "a", OLD), hit(2, "a", NEW)]) == []


def test_a_source_listing_both_values_does_not_conflict():
    a = hit(1, "a", "员工每年享有15天带薪年假，员工每年享有20天带薪年假（满五年）。")
    b = hit(2, "b", "员工每年享有15天带薪年假。")
    assert detect_conflicts([a, b]) == []


def test_top_limits_the_hits_compared():
    hits = (
        [hit(1, "a", OLD)]
        + [hit(i, f"x{i}", "无关内容。") for i in range(2, 7)]
        + [hit(7, "b", NEW)]
    )
    assert detect_conflicts(hits) == []
    assert len(detect_conflicts(hits, top=None)) == 1
    assert len(detect_conflicts(hits, top=7)) == 1
    with pytest.raises(ConfigError):
        detect_conflicts(hits, top=0)


def test_no_conflicts_in_the_demo_knowledge_base():
    from fastrag.datasets import demo_documents

    docs = demo_documents()
    hits = [hit(i, d["id"], d["text"]) for i, d in enumerate(docs)]
    assert detect_conflicts(hits, top=None) == []


def test_demo_knowledge_base_with_an_outdated_copy():
    from fastrag.datasets import demo_documents

    import fastrag

    docs = demo_documents()
    expense = next(d for d in docs if d["id"] == "expense-zh")
    old = dict(expense, id="expense-zh-2023", text=str(expense["text"]).replace("15天", "10天"))
    kb = fastrag.KnowledgeBase.build([*docs, old])
    question = "费用报销须在费用发生后多少天内提交？"
    hits = kb.retrieve(question, k=5)
    conflicts = detect_conflicts(hits)
    assert any({h.doc_id for h in c.hits} == {"expense-zh", "expense-zh-2023"} for c in conflicts)
    assert all(c.unit == "day" and set(c.values) == {15, 10} for c in conflicts)


# -- LLM variant -----------------------------------------------------------------------------------


class FakeChat:
    def __init__(self, reply=None, exc=None):
        self.reply, self.exc, self.calls = reply, exc, 0

    def __call__(self, messages, **params):
        self.calls += 1
        if self.exc is not None:
            raise self.exc
        return self.reply, {}


HITS = [hit(1, "a", OLD), hit(2, "b", NEW)]


def test_llm_conflict_check():
    chat = FakeChat(
        '{"conflicts": [{"sources": [1, 2], "subject": "报销期限", "unit": "day", '
        '"values": [15, 10]}]}'
    )
    (c,) = LLMConflictCheck(chat)(HITS)
    assert c == Conflict("报销期限", "day", (15.0, 10.0), tuple(HITS), (1, 2))
    assert LLMConflictCheck(FakeChat('{"conflicts": []}'))(HITS) == []


@pytest.mark.parametrize(
    "reply",
    [
        "nothing",
        '{"conflicts": "none"}',
        '{"conflicts": [{"sources": [1, 9], "values": [1, 2]}]}',
        '{"conflicts": [{"sources": [1, 2], "values": [1]}]}',
        '{"conflicts": [{"sources": [1, 2], "values": ["a", "b"]}]}',
        '{"conflicts": [{"sources": [1, 1], "values": [1, 2]}]}',
        '{"conflicts": [{"sources": [1, 2], "values": [1, 2], "subject": 5}]}',
    ],
)
def test_llm_conflict_check_falls_back(reply):
    assert LLMConflictCheck(FakeChat(reply))(HITS) == detect_conflicts(HITS)


def test_llm_conflict_check_error_and_single_document():
    assert LLMConflictCheck(FakeChat(exc=RuntimeError("down")))(HITS) == detect_conflicts(HITS)
    chat = FakeChat(exc=AssertionError("not called"))
    assert LLMConflictCheck(chat)([hit(1, "a", OLD), hit(2, "a", NEW)]) == []
    assert chat.calls == 0
