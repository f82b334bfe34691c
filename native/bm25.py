"""BM25 kernels: postings from token hashes, and batched top-k scoring.

An index is *term-major* (CSC): the vocabulary is a sorted ``uint64`` array of
token hashes; term ``t`` (its position in the vocabulary) has postings
``term_offsets[t]:term_offsets[t + 1]`` in ``rows`` (``int32``, increasing),
``tfs`` (``int32``, term frequency in that row) and ``impacts`` (``float32``,
the term-frequency component of Lucene's BM25)::

    impact = tf / (tf + k1 * (1 - b + b * doc_len / avgdl))
    idf    = log(1 + (N - df + 0.5) / (df + 0.5))
    score(q, d) = sum over the tokens t of q of  idf[t] * impact[t, d]

(a query token that occurs twice counts twice, as in Lucene and bm25s). This
is Lucene's ``BM25Similarity`` since Lucene 8, which dropped the constant
factor ``k1 + 1`` of the textbook formula (ranking is unchanged), and bm25s
``method="lucene"``.
Scoring is term-at-a-time into a dense per-thread accumulator; top-k is
selected among the rows with a positive score (rows without a query term are
never hits): for queries reading few postings from a *touched* list of the
rows they reached, for the others by one scan of the accumulator; and terms
that cannot change the top k are skipped (see :func:`_search_one`). Queries
run in parallel, each worker on its own accumulator.
Ranking: higher score first, ties broken by the lower row.

Kernels never write into their inputs and never raise on user input; the
scoring kernel also stays in bounds on corrupt postings (rows outside
``[0, n)`` and offsets outside the postings are skipped).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import frozen, kernel, parallel_kernel

__all__ = [
    "PARALLEL_MIN_QUERIES",
    "compact_postings",
    "doc_terms",
    "impacts",
    "max_impacts",
    "merge_postings",
    "search",
    "transpose",
    "warmup",
]


# -- building ----------------------------------------------------------------



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
def _max_impact_pass(term_offsets, impacts, out):
    """``out[t]`` = largest impact of term ``t`` (parallel over terms)."""
    for t in prange(term_offsets.size - 1):
        best = np.float32(0.0)
        for p in range(term_offsets[t], term_offsets[t + 1]):
            if impacts[p] > best:
                best = impacts[p]
        out[t] = best


def max_impacts(term_offsets: np.ndarray, impacts: np.ndarray) -> np.ndarray:
    """Return the largest impact of every term.

    Parameters
    ----------
    term_offsets : int64[V + 1]
        Postings offsets per term.
    impacts : float32[nnz]
        Posting tf components.

    Returns
    -------
    float32[V]
        Per-term maximum (0 for a term without postings).
    """
    term_offsets, impacts = frozen(term_offsets, impacts)
    out = np.empty(term_offsets.size - 1, dtype=np.float32)
    _max_impact_pass(term_offsets, impacts, out)
    return out


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


# -- scoring -----------------------------------------------------------------


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


@kernel(inline="always")
def _worse(s1, r1, s2, r2):  # pragma: no cover - inlined
    """Whether ``(s1, r1)`` ranks after ``(s2, r2)``: lower score, or equal and higher row."""
    if s1 != s2:
        return s1 < s2
    return r1 > r2


@kernel
def _sift_down(hs, hr, size, pos):
    """Restore the heap (worst at the root) below ``pos``."""
    s = hs[pos]
    r = hr[pos]
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        right = child + 1
        if right < size and _worse(hs[right], hr[right], hs[child], hr[child]):
            child = right
        if _worse(hs[child], hr[child], s, r):
            hs[pos] = hs[child]
            hr[pos] = hr[child]
            pos = child
        else:
            break
    hs[pos] = s
    hr[pos] = r


@kernel
def _heap_push(hs, hr, size, s, r):
    """Add ``(s, r)`` to a heap of ``size`` entries (room is guaranteed); return the new size."""
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        if _worse(s, r, hs[parent], hr[parent]):
            hs[pos] = hs[parent]
            hr[pos] = hr[parent]
            pos = parent
        else:
            break
    hs[pos] = s
    hr[pos] = r
    return size + 1


@kernel
def _kth_best(acc, rows_list, count, mask, k, hs, hr):
    """Score of the ``k``-th best eligible row among ``rows_list[:count]`` (0 if fewer)."""
    use_mask = mask.size > 0
    size = 0
    for j in range(count):
        r = rows_list[j]
        s = acc[r]
        if use_mask and not mask[r]:
            continue
        if size < k:
            size = _heap_push(hs, hr, size, s, r)
        elif _worse(hs[0], hr[0], s, r):
            hs[0] = s
            hr[0] = r
            _sift_down(hs, hr, size, 0)
    if size < k:
        return np.float32(0.0)
    return hs[0]


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
def _search_one(
    term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, lo, hi, n, mask, k,
    acc, touched, cand, hs, hr, out_rows, out_scores,
):
    """Score one query and write its best ``<= k`` rows, padded with ``(-1, -inf)``.

    Query terms are taken rarest first (fewest postings; ties by term id), the
    same order on every path, so a row's score does not depend on the path:

    - *sparse*: a row enters ``touched`` the first time it scores;
    - *pruned*: before a term with more postings than touched rows, the
      ``k``-th best score so far (``bar``, a lower bound of the final one) is
      compared with the most the remaining terms can add to a row
      (``idf * max_impact`` per term): when that is below ``bar`` no
      untouched row can enter the top ``k``, so the remaining terms only
      update the candidate rows (the touched rows that can still reach
      ``bar``), found by galloping search in the postings instead of reading
      them whole;
    - *dense*: when the postings read would exceed ``n / 4`` without pruning,
      the remaining terms accumulate with no bookkeeping and top-k is one scan
      of the accumulator in row order.

    ``acc`` is all zeros on entry and on exit.
    """
    nnz = rows.size
    n_terms = idf.size
    nq_max = hi - lo
    terms = np.empty(nq_max, dtype=np.int64)
    lens = np.empty(nq_max, dtype=np.int64)
    nq = 0
    for j in range(lo, hi):
        t = _find(vocab, q_hashes[j])
        if t < 0 or t >= n_terms:
            continue
        p0 = max(term_offsets[t], 0)
        p1 = min(term_offsets[t + 1], nnz)
        if p1 <= p0:
            continue
        # insertion sort by (postings, term id)
        pos = nq
        while pos > 0 and (
            lens[pos - 1] > p1 - p0 or (lens[pos - 1] == p1 - p0 and terms[pos - 1] > t)
        ):
            terms[pos] = terms[pos - 1]
            lens[pos] = lens[pos - 1]
            pos -= 1
        terms[pos] = t
        lens[pos] = p1 - p0
        nq += 1
    # rest[j]: the most terms j.. can add to one row (float64, with a margin for rounding)
    rest = np.zeros(nq + 1, dtype=np.float64)
    for j in range(nq - 1, -1, -1):
        t = terms[j]
        rest[j] = rest[j + 1] + np.float64(idf[t]) * np.float64(max_impact[t])
    for j in range(nq):
        rest[j] = rest[j] * 1.0001 + 1e-6
    use_mask = mask.size > 0
    cap = touched.size
    mode = 0  # 0 sparse, 1 pruned, 2 dense
    nt = 0
    nc = 0
    read = 0
    bar = np.float32(0.0)
    for j in range(nq):
        t = terms[j]
        w = idf[t]
        p0 = max(term_offsets[t], 0)
        p1 = min(term_offsets[t + 1], nnz)
        if mode == 0 and j > 0 and nt >= k and lens[j] > nt:
            bar = _kth_best(acc, touched, nt, mask, k, hs, hr)
            if rest[j] < bar:
                mode = 1
                nc = 0
                for i in range(nt):
                    r = touched[i]
                    if (not use_mask or mask[r]) and acc[r] + rest[j] >= bar:
                        cand[nc] = r
                        nc += 1
                cand[:nc].sort()
        if mode == 0 and 4 * (read + lens[j]) >= n:
            mode = 2
        if mode == 0:
            for p in range(p0, p1):
                r = rows[p]
                if 0 <= r < n:
                    s = acc[r]
                    if s == 0 and nt < cap:
                        touched[nt] = r
                        nt += 1
                    acc[r] = s + w * impacts[p]
            read += p1 - p0
        elif mode == 2:
            for p in range(p0, p1):
                r = rows[p]
                if 0 <= r < n:
                    acc[r] += w * impacts[p]
        else:
            if j > 0 and mode == 1:
                # drop candidates that can no longer reach the bar
                keep = 0
                for i in range(nc):
                    r = cand[i]
                    if acc[r] + rest[j] >= bar:
                        cand[keep] = r
                        keep += 1
                nc = keep
            pos = p0
            for i in range(nc):
                r = cand[i]
                pos = _gallop(rows, pos, p1, r)
                if pos >= p1:
                    break
                if rows[pos] == r:
                    acc[r] += w * impacts[pos]
    size = 0
    if mode == 2:
        # Branch-light scan: once the heap is full its root is the bar, and
        # few rows pass it; every entry is reset whatever its value.
        bar = np.float32(0.0)
        for r in range(n):
            s = acc[r]
            acc[r] = 0
            if s > bar:
                if use_mask and not mask[r]:
                    continue
                if size < k:
                    size = _heap_push(hs, hr, size, s, r)
                    if size == k:
                        bar = hs[0]
                else:
                    hs[0] = s
                    hr[0] = r
                    _sift_down(hs, hr, size, 0)
                    bar = hs[0]
    else:
        src = cand if mode == 1 else touched
        count = nc if mode == 1 else nt
        for j in range(count):
            r = src[j]
            s = acc[r]
            if not s > 0 or (use_mask and not mask[r]):
                continue
            if size < k:
                size = _heap_push(hs, hr, size, s, r)
            elif _worse(hs[0], hr[0], s, r):
                hs[0] = s
                hr[0] = r
                _sift_down(hs, hr, size, 0)
        for j in range(nt):
            acc[touched[j]] = 0
    # heap sort: the worst goes to the end first, so the array ends up best first
    for end in range(size - 1, 0, -1):
        s = hs[end]
        r = hr[end]
        hs[end] = hs[0]
        hr[end] = hr[0]
        hs[0] = s
        hr[0] = r
        _sift_down(hs, hr, end, 0)
    for j in range(size):
        out_rows[j] = hr[j]
        out_scores[j] = hs[j]
    for j in range(size, out_rows.size):
        out_rows[j] = -1
        out_scores[j] = -np.inf


@parallel_kernel
def _search_parallel(
    term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, q_offsets, n, mask, k,
    n_blocks, out_rows, out_scores,
):
    """Score every query; query ``q`` goes to block ``q % n_blocks`` (parallel over blocks)."""
    m = q_offsets.size - 1
    for blk in prange(n_blocks):
        acc = np.zeros(n, dtype=np.float32)
        touched = np.empty(n, dtype=np.int32)
        cand = np.empty(n, dtype=np.int32)
        hs = np.empty(k, dtype=np.float32)
        hr = np.empty(k, dtype=np.int32)
        for q in range(blk, m, n_blocks):
            _search_one(
                term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, q_offsets[q],
                q_offsets[q + 1], n, mask, k, acc, touched, cand, hs, hr, out_rows[q],
                out_scores[q],
            )


@kernel
def _search_serial(
    term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, q_offsets, n, mask, k,
    n_blocks, out_rows, out_scores,
):
    """Serial twin of :func:`_search_parallel` (small batches)."""
    m = q_offsets.size - 1
    acc = np.zeros(n, dtype=np.float32)
    touched = np.empty(n, dtype=np.int32)
    cand = np.empty(n, dtype=np.int32)
    hs = np.empty(k, dtype=np.float32)
    hr = np.empty(k, dtype=np.int32)
    for q in range(m):
        _search_one(
            term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, q_offsets[q],
            q_offsets[q + 1], n, mask, k, acc, touched, cand, hs, hr, out_rows[q], out_scores[q],
        )


PARALLEL_MIN_QUERIES = 4
"""Below this many queries :func:`search` runs serially."""


def search(
    term_offsets: np.ndarray,
    rows: np.ndarray,
    impacts: np.ndarray,
    idf: np.ndarray,
    max_impact: np.ndarray,
    vocab: np.ndarray,
    q_hashes: np.ndarray,
    q_offsets: np.ndarray,
    n: int,
    k: int,
    mask: np.ndarray,
    n_threads: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Best ``k`` rows of every query by BM25 score.

    Parameters
    ----------
    term_offsets : int64[V + 1]
        Postings offsets per term.
    rows : int32[nnz]
        Posting rows.
    impacts : float32[nnz]
        Posting tf components.
    idf : float32[V]
        Per-term idf.
    max_impact : float32[V]
        Largest impact of every term (bounds what a term adds to a row).
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

    Returns
    -------
    out_rows : int64[m, k]
        Best rows, best first (score descending, then lower row); only rows
        with a positive score, padded with ``-1``.
    out_scores : float32[m, k]
        Their scores, padded with ``-inf``.
    """
    arrays = (term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, q_offsets, mask)
    term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, q_offsets, mask = frozen(
        *arrays
    )
    m = q_offsets.size - 1
    out_rows = np.empty((m, k), dtype=np.int64)
    out_scores = np.empty((m, k), dtype=np.float32)
    if m == 0:
        return out_rows, out_scores
    if m < PARALLEL_MIN_QUERIES or n_threads <= 1:
        _search_serial(
            term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, q_offsets, n, mask,
            k, 1, out_rows, out_scores,
        )
    else:
        _search_parallel(
            term_offsets, rows, impacts, idf, max_impact, vocab, q_hashes, q_offsets, n, mask,
            k, min(n_threads, m), out_rows, out_scores,
        )
    return out_rows, out_scores


def warmup() -> None:
    """Compile every kernel of this module (serial and parallel search, with and without a mask).

    The drivers hand every input to the kernels read-only (see
    :func:`~._jit.frozen`), so one signature per kernel serves freshly built and
    memory-mapped indexes alike.
    """
    hashes = np.array([3, 1, 3, 2, 5, 1], dtype=np.uint64)
    tok_offsets = np.array([0, 3, 3, 6], dtype=np.int64)
    pair_hash, pair_tf, pair_offsets = doc_terms(hashes, tok_offsets)
    vocab = np.unique(pair_hash)
    pair_term = np.searchsorted(vocab, pair_hash).astype(np.int64)
    term_offsets, rows, tfs = transpose(pair_term, pair_tf, pair_offsets, vocab.size)
    doc_len = np.diff(tok_offsets).astype(np.int32)
    remap = np.arange(vocab.size, dtype=np.int64)
    imp = impacts(rows, tfs, doc_len, 0.9, 0.4, 2.0)
    mx = max_impacts(term_offsets, imp)
    idf = np.ones(vocab.size, dtype=np.float32)
    merge_postings(term_offsets, rows, tfs, remap, pair_term, pair_tf, pair_offsets, 3, vocab.size)
    compact_postings(term_offsets, rows, tfs, np.array([1, 0, 1], dtype=np.uint8))
    for mask in (np.zeros(0, dtype=np.bool_), np.ones(3, dtype=np.bool_)):
        for threads in (1, 2):
            search(
                term_offsets, rows, imp, idf, mx, vocab, hashes, tok_offsets, 3, 2, mask, threads
            )
