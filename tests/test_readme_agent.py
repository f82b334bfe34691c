"""README's agent-memory session (snapshots per request, ontology, SQL tool) runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_the_agent_session_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    block = next(b for b in blocks if "fastrag.SqlTool(" in b)
    exec(compile(block, "README.md (agent memory)", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    expected = [
        line[2:] for line in block.splitlines() if line.startswith("# [") or line.startswith("# T")
    ]
    assert out == expected
