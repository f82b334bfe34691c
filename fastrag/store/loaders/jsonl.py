"""JSON Lines: one document a line (``id`` or BEIR's ``_id``, ``text``, any metadata)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ...errors import DocumentError

__all__ = ["SUFFIXES", "load", "read_jsonl"]

SUFFIXES = (".jsonl",)


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream documents from a JSON Lines file (one object with ``id`` and ``text`` a line).

    BEIR-style ``_id`` is accepted for ``id``; other fields are metadata.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise DocumentError(f"{path}:{lineno}: not valid JSON: {exc}") from exc
            if not isinstance(obj, dict):
                raise DocumentError(f"{path}:{lineno}: expected a JSON object")
            if "id" not in obj and "_id" in obj:
                obj["id"] = obj.pop("_id")
            yield obj


def load(path: Path, doc_id: str) -> Iterator[dict[str, Any]]:
    """Yield the documents of a JSON Lines file (their own ids; ``doc_id`` is unused)."""
    return read_jsonl(path)
