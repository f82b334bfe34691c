"""LanceDB (``lancedb``): one table per knowledge base, in a directory or any URI LanceDB opens.

Selected by ``index="lancedb:/abs/dir"`` (or ``"lancedb:s3://bucket/path"``;
object-store credentials come from the environment, as LanceDB reads them).
Options after ``?``: ``collection`` (the table, default ``fastrag``),
``index`` (an ANN index built over the table: ``IVF_PQ``, ``IVF_HNSW_SQ``,
``IVF_HNSW_PQ``, ``IVF_FLAT``, or ``auto``: ``IVF_HNSW_SQ`` once the table
holds ``ann_rows`` rows; default none, which is LanceDB's exact flat
search), ``ann_rows`` (the size from which the index is built, default
100,000 and never under 256: IVF and PQ train on the rows),
``nprobes`` (default 32), ``refine`` (4) and ``ef`` (HNSW kinds: 200), the ANN
index's search parameters.

The index is built once the table is written (a build), or by the add whose
batch takes the table past ``ann_rows``; later rows are searched exactly by
LanceDB beside the index until :meth:`LanceStore.compact` (``optimize()``)
folds them in. A store with an index is
approximate (``exact`` is false): :class:`~.base.StoreIndex` checks that a
filtered search came back with ``k`` rows and asks again with the allow-list
or searches exactly itself when it did not.

The payload is typed columns beside the vector; filters become a SQL
``WHERE`` applied before the vector search (``prefilter=True``). Metadata
conditions (the user metadata is kept as JSON text) go down as a
``chunk_id IN (...)`` allow-list. Deletes are one ``DELETE ... WHERE
chunk_id IN (...)`` per call (a LanceDB delete is a commit: one per call,
never one per chunk); :meth:`LanceStore.compact` runs ``optimize()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import ConfigError, StoreCorruptedError
from .base import Pushdown, VectorStore
from .sql import Dialect, translate

__all__ = ["LanceStore"]

_INDEX_TYPES = ("IVF_PQ", "IVF_HNSW_SQ", "IVF_HNSW_PQ", "IVF_FLAT", "AUTO")

ANN_ROWS = 100_000
"""Rows from which ``index="auto"`` builds an ANN index (below it, exact flat search is fast)."""

MIN_ANN_ROWS = 256

HNSW_EF = 200
"""The HNSW candidate list of an ``IVF_HNSW_*`` index per query, unless ``ef`` is given.

LanceDB's own default left recall@10 at 0.888 on compare_stores' data
(20,000 x 384, 64 clusters, IVF_HNSW_SQ, nprobes 32, refine 4); ef 128 /
160 / 200 / 256 gave 0.946 / 0.965 / 0.978 / 0.987.
"""
"""Fewest rows an ANN index is trained on (PQ's 256 centroids per sub-vector)."""


def _lancedb() -> Any:
    try:
        import lancedb
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "index='lancedb:...' needs lancedb: pip install 'fastrag-engine[lancedb]'"
        ) from exc
    return lancedb


def _schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_id", pa.int64(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
            pa.field("doc_id", pa.string()),
            pa.field("title", pa.string()),
            pa.field("source", pa.string()),
            pa.field("section", pa.string()),
            pa.field("ord", pa.int32()),
            pa.field("start", pa.int64()),
            pa.field("end", pa.int64()),
            pa.field("updated_at", pa.int64()),
            pa.field("acl", pa.list_(pa.string())),
            pa.field("public", pa.bool_()),
            pa.field("metadata", pa.string()),
        ]
    )


class LanceStore(VectorStore):
    """A LanceDB table (see the module docstring).

    Parameters
    ----------
    uri : str
        A directory or a URI LanceDB connects to.
    table : str
        The table's name.
    index : str, optional
        ANN index type built over the table, or ``"auto"`` (``IVF_HNSW_SQ``);
        none: exact flat search.
    ann_rows : int
        Rows from which the index is built (at least 256).
    nprobes, refine : int
        Search parameters of the ANN index.
    ef : int, optional
        The HNSW candidate list of an ``IVF_HNSW_*`` index (default
        :data:`HNSW_EF`; raised to the rows refined, ``k * refine``).
    """

    engine = "lancedb"

    def __init__(
        self,
        uri: str,
        *,
        table: str = "fastrag",
        index: str | None = None,
        ann_rows: int | None = None,
        nprobes: int = 32,
        refine: int = 4,
        ef: int | None = None,
    ) -> None:
        if index is not None and index.upper() not in _INDEX_TYPES:
            names = ", ".join(t.lower() if t == "AUTO" else t for t in _INDEX_TYPES)
            raise ConfigError(f"lancedb index must be one of {names}, got {index!r}")
        self.uri, self.table_name = uri, table
        self.index_type = None if index is None else index.upper()
        if ann_rows is None:
            ann_rows = ANN_ROWS if self.index_type == "AUTO" else MIN_ANN_ROWS
        if int(ann_rows) < MIN_ANN_ROWS:
            raise ConfigError(f"lancedb ann_rows must be at least {MIN_ANN_ROWS}, got {ann_rows}")
        self.ann_rows = int(ann_rows)
        self.nprobes, self.refine = int(nprobes), int(refine)
        hnsw = (
            self.index_type is not None and "HNSW" in self.index_type or self.index_type == "AUTO"
        )
        self.ef = int(ef) if ef is not None else (HNSW_EF if hnsw else None)
        self.exact = True  # until an ANN index is built over the table (finish, attach)
        self._db: Any = None
        self._table: Any = None
        self._filling = False
        self.dialect = Dialect()

    def where(self) -> str:
        """The URI and table."""
        return f"{self.uri} table {self.table_name}"

    def describe(self) -> dict[str, Any]:
        """URI, table and index parameters."""
        return {
            "engine": "lancedb", "uri": self.uri, "table": self.table_name,
            "index": self.index_type, "ann_rows": self.ann_rows, "nprobes": self.nprobes,
            "refine": self.refine, "ef": self.ef, "indexed": not self.exact,
        }  # fmt: skip

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> LanceStore:
        """The store a manifest describes."""
        return cls(
            str(record["uri"]), table=str(record.get("table", "fastrag")),
            index=record.get("index"), ann_rows=record.get("ann_rows"),
            nprobes=int(record.get("nprobes", 32)),
            refine=int(record.get("refine", 4)),
            ef=None if record.get("ef") is None else int(record["ef"]),
        )  # fmt: skip

    # -- lifecycle -------------------------------------------------------------
    def _connect(self) -> Any:
        if self._db is None:
            self._db = _lancedb().connect(self.uri)
        return self._db

    @property
    def table(self) -> Any:
        """The LanceDB table."""
        if self._table is None:
            raise StoreCorruptedError(f"lancedb store {self.where()}: not opened")
        return self._table

    def create(self, dim: int) -> None:
        """A new, empty table (replacing one of the same name)."""
        self._table = self._connect().create_table(
            self.table_name, schema=_schema(dim), mode="overwrite"
        )
        self._filling = True  # the first rows: the index is built by finish(), over all of them

    def attach(self, dim: int, directory: Path | None, files: Mapping[str, Any]) -> None:
        """Open the table; its vectors must have the knowledge base's dimension."""
        table = self._connect().open_table(self.table_name)
        found = table.schema.field("vector").type.list_size
        if found != dim:
            raise StoreCorruptedError(
                f"lancedb store {self.where()}: vectors of dimension {found}, the knowledge "
                f"base has {dim}"
            )
        self._table = table
        self.exact = not self._indexed()

    def _indexed(self) -> bool:
        """Whether the table has an index on its vector column."""
        return any("vector" in list(ix.columns) for ix in self.table.list_indices())

    def close(self) -> None:
        """Drop the connection (reopened by :meth:`attach`)."""
        self._table = self._db = None

    def finish(self) -> None:
        """Build the ANN index, when one is asked for and the table has ``ann_rows`` rows."""
        self._filling = False
        if self.index_type is None or self.count() < self.ann_rows:
            return
        from lancedb import index as lance_index

        kind = "IVF_HNSW_SQ" if self.index_type == "AUTO" else self.index_type
        config = {
            "IVF_PQ": lance_index.IvfPq, "IVF_HNSW_SQ": lance_index.HnswSq,
            "IVF_HNSW_PQ": lance_index.HnswPq, "IVF_FLAT": lance_index.IvfFlat,
        }[kind](distance_type="dot")  # fmt: skip
        self.table.create_index("vector", config=config, replace=True)
        self.exact = False

    # -- writes ----------------------------------------------------------------
    def upsert(self, ids: np.ndarray, vectors: np.ndarray, payload: pa.Table) -> None:
        """Append one batch (one commit)."""
        dim = vectors.shape[1]
        flat = pa.array(np.ascontiguousarray(vectors, np.float32).reshape(-1))
        data = payload.drop_columns(["chunk_id"])
        table = pa.table(
            {
                "chunk_id": pa.array(ids, pa.int64()),
                "vector": pa.FixedSizeListArray.from_arrays(flat, dim),
                **{name: data.column(name) for name in data.column_names},
            }
        )
        self.table.add(table.cast(_schema(dim)))
        if self.exact and self.index_type is not None and not self._filling:
            self.finish()  # an add took the table past ann_rows

    def delete(self, ids: np.ndarray) -> None:
        """One delete (one commit) for all ``ids``."""
        if len(ids):
            self.table.delete(f"chunk_id IN ({', '.join(map(str, np.asarray(ids).tolist()))})")

    def compact(self, live_ids: np.ndarray) -> None:
        """Compact the table's files, fold new rows into the index, drop old versions.

        A table that adds grew past ``ann_rows`` gets its ANN index here.
        """
        self.table.optimize()
        if self.exact:
            self.finish()

    def count(self) -> int:
        """Rows in the table."""
        return int(self.table.count_rows())

    # -- search ----------------------------------------------------------------
    def translate(self, pushdown: Pushdown) -> Any:
        """A SQL ``WHERE`` of the filter, or None (user metadata conditions)."""
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
        """Top-``k`` chunk ids by dot product, filtered before the search."""
        m = queries.shape[0]
        where = native
        if ids is not None:
            if ids.size == 0:
                return self._pad([[] for _ in range(m)], k)
            where = f"chunk_id IN ({', '.join(map(str, ids.tolist()))})"
        q = self.table.search(queries if m > 1 else queries[0]).distance_type("dot").limit(k)
        if not self.exact:
            q = q.nprobes(self.nprobes).refine_factor(self.refine)
            if self.ef is not None:  # LanceDB wants ef >= the rows it refines
                q = q.ef(max(self.ef, k * max(1, self.refine)))
        if where is not None:
            q = q.where(where, prefilter=True)
        result = q.select(["chunk_id", "_distance"]).to_arrow()
        qi = (
            result.column("query_index").to_numpy()
            if "query_index" in result.column_names
            else np.zeros(result.num_rows, np.int64)
        )
        cids = result.column("chunk_id").to_numpy()
        scores = 1.0 - result.column("_distance").to_numpy().astype(np.float64)
        # Per query, best first (a stable sort: equal scores keep LanceDB's order), in arrays.
        order = np.lexsort((-scores, qi))
        qi, cids, scores = qi[order], cids[order], scores[order]
        pos = np.arange(qi.size) - np.searchsorted(qi, qi, side="left")
        keep = pos < k
        ids = np.full((m, k), -1, np.int64)
        out = np.full((m, k), -np.inf, np.float32)
        ids[qi[keep], pos[keep]] = cids[keep]
        out[qi[keep], pos[keep]] = scores[keep]
        return ids, out
