"""answer(), answer_batch() and answer_stream() run the same per-question code: every field agrees."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

import pytest
from fastrag.datasets import demo_documents
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastrag import AnswerOptions, KnowledgeBase, Principal, RetrievalOptions
from fastrag.errors import ConfigError

QUESTIONS = [
    "年假怎么申请？",
    "How many days of annual leave do employees receive?",
    "报销需要在几天内提交？",
    "公司食堂几点开门？",
    "What is the password policy?",
    "远程办公每周最多几天？",
    "Who won the 1998 World Cup?",
    "设备丢失后多久内要报告？",
]


@pytest.fixture(scope="module")
def kb():
    docs = demo_documents()
    for i, d in enumerate(docs):
        if i % 3 == 0:
            d["acl"] = ["hr"]
    return KnowledgeBase.build(docs)


def _same(a, b, path="answer"):
    """``a == b``, floats within rtol 1e-5 (recursively), naming the first difference.

    The exact scan scores a batch of questions in tiles of four queries and one
    question alone, so a cosine can differ in its last bits between
    ``answer_batch`` and ``answer``; everything else must be equal.
    """
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-7), (path, a, b)
    elif isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), (path, a.keys(), b.keys())
        for key in a:
            _same(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def _comparable(answer):
    fields = dataclasses.asdict(answer)
    fields.pop("timings")
    return fields


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    questions=st.lists(st.sampled_from(QUESTIONS), min_size=1, max_size=6),
    k=st.integers(1, 8),
    mode=st.sampled_from(["hybrid", "vector", "keyword"]),
    group_by=st.sampled_from([None, "doc"]),
    principal=st.sampled_from([None, Principal(user="u", groups=["hr"]), Principal(user="x")]),
    budget=st.sampled_from([3000, 120, None]),
    redact=st.booleans(),
    min_faithfulness=st.sampled_from([0.5, 0.9]),
    replace_unfaithful=st.booleans(),
)
def test_every_field_of_answer_equals_the_batch(
    kb,
    questions,
    k,
    mode,
    group_by,
    principal,
    budget,
    redact,
    min_faithfulness,
    replace_unfaithful,
):
    now = dt.datetime(2027, 6, 1, tzinfo=dt.timezone.utc)
    retrieval = RetrievalOptions(mode=mode, group_by=group_by, principal=principal)
    options = AnswerOptions(
        budget=budget, redact=redact, min_faithfulness=min_faithfulness,
        replace_unfaithful=replace_unfaithful, now=now,
    )  # fmt: skip
    batch = kb.answer_batch(questions, k, retrieval=retrieval, answer=options, output="answers")
    table = kb.answer_batch(questions, k, retrieval=retrieval, answer=options)
    for q, got, row in zip(questions, batch, table.to_pylist(), strict=False):
        single = kb.answer(q, k, retrieval=retrieval, answer=options)
        _same(_comparable(got), _comparable(single))
        streamed = [e for e in kb.answer_stream(q, k, retrieval=retrieval, answer=options)]
        assert streamed[0].kind == "hits" and streamed[-1].kind == "answer"
        _same(_comparable(streamed[-1].answer), _comparable(single))
        assert "".join(e.text for e in streamed if e.kind == "delta") == single.text
        assert row["answer"] == single.text and row["audit_digest"] == single.audit_digest
        assert row["snapshot"] == single.snapshot and row["flagged"] == single.flagged
        assert row["warnings"] == list(single.warnings)
        assert row["unsupported"] == list(single.unsupported)
        assert dict(row["pii"]) == single.pii
        assert row["conflicts"] == [c.description for c in single.conflicts]
        assert row["citations"] == [h.chunk_id for h in single.citations.values()]


def test_keyword_shorthand_equals_the_options_objects(kb):
    q = "年假怎么申请？"
    a = kb.answer(q, 3, mode="keyword", budget=200, max_age_days=None)
    b = kb.answer(
        q, 3, retrieval=RetrievalOptions(mode="keyword"),
        answer=AnswerOptions(budget=200, max_age_days=None),
    )  # fmt: skip
    assert _comparable(a) == _comparable(b)
    assert kb.retrieve(q, 3, retrieval=RetrievalOptions(mode="vector")) == kb.retrieve(
        q, 3, mode="vector"
    )


def test_unknown_and_misplaced_options_are_errors_naming_them(kb):
    with pytest.raises(ConfigError, match="'colour'"):
        kb.answer("年假怎么申请？", colour="red")
    with pytest.raises(ConfigError, match="'budget'"):
        kb.retrieve("年假怎么申请？", budget=10)  # an answer option
    with pytest.raises(ConfigError, match="RetrievalOptions"):
        kb.retrieve("年假怎么申请？", retrieval=AnswerOptions())
    with pytest.raises(ConfigError, match="group_by"):
        RetrievalOptions(group_by="section")


def test_every_option_works_where_it_means_something(kb):
    hits = kb.retrieve_batch(["年假怎么申请？"], 3, reranker=lambda q, hs: list(reversed(hs)))
    plain = kb.retrieve_batch(["年假怎么申请？"], 3)
    assert hits["chunk_id"].to_pylist() == list(reversed(plain["chunk_id"].to_pylist()))
    grouped = kb.answer("年假怎么申请？", 4, group_by="doc")
    assert len({h.doc_id for h in grouped.hits}) == len(grouped.hits)
    with pytest.raises(ConfigError, match="ExtractiveGenerator"):
        kb.answer_batch(["年假怎么申请？"], schema={"type": "object"})


def test_batch_results_pair_each_answer_with_its_error(kb):
    qs = ["How many days of annual leave?", "", "x" * 20_000]
    results = kb.answer_batch(qs, 3, output="results")
    table = kb.answer_batch(qs, 3)
    answers = kb.answer_batch(qs, 3, output="answers")
    assert [a is None for a, _ in results] == [False, True, True] == [a is None for a in answers]
    assert results[0][1] is None and "empty" in results[1][1] and "20,000" in results[2][1]
    assert [why for _, why in results] == table.column("error").to_pylist()
    with pytest.raises(ConfigError, match="'results'"):
        kb.answer_batch(qs, 3, output="rows")


def test_a_batch_in_blocks_equals_one_answer_at_a_time(kb, monkeypatch):
    """A local generator's batch of several blocks (retrieved one block ahead) = answer()."""
    import fastrag.answer.pipeline

    monkeypatch.setattr(fastrag.answer.pipeline, "LOCAL_BLOCK", 3)  # 19 questions: 7 blocks
    questions = [f"{QUESTIONS[i % len(QUESTIONS)]} {i}" for i in range(18)] + [QUESTIONS[0]]
    assert fastrag.answer.pipeline.block_bounds(19, None, None) == [0, 3, 6, 9, 12, 15, 18, 19]
    for mode in ("hybrid", "vector", "keyword"):
        batch = kb.answer_batch(questions, 4, mode=mode, output="answers")
        for q, got in zip(questions, batch, strict=True):
            _same(_comparable(got), _comparable(kb.answer(q, 4, mode=mode)))


def test_a_failing_block_reports_its_error(kb, monkeypatch):
    """Retrieval that raises in a block ahead is raised by answer_batch, as in one block."""
    import fastrag.answer.pipeline

    monkeypatch.setattr(fastrag.answer.pipeline, "LOCAL_BLOCK", 2)
    calls = []

    def retrieve(block):
        calls.append(list(block))
        if len(calls) == 3:
            raise RuntimeError("retrieval failed")
        return [(q, [], None, {}) for q in block]

    with pytest.raises(RuntimeError, match="retrieval failed"):
        kb._pipeline.answer_questions([f"q{i}" for i in range(7)], retrieve, str)
    assert calls[:3] == [["q0", "q1"], ["q2", "q3"], ["q4", "q5"]]
