"""Word documents, ``.docx`` (``python-docx``, extra ``docx``): one document per file.

Paragraphs in body order; a paragraph styled ``Heading 1``-``Heading 9``
(or ``Title``) is a heading, one styled as a list (``List ...``) or carrying
numbering is a list item; tables keep their place, each row repeating the
header (the first row) with each cell. The core properties give ``title``
(else the file's stem) and ``updated_at`` (modified, else created).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ._common import Blocks, require, table_rows

__all__ = ["SUFFIXES", "load"]

SUFFIXES = (".docx",)

_HEADING = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


def _style_name(paragraph: Any) -> str:
    try:
        style = paragraph.style
    except (KeyError, ValueError):  # a style id the styles part does not define
        return ""
    return (style.name or "") if style is not None else ""


def _is_numbered(paragraph: Any) -> bool:
    ppr = paragraph._p.pPr
    return ppr is not None and ppr.numPr is not None


def _rows(table: Any) -> list[list[str]]:
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell repeats across the columns it spans
                continue
            seen.add(id(cell._tc))
            cells.append(cell.text)
        rows.append(cells)
    return rows


def load(path: Path, doc_id: str) -> Iterator[dict[str, Any]]:
    """Yield the file as one document (see the module notes)."""
    docx = require("docx", "docx", "reading Word (.docx) files")
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(str(path))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise SourceError(
            f"{path}: not a readable .docx file ({type(exc).__name__}: {exc})"
        ) from exc
    except Exception as exc:  # python-docx / lxml raise their own types on damaged parts
        raise SourceError(
            f"{path}: not a readable .docx file ({type(exc).__name__}: {exc})"
        ) from exc
    blocks = Blocks()
    body = document.element.body
    for element in body.iterchildren():
        tag = element.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(element, document)
            text = paragraph.text
            style = _style_name(paragraph)
            match = _HEADING.match(style)
            if match:
                blocks.heading(text, int(match.group(1)))
            elif style.lower() == "title":
                blocks.heading(text, 1)
            elif style.lower().startswith("list") or _is_numbered(paragraph):
                blocks.item(text)
            else:
                blocks.paragraph(text)
        elif tag == "tbl":
            blocks.rows(table_rows(_rows(Table(element, document))))
    props = document.core_properties
    doc: dict[str, Any] = {
        "id": doc_id,
        "text": blocks.text(),
        "title": (props.title or "").strip() or path.stem,
        "source": str(path),
    }
    updated = props.modified or props.created
    if updated is not None:
        doc["updated_at"] = updated
    yield doc
