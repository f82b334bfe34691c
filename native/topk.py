"""Exact top-k by dot product: a fused scan, a block selector and a merger.

All kernels rank candidates by the same rule: higher score first, ties broken
by the *lower* row id; padding (id ``-1``, score ``-inf``) ranks after every
real candidate. Per-query results live in *bounded heaps* stored in plain
arrays: a heap of ``k`` slots keeps its *worst* entry at slot 0 (the root), so
the root score is the threshold a new candidate must beat. Empty slots hold
the padding pair ``(-inf, -1)``.

Two ways to fill the heaps, chosen by the Python driver
(:func:`fastrag.exact.exact_topk`):

- :func:`scan_topk` reads every corpus row once and scores it against all
  queries, in parallel over blocks of rows (the latency path for small
  batches: memory-bound for a single query);
- :func:`select_block` consumes a block of scores a BLAS matrix product has
  written (the throughput path for large batches); it is serial and
  releases the GIL, and the driver runs one call per worker thread, each
  worker on its own heaps.

Scanning rows in increasing id order and admitting a score only when it is
strictly greater than the threshold gives the lower-id tie-break for free;
wherever heaps meet out of order (:func:`merge_topk`, :func:`finalize_heaps`),
the full ``(score desc, id asc)`` rule is applied. Rows are assumed finite
(no NaN scores).

Kernels never write into their inputs and never raise on user input: the
Python driver validates shapes, dtypes, contiguity and finiteness first.
"""

from __future__ import annotations

import numba
import numpy as np

from . import heap
from ._jit import kernel, parallel_kernel

__all__ = [
    "finalize_heaps",
    "init_heaps",
    "merge_topk",
    "scan_topk",
    "select_block",
    "warmup",
]


@parallel_kernel
def init_heaps(heap_ids: np.ndarray, heap_scores: np.ndarray) -> None:
    """Fill heaps with padding: id ``-1``, score ``-inf``.

    Parameters
    ----------
    heap_ids : numpy.ndarray
        int64, shape ``(m, k)``, C-contiguous, writable.
    heap_scores : numpy.ndarray
        float32, shape ``(m, k)``, C-contiguous, writable.
    """
    m, k = heap_ids.shape
    for q in numba.prange(m):
        for t in range(k):
            heap_ids[q, t] = -1
            heap_scores[q, t] = -np.inf


@parallel_kernel
def finalize_heaps(heap_ids: np.ndarray, heap_scores: np.ndarray) -> None:
    """Sort every row's heap in place, best first (score desc, id asc).

    Parameters
    ----------
    heap_ids : numpy.ndarray
        int64, shape ``(m, k)``, C-contiguous, writable: one heap per row.
    heap_scores : numpy.ndarray
        float32, shape ``(m, k)``, C-contiguous, writable.
    """
    m, k = heap_ids.shape
    for q in numba.prange(m):
        heap.sort(heap_scores[q], heap_ids[q], k)


@kernel
def select_block(
    scores: np.ndarray,
    offset: int,
    mask: np.ndarray,
    heap_ids: np.ndarray,
    heap_scores: np.ndarray,
) -> None:
    """Merge one block of scores into per-query heaps (serial; releases the GIL).

    Row ``j`` of ``scores`` holds corpus row ``offset + j`` scored against
    every query (the layout ``corpus_block @ queries.T`` produces). Queries
    are visited in groups of 64 lanes whose thresholds (heap roots) sit in a
    small contiguous array; for every row one vectorised compare counts the
    lanes that beat their threshold, and only rows with a hit are revisited
    lane by lane. A score enters a heap only when strictly greater than the
    root and rows are visited in increasing id order (pass blocks in
    increasing ``offset`` order), so among equal scores the lower id stays.

    The driver runs one call per worker thread on disjoint heaps, so the
    kernel itself is serial.

    Parameters
    ----------
    scores : numpy.ndarray
        float32, shape ``(w, m)``, C-contiguous: the block's dot products.
    offset : int
        Corpus row id of row 0 of ``scores``.
    mask : numpy.ndarray
        bool, shape ``(n,)`` (True = eligible) or ``(0,)`` for "no mask",
        C-contiguous.
    heap_ids : numpy.ndarray
        int64, shape ``(m, k)``, C-contiguous, writable: updated in place.
    heap_scores : numpy.ndarray
        float32, shape ``(m, k)``, C-contiguous, writable: updated in place.
    """
    w, m = scores.shape
    k = heap_ids.shape[1]
    has_mask = mask.shape[0] > 0
    group = 64
    thr = np.empty(group, dtype=np.float32)
    for q0 in range(0, m, group):
        q1 = min(m, q0 + group)
        for t in range(q1 - q0):
            thr[t] = heap_scores[q0 + t, 0]
        for j in range(w):
            # Slices index from 0, which lets LLVM vectorise the count.
            row = scores[j, q0:q1]
            hits = 0
            for t in range(row.shape[0]):
                hits += row[t] > thr[t]
            if hits == 0:
                continue
            if has_mask and not mask[offset + j]:
                continue
            for t in range(row.shape[0]):
                s = row[t]
                if s > thr[t]:
                    q = q0 + t
                    heap.sift_down(heap_scores[q], heap_ids[q], k, np.int64(0), s, offset + j)
                    thr[t] = heap_scores[q, 0]


@kernel
def _push(
    out_ids: np.ndarray,
    out_scores: np.ndarray,
    q: int,
    base: int,
    k: int,
    s: float,
    i: int,
    mask: np.ndarray,
    has_mask: bool,
) -> None:
    """Offer row ``i`` with score ``s`` to query ``q``'s heap in one scan block.

    Callers test ``s > out_scores[q, base]`` inline first: the test is the
    hot path, the call (arrays passed by value) is the rare one.

    Parameters
    ----------
    out_ids : numpy.ndarray
        int64, shape ``(m, nblocks * k)``, C-contiguous, writable.
    out_scores : numpy.ndarray
        float32, shape ``(m, nblocks * k)``, C-contiguous, writable.
    q : int
        Query row.
    base : int
        First column of the block's heap (``block * k``).
    k : int
        Heap size.
    s : float32
        The candidate's score.
    i : int
        The candidate's corpus row id (rows arrive in increasing order).
    mask : numpy.ndarray
        bool, shape ``(n,)`` or ``(0,)`` (no mask).
    has_mask : bool
        Whether ``mask`` is in force.
    """
    if s > out_scores[q, base]:
        if has_mask and not mask[i]:
            return
        heap.sift_down(out_scores[q, base:], out_ids[q, base:], k, np.int64(0), s, i)


@kernel
def _push4(
    out_ids: np.ndarray,
    out_scores: np.ndarray,
    q: int,
    base: int,
    k: int,
    s0: float,
    s1: float,
    s2: float,
    s3: float,
    i: int,
    real: int,
    mask: np.ndarray,
    has_mask: bool,
) -> None:
    """Offer rows ``i .. i + real - 1`` (in that order) to query ``q``'s heap.

    Parameters
    ----------
    out_ids : numpy.ndarray
        int64, shape ``(m, nblocks * k)``, C-contiguous, writable.
    out_scores : numpy.ndarray
        float32, shape ``(m, nblocks * k)``, C-contiguous, writable.
    q : int
        Query row.
    base : int
        First column of the block's heap (``block * k``).
    k : int
        Heap size.
    s0, s1, s2, s3 : float32
        Scores of rows ``i``, ``i + 1``, ``i + 2`` and ``i + 3``.
    i : int
        Corpus row id of the first of the four rows.
    real : int
        How many of the four rows exist (1 to 4; the corpus's last tile may
        be short, its missing rows repeat the last real one).
    mask : numpy.ndarray
        bool, shape ``(n,)`` or ``(0,)`` (no mask).
    has_mask : bool
        Whether ``mask`` is in force.
    """
    _push(out_ids, out_scores, q, base, k, s0, i, mask, has_mask)
    if real > 1:
        _push(out_ids, out_scores, q, base, k, s1, i + 1, mask, has_mask)
    if real > 2:
        _push(out_ids, out_scores, q, base, k, s2, i + 2, mask, has_mask)
    if real > 3:
        _push(out_ids, out_scores, q, base, k, s3, i + 3, mask, has_mask)


@parallel_kernel
def scan_topk(
    queries: np.ndarray,
    corpus: np.ndarray,
    mask: np.ndarray,
    nblocks: int,
    out_ids: np.ndarray,
    out_scores: np.ndarray,
) -> None:
    """Fused scan: per-(block, query) top-k heaps over blocks of corpus rows.

    The corpus rows are cut into ``nblocks`` contiguous blocks, processed in
    parallel; each block keeps one heap of ``k`` slots per query. Block
    ``b``'s heap for query ``q`` is ``out_*[q, b * k:(b + 1) * k]``
    (unsorted); merge the blocks with :func:`merge_topk`, or sort a single
    block with :func:`finalize_heaps`.

    A block walks its rows in chunks of 64 (96 KiB at d=384, L2-sized):

    1. rows one after another -- a single forward stream, which the hardware
       prefetcher serves at full memory speed (interleaving several rows
       halves the read rate on Zen 4) -- against the first ``min(m, 8)``
       queries, four queries per loaded row vector;
    2. when ``m > 8``, the other queries against the chunk, now cached, in
       register tiles of 4 rows x 4 queries: 16 accumulators, each loaded
       vector feeding four multiply-adds.

    Dot products are vectorised along ``d`` (the ``reassoc`` flag). A heap
    is touched only when a score beats its root, tested inline (in pass 2
    once per 4 rows, on their maximum). Tiles start at multiples of 4 rows
    from row 0 whatever ``nblocks`` is, so a score never depends on the
    thread count. Each query sees a block's rows in increasing order, so a
    strict ``>`` against the root keeps the lower id among equal scores.

    Parameters
    ----------
    queries : numpy.ndarray
        float32, shape ``(m, d)``, C-contiguous.
    corpus : numpy.ndarray
        float32, shape ``(n, d)``, C-contiguous, may be read-only.
    mask : numpy.ndarray
        bool, shape ``(n,)`` (True = eligible) or ``(0,)`` for "no mask",
        C-contiguous.
    nblocks : int
        Number of row blocks, ``>= 1``.
    out_ids : numpy.ndarray
        int64, shape ``(m, nblocks * k)``, C-contiguous, writable.
    out_scores : numpy.ndarray
        float32, shape ``(m, nblocks * k)``, C-contiguous, writable.
    """
    n, d = corpus.shape
    m = queries.shape[0]
    k = out_ids.shape[1] // nblocks
    has_mask = mask.shape[0] > 0
    # Rows per block, a multiple of 4: tiles never straddle blocks and only
    # the corpus's last tile can be short.
    rows = ((n + nblocks - 1) // nblocks + 3) // 4 * 4
    # Pass 2 re-reads a chunk from cache; without pass 2 a block is one chunk.
    chunk = 64 if m > 8 else max(rows, 1)
    m1 = min(m, 8)  # pass 1: 4-query tiles on [0, m14), single queries on [m14, m1)
    m14 = m1 - m1 % 4
    m4 = m - m % 4  # pass 2: 4-query tiles on [8, m4), single queries on [m4, m)
    for b in numba.prange(nblocks):
        lo = min(n, b * rows)
        hi = min(n, lo + rows)
        base = b * k
        for q in range(m):
            for t in range(k):
                out_ids[q, base + t] = -1
                out_scores[q, base + t] = -np.inf
        for c0 in range(lo, hi, chunk):
            c1 = min(hi, c0 + chunk)
            # Pass 1: one forward stream over the chunk's rows.
            for i in range(c0, c1):
                x = corpus[i]
                for q in range(0, m14, 4):
                    w0 = queries[q]
                    w1 = queries[q + 1]
                    w2 = queries[q + 2]
                    w3 = queries[q + 3]
                    s0 = np.float32(0.0)
                    s1 = np.float32(0.0)
                    s2 = np.float32(0.0)
                    s3 = np.float32(0.0)
                    for j in range(d):
                        v = x[j]
                        s0 += v * w0[j]
                        s1 += v * w1[j]
                        s2 += v * w2[j]
                        s3 += v * w3[j]
                    if s0 > out_scores[q, base]:
                        _push(out_ids, out_scores, q, base, k, s0, i, mask, has_mask)
                    if s1 > out_scores[q + 1, base]:
                        _push(out_ids, out_scores, q + 1, base, k, s1, i, mask, has_mask)
                    if s2 > out_scores[q + 2, base]:
                        _push(out_ids, out_scores, q + 2, base, k, s2, i, mask, has_mask)
                    if s3 > out_scores[q + 3, base]:
                        _push(out_ids, out_scores, q + 3, base, k, s3, i, mask, has_mask)
                for q in range(m14, m1):
                    w0 = queries[q]
                    s0 = np.float32(0.0)
                    for j in range(d):
                        s0 += x[j] * w0[j]
                    if s0 > out_scores[q, base]:
                        _push(out_ids, out_scores, q, base, k, s0, i, mask, has_mask)
            if m <= 8:
                continue
            # Pass 2: the other queries against the cached chunk. The corpus's
            # last tile may hold fewer than 4 rows: it repeats its last row
            # and offers only the real ones, so every row of a query is
            # scored by the same loop (duplicate rows score bit-identically).
            for i in range(c0, c1, 4):
                real = min(4, c1 - i)
                x0 = corpus[i]
                x1 = corpus[i + min(1, real - 1)]
                x2 = corpus[i + min(2, real - 1)]
                x3 = corpus[i + min(3, real - 1)]
                for q in range(8, m4, 4):
                    w0 = queries[q]
                    w1 = queries[q + 1]
                    w2 = queries[q + 2]
                    w3 = queries[q + 3]
                    s00 = np.float32(0.0)
                    s01 = np.float32(0.0)
                    s02 = np.float32(0.0)
                    s03 = np.float32(0.0)
                    s10 = np.float32(0.0)
                    s11 = np.float32(0.0)
                    s12 = np.float32(0.0)
                    s13 = np.float32(0.0)
                    s20 = np.float32(0.0)
                    s21 = np.float32(0.0)
                    s22 = np.float32(0.0)
                    s23 = np.float32(0.0)
                    s30 = np.float32(0.0)
                    s31 = np.float32(0.0)
                    s32 = np.float32(0.0)
                    s33 = np.float32(0.0)
                    for j in range(d):
                        v0 = x0[j]
                        v1 = x1[j]
                        v2 = x2[j]
                        v3 = x3[j]
                        u0 = w0[j]
                        u1 = w1[j]
                        u2 = w2[j]
                        u3 = w3[j]
                        s00 += v0 * u0
                        s01 += v0 * u1
                        s02 += v0 * u2
                        s03 += v0 * u3
                        s10 += v1 * u0
                        s11 += v1 * u1
                        s12 += v1 * u2
                        s13 += v1 * u3
                        s20 += v2 * u0
                        s21 += v2 * u1
                        s22 += v2 * u2
                        s23 += v2 * u3
                        s30 += v3 * u0
                        s31 += v3 * u1
                        s32 += v3 * u2
                        s33 += v3 * u3
                    if max(max(s00, s10), max(s20, s30)) > out_scores[q, base]:
                        _push4(
                            out_ids,
                            out_scores,
                            q,
                            base,
                            k,
                            s00,
                            s10,
                            s20,
                            s30,
                            i,
                            real,
                            mask,
                            has_mask,
                        )
                    if max(max(s01, s11), max(s21, s31)) > out_scores[q + 1, base]:
                        _push4(
                            out_ids,
                            out_scores,
                            q + 1,
                            base,
                            k,
                            s01,
                            s11,
                            s21,
                            s31,
                            i,
                            real,
                            mask,
                            has_mask,
                        )
                    if max(max(s02, s12), max(s22, s32)) > out_scores[q + 2, base]:
                        _push4(
                            out_ids,
                            out_scores,
                            q + 2,
                            base,
                            k,
                            s02,
                            s12,
                            s22,
                            s32,
                            i,
                            real,
                            mask,
                            has_mask,
                        )
                    if max(max(s03, s13), max(s23, s33)) > out_scores[q + 3, base]:
                        _push4(
                            out_ids,
                            out_scores,
                            q + 3,
                            base,
                            k,
                            s03,
                            s13,
                            s23,
                            s33,
                            i,
                            real,
                            mask,
                            has_mask,
                        )
                for q in range(m4, m):
                    w0 = queries[q]
                    s00 = np.float32(0.0)
                    s10 = np.float32(0.0)
                    s20 = np.float32(0.0)
                    s30 = np.float32(0.0)
                    for j in range(d):
                        u0 = w0[j]
                        s00 += x0[j] * u0
                        s10 += x1[j] * u0
                        s20 += x2[j] * u0
                        s30 += x3[j] * u0
                    if max(max(s00, s10), max(s20, s30)) > out_scores[q, base]:
                        _push4(
                            out_ids,
                            out_scores,
                            q,
                            base,
                            k,
                            s00,
                            s10,
                            s20,
                            s30,
                            i,
                            real,
                            mask,
                            has_mask,
                        )


@parallel_kernel
def merge_topk(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Best ``k`` candidates of every row, best first (score desc, id asc).

    Used to merge per-block heaps and per-segment results (ids are then
    global). Padding entries (negative id) are ignored and only reappear as
    padding when a row has fewer than ``min(k, a)`` real candidates.

    Parameters
    ----------
    ids : numpy.ndarray
        int64, shape ``(m, a)``, C-contiguous: candidate ids, ``-1`` = padding.
    scores : numpy.ndarray
        float32, shape ``(m, a)``, C-contiguous: candidate scores (no NaN).
    k : int
        Number of results per row, ``>= 1``.

    Returns
    -------
    out_ids : numpy.ndarray
        int64, shape ``(m, min(k, a))``, C-contiguous.
    out_scores : numpy.ndarray
        float32, shape ``(m, min(k, a))``, C-contiguous.
    """
    m, a = ids.shape
    kk = min(k, a)
    out_ids = np.empty((m, kk), dtype=np.int64)
    out_scores = np.empty((m, kk), dtype=np.float32)
    for q in numba.prange(m):
        hs = out_scores[q]
        hi = out_ids[q]
        for t in range(kk):
            hs[t] = -np.inf
            hi[t] = -1
        for t in range(a):
            i = ids[q, t]
            if i < 0:
                continue
            s = scores[q, t]
            if kk > 0 and heap.worse(hs[0], hi[0], s, i):
                heap.sift_down(hs, hi, kk, np.int64(0), s, i)
        heap.sort(hs, hi, kk)
    return out_ids, out_scores


def warmup(blocks: bool = True) -> None:
    """Compile every signature the engine uses, so no call pays the JIT.

    Covers :func:`scan_topk` on its one signature (the driver passes the
    corpus as a read-only view, queries and masks writable: it copies the
    few that are not; "no mask" is an empty bool array of the same type), and
    :func:`select_block`, :func:`init_heaps`, :func:`finalize_heaps` and
    :func:`merge_topk` on their single signature each. ``blocks=False``
    leaves out :func:`select_block` and :func:`merge_topk`, which a small
    exact index never calls (the demo's helper process).
    """
    d, n, k = 4, 8, 2
    queries = np.ones((1, d), dtype=np.float32)
    corpus = np.ones((n, d), dtype=np.float32)
    corpus.flags.writeable = False
    for mask in (np.zeros(0, dtype=np.bool_), np.ones(n, dtype=np.bool_)):
        ids = np.empty((1, 2 * k), dtype=np.int64)
        scores = np.empty((1, 2 * k), dtype=np.float32)
        scan_topk(queries, corpus, mask, 2, ids, scores)
        heap_ids = np.empty((1, k), dtype=np.int64)
        heap_scores = np.empty((1, k), dtype=np.float32)
        init_heaps(heap_ids, heap_scores)
        if blocks:
            merge_topk(ids, scores, k)
            select_block(np.ones((n, 1), dtype=np.float32), 0, mask, heap_ids, heap_scores)
        finalize_heaps(heap_ids, heap_scores)
