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
