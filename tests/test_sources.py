"""Bad sources: each problem names its file and line, the rest is indexed, every file is told."""

from __future__ import annotations

import json
import os

import pytest

from fastrag import KnowledgeBase
from fastrag.cli import main
from fastrag.errors import DocumentError, DuplicateDocumentError, StoreNotFoundError
from fastrag.store.report import SourceReport
from fastrag.store.sources import iter_documents, read_questions

BOM = b"\xef\xbb\xbf"


def _jsonl(path, *lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _ids(paths, report=None):
    return [d["id"] for d in iter_documents(paths, report=report)]


def test_a_bad_jsonl_line_is_named_and_the_other_lines_are_read(tmp_path):
    bad = _jsonl(
        tmp_path / "bad.jsonl",
        '{"id": "a", "text": "alpha"}',
        '{"id": broken',
        "[1, 2]",
        '{"text": "no id"}',
        '{"id": "b", "text": 7}',
        '{"id": "c", "text": "gamma"}',
    )
    report = SourceReport()
    assert _ids([bad], report) == ["a", "c"]
    (result,) = report.files
    assert result.status == "partial" and result.documents == 2
    assert [(i.line, i.skipped) for i in result.issues] == [
        (2, "line"),
        (3, "line"),
        (4, "document"),
        (5, "document"),
    ]
    assert "not valid JSON" in result.issues[0].reason
    assert str(result.issues[2]).startswith(f"{bad}:4: document has no 'id'")
    assert "text must be a string" in result.issues[3].reason
    # Without a report, the first problem raises, naming the file and the line.
    with pytest.raises(DocumentError, match=r"bad\.jsonl:2: not valid JSON"):
        _ids([bad])


def test_a_duplicate_id_names_both_places_and_the_rest_is_indexed(tmp_path):
    one = _jsonl(tmp_path / "1.jsonl", '{"id": "a", "text": "first a"}', '{"id": "b", "text": "b"}')
    two = _jsonl(tmp_path / "2.jsonl", '{"id": "c", "text": "c"}', '{"id": "a", "text": "again"}')
    report = SourceReport()
    docs = list(iter_documents([one, two], report=report))
    assert [d["id"] for d in docs] == ["a", "b", "c"] and docs[0]["text"] == "first a"
    (issue,) = report.issues
    assert (issue.path, issue.line) == (two, 2)
    assert f"already read from {one}:1" in issue.reason
    with pytest.raises(DuplicateDocumentError, match=rf"2\.jsonl:2: .*'a'.*{one.name}:1"):
        _ids([one, two])
    # Each builds: the duplicate no longer aborts the whole run.
    kb = KnowledgeBase.build(iter_documents([one, two], report=SourceReport()))
    assert kb.stats()["documents"] == 3


def test_a_fifo_is_reported_as_such_and_never_opened(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    ok = tmp_path / "ok.txt"
    ok.write_text("fine")
    folder = tmp_path / "folder"
    folder.mkdir()
    os.mkfifo(folder / "inner.md")
    (folder / "real.md").write_text("real")
    report = SourceReport()
    assert _ids([fifo, ok, folder], report) == ["ok.txt", "real.md"]  # would hang if opened
    reasons = {i.path.name: i.reason for i in report.issues}
    fifo_reason = "a FIFO, not a regular file"
    assert reasons == {"pipe.txt": fifo_reason, "inner.md": fifo_reason}
    assert "no such file" not in str(report.issues)
    with pytest.raises(DocumentError, match="pipe.txt: a FIFO"):
        _ids([fifo])
    with pytest.raises(StoreNotFoundError, match="nothing.txt: no such file or folder"):
        _ids([tmp_path / "nothing.txt"])


def test_a_utf8_byte_order_mark_is_not_text(tmp_path):
    (tmp_path / "a.txt").write_bytes(BOM + b"Annual leave")
    (tmp_path / "b.jsonl").write_bytes(BOM + b'{"id": "b", "text": "jsonl text"}\n')
    (tmp_path / "c.csv").write_bytes(BOM + b"id,text\nc1,csv text\n")
    docs = {d["id"]: d["text"] for d in iter_documents([tmp_path])}
    assert docs == {"a.txt": "Annual leave", "b": "jsonl text", "c1": "csv text"}
    (tmp_path / "q.txt").write_bytes(BOM + b"first question\nsecond\n")
    (tmp_path / "q.csv").write_bytes(BOM + b"id,question\nq1,csv question\n")
    (tmp_path / "q.jsonl").write_bytes(BOM + b'{"question": "jsonl question"}\n')
    assert [q.text for q in read_questions(tmp_path / "q.txt")] == ["first question", "second"]
    assert [(q.id, q.text) for q in read_questions(tmp_path / "q.csv")] == [("q1", "csv question")]
    assert [q.text for q in read_questions(tmp_path / "q.jsonl")] == ["jsonl question"]


def test_a_csv_that_stops_decoding_keeps_the_rows_before(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"id,text\nr1,one\nr2,two\n" + b"r3,\xff\xfe bad\n" * 2000)
    report = SourceReport()
    assert _ids([path], report) == ["r1", "r2"]
    (issue,) = report.issues
    assert issue.skipped == "rest of the file" and "not UTF-8" in issue.reason
    assert issue.line == 4
    assert report.files[0].status == "partial"


def test_every_file_gets_a_truthful_status(tmp_path):
    (tmp_path / "good.txt").write_text("good")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    (tmp_path / "broken.txt").write_bytes(b"\xff\xfe")
    _jsonl(tmp_path / "half.jsonl", '{"id": "h1", "text": "one"}', "{oops")
    report = SourceReport()
    list(iter_documents([tmp_path], report=report))
    status = {r.path.name: r.status for r in report.files}
    assert status == {
        "broken.txt": "skipped",
        "empty.jsonl": "empty",
        "good.txt": "read",
        "half.jsonl": "partial",
    }
    lines = {r.path.name: r.describe("indexed") for r in report.files}
    half = "1 document indexed; line 2 skipped: " + report.issues[-1].reason
    assert lines["half.jsonl"].endswith(half)
    assert "skipped, nothing indexed: not UTF-8" in lines["broken.txt"]


def test_the_legacy_callback_still_hears_every_problem(tmp_path):
    bad = _jsonl(tmp_path / "bad.jsonl", '{"id": "a", "text": "a"}', "{x")
    heard = []
    docs = iter_documents([bad], on_error=lambda path, reason: heard.append((path, reason)))
    assert [d["id"] for d in docs] == ["a"]
    assert heard == [(bad, heard[0][1])] and heard[0][1].startswith("line 2: not valid JSON")


def _corpus(tmp_path, fifo=True):
    src = tmp_path / "src"
    src.mkdir()
    _jsonl(src / "a.jsonl", '{"id": "a1", "text": "annual leave policy"}', "{bad json")
    _jsonl(src / "b.jsonl", '{"id": "a1", "text": "duplicate"}', '{"id": "b1", "text": "expenses"}')
    (src / "c.txt").write_bytes(BOM + b"security rules")
    if fifo:
        os.mkfifo(src / "pipe.md")
    return src


def test_cli_index_names_files_and_lines_indexes_the_rest_and_says_so(tmp_path, capsys):
    src = _corpus(tmp_path)
    kb = tmp_path / "kb"
    assert main(["index", str(src), "--kb", str(kb)]) == 1
    err = capsys.readouterr().err
    assert f"{src / 'a.jsonl'}:2: not valid JSON" in err
    assert f"{src / 'b.jsonl'}:1: document id 'a1' was already read from {src / 'a.jsonl'}:1" in err
    assert f"{src / 'pipe.md'}: a FIFO, not a regular file; file skipped" in err
    assert f"{src / 'a.jsonl'}: 1 document indexed; line 2 skipped" in err
    assert f"{src / 'pipe.md'}: skipped, nothing indexed" in err
    assert "3 problem(s) in 3 file(s)" in err and "Traceback" not in err
    loaded = KnowledgeBase.load(kb)
    assert loaded.stats()["documents"] == 3
    texts = {h.doc_id: h.text for h in loaded.retrieve("security rules expenses leave", k=10)}
    assert texts["c.txt"] == "security rules" and texts["a1"] == "annual leave policy"


def test_cli_index_strict_stops_before_writing_anything(tmp_path, capsys):
    src = _corpus(tmp_path, fifo=False)
    kb = tmp_path / "kb"
    assert main(["index", str(src), "--kb", str(kb), "--strict"]) == 1
    err = capsys.readouterr().err
    assert f"fastrag: error: {src / 'a.jsonl'}:2: not valid JSON" in err
    assert not kb.exists()
    # An existing knowledge base is left as it was.
    good = tmp_path / "good.jsonl"
    _jsonl(good, '{"id": "g", "text": "good"}')
    assert main(["index", str(good), "--kb", str(kb)]) == 0
    before = (kb / "manifest.json").read_bytes()
    assert main(["index", str(src), "--kb", str(kb), "--strict", "--overwrite"]) == 1
    assert (kb / "manifest.json").read_bytes() == before
    assert json.loads(before)["snapshots"][0]["documents"] == 1
