"""What ``fastrag serve`` was started with, in one frozen value.

Worker processes receive it as JSON (uvicorn starts them by importing the
application factory, so the settings travel in the environment variable
:data:`fastrag.config.ENV_SERVE_SETTINGS`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..errors import ConfigError

__all__ = ["ServeSettings", "parse_kb_args", "parse_sql_tables"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class ServeSettings:
    """Settings of a fastrag server.

    Parameters
    ----------
    kbs : tuple of (name, path)
        The knowledge bases served, by name (the first is the default).
    keys : str, optional
        Path of the API keys file (:mod:`fastrag.serve.keys`); ``None``:
        every caller is trusted (loopback only, unless ``insecure``).
    host : str
        The address bound (also the host MCP's DNS-rebinding check admits).
    max_body : int, default 1 MiB
        Largest request body, in bytes (413 above it).
    timeout : float, default 30
        Seconds a request may take, once its body has arrived, before it is
        answered 504.
    body_timeout : float, default 10
        Seconds the client has to send the whole request body (408 after).
    header_timeout : float, default 10
        Seconds the client has to send a request's line and headers, from
        the connection's opening or from the first byte of a request on a
        kept-alive connection; then the connection is closed (with a 408 when
        part of a request had arrived).
    keep_alive : float, default 5
        Seconds an idle kept-alive connection stays open after a response.
    max_connections : int, default 512
        Connections a worker holds at once; one more is answered 503 with
        ``Retry-After`` and closed at once (uvicorn's ``limit_concurrency``
        bounds the running requests likewise).
    max_queue : int, default 64
        Requests a worker holds at once (running or waiting); beyond it 503
        with ``Retry-After``.
    engine_threads : int, optional
        Threads per worker running retrievals and extractive answers; ``0``
        runs them on the event loop. Default (``None``): the usable cores
        divided among the workers (at least 1), so that one worker's threads
        overlap one request's kernels (which release the GIL) with another's
        Python: on two cores one worker with two threads answered 1.15-1.3x
        the requests of one thread at 8 connections (BENCHMARKS.md,
        "Session 11").
    model_threads : int, default 32
        Threads per worker waiting on a chat model (I/O-bound answers).
    llm : bool, default False
        Answer with :class:`~fastrag.OpenAIChatGenerator` configured by the
        ``FASTRAG_*`` variables instead of the extractive generator.
    reload_interval : float, default 1.0
        Seconds between checks of each manifest for a new snapshot (0: never).
    max_k : int, default 100
        Largest ``k`` a request may ask for.
    max_batch : int, default 256
        Most questions in one batch request.
    threads : int, optional
        Numba threads per engine call (``threads=`` of the KnowledgeBase
        methods); ``fastrag serve`` sets 1 when it runs several workers, so
        that worker processes do not oversubscribe the cores.
    sql : str, optional
        A database URL served as the read-only SQL tool (:class:`~fastrag.SqlTool`):
        ``POST /v1/sql`` and the MCP tool ``sql_query``.
    sql_tables : dict of str to list of str
        The tables and columns the SQL tool may read (required with ``sql``).
    """

    kbs: tuple[tuple[str, str], ...]
    keys: str | None = None
    host: str = "127.0.0.1"
    max_body: int = 1 << 20
    timeout: float = 30.0
    body_timeout: float = 10.0
    header_timeout: float = 10.0
    keep_alive: float = 5.0
    max_connections: int = 512
    max_queue: int = 64
    engine_threads: int | None = None
    model_threads: int = 32
    llm: bool = False
    reload_interval: float = 1.0
    max_k: int = 100
    max_batch: int = 256
    threads: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    sql: str | None = None
    sql_tables: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.kbs:
            raise ConfigError("serve needs at least one knowledge base (--kb PATH)")
        names = [n for n, _ in self.kbs]
        for n in names:
            if not _NAME.match(n):
                raise ConfigError(
                    f"knowledge-base name {n!r}: use letters, digits, '.', '_' or '-' (at most 64)"
                )
        if len(set(names)) != len(names):
            raise ConfigError(f"knowledge-base names must be distinct, got {names}")
        for name in (
            "max_body",
            "max_queue",
            "engine_threads",
            "model_threads",
            "max_k",
            "max_batch",
            "max_connections",
        ):
            value = getattr(self, name)
            if name == "engine_threads" and value is None:
                continue  # the usable cores among the workers (engine_threads_for)
            low = 0 if name == "engine_threads" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an int >= {low}, got {value!r}")
        for name in ("timeout", "body_timeout", "header_timeout", "keep_alive"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 < value < float("inf")
            ):
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.reload_interval < 0:
            raise ConfigError(f"reload_interval must be >= 0, got {self.reload_interval!r}")
        if self.sql is not None and not self.sql_tables:
            raise ConfigError("sql needs sql_tables: the tables and columns it may read")
        if self.sql is None and self.sql_tables:
            raise ConfigError("sql_tables is set but sql (the database URL) is not")

    def to_json(self) -> str:
        """The settings as JSON (for worker processes)."""
        return orjson.dumps(asdict(self)).decode()

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        """Settings from :meth:`to_json`."""
        data = orjson.loads(text)
        data["kbs"] = tuple(tuple(pair) for pair in data["kbs"])
        return cls(**data)


def engine_threads_for(engine_threads: int | None, workers: int = 1) -> int:
    """The engine threads of one worker: as set, or the usable cores shared by ``workers``."""
    if engine_threads is not None:
        return engine_threads
    from .._threads import usable_cores

    return max(1, usable_cores() // max(1, workers))


def parse_kb_args(values: list[str]) -> tuple[tuple[str, str], ...]:
    """``--kb PATH`` / ``--kb NAME=PATH`` values as (name, path) pairs.

    A bare PATH is named by its folder.
    """
    out = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            path = value
            name = Path(value).resolve().name or "kb"
        out.append((name, str(Path(path).resolve())))
    return tuple(out)


def parse_sql_tables(values: list[str]) -> dict[str, list[str]]:
    """``--sql-tables TABLE=COL,COL`` values as a table -> columns mapping."""
    out: dict[str, list[str]] = {}
    for value in values:
        table, sep, columns = value.partition("=")
        cols = [c.strip() for c in columns.split(",") if c.strip()]
        if not sep or not table.strip() or not cols:
            raise ConfigError(f"--sql-tables {value!r}: write TABLE=COLUMN,COLUMN,...")
        have = out.setdefault(table.strip(), [])
        have.extend(c for c in cols if c not in have)
    return out
