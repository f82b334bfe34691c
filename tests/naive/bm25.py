"""Reference twin of ``fastrag._native.bm25`` and ``fastrag.index.keyword``.

Obvious rather than fast: Python dictionaries of term counts, Lucene's BM25
(as bm25s ``method="lucene"``) in float64 for every (query, row) pair, and a
full sort by ``(-score, row)``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np


def scores(
    docs: Sequence[Sequence[Hashable]],
    queries: Sequence[Sequence[Hashable]],
    k1: float = 0.9,
    b: float = 0.4,
) -> np.ndarray:
    """``(m, n)`` BM25 scores of every query against every document (token lists)."""
    n = len(docs)
    counts = [Counter(d) for d in docs]
    lengths = [len(d) for d in docs]
    avgdl = sum(lengths) / n if n else 0.0
    df: Counter = Counter()
    for c in counts:
        df.update(c.keys())
    out = np.zeros((len(queries), n), dtype=np.float64)
    for qi, q in enumerate(queries):
        for t in q:  # a repeated query token counts twice
            if t not in df:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            for d in range(n):
                tf = counts[d].get(t, 0)
                if tf:
                    norm = k1 * (1 - b + b * lengths[d] / avgdl)
                    out[qi, d] += idf * tf / (tf + norm)
    return out


def topk(
    score_matrix: np.ndarray, k: int, mask: np.ndarray | None = None
) -> tuple[list[list[int]], list[list[float]]]:
    """Best ``<= k`` rows per query with a positive score, by ``(-score, row)``."""
    rows_out, scores_out = [], []
    for row in score_matrix:
        cand = [
            (-s, r) for r, s in enumerate(row.tolist()) if s > 0 and (mask is None or mask[r])
        ]
        cand.sort()
        rows_out.append([r for _, r in cand[:k]])
        scores_out.append([-s for s, _ in cand[:k]])
    return rows_out, scores_out
