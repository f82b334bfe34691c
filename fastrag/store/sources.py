"""Read documents and questions from files.

Documents: ``.txt`` / ``.md`` / ``.markdown`` / ``.rst`` (one document per
file), ``.jsonl`` (one object per line with ``id`` (or BEIR's ``_id``),
``text`` and any metadata), ``.csv`` (a header row with ``text`` and
optionally ``id`` and metadata columns), PDF, HTML and Word files (through
:mod:`fastrag.store.loaders`), and folders, searched recursively. Everything
streams: no file is read whole into memory except a single document (or one
PDF's pages). Every document records the file it came from as ``origin``
and the file's SHA-256 as ``origin_sha256`` (what incremental re-indexing
compares, :mod:`fastrag.store.sync`). A bad line, an unreadable file or a
repeated id is reported with its file and line
(:class:`~fastrag.store.report.SourceReport`) and the rest is read; a UTF-8
byte-order mark is dropped.

Questions: ``.txt`` (one per line), ``.jsonl`` (``question`` or ``text``,
optional ``id``), ``.csv`` (same columns) or ``.parquet`` (same columns).
"""

from __future__ import annotations

import csv
import hashlib
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import (
    DocumentError,
    DuplicateDocumentError,
    MissingDependencyError,
    SourceError,
    StoreNotFoundError,
)
from . import loaders
from .documents import validate_document
from .report import SourceIssue, SourceReport

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

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
DOCUMENT_SUFFIXES = TEXT_SUFFIXES + (".jsonl", ".csv") + loaders.RICH_SUFFIXES

OnError = Callable[[Path, str], None]
_BOM = b"\xef\xbb\xbf"


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


def _read_text(path: Path, doc_id: str) -> Iterator[tuple[int | None, dict[str, Any]]]:
    text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not text
    yield None, {"id": doc_id, "text": text, "title": path.stem, "source": str(path)}


def _file_documents(
    path: Path, doc_id: str, sink: _Sink
) -> Iterator[tuple[int | None, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _jsonl_objects(path, sink)
    if suffix == ".csv":
        return _read_csv(path, sink)
    if suffix in loaders.RICH_SUFFIXES:
        return ((None, doc) for doc in loaders.rich_documents(path, doc_id))
    return _read_text(path, doc_id)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def file_documents(path: Path, doc_id: str, sha256: str | None = None) -> list[dict[str, Any]]:
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
        for line, doc in _file_documents(path, doc_id, sink):
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


def _files(root: Path, sink: _Sink) -> list[tuple[Path, str]]:
    """The document files a path names (a folder: those with a document suffix, sorted)."""
    if root.is_dir():
        out = []
        for p in sorted(root.rglob("*")):
            if p.suffix.lower() not in DOCUMENT_SUFFIXES or p.is_dir():
                continue
            if not p.is_file():
                sink.issue(p, f"{_kind(p)}, not a regular file")
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
                for line, doc in _file_documents(path, doc_id, sink):
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
