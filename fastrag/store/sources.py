"""Read questions from files (documents: :mod:`fastrag.store.loaders.files`).

Questions: ``.txt`` (one per line), ``.jsonl`` (``question`` or ``text``,
optional ``id``), ``.csv`` (same columns) or ``.parquet`` (same columns).

Documents are read by :mod:`fastrag.store.loaders` (files, folders, pages
and databases); the names this module used to define for them
(:func:`iter_documents`, :func:`read_jsonl`, ...) are re-exported from
:mod:`fastrag.store.loaders.files`, so imports only go one way.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import DocumentError, StoreNotFoundError
from .loaders.files import (
    DOCUMENT_SUFFIXES,
    TEXT_SUFFIXES,
    file_documents,
    iter_documents,
    read_documents,
    read_jsonl,
    read_text_folder,
)

__all__ = [
    "DOCUMENT_SUFFIXES",
    "Question",
    "TEXT_SUFFIXES",
    "count_questions",
    "file_documents",
    "iter_documents",
    "read_documents",
    "read_jsonl",
    "read_questions",
    "read_text_folder",
]

_BOM = b"\xef\xbb\xbf"


# -- questions --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    """One question of a batch: its position in the input, its id (if given) and text."""

    index: int
    id: str | None
    text: Any  # normally str; anything else is reported per question, not raised


def _question_fields(obj: dict[str, Any]) -> tuple[str | None, Any]:
    qid = obj.get("id", obj.get("_id"))
    text = obj.get("question", obj.get("text"))
    return (None if qid is None else str(qid)), text


def read_questions(path: str | Path) -> Iterator[Question]:
    """Stream the questions of a ``.txt``, ``.jsonl``, ``.csv`` or ``.parquet`` file.

    A leading UTF-8 byte-order mark is not part of the first question.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file():
        raise StoreNotFoundError(f"{path}: no such file")
    if suffix == ".txt":
        with open(path, encoding="utf-8-sig") as fh:
            for i, line in enumerate(fh):
                yield Question(i, None, line.rstrip("\r\n"))
    elif suffix == ".jsonl":
        with open(path, "rb") as fh:
            for i, raw in enumerate(fh):
                if i == 0 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                try:
                    obj = orjson.loads(raw) if raw.strip() else ""
                except orjson.JSONDecodeError as exc:
                    raise DocumentError(f"{path}:{i + 1}: not valid JSON: {exc}") from exc
                if isinstance(obj, str):
                    yield Question(i, None, obj)
                elif isinstance(obj, dict):
                    yield Question(i, *_question_fields(obj))
                else:
                    raise DocumentError(f"{path}:{i + 1}: expected a JSON object or string")
    elif suffix == ".csv":
        csv.field_size_limit(sys.maxsize)
        with open(path, encoding="utf-8-sig", newline="") as fh:
            reader = csv.DictReader(fh)
            names = reader.fieldnames or []
            if "question" not in names and "text" not in names:
                raise DocumentError(
                    f"{path}: needs a header row with a 'question' or 'text' column"
                )
            for i, row in enumerate(reader):
                yield Question(i, *_question_fields(row))
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        column = "question" if "question" in names else "text" if "text" in names else None
        if column is None:
            raise DocumentError(f"{path}: needs a 'question' or 'text' column")
        columns = [column] + (["id"] if "id" in names else [])
        i = 0
        for batch in pf.iter_batches(batch_size=8192, columns=columns):
            texts = batch.column(column).to_pylist()
            ids = batch.column("id").to_pylist() if "id" in columns else [None] * len(texts)
            for qid, text in zip(ids, texts, strict=True):
                yield Question(i, None if qid is None else str(qid), text)
                i += 1
    else:
        raise DocumentError(f"{path}: questions must be .txt, .jsonl, .csv or .parquet")


def count_questions(path: str | Path) -> int | None:
    """How many questions a file holds (cheaply), or None when that needs a full parse."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if suffix in (".txt", ".jsonl"):
        n = 0
        with open(path, "rb") as fh:
            while block := fh.read(1 << 22):
                n += block.count(b"\n")
        size = path.stat().st_size
        if size:
            with open(path, "rb") as fh:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    n += 1
        return n
    return None
