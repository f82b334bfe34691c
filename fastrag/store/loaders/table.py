"""CSV: a header row with ``text`` (and optionally ``id`` and metadata columns), one document a row."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import DocumentError

__all__ = ["SUFFIXES", "load"]

SUFFIXES = (".csv",)


def load(path: Path, doc_id: str) -> Iterator[dict[str, Any]]:
    """Yield one document per row; a row without ``id`` gets ``<file name>:<line>``."""
    csv.field_size_limit(sys.maxsize)
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames is None or "text" not in reader.fieldnames:
            raise DocumentError(
                f"{path}: a CSV of documents needs a header row with a 'text' column"
            )
        for rowno, row in enumerate(reader, 2):
            doc: dict[str, Any] = {k: v for k, v in row.items() if k is not None and v != ""}
            doc.setdefault("text", "")
            if not doc.get("id"):
                doc["id"] = f"{path.name}:{rowno}"
            yield doc
