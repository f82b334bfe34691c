"""Reference twins of ``fastrag._native.fusion`` (reciprocal rank and convex score fusion)."""

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


def _finish(total: dict[int, float], k: int, groups, by_group: bool) -> list[tuple[int, float]]:
    ranked = sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))
    if not by_group:
        return ranked[:k]
    out, seen = [], set()
    for r, s in ranked:
        if groups[r] in seen:
            continue
        seen.add(groups[r])
        out.append((r, s))
        if len(out) == k:
            break
    return out


def _normalised(scores: list[float]) -> list[float]:
    lo, hi = min(scores), max(scores)
    return [(s - lo) / (hi - lo) if hi > lo else 1.0 for s in scores]


def convex(lists, weights, group_lists, group_weights, groups, k, by_group=False):
    """One question: ``lists`` = [(rows, scores)], ``group_lists`` = [(groups, scores)]."""
    total: dict[int, float] = {}
    for (rows, scores), w in zip(lists, weights):
        valid = [(r, s) for r, s in zip(rows, scores) if r >= 0]
        if not valid:
            continue
        for (r, _), n in zip(valid, _normalised([s for _, s in valid])):
            total[r] = total.get(r, 0.0) + w * n
    for (glist, gscores), w in zip(group_lists, group_weights):
        valid = [(g, s) for g, s in zip(glist, gscores) if g >= 0]
        if not valid:
            continue
        share = {g: w * n for (g, _), n in zip(valid, _normalised([s for _, s in valid]))}
        for r in list(total):
            if groups[r] in share:
                total[r] += share[groups[r]]
    return _finish(total, k, groups, by_group)


def rrf(lists, weights, group_lists, group_weights, groups, rrf_k, k, by_group=False):
    """One question: weighted RRF of row lists and group lists (first rank of a group counts)."""
    total: dict[int, float] = {}
    for rows, w in zip(lists, weights):
        for j, r in enumerate(r for r in rows if r >= 0):
            total[r] = total.get(r, 0.0) + w / (rrf_k + j + 1)
    for glist, w in zip(group_lists, group_weights):
        first: dict[int, int] = {}
        for j, g in enumerate(g for g in glist if g >= 0):
            first.setdefault(g, j)
        for r in total:
            if groups[r] in first:
                total[r] += w / (rrf_k + first[groups[r]] + 1)
    return _finish(total, k, groups, by_group)
