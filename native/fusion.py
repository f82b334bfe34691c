"""Fusion of ranked candidate lists (reciprocal rank or convex score), with optional grouping.

Each question has ``L`` ranked lists of candidate rows (``-1`` padding). A
candidate's fused score is ``sum over lists of weight / (rrf_k + rank)``
(ranks from 1); a list may instead rank *groups* (documents), in which case
every candidate of that group receives the group's contribution. The result
is the best ``k`` candidates by fused score (ties: lower row), or with
grouping the best candidate of each of the best ``k`` groups.

:func:`convex_fuse` sums ``weight * (score - min) / (max - min)`` instead,
each list's scores min-max normalised over that list's candidates for the
question (a convex combination when the weights sum to 1).
"""

from __future__ import annotations

import numpy as np

from . import heap
from ._jit import kernel, readonly

__all__ = ["convex_fuse", "lookup", "rrf_fuse", "warmup"]


@kernel
def _table(n):
    """An empty open-addressing table for ``n`` keys: (keys, values, mask)."""
    cap = 8
    while cap < 2 * n:
        cap *= 2
    return np.full(cap, -1, dtype=np.int64), np.empty(cap, dtype=np.int64), cap - 1


@kernel(inline="always")
def _slot(keys, key, mask):  # pragma: no cover - inlined
    """The slot of ``key`` (>= 0) in ``keys``: where it is, or the empty slot to put it in."""
    s = (key * 2654435761) & mask
    while keys[s] != -1 and keys[s] != key:
        s = (s + 1) & mask
    return s


@kernel
def _fuse_core(ids, contrib, n, group_lists, group_vals, groups, k, by_group, out_rows, out_scores):
    """Sum the contributions per row, add group shares, keep the best ``k`` (ties: lower row).

    ``ids[:n]`` / ``contrib[:n]`` are (row, contribution) pairs of the row
    lists; ``group_vals[g, j]`` is what a row of the group at rank ``j`` of
    group list ``g`` receives.
    """
    for t in range(out_rows.size):
        out_rows[t] = -1
        out_scores[t] = -np.inf
    if n == 0:
        return
    # Distinct rows and their summed contributions (a hash table: no sort).
    keys, where, mask = _table(n)
    uniq = np.empty(n, dtype=np.int64)
    score = np.zeros(n, dtype=np.float64)
    nu = np.int64(0)  # typed from the start: no Literal[int](0) signature of the heap
    for t in range(n):
        r = ids[t]
        s = _slot(keys, r, mask)
        if keys[s] == -1:
            keys[s] = r
            where[s] = nu
            uniq[nu] = r
            nu += 1
        score[where[s]] += contrib[t]
    # Group lists: every candidate of a ranked group gets that group's share (best rank).
    n_glists, cg = group_lists.shape
    for gi in range(n_glists):
        gkeys, grank, gmask = _table(cg)
        for j in range(cg):
            g = group_lists[gi, j]
            if g < 0:
                break
            s = _slot(gkeys, g, gmask)
            if gkeys[s] == -1:
                gkeys[s] = g
                grank[s] = j
        for t in range(nu):
            s = _slot(gkeys, groups[uniq[t]], gmask)
            if gkeys[s] != -1:
                score[t] += group_vals[gi, grank[s]]
    # best first (score descending, then row ascending), in place: a heap sort
    # rather than np.argsort, the same order at a fraction of the compile time
    heap.heapify(score, uniq, nu)
    heap.sort(score, uniq, nu)
    m = 0
    if by_group:
        seen_groups = np.empty(k, dtype=np.int64)
        for t in range(nu):
            r = uniq[t]
            g = groups[r]
            dup = False
            for s in range(m):
                if seen_groups[s] == g:
                    dup = True
                    break
            if dup:
                continue
            seen_groups[m] = g
            out_rows[m] = r
            out_scores[m] = score[t]
            m += 1
            if m == k:
                break
    else:
        for t in range(min(k, nu)):
            out_rows[t] = uniq[t]
            out_scores[t] = score[t]


@kernel
def _fuse_one(
    rows, weights, group_lists, group_weights, groups, rrf_k, k, by_group, out_rows, out_scores
):
    """Reciprocal rank fusion of the lists of one question (length ``k`` outputs)."""
    n_lists, c = rows.shape
    total = n_lists * c
    ids = np.empty(total, dtype=np.int64)
    contrib = np.empty(total, dtype=np.float64)
    n = np.int64(0)  # typed from the start: one signature of _fuse_core
    for li in range(n_lists):
        w = weights[li]
        for j in range(c):
            r = rows[li, j]
            if r < 0:
                break
            ids[n] = r
            contrib[n] = w / (rrf_k + j + 1.0)
            n += 1
    n_glists, cg = group_lists.shape
    group_vals = np.empty((n_glists, cg), dtype=np.float64)
    for gi in range(n_glists):
        for j in range(cg):
            group_vals[gi, j] = group_weights[gi] / (rrf_k + j + 1.0)
    _fuse_core(ids, contrib, n, group_lists, group_vals, groups, k, by_group, out_rows, out_scores)


@kernel(inline="always")
def _minmax(values, count):  # pragma: no cover - inlined
    """``(low, span)`` of ``values[:count]``; span 0 when they are all equal."""
    lo = np.inf
    hi = -np.inf
    for j in range(count):
        v = values[j]
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    return lo, hi - lo


@kernel
def _convex_one(
    rows,
    scores,
    weights,
    group_lists,
    group_scores,
    group_weights,
    groups,
    k,
    by_group,
    out_rows,
    out_scores,
):
    """Convex fusion of min-max-normalised scores of one question."""
    n_lists, c = rows.shape
    total = n_lists * c
    ids = np.empty(total, dtype=np.int64)
    contrib = np.empty(total, dtype=np.float64)
    n = np.int64(0)  # typed from the start: one signature of _fuse_core
    for li in range(n_lists):
        count = 0
        for j in range(c):
            if rows[li, j] < 0:
                break
            count += 1
        if count == 0:
            continue
        lo, span = _minmax(scores[li], count)
        w = weights[li]
        for j in range(count):
            ids[n] = rows[li, j]
            contrib[n] = w * ((scores[li, j] - lo) / span if span > 0 else 1.0)
            n += 1
    n_glists, cg = group_lists.shape
    group_vals = np.zeros((n_glists, cg), dtype=np.float64)
    for gi in range(n_glists):
        count = 0
        for j in range(cg):
            if group_lists[gi, j] < 0:
                break
            count += 1
        if count == 0:
            continue
        lo, span = _minmax(group_scores[gi], count)
        for j in range(count):
            group_vals[gi, j] = group_weights[gi] * (
                (group_scores[gi, j] - lo) / span if span > 0 else 1.0
            )
    _fuse_core(ids, contrib, n, group_lists, group_vals, groups, k, by_group, out_rows, out_scores)


@kernel
def rrf_fuse(rows, weights, group_lists, group_weights, groups, rrf_k, k, by_group):
    """Fuse ranked lists per question (serially: a few hundred candidates each, microseconds).

    Parameters
    ----------
    rows : int64[:, :, ::1]
        ``(L, m, c)``: list ``l``'s ranked rows for question ``q``, ``-1`` padding.
    weights : float64[::1]
        ``(L,)`` list weights.
    group_lists : int64[:, :, ::1]
        ``(G, m, cg)``: ranked group numbers per question (``G`` may be 0).
    group_weights : float64[::1]
        ``(G,)`` weights of the group lists.
    groups : int64[::1]
        Group number of every row (needed with group lists or ``by_group``;
        may be empty otherwise).
    rrf_k : float
        The fusion constant.
    k : int
        Results per question.
    by_group : bool
        Keep only the best row of each group.

    Returns
    -------
    out_rows : int64[m, k]
        Fused rows, best first, ``-1`` padding.
    out_scores : float32[m, k]
        Fused scores, ``-inf`` padding.
    """
    m = rows.shape[1]
    out_rows = np.empty((m, k), dtype=np.int64)
    out_scores = np.empty((m, k), dtype=np.float64)
    for q in range(m):
        _fuse_one(
            rows[:, q, :],
            weights,
            group_lists[:, q, :],
            group_weights,
            groups,
            rrf_k,
            k,
            by_group,
            out_rows[q],
            out_scores[q],
        )
    return out_rows, out_scores.astype(np.float32)


@kernel
def convex_fuse(
    rows, scores, weights, group_lists, group_scores, group_weights, groups, k, by_group
):
    """Convex score fusion per question (serially: a few hundred candidates each).

    Each list's scores are min-max normalised over its own candidates for
    that question (all equal: 1), times the list's weight, and summed per
    row; a row a list did not return gets nothing from it. A group list's
    normalised score goes to every candidate of the group. The rest (ties,
    grouping) is as :func:`rrf_fuse`.

    Parameters
    ----------
    rows : int64[:, :, ::1]
        ``(L, m, c)`` ranked rows, ``-1`` padding.
    scores : float32[:, :, ::1]
        ``(L, m, c)`` their scores (any scale; larger is better).
    weights : float64[::1]
        ``(L,)`` list weights.
    group_lists : int64[:, :, ::1]
        ``(G, m, cg)`` ranked group numbers per question (``G`` may be 0).
    group_scores : float32[:, :, ::1]
        ``(G, m, cg)`` the groups' scores.
    group_weights : float64[::1]
        ``(G,)`` weights of the group lists.
    groups : int64[::1]
        Group number of every row (may be empty without group lists and grouping).
    k : int
        Results per question.
    by_group : bool
        Keep only the best row of each group.

    Returns
    -------
    out_rows : int64[m, k]
        Fused rows, best first, ``-1`` padding.
    out_scores : float32[m, k]
        Fused scores, ``-inf`` padding.
    """
    m = rows.shape[1]
    out_rows = np.empty((m, k), dtype=np.int64)
    out_scores = np.empty((m, k), dtype=np.float64)
    for q in range(m):
        _convex_one(
            rows[:, q, :], scores[:, q, :], weights, group_lists[:, q, :],
            group_scores[:, q, :], group_weights, groups, k, by_group, out_rows[q],
            out_scores[q],
        )  # fmt: skip
    return out_rows, out_scores.astype(np.float32)


@kernel
def lookup(rows, keys, values, default):
    """Per query, the value ``keys``/``values`` give each of ``rows`` (``default`` if absent).

    Parameters
    ----------
    rows : int64[m, k], C-contiguous
        Rows to look up, ``-1`` for padding (which gets ``default``).
    keys : int64[m, c], C-contiguous
        A leg's rows per query (``-1`` padding never matches).
    values : float32[m, c], C-contiguous
        The leg's score of each key.
    default : float
        The value of a row the leg did not return.

    Returns
    -------
    float32[m, k]
        The first matching key's value, or ``default``.
    """
    m, k = rows.shape
    c = keys.shape[1]
    out = np.empty((m, k), dtype=np.float32)
    for q in range(m):
        for j in range(k):
            r = rows[q, j]
            v = default
            if r >= 0:
                for i in range(c):
                    if keys[q, i] == r:
                        v = values[q, i]
                        break
            out[q, j] = v
    return out


def warmup(convex: bool = True, rrf: bool = True) -> None:
    """Compile the one signature the engine uses of each fusion and of :func:`lookup`.

    ``convex=False``: reciprocal-rank fusion only; ``rrf=False``: convex only
    (the built-in embedders' fusion: the demo's helper process).
    """
    rows = np.array([[[0, 1, -1]], [[1, 2, 0]]], dtype=np.int64)
    groups = readonly(np.array([0, 0, 1], dtype=np.int64))  # the engine passes it read-only
    glists = np.array([[[1, 0, -1]]], dtype=np.int64)
    weights = np.ones(2)
    lookup(readonly(rows[0]), readonly(rows[1]), readonly(np.ones((1, 3), np.float32)), 0.0)
    for gl, gw in ((glists, np.ones(1)), (np.zeros((0, 1, 1), np.int64), np.zeros(0))):
        for by_group in (False, True):
            if rrf:
                rrf_fuse(rows, weights, gl, gw, groups, 60.0, 2, by_group)
            if not convex:
                continue
            convex_fuse(
                rows, np.ones(rows.shape, np.float32), weights, gl, np.ones(gl.shape, np.float32),
                gw, groups, 2, by_group,
            )  # fmt: skip
