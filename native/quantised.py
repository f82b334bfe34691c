"""Exact top-k for one question through an int8 copy of the vectors: fewer bytes per question.

A single question's exact scan reads every float32 vector once, and at that
point the scan runs at the memory's speed (``scan_topk``): a faster loop cannot
help, fewer bytes can. These kernels read an int8 copy instead (a quarter of
the bytes), and give the float32 scan only the rows that can still be in the
top ``k``:

- :func:`quantise_rows` (once per block of vectors): per row ``x`` a scale
  ``s = max|x| / 127``, codes ``c = round(x / s)`` (int8) and an error bound
  ``e >= ||x - s c||_2 + tol(d) (||x||_2 + ||x - s c||_2)``, where ``tol(d)``
  covers the float32 rounding of a ``d``-term dot product twice (the approximate
  score's and the exact one's: ``2.02 (d + 2) 2^-24``, above Higham's
  ``gamma_d``);
- :func:`approx_scan`: the approximate score ``a_i = s_i (c_i . q)`` of every
  row, and per block of rows the ``k`` largest lower bounds ``a_i - e_i ||q||``;
- :func:`collect`: the rows whose upper bound ``a_i + e_i ||q||`` reaches
  ``tau``, the ``k``-th largest lower bound over all blocks.

Why this is exact: the float32 score ``f_i`` the scan would give lies in
``[a_i - e_i ||q||, a_i + e_i ||q||]``. At least ``k`` rows have
``f_i >= tau`` (those whose lower bound is among the ``k`` largest), so the
``k``-th best ``f`` is ``>= tau``, and every row with a score at least that
(ties included) has an upper bound ``>= tau``: it is collected. The driver
(:mod:`fastrag.index.exact`) re-scores the collected rows with
:func:`~native.topk.scan_topk` itself - the same float32 arithmetic, so the same
scores, bit for bit - and maps them back in increasing row order, so ties go
to the lower row id as before.

Bounds are computed in float64; masked rows (``mask[i]`` False) are never
collected and take no part in ``tau``.
"""

from __future__ import annotations

import numba
import numpy as np

from ._jit import kernel, parallel_kernel

__all__ = ["approx_scan", "collect", "quantise_rows", "tolerance", "warmup"]

_U = 2.0**-24  # float32 unit round-off


def tolerance(d: int) -> float:
    """Relative allowance for the float32 rounding of two ``d``-term dot products."""
    return 2.02 * (d + 2) * _U


@parallel_kernel
def quantise_rows(
    corpus: np.ndarray, tol: float, codes: np.ndarray, scales: np.ndarray, err: np.ndarray
) -> None:
    """Fill ``codes`` (int8 ``(n, d)``), ``scales`` and ``err`` (float32 ``(n,)``) of ``corpus``.

    ``tol`` is :func:`tolerance` of the dimension.
    """
    n, d = corpus.shape
    for i in numba.prange(n):
        x = corpus[i]
        top = 0.0
        norm2 = 0.0
        for j in range(d):
            v = np.float64(x[j])
            norm2 += v * v
            if abs(v) > top:
                top = abs(v)
        s = np.float32(top / 127.0)
        res2 = 0.0
        if s > 0:
            for j in range(d):
                c = np.int64(np.rint(np.float64(x[j]) / np.float64(s)))
                c = max(-127, min(127, c))
                codes[i, j] = c
                r = np.float64(x[j]) - np.float64(s) * np.float64(c)
                res2 += r * r
        else:
            for j in range(d):
                codes[i, j] = 0
            res2 = norm2
        scales[i] = s
        res = np.sqrt(res2)
        bound = res + tol * (np.sqrt(norm2) + res) + 1e-30
        # 2e-6 more covers this float64 arithmetic and the float32 rounding (2^-24 at most)
        err[i] = np.float32(bound * (1.0 + 2e-6))


@parallel_kernel
def approx_scan(
    query: np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
    err: np.ndarray,
    qnorm: float,
    mask: np.ndarray,
    nblocks: int,
    approx: np.ndarray,
    lowers: np.ndarray,
) -> None:
    """Approximate scores of every row into ``approx``; each block's ``k`` largest lower bounds.

    ``lowers`` is float64 ``(nblocks, k)``, ``-inf`` where a block has fewer
    than ``k`` eligible rows; masked rows get ``approx = -inf``. ``mask`` is
    bool ``(n,)`` or ``(0,)`` for "no mask".
    """
    n, d = codes.shape
    k = lowers.shape[1]
    has_mask = mask.shape[0] > 0
    rows = (n + nblocks - 1) // nblocks
    for b in numba.prange(nblocks):
        lo = min(n, b * rows)
        hi = min(n, lo + rows)
        low = lowers[b]
        for t in range(k):
            low[t] = -np.inf
        worst = 0  # slot of the smallest kept lower bound
        for i in range(lo, hi):
            if has_mask and not mask[i]:
                approx[i] = -np.inf
                continue
            c = codes[i]
            acc = np.float32(0.0)
            for j in range(d):
                acc += np.float32(c[j]) * query[j]
            a = np.float32(scales[i] * acc)
            approx[i] = a
            lb = np.float64(a) - np.float64(err[i]) * qnorm
            if lb > low[worst]:
                low[worst] = lb
                for t in range(k):
                    if low[t] < low[worst]:
                        worst = t


@kernel
def collect(approx: np.ndarray, err: np.ndarray, qnorm: float, tau: float, out: np.ndarray) -> int:
    """Write into ``out`` the rows whose upper bound reaches ``tau`` (increasing); return how many.

    Stops counting at ``out.size`` (the driver's cap: it then scans in float32).
    """
    cap = out.shape[0]
    count = 0
    for i in range(approx.shape[0]):
        # a masked row's -inf never reaches tau (finite: a lower bound of an eligible row)
        if np.float64(approx[i]) + np.float64(err[i]) * qnorm >= tau:
            if count == cap:
                return count + 1
            out[count] = i
            count += 1
    return count


def warmup() -> None:
    """Compile the three kernels on their one signature each (read-only inputs)."""
    d, n, k = 4, 8, 2
    corpus = np.ones((n, d), dtype=np.float32)
    corpus.flags.writeable = False
    codes = np.empty((n, d), dtype=np.int8)
    scales = np.empty(n, dtype=np.float32)
    err = np.empty(n, dtype=np.float32)
    quantise_rows(corpus, tolerance(d), codes, scales, err)
    for a in (codes, scales, err):
        a.flags.writeable = False
    q = np.ones(d, dtype=np.float32)
    q.flags.writeable = False
    approx = np.empty(n, dtype=np.float32)
    lowers = np.empty((2, k), dtype=np.float64)
    for mask in (np.zeros(0, dtype=np.bool_), np.ones(n, dtype=np.bool_)):
        approx_scan(q, codes, scales, err, 2.0, mask, 2, approx, lowers)
    collect(approx, err, 2.0, float(lowers.min()), np.empty(n, dtype=np.int64))
