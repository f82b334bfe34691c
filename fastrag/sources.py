"""Read documents from files: JSON Lines or a folder of text files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .errors import DocumentError, StoreNotFoundError

__all__ = ["TEXT_SUFFIXES", "read_documents", "read_jsonl", "read_text_folder"]

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream documents from a JSON Lines file (one object with ``id`` and ``text`` a line).

    BEIR-style ``_id`` is accepted for ``id``; a ``title`` stays metadata.
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


def read_text_folder(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream every text file under a folder; the id is the path relative to it."""
    root = Path(path)
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        if file.suffix.lower() not in TEXT_SUFFIXES:
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError(f"{file}: not UTF-8 text: {exc}") from exc
        rel = file.relative_to(root).as_posix()
        yield {"id": rel, "text": text, "title": file.stem, "source": str(file)}


def read_documents(path: str | Path) -> Iterator[dict[str, Any]]:
    """Documents from a ``.jsonl`` file or a folder of text files."""
    p = Path(path)
    if p.is_dir():
        return read_text_folder(p)
    if p.is_file():
        return read_jsonl(p)
    raise StoreNotFoundError(f"{p}: no such file or folder")
