"""README's examples run as written, and never reach into private modules."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_the_quick_start_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    block = next(b for b in _blocks("python") if "KnowledgeBase.build(docs)" in b)
    exec(compile(block, "README.md (quick start)", "exec"), {})
    out = capsys.readouterr().out
    assert "True 年假申请需提前3天提交。[1]" in out


class _Recorder:
    """Stands for ``kb`` in an example: forwards every call and keeps what it returned."""

    def __init__(self, kb):
        self.kb = kb
        self.calls: list[tuple[str, object]] = []

    def __getattr__(self, name):
        method = getattr(self.kb, name)

        def call(*args, **kwargs):
            out = method(*args, **kwargs)
            self.calls.append((name, out))
            return out

        return call


def test_the_options_example_runs():
    import fastrag

    block = next(b for b in _blocks("python") if "fastrag.RetrievalOptions(" in b)
    kb = fastrag.KnowledgeBase.build(
        [
            {"id": "a", "text": "Leave is requested in HR.", "team": "hr"},
            {"id": "b", "text": "Leave is requested in the sales office.", "team": "sales"},
        ]
    )
    rec = _Recorder(kb)
    scope = {"fastrag": fastrag, "kb": rec, "q": "leave"}
    exec(compile(block, "README.md (options)", "exec"), scope)
    # The options objects hold what the example set ...
    assert scope["fast"].mode == "keyword" and scope["fast"].where == {"team": "hr"}
    assert scope["strict"].budget == 1500 and scope["strict"].min_faithfulness == 0.8
    assert [name for name, _ in rec.calls] == ["retrieve", "answer"]
    (_, hits), (_, answer) = rec.calls
    # ... the filter holds (both documents match "leave": only the hr one is returned) ...
    assert {h.doc_id for h in kb.retrieve("leave", k=5, mode="keyword")} == {"a", "b"}
    assert [h.doc_id for h in hits] == ["a"]
    assert [h.doc_id for h in answer.hits] == ["a"] and answer.found
    # ... and, as the comment says, the objects are the same as the keywords spelled out.
    spelled = kb.answer(
        "leave", k=5, mode="keyword", where={"team": "hr"},
        budget=1500, min_faithfulness=0.8, replace_unfaithful=True,
    )  # fmt: skip
    assert (answer.text, answer.found, answer.prompt, answer.hits) == (
        spelled.text, spelled.found, spelled.prompt, spelled.hits,
    )  # fmt: skip


def test_examples_use_public_names_only():
    for block in _blocks("python"):
        assert not re.search(r"fastrag\.(?!_native\b)_\w", block), block
        assert not re.search(r"\bkb\._\w", block), block
