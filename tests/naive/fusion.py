"""Reference twins of ``fastrag._native.fusion`` (reciprocal rank and convex score fusion)."""

from __future__ import annotations


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
