"""BM25 with statistics over the admitted rows only (``acl_statistics="per_principal"``).

BM25's statistics -- the number of rows ``N``, each term's document
frequency ``df`` and the mean length ``avgdl`` -- are normally taken over
every row, so a caller's scores (and the relevance and confidence derived
from them) move when a row the caller may not read gains or loses a query
term: a side channel that tells, say, whether a hidden document mentions a
name. :func:`search_masked` scores with ``N``, ``df`` and ``avgdl`` counted
over the eligible rows alone, so the result depends only on what the caller
may see: exactly the scores a BM25 index built from those rows would give.

It reads the index's postings for the query's terms only (no full pass),
in numpy; the caller pays one scan of the mask and of the row lengths
per call.
"""

from __future__ import annotations

import numpy as np

from ..text.tokenize import Tokens
from .keyword import BM25Index

__all__ = ["search_masked"]


def search_masked(
    index: BM25Index, tokens: Tokens, k: int, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-``k`` rows per query by BM25 with statistics over ``mask``'s rows.

    Parameters
    ----------
    index : BM25Index
        The index (its postings, lengths and parameters are read, not changed).
    tokens : Tokens
        Queries tokenised by the index's tokenizer (a repeated token counts twice).
    k : int
        Rows per query.
    mask : numpy.ndarray
        bool ``(n,)``: the rows the caller may see.

    Returns
    -------
    tuple of numpy.ndarray
        ``rows`` int64 ``(m, k)`` (``-1`` padding), ``scores`` float32
        (``-inf`` padding), and each query's keyword weight (the sum of its
        tokens' idf over the admitted rows) for relevance.
    """
    state = index._state
    vocab, term_offsets, post_rows, tfs, doc_len = (
        state.vocab, state.term_offsets, state.rows, state.tfs, state.doc_len,
    )  # fmt: skip
    m = tokens.offsets.size - 1
    out_rows = np.full((m, k), -1, dtype=np.int64)
    out_scores = np.full((m, k), -np.inf, dtype=np.float32)
    weights = np.zeros(m, dtype=np.float32)
    n = int(np.count_nonzero(mask))
    if n == 0 or vocab.size == 0:
        return out_rows, out_scores, weights
    avgdl = float(doc_len[mask].sum(dtype=np.int64)) / n or 1.0
    k1, b = index.k1, index.b
    for q in range(m):
        hashes = tokens.hashes[tokens.offsets[q] : tokens.offsets[q + 1]]
        if hashes.size == 0:
            continue
        pos = np.minimum(np.searchsorted(vocab, hashes), vocab.size - 1)
        known = vocab[pos] == hashes
        rows_parts, score_parts = [], []
        weight = 0.0
        for t in pos[known].tolist():
            lo, hi = int(term_offsets[t]), int(term_offsets[t + 1])
            rows = post_rows[lo:hi]
            keep = mask[rows]
            df = int(np.count_nonzero(keep))
            if df == 0:
                continue
            idf = np.log1p((n - df + 0.5) / (df + 0.5))
            weight += float(np.float32(idf))
            rows = rows[keep].astype(np.int64)
            tf = tfs[lo:hi][keep].astype(np.float32)
            norm = np.float32(k1) * (
                np.float32(1.0 - b) + np.float32(b) * doc_len[rows] / np.float32(avgdl)
            )
            rows_parts.append(rows)
            score_parts.append(np.float32(idf) * (tf / (tf + norm)))
        weights[q] = weight
        if not rows_parts:
            continue
        rows = np.concatenate(rows_parts)
        contrib = np.concatenate(score_parts).astype(np.float32)
        if len(rows_parts) == 1:  # one term: each row once
            uniq, total = rows, contrib
        else:  # sum per row in the terms' order (float32, as the kernel)
            uniq, inverse = np.unique(rows, return_inverse=True)
            total = np.zeros(uniq.size, dtype=np.float32)
            np.add.at(total, inverse, contrib)
        if uniq.size > 4 * k:  # only the k best (and rows tied with the k-th) need sorting
            kth = np.partition(-total, k - 1)[k - 1]
            keep = -total <= kth
            uniq, total = uniq[keep], total[keep]
        order = np.lexsort((uniq, -total))[:k]  # score descending, then the lower row
        out_rows[q, : order.size] = uniq[order]
        out_scores[q, : order.size] = total[order]
    return out_rows, out_scores, weights
