"""Pure-Python reference twin of :mod:`fastrag._native.chunking`.

Written literally from the specification, for obviousness rather than speed:
collapse every run of Unicode white space to one space, strip both ends, then
cut fixed windows of ``window`` characters that overlap by ``overlap``.
"""

from __future__ import annotations

import re

__all__ = ["WHITESPACE", "chunk_text", "chunk_texts", "normalise"]

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
