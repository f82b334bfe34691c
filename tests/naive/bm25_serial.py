"""The serial BM25 build kernels ``BM25Index`` ran until issue 21: the build's reference.

``doc_terms`` (each text's sorted distinct terms), ``transpose`` (a serial
counting sort of the doc-major pairs by term) and ``merge_postings`` (new
rows' pairs appended to existing postings). ``fastrag._native.bm25`` now
builds with ``build_postings`` and grows with ``merge_indexes``, which must
give these kernels' arrays bit for bit (``tests/test_bm25_build.py``);
``benchmarks/compare_bm25_build.py`` times the parallel build against them.
Numba kernels rather than pure Python, so that the benchmark compares the
build with what it replaced at a million chunks.
"""

from __future__ import annotations

import numpy as np
from fastrag._native import frozen
from fastrag._native._jit import kernel, parallel_kernel
from numba import prange

__all__ = ["doc_terms", "merge_postings", "transpose"]


@kernel
def _doc_terms_one(hashes, tok_offsets, i, out_hash, out_tf):
    """Sorted distinct hashes of text ``i`` and their counts, written from ``tok_offsets[i]``."""
    lo = tok_offsets[i]
    hi = tok_offsets[i + 1]
    if hi <= lo:
        return 0
    h = out_hash[lo:hi]  # sorted in place in the text's own slot: no allocation
    for j in range(hi - lo):
        h[j] = hashes[lo + j]
    h.sort()
    u = 0
    out_tf[lo] = 1
    for j in range(1, h.size):
        if h[j] == h[u]:
            out_tf[lo + u] += 1
        else:
            u += 1
            h[u] = h[j]
            out_tf[lo + u] = 1
    return u + 1


@parallel_kernel
def _doc_terms_pass(hashes, tok_offsets, out_hash, out_tf, counts):
    """Per text (parallel): distinct sorted hashes and counts, in the text's slot."""
    for i in prange(tok_offsets.size - 1):
        counts[i] = _doc_terms_one(hashes, tok_offsets, i, out_hash, out_tf)


@parallel_kernel
def _gather_pass(tok_offsets, tmp_hash, tmp_tf, pair_offsets, pair_hash, pair_tf):
    """Compact the per-text slots into dense pairs (parallel over texts)."""
    for i in prange(tok_offsets.size - 1):
        src = tok_offsets[i]
        dst = pair_offsets[i]
        for j in range(pair_offsets[i + 1] - dst):
            pair_hash[dst + j] = tmp_hash[src + j]
            pair_tf[dst + j] = tmp_tf[src + j]


def doc_terms(
    hashes: np.ndarray, tok_offsets: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the distinct terms of every text with their frequencies (doc-major CSR).

    Parameters
    ----------
    hashes : uint64[::1]
        Token hashes of all texts (read-only is fine).
    tok_offsets : int64[::1]
        ``n + 1`` offsets into ``hashes``, starting at 0.

    Returns
    -------
    pair_hash : uint64[nnz]
        For every text, its distinct token hashes in increasing order.
    pair_tf : int32[nnz]
        How often each occurs in the text.
    pair_offsets : int64[n + 1]
        Text ``i`` owns pairs ``pair_offsets[i]:pair_offsets[i + 1]``.
    """
    hashes, tok_offsets = frozen(hashes, tok_offsets)
    n = tok_offsets.size - 1
    total = int(tok_offsets[-1])
    tmp_hash = np.empty(total, dtype=np.uint64)
    tmp_tf = np.empty(total, dtype=np.int32)
    counts = np.empty(n, dtype=np.int64)
    _doc_terms_pass(hashes, tok_offsets, tmp_hash, tmp_tf, counts)
    pair_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=pair_offsets[1:])
    nnz = int(pair_offsets[-1])
    if nnz == total:
        return tmp_hash, tmp_tf, pair_offsets
    pair_hash = np.empty(nnz, dtype=np.uint64)
    pair_tf = np.empty(nnz, dtype=np.int32)
    _gather_pass(tok_offsets, tmp_hash, tmp_tf, pair_offsets, pair_hash, pair_tf)
    return pair_hash, pair_tf, pair_offsets


@kernel
def _scatter(pair_term, pair_tf, pair_offsets, row0, fill, rows, tfs):
    """Append the pairs of every text, in text order, to its terms' postings.

    ``fill[t]`` is the next free slot of term ``t`` (updated in place).
    """
    for i in range(pair_offsets.size - 1):
        r = row0 + i
        for j in range(pair_offsets[i], pair_offsets[i + 1]):
            t = pair_term[j]
            slot = fill[t]
            rows[slot] = r
            tfs[slot] = pair_tf[j]
            fill[t] = slot + 1


def transpose(
    pair_term: np.ndarray, pair_tf: np.ndarray, pair_offsets: np.ndarray, n_terms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Turn doc-major pairs into term-major postings (a counting sort by term).

    Parameters
    ----------
    pair_term : int64[nnz]
        Term id of every pair (``0 <= id < n_terms``).
    pair_tf : int32[nnz]
        Frequency of every pair.
    pair_offsets : int64[n + 1]
        Text ``i`` owns pairs ``pair_offsets[i]:pair_offsets[i + 1]``.
    n_terms : int
        Size of the vocabulary.

    Returns
    -------
    term_offsets : int64[n_terms + 1]
        Postings of term ``t`` are ``term_offsets[t]:term_offsets[t + 1]``.
    rows : int32[nnz]
        Row of every posting, increasing within a term.
    tfs : int32[nnz]
        Term frequency of every posting.
    """
    pair_term, pair_tf, pair_offsets = frozen(pair_term, pair_tf, pair_offsets)
    df = np.bincount(pair_term, minlength=n_terms)
    term_offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=term_offsets[1:])
    rows = np.empty(pair_term.size, dtype=np.int32)
    tfs = np.empty(pair_term.size, dtype=np.int32)
    fill = term_offsets[:-1].copy()
    _scatter(pair_term, pair_tf, pair_offsets, 0, fill, rows, tfs)
    return term_offsets, rows, tfs


@parallel_kernel
def _copy_old(old_offsets, old_rows, old_tfs, remap, new_offsets, rows, tfs, fill):
    """Copy the postings of every old term to the start of its new slot (parallel)."""
    for t in prange(old_offsets.size - 1):
        lo = old_offsets[t]
        hi = old_offsets[t + 1]
        dst = new_offsets[remap[t]]
        for j in range(hi - lo):
            rows[dst + j] = old_rows[lo + j]
            tfs[dst + j] = old_tfs[lo + j]
        fill[remap[t]] = dst + hi - lo


def merge_postings(
    old_offsets: np.ndarray,
    old_rows: np.ndarray,
    old_tfs: np.ndarray,
    remap: np.ndarray,
    pair_term: np.ndarray,
    pair_tf: np.ndarray,
    pair_offsets: np.ndarray,
    row0: int,
    n_terms: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Append new rows' pairs to existing postings (new rows come after all old ones).

    Parameters
    ----------
    old_offsets, old_rows, old_tfs : arrays
        The existing postings (read-only is fine).
    remap : int64[n_old_terms]
        New term id of every old term (increasing).
    pair_term, pair_tf, pair_offsets : arrays
        Doc-major pairs of the new rows, with new term ids.
    row0 : int
        Row number of the first new row (the old row count).
    n_terms : int
        Size of the merged vocabulary.

    Returns
    -------
    tuple of numpy.ndarray
        ``term_offsets``, ``rows``, ``tfs`` of the merged postings; each term's
        rows stay increasing.
    """
    old_offsets, old_rows, old_tfs, remap, pair_term, pair_tf, pair_offsets = frozen(
        old_offsets, old_rows, old_tfs, remap, pair_term, pair_tf, pair_offsets
    )
    df = np.bincount(pair_term, minlength=n_terms)
    df[remap] += np.diff(old_offsets)
    term_offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=term_offsets[1:])
    nnz = int(term_offsets[-1])
    rows = np.empty(nnz, dtype=np.int32)
    tfs = np.empty(nnz, dtype=np.int32)
    fill = term_offsets[:-1].copy()
    if remap.size:
        _copy_old(old_offsets, old_rows, old_tfs, remap, term_offsets, rows, tfs, fill)
    _scatter(pair_term, pair_tf, pair_offsets, row0, fill, rows, tfs)
    return term_offsets, rows, tfs
