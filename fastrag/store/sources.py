"""Read documents and questions from files.

Documents come from :mod:`fastrag.store.loaders` (one loader per format:
text and Markdown, JSON Lines, CSV, PDF, HTML, Word, database rows); the
functions here are the file-level entry points the CLI and older callers use.

Questions: ``.txt`` (one per line), ``.jsonl`` (``question`` or ``text``,
optional ``id``), ``.csv`` (same columns) or ``.parquet`` (same columns).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import DocumentError, StoreNotFoundError
from .loaders import DOCUMENT_SUFFIXES, OnError, load_documents
from .loaders.jsonl import read_jsonl
from .loaders.plain import SUFFIXES as TEXT_SUFFIXES

__all__ = [
    "DOCUMENT_SUFFIXES",
    "Question",
    "TEXT_SUFFIXES",
    "count_questions",
    "iter_documents",
    "read_documents",
    "read_jsonl",
    "read_questions",
    "read_text_folder",
]


def iter_documents(
    paths: Iterable[str | Path], *, on_error: OnError | None = None
) -> Iterator[dict[str, Any]]:
    """Stream documents from files and folders (folders recursively, sorted).

    Parameters
    ----------
    paths : iterable of str or Path
        Files (any of :data:`DOCUMENT_SUFFIXES`) and folders.
    on_error : callable, optional
        ``on_error(path, reason)`` for a file that cannot be read or parsed;
        the file is skipped and the others are still read. Without it such a
        file raises :class:`~fastrag.errors.SourceError` naming it.

    Yields
    ------
    dict
        Documents with ``id`` and ``text`` (a text file's id is its path
        relative to the folder it was found in, or its name), ``origin`` and
        ``origin_sha256`` (see :mod:`fastrag.store.loaders`).
    """
    return load_documents(list(paths), on_error=on_error)


def read_text_folder(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream every document file under a folder (see :func:`iter_documents`)."""
    return iter_documents([path])


def read_documents(path: str | Path) -> Iterator[dict[str, Any]]:
    """Documents from one file or folder (see :func:`iter_documents`)."""
    return iter_documents([path])


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
    """Stream the questions of a ``.txt``, ``.jsonl``, ``.csv`` or ``.parquet`` file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file():
        raise StoreNotFoundError(f"{path}: no such file")
    if suffix == ".txt":
        with open(path, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                yield Question(i, None, line.rstrip("\r\n"))
    elif suffix == ".jsonl":
        with open(path, "rb") as fh:
            for i, line in enumerate(fh):
                try:
                    obj = orjson.loads(line) if line.strip() else ""
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
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            names = reader.fieldnames or []
            if "question" not in names and "text" not in names:
                raise DocumentError(f"{path}: needs a header row with a 'question' or 'text' column")
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
            for qid, text in zip(ids, texts):
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
