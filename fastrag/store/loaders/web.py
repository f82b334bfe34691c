"""HTML pages (``selectolax``, extra ``html``): one document per page.

Headings (``h1``-``h6``), paragraphs, list items, tables and preformatted
blocks become the structure the structure-aware chunker reads (see
:class:`~fastrag.store.loaders._common.Blocks`); a table's rows repeat its
header (``th`` cells, or the ``thead`` row) with each cell. Scripts, styles,
templates, forms and navigation (``nav``, ``role="navigation"``) are
dropped. ``<title>`` becomes ``title`` (else the first ``h1``, else the
file's stem); ``<meta name="last-modified">`` or
``<meta property="article:modified_time">`` becomes ``updated_at``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ..documents import parse_updated_at
from ._common import Blocks, clean, require, table_rows

__all__ = ["SUFFIXES", "html_document", "load"]

SUFFIXES = (".html", ".htm")

_DROP = "script, style, noscript, template, nav, form, svg, iframe, [role=navigation], [hidden]"
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_CONTAINERS = {
    "html", "body", "main", "article", "section", "div", "header", "footer", "aside",
    "blockquote", "figure", "figcaption", "details", "summary", "center", "dl", "dd", "dt",
    "address", "fieldset", "hgroup",
}  # fmt: skip


def _text(node: Any) -> str:
    return clean(node.text(deep=True, separator=" "))


def _inline_text(node: Any) -> str:
    # Inline pieces join without an added separator ("<b>bo</b>ld" is "bold").
    return node.text(deep=True, separator="")


def _table(node: Any, blocks: Blocks) -> None:
    rows = []
    header = False
    for i, tr in enumerate(node.css("tr")):
        cells = [c for c in tr.iter() if c.tag in ("td", "th")]
        if i == 0:
            parent = tr.parent
            header = bool(cells) and (
                all(c.tag == "th" for c in cells) or (parent is not None and parent.tag == "thead")
            )
        rows.append([_text(c) for c in cells])
    blocks.rows(table_rows(rows, header=header))


def _list(node: Any, blocks: Blocks) -> None:
    for li in node.iter():
        if li.tag != "li":
            _walk(li, blocks)
            continue
        own, nested = [], []
        for c in li.iter(include_text=True):
            if c.tag in ("ul", "ol"):
                nested.append(c)  # walked after the item's own text
            elif c.tag == "-text":
                own.append(c.text_content or "")
            else:
                own.append(" " + _inline_text(c) + " " if c.tag in _CONTAINERS else _inline_text(c))
        blocks.item("".join(own))
        for c in nested:
            _list(c, blocks)


def _walk(node: Any, blocks: Blocks) -> None:
    inline: list[str] = []

    def flush() -> None:
        if inline:
            blocks.paragraph("".join(inline))
            inline.clear()

    for child in node.iter(include_text=True):
        tag = child.tag
        if tag == "-text":
            inline.append(child.text_content or "")
        elif tag in _HEADINGS:
            flush()
            blocks.heading(_text(child), _HEADINGS[tag])
        elif tag == "p":
            flush()
            blocks.paragraph(_inline_text(child))
        elif tag in ("ul", "ol", "menu"):
            flush()
            _list(child, blocks)
        elif tag == "li":
            flush()
            blocks.item(_text(child))
        elif tag == "table":
            flush()
            _table(child, blocks)
        elif tag == "pre":
            flush()
            blocks.code(child.text(deep=True, separator=""))
        elif tag in ("br", "hr"):
            inline.append(" ")
        elif tag in _CONTAINERS:
            flush()
            _walk(child, blocks)
        elif tag in ("-comment", "head", "title", "meta", "link", "img"):
            continue
        else:
            inline.append(_inline_text(child))
    flush()


def html_document(
    html: str, *, doc_id: str, source: str | None, fallback_title: str
) -> dict[str, Any]:
    """The document of one HTML page (see the module notes)."""
    parser = require("selectolax.lexbor", "html", "reading HTML pages")
    try:
        tree = parser.LexborHTMLParser(html)
    except Exception as exc:  # lexbor refuses very little; name what it does refuse
        raise SourceError(f"{source or doc_id}: not parseable as HTML: {exc}") from exc
    title_node = tree.css_first("title")
    title = _text(title_node) if title_node is not None else ""
    updated = None
    for selector in (
        'meta[name="last-modified"]', 'meta[http-equiv="last-modified"]',
        'meta[property="article:modified_time"]', 'meta[name="dcterms.modified"]',
    ):  # fmt: skip
        meta = tree.css_first(selector)
        if meta is not None and meta.attributes.get("content"):
            try:
                updated = parse_updated_at(meta.attributes["content"], where=source or doc_id)
            except ValueError:
                updated = None
            if updated is not None:
                break
    for node in tree.css(_DROP):
        node.decompose()
    if not title:
        h1 = tree.css_first("h1")
        title = _text(h1) if h1 is not None else ""
    blocks = Blocks()
    root = tree.body if tree.body is not None else tree.root
    if root is not None:
        _walk(root, blocks)
    doc: dict[str, Any] = {"id": doc_id, "text": blocks.text(), "title": title or fallback_title}
    if source is not None:
        doc["source"] = source
    if updated is not None:
        doc["updated_at"] = updated
    return doc


def load(path: Path, doc_id: str) -> Iterator[dict[str, Any]]:
    """Yield the page as one document."""
    raw = path.read_bytes()
    try:
        html = raw.decode("utf-8")
    except UnicodeDecodeError:
        html = raw.decode("cp1252", errors="replace")
    yield html_document(html, doc_id=doc_id, source=str(path), fallback_title=path.stem)
