"""Small PDF, HTML, Word and SQLite fixtures, written by the tests themselves (nothing binary is committed)."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

MODIFIED = dt.datetime(2026, 4, 5, 6, 7, 8, tzinfo=dt.timezone.utc)
CREATED = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)

FAULTS = [
    ("Fault code", "Symptom", "Fix"),
    ("SV0432", "spindle overheats", "check coolant level"),
    ("SV0433", "spindle vibrates", "balance the tool holder"),
]


def write_pdf(
    path: Path, *, mod_date: dt.datetime | None = MODIFIED, user_password: str | None = None
) -> Path:
    """A two-page manual: a heading, two paragraphs, a ruled fault table, a list on page 2."""
    import fpdf.output
    from fpdf import FPDF
    from fpdf.syntax import PDFDate

    pdf = FPDF()
    pdf.set_title("CNC manual")
    pdf.set_creation_date(CREATED)
    if user_password is not None:
        pdf.set_encryption(owner_password="owner", user_password=user_password)
    pdf.add_page()
    pdf.set_font("Helvetica", size=20)
    pdf.cell(text="Spindle faults", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(
        0, 6,
        "The spindle is the rotating axis of the machine. This paragraph is long enough to wrap "
        "onto a second line, so the loader must join the lines of one paragraph.",
        new_x="LMARGIN", new_y="NEXT",
    )  # fmt: skip
    pdf.ln(4)
    pdf.multi_cell(
        0, 6, "Look up the fault code in the table below.", new_x="LMARGIN", new_y="NEXT"
    )
    pdf.ln(4)
    with pdf.table() as table:
        for row in FAULTS:
            cells = table.row()
            for cell in row:
                cells.cell(cell)
    pdf.ln(4)
    pdf.multi_cell(0, 6, "Call service when a fault repeats.", new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.set_font("Helvetica", size=16)
    pdf.cell(text="Coolant care", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, "- Check the coolant level daily.\n- Replace the coolant monthly.",
                   new_x="LMARGIN", new_y="NEXT")  # fmt: skip
    info_init = fpdf.output.PDFInfo.__init__

    def with_mod_date(self, *args, **kwargs):  # fpdf2 writes no ModDate of its own
        info_init(self, *args, **kwargs)
        if mod_date is not None:
            self.mod_date = PDFDate(mod_date, with_tz=True, encrypt=True)

    fpdf.output.PDFInfo.__init__ = with_mod_date
    try:
        pdf.output(str(path))
    finally:
        fpdf.output.PDFInfo.__init__ = info_init
    return path


def write_scanned_pdf(path: Path) -> Path:
    """A PDF of drawings only: no text layer."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 60, style="F")
    pdf.output(str(path))
    return path


HTML = """<!doctype html>
<html><head><title>Repair guide</title>
<meta name="last-modified" content="2026-01-02T03:04:05Z">
<style>.secret { color: red }</style><script>var tracking = "script text";</script></head>
<body>
<nav><a href="/">Home</a> <a href="/docs">Navigation link</a></nav>
<h1>Spindle</h1>
<p>The <b>spin</b>dle turns the tool.
It can overheat.</p>
<ul><li>Check the coolant<ul><li>daily</li></ul></li><li>Balance the tool</li></ul>
<table><thead><tr><th>Fault code</th><th>Fix</th></tr></thead>
<tbody><tr><td>SV0432</td><td>check coolant level</td></tr></tbody></table>
<div role="navigation">Breadcrumbs</div>
<h2>Encoder</h2><p>Re-seat the encoder cable.</p>
<pre>G28 U0 W0
  M30</pre>
</body></html>"""


def write_docx(path: Path) -> Path:
    """Headings, a paragraph, two list items and a fault table."""
    import docx

    d = docx.Document()
    d.core_properties.title = "Procedures"
    d.core_properties.modified = MODIFIED.replace(tzinfo=None)
    d.add_heading("Coolant procedure", level=1)
    d.add_paragraph("Check the coolant every day.")
    d.add_paragraph("Drain the tank", style="List Number")
    d.add_paragraph("Refill with fresh coolant", style="List Bullet")
    d.add_heading("Faults", level=2)
    table = d.add_table(rows=len(FAULTS), cols=3)
    for i, row in enumerate(FAULTS):
        for j, cell in enumerate(row):
            table.cell(i, j).text = cell
    d.add_paragraph("After the table.")
    d.save(str(path))
    return path


REPAIRS = [
    (1, "Replace the coolant pump seal.", "SV0432", "M-7", "2026-01-05 10:00:00"),
    (2, "Re-seat the encoder cable.", "SV0401", "M-2", "2026-02-01T08:00:00Z"),
    (3, "Balance the tool holder.", "SV0433", "M-7", "2026-02-10"),
]
QUERY = "SELECT id, solution_text AS text, fault_code, machine_id, updated_at FROM repair_records"


def write_sqlite(path: Path, rows=REPAIRS) -> Path:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE IF NOT EXISTS repair_records (id INTEGER PRIMARY KEY, solution_text TEXT, "
        "fault_code TEXT, machine_id TEXT, updated_at TEXT)"
    )
    conn.executemany("INSERT OR REPLACE INTO repair_records VALUES (?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()
    return path
