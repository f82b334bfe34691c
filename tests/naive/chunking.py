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
_LIST_NUMBER = re.compile(r"[0-9]{1,9}[.)]")


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
    windows. ``section`` is the heading path (`` > ``-joined heading texts)
    in effect at the chunk's end, or None before the first heading.
    """
    clean = normalise(text)
    out: list[tuple[int, int, str, str | None]] = []
    stack: list[tuple[int, str]] = []
    cur: list[int] | None = None
    content = False

    def section() -> str | None:
        return " > ".join(t for _, t in stack) if stack else None

    def emit(s: int, e: int) -> None:
        out.append((s, e, clean[s:e], section()))

    for start, end, kind, level in structure_units(text):
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
