r"""White-space normalisation and fixed-window chunking over UTF-8 text.

Text arrives in the Arrow ``large_string`` layout: one ``uint8`` buffer of
UTF-8 bytes plus ``int64`` offsets (``data[offsets[i]:offsets[i + 1]]`` is
document ``i``; ``offsets[0]`` need not be 0 when the array is a slice). Each
document is normalised exactly like ``re.sub(r"\\s+", " ", text).strip()``
(Unicode white space, as ``str.isspace``) and cut into windows of ``window``
code points, consecutive windows overlapping by ``overlap`` code points; the
last window ends at the end of the document. Positions count code points,
never bytes, and a UTF-8 sequence is never split.

:func:`chunk_utf8` makes two passes, each parallel over documents (serial
for small batches, where waking the thread pool costs more than it saves):

1. normalise each document into a buffer of its own size (it stays in cache)
   and walk the clean bytes once to find the byte position of every
   character where a window starts or ends; keep only those positions and
   the sizes;
2. after prefix sums over the documents, normalise each document again and
   write its rows of the chunk table and its chunk bytes to the output.

Normalising twice is cheaper than keeping a batch-sized scratch buffer: the
fresh pages of such a buffer cost more than the second normalisation (on a
VM whose host reclaims free guest memory, several times more), and peak
memory stays at input plus output. Most bytes need no work: normalisation
copies 32-byte blocks with a branch-free, vectorised test for "anything
here that may be white space to collapse", and the character walk counts
UTF-8 lead bytes eight at a time in a 64-bit word. The byte-class lookup
table (:func:`byte_classes`) serves the rare bytes that do need work.

The Python side (``fastrag.chunking``) validates ``window``/``overlap`` and the
text; these kernels trust their arguments but never read or write out of
bounds, even on malformed UTF-8 (the result is then unspecified).
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import kernel, parallel_kernel, readonly

__all__ = ["byte_classes", "chunk_utf8", "join_windows", "warmup"]

# Byte classes (see ``byte_classes``).
_OTHER = 0
_SPACE = 1
_MAYBE = 2

_BLOCK = 32  # bytes examined at once when copying


@kernel
def byte_classes() -> np.ndarray:
    """Return the byte-class table used by :func:`chunk_utf8`.

    Returns
    -------
    uint8[256]
        ``1`` for ASCII white space (``0x09``-``0x0D``, ``0x1C``-``0x20``);
        ``2`` for a lead byte that may start a multi-byte white-space character
        (``0xC2``: U+0085, U+00A0; ``0xE1``: U+1680; ``0xE2``: U+2000-U+200A,
        U+2028, U+2029, U+202F, U+205F; ``0xE3``: U+3000); ``0`` otherwise.
    """
    table = np.zeros(256, dtype=np.uint8)
    for b in range(0x09, 0x0E):
        table[b] = _SPACE
    for b in range(0x1C, 0x21):
        table[b] = _SPACE
    table[0xC2] = _MAYBE
    table[0xE1] = _MAYBE
    table[0xE2] = _MAYBE
    table[0xE3] = _MAYBE
    return table


@kernel(inline="always")
def _space_width(src, p, end, classes) -> int:  # pragma: no cover - inlined
    """Width in bytes of the white-space character at ``src[p]``, or 0 if it is none.

    ``p < end`` must hold; bytes at or past ``end`` are never read.
    """
    b0 = src[p]
    c = classes[b0]
    if c == _SPACE:
        return 1
    if c == _OTHER:
        return 0
    if b0 == 0xC2:
        if p + 1 < end:
            b1 = src[p + 1]
            if b1 == 0x85 or b1 == 0xA0:
                return 2
        return 0
    if p + 2 >= end:
        return 0
    b1 = src[p + 1]
    b2 = src[p + 2]
    if b0 == 0xE2:
        if b1 == 0x80:
            if (0x80 <= b2 <= 0x8A) or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF:
                return 3
        elif b1 == 0x81 and b2 == 0x9F:
            return 3
        return 0
    if b0 == 0xE3:
        return 3 if (b1 == 0x80 and b2 == 0x80) else 0
    # 0xE1: U+1680 OGHAM SPACE MARK
    return 3 if (b1 == 0x9A and b2 == 0x80) else 0


@kernel(inline="always")
def _needs_work(x, y, z) -> bool:  # pragma: no cover - inlined
    """Whether byte ``x`` (followed by ``y``, ``z``) may start white space to collapse.

    True for every white-space character except a single ``0x20`` followed by
    a byte that cannot start white space; a few other bytes are flagged too
    (control characters, a space before a ``0xE1``-``0xE3`` lead): the exact
    test in :func:`_space_width` sorts them out. Callers pass ``0`` for bytes
    past the end, so a final ``0x20`` is flagged.
    """
    return (
        (x < 0x20)
        | ((x == 0x20) & ((y <= 0x20) | (y == 0xC2) | ((y >= 0xE1) & (y <= 0xE3))))
        | ((x == 0xC2) & ((y == 0x85) | (y == 0xA0)))
        | ((x == 0xE1) & (y == 0x9A) & (z == 0x80))
        | ((x == 0xE2) & (y == 0x80) & ((z <= 0x8A) | (z == 0xA8) | (z == 0xA9) | (z == 0xAF)))
        | ((x == 0xE2) & (y == 0x81) & (z == 0x9F))
        | ((x == 0xE3) & (y == 0x80) & (z == 0x80))
    )


@kernel(inline="always")
def _copy_plain(src, p, hi, dst, o) -> int:  # pragma: no cover - inlined
    """Copy ``src[p:hi]`` to ``dst[o:]`` up to the first byte that needs work.

    Returns the number of bytes copied; ``src[p + result]`` is the first byte
    for which :func:`_needs_work` holds (or ``p + result == hi``). Whole blocks
    are copied before they are tested, so ``dst`` may receive up to
    ``_BLOCK - 1`` bytes past the returned count (the caller overwrites them).
    """
    start = p
    while p + _BLOCK + 2 <= hi:
        # Views indexed from 0: LLVM sees contiguous, non-negative indices,
        # and the fixed trip count with no branch vectorises.
        sb = src[p : p + _BLOCK + 2]
        db = dst[o : o + _BLOCK]
        hit = False
        for j in range(_BLOCK):
            x = sb[j]
            db[j] = x
            hit |= _needs_work(x, sb[j + 1], sb[j + 2])
        if hit:  # the block is in bounds: find the flagged byte without bounds tests
            j = 0
            while not _needs_work(sb[j], sb[j + 1], sb[j + 2]):
                j += 1
            return p + j - start
        p += _BLOCK
        o += _BLOCK
    while p < hi:
        x = src[p]
        y = src[p + 1] if p + 1 < hi else 0
        z = src[p + 2] if p + 2 < hi else 0
        if _needs_work(x, y, z):
            break
        dst[o] = x
        p += 1
        o += 1
    return p - start


@kernel(inline="always")
def _skip_space(src, p, hi, classes) -> int:  # pragma: no cover - inlined
    """Return the first position at or after ``p`` that does not start white space."""
    while p < hi:
        w = _space_width(src, p, hi, classes)
        if w == 0:
            break
        p += w
    return p


@kernel
def _normalise_doc(src, lo, hi, dst, d0, classes) -> int:
    """Collapse white space in ``src[lo:hi]`` into ``dst[d0:]``.

    Parameters
    ----------
    src : uint8[::1]
        Input bytes (read-only is fine); never written.
    lo, hi : int
        The document's byte range in ``src``.
    dst : uint8[::1]
        Output; only ``dst[d0:d0 + (hi - lo)]`` is written (normalisation
        never grows the text).
    d0 : int
        Where the document starts in ``dst``.
    classes : uint8[256]
        Table from :func:`byte_classes`.

    Returns
    -------
    int
        Length of the normalised document in bytes.
    """
    o = d0
    p = _skip_space(src, lo, hi, classes)
    while p < hi:
        k = _copy_plain(src, p, hi, dst, o)
        p += k
        o += k
        if p >= hi:
            break
        r = _skip_space(src, p, hi, classes)
        if r > p:  # a white-space run: one space (the leading run is gone already)
            dst[o] = 32
            o += 1
            p = r
        else:  # flagged, but not white space after all
            dst[o] = src[p]
            o += 1
            p += 1
    if o > d0 and dst[o - 1] == 32:  # strip the trailing space
        o -= 1
    return o - d0


@kernel(inline="always")
def _leads8(word) -> int:  # pragma: no cover - inlined
    """Count the UTF-8 lead bytes in a view of exactly 8 bytes (one 64-bit load)."""
    x = np.uint64(0)
    for j in range(8):  # LLVM folds this into one little-endian load
        x |= np.uint64(word[j]) << np.uint64(8 * j)
    # A continuation byte is 0b10xxxxxx: bit 7 set, bit 6 clear.
    cont = x & ~(x << np.uint64(1)) & np.uint64(0x8080808080808080)
    # Sum the eight 0/1 bytes by folding the word in halves (no overflow, so
    # the pure-Python run under NUMBA_DISABLE_JIT agrees without warnings).
    c = cont >> np.uint64(7)
    c += c >> np.uint64(32)
    c += c >> np.uint64(16)
    c += c >> np.uint64(8)
    return 8 - np.int64(c & np.uint64(0xFF))


@kernel
def _find_windows(buf, step, window, starts, ends, cap) -> int:
    """Walk normalised UTF-8 text once and locate every window boundary.

    Parameters
    ----------
    buf : uint8[::1]
        One normalised document.
    step, window : int
        ``window - overlap`` and ``window``, in characters.
    starts, ends : int64[::1]
        Views of length ``cap``: ``starts[k]`` receives the byte offset of
        character ``k * step`` and ``ends[k]`` that of character
        ``k * step + window``, for every such character in ``buf``.
    cap : int
        Capacity of ``starts`` and ``ends``.

    Returns
    -------
    int
        The number of characters in ``buf``.
    """
    nb = buf.size
    p = 0
    n = 0  # code points that start before byte p
    ks = 0
    ke = 0
    next_start = 0
    next_end = window
    while True:
        target = min(next_start, next_end)
        need = target - n
        while p + 8 <= nb:
            c = _leads8(buf[p : p + 8])
            if c > need:
                break
            need -= c
            n += c
            p += 8
        while p < nb:
            if (buf[p] & 0xC0) != 0x80:
                if need == 0:
                    break
                need -= 1
                n += 1
            p += 1
        if p >= nb:
            return n
        # buf[p] starts character number ``target``.
        if target == next_start:
            if ks < cap:
                starts[ks] = p
            ks += 1
            next_start += step
        if target == next_end:
            if ke < cap:
                ends[ke] = p
            ke += 1
            next_end += step


@kernel(inline="always")
def _n_chunks(n_chars, window, step) -> int:  # pragma: no cover - inlined
    """Count the windows cut from a normalised document of ``n_chars`` characters."""
    if n_chars == 0:
        return 0
    if n_chars <= window:
        return 1
    return (n_chars - window + step - 1) // step + 1


@kernel(inline="always")
def _copy(src, dst) -> None:  # pragma: no cover - inlined
    """``dst[:] = src`` for two views of equal size (LLVM turns it into a memcpy)."""
    for q in range(src.size):
        dst[q] = src[q]


@kernel
def _window_doc(
    i,
    data,
    offsets,
    classes,
    step,
    window,
    slot,
    starts,
    ends,
    clean_bytes,
    clean_chars,
    counts,
    sizes,
) -> None:
    """Pass 1 for document ``i``: normalise it, locate its windows, record its sizes.

    The normalised text goes to a buffer of the document's size (it stays in
    cache) and is dropped once the windows are found (see the module notes).
    """
    lo = offsets[i]
    hi = offsets[i + 1]
    buf = np.empty(hi - lo, dtype=np.uint8)
    nb = _normalise_doc(data, lo, hi, buf, 0, classes)
    s0 = slot[i]
    s1 = slot[i + 1]
    nc = _find_windows(buf[:nb], step, window, starts[s0:s1], ends[s0:s1], s1 - s0)
    k = _n_chunks(nc, window, step)
    clean_bytes[i] = nb
    clean_chars[i] = nc
    counts[i] = k
    total = 0
    for j in range(k - 1):
        total += ends[s0 + j] - starts[s0 + j]
    if k > 0:
        total += nb - starts[s0 + k - 1]
    sizes[i] = total


@kernel
def _copy_doc(
    i,
    data,
    offsets,
    classes,
    step,
    window,
    slot,
    starts,
    ends,
    clean_bytes,
    clean_chars,
    counts,
    first_chunk,
    first_byte,
    chunk_doc,
    chunk_ord,
    chunk_start,
    chunk_end,
    text_offsets,
    text_data,
) -> None:
    """Pass 2 for document ``i``: normalise it again, write its chunk rows and bytes."""
    k = counts[i]
    if k == 0:
        return
    lo = offsets[i]
    hi = offsets[i + 1]
    buf = np.empty(hi - lo, dtype=np.uint8)
    _normalise_doc(data, lo, hi, buf, 0, classes)
    c0 = first_chunk[i]
    s0 = slot[i]
    nc = clean_chars[i]
    t = first_byte[i]
    for j in range(k):
        b_lo = starts[s0 + j]
        b_hi = ends[s0 + j] if j < k - 1 else clean_bytes[i]
        c = c0 + j
        chunk_doc[c] = i
        chunk_ord[c] = j
        chunk_start[c] = j * step
        chunk_end[c] = min(j * step + window, nc)
        size = b_hi - b_lo
        _copy(buf[b_lo:b_hi], text_data[t : t + size])
        t += size
        text_offsets[c + 1] = t


@parallel_kernel
def _windows_pass(
    data, offsets, step, window, slot, starts, ends, clean_bytes, clean_chars, counts, sizes
) -> None:
    """Pass 1 of :func:`chunk_utf8`, parallel over documents: normalise, locate windows.

    Parameters
    ----------
    data : uint8[::1]
        Input bytes (read-only is fine); never written.
    offsets : int64[::1]
        ``n_docs + 1`` offsets into ``data`` (read-only is fine).
    step, window : int
        ``window - overlap`` and ``window``.
    slot : int64[n_docs + 1]
        Document ``i`` owns ``starts[slot[i]:slot[i + 1]]`` and the same
        entries of ``ends`` (at least one per ``step`` raw bytes).
    starts, ends : int64[slot[-1]]
        Receive window start and end byte offsets into the normalised document.
    clean_bytes, clean_chars, counts, sizes : int64[n_docs]
        Receive, per document, its normalised length in bytes and in
        characters, its number of chunks and the total bytes of its chunks.
    """
    classes = byte_classes()
    for i in prange(offsets.size - 1):
        _window_doc(
            np.int64(i),  # the gufunc's prange index is uint64: one signature, not two
            data,
            offsets,
            classes,
            step,
            window,
            slot,
            starts,
            ends,
            clean_bytes,
            clean_chars,
            counts,
            sizes,
        )


@parallel_kernel
def _copy_pass(
    data,
    offsets,
    step,
    window,
    slot,
    starts,
    ends,
    clean_bytes,
    clean_chars,
    counts,
    first_chunk,
    first_byte,
    chunk_doc,
    chunk_ord,
    chunk_start,
    chunk_end,
    text_offsets,
    text_data,
) -> None:
    """Pass 2 of :func:`chunk_utf8`, parallel over documents: chunk table and bytes.

    Parameters
    ----------
    data, offsets, step, window, slot, starts, ends, clean_bytes, clean_chars, counts
        As for and from :func:`_windows_pass`.
    first_chunk, first_byte : int64[n_docs + 1]
        Exclusive prefix sums of ``counts`` and of the chunk byte sizes.
    chunk_doc, chunk_ord, chunk_start, chunk_end : int64/int32/int64/int64[n_chunks]
        Receive the chunk table.
    text_offsets : int64[n_chunks + 1]
        Receives the text offsets (entry 0 is the caller's).
    text_data : uint8[first_byte[-1]]
        Receives the chunk bytes.
    """
    classes = byte_classes()
    for i in prange(offsets.size - 1):
        _copy_doc(
            np.int64(i),  # the gufunc's prange index is uint64: one signature, not two
            data,
            offsets,
            classes,
            step,
            window,
            slot,
            starts,
            ends,
            clean_bytes,
            clean_chars,
            counts,
            first_chunk,
            first_byte,
            chunk_doc,
            chunk_ord,
            chunk_start,
            chunk_end,
            text_offsets,
            text_data,
        )


def chunk_utf8(
    data: np.ndarray,
    offsets: np.ndarray,
    window: int,
    overlap: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Normalise white space and cut every document into overlapping windows.

    Parameters
    ----------
    data : uint8[::1]
        UTF-8 bytes of all documents, C-contiguous; never written. Writable
        arrays are passed to the kernels as read-only views, so each kernel
        has one signature to compile (Arrow buffers are read-only anyway).
    offsets : int64[::1]
        ``n_docs + 1`` non-decreasing byte offsets into ``data``; document
        ``i`` is ``data[offsets[i]:offsets[i + 1]]``. ``offsets[0]`` may be
        non-zero (a sliced Arrow array). Read-only is fine.
    window : int
        Window length in characters, ``>= 1``.
    overlap : int
        Overlap of consecutive windows in characters, ``0 <= overlap < window``.

    Returns
    -------
    chunk_doc : int64[n_chunks]
        Index of the source document of every chunk (non-decreasing).
    chunk_ord : int32[n_chunks]
        Position of the chunk within its document: 0, 1, 2, ...
    chunk_start, chunk_end : int64[n_chunks]
        Character offsets of the chunk into its normalised document.
    text_offsets : int64[n_chunks + 1]
        Arrow ``large_string`` offsets of the chunk texts into ``text_data``;
        ``text_offsets[0] == 0``.
    text_data : uint8[text_offsets[-1]]
        UTF-8 bytes of every chunk, one after the other (overlapping text is
        repeated).

    Notes
    -----
    All outputs are freshly allocated and C-contiguous. Documents that are
    empty or only white space give no chunk. This plain-Python driver only
    allocates and takes prefix sums over documents (numpy); the two passes
    are the kernels :func:`_windows_pass` and :func:`_copy_pass`. Allocating
    the large buffers with numpy rather than inside a kernel measured faster
    here. On a tiny batch the parallel passes cost about 2 us more than serial
    twins did (33 vs 31 us), not worth a second set of compiled kernels.
    """
    n_docs = offsets.size - 1
    step = window - overlap
    data = readonly(data)
    offsets = readonly(offsets)
    # Room for the window positions of every document: b raw bytes hold at
    # most b characters, hence at most (b - 1) // step + 1 window starts.
    raw = np.diff(offsets)
    slot = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum((raw + (step - 1)) // step, out=slot[1:])
    starts = np.empty(slot[-1], dtype=np.int64)
    ends = np.empty(slot[-1], dtype=np.int64)
    clean_bytes = np.empty(n_docs, dtype=np.int64)
    clean_chars = np.empty(n_docs, dtype=np.int64)
    counts = np.empty(n_docs, dtype=np.int64)
    sizes = np.empty(n_docs, dtype=np.int64)
    _windows_pass(
        data, offsets, step, window, slot, starts, ends, clean_bytes, clean_chars, counts, sizes
    )

    first_chunk = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=first_chunk[1:])
    first_byte = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(sizes, out=first_byte[1:])
    n_chunks = int(first_chunk[-1])
    chunk_doc = np.empty(n_chunks, dtype=np.int64)
    chunk_ord = np.empty(n_chunks, dtype=np.int32)
    chunk_start = np.empty(n_chunks, dtype=np.int64)
    chunk_end = np.empty(n_chunks, dtype=np.int64)
    text_offsets = np.empty(n_chunks + 1, dtype=np.int64)
    text_offsets[0] = 0
    text_data = np.empty(int(first_byte[-1]), dtype=np.uint8)
    _copy_pass(
        data,
        offsets,
        step,
        window,
        slot,
        starts,
        ends,
        clean_bytes,
        clean_chars,
        counts,
        first_chunk,
        first_byte,
        chunk_doc,
        chunk_ord,
        chunk_start,
        chunk_end,
        text_offsets,
        text_data,
    )
    return chunk_doc, chunk_ord, chunk_start, chunk_end, text_offsets, text_data


def warmup() -> None:
    """Compile the kernels' one signature (read-only data and offsets), or load it from cache.

    :func:`chunk_utf8` hands the kernels read-only views whatever it is
    given, so writable and read-only callers share this signature.
    """
    data = np.frombuffer("a b\u3000 c".encode(), dtype=np.uint8)
    chunks = chunk_utf8(data, np.array([0, 2, data.size], dtype=np.int64), 2, 1)
    join_windows(chunks[5], chunks[4], np.array([0, 1, chunks[0].size], dtype=np.int64), 1)


@kernel
def _skip_chars(data, p, end, n):
    """Byte position after ``n`` code points from ``data[p]`` (not past ``end``)."""
    while n > 0 and p < end:
        p += 1
        while p < end and (data[p] & 0xC0) == 0x80:
            p += 1
        n -= 1
    return p


@parallel_kernel
def _joined_sizes(data, offsets, doc_starts, overlap, sizes):
    for d in prange(doc_starts.size - 1):
        total = 0
        for c in range(doc_starts[d], doc_starts[d + 1]):
            lo = offsets[c]
            hi = offsets[c + 1]
            if c > doc_starts[d]:
                lo = _skip_chars(data, lo, hi, overlap)
            total += hi - lo
        sizes[d] = total


@parallel_kernel
def _joined_copy(data, offsets, doc_starts, overlap, out_offsets, out):
    for d in prange(doc_starts.size - 1):
        o = out_offsets[d]
        for c in range(doc_starts[d], doc_starts[d + 1]):
            lo = offsets[c]
            hi = offsets[c + 1]
            if c > doc_starts[d]:
                lo = _skip_chars(data, lo, hi, overlap)
            for p in range(lo, hi):
                out[o] = data[p]
                o += 1


def join_windows(
    data: np.ndarray, offsets: np.ndarray, doc_starts: np.ndarray, overlap: int
) -> tuple[np.ndarray, np.ndarray]:
    """Rebuild normalised documents from their consecutive chunks.

    Consecutive chunks of a document share exactly ``overlap`` code points,
    so a document is its first chunk followed by every later chunk without
    its first ``overlap`` code points: the normalised text the chunks were
    cut from.

    Parameters
    ----------
    data : uint8[::1]
        UTF-8 bytes of the chunks.
    offsets : int64[::1]
        ``n_chunks + 1`` offsets into ``data``.
    doc_starts : int64[::1]
        ``n_docs + 1`` chunk indices: document ``d`` is chunks
        ``doc_starts[d]:doc_starts[d + 1]``, in order.
    overlap : int
        The chunker's overlap, in code points.

    Returns
    -------
    tuple of numpy.ndarray
        The documents' UTF-8 bytes and ``n_docs + 1`` offsets.
    """
    data, offsets, doc_starts = readonly(data), readonly(offsets), readonly(doc_starts)
    n_docs = doc_starts.size - 1
    sizes = np.empty(n_docs, dtype=np.int64)
    _joined_sizes(data, offsets, doc_starts, overlap, sizes)
    out_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_offsets[1:])
    out = np.empty(int(out_offsets[-1]), dtype=np.uint8)
    _joined_copy(data, offsets, doc_starts, overlap, out_offsets, out)
    return out, out_offsets
