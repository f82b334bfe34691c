"""Qdrant Edge (``qdrant-edge-py``): Qdrant's engine in this process, with its HNSW graph.

Selected by ``index="qdrant-edge:/abs/dir"``: one Qdrant Edge shard in
``dir/<collection>`` (default ``fastrag``). Unlike qdrant-client's local
mode (``"qdrant:/abs/dir"``: brute force in Python, "not designed for more
than about 100k vectors") it is Qdrant's own engine, run in process: its
segments, payload indexes and HNSW graph, on local disk.

Options after ``?``: ``ef`` (the HNSW candidate list per query, default
256), ``exact=1`` (exact search: no graph consulted), and how the graph is
built: ``m`` (16), ``ef_construct`` (200), ``full_scan_threshold`` (in KB of
vectors, default Qdrant's 10,000: a filter keeping fewer rows than that
many KB is searched exactly over its rows through the payload index) and
``indexing_threshold`` (in KB: segments smaller than that are not indexed
and searched by brute force, exactly; default the engine's own, under which
5,000 x 384 vectors stayed a plain segment and 8,000 x 384 were indexed).

Points are chunk ids with the chunk's filterable metadata as payload (as in
:mod:`.qdrant`, whose filter translation this adapter shares through
:mod:`.qdrant_shared`), with payload indexes on the chunk columns and the
``acl``. A public chunk is one whose ``acl`` is empty: in qdrant-edge-py
0.9 a ``MatchValue`` on a boolean payload matches no point (neither true
nor false, indexed or not), so the ``public`` flag the server adapter
filters on is not used here.

Writes are one ``upsert_points`` per batch and one ``delete_points`` per
call; after a write call the shard is optimized (the HNSW graph built over
the new rows: ``optimize()``) and flushed. Qdrant Edge locks its directory:
one process at a time opens it (another gets a :class:`SearchIndexError`
saying so); in this process every store of one directory shares one shard.

qdrant-edge-py 0.9 keeps the GIL while it searches and while it optimizes:
questions from several threads of one process take turns (400 exact
searches of a 6,000 x 64 shard took 0.062 s from one thread, 0.075 s from
two), and a write's graph build pauses the process's other Python threads
(building that shard's graph took 5.4 s, in which a thread searching every
10 ms was answered once).
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ...errors import ConfigError, SearchIndexError, StoreCorruptedError
from .base import LocatedStore, Pushdown, widened
from .qdrant_shared import Clauses, ids_filter, point_payloads, translate

__all__ = ["EF", "EF_CONSTRUCT", "FULL_SCAN_THRESHOLD", "M", "QdrantEdgeStore"]

EF = 256
"""HNSW candidate list per query, unless ``ef`` is given."""

M = 16
"""Edges per node of the HNSW graph (Qdrant's default)."""

EF_CONSTRUCT = 200
"""Candidate list while the graph is built (Qdrant's default 100; FAISS HNSW needed 200)."""

FULL_SCAN_THRESHOLD = 10_000
"""KB of vectors under which a filtered search scans the filter's rows (Qdrant's default)."""
_KEYWORD_FIELDS = ("doc_id", "title", "source", "section", "acl")
_INTEGER_FIELDS = ("chunk_id", "ord", "start", "end", "updated_at")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")


def _edge() -> Any:
    try:
        import qdrant_edge
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "index='qdrant-edge:...' needs qdrant-edge-py: pip install 'fastrag-engine[qdrant]'"
        ) from exc
    return qdrant_edge


class _Shard:
    """One open shard of a directory, shared by this process's stores of it."""

    def __init__(self, shard: Any, dim: int) -> None:
        self.shard, self.dim, self.users = shard, dim, 0


_shards_lock = threading.Lock()
_shards: dict[str, _Shard] = {}
"""Qdrant Edge locks a shard's directory, this process too: one open shard per directory."""


def _locked(exc: Exception) -> bool:
    """Whether a Qdrant Edge error says another process holds the directory."""
    return "WouldBlock" in str(exc)


class _EdgeClauses(Clauses):
    """Filter clauses in qdrant-edge-py's classes."""

    def any_of(self, key: str, values: list[Any]) -> Any:
        return self.models.FieldCondition(key=key, match=self.models.MatchAny(any=values))

    def range(self, key: str, op: str, value: float) -> Any:
        return self.models.FieldCondition(key=key, range=self.models.RangeFloat(**{op: value}))

    def empty(self, key: str) -> Any:
        return self.models.IsEmptyCondition(key=key)

    def null(self, key: str) -> Any:
        return self.models.IsNullCondition(key=key)

    def has_id(self, ids: list[int]) -> Any:
        return self.models.HasIdCondition(point_ids=set(ids))

    def public(self) -> Any:
        # MatchValue(True) on the boolean ``public`` matches nothing in qdrant-edge-py 0.9.
        return self.models.IsEmptyCondition(key="acl")


def _positive(name: str, value: int | None, least: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"qdrant-edge option {name} must be an integer >= {least}, got {value!r}")
    return value


class QdrantEdgeStore(LocatedStore):
    """A Qdrant Edge shard in a local directory (see the module docstring).

    Parameters
    ----------
    path : str
        The directory; the shard is its subdirectory ``collection``.
    collection : str
        The shard's name.
    ef : int
        HNSW candidate list per query.
    exact : bool
        Exact search (the graph is still built, and not consulted).
    m, ef_construct : int
        The HNSW graph's edges per node and candidate list while built.
    full_scan_threshold : int
        KB of vectors under which a filtered search scans the filter's rows.
    indexing_threshold : int, optional
        KB of vectors from which a segment is indexed (default: Qdrant's).
    """

    engine = "qdrant-edge"

    def __init__(
        self,
        path: str,
        *,
        collection: str = "fastrag",
        ef: int = EF,
        exact: bool = False,
        m: int = M,
        ef_construct: int = EF_CONSTRUCT,
        full_scan_threshold: int = FULL_SCAN_THRESHOLD,
        indexing_threshold: int | None = None,
    ) -> None:
        if not isinstance(path, str) or not path:
            raise ConfigError("a Qdrant Edge store takes a local directory: 'qdrant-edge:/abs/dir'")
        if not _NAME.fullmatch(collection) or collection in (".", ".."):
            raise ConfigError(
                f"qdrant-edge collection must be a plain directory name, got {collection!r}"
            )
        super().__init__(path, None, collection, None, "a directory")
        self.ef: int = _positive("ef", ef, 1) or EF
        self.m = _positive("m", m, 2)
        self.ef_construct = _positive("ef_construct", ef_construct, 1)
        self.full_scan_threshold = _positive("full_scan_threshold", full_scan_threshold, 0)
        self.indexing_threshold = _positive("indexing_threshold", indexing_threshold, 1)
        self.exact = bool(exact)
        self.shard_path = str(Path(path) / collection)
        self._held: _Shard | None = None
        self._dim: int | None = None  # the vectors' dimension, once created or attached
        self._filling = False  # between create() and finish(): the graph is built once, at the end
        self._write_lock = threading.Lock()
        self._params: Any = None

    def one_process(self) -> str | None:
        """Qdrant Edge locks its directory: one process at a time."""
        return f"Qdrant Edge locks its directory {self.shard_path}"

    def describe(self) -> dict[str, Any]:
        """Where, and the search and graph parameters."""
        return {
            "engine": self.engine, "path": self.path, "collection": self.collection,
            "ef": self.ef, "exact": self.exact, "m": self.m, "ef_construct": self.ef_construct,
            "full_scan_threshold": self.full_scan_threshold,
            "indexing_threshold": self.indexing_threshold,
        }  # fmt: skip

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> QdrantEdgeStore:
        """The store a manifest describes."""
        path = record.get("path")
        if not isinstance(path, str):
            raise StoreCorruptedError(f"a qdrant-edge store record has no path: {dict(record)!r}")
        threshold = record.get("indexing_threshold")
        return cls(
            path, collection=str(record.get("collection", "fastrag")),
            ef=int(record.get("ef", EF)), exact=bool(record.get("exact", False)),
            m=int(record.get("m", M)), ef_construct=int(record.get("ef_construct", EF_CONSTRUCT)),
            full_scan_threshold=int(record.get("full_scan_threshold", FULL_SCAN_THRESHOLD)),
            indexing_threshold=None if threshold is None else int(threshold),
        )  # fmt: skip

    # -- lifecycle -------------------------------------------------------------
    def _config(self, qe: Any, dim: int) -> Any:
        optimizers = None
        if self.indexing_threshold is not None:
            optimizers = qe.EdgeOptimizersConfig(indexing_threshold=self.indexing_threshold)
        return qe.EdgeConfig(
            vectors=qe.EdgeVectorParams(size=dim, distance=qe.Distance.Dot),
            hnsw_config=qe.HnswIndexConfig(
                m=self.m, ef_construct=self.ef_construct,
                full_scan_threshold=self.full_scan_threshold,
            ),
            optimizers=optimizers,
        )  # fmt: skip

    def _busy(self) -> SearchIndexError:
        return SearchIndexError(
            f"qdrant-edge store {self.shard_path}: the directory is open in another process "
            "(Qdrant Edge lets one process at a time open it); close that process, or keep "
            "the vectors in a Qdrant server ('qdrant://host:6333') that many can reach"
        )

    def create(self, dim: int) -> None:
        """A new, empty shard with its payload indexes (replacing one there)."""
        qe = _edge()
        config = self._config(qe, dim)
        self.close()
        with _shards_lock:
            held = _shards.get(self.shard_path)
            if held is not None:  # another store of this process has it open: replace it
                held.shard.close()
            elif Path(self.shard_path).exists():  # take its lock first: never remove another's
                try:
                    qe.EdgeShard.load(self.shard_path).close()
                except Exception as exc:
                    if _locked(exc):
                        raise self._busy() from exc
            if Path(self.shard_path).exists():
                shutil.rmtree(self.shard_path)
            Path(self.shard_path).parent.mkdir(parents=True, exist_ok=True)
            try:
                shard = qe.EdgeShard.create(self.shard_path, config)
                for name in _KEYWORD_FIELDS:
                    op = qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword)
                    shard.update(op)
                for name in _INTEGER_FIELDS:
                    op = qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Integer)
                    shard.update(op)
            except BaseException:
                if held is not None:
                    del _shards[self.shard_path]
                raise
            if held is None:
                held = _shards[self.shard_path] = _Shard(shard, dim)
            else:
                held.shard, held.dim = shard, dim
            held.users += 1
            self._held = held
        self._dim = dim
        self._filling = True

    def attach(self, dim: int, directory: Path | None, files: Mapping[str, Any]) -> None:
        """Open the saved shard (Qdrant Edge checks its vectors have dimension ``dim``)."""
        self.close()
        self._dim = dim
        held = self._open()
        if held.dim != dim:  # opened by another store of this process, for other vectors
            self.close()
            raise StoreCorruptedError(
                f"qdrant-edge store {self.where()}: vectors of dimension {held.dim}, the "
                f"knowledge base has {dim}"
            )

    def _open(self) -> _Shard:
        """The shard of the directory this process has open (loaded when none is)."""
        qe = _edge()
        if self._dim is None:
            raise SearchIndexError(f"qdrant-edge store {self.where()}: create or attach it first")
        with _shards_lock:
            held = _shards.get(self.shard_path)
            if held is None:
                if not Path(self.shard_path).is_dir():
                    raise StoreCorruptedError(
                        f"qdrant-edge store {self.where()}: no shard at {self.shard_path}"
                    )
                try:  # with the config: the engine checks the vectors' size against it
                    shard = qe.EdgeShard.load(self.shard_path, self._config(qe, self._dim))
                except Exception as exc:
                    if _locked(exc):
                        raise self._busy() from exc
                    if "incompatible" in str(exc).lower():
                        raise StoreCorruptedError(
                            f"qdrant-edge store {self.where()}: not a shard of vectors of the "
                            f"knowledge base's dimension {self._dim} ({exc})"
                        ) from exc
                    raise
                held = _shards[self.shard_path] = _Shard(shard, self._dim)
            held.users += 1
            self._held = held
            return held

    def close(self) -> None:
        """Release this store's use of the shard (the last one closes it); reopened when used."""
        held, self._held = self._held, None
        if held is None:
            return
        with _shards_lock:
            held.users -= 1
            if held.users > 0:
                return
            if _shards.get(self.shard_path) is held:
                del _shards[self.shard_path]
        held.shard.close()

    def _live(self) -> Any:
        held = self._held
        if held is None:  # closed: reopened on use
            held = self._open()
        return held.shard

    # -- writes ----------------------------------------------------------------
    def upsert(self, ids: np.ndarray, vectors: np.ndarray, payload: pa.Table) -> None:
        """One upsert of the batch, payload included."""
        qe = _edge()
        rows = point_payloads(payload)
        points = [
            qe.Point(i, v, row)
            for i, v, row in zip(
                np.asarray(ids, np.int64).tolist(),
                np.asarray(vectors, np.float32).tolist(),
                rows,
                strict=True,
            )
        ]
        shard = self._live()
        with self._write_lock:
            shard.update(qe.UpdateOperation.upsert_points(points))

    def flush(self) -> None:
        """After a write call: build the graph over its rows (not while filling), then flush."""
        shard = self._live()
        with self._write_lock:
            if not self._filling:
                shard.optimize()
            shard.flush()

    def finish(self) -> None:
        """The build's rows are written: build the HNSW graph, flush."""
        self._filling = False
        shard = self._live()
        with self._write_lock:
            shard.optimize()
            shard.flush()

    def delete(self, ids: np.ndarray) -> None:
        """One delete of every id, flushed."""
        if len(ids) == 0:
            return
        qe = _edge()
        shard = self._live()
        with self._write_lock:
            shard.update(qe.UpdateOperation.delete_points(np.asarray(ids, np.int64).tolist()))
            shard.flush()

    def compact(self, live_ids: np.ndarray) -> None:
        """Run the optimizers (they vacuum segments with many deleted points)."""
        shard = self._live()
        with self._write_lock:
            shard.optimize()
            shard.flush()

    def count(self) -> int:
        """Points in the shard."""
        qe = _edge()
        return int(self._live().count(qe.CountRequest(exact=True)))

    def present(self, ids: np.ndarray) -> np.ndarray | None:
        """Which of ``ids`` the shard holds."""
        ids = np.asarray(ids, np.int64)
        if ids.size == 0:
            return np.zeros(0, np.bool_)
        found = self._live().retrieve(ids.tolist(), False, False)
        return np.isin(ids, np.fromiter((int(r.id) for r in found), np.int64))

    # -- search ----------------------------------------------------------------
    def translate(self, pushdown: Pushdown) -> Any:
        """A Qdrant Edge ``Filter``, or None when a condition has no exact translation."""
        return translate(_EdgeClauses(_edge()), pushdown)

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        native: Any = None,
        ids: np.ndarray | None = None,
        share: float = 1.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` points per query (one batch request), filtered inside the search."""
        qe = _edge()
        flt = native
        if ids is not None:
            if ids.size == 0:
                return self._pad([[] for _ in queries], k)
            flt = ids_filter(_EdgeClauses(qe), ids)
        params = self._params
        if params is None:
            params = self._params = qe.SearchParams(hnsw_ef=self.ef, exact=self.exact)
        if share < 1.0 and not self.exact:
            # At 100,000 x 384 a filter keeping 10 % of the rows gave recall@10 0.884 at the
            # plain ef 256 through the engine's filtered graph search.
            params = qe.SearchParams(hnsw_ef=widened(self.ef, share), exact=False)
        shard = self._live()
        requests = [
            qe.QueryRequest(
                limit=k,
                query=qe.Query.Nearest(q),
                filter=flt,
                params=params,
                with_payload=False,
                with_vector=False,
            )  # fmt: skip
            for q in np.asarray(queries, np.float32).tolist()
        ]
        if len(requests) == 1:
            answers = [shard.query(requests[0])]
        else:
            answers = shard.query_batch(qe.QueryBatchRequest(requests))
        if all(len(a) == k for a in answers):  # full answers: straight into arrays (~9 us less)
            return (
                np.array([[p.id for p in a] for a in answers], np.int64).reshape(-1, k),
                np.array([[p.score for p in a] for a in answers], np.float32).reshape(-1, k),
            )
        return self._pad([[(p.id, p.score) for p in a] for a in answers], k)
