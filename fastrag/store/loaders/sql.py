"""Database rows as documents: SQLite through the standard library, any SQLAlchemy URL.

SQLAlchemy comes with the extra ``sql``.

``load_sql("sqlite:///repairs.db", "SELECT id, solution_text AS text,
fault_code, machine_id, updated_at FROM repair_records")`` yields one
document per row: the ``id`` and ``text`` columns are required, every other
column is metadata (``title``, ``source``, ``updated_at`` and ``acl`` keep
their meaning; an ``acl`` column holds a JSON list or comma-separated
principals). With ``since``, only rows whose ``updated_at`` is newer are
fetched: SQLite filters them inside the query with a function that parses
any ISO-8601 or epoch value; other databases compare the column with a
timestamp parameter (and fastrag checks each row again).

A query that fails, or whose result lacks ``id`` or ``text``, raises
:class:`~fastrag.errors.SourceError` naming the problem. Nothing is written
to the database, nor any other file: SQLite files are opened read-only
(a ``file:...?mode=ro`` URI) and an authorizer lets the query only read
(``SELECT``, reading tables, calling functions, read-only ``pragma_*``
table functions): ``ATTACH``, ``DETACH``, ``VACUUM INTO``, writing pragmas,
transactions and every write are refused with
:class:`~fastrag.errors.SourceRefusedError` before they run. A SQLite
database reached through SQLAlchemy (``sqlite+pysqlite:///``) gets the same
authorizer; other databases are as read-only as the user fastrag connects as.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import orjson

from ...errors import SourceError, SourceRefusedError
from ..documents import parse_updated_at
from ._common import require

__all__ = ["is_database_url", "load_sql", "safe_url", "sqlite_path"]

_REQUIRED = ("id", "text")

_READS = frozenset(
    getattr(sqlite3, name)
    for name in ("SQLITE_SELECT", "SQLITE_READ", "SQLITE_FUNCTION", "SQLITE_RECURSIVE")
)
_READ_PRAGMAS = frozenset(
    "collation_list compile_options foreign_key_list function_list index_info index_list "
    "index_xinfo module_list pragma_list table_info table_list table_xinfo".split()
)
_SCHEMA = ("sqlite_master", "sqlite_schema")
_ACTIONS = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ")
    for name in dir(sqlite3)
    if name.startswith(("SQLITE_CREATE_", "SQLITE_DROP_", "SQLITE_ALTER", "SQLITE_ANALYZE"))
    or name in ("SQLITE_ATTACH", "SQLITE_DETACH", "SQLITE_DELETE", "SQLITE_INSERT",
                "SQLITE_UPDATE", "SQLITE_PRAGMA", "SQLITE_TRANSACTION", "SQLITE_REINDEX",
                "SQLITE_SAVEPOINT")
}  # fmt: skip


class _ReadOnly:
    """A SQLite authorizer that allows reading only, and remembers the first thing it refused."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, *_: Any
    ) -> int:
        if action in _READS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_UPDATE and arg1 in _SCHEMA and db == "main":
            return sqlite3.SQLITE_OK  # SQLite's own schema reading; main is opened mode=ro
        if self.refused is None:
            what = _ACTIONS.get(action, f"action {action}")
            self.refused = f"{what} {arg1}" if arg1 else what
        return sqlite3.SQLITE_DENY


def is_database_url(value: str) -> bool:
    """Whether ``value`` looks like a database URL (``scheme://...``, not a web page)."""
    scheme = value.split("://", 1)[0] if "://" in value else ""
    return bool(scheme) and scheme.split("+", 1)[0].lower() not in ("http", "https", "file")


def safe_url(url: str) -> str:
    """``url`` without its password (what documents record as their ``origin``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = parts.username or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///path`` URL (``sqlite:////abs/path`` for an absolute one)."""
    if not url.lower().startswith("sqlite:"):
        return None
    rest = url.split(":", 1)[1]
    if not rest.startswith("///"):
        raise SourceError(
            f"{url}: a SQLite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    return unquote(rest[3:].split("?", 1)[0])


def _value(value: Any, column: str, where: str) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        raise SourceError(
            f"{where}: column {column!r} holds binary values; select it as text or leave it out"
        )
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, _dt.datetime):
        return value
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    return value


def _acl(value: Any) -> Any:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError:
                pass
        return [p.strip() for p in text.split(",") if p.strip()]
    return value


def _documents(
    columns: Sequence[str], rows: Iterator[Sequence[Any]], where: str, since: _dt.datetime | None
) -> Iterator[dict[str, Any]]:
    missing = [c for c in _REQUIRED if c not in columns]
    if missing:
        raise SourceError(
            f"{where}: the query's result has no {' or '.join(map(repr, missing))} column "
            f"(columns: {', '.join(columns) or 'none'}); name them with AS, e.g. "
            "SELECT record_no AS id, body AS text, ..."
        )
    for row in rows:
        doc: dict[str, Any] = {}
        for name, value in zip(columns, row, strict=True):
            if value is None:
                continue
            doc[name] = _value(value, name, where)
        if "id" not in doc:
            raise SourceError(f"{where}: a row has a null id")
        doc["id"] = str(doc["id"])
        doc["text"] = "" if doc.get("text") is None else str(doc["text"])
        if "acl" in doc:
            doc["acl"] = _acl(doc["acl"])
        if since is not None:
            when = parse_updated_at(doc.get("updated_at"), where=f"{where}: row {doc['id']!r}")
            if when is None or when <= since:
                continue
        yield doc


def _newer_than(since: _dt.datetime) -> Callable[[Any], int]:
    """The SQLite function ``fastrag_newer(updated_at)``: 1 for a row newer than ``since``."""

    def newer(value: Any) -> int:
        try:
            when = parse_updated_at(value, where="updated_at")
        except ValueError:
            return 0
        return int(when is not None and when > since)

    return newer


def load_sql(
    url: str,
    query: str,
    *,
    since: _dt.datetime | str | None = None,
    params: Sequence[Any] | dict[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield one document per row of ``query`` run against the database at ``url``.

    Parameters
    ----------
    url : str
        ``sqlite:///path.db`` (standard library), or any SQLAlchemy URL
        (``postgresql+psycopg://...``; needs ``pip install 'fastrag-engine[sql]'``
        and the database's driver).
    query : str
        A ``SELECT`` whose result has ``id`` and ``text`` columns; every
        other column becomes metadata.
    since : datetime or str, optional
        Fetch only rows whose ``updated_at`` is newer (the query must then
        return ``updated_at``).
    params : sequence or dict, optional
        Query parameters (``?`` for SQLite, ``:name`` for SQLAlchemy).

    Yields
    ------
    dict
        Documents.

    Raises
    ------
    SourceError
        The database cannot be opened, the query fails, or its result has
        no ``id`` or ``text`` (or, with ``since``, no ``updated_at``) column.
    """
    where = safe_url(url)
    if not isinstance(query, str) or not query.strip():
        raise SourceError(
            f"{where}: a database source needs a query (--query 'SELECT id, ... AS text ...')"
        )
    when = parse_updated_at(since, where="since") if since is not None else None
    body = query.strip().rstrip(";")
    path = sqlite_path(url)
    if path is not None:
        yield from _sqlite(path, body, where, when, params)
    else:
        yield from _sqlalchemy(url, body, where, when, params)


def _sqlite(
    path: str, query: str, where: str, since: _dt.datetime | None, params: Any
) -> Iterator[dict[str, Any]]:
    if not Path(path).is_file():
        raise SourceError(f"{where}: no such database file {path!r}")
    try:
        conn = sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise SourceError(f"{where}: cannot open the database: {exc}") from exc
    guard = _ReadOnly()

    def refused(exc: sqlite3.Error) -> SourceRefusedError | None:
        if guard.refused is None:
            return None
        return SourceRefusedError(
            f"{where}: the database is opened readonly and the query may only read: "
            f"{guard.refused} is not allowed ({exc})"
        )

    try:
        if since is not None:
            conn.create_function("fastrag_newer", 1, _newer_than(since), deterministic=True)
            query = f"SELECT * FROM ({query}) AS fastrag_rows WHERE fastrag_newer(updated_at)"
        conn.set_authorizer(guard)
        try:
            cursor = conn.execute(query, params or ())
        except sqlite3.Error as exc:
            denied = refused(exc)
            if denied is not None:
                raise denied from exc
            hint = (
                " (--since needs the query to return an updated_at column)"
                if since is not None and "updated_at" in str(exc)
                else ""
            )
            raise SourceError(f"{where}: the query failed: {exc}{hint}") from exc
        columns = [d[0] for d in cursor.description or ()]

        def rows() -> Iterator[Sequence[Any]]:
            try:
                while batch := cursor.fetchmany(1024):
                    yield from batch
            except sqlite3.Error as exc:
                denied = refused(exc)
                if denied is not None:
                    raise denied from exc
                raise SourceError(f"{where}: reading the query's rows failed: {exc}") from exc

        yield from _documents(columns, rows(), where, since)
    finally:
        conn.close()


def _sqlalchemy(
    url: str, query: str, where: str, since: _dt.datetime | None, params: Any
) -> Iterator[dict[str, Any]]:
    sa = require("sqlalchemy", "sql", f"reading the database {where}")
    try:
        engine = sa.create_engine(url)
    except Exception as exc:  # unknown dialect, missing driver, malformed URL
        raise SourceError(f"{where}: cannot open the database: {exc}") from exc
    bound = dict(params or {})
    if since is not None:
        query = f"SELECT * FROM ({query}) AS fastrag_rows WHERE updated_at > :fastrag_since"
        bound["fastrag_since"] = since
    guard = _ReadOnly()
    try:
        with engine.connect() as conn:
            raw = getattr(conn.connection, "driver_connection", None)
            if engine.dialect.name == "sqlite" and isinstance(raw, sqlite3.Connection):
                raw.set_authorizer(guard)  # the same read-only guard as sqlite:/// URLs
            try:
                result = conn.execute(sa.text(query), bound)
            except sa.exc.SQLAlchemyError as exc:
                if guard.refused is not None:
                    raise SourceRefusedError(
                        f"{where}: the query may only read: {guard.refused} is not allowed"
                    ) from exc
                raise SourceError(f"{where}: the query failed: {exc}") from exc
            columns = list(result.keys())

            def rows() -> Iterator[Sequence[Any]]:
                try:
                    while batch := result.fetchmany(1024):
                        yield from batch
                except sa.exc.SQLAlchemyError as exc:
                    raise SourceError(f"{where}: reading the query's rows failed: {exc}") from exc

            yield from _documents(columns, rows(), where, since)
    except sa.exc.SQLAlchemyError as exc:
        raise SourceError(f"{where}: cannot open the database: {exc}") from exc
    finally:
        engine.dispose()
