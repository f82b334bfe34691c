"""Qdrant (``qdrant-client``): its local mode on a directory, or a Qdrant server or cluster.

Selected by ``index="qdrant:/abs/dir"`` (local mode: brute-force, exact;
for tests and small sets) or ``"qdrant://host:6333"`` (``qdrants://`` for
TLS; the API key from ``QDRANT_API_KEY`` or the ``api_key`` argument, never
saved). Options after ``?``: ``collection`` (default ``fastrag``).

Points are chunk ids, with the chunk's filterable metadata as payload
(the user metadata under ``meta``). Filters become a Qdrant ``Filter``
passed to the search (pre-filtering); conditions it cannot state exactly
as fastrag means them go down as a ``HasIdCondition`` allow-list. Writes
are one ``upsert`` per batch and one ``delete`` per call.

Qdrant's local mode keeps its points in SQLite and commits each one on its
own (a transaction, with its fsyncs, per point: 10,000 deletes took minutes
on a slow disk). In local mode every ``upsert`` and ``delete`` of this
adapter is therefore one SQLite transaction (:func:`_one_transaction`):
qdrant-client writes each point as it always does, and the call commits
once at its end; a call that fails rolls back, and the points it had
changed in memory are put back as they were, so the collection on disk and
in memory is what it was before the call. A Qdrant server is untouched by
this (its requests are one per call already).

Where SQLite zeroes every deleted row (``PRAGMA secure_delete`` ON, as the
Python build of the machine measured has it), a call runs with it FAST:
deleted rows are still zeroed in the pages that keep other rows, but not in
pages freed whole (SQLite's own default, OFF, zeroes none). 10,000 deletes
of 384-dimensional points took 0.70-1.02 s with ON, 0.17 s with FAST
(one process, load 3-4).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ...config import ENV_QDRANT_API_KEY
from ...errors import ConfigError, StoreCorruptedError
from .base import LocatedStore, Pushdown
from .qdrant_shared import Clauses, ids_filter, point_payloads, translate

__all__ = ["QdrantStore"]

_local_lock = threading.Lock()
_local_clients: dict[str, list[Any]] = {}
"""Local mode locks its directory: one client per directory, shared in the process."""


def _client_module() -> Any:
    try:
        import qdrant_client
        from qdrant_client import models
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "index='qdrant:...' needs qdrant-client: pip install 'fastrag-engine[qdrant]'"
        ) from exc
    return qdrant_client, models


class _Deferred:
    """A SQLite connection whose ``with`` blocks neither commit nor roll back.

    qdrant-client's local persistence writes each point in ``with
    connection:`` (a commit per point); under this wrapper those statements
    join one transaction, which :func:`_one_transaction` commits or rolls
    back. Everything else goes to the connection.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def __enter__(self) -> sqlite3.Connection:
        return self._connection

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


def _local_collection(client: Any, name: str) -> tuple[Any, Any] | None:
    """(collection, its persistence) of a local-mode client, or None (a server; or unknown).

    Reads qdrant-client's local mode (``QdrantLocal.collections``, each
    ``LocalCollection`` with its ``CollectionPersistence`` over a
    ``sqlite3.Connection``); a layout other than that one is left alone
    (writes then commit per point, as the client does).
    """
    collections = getattr(getattr(client, "_client", None), "collections", None)
    collection = collections.get(name) if isinstance(collections, dict) else None
    persistence = getattr(collection, "storage", None)
    if not isinstance(getattr(persistence, "storage", None), sqlite3.Connection):
        return None
    if not isinstance(getattr(collection, "ids", None), dict):
        return None
    if not isinstance(getattr(collection, "deleted", None), np.ndarray):
        return None
    return collection, persistence


@contextlib.contextmanager
def _one_transaction(client: Any, name: str, ids: Sequence[int]) -> Iterator[None]:
    """Run one local-mode write of ``ids`` as a single SQLite transaction.

    On success it commits once. On failure it rolls the transaction back and
    restores, in memory, whether each of ``ids`` is alive to what it was
    before (the points a delete had hidden come back; the points an upsert
    had added are hidden again: chunk ids are never reused, so an upsert
    only adds). Not local mode: the call as it is.
    """
    found = _local_collection(client, name)
    if found is None:
        yield
        return
    collection, persistence = found
    connection = persistence.storage
    index = collection.ids
    before = collection.deleted
    alive = {}
    for i in ids:
        idx = index.get(i)
        alive[i] = idx is not None and not before[idx]
    # SQLite builds that zero every deleted row's bytes (secure_delete ON: Python's on this
    # machine) spent 3-4x the time of a delete there: FAST still zeroes them in the table's
    # pages, not in pages freed whole (see the module docstring). Restored after the call.
    secure = connection.execute("PRAGMA secure_delete").fetchone()
    if secure is not None and secure[0] == 1:
        connection.execute("PRAGMA secure_delete=FAST")
    persistence.storage = _Deferred(connection)
    try:
        yield
        connection.commit()
    except BaseException:
        with contextlib.suppress(Exception):
            connection.rollback()
        deleted = collection.deleted
        for i, was in alive.items():
            idx = index.get(i)
            if idx is not None and idx < deleted.size:
                deleted[idx] = not was
        raise
    finally:
        persistence.storage = connection
        if secure is not None and secure[0] == 1:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("PRAGMA secure_delete=ON")


class QdrantStore(LocatedStore):
    """A Qdrant collection (see the module docstring).

    Parameters
    ----------
    path : str, optional
        Local mode: the directory.
    url : str, optional
        A Qdrant server.
    collection : str
        The collection's name.
    api_key : str, optional
        The server's API key (default: ``QDRANT_API_KEY``).
    exact : bool, optional
        Ask a server for exact search (local mode always is).
    """

    engine = "qdrant"
    secret_env = ENV_QDRANT_API_KEY

    def __init__(
        self,
        *,
        path: str | None = None,
        url: str | None = None,
        collection: str = "fastrag",
        api_key: str | None = None,
        exact: bool | None = None,
    ) -> None:
        super().__init__(path, url, collection, api_key, "local mode")
        self.exact = True if path is not None else bool(exact)
        self._client: Any = None
        self._write_lock = threading.Lock()

    def one_process(self) -> str | None:
        """Local mode locks its directory (one process at a time); a server: None."""
        if self.path is None:
            return None
        return f"Qdrant's local mode locks its directory {self.path}"

    # -- lifecycle -------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The client (connected on first use)."""
        if self._client is None:
            qdrant_client, _ = _client_module()
            if self.path is not None:
                with _local_lock:
                    held = _local_clients.get(self.path)
                    if held is None:
                        Path(self.path).mkdir(parents=True, exist_ok=True)
                        held = _local_clients[self.path] = [
                            qdrant_client.QdrantClient(path=self.path),
                            0,
                        ]
                    held[1] += 1
                    self._client = held[0]
            else:
                key = self.secret()
                self._client = qdrant_client.QdrantClient(url=self.url, api_key=key)
        return self._client

    def create(self, dim: int) -> None:
        """A new, empty collection (replacing one of the same name)."""
        _, models = _client_module()
        client = self.client
        if client.collection_exists(self.collection):
            client.delete_collection(self.collection)
        client.create_collection(
            self.collection,
            vectors_config=models.VectorParams(size=dim, distance=models.Distance.DOT),
        )

    def attach(self, dim: int, directory: Path | None, files: Mapping[str, Any]) -> None:
        """Check the collection is there, with vectors of the knowledge base's dimension."""
        info = self.client.get_collection(self.collection)
        size = info.config.params.vectors.size
        if size != dim:
            raise StoreCorruptedError(
                f"qdrant store {self.where()}: vectors of dimension {size}, the knowledge "
                f"base has {dim}"
            )

    def close(self) -> None:
        """Close the client (local mode: release the directory's lock); reopened when used."""
        if self._client is not None:
            client, self._client = self._client, None
            if self.path is not None:
                with _local_lock:
                    held = _local_clients.get(self.path)
                    if held is not None and held[0] is client:
                        held[1] -= 1
                        if held[1] > 0:
                            return
                        del _local_clients[self.path]
            client.close()

    def _live(self) -> Any:
        return self.client

    # -- writes ----------------------------------------------------------------
    def upsert(self, ids: np.ndarray, vectors: np.ndarray, payload: pa.Table) -> None:
        """One upsert of the batch, payload included."""
        _, models = _client_module()
        rows = point_payloads(payload)
        points = [int(i) for i in ids]
        client = self._live()
        with self._write_lock, _one_transaction(client, self.collection, points):
            client.upsert(
                self.collection,
                points=models.Batch(
                    ids=points, vectors=np.asarray(vectors, np.float32).tolist(), payloads=rows
                ),
            )

    def delete(self, ids: np.ndarray) -> None:
        """One delete of every id (local mode: one SQLite transaction)."""
        _, models = _client_module()
        if len(ids):
            points = [int(i) for i in ids]
            client = self._live()
            with self._write_lock, _one_transaction(client, self.collection, points):
                client.delete(self.collection, points_selector=models.PointIdsList(points=points))

    def count(self) -> int:
        """Points in the collection."""
        return int(self._live().count(self.collection, exact=True).count)

    # -- search ----------------------------------------------------------------
    def translate(self, pushdown: Pushdown) -> Any:
        """A Qdrant ``Filter``, or None when a condition has no exact translation."""
        _, models = _client_module()
        return translate(_ClientClauses(models), pushdown)

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        native: Any = None,
        ids: np.ndarray | None = None,
        share: float = 1.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One batch request: top-``k`` points per query, filtered inside the search."""
        _, models = _client_module()
        flt = native
        if ids is not None:
            if ids.size == 0:
                return self._pad([[] for _ in queries], k)
            flt = ids_filter(_ClientClauses(models), ids)
        local = self.path is not None  # brute force; it warns on search params
        params = None if local or not self.exact else models.SearchParams(exact=True)
        requests = [
            models.QueryRequest(query=q.tolist(), limit=k, filter=flt, params=params)
            for q in np.asarray(queries, np.float32)
        ]
        answers = self._live().query_batch_points(self.collection, requests=requests)
        return self._pad([[(int(p.id), float(p.score)) for p in a.points] for a in answers], k)


class _ClientClauses(Clauses):
    """Filter clauses in qdrant-client's ``models``."""

    def any_of(self, key: str, values: list[Any]) -> Any:
        return self.models.FieldCondition(key=key, match=self.models.MatchAny(any=values))

    def range(self, key: str, op: str, value: float) -> Any:
        return self.models.FieldCondition(key=key, range=self.models.Range(**{op: value}))

    def empty(self, key: str) -> Any:
        return self.models.IsEmptyCondition(is_empty=self.models.PayloadField(key=key))

    def null(self, key: str) -> Any:
        return self.models.IsNullCondition(is_null=self.models.PayloadField(key=key))

    def has_id(self, ids: list[int]) -> Any:
        return self.models.HasIdCondition(has_id=ids)

    def public(self) -> Any:
        return self.models.FieldCondition(key="public", match=self.models.MatchValue(value=True))
