"""Vocabulary (character-count) embedding kernels over UTF-8 text.

Text arrives in the Arrow string layout: one ``uint8`` buffer of UTF-8 bytes
plus ``int64`` offsets (``offsets[i]:offsets[i + 1]`` is text ``i``). A
vocabulary is a lookup table from code point to column: ``table[cp]`` is the
column of code point ``cp`` or ``-1``; code points ``>= table.size`` are out
of vocabulary. The Python side (``fastrag.embedding``) validates inputs and
builds the table; these kernels trust them.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import held_kernel, kernel, parallel_kernel

__all__ = ["count_codepoints", "embed_counts", "embed_counts_held", "warmup"]


@kernel
def _decode(data, p):  # pragma: no cover - inlined into the kernels below
    """Decode the UTF-8 sequence starting at ``data[p]``; return ``(code point, width)``."""
    b0 = np.int64(data[p])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xE0:
        return ((b0 & 0x1F) << 6) | (np.int64(data[p + 1]) & 0x3F), 2
    if b0 < 0xF0:
        return (
            ((b0 & 0x0F) << 12)
            | ((np.int64(data[p + 1]) & 0x3F) << 6)
            | (np.int64(data[p + 2]) & 0x3F)
        ), 3
    return (
        ((b0 & 0x07) << 18)
        | ((np.int64(data[p + 1]) & 0x3F) << 12)
        | ((np.int64(data[p + 2]) & 0x3F) << 6)
        | (np.int64(data[p + 3]) & 0x3F)
    ), 4


@kernel
def _count_range(data, lo, hi, hist):
    p = lo
    while p < hi:
        cp, w = _decode(data, p)
        hist[cp] += 1
        p += w


@parallel_kernel
def count_codepoints(data, lo, hi, hists):
    """Add the count of every code point in ``data[lo:hi]`` to ``hists``.

    The range is cut into ``hists.shape[0]`` slices at code-point boundaries,
    counted in parallel, each into its own row; the caller sums the rows once
    at the end (so a stream of batches never allocates or reduces a
    histogram per batch).

    Parameters
    ----------
    data : uint8[::1]
        Valid UTF-8 bytes (read-only or writable).
    lo, hi : int
        Byte range to count; both must fall on code-point boundaries.
    hists : int64[:, ::1]
        Writable ``(parts, 0x110000)`` accumulators; ``hists[t, cp]`` grows
        by the occurrences of code point ``cp`` in slice ``t``.
    """
    parts = hists.shape[0]
    size = hi - lo
    cuts = np.empty(parts + 1, dtype=np.int64)
    cuts[0] = lo
    cuts[parts] = hi
    for t in range(1, parts):
        # Step forward over continuation bytes to the next code point.
        c = lo + size * t // parts
        while c < hi and (data[c] & 0xC0) == 0x80:
            c += 1
        cuts[t] = max(c, cuts[t - 1])
    for t in prange(parts):
        _count_range(data, cuts[t], cuts[t + 1], hists[t])


@parallel_kernel
def embed_counts(data, offsets, table, out):
    """Write the L2-normalised vocabulary counts of each text into ``out``.

    Parameters
    ----------
    data : uint8[::1]
        Valid UTF-8 bytes of all texts.
    offsets : int64[::1]
        ``n + 1`` byte offsets into ``data``.
    table : int32[::1]
        Code point to column (``-1`` = out of vocabulary); code points at or
        past ``table.size`` are out of vocabulary.
    out : float32[:, ::1]
        Writable ``(n, dim)`` output; every element is overwritten. A text with
        no vocabulary character gets an all-zero row (never NaN).
    """
    for i in prange(offsets.size - 1):
        _embed_row(data, offsets[i], offsets[i + 1], table, out[i])


@held_kernel
def embed_counts_held(data, offsets, table, out):
    """:func:`embed_counts` on the calling thread, the GIL held: a question's few bytes.

    Releasing the GIL for a microsecond kernel hands it to another thread
    and waits to get it back; with many caller threads that wait costs more
    than the kernel. Same rows as :func:`embed_counts`, bit for bit (one
    row function).
    """
    for i in range(offsets.size - 1):
        _embed_row(data, offsets[i], offsets[i + 1], table, out[i])


@kernel
def _embed_row(data, p, end, table, row):  # pragma: no cover - compiled
    """One text's L2-normalised vocabulary counts into ``row``."""
    dim = row.size
    limit = table.size
    for j in range(dim):
        row[j] = 0.0
    sumsq = 0.0
    while p < end:
        cp, w = _decode(data, p)
        p += w
        if cp < limit:
            col = table[cp]
            if col >= 0:
                c = row[col]
                # (c + 1)^2 - c^2: the squared norm grows as the counts do.
                sumsq += 2.0 * c + 1.0
                row[col] = c + 1.0
    if sumsq > 0.0:
        scale = np.float32(1.0 / np.sqrt(sumsq))
        for j in range(dim):
            row[j] *= scale


def warmup() -> None:
    """Compile the kernels' one signature each (read-only text and table), or load it.

    ``fastrag.embedding`` passes the text buffers as read-only views (no
    copy), so writable and read-only callers share these signatures.
    """
    data = np.frombuffer("a 中😀".encode(), dtype=np.uint8)  # read-only
    offsets = np.array([0, data.size], dtype=np.int64)
    offsets.flags.writeable = False
    table = np.array([-1, 0], dtype=np.int32)
    table.flags.writeable = False
    count_codepoints(data, 0, data.size, np.zeros((1, 0x110000), dtype=np.int64))
    embed_counts(data, offsets, table, np.empty((1, 1), dtype=np.float32))
    embed_counts_held(data, offsets, table, np.empty((1, 1), dtype=np.float32))
