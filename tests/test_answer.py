from __future__ import annotations

import dataclasses
import re

import pytest
from conftest import examples
from fastrag.datasets import demo_documents
from hypothesis import given, settings
from hypothesis import strategies as st

import fastrag
from fastrag import Answer, ExtractiveGenerator, Generation, Hit, KnowledgeBase
from fastrag.answer.prompt import (
    NOT_FOUND_EN,
    NOT_FOUND_ZH,
    SYSTEM_PROMPT,
    build_messages,
    parse_citations,
)
from fastrag.errors import ConfigError, GenerationError
from fastrag.text.terms import coverage, question_terms

MARKER = re.compile(r"\s?\[\d+\]")


@pytest.fixture(scope="module")
def demo_kb() -> KnowledgeBase:
    return KnowledgeBase.build(demo_documents())


def _hit(text: str, score: float = 0.9, i: int = 0) -> Hit:
    return Hit(chunk_id=i, doc_id=f"d{i}", ord=0, start=0, end=len(text), text=text, score=score)


def _sentences_of(answer_text: str) -> list[str]:
    return [s for s in MARKER.split(answer_text) if s.strip()]


@pytest.mark.parametrize(
    "question, doc",
    [
        ("年假怎么申请？", "leave-zh"),
        ("设备丢失后多久内要报告？", "security-zh"),
        ("报销需要在多少天内提交？", "expense-zh"),
        ("试用期多长时间？", "onboarding-zh"),
        ("密码多久更换一次？", "security-zh"),
    ],
)
def test_extractive_answers_from_the_right_document(demo_kb, question, doc):
    ans = demo_kb.answer(question, k=5)
    assert ans.found
    assert ans.citations and all(h.doc_id == doc for h in ans.citations.values())
    for sentence in _sentences_of(ans.text):
        assert any(sentence.strip() in h.text for h in ans.hits)


@pytest.mark.parametrize(
    "question", ["公司食堂几点开门？", "What time does the canteen open?", "火星上有几颗卫星？"]
)
def test_extractive_says_not_found_in_the_question_language(demo_kb, question):
    ans = demo_kb.answer(question, k=5)
    assert not ans.found and not ans.citations
    assert ans.text == (
        NOT_FOUND_ZH if any("\u4e00" <= c <= "\u9fff" for c in question) else NOT_FOUND_EN
    )
    assert 1 <= len(ans.hits) <= 5  # the hits it looked at (overlapping windows merged)


def test_low_scores_mean_not_found():
    gen = ExtractiveGenerator(min_score=0.5)
    out = gen("annual leave", [_hit("Annual leave is 15 days.", score=0.4)])
    assert not out.found and out.text == NOT_FOUND_EN
    assert gen("annual leave", []).found is False


TEXT = st.lists(
    st.sampled_from(list("abc xyz年假申请提交。.!？ \n") + ["leave", " days", "Leave. "]),
    max_size=30,
).map("".join)


@settings(max_examples=examples(200), deadline=None)
@given(question=TEXT, texts=st.lists(TEXT, min_size=1, max_size=5))
def test_extractive_never_presents_text_not_in_the_hits(question, texts):
    hits = [_hit(t, 0.9, i) for i, t in enumerate(texts)]
    out = ExtractiveGenerator(min_coverage=0.1)(question, hits)
    if not out.found:
        assert out.text in (NOT_FOUND_EN, NOT_FOUND_ZH) and out.citations == ()
        return
    pieces = re.split(r"(\[\d+\])", out.text)
    # Every sentence is followed by the marker of a hit that contains it.
    for sentence, marker in zip(pieces[0::2], pieces[1::2], strict=False):
        n = int(marker[1:-1])
        assert 1 <= n <= len(hits)
        assert sentence.strip() in hits[n - 1].text
    assert set(out.citations) == {int(m[1:-1]) for m in pieces[1::2]}


def test_brackets_inside_a_hit_are_not_citations():
    hits = [_hit("Unrelated text.", i=0), _hit("Annual leave is 15 days [1].", i=1)]
    out = ExtractiveGenerator()("annual leave days", hits)
    assert out.found and out.citations == (2,)


def test_question_terms_and_coverage():
    terms = question_terms("How many days do I have to submit an expense report?")
    assert terms == ({"dai", "submit", "expens", "report"}, set())  # Porter stems, as BM25
    sentence = question_terms("Expense reports must be submitted within 15 days.")
    assert coverage(terms, sentence) == 1.0
    zh = question_terms("年假怎么申请？")
    assert zh[0] == {"年假", "申请"} and "怎" not in zh[1] and "么" not in zh[1]


def test_answer_carries_hits_citations_prompt_timings(demo_kb):
    ans = demo_kb.answer("年假怎么申请？", k=4)
    assert isinstance(ans, Answer) and ans.question == "年假怎么申请？"
    assert 1 <= len(ans.hits) <= 4  # context blocks: overlapping windows of a document merged
    for marker, hit in ans.citations.items():
        assert ans.hits[marker - 1] == hit
    assert ans.prompt.startswith("【知识库】\n[1] ") and ans.prompt.endswith(
        "【问题】\n年假怎么申请？"
    )
    assert {
        "rewrite",
        "retrieve",
        "context",
        "redact",
        "generate",
        "verify",
        "audit",
        "total",
    } <= set(ans.timings)
    assert ans.timings["total"] >= ans.timings["retrieve"] >= 0
    assert ans.query is not None and ans.query.intent == "procedural"
    d = ans.to_dict()
    assert d["answer"] == ans.text and len(d["hits"]) == len(ans.hits)


def test_answer_batch_equals_answer_question_by_question(demo_kb):
    questions = [
        "年假怎么申请？",
        "公司食堂几点开门？",
        "设备丢失后多久内要报告？",
        "",
        "密码多久更换一次？",
        "年假怎么申请？",
    ]
    table = demo_kb.answer_batch(questions, k=4)
    assert table.column_names == [
        "query_index",
        "question",
        "answer",
        "found",
        "chunk_ids",
        "scores",
        "citations",
        "confidence",
        "faithfulness",
        "flagged",
        "unsupported",
        "warnings",
        "conflicts",
        "high_risk",
        "pii",
        "audit_digest",
        "snapshot",
        "error",
    ]
    rows = table.to_pylist()
    assert [r["query_index"] for r in rows] == list(range(len(questions)))
    for q, row in zip(questions, rows, strict=False):
        if not q:
            assert row["error"] and not row["found"] and row["answer"] is None
            continue
        single = demo_kb.answer(q, k=4)
        assert row["answer"] == single.text and row["found"] == single.found
        assert row["chunk_ids"] == [h.chunk_id for h in single.hits]
        assert row["scores"] == pytest.approx([h.score for h in single.hits], rel=1e-5)
        assert row["citations"] == [h.chunk_id for h in single.citations.values()]
        assert row["confidence"] == pytest.approx(single.confidence, rel=1e-5)
        assert row["faithfulness"] == pytest.approx(single.faithfulness, rel=1e-5)
        assert row["error"] is None


def test_answer_batch_keeps_going_after_one_failure(demo_kb):
    calls = []

    def flaky(question, hits):
        calls.append(question)
        if "boom" in question:
            raise TimeoutError("model timed out")
        return Generation("ok [1]", True, (1,))

    table = demo_kb.answer_batch(["first", "boom", "third"], generator=flaky)
    rows = table.to_pylist()
    assert rows[1]["error"] == "TimeoutError: model timed out" and not rows[1]["found"]
    assert rows[0]["answer"] == rows[2]["answer"] == "ok [1]" and rows[2]["error"] is None
    assert calls == ["first", "boom", "third"]


def test_any_callable_can_generate(demo_kb):
    ans = demo_kb.answer("年假怎么申请？", generator=lambda q, hits: "See [2] and [1] and [9].")
    assert ans.found and list(ans.citations) == [2, 1]
    with pytest.raises(GenerationError, match="returned int"):
        demo_kb.answer("x", generator=lambda q, hits: 42)
    with pytest.raises(ConfigError):
        demo_kb.answer("x", generator="not callable")


def test_prompt_builder():
    hits = [_hit("first text", i=0), _hit("second text", i=1)]
    messages = build_messages("Q?", hits)
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert (
        messages[1]["content"] == "【知识库】\n[1] first text\n---\n[2] second text\n\n【问题】\nQ?"
    )
    assert parse_citations("a [2] b [1] c [2] [7]", 2) == (2, 1)


def test_exports():
    assert fastrag.ExtractiveGenerator is ExtractiveGenerator


def test_generate_all_threads_for_plain_callables_keep_order():
    from fastrag.models.concurrency import RateLimiter, generate_all

    seen = []

    def gen(question, hits):
        seen.append(question)
        if question == "q3":
            raise ValueError("bad question")
        return Generation(question.upper(), True)

    items = [(f"q{i}", []) for i in range(10)]
    out = generate_all(gen, items, max_concurrency=4)
    assert [o.text if isinstance(o, Generation) else type(o).__name__ for o in out] == [
        "Q0",
        "Q1",
        "Q2",
        "ValueError",
        "Q4",
        "Q5",
        "Q6",
        "Q7",
        "Q8",
        "Q9",
    ]
    assert sorted(seen) == sorted(q for q, _ in items)
    with pytest.raises(ConfigError):
        generate_all(gen, items, max_concurrency=0)
    with pytest.raises(ConfigError):
        RateLimiter(requests_per_minute=-1)
    limiter = RateLimiter(requests_per_minute=60, tokens_per_minute=600)
    assert limiter.reserve(5) == 0.0
    assert limiter.reserve(5) == pytest.approx(1.0, abs=0.05)  # 60 rpm: one a second


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            list("年假申请的了吗需要时候没有是个 ab报销天多少怎么,.?。Reports submitted 15 days")
        ),
        max_size=60,
    )
)
def test_question_terms_equal_the_reference(text):
    from naive.terms import question_terms as reference

    assert question_terms(text) == reference(text)


def _full_scan(gen: ExtractiveGenerator, question: str, hits: list[Hit]) -> tuple[str, tuple]:
    """The extractive answer scoring every candidate of every hit (no hit skipped)."""
    terms = question_terms(question)
    scored = [
        (-cov, h, pos, s)
        for h, hit in enumerate(hits)
        for pos, (cov, s) in enumerate(gen._candidates(terms, hit))
        if cov >= gen.min_coverage
    ]
    if not scored:
        return "", ()
    scored.sort()
    chosen: list[tuple[int, str]] = []
    for neg, h, _, s in scored:
        if -neg < -scored[0][0] - gen.slack or len(chosen) == gen.max_sentences:
            break
        if s not in [c for _, c in chosen]:
            chosen.append((h, s))
    sep = "" if fastrag.text.cjk.is_chinese(question) else " "
    text = sep.join(f"{s}{sep}[{h + 1}]" for h, s in chosen)
    return text, tuple(dict.fromkeys(h + 1 for h, _ in chosen))


@pytest.mark.parametrize("min_coverage", [0.3, 0.5, 0.8])
def test_skipping_hits_that_fall_short_changes_no_answer(demo_kb, min_coverage):
    # generate() skips a hit when all its sentences together cover too little of the
    # question; the answers are those of scoring every sentence
    gen = ExtractiveGenerator(min_coverage=min_coverage)
    questions = [
        "年假怎么申请？", "How many days do I have to submit an expense report?",
        "设备丢失后多久内要报告？", "What is the password policy?", "远程办公每周最多几天？",
        "How many days of annual leave do employees receive?", "报销需要在几天内提交？",
    ]  # fmt: skip
    chunks = demo_kb.retrieve_batch(["x"], k=len(demo_kb), mode="vector", output="hits")[0]
    for q in questions:
        for hits in (demo_kb.retrieve(q, k=8), chunks):
            got = gen.generate(q, hits)
            want = _full_scan(gen, q, hits)
            assert (got.text, got.citations) == want if got.found else not want[0]
            assert got.prompt is None and gen(q, hits).prompt is not None
            assert gen(q, hits).text == got.text  # the call builds the prompt, nothing else


def test_answer_and_generation_defaults_are_their_own(demo_kb):
    a, b = Generation("x", True), Generation("y", False)
    assert a.usage == {} and a.usage is not b.usage and a.citations == ()
    ans = demo_kb.answer("年假怎么申请？")
    copy = dataclasses.replace(ans, text="changed")
    assert copy.text == "changed" and copy.hits == ans.hits and copy.pii == ans.pii
    bare = Answer("q", "t", False, (), {}, "p", {})
    assert bare.pii == {} and bare.pii is not Answer("q", "t", False, (), {}, "p", {}).pii
    assert (bare.faithfulness, bare.audit_digest, bare.level) == (1.0, "", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        bare.text = "x"  # type: ignore[misc]


@pytest.mark.parametrize("cls_path", [
    "fastrag.types.Hit", "fastrag.types.Generation", "fastrag.types.Answer",
    "fastrag.answer.context.ContextBlock",
])  # fmt: skip
def test_hand_written_inits_match_their_dataclass_fields(cls_path):
    """The slot-setting ``__init__`` of these types takes the fields in order, with their defaults.

    They are written out by hand for speed; a field added, reordered or given another
    default in the class body but not in ``__init__`` fails here.
    """
    import dataclasses
    import importlib
    import inspect

    module, _, name = cls_path.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    required = {}
    for p, f in zip(params, fields, strict=True):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            assert p.default is inspect.Parameter.empty, f.name
            required[f.name] = object()
        else:
            assert p.default is not inspect.Parameter.empty, f.name
    made = cls(**required)  # only the required fields: every other one takes its default
    for f in fields:
        if f.name in required:
            assert getattr(made, f.name) is required[f.name]
        elif f.default is not dataclasses.MISSING:
            assert getattr(made, f.name) == f.default, f.name
        else:
            assert getattr(made, f.name) == f.default_factory(), f.name
