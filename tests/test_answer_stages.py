"""The trust stages inside ``KnowledgeBase.answer`` / ``answer_batch`` (each stage alone: test_context,
test_pii, test_trust, test_audit, test_conflicts, test_fallback, test_structured)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

import pytest
from fastrag.datasets import demo_documents
from openai_server import CHAT, OpenAIServer

import fastrag
from fastrag import KnowledgeBase, OpenAIChatGenerator
from fastrag.answer.audit import verify_answer
from fastrag.config import ClientConfig
from fastrag.errors import ConfigError
from fastrag.types import Generation

UTC = dt.timezone.utc
PII_DOC = {
    "id": "contacts",
    "title": "Expense contacts",
    "updated_at": "2026-10-01",
    "text": (
        "Expense reports go to the finance desk: write to finance.desk@example.com or call "
        "13812345678. The finance server is at 10.20.30.40. Reports must be filed within 15 days."
    ),
}


@pytest.fixture(scope="module")
def demo_kb() -> KnowledgeBase:
    return KnowledgeBase.build(demo_documents())


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


def _gen(server: OpenAIServer) -> OpenAIChatGenerator:
    config = ClientConfig(
        base_url=server.base_url, model="m", api_key=None, max_retries=0, read_timeout=5.0,
        connect_timeout=2.0, trust_env=False,
    )  # fmt: skip
    return OpenAIChatGenerator(config=config)


# -- PII never reaches the model ---------------------------------------------------------------


def test_prompt_sent_to_a_real_server_contains_no_pii(server):
    kb = KnowledgeBase.build([*demo_documents(), PII_DOC])
    question = "Who handles expense reports? I am 13900001111, alice@corp.example"
    with _gen(server) as gen:
        ans = kb.answer(question, k=3, generator=gen)
        table = kb.answer_batch([question], k=3, generator=gen)
    assert table["error"].to_pylist() == [None]
    requests = server.requests_to(CHAT)
    assert len(requests) == 2
    for request in requests:
        sent = str(request.body["messages"])
        for value in ("finance.desk@example.com", "13812345678", "10.20.30.40", "13900001111",
                      "alice@corp.example"):  # fmt: skip
            assert value not in sent
        assert "[EMAIL]" in sent and "[PHONE]" in sent and "[IPV4]" in sent
    assert ans.pii == {"EMAIL": 2, "PHONE": 2, "IPV4": 1}
    assert "finance.desk@example.com" not in ans.prompt
    # the stored knowledge base is untouched, and the citations point at the stored text
    assert any("finance.desk@example.com" in h.text for h in ans.hits)
    stored = kb.retrieve("Who handles expense reports at the finance desk?", k=3)
    assert any("finance.desk@example.com" in h.text for h in stored)


def test_redaction_can_be_turned_off_and_extended(server):
    kb = KnowledgeBase.build(
        [*demo_documents(), dict(PII_DOC, text=PII_DOC["text"] + " Ask E123456.")]
    )
    kb.redactor = fastrag.Redactor(extra_pii_patterns={"EMPLOYEE_ID": r"\bE\d{6}\b"})
    with _gen(server) as gen:
        ans = kb.answer("Who handles expense reports at the finance desk?", k=2, generator=gen)
        raw = kb.answer(
            "Who handles expense reports at the finance desk?", k=2, generator=gen, redact=False
        )
    assert ans.pii.get("EMPLOYEE_ID") == 1 and "E123456" not in ans.prompt
    assert raw.pii == {} and "finance.desk@example.com" in raw.prompt


# -- confidence, faithfulness ------------------------------------------------------------------


def test_confidence_is_the_documented_formula(demo_kb):
    ans = demo_kb.answer("How many days of annual leave do employees receive?", k=5)
    assert ans.found and ans.citations
    cited = list(ans.citations.values())
    mean = sum(h.relevance for h in cited) / len(cited)
    assert ans.confidence == pytest.approx(0.6 * mean + 0.4 * len(cited) / len(ans.hits))
    missing = demo_kb.answer("What is the airspeed velocity of an unladen swallow?", k=5)
    assert not missing.found and missing.confidence == 0.0


def test_a_fabricated_sentence_is_flagged_and_can_be_replaced(demo_kb):
    def fabricating(question, hits):
        true = hits[0].text.split(". ")[0]
        lie = "The cafeteria serves free lobster to every intern on Fridays"
        return Generation(text=f"{true}. [1] {lie}. [1]", found=True, citations=(1,))

    ans = demo_kb.answer("How many days of annual leave?", k=3, generator=fabricating)
    assert ans.found and ans.faithfulness == 0.5 and not ans.flagged  # 1 of 2 sentences
    assert any("lobster" in s for s in ans.unsupported)
    assert not any("lobster" not in s for s in ans.unsupported)
    strict = demo_kb.answer(
        "How many days of annual leave?", k=3, generator=fabricating, min_faithfulness=0.9,
        replace_unfaithful=True,
    )  # fmt: skip
    assert not strict.found and strict.confidence == 0.0 and "lobster" not in strict.text
    flagged = demo_kb.answer("How many days of annual leave?", k=3, generator=fabricating,
                             min_faithfulness=0.9)  # fmt: skip
    assert flagged.flagged and flagged.found and "lobster" in flagged.text


# -- audit digest ------------------------------------------------------------------------------


def test_audit_digest_is_reproducible_and_verifiable(demo_kb, tmp_path):
    q = "年假怎么申请？"
    a, b = demo_kb.answer(q), demo_kb.answer(q)
    assert len(a.audit_digest) == 64 and a.audit_digest == b.audit_digest
    assert verify_answer(a)
    assert not verify_answer(dataclasses.replace(a, text=a.text + " "))
    assert not verify_answer(dataclasses.replace(a, question="年假如何申请？"))
    assert not verify_answer(dataclasses.replace(a, prompt=a.prompt + "x"))
    first = next(iter(a.citations))
    tampered = dataclasses.replace(a.citations[first], text=a.citations[first].text + "!")
    assert not verify_answer(dataclasses.replace(a, citations={**a.citations, first: tampered}))
    assert a.snapshot is None
    demo_kb.save(tmp_path / "kb")
    saved = KnowledgeBase.load(tmp_path / "kb").answer(q)
    assert saved.snapshot and verify_answer(saved) and saved.audit_digest != a.audit_digest
    # same inputs from another process give the same digest (no per-run salt)
    again = KnowledgeBase.load(tmp_path / "kb").answer(q)
    assert again.audit_digest == saved.audit_digest


# -- freshness, conflicts ----------------------------------------------------------------------


def test_freshness_warning_with_a_fixed_clock(demo_kb):
    q = "How many days of annual leave do employees receive?"
    late = demo_kb.answer(q, k=3, now=dt.datetime(2027, 9, 1, tzinfo=UTC))
    assert late.warnings and all("2026-" in w for w in late.warnings)
    assert re.search(r"may be outdated", " ".join(late.warnings))
    fresh = demo_kb.answer(q, k=3, now=dt.datetime(2026, 11, 1, tzinfo=UTC))
    assert fresh.warnings == ()
    never = demo_kb.answer(q, k=3, now=dt.datetime(2030, 1, 1, tzinfo=UTC), max_age_days=None)
    assert never.warnings == ()
    assert "outdated" in late.prompt  # the model is told, too


def test_conflicting_reimbursement_documents_mark_the_answer_high_risk(server):
    docs = demo_documents()
    expense = next(d for d in docs if d["id"] == "expense-zh")
    old = dict(expense, id="expense-zh-2023", text=str(expense["text"]).replace("15天", "10天"))
    kb = KnowledgeBase.build([*docs, old])
    q = "费用报销须在费用发生后多少天内提交？"
    ans = kb.answer(q, k=5)
    assert ans.high_risk and ans.conflicts
    assert {h.doc_id for h in ans.conflicts[0].hits} == {"expense-zh", "expense-zh-2023"}
    assert any("15" in w and "10" in w for w in ans.warnings)
    with _gen(server) as gen:
        modeled = kb.answer(q, k=5, generator=gen)
    (request,) = server.requests_to(CHAT)
    assert modeled.high_risk
    assert any(w in request.body["messages"][-1]["content"] for w in modeled.warnings)
    assert not KnowledgeBase.build(docs).answer(q, k=5).high_risk


# -- context budget, stage hook, metrics -------------------------------------------------------


def test_token_budget_drops_whole_hits(demo_kb):
    q = "How many days of annual leave do employees receive?"
    full = demo_kb.answer(q, k=5, budget=None)
    tight = demo_kb.answer(q, k=5, budget=120)  # the top hit fits, the next does not
    assert full.dropped == () and tight.dropped
    assert 1 <= len(tight.hits) < len(full.hits)
    for hit in tight.hits:
        assert hit.text in tight.prompt
    for hit in tight.dropped:
        assert hit.text not in tight.prompt


def test_every_stage_is_timed_and_reported(demo_kb):
    seen: list[tuple[str, float, dict]] = []
    ans = demo_kb.answer(
        "年假怎么申请？", on_stage=lambda n, s, info: seen.append((n, s, dict(info)))
    )
    names = [n for n, _, _ in seen]
    for stage in ("context", "freshness", "conflicts", "redact", "verify", "audit"):
        assert stage in names and stage in ans.timings
    assert all(s >= 0 for _, s, _ in seen)
    assert {"rewrite", "retrieve", "generate", "total"} <= set(ans.timings)


def test_operational_hit_rate(demo_kb):
    kb = KnowledgeBase.build(demo_documents())
    assert kb.metrics()["answers"] == 0 and kb.metrics()["hit_rate"] == 0.0
    kb.answer("How many days of annual leave do employees receive?")
    kb.answer("What is the airspeed velocity of an unladen swallow?")
    table = kb.answer_batch(["年假怎么申请？", "Who won the 1998 World Cup?"])
    m = kb.metrics()
    assert m["answers"] == 4 and m["answers_citing"] == 2 and m["hit_rate"] == 0.5
    assert {"confidence", "faithfulness", "high_risk"} <= set(table.column_names)
    assert table["found"].to_pylist() == [True, False]
    assert table["confidence"][1].as_py() == 0.0


def test_batch_columns_match_single_answers(demo_kb):
    qs = ["年假怎么申请？", "How many days of annual leave do employees receive?"]
    table = demo_kb.answer_batch(qs)
    for i, q in enumerate(qs):
        ans = demo_kb.answer(q)
        assert table["confidence"][i].as_py() == pytest.approx(ans.confidence)
        assert table["faithfulness"][i].as_py() == pytest.approx(ans.faithfulness)


# -- structured output and options -------------------------------------------------------------


def test_structured_answer_through_the_pipeline(server):
    server.chat_answer = '{"days": 15, "citations": [1]}'
    schema = {
        "type": "object",
        "properties": {"days": {"type": "integer"}, "citations": {"type": "array"}},
        "required": ["days", "citations"],
    }
    kb = KnowledgeBase.build(demo_documents())
    with _gen(server) as gen:
        ans = kb.answer("How many days of annual leave?", k=3, generator=gen, schema=schema)
    assert ans.data == {"days": 15, "citations": [1]}
    with pytest.raises(ConfigError, match="ExtractiveGenerator cannot answer in a JSON Schema"):
        kb.answer("How many days of annual leave?", schema=schema)


def test_unknown_or_bad_options_are_named(demo_kb):
    with pytest.raises(ConfigError, match="budjet"):
        demo_kb.answer("年假怎么申请？", budjet=10)
    with pytest.raises(ConfigError, match="budget"):
        demo_kb.answer("年假怎么申请？", budget=0)
    with pytest.raises(ConfigError, match="min_faithfulness"):
        demo_kb.answer_batch(["年假怎么申请？"], min_faithfulness=2)


def test_fallback_chain_over_real_knowledge_bases():
    empty_ish = KnowledgeBase.build(
        [{"id": "x", "text": "Nothing about leave here, only parking."}]
    )
    demo = KnowledgeBase.build(demo_documents())
    chain = fastrag.FallbackChain(
        [fastrag.Level(empty_ish, "small"), fastrag.Level(demo, "demo")], timeout=None,
        min_confidence=0.3,
    )  # fmt: skip
    result = chain("How many days of annual leave do employees receive?")
    assert result.level == "demo" and result.answer.found
    assert [a.outcome for a in result.attempts][0] != "answered"


def test_the_llm_judge_reads_redacted_text_only(server):
    kb = KnowledgeBase.build([*demo_documents(), PII_DOC])
    server.chat_answer = (
        '{"faithfulness_score": 0.5, "unsupported_claims": ["Write to [EMAIL] now."], '
        '"grounded_claims": []}'
    )

    def quoting(question, hits):
        return Generation(
            text="Write to finance.desk@example.com now. [1]", found=True, citations=(1,)
        )

    with _gen(server) as chat:
        ans = kb.answer("Who handles expense reports at the finance desk?", k=2,
                        generator=quoting, judge=fastrag.answer.verify.LLMJudge(chat))  # fmt: skip
    (request,) = server.requests_to(CHAT)
    assert "finance.desk@example.com" not in str(request.body) and "[EMAIL]" in str(request.body)
    assert ans.faithfulness == 0.5
    assert ans.unsupported == ("Write to finance.desk@example.com now.",)


def test_an_llm_conflict_check_reads_redacted_hits(server):
    a = {
        "id": "exp-a",
        "text": "Expense reports must be filed within 15 days. Contact a@corp.example.",
    }
    b = {
        "id": "exp-b",
        "text": "Expense reports must be filed within 10 days. Contact b@corp.example.",
    }
    kb = KnowledgeBase.build([a, b])
    server.chat_answer = (
        '{"conflicts": [{"sources": [1, 2], "subject": "filing deadline", "unit": "day", '
        '"values": [15, 10]}]}'
    )
    with _gen(server) as chat:
        check = fastrag.answer.conflicts.LLMConflictCheck(chat)
        ans = kb.answer("Within how many days must expense reports be filed?", k=2,
                        detect_conflicts=check)  # fmt: skip
    (request,) = server.requests_to(CHAT)
    assert "corp.example" not in str(request.body) and "[EMAIL]" in str(request.body)
    assert ans.high_risk and len(ans.conflicts) == 1
    assert {h.doc_id for h in ans.conflicts[0].hits} == {"exp-a", "exp-b"}
    assert all("corp.example" in h.text for h in ans.conflicts[0].hits)  # the stored hits
