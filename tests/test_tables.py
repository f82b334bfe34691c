"""Tables as rows: the PDF (no ruling lines), HTML and Word loaders, chunking="auto", the answer."""

from __future__ import annotations

import pytest

from fastrag import KnowledgeBase
from fastrag.store.loaders import load_documents
from fastrag.text.chunking import Chunker

pytest.importorskip("pdfplumber")
pytest.importorskip("reportlab")
pytest.importorskip("docx")
pytest.importorskip("selectolax")

HEADER = ["Fault code", "Symptom", "Fix"]
ROWS = [
    [
        "SV0432",
        "Spindle overheats and stops",
        "Check the coolant tank level is at least 80 percent",
    ],
    ["SV0417", "Servo parameter invalid", "Re-enter the servo parameters from the sheet"],
    ["SV0301", "Axis does not move", "Release the emergency stop and reset the drive"],
    ["SV0510", "Door switch open", "Close the door until the switch clicks"],
    ["SV0620", "Oil pressure low", "Top up the hydraulic oil to the upper mark"],
    ["SV0777", "Tool change timeout", "Clean the tool magazine sensor with a dry cloth"],
]
PROSE = (
    "Wear gloves when handling coolant. This chapter lists the alarm codes the controller "
    "shows and what to do for each of them. Read it before you call service."
)
AFTER = "Press the reset key once the fault is fixed and wait for the ready lamp."


def _pdf(path):
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Table

    ss = getSampleStyleSheet()
    story = [
        Paragraph("Maintenance manual", ss["Title"]),
        Paragraph("Troubleshooting", ss["Heading1"]),
        Paragraph(PROSE, ss["BodyText"]),
        Table([HEADER, *ROWS], hAlign="LEFT"),  # no TableStyle: no ruling lines
        Paragraph(AFTER, ss["BodyText"]),
    ]
    SimpleDocTemplate(str(path), pagesize=A4).build(story)


def _html(path):
    head = "".join(f"<th>{h}</th>" for h in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in ROWS)
    path.write_text(
        f"<html><head><title>Manual</title></head><body><h1>Troubleshooting</h1><p>{PROSE}</p>"
        f"<table><caption>Alarm codes</caption><thead><tr>{head}</tr></thead><tbody>{body}"
        f"</tbody></table><p>{AFTER}</p></body></html>",
        encoding="utf-8",
    )


def _docx(path):
    import docx

    d = docx.Document()
    d.add_heading("Troubleshooting", 1)
    d.add_paragraph(PROSE)
    table = d.add_table(rows=0, cols=3)
    for r in [HEADER, *ROWS]:
        cells = table.add_row().cells
        for cell, value in zip(cells, r, strict=True):
            cell.text = value
    d.add_paragraph(AFTER)
    d.save(str(path))


MAKERS = {"pdf": _pdf, "html": _html, "docx": _docx}


def _row_text(r):
    return " | ".join(f"{h}: {v}" for h, v in zip(HEADER, r, strict=True))


@pytest.fixture(scope="module", params=sorted(MAKERS))
def manual(request, tmp_path_factory):
    kind = request.param
    path = tmp_path_factory.mktemp(kind) / f"manual.{kind}"
    MAKERS[kind](path)
    docs = list(load_documents([str(path)]))
    return kind, docs, KnowledgeBase.build(docs)


def test_every_row_is_one_chunk_with_its_header(manual):
    kind, docs, kb = manual
    assert {d["format"] for d in docs} == {kind}
    whole = "\n".join(d["text"] for d in docs)
    assert whole.count("SV0432") == 1  # the table is not repeated as running text
    hits = {h.text: h for q in ROWS for h in kb.retrieve(q[0], k=3)}
    for i, r in enumerate(ROWS, 1):
        hit = hits[_row_text(r)]  # the row alone: no other row's cells, nothing else
        assert hit.metadata["table"] == 1 and hit.metadata["row"] == i
        assert hit.metadata["section"] == "Troubleshooting"
    assert all(h.text.count("Fault code:") <= 1 for h in kb.retrieve("fault code fix", k=50))


def test_a_question_on_a_row_finds_it_and_answers_with_the_cell(manual):
    _, _, kb = manual
    for code, _, fix in ROWS:
        ans = kb.answer(f"What is the fix for fault code {code}?")
        assert ans.hits[0].text.startswith(f"Fault code: {code} |")
        assert ans.text == f"{fix} [1]"
        assert ans.citations[1] == ans.hits[0]
    ans = kb.answer("When should gloves be worn handling coolant?")
    assert ans.text == "Wear gloves when handling coolant. [1]"


def test_auto_chooses_structure_for_loaded_files_and_windows_for_plain_text(tmp_path):
    plain = " ".join(f"word{i}" for i in range(120))
    (tmp_path / "notes.txt").write_text(plain, encoding="utf-8")
    (tmp_path / "guide.md").write_text(
        "# Guide\n\nshort words\n\n## Next\n\nmore", encoding="utf-8"
    )
    docs = sorted(load_documents([str(tmp_path)]), key=lambda d: d["id"])
    assert [d.get("format") for d in docs] == ["markdown", None]
    kb = KnowledgeBase.build(docs)
    assert kb.stats()["chunking"] == "auto"
    by_doc: dict[str, list[str]] = {}
    for h in kb.retrieve("word1 guide words more", k=50):
        by_doc.setdefault(h.doc_id, []).append(h.text)
    windows = Chunker(200, 40).split(plain)
    assert sorted(by_doc[docs[1]["id"]]) == sorted(windows)
    assert sorted(by_doc[docs[0]["id"]]) == ["# Guide short words", "## Next more"]


def test_auto_on_a_mixed_batch_equals_each_mode_on_its_documents():
    md = "# A\n\npara one\n\nk: v | l: w\n\nk: x | l: y\n\n## B\n\n" + "long words " * 30
    texts = ["plain " * 60, md, "", md.replace("#", "##"), "x y z"]
    flags = [False, True, False, True, False]
    auto = Chunker(50, 10, mode="auto").chunk(texts, structured=flags)
    got = list(zip(auto.chunk_doc.tolist(), auto.texts(), auto.chunk_table.tolist(), strict=True))
    want = []
    for i, (t, f) in enumerate(zip(texts, flags, strict=True)):
        c = Chunker(50, 10, mode="structure" if f else "windows").chunk([t])
        tables = c.chunk_table.tolist() if c.chunk_table is not None else [-1] * len(c)
        want += [(i, x, tb) for x, tb in zip(c.texts(), tables, strict=True)]
    assert got == want
    assert auto.section_array().to_pylist()[0] is None
    plain = Chunker(50, 10, mode="auto").chunk(texts)  # no flags: all windows
    assert plain.texts() == Chunker(50, 10).chunk(texts).texts()


def test_a_row_longer_than_the_window_is_cut_between_cells():
    row = "Fault code: SV0432 | Symptom: " + "very " * 12 + "hot | Fix: " + "check " * 10 + "it"
    chunks = Chunker(60, 10, mode="structure").chunk([f"# T\n\n{row}\n\nafter"])
    texts = chunks.texts()
    pieces = [t for t, r in zip(texts, chunks.chunk_row.tolist(), strict=True) if r == 1]
    assert len(pieces) >= 2 and all(len(p) <= 60 for p in pieces)
    cells = [c.strip() for c in row.split(" | ")]
    for p in pieces:  # whole cells (or windows of one cell longer than the window)
        assert all(c in cells for c in p.split(" | ")) or any(p in c for c in cells)
    assert texts[0] == "# T" and texts[-1] == "after"
