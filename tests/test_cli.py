from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fastrag.cli import main


def test_demo_runs_offline(capsys):
    assert main(["demo", "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "demo: 15 documents" in out
    assert "Q: How many days in advance must annual leave be requested?" in out
    # The English leave policy answers the first demo question.
    first = out.split("Q: How many days")[1]
    assert "leave-en#0" in first.splitlines()[1]


def test_build_query_info(tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    src.write_text(
        "\n".join(
            json.dumps(d, ensure_ascii=False)
            for d in [
                {"id": "a", "text": "Expense reports are due in 15 days.", "title": "Expenses"},
                {"_id": "b", "text": "年假申请需提前3天提交。"},
            ]
        )
    )
    kb = tmp_path / "kb"
    assert main(["build", str(src), "-o", str(kb), "--window", "50", "--overlap", "5"]) == 0
    assert "saved 2 documents" in capsys.readouterr().out
    assert main(["query", str(kb), "expense reports due", "--json", "-k", "1"]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert line["hits"][0]["doc_id"] == "a" and line["hits"][0]["metadata"]["title"] == "Expenses"
    assert main(["info", str(kb)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["documents"] == 2 and info["snapshots"][0]["current"]


def test_build_from_text_folder(tmp_path, capsys):
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.md").write_text("# Travel\nEconomy class for short flights.")
    (folder / "sub" / "b.txt").write_text("Printers are configured automatically.")
    (folder / "image.png").write_bytes(b"\x89PNG")
    assert main(["build", str(folder), "-o", str(tmp_path / "kb")]) == 0
    capsys.readouterr()
    assert main(["query", str(tmp_path / "kb"), "printers", "--json", "-k", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["doc_id"] == "sub/b.txt"


def test_errors_exit_1_with_message(tmp_path, capsys):
    assert main(["query", str(tmp_path / "missing"), "q"]) == 1
    assert "fastrag: error:" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "ok"}\n{"id": "a", "text": "again"}\n')
    assert main(["build", str(bad), "-o", str(tmp_path / "kb")]) == 1
    assert "appears twice" in capsys.readouterr().err


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as exc:
        main(["build"])
    assert exc.value.code == 2


def test_console_script_entry_point(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "fastrag", "--version"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not the checkout, whose fastrag/ folder would shadow the install
    )
    assert out.stdout.startswith("fastrag ")
