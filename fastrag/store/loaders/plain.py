"""Text files: ``.txt``, ``.md``, ``.markdown``, ``.rst``: one document per file.

The text is kept as written, so Markdown headings, lists and tables are the
units of structure-aware chunking.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["SUFFIXES", "load"]

SUFFIXES = (".txt", ".md", ".markdown", ".rst")


def load(path: Path, doc_id: str) -> Iterator[dict[str, Any]]:
    """Yield the file as one document (id ``doc_id``, title the file's stem)."""
    yield {
        "id": doc_id,
        "text": path.read_text(encoding="utf-8"),
        "title": path.stem,
        "source": str(path),
    }
