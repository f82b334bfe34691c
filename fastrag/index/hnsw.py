"""Approximate top-k by inner product: an hnswlib HNSW graph behind a fastrag API.

:class:`HnswIndex` wraps one ``hnswlib.Index`` in inner-product space
(``'ip'``) over L2-normalised float32 vectors, so its scores are cosines, as
:func:`fastrag.index.exact.exact_topk`'s are. Labels are the store's int64 chunk
ids (non-negative, roughly dense: filters and the index's own bookkeeping are
boolean arrays indexed by label).

- :meth:`HnswIndex.build` / :meth:`~HnswIndex.add` insert vectors (all cores
  by default, GIL released); :meth:`~HnswIndex.mark_deleted` tombstones
  labels, which are never returned again.
- :meth:`~HnswIndex.search` returns ``(labels, scores)``, best first, scores
  being inner products (hnswlib's ``'ip'`` distance is ``1 - ip``; converted
  back). With ``eligible=`` (a filter) it picks a strategy with
  :func:`filter_strategy`; when exact search over the eligible rows is the
  faster answer it returns ``None`` and the caller, who holds the vectors,
  runs :func:`exact_over_rows` (gathers the eligible rows, then
  :func:`~fastrag.index.exact.exact_topk`).
- :meth:`~HnswIndex.save` / :meth:`~HnswIndex.load` persist hnswlib's own
  file, written atomically. A loaded graph is searched in place, the file
  memory-mapped (:class:`~fastrag.index.hnsw_mapped.MappedGraph`): no copy of
  the vectors, and the one pass that checks the links releases the GIL, so
  ``load(..., background=True)`` returns at once and the graph comes in
  while the caller keeps working (:meth:`~HnswIndex.ready`,
  :meth:`~HnswIndex.wait_ready`; until then :meth:`~HnswIndex.search`
  returns None, the caller's cue to search exactly). The first
  :meth:`~HnswIndex.add` after a load hands the graph to hnswlib.
- :func:`auto_choice` decides ``index="auto"`` by measured recall.

Concurrency: searches run concurrently with each other (hnswlib's search is
thread-safe and releases the GIL); :meth:`~HnswIndex.add` and
:meth:`~HnswIndex.mark_deleted` are exclusive. hnswlib keeps the search
breadth ``ef`` in the index, not per call, so concurrent searches share the
index only while they ask for the same ``ef``; a search with another ``ef``
waits for them to finish (see :class:`_EfLock`).

Threads: ``threads=`` is the number of hnswlib worker threads of one call
(default :func:`fastrag._threads.max_threads`, all cores). hnswlib runs its
own ``std::thread`` pool; never call it from inside a Numba parallel region,
whose threads would compete with it for the same cores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import hnswlib
import numpy as np

from .._fs import fsync_dir, sha256_file
from .._threads import max_threads, resolve_threads
from ..errors import ConfigError, SearchIndexError
from .hnsw_mapped import MappedGraph, read_header

__all__ = [
    "AUTO_MIN_RECALL",
    "AUTO_MIN_ROWS",
    "EXACT_GATHER_COST_US",
    "EXACT_SCAN_COST_US",
    "HnswConfig",
    "HnswIndex",
    "OVERSAMPLE_COST_US",
    "Strategy",
    "auto_choice",
    "exact_over_rows",
    "filter_strategy",
    "recall_at_k",
]

Strategy = Literal["hnsw", "oversample", "filter", "exact"]

# ---------------------------------------------------------------------------
# Measured constants. Figures: 2-core Zen 4 shared with other jobs (medians of
# interleaved rounds), clustered data (random_unit_vectors(..., clusters=1000)),
# d=384, M=16, ef_construction=200, ef_search=64, k=10; see
# benchmarks/compare_hnsw.py (--filters for the filter grid).
# ---------------------------------------------------------------------------

AUTO_MIN_ROWS: int = 5_000
"""Corpus size below which ``index="auto"`` keeps exact search.

Measured with ``compare_hnsw.py --auto --threads 1`` (d=384, 1000
clusters, ef=64, median batch-1 latency, exact scan vs HNSW): n=2k 82 vs
72 us, 5k 178 vs 93, 10k 468 vs 160, 20k 1221 vs 201, 50k 2950 vs 190 us.
The two meet near 2k rows; at 5k HNSW is 1.9x faster but saves under 0.1
ms, while exact needs no build, no second copy of the vectors (the graph
holds one) and never misses (HNSW recall@10 at 2k rows: 0.978). Batches
favour exact longer: 1024 queries, 2 threads, exact vs HNSW QPS: 5k 14.8k
vs 13.0k, 10k 8.8k vs 6.0k, 20k 5.0k vs 4.6k, 50k 2.2k vs 5.7k.
"""

AUTO_MIN_RECALL: float = 0.95
"""Recall@k the ``"auto"`` choice demands of HNSW at the configured ``ef``."""

# Filtered search. Three ways were measured (``compare_hnsw.py --filters``,
# n=100k, d=384, k=10, ef=64, random masks of selectivity s = n_eligible /
# n_live; ms per query, batch 1 / batch 64 on 2 threads):
#
#   s       oversample     callback       exact, gathered rows
#   0.2     0.29 / 0.44    1.0 / 1.05     - / 0.34
#   0.1     0.72 / 0.35    2.2 / 2.1      4.3 / 0.19
#   0.05    1.2  / 0.66    4.1 / 4.3      1.9 / 0.10
#   0.02    2.6  / 2.7     12  / 10       0.26 / 0.03
#   0.01    5.6  / 2.8     18  / 18       0.13 / 0.02
#   0.005   10   / 12      30  / 31       0.08 / 0.01
#
# - oversample: an unfiltered search for ``1.5 k / s`` results (ef raised to
#   match), ineligible ones dropped, short rows retried wider: about 5 us x
#   k / s a query, recall@10 0.975-1.0 (0.96-0.99 when the filter follows
#   the geometry: eligible rows in one slab of the space).
# - callback: hnswlib's ``filter=``, a Python call per candidate under the
#   GIL (so one thread). It explores until ``ef`` eligible labels are found,
#   about ``ef / s`` nodes: 1.1-4x oversampling everywhere (slab masks too),
#   recall 0.99-1.0. It never wins; it finishes rows oversampling cannot
#   fill (see ``HnswIndex._oversample``).
# - exact over the eligible rows (:func:`exact_over_rows`): gather them
#   (``vectors[rows]``, ~0.28 us a row once per batch, page faults
#   included) and scan them (~0.02 us a row per query in a batch); a single
#   query is copy-bound. A masked scan of the whole corpus (``exact_topk(...,
#   mask=)``) costs the full corpus instead (1.5-4 ms a query at n=100k,
#   batch 1; 0.6-1.4 ms in batches of 64), so the fallback gathers.
#
# Hence the rule: exact when its cost, ``n_eligible * (GATHER / m + SCAN)``,
# is at most oversampling's, ``OVERSAMPLE * k * n_live / n_eligible``; else
# oversample. At n=100k, k=10 that puts the switch at ~4k eligible for one
# query (measured between 2k and 5k) and ~14k for batches of 64 (measured
# between 10k and 20k).

OVERSAMPLE_COST_US: float = 5.0
"""Oversampling, per query, in microseconds per unit of ``k * n_live / n_eligible``."""

EXACT_GATHER_COST_US: float = 0.28
"""Exact fallback: gathering one eligible row (once per batch), microseconds."""

EXACT_SCAN_COST_US: float = 0.02
"""Exact fallback: scoring one gathered row for one query, microseconds."""

_EXACT_ONE_THREAD_FLOATS = 1 << 22
""":func:`exact_over_rows` scans up to this many floats (16 MiB) on one
thread unless told otherwise: the gather already costs more than the scan,
and on a busy two-core machine a two-thread Numba region for one small
query was measured at ~16 ms (waiting for the other core) against 0.1 ms."""

_OVERSAMPLE_MARGIN = 1.5
"""Oversampling asks for ``margin * k / s`` results: for a random filter the
expected number of eligible hits is then ``1.5 k``; short rows are retried."""

_OVERSAMPLE_RETRIES = 2
"""Retries (each 4x wider) before the rows still short go to the callback
filter: a random filter fills nearly every row at the first try; a row still
short after a 16x wider search has its eligible labels far from the query."""


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{name} must be {bound}, got {value}")
    return int(value)


@dataclass(frozen=True, slots=True)
class HnswConfig:
    """Parameters of an HNSW graph (saved in the manifest).

    Parameters
    ----------
    M : int, default 16
        Links per node in the upper layers (``2 * M`` in the base layer).
        Memory per vector grows by ``8 * M`` bytes; recall and build time grow
        with it.
    ef_construction : int, default 200
        Candidate list size while inserting: graph quality against build time.
    ef_search : int, default 64
        Candidate list size while searching (raised to ``k`` when smaller):
        recall against latency. Measured recall@10 on clustered 384-d data
        (``compare_hnsw.py``): at n=100k with 1000 clusters (100 rows a
        cluster) 0.998 at ef=32 and 1.000 at 64. What makes this data hard
        is the rows per cluster, not n: with 1000 rows a cluster, as 1M rows
        in 1000 clusters have, recall at ef=32 / 64 / 96 / 128 was 0.892 /
        0.975 / 0.993 / - at n=25k, 0.894 / 0.971 / 0.991 / 0.997 at 50k,
        0.894 / 0.972 / 0.991 / 0.996 at 100k and 0.886 / 0.973 / 0.992 /
        0.998 at 200k: flat over an 8x range of n, so about 0.97 is
        expected at 1M with ef=64, above the 0.95 target, while ef=32 falls
        below it. Latency at n=100k, batch 1: 0.12 ms at ef=32, 0.18 ms at
        64, 0.34 ms at 128.
    random_seed : int, default 100
        Seed of hnswlib's level generator. With one build thread, the same
        seed and the same insertion order give the same graph.

    Raises
    ------
    ConfigError
        On a parameter that is not an int or is out of range.
    """

    M: int = 16  # noqa: N815 - hnswlib's name
    ef_construction: int = 200
    ef_search: int = 64
    random_seed: int = 100

    def __post_init__(self) -> None:
        # hnswlib stores a level-0 neighbour count in 16 bits (2 * M).
        _check_int("M", self.M, 2, 4096)
        _check_int("ef_construction", self.ef_construction, 1)
        _check_int("ef_search", self.ef_search, 1)
        _check_int("random_seed", self.random_seed, 0, 2**63 - 1)
        for f in dataclasses.fields(self):  # numpy ints -> int, for JSON and ==
            object.__setattr__(self, f.name, int(getattr(self, f.name)))

    def to_dict(self) -> dict[str, int]:
        """Return the parameters as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HnswConfig:
        """Rebuild a config from :meth:`to_dict` output (missing keys take defaults).

        Raises
        ------
        ConfigError
            On an unknown key or a bad value.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"HNSW config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown HNSW config keys {unknown}; known: {sorted(known)}")
        return cls(**data)


def filter_strategy(n_live: int, n_eligible: int, k: int, m: int) -> Strategy:
    """Choose how to answer a filtered search (the measured rule).

    Parameters
    ----------
    n_live : int
        Labels in the index that are not deleted.
    n_eligible : int
        Live labels the filter admits.
    k : int
        Results wanted per query.
    m : int
        Queries in the batch.

    Returns
    -------
    str
        ``"hnsw"`` -- the filter admits every live label: plain search;
        ``"exact"`` -- exact search over the eligible rows is cheaper
        (gather them, :func:`exact_over_rows`);
        ``"oversample"`` -- otherwise: plain search for about ``1.5 k
        n_live / n_eligible`` results, ineligible ones dropped, short rows
        retried, then finished by the callback filter.
        ``"filter"`` (hnswlib's callback) is never the cheapest on the
        measurements (3x oversampling); :meth:`HnswIndex.search` uses it as
        the last resort and accepts it as an override.

    Notes
    -----
    Exact when ``n_eligible * (EXACT_GATHER_COST_US / m + EXACT_SCAN_COST_US)
    <= OVERSAMPLE_COST_US * k * n_live / n_eligible``; the measurements are
    in the comment above the constants.
    """
    if n_eligible >= n_live:
        return "hnsw"
    if n_eligible <= k:
        return "exact"
    exact = n_eligible * (EXACT_GATHER_COST_US / max(m, 1) + EXACT_SCAN_COST_US)
    oversample = OVERSAMPLE_COST_US * k * n_live / n_eligible
    return "exact" if exact <= oversample else "oversample"


def exact_over_rows(
    queries: np.ndarray,
    vectors: np.ndarray,
    rows: np.ndarray,
    k: int,
    *,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` among ``vectors[rows]``, for when :meth:`HnswIndex.search` returns None.

    Gathers the eligible rows (``len(rows) * dim * 4`` bytes) and scans only
    them, which for a selective filter is far cheaper than a masked scan of
    the whole corpus (measurements above :data:`OVERSAMPLE_COST_US`).

    Parameters
    ----------
    queries : numpy.ndarray
        ``(m, dim)`` query vectors.
    vectors : numpy.ndarray
        ``(n, dim)`` float32 corpus (read-only memory maps are fine).
    rows : numpy.ndarray
        Integer row numbers of the eligible vectors.
    k : int
        Results per query.
    threads : int, optional
        Threads for :func:`fastrag.index.exact.exact_topk`; default one thread
        up to 16 MiB of gathered rows, else the caller's Numba setting.

    Returns
    -------
    tuple of numpy.ndarray
        int64 row numbers (taken from ``rows``) and float32 scores, both
        ``(m, min(k, len(rows)))``, best first.
    """
    from .exact import exact_topk  # lazy: exact pulls in the Numba kernels

    rows = np.asarray(rows)
    if rows.dtype.kind not in "iu" or rows.ndim != 1:
        raise ConfigError(f"rows must be a 1-D integer array, got {rows.dtype} {rows.shape}")
    sub = np.ascontiguousarray(vectors[rows], dtype=np.float32)
    if threads is None and sub.size <= _EXACT_ONE_THREAD_FLOATS:
        threads = 1
    ids, scores = exact_topk(queries, sub, k, threads=threads)
    return rows.astype(np.int64, copy=False)[ids], scores


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean share of the true top-k each row of ``found`` recovers.

    Parameters
    ----------
    found : numpy.ndarray
        Integers ``(m, a)``: approximate results (negative ids are padding).
    truth : numpy.ndarray
        Integers ``(m, k)``: exact results (negative ids are padding).

    Returns
    -------
    float
        ``mean_i |found_i ∩ truth_i| / |truth_i|`` over rows with a truth;
        1.0 when no row has one.
    """
    found = np.asarray(found)
    truth = np.asarray(truth)
    if found.ndim != 2 or truth.ndim != 2 or found.shape[0] != truth.shape[0]:
        raise ConfigError(f"found {found.shape} and truth {truth.shape} must be (m, *) arrays")
    total = 0.0
    rows = 0
    for f, t in zip(found, truth, strict=True):
        t = t[t >= 0]
        if t.size == 0:
            continue
        total += np.intersect1d(f[f >= 0], t).size / t.size
        rows += 1
    return total / rows if rows else 1.0


class _EfLock:
    """A readers-writer lock whose readers share one ``ef``.

    hnswlib reads the search breadth from the index, so concurrent searches
    may overlap only when they want the same value. A reader that wants
    another ``ef`` waits until the readers inside leave, sets it, and enters;
    while it waits, new readers queue behind it (no starvation). A writer
    waits for every reader and blocks new ones.
    """

    __slots__ = (
        "_cond",
        "_ef",
        "_mutex",
        "_readers",
        "_set_ef",
        "_sleepers",
        "_waiting_other",
        "_writer",
        "_writers_waiting",
    )

    def __init__(self, set_ef: Any) -> None:
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._set_ef = set_ef
        self._ef = -1  # the ef set in hnswlib
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._waiting_other = 0
        self._sleepers = 0  # threads in wait(): notify only when someone listens

    def _wait(self) -> None:
        self._sleepers += 1
        try:
            self._cond.wait()
        finally:
            self._sleepers -= 1

    def acquire_read(self, ef: int | None) -> None:
        """Enter as a reader that searches with ``ef`` (``None``: any ef, e.g. saving)."""
        with self._mutex:
            if (
                self._writer
                or self._writers_waiting
                or self._waiting_other
                or not (ef is None or ef == self._ef or self._readers == 0)
            ):
                self._wait_read(ef)
            if ef is not None and ef != self._ef:
                self._set_ef(ef)
                self._ef = ef
                if self._sleepers:
                    self._cond.notify_all()  # waiters for this ef may now join
            self._readers += 1

    def _wait_read(self, ef: int | None) -> None:
        other = ef is not None and ef != self._ef
        self._waiting_other += other
        try:
            while (
                self._writer
                or self._writers_waiting
                or (ef is not None and ef != self._ef and self._readers > 0)
                or (not other and self._waiting_other > 0)
            ):
                self._wait()
        finally:
            self._waiting_other -= other

    def forget_ef(self) -> None:
        """Under :meth:`write`: the index changed, its ef is unknown (the next reader sets it)."""
        self._ef = -1

    def release_read(self) -> None:
        """Leave as a reader."""
        with self._mutex:
            self._readers -= 1
            if self._readers == 0 and self._sleepers:
                self._cond.notify_all()

    @contextlib.contextmanager
    def read(self, ef: int | None) -> Iterator[None]:
        """Hold the index for searching with ``ef`` (see :meth:`acquire_read`)."""
        self.acquire_read(ef)
        try:
            yield
        finally:
            self.release_read()

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """Hold the index exclusively (insertions, deletions, resizing)."""
        with self._mutex:
            self._writers_waiting += 1
            try:
                while self._writer or self._readers:
                    self._wait()
            finally:
                self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._mutex:
                self._writer = False
                if self._sleepers:
                    self._cond.notify_all()


class _ShortResult(Exception):
    """hnswlib found fewer results than asked for (internal: retried or mapped)."""


@contextlib.contextmanager
def _hnswlib_errors(what: str) -> Iterator[None]:
    """Translate hnswlib's exceptions into :class:`SearchIndexError`."""
    try:
        yield
    except (RuntimeError, MemoryError, OverflowError) as exc:
        raise SearchIndexError(f"hnswlib failed to {what}: {exc}") from exc


def _resolve_threads(threads: int | None) -> int:
    return max_threads() if threads is None else resolve_threads(threads)


def _check_vectors(vectors: object, dim: int | None) -> np.ndarray:
    if not isinstance(vectors, np.ndarray):
        vectors = np.asarray(vectors)
    if vectors.dtype.kind not in "fiu":
        raise ConfigError(f"vectors must be real numbers, got dtype {vectors.dtype}")
    if vectors.ndim != 2:
        raise ConfigError(f"vectors must be 2-D (n, dim), got shape {vectors.shape}")
    if dim is not None and vectors.shape[1] != dim:
        raise ConfigError(f"vectors have dimension {vectors.shape[1]}, the index has {dim}")
    if vectors.shape[1] < 1:
        raise ConfigError(f"vectors must have dimension >= 1, got shape {vectors.shape}")
    # float32 C-contiguous input (read-only memory maps included) reaches
    # hnswlib without a copy; anything else is converted once here.
    with np.errstate(over="ignore"):
        x = np.ascontiguousarray(vectors, dtype=np.float32)
    if x.size:
        if not np.isfinite(x).all():
            raise ConfigError("vectors contain NaN or infinity (or values beyond float32)")
        norms = np.einsum("ij,ij->i", x, x)
        bad = (np.abs(norms - 1.0) > 1e-3) & (norms != 0.0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ConfigError(
                f"vectors must be L2-normalised (or zero): row {row} has norm "
                f"{math.sqrt(float(norms[row])):.6g}"
            )
    return x


def _check_labels(labels: object, n: int) -> np.ndarray:
    lab = np.asarray(labels)
    if lab.dtype.kind not in "iu" or lab.dtype == np.bool_:
        raise ConfigError(f"labels must be integers, got dtype {lab.dtype}")
    if lab.shape != (n,):
        raise ConfigError(f"labels must have shape ({n},), got {lab.shape}")
    if n and (lab.min() < 0 or lab.max() > np.iinfo(np.int64).max):
        raise ConfigError("labels must be non-negative int64 values")
    lab = np.ascontiguousarray(lab, dtype=np.int64)
    if n > 1 and np.unique(lab).size != n:
        raise ConfigError("labels must be unique")
    return lab


_F32 = np.dtype(np.float32)


def _check_queries(queries: object, dim: int) -> np.ndarray:
    q = queries
    if (
        type(q) is np.ndarray
        and q.dtype is _F32
        and q.ndim == 2
        and q.shape[1] == dim
        and q.flags.c_contiguous
    ):  # the common case, checked in ~0.3 us
        if not np.isfinite(q).all():
            raise ConfigError("queries contain NaN or infinity (or values beyond float32)")
        return q
    q = queries if isinstance(queries, np.ndarray) else np.asarray(queries)
    if q.dtype.kind not in "fiu":
        raise ConfigError(f"queries must be real numbers, got dtype {q.dtype}")
    if q.ndim != 2:
        raise ConfigError(f"queries must be 2-D (m, dim), got shape {q.shape}")
    if q.shape[1] != dim:
        raise ConfigError(f"queries have dimension {q.shape[1]}, the index has {dim}")
    if q.dtype != np.float32 or not q.flags.c_contiguous:
        with np.errstate(over="ignore"):
            q = np.ascontiguousarray(q, dtype=np.float32)
    if not np.isfinite(q).all():
        raise ConfigError("queries contain NaN or infinity (or values beyond float32)")
    return q


class HnswIndex:
    """An HNSW graph over L2-normalised float32 vectors, labelled by int64 chunk ids.

    Create one with :meth:`build` or :meth:`load`; the constructor is private.
    """

    __slots__ = (
        "_config", "_dim", "_ef", "_error", "_index", "_live", "_lock", "_max_elements",
        "_n_deleted", "_n_live", "_ready",
    )  # fmt: skip

    def __init__(
        self, index: hnswlib.Index | MappedGraph | None, dim: int, config: HnswConfig,
        live: np.ndarray,
    ) -> None:  # fmt: skip
        self._dim = dim
        self._config = config
        self._ef = config.ef_search
        self._lock = _EfLock(self._set_backend_ef)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._max_elements = 0  # capacity to reserve when a mapped graph goes to hnswlib
        self._index: hnswlib.Index | MappedGraph | None = None
        self._live = live
        self._n_live = self._n_deleted = 0
        if index is not None:
            self._install(index, live)
            self._ready.set()

    def _install(self, index: hnswlib.Index | MappedGraph, live: np.ndarray) -> None:
        """Take ``index`` as the graph (``live``: bool by label, True = stored and not deleted)."""
        self._index = index
        self._live = live
        self._n_live = int(np.count_nonzero(live))
        self._n_deleted = int(index.get_current_count()) - self._n_live

    def _set_backend_ef(self, ef: int) -> None:
        assert self._index is not None
        self._index.set_ef(ef)

    # -- construction ------------------------------------------------------

    @classmethod
    def build(
        cls,
        vectors: np.ndarray,
        labels: np.ndarray,
        config: HnswConfig | None = None,
        *,
        threads: int | None = None,
        max_elements: int | None = None,
    ) -> HnswIndex:
        """Build a graph over ``vectors`` labelled ``labels``.

        Parameters
        ----------
        vectors : numpy.ndarray
            ``(n, dim)``, L2-normalised (zero rows allowed), finite. float32
            C-contiguous arrays, read-only memory maps included, are read in
            place; other dtypes or layouts are converted once (a temporary
            copy). hnswlib keeps its own copy of every vector in the graph.
        labels : numpy.ndarray
            ``(n,)`` unique non-negative integers (chunk ids).
        config : HnswConfig, optional
            Graph parameters; default ``HnswConfig()``.
        threads : int, optional
            Build threads; default all cores. One thread with the same seed
            and input gives the same graph.
        max_elements : int, optional
            Capacity to reserve (default ``n``); :meth:`add` grows it anyway.

        Returns
        -------
        HnswIndex

        Raises
        ------
        ConfigError
            On bad vectors, labels, config or threads.
        SearchIndexError
            When hnswlib fails (e.g. out of memory).
        """
        config = HnswConfig() if config is None else config
        if not isinstance(config, HnswConfig):
            raise ConfigError(f"config must be an HnswConfig, got {type(config).__name__}")
        x = _check_vectors(vectors, None)
        n, dim = x.shape
        lab = _check_labels(labels, n)
        nthreads = _resolve_threads(threads)
        cap = n if max_elements is None else _check_int("max_elements", max_elements, 0)
        if cap < n:
            raise ConfigError(f"max_elements={cap} is smaller than the {n} vectors")
        index = hnswlib.Index(space="ip", dim=dim)
        with _hnswlib_errors("build the index"):
            index.init_index(
                max_elements=max(cap, 1),
                M=config.M,
                ef_construction=config.ef_construction,
                random_seed=config.random_seed,
            )
            index.set_ef(config.ef_search)
            if n:
                index.add_items(x, lab, num_threads=nthreads)
        live = np.zeros(int(lab.max()) + 1 if n else 0, dtype=np.bool_)
        live[lab] = True
        return cls(index, dim, config, live)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        dim: int,
        config: HnswConfig | None = None,
        *,
        max_elements: int | None = None,
        sha256: str | None = None,
        background: bool = False,
    ) -> HnswIndex:
        """Open a graph written by :meth:`save`, without rebuilding or copying it.

        The file is memory-mapped and searched in place. It is checked
        first: header fields against ``dim`` and ``config.M``, sizes against
        the file size, every link of every layer against the element count
        and its layer, labels unique. ``sha256`` (from :meth:`save`'s return
        value) adds a checksum of the whole file.

        With ``background=True`` only the header is checked before the
        index is returned; the links (one pass over the file) and the
        checksum are checked in a background thread: until the index is
        :meth:`ready`, :meth:`search` returns None (search exactly instead)
        and every other method waits for it. A file that fails those checks
        never becomes ready, and :meth:`wait_ready` raises the error.

        Parameters
        ----------
        path : path-like
            The index file.
        dim : int
            Vector dimension the index must have.
        config : HnswConfig, optional
            The config it was built with (``M`` must match; ``ef_search``
            is applied). Default ``HnswConfig()``.
        max_elements : int, optional
            Capacity to reserve when the first :meth:`add` hands the graph
            to hnswlib (default: the element count).
        sha256 : str, optional
            Expected hex SHA-256 of the file.
        background : bool, default False
            Return at once and open the file in a background thread.

        Returns
        -------
        HnswIndex

        Raises
        ------
        SearchIndexError
            The file is missing, unreadable, truncated, corrupt, or does not
            match ``dim`` / ``config``; the message names the file.
        ConfigError
            On a bad ``dim``, ``config`` or ``max_elements``.
        """
        config = HnswConfig() if config is None else config
        if not isinstance(config, HnswConfig):
            raise ConfigError(f"config must be an HnswConfig, got {type(config).__name__}")
        dim = _check_int("dim", dim, 1)
        cap = 0 if max_elements is None else _check_int("max_elements", max_elements, 0)
        p = Path(path)
        read_header(p, dim, config.M)  # the cheap checks fail here, not in the background
        out = cls(None, dim, config, np.zeros(0, dtype=np.bool_))
        out._max_elements = cap

        def open_graph() -> None:
            try:
                graph = MappedGraph.open(p, dim, config.M, sha256=sha256)
                labels, deleted = graph.labels_and_deleted()
                live = np.zeros(int(labels.max()) + 1 if labels.size else 0, dtype=np.bool_)
                live[labels[~deleted]] = True
                out._install(graph, live)
            except BaseException as exc:  # kept for wait_ready(); the index stays not ready
                out._error = exc
            finally:
                out._ready.set()

        if background:
            name = f"fastrag-hnsw-load {p.name}"
            threading.Thread(target=open_graph, name=name, daemon=True).start()
        else:
            open_graph()
            if out._error is not None:
                raise out._error
        return out

    def ready(self) -> bool:
        """Whether the graph is in (always, unless opened with ``background=True``)."""
        return self._ready.is_set() and self._error is None

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the graph is in; return :meth:`ready` (False on timeout).

        Raises
        ------
        SearchIndexError
            The background load failed (the file is missing or corrupt).
        """
        done = self._ready.wait(timeout)
        if self._error is not None:
            raise self._error
        return done

    def _wait(self) -> None:
        """Block until the graph is in (raising a background load's error)."""
        if not self._ready.is_set() or self._error is not None:
            self.wait_ready()

    # -- properties --------------------------------------------------------

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    @property
    def config(self) -> HnswConfig:
        """Graph parameters (``ef_search`` as configured, see :attr:`ef`)."""
        return self._config

    @property
    def ef(self) -> int:
        """Default search breadth of :meth:`search` (set with :meth:`set_ef`)."""
        return self._ef

    @property
    def n_deleted(self) -> int:
        """Labels marked deleted (still in the graph, never returned)."""
        self._wait()
        return self._n_deleted

    @property
    def max_elements(self) -> int:
        """Current capacity (live plus deleted elements it can hold without resizing)."""
        self._wait()
        assert self._index is not None
        return int(self._index.get_max_elements())

    @property
    def label_bound(self) -> int:
        """One more than the largest label ever stored: the minimum ``eligible`` length.

        0 while a background load is under way (it does not wait).
        """
        return int(self._live.shape[0])

    def __len__(self) -> int:
        """Live (not deleted) labels."""
        self._wait()
        return self._n_live

    def __contains__(self, label: object) -> bool:
        """Whether ``label`` is stored and not deleted."""
        self._wait()
        if isinstance(label, (bool, np.bool_)) or not isinstance(label, (int, np.integer)):
            return False
        return 0 <= label < self._live.shape[0] and bool(self._live[label])

    def labels(self) -> np.ndarray:
        """Live labels, ascending (int64)."""
        self._wait()
        return np.flatnonzero(self._live).astype(np.int64)

    def __repr__(self) -> str:
        if not self.ready():
            state = "failed" if self._error is not None else "loading"
            return f"HnswIndex(dim={self._dim}, {state}, config={self._config!r})"
        return (
            f"HnswIndex(dim={self._dim}, live={self._n_live}, deleted={self._n_deleted}, "
            f"ef={self._ef}, config={self._config!r})"
        )

    # -- writes ------------------------------------------------------------

    def add(self, vectors: np.ndarray, labels: np.ndarray, *, threads: int | None = None) -> None:
        """Insert vectors under new labels, growing the capacity geometrically (x1.5).

        Parameters
        ----------
        vectors : numpy.ndarray
            ``(n, dim)``, as for :meth:`build`.
        labels : numpy.ndarray
            ``(n,)`` unique non-negative integers never stored before
            (deleted labels included: chunk ids are never reused).
        threads : int, optional
            Insertion threads; default all cores.

        Raises
        ------
        ConfigError
            On bad vectors or labels, or a label already stored.
        SearchIndexError
            When hnswlib fails.
        """
        x = _check_vectors(vectors, self._dim)
        n = x.shape[0]
        lab = _check_labels(labels, n)
        nthreads = _resolve_threads(threads)
        if n == 0:
            return
        self._wait()
        with self._lock.write():
            index = self._index
            if isinstance(index, MappedGraph):
                # A mapped graph cannot grow: hand it to hnswlib (a copy in memory).
                mapped = index
                with _hnswlib_errors("load the graph to add vectors"):
                    index = mapped.to_hnswlib(
                        max(self._max_elements, mapped.get_current_count() + n)
                    )
                self._index = index
                self._lock.forget_ef()  # the next reader sets its ef in hnswlib
                mapped.close()
            assert index is not None
            bound = self._live.shape[0]
            old = lab[lab < bound]
            if old.size:
                # Deleted labels are not in ``_live`` but are still in the
                # graph; hnswlib would silently revive and overwrite them.
                known = np.isin(old, self._known_labels())
                if known.any():
                    raise ConfigError(f"label {int(old[known][0])} is already in the index")
            count = int(index.get_current_count())
            cap = int(index.get_max_elements())
            with _hnswlib_errors("add vectors"):
                if count + n > cap:
                    index.resize_index(max(count + n, cap + cap // 2))
                index.add_items(x, lab, num_threads=nthreads)
            top = int(lab.max()) + 1
            if top > bound:
                grown = np.zeros(max(top, bound + bound // 2), dtype=np.bool_)
                grown[:bound] = self._live
                self._live = grown
            self._live[lab] = True
            self._n_live += n

    def _known_labels(self) -> np.ndarray:
        """Every label in the graph, deleted ones included (rare path: O(count))."""
        assert self._index is not None
        return np.asarray(self._index.get_ids_list(), dtype=np.int64)

    def mark_deleted(self, labels: np.ndarray | int) -> int:
        """Tombstone labels: they are never returned again. Idempotent.

        Parameters
        ----------
        labels : array-like of int
            Labels to delete; labels already deleted or never stored are
            ignored.

        Returns
        -------
        int
            How many live labels were deleted by this call.
        """
        lab = np.atleast_1d(np.asarray(labels))
        if lab.dtype.kind not in "iu" or lab.ndim != 1:
            raise ConfigError(f"labels must be a 1-D integer array, got {lab.dtype} {lab.shape}")
        self._wait()
        with self._lock.write():
            lab = lab[(lab >= 0) & (lab < self._live.shape[0])].astype(np.int64)
            lab = np.unique(lab[self._live[lab]])
            index = self._index
            assert index is not None
            with _hnswlib_errors("mark labels deleted"):
                for label in lab.tolist():
                    index.mark_deleted(label)
                    self._live[label] = False  # per label: consistent if hnswlib fails midway
                    self._n_live -= 1
                    self._n_deleted += 1
        return int(lab.size)

    def set_ef(self, ef: int) -> None:
        """Set the default search breadth (``ef >= 1``; raised to ``k`` per call when smaller)."""
        self._ef = _check_int("ef", ef, 1)

    # -- search ------------------------------------------------------------

    def plan(self, k: int, m: int = 1, eligible: np.ndarray | None = None) -> Strategy:
        """The strategy :meth:`search` would use (``"exact"``: it would return None)."""
        k = _check_int("k", k, 1)
        self._wait()
        if eligible is None:
            return "hnsw"
        mask = self._check_eligible(eligible)
        return filter_strategy(self._n_live, self._count_eligible(mask), k, m)

    def _check_eligible(self, eligible: object) -> np.ndarray:
        mask = eligible if isinstance(eligible, np.ndarray) else np.asarray(eligible)
        if mask.dtype != np.bool_ or mask.ndim != 1:
            raise ConfigError(f"eligible must be a 1-D bool array, got {mask.dtype} {mask.shape}")
        if mask.shape[0] < self._live.shape[0]:
            raise ConfigError(
                f"eligible has {mask.shape[0]} entries; it is indexed by label and needs "
                f">= {self._live.shape[0]} (largest label + 1)"
            )
        return mask

    def _count_eligible(self, mask: np.ndarray) -> int:
        live = self._live
        b = min(live.shape[0], mask.shape[0])  # labels past the mask are ineligible
        if self._n_live == live.shape[0]:  # labels 0..b-1 all live: no AND needed
            return int(np.count_nonzero(mask[:b]))
        return int(np.count_nonzero(mask[:b] & live[:b]))

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        eligible: np.ndarray | None = None,
        ef: int | None = None,
        threads: int | None = None,
        allow_exact: bool = True,
        strategy: Strategy | None = None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Approximate top-``k`` live labels by inner product, per query.

        Parameters
        ----------
        queries : numpy.ndarray
            ``(m, dim)``, real, finite (converted to float32 when needed).
        k : int
            Results per query, ``>= 1``.
        eligible : numpy.ndarray, optional
            bool, indexed by label, length ``>= label_bound``: True admits a
            label. No ineligible label is ever returned, and a query gets
            ``min(k, eligible live labels)`` results.
        ef : int, optional
            Search breadth for this call, ``>= k``; default :attr:`ef`
            (raised to ``k`` when smaller).
        threads : int, optional
            hnswlib threads; default all cores (hnswlib uses one for
            batches of up to ``4 * threads`` queries).
        allow_exact : bool, default True
            When :func:`filter_strategy` says exact search is faster, return
            None (the caller runs exact search over the eligible rows).
            False: never return None (oversampling answers instead, finished
            by the callback filter where it falls short).
        strategy : {"hnsw", "oversample", "filter", "exact"}, optional
            Override :func:`filter_strategy` (benchmarks, tests). With a
            filter, ``"hnsw"`` means oversampling; ``"exact"`` returns None.

        Returns
        -------
        tuple of numpy.ndarray or None
            int64 labels and float32 scores (inner products), both ``(m, k')``
            with ``k' = min(k, eligible live labels)``, best first; ``(m, 0)``
            when nothing is eligible. None when exact search is the better
            plan, or while a background load is under way (only with
            ``allow_exact``; without it the search waits for the graph): run
            ``exact_over_rows(queries, vectors, eligible_rows, k)``.

        Raises
        ------
        ConfigError
            On bad queries, ``k``, ``ef``, ``eligible`` or ``threads``.
        SearchIndexError
            When hnswlib fails.
        """
        if type(k) is not int or k < 1:
            k = _check_int("k", k, 1)
        if ef is not None:
            ef = _check_int("ef", ef, 1)
            if ef < k:
                raise ConfigError(
                    f"ef must be >= k (got ef={ef}, k={k}): hnswlib keeps ef candidates"
                )
        q = _check_queries(queries, self._dim)
        nthreads = _resolve_threads(threads)
        mask = None if eligible is None else self._check_eligible(eligible)
        if strategy is not None and strategy not in ("hnsw", "oversample", "filter", "exact"):
            raise ConfigError(f"unknown strategy {strategy!r}")
        if not self.ready():
            if allow_exact:
                return None  # loading in the background: exact search answers meanwhile
            self._wait()
            mask = None if eligible is None else self._check_eligible(eligible)
        ef_call = self._ef if ef is None else ef
        # One read lock for the whole search: writers wait, so the counts
        # and the graph agree. hnswlib searches with max(ef, k), so asking
        # for more results (oversampling) needs no other ef.
        lock = self._lock
        lock.acquire_read(ef_call)
        try:
            return self._search(q, k, mask, nthreads, allow_exact, strategy)
        except _ShortResult as exc:
            short = exc
        finally:
            lock.release_read()
        # Part of the graph was out of reach at this ef (a poorly built or
        # heavily deleted graph): search again, wider.
        if ef_call >= self._n_live:
            raise SearchIndexError(
                f"hnswlib search failed (k={k}, ef={ef_call}, live={self._n_live}): {short}; "
                "part of the graph is unreachable (rebuild it, or raise M / ef_construction)"
            ) from short.__cause__
        wider = max(k, min(self._n_live, 4 * ef_call))
        return self.search(
            q,
            k,
            eligible=eligible,
            ef=wider,
            threads=threads,
            allow_exact=allow_exact,
            strategy=strategy,
        )

    def _search(
        self,
        q: np.ndarray,
        k: int,
        mask: np.ndarray | None,
        nthreads: int,
        allow_exact: bool,
        strategy: Strategy | None,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The body of :meth:`search`, under the read lock."""
        m = q.shape[0]
        n_live = self._n_live
        bound = self._live.shape[0]
        if mask is not None and mask.shape[0] < bound:
            # Labels added since the caller sized the mask: ineligible.
            mask = np.concatenate([mask, np.zeros(bound - mask.shape[0], dtype=np.bool_)])
        n_eligible = n_live if mask is None else self._count_eligible(mask)
        kk = min(k, n_eligible)
        if kk == 0 or m == 0:
            return np.empty((m, kk), dtype=np.int64), np.empty((m, kk), dtype=np.float32)
        if mask is None or n_eligible == n_live:
            if strategy == "exact" and allow_exact:
                return None
            return self._knn(q, kk, nthreads)  # every live label is eligible
        if strategy is None:
            strategy = filter_strategy(n_live, n_eligible, kk, m)
        if strategy == "exact" and allow_exact:
            return None
        if strategy == "filter":
            return self._filtered(q, kk, mask, nthreads)
        return self._oversample(q, kk, nthreads, mask, n_eligible)

    def _knn(
        self, q: np.ndarray, k: int, nthreads: int, mask: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Search with hnswlib (caller holds the read lock); scores are inner products.

        ``mask`` (bool by label) restricts the results: the mapped graph
        takes it as it is; hnswlib takes a callback, called under the GIL
        for every candidate (so on one thread).
        """
        index = self._index
        assert index is not None
        try:
            if mask is None:
                labels, dist = index.knn_query(q, k, nthreads)
            elif isinstance(index, MappedGraph):
                labels, dist = index.knn_query(q, k, nthreads, mask)
            else:
                # ndarray.__getitem__ is called straight from C++ (no Python
                # frame); converting the mask to a list first is faster per
                # call but costs O(labels) per search.
                labels, dist = index.knn_query(q, k, 1, mask.__getitem__)
        except RuntimeError as exc:
            # hnswlib found fewer than k labels.
            raise _ShortResult(str(exc)) from exc
        np.subtract(1.0, dist, out=dist)  # 'ip' distance is 1 - ip
        return labels.view(np.int64), dist

    def _oversample(
        self, q: np.ndarray, k: int, nthreads: int, mask: np.ndarray, n_eligible: int
    ) -> tuple[np.ndarray, np.ndarray]:
        m = q.shape[0]
        out_l = np.empty((m, k), dtype=np.int64)
        out_s = np.empty((m, k), dtype=np.float32)
        todo = np.arange(m)
        n_live = self._n_live
        factor = _OVERSAMPLE_MARGIN * n_live / n_eligible
        for attempt in itertools.count():
            if not todo.size:
                break
            want = math.ceil(k * factor)
            if attempt > _OVERSAMPLE_RETRIES or want >= n_live:
                # The eligible labels sit far from these queries: the
                # callback filter finishes them (it never starves).
                out_l[todo], out_s[todo] = self._filtered(q[todo], k, mask, nthreads)
                break
            try:
                lab, sc = self._knn(q[todo], want, nthreads)
            except _ShortResult:  # the graph cannot give that many: finish by callback
                out_l[todo], out_s[todo] = self._filtered(q[todo], k, mask, nthreads)
                break
            ok = mask[lab]  # every label in the graph is < label_bound <= len(mask)
            full = np.count_nonzero(ok, axis=1) >= k
            if full.any():
                # Stable argsort keeps the best-first order of the eligible hits.
                order = np.argsort(~ok[full], axis=1, kind="stable")[:, :k]
                rows = todo[full]
                out_l[rows] = np.take_along_axis(lab[full], order, axis=1)
                out_s[rows] = np.take_along_axis(sc[full], order, axis=1)
            todo = todo[~full]
            factor *= 4
        return out_l, out_s

    def _filtered(
        self, q: np.ndarray, k: int, mask: np.ndarray, nthreads: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        try:
            return self._knn(q, k, nthreads, mask)
        except _ShortResult:
            # Fewer than k eligible labels reachable in the graph (hnswlib's
            # graph can leave a few nodes unreachable): score them all.
            return self._gather_exact(q, k, mask)

    def _gather_exact(
        self, q: np.ndarray, k: int, mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        live = self._live
        lab = np.flatnonzero(mask[: live.shape[0]] & live)
        assert self._index is not None
        with _hnswlib_errors("read vectors"):
            vecs = np.asarray(self._index.get_items(lab, return_type="numpy"), dtype=np.float32)
        scores = q @ vecs.T
        k = min(k, lab.size)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return lab[order].astype(np.int64), np.take_along_axis(scores, order, axis=1)

    # -- persistence -------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Write hnswlib's index file atomically (temp file, fsync, rename).

        Parameters
        ----------
        path : path-like
            Destination; its directory must exist.

        Returns
        -------
        dict
            ``{"bytes": size, "sha256": hex digest}`` for the manifest (pass
            the digest to :meth:`load` to verify the file).

        Raises
        ------
        SearchIndexError
            When writing fails; the message names the file.
        """
        p = Path(path)
        tmp = p.with_name(f".{p.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        try:
            self._wait()
            with self._lock.read(None):
                assert self._index is not None
                self._index.save_index(str(tmp))
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            digest = sha256_file(tmp)
            size = tmp.stat().st_size
            os.replace(tmp, p)
            fsync_dir(p.parent)
        except (OSError, RuntimeError) as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise SearchIndexError(f"cannot write HNSW index {p}: {exc}") from exc
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        return {"bytes": size, "sha256": digest}


def auto_choice(
    vectors: np.ndarray,
    labels: np.ndarray,
    config: HnswConfig | None = None,
    *,
    sample: int = 1000,
    k: int = 10,
    threads: int | None = None,
    index: HnswIndex | None = None,
) -> tuple[bool, float]:
    """Decide ``index="auto"``: whether HNSW is worth it for this corpus.

    Below :data:`AUTO_MIN_ROWS` rows exact search is faster: returns
    ``(False, 1.0)`` without building anything. Otherwise builds the graph
    (or uses ``index``, built over the same vectors and labels), searches
    ``sample`` of the corpus's own vectors (a seeded sample) at the
    configured ``ef_search``, and compares with exact search.

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(n, dim)`` float32 C-contiguous, L2-normalised.
    labels : numpy.ndarray
        ``(n,)`` labels of the rows.
    config : HnswConfig, optional
        Graph parameters; default ``HnswConfig()``.
    sample : int, default 1000
        Queries drawn from the corpus.
    k : int, default 10
        Recall depth.
    threads : int, optional
        Threads for the build and both searches; default all cores.
    index : HnswIndex, optional
        A graph already built over ``vectors`` (saves building a second).

    Returns
    -------
    use_hnsw : bool
        Whether recall@k >= :data:`AUTO_MIN_RECALL`.
    recall : float
        The measured recall@k (1.0 when exact was chosen by size).

    Notes
    -----
    Corpus vectors as queries find themselves, so the recall is a little
    higher than for fresh questions (one of the ``k`` is nearly certain).
    """
    from .exact import exact_topk  # lazy: exact pulls in the Numba kernels

    config = HnswConfig() if config is None else config
    sample = _check_int("sample", sample, 1)
    k = _check_int("k", k, 1)
    x = _check_vectors(vectors, None)
    n = x.shape[0]
    lab = _check_labels(labels, n)
    if n < AUTO_MIN_ROWS:
        return False, 1.0
    if index is None:
        index = HnswIndex.build(x, lab, config, threads=threads)
    rng = np.random.default_rng(config.random_seed)
    rows = np.sort(rng.choice(n, size=min(sample, n), replace=False))
    queries = x[rows]
    truth_rows, _ = exact_topk(queries, x, k, threads=threads)
    result = index.search(queries, k, ef=max(config.ef_search, k), threads=threads)
    assert result is not None  # no filter: never the exact plan
    recall = recall_at_k(result[0], lab[truth_rows])
    return recall >= AUTO_MIN_RECALL, recall
