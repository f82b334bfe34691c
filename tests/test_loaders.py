"""Loaders: PDF, HTML, Word, SQL and the text formats, from fixtures the tests write themselves."""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
import sys

import pytest
from fixtures_sources import (
    CREATED,
    HTML,
    MODIFIED,
    QUERY,
    write_docx,
    write_pdf,
    write_scanned_pdf,
    write_sqlite,
)

import fastrag
from fastrag.errors import DocumentError, MissingDependencyError, SourceError, StoreNotFoundError
from fastrag.store.loaders import load_documents, resolve_sources
from fastrag.store.loaders.pdf import parse_pdf_date


def _collect(*args, **kwargs):
    failures = []
    docs = list(load_documents(*args, on_error=lambda p, r: failures.append((str(p), r)), **kwargs))
    return docs, failures


# -- PDF ---------------------------------------------------------------------------


def test_pdf_pages_headings_paragraphs_and_table_rows(tmp_path):
    path = write_pdf(tmp_path / "manual.pdf")
    docs = list(load_documents(path))
    assert [d["id"] for d in docs] == ["manual.pdf#page=1", "manual.pdf#page=2"]
    first, second = docs
    assert first["page"] == 1 and second["page"] == 2
    assert first["title"] == "CNC manual"
    assert first["updated_at"] == MODIFIED  # ModDate, not CreationDate
    assert first["source"] == first["origin"] == str(path)
    assert first["origin_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    blocks = first["text"].split("\n\n")
    assert blocks[0] == "# Spindle faults"
    assert blocks[1].startswith("The spindle is the rotating axis") and blocks[1].endswith(
        "join the lines of one paragraph."
    )  # two lines, one paragraph
    assert "Fault code: SV0432 | Symptom: spindle overheats | Fix: check coolant level" in blocks
    assert "Fault code: SV0433 | Symptom: spindle vibrates | Fix: balance the tool holder" in blocks
    # The table stands where it is on the page, and its text is not repeated as running text.
    assert (
        blocks.index("Look up the fault code in the table below.")
        < blocks.index("Fault code: SV0432 | Symptom: spindle overheats | Fix: check coolant level")
        < blocks.index("Call service when a fault repeats.")
    )
    assert first["text"].count("SV0432") == 1
    assert second["text"].split("\n\n") == [
        "## Coolant care", "- Check the coolant level daily.", "- Replace the coolant monthly.",
    ]  # fmt: skip


def test_pdf_without_mod_date_uses_creation_date(tmp_path):
    docs = list(load_documents(write_pdf(tmp_path / "m.pdf", mod_date=None)))
    assert docs[0]["updated_at"] == CREATED


def test_pdf_dates():
    assert parse_pdf_date("D:20260405060708Z") == MODIFIED
    assert parse_pdf_date("D:20260405080708+02'00'") == MODIFIED
    assert parse_pdf_date("D:2026") == dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert parse_pdf_date("yesterday") is None
    assert parse_pdf_date(None) is None


def test_bad_pdfs_are_named_and_skipped_while_the_rest_is_indexed(tmp_path):
    folder = tmp_path / "manuals"
    folder.mkdir()
    write_pdf(folder / "good.pdf")
    write_scanned_pdf(folder / "scan.pdf")
    write_pdf(folder / "locked.pdf", user_password="secret")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4\n garbage that is not a PDF \n")
    (folder / "notes.md").write_text("# Notes\n\nplain notes", encoding="utf-8")
    docs, failures = _collect(folder)
    assert sorted({d["origin"] for d in docs}) == [
        str(folder / "good.pdf"),
        str(folder / "notes.md"),
    ]
    reasons = dict(failures)
    assert reasons[str(folder / "scan.pdf")] == "no text layer and no image to read with OCR"
    assert "encrypted" in reasons[str(folder / "locked.pdf")]
    assert "not a readable PDF" in reasons[str(folder / "broken.pdf")]
    with pytest.raises(SourceError, match="scan.pdf: no text layer"):
        list(load_documents(folder / "scan.pdf"))


def test_pdf_table_row_is_retrieved_with_its_column_names(tmp_path):
    kb = fastrag.KnowledgeBase.build(
        load_documents(write_pdf(tmp_path / "m.pdf")), chunking="structure"
    )
    hits = kb.retrieve("What is the fix when the spindle overheats?", k=3, mode="keyword")
    assert (
        "Fault code: SV0432 | Symptom: spindle overheats | Fix: check coolant level" in hits[0].text
    )
    assert hits[0].metadata["page"] == 1
    assert hits[0].metadata["section"] == "Spindle faults"
    page2 = kb.retrieve("coolant monthly", k=5, where={"page": 2})
    assert page2 and all(h.metadata["page"] == 2 for h in page2)


# -- HTML ------------------------------------------------------------------------------


def test_html_structure_title_and_dropped_parts(tmp_path):
    (tmp_path / "guide.html").write_text(HTML, encoding="utf-8")
    (doc,) = load_documents(tmp_path / "guide.html")
    assert doc["title"] == "Repair guide"
    assert doc["updated_at"] == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert doc["text"].split("\n\n") == [
        "# Spindle",
        "The spindle turns the tool. It can overheat.",
        "- Check the coolant",
        "- daily",
        "- Balance the tool",
        "Fault code: SV0432 | Fix: check coolant level",
        "## Encoder",
        "Re-seat the encoder cable.",
        "```\nG28 U0 W0\n  M30\n```",
    ]
    for dropped in ("script text", "color: red", "Navigation link", "Breadcrumbs"):
        assert dropped not in doc["text"]


def test_html_without_title_uses_h1_then_file_name(tmp_path):
    (tmp_path / "a.htm").write_text("<h1>Heading title</h1><p>x</p>", encoding="utf-8")
    (tmp_path / "b.html").write_text("<p>no heading</p>", encoding="utf-8")
    titles = {d["id"]: d["title"] for d in load_documents(tmp_path)}
    assert titles == {"a.htm": "Heading title", "b.html": "b"}


# -- Word --------------------------------------------------------------------------------


def test_docx_headings_lists_and_tables(tmp_path):
    (doc,) = load_documents(write_docx(tmp_path / "proc.docx"))
    assert doc["id"] == "proc.docx" and doc["title"] == "Procedures"
    assert doc["updated_at"] == MODIFIED
    assert doc["text"].split("\n\n") == [
        "# Coolant procedure",
        "Check the coolant every day.",
        "- Drain the tank",
        "- Refill with fresh coolant",
        "## Faults",
        "Fault code: SV0432 | Symptom: spindle overheats | Fix: check coolant level",
        "Fault code: SV0433 | Symptom: spindle vibrates | Fix: balance the tool holder",
        "After the table.",
    ]


def test_corrupt_docx_is_named(tmp_path):
    (tmp_path / "bad.docx").write_bytes(b"PK\x03\x04 not really a zip")
    docs, failures = _collect(tmp_path)
    assert docs == [] and failures[0][0].endswith("bad.docx")
    assert "not a readable .docx" in failures[0][1]


# -- SQL ---------------------------------------------------------------------------------


def test_sqlite_rows_become_documents_with_metadata(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_sqlite(tmp_path / "repairs.db")
    docs = list(load_documents("sqlite:///repairs.db", query=QUERY))
    assert [d["id"] for d in docs] == ["1", "2", "3"]
    assert docs[0]["text"] == "Replace the coolant pump seal."
    assert docs[0]["fault_code"] == "SV0432" and docs[0]["machine_id"] == "M-7"
    assert docs[0]["origin"] == docs[0]["source"] == "sqlite:///repairs.db"
    assert len({d["origin_sha256"] for d in docs}) == 3  # one hash per row
    kb = fastrag.KnowledgeBase.build(docs)
    hits = kb.retrieve("coolant pump seal", k=5, where={"machine_id": "M-7"})
    assert {h.doc_id for h in hits} <= {"1", "3"} and hits[0].doc_id == "1"
    assert hits[0].updated_at == dt.datetime(2026, 1, 5, 10, tzinfo=dt.timezone.utc)


def test_sqlite_since_fetches_only_newer_rows(tmp_path):
    db = write_sqlite(tmp_path / "repairs.db")
    url = f"sqlite:///{db}"
    newer = list(load_documents(url, query=QUERY, since="2026-02-01T00:00:00Z"))
    assert [d["id"] for d in newer] == ["2", "3"]  # ISO with T, Z and a bare date all compare
    assert list(load_documents(url, query=QUERY, since=dt.datetime(2027, 1, 1))) == []


def test_sql_errors_name_the_problem(tmp_path):
    db = write_sqlite(tmp_path / "repairs.db")
    url = f"sqlite:///{db}"
    with pytest.raises(SourceError, match="no 'text' column .*columns: id, fault_code"):
        list(load_documents(url, query="SELECT id, fault_code FROM repair_records"))
    with pytest.raises(SourceError, match="no 'id' or 'text' column"):
        list(load_documents(url, query="SELECT fault_code FROM repair_records"))
    with pytest.raises(SourceError, match="the query failed: no such table: nope"):
        list(load_documents(url, query="SELECT id, x AS text FROM nope"))
    with pytest.raises(SourceError, match="updated_at"):
        list(load_documents(url, query="SELECT id, solution_text AS text FROM repair_records",
                            since="2026-01-01"))  # fmt: skip
    with pytest.raises(SourceError, match="needs a query"):
        list(load_documents(url))
    with pytest.raises(SourceError, match="no such database file"):
        list(load_documents(f"sqlite:///{tmp_path / 'missing.db'}", query=QUERY))


def test_sqlite_is_opened_read_only(tmp_path):
    db = write_sqlite(tmp_path / "repairs.db")
    with pytest.raises(SourceError, match="readonly"):
        list(
            load_documents(
                f"sqlite:///{db}", query="DELETE FROM repair_records RETURNING id, id AS text"
            )
        )
    assert sqlite3.connect(db).execute("SELECT count(*) FROM repair_records").fetchone() == (3,)


def test_sqlalchemy_url(tmp_path):
    db = write_sqlite(tmp_path / "repairs.db")
    docs = list(load_documents(f"sqlite+pysqlite:///{db}", query=QUERY))
    assert [d["id"] for d in docs] == ["1", "2", "3"]
    assert docs[1]["machine_id"] == "M-2"
    with pytest.raises(SourceError, match="the query failed"):
        list(load_documents(f"sqlite+pysqlite:///{db}", query="SELECT nothing FROM nowhere"))
    with pytest.raises(SourceError, match="cannot open the database"):
        list(load_documents("nosuchdialect://host/db", query=QUERY))


# -- text formats, discovery, dependencies --------------------------------------------------


def test_text_formats_record_their_origin(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\ntext", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(
        '{"id": "b1", "text": "one", "source": "own.md"}\n', encoding="utf-8"
    )
    (tmp_path / "c.csv").write_text("id,text,team\nc1,two,hr\n", encoding="utf-8")
    (tmp_path / "skip.bin").write_bytes(b"\x00")
    docs = {d["id"]: d for d in load_documents(tmp_path)}
    assert sorted(docs) == ["a.md", "b1", "c1"]
    assert docs["b1"]["source"] == "own.md"  # a document's own source is kept
    assert docs["b1"]["origin"] == str(tmp_path / "b.jsonl")
    assert docs["c1"]["team"] == "hr"
    with pytest.raises(StoreNotFoundError):
        list(load_documents(tmp_path / "missing"))
    with pytest.raises(DocumentError, match="unsupported file type"):
        list(load_documents(tmp_path / "skip.bin"))


def test_sources_are_lazy(tmp_path):
    (tmp_path / "a.md").write_text("x", encoding="utf-8")
    (source,) = resolve_sources(tmp_path)
    assert source.doc_id == "a.md"
    assert source.sha256() == hashlib.sha256(b"x").hexdigest()


def test_missing_optional_package_names_the_extra(tmp_path, monkeypatch):
    write_pdf(tmp_path / "m.pdf")
    monkeypatch.setitem(sys.modules, "pdfplumber", None)  # import pdfplumber now fails
    with pytest.raises(MissingDependencyError, match=r"pip install 'fastrag-engine\[pdf\]'"):
        list(load_documents(tmp_path / "m.pdf"))
    docs, failures = _collect(tmp_path)
    assert docs == [] and "fastrag-engine[pdf]" in failures[0][1]


# -- web pages over a real socket ----------------------------------------------------------


@pytest.fixture()
def web_server(tmp_path):
    import http.server
    import threading

    write_pdf(tmp_path / "manual.pdf")
    (tmp_path / "guide.html").write_text(HTML, encoding="utf-8")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    server.shutdown()
    server.server_close()
    thread.join()


def test_web_pages_and_pdfs_by_url(web_server):
    base, root = web_server  # a server on 127.0.0.1: private, so allowed explicitly
    (page,) = load_documents(f"{base}/guide.html", allow_private=True)
    assert page["id"] == page["origin"] == page["source"] == f"{base}/guide.html"
    assert page["title"] == "Repair guide" and "## Encoder" in page["text"]
    pages = list(load_documents(f"{base}/manual.pdf", allow_private=True))
    assert [d["id"] for d in pages] == [f"{base}/manual.pdf#page=1", f"{base}/manual.pdf#page=2"]
    assert (
        pages[0]["origin_sha256"] == hashlib.sha256((root / "manual.pdf").read_bytes()).hexdigest()
    )
    docs, failures = _collect([f"{base}/missing.html", f"{base}/guide.html"], allow_private=True)
    assert [d["id"] for d in docs] == [f"{base}/guide.html"]
    assert failures == [(f"{base}/missing.html", "the server answered HTTP 404")]
    kb = fastrag.KnowledgeBase.build(load_documents(f"{base}/guide.html", allow_private=True))
    assert not kb.sync(resolve_sources(f"{base}/guide.html", allow_private=True)).changed
    (root / "guide.html").write_text(
        HTML.replace("encoder cable", "encoder plug"), encoding="utf-8"
    )
    plan = kb.sync(resolve_sources(f"{base}/guide.html", allow_private=True))
    assert [d["id"] for d in plan.replace] == [f"{base}/guide.html"]


# -- document dates (issue 24, item 4) --------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (
            '<meta name="date" content="2025-06-01">',
            dt.datetime(2025, 6, 1, tzinfo=dt.timezone.utc),
        ),
        (
            '<meta property="article:modified_time" content="2025-06-01T10:00:00+02:00">',
            dt.datetime(2025, 6, 1, 8, tzinfo=dt.timezone.utc),
        ),
        (
            '<meta name="DC.date.modified" content="2025-06-02T00:00:00Z">',
            dt.datetime(2025, 6, 2, tzinfo=dt.timezone.utc),
        ),
        (
            '<meta http-equiv="Last-Modified" content="Tue, 03 Jun 2025 04:05:06 GMT">',
            dt.datetime(2025, 6, 3, 4, 5, 6, tzinfo=dt.timezone.utc),
        ),
        # A modification date wins over a publication date, wherever it stands.
        (
            '<meta property="article:published_time" content="2024-01-01T00:00:00Z">'
            '<meta name="dcterms.modified" content="2025-06-04T00:00:00Z">',
            dt.datetime(2025, 6, 4, tzinfo=dt.timezone.utc),
        ),
        # An unreadable date is passed over for the next one.
        (
            '<meta name="last-modified" content="last Tuesday">'
            '<meta itemprop="datePublished" content="2025-06-05">',
            dt.datetime(2025, 6, 5, tzinfo=dt.timezone.utc),
        ),
        ('<meta name="date" content="soon">', None),
        ('<meta name="description" content="2025-06-06">', None),
    ],
)
def test_html_meta_dates_become_updated_at(tmp_path, head, expected):
    (tmp_path / "page.html").write_text(
        f"<html><head><title>t</title>{head}</head><body><p>Body text.</p></body></html>",
        encoding="utf-8",
    )
    (doc,) = load_documents(tmp_path / "page.html")
    assert doc.get("updated_at") == expected


def test_docx_created_date_when_never_modified_and_dates_reach_hits(tmp_path):
    import docx

    path = tmp_path / "created.docx"
    d = docx.Document()
    d.core_properties.created = dt.datetime(2025, 3, 4, 5, 6, 7)
    # python-docx's template carries a modified date of its own; drop it, as a file
    # written by a tool that records only the creation would.
    props = d.core_properties._element
    props.remove(props.find("{http://purl.org/dc/terms/}modified"))
    d.add_paragraph("The coolant pump was serviced.")
    d.save(str(path))
    (doc,) = load_documents(path)
    assert doc["updated_at"] == dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)
    kb = fastrag.KnowledgeBase.build([doc])
    assert kb.retrieve("coolant pump", k=1)[0].updated_at == doc["updated_at"]
