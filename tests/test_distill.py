"""Context distillation (AnswerOptions(distill=...)) and whole-sentence extractive answers."""

from __future__ import annotations

import json

import pytest
from openai_server import CHAT, OpenAIServer

from fastrag import AnswerOptions, ExtractiveGenerator, Hit, KnowledgeBase, OpenAIChatGenerator
from fastrag.answer.distill import ExtractiveDistiller, ModelDistiller
from fastrag.cli import main
from fastrag.config import ClientConfig
from fastrag.errors import ConfigError
from fastrag.text.sentences import text_units

ROWS = (
    "Fault code: SV0432 | Symptom: Spindle overheats and stops | "
    "Fix: Check the coolant tank level is at least 80 percent\n"
    "Fault code: SV0417 | Symptom: Servo parameter invalid | Fix: Re-enter the servo parameters"
)
MANUAL = (
    "Safety comes first on this machine. Always stop the spindle before any check. "
    "Wear gloves when handling coolant. The coolant pump delivers 12 litres per minute. "
    "Ask the maintenance desk at desk@example.com or call 555-0142 for spare parts."
)


def _hit(i: int, text: str, **kw) -> Hit:
    return Hit(chunk_id=i, doc_id=f"d{i}", ord=0, start=0, end=len(text), text=text, score=1.0,
               relevance=0.9, **kw)  # fmt: skip


@pytest.fixture(scope="module")
def kb():
    return KnowledgeBase.build(
        [{"id": "manual", "text": MANUAL}, {"id": "table", "text": ROWS}], chunking="structure"
    )


def test_text_units_split_rows_into_cells_and_text_into_sentences():
    packed = ROWS.replace("\n", " ")  # white space normalised: two rows on one line
    cells = [(packed[s:e], row) for s, e, row in text_units(packed)]
    assert cells[:3] == [
        ("Fault code: SV0432", 0),
        ("Symptom: Spindle overheats and stops", 0),
        ("Fix: Check the coolant tank level is at least 80 percent", 0),
    ]
    assert cells[3] == ("Fault code: SV0417", 1) and len(cells) == 6
    assert [packed for packed, _ in [(MANUAL[s:e], r) for s, e, r in text_units(MANUAL)]][:2] == [
        "Safety comes first on this machine.",
        "Always stop the spindle before any check.",
    ]


def test_extractive_distiller_keeps_terms_numbers_and_ids_within_budget():
    blocks = [
        _hit(7, "Unrelated text about parking. The canteen opens at noon."),
        _hit(8, MANUAL),
        _hit(9, ROWS),
    ]
    facts = ExtractiveDistiller().facts(
        "How many litres per minute does the coolant pump deliver?", blocks
    )
    assert ("The coolant pump delivers 12 litres per minute.", 2, 8) in [
        (f.text, f.marker, f.chunk_id) for f in facts
    ]
    assert all(f.marker != 1 for f in facts)  # nothing of the unrelated block
    # The row the question names (its code), with the cells that carry its terms.
    (row,) = ExtractiveDistiller().facts("What is the fix for fault code SV0432?", blocks)
    assert (
        row.text == "Fault code: SV0432 | Fix: Check the coolant tank level is at least 80 percent"
    )
    assert row.marker == 3 and row.chunk_id == 9
    # The fact budget.
    many = [_hit(i, f"Coolant pump note {i}: the coolant pump is checked.") for i in range(12)]
    assert len(ExtractiveDistiller(max_facts=3).facts("coolant pump", many)) == 3
    with pytest.raises(ConfigError):
        ExtractiveDistiller(max_facts=0)
    with pytest.raises(ConfigError):
        AnswerOptions(distill="abstractive")


def test_answer_with_extractive_distill(kb):
    plain = kb.answer("What is the fix for fault code SV0432?")
    ans = kb.answer("What is the fix for fault code SV0432?", distill="extractive")
    assert plain.distilled is None
    assert ans.text == "Check the coolant tank level is at least 80 percent [1]"
    d = ans.distilled
    assert d is not None and d.distiller == "extractive"
    assert d.facts[0].marker == 1 and d.facts[0].chunk_id == ans.hits[0].chunk_id
    assert 0 < d.tokens_after < d.tokens_before
    assert "[1] Fault code: SV0432 | Fix: Check the coolant" in ans.prompt
    assert "Symptom" not in ans.prompt and "SV0417" not in ans.prompt
    assert ans.found and ans.faithfulness == 1.0 and ans.citations[1] == ans.hits[0]
    assert ans.to_dict()["distilled"]["facts"][0]["marker"] == 1


def test_extractive_answers_never_start_or_end_inside_a_word():
    gen = ExtractiveGenerator()
    cut = Hit(chunk_id=1, doc_id="m", ord=3, start=480, end=560, score=1.0, relevance=0.9,
              text="y check. Wear gloves when handling coolant. This chapter descr")  # fmt: skip
    out = gen("When should gloves be worn handling coolant?", [cut])
    assert out.text == "Wear gloves when handling coolant. [1]"
    # A table row answers with the cell that answers, not the whole run of rows.
    out = gen("What is the fix for fault code SV0417?", [_hit(1, ROWS.replace("\n", " "))])
    assert out.text == "Re-enter the servo parameters [1]"


def _config(server: OpenAIServer) -> ClientConfig:
    return ClientConfig(
        base_url=server.base_url, model="m", read_timeout=5.0, max_retries=0,
        backoff_base=0.001, backoff_cap=0.01,
    )  # fmt: skip


def test_model_distiller_reads_redacted_text_and_its_facts_reach_the_prompt(kb):
    with OpenAIServer() as server:
        server.chat_answer = json.dumps(
            {"facts": [{"text": "Spare parts: write to the maintenance desk.", "id": 1}]}
        )
        with OpenAIChatGenerator(config=_config(server)) as model:
            ans = kb.answer("Who sells spare parts?", distill=ModelDistiller(model, max_facts=2))
        (request,) = server.requests_to(CHAT)
    sent = json.dumps(request.body, ensure_ascii=False)
    assert "desk@example.com" not in sent
    assert "[EMAIL]" in sent and "at most 2 facts" in sent
    assert ans.distilled is not None and ans.distilled.distiller == "model"
    assert [f.text for f in ans.distilled.facts] == ["Spare parts: write to the maintenance desk."]
    assert "[1] Spare parts: write to the maintenance desk." in ans.prompt
    assert not any(w.startswith("distillation") for w in ans.warnings)


@pytest.mark.parametrize(
    "reply",
    ["no json here", '{"facts": []}', '{"facts": [{"text": "x", "id": 9}]}', '{"facts": "x"}'],
)
def test_invalid_model_reply_falls_back_to_extractive_with_a_warning(kb, reply):
    with OpenAIServer() as server:
        server.chat_answer = reply
        with OpenAIChatGenerator(config=_config(server)) as model:
            ans = kb.answer("How many litres per minute does the coolant pump deliver?",
                            distill=model)  # fmt: skip
        assert len(server.requests_to(CHAT)) == 1
    assert ans.distilled is not None and ans.distilled.distiller == "extractive"
    assert any(w.startswith("distillation by the model failed") for w in ans.warnings)
    assert "12 litres per minute" in ans.text


def test_cli_ask_distill(tmp_path, capsys):
    src = tmp_path / "docs"
    src.mkdir()
    (src / "manual.txt").write_text(MANUAL, encoding="utf-8")
    kb_dir = tmp_path / "kb"
    assert main(["index", str(src), "--kb", str(kb_dir)]) == 0
    capsys.readouterr()
    question = "How many litres per minute does the coolant pump deliver?"
    assert main(["ask", question, "--kb", str(kb_dir), "--distill", "extractive"]) == 0
    out = capsys.readouterr().out
    assert "12 litres per minute" in out and "distilled (extractive):" in out
    assert main(["ask", question, "--kb", str(kb_dir), "--distill", "extractive", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["distilled"]["facts"] and data["distilled"]["tokens_after"] > 0
    assert main(["ask", question, "--kb", str(kb_dir), "--distill", "llm"]) == 2
