"""A database as a tool: read-only SELECTs over allow-listed tables and columns, cited rows.

::

    tool = SqlTool("sqlite:///repairs.db",
                   tables={"repair_records": ["id", "fault_code", "machine_id", "solution_text"]})
    result = tool.query(
        "SELECT solution_text FROM repair_records WHERE fault_code = :code", {"code": "SV0432"}
    )
    result.rows        # [{"solution_text": "..."}]
    result.citations   # (SqlCitation(source="sqlite:///repairs.db", table="repair_records",
                       #              key={"id": 7}),)

Where :mod:`fastrag.store.loaders.sql` turns rows into text chunks, this
gives an agent structured rows with a citation each (source, table, primary
key). What may run, in layers (each one alone refuses a write):

1. **validation** (``sqlglot``): exactly one ``SELECT`` statement; every
   table allow-listed (no schema qualifier, no ``WITH``, no ``SELECT ...
   INTO``, no ``FOR UPDATE``), every column allow-listed for the tables it
   can belong to (an unqualified name must be allowed in every table the
   query reads), ``*`` only as ``COUNT(*)`` or expanded to the allow-listed
   columns of a single table, no function sqlglot does not know (so no
   ``load_extension``, ``readfile``, ``pg_read_file``, ``dblink``),
   ``LIMIT``/``OFFSET`` only as integer literals. Parameters are named
   (``:name``), always bound, never formatted into the text, and must be
   scalars; the query sent is the one validated, regenerated from its tree;
2. **limits**: at most ``max_rows`` rows (a ``LIMIT`` is imposed) and
   ``timeout`` seconds (SQLite: a progress handler interrupts it;
   PostgreSQL: ``statement_timeout``; MySQL: ``max_execution_time``);
3. **a read-only connection**: SQLite files are opened ``mode=ro`` with
   ``PRAGMA query_only`` and an authorizer that admits only reads of the
   allow-listed columns and a list of pure functions; PostgreSQL runs each
   query in a ``READ ONLY`` transaction of a session whose
   ``default_transaction_read_only`` is on, and rolls it back.

The primary key of each table (``keys``, default ``"id"`` when allow-listed)
is fetched alongside the asked-for columns of a plain (non-aggregate,
non-``DISTINCT``) query, so each row is cited by it; an aggregate result is
cited by its tables.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import hashlib
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, MissingDependencyError, SqlQueryError
from ..types import Hit
from .loaders.sql import safe_url, sqlite_path

__all__ = ["SqlCitation", "SqlResult", "SqlTool"]

MAX_ROWS = 100
"""Default most rows a query returns (:class:`SqlTool` ``max_rows``)."""
_KEY = "_fastrag_key_"


@dataclass(frozen=True, slots=True)
class SqlCitation:
    """Where a row comes from: the database (password removed), its table and primary key."""

    source: str
    table: str
    key: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"source": self.source, "table": self.table, "key": self.key}


@dataclass(frozen=True, slots=True)
class SqlResult:
    """Rows of a :meth:`SqlTool.query`: column names, rows as dicts, a citation per row.

    ``citations[i]`` cites ``rows[i]`` for a plain query; an aggregate
    result has one citation per table read, without a key. ``truncated``
    says that more rows matched than ``max_rows``.
    """

    columns: tuple[str, ...]
    rows: list[dict[str, Any]]
    citations: tuple[SqlCitation, ...]
    truncated: bool = False
    sql: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    def hits(self) -> list[Hit]:
        """The rows as context entries an answer cites beside chunks (``kb.answer(q, rows=...)``).

        One :class:`~fastrag.Hit` per row: ``text`` is ``column: value |
        column: value`` (null values left out), ``doc_id`` and
        ``metadata["source"]`` are ``sql:<table>#<key>`` (joined tables
        ``sql:<t1>#<k1>+<t2>#<k2>``; a row without a key, as an aggregate's,
        ``sql:<tables>#row=<i>``), and the metadata holds ``title`` (the
        tables), ``database``, ``table``, ``key``, ``row`` (the row as
        returned), ``sql`` and ``citations``. ``chunk_id`` is negative (never
        a stored chunk's) and stable for a keyed row; ``relevance`` is 1.0.
        """
        n = len(self.rows)
        per = len(self.citations) // n if n and len(self.citations) % n == 0 else 0
        keyed = per > 0 and all(c.key for c in self.citations)
        tables = list(dict.fromkeys(c.table for c in self.citations))
        out = []
        for i, row in enumerate(self.rows):
            cites = self.citations[i * per : (i + 1) * per] if keyed else self.citations
            if keyed:
                ref = "+".join(f"{c.table}#{next(iter(c.key.values()))}" for c in cites if c.key)
            else:
                ref = f"{'+'.join(tables)}#row={i + 1}"
            doc_id = f"sql:{ref}"
            text = " | ".join(
                f"{col}: {' '.join(str(v).split())}" for col, v in row.items() if v is not None
            ) or " | ".join(f"{col}: NULL" for col in row)
            seed = f"{self.citations[0].source if self.citations else ''}\n{doc_id}"
            if not keyed:
                seed += f"\n{self.sql}\n{text}"
            digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
            chunk_id = -1 - int.from_bytes(digest[:7], "big")
            first = cites[0] if cites else None
            metadata = {
                "title": ", ".join(tables),
                "source": doc_id,
                "database": first.source if first else None,
                "table": first.table if first else None,
                "key": first.key if first else None,
                "row": dict(row),
                "sql": self.sql,
                "citations": [c.to_dict() for c in cites],
            }
            out.append(Hit(chunk_id, doc_id, 0, 0, len(text), text, 1.0, metadata, 1.0))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (values already are: dates as ISO-8601, decimals as strings)."""
        return {
            "columns": list(self.columns),
            "rows": self.rows,
            "citations": [c.to_dict() for c in self.citations],
            "truncated": self.truncated,
            "sql": self.sql,
        }


# SQLite functions the authorizer admits (pure: no file, extension or settings access).
_SQLITE_FUNCTIONS = frozenset(
    "count sum avg min max total group_concat lower upper length substr substring coalesce "
    "ifnull nullif abs round trim ltrim rtrim replace instr like glob date time datetime "
    "julianday strftime unixepoch iif typeof printf format hex".split()
)
_SCALARS = (str, int, float, bool, type(None))


def _sqlglot() -> Any:
    try:
        import sqlglot
    except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
        raise MissingDependencyError(
            "SqlTool needs sqlglot: pip install 'fastrag-engine[sql]'"
        ) from exc
    return sqlglot


def _json_value(value: Any) -> Any:
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


class SqlTool:
    """Read-only SQL over allow-listed tables and columns (see the module docstring).

    Parameters
    ----------
    url : str
        ``sqlite:///path`` (the standard library) or any SQLAlchemy URL
        (``postgresql+psycopg://...``; the extra ``sql``).
    tables : mapping of str to list of str
        Table -> the columns a query may read.
    keys : mapping of str to str, optional
        Table -> primary-key column cited per row (default ``"id"`` when
        allow-listed; a table without one is cited without a key).
    max_rows : int, default 100
        Most rows a query returns.
    timeout : float, default 5
        Seconds a query may run.
    name : str, optional
        What citations call the source (default the URL without its password).
    """

    def __init__(
        self, url: str, tables: Mapping[str, Sequence[str]], *,
        keys: Mapping[str, str] | None = None, max_rows: int = MAX_ROWS, timeout: float = 5.0,
        name: str | None = None,
    ) -> None:  # fmt: skip
        if not isinstance(url, str) or "://" not in url and not url.startswith("sqlite:"):
            raise ConfigError(f"url must be a database URL, got {url!r}")
        if not isinstance(tables, Mapping) or not tables:
            raise ConfigError("tables must map at least one table to its allowed columns")
        allowed: dict[str, tuple[str, ...]] = {}
        for table, columns in tables.items():
            if not isinstance(table, str) or not table.isidentifier():
                raise ConfigError(f"table names must be plain identifiers, got {table!r}")
            if isinstance(columns, str) or not columns:
                raise ConfigError(f"tables[{table!r}] must be a non-empty list of column names")
            for c in columns:
                if not isinstance(c, str) or not c.isidentifier():
                    raise ConfigError(f"tables[{table!r}]: column {c!r} is not an identifier")
            allowed[table.lower()] = tuple(dict.fromkeys(c.lower() for c in columns))
        if isinstance(max_rows, bool) or not isinstance(max_rows, int) or not 1 <= max_rows:
            raise ConfigError(f"max_rows must be a positive int, got {max_rows!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.tables = allowed
        self.keys: dict[str, str | None] = {}
        for table, columns in allowed.items():
            key = (keys or {}).get(table)
            if key is not None and key.lower() not in columns:
                raise ConfigError(f"keys[{table!r}] = {key!r} is not an allowed column")
            self.keys[table] = key.lower() if key else ("id" if "id" in columns else None)
        self.url, self.max_rows, self.timeout = url, max_rows, float(timeout)
        self.source = name or safe_url(url)
        self._sqlite = sqlite_path(url) if url.lower().startswith("sqlite:") else None
        if self._sqlite is None and url.lower().startswith("sqlite:"):
            raise ConfigError(f"{self.source}: SqlTool reads SQLite files, not in-memory databases")
        self._engine: Any = None
        self._lock = threading.Lock()
        _sqlglot()

    def __repr__(self) -> str:
        return f"SqlTool({self.source!r}, tables={sorted(self.tables)})"

    @property
    def dialect(self) -> str:
        """The sqlglot dialect of the database."""
        if self._sqlite is not None:
            return "sqlite"
        scheme = self.url.split("://", 1)[0].split("+", 1)[0].lower()
        return {"postgresql": "postgres", "postgres": "postgres", "mysql": "mysql"}.get(
            scheme, scheme
        )

    def describe(self) -> dict[str, Any]:
        """The source, its allowed tables and columns, keys and limits (for a tool listing)."""
        return {
            "source": self.source,
            "dialect": self.dialect,
            "tables": {t: list(c) for t, c in self.tables.items()},
            "keys": dict(self.keys),
            "max_rows": self.max_rows,
            "timeout": self.timeout,
        }

    # -- validation ------------------------------------------------------------------
    def prepare(
        self, sql: str, params: Mapping[str, Any] | None = None, *, limit: int | None = None
    ) -> tuple[str, dict[str, Any], list[str], list[str] | None, int]:
        """Validate ``sql`` and ``params``: SQL to run, parameters, tables, key tables, fetch.

        The key tables name, in order, the table of each ``_fastrag_key_<i>``
        column added to the query (None when rows are not cited by key).

        Raises
        ------
        SqlQueryError
            Anything but one allowed SELECT, or parameters that do not match it.
        """
        sqlglot = _sqlglot()
        from sqlglot import exp

        if not isinstance(sql, str) or not sql.strip():
            raise SqlQueryError("sql must be a non-empty string")
        if len(sql) > 20_000:
            raise SqlQueryError(f"sql has {len(sql):,} characters; at most 20,000")
        rows = self.max_rows
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit:
                raise SqlQueryError(f"limit must be a positive int, got {limit!r}")
            rows = min(rows, limit)
        params = dict(params or {})
        for key, value in params.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise SqlQueryError(f"parameter names must be identifiers, got {key!r}")
            if not isinstance(value, _SCALARS):
                raise SqlQueryError(
                    f"parameter {key!r} must be a string, number, boolean or null, "
                    f"got {type(value).__name__}"
                )
        try:
            statements = [s for s in sqlglot.parse(sql, read=self.dialect) if s is not None]
        except sqlglot.errors.SqlglotError as exc:
            raise SqlQueryError(f"sql does not parse: {str(exc)[:200]}") from None
        if len(statements) != 1:
            raise SqlQueryError(f"sql must be exactly one statement, got {len(statements)}")
        tree = statements[0]
        if not isinstance(tree, exp.Select):
            raise SqlQueryError(f"only SELECT is allowed, got {type(tree).__name__.upper()}")
        banned = (
            exp.With, exp.Into, exp.Lock, exp.Insert, exp.Update, exp.Delete, exp.Drop,
            exp.Create, exp.Alter, exp.Command, exp.Pragma, exp.Attach, exp.Detach,
            exp.Anonymous, exp.Merge, exp.TruncateTable, exp.Set, exp.Use,
        )  # fmt: skip
        aliases: dict[str, str] = {}
        read: list[str] = []
        for node in tree.walk():
            if isinstance(node, banned):
                what = node.name if isinstance(node, exp.Anonymous) else type(node).__name__
                raise SqlQueryError(f"not allowed in a query: {what!r}")
            if isinstance(node, exp.Table):
                name = node.name.lower()
                if node.args.get("db") or node.args.get("catalog"):
                    raise SqlQueryError(f"table {node.sql()!r}: no schema or database prefix")
                if not isinstance(node.this, exp.Identifier) or name not in self.tables:
                    raise SqlQueryError(
                        f"table {node.sql()[:60]!r} is not allowed "
                        f"(allowed: {', '.join(sorted(self.tables))})"
                    )
                read.append(name)
                aliases[name] = name
                if node.alias:
                    aliases[node.alias.lower()] = name
        if not read:
            raise SqlQueryError("the query reads no allowed table")
        tables = list(dict.fromkeys(read))
        outputs = {e.alias.lower() for e in tree.expressions if isinstance(e, exp.Alias)}
        for node in list(tree.walk()):
            if isinstance(node, exp.Star):
                parent = node.parent
                if isinstance(parent, exp.Count):
                    continue
                raise SqlQueryError("'*' is allowed only as COUNT(*); list the columns")
            if isinstance(node, exp.Column):
                if isinstance(node.this, exp.Star):  # t.*
                    raise SqlQueryError("'t.*' is not allowed; list the columns")
                col, qual = node.name.lower(), node.table.lower()
                if qual:
                    if qual not in aliases:
                        raise SqlQueryError(f"column {node.sql()!r}: unknown table {qual!r}")
                    if col not in self.tables[aliases[qual]]:
                        raise SqlQueryError(f"column {node.sql()!r} is not allowed")
                elif col not in outputs and not all(col in self.tables[t] for t in tables):
                    raise SqlQueryError(
                        f"column {col!r} is not allowed"
                        + (" (qualify it with its table)" if len(tables) > 1 else "")
                    )
        # Limits: literal integers only.
        asked: int | None = None
        for key in ("limit", "offset"):
            clause = tree.args.get(key)
            if clause is None:
                continue
            value = clause.expression if key != "offset" or clause.expression else clause.this
            if not (isinstance(value, exp.Literal) and value.is_int):
                raise SqlQueryError(f"{key.upper()} must be an integer literal")
            if key == "limit":
                asked = int(value.this)
        # The query's own LIMIT within the cap is kept as it is; otherwise the cap plus
        # one row, which tells a cut-off result.
        fetch = asked if asked is not None and asked <= rows else rows + 1
        rows = min(rows, fetch)
        tree = tree.limit(fetch, copy=False)
        # Placeholders: named, each bound to a given parameter, every parameter used.
        names: set[str] = set()
        for node in list(tree.walk()):
            if isinstance(node, exp.Placeholder):
                name = node.name
                if not name or not name.isidentifier():
                    raise SqlQueryError("parameters are named: write :name, not ?")
                if name not in params:
                    raise SqlQueryError(f"parameter {name!r} is used but not given")
                names.add(name)
                node.replace(exp.var(f":{name}"))
        extra = set(params) - names
        if extra:
            raise SqlQueryError(f"parameters given but not used: {', '.join(sorted(extra))}")
        # Primary keys beside the asked-for columns, when each row is one row of its tables.
        keyed = not (
            tree.args.get("distinct") or tree.args.get("group") or tree.args.get("having")
            or any(isinstance(n, exp.AggFunc) for n in tree.expressions for n in n.walk())
            or tree.args.get("joins") and any(self.keys[t] is None for t in tables)
        )  # fmt: skip
        sources = self._sources(tree, exp)
        key_tables: list[str] | None = None
        if keyed and sources:
            key_tables = []
            for alias, table in sources:
                pk = self.keys[table]
                if pk is not None:
                    name = f"{_KEY}{len(key_tables)}"
                    tree = tree.select(exp.alias_(exp.column(pk, table=alias), name), copy=False)
                    key_tables.append(table)
        return tree.sql(dialect=self.dialect), params, tables, key_tables or None, fetch

    @staticmethod
    def _sources(tree: Any, exp: Any) -> list[tuple[str, str]]:
        """(alias, table) of the top-level FROM and JOIN tables (none if one is a subquery)."""
        out = []
        items = [tree.args.get("from_") or tree.args.get("from")]
        items += [j for j in tree.args.get("joins") or []]
        for item in items:
            if item is None:
                continue
            target = item.this
            if not isinstance(target, exp.Table):
                return []
            out.append((target.alias_or_name, target.name.lower()))
        return out

    # -- running ---------------------------------------------------------------------
    def query(
        self, sql: str, params: Mapping[str, Any] | None = None, *, limit: int | None = None
    ) -> SqlResult:
        """Run one allowed SELECT with bound ``params``; rows, columns and citations.

        Parameters
        ----------
        sql : str
            ``SELECT ... FROM <allowed table> WHERE col = :name ...``.
        params : mapping, optional
            Named parameters (strings, numbers, booleans, null), always bound.
        limit : int, optional
            Fewer rows than ``max_rows``.

        Raises
        ------
        SqlQueryError
            The query is refused, or the database failed or timed out running it.
        """
        t0 = time.perf_counter()
        text, bound, tables, key_tables, fetch = self.prepare(sql, params, limit=limit)
        rows = min(fetch, self.max_rows if limit is None else min(limit, self.max_rows))
        t1 = time.perf_counter()
        if self._sqlite is not None:
            columns, raw = self._run_sqlite(text, bound, fetch)
        else:
            columns, raw = self._run_sqlalchemy(text, bound, fetch)
        truncated = len(raw) > rows
        raw = raw[:rows]
        keys = [i for i, c in enumerate(columns) if c.startswith(_KEY)]
        shown = [i for i, c in enumerate(columns) if not c.startswith(_KEY)]
        out_rows = [{columns[i]: _json_value(r[i]) for i in shown} for r in raw]
        citations: list[SqlCitation] = []
        if key_tables and keys:
            sources = [(int(columns[i][len(_KEY) :]), i) for i in keys]
            for r in raw:
                for n, i in sources:
                    table = key_tables[n]
                    pk = self.keys[table] or "id"  # key tables always have a key
                    citations.append(SqlCitation(self.source, table, {pk: _json_value(r[i])}))
        else:
            citations = [SqlCitation(self.source, t) for t in tables]
        shown_columns = tuple(columns[i] for i in shown)
        timings = {"validate": t1 - t0, "run": time.perf_counter() - t1}
        return SqlResult(shown_columns, out_rows, tuple(citations), truncated, text, timings)

    def _run_sqlite(self, text: str, params: dict[str, Any], fetch: int) -> tuple[list[str], list]:
        assert self._sqlite is not None
        allowed = self.tables
        deadline = time.monotonic() + self.timeout

        def authorize(action: int, a: str | None, b: str | None, db: str | None, _: Any) -> int:
            if action == sqlite3.SQLITE_SELECT:
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_READ:
                table, column = (a or "").lower(), (b or "").lower()
                if db not in (None, "main") or table not in allowed:
                    return sqlite3.SQLITE_DENY
                # An empty column is SQLite reading no column of the table (COUNT(*)).
                return sqlite3.SQLITE_OK if column in allowed[table] or not column else (
                    sqlite3.SQLITE_DENY
                )  # fmt: skip
            if action == sqlite3.SQLITE_FUNCTION:
                return sqlite3.SQLITE_OK if (b or "").lower() in _SQLITE_FUNCTIONS else (
                    sqlite3.SQLITE_DENY
                )  # fmt: skip
            return sqlite3.SQLITE_DENY

        try:
            conn = sqlite3.connect(
                f"file:{self._sqlite}?mode=ro", uri=True, timeout=self.timeout,
                check_same_thread=False,
            )  # fmt: skip
        except sqlite3.Error as exc:
            raise SqlQueryError(f"{self.source}: cannot open: {exc}") from None
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.set_authorizer(authorize)
            conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
            cur = conn.execute(text, params)
            columns = [d[0] for d in cur.description or ()]
            return columns, cur.fetchmany(fetch)
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise SqlQueryError(
                    f"{self.source}: the query ran longer than {self.timeout:g} s"
                ) from None
            raise SqlQueryError(f"{self.source}: {exc}") from None
        except sqlite3.Error as exc:
            raise SqlQueryError(f"{self.source}: {exc}") from None
        finally:
            conn.close()

    def _engine_for(self) -> Any:
        with self._lock:
            if self._engine is None:
                try:
                    import sqlalchemy
                except ImportError as exc:  # pragma: no cover
                    raise MissingDependencyError(
                        "SqlTool needs SQLAlchemy for non-SQLite URLs: "
                        "pip install 'fastrag-engine[sql]'"
                    ) from exc
                ms = int(self.timeout * 1000)
                args: dict[str, Any] = {}
                if self.dialect == "postgres":
                    args["options"] = (
                        f"-c default_transaction_read_only=on -c statement_timeout={ms}"
                    )
                try:
                    self._engine = sqlalchemy.create_engine(
                        self.url, connect_args=args, pool_pre_ping=True
                    )
                except Exception as exc:  # noqa: BLE001 - a bad URL or a missing driver
                    raise SqlQueryError(f"{self.source}: cannot connect: {exc}") from None
            return self._engine

    def _run_sqlalchemy(
        self, text: str, params: dict[str, Any], fetch: int
    ) -> tuple[list[str], list]:
        import sqlalchemy

        ms = int(self.timeout * 1000)
        engine = self._engine_for()
        try:
            with engine.connect() as conn:
                try:
                    if self.dialect == "postgres":
                        conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                        conn.exec_driver_sql(f"SET LOCAL statement_timeout = {ms}")
                    elif self.dialect == "mysql":
                        conn.exec_driver_sql(f"SET SESSION max_execution_time = {ms}")
                        conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                    else:
                        conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                    result = conn.execute(sqlalchemy.text(text), params)
                    columns = list(result.keys())
                    return columns, [tuple(r) for r in result.fetchmany(fetch)]
                finally:
                    conn.rollback()
        except sqlalchemy.exc.SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0][:300]
            raise SqlQueryError(f"{self.source}: {reason}") from None

    def close(self) -> None:
        """Close pooled connections (reopened when used again)."""
        with self._lock:
            if self._engine is not None:
                self._engine.dispose()
                self._engine = None
