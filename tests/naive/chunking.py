"""Pure-Python reference twin of :mod:`fastrag._native.chunking`.

Written literally from the specification, for obviousness rather than speed:
collapse every run of Unicode white space to one space, strip both ends, then
cut fixed windows of ``window`` characters that overlap by ``overlap``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "WHITESPACE",
    "chunk_text",
    "chunk_texts",
    "normalise",
    "structure_chunks",
    "structure_records",
    "structure_units",
]

WHITESPACE: tuple[str, ...] = tuple(chr(c) for c in range(0x110000) if chr(c).isspace())
"""Every code point Python's ``str.isspace`` (and ``re``'s ``\\s``) accepts."""

_SPACES = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Collapse white-space runs to one space and strip both ends."""
    return _SPACES.sub(" ", text).strip()


def chunk_text(text: str, window: int, overlap: int) -> list[tuple[int, int, str]]:
    """Return ``(start, end, chunk)`` for every chunk of one document.

    ``start`` and ``end`` are character offsets into the normalised text.
    """
    clean = normalise(text)
    if not clean:
        return []
    if len(clean) <= window:
        return [(0, len(clean), clean[0 : len(clean)])]
    out: list[tuple[int, int, str]] = []
    start = 0
    while True:
        end = min(start + window, len(clean))
        out.append((start, end, clean[start:end]))
        if end == len(clean):
            break
        start = end - overlap
    return out


def chunk_texts(texts: list[str], window: int, overlap: int) -> list[str]:
    """Return the chunk strings of every document, in order (the benchmark baseline)."""
    out: list[str] = []
    for text in texts:
        clean = _SPACES.sub(" ", text).strip()
        if not clean:
            continue
        n = len(clean)
        if n <= window:
            out.append(clean)
            continue
        start = 0
        while True:
            end = min(start + window, n)
            out.append(clean[start:end])
            if end == n:
                break
            start = end - overlap
    return out


# -- structure-aware chunking -------------------------------------------------------

_HEADING, _PARA, _LIST, _TABLE, _FENCE = "heading", "para", "list", "table", "fence"
_RECORD = "record"
_LIST_NUMBER = re.compile(r"[0-9]{1,9}[.)]")
_CELL_SEP = re.compile(r"\s+\|\s+")
_HEADER_CELL = re.compile(r"[^:|\n]{1,80}:\s")


def _is_record(stripped: str) -> bool:
    """At least two cells (split at ``|`` with white space around) open with ``Header:`` and white space."""
    starts = [0, *(m.end() for m in _CELL_SEP.finditer(stripped))]
    return sum(bool(_HEADER_CELL.match(stripped, s)) for s in starts) >= 2


def _lstrip(line: str) -> str:
    i = 0
    while i < len(line) and line[i].isspace():
        i += 1
    return line[i:]


def _kind(stripped: str, tokens: list[str]) -> tuple[str, int]:
    first = tokens[0]
    if stripped.startswith(("```", "~~~")):
        return _FENCE, 0
    if set(first) == {"#"} and len(first) <= 6:
        return _HEADING, len(first)
    if stripped.startswith("|"):
        return _TABLE, 0
    if first in ("-", "*", "+") or _LIST_NUMBER.fullmatch(first):
        return _LIST, 0
    if _is_record(stripped):
        return _RECORD, 0
    return _PARA, 0


def structure_units(text: str) -> list[tuple[int, int, str, int]]:
    """``(start, end, kind, level)`` of every unit, in normalised character offsets.

    Lines are split at ``\\n``. A unit is a heading line (``#`` to ``######``
    then white space or the line's end), a table row (a line starting with
    ``|``), a list item (``-``, ``*``, ``+`` or ``1.`` / ``1)`` then white
    space, with the lines that follow it up to a blank line or the next
    unit), a fenced block (from a line starting with three backticks or
    tildes to the line starting with three of the same, blank lines
    included), or a paragraph (other lines up to a blank line or the next
    unit). Leading white space of a line is ignored.
    """
    units: list[list[Any]] = []
    pos = 0  # normalised offset of the next token (before its separating space)
    n_tokens = 0
    open_kind: str | None = None
    fence: str | None = None

    for line in text.split("\n"):
        tokens = line.split()
        stripped = _lstrip(line)
        spans = []
        for t in tokens:
            start = pos + (1 if n_tokens else 0)
            spans.append((start, start + len(t)))
            pos = start + len(t)
            n_tokens += 1
        if fence is not None:
            if tokens:
                units[-1][1] = spans[-1][1]
                if stripped.startswith(fence * 3):
                    fence = None
                    open_kind = None
            continue
        if not tokens:
            open_kind = None
            continue
        kind, level = _kind(stripped, tokens)
        if kind == _PARA and open_kind in (_PARA, _LIST):
            units[-1][1] = spans[-1][1]
            continue
        units.append([spans[0][0], spans[-1][1], kind, level])
        open_kind = kind if kind in (_PARA, _LIST) else None
        if kind == _FENCE:
            fence = stripped[0]
    return [(s, e, k, lv) for s, e, k, lv in units]


def _windows(start: int, end: int, window: int, overlap: int) -> list[tuple[int, int]]:
    out = []
    s = start
    while True:
        e = min(s + window, end)
        out.append((s, e))
        if e == end:
            return out
        s = e - overlap


def structure_chunks(
    text: str, window: int, overlap: int
) -> list[tuple[int, int, str, str | None]]:
    """``(start, end, chunk, section)`` of every structure-aware chunk of one document.

    Whole consecutive units are packed while the chunk stays within
    ``window`` characters; a heading starts a new chunk unless the chunk so
    far holds only headings; a unit that does not fit an empty chunk (or one
    holding only headings, which are then cut with it) is cut into sliding
    windows. A record (a table row written ``Header: value | Header: value``)
    is a chunk of its own, the chunk before it closed first; one longer than
    ``window`` is cut at its ``" | "`` into runs of whole cells (a cell longer
    than ``window`` by sliding windows). ``section`` is the heading path
    (`` > ``-joined heading texts) in effect at the chunk's end, or None
    before the first heading.
    """
    return [c[:4] for c in _structure(text, window, overlap)]


def structure_records(text: str, window: int, overlap: int) -> list[tuple[int, int]]:
    """``(table, row)`` of every chunk of :func:`structure_chunks` (-1, -1 off a record).

    Consecutive records are one table; tables are numbered in the document
    and rows in their table, from 1.
    """
    return [c[4:] for c in _structure(text, window, overlap)]


def _structure(text: str, window: int, overlap: int) -> list[tuple[Any, ...]]:
    clean = normalise(text)
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[int, str]] = []
    cur: list[int] | None = None
    content = False
    table = row = 0
    previous = None

    def section() -> str | None:
        return " > ".join(t for _, t in stack) if stack else None

    def emit(s: int, e: int, where: tuple[int, int] = (-1, -1)) -> None:
        out.append((s, e, clean[s:e], section(), *where))

    for start, end, kind, level in structure_units(text):
        was, previous = previous, kind
        if kind == _RECORD:
            if cur is not None:
                emit(*cur)
                cur, content = None, False
            if was == _RECORD:
                row += 1
            else:
                table, row = table + 1, 1
            if end - start <= window:
                emit(start, end, (table, row))
                continue
            body = clean[start:end]
            cuts = [m.start() for m in re.finditer(r" \| ", body)]
            cells = list(zip([0, *(c + 3 for c in cuts)], [*cuts, len(body)], strict=True))
            piece: list[int] | None = None
            for s, e in cells:
                s, e = s + start, e + start
                if piece is not None and e - piece[0] <= window:
                    piece[1] = e
                    continue
                if piece is not None:
                    emit(*piece, (table, row))
                    piece = None
                if e - s <= window:
                    piece = [s, e]
                else:
                    for a, b in _windows(s, e, window, overlap):
                        emit(a, b, (table, row))
            if piece is not None:
                emit(*piece, (table, row))
            continue
        if kind == _HEADING:
            if cur is not None and content:
                emit(*cur)
                cur = None
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, clean[min(start + level + 1, end) : end]))
        is_content = kind != _HEADING
        if cur is not None and end - cur[0] <= window:
            cur[1] = end
            content = content or is_content
            continue
        if cur is not None and content:
            emit(*cur)
            cur = None
        lo = cur[0] if cur is not None else start
        if end - lo <= window:
            cur, content = [lo, end], is_content
        else:
            for s, e in _windows(lo, end, window, overlap):
                emit(s, e)
            cur, content = None, False
    if cur is not None:
        emit(*cur)
    return out
