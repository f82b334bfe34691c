"""PDF files (``pdfplumber``, extra ``pdf``): one document per page.

Text comes in pdfplumber's reading order, line by line; a line set in a
larger font than the body is a heading (levels by size), a vertical gap
wider than the usual line spacing ends a paragraph, a line starting with a
bullet is a list item. Tables are found by their ruling lines, or without
any by the gaps between their columns (:mod:`.tables`), and kept as
tables: each row becomes one unit of text repeating the header with each
cell (``Fault code: SV0432 | Symptom: spindle overheats | Fix: check coolant
level``), placed where the table stands on the page; the table's characters
are not repeated as running text. A table that opens a page with the
columns of the table that closed the page before, and without its header,
continues it: its rows take that header.

Each page is a document ``<id>#page=<n>`` with metadata ``page`` (from 1),
``title`` (the PDF's Title, else the file's stem), ``source`` and
``updated_at`` (ModDate, else CreationDate). A page without a text layer
(a scan) is read with Tesseract and says ``ocr: true``; a captioned image
becomes a figure document ``<id>#page=<n>&figure=<k>`` bound to the image's
SHA-256 (both in :mod:`~fastrag.store.loaders.ocr`). With
``LoadLimits(ocr=False)`` a PDF without any text layer is refused with "no
text layer"; an encrypted or corrupt one is refused naming the reason. A PDF of more than
``pdf_pages`` pages (5,000) or more than ``text_chars`` characters (32
million) is refused (:class:`~fastrag.errors.SourceLimitError`, see
:class:`~fastrag.store.loaders.LoadLimits`), counted as it is read.
"""

from __future__ import annotations

import datetime as _dt
import re
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import MissingDependencyError, SourceError, SourceLimitError
from . import ocr
from ._common import DEFAULT_LIMITS, Blocks, LoadLimits, check_text, clean, require, table_rows
from .tables import page_tables

__all__ = ["SUFFIXES", "load", "parse_pdf_date"]

SUFFIXES = (".pdf",)

_BULLETS = ("•", "◦", "▪", "‣", "–", "-", "*", "·")
_DATE = re.compile(
    r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?\s*(Z|[+-]\d{2}'?\d{2}'?|[+-]\d{2})?"
)


def parse_pdf_date(value: Any) -> _dt.datetime | None:
    """Parse a PDF date string (``D:YYYYMMDDHHmmSS+HH'mm'``) into an aware datetime, or None."""
    if isinstance(value, bytes):
        value = value.decode("latin-1", "replace")
    if not isinstance(value, str):
        return None
    m = _DATE.match(value.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second, tz = m.groups()
    offset = _dt.timedelta(0)
    if tz and tz != "Z":
        digits = tz[1:].replace("'", "")
        offset = _dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
        if tz[0] == "-":
            offset = -offset
    try:
        return _dt.datetime(
            int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
            int(second or 0), tzinfo=_dt.timezone(offset),
        )  # fmt: skip
    except ValueError:
        return None


def _inside(obj: dict[str, Any], boxes: list[tuple[float, float, float, float]]) -> bool:
    x = (obj["x0"] + obj["x1"]) / 2
    y = (obj["top"] + obj["bottom"]) / 2
    return any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)


def _line_size(line: dict[str, Any]) -> float:
    sizes = [round(float(c.get("size", 0)), 1) for c in line.get("chars", ()) if c["text"].strip()]
    return statistics.median(sizes) if sizes else 0.0


def _page_items(page: Any) -> tuple[list[tuple[float, str, Any]], int]:
    """``(top, kind, payload)`` of a page's lines and tables in reading order, and its chars."""
    n_chars = len(page.chars)
    tables = page_tables(page)
    boxes = [box for box, _ in tables]
    items: list[tuple[float, str, Any]] = []
    for box, rows in tables:
        items.append((box[1], "table", rows))
    text_page = page.filter(lambda o: o.get("object_type") != "char" or not _inside(o, boxes))
    for line in text_page.extract_text_lines(return_chars=True, strip=True):
        if line["text"].strip():
            # Only what rendering needs: the characters' dicts are large.
            slim = {
                "text": line["text"], "top": line["top"], "bottom": line["bottom"],
                "size": _line_size(line),
            }  # fmt: skip
            items.append((line["top"], "line", slim))
    # Tables go where they stand; lines keep pdfplumber's reading order among themselves.
    lines = iter([i for i in items if i[1] == "line"])
    ordered: list[tuple[float, str, Any]] = []
    pending = sorted((i for i in items if i[1] == "table"), key=lambda i: i[0])
    for item in lines:
        while pending and pending[0][0] <= item[0]:
            ordered.append(pending.pop(0))
        ordered.append(item)
    ordered.extend(pending)
    return ordered, n_chars


def _flush(para: list[str], blocks: Blocks) -> None:
    """Write the lines gathered so far as one paragraph (or list item) and clear them."""
    if para:
        text = " ".join(para)
        if text.startswith(_BULLETS) and len(text) > 1 and text[1] == " ":
            blocks.item(text[2:])
        else:
            blocks.paragraph(text)
        para.clear()


def _render(pages: list[list[tuple[float, str, Any]]]) -> list[str]:
    """Return the structured text of every page."""
    sizes = [
        (p["size"], len(p["text"])) for items in pages for _, kind, p in items if kind == "line"
    ]
    weight: dict[float, int] = {}
    for size, n in sizes:
        weight[size] = weight.get(size, 0) + n
    body = max(weight, key=lambda s: weight[s]) if weight else 0.0
    heading_sizes = sorted({s for s, _ in sizes if body and s >= body * 1.15}, reverse=True)
    level = {s: min(i + 1, 6) for i, s in enumerate(heading_sizes)}
    out = []
    header: list[str] | None = None  # of the table that closed the page before
    for items in pages:
        first = items[0] if items else None
        if first is not None and first[1] == "table" and header is not None:
            rows = first[2]
            if rows and len(rows[0]) == len(header) and [clean(c) for c in rows[0]] != header:
                items = [(first[0], "table", [header, *rows]), *items[1:]]
        last = items[-1] if items else None
        header = [clean(c) for c in last[2][0]] if last and last[1] == "table" and last[2] else None
        blocks = Blocks()
        para: list[str] = []
        prev_bottom: float | None = None
        gaps = [
            b[2]["top"] - a[2]["bottom"]
            for a, b in zip(items, items[1:], strict=False)
            if a[1] == b[1] == "line" and b[2]["top"] > a[2]["bottom"]
        ]
        usual = statistics.median(gaps) if gaps else 0.0

        for _, kind, payload in items:
            if kind == "table":
                _flush(para, blocks)
                blocks.rows(table_rows(payload))
                prev_bottom = None
                continue
            text = clean(payload["text"])
            size = payload["size"]
            if size in level:
                _flush(para, blocks)
                blocks.heading(text, level[size])
                prev_bottom = payload["bottom"]
                continue
            gap = payload["top"] - prev_bottom if prev_bottom is not None else 0.0
            starts_item = text.startswith(_BULLETS) and len(text) > 1 and text[1] == " "
            if prev_bottom is None or gap > usual * 1.4 + 1.0 or starts_item:
                _flush(para, blocks)
            para.append(text)
            prev_bottom = payload["bottom"]
        _flush(para, blocks)
        out.append(blocks.text())
    return out


def load(path: Path, doc_id: str, limits: LoadLimits = DEFAULT_LIMITS) -> Iterator[dict[str, Any]]:
    """Yield one document per page with text (see the module notes)."""
    pdfplumber = require("pdfplumber", "pdf", "reading PDF files")
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect

    try:
        pdf = pdfplumber.open(path)
    except (PDFPasswordIncorrect, PDFEncryptionError) as exc:
        raise SourceError(
            f"{path}: encrypted PDF (a password is needed): {exc or 'no detail'}"
        ) from exc
    except Exception as exc:  # pdfminer raises many unrelated types on a damaged file
        if _encrypted(exc):
            raise SourceError(f"{path}: encrypted PDF (a password is needed)") from exc
        raise SourceError(f"{path}: not a readable PDF ({type(exc).__name__}: {exc})") from exc
    try:
        with pdf:
            info = pdf.metadata or {}
            pages = []
            n_chars = 0
            n_pages = len(pdf.pages)
            if n_pages > limits.pdf_pages:
                raise SourceLimitError(
                    f"{path}: {n_pages:,} pages, more than {limits.pdf_pages:,} "
                    "(LoadLimits.pdf_pages)"
                )
            scanned: dict[int, str] = {}  # page number -> its OCR text
            figures: dict[int, list[dict[str, Any]]] = {}
            for number, page in enumerate(pdf.pages, 1):
                items, chars = _page_items(page)
                if limits.ocr and ocr.needs_ocr(page, chars):
                    scanned[number] = ocr.ocr_page(
                        page, limits=limits, where=f"{path} page {number}"
                    )
                    chars = len(scanned[number])
                elif page.images:
                    items, figures[number] = ocr.bind_figures(page.images, items)
                pages.append(items)
                n_chars += chars
                check_text(n_chars, limits, path)
                page.close()  # drop the page's parsed objects before the next one
    except (SourceError, MissingDependencyError):  # OcrUnavailableError: a page needs Tesseract
        raise
    except Exception as exc:
        if _encrypted(exc):
            raise SourceError(f"{path}: encrypted PDF (a password is needed)") from exc
        raise SourceError(f"{path}: not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if n_chars == 0:
        why = (
            "; OCR found no text" if scanned
            else " and no image to read with OCR" if limits.ocr
            else "; OCR is off (LoadLimits.ocr)"
        )  # fmt: skip
        raise SourceError(f"{path}: no text layer{why}")
    title = info.get("Title")
    title = clean(title.decode("latin-1") if isinstance(title, bytes) else title) or path.stem
    updated = parse_pdf_date(info.get("ModDate")) or parse_pdf_date(info.get("CreationDate"))
    for number, text in enumerate(_render(pages), 1):
        text = scanned.get(number, text)
        doc: dict[str, Any] = {
            "id": f"{doc_id}#page={number}",
            "text": text,
            "title": title,
            "source": str(path),
            "page": number,
            "format": "pdf",
        }
        if updated is not None:
            doc["updated_at"] = updated
        if number in scanned:
            doc["ocr"] = True
        if text.strip():
            yield doc
        yield from ocr.figure_documents(doc, figures.get(number, ()))


def _encrypted(exc: BaseException) -> bool:
    """Whether an exception (or its cause) says the PDF is encrypted."""
    while exc is not None:
        name = type(exc).__name__
        if "Password" in name or "Encrypt" in name:
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False
