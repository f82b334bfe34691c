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


def test_the_options_example_runs():
    import fastrag

    block = next(b for b in _blocks("python") if "fastrag.RetrievalOptions(" in b)
    kb = fastrag.KnowledgeBase.build(
        [{"id": "a", "text": "Leave is requested in HR.", "team": "hr"}]
    )
    exec(
        compile(block, "README.md (options)", "exec"), {"fastrag": fastrag, "kb": kb, "q": "leave"}
    )


def test_examples_use_public_names_only():
    for block in _blocks("python"):
        assert not re.search(r"fastrag\.(?!_native\b)_\w", block), block
        assert not re.search(r"\bkb\._\w", block), block
