"""Reference twins of ``fastrag._native.topk`` and ``fastrag.index.exact``.

Obvious rather than fast: the full score matrix, then a stable sort by
``(-score, id)`` with ``np.lexsort``.
"""

from __future__ import annotations

import numpy as np


def scores(queries: np.ndarray, corpus: np.ndarray) -> np.ndarray:
    """Full ``(m, n)`` dot-product matrix, accumulated in float64."""
    return np.asarray(queries, dtype=np.float64) @ np.asarray(corpus, dtype=np.float64).T


def exact_topk(
    queries: np.ndarray,
    corpus: np.ndarray,
    k: int,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Best ``min(k, eligible)`` rows per query: score desc, then id asc.

    Returns int64 ids and float64 scores (the exact values the float32
    kernels approximate).
    """
    s = scores(queries, corpus)
    m, n = s.shape
    eligible = np.arange(n) if mask is None else np.flatnonzero(mask)
    kk = min(k, eligible.size)
    ids = np.empty((m, kk), dtype=np.int64)
    out = np.empty((m, kk), dtype=np.float64)
    for q in range(m):
        row = s[q, eligible]
        order = np.lexsort((eligible, -row))[:kk]  # last key is primary
        ids[q] = eligible[order]
        out[q] = row[order]
    return ids, out


def merge_topk(ids: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Best ``min(k, a)`` candidates per row; negative ids (padding) last."""
    ids = np.asarray(ids, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float32)
    m, a = ids.shape
    kk = min(k, a)
    out_ids = np.full((m, kk), -1, dtype=np.int64)
    out_scores = np.full((m, kk), -np.inf, dtype=np.float32)
    for q in range(m):
        real = ids[q] >= 0
        cand_ids = ids[q, real]
        cand_scores = scores[q, real]
        order = np.lexsort((cand_ids, -cand_scores.astype(np.float64)))[:kk]
        out_ids[q, : order.size] = cand_ids[order]
        out_scores[q, : order.size] = cand_scores[order]
    return out_ids, out_scores


def quantise_rows(corpus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Twin of ``quantised.quantise_rows``: per-row scale ``max|x| / 127``, int8 codes, residual norm.

    The third array is the exact residual ``||x - s c||_2`` (float64): the kernel's error
    bound must be at least this.
    """
    x = np.asarray(corpus, dtype=np.float64)
    top = np.abs(x).max(axis=1) if x.shape[1] else np.zeros(x.shape[0])
    scales = (top / 127.0).astype(np.float32)
    s = scales.astype(np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        codes = np.where(s > 0, np.clip(np.rint(x / s), -127, 127), 0).astype(np.int8)
    residual = np.linalg.norm(x - s * codes.astype(np.float64), axis=1)
    return codes, scales, residual
