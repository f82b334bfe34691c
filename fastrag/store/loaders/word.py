"""Word documents, ``.docx`` (``python-docx``, extra ``docx``): one document per file.

Paragraphs in body order; a paragraph styled ``Heading 1``-``Heading 9``
(or ``Title``) is a heading, one styled as a list (``List ...``) or carrying
numbering is a list item; tables keep their place, each row repeating the
header (the first row) with each cell. The core properties give ``title``
(else the file's stem) and ``updated_at`` (modified, else created).

Before python-docx reads anything, the archive's table of contents is
checked against :class:`~fastrag.store.loaders.LoadLimits`: a member that
expands past ``part_bytes`` (64 MiB), members that expand past four times
that together, or a member compressed more than ``zip_ratio`` (200) to one
(the mark of a zip bomb; members under 1 MiB are exempt) refuse the file with
:class:`~fastrag.errors.SourceLimitError`, as does text past ``text_chars``.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import SourceError, SourceLimitError
from ._common import DEFAULT_LIMITS, Blocks, LoadLimits, check_text, require, table_rows

__all__ = ["SUFFIXES", "load"]

SUFFIXES = (".docx",)

_RATIO_EXEMPT = 1 << 20
"""Members expanding to at most this many bytes are not held to ``zip_ratio``."""
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


def _check_archive(path: Path, limits: LoadLimits) -> None:
    """Refuse a .docx whose members would expand past the limits (read from its directory)."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise SourceError(
            f"{path}: not a readable .docx file ({type(exc).__name__}: {exc})"
        ) from exc
    total = 0
    for info in members:
        size = info.file_size
        total += size
        if size > limits.part_bytes:
            raise SourceLimitError(
                f"{path}: the part {info.filename!r} expands to {size:,} bytes, more than "
                f"{limits.part_bytes:,} (LoadLimits.part_bytes)"
            )
        if size > _RATIO_EXEMPT and size > limits.zip_ratio * max(info.compress_size, 1):
            raise SourceLimitError(
                f"{path}: the part {info.filename!r} expands {size // max(info.compress_size, 1):,}"
                f" times ({info.compress_size:,} to {size:,} bytes), more than "
                f"{limits.zip_ratio:,} (LoadLimits.zip_ratio): a zip bomb?"
            )
    if total > 4 * limits.part_bytes:
        raise SourceLimitError(
            f"{path}: its parts expand to {total:,} bytes, more than {4 * limits.part_bytes:,} "
            "(4 x LoadLimits.part_bytes)"
        )


def load(path: Path, doc_id: str, limits: LoadLimits = DEFAULT_LIMITS) -> Iterator[dict[str, Any]]:
    """Yield the file as one document (see the module notes)."""
    docx = require("docx", "docx", "reading Word (.docx) files")
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    _check_archive(path, limits)
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
    n_chars = 0
    for element in body.iterchildren():
        before = len(blocks.parts)
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
        n_chars += sum(len(part) for part in blocks.parts[before:])
        check_text(n_chars, limits, path)
    text = blocks.text()
    check_text(len(text), limits, path)
    props = document.core_properties
    doc: dict[str, Any] = {
        "id": doc_id,
        "text": text,
        "title": (props.title or "").strip() or path.stem,
        "source": str(path),
        "format": "docx",
    }
    updated = props.modified or props.created
    if updated is not None:
        doc["updated_at"] = updated
    yield doc
