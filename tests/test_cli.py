from __future__ import annotations

import json
import re
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fastrag.cli import main


def test_demo_answers_and_says_not_found(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "demo: 15 documents" in out
    blocks = {b.split("\n", 1)[0]: b for b in out.split("\nQ: ")}
    leave = blocks["年假怎么申请？"]
    assert "retrieved 3 chunks:" in leave
    assert "年假申请需提前3天" in leave and "leave-zh" in leave
    expense = blocks["How many days do I have to submit an expense report?"]
    assert "within 15 days" in expense and "expense-en" in expense
    canteen = blocks["公司食堂几点开门？"]
    assert "知识库中没有找到" in canteen


def _write_corpus(tmp_path):
    src = tmp_path / "docs"
    (src / "sub").mkdir(parents=True)
    (src / "policies.jsonl").write_text(
        "\n".join(
            json.dumps(d, ensure_ascii=False)
            for d in [
                {"id": "a", "text": "Expense reports are due within 15 days.", "title": "Expenses"},
                {"_id": "b", "text": "年假申请需提前3天提交。"},
            ]
        ),
        encoding="utf-8",
    )
    (src / "sub" / "printers.md").write_text("# Printers\nPrinters are configured automatically.")
    (src / "travel.csv").write_text(
        "id,text,title\nt1,Economy class for flights under six hours.,Travel\n"
    )
    return src


def test_index_ask_info(tmp_path, capsys):
    src = _write_corpus(tmp_path)
    kb = tmp_path / "kb"
    assert main(["index", str(src), "--kb", str(kb), "--window", "50", "--overlap", "5"]) == 0
    captured = capsys.readouterr()
    assert "indexed 4 documents" in captured.out
    assert main(["ask", "年假需要提前几天申请？", "--kb", str(kb), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["found"] and "年假申请需提前3天提交" in answer["answer"]
    assert answer["hits"][int(next(iter(answer["citations"]))) - 1]["doc_id"] == "b"
    assert main(["ask", "printers configured?", "--kb", str(kb)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Q: printers configured?") and "retrieved" in out and "A: " in out
    assert main(["info", str(kb)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["documents"] == 4 and info["snapshots"][0]["current"]


def test_unreadable_file_is_named_and_the_rest_indexed(tmp_path, capsys):
    src = _write_corpus(tmp_path)
    (src / "broken.txt").write_bytes(b"\xff\xfe not utf-8 \xff")
    (src / "bad.jsonl").write_text('{"id": "x", "text": "fine"}\n{not json\n')
    kb = tmp_path / "kb"
    assert main(["index", str(src), "--kb", str(kb)]) == 1
    err = capsys.readouterr().err
    assert "broken.txt: not UTF-8" in err
    assert "bad.jsonl" in err and "not valid JSON" in err
    assert main(["info", str(kb)]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] >= 4


@pytest.mark.parametrize("fmt", ["txt", "jsonl", "csv", "parquet"])
@pytest.mark.parametrize("out_suffix", ["jsonl", "parquet"])
def test_batch_formats(tmp_path, capsys, fmt, out_suffix):
    src = _write_corpus(tmp_path)
    kb = tmp_path / "kb"
    assert main(["index", str(src), "--kb", str(kb)]) == 0
    questions = ["年假需要提前几天申请？", "", "expense reports due?", "年假需要提前几天申请？"]
    qfile = tmp_path / f"q.{fmt}"
    if fmt == "txt":
        qfile.write_text("\n".join(questions) + "\n", encoding="utf-8")
    elif fmt == "jsonl":
        qfile.write_text(
            "\n".join(json.dumps({"id": f"q{i}", "question": q}) for i, q in enumerate(questions))
        )
    elif fmt == "csv":
        qfile.write_text(
            "id,question\n" + "\n".join(f"q{i},{q}" for i, q in enumerate(questions)) + "\n"
        )
    else:
        pq.write_table(pa.table({"id": [f"q{i}" for i in range(4)], "question": questions}), qfile)
    out = tmp_path / f"answers.{out_suffix}"
    capsys.readouterr()
    assert main(["batch", str(qfile), "--kb", str(kb), "--out", str(out), "--batch-size", "2"]) == 0
    summary = capsys.readouterr().out
    assert "4 questions: 3 answered" in summary and "1 errors" in summary
    assert re.search(
        r"operational hit rate \(answers citing a retrieved chunk\): \d+\.\d%", summary
    )
    rows = (
        [json.loads(line) for line in out.read_text().splitlines()]
        if out_suffix == "jsonl"
        else pq.read_table(out).to_pylist()
    )
    assert [r["query_index"] for r in rows] == [0, 1, 2, 3]
    assert rows[1]["error"] == "question 0 is empty" or "empty" in rows[1]["error"]
    assert rows[0]["answer"] == rows[3]["answer"] and rows[0]["found"]
    if fmt != "txt":
        assert [r["id"] for r in rows] == ["q0", "q1", "q2", "q3"]


def test_errors_exit_1_with_one_line(tmp_path, capsys):
    assert main(["ask", "q", "--kb", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("fastrag: error:")
        and "Traceback" not in err
        and len(err.strip().splitlines()) == 1
    )
    assert main(["ask", "q", "--kb", str(tmp_path / "missing"), "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "ok"}\n{"id": "a", "text": "again"}\n')
    assert main(["index", str(bad), "--kb", str(tmp_path / "kb")]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2: document id 'a' was already read from {bad}:1" in err
    assert "Traceback" not in err


def test_usage_error_exits_2():
    with pytest.raises(SystemExit) as exc:
        main(["index"])
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


def test_index_tune_and_the_tune_command(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    topics = ["coral reefs grow in warm shallow seas where sunlight reaches the polyps",
              "glaciers carve deep valleys as compacted snow flows downhill slowly",
              "desert plants store water in thick stems and open pores at night",
              "ocean tides rise and fall twice daily as the moon pulls the earth"]  # fmt: skip
    lines = [
        json.dumps({"id": f"{i}-{j}", "text": f"{t}. Note {j} says the {t.split()[0]} study goes on."})
        for i, t in enumerate(topics) for j in range(4)
    ]  # fmt: skip
    (src / "docs.jsonl").write_text("\n".join(lines) + "\n")
    kb = tmp_path / "kb"
    assert main(["index", str(src), "--kb", str(kb), "--window", "80", "--overlap", "10"]) == 0
    assert "fusion: not tuned (16 documents, fewer than 200" in capsys.readouterr().err
    info = json.loads((main(["info", str(kb)]), capsys.readouterr().out)[1])
    assert "fewer than 200" in info["fusion_tuning"]["skipped"]
    assert main(["tune", str(kb), "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["queries"] == 16 and dry["applied"] is False and dry["method"] == "pseudo-questions"
    assert main(["info", str(kb)]) == 0
    assert "skipped" in json.loads(capsys.readouterr().out)["fusion_tuning"]  # nothing saved
    assert main(["tune", str(kb)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"fusion: (rrf|convex) [\d.]+/[\d.]+/[\d.]+ .* on 16 pseudo-questions", err)
    assert "saved snapshot" in err
    assert main(["info", str(kb)]) == 0
    saved = json.loads(capsys.readouterr().out)["fusion_tuning"]
    assert {k: v for k, v in saved.items() if k not in ("seconds", "applied")} == {
        k: v for k, v in dry.items() if k not in ("seconds", "applied")
    }
    assert (
        main(["index", str(src), "--kb", str(tmp_path / "kb2"), "--overwrite", "--tune", "off"])
        == 0
    )
    assert "fusion: not tuned (fixed weights (tune=False))" in capsys.readouterr().err
