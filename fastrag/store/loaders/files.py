"""Documents from files and folders: finding them, reading every format, validating.

The text formats are read here: ``.txt`` / ``.md`` / ``.markdown`` / ``.rst``
(one document per file), ``.jsonl`` (one object per line with ``id`` (or
BEIR's ``_id``), ``text`` and any metadata), ``.csv`` (a header row with
``text`` and optionally ``id`` and metadata columns); PDF, HTML and Word
files go to their loader modules (:mod:`.pdf`, :mod:`.web`, :mod:`.word`).
Folders are searched recursively, in sorted order (:func:`folder_files`).
Everything streams: no file is read whole into memory except a single
document (or one PDF's pages). Every document records the file it came from
as ``origin`` and the file's SHA-256 as ``origin_sha256`` (what incremental
re-indexing compares, :mod:`fastrag.store.sync`). A bad line, an unreadable
file or a repeated id is reported with its file and line
(:class:`~fastrag.store.report.SourceReport`) and the rest is read; a UTF-8
byte-order mark is dropped.
"""

from __future__ import annotations

import csv
import hashlib
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from ...errors import (
    DocumentError,
    DuplicateDocumentError,
    MissingDependencyError,
    SourceError,
    SourceLimitError,
    SourceRefusedError,
    StoreNotFoundError,
)
from ..documents import validate_document
from ..report import SourceIssue, SourceReport
from . import pdf, web, word
from ._common import DEFAULT_LIMITS, LoadLimits

__all__ = [
    "DOCUMENT_SUFFIXES",
    "LINE_SUFFIXES",
    "RICH_SUFFIXES",
    "TEXT_SUFFIXES",
    "file_documents",
    "folder_files",
    "iter_documents",
    "read_documents",
    "read_jsonl",
    "read_text_folder",
    "rich_documents",
]

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
"""One document per file, the text as written."""
LINE_SUFFIXES = (".jsonl", ".csv")
"""One document per line or row."""
_RICH: dict[str, ModuleType] = {
    suffix: module for module in (pdf, web, word) for suffix in module.SUFFIXES
}
RICH_SUFFIXES: tuple[str, ...] = tuple(_RICH)
"""Formats parsed by a loader module (PDF, HTML, Word)."""
DOCUMENT_SUFFIXES: tuple[str, ...] = TEXT_SUFFIXES + LINE_SUFFIXES + RICH_SUFFIXES
"""Every file suffix documents are read from."""

OnError = Callable[[Path, str], None]
_BOM = b"\xef\xbb\xbf"


def rich_documents(
    path: Path, doc_id: str, limits: LoadLimits = DEFAULT_LIMITS
) -> Iterator[dict[str, Any]]:
    """The documents of a PDF, HTML or Word file (its loader module's ``load``)."""
    return _RICH[path.suffix.lower()].load(path, doc_id, limits)  # type: ignore[no-any-return]


class _Sink:
    """Where reading problems go: a report (reading goes on), or an exception (strict)."""

    def __init__(self, report: SourceReport | None, on_error: OnError | None) -> None:
        if report is None and on_error is not None:

            def legacy(issue: SourceIssue) -> None:
                at = "" if issue.line is None else f"line {issue.line}: "
                on_error(issue.path, f"{at}{issue.reason}")

            report = SourceReport(on_issue=legacy)
        self.report = report

    def issue(
        self,
        path: Path,
        reason: str,
        line: int | None = None,
        skipped: str = "file",
        error: type[DocumentError] | type[StoreNotFoundError] = DocumentError,
    ) -> None:
        if self.report is None:
            raise error(f"{SourceIssue(path, line, reason).where}: {reason}")
        self.report.issue(path, reason, line=line, skipped=skipped)

    def document(self, path: Path) -> None:
        if self.report is not None:
            self.report.document(path)


def _jsonl_objects(path: Path, sink: _Sink) -> Iterator[tuple[int, dict[str, Any]]]:
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if lineno == 1 and line.startswith(_BOM):
                line = line[len(_BOM) :]
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                why = f"not valid JSON ({exc.msg} at column {exc.colno})"
                sink.issue(path, why, lineno, "line")
                continue
            if not isinstance(obj, dict):
                why = f"expected a JSON object, got {type(obj).__name__}"
                sink.issue(path, why, lineno, "line")
                continue
            if "id" not in obj and "_id" in obj:
                obj["id"] = obj.pop("_id")
            yield lineno, obj


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream documents from a JSON Lines file (one object with ``id`` and ``text`` a line).

    BEIR-style ``_id`` is accepted for ``id``; other fields are metadata. A
    leading UTF-8 byte-order mark is ignored. A bad line raises
    :class:`~fastrag.errors.DocumentError` naming the file and line.
    """
    for _, obj in _jsonl_objects(Path(path), _Sink(None, None)):
        yield obj


class _Utf8Lines:
    """A binary file's lines decoded one by one, so a decoding error names its line."""

    def __init__(self, fh: Any) -> None:
        self._fh = fh
        self.line = 0

    def __iter__(self) -> Iterator[str]:
        for raw in self._fh:
            self.line += 1
            if self.line == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            yield raw.decode("utf-8")


def _read_csv(path: Path, sink: _Sink) -> Iterator[tuple[int, dict[str, Any]]]:
    csv.field_size_limit(sys.maxsize)
    with open(path, "rb") as fh:
        lines = _Utf8Lines(fh)
        reader = csv.DictReader(lines)
        rowno, line = 1, 1
        try:
            if reader.fieldnames is None or "text" not in reader.fieldnames:
                sink.issue(path, "a CSV of documents needs a header row with a 'text' column")
                return
            while True:
                line = lines.line + 1
                try:
                    row = next(reader)
                except StopIteration:
                    return
                rowno += 1
                doc: dict[str, Any] = {k: v for k, v in row.items() if k is not None and v != ""}
                doc.setdefault("text", "")
                if not doc.get("id"):
                    doc["id"] = f"{path.name}:{rowno}"
                yield line, doc
        except UnicodeDecodeError as exc:
            why = f"not UTF-8 ({exc.reason} at byte {exc.start} of the line)"
            sink.issue(path, why, lines.line, "rest of the file")
        except csv.Error as exc:
            sink.issue(path, f"not valid CSV: {exc}", line, "rest of the file")


def _read_text(
    path: Path, doc_id: str, limits: LoadLimits
) -> Iterator[tuple[int | None, dict[str, Any]]]:
    size = path.stat().st_size
    if size > limits.part_bytes:  # read whole: one document
        raise SourceLimitError(
            f"{path}: {size:,} bytes, more than the {limits.part_bytes:,} a text file read whole "
            "may have (LoadLimits.part_bytes)"
        )
    text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not text
    doc = {"id": doc_id, "text": text, "title": path.stem, "source": str(path)}
    if path.suffix.lower() in (".md", ".markdown"):
        doc["format"] = "markdown"  # chunking="auto" cuts it by its structure
    yield None, doc


def _file_documents(
    path: Path, doc_id: str, sink: _Sink, limits: LoadLimits
) -> Iterator[tuple[int | None, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_objects(path, sink)
    if suffix == ".csv":
        return _read_csv(path, sink)
    if suffix in RICH_SUFFIXES:
        return ((None, doc) for doc in rich_documents(path, doc_id, limits))
    return _read_text(path, doc_id, limits)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def file_documents(
    path: Path, doc_id: str, sha256: str | None = None, limits: LoadLimits = DEFAULT_LIMITS
) -> list[dict[str, Any]]:
    """Every document of one file, validated, each with ``origin`` and ``origin_sha256``.

    What :meth:`fastrag.store.loaders.FileSource.load` reads: the same
    documents :func:`iter_documents` yields for the file, but the first
    problem (a bad line, an invalid document, an id twice in the file)
    raises :class:`~fastrag.errors.SourceError` naming the file and line, so
    a file is taken whole or not at all.
    """
    sink = _Sink(None, None)
    digest = sha256 or _sha256(path)
    out: list[dict[str, Any]] = []
    seen: dict[str, int | None] = {}
    try:
        for line, doc in _file_documents(path, doc_id, sink, limits):
            where = str(path) if line is None else f"{path}:{line}"
            did = validate_document(doc)
            if did in seen:
                raise DuplicateDocumentError(
                    f"{where}: document id {did!r} appears twice in the file"
                )
            seen[did] = line
            doc["origin"] = str(path)
            doc["origin_sha256"] = digest
            out.append(doc)
    except (SourceError, MissingDependencyError):
        raise
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except RecursionError as exc:  # a parser below recursed (the HTML walker never does)
        raise SourceLimitError(f"{path}: nested too deeply to be read") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    except DocumentError as exc:
        text = str(exc)
        raise SourceError(text if text.startswith(str(path)) else f"{path}: {text}") from exc
    return out


def _kind(path: Path) -> str:
    """What a path that is neither a regular file nor a folder is (for messages)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "missing"
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def folder_files(root: Path) -> Iterator[tuple[Path, str | None]]:
    """The document files under a folder, sorted: ``(path, None)`` to read, ``(path, why)`` not.

    Folders are walked with an explicit stack. A symbolic link whose target
    lies outside ``root`` (a file or a folder) is not followed: it comes with
    the reason, as do broken links and document-named entries that are not
    regular files (FIFOs, sockets, devices: never opened). A link to a file
    inside ``root`` is read under its own name; a link to a folder inside
    ``root`` is not walked, since that folder's files are read under their
    real paths (so links can never make a loop or read a file twice over).
    """
    real_root = root.resolve()
    out: list[tuple[Path, str | None]] = []
    folders = [root]
    while folders:
        folder = folders.pop()
        try:
            with os.scandir(folder) as entries:
                names = [(entry.name, entry.is_symlink(), entry.is_dir()) for entry in entries]
        except OSError as exc:
            out.append((folder, f"folder cannot be read: {exc.strerror or exc}"))
            continue
        for name, link, is_dir in names:
            path = folder / name
            wanted = path.suffix.lower() in DOCUMENT_SUFFIXES
            if link:
                try:
                    target = path.resolve(strict=True)
                except (OSError, RuntimeError):  # dangling, or a loop of links
                    if wanted:
                        out.append((path, "a broken symbolic link"))
                    continue
                if not target.is_relative_to(real_root):
                    if wanted or is_dir:
                        kind = "folder" if is_dir else "file"
                        why = (
                            f"a symbolic link to the {kind} {target}, outside {root}; not followed"
                        )
                        out.append((path, why))
                    continue
                if is_dir:
                    continue  # its files are read under their real paths
            elif is_dir:
                folders.append(path)
                continue
            if not wanted:
                continue
            if not path.is_file():
                out.append((path, f"{_kind(path)}, not a regular file"))
                continue
            out.append((path, None))
    out.sort(key=lambda item: item[0])
    return iter(out)


def _files(root: Path, sink: _Sink) -> list[tuple[Path, str]]:
    """The document files a path names (a folder: those with a document suffix, sorted)."""
    if root.is_dir():
        out = []
        for p, why in folder_files(root):
            if why is not None:
                refused = "symbolic link" in why
                sink.issue(p, why, error=SourceRefusedError if refused else DocumentError)
                continue
            out.append((p, p.relative_to(root).as_posix()))
        return out
    if root.is_file():
        return [(root, root.name)]
    kind = _kind(root)
    if kind == "missing":
        sink.issue(root, "no such file or folder", error=StoreNotFoundError)
    else:
        sink.issue(root, f"{kind}, not a regular file")
    return []


def iter_documents(
    paths: Iterable[str | Path],
    *,
    on_error: OnError | None = None,
    report: SourceReport | None = None,
    limits: LoadLimits | None = None,
) -> Iterator[dict[str, Any]]:
    """Stream documents from files and folders (folders recursively, sorted).

    Every document is validated here (:func:`~fastrag.store.documents.validate_document`)
    and ids must be unique across all the files, so a problem is reported
    with its file and line instead of failing a build later.

    Parameters
    ----------
    paths : iterable of str or Path
        Files (any of :data:`DOCUMENT_SUFFIXES`) and folders.
    on_error : callable, optional
        ``on_error(path, reason)`` for each problem (the reason starts with
        ``line N:`` when it is one line's); the rest is still read.
    report : SourceReport, optional
        Records what happened to each file (documents read, problems with
        their lines); the rest is still read. Without ``report`` or
        ``on_error``, the first problem raises
        :class:`~fastrag.errors.DocumentError` (a duplicate id:
        :class:`~fastrag.errors.DuplicateDocumentError`; a missing path:
        :class:`~fastrag.errors.StoreNotFoundError`) naming the file and line.
    limits : LoadLimits, optional
        Caps on each file (:class:`~fastrag.store.loaders.LoadLimits`; the defaults without it).

    Yields
    ------
    dict
        Valid documents with unique ``id`` and ``text`` (a text file's id is
        its path relative to the folder it was found in, or its name). A bad
        line, an unreadable file and the second document with an id are
        skipped (and reported); a UTF-8 byte-order mark is dropped.
    """
    sink = _Sink(report, on_error)
    seen: dict[str, tuple[int, int | None]] = {}  # id -> (file number, line)
    origins: list[Path] = []
    for raw in paths:
        for path, doc_id in _files(Path(raw), sink):
            if path.suffix.lower() not in DOCUMENT_SUFFIXES:
                use = ", ".join(DOCUMENT_SUFFIXES)
                sink.issue(path, f"unsupported file type {path.suffix!r} (use {use})")
                continue
            number = len(origins)
            origins.append(path)
            if sink.report is not None:
                sink.report.file(path)
            try:
                digest = _sha256(path)
                for line, doc in _file_documents(path, doc_id, sink, limits or DEFAULT_LIMITS):
                    doc["origin"] = str(path)
                    doc["origin_sha256"] = digest
                    unit = "file" if line is None else "document"
                    try:
                        did = validate_document(doc)
                    except DocumentError as exc:
                        sink.issue(path, str(exc), line, unit)
                        continue
                    first = seen.get(did)
                    if first is not None:
                        where = SourceIssue(origins[first[0]], first[1], "").where
                        why = f"document id {did!r} was already read from {where}"
                        sink.issue(path, why, line, unit, DuplicateDocumentError)
                        continue
                    seen[did] = (number, line)
                    sink.document(path)
                    yield doc
            except UnicodeDecodeError as exc:
                sink.issue(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
            except RecursionError:  # a parser below recursed: this file only is lost
                if sink.report is None:
                    raise SourceLimitError(f"{path}: nested too deeply to be read") from None
                sink.issue(path, "nested too deeply to be read")
            except OSError as exc:
                sink.issue(path, f"cannot be read: {exc.strerror or exc}")
            except (SourceError, MissingDependencyError) as exc:
                if sink.report is None:
                    raise  # strict: the loader's own error, naming the file
                sink.issue(path, str(exc).removeprefix(f"{path}: "))


def read_text_folder(path: str | Path) -> Iterator[dict[str, Any]]:
    """Stream every document file under a folder (see :func:`iter_documents`)."""
    return iter_documents([path])


def read_documents(path: str | Path) -> Iterator[dict[str, Any]]:
    """Documents from one file or folder (see :func:`iter_documents`)."""
    return iter_documents([path])
