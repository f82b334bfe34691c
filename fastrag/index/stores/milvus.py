"""Milvus (``pymilvus``): Milvus Lite on a local file, or a Milvus server or cluster.

Selected by ``index="milvus:/abs/file.db"`` (Milvus Lite, from the
``milvus-lite`` package: a local server process over the file) or
``"milvus://host:19530"`` (``milvuss://`` for TLS; the token from
``MILVUS_TOKEN`` or the ``token`` argument, never saved). Options after
``?``: ``collection`` (default ``fastrag``).

The collection's fields are the chunk id (primary key), the vector (a
``FLAT`` inner-product index: exact) and the filterable metadata, the user
metadata as a JSON field ``meta``. Filters become a boolean expression
applied inside the search; conditions it cannot state exactly as fastrag
means them go down as ``chunk_id in [...]``. Writes are one ``insert`` per
batch and one ``delete`` per call; Milvus Lite then seals the rows a write
call added (``flush``: its search scans unsealed rows on every question,
about 2 s a question at 20,000 rows against 50-90 ms sealed, under load).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from ...config import ENV_MILVUS_TOKEN
from ...errors import ConfigError, StoreCorruptedError
from .base import Condition, LocatedStore, Pushdown, metadata_objects
from .sql import Dialect, translate

__all__ = ["MilvusStore"]

_MAX_TEXT = 65_535
_MAX_ACL = 4096


def _pymilvus() -> Any:
    try:
        import pymilvus
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "index='milvus:...' needs pymilvus (and milvus-lite for a local file): "
            "pip install 'fastrag-engine[milvus]'"
        ) from exc
    return pymilvus


class _MilvusDialect(Dialect):
    eq = "=="
    conj, disj = " and ", " or "

    def string(self, value: str) -> str:
        return orjson.dumps(value).decode()  # a double-quoted, escaped literal

    def column(self, name: str) -> str:
        return name

    def in_list(self, column: str, values: list[str], negate: bool) -> str:
        return f"{column} {'not in' if negate else 'in'} [{', '.join(values)}]"

    def not_null(self, column: str) -> str:
        return f"{column} is not null"

    def acl(self, names: list[str]) -> str:
        if not names:
            return "public"
        return f"(public or array_contains_any(acl, [{', '.join(map(self.string, names))}]))"

    def metadata(self, cond: Condition) -> str | None:
        # Only string equality and membership mean the same in Milvus as in fastrag.
        values = (cond.value,) if cond.op == "eq" else cond.value
        if cond.op not in ("eq", "in") or not values:
            return None
        if not all(isinstance(v, str) for v in values):
            return None
        path = f"meta[{self.string(cond.field)}]"
        return "(" + " or ".join(f"{path} == {self.string(v)}" for v in values) + ")"


class MilvusStore(LocatedStore):
    """A Milvus collection (see the module docstring).

    Parameters
    ----------
    path : str, optional
        Milvus Lite: the database file.
    url : str, optional
        A Milvus server.
    collection : str
        The collection's name.
    token : str, optional
        The server's token (default: ``MILVUS_TOKEN``).
    """

    engine = "milvus"
    secret_env = ENV_MILVUS_TOKEN

    def __init__(
        self,
        *,
        path: str | None = None,
        url: str | None = None,
        collection: str = "fastrag",
        token: str | None = None,
    ) -> None:
        super().__init__(path, url, collection, token, "Milvus Lite")
        self._client: Any = None
        self.dialect = _MilvusDialect()
        self.max_ids = 8192  # the expression grows with the list

    def one_process(self) -> str | None:
        """Milvus Lite locks its file (one process at a time); a server: None."""
        if self.path is None:
            return None
        return f"Milvus Lite locks its file {self.path}"

    # -- lifecycle -------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The client (Milvus Lite starts its server on first use)."""
        if self._client is None:
            pymilvus = _pymilvus()
            if self.path is not None:
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                self._client = pymilvus.MilvusClient(self.path)
            else:
                token = self.secret() or ""
                self._client = pymilvus.MilvusClient(uri=self.url, token=token)
        return self._client

    def create(self, dim: int) -> None:
        """A new, empty collection (replacing one of the same name)."""
        pymilvus = _pymilvus()
        dt = pymilvus.DataType
        client = self.client
        if client.has_collection(self.collection):
            client.drop_collection(self.collection)
        schema = pymilvus.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("chunk_id", dt.INT64, is_primary=True)
        schema.add_field("vector", dt.FLOAT_VECTOR, dim=dim)
        for name in ("doc_id", "title", "source", "section"):
            schema.add_field(name, dt.VARCHAR, max_length=_MAX_TEXT, nullable=True)
        schema.add_field("ord", dt.INT32)
        schema.add_field("start", dt.INT64)
        schema.add_field("end", dt.INT64)
        schema.add_field("updated_at", dt.INT64, nullable=True)
        schema.add_field(
            "acl", dt.ARRAY, element_type=dt.VARCHAR, max_capacity=_MAX_ACL, max_length=1024
        )
        schema.add_field("public", dt.BOOL)
        schema.add_field("meta", dt.JSON, nullable=True)
        index = client.prepare_index_params()
        index.add_index("vector", index_type="FLAT", metric_type="IP")
        client.create_collection(
            self.collection, schema=schema, index_params=index, consistency_level="Strong"
        )

    def attach(self, dim: int, directory: Path | None, files: Mapping[str, Any]) -> None:
        """Check the collection is there, with vectors of the knowledge base's dimension."""
        client = self.client
        if not client.has_collection(self.collection):
            raise StoreCorruptedError(f"milvus store {self.where()}: no such collection")
        info = client.describe_collection(self.collection)
        found = next(
            (f.get("params", {}).get("dim") for f in info["fields"] if f["name"] == "vector"), None
        )
        if found is not None and int(found) != dim:
            raise StoreCorruptedError(
                f"milvus store {self.where()}: vectors of dimension {found}, the knowledge "
                f"base has {dim}"
            )
        client.load_collection(self.collection)

    def close(self) -> None:
        """Close the client (Milvus Lite: the server stops with the last one); reopened on use."""
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(Exception):
                client.close()

    # -- writes ----------------------------------------------------------------
    def upsert(self, ids: np.ndarray, vectors: np.ndarray, payload: pa.Table) -> None:
        """One insert of the batch (chunk ids are never reused)."""
        rows = payload.drop_columns(["metadata"]).to_pylist()
        vecs = np.asarray(vectors, np.float32)
        for i, (row, meta) in enumerate(zip(rows, metadata_objects(payload), strict=True)):
            row["vector"] = vecs[i]
            row["meta"] = meta or None
        self.client.insert(self.collection, rows)

    def flush(self) -> None:
        """Milvus Lite: seal the rows just written (a server seals and indexes on its own)."""
        if self.path is not None:
            self.client.flush(self.collection)

    def delete(self, ids: np.ndarray) -> None:
        """One delete of every id."""
        if len(ids):
            self.client.delete(self.collection, ids=[int(i) for i in ids])

    def compact(self, live_ids: np.ndarray) -> None:
        """Ask Milvus to compact its segments (best effort: Milvus Lite may not)."""
        with contextlib.suppress(Exception):
            self.client.compact(self.collection)

    def count(self) -> int:
        """Entities in the collection."""
        rows = self.client.query(self.collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    # -- search ----------------------------------------------------------------
    def translate(self, pushdown: Pushdown) -> Any:
        """A Milvus boolean expression, or None when a condition has no exact translation."""
        return translate(self.dialect, pushdown)

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        native: Any = None,
        ids: np.ndarray | None = None,
        share: float = 1.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One search request: top-``k`` entities per query, filtered inside the search."""
        expr = native or ""
        if ids is not None:
            if ids.size == 0:
                return self._pad([[] for _ in queries], k)
            expr = f"chunk_id in [{', '.join(map(str, ids.tolist()))}]"
        answers = self.client.search(
            self.collection,
            data=list(np.asarray(queries, np.float32)),
            limit=k,
            filter=expr,
            output_fields=["chunk_id"],
            search_params={"metric_type": "IP"},
        )
        return self._pad(
            [[(int(h["chunk_id"]), float(h["distance"])) for h in a] for a in answers], k
        )
