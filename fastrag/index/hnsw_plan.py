"""How a filtered HNSW search is answered: the measured plan and the exact fallback.

:func:`filter_strategy` picks plain search, oversampling or exact search
over the eligible rows from the share of rows a filter admits, by the
costs measured below; :func:`exact_over_rows` is the exact fallback
(gather the eligible rows, scan only them).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..errors import ConfigError

__all__ = [
    "EXACT_GATHER_COST_US",
    "EXACT_SCAN_COST_US",
    "OVERSAMPLE_COST_US",
    "Strategy",
    "exact_over_rows",
    "filter_strategy",
]

Strategy = Literal["hnsw", "oversample", "filter", "exact"]

# ---------------------------------------------------------------------------
# Measured constants. Figures: 2-core Zen 4 shared with other jobs (medians of
# interleaved rounds), clustered data (random_unit_vectors(..., clusters=1000)),
# d=384, M=16, ef_construction=200, ef_search=64, k=10; see
# benchmarks/compare_hnsw.py (--filters for the filter grid).
# ---------------------------------------------------------------------------

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
#   fill (see ``fastrag.index.hnsw.HnswIndex._oversample``).
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

EXACT_ONE_THREAD_FLOATS = 1 << 22
""":func:`exact_over_rows` scans up to this many floats (16 MiB) on one
thread unless told otherwise: the gather already costs more than the scan,
and on a busy two-core machine a two-thread Numba region for one small
query was measured at ~16 ms (waiting for the other core) against 0.1 ms."""

OVERSAMPLE_MARGIN = 1.5
"""Oversampling asks for ``margin * k / s`` results: for a random filter the
expected number of eligible hits is then ``1.5 k``; short rows are retried."""

OVERSAMPLE_RETRIES = 2
"""Retries (each 4x wider) before the rows still short go to the callback
filter: a random filter fills nearly every row at the first try; a row still
short after a 16x wider search has its eligible labels far from the query."""


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
        measurements (3x oversampling); :meth:`~fastrag.index.hnsw.HnswIndex.search` uses it as
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
    """Exact top-``k`` among ``vectors[rows]``, for when ``HnswIndex.search`` returns None.

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
    if threads is None and sub.size <= EXACT_ONE_THREAD_FLOATS:
        threads = 1
    ids, scores = exact_topk(queries, sub, k, threads=threads)
    return rows.astype(np.int64, copy=False)[ids], scores
