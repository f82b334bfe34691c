"""Incremental re-indexing: what to add, replace and delete to make a store match its sources.

Every document a loader yields records its ``origin`` (a file's path, a
database URL) and ``origin_sha256`` (the file's SHA-256, or the row's; see
:mod:`fastrag.store.loaders`); both are kept in the store's metadata. Given
the documents stored and the sources (or documents) wanted now,
:func:`plan_sync` decides, without changing anything:

- a file whose hash equals the one stored for every document of its origin
  is *unchanged*: it is hashed but not parsed, and its documents stay;
- any other file is parsed; each of its documents is *added* (a new id),
  *replaced* (an id stored with another hash) or unchanged;
- a document given directly (a dict or :class:`~fastrag.Document`) is
  compared by its ``origin_sha256``, computed from its id, text and
  metadata when it has none (and recorded on it, so the next sync can
  compare);
- with ``delete_missing`` (the default), stored documents that none of the
  sources yields any more are *deleted*: the result equals a fresh build of
  the same sources;
- a file that cannot be read or parsed is reported and its stored documents
  are kept as they are.

The knowledge base applies a plan in one atomic step
(:meth:`~fastrag.KnowledgeBase.sync`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from ..errors import DocumentError, DuplicateDocumentError, MissingDependencyError, SourceError
from ..text.utf8 import unicode_problem
from ..types import Document
from .chunks import ChunkStore, instance_starts
from .documents import validate_document
from .loaders import FileSource, OnError, SqlSource, WebSource, row_sha256

__all__ = [
    "OriginChange",
    "StoredDocument",
    "SyncPlan",
    "latest_update",
    "plan_sync",
    "stored_documents",
]


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """What the store knows of one live document: its id, origin and content hash."""

    doc_id: str
    origin: str | None
    sha256: str | None
    updated_at: Any = None


@dataclass(slots=True)
class OriginChange:
    """Documents of one origin (a file, a database, a document id) by what a sync does to them."""

    origin: str
    added: int = 0
    replaced: int = 0
    deleted: int = 0
    unchanged: int = 0
    failed: str | None = None

    @property
    def changed(self) -> bool:
        """Whether anything of this origin is added, replaced or deleted."""
        return bool(self.added or self.replaced or self.deleted)


@dataclass(slots=True)
class SyncPlan:
    """What a sync adds, replaces and deletes (nothing is changed by making one).

    Attributes
    ----------
    add, replace : list of dict
        New documents, and documents whose id is stored with other content.
    delete : list of str
        Ids of stored documents no source yields any more.
    unchanged : list of str
        Ids of stored documents that stay as they are.
    origins : dict
        Origin -> :class:`OriginChange`, in the order the sources came.
    """

    add: list[dict[str, Any]] = field(default_factory=list)
    replace: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    origins: dict[str, OriginChange] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """Whether applying the plan changes anything."""
        return bool(self.add or self.replace or self.delete)

    @property
    def failed(self) -> list[OriginChange]:
        """Sources that could not be read (their stored documents are kept)."""
        return [o for o in self.origins.values() if o.failed is not None]

    def documents(self) -> list[dict[str, Any]]:
        """The documents to add: new ones, then replacements."""
        return self.add + self.replace

    def removed_ids(self) -> list[str]:
        """Ids to delete before the documents are added: replaced, then deleted ones."""
        return [d["id"] for d in self.replace] + self.delete

    def summary(self) -> str:
        """``"2 added, 1 replaced, 0 deleted, 7 unchanged documents"``."""
        return (
            f"{len(self.add)} added, {len(self.replace)} replaced, {len(self.delete)} deleted, "
            f"{len(self.unchanged)} unchanged documents"
        )


def stored_documents(store: ChunkStore) -> list[StoredDocument]:
    """Id, origin, ``origin_sha256`` and ``updated_at`` of every live document, in store order."""
    out: list[StoredDocument] = []
    for seg in store.segments:
        if len(seg) == 0:
            continue
        starts = instance_starts(seg.batch)
        alive = seg.alive
        reader = seg.reader
        dates = seg.batch.column("updated_at").take(pa.array(starts)).to_pylist()
        parsed: dict[str | None, tuple[str | None, str | None]] = {}
        for lo, when in zip(starts.tolist(), dates, strict=True):
            if alive is not None and not alive[lo]:
                continue
            raw = reader.metadata(lo)
            info = parsed.get(raw)
            if info is None:
                meta = orjson.loads(raw) if raw else {}
                meta = meta if isinstance(meta, dict) else {}
                origin, sha = meta.get("origin"), meta.get("origin_sha256")
                info = parsed[raw] = (
                    origin if isinstance(origin, str) else None,
                    sha if isinstance(sha, str) else None,
                )
            out.append(StoredDocument(reader.doc_id(lo), *info, when))
    return out


def _as_dict(doc: Any, index: int) -> dict[str, Any]:
    if isinstance(doc, Document):
        return {**(doc.metadata or {}), "id": doc.id, "text": doc.text}
    if isinstance(doc, Mapping):
        if "id" not in doc:
            raise DocumentError(f"document at position {index} has no 'id'")
        out = dict(doc)
        nested = out.pop("metadata", None)
        if isinstance(nested, Mapping):
            out = {**nested, **out}
        elif nested is not None:
            raise DocumentError(
                f"document {out['id']!r} (position {index}): metadata must be a mapping"
            )
        return out
    raise DocumentError(
        f"item at position {index} is a {type(doc).__name__}; expected a document (dict or "
        "fastrag.Document) or a source from fastrag.store.loaders"
    )


def plan_sync(
    stored: Iterable[StoredDocument],
    incoming: Iterable[Any],
    *,
    delete_missing: bool = True,
    on_error: OnError | None = None,
) -> SyncPlan:
    """Decide what to add, replace and delete so the store holds exactly ``incoming``.

    Parameters
    ----------
    stored : iterable of StoredDocument
        The store's live documents (:func:`stored_documents`).
    incoming : iterable
        :class:`~fastrag.store.loaders.FileSource`,
        :class:`~fastrag.store.loaders.WebSource` and
        :class:`~fastrag.store.loaders.SqlSource` objects (read lazily: an
        unchanged file is only hashed), documents (dicts or
        :class:`~fastrag.Document`), in any mix.
    delete_missing : bool, default True
        Delete stored documents that nothing in ``incoming`` yields (a full
        sync); False only adds and replaces (``--since``).
    on_error : callable, optional
        ``on_error(source, reason)`` for a file that cannot be read or
        parsed; its stored documents are kept. Without it the error is raised.

    Returns
    -------
    SyncPlan
        The decisions; nothing is changed.

    Raises
    ------
    SourceError
        A file cannot be read (without ``on_error``) or a database query fails.
    DuplicateDocumentError
        Two incoming documents share an id.
    """
    by_id: dict[str, StoredDocument] = {}
    by_origin: dict[str, list[StoredDocument]] = {}
    for s in stored:
        by_id[s.doc_id] = s
        if s.origin is not None:
            by_origin.setdefault(s.origin, []).append(s)
    plan = SyncPlan()
    keep: set[str] = set()  # stored ids that stay (unchanged or of a failed source)
    seen: dict[str, str] = {}  # incoming id -> its origin, for duplicate errors

    def change(origin: str) -> OriginChange:
        entry = plan.origins.get(origin)
        if entry is None:
            entry = plan.origins[origin] = OriginChange(origin)
        return entry

    def take(doc: dict[str, Any], origin: str) -> None:
        doc_id = doc["id"]
        if not isinstance(doc_id, str):
            raise DocumentError(f"{origin}: document ids are strings, got {type(doc_id).__name__}")
        problem = unicode_problem(doc_id)
        if problem:
            raise DocumentError(f"{origin}: document id {doc_id!r} {problem}")
        if doc_id in seen:
            raise DuplicateDocumentError(
                f"document id {doc_id!r} comes from {seen[doc_id]} and again from {origin}"
            )
        seen[doc_id] = origin
        old = by_id.get(doc_id)
        entry = change(origin)
        if old is None:
            plan.add.append(doc)
            entry.added += 1
        elif old.sha256 is not None and old.sha256 == doc.get("origin_sha256"):
            plan.unchanged.append(doc_id)
            keep.add(doc_id)
            entry.unchanged += 1
        else:
            plan.replace.append(doc)
            entry.replaced += 1

    for index, item in enumerate(incoming):
        if isinstance(item, (FileSource, WebSource)):
            origin = item.origin
            entry = change(origin)
            try:
                digest = item.sha256()
                old = by_origin.get(origin, [])
                if old and all(s.sha256 == digest for s in old):
                    for s in old:
                        if s.doc_id in seen:
                            raise DuplicateDocumentError(
                                f"document id {s.doc_id!r} comes from {seen[s.doc_id]} and again "
                                f"from {origin}"
                            )
                        seen[s.doc_id] = origin
                        plan.unchanged.append(s.doc_id)
                        keep.add(s.doc_id)
                    entry.unchanged += len(old)
                    continue
                docs = list(item.load(digest))
            except (SourceError, MissingDependencyError, OSError) as exc:
                if on_error is None:
                    if isinstance(exc, OSError):
                        raise SourceError(
                            f"{origin}: cannot be read: {exc.strerror or exc}"
                        ) from exc
                    raise
                reason = str(exc).removeprefix(f"{origin}: ")
                entry.failed = reason
                keep.update(s.doc_id for s in by_origin.get(origin, []))
                on_error(Path(origin) if isinstance(item, FileSource) else origin, reason)
                continue
            for doc in docs:
                take(doc, origin)
        elif isinstance(item, SqlSource):
            origin = item.origin
            change(origin)
            if item.since == "last":
                item = replace(item, since=latest_update(by_id.values(), origin))
            for doc in item.load():
                take(doc, origin)
        else:
            doc = _as_dict(item, index)
            validate_document(doc, index)  # before hashing: a lone surrogate cannot be hashed
            if not isinstance(doc.get("origin_sha256"), str):
                doc["origin_sha256"] = row_sha256(doc)
            named = doc.get("origin") if isinstance(doc.get("origin"), str) else None
            take(doc, named or f"document {doc['id']!r}")
    if delete_missing:
        for s in by_id.values():
            if s.doc_id not in keep and s.doc_id not in seen:
                plan.delete.append(s.doc_id)
                change(s.origin or f"document {s.doc_id!r}").deleted += 1
    return plan


def latest_update(stored: Iterable[StoredDocument], origin: str) -> Any:
    """Return the newest ``updated_at`` among stored documents of ``origin`` (None if none is).

    What ``fastrag index URL --since`` fetches after, when no time is given.
    """
    dates = [s.updated_at for s in stored if s.origin == origin and s.updated_at is not None]
    return max(dates) if dates else None
