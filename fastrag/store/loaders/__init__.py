"""Loaders: files, pages and database rows turned into documents with metadata.

One module per format, each a ``load(path, doc_id)`` that yields document
dicts (``id``, ``text``, metadata):

========================  ===========================  ==============
format                    module                       extra
========================  ===========================  ==============
.txt .md .markdown .rst   :mod:`.files`                (core)
.jsonl .csv               :mod:`.files`                (core)
.pdf                      :mod:`.pdf`                  ``pdf``
.html .htm                :mod:`.web`                  ``html``
.docx                     :mod:`.word`                 ``docx``
database rows             :mod:`.sql`                  (SQLite) / ``sql``
http(s) URLs              :class:`WebSource`           as the format
========================  ===========================  ==============

Files are found by :func:`iter_sources` (folders recursively, in sorted
order) as :class:`FileSource` objects, so a caller can hash a file without
parsing it (:meth:`FileSource.sha256`) and parse it only when it changed:
that is how incremental re-indexing (:mod:`fastrag.store.sync`) avoids
re-reading unchanged files. Every document a loader yields records where it
came from: ``origin`` (the file's path, or the database URL without its
password) and ``origin_sha256`` (the file's SHA-256, or the row's).

:func:`load_documents` is the one-call entry point (``fastrag.load_documents``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

import orjson

from ...errors import (
    DocumentError,
    MissingDependencyError,
    SourceError,
    SourceRefusedError,
    StoreNotFoundError,
)
from . import pdf, sql, web
from ._common import DEFAULT_LIMITS, LoadLimits
from .fetch import fetch as fetch_url
from .files import DOCUMENT_SUFFIXES, file_documents, folder_files, iter_documents
from .files import LINE_SUFFIXES as LINE_SUFFIXES  # public names of this module before .files
from .files import RICH_SUFFIXES as RICH_SUFFIXES
from .files import TEXT_SUFFIXES as TEXT_SUFFIXES
from .files import rich_documents as rich_documents

__all__ = [
    "DOCUMENT_SUFFIXES",
    "FileSource",
    "LoadLimits",
    "OnError",
    "SqlSource",
    "WebSource",
    "iter_sources",
    "load_documents",
    "load_source",
    "resolve_sources",
    "row_sha256",
]

OnError = Callable[[Path | str, str], None]
"""``on_error(source, reason)``: told about a source that was skipped."""


def _raise(source: Path | str, reason: str) -> None:
    raise SourceError(f"{source}: {reason}")


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def row_sha256(doc: dict[str, Any]) -> str:
    """SHA-256 of a document's id, text and metadata (canonical JSON, keys sorted)."""
    try:
        payload = orjson.dumps(
            {k: v for k, v in doc.items() if k != "origin_sha256"},
            option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS,
            default=str,
        )
    except TypeError as exc:  # orjson: a lone surrogate in a key or value, a bad default
        raise DocumentError(f"document {doc.get('id')!r} cannot be hashed: {exc}") from exc
    return hashlib.sha256(payload).hexdigest()


@dataclass(frozen=True, slots=True)
class FileSource:
    """One file that a loader reads.

    Attributes
    ----------
    path : Path
        The file, as found.
    doc_id : str
        Id of its document (for formats with one document per file): the
        path relative to the folder searched, or the file's name.
    """

    path: Path
    doc_id: str
    limits: LoadLimits = DEFAULT_LIMITS

    @property
    def origin(self) -> str:
        """What the file's documents record as ``origin``: the path as given."""
        return str(self.path)

    def sha256(self) -> str:
        """SHA-256 of the file's bytes (reads it, parses nothing)."""
        return _sha256_file(self.path)

    def load(self, sha256: str | None = None) -> Iterator[dict[str, Any]]:
        """Yield the file's documents, each with ``origin`` and ``origin_sha256``.

        The file is read and validated whole first
        (:func:`fastrag.store.loaders.files.file_documents`): its first problem
        raises, so a file is taken entirely or not at all.

        Parameters
        ----------
        sha256 : str, optional
            The file's hash if already computed.

        Raises
        ------
        SourceError
            The file cannot be read or parsed (the message names it and the line).
        MissingDependencyError
            The format's optional package is not installed.
        """
        return iter(file_documents(self.path, self.doc_id, sha256, self.limits))


@dataclass(eq=False)
class WebSource:
    """A page or file at an ``http(s)://`` URL (fetched once, with httpx).

    HTML pages go through the HTML loader, PDFs through the PDF loader (ids
    ``<url>#page=<n>``), ``text/*`` bodies become one document; the URL is
    the document's id, ``source`` and ``origin``. The fetch refuses
    non-public addresses unless ``allow_private``, checks every redirect,
    and is bounded by ``limits`` (see :func:`fastrag.store.loaders.fetch.fetch`);
    ``timeout``, when given, replaces ``limits.fetch_seconds``.
    """

    url: str
    timeout: float | None = None
    limits: LoadLimits = DEFAULT_LIMITS
    allow_private: bool = False
    _body: tuple[bytes, str] | None = None

    @property
    def origin(self) -> str:
        """The URL."""
        return self.url

    def _fetch(self) -> tuple[bytes, str]:
        if self._body is None:
            limits = self.limits
            if self.timeout is not None:
                limits = replace(limits, fetch_seconds=self.timeout)
            self._body = fetch_url(self.url, limits=limits, allow_private=self.allow_private)
        return self._body

    def sha256(self) -> str:
        """SHA-256 of the body (fetches it; parses nothing)."""
        return hashlib.sha256(self._fetch()[0]).hexdigest()

    def load(self, sha256: str | None = None) -> Iterator[dict[str, Any]]:
        """Yield the page's documents, each with ``origin`` and ``origin_sha256``."""
        body, kind = self._fetch()
        digest = sha256 or hashlib.sha256(body).hexdigest()
        name = self.url.rstrip("/").rsplit("/", 1)[-1] or self.url
        if kind == "application/pdf" or (not kind and name.lower().endswith(".pdf")):
            import tempfile

            with tempfile.TemporaryDirectory(prefix="fastrag-web-") as tmp:
                path = Path(tmp) / "page.pdf"
                path.write_bytes(body)
                try:
                    docs = list(pdf.load(path, self.url, self.limits))
                except SourceError as exc:
                    raise SourceError(str(exc).replace(str(path), self.url)) from exc
        elif kind in ("text/html", "application/xhtml+xml") or not kind:
            docs = [
                web.html_document(
                    body.decode("utf-8", errors="replace"),
                    doc_id=self.url, source=self.url, fallback_title=name, limits=self.limits,
                )
            ]  # fmt: skip
        elif kind.startswith("text/"):
            docs = [{"id": self.url, "text": body.decode("utf-8", errors="replace"), "title": name}]
        else:
            raise SourceError(f"{self.url}: unsupported content type {kind!r}")
        for doc in docs:
            doc["source"] = self.url
            doc["origin"] = self.url
            doc["origin_sha256"] = digest
            yield doc


@dataclass(frozen=True, slots=True)
class SqlSource:
    """The rows of a query against a database (see :func:`~fastrag.store.loaders.sql.load_sql`)."""

    url: str
    query: str
    since: Any = None
    """Fetch only rows newer than this; ``"last"``: newer than the newest already stored
    (resolved by :func:`~fastrag.store.sync.plan_sync`; everything when loaded directly)."""

    @property
    def origin(self) -> str:
        """The URL without its password."""
        return sql.safe_url(self.url)

    def load(self) -> Iterator[dict[str, Any]]:
        """Yield one document per row, with ``origin`` and ``origin_sha256`` (the row's hash)."""
        origin = self.origin
        since = None if self.since == "last" else self.since
        for doc in sql.load_sql(self.url, self.query, since=since):
            doc.setdefault("source", origin)
            doc["origin"] = origin
            doc["origin_sha256"] = row_sha256(doc)
            yield doc


def iter_sources(
    paths: Iterable[str | Path],
    *,
    on_error: OnError | None = None,
    limits: LoadLimits | None = None,
) -> Iterator[FileSource]:
    """Find the files to load under files and folders (folders recursively, sorted).

    Parameters
    ----------
    paths : iterable of str or Path
        Files and folders.
    on_error : callable, optional
        Told about a named file of an unsupported type (files of other
        types inside folders are passed over silently) and about a symbolic
        link inside a folder that leads out of it (not followed, see
        :func:`~fastrag.store.loaders.files.folder_files`); without it that
        raises :class:`~fastrag.errors.SourceError`.
    limits : LoadLimits, optional
        Caps the sources found carry into their loading (see :func:`load_documents`).

    Raises
    ------
    StoreNotFoundError
        A path does not exist.
    """
    report = on_error or _raise
    for raw in paths:
        root = Path(raw)
        if root.is_dir():
            for p, why in folder_files(root):
                if why is not None and "symbolic link" in why:
                    if on_error is None:
                        raise SourceRefusedError(f"{p}: {why}")
                    on_error(p, why)
                elif why is None:
                    yield FileSource(p, p.relative_to(root).as_posix(), limits or DEFAULT_LIMITS)
        elif root.is_file():
            if root.suffix.lower() in DOCUMENT_SUFFIXES:
                yield FileSource(root, root.name, limits or DEFAULT_LIMITS)
            else:
                report(
                    root,
                    f"unsupported file type {root.suffix!r} (use {', '.join(DOCUMENT_SUFFIXES)})",
                )
        elif root.exists():
            report(root, "not a regular file or folder")
        else:
            raise StoreNotFoundError(f"{root}: no such file or folder")


def load_documents(
    path_or_url: str | Path | Iterable[str | Path],
    *,
    query: str | None = None,
    since: Any = None,
    on_error: OnError | None = None,
    report: Any = None,
    limits: LoadLimits | None = None,
    allow_private: bool = False,
) -> Iterator[dict[str, Any]]:
    """Load documents from files, folders or a database.

    Parameters
    ----------
    path_or_url : str, Path or iterable of them
        Files and folders (``.txt .md .markdown .rst .jsonl .csv .pdf .html
        .htm .docx``; folders searched recursively), or database URLs
        (``sqlite:///repairs.db``; any SQLAlchemy URL with the ``sql`` extra),
        or ``http(s)://`` URLs of pages (HTML, PDF, plain text).
    query : str, optional
        For a database: the ``SELECT`` whose rows become documents (``id``
        and ``text`` columns required, other columns metadata).
    since : datetime or str, optional
        For a database: only rows whose ``updated_at`` is newer.
    on_error : callable, optional
        ``on_error(source, reason)`` for a file that cannot be read or
        parsed: it is skipped (nothing of it is yielded) and the others are
        loaded. Without it such a file raises :class:`~fastrag.errors.SourceError`.
        A database query that fails always raises.
    report : SourceReport, optional
        Records what happened to each file and page (see
        :class:`fastrag.store.report.SourceReport`); problems are reported,
        not raised.
    limits : LoadLimits, optional
        Caps on what one file or page may cost (sizes, text, pages, HTML
        depth, fetch time; see :class:`LoadLimits`); a source over one is
        reported by name and skipped (:class:`~fastrag.errors.SourceLimitError`).
    allow_private : bool, default False
        Fetch ``http(s)://`` URLs whose host is a loopback, private,
        link-local or otherwise non-public address; without it they are
        refused (:class:`~fastrag.errors.SourceRefusedError`) before any
        connection, on the first request and on every redirect.

    Yields
    ------
    dict
        Documents (``id``, ``text``, metadata, ``origin``, ``origin_sha256``),
        ready for :meth:`KnowledgeBase.build`, ``add`` or ``sync``.

    Examples
    --------
    >>> docs = fastrag.load_documents("manuals/")                        # doctest: +SKIP
    >>> rows = fastrag.load_documents(  # doctest: +SKIP
    ...     "sqlite:///repairs.db",
    ...     query="SELECT id, solution_text AS text, fault_code FROM repair_records",
    ... )
    """
    items = [path_or_url] if isinstance(path_or_url, (str, Path)) else list(path_or_url)
    files: list[str | Path] = []  # a run of paths, read together (ids unique across them)
    for item in [*items, None]:
        if item is None or _is_url(item):
            if files:
                yield from iter_documents(files, on_error=on_error, report=report, limits=limits)
                files = []
            if item is not None:
                source = _url_source(
                    item, query=query, since=since, limits=limits, allow_private=allow_private
                )
                yield from load_source(source, on_error=on_error, report=report)
        else:
            files.append(item)


def _is_url(item: Any) -> TypeGuard[str]:
    return isinstance(item, str) and (
        item.lower().startswith(("http://", "https://")) or sql.is_database_url(item)
    )


def _url_source(
    url: str,
    *,
    query: str | None,
    since: Any,
    limits: LoadLimits | None = None,
    allow_private: bool = False,
) -> SqlSource | WebSource:
    """The source a URL names (one that :func:`_is_url` accepts), not read yet."""
    if url.lower().startswith(("http://", "https://")):
        return WebSource(url, limits=limits or DEFAULT_LIMITS, allow_private=allow_private)
    if query is None:
        raise SourceError(f"{sql.safe_url(url)}: a database source needs a query (--query)")
    return SqlSource(url, query, since)


def resolve_sources(
    path_or_url: str | Path | Iterable[str | Path],
    *,
    query: str | None = None,
    since: Any = None,
    on_error: OnError | None = None,
    limits: LoadLimits | None = None,
    allow_private: bool = False,
) -> Iterator[FileSource | SqlSource | WebSource]:
    """Find the sources named by paths and URLs (see :func:`load_documents`), none read yet."""
    items = [path_or_url] if isinstance(path_or_url, (str, Path)) else list(path_or_url)
    for item in items:
        if _is_url(item):
            yield _url_source(
                item, query=query, since=since, limits=limits, allow_private=allow_private
            )
        else:
            yield from iter_sources([item], on_error=on_error, limits=limits)


def load_source(
    source: SqlSource | WebSource,
    *,
    on_error: OnError | None = None,
    report: Any = None,
    sha256: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield a database's rows or a page's documents; a page that fails is reported and skipped.

    A failing query always raises (it is not a bad file: the command is wrong).
    """
    if isinstance(source, SqlSource):
        yield from source.load()
        return
    try:
        docs = list(source.load(sha256))
    except (SourceError, MissingDependencyError) as exc:
        reason = str(exc).removeprefix(f"{source.url}: ")
        if report is not None:
            report.file(source.url)
            report.issue(source.url, reason)
            return
        if on_error is None:
            raise
        on_error(source.url, reason)
        return
    if report is not None:
        report.file(source.url)
        for _ in docs:
            report.document(source.url)
    yield from docs
