"""Helpers shared by the loaders: optional imports, rendering blocks as structured text."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from types import ModuleType

from ...errors import MissingDependencyError

__all__ = ["Blocks", "clean", "require", "table_rows"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import an optional dependency, or raise :class:`MissingDependencyError` with the fix."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{what} needs the optional package {module.split('.')[0]!r}: "
            f"pip install 'fastrag-engine[{extra}]'"
        ) from exc


def clean(text: str | None) -> str:
    """Collapse white space (a cell or a line of a heading stays on one line)."""
    return " ".join(text.split()) if text else ""


def table_rows(rows: Sequence[Sequence[str | None]], *, header: bool = True) -> list[str]:
    """One line of text per table row, each cell repeated with its column name.

    With ``header``, the first row names the columns and every later row
    becomes ``"Name: value | Other: value"`` (empty cells left out, a cell
    under an empty header kept bare); without one, ``"value | value"``.
    """
    cells = [[clean(c) for c in row] for row in rows]
    cells = [row for row in cells if any(row)]
    if not cells:
        return []
    if not header or len(cells) == 1:
        return [" | ".join(c for c in row if c) for row in cells]
    names = cells[0]
    out = []
    for row in cells[1:]:
        parts = []
        for j, value in enumerate(row):
            if not value:
                continue
            name = names[j] if j < len(names) else ""
            parts.append(f"{name}: {value}" if name else value)
        if parts:
            out.append(" | ".join(parts))
    return out


class Blocks:
    """A document's structure written as the text the structure-aware chunker reads.

    Headings become ``#`` lines, list items ``-`` lines, code a fenced
    block; paragraphs and table rows are separated by blank lines, so each
    is one unit (see :mod:`fastrag._native.structure`).
    """

    def __init__(self) -> None:
        self.parts: list[str] = []

    def heading(self, text: str, level: int) -> None:
        """Add a heading of level 1-6."""
        text = clean(text)
        if text:
            self.parts.append("#" * min(max(level, 1), 6) + " " + text)

    def paragraph(self, text: str) -> None:
        """Add a paragraph (white space collapsed)."""
        text = clean(text)
        if text:
            self.parts.append(text)

    def item(self, text: str) -> None:
        """Add a list item."""
        text = clean(text)
        if text:
            self.parts.append("- " + text)

    def rows(self, lines: Iterable[str]) -> None:
        """Add table rows (one unit each)."""
        self.parts.extend(line for line in lines if line)

    def code(self, text: str) -> None:
        """Add a preformatted block as a fenced block."""
        if text.strip():
            self.parts.append("```\n" + text.strip("\n").replace("```", "'''") + "\n```")

    def text(self) -> str:
        """Return the blocks, separated by blank lines."""
        return "\n\n".join(self.parts)
