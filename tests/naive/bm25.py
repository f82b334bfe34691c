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
        cand = [(-s, r) for r, s in enumerate(row.tolist()) if s > 0 and (mask is None or mask[r])]
        cand.sort()
        rows_out.append([r for _, r in cand[:k]])
        scores_out.append([-s for s, _ in cand[:k]])
    return rows_out, scores_out


def block_maxima(
    term_offsets: Sequence[int], impacts: Sequence[float], block_size: int
) -> tuple[list[int], list[float]]:
    """Per term, the largest impact of each run of ``block_size`` postings (offsets, maxima)."""
    offsets, maxima = [0], []
    for t in range(len(term_offsets) - 1):
        lo, hi = int(term_offsets[t]), int(term_offsets[t + 1])
        for start in range(lo, hi, block_size):
            maxima.append(max(float(x) for x in impacts[start : min(start + block_size, hi)]))
        offsets.append(len(maxima))
    return offsets, maxima


def cell_maxima(
    term_offsets: Sequence[int], rows: Sequence[int], weights: Sequence[int], n: int, shift: int,
    min_df: int,
) -> tuple[list[int], list[int]]:  # fmt: skip
    """Per term of at least ``min_df`` postings, its largest weight in each run of ``2**shift`` rows.

    Returns ``(cell_start, cell_max)``: term ``t``'s cells are
    ``cell_max[cell_start[t]:cell_start[t] + n_cells]`` (0 where it has no
    row), ``cell_start[t] = -1`` for a term without cells.
    """
    n_cells = (n + (1 << shift) - 1) >> shift
    start, maxima = [], []
    for t in range(len(term_offsets) - 1):
        lo, hi = int(term_offsets[t]), int(term_offsets[t + 1])
        if hi - lo < min_df:
            start.append(-1)
            continue
        start.append(len(maxima))
        cells = [0] * n_cells
        for p in range(lo, hi):
            c = int(rows[p]) >> shift
            cells[c] = max(cells[c], int(weights[p]))
        maxima.extend(cells)
    return start, maxima


def cell_positions(
    term_offsets: Sequence[int], rows: Sequence[int], n: int, shift: int, min_df: int
) -> list[int]:
    """Per term of at least ``min_df`` postings, where each cell of ``2**shift`` rows starts.

    For cell ``c`` in ``0..n_cells`` (one past the last too): the count of the
    term's postings whose row is below ``c << shift`` (rows increasing), the
    terms one after the other, ``n_cells + 1`` entries each.
    """
    n_cells = (n + (1 << shift) - 1) >> shift
    out: list[int] = []
    for t in range(len(term_offsets) - 1):
        lo, hi = int(term_offsets[t]), int(term_offsets[t + 1])
        if hi - lo < min_df:
            continue
        term_rows = [int(r) for r in rows[lo:hi]]
        out.extend(sum(1 for r in term_rows if r < c << shift) for c in range(n_cells + 1))
    return out


def query_weights(
    docs: Sequence[Sequence[Hashable]], queries: Sequence[Sequence[Hashable]]
) -> list[float]:
    """The sum of the idf of every query's known tokens (a repeated token counts again)."""
    n = len(docs)
    df: Counter = Counter()
    for d in docs:
        df.update(set(d))
    return [
        sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in q if t in df) for q in queries
    ]


def postings(
    docs: Sequence[Sequence[int]], row0: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Term-major postings of token-hash lists: ``vocab, term_offsets, rows, tfs``.

    The layout ``fastrag._native.bm25.build_postings`` returns, built with a
    dictionary per text and a sort of the distinct terms.
    """
    by_term: dict[int, list[tuple[int, int]]] = {}
    for i, doc in enumerate(docs):
        for term, tf in Counter(int(t) for t in doc).items():
            by_term.setdefault(term, []).append((row0 + i, tf))
    vocab = sorted(by_term)
    offsets = [0]
    rows: list[int] = []
    tfs: list[int] = []
    for term in vocab:
        for r, tf in by_term[term]:
            rows.append(r)
            tfs.append(tf)
        offsets.append(len(rows))
    return (
        np.array(vocab, dtype=np.uint64),
        np.array(offsets, dtype=np.int64),
        np.array(rows, dtype=np.int32),
        np.array(tfs, dtype=np.int32),
    )


def serial_postings(
    hashes: np.ndarray, tok_offsets: np.ndarray, row0: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fresh-index build as it was before ``build_postings`` (kept as the reference).

    Per-text sorted pairs (``doc_terms``), one serial hash table over every
    pair for the vocabulary (``distinct_hashes``) and a serial counting sort
    by term (``transpose``): what ``BM25Index`` ran until issue 21
    (:mod:`.bm25_serial`).
    """
    from fastrag._native.tokenize import distinct_hashes

    from . import bm25_serial as kernels

    pair_hash, pair_tf, pair_offsets = kernels.doc_terms(hashes, tok_offsets)
    vocab, pair_term = distinct_hashes(pair_hash)
    term_offsets, rows, tfs = kernels.transpose(pair_term, pair_tf, pair_offsets, vocab.size)
    return vocab, term_offsets, rows + np.int32(row0), tfs
