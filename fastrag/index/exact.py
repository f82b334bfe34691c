"""Exact batched top-k by dot product (cosine on L2-normalised vectors).

:func:`exact_topk` is the one entry point. It validates in Python and picks
one of two native paths by the batch size ``m``:

- ``m < BLAS_MIN_BATCH`` -- the *scan* path, for latency: one fused pass
  over the corpus (:func:`fastrag._native.topk.scan_topk`), parallel over
  blocks of corpus rows (Numba ``prange``), every row loaded once for all
  queries, one bounded heap per (block, query); the blocks are merged with
  :func:`~fastrag._native.topk.merge_topk`. A single query runs at memory
  speed.
- ``m >= BLAS_MIN_BATCH`` -- the *BLAS* path, for throughput: the corpus is
  cut into blocks of rows; each block is scored with one single-threaded
  sgemm (``np.matmul(block, queries.T, out=buf)``) into a reused,
  cache-sized buffer and merged into per-query heaps by
  :func:`~fastrag._native.topk.select_block`, which touches a heap only when
  a score beats its root. ``threads`` workers (the calling thread plus
  helpers from a small process-wide pool) pull blocks from a shared
  counter, each with its own buffer and heaps (the sgemm and the kernel
  release the GIL); a helper that has not started when the blocks run out
  is cancelled rather than awaited, so a busy core delays nobody. The
  per-worker heaps are merged at the end. The ``m x n`` score matrix is
  never materialised.

Both paths rank by score (descending) and break ties by the lower row id;
their scores agree to float32 rounding (different summation orders). A
result never depends on the thread count.

Threads: ``threads=`` (default: the calling thread's Numba setting) is the
number of cores one call uses. The scan path runs that many Numba threads.
The BLAS path runs that many workers with the BLAS pool pinned to one thread
for the duration of the call (through ``threadpoolctl``; the setting is
process-wide, so the pin is reference-counted across concurrent calls and
the last call out restores the original), so BLAS threads never spin against
Numba's or each other. Should threadpoolctl find no BLAS to control, the
path runs one worker and leaves BLAS threading alone.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from .._native import quantised as _quantised
from .._native import readonly
from .._native import topk as _topk
from .._threads import max_threads
from .._threads import threads as _threads
from ..errors import ConfigError
from .base import check_k

__all__ = ["BLAS_MIN_BATCH", "ExactIndex", "exact_topk", "merge_topk"]

BLAS_MIN_BATCH: int = 48
"""Smallest batch (number of queries) served by the BLAS path.

Measured on a 2-core Zen 4 (AVX-512), n=100,000, d=384, one thread (the
2-thread figures agree where the machine was quiet): the scan is
memory-bound up to ~4 queries, then its 4x4 register tiles reach ~55-75
GFLOP/s per core; one-thread sgemm of a (rows, d) x (d, m) block reaches
~50 GFLOP/s at m=32, ~60 at m=48, ~67-74 at m=64 and ~90 at m>=256. The
scan wins at m=32 (44 vs 51 ms); from m=48 to 64 the two are within the
machine's noise (60-67 vs 63-64 ms at 48, 72-80 vs 70-75 ms at 64); BLAS wins
from m=96 (100 vs 109 ms). At the tie the BLAS path is preferred: its
workers share blocks dynamically, so a busy core slows it less than the
scan's static ``prange`` split.
"""

_SCAN_MIN_ROWS = 2048
"""The scan path gives every block at least this many corpus rows."""

_SCAN_BLOCKS_PER_THREAD = 4
"""Scan blocks per thread (balance on a noisy machine, few heaps to merge)."""

_BLAS_BUFFER_BYTES = 1 << 20
"""Target size of one worker's score buffer (one core's L2)."""

_BLAS_QUERY_CHUNK = 2048
"""The BLAS path scores at most this many queries per sgemm (chunks are balanced)."""

_BLAS_MIN_COLS = 256
"""The BLAS path scores at least this many corpus rows per sgemm."""

QUANTISED_MIN_ROWS: int = 4096
"""Blocks of at least this many rows answer single questions through their int8 copy.

(:mod:`fastrag._native.quantised`: a quarter of the bytes read, then the float32
scan of the rows that can still be in the top ``k``: the same ids and scores.)
Smaller blocks sit in the cache anyway. ``FASTRAG_EXACT_QUANTISED=0`` turns it
off (the copy costs a quarter of the vectors' memory, plus 8 bytes a row).
"""

QUANTISED: bool = os.environ.get("FASTRAG_EXACT_QUANTISED", "1").strip().lower() not in {
    "0", "false", "no", "off",
}  # fmt: skip
"""Whether :class:`ExactIndex` keeps int8 copies of its large blocks (read once, at import)."""

_QUANTISED_MAX_SHARE = 8
"""The pre-scan gives up (the float32 scan runs) past ``rows / this`` candidates."""

_controller_lock = threading.Lock()
_controller: Any = None  # threadpoolctl.ThreadpoolController, False if unavailable
_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _check_corpus(corpus: object) -> np.ndarray:
    if not isinstance(corpus, np.ndarray):
        raise ConfigError(f"corpus must be a numpy array, got {type(corpus).__name__}")
    if corpus.ndim != 2:
        raise ConfigError(f"corpus must be 2-D (n, d), got shape {corpus.shape}")
    if corpus.dtype != np.float32:
        raise ConfigError(
            f"corpus must be float32, got {corpus.dtype}: it is never copied, "
            "so convert it once when the index is built"
        )
    if not corpus.flags.c_contiguous:
        raise ConfigError("corpus must be C-contiguous: it is never copied")
    if corpus.shape[1] < 1:
        raise ConfigError(f"corpus dimension must be >= 1, got shape {corpus.shape}")
    if corpus.flags.writeable:
        # A read-only view (no copy): the kernels then have one corpus type to
        # compile, and memory-mapped stores are read-only anyway.
        view = corpus.view()
        view.flags.writeable = False
        return view
    return corpus


def _check_queries(queries: object, d: int) -> np.ndarray:
    q = np.asarray(queries)
    if q.dtype.kind not in "fiu":
        raise ConfigError(f"queries must be real numbers, got dtype {q.dtype}")
    if q.ndim != 2:
        raise ConfigError(f"queries must be 2-D (m, d), got shape {q.shape}")
    if q.shape[1] != d:
        raise ConfigError(f"queries have dimension {q.shape[1]}, the corpus has {d}")
    with np.errstate(over="ignore"):  # values beyond float32 become inf: rejected below
        q = np.ascontiguousarray(q, dtype=np.float32)
    if not q.flags.writeable:
        # The kernels see one query type (writable); m x d floats are
        # negligible next to the n x d the call reads.
        q = q.copy()
    if not np.isfinite(q).all():
        raise ConfigError("queries contain NaN or infinity (or values beyond float32)")
    return q


def _check_mask(mask: object, n: int) -> np.ndarray | None:
    if mask is None:
        return None
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise ConfigError(f"mask must be a bool array, got dtype {m.dtype}")
    if m.shape != (n,):
        raise ConfigError(f"mask must have shape ({n},), got {m.shape}")
    return np.ascontiguousarray(m)


def _blas_controller() -> Any:
    """The process's threadpoolctl controller, or None without threadpoolctl."""
    global _controller
    with _controller_lock:
        if _controller is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:
                _controller = False
            else:
                _controller = ThreadpoolController()
    return _controller or None


_pin_lock = threading.Lock()
_pin_depth = 0
_pin_limiter: Any = None


@contextlib.contextmanager
def _single_threaded_blas(controller: Any) -> Iterator[None]:
    """Pin the BLAS pools to one thread while any call is inside, then restore them.

    The BLAS thread count is process-wide, so the pin is reference-counted:
    the first caller in sets it, the last one out restores the original
    value. Concurrent callers therefore never restore each other's setting
    half-way, and the process is left as it was found.
    """
    global _pin_depth, _pin_limiter
    with _pin_lock:
        if _pin_depth == 0:
            _pin_limiter = controller.limit(limits=1, user_api="blas")
        _pin_depth += 1
    try:
        yield
    finally:
        with _pin_lock:
            _pin_depth -= 1
            if _pin_depth == 0:
                _pin_limiter.restore_original_limits()
                _pin_limiter = None


def _scan_path(
    queries: np.ndarray, corpus: np.ndarray, mask: np.ndarray, k: int, nthreads: int
) -> tuple[np.ndarray, np.ndarray]:
    n = corpus.shape[0]
    m = queries.shape[0]
    nblocks = max(1, min(nthreads * _SCAN_BLOCKS_PER_THREAD, n // _SCAN_MIN_ROWS))
    ids = np.empty((m, nblocks * k), dtype=np.int64)
    scores = np.empty((m, nblocks * k), dtype=np.float32)
    _topk.scan_topk(queries, corpus, mask, nblocks, ids, scores)
    # The merge touches nblocks * k candidates a query: one thread (a parallel
    # region would wait for the other core, which a busy machine lends late).
    with _threads(1):
        if nblocks == 1:
            _topk.finalize_heaps(ids, scores)
            return ids, scores
        return _topk.merge_topk(ids, scores, k)


def _helper_pool() -> ThreadPoolExecutor:
    """The process's helper threads for the BLAS path (created on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=max(1, max_threads() - 1), thread_name_prefix="fastrag-topk"
            )
        return _pool


def _run_workers(work: Callable[[int], None], workers: int) -> None:
    """Run ``work(0)`` on this thread and ``work(1 .. workers - 1)`` on helper threads.

    Workers pull blocks from a shared counter, so the calling thread alone
    can finish the job. A helper task that has not started by then (its
    core busy with another process, or the pool busy with another caller)
    is cancelled instead of awaited; started ones are awaited, as they write
    into the caller's buffers.
    """
    if workers == 1:
        work(0)
        return
    pool = _helper_pool()
    futures = [pool.submit(work, w) for w in range(1, workers)]
    try:
        work(0)
    finally:
        for future in futures:
            future.cancel()
        for future in futures:
            if not future.cancelled():
                future.result()


def _blas_path(
    queries: np.ndarray, corpus: np.ndarray, mask: np.ndarray, k: int, nthreads: int
) -> tuple[np.ndarray, np.ndarray]:
    n = corpus.shape[0]
    m = queries.shape[0]
    chunks = -(-m // _BLAS_QUERY_CHUNK)
    mq = -(-m // chunks)
    # Block boundaries depend on (m, n) only, never on the thread count, so a
    # score is computed by the same sgemm shape whatever ``threads`` is.
    cols = min(n, max(_BLAS_MIN_COLS, _BLAS_BUFFER_BYTES // (4 * mq)))
    nblocks = -(-n // cols)
    controller = _blas_controller()
    workers = min(nthreads, nblocks) if controller is not None else 1
    out_ids = np.empty((m, k), dtype=np.int64)
    out_scores = np.empty((m, k), dtype=np.float32)
    buffers = [np.empty(cols * mq, dtype=np.float32) for _ in range(workers)]
    lock = threading.Lock()
    pinned = contextlib.nullcontext() if controller is None else _single_threaded_blas(controller)
    with pinned:
        for q0 in range(0, m, mq):
            q1 = min(m, q0 + mq)
            b = q1 - q0
            # (d, b) C-contiguous: sgemm writes (rows, queries) blocks, the
            # faster orientation for batches of tens of queries.
            qt = np.ascontiguousarray(queries[q0:q1].T)
            heap_ids = np.empty((workers, b, k), dtype=np.int64)
            heap_scores = np.empty((workers, b, k), dtype=np.float32)
            _topk.init_heaps(heap_ids.reshape(-1, k), heap_scores.reshape(-1, k))
            blocks = itertools.count()

            def work(
                w: int,
                qt: np.ndarray = qt,
                heap_ids: np.ndarray = heap_ids,
                heap_scores: np.ndarray = heap_scores,
                blocks: Iterator[int] = blocks,
            ) -> None:
                # A worker takes blocks in increasing order, so its heaps see
                # rows in increasing id order (the tie-break needs it).
                flat = buffers[w]
                width = qt.shape[1]
                while True:
                    with lock:
                        blk = next(blocks)
                    if blk >= nblocks:
                        return
                    lo = blk * cols
                    hi = min(n, lo + cols)
                    buf = flat[: (hi - lo) * width].reshape(hi - lo, width)
                    np.matmul(corpus[lo:hi], qt, out=buf)
                    _topk.select_block(buf, lo, mask, heap_ids[w], heap_scores[w])

            _run_workers(work, workers)
            if workers == 1:
                _topk.finalize_heaps(heap_ids[0], heap_scores[0])
                out_ids[q0:q1] = heap_ids[0]
                out_scores[q0:q1] = heap_scores[0]
            else:
                cand_ids = np.ascontiguousarray(heap_ids.transpose(1, 0, 2)).reshape(b, -1)
                cand_scores = np.ascontiguousarray(heap_scores.transpose(1, 0, 2)).reshape(b, -1)
                out_ids[q0:q1], out_scores[q0:q1] = _topk.merge_topk(cand_ids, cand_scores, k)
    return out_ids, out_scores


def exact_topk(
    queries: np.ndarray,
    corpus: np.ndarray,
    k: int,
    *,
    mask: np.ndarray | None = None,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Return the ``k`` corpus rows with the highest dot product, per query.

    Parameters
    ----------
    queries : numpy.ndarray
        Shape ``(m, d)``, real numbers, finite. Converted to C-contiguous
        float32 when it is not already (a small copy).
    corpus : numpy.ndarray
        float32, shape ``(n, d)``, C-contiguous; typically read-only
        (memory-mapped Arrow data). Never copied: anything else raises.
        Rows are assumed finite (checked when an index is built, not here).
    k : int
        Number of results per query, ``>= 1``.
    mask : numpy.ndarray, optional
        bool, shape ``(n,)``; True marks an eligible row (deletes and
        filters). ``None`` means every row is eligible.
    threads : int, optional
        Cores this call may use; ``None`` means the calling thread's Numba
        setting (``numba.get_num_threads()``).

    Returns
    -------
    ids : numpy.ndarray
        int64, shape ``(m, k')`` with ``k' = min(k, eligible rows)``: row ids,
        best first; equal scores are ordered by the lower id. ``(m, 0)``
        when no row is eligible.
    scores : numpy.ndarray
        float32, shape ``(m, k')``: the matching dot products.

    Raises
    ------
    ConfigError
        On a bad ``k``, ``threads`` or ``mask``; a corpus that is not a
        C-contiguous 2-D float32 array; queries that are not 2-D, not real,
        not finite, or of another dimension than the corpus.

    Notes
    -----
    Batches of fewer than :data:`BLAS_MIN_BATCH` queries take the fused scan
    path, larger ones the blocked-sgemm path; see the module docstring.
    """
    kk = check_k(k)
    c = _check_corpus(corpus)
    n, d = c.shape
    q = _check_queries(queries, d)
    msk = _check_mask(mask, n)
    return _search(q, c, msk, kk, threads)


def _kernel_mask(msk: np.ndarray | None, n: int) -> tuple[np.ndarray, int]:
    """``msk`` as the kernels take it (``(0,)`` for "no mask", writable) and its eligible rows."""
    eligible = n if msk is None else int(np.count_nonzero(msk))
    if msk is None or eligible == n:
        return np.zeros(0, dtype=np.bool_), eligible  # "no mask"
    if not msk.flags.writeable:
        # One mask type in the kernels; n bytes copied next to n * d * 4 read.
        msk = msk.copy()
    return msk, eligible


def _search(
    q: np.ndarray, c: np.ndarray, msk: np.ndarray | None, kk: int, threads: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`exact_topk` on checked inputs (float32 C-contiguous, read-only corpus)."""
    m = q.shape[0]
    n, d = c.shape
    msk, eligible = _kernel_mask(msk, n)
    kk = min(kk, eligible)
    if kk == 0 or m == 0:
        return np.empty((m, kk), dtype=np.int64), np.empty((m, kk), dtype=np.float32)
    with _threads(threads, work=m * n * d * 4) as nthreads:
        if m < BLAS_MIN_BATCH:
            return _scan_path(q, c, msk, kk, nthreads)
        return _blas_path(q, c, msk, kk, nthreads)


def merge_topk(
    ids: np.ndarray, scores: np.ndarray, k: int, *, threads: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Merge candidate lists (e.g. per-segment results) into the best ``k``.

    Parameters
    ----------
    ids : numpy.ndarray
        Integers, shape ``(m, a)``: candidate ids, ``-1`` (any negative) for
        padding. Padding sorts last, whatever its score.
    scores : numpy.ndarray
        Real numbers, shape ``(m, a)``: candidate scores, no NaN (``-inf``
        is allowed).
    k : int
        Number of results per row, ``>= 1``.
    threads : int, optional
        Numba threads for this call; ``None`` keeps the current setting.

    Returns
    -------
    ids : numpy.ndarray
        int64, shape ``(m, min(k, a))``, best first (score desc, id asc);
        ``-1`` where a row has fewer real candidates.
    scores : numpy.ndarray
        float32, shape ``(m, min(k, a))``; ``-inf`` beside padding.

    Raises
    ------
    ConfigError
        On a bad ``k``, shapes that differ or are not 2-D, non-integer ids,
        or NaN scores.
    """
    kk = check_k(k)
    i = np.asarray(ids)
    s = np.asarray(scores)
    if i.ndim != 2 or s.shape != i.shape:
        raise ConfigError(f"ids and scores must be 2-D of one shape, got {i.shape} and {s.shape}")
    if i.dtype.kind not in "iu":
        raise ConfigError(f"ids must be integers, got dtype {i.dtype}")
    if s.dtype.kind not in "fiu":
        raise ConfigError(f"scores must be real numbers, got dtype {s.dtype}")
    i = np.ascontiguousarray(i, dtype=np.int64)
    s = np.ascontiguousarray(s, dtype=np.float32)
    if np.isnan(s).any():
        raise ConfigError("scores contain NaN")
    if not i.flags.writeable:
        i = i.copy()
    if not s.flags.writeable:
        s = s.copy()
    with _threads(threads, work=i.size * 12):
        return _topk.merge_topk(i, s, kk)


_COPIES: dict[int, tuple[weakref.ref[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
"""int8 copies by ``id`` of the block they copy (checked against a weak reference to it)."""
_copies_lock = threading.RLock()  # re-entrant: a weak reference's callback may run inside


def _copy_of(block: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The int8 copy ``(codes, scales, err)`` of ``block``, made once while the block lives.

    A store's segments keep their vector views from one snapshot to the next (an ``add``
    makes a new index over the same blocks), so the copy is kept by the block, not by the
    index, and dropped with it. One thread makes it; the others wait for it.
    """
    with _copies_lock:
        got = _COPIES.get(id(block))
        if got is not None and got[0]() is block:
            return got[1]
        n, d = block.shape
        codes = np.empty((n, d), dtype=np.int8)
        scales = np.empty(n, dtype=np.float32)
        err = np.empty(n, dtype=np.float32)
        _quantised.quantise_rows(block, _quantised.tolerance(d), codes, scales, err)
        copy = (readonly(codes), readonly(scales), readonly(err))
        key = id(block)
        _COPIES[key] = (weakref.ref(block, partial(_forget, key)), copy)
        return copy


def _forget(key: int, _ref: object = None) -> None:
    """Drop the copy of a block that is gone (its weak reference's callback)."""
    with _copies_lock:
        got = _COPIES.get(key)
        if got is not None and got[0]() is None:
            del _COPIES[key]


class ExactIndex:
    """Exact search over a chunk store's vector blocks (a :class:`~fastrag.index.base.VectorIndex`).

    Parameters
    ----------
    blocks : sequence of numpy.ndarray
        float32 C-contiguous ``(n_i, dim)`` matrices (the store's segment
        views, memory-mapped and never copied); block ``i`` holds rows
        ``sum(n_0..n_{i-1}) ..``.
    dim : int
        Vector dimension (for an empty store).
    alive : numpy.ndarray, optional
        bool over all rows: False for deleted rows; ``None`` when none is.
    """

    kind = "exact"

    def __init__(
        self,
        blocks: list[np.ndarray],
        dim: int,
        alive: np.ndarray | None = None,
        *,
        quantised_min_rows: int | None = None,
    ) -> None:
        self._blocks = [_check_corpus(b) for b in blocks]
        # int8 copies of the large blocks: made on their first single-question search, kept
        # in _COPIES for as long as the block lives (the next snapshot's index shares them)
        least = QUANTISED_MIN_ROWS if quantised_min_rows is None else quantised_min_rows
        self._quantised_min = least if QUANTISED else None
        sizes = [b.shape[0] for b in self._blocks]
        self._bases = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
        self.dim = dim
        self.alive = alive
        if alive is not None and alive.shape != (int(self._bases[-1]),):
            raise ConfigError(
                f"alive has shape {alive.shape}, the blocks hold {self._bases[-1]} rows"
            )

    @property
    def n_rows(self) -> int:
        """Rows of all blocks, deleted ones included."""
        return int(self._bases[-1])

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of global ``rows`` (a gathered copy), float32 ``(len(rows), dim)``."""
        out = np.empty((rows.size, self.dim), dtype=np.float32)
        block = np.searchsorted(self._bases, rows, side="right") - 1
        for b in np.unique(block).tolist():
            pick = block == b
            out[pick] = self._blocks[b][rows[pick] - self._bases[b]]
        return out

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        mask: np.ndarray | None = None,
        exact: bool = True,
        threads: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``k`` (see :meth:`fastrag.index.base.VectorIndex.search`)."""
        kk = check_k(k)
        eligible = self.alive if mask is None else _check_mask(mask, self.n_rows)
        q = _check_queries(queries, self.dim)
        m = q.shape[0]
        parts_ids, parts_scores = [], []
        for b, block in enumerate(self._blocks):
            lo, hi = int(self._bases[b]), int(self._bases[b + 1])
            sub = None if eligible is None else eligible[lo:hi]
            if hi == lo or (sub is not None and not sub.any()):
                continue
            got = self._quantised_search(b, q, sub, min(kk, hi - lo), threads) if m == 1 else None
            ids, scores = (
                got if got is not None else _search(q, block, sub, min(kk, hi - lo), threads)
            )
            parts_ids.append(ids + lo)
            parts_scores.append(scores)
        if not parts_ids:
            return np.zeros((m, 0), dtype=np.int64), np.zeros((m, 0), dtype=np.float32)
        if len(parts_ids) == 1:
            return parts_ids[0], parts_scores[0]
        ids = np.ascontiguousarray(np.concatenate(parts_ids, axis=1))
        scores = np.ascontiguousarray(np.concatenate(parts_scores, axis=1))
        with _threads(threads, work=ids.size * 12):
            return _topk.merge_topk(ids, scores, min(kk, ids.shape[1]))

    def _block_codes(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Block ``b``'s int8 copy ``(codes, scales, err)``, made on first use; None if none."""
        block = self._blocks[b]
        least = self._quantised_min
        if least is None or block.shape[0] < max(least, 1):
            return None
        return _copy_of(block)

    def _quantised_search(
        self, b: int, q: np.ndarray, mask: np.ndarray | None, kk: int, threads: int | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """One question's exact top-``kk`` of block ``b`` through its int8 copy; None: scan instead.

        The same ids and scores as :func:`_search` (see :mod:`fastrag._native.quantised`
        for why); None when the block has no copy, no row is eligible or too many rows
        could still be in the top ``kk`` for the pre-scan to pay.
        """
        codes = self._block_codes(b)
        if codes is None:
            return None
        block = self._blocks[b]
        n = block.shape[0]
        msk, eligible = _kernel_mask(mask, n)
        kk = min(kk, eligible)
        if kk == 0:
            return None
        query = readonly(np.ascontiguousarray(q[0]))
        qnorm = float(np.sqrt(np.dot(query.astype(np.float64), query.astype(np.float64))))
        qnorm = qnorm * (1.0 + 1e-6) + 1e-30
        approx = np.empty(n, dtype=np.float32)
        with _threads(threads, work=n * block.shape[1]) as nthreads:
            nblocks = max(1, min(nthreads * _SCAN_BLOCKS_PER_THREAD, n // _SCAN_MIN_ROWS))
            lowers = np.empty((nblocks, kk), dtype=np.float64)
            _quantised.approx_scan(query, *codes, qnorm, msk, nblocks, approx, lowers)
        flat = lowers.ravel()  # every eligible row's bound competed in its block: kk are finite
        tau = float(np.partition(flat, flat.size - kk)[flat.size - kk])
        rows = np.empty(max(kk, n // _QUANTISED_MAX_SHARE), dtype=np.int64)
        count = _quantised.collect(approx, codes[2], qnorm, tau, rows)
        if count > rows.size:
            return None
        rows = rows[:count]
        gathered = readonly(np.ascontiguousarray(block[rows]))
        ids, scores = _search(q, gathered, None, min(kk, count), 1)
        return rows[ids], scores
