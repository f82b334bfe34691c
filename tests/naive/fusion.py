"""Pure-Python reference of the fusion kernel (:mod:`fastrag._native.fusion`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def fuse(
    legs: Sequence[tuple[np.ndarray, float]], k: int, rrf_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted reciprocal rank fusion of ranked row lists, per question.

    Parameters
    ----------
    legs : sequence of (rows, weight)
        ``rows`` int64 ``(m, c)``, best first, ``-1`` padding.
    k : int
        Results per question.
    rrf_k : int
        The fusion constant.

    Returns
    -------
    tuple of numpy.ndarray
        rows int64 ``(m, k')`` and fused scores float32, best first (ties by
        the lower row), ``-1`` / ``-inf`` padding when fewer than ``k'``
        distinct rows were found; ``k'`` is ``min(k, widest candidate list)``.
    """
    m = legs[0][0].shape[0]
    width = min(k, sum(r.shape[1] for r, _ in legs))
    out_rows = np.full((m, width), -1, dtype=np.int64)
    out_scores = np.full((m, width), -np.inf, dtype=np.float32)
    if width == 0:
        return out_rows, out_scores
    for q in range(m):
        ids_parts, score_parts = [], []
        for rows, weight in legs:
            r = rows[q]
            valid = r >= 0
            r = r[valid]
            if r.size == 0 or weight == 0:
                continue
            ids_parts.append(r)
            score_parts.append(weight / (rrf_k + np.flatnonzero(valid) + 1.0))
        if not ids_parts:
            continue
        ids = np.concatenate(ids_parts)
        contrib = np.concatenate(score_parts)
        uniq, inverse = np.unique(ids, return_inverse=True)
        total = np.zeros(uniq.size, dtype=np.float64)
        np.add.at(total, inverse, contrib)
        order = np.lexsort((uniq, -total))[:width]
        out_rows[q, : order.size] = uniq[order]
        out_scores[q, : order.size] = total[order]
    return out_rows, out_scores
