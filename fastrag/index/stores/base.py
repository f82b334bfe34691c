"""External vector stores behind :class:`~fastrag.index.base.VectorIndex`.

A :class:`VectorStore` is one engine's collection of a knowledge base's
vectors, keyed by chunk id, with the filterable metadata of every chunk as
its payload (:func:`payload_table`). :class:`StoreIndex` sees one such
store through one version of the chunk store, as
:class:`~fastrag.index.graph.GraphIndex` sees an HNSW graph: it answers in
global rows, and never returns a row that version does not hold alive.

How a filtered search runs (the *plan*, counted in :attr:`StoreIndex.plans`):

- ``"store"`` -- no filter: the store's own search;
- ``"native"`` -- the filter (``where`` and the principal, a
  :class:`Pushdown`) translated into the store's filter language and
  applied inside its search (pre-filtering);
- ``"ids"`` -- a filter the store cannot express: the eligible chunk ids
  handed to the store as an allow-list (in pieces of at most
  :attr:`VectorStore.max_ids`, merged);
- ``"local"`` -- an approximate store that still came back short: fastrag's
  exact search over the eligible rows the store holds (the vectors are in
  the chunk store). Logged and counted, never silent.

A search returns ``k`` results whenever ``k`` eligible rows exist in the
store: a store that answers short (an approximate index under a selective
filter, ids this version does not hold) is asked again with the allow-list,
then searched locally. An exact store that answers short under the filter
lacks the rows (deleted since by another version or process), so a loaded
older snapshot never returns a chunk deleted after it from the store.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ...config import store_secret
from ...errors import ConfigError, FastragError, SearchIndexError
from ..exact import ExactIndex

__all__ = [
    "Condition",
    "ID_LIST_MAX",
    "Pushdown",
    "StoreIndex",
    "VectorStore",
    "payload_table",
    "store_errors",
]

log = logging.getLogger("fastrag.stores")

ID_LIST_MAX = 16_384
"""Default largest id allow-list handed to a store (beyond it: exact local search)."""

_plans_lock = threading.Lock()

TIE_MARGIN = 8
"""Extra results asked of a store again when the k-th score ties the next one (see below)."""

WRITE_BATCH = 4096
"""Chunks per write request (one request per batch, never one per chunk)."""


WIDEN_BOUND = 4096
"""The largest search breadth :func:`widened` gives (``efSearch`` / ``ef`` of a graph)."""


def widened(breadth: int, share: float, bound: int = WIDEN_BOUND) -> int:
    """A search breadth widened by the share of rows a filter admits, at most ``bound``.

    A filter leaves fewer admitted neighbours per probe or per step of a graph, so an
    approximate index under one searches ``1 / share`` times as wide (never narrower),
    or its recall falls with the filter. ``share`` is the ``share=`` of a
    :meth:`VectorStore.search`.
    """
    return int(min(bound, breadth * max(1.0, 1.0 / max(share, 1e-9))))


@dataclass(frozen=True)
class Condition:
    """One field-operator condition of a ``where`` filter, in a store-neutral form.

    Attributes
    ----------
    field : str
        The chunk column or user metadata key.
    kind : {"string", "number", "timestamp", "metadata"}
        Where the field lives: a string column (``doc_id``, ``title``,
        ``source``, ``section``), a numeric column (``chunk_id``, ``ord``,
        ``start``, ``end``), ``updated_at`` (values as int microseconds
        since the epoch, UTC) or the user metadata.
    op : {"eq", "ne", "in", "not_in", "gt", "gte", "lt", "lte"}
        The operator.
    value : object
        A scalar, or a tuple for ``in`` / ``not_in``.
    """

    field: str
    kind: str
    op: str
    value: Any


@dataclass(frozen=True)
class Pushdown:
    """A filter as stores receive it: every condition must hold, and the ACL admits the row.

    Attributes
    ----------
    conditions : tuple of Condition
        The ``where`` conditions (all must hold).
    acl : frozenset of str or None
        ``None``: no access control (a trusted caller); otherwise the names
        that admit the caller (a public row, with an empty ``acl``, is
        always admitted).
    """

    conditions: tuple[Condition, ...] = ()
    acl: frozenset[str] | None = None


@contextlib.contextmanager
def store_errors(store: VectorStore, what: str) -> Iterator[None]:
    """Turn any failure of the store's client into a :class:`SearchIndexError`.

    The message names the engine, the operation and the exception type, with
    the store's secrets (API keys, tokens) masked.
    """
    try:
        yield
    except FastragError:
        raise
    except Exception as exc:
        raise _store_error(store, what, exc) from exc


def _store_error(store: VectorStore, what: str, exc: Exception) -> SearchIndexError:
    """The :class:`SearchIndexError` of a client's exception, the store's secrets masked."""
    text = str(exc)
    for secret in store.secrets():
        if secret:
            text = text.replace(secret, "***")
    return SearchIndexError(
        f"{store.engine} store {store.where()}: {what} failed ({type(exc).__name__}: {text[:500]})"
    )


def payload_table(batch: pa.RecordBatch) -> pa.Table:
    """The filterable metadata of a chunk batch, in plain types, one row per chunk.

    Columns: ``chunk_id`` (int64), ``doc_id``, ``title``, ``source``,
    ``section`` (string, nullable), ``ord`` (int32), ``start`` / ``end``
    (int64), ``updated_at`` (int64 microseconds, nullable), ``acl``
    (list<string>), ``public`` (bool: an empty or missing ``acl``) and
    ``metadata`` (the user metadata as JSON text, nullable).
    """
    n = batch.num_rows

    def text(name: str) -> pa.Array:
        if name not in batch.schema.names:
            return pa.nulls(n, pa.string())
        col = batch.column(name)
        return col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col

    acl = batch.column("acl")
    lengths = pc.list_value_length(acl).fill_null(0)
    return pa.table(
        {
            "chunk_id": batch.column("chunk_id").cast(pa.int64()),
            "doc_id": text("doc_id"),
            "title": text("title"),
            "source": text("source"),
            "section": text("section"),
            "ord": batch.column("ord").cast(pa.int32()),
            "start": batch.column("start").cast(pa.int64()),
            "end": batch.column("end").cast(pa.int64()),
            "updated_at": batch.column("updated_at").cast(pa.int64()),
            "acl": acl.fill_null(pa.scalar([], pa.list_(pa.string()))),
            "public": pc.equal(lengths, 0),
            "metadata": text("metadata"),
        }
    )


def metadata_objects(payload: pa.Table) -> list[dict[str, Any]]:
    """The user metadata of every row of a :func:`payload_table`, parsed (``{}`` when none)."""
    out = []
    for raw in payload.column("metadata").to_pylist():
        meta = orjson.loads(raw) if raw else {}
        out.append(meta if isinstance(meta, dict) else {})
    return out


class VectorStore:
    """One engine's collection of a knowledge base's vectors (subclass per engine).

    The store is shared by every version of the knowledge base opened in
    this process (adds and deletes change it in place, under the
    knowledge base's write lock); :class:`StoreIndex` keeps each version's
    results to that version's live rows.
    """

    engine: ClassVar[str] = ""
    """Engine name: the index kind saved in the manifest (``"faiss"``, ``"qdrant"``, ...)."""

    exact: bool = True
    """Whether the store's search is exact (a flat index, brute force)."""

    max_ids: int = ID_LIST_MAX
    """Largest id allow-list the store is handed; ``0``: it takes none."""

    @property
    def plans(self) -> collections.Counter[str]:
        """Searches per plan (see the module docstring), counted by :class:`StoreIndex`."""
        found = self.__dict__.get("_plans")
        if found is None:
            found = self.__dict__.setdefault("_plans", collections.Counter())
        return found  # type: ignore[no-any-return]

    def where(self) -> str:
        """Where the store is, for messages (never with credentials)."""
        return ""

    def secrets(self) -> tuple[str, ...]:
        """Secrets to mask in messages (API keys, tokens)."""
        return ()

    def one_process(self) -> str | None:
        """What holds the store to one process at a time (a local file's lock), or None.

        Qdrant's local mode and Milvus Lite lock their directory or file: a
        second process cannot open it (``fastrag serve --workers N`` refuses
        them before its workers start). A server, LanceDB and FAISS: None.
        """
        return None

    def describe(self) -> dict[str, Any]:
        """The manifest record of this store (never with credentials)."""
        raise NotImplementedError

    # -- lifecycle -------------------------------------------------------------
    def create(self, dim: int) -> None:
        """Make a new, empty collection of ``dim``-dimensional vectors (replacing one there)."""
        raise NotImplementedError

    def attach(self, dim: int, directory: Path | None, files: Mapping[str, Any]) -> None:
        """Reattach to the saved collection (``directory``/``files``: the snapshot's)."""
        raise NotImplementedError

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the client's resources."""

    def finish(self) -> None:  # noqa: B027 - optional hook
        """Called once the first rows are written (LanceDB: build its ANN index)."""

    # -- writes ----------------------------------------------------------------
    def train(self, vectors: np.ndarray) -> None:  # noqa: B027 - optional hook
        """Fit what an index needs before vectors are added (FAISS IVF); a no-op elsewhere."""

    def upsert(self, ids: np.ndarray, vectors: np.ndarray, payload: pa.Table) -> None:
        """Write one batch of vectors with their payload (one request)."""
        raise NotImplementedError

    def delete(self, ids: np.ndarray) -> None:
        """Delete chunk ids (one request)."""
        raise NotImplementedError

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Called after each write call's last batch: make its rows fast to search.

        Milvus Lite seals them into a segment (unsealed rows are scanned on
        every search: ~2 s a question at 20,000 rows, 50-90 ms once sealed).
        """

    def compact(self, live_ids: np.ndarray) -> None:  # noqa: B027 - optional hook
        """Reclaim the space of deleted vectors (``live_ids``: the chunk ids kept)."""

    def count(self) -> int:
        """Vectors in the store."""
        raise NotImplementedError

    def present(self, ids: np.ndarray) -> np.ndarray | None:
        """Which of ``ids`` the store holds (not deleted), or None when it cannot tell cheaply."""
        return None

    def files(self) -> dict[str, Callable[[Path], dict[str, Any]]]:
        """Files saved with each snapshot (FAISS: its index); none for a database."""
        return {}

    # -- search ----------------------------------------------------------------
    def translate(self, pushdown: Pushdown) -> Any:
        """The filter in the store's own language, or ``None`` if it cannot express it."""
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
        """Top-``k`` chunk ids and inner products per query.

        Parameters
        ----------
        queries : numpy.ndarray
            float32 ``(m, dim)``.
        k : int
            Results per query.
        native : object, optional
            A filter from :meth:`translate`.
        ids : numpy.ndarray, optional
            int64 chunk ids: only these may be returned.
        share : float, default 1.0
            The share of the store's rows that ``native`` or ``ids`` admits
            (``1.0``: no filter). A filter leaves fewer admitted neighbours per
            step of an approximate search; such an index may widen its search
            breadth by ``1 / share`` (bounded) so that recall holds under it.

        Returns
        -------
        tuple of numpy.ndarray
            int64 ids and float32 scores ``(m, k)``, ``-1`` / ``-inf`` padding.
        """
        raise NotImplementedError

    # -- helpers for subclasses ------------------------------------------------
    @staticmethod
    def _pad(results: list[list[tuple[int, float]]], k: int) -> tuple[np.ndarray, np.ndarray]:
        ids = np.full((len(results), k), -1, np.int64)
        scores = np.full((len(results), k), -np.inf, np.float32)
        for i, row in enumerate(results):
            for j, (cid, score) in enumerate(row[:k]):
                ids[i, j], scores[i, j] = cid, score
        return ids, scores


class LocatedStore(VectorStore):
    """A store reached by a local path or a server URL, holding one collection.

    The shared part of the Qdrant and Milvus adapters: where it is, its
    secret (the argument, else the environment variable :attr:`secret_env`),
    what the manifest records of it (never the secret) and how a manifest's
    record rebuilds it.
    """

    secret_env: ClassVar[str] = ""

    def __init__(
        self, path: str | None, url: str | None, collection: str, secret: str | None, local: str
    ) -> None:
        if (path is None) == (url is None):
            raise ConfigError(
                f"a {self.engine.capitalize()} store takes a path ({local}) or a url, not both"
            )
        self.path, self.url, self.collection = path, url, collection
        self._secret = secret

    def where(self) -> str:
        """The path or URL, and the collection."""
        return f"{self.path or self.url} collection {self.collection}"

    def secret(self) -> str | None:
        """The secret given, else the one in the environment (None: none)."""
        return self._secret or store_secret(self.secret_env) or None

    def secrets(self) -> tuple[str, ...]:
        """The secret, for masking in messages."""
        secret = self.secret()
        return (secret,) if secret else ()

    def describe(self) -> dict[str, Any]:
        """Where, and the collection (never the secret)."""
        where = {"path": self.path} if self.path is not None else {"url": self.url}
        return {"engine": self.engine, **where, "collection": self.collection}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Any:
        """The store a manifest describes."""
        return cls(
            path=record.get("path"), url=record.get("url"),  # type: ignore[call-arg]
            collection=str(record.get("collection", "fastrag")),
        )  # fmt: skip


def write_rows(
    store: VectorStore, ids: np.ndarray, vectors: np.ndarray, payload: pa.Table, *, batch: int = 0
) -> None:
    """Upsert rows in batches of :data:`WRITE_BATCH`; on a failure, remove what was written.

    Raises
    ------
    SearchIndexError
        The store failed; the ids this call wrote are deleted again (best effort).
    """
    size = batch or WRITE_BATCH
    done = 0
    try:
        for start in range(0, len(ids), size):
            stop = min(len(ids), start + size)
            with store_errors(store, "write"):
                store.upsert(
                    ids[start:stop], vectors[start:stop], payload.slice(start, stop - start)
                )
            done = stop
        if done:
            with store_errors(store, "write"):
                store.flush()
    except SearchIndexError:
        if done:
            with contextlib.suppress(Exception):
                store.delete(ids[:done])
        raise


class StoreIndex:
    """A :class:`VectorStore` seen through one version of the chunk store (see the module doc).

    Parameters
    ----------
    store : VectorStore
        The external store, labelled by chunk id.
    labels : numpy.ndarray
        int64, ascending: the chunk id of every row of this version.
    exact : ExactIndex
        Exact search over the same rows (``exact=True``, the local plan);
        its ``alive`` mask is this version's liveness.
    """

    def __init__(self, store: VectorStore, labels: np.ndarray, exact: ExactIndex) -> None:
        self.store = store
        self.labels = labels
        self.exact = exact
        # Ascending unique ids from 0 to n - 1: each chunk id is its row (no search to map).
        n = labels.size
        self._identity = n == 0 or (int(labels[0]) == 0 and int(labels[-1]) == n - 1)

    @property
    def plans(self) -> collections.Counter[str]:
        """Searches per plan (``store``, ``native``, ``ids``, ``local``), of the store."""
        return self.store.plans

    @property
    def kind(self) -> str:
        """The engine's name (the manifest's ``index.type``)."""
        return self.store.engine

    def _count(self, plan: str) -> None:
        with _plans_lock:
            self.store.plans[plan] += 1

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        mask: np.ndarray | None = None,
        exact: bool = False,
        threads: int | None = None,
        pushdown: Pushdown | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` eligible rows (see :meth:`fastrag.index.base.VectorIndex.search`).

        ``pushdown`` is the filter behind ``mask`` (``where`` and the
        principal), translated into the store's filter language when it can
        express it; ``mask`` stays the authority on which rows are eligible.
        """
        if exact:
            return self.exact.search(queries, k, mask=mask, threads=threads)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        m = queries.shape[0]
        alive = self.exact.alive
        filtered = mask is not None and mask is not alive
        if mask is None:
            n_eligible = self.labels.size
        elif not filtered and alive is None:
            n_eligible = self.labels.size
        else:
            n_eligible = int(np.count_nonzero(mask))
        want = min(k, n_eligible)
        if want == 0 or m == 0:
            return np.full((m, k), -1, np.int64), np.full((m, k), -np.inf, np.float32)
        native = None
        if filtered:
            native = self.store.translate(pushdown) if pushdown is not None else None
            if native is None:
                kind = "untranslatable" if pushdown is not None else "mask-only"
                log.info("%s store: %s filter, searched by id list or locally", self.kind, kind)
        if not filtered:
            plan = "store"
        elif native is not None:
            plan = "native"
        else:
            plan = "ids"
        # One result beyond the k-th shows whether the k-th score ties the next. Only when it
        # does (rare with float scores), or when entries were dropped (ids this version does
        # not hold), is the same search asked for TIE_MARGIN more: ties then go to the lower
        # row as in exact search, and a few dropped entries are made up.
        margin = 1
        while True:
            if plan == "local":
                self._count("local")
                return self.exact.search(queries, k, mask=self._present(mask), threads=threads)
            width = min(n_eligible, want + margin)
            share = n_eligible / max(1, self.labels.size)
            found, scores = self._ask(queries, width, plan, native, mask, share)
            done = self._as_is(found, scores, mask, k, want)
            if done is not None:
                self._count(plan)
                return done
            if margin < TIE_MARGIN and width > want and _ties_at(scores, want):
                margin = TIE_MARGIN
                continue
            rows, scores = self._rows(found, scores, mask, k)
            kept = (rows >= 0).sum(axis=1)
            if (kept >= want).all():
                self._count(plan)
                return rows, scores
            if margin < TIE_MARGIN and width < n_eligible:
                # Short because entries were dropped (the store answered want or more)?
                if ((kept < want) & ((found >= 0).sum(axis=1) >= want)).any():
                    margin = TIE_MARGIN
                    continue
            # Short. An exact store asked with the filter or the allow-list lacks the rows
            # (deleted since this version, by another version or process): its answer holds.
            if self.store.exact and plan in ("native", "ids"):
                self._count(plan)
                return rows, scores
            # Otherwise (ids this version does not hold, an approximate index under a
            # filter): ask with the allow-list, then search locally.
            plan = "ids" if plan != "ids" else "local"

    def _ask(
        self,
        queries: np.ndarray,
        width: int,
        plan: str,
        native: Any,
        mask: np.ndarray | None,
        share: float = 1.0,
    ) -> tuple[np.ndarray, np.ndarray]:
        """One search of the store (the allow-list in pieces of at most ``max_ids`` ids)."""
        store = self.store
        try:  # store_errors, inline: no context manager on every question
            if plan == "store":
                return store.search(queries, width)
            if plan == "native":
                return store.search(queries, width, native=native, share=share)
            ids = self._eligible_ids(mask)
            step = max(1, store.max_ids)
            parts = [
                store.search(queries, width, ids=ids[i : i + step], share=share)
                for i in range(0, max(1, ids.size), step)
            ]
        except FastragError:
            raise
        except Exception as exc:
            raise _store_error(store, "search", exc) from exc
        if len(parts) == 1:
            return parts[0]
        return np.concatenate([p[0] for p in parts], 1), np.concatenate([p[1] for p in parts], 1)

    def _present(self, mask: np.ndarray | None) -> np.ndarray | None:
        """``mask`` without the rows the store is known to lack (when it can tell)."""
        present = self.store.present(self.labels)
        if present is None:
            return mask
        return present if mask is None else mask & present

    def _eligible_ids(self, mask: np.ndarray | None) -> np.ndarray:
        return self.labels if mask is None else self.labels[mask]

    def _as_is(
        self, found: np.ndarray, scores: np.ndarray, mask: np.ndarray | None, k: int, want: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The store's answer as rows when it needs no work, else None (then :meth:`_rows`).

        It needs none when every entry is a row this version holds and admits,
        and the scores fall strictly (best first, no tie: not even the
        ``want``-th with the next), with at least ``want`` entries: the common
        case, checked in a few array operations per question batch.
        """
        labels = self.labels
        m, width = found.shape
        if width < want or found.size == 0:
            return None
        keep = min(k, width)
        if m == 1 and mask is None and self._identity and keep == k:
            # One question (the common call): a few Python comparisons beat array operations.
            ids, vals = found[0].tolist(), scores[0].tolist()
            if min(ids) < 0 or max(ids) >= labels.size:
                return None
            prev = vals[0]
            for v in vals[1:]:
                if not v < prev:
                    return None  # a tie (or an order to fix): the general path
                prev = v
            return (
                found[:, :k].astype(np.int64),  # copies: never the store's arrays
                scores[:, :k].astype(np.float32),
            )
        if width > 1 and not (scores[:, :-1] > scores[:, 1:]).all():
            return None  # a tie (or padding, or an order to fix): the general path
        if self._identity:
            if found.min() < 0 or found.max() >= labels.size:
                return None
            rows = found
        else:
            rows = np.searchsorted(labels, found)
            if rows.max() >= labels.size or not (labels[rows] == found).all():
                return None
        if mask is not None and not mask[rows].all():
            return None
        out_rows = rows[:, :keep].astype(np.int64)  # a copy: never the store's array
        out_scores = scores[:, :keep].astype(np.float32)
        if keep < k:
            pad = k - keep
            out_rows = np.pad(out_rows, ((0, 0), (0, pad)), constant_values=-1)
            out_scores = np.pad(out_scores, ((0, 0), (0, pad)), constant_values=-np.inf)
        return out_rows, out_scores

    def _rows(
        self, found: np.ndarray, scores: np.ndarray, mask: np.ndarray | None, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows of store ids (``-1`` for ids this version lacks or does not admit), best first."""
        labels = self.labels
        m, width = found.shape
        if labels.size == 0 or found.size == 0:
            return np.full((m, k), -1, np.int64), np.full((m, k), -np.inf, np.float32)
        if self._identity:
            ok = (found >= 0) & (found < labels.size)
            rows = found if ok.all() else np.where(ok, found, 0)
        else:
            rows = np.searchsorted(labels, found)
            np.minimum(rows, labels.size - 1, out=rows)
            ok = (found >= 0) & (labels[rows] == found)
        if mask is not None:
            ok &= mask[rows]
        out_rows = np.full((m, k), -1, np.int64)
        out_scores = np.full((m, k), -np.inf, np.float32)
        scores = np.where(ok, scores, -np.inf).astype(np.float32)
        rows = np.where(ok, rows, np.iinfo(np.int64).max)
        # Best first, ties by the lower row (as exact search); dropped entries last.
        order = np.lexsort((rows, -scores), axis=-1)
        rows = np.take_along_axis(rows, order, axis=1)
        scores = np.take_along_axis(scores, order, axis=1)
        keep = min(k, rows.shape[1])
        rows, scores = rows[:, :keep], scores[:, :keep]
        valid = np.isfinite(scores)
        out_rows[:, :keep] = np.where(valid, rows, -1)
        out_scores[:, :keep] = scores
        return out_rows, out_scores


def _ties_at(scores: np.ndarray, want: int) -> bool:
    """Whether any query's ``want``-th best score ties the next one (finite scores)."""
    if scores.shape[1] <= want:
        return False
    a = scores[:, want - 1]
    same = a == scores[:, want]
    return bool(same.any() and np.isfinite(a[same]).any())
