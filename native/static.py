"""Static (vocabulary) embedding kernels: a weighted mean of item vectors per text.

A *static table* gives every vocabulary item (a word, a CJK character or
bigram, a number) one dense vector. A text's vector is

    v(text) = sum over the text's tokens t of  coef[row(t)] * table[row(t)]

L2-normalised; tokens outside the vocabulary are ignored and a text with no
known token embeds to the zero vector. ``coef`` folds the item's weight
(smooth inverse frequency) and, for an ``int8`` table, its quantisation
scale, so the kernels read one float per token and one row of ``table``.

Tokens are found by the tokenizer's own kernel (``tokenize._tokenize_text``:
the same words, CJK characters and bigrams, folding and FNV-1a 64 hashes as
BM25 uses) over the Arrow string layout (``uint8`` bytes plus ``int64``
offsets); a hash is mapped to its row by an open-addressing table built once
per vocabulary (:func:`build_lookup`). No Python runs per text.

``embed_ids`` is the same weighted mean over token ids given in CSR form
(for subword tokenizers run outside the kernels, e.g. model2vec models).
``csr_matmul`` multiplies a CSR matrix by a dense one (distillation's
least-squares fit). The Python side (``fastrag.embed.static``) validates
every argument; these kernels trust them.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import frozen, kernel, parallel_kernel
from .tokenize import _slot, _tokenize_text, _wrapping

__all__ = [
    "PARALLEL_MIN_BYTES",
    "build_lookup",
    "csr_matmul",
    "embed_ids",
    "embed_static",
    "lookup_rows",
    "warmup",
]

PARALLEL_MIN_BYTES = 1 << 15
"""Below this many input bytes (or with one text) :func:`embed_static` runs serially."""


@kernel
def _build_lookup_pass(hashes, keys, rows):
    """Insert ``hashes[i] -> i`` into the empty table ``keys``/``rows`` (``rows == -1``)."""
    cap = keys.size
    mask = np.uint64(cap - 1)
    for i in range(hashes.size):
        h = hashes[i]
        pos = _slot(h, mask)
        while rows[pos] >= 0 and keys[pos] != h:
            pos = (pos + 1) & (cap - 1)
        keys[pos] = h
        rows[pos] = i


def build_lookup(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Open-addressing table from item hash to row, at most a quarter full.

    Parameters
    ----------
    hashes : uint64[::1]
        Distinct item hashes; row ``i`` is item ``i``.

    Returns
    -------
    keys : uint64[cap]
        The hash in each slot (meaningful where ``rows >= 0``).
    rows : int32[cap]
        The row in each slot, ``-1`` for an empty slot; ``cap`` is a power
        of two.
    """
    cap = 64
    while cap < 4 * hashes.size:
        cap *= 2
    keys = np.zeros(cap, dtype=np.uint64)
    rows = np.full(cap, -1, dtype=np.int32)
    (hashes,) = frozen(hashes)
    _build_lookup_pass(hashes, keys, rows)
    keys.flags.writeable = False
    rows.flags.writeable = False
    return keys, rows


@kernel(inline="always")
def _find(keys, rows, h):  # pragma: no cover - inlined
    """Row of hash ``h``, or -1."""
    cap = keys.size
    pos = _slot(h, np.uint64(cap - 1))
    while True:
        r = rows[pos]
        if r < 0:
            return -1
        if keys[pos] == h:
            return r
        pos = (pos + 1) & (cap - 1)


@kernel
def _embed_text(
    data,
    lo,
    hi,
    classes,
    fold,
    stop,
    cjk_mode,
    keys,
    rows,
    coef,
    table,
    scratch,
    found,
    empty_i,
    empty_k,
    row,
):
    """Write the L2-normalised weighted mean of the items of ``data[lo:hi]`` into ``row``."""
    dim = row.size
    for j in range(dim):
        row[j] = 0.0
    # np.int64/np.bool_: the tokenizer's own signature (literals would compile a second one)
    n = _tokenize_text(
        data, lo, hi, classes, fold, stop, cjk_mode, scratch, empty_i, empty_i, empty_k,
        np.int64(0), np.bool_(False),
    )  # fmt: skip
    # Resolve every token first (the hash-table probes overlap), then sum the rows.
    m = 0
    for t in range(n):
        r = _find(keys, rows, scratch[t])
        if r >= 0:
            found[m] = r
            m += 1
    for t in range(m):
        r = found[t]
        c = coef[r]
        src = table[r]
        for j in range(dim):
            row[j] += c * src[j]
    if m:
        sumsq = 0.0
        for j in range(dim):
            sumsq += row[j] * row[j]
        if sumsq > 0.0:
            scale = np.float32(1.0 / np.sqrt(sumsq))
            for j in range(dim):
                row[j] *= scale


@kernel
def _embed_serial(data, offsets, classes, fold, stop, cjk_mode, keys, rows, coef, table, out):
    """:func:`embed_static` on one thread (small batches, single questions)."""
    n = offsets.size - 1
    longest = 0
    for i in range(n):
        longest = max(longest, offsets[i + 1] - offsets[i])
    scratch = np.empty(max(longest, 1), dtype=np.uint64)
    found = np.empty(max(longest, 1), dtype=np.int32)
    empty_i = np.empty(0, dtype=np.int64)
    empty_k = np.empty(0, dtype=np.uint8)
    for i in range(n):
        _embed_text(
            data, offsets[i], offsets[i + 1], classes, fold, stop, cjk_mode, keys, rows, coef,
            table, scratch, found, empty_i, empty_k, out[i],
        )  # fmt: skip


@parallel_kernel
def _embed_parallel(
    data, offsets, classes, fold, stop, cjk_mode, keys, rows, coef, table, out, blocks
):
    """:func:`embed_static` over ``blocks`` contiguous ranges of texts in parallel."""
    n = offsets.size - 1
    for b in prange(blocks):
        lo = n * b // blocks
        hi = n * (b + 1) // blocks
        longest = 0
        for i in range(lo, hi):
            longest = max(longest, offsets[i + 1] - offsets[i])
        scratch = np.empty(max(longest, 1), dtype=np.uint64)
        found = np.empty(max(longest, 1), dtype=np.int32)
        empty_i = np.empty(0, dtype=np.int64)
        empty_k = np.empty(0, dtype=np.uint8)
        for i in range(lo, hi):
            _embed_text(
                data, offsets[i], offsets[i + 1], classes, fold, stop, cjk_mode, keys, rows,
                coef, table, scratch, found, empty_i, empty_k, out[i],
            )  # fmt: skip


def embed_static(
    data: np.ndarray,
    offsets: np.ndarray,
    classes: np.ndarray,
    fold: np.ndarray,
    stop: np.ndarray,
    cjk_mode: int,
    keys: np.ndarray,
    rows: np.ndarray,
    coef: np.ndarray,
    table: np.ndarray,
    out: np.ndarray,
    *,
    blocks: int = 1,
) -> None:
    """Embed every text into ``out`` (rows L2-normalised, or zero).

    Parameters
    ----------
    data : uint8[::1]
        UTF-8 bytes of all texts (read-only is fine; never written).
    offsets : int64[::1]
        ``n + 1`` non-decreasing offsets into ``data``.
    classes, fold, stop, cjk_mode
        The tokenizer's tables (see ``fastrag._native.tokenize``).
    keys : uint64[::1]
        Hash table keys from :func:`build_lookup`.
    rows : int32[::1]
        Hash table rows from :func:`build_lookup`.
    coef : float32[::1]
        Per-item factor (weight times quantisation scale), one per table row.
    table : float32[:, ::1] or int8[:, ::1]
        ``(items, dim)`` item vectors.
    out : float32[:, ::1]
        Writable ``(n, dim)``; every element is overwritten.
    blocks : int, default 1
        Ranges of texts run in parallel; ``1`` runs serially in one call.
    """
    data, offsets, classes, fold, stop, keys, rows, coef, table = frozen(
        data, offsets, classes, fold, stop, keys, rows, coef, table
    )
    with _wrapping():
        if blocks <= 1:
            _embed_serial(
                data, offsets, classes, fold, stop, cjk_mode, keys, rows, coef, table, out
            )
        else:
            _embed_parallel(
                data, offsets, classes, fold, stop, cjk_mode, keys, rows, coef, table, out,
                blocks,
            )  # fmt: skip


@parallel_kernel
def _lookup_pass(keys, rows, hashes, out):
    for i in prange(hashes.size):
        out[i] = _find(keys, rows, hashes[i])


def lookup_rows(keys: np.ndarray, rows: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """Row of every hash in the table of :func:`build_lookup` (``-1`` when absent).

    Parameters
    ----------
    keys, rows : numpy.ndarray
        From :func:`build_lookup`.
    hashes : uint64[::1]
        Token hashes.

    Returns
    -------
    int32[hashes.size]
        Rows.
    """
    keys, rows, hashes = frozen(keys, rows, hashes)
    out = np.empty(hashes.size, dtype=np.int32)
    _lookup_pass(keys, rows, hashes, out)
    return out


@parallel_kernel
def _embed_ids_pass(id_offsets, ids, row_of_id, coef_of_id, table, out):
    n = id_offsets.size - 1
    dim = out.shape[1]
    n_ids = row_of_id.size
    for i in prange(n):
        row = out[i]
        for j in range(dim):
            row[j] = 0.0
        hit = False
        for t in range(id_offsets[i], id_offsets[i + 1]):
            tid = ids[t]
            if tid < 0 or tid >= n_ids:
                continue
            r = row_of_id[tid]
            if r < 0:
                continue
            c = coef_of_id[tid]
            src = table[r]
            for j in range(dim):
                row[j] += c * src[j]
            hit = True
        if hit:
            sumsq = 0.0
            for j in range(dim):
                sumsq += row[j] * row[j]
            if sumsq > 0.0:
                scale = np.float32(1.0 / np.sqrt(sumsq))
                for j in range(dim):
                    row[j] *= scale


def embed_ids(
    id_offsets: np.ndarray,
    ids: np.ndarray,
    row_of_id: np.ndarray,
    coef_of_id: np.ndarray,
    table: np.ndarray,
    out: np.ndarray,
) -> None:
    """Weighted mean of the table rows of token ids, per text, L2-normalised (or zero).

    Parameters
    ----------
    id_offsets : int64[::1]
        ``n + 1`` offsets into ``ids``.
    ids : int64[::1]
        Token ids; ids outside ``[0, row_of_id.size)`` are ignored.
    row_of_id : int64[::1]
        Table row of every token id (``-1``: ignored, e.g. the unknown token).
    coef_of_id : float32[::1]
        Weight of every token id.
    table : float32[:, ::1]
        ``(rows, dim)`` vectors.
    out : float32[:, ::1]
        Writable ``(n, dim)``.
    """
    id_offsets, ids, row_of_id, coef_of_id, table = frozen(
        id_offsets, ids, row_of_id, coef_of_id, table
    )
    _embed_ids_pass(id_offsets, ids, row_of_id, coef_of_id, table, out)


@parallel_kernel
def _csr_matmul_pass(indptr, cols, vals, dense, out):
    n = indptr.size - 1
    d = dense.shape[1]
    for i in prange(n):
        row = out[i]
        for j in range(d):
            row[j] = 0.0
        for t in range(indptr[i], indptr[i + 1]):
            v = vals[t]
            src = dense[cols[t]]
            for j in range(d):
                row[j] += v * src[j]


def csr_matmul(
    indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray, dense: np.ndarray
) -> np.ndarray:
    """``A @ dense`` for a CSR matrix ``A`` (parallel over rows of ``A``).

    Parameters
    ----------
    indptr : int64[::1]
        ``n + 1`` row pointers.
    cols : int32[::1]
        Column of every stored value (in ``[0, dense.shape[0])``).
    vals : float32[::1]
        Stored values.
    dense : float32[:, ::1]
        ``(A.shape[1], d)``.

    Returns
    -------
    float32[n, d]
        The product.
    """
    indptr, cols, vals, dense = frozen(indptr, cols, vals, dense)
    out = np.empty((indptr.size - 1, dense.shape[1]), dtype=np.float32)
    _csr_matmul_pass(indptr, cols, vals, dense, out)
    return out


def warmup() -> None:
    """Compile every signature the engine uses (float32 and int8 tables, serial and parallel)."""
    from .tokenize import CJK, CJK_BOTH, WORD

    raw = np.frombuffer("Ab, c \u4e2d\u6587 x".encode(), dtype=np.uint8)
    offs = np.array([0, 3, raw.size], dtype=np.int64)
    classes = np.zeros(0x10000, dtype=np.uint8)
    classes[ord("A") : ord("z") + 1] = WORD
    classes[0x4E00:0xA000] = CJK
    fold = np.arange(0x10000, dtype=np.int32)
    stop = np.zeros(0, dtype=np.uint64)
    hashes = np.array([1, 2], dtype=np.uint64)
    keys, rows = build_lookup(hashes)
    coef = np.ones(2, dtype=np.float32)
    out = np.empty((2, 4), dtype=np.float32)
    for table in (np.ones((2, 4), dtype=np.float32), np.ones((2, 4), dtype=np.int8)):
        for blocks in (1, 2):
            embed_static(
                raw, offs, classes, fold, stop, CJK_BOTH, keys, rows, coef, table, out,
                blocks=blocks,
            )  # fmt: skip
    lookup_rows(keys, rows, hashes)
    id_offsets = np.array([0, 2, 3], dtype=np.int64)
    ids = np.array([0, 1, 1], dtype=np.int64)
    embed_ids(id_offsets, ids, np.arange(2, dtype=np.int64), coef, np.ones((2, 4), np.float32), out)
    csr_matmul(
        id_offsets, ids[:3].astype(np.int32), np.ones(3, np.float32), np.ones((2, 4), np.float32)
    )
