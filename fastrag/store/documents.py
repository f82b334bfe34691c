"""Validation of user documents and their grouping into batches."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import DocumentError
from ..text.chunking import is_structured
from ..text.utf8 import unicode_problem
from ..types import Document

__all__ = [
    "DocBatch",
    "RESERVED_FIELDS",
    "iter_batches",
    "parse_updated_at",
    "validate_document",
]

RESERVED_FIELDS = ("title", "source", "updated_at", "acl")
"""Metadata fields with a column of their own; every other field goes to ``metadata``."""

_UTC = _dt.timezone.utc


@dataclass(slots=True)
class DocBatch:
    """Validated documents, column by column."""

    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    titles: list[str | None] = field(default_factory=list)
    sources: list[str | None] = field(default_factory=list)
    updated_at: list[_dt.datetime | None] = field(default_factory=list)
    acl: list[list[str] | None] = field(default_factory=list)
    metadata: list[str | None] = field(default_factory=list)
    structured: list[bool] = field(default_factory=list)
    """Whether each document's ``format`` asks ``chunking="auto"`` for structure."""
    sections: list[str | None] = field(default_factory=list)
    """Each document's own ``section`` (a string field of its metadata), else ``None``:
    the section of its chunks that have no heading path of their own."""
    first_index: int = 0
    text_chars: int = 0

    def __len__(self) -> int:
        return len(self.ids)


def parse_updated_at(value: Any, *, where: str) -> _dt.datetime | None:
    """Turn an ``updated_at`` value into an aware UTC datetime (or ``None``)."""
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.replace(tzinfo=_UTC) if value.tzinfo is None else value.astimezone(_UTC)
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day, tzinfo=_UTC)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return _dt.datetime.fromtimestamp(value, tz=_UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise DocumentError(f"{where}: updated_at {value!r} is not a valid epoch time") from exc
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = _dt.datetime.fromisoformat(text)
        except ValueError as exc:
            raise DocumentError(
                f"{where}: updated_at {value!r} is not an ISO-8601 date or time"
            ) from exc
        return parse_updated_at(parsed, where=where)
    raise DocumentError(
        f"{where}: updated_at must be a datetime, date, ISO-8601 string or epoch seconds, "
        f"got {type(value).__name__}"
    )


def _optional_str(value: Any, name: str, where: str) -> str | None:
    if value is None:
        return value
    if not isinstance(value, str):
        raise DocumentError(f"{where}: {name} must be a string, got {type(value).__name__}")
    problem = unicode_problem(value)
    if problem:
        raise DocumentError(f"{where}: {name} {value!r} {problem}")
    return value


def _acl(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise DocumentError(
            f"{where}: acl must be a list of principal strings, got {type(value).__name__}"
        )
    out = list(value)
    for p in out:
        if not isinstance(p, str) or not p:
            raise DocumentError(f"{where}: acl entries must be non-empty strings, got {p!r}")
        problem = unicode_problem(p)
        if problem:
            raise DocumentError(f"{where}: acl entry {p!r} {problem}")
    return out


def _split(doc: Any, index: int | None) -> tuple[str, str, Mapping[str, Any]]:
    at = "" if index is None else f" at position {index}"
    paren = "" if index is None else f" (position {index})"
    if type(doc) is not dict and isinstance(doc, Document):
        doc_id, text, meta = doc.id, doc.text, (doc.metadata or {})
    elif type(doc) is dict or isinstance(doc, Mapping):
        if "id" not in doc:
            raise DocumentError(f"document{at} has no 'id'")
        if "text" not in doc:
            raise DocumentError(f"document {doc['id']!r}{paren} has no 'text'")
        doc_id, text = doc["id"], doc["text"]
        meta = {k: v for k, v in doc.items() if k not in ("id", "text")}
        nested = meta.pop("metadata", None)
        if nested is not None:
            if not isinstance(nested, Mapping):
                raise DocumentError(f"document {doc_id!r}{paren}: metadata must be a mapping")
            meta = {**nested, **meta}
    else:
        raise DocumentError(
            f"document{at} is a {type(doc).__name__}; expected "
            "fastrag.Document or a dict with 'id' and 'text'"
        )
    if not isinstance(doc_id, str):
        raise DocumentError(f"document{at}: id must be a string, got {type(doc_id).__name__}")
    if not doc_id.strip():
        raise DocumentError(f"document{at}: id is empty")
    problem = unicode_problem(doc_id)
    if problem:
        raise DocumentError(f"document{at}: id {doc_id!r} {problem}")
    if not isinstance(text, str):
        raise DocumentError(
            f"document {doc_id!r}{paren}: text must be a string, got {type(text).__name__}"
        )
    problem = unicode_problem(text)
    if problem:
        raise DocumentError(f"document {doc_id!r}{paren}: text {problem}")
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise DocumentError(f"document {doc_id!r}{paren}: metadata must be a mapping")
    return doc_id, text, meta


_Record = tuple[
    str, str, "str | None", "str | None", "_dt.datetime | None", "list[str] | None", "str | None",
    bool, "str | None",
]  # fmt: skip
"""id, text, title, source, updated_at, acl, metadata JSON, structured, section (a plain tuple)."""


def _record(doc: Any, index: int | None) -> _Record:
    doc_id, text, meta = _split(doc, index)
    where = f"document {doc_id!r}"
    extra = {k: v for k, v in meta.items() if k not in RESERVED_FIELDS}
    encoded = None
    if extra:
        try:
            encoded = orjson.dumps(
                extra, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY
            ).decode()
        except TypeError as exc:
            raise DocumentError(f"{where}: metadata is not JSON-serialisable: {exc}") from exc
    return (
        doc_id,
        text,
        _optional_str(meta.get("title"), "title", where),
        _optional_str(meta.get("source"), "source", where),
        parse_updated_at(meta.get("updated_at"), where=where),
        _acl(meta.get("acl"), where),
        encoded,
        is_structured(meta.get("format")),
        section if isinstance(section := meta.get("section"), str) and section else None,
    )


def validate_document(doc: Any, index: int | None = None) -> str:
    """Check one document as :func:`iter_batches` would; return its id.

    Parameters
    ----------
    doc : Document or mapping
        A document with ``id`` and ``text``.
    index : int, optional
        Its position in the caller's input, for messages.

    Returns
    -------
    str
        The document's id.

    Raises
    ------
    DocumentError
        The document is malformed (the message says how, and names its id
        when it has a usable one).
    """
    return _record(doc, index)[0]


def iter_batches(
    docs: Iterable[Any], *, batch_chars: int = 4 << 20, start_index: int = 0
) -> Iterator[DocBatch]:
    """Validate documents and yield them in batches of about ``batch_chars`` characters.

    Parameters
    ----------
    docs : iterable
        ``Document`` objects or dicts with ``id`` and ``text``.
    batch_chars : int
        Characters of text per batch (bounds memory while streaming).
    start_index : int
        Position of the first document, for error messages.

    Yields
    ------
    DocBatch
        Validated documents. Duplicate ids within the stream raise
        :class:`~fastrag.errors.DuplicateDocumentError`.
    """
    from ..errors import DuplicateDocumentError

    if isinstance(docs, (str, bytes, Mapping, Document)):
        raise DocumentError(
            "docs must be an iterable of documents; wrap a single document in a list"
        )
    seen: set[str] = set()
    batch = DocBatch(first_index=start_index)
    for index, doc in enumerate(docs, start_index):
        doc_id, text, title, source, updated_at, acl, metadata, structured, section = _record(
            doc, index
        )
        if doc_id in seen:
            raise DuplicateDocumentError(
                f"document id {doc_id!r} appears twice (again at position {index})"
            )
        seen.add(doc_id)
        batch.ids.append(doc_id)
        batch.texts.append(text)
        batch.titles.append(title)
        batch.sources.append(source)
        batch.updated_at.append(updated_at)
        batch.acl.append(acl)
        batch.metadata.append(metadata)
        batch.structured.append(structured)
        batch.sections.append(section)
        batch.text_chars += len(text)
        if batch.text_chars >= batch_chars:
            yield batch
            batch = DocBatch(first_index=index + 1)
    if batch.ids:
        yield batch
