"""FAISS in process (``faiss-cpu``): a flat, IVF or HNSW index labelled by chunk id.

Selected by ``index="faiss"`` (``Flat``: exact) or ``"faiss:<factory>"``
with any :func:`faiss.index_factory` string (``"faiss:IVF1024,Flat"``,
``"faiss:HNSW32"``), options after ``?``: ``nprobe`` (IVF lists searched,
default 32), ``ef_search`` (HNSW, default 256) and ``ef_construction``
(HNSW build, default 200; FAISS's own is 40). The index is saved with
every snapshot as ``vectors.faiss`` (FAISS's own format, never a pickle)
and read back on load.

Filters: FAISS has no payload, so a filter is handed down as an
``IDSelectorBitmap`` over the eligible chunk ids, applied inside the search
(pre-filtering) by every index type. Deletes remove the ids where the index
type can (flat, IVF); an HNSW graph cannot remove, so its deleted ids stay
in the graph, are never returned, and the graph is rebuilt when compaction
finds a fifth of it deleted.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..._fs import fsync_dir, fsync_file, sha256_file
from ...errors import ConfigError, SearchIndexError, StoreCorruptedError
from .base import Pushdown, VectorStore, store_errors, widened

__all__ = ["FAISS_FILE", "FaissStore"]

FAISS_FILE = "vectors.faiss"

NPROBE = 32
"""IVF lists searched per query (IVF256 at 20,000 x 384, compare_stores: recall@10 0.997)."""

EF_SEARCH = 256
"""HNSW candidates per query (HNSW32, 20,000 x 384 clustered: recall@10 0.975; 128: 0.923)."""

EF_CONSTRUCTION = 200
"""HNSW candidates while building (FAISS's default, 40, gave 0.67 at efSearch 128)."""


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "index='faiss' needs faiss-cpu: pip install 'fastrag-engine[faiss]'"
        ) from exc
    return faiss


def _new_index(faiss: Any, dim: int, factory: str, ef_construction: int = 200) -> Any:
    """An empty index labelled by chunk id.

    IVF indexes keep the ids themselves (and remove them correctly); the
    others are wrapped in an ``IndexIDMap2`` (FAISS's id map renumbers on
    removal as a flat index does, which an IVF index does not). An HNSW
    graph is built with ``ef_construction`` candidates (FAISS's own default,
    40, left recall@10 at 0.67 with efSearch 128 on compare_stores' data).
    """
    inner = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    down = faiss.downcast_index(inner)
    if isinstance(down, faiss.IndexIVF):
        return inner  # the owning proxy (a downcast one would not keep the index alive)
    if isinstance(down, faiss.IndexHNSW):
        down.hnsw.efConstruction = int(ef_construction)
    return faiss.IndexIDMap2(inner)


def _inner(faiss: Any, index: Any) -> Any:
    """The index under an id map, or the index itself."""
    return faiss.downcast_index(index.index if hasattr(index, "id_map") else index)


class FaissStore(VectorStore):
    """FAISS in process (see the module docstring).

    Parameters
    ----------
    factory : str
        A :func:`faiss.index_factory` description; default ``"Flat"`` (exact).
    nprobe : int
        IVF lists searched per query.
    ef_search : int
        HNSW candidate list per query.
    ef_construction : int
        HNSW candidate list while the graph is built.
    """

    engine = "faiss"

    def __init__(
        self,
        factory: str = "Flat",
        *,
        nprobe: int = NPROBE,
        ef_search: int = EF_SEARCH,
        ef_construction: int = EF_CONSTRUCTION,
    ) -> None:
        if not isinstance(factory, str) or not factory.strip():
            raise ConfigError(f"faiss factory must be a non-empty string, got {factory!r}")
        self.factory = factory.strip()
        self.nprobe, self.ef_search = int(nprobe), int(ef_search)
        self.ef_construction = int(ef_construction)
        self._index: Any = None
        self._lock = threading.RLock()  # FAISS indexes are not safe to search while written
        self._removed = 0  # ids deleted but still in an index that cannot remove them
        self._removed_ids = np.zeros(0, np.int64)
        self.exact = self.factory in ("Flat", "IDMap,Flat", "IDMap2,Flat")
        self.max_ids = 1 << 62  # a bitmap selector: any size
        self._plain: tuple[Any, ...] | None = None  # (index, nprobe, ef, unfiltered params)

    def where(self) -> str:
        """The factory string."""
        return f"({self.factory})"

    def describe(self) -> dict[str, Any]:
        """Factory and search parameters."""
        return {
            "engine": "faiss",
            "factory": self.factory,
            "nprobe": self.nprobe,
            "ef_search": self.ef_search,
            "ef_construction": self.ef_construction,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> FaissStore:
        """The store a manifest describes."""
        return cls(
            str(record.get("factory", "Flat")),
            nprobe=int(record.get("nprobe", NPROBE)),
            ef_search=int(record.get("ef_search", EF_SEARCH)),
            ef_construction=int(record.get("ef_construction", EF_CONSTRUCTION)),
        )

    # -- lifecycle -------------------------------------------------------------
    def create(self, dim: int) -> None:
        """A new, empty index."""
        faiss = _faiss()
        with store_errors(self, "create"):
            self._index = _new_index(faiss, dim, self.factory, self.ef_construction)
        self._removed = 0
        self._removed_ids = np.zeros(0, np.int64)

    def attach(self, dim: int, directory: Path | None, files: Mapping[str, Any]) -> None:
        """Read the snapshot's ``vectors.faiss``."""
        faiss = _faiss()
        if directory is None or FAISS_FILE not in files:
            raise StoreCorruptedError(f"{directory}: the snapshot records no {FAISS_FILE}")
        path = directory / FAISS_FILE
        try:
            index = faiss.read_index(str(path))
        except Exception as exc:
            raise StoreCorruptedError(f"{path}: not a FAISS index ({exc})") from exc
        if index.d != dim:
            raise StoreCorruptedError(f"{path}: dimension {index.d}, the knowledge base has {dim}")
        self._index = index
        self._removed = int(files[FAISS_FILE].get("removed", 0))
        self._removed_ids = np.zeros(0, np.int64)  # the snapshot's tombstones cover them

    @property
    def index(self) -> Any:
        """The FAISS index (an IVF index, or an ``IndexIDMap2`` over the factory's index)."""
        if self._index is None:
            raise SearchIndexError("faiss store: no index (create or attach first)")
        return self._index

    # -- writes ----------------------------------------------------------------
    def train(self, vectors: np.ndarray) -> None:
        """Train an IVF or PQ index on (a sample of) the vectors."""
        index = self.index
        if index.is_trained or len(vectors) == 0:
            return
        sample = vectors
        if len(vectors) > 200_000:
            pick = np.random.default_rng(0).choice(len(vectors), 200_000, replace=False)
            sample = vectors[np.sort(pick)]
        with self._lock, store_errors(self, "train"):
            index.train(np.ascontiguousarray(sample, dtype=np.float32))

    def upsert(self, ids: np.ndarray, vectors: np.ndarray, payload: pa.Table) -> None:
        """Add vectors under their chunk ids (chunk ids are never reused)."""
        index = self.index
        if not index.is_trained:
            raise SearchIndexError(
                f"faiss store ({self.factory}): the index is not trained; build the knowledge "
                "base with enough chunks to train it"
            )
        with self._lock:
            index.add_with_ids(
                np.ascontiguousarray(vectors, dtype=np.float32),
                np.ascontiguousarray(ids, dtype=np.int64),
            )

    def delete(self, ids: np.ndarray) -> None:
        """Remove ids (or mark them, for an index that cannot remove)."""
        faiss = _faiss()
        if len(ids) == 0:
            return
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        with self._lock:
            try:
                self.index.remove_ids(faiss.IDSelectorBatch(ids))
            except RuntimeError as exc:
                if "not implemented" not in str(exc):
                    raise
                # HNSW: kept in the graph, never returned (StoreIndex drops them).
                self._removed += len(ids)
                self._removed_ids = np.union1d(self._removed_ids, ids)

    def compact(self, live_ids: np.ndarray) -> None:
        """Rebuild an HNSW index when a fifth or more of it is deleted ids."""
        if self._removed == 0 or self._removed < 0.2 * max(1, self.count()):
            return
        faiss = _faiss()
        with self._lock, store_errors(self, "compact"):
            old = self.index
            n, d = old.ntotal, old.d
            labels = faiss.vector_to_array(old.id_map).astype(np.int64)
            vectors = old.index.reconstruct_n(0, n) if n else np.zeros((0, d), np.float32)
            keep = np.isin(labels, live_ids)
            fresh = _new_index(faiss, d, self.factory, self.ef_construction)
            if not fresh.is_trained and keep.any():
                fresh.train(np.ascontiguousarray(vectors[keep]))
            if keep.any():
                fresh.add_with_ids(np.ascontiguousarray(vectors[keep]), labels[keep])
            self._index, self._removed = fresh, 0
            self._removed_ids = np.zeros(0, np.int64)

    def present(self, ids: np.ndarray) -> np.ndarray | None:
        """Which of ``ids`` the index holds and has not deleted (None for IVF)."""
        faiss = _faiss()
        index = self.index
        if not hasattr(index, "id_map"):
            return None  # IVF: ids removed for good, and no cheap list of what is held
        with self._lock:
            held = faiss.vector_to_array(index.id_map)
        return np.isin(ids, held) & ~np.isin(ids, self._removed_ids)

    def count(self) -> int:
        """Vectors in the index (deleted ones an HNSW graph keeps included)."""
        return int(self.index.ntotal)

    def files(self) -> dict[str, Callable[[Path], dict[str, Any]]]:
        """``vectors.faiss``, written atomically with the snapshot."""
        return {FAISS_FILE: self._save}

    def _save(self, path: Path) -> dict[str, Any]:
        faiss = _faiss()
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        try:
            with self._lock:
                faiss.write_index(self.index, str(tmp))
            fsync_file(tmp)
            digest, size = sha256_file(tmp), tmp.stat().st_size
            os.replace(tmp, path)
            fsync_dir(path.parent)
        except Exception as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise SearchIndexError(f"cannot write FAISS index {path}: {exc}") from exc
        return {"bytes": size, "sha256": digest, "removed": self._removed}

    # -- search ----------------------------------------------------------------
    def translate(self, pushdown: Pushdown) -> Any:
        """FAISS has no payload: every filter goes down as an id selector."""
        return None

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        native: Any = None,
        ids: np.ndarray | None = None,
        share: float = 1.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` ids by inner product, restricted to ``ids`` by a bitmap selector."""
        faiss = _faiss()
        index = self.index
        plain = self._plain
        key = (index, self.nprobe, self.ef_search)
        if ids is None and plain is not None and plain[:3] == key:
            params, keep = plain[3], None  # built once per index: no per-question SWIG calls
        else:
            params, keep = self._params(faiss, index, ids)
            if ids is None:
                self._plain = (*key, params)
        with self._lock:
            scores, found = index.search(
                np.ascontiguousarray(queries, np.float32), k, params=params
            )
        del keep
        found = found.astype(np.int64, copy=False)
        if found.size and found[:, -1].min() < 0:  # fewer than k: -1 ids last, -inf scores
            scores = np.where(found >= 0, scores, -np.inf).astype(np.float32)
        return found, scores

    def _params(self, faiss: Any, index: Any, ids: np.ndarray | None) -> tuple[Any, Any]:
        """Search parameters of the inner index type, with a selector over ``ids``."""
        sel = bitmap = None
        if ids is not None:
            bound = int(ids.max()) + 1 if ids.size else 1
            bits = np.zeros(bound, np.bool_)
            bits[ids] = True
            bitmap = np.packbits(bits, bitorder="little")
            sel = faiss.IDSelectorBitmap(len(bitmap), faiss.swig_ptr(bitmap))  # n: bytes
        inner = _inner(faiss, index)
        kwargs: dict[str, Any] = {} if sel is None else {"sel": sel}
        # A selective filter leaves fewer admitted neighbours per probe: widen the search by
        # the share of ids it admits (bounded), or recall falls with the filter.
        share = 1.0 if ids is None else max(1, ids.size) / max(1, index.ntotal)
        if isinstance(inner, faiss.IndexIVF):
            nprobe = widened(self.nprobe, share, bound=inner.nlist)
            params = faiss.SearchParametersIVF(nprobe=nprobe, **kwargs)
        elif isinstance(inner, faiss.IndexHNSW):
            ef = widened(self.ef_search, share)
            params = faiss.SearchParametersHNSW(efSearch=ef, **kwargs)
        elif sel is not None:
            params = faiss.SearchParameters(**kwargs)
        else:
            params = None
        return params, (bitmap, sel)
