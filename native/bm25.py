"""BM25 kernels: postings from token hashes, and batched top-k scoring.

An index is *term-major* (CSC): the vocabulary is a sorted ``uint64`` array of
token hashes; term ``t`` (its position in the vocabulary) has postings
``term_offsets[t]:term_offsets[t + 1]`` in ``rows`` (``int32``, increasing),
``tfs`` (``int32``, term frequency in that row) and ``weights`` (``int32``,
the posting's share of a score, in fixed point)::

    impact = tf / (tf + k1 * (1 - b + b * doc_len / avgdl))       (float32)
    idf    = log(1 + (N - df + 0.5) / (df + 0.5))                  (float32)
    weight = ceil(idf * impact * 2**26)                            (int32)
    score(q, d) = 2**-26 * sum over the tokens t of q of weight[t, d]

(a query token that occurs twice counts twice, as in Lucene and bm25s). This
is Lucene's ``BM25Similarity`` since Lucene 8, which dropped the constant
factor ``k1 + 1`` of the textbook formula (ranking is unchanged), and bm25s
``method="lucene"``; a weight is within ``2**-26`` of ``idf * impact``.
Summing integers makes a row's score exact and independent of the order its
terms are added in: the pruned and the exhaustive search give every row the
same score bit for bit, and the float32 score returned is the sum rounded
once. Ranking: higher score first, ties broken by the lower row; only rows
with a positive score (sharing a term with the query) are hits.

Two searches return the same top k: :func:`_exhaustive_one` scores every
posting of every query term (the reference), :func:`_pruned_one` is
block-max MaxScore over windows of rows, with the per-term and per-block
maxima of the weights (``max_weight``, ``block_max``) computed at build
time. Queries run in parallel, each worker on its own buffers.

Kernels never write into their inputs and never raise on user input; the
scoring kernel also stays in bounds on corrupt postings (rows outside
``[0, n)`` and offsets outside the postings are skipped).
"""

from __future__ import annotations

import math

import numpy as np
from numba import prange

from . import heap
from ._jit import frozen, kernel, parallel_kernel, readonly

__all__ = [
    "BLOCK_SIZE",
    "METHODS",
    "PARALLEL_MIN_QUERIES",
    "PRUNE_MAX_TOKENS",
    "PRUNE_MIN_POSTINGS",
    "WINDOW",
    "WEIGHT_SCALE",
    "PARTITION_BITS",
    "block_maxima",
    "build_postings",
    "CELL_SHIFT",
    "cell_maxima",
    "compact_postings",
    "impacts",
    "merge_indexes",
    "query_weights",
    "term_maxima",
    "search",
    "warmup",
    "warmup_build",
    "warmup_search",
    "weights",
]

WEIGHT_SCALE = 2.0**26
"""A weight is ``ceil(idf * impact * WEIGHT_SCALE)``: below 2**31 for any idf of
a 2**31-row index (``log(1 + 2**31) < 22 < 32``); the kernels write the
literals ``67108864.0`` and ``2**-26``."""

CELL_SHIFT = 5
"""A cell of :func:`cell_maxima` holds ``2**CELL_SHIFT`` consecutive rows."""


# -- building ----------------------------------------------------------------


@parallel_kernel
def _impacts_pass(rows, tfs, doc_len, k1, b, avgdl, out):
    """``out[p]`` = Lucene's BM25 tf component of posting ``p`` (parallel)."""
    for p in prange(rows.size):
        tf = np.float64(tfs[p])
        norm = k1 * (1.0 - b + b * np.float64(doc_len[rows[p]]) / avgdl)
        out[p] = np.float32(tf / (tf + norm))


def impacts(
    rows: np.ndarray, tfs: np.ndarray, doc_len: np.ndarray, k1: float, b: float, avgdl: float
) -> np.ndarray:
    """Return the BM25 term-frequency component of every posting.

    Parameters
    ----------
    rows, tfs : int32[nnz]
        Postings (rows must index ``doc_len``).
    doc_len : int32[n]
        Tokens per row.
    k1, b : float
        BM25 parameters.
    avgdl : float
        Mean of ``doc_len`` (positive when there are postings).

    Returns
    -------
    float32[nnz]
        ``tf / (tf + k1 * (1 - b + b * doc_len / avgdl))``,
        computed in float64.
    """
    rows, tfs, doc_len = frozen(rows, tfs, doc_len)
    out = np.empty(rows.size, dtype=np.float32)
    if rows.size:
        _impacts_pass(rows, tfs, doc_len, float(k1), float(b), float(avgdl), out)
    return out


@parallel_kernel
def _weights_pass(term_offsets, impacts, idf, out):
    """``out[p]`` = ``ceil(idf[t] * impacts[p] * 2**26)`` for the postings of every term ``t``."""
    for t in prange(term_offsets.size - 1):
        w = np.float64(idf[t]) * 67108864.0  # exact: float32 times a power of two
        for p in range(term_offsets[t], term_offsets[t + 1]):
            x = np.ceil(w * np.float64(impacts[p]))  # the float32 product is exact in float64
            out[p] = np.int32(min(max(x, 1.0), 2147483647.0))


def weights(term_offsets: np.ndarray, impacts: np.ndarray, idf: np.ndarray) -> np.ndarray:
    """Return every posting's weight: its share of a score, in fixed point.

    Parameters
    ----------
    term_offsets : int64[V + 1]
        Postings offsets per term.
    impacts : float32[nnz]
        Posting tf components (from :func:`impacts`).
    idf : float32[V]
        Per-term idf.

    Returns
    -------
    int32[nnz]
        ``ceil(idf * impact * WEIGHT_SCALE)``, at least 1 and at most ``2**31 - 1``.
    """
    term_offsets, impacts, idf = frozen(term_offsets, impacts, idf)
    out = np.empty(impacts.size, dtype=np.int32)
    if out.size:
        _weights_pass(term_offsets, impacts, idf, out)
    return out


@parallel_kernel
def _term_max_pass(term_offsets, values, out):
    """``out[t]`` = largest value of term ``t``'s postings (parallel over terms)."""
    for t in prange(term_offsets.size - 1):
        p0 = term_offsets[t]
        p1 = term_offsets[t + 1]
        if p1 <= p0:
            out[t] = 0
            continue
        best = values[p0]
        for p in range(p0 + 1, p1):
            if values[p] > best:
                best = values[p]
        out[t] = best


def term_maxima(term_offsets: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Return the largest value (weight or impact) of every term's postings.

    Parameters
    ----------
    term_offsets : int64[V + 1]
        Postings offsets per term.
    values : int32[nnz] or float32[nnz]
        Non-negative values per posting.

    Returns
    -------
    numpy.ndarray
        ``values.dtype``, ``(V,)``: per-term maximum (0 for a term without postings).
    """
    term_offsets, values = frozen(term_offsets, values)
    out = np.empty(term_offsets.size - 1, dtype=values.dtype)
    _term_max_pass(term_offsets, values, out)
    return out


@parallel_kernel
def _block_max_pass(term_offsets, block_offsets, values, block_size, out):
    """``out[b]`` = largest value of block ``b`` (parallel over terms)."""
    for t in prange(term_offsets.size - 1):
        p = term_offsets[t]
        p1 = term_offsets[t + 1]
        b = block_offsets[t]
        while p < p1:
            e = min(p + block_size, p1)
            best = values[p]
            for q in range(p + 1, e):
                if values[q] > best:
                    best = values[q]
            out[b] = best
            b += 1
            p = e


def block_maxima(
    term_offsets: np.ndarray, values: np.ndarray, block_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return the largest value of every block of ``block_size`` postings of every term.

    Term ``t``'s postings ``term_offsets[t]:term_offsets[t + 1]`` are cut into
    ``ceil(df / block_size)`` blocks, the last one possibly shorter.

    Parameters
    ----------
    term_offsets : int64[V + 1]
        Postings offsets per term.
    values : int32[nnz] or float32[nnz]
        Values per posting (the weights).
    block_size : int
        Postings per block, ``>= 1``.

    Returns
    -------
    block_offsets : int64[V + 1]
        Term ``t`` owns blocks ``block_offsets[t]:block_offsets[t + 1]``.
    block_max : numpy.ndarray
        ``values.dtype``, ``(n_blocks,)``: largest value of every block.
    """
    term_offsets, values = frozen(term_offsets, values)
    df = np.diff(term_offsets)
    block_offsets = np.zeros(term_offsets.size, dtype=np.int64)
    np.cumsum((df + block_size - 1) // block_size, out=block_offsets[1:])
    out = np.empty(int(block_offsets[-1]), dtype=values.dtype)
    if out.size:
        _block_max_pass(term_offsets, block_offsets, values, np.int64(block_size), out)
    return block_offsets, out


@parallel_kernel
def _cell_max_pass(term_offsets, rows, weights, terms, starts, n, shift, out, pos):
    """The cells of term ``terms[i]`` (parallel over terms).

    ``out[starts[i] + c]``: its largest weight in cell ``c``;
    ``pos[i * (n_cells + 1) + c]``: the first of its postings (counted from
    the term's first) whose row is ``>= c << shift``, for ``c`` in
    ``0..n_cells`` (the last is the term's posting count).
    """
    n_cells = (n + (np.int64(1) << shift) - 1) >> shift
    for i in prange(terms.size):
        t = terms[i]
        base = starts[i]
        p0 = term_offsets[t]
        at = i * (n_cells + 1)
        c = np.int64(0)  # the next cell whose first posting is to be written
        for p in range(p0, term_offsets[t + 1]):
            r = rows[p]
            if 0 <= r < n:
                cr = r >> shift
                while c <= cr:
                    pos[at + c] = p - p0
                    c += 1
                if weights[p] > out[base + cr]:
                    out[base + cr] = weights[p]
        while c <= n_cells:
            pos[at + c] = term_offsets[t + 1] - p0
            c += 1


def cell_maxima(
    term_offsets: np.ndarray, rows: np.ndarray, weights: np.ndarray, n: int,
    shift: int = CELL_SHIFT, min_df: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Return the largest weight of every long term in every cell of ``2**shift`` rows.

    Rows are cut into ``ceil(n / 2**shift)`` *cells* of consecutive rows, the
    same for every term (unlike :func:`block_maxima`, whose blocks of postings
    span different rows per term): the sum of the query terms' maxima in a
    cell bounds the score of every row in it. Only the terms with at least
    ``min_df`` postings (default: one per cell, ``ceil(n / 2**shift)``) get
    cells; the others are bounded posting by posting at query time.

    Parameters
    ----------
    term_offsets : int64[V + 1]
        Postings offsets per term.
    rows : int32[nnz]
        Posting rows.
    weights : int32[nnz]
        Posting weights.
    n : int
        Number of rows.
    shift : int, default :data:`CELL_SHIFT`
        A cell holds ``2**shift`` rows, ``0 <= shift <= 6``.
    min_df : int, optional
        Fewest postings of a term with cells.

    Returns
    -------
    cell_start : int64[V]
        Term ``t``'s cells are ``cell_max[cell_start[t]:cell_start[t] + n_cells]``,
        or ``cell_start[t] = -1`` (no cells).
    cell_max : int32[L * n_cells]
        Largest weight per cell (0 where the term has no row).
    cell_pos : int32[L * (n_cells + 1)]
        Where every cell's postings start: the ``l``-th term with cells
        (``cell_start[t] = l * n_cells``) has the postings
        ``term_offsets[t] + cell_pos[l * (n_cells + 1) + c]`` up to the
        same of ``c + 1`` in cell ``c`` (rows increasing), so a search
        reaches a cell's postings without a binary search.
    """
    term_offsets, rows, weights = frozen(term_offsets, rows, weights)
    n_cells = (int(n) + (1 << shift) - 1) >> shift
    if min_df is None:
        min_df = max(n_cells, 1)
    df = np.diff(term_offsets)
    terms = np.flatnonzero(df >= min_df).astype(np.int64)
    cell_start = np.full(df.size, -1, dtype=np.int64)
    starts = np.arange(terms.size, dtype=np.int64) * n_cells
    cell_start[terms] = starts
    out = np.zeros(terms.size * n_cells, dtype=np.int32)
    pos = np.zeros(terms.size * (n_cells + 1), dtype=np.int32)
    if out.size:
        _cell_max_pass(
            term_offsets, rows, weights, terms, starts, np.int64(n), np.int64(shift), out, pos
        )
    return cell_start, out, pos


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


@parallel_kernel
def _count_kept(term_offsets, rows, keep, counts):
    """``counts[t]`` = postings of term ``t`` whose row is kept (parallel over terms)."""
    for t in prange(term_offsets.size - 1):
        c = 0
        for p in range(term_offsets[t], term_offsets[t + 1]):
            c += keep[rows[p]]
        counts[t] = c


@parallel_kernel
def _write_kept(term_offsets, rows, tfs, keep, new_row, new_offsets, out_rows, out_tfs):
    """Write the kept postings of every term, renumbered (parallel over terms)."""
    for t in prange(term_offsets.size - 1):
        o = new_offsets[t]
        for p in range(term_offsets[t], term_offsets[t + 1]):
            r = rows[p]
            if keep[r]:
                out_rows[o] = new_row[r]
                out_tfs[o] = tfs[p]
                o += 1


def compact_postings(
    term_offsets: np.ndarray, rows: np.ndarray, tfs: np.ndarray, keep: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Drop the postings of rows not kept and renumber the rest in order.

    Parameters
    ----------
    term_offsets, rows, tfs : arrays
        The postings (read-only is fine).
    keep : uint8[n]
        1 for every row to keep.

    Returns
    -------
    tuple of numpy.ndarray
        ``term_offsets``, ``rows``, ``tfs`` over all the old terms (some may
        now be empty) and ``df`` (int64, postings per term).
    """
    term_offsets, rows, tfs, keep = frozen(term_offsets, rows, tfs, keep)
    n_terms = term_offsets.size - 1
    counts = np.empty(n_terms, dtype=np.int64)
    _count_kept(term_offsets, rows, keep, counts)
    new_offsets = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=new_offsets[1:])
    (new_row,) = frozen((np.cumsum(keep, dtype=np.int64) - 1).astype(np.int32))
    out_rows = np.empty(int(new_offsets[-1]), dtype=np.int32)
    out_tfs = np.empty(int(new_offsets[-1]), dtype=np.int32)
    _write_kept(term_offsets, rows, tfs, keep, new_row, new_offsets, out_rows, out_tfs)
    return new_offsets, out_rows, out_tfs, counts


# -- building a fresh index in parallel ---------------------------------------
#
# ``build_postings`` turns a token stream straight into term-major postings
# with no serial pass over all pairs: the per-text distinct terms are counted
# in each text's own slot with a hash table, then every (term, row) pair is
# bucketed by the top bits of its hash (``2**PARTITION_BITS`` partitions,
# counted with the texts' terms and scattered by blocks of texts, so each partition holds its pairs
# in row order), and every partition is finished independently: a hash table
# gives its distinct hashes, their sort gives its share of the vocabulary (the
# partitions' shares concatenated in partition order *are* the sorted
# vocabulary, because the partition is the hash's top bits), and a counting
# sort by term writes its postings into the partition's own range of the
# output (rows stay increasing within a term). The result is identical to
# ``doc_terms`` + ``distinct_hashes`` + ``transpose`` (the serial build it replaced,
# kept as the reference in ``tests/naive/bm25_serial.py``).

PARTITION_BITS = 8
"""``2**PARTITION_BITS`` hash partitions of :func:`build_postings`."""


@parallel_kernel
def _bucket_scatter(
    tok_offsets, counts, tmp_hash, tmp_tf, block_texts, shift, row0, fill, out_hash, out_tf,
    out_row,
):  # fmt: skip
    """Write every pair to its partition, block by block (``fill[b]``: next slots, updated)."""
    n = tok_offsets.size - 1
    for b in prange(fill.shape[0]):
        for i in range(b * block_texts, min(n, (b + 1) * block_texts)):
            s = tok_offsets[i]
            r = np.int32(row0 + i)
            for j in range(s, s + counts[i]):
                h = tmp_hash[j]
                p = np.int64(h >> shift)
                k = fill[b, p]
                out_hash[k] = h
                out_tf[k] = tmp_tf[j]
                out_row[k] = r
                fill[b, p] = k + 1


@parallel_kernel
def _partition_postings(part_offsets, b_hash, b_tf, b_row, vocab, df, n_distinct, rows, tfs):
    """Finish every partition (parallel): its sorted distinct hashes and its postings.

    Partition ``p`` owns pairs ``part_offsets[p]:part_offsets[p + 1]`` of the
    bucket arrays (in row order) and the same range of ``rows`` and ``tfs``;
    its ``d`` distinct hashes, increasing, go to ``vocab[lo:lo + d]`` and their
    postings counts to ``df[lo:lo + d]`` (``lo = part_offsets[p]``), ``d`` to
    ``n_distinct[p]``.
    """
    for p in prange(part_offsets.size - 1):
        lo = part_offsets[p]
        m = part_offsets[p + 1] - lo
        if m == 0:
            n_distinct[p] = 0
            continue
        cap = 16
        while cap < 2 * m:
            cap *= 2
        mask = np.uint64(cap - 1)
        table = np.full(cap, -1, dtype=np.int64)
        local = np.empty(m, dtype=np.int64)  # distinct index of every pair
        seen = np.empty(m, dtype=np.uint64)  # distinct hashes, first-seen order
        count = np.zeros(m, dtype=np.int64)
        d = 0
        for j in range(m):
            key = b_hash[lo + j]
            pos = np.int64((key ^ (key >> np.uint64(29)) ^ (key >> np.uint64(47))) & mask)
            while True:
                t = table[pos]
                if t < 0:
                    table[pos] = d
                    seen[d] = key
                    local[j] = d
                    count[d] = 1
                    d += 1
                    break
                if seen[t] == key:
                    local[j] = t
                    count[t] += 1
                    break
                pos = (pos + 1) & (cap - 1)
        order = np.argsort(seen[:d])
        rank = np.empty(d, dtype=np.int64)
        fill = np.empty(d, dtype=np.int64)
        at = lo
        for r in range(d):
            u = order[r]
            rank[u] = r
            vocab[lo + r] = seen[u]
            df[lo + r] = count[u]
            fill[r] = at
            at += count[u]
        for j in range(m):
            r = rank[local[j]]
            slot = fill[r]
            rows[slot] = b_row[lo + j]
            tfs[slot] = b_tf[lo + j]
            fill[r] = slot + 1
        n_distinct[p] = d


@parallel_kernel
def _doc_counts_pass(hashes, tok_offsets, block_texts, shift, out_hash, out_tf, counts, per_block):
    """Per text: its distinct hashes (first-seen order) and counts, in the text's slot.

    Blocks of ``block_texts`` texts run in parallel, each with one hash table
    (slots stamped with the text that holds them, so it is never cleared);
    ``per_block[b, p]`` counts the pairs of block ``b`` in partition ``p``
    (the hash's top bits, ``hash >> shift``).
    """
    n = tok_offsets.size - 1
    for b in prange(per_block.shape[0]):
        i0 = b * block_texts
        i1 = min(n, i0 + block_texts)
        longest = 0
        for i in range(i0, i1):
            longest = max(longest, tok_offsets[i + 1] - tok_offsets[i])
        cap = 16
        while cap < 2 * longest:
            cap *= 2
        stamp = np.full(cap, -1, dtype=np.int64)
        where = np.empty(cap, dtype=np.int64)
        for i in range(i0, i1):
            lo = tok_offsets[i]
            m = tok_offsets[i + 1] - lo
            c = 16
            while c < 2 * m:
                c *= 2
            mask = np.uint64(c - 1)
            u = 0
            for j in range(lo, lo + m):
                key = hashes[j]
                pos = np.int64((key ^ (key >> np.uint64(29)) ^ (key >> np.uint64(47))) & mask)
                while True:
                    if stamp[pos] != i:
                        stamp[pos] = i
                        where[pos] = lo + u
                        out_hash[lo + u] = key
                        out_tf[lo + u] = 1
                        per_block[b, np.int64(key >> shift)] += 1
                        u += 1
                        break
                    w = where[pos]
                    if out_hash[w] == key:
                        out_tf[w] += 1
                        break
                    pos = (pos + 1) & (c - 1)
            counts[i] = u


@kernel
def _gather_vocab(part_offsets, n_distinct, vocab_parts, df_parts, vocab, term_offsets):
    """Concatenate the partitions' vocabularies and postings counts (as offsets)."""
    v = 0
    term_offsets[0] = 0
    for p in range(part_offsets.size - 1):
        lo = part_offsets[p]
        for j in range(n_distinct[p]):
            vocab[v] = vocab_parts[lo + j]
            term_offsets[v + 1] = term_offsets[v] + df_parts[lo + j]
            v += 1


def build_postings(
    hashes: np.ndarray, tok_offsets: np.ndarray, row0: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return the term-major postings of a token stream (a fresh index), in parallel.

    Equal to ``doc_terms``, then ``distinct_hashes`` of the pairs'
    hashes, then ``transpose`` (``tests/naive/bm25_serial.py``; see the
    comment above :data:`PARTITION_BITS`), with every pass parallel.

    Parameters
    ----------
    hashes : uint64[::1]
        Token hashes of all texts (read-only is fine).
    tok_offsets : int64[::1]
        ``n + 1`` offsets into ``hashes``, starting at 0.
    row0 : int, default 0
        Row number of the first text.

    Returns
    -------
    vocab : uint64[V]
        The distinct hashes, increasing.
    term_offsets : int64[V + 1]
        Postings of term ``t`` are ``term_offsets[t]:term_offsets[t + 1]``.
    rows : int32[nnz]
        Row of every posting, increasing within a term.
    tfs : int32[nnz]
        Term frequency of every posting.
    """
    hashes, tok_offsets = frozen(hashes, tok_offsets)
    n = tok_offsets.size - 1
    total = int(tok_offsets[-1])
    tmp_hash = np.empty(total, dtype=np.uint64)
    tmp_tf = np.empty(total, dtype=np.int32)
    counts = np.empty(n, dtype=np.int64)
    n_parts = 1 << PARTITION_BITS
    block_texts = max(1, -(-n // 64))  # at most 64 blocks of texts
    n_blocks = max(1, -(-n // block_texts))
    shift = np.uint64(64 - PARTITION_BITS)
    per_block = np.zeros((n_blocks, n_parts), dtype=np.int64)
    _doc_counts_pass(
        hashes, tok_offsets, np.int64(block_texts), shift, tmp_hash, tmp_tf, counts, per_block
    )
    nnz = int(counts.sum())
    spent = tmp_hash  # its memory, paged in already, holds the postings counts later
    tmp_hash, tmp_tf, counts = frozen(tmp_hash, tmp_tf, counts)
    part_sizes = per_block.sum(axis=0)
    part_offsets = np.zeros(n_parts + 1, dtype=np.int64)
    np.cumsum(part_sizes, out=part_offsets[1:])
    fill = np.cumsum(per_block, axis=0) - per_block + part_offsets[:-1]
    b_hash = np.empty(nnz, dtype=np.uint64)
    b_tf = np.empty(nnz, dtype=np.int32)
    b_row = np.empty(nnz, dtype=np.int32)
    _bucket_scatter(
        tok_offsets, counts, tmp_hash, tmp_tf, np.int64(block_texts), shift, np.int64(row0),
        fill, b_hash, b_tf, b_row,
    )  # fmt: skip
    del tmp_hash, tmp_tf
    # A partition's vocabulary and counts go to the start of its own range of arrays
    # touched already (not fresh ones: numpy asks for huge pages, and each partition's
    # few writes would page in 2 MB of a fresh array): its bucket hashes, which it has read
    # before it writes them, and the spent per-text hashes.
    vocab_parts = b_hash
    df_parts = spent[:nnz].view(np.int64)
    n_distinct = np.empty(n_parts, dtype=np.int64)
    rows = np.empty(nnz, dtype=np.int32)
    tfs = np.empty(nnz, dtype=np.int32)
    (part_offsets,) = frozen(part_offsets)
    b_hash, b_tf, b_row = frozen(b_hash, b_tf, b_row)
    _partition_postings(
        part_offsets, b_hash, b_tf, b_row, vocab_parts, df_parts, n_distinct, rows, tfs
    )
    del b_hash, b_tf, b_row, spent
    v = int(n_distinct.sum())
    vocab = np.empty(v, dtype=np.uint64)
    term_offsets = np.empty(v + 1, dtype=np.int64)
    vocab_parts, df_parts, n_distinct = frozen(vocab_parts, df_parts, n_distinct)
    _gather_vocab(part_offsets, n_distinct, vocab_parts, df_parts, vocab, term_offsets)
    return vocab, term_offsets, rows, tfs


def merge_indexes(
    old_vocab: np.ndarray,
    old_offsets: np.ndarray,
    old_rows: np.ndarray,
    old_tfs: np.ndarray,
    new_vocab: np.ndarray,
    new_offsets: np.ndarray,
    new_rows: np.ndarray,
    new_tfs: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Merge two term-major postings whose rows do not overlap (the new ones come after).

    Every merged term holds its old postings, then its new ones (so rows stay
    increasing): what ``merge_postings`` (``tests/naive/bm25_serial.py``, the
    serial reference) gives for the same rows, from the new rows'
    :func:`build_postings` instead of their doc-major pairs.

    Parameters
    ----------
    old_vocab, old_offsets, old_rows, old_tfs : arrays
        The existing index (read-only is fine).
    new_vocab, new_offsets, new_rows, new_tfs : arrays
        The added rows' postings, rows numbered after every old row.

    Returns
    -------
    tuple of numpy.ndarray
        ``vocab`` (the sorted union), ``term_offsets``, ``rows``, ``tfs``.
    """
    vocab = np.union1d(old_vocab, new_vocab)
    old_remap = np.searchsorted(vocab, old_vocab).astype(np.int64)
    new_remap = np.searchsorted(vocab, new_vocab).astype(np.int64)
    df = np.zeros(vocab.size, dtype=np.int64)
    df[old_remap] += np.diff(old_offsets)
    df[new_remap] += np.diff(new_offsets)
    term_offsets = np.zeros(vocab.size + 1, dtype=np.int64)
    np.cumsum(df, out=term_offsets[1:])
    nnz = int(term_offsets[-1])
    rows = np.empty(nnz, dtype=np.int32)
    tfs = np.empty(nnz, dtype=np.int32)
    fill = term_offsets[:-1].copy()
    old_offsets, old_rows, old_tfs, new_offsets, new_rows, new_tfs = frozen(
        old_offsets, old_rows, old_tfs, new_offsets, new_rows, new_tfs
    )
    old_remap, new_remap = frozen(old_remap, new_remap)
    if old_remap.size:
        _copy_old(old_offsets, old_rows, old_tfs, old_remap, term_offsets, rows, tfs, fill)
    if new_remap.size:
        # the new postings of every term start where its old ones end
        _copy_old(new_offsets, new_rows, new_tfs, new_remap, fill.copy(), rows, tfs, fill)
    return vocab, term_offsets, rows, tfs


# -- scoring -----------------------------------------------------------------
#
# A row's score is the int64 sum of its postings' weights (times the query
# token's multiplicity): exact, whatever the order of the terms, so the pruned
# and the exhaustive kernels agree bit for bit; the float32 score returned is
# ``sum * 2**-26`` rounded once. Ranking is by that float32 score, then by the
# lower row.


@kernel(inline="always")
def _to_score(s):  # pragma: no cover - inlined
    """The float32 score of a fixed-point sum (``s * 2**-26``, rounded once)."""
    return np.float32(np.float64(s) * 1.4901161193847656e-08)


@kernel
def _limit(theta):
    """The largest fixed-point sum whose float32 score is ``<= theta`` (a finite theta >= 0).

    ``_to_score`` rounds monotonically, so ``_to_score(s) <= theta`` exactly
    when ``s <= _limit(theta)``: the integer comparisons of the pruned search.
    """
    x = np.int64(np.float64(theta) * 67108864.0)
    span = np.int64(np.float64(theta) * 8.0) + 2  # > one float32 ulp of theta, in 2**-26
    lo = max(x - span, np.int64(-1))  # _to_score(lo) <= theta (or lo = -1)
    hi = x + span  # _to_score(hi) > theta
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if _to_score(mid) <= theta:
            lo = mid
        else:
            hi = mid
    return lo


@kernel
def _limit_below(theta):
    """The largest fixed-point sum whose float32 score is ``< theta`` (a finite theta >= 0)."""
    x = np.int64(np.float64(theta) * 67108864.0)
    span = np.int64(np.float64(theta) * 8.0) + 2
    lo = max(x - span, np.int64(-1))
    hi = x + span
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if _to_score(mid) < theta:
            lo = mid
        else:
            hi = mid
    return lo


@kernel(inline="always")
def _find(vocab, h):  # pragma: no cover - inlined
    """Position of ``h`` in the sorted ``vocab``, or -1."""
    lo = 0
    hi = vocab.size
    while lo < hi:
        mid = (lo + hi) >> 1
        if vocab[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    if lo < vocab.size and vocab[lo] == h:
        return lo
    return -1


@kernel
def _heap_out(hs, hr, size, out_rows, out_scores):
    """Heap-sort the ``size`` entries best first into the outputs, padded with ``(-1, -inf)``."""
    heap.sort(hs, hr, size)
    for j in range(size):
        out_rows[j] = hr[j]
        out_scores[j] = hs[j]
    for j in range(size, out_rows.size):
        out_rows[j] = -1
        out_scores[j] = -np.inf


@kernel(inline="always")
def _low_bit(word):  # pragma: no cover - inlined
    """Index of the lowest set bit of a non-zero uint64 (exact: a power of two as a float)."""
    low = word & (~word + np.uint64(1))
    return math.frexp(np.float64(low))[1] - 1


@kernel(inline="always")
def _gallop(rows, pos, end, r):  # pragma: no cover - inlined
    """First position in ``rows[pos:end]`` (increasing) holding a value ``>= r``, or ``end``."""
    step = 1
    lo = pos
    while pos + step < end and rows[pos + step] < r:
        lo = pos + step
        step *= 2
    hi = min(pos + step, end)
    # rows[lo] < r unless lo == pos; search [lo, hi)
    while lo < hi:
        mid = (lo + hi) >> 1
        if rows[mid] < r:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def _query_terms(term_offsets, vocab, nnz, q_hashes, lo, hi):
    """Distinct known terms of one query with postings, ascending, and how often each occurs."""
    n_terms = term_offsets.size - 1
    ts = np.empty(hi - lo, dtype=np.int64)
    cnt = 0
    for j in range(lo, hi):
        t = _find(vocab, q_hashes[j])
        if t < 0 or t >= n_terms:
            continue
        if min(term_offsets[t + 1], nnz) <= max(term_offsets[t], 0):
            continue
        ts[cnt] = t
        cnt += 1
    ts = np.sort(ts[:cnt])
    terms = np.empty(cnt, dtype=np.int64)
    mult = np.empty(cnt, dtype=np.int64)
    nq = 0
    for j in range(cnt):
        if nq > 0 and terms[nq - 1] == ts[j]:
            mult[nq - 1] += 1
        else:
            terms[nq] = ts[j]
            mult[nq] = 1
            nq += 1
    return terms[:nq], mult[:nq]


@kernel
def _exhaustive_one(
    term_offsets, rows, weights, vocab, q_hashes, lo, hi, n, mask, k,
    acc, touched, hs, hr, out_rows, out_scores, stats,
):  # fmt: skip
    """Score every posting of every query term; write the best ``<= k`` rows (the reference).

    Term-at-a-time into the fixed-point accumulator ``acc`` (all zeros on
    entry and on exit); rows enter ``touched`` as they first score, and once
    the postings read pass ``n / 8`` top-k is one scan of ``acc`` instead.
    """
    nnz = rows.size
    terms, mult = _query_terms(term_offsets, vocab, nnz, q_hashes, lo, hi)
    cap = touched.size
    nt = 0
    dense = False
    read = 0
    for j in range(terms.size):
        t = terms[j]
        mu = mult[j]
        p0 = max(term_offsets[t], 0)
        p1 = min(term_offsets[t + 1], nnz)
        if not dense and 8 * (read + p1 - p0) >= n:
            dense = True
        for p in range(p0, p1):
            r = rows[p]
            if 0 <= r < n:
                s = acc[r]
                if s == 0 and not dense and nt < cap:
                    touched[nt] = r
                    nt += 1
                acc[r] = s + weights[p] * mu
        read += p1 - p0
    use_mask = mask.size > 0
    size = np.int64(0)  # typed from the start: no Literal[int](0) signature of the heap
    if dense:
        # rows in increasing order: a score equal to the heap's worst ranks after it
        for r in range(n):
            s = acc[r]
            if s == 0:
                continue
            acc[r] = 0
            f = _to_score(s)
            if (size == k and f <= hs[0]) or (use_mask and not mask[r]):
                continue
            size = heap.offer(hs, hr, size, k, f, r)
    else:
        for j in range(nt):
            r = touched[j]
            s = acc[r]
            acc[r] = 0
            f = _to_score(s)
            if (size == k and f < hs[0]) or (use_mask and not mask[r]):
                continue
            # np.int64: the row type of the dense loop's call (one heap signature, not two)
            size = heap.offer(hs, hr, size, k, f, np.int64(r))
    _heap_out(hs, hr, size, out_rows, out_scores)
    stats[0] = read
    stats[1] = read


@kernel
def _pruned_one(
    term_offsets, rows, weights, max_weight, block_offsets, block_max, vocab, q_hashes, lo, hi,
    n, mask, k, block_size, window, acc, bits, hs, hr, out_rows, out_scores, stats,
):  # fmt: skip
    """Best ``<= k`` rows of one query by block-max MaxScore over row windows.

    Rows are visited in increasing order, one window of at most ``window``
    rows at a time, starting at the lowest row any query term still has.
    In a window every term's bound is the largest block maximum of its
    postings there (``block_max`` covers ``block_size`` postings each); the
    terms are sorted by bound, and the longest prefix whose bounds add up to
    no more than the ``k``-th best score so far (``theta``) is
    *non-essential*: a row matching only those terms cannot enter the top
    ``k``. A window with no essential term is skipped without reading a
    posting. The essential terms are scored term-at-a-time into ``acc``
    (``window`` entries; ``bits`` flags the rows reached, one bit each, so
    they come out in row order), block by block: a block whose maximum plus
    the other terms' window bounds cannot beat ``theta`` is skipped. Each
    row reached is then completed with the non-essential terms, largest
    bound first, by galloping search in their postings, and dropped as soon
    as its score plus the bounds left cannot beat ``theta``. With a single
    essential term the rows reached are completed after each block, so that
    ``theta`` rises before the next block is read. Bounds are compared as integers with ``lim``,
    the largest sum whose float32 score does not beat ``theta``.

    Every row that could enter the top ``k`` is scored in full, with the
    fixed-point sum of the exhaustive kernel, so the result is exactly
    :func:`_exhaustive_one`'s. Because rows come in increasing order, a row
    whose score equals ``theta`` ranks after every row in the heap: a bound
    equal to ``theta`` prunes. Masked rows are never candidates and never
    raise ``theta``. ``acc`` is all zeros on entry and on exit.
    ``stats`` receives the postings read and the postings of the query terms.

    Before the first window the heap is seeded with the rows of the terms
    with the fewest postings (up to ``max(4 k, window / 16)`` rows), scored
    in full by binary search in every term's postings: ``theta`` is high
    from the start. The heap then holds rows beyond the one being read, so
    limits become strict (a row scoring exactly ``theta`` may still enter
    by its lower row) and a seed row is not offered twice.
    """
    nnz = rows.size
    nb = block_max.size
    terms, mult = _query_terms(term_offsets, vocab, nnz, q_hashes, lo, hi)
    nq = terms.size
    p0s = np.empty(nq, dtype=np.int64)
    p1s = np.empty(nq, dtype=np.int64)
    b0s = np.empty(nq, dtype=np.int64)
    b1s = np.empty(nq, dtype=np.int64)
    blocks = np.empty(nq, dtype=np.bool_)
    pos = np.empty(nq, dtype=np.int64)
    bound = np.empty(nq, dtype=np.int64)
    order = np.empty(nq, dtype=np.int64)
    prefix = np.empty(nq, dtype=np.int64)
    total = 0
    for j in range(nq):
        t = terms[j]
        p0 = max(term_offsets[t], 0)
        p1 = min(term_offsets[t + 1], nnz)
        p0s[j] = p0
        p1s[j] = p1
        pos[j] = p0
        b0 = block_offsets[t]
        b1 = block_offsets[t + 1]
        b0s[j] = b0
        b1s[j] = b1
        # block maxima usable only when they cover exactly this term's postings
        blocks[j] = 0 <= b0 <= b1 <= nb and b1 - b0 == (p1 - p0 + block_size - 1) // block_size
        total += p1 - p0
    use_mask = mask.size > 0
    size = np.int64(0)  # typed from the start: no Literal[int](0) signature of the heap
    lim = np.int64(-1)  # _limit(theta) once the heap is full (theta: its root's score)
    read = 0
    # Seed the heap with the rows of the rarest term, scored in full: theta is
    # high from the first window. The heap then holds rows beyond the one being
    # read, so a row scoring exactly theta may still enter: limits become
    # strict (_limit_below) and a row is offered once only.
    seeded = False
    if nq > 1:
        budget = max(4 * k, window // 16)  # seed rows, at most
        for j in range(nq):
            order[j] = j
        for j in range(1, nq):  # terms by postings, fewest first
            i = j
            while i > 0 and p1s[order[i - 1]] - p0s[order[i - 1]] > p1s[j] - p0s[j]:
                order[i] = order[i - 1]
                i -= 1
            order[i] = j
        for i in range(nq):
            jr = order[i]
            if p1s[jr] - p0s[jr] > budget or (i > 0 and size == k):
                break
            budget -= p1s[jr] - p0s[jr]
            seeded = True
            for p in range(p0s[jr], p1s[jr]):
                r = rows[p]
                if r < 0 or r >= n or (use_mask and not mask[r]) or heap.contains(hr, size, r):
                    continue
                s = np.int64(0)
                for j in range(nq):
                    q = _gallop(rows, p0s[j], p1s[j], r)
                    if q < p1s[j] and rows[q] == r:
                        s += weights[q] * mult[j]
                        read += 1
                size = heap.offer(hs, hr, size, k, _to_score(s), np.int64(r))  # as below
        if size == k:
            lim = _limit_below(hs[0])
    wlo = 0
    while True:
        # move every cursor to its first row >= wlo; the window starts at the lowest
        nxt = n
        for j in range(nq):
            p = pos[j]
            e = p1s[j]
            if p < e and rows[p] < wlo:
                p = _gallop(rows, p, e, wlo)
                pos[j] = p
            if p < e and rows[p] < nxt:
                nxt = rows[p]
        if nxt >= n:
            break
        if nxt > wlo:
            wlo = nxt
        whi = min(n, wlo + window)
        # window bounds (fixed point): the largest block maximum over the window
        for j in range(nq):
            p = pos[j]
            if p >= p1s[j] or rows[p] >= whi:
                bound[j] = 0
                continue
            if blocks[j]:
                b = b0s[j] + (p - p0s[j]) // block_size
                bm = np.int64(block_max[b])
                b += 1
                q = p0s[j] + (b - b0s[j]) * block_size
                while b < b1s[j] and q < p1s[j] and rows[q] < whi:
                    if block_max[b] > bm:
                        bm = np.int64(block_max[b])
                    b += 1
                    q += block_size
            else:
                bm = np.int64(max_weight[terms[j]])
            bound[j] = bm * mult[j]
        # terms by bound, ascending (insertion sort: queries are short)
        for j in range(nq):
            i = j
            while i > 0 and bound[order[i - 1]] > bound[j]:
                order[i] = order[i - 1]
                i -= 1
            order[i] = j
        run = 0
        for i in range(nq):
            run += bound[order[i]]
            prefix[i] = run
        ne = 0
        if size == k:
            while ne < nq and prefix[ne] <= lim:
                ne += 1
        if ne == nq:
            wlo = whi  # no row of this window can enter the top k
            continue
        # essential terms, term-at-a-time over the window, block by block: a
        # block whose maximum plus the other terms' window bounds cannot beat
        # theta is skipped (its rows may still be reached by another term:
        # their scores then lack this term, but cannot beat theta either).
        # (Bounding the other terms by their blocks over the same rows skips
        # more postings but was measured slower: 0.98 ms against 0.57 ms a
        # question, 1M synthetic documents.)
        # With one essential term (single) its rows come in order: they are
        # completed block by block, so that theta rises before the next block
        # is read (and may skip it); with several, once for the window.
        single = ne == nq - 1
        full = size == k
        more = True
        while more:
            more = False
            xlo = whi - wlo  # the window positions reached in this round: [xlo, xhi]
            xhi = -1
            for i in range(ne, nq):
                j = order[i]
                p = pos[j]
                e = p1s[j]
                mu = mult[j]
                p0 = p0s[j]
                skip = full and blocks[j]
                rest = run - bound[j]
                while p < e:
                    bend = min(p0 + ((p - p0) // block_size + 1) * block_size, e)
                    if skip:
                        b = b0s[j] + (p - p0) // block_size
                        if np.int64(block_max[b]) * mu + rest <= lim:
                            if rows[bend - 1] < whi:
                                p = bend
                                continue
                            p = _gallop(rows, p, bend, whi)
                            break
                    start = p
                    while p < bend:
                        r = rows[p]
                        if r >= whi:
                            break
                        if r >= wlo:
                            x = r - wlo
                            acc[x] += weights[p] * mu
                            bits[x >> 6] |= np.uint64(1) << np.uint64(x & 63)
                            xlo = min(xlo, x)
                            xhi = max(xhi, x)
                        p += 1
                    read += p - start
                    if p < bend:
                        break  # reached the end of the window
                    if single:
                        more = p < e  # complete this block's rows before the next
                        break
                pos[j] = p
            # complete each row reached, in row order, with the non-essential terms
            for wi in range(xlo >> 6, (xhi >> 6) + 1):
                word = bits[wi]
                if word == 0:
                    continue
                bits[wi] = 0
                while word != 0:
                    bit = _low_bit(word)
                    word ^= np.uint64(1) << np.uint64(bit)
                    x = (wi << 6) + bit
                    s = acc[x]
                    acc[x] = 0
                    r = wlo + x
                    if s <= 0 or (use_mask and not mask[r]):
                        continue
                    alive = True
                    for ii in range(ne - 1, -1, -1):
                        if size == k and s + prefix[ii] <= lim:
                            alive = False
                            break
                        jj = order[ii]
                        pp = pos[jj]
                        ee = p1s[jj]
                        if pp < ee and rows[pp] < r:
                            pp = _gallop(rows, pp, ee, r)
                            pos[jj] = pp
                        if pp < ee and rows[pp] == r:
                            s += weights[pp] * mult[jj]
                            read += 1
                    if alive:
                        if seeded and (size < k or s > lim) and heap.contains(hr, size, r):
                            pass  # a seed, offered already
                        elif size < k:
                            size = heap.push(hs, hr, size, _to_score(s), r)
                            if size == k:
                                lim = _limit_below(hs[0]) if seeded else _limit(hs[0])
                        elif s > lim and (not seeded or heap.worse(hs[0], hr[0], _to_score(s), r)):
                            heap.sift_down(hs, hr, size, np.int64(0), _to_score(s), r)
                            lim = _limit_below(hs[0]) if seeded else _limit(hs[0])
        wlo = whi
    _heap_out(hs, hr, size, out_rows, out_scores)
    stats[0] = read
    stats[1] = total


@kernel(inline="always")
def _lower_bound(rows, lo, hi, r):  # pragma: no cover - inlined
    """First position in ``rows[lo:hi]`` (increasing) holding a value ``>= r``, or ``hi``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if rows[mid] < r:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def _has_cells(term_offsets, vocab, cell_start, q_hashes, lo, hi):
    """Whether a query token is a term with cells (see :func:`cell_maxima`)."""
    if cell_start.size != term_offsets.size - 1:
        return False
    for j in range(lo, hi):
        t = _find(vocab, q_hashes[j])
        if t >= 0 and t < cell_start.size and cell_start[t] >= 0:
            return True
    return False


@kernel(inline="always")
def _cell_first(cell_pos, at, c, t0, p0, p1):  # pragma: no cover - inlined
    """The first posting of cell ``c`` of a term with cells (``cell_pos[at:]``), in ``[p0, p1]``.

    ``t0`` is the term's first posting (``term_offsets[t]``); a position
    outside the term's postings (corrupt cells) is clamped into them.
    """
    return min(max(t0 + np.int64(cell_pos[at + c]), p0), p1)


@kernel(inline="always")
def _offer_cell_row(hs, hr, size, k, s, r, lim):  # pragma: no cover - inlined
    """Offer row ``r`` of sum ``s > lim`` to the heap; return the new size and limit.

    Rows do not come in row order, so a row scoring exactly ``theta`` enters
    when its row is lower: the limit is the largest sum scoring *below*
    ``theta`` (and 0, no term, until the heap is full).
    """
    f = _to_score(s)
    if size < k:
        size = heap.push(hs, hr, size, f, r)
        if size == k:
            lim = max(_limit_below(hs[0]), np.int64(0))
    elif heap.worse(hs[0], hr[0], f, r):
        heap.sift_down(hs, hr, size, np.int64(0), f, r)
        lim = max(_limit_below(hs[0]), np.int64(0))
    return size, lim


@kernel
def _cells_one(
    term_offsets, rows, weights, max_weight, cell_start, cell_max, cell_pos, shift, vocab,
    q_hashes, lo, hi, n, mask, k, bound, cacc, hs, hr, out_rows, out_scores, stats,
):  # fmt: skip
    """Best ``<= k`` rows of one query by the bounds of row cells (see :func:`cell_maxima`).

    Every row lies in one cell of ``2**shift`` consecutive rows; the bound of
    a cell, ``bound[c]``, is the sum over the query terms of their largest
    weight there (from ``cell_max`` for a term with cells; a term without
    adds each of its postings' weights to its row's cell, which bounds its
    largest too): no row of the cell scores more. The cells of the ``M``
    highest bounds are scored first, which makes the ``k``-th best score so
    far (``theta``) high from the start; then every cell in row order whose
    bound can still beat ``theta``. A cell is scored in full: every query
    term's postings in its rows, term-at-a-time into ``cacc`` (``2**shift``
    entries, all zeros on entry and on exit; one bit per row in a word), so
    a row's score is the fixed-point sum of the exhaustive kernel and the
    result is exactly :func:`_exhaustive_one`'s.

    Cells are not visited in row order, so a row scoring exactly ``theta``
    may still enter by its lower row: a cell is skipped only when its bound
    is below ``theta`` (``_limit_below``), a row is offered when it ranks
    before the heap's worst, and every cell is scored at most once
    (``bound[c] = -1`` once scored). ``bound`` holds ``n_cells`` entries of
    any value on entry. ``stats`` receives the postings read and the
    postings of the query terms.

    A term with cells finds its postings in a cell at ``cell_pos`` (see
    :func:`cell_maxima`), without a search in its (long) postings: the
    postings of a cell, of the next cell holding an essential term's row,
    and of a row to complete are one lookup away (then a short scan).
    """
    nnz = rows.size
    terms, mult = _query_terms(term_offsets, vocab, nnz, q_hashes, lo, hi)
    nq = terms.size
    width = np.int64(1) << shift
    n_cells = (n + width - 1) >> shift
    p0s = np.empty(nq, dtype=np.int64)
    p1s = np.empty(nq, dtype=np.int64)
    pos = np.empty(nq, dtype=np.int64)
    cps = np.empty(nq, dtype=np.int64)  # where the term's cell positions start, or -1
    total = 0
    for j in range(nq):
        t = terms[j]
        p0s[j] = max(term_offsets[t], 0)
        p1s[j] = min(term_offsets[t + 1], nnz)
        pos[j] = p0s[j]
        total += p1s[j] - p0s[j]
        cs = cell_start[t]
        cps[j] = -1
        if n_cells > 0 and cs >= 0 and cs % n_cells == 0 and cs + n_cells <= cell_max.size:
            at = (cs // n_cells) * (n_cells + 1)
            if at + n_cells < cell_pos.size and term_offsets[t] >= 0:
                cps[j] = at
    # the cells' bounds: terms with cells first (the first one overwrites)
    # (over views indexed from 0, which LLVM vectorises: an index ``cs + c`` is
    # checked for wrapping below 0 at every step, which it does not; measured 2.5x)
    fresh = True
    bounds = bound[:n_cells]
    for j in range(nq):
        cs = cell_start[terms[j]]
        if cs < 0 or cs + n_cells > cell_max.size:
            continue
        mu = mult[j]
        maxima = cell_max[cs : cs + n_cells]
        if fresh:
            for c in range(n_cells):
                bounds[c] = np.int64(maxima[c]) * mu
            fresh = False
        else:
            for c in range(n_cells):
                bounds[c] += np.int64(maxima[c]) * mu
    if fresh:
        bound[:n_cells] = 0
    for j in range(nq):
        cs = cell_start[terms[j]]
        if cs >= 0 and cs + n_cells <= cell_max.size:
            continue
        mu = mult[j]
        for p in range(p0s[j], p1s[j]):
            r = rows[p]
            if 0 <= r < n:
                bound[r >> shift] += np.int64(weights[p]) * mu
    use_mask = mask.size > 0
    size = np.int64(0)  # typed from the start: no Literal[int](0) signature of the heap
    lim = np.int64(0)  # bound <= lim: no row can enter (0, no term, until the heap is full)
    read = 0
    # the M cells of the highest bounds, best first (insertion into a sorted list)
    m_top = min(max(2 * k, 16), n_cells)
    top_b = np.full(m_top, -1, dtype=np.int64)
    top_c = np.zeros(m_top, dtype=np.int64)
    floor = np.int64(0)  # top_b[-1] once the list is full
    for c in range(n_cells):
        b = bound[c]
        if b <= floor:
            continue
        i = m_top - 1
        while i > 0 and top_b[i - 1] < b:
            top_b[i] = top_b[i - 1]
            top_c[i] = top_c[i - 1]
            i -= 1
        top_b[i] = b
        top_c[i] = c
        if top_b[m_top - 1] > floor:
            floor = top_b[m_top - 1]
    # 1. the cells of the highest bounds, best first, every term's postings
    for i in range(m_top):
        if top_b[i] <= lim:
            break  # sorted: no later one can beat theta either
        c = top_c[i]
        bound[c] = -1
        c0 = c << shift
        c1 = min(c0 + width, n)
        word = np.uint64(0)
        for j in range(nq):
            e = p1s[j]
            if cps[j] >= 0:
                p = _cell_first(cell_pos, cps[j], c, term_offsets[terms[j]], p0s[j], e)
            else:
                p = _lower_bound(rows, p0s[j], e, c0)
            mu = mult[j]
            start = p
            while p < e:
                r = rows[p]
                if r >= c1:
                    break
                if r >= c0:  # always, unless the postings are corrupt (not increasing)
                    x = r - c0
                    cacc[x] += weights[p] * mu
                    word |= np.uint64(1) << np.uint64(x)
                p += 1
            read += p - start
        while word != 0:
            bit = _low_bit(word)
            word ^= np.uint64(1) << np.uint64(bit)
            s = cacc[bit]
            cacc[bit] = 0
            r = c0 + bit
            if s > lim and not (use_mask and not mask[r]):
                size, lim = _offer_cell_row(hs, hr, size, k, s, r, lim)
    # 2. MaxScore in row order over the cells left whose bound beats theta: the
    # terms by their largest weight, ascending; the longest prefix adding up
    # to no more than theta is non-essential (a row with only those terms
    # cannot enter); the essential terms' postings in a cell are the
    # candidates, completed with the non-essential terms by galloping
    # search, largest first, dropped once their bound is out of reach.
    order = np.empty(nq, dtype=np.int64)
    tb = np.empty(nq, dtype=np.int64)
    prefix = np.empty(nq, dtype=np.int64)
    for j in range(nq):
        tb[j] = np.int64(max_weight[terms[j]]) * mult[j]
        i = j
        while i > 0 and tb[order[i - 1]] > tb[j]:
            order[i] = order[i - 1]
            i -= 1
        order[i] = j
    run = np.int64(0)
    for i in range(nq):
        run += tb[order[i]]
        prefix[i] = run
    ne = 0
    c = 0
    while True:
        while ne < nq and prefix[ne] <= lim:
            ne += 1
        if ne == nq:
            break
        # the next cell from c holding an essential term's row
        nxt = n
        c0 = c << shift
        for i in range(ne, nq):
            j = order[i]
            p = pos[j]
            e = p1s[j]
            if p < e and rows[p] < c0:
                if cps[j] >= 0:
                    p = max(p, _cell_first(cell_pos, cps[j], c, term_offsets[terms[j]], p0s[j], e))
                if p < e and rows[p] < c0:
                    p = _gallop(rows, p, e, c0)
                pos[j] = p
            if p < e and rows[p] < nxt:
                nxt = rows[p]
        if nxt >= n:
            break
        c = nxt >> shift
        if bound[c] <= lim:
            c += 1
            while c < n_cells and bound[c] <= lim:
                c += 1
            if c >= n_cells:
                break
            continue
        bound[c] = -1
        c0 = c << shift
        c1 = min(c0 + width, n)
        word = np.uint64(0)
        for i in range(ne, nq):
            j = order[i]
            e = p1s[j]
            p = pos[j]
            mu = mult[j]
            start = p
            while p < e:
                r = rows[p]
                if r >= c1:
                    break
                if r >= c0:
                    x = r - c0
                    cacc[x] += weights[p] * mu
                    word |= np.uint64(1) << np.uint64(x)
                p += 1
            read += p - start
            pos[j] = p
        while word != 0:
            bit = _low_bit(word)
            word ^= np.uint64(1) << np.uint64(bit)
            s = cacc[bit]
            cacc[bit] = 0
            r = c0 + bit
            if use_mask and not mask[r]:
                continue
            alive = True
            for ii in range(ne - 1, -1, -1):
                if s + prefix[ii] <= lim:
                    alive = False
                    break
                jj = order[ii]
                pp = pos[jj]
                ee = p1s[jj]
                if pp < ee and rows[pp] < r:
                    if cps[jj] >= 0:
                        pp = max(pp, _cell_first(
                            cell_pos, cps[jj], c, term_offsets[terms[jj]], p0s[jj], ee
                        ))  # fmt: skip
                    if pp < ee and rows[pp] < r:
                        pp = _gallop(rows, pp, ee, r)
                    pos[jj] = pp
                if pp < ee and rows[pp] == r:
                    s += weights[pp] * mult[jj]
                    read += 1
            if alive and s > lim:
                size, lim = _offer_cell_row(hs, hr, size, k, s, r, lim)
        c += 1
        if c >= n_cells:
            break
    _heap_out(hs, hr, size, out_rows, out_scores)
    stats[0] = read
    stats[1] = total


@kernel
def _one(
    term_offsets, rows, weights, max_weight, block_offsets, block_max, cell_start, cell_max,
    cell_pos, shift, vocab, q_hashes, lo, hi, n, mask, k, block_size, window, acc, bits, bound,
    cacc, hs, hr, out_rows, out_scores, stats,
):  # fmt: skip
    """One query: :func:`_cells_one` when one of its terms has cells, else :func:`_pruned_one`."""
    if _has_cells(term_offsets, vocab, cell_start, q_hashes, lo, hi):
        _cells_one(
            term_offsets, rows, weights, max_weight, cell_start, cell_max, cell_pos, shift, vocab,
            q_hashes, lo, hi, n, mask, k, bound, cacc, hs, hr, out_rows, out_scores, stats,
        )  # fmt: skip
    else:
        _pruned_one(
            term_offsets, rows, weights, max_weight, block_offsets, block_max, vocab, q_hashes,
            lo, hi, n, mask, k, block_size, window, acc, bits, hs, hr, out_rows, out_scores, stats,
        )  # fmt: skip


@parallel_kernel
def _search_parallel(
    term_offsets, rows, weights, max_weight, block_offsets, block_max, cell_start, cell_max,
    cell_pos, shift, vocab, q_hashes, q_offsets, n, mask, k, block_size, window, n_blocks,
    out_rows, out_scores, stats,
):  # fmt: skip
    """:func:`_one` for every query; query ``q`` goes to block ``q % n_blocks``."""
    m = q_offsets.size - 1
    n_cells = (n + (np.int64(1) << shift) - 1) >> shift if cell_start.size else 0
    for blk in prange(n_blocks):
        acc = np.zeros(window, dtype=np.int64)
        bits = np.zeros((window + 63) >> 6, dtype=np.uint64)
        bound = np.empty(n_cells, dtype=np.int64)
        cacc = np.zeros(np.int64(1) << shift, dtype=np.int64)
        hs = np.empty(k, dtype=np.float32)
        hr = np.empty(k, dtype=np.int32)
        for q in range(blk, m, n_blocks):
            _one(
                term_offsets, rows, weights, max_weight, block_offsets, block_max, cell_start,
                cell_max, cell_pos, shift, vocab, q_hashes, q_offsets[q], q_offsets[q + 1], n,
                mask, k,
                block_size, window, acc, bits, bound, cacc, hs, hr, out_rows[q], out_scores[q],
                stats[q],
            )  # fmt: skip


@kernel
def _search_serial(
    term_offsets, rows, weights, max_weight, block_offsets, block_max, cell_start, cell_max,
    cell_pos, shift, vocab, q_hashes, q_offsets, n, mask, k, block_size, window, n_blocks,
    out_rows, out_scores, stats,
):  # fmt: skip
    """Serial twin of :func:`_search_parallel` (small batches)."""
    m = q_offsets.size - 1
    n_cells = (n + (np.int64(1) << shift) - 1) >> shift if cell_start.size else 0
    acc = np.zeros(window, dtype=np.int64)
    bits = np.zeros((window + 63) >> 6, dtype=np.uint64)
    bound = np.empty(n_cells, dtype=np.int64)
    cacc = np.zeros(np.int64(1) << shift, dtype=np.int64)
    hs = np.empty(k, dtype=np.float32)
    hr = np.empty(k, dtype=np.int32)
    for q in range(m):
        _one(
            term_offsets, rows, weights, max_weight, block_offsets, block_max, cell_start,
            cell_max, cell_pos, shift, vocab, q_hashes, q_offsets[q], q_offsets[q + 1], n, mask,
            k, block_size, window, acc, bits, bound, cacc, hs, hr, out_rows[q], out_scores[q],
            stats[q],
        )  # fmt: skip


@parallel_kernel
def _exhaustive_parallel(
    term_offsets, rows, weights, vocab, q_hashes, q_offsets, n, mask, k, n_blocks,
    out_rows, out_scores, stats,
):  # fmt: skip
    """:func:`_exhaustive_one` for every query (parallel over blocks of queries)."""
    m = q_offsets.size - 1
    for blk in prange(n_blocks):
        acc = np.zeros(n, dtype=np.int64)
        touched = np.empty(n, dtype=np.int32)
        hs = np.empty(k, dtype=np.float32)
        hr = np.empty(k, dtype=np.int32)
        for q in range(blk, m, n_blocks):
            _exhaustive_one(
                term_offsets, rows, weights, vocab, q_hashes, q_offsets[q],
                q_offsets[q + 1], n, mask, k, acc, touched, hs, hr, out_rows[q], out_scores[q],
                stats[q],
            )  # fmt: skip


@kernel
def _exhaustive_serial(
    term_offsets, rows, weights, vocab, q_hashes, q_offsets, n, mask, k, n_blocks,
    out_rows, out_scores, stats,
):  # fmt: skip
    """Serial twin of :func:`_exhaustive_parallel`."""
    m = q_offsets.size - 1
    acc = np.zeros(n, dtype=np.int64)
    touched = np.empty(n, dtype=np.int32)
    hs = np.empty(k, dtype=np.float32)
    hr = np.empty(k, dtype=np.int32)
    for q in range(m):
        _exhaustive_one(
            term_offsets, rows, weights, vocab, q_hashes, q_offsets[q], q_offsets[q + 1], n,
            mask, k, acc, touched, hs, hr, out_rows[q], out_scores[q], stats[q],
        )  # fmt: skip


@kernel
def _query_weights_pass(vocab, idf, q_hashes, q_offsets, out):
    """``out[q]`` = the sum of the idf of query ``q``'s known tokens (float64, then float32)."""
    for q in range(q_offsets.size - 1):
        total = 0.0
        for j in range(q_offsets[q], q_offsets[q + 1]):
            t = _find(vocab, q_hashes[j])
            if t >= 0 and t < idf.size:
                total += np.float64(idf[t])
        out[q] = np.float32(total)


def query_weights(
    vocab: np.ndarray, idf: np.ndarray, q_hashes: np.ndarray, q_offsets: np.ndarray
) -> np.ndarray:
    """Return every query's highest possible score: the sum of its known tokens' idf.

    Parameters
    ----------
    vocab : uint64[V]
        Sorted token hashes.
    idf : float32[V]
        Per-term idf.
    q_hashes : uint64[::1]
        Query token hashes, query after query (a repeated token counts again,
        an unknown one counts 0).
    q_offsets : int64[m + 1]
        Query ``q`` has tokens ``q_hashes[q_offsets[q]:q_offsets[q + 1]]``.

    Returns
    -------
    float32[m]
        The sums, accumulated in float64.
    """
    vocab, idf, q_hashes, q_offsets = frozen(vocab, idf, q_hashes, q_offsets)
    out = np.zeros(q_offsets.size - 1, dtype=np.float32)
    if out.size:
        _query_weights_pass(vocab, idf, q_hashes, q_offsets, out)
    return out


PARALLEL_MIN_QUERIES = 4
"""Below this many queries :func:`search` runs serially."""

BLOCK_SIZE = 128
"""Postings per block of :func:`block_maxima` (the default of new indexes)."""

WINDOW = 4096
"""Rows per window of the pruned search."""

METHODS = ("auto", "maxscore", "exhaustive")

PRUNE_MIN_POSTINGS = 1 << 15
"""``method="auto"`` prunes an index of at least this many postings and scores a
smaller one exhaustively: a query there reads at most ~32k postings (tens of
microseconds), pruning saves nothing worth its bookkeeping, and a small
knowledge base (a demo, a test) never compiles the pruned kernel."""

PRUNE_MAX_TOKENS = 48
"""``method="auto"`` scores a query of more tokens than this exhaustively: with
many terms few are non-essential and the pruned search pays per term per
window (measured at 1,017,118 chunks, one thread: pruning is 1.2x faster at
16-32 words, 0.54x at 64, 0.26x at 256), while the exhaustive search stays
bounded by the postings of the query's terms."""
"""Search methods of :func:`search`: block-max MaxScore, or every posting (the reference)."""


_NO_CELLS = frozen(
    np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
)


def _cell_positions(
    term_offsets: np.ndarray, rows: np.ndarray, weights: np.ndarray, cell_start: np.ndarray,
    n: int, shift: int,
) -> np.ndarray:  # fmt: skip
    """The ``cell_pos`` of :func:`cell_maxima` for the terms ``cell_start`` gives cells.

    For a caller holding only ``(cell_start, cell_max)``; cells laid out
    otherwise than :func:`cell_maxima` lays them (another index's) get no
    positions, and the kernel then finds a cell's postings by binary search.
    """
    n_cells = (int(n) + (1 << shift) - 1) >> shift
    terms = np.flatnonzero(cell_start >= 0).astype(np.int64)
    if cell_start.size != term_offsets.size - 1 or n_cells == 0 or terms.size == 0:
        return _NO_CELLS[2]
    terms = terms[np.argsort(cell_start[terms], kind="stable")]
    starts = np.arange(terms.size, dtype=np.int64) * n_cells
    if not np.array_equal(cell_start[terms], starts):
        return _NO_CELLS[2]
    out = np.zeros(terms.size * n_cells, dtype=np.int32)
    pos = np.zeros(terms.size * (n_cells + 1), dtype=np.int32)
    _cell_max_pass(term_offsets, rows, weights, terms, starts, np.int64(n), np.int64(shift), out,
                   pos)  # fmt: skip
    return readonly(pos)


def search(
    term_offsets: np.ndarray,
    rows: np.ndarray,
    weights: np.ndarray,
    max_weight: np.ndarray,
    block_offsets: np.ndarray,
    block_max: np.ndarray,
    vocab: np.ndarray,
    q_hashes: np.ndarray,
    q_offsets: np.ndarray,
    n: int,
    k: int,
    mask: np.ndarray,
    n_threads: int,
    *,
    block_size: int = BLOCK_SIZE,
    method: str = "auto",
    window: int = WINDOW,
    stats: bool = False,
    cells: tuple[np.ndarray, ...] | None = None,
    cell_shift: int = CELL_SHIFT,
) -> tuple[np.ndarray, ...]:
    """Best ``k`` rows of every query by BM25 score.

    Parameters
    ----------
    term_offsets : int64[V + 1]
        Postings offsets per term.
    rows : int32[nnz]
        Posting rows, increasing within a term.
    weights : int32[nnz]
        Posting weights (from :func:`weights`).
    max_weight : int32[V]
        Largest weight of every term (from :func:`term_maxima`).
    block_offsets : int64[V + 1]
        Term ``t`` owns blocks ``block_offsets[t]:block_offsets[t + 1]`` of
        ``block_max`` (from :func:`block_maxima`); a term whose block count
        does not match its postings is bounded by its ``max_weight``.
    block_max : int32[n_blocks]
        Largest weight of every block of ``block_size`` postings.
    vocab : uint64[V]
        Sorted token hashes.
    q_hashes : uint64[::1]
        Query token hashes, query after query (unknown hashes are ignored).
    q_offsets : int64[m + 1]
        Query ``q`` has tokens ``q_hashes[q_offsets[q]:q_offsets[q + 1]]``.
    n : int
        Number of rows.
    k : int
        Results per query, ``1 <= k <= n``.
    mask : bool[n] or bool[0]
        Eligible rows (``True``); an empty array means every row.
    n_threads : int
        Workers (parallel blocks); 1 or few queries run serially.
    block_size : int, default :data:`BLOCK_SIZE`
        Postings per block of ``block_max``.
    method : {"auto", "maxscore", "exhaustive"}, default "auto"
        Block-max MaxScore (:func:`_pruned_one`), or every posting of every
        query term (:func:`_exhaustive_one`, the reference); the two return
        identical rows and scores. ``"auto"`` prunes indexes of at least
        :data:`PRUNE_MIN_POSTINGS` postings, except for queries of more than
        :data:`PRUNE_MAX_TOKENS` tokens.
    window : int, default :data:`WINDOW`
        Rows per window of the pruned search.
    cells : (cell_start, cell_max, cell_pos), optional
        The row cells of the long terms (from :func:`cell_maxima` with
        ``cell_shift``): a pruned query with such a term is searched by
        :func:`_cells_one`, the others by :func:`_pruned_one`. Without
        ``cell_pos`` (a pair) the positions are computed here, for this call.
    cell_shift : int, default :data:`CELL_SHIFT`
        Cells of ``2**cell_shift`` rows.
    stats : bool, default False
        Also return, per query, the postings read and the postings of its
        terms (int64 ``(m, 2)``). The postings read include those that
        scored the seed rows in full, so on a tiny index they can outnumber
        the query's postings.

    Returns
    -------
    out_rows : int64[m, k]
        Best rows, best first (score descending, then lower row); only rows
        with a positive score, padded with ``-1``.
    out_scores : float32[m, k]
        Their scores, padded with ``-inf``.
    out_stats : int64[m, 2]
        Only with ``stats=True``.
    """
    arrays = (
        term_offsets, rows, weights, max_weight, block_offsets, block_max, vocab, q_hashes,
        q_offsets, mask,
    )  # fmt: skip
    (term_offsets, rows, weights, max_weight, block_offsets, block_max, vocab, q_hashes,
     q_offsets, mask) = frozen(*arrays)  # fmt: skip
    if not 0 <= cell_shift <= 6:  # a cell's rows are the bits of one uint64
        raise ValueError(f"cell_shift must be in [0, 6], got {cell_shift}")
    if cells is None:
        cell_start, cell_max, cell_pos = _NO_CELLS
    elif len(cells) == 2:
        cell_start, cell_max = frozen(*cells)
        cell_pos = _cell_positions(term_offsets, rows, weights, cell_start, n, cell_shift)
    else:
        cell_start, cell_max, cell_pos = frozen(*cells)
    m = q_offsets.size - 1
    out_rows = np.empty((m, k), dtype=np.int64)
    out_scores = np.empty((m, k), dtype=np.float32)
    out_stats = np.zeros((m, 2), dtype=np.int64)
    if method == "auto":
        method = "maxscore" if rows.size >= PRUNE_MIN_POSTINGS else "exhaustive"
        if method == "maxscore" and (
            # one question (the question path): its length alone, no array ops
            q_offsets[1] - q_offsets[0] > PRUNE_MAX_TOKENS
            if m == 1
            else bool((np.diff(q_offsets) > PRUNE_MAX_TOKENS).any())
        ):
            sizes = np.diff(q_offsets)
            long = sizes > PRUNE_MAX_TOKENS
            parts = [(np.flatnonzero(~long), "maxscore"), (np.flatnonzero(long), "exhaustive")]
            for which, part_method in parts:
                if which.size == 0:
                    continue
                starts, lengths = q_offsets[which], sizes[which]
                sub_offsets = np.zeros(which.size + 1, dtype=np.int64)
                np.cumsum(lengths, out=sub_offsets[1:])
                # token j of the sub-batch is token j - sub_offsets[q] + starts[q] of the batch
                shift = np.repeat(starts - sub_offsets[:-1], lengths)
                sub_hashes = q_hashes[np.arange(sub_offsets[-1]) + shift]
                got = search(
                    term_offsets, rows, weights, max_weight, block_offsets, block_max, vocab,
                    sub_hashes, sub_offsets, n, k, mask,
                    n_threads, block_size=block_size, method=part_method, window=window,
                    stats=True, cells=cells, cell_shift=cell_shift,
                )  # fmt: skip
                out_rows[which], out_scores[which], out_stats[which] = got
            return (out_rows, out_scores, out_stats) if stats else (out_rows, out_scores)
    if m > 0:
        serial = m < PARALLEL_MIN_QUERIES or n_threads <= 1
        blocks = 1 if serial else min(n_threads, m)
        if method == "exhaustive":
            fn = _exhaustive_serial if serial else _exhaustive_parallel
            fn(
                term_offsets, rows, weights, vocab, q_hashes, q_offsets, n, mask, k, blocks,
                out_rows, out_scores, out_stats,
            )  # fmt: skip
        else:
            fn = _search_serial if serial else _search_parallel
            fn(
                term_offsets, rows, weights, max_weight, block_offsets, block_max, cell_start,
                cell_max, cell_pos, np.int64(cell_shift), vocab, q_hashes, q_offsets, n, mask,
                k, int(block_size), int(window), blocks, out_rows, out_scores, out_stats,
            )  # fmt: skip
    if stats:
        return out_rows, out_scores, out_stats
    return out_rows, out_scores


def warmup() -> None:
    """Compile every kernel of this module (both methods, serial and parallel, masked or not).

    The drivers hand every input to the kernels read-only (see
    :func:`~._jit.frozen`), so one signature per kernel serves freshly built and
    memory-mapped indexes alike.
    """
    hashes, tok_offsets = _WARM_HASHES, _WARM_OFFSETS
    vocab, term_offsets, rows, tfs = warmup_build()
    # the engine grows an index with merge_indexes
    more = build_postings(hashes, tok_offsets, 3)
    merge_indexes(vocab, term_offsets, rows, tfs, *more)
    compact_postings(term_offsets, rows, tfs, np.array([1, 0, 1], dtype=np.uint8))
    query_weights(vocab, np.ones(vocab.size, dtype=np.float32), hashes, tok_offsets)
    warmup_search()


_WARM_HASHES = np.array([3, 1, 3, 2, 5, 1], dtype=np.uint64)
_WARM_OFFSETS = np.array([0, 3, 3, 6], dtype=np.int64)


def warmup_build() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Compile the kernels of a fresh build only (postings, impacts, weights, maxima).

    What a new knowledge base's keyword legs run; the demo's helper process
    compiles them while the demo chunks and tokenises. Returns the tiny
    index's ``(vocab, term_offsets, rows, tfs)``.
    """
    vocab, term_offsets, rows, tfs = build_postings(_WARM_HASHES, _WARM_OFFSETS)
    doc_len = np.diff(_WARM_OFFSETS).astype(np.int32)
    imp = impacts(rows, tfs, doc_len, 0.9, 0.4, 2.0)
    wts = weights(term_offsets, imp, np.ones(vocab.size, dtype=np.float32))
    term_maxima(term_offsets, wts)
    block_maxima(term_offsets, wts, BLOCK_SIZE)
    return vocab, term_offsets, rows, tfs


def warmup_search(
    methods: tuple[str, ...] = ("maxscore", "exhaustive"), parallel: bool = True
) -> None:
    """Compile the search kernels only, on a hand-made index (no build kernel is compiled).

    ``methods`` and ``parallel`` narrow it to what a caller will run: a
    small knowledge base searches ``("exhaustive",)`` serially.
    """
    vocab = np.array([1, 2, 3, 5], dtype=np.uint64)
    term_offsets = np.array([0, 2, 3, 5, 6], dtype=np.int64)
    rows = np.array([0, 2, 2, 0, 2, 2], dtype=np.int32)
    wts = np.full(rows.size, 1 << 20, dtype=np.int32)
    max_weight = np.full(vocab.size, 1 << 20, dtype=np.int32)
    block_offsets = np.arange(vocab.size + 1, dtype=np.int64)
    block_max = max_weight.copy()
    query_weights(vocab, np.ones(vocab.size, dtype=np.float32), vocab, np.array([0, 4], np.int64))
    # PARALLEL_MIN_QUERIES questions: the parallel drivers are compiled too
    hashes = np.array([3, 1, 3, 2, 5, 1], dtype=np.uint64)
    q_offsets = np.minimum(np.arange(PARALLEL_MIN_QUERIES + 1), hashes.size).astype(np.int64)
    q_offsets[-1] = hashes.size
    cells = cell_maxima(term_offsets, rows, wts, 3, CELL_SHIFT, 2)  # terms 1 and 3 have cells
    for method in methods:
        for mask in (np.zeros(0, dtype=np.bool_), np.ones(3, dtype=np.bool_)):
            for threads in (1, 2) if parallel else (1,):
                for with_cells in (None, cells) if method == "maxscore" else (None,):
                    search(
                        term_offsets, rows, wts, max_weight, block_offsets, block_max, vocab,
                        hashes, q_offsets, 3, 2, mask, threads, method=method, cells=with_cells,
                    )  # fmt: skip
