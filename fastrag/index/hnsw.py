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

The parameters are :class:`~fastrag.index.hnsw_config.HnswConfig`, the
filter plan and the exact fallback :mod:`fastrag.index.hnsw_plan`, recall
:mod:`fastrag.index.recall`, the ef lock :mod:`fastrag.index.ef_lock` and
the input checks :mod:`fastrag.index.hnsw_checks`; this module re-exports
their public names.

Concurrency: searches run concurrently with each other (hnswlib's search is
thread-safe and releases the GIL); :meth:`~HnswIndex.add` and
:meth:`~HnswIndex.mark_deleted` are exclusive. hnswlib keeps the search
breadth ``ef`` in the index, not per call, so concurrent searches share the
index only while they ask for the same ``ef``; a search with another ``ef``
waits for them to finish (see :class:`~fastrag.index.ef_lock.EfLock`).

Threads: ``threads=`` is the number of hnswlib worker threads of one call
(default :func:`fastrag._threads.max_threads`, all cores). hnswlib runs its
own ``std::thread`` pool; never call it from inside a Numba parallel region,
whose threads would compete with it for the same cores.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import threading
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np

from .._fs import fsync_dir, sha256_file
from ..errors import ConfigError, SearchIndexError
from .base import check_k
from .ef_lock import EfLock
from .hnsw_checks import (
    check_int,
    check_labels,
    check_queries,
    check_vectors,
    hnsw_threads,
    hnswlib_errors,
)
from .hnsw_config import HnswConfig
from .hnsw_mapped import MappedGraph, read_header
from .hnsw_plan import (
    EXACT_GATHER_COST_US,
    EXACT_SCAN_COST_US,
    OVERSAMPLE_COST_US,
    OVERSAMPLE_MARGIN,
    OVERSAMPLE_RETRIES,
    Strategy,
    exact_over_rows,
    filter_strategy,
)
from .recall import recall_at_k

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


class _ShortResult(Exception):
    """hnswlib found fewer results than asked for (internal: retried or mapped)."""


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
        self._lock = EfLock(self._set_backend_ef)
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
        x = check_vectors(vectors, None)
        n, dim = x.shape
        lab = check_labels(labels, n)
        nthreads = hnsw_threads(threads)
        cap = n if max_elements is None else check_int("max_elements", max_elements, 0)
        if cap < n:
            raise ConfigError(f"max_elements={cap} is smaller than the {n} vectors")
        index = hnswlib.Index(space="ip", dim=dim)
        with hnswlib_errors("build the index"):
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
        dim = check_int("dim", dim, 1)
        cap = 0 if max_elements is None else check_int("max_elements", max_elements, 0)
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
        x = check_vectors(vectors, self._dim)
        n = x.shape[0]
        lab = check_labels(labels, n)
        nthreads = hnsw_threads(threads)
        if n == 0:
            return
        self._wait()
        with self._lock.write():
            index = self._index
            if isinstance(index, MappedGraph):
                # A mapped graph cannot grow: hand it to hnswlib (a copy in memory).
                mapped = index
                with hnswlib_errors("load the graph to add vectors"):
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
            with hnswlib_errors("add vectors"):
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
            with hnswlib_errors("mark labels deleted"):
                for label in lab.tolist():
                    index.mark_deleted(label)
                    self._live[label] = False  # per label: consistent if hnswlib fails midway
                    self._n_live -= 1
                    self._n_deleted += 1
        return int(lab.size)

    def set_ef(self, ef: int) -> None:
        """Set the default search breadth (``ef >= 1``; raised to ``k`` per call when smaller)."""
        self._ef = check_int("ef", ef, 1)

    # -- search ------------------------------------------------------------

    def plan(self, k: int, m: int = 1, eligible: np.ndarray | None = None) -> Strategy:
        """The strategy :meth:`search` would use (``"exact"``: it would return None)."""
        k = check_k(k)
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
            k = check_k(k)
        if ef is not None:
            ef = check_int("ef", ef, 1)
            if ef < k:
                raise ConfigError(
                    f"ef must be >= k (got ef={ef}, k={k}): hnswlib keeps ef candidates"
                )
        q = check_queries(queries, self._dim)
        nthreads = hnsw_threads(threads)
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
        factor = OVERSAMPLE_MARGIN * n_live / n_eligible
        for attempt in itertools.count():
            if not todo.size:
                break
            want = math.ceil(k * factor)
            if attempt > OVERSAMPLE_RETRIES or want >= n_live:
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
        with hnswlib_errors("read vectors"):
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
    sample = check_int("sample", sample, 1)
    k = check_k(k)
    x = check_vectors(vectors, None)
    n = x.shape[0]
    lab = check_labels(labels, n)
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
