"""Helpers shared by the loaders: optional imports, limits, rendering blocks as structured text."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType

from ...errors import ConfigError, MissingDependencyError, SourceLimitError

__all__ = [
    "DEFAULT_LIMITS",
    "Blocks",
    "LoadLimits",
    "check_text",
    "clean",
    "require",
    "table_rows",
]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import an optional dependency, or raise :class:`MissingDependencyError` with the fix."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(
            f"{what} needs the optional package {module.split('.')[0]!r}: "
            f"pip install 'fastrag-engine[{extra}]'"
        ) from exc


@dataclass(frozen=True, slots=True)
class LoadLimits:
    """Caps on what one source may cost to read (``load_documents(..., limits=...)``).

    A source over a cap is refused with :class:`~fastrag.errors.SourceLimitError`
    naming it and the cap (reported like any unreadable file; the others are
    read), except ``html_depth``, which flattens instead of refusing.

    Attributes
    ----------
    part_bytes : int
        Largest file read whole (a text or HTML file, a downloaded body; a
        ``.jsonl`` or ``.csv`` file streams and is not held to it) and largest
        uncompressed member of a ``.docx`` archive (64 MiB).
    text_chars : int
        Most characters of text taken from one file or page (32 million).
    zip_ratio : int
        Largest uncompressed / compressed size of a ``.docx`` member (200);
        members under 1 MiB are not held to it.
    pdf_pages : int
        Most pages read from one PDF (5,000).
    html_depth : int
        Deepest element nesting kept from an HTML page (256); tags nested
        deeper are dropped and their text joins the enclosing element's.
    fetch_seconds : float
        Deadline of one web fetch, redirects and body included (30 s).
    redirects : int
        Most redirects followed by one web fetch (5).
    ocr : bool
        Read a PDF page without a text layer with Tesseract (True; see
        :mod:`~fastrag.store.loaders.ocr`); False refuses such a PDF as before.
    ocr_languages : str
        Tesseract languages, ``+``-joined (``"eng+chi_sim"``); those installed are used.
    ocr_seconds : float
        Deadline of one page's (or image's) OCR (120 s).
    """

    part_bytes: int = 64 << 20
    text_chars: int = 32_000_000
    zip_ratio: int = 200
    pdf_pages: int = 5_000
    html_depth: int = 256
    fetch_seconds: float = 30.0
    redirects: int = 5
    ocr: bool = True
    ocr_languages: str = "eng+chi_sim"
    ocr_seconds: float = 120.0

    def __post_init__(self) -> None:
        for name in ("part_bytes", "text_chars", "zip_ratio", "pdf_pages", "html_depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"LoadLimits.{name} must be a positive integer, not {value!r}")
        if not isinstance(self.redirects, int) or self.redirects < 0:
            raise ConfigError(f"LoadLimits.redirects must be 0 or more, not {self.redirects!r}")
        if not isinstance(self.ocr, bool):
            raise ConfigError(f"LoadLimits.ocr must be True or False, not {self.ocr!r}")
        langs = self.ocr_languages
        if not isinstance(langs, str) or not all(p.isidentifier() for p in langs.split("+")):
            raise ConfigError(
                f"LoadLimits.ocr_languages must be Tesseract names joined by '+', not {langs!r}"
            )
        if not self.ocr_seconds > 0:
            raise ConfigError(f"LoadLimits.ocr_seconds must be positive, not {self.ocr_seconds!r}")
        if not self.fetch_seconds > 0:
            raise ConfigError(
                f"LoadLimits.fetch_seconds must be positive, not {self.fetch_seconds!r}"
            )


DEFAULT_LIMITS = LoadLimits()
"""The caps used when none are given."""


def check_text(text_chars: int, limits: LoadLimits, where: object) -> None:
    """Raise :class:`SourceLimitError` when ``text_chars`` is over ``limits.text_chars``."""
    if text_chars > limits.text_chars:
        raise SourceLimitError(
            f"{where}: more than {limits.text_chars:,} characters of text (LoadLimits.text_chars)"
        )


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
