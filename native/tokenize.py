"""Tokenisation kernels: UTF-8 text to 64-bit token hashes, CSR per text.

Text arrives in the Arrow ``large_string`` layout: one ``uint8`` buffer of
UTF-8 bytes plus ``int64`` offsets (``data[offsets[i]:offsets[i + 1]]`` is
text ``i``; ``offsets[0]`` need not be 0). Every code point is looked up in a
*class table* (built by ``fastrag.tokenize`` from ``unicodedata``; code points
past its end are separators):

- ``WORD`` (letters and numbers of alphabetic scripts): runs of them are
  words;
- ``MARK`` (combining marks): part of the word they follow, ignored elsewhere
  (they never break a CJK run);
- ``CJK`` (Han, Kana, Hangul letters): every character is a token (unigram)
  and so is every pair of neighbours within a run (bigram);
- ``SEP`` (everything else: space, punctuation, symbols): ends a word or run.

Every code point of a token is first mapped through a *fold table* (width
folding of the full-width ASCII block and, optionally, lower-casing; code
points past its end map to themselves). A token is identified by the 64-bit
FNV-1a hash of the UTF-8 bytes of its folded text, so no dictionary is needed
in the kernel; the hash of a bigram continues the hash of its first character.
Tokens whose hash is in a sorted ``stop`` array are dropped.

The Python side validates everything; these kernels trust their arguments but
never read or write out of bounds, even on malformed UTF-8 (a byte that does
not start a complete sequence is a separator).

FNV-1a multiplies in wrapping 64-bit arithmetic: Numba wraps silently; with
the JIT disabled (``NUMBA_DISABLE_JIT=1``) the drivers below run the kernels
under ``numpy.errstate(over="ignore")`` so numpy wraps without a warning too
(only then: entering ``errstate`` costs microseconds per call).
"""

from __future__ import annotations

import contextlib

import numba
import numpy as np
from numba import config, prange

from ._jit import frozen, kernel, parallel_kernel, readonly

__all__ = [
    "CJK",
    "CJK_BIGRAM",
    "CJK_BOTH",
    "CJK_UNIGRAM",
    "FNV_OFFSET",
    "FNV_PRIME",
    "BLOCK_BYTES",
    "MARK",
    "PARALLEL_MIN_BYTES",
    "SEP",
    "WORD",
    "distinct_hashes",
    "distinct_words",
    "document_pieces",
    "gather_document_tokens",
    "replace_words",
    "hash_strings",
    "pack_words",
    "tokenize_utf8",
    "tokenize_words",
    "warmup",
]

SEP = 0
WORD = 1
CJK = 2
MARK = 3

CJK_BOTH = 0
"""CJK mode: unigrams and bigrams."""
CJK_UNIGRAM = 1
"""CJK mode: unigrams only."""
CJK_BIGRAM = 2
"""CJK mode: bigrams only (a run of one character gives its unigram)."""

FNV_OFFSET = 0xCBF29CE484222325
"""FNV-1a 64-bit offset basis (the hash of the empty string)."""
FNV_PRIME = 0x100000001B3
"""FNV-1a 64-bit prime."""

KIND_CJK = 2
"""``kinds`` value of a CJK token (``1`` is a word)."""


@kernel(inline="always")
def _fnv_byte(h, b):  # pragma: no cover - inlined
    """One FNV-1a step: ``(h ^ b) * prime`` modulo 2**64."""
    return (h ^ np.uint64(b)) * np.uint64(0x100000001B3)


@kernel(inline="always")
def _fnv_cp(h, cp):  # pragma: no cover - inlined
    """Feed the UTF-8 encoding of code point ``cp`` to the hash ``h``."""
    if cp < 0x80:
        return _fnv_byte(h, cp)
    if cp < 0x800:
        h = _fnv_byte(h, 0xC0 | (cp >> 6))
        return _fnv_byte(h, 0x80 | (cp & 0x3F))
    if cp < 0x10000:
        h = _fnv_byte(h, 0xE0 | (cp >> 12))
        h = _fnv_byte(h, 0x80 | ((cp >> 6) & 0x3F))
        return _fnv_byte(h, 0x80 | (cp & 0x3F))
    h = _fnv_byte(h, 0xF0 | (cp >> 18))
    h = _fnv_byte(h, 0x80 | ((cp >> 12) & 0x3F))
    h = _fnv_byte(h, 0x80 | ((cp >> 6) & 0x3F))
    return _fnv_byte(h, 0x80 | (cp & 0x3F))


@kernel(inline="always")
def _decode(data, p, hi):  # pragma: no cover - inlined
    """Decode the code point at ``data[p]`` (``p < hi``); return ``(cp, width)``.

    A byte that does not start a complete sequence within ``hi`` decodes to
    ``-1`` (a separator) of width 1. Continuation bytes are not checked.
    """
    b0 = np.int64(data[p])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xC0 or b0 >= 0xF8:
        return -1, 1
    if b0 < 0xE0:
        if p + 1 >= hi:
            return -1, 1
        return ((b0 & 0x1F) << 6) | (np.int64(data[p + 1]) & 0x3F), 2
    if b0 < 0xF0:
        if p + 2 >= hi:
            return -1, 1
        return (
            ((b0 & 0x0F) << 12)
            | ((np.int64(data[p + 1]) & 0x3F) << 6)
            | (np.int64(data[p + 2]) & 0x3F)
        ), 3
    if p + 3 >= hi:
        return -1, 1
    return (
        ((b0 & 0x07) << 18)
        | ((np.int64(data[p + 1]) & 0x3F) << 12)
        | ((np.int64(data[p + 2]) & 0x3F) << 6)
        | (np.int64(data[p + 3]) & 0x3F)
    ), 4


@kernel(inline="always")
def _is_stop(stop, table, h):  # pragma: no cover - inlined
    """Whether ``h`` is in the sorted array ``stop``.

    With a ``table`` (:func:`_stop_table`, non-empty) one probe or a few of
    open addressing; else a binary search.
    """
    if table.size:
        mask = np.uint64(table.size - 1)
        pos = _slot(h, mask)
        while True:
            j = table[pos]
            if j < 0:
                return False
            if stop[j] == h:
                return True
            pos = (pos + 1) & (table.size - 1)
    lo = 0
    hi = stop.size
    while lo < hi:
        mid = (lo + hi) >> 1
        if stop[mid] < h:
            lo = mid + 1
        else:
            hi = mid
    return lo < stop.size and stop[lo] == h


@kernel(inline="always")
def _emit(  # pragma: no cover - inlined
    h, start, end, kind, stop, table, out_hash, out_start, out_end, out_kind, o, cap, spans
):
    """Write one token at ``o`` (if ``o < cap``) unless it is a stop word; return the next slot.

    With ``spans``, also its start, kind and (when ``out_end`` has room) its end.
    """
    if stop.size and _is_stop(stop, table, h):
        return o
    if o < cap:
        out_hash[o] = h
        if spans:
            out_start[o] = start
            if out_end.size:
                out_end[o] = end
            out_kind[o] = kind
    return o + 1


@kernel
def _tokenize_core(
    data, lo, hi, classes, fold, stop, table, cjk_mode, out_hash, out_start, out_end, out_kind, o,
    cap, spans,
):  # fmt: skip
    """Tokenise ``data[lo:hi]``; write tokens from slot ``o`` below ``cap``; return the next slot.

    The return value counts every token, written or not (``cap == 0``: a
    count only). Word tokens record the byte span of their source text and
    kind 1; CJK unigrams the span of their character, bigrams that of both
    characters, kind 2 (only when ``spans``). ``table``: the stop words'
    hash table (:func:`_stop_table`), or empty for a binary search.
    """
    offset = np.uint64(0xCBF29CE484222325)
    n_classes = classes.size
    n_fold = fold.size
    uni = cjk_mode != 2  # CJK_BIGRAM
    bi = cjk_mode != 1  # CJK_UNIGRAM
    state = 0  # 0: between tokens, 1: in a word, 2: in a CJK run
    h = offset
    w_start = 0
    w_end = 0
    prev = offset  # hash of the previous CJK character
    prev_start = 0
    run = 0  # characters in the current CJK run
    p = lo
    while p < hi:
        cp, width = _decode(data, p, hi)
        c = classes[cp] if 0 <= cp < n_classes else 0
        if c == 0:
            if state == 1:
                o = _emit(
                    h,
                    w_start,
                    w_end,
                    1,
                    stop,
                    table,
                    out_hash,
                    out_start,
                    out_end,
                    out_kind,
                    o,
                    cap,
                    spans,
                )
            elif state == 2 and run == 1 and not uni:
                o = _emit(
                    prev,
                    prev_start,
                    p,
                    2,
                    stop,
                    table,
                    out_hash,
                    out_start,
                    out_end,
                    out_kind,
                    o,
                    cap,
                    spans,
                )
            state = 0
        else:
            f = fold[cp] if cp < n_fold else cp
            if c == 1:
                if state != 1:
                    if state == 2 and run == 1 and not uni:
                        o = _emit(
                            prev,
                            prev_start,
                            p,
                            2,
                            stop,
                            table,
                            out_hash,
                            out_start,
                            out_end,
                            out_kind,
                            o,
                            cap,
                            spans,
                        )
                    state = 1
                    h = offset
                    w_start = p
                h = _fnv_cp(h, f)
                w_end = p + width
            elif c == 3:
                if state == 1:
                    h = _fnv_cp(h, f)
                    w_end = p + width
            else:  # CJK
                if state == 1:
                    o = _emit(
                        h,
                        w_start,
                        w_end,
                        1,
                        stop,
                        table,
                        out_hash,
                        out_start,
                        out_end,
                        out_kind,
                        o,
                        cap,
                        spans,
                    )
                u = _fnv_cp(offset, f)
                if uni:
                    o = _emit(
                        u,
                        p,
                        p + width,
                        2,
                        stop,
                        table,
                        out_hash,
                        out_start,
                        out_end,
                        out_kind,
                        o,
                        cap,
                        spans,
                    )
                if state == 2:
                    if bi:
                        o = _emit(
                            _fnv_cp(prev, f),
                            prev_start,
                            p + width,
                            2,
                            stop,
                            table,
                            out_hash,
                            out_start,
                            out_end,
                            out_kind,
                            o,
                            cap,
                            spans,
                        )
                    run += 1
                else:
                    run = 1
                state = 2
                prev = u
                prev_start = p
        p += width
    if state == 1:
        o = _emit(
            h, w_start, w_end, 1, stop, table, out_hash, out_start, out_end, out_kind, o, cap, spans
        )
    elif state == 2 and run == 1 and not uni:
        o = _emit(
            prev,
            prev_start,
            hi,
            2,
            stop,
            table,
            out_hash,
            out_start,
            out_end,
            out_kind,
            o,
            cap,
            spans,
        )
    return o


_NO_TABLE = np.full(0, -1, dtype=np.int64)
_NO_TABLE.flags.writeable = False


@kernel
def _tokenize_text(
    data, lo, hi, classes, fold, stop, cjk_mode, out_hash, out_start, out_end, out_kind, o, spans
):
    """Tokenise ``data[lo:hi]``; write tokens from slot ``o``; return the next slot.

    With ``out_hash.size == 0`` nothing is written and the return value
    counts the tokens (pass 1). Word tokens record the byte span of their
    source text and kind 1; CJK unigrams the span of their character, bigrams
    that of both characters, kind 2 (only when ``spans``). Stop words by
    binary search (the kernels built on this one call it per text).
    """
    return _tokenize_core(
        data, lo, hi, classes, fold, stop, _NO_TABLE, cjk_mode, out_hash, out_start, out_end,
        out_kind, o, out_hash.size, spans,
    )  # fmt: skip


@parallel_kernel
def _count_pass(data, offsets, classes, fold, stop, cjk_mode, counts):
    """Pass 1, parallel over texts: ``counts[i]`` = number of tokens of text ``i``."""
    empty_h = np.empty(0, dtype=np.uint64)
    empty_i = np.empty(0, dtype=np.int64)
    empty_k = np.empty(0, dtype=np.uint8)
    for i in prange(offsets.size - 1):
        counts[i] = _tokenize_text(
            data,
            offsets[i],
            offsets[i + 1],
            classes,
            fold,
            stop,
            cjk_mode,
            empty_h,
            empty_i,
            empty_i,
            empty_k,
            np.int64(0),  # typed, not Literal[int](0): the fill calls' signature
            np.bool_(False),
        )


@parallel_kernel
def _fill_pass(
    data,
    offsets,
    classes,
    fold,
    stop,
    cjk_mode,
    tok_offsets,
    out_hash,
    out_start,
    out_end,
    out_kind,
    spans,
):
    """Pass 2, parallel over texts: write the tokens of text ``i`` from ``tok_offsets[i]``."""
    for i in prange(offsets.size - 1):
        _tokenize_text(
            data,
            offsets[i],
            offsets[i + 1],
            classes,
            fold,
            stop,
            cjk_mode,
            out_hash,
            out_start,
            out_end,
            out_kind,
            tok_offsets[i],
            spans,
        )


@kernel
def _hash_pass(data, offsets, out):
    """``out[i]`` = FNV-1a 64 of the bytes of string ``i`` (no tokenisation)."""
    for i in range(offsets.size - 1):
        h = np.uint64(0xCBF29CE484222325)
        for p in range(offsets[i], offsets[i + 1]):
            h = _fnv_byte(h, data[p])
        out[i] = h


@kernel
def _tokenize_serial(data, offsets, classes, fold, stop, cjk_mode, spans):
    """Both passes in one call, serially (small batches: one dispatch, no thread wake-up)."""
    n = offsets.size - 1
    empty_h = np.empty(0, dtype=np.uint64)
    empty_i = np.empty(0, dtype=np.int64)
    empty_k = np.empty(0, dtype=np.uint8)
    tok_offsets = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        c = _tokenize_text(
            data,
            offsets[i],
            offsets[i + 1],
            classes,
            fold,
            stop,
            cjk_mode,
            empty_h,
            empty_i,
            empty_i,
            empty_k,
            np.int64(0),  # typed, not Literal[int](0): the fill calls' signature
            np.bool_(False),
        )
        tok_offsets[i + 1] = tok_offsets[i] + c
    total = tok_offsets[n]
    hashes = np.empty(total, dtype=np.uint64)
    m = total if spans else 0
    starts = np.empty(m, dtype=np.int64)
    ends = np.empty(m, dtype=np.int64)
    kinds = np.empty(m, dtype=np.uint8)
    if total:
        for i in range(n):
            _tokenize_text(
                data,
                offsets[i],
                offsets[i + 1],
                classes,
                fold,
                stop,
                cjk_mode,
                hashes,
                starts,
                ends,
                kinds,
                tok_offsets[i],
                spans,
            )
    return hashes, tok_offsets, starts, ends, kinds


# -- one pass over the texts, by blocks ----------------------------------------
#
# A large batch is cut into a few blocks of whole texts per thread, tokenised
# in parallel, each block into its own region of a scratch array,
# the region as long as the block has bytes: every token ends at a byte of
# its own or shares the last character of a CJK unigram (three bytes or more,
# at most two tokens), so a text has at most as many tokens as bytes with the
# tokenizer's class table (any table that breaks this is caught: a block that
# would overflow its region writes nothing past it, and the caller falls back
# to counting first). Only the touched part of the scratch is ever paged in;
# a parallel copy then packs the regions into the dense CSR arrays.


@kernel
def _stop_table(stop):
    """Open-addressing table of the stop hashes (index into ``stop``, -1: empty), under 1/4 full."""
    cap = 16
    while cap < 4 * stop.size:
        cap *= 2
    table = np.full(cap, -1, dtype=np.int64)
    mask = np.uint64(cap - 1)
    for j in range(stop.size):
        pos = _slot(stop[j], mask)
        while table[pos] >= 0:
            pos = (pos + 1) & (cap - 1)
        table[pos] = j
    return table


@parallel_kernel
def _block_pass(
    data, offsets, blocks, classes, fold, stop, table, cjk_mode, s_hash, s_start, s_end, s_kind,
    spans, counts, used,
):  # fmt: skip
    """Tokenise block ``b`` (texts ``blocks[b]:blocks[b + 1]``) into its scratch region (parallel).

    The region starts at the block's first byte (relative to ``offsets[0]``)
    and ends at its last; ``counts[i]``: tokens of text ``i``; ``used[b]``:
    tokens of the block (more than its bytes: the region overflowed).
    """
    base = offsets[0]
    for b in prange(blocks.size - 1):
        i0 = blocks[b]
        i1 = blocks[b + 1]
        o = offsets[i0] - base
        first = o
        cap = offsets[i1] - base
        for i in range(i0, i1):
            nxt = _tokenize_core(
                data, offsets[i], offsets[i + 1], classes, fold, stop, table, cjk_mode, s_hash,
                s_start, s_end, s_kind, o, cap, spans,
            )  # fmt: skip
            counts[i] = nxt - o
            o = nxt
        used[b] = o - first


@parallel_kernel
def _pack_pass(
    offsets, blocks, tok_offsets, s_hash, s_start, s_end, s_kind, spans, out_hash, out_start,
    out_end, out_kind,
):  # fmt: skip
    """Copy every block's scratch region to its place in the dense arrays (parallel)."""
    base = offsets[0]
    for b in prange(blocks.size - 1):
        src = offsets[blocks[b]] - base
        dst = tok_offsets[blocks[b]]
        m = tok_offsets[blocks[b + 1]] - dst
        for j in range(m):
            out_hash[dst + j] = s_hash[src + j]
        if spans:
            for j in range(m):
                out_start[dst + j] = s_start[src + j]
                out_kind[dst + j] = s_kind[src + j]
            if out_end.size:
                for j in range(m):
                    out_end[dst + j] = s_end[src + j]


@parallel_kernel
def _block_words_pass(offsets, blocks, tok_offsets, s_hash, s_kind, d_hash, d_slot, d_count):
    """Distinct word hashes of every block, first-seen order, at the block's region (parallel).

    ``d_hash[r:r + d_count[b]]`` (``r``: the block's first token in the
    dense order) are block ``b``'s distinct word hashes and ``d_slot`` the
    scratch slot of the first token holding each.
    """
    base = offsets[0]
    for b in prange(blocks.size - 1):
        src = offsets[blocks[b]] - base
        r = tok_offsets[blocks[b]]
        m = tok_offsets[blocks[b + 1]] - r
        cap = 1024
        table = np.full(cap, -1, dtype=np.int64)
        mask = np.uint64(cap - 1)
        d = 0
        for j in range(src, src + m):
            if s_kind[j] != 1:
                continue
            key = s_hash[j]
            pos = _slot(key, mask)
            while True:
                t = table[pos]
                if t < 0:
                    table[pos] = d
                    d_hash[r + d] = key
                    d_slot[r + d] = j
                    d += 1
                    break
                if d_hash[r + t] == key:
                    break
                pos = (pos + 1) & (cap - 1)
            if 2 * d > cap:
                cap *= 2
                mask = np.uint64(cap - 1)
                table = np.full(cap, -1, dtype=np.int64)
                for t in range(d):
                    pos = _slot(d_hash[r + t], mask)
                    while table[pos] >= 0:
                        pos = (pos + 1) & (cap - 1)
                    table[pos] = t
        d_count[b] = d


@kernel
def _merge_words(tok_offsets, blocks, d_hash, d_slot, d_count, s_start):
    """The blocks' distinct words merged in block order: all words' first-seen order.

    Returns the distinct hashes, the start byte of the first token holding
    each, and their hash table (index into the distinct hashes, -1 empty).
    """
    total = 0
    for b in range(blocks.size - 1):
        total += d_count[b]
    cap = 16
    while cap < 2 * total:
        cap *= 2
    table = np.full(cap, -1, dtype=np.int64)
    mask = np.uint64(cap - 1)
    distinct = np.empty(total, dtype=np.uint64)
    first = np.empty(total, dtype=np.int64)
    d = 0
    for b in range(blocks.size - 1):
        r = tok_offsets[blocks[b]]
        for j in range(r, r + d_count[b]):
            key = d_hash[j]
            pos = _slot(key, mask)
            while True:
                t = table[pos]
                if t < 0:
                    table[pos] = d
                    distinct[d] = key
                    first[d] = s_start[d_slot[j]]
                    d += 1
                    break
                if distinct[t] == key:
                    break
                pos = (pos + 1) & (cap - 1)
    # a table at most half full, of the d distinct words only, for the lookups of the last pass
    small = 16
    while small < 2 * d:
        small *= 2
    lookup = np.full(small, -1, dtype=np.int64)
    mask = np.uint64(small - 1)
    for t in range(d):
        pos = _slot(distinct[t], mask)
        while lookup[pos] >= 0:
            pos = (pos + 1) & (small - 1)
        lookup[pos] = t
    return distinct[:d].copy(), first[:d].copy(), lookup


@kernel
def _word_ends(data, offsets, classes, starts, out):
    """``out[k]``: the end byte of the word token starting at ``starts[k]`` (within its text).

    A word runs over word and mark code points, as the tokenizer reads them.
    """
    n_classes = classes.size
    for k in range(starts.size):
        p = starts[k]
        # the text holding p: the last offset at or below it (binary search)
        lo = 0
        hi = offsets.size - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if offsets[mid] <= p:
                lo = mid
            else:
                hi = mid - 1
        end = offsets[lo + 1] if lo + 1 < offsets.size else data.size
        while p < end:
            cp, width = _decode(data, p, end)
            c = classes[cp] if 0 <= cp < n_classes else 0
            if c != 1 and c != 3:
                break
            p += width
        out[k] = p


@parallel_kernel
def _stem_pack_pass(
    offsets, blocks, tok_offsets, s_hash, s_start, s_kind, lookup, distinct, values, starts_too,
    out_hash, out_start,
):  # fmt: skip
    """Pack the blocks' tokens densely, every word's hash replaced by its ``values`` (parallel)."""
    base = offsets[0]
    mask = np.uint64(lookup.size - 1)
    for b in prange(blocks.size - 1):
        src = offsets[blocks[b]] - base
        dst = tok_offsets[blocks[b]]
        m = tok_offsets[blocks[b + 1]] - dst
        for j in range(m):
            h = s_hash[src + j]
            if s_kind[src + j] == 1:
                pos = _slot(h, mask)
                while True:
                    t = lookup[pos]
                    if t < 0:
                        break
                    if distinct[t] == h:
                        h = values[t]
                        break
                    pos = (pos + 1) & (lookup.size - 1)
            out_hash[dst + j] = h
        if starts_too:
            for j in range(m):
                out_start[dst + j] = s_start[src + j]


@kernel(inline="always")
def _slot(key, mask):  # pragma: no cover - inlined
    """Table slot of a hash: fold the high bits in (FNV-1a's low bits alone are weak)."""
    return np.int64((key ^ (key >> np.uint64(29)) ^ (key >> np.uint64(47))) & mask)


@kernel
def _distinct_pass(keys):
    """Distinct keys in first-seen order and the distinct index of every key.

    Open addressing with linear probing in a power-of-two table kept at most
    half full (doubled and rebuilt when it fills).
    """
    n = keys.size
    cap = 1024
    while cap < 2 * min(n, 1 << 16):
        cap *= 2
    table = np.full(cap, -1, dtype=np.int64)
    distinct = np.empty(max(n, 1), dtype=np.uint64)
    inverse = np.empty(n, dtype=np.int64)
    d = 0
    mask = np.uint64(cap - 1)
    for i in range(n):
        key = keys[i]
        pos = _slot(key, mask)
        while True:
            j = table[pos]
            if j < 0:
                table[pos] = d
                distinct[d] = key
                inverse[i] = d
                d += 1
                break
            if distinct[j] == key:
                inverse[i] = j
                break
            pos = (pos + 1) & (cap - 1)
        if 2 * d > cap:  # grow and rebuild
            cap *= 2
            mask = np.uint64(cap - 1)
            table = np.full(cap, -1, dtype=np.int64)
            for j in range(d):
                pos = _slot(distinct[j], mask)
                while table[pos] >= 0:
                    pos = (pos + 1) & (cap - 1)
                table[pos] = j
    return distinct[:d].copy(), inverse


def distinct_hashes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the distinct hashes, sorted, and the position of every key among them.

    Like ``numpy.unique(keys, return_inverse=True)``, with a hash table (one
    pass, then a sort of the distinct keys only) instead of a sort of all keys.

    Parameters
    ----------
    keys : uint64[::1]
        Hashes (read-only is fine).

    Returns
    -------
    distinct : uint64[d]
        The distinct values, increasing.
    inverse : int64[keys.size]
        ``distinct[inverse] == keys``.
    """
    (keys,) = frozen(keys)
    with _wrapping():
        first_seen, inverse = _distinct_pass(keys)
    order = np.argsort(first_seen)
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size, dtype=np.int64)
    return first_seen[order], rank[inverse]


@kernel
def _distinct_words_pass(hashes, kinds):
    """Distinct hashes of the word tokens (``kinds == 1``), in first-seen order.

    Also their first positions, and the distinct index of every token (-1 for
    a CJK token).
    """
    n = hashes.size
    inverse = np.full(n, -1, dtype=np.int64)
    cap = 1024
    table = np.full(cap, -1, dtype=np.int64)
    distinct = np.empty(16, dtype=np.uint64)
    first = np.empty(16, dtype=np.int64)
    d = 0
    mask = np.uint64(cap - 1)
    for i in range(n):
        if kinds[i] != 1:
            continue
        key = hashes[i]
        pos = _slot(key, mask)
        while True:
            j = table[pos]
            if j < 0:
                if d == distinct.size:
                    # element copies: an array-to-array slice assignment compiles
                    # Numba's shape-mismatch error message (about 2 CPU-s per process)
                    grown = np.empty(2 * d, dtype=np.uint64)
                    grown_first = np.empty(2 * d, dtype=np.int64)
                    for t in range(d):
                        grown[t] = distinct[t]
                        grown_first[t] = first[t]
                    distinct = grown
                    first = grown_first
                table[pos] = d
                distinct[d] = key
                first[d] = i
                inverse[i] = d
                d += 1
                break
            if distinct[j] == key:
                inverse[i] = j
                break
            pos = (pos + 1) & (cap - 1)
        if 2 * d > cap:
            cap *= 2
            mask = np.uint64(cap - 1)
            table = np.full(cap, -1, dtype=np.int64)
            for j in range(d):
                pos = _slot(distinct[j], mask)
                while table[pos] >= 0:
                    pos = (pos + 1) & (cap - 1)
                table[pos] = j
    return distinct[:d].copy(), first[:d].copy(), inverse


def distinct_words(
    hashes: np.ndarray, kinds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the distinct hashes of the word tokens and the first token holding each.

    Parameters
    ----------
    hashes : uint64[::1]
        Token hashes.
    kinds : uint8[::1]
        Token kinds (``1`` = word) from :func:`tokenize_utf8` with spans.

    Returns
    -------
    distinct : uint64[d]
        Distinct word hashes, in first-seen order.
    first : int64[d]
        Index of the first token with each hash.
    inverse : int64[hashes.size]
        For every word token the index of its hash in ``distinct``; -1 for
        the other tokens.
    """
    hashes, kinds = frozen(hashes, kinds)
    with _wrapping():
        return _distinct_words_pass(hashes, kinds)


@parallel_kernel
def _replace_words_pass(hashes, inverse, values, out):
    """``out[i]`` = ``values[inverse[i]]`` where ``inverse[i] >= 0``, else ``hashes[i]``."""
    for i in prange(hashes.size):
        j = inverse[i]
        out[i] = values[j] if 0 <= j < values.size else hashes[i]


def replace_words(hashes: np.ndarray, inverse: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Replace the hash of every word token (stemming), by its distinct index.

    Parameters
    ----------
    hashes : uint64[::1]
        Token hashes.
    inverse : int64[::1]
        From :func:`distinct_words` (-1: keep the token's hash).
    values : uint64[::1]
        New hash of every distinct word.

    Returns
    -------
    uint64[hashes.size]
        The new hashes.
    """
    if hashes.size < PARALLEL_MIN_BYTES:  # a question's few tokens: no parallel region
        out = hashes.copy()
        pick = (inverse >= 0) & (inverse < values.size)
        out[pick] = values[inverse[pick]]
        return out
    hashes, inverse, values = frozen(hashes, inverse, values)
    out = np.empty(hashes.size, dtype=np.uint64)
    _replace_words_pass(hashes, inverse, values, out)
    return out


def _wrapping() -> contextlib.AbstractContextManager:
    """``errstate(over="ignore")`` when the kernels run as plain Python, else nothing."""
    return np.errstate(over="ignore") if config.DISABLE_JIT else contextlib.nullcontext()


PARALLEL_MIN_BYTES = 1 << 16
"""Below this many input bytes (or with one text) the passes run serially."""


def tokenize_utf8(
    data: np.ndarray,
    offsets: np.ndarray,
    classes: np.ndarray,
    fold: np.ndarray,
    stop: np.ndarray,
    cjk_mode: int,
    *,
    spans: bool = False,
    parallel: bool | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tokenise every text into 64-bit token hashes (CSR over texts).

    Parameters
    ----------
    data : uint8[::1]
        UTF-8 bytes of all texts (read-only is fine); never written.
    offsets : int64[::1]
        ``n + 1`` non-decreasing offsets into ``data`` (read-only is fine).
    classes : uint8[::1]
        Class of every code point below ``classes.size`` (``SEP``, ``WORD``,
        ``CJK``, ``MARK``); code points past the end are separators.
    fold : int32[::1]
        Folded (and possibly lower-cased) code point of every code point
        below ``fold.size``; code points past the end map to themselves.
    stop : uint64[::1]
        Sorted hashes of the tokens to drop (may be empty).
    cjk_mode : int
        ``CJK_BOTH``, ``CJK_UNIGRAM`` or ``CJK_BIGRAM``.
    spans : bool, default False
        Also return the source byte span and the kind of every token.
    parallel : bool, optional
        Run the passes in parallel over texts; default: when there are at
        least two texts and :data:`PARALLEL_MIN_BYTES` bytes.

    Returns
    -------
    hashes : uint64[n_tokens]
        FNV-1a 64 hash of every token's folded UTF-8 text, text after text.
    tok_offsets : int64[n + 1]
        Text ``i`` has tokens ``hashes[tok_offsets[i]:tok_offsets[i + 1]]``.
    starts, ends : int64[n_tokens]
        Absolute byte span in ``data`` of every token's source text (only
        when ``spans``; else empty).
    kinds : uint8[n_tokens]
        ``1`` for a word, ``2`` for a CJK unigram or bigram (only when
        ``spans``; else empty).
    """
    data, offsets, classes, fold, stop = frozen(data, offsets, classes, fold, stop)
    n = offsets.size - 1
    if parallel is None:
        parallel = n > 1 and offsets[-1] - offsets[0] >= PARALLEL_MIN_BYTES
    if not parallel:
        with _wrapping():
            return _tokenize_serial(data, offsets, classes, fold, stop, cjk_mode, spans)
    with _wrapping():
        scan = _scan(data, offsets, classes, fold, stop, cjk_mode, spans, spans)
    if scan is not None:
        blocks, tok_offsets, s_hash, s_start, s_end, s_kind = scan
        total = int(tok_offsets[-1])
        m = total if spans else 0
        hashes = np.empty(total, dtype=np.uint64)
        starts = np.empty(m, dtype=np.int64)
        ends = np.empty(m, dtype=np.int64)
        kinds = np.empty(m, dtype=np.uint8)
        if total:
            _pack_pass(
                offsets, blocks, *frozen(tok_offsets, s_hash, s_start, s_end, s_kind), spans,
                hashes, starts, ends, kinds,
            )  # fmt: skip
        return hashes, tok_offsets, starts, ends, kinds
    counts = np.empty(n, dtype=np.int64)  # a class table that breaks the one-pass bound
    with _wrapping():
        _count_pass(data, offsets, classes, fold, stop, cjk_mode, counts)
        tok_offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=tok_offsets[1:])
        total = int(tok_offsets[-1])
        hashes = np.empty(total, dtype=np.uint64)
        m = total if spans else 0
        starts = np.empty(m, dtype=np.int64)
        ends = np.empty(m, dtype=np.int64)
        kinds = np.empty(m, dtype=np.uint8)
        if total:
            _fill_pass(
                data,
                offsets,
                classes,
                fold,
                stop,
                cjk_mode,
                tok_offsets,
                hashes,
                starts,
                ends,
                kinds,
                spans,
            )
    return hashes, tok_offsets, starts, ends, kinds


BLOCK_BYTES = 1 << 18
"""Fewest bytes of text per block of the one-pass tokenisation."""

BLOCKS_PER_THREAD = 4
"""Blocks per Numba thread: few and large, so that the scratch's untouched tails (never
written, so never paged in) are long; numpy asks for huge pages, and a touched page
costs 2 MB of zeroing, so many short regions would page in most of the scratch."""


def _blocks(offsets: np.ndarray) -> np.ndarray:
    """Text indices cutting the texts into blocks of about equal bytes (int64, read-only)."""
    n = offsets.size - 1
    total = int(offsets[-1] - offsets[0])
    size = max(BLOCK_BYTES, -(-total // (BLOCKS_PER_THREAD * numba.get_num_threads())))
    cuts = np.searchsorted(offsets, offsets[0] + np.arange(size, total, size, dtype=np.int64))
    blocks = np.unique(np.concatenate([[0], cuts, [n]]).astype(np.int64))
    (blocks,) = frozen(blocks)
    return blocks


def _scan(
    data: np.ndarray,
    offsets: np.ndarray,
    classes: np.ndarray,
    fold: np.ndarray,
    stop: np.ndarray,
    cjk_mode: int,
    spans: bool,
    ends: bool,
) -> tuple[np.ndarray, ...] | None:
    """The one-pass tokenisation into block regions (inputs frozen); None if a region overflowed.

    Returns ``blocks``, ``tok_offsets`` (dense), and the scratch ``hashes``,
    ``starts``, ``ends`` (empty unless ``ends``) and ``kinds``.
    """
    blocks = _blocks(offsets)
    size = int(offsets[-1] - offsets[0])
    s_hash = np.empty(size, dtype=np.uint64)
    s_start = np.empty(size if spans else 0, dtype=np.int64)
    s_end = np.empty(size if spans and ends else 0, dtype=np.int64)
    s_kind = np.empty(size if spans else 0, dtype=np.uint8)
    n = offsets.size - 1
    counts = np.empty(n, dtype=np.int64)
    used = np.empty(blocks.size - 1, dtype=np.int64)
    (table,) = frozen(_stop_table(stop))
    _block_pass(
        data, offsets, blocks, classes, fold, stop, table, cjk_mode, s_hash, s_start, s_end,
        s_kind, spans, counts, used,
    )  # fmt: skip
    if np.any(used > np.diff(offsets[blocks])):
        return None
    tok_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=tok_offsets[1:])
    return blocks, tok_offsets, s_hash, s_start, s_end, s_kind


def tokenize_words(
    data: np.ndarray,
    offsets: np.ndarray,
    classes: np.ndarray,
    fold: np.ndarray,
    stop: np.ndarray,
    cjk_mode: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]] | None:
    """First half of a tokenisation whose words are then replaced (stemmed): in parallel.

    One pass over the texts (by blocks), then the distinct word hashes of
    every block, merged in order. :func:`pack_words` finishes it with the
    replacement hash of every distinct word. Arguments as :func:`tokenize_utf8`.

    Returns
    -------
    distinct : uint64[d]
        Distinct hashes of the word tokens, in first-seen order (as
        :func:`distinct_words`).
    starts, ends : int64[d]
        Byte span in ``data`` of the first token holding each.
    state : tuple of numpy.ndarray
        For :func:`pack_words`.

    None when a block's region overflowed (a class table that breaks the
    bound of one token per byte): tokenise with :func:`tokenize_utf8`.
    """
    data, offsets, classes, fold, stop = frozen(data, offsets, classes, fold, stop)
    with _wrapping():
        scan = _scan(data, offsets, classes, fold, stop, cjk_mode, True, False)
        if scan is None:
            return None
        blocks, tok_offsets, s_hash, s_start, _, s_kind = frozen(*scan)
        d_hash = np.empty(int(tok_offsets[-1]), dtype=np.uint64)
        d_slot = np.empty(int(tok_offsets[-1]), dtype=np.int64)
        d_count = np.empty(blocks.size - 1, dtype=np.int64)
        _block_words_pass(offsets, blocks, tok_offsets, s_hash, s_kind, d_hash, d_slot, d_count)
        distinct, first, lookup = _merge_words(
            tok_offsets, blocks, *frozen(d_hash, d_slot, d_count), s_start
        )
        del d_hash, d_slot
        ends = np.empty(first.size, dtype=np.int64)
        _word_ends(data, offsets, classes, readonly(first), ends)
    state = (offsets, blocks, tok_offsets, s_hash, s_start, s_kind, *frozen(lookup, distinct))
    return distinct, first, ends, state


def pack_words(
    state: tuple[np.ndarray, ...], values: np.ndarray, *, starts: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Finish :func:`tokenize_words`: the dense token hashes, every word's replaced by its value.

    Parameters
    ----------
    state : tuple
        From :func:`tokenize_words`.
    values : uint64[d]
        New hash of every distinct word.
    starts : bool, default False
        Also return every token's start byte.

    Returns
    -------
    hashes : uint64[n_tokens]
        As :func:`replace_words` of :func:`tokenize_utf8`'s hashes.
    tok_offsets : int64[n + 1]
        CSR offsets.
    starts : int64[n_tokens]
        Start bytes (empty unless ``starts``).
    """
    offsets, blocks, tok_offsets, s_hash, s_start, s_kind, lookup, distinct = state
    total = int(tok_offsets[-1])
    out = np.empty(total, dtype=np.uint64)
    out_start = np.empty(total if starts else 0, dtype=np.int64)
    if total:
        _stem_pack_pass(
            offsets, blocks, tok_offsets, s_hash, s_start, s_kind, lookup, distinct,
            readonly(np.ascontiguousarray(values, dtype=np.uint64)), starts, out, out_start,
        )  # fmt: skip
    return out, tok_offsets, out_start


def hash_strings(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Return the FNV-1a 64 hash of the bytes of every string (no tokenisation).

    Parameters
    ----------
    data : uint8[::1]
        UTF-8 bytes of the strings.
    offsets : int64[::1]
        ``n + 1`` offsets into ``data``.

    Returns
    -------
    uint64[n]
        The hashes; equal to the token hash of a token whose folded text is
        the string.
    """
    data, offsets = frozen(data, offsets)
    out = np.empty(offsets.size - 1, dtype=np.uint64)
    with _wrapping():
        _hash_pass(data, offsets, out)
    return out


def warmup() -> None:
    """Compile every kernel of this module (serial and parallel passes, with spans).

    The drivers hand every input to the kernels read-only (see
    :func:`~._jit.frozen`), so one signature per kernel serves writable and
    read-only (Arrow, memory-mapped) inputs alike.
    """
    raw = np.frombuffer("Ab, c\u00e9 \u4e2d\u6587 x".encode(), dtype=np.uint8)
    offs = np.array([0, 3, raw.size], dtype=np.int64)
    classes = np.zeros(0x10000, dtype=np.uint8)
    classes[ord("A") : ord("z") + 1] = WORD
    classes[0x4E00:0xA000] = CJK
    classes[0x300:0x370] = MARK
    fold = np.arange(0x10000, dtype=np.int32)
    stop = np.zeros(1, dtype=np.uint64)
    for parallel in (False, True):  # the one-pass kernels (not the fallback of a custom table)
        for spans in (False, True):
            hashes, _, _, _, kinds = tokenize_utf8(
                raw, offs, classes, fold, stop, CJK_BOTH, spans=spans, parallel=parallel
            )
    found = tokenize_words(raw, offs, classes, fold, stop, CJK_BOTH)
    assert found is not None
    for starts_too in (False, True):
        pack_words(found[3], found[0], starts=starts_too)
    hash_strings(raw, offs)
    distinct_hashes(hashes)
    distinct, _, inverse = distinct_words(hashes, kinds)
    replace_words(hashes, inverse, distinct)
    big = np.repeat(hashes, PARALLEL_MIN_BYTES // hashes.size + 1)  # the parallel pass
    replace_words(big, np.repeat(inverse, PARALLEL_MIN_BYTES // hashes.size + 1), distinct)
    # a document of the two chunks of ``raw`` (overlapping by one character)
    starts = np.array([0, 2], dtype=np.int64)
    ends = np.array([3, 3 + offs[2] - offs[1]], dtype=np.int64)
    doc_starts = np.array([0, 2], dtype=np.int64)
    doc_offsets = np.array([0, raw.size], dtype=np.int64)
    tok_offsets = np.array([0, 1, hashes.size], dtype=np.int64)
    tok_starts = np.zeros(hashes.size, dtype=np.int64)
    lo, hi, counts = document_pieces(
        raw, offs, starts, ends, doc_starts, raw, doc_offsets, tok_offsets, tok_starts, classes
    )
    flagged = np.zeros(int((counts < 0).sum()) + 1, dtype=np.int64)
    gather_document_tokens(doc_starts, hashes, lo, hi, counts, hashes, flagged)


# -- document tokens from chunk tokens -----------------------------------------
#
# A document of the keyword index is its chunks joined (``join_chunks``): the
# first chunk whole, then every next chunk either after one space (a gap) or
# without the characters the earlier ones already wrote (an overlap). Its
# tokens need not be tokenised again: the tokenizer's state is reset by every
# separator code point, so the tokens of ``A + sep + B`` are those of ``A``
# followed by those of ``B``. Cut every document at one separator inside each
# overlap (and at the space of each gap); every piece between two cuts lies
# inside one chunk whose text holds the same bytes with a separator (or its
# own edge) on both sides, so the piece's tokens are a contiguous run of that
# chunk's tokens, found by their start bytes. A document where any of this
# cannot be checked (invalid UTF-8, a chunk whose overlap is not the joined
# text's, an overlap without a separator, a chunk that adds nothing) is
# flagged, and the caller tokenises its joined text instead.


@kernel(inline="always")
def _cont(b):  # pragma: no cover - inlined
    """Whether byte ``b`` is a UTF-8 continuation byte."""
    return (b & 0xC0) == 0x80


@kernel
def _valid_utf8(data, lo, hi):
    """Whether ``data[lo:hi]`` is structurally valid UTF-8 (lead bytes and their continuations)."""
    p = lo
    while p < hi:
        b = data[p]
        if b < 0x80:
            p += 1
            continue
        if b < 0xC0 or b >= 0xF8:
            return False
        w = 2 if b < 0xE0 else (3 if b < 0xF0 else 4)
        if p + w > hi:
            return False
        for q in range(p + 1, p + w):
            if not _cont(data[q]):
                return False
        p += w
    return True


@kernel
def _skip_chars(data, p, end, n):
    """Byte position after ``n`` code points from ``data[p]`` (as ``join_chunks`` skips)."""
    while n > 0 and p < end:
        p += 1
        while p < end and (data[p] & 0xC0) == 0x80:
            p += 1
        n -= 1
    return p


@kernel
def _first_run(tok_starts, t0, t1, lo_abs):
    """First token index in ``[t0, t1)`` whose start byte is at least ``lo_abs`` (else ``t1``)."""
    t = t0
    while t < t1 and tok_starts[t] < lo_abs:
        t += 1
    return t


@kernel
def _doc_pieces(
    d, data, offsets, starts, ends, doc_starts, doc_data, doc_offsets, tok_offsets, tok_starts,
    classes, piece_lo, piece_hi,
):  # fmt: skip
    """Token runs of document ``d``'s chunks (``piece_lo/hi[c]``); its token count, or -1."""
    c0 = doc_starts[d]
    c1 = doc_starts[d + 1]
    d_lo = doc_offsets[d]
    d_hi = doc_offsets[d + 1]
    if c1 <= c0 or not _valid_utf8(doc_data, d_lo, d_hi):
        return -1
    n_classes = classes.size
    o = d_lo  # where the next chunk's bytes go in the joined text
    reach = 0
    owner = -1  # the chunk holding the open piece
    owner_base = 0  # where the owner's first byte sits in the joined text
    owner_dstart = 0  # where the owner's own (copied) bytes start in it
    seg = 0  # the open piece starts here (joined-text position)
    total = 0
    for c in range(c0, c1):
        piece_lo[c] = 0
        piece_hi[c] = 0
        lo = offsets[c]
        hi = offsets[c + 1]
        gap = False
        nxt = 0
        if c > c0:
            if starts[c] > reach:
                gap = True
                o += 1  # the space join_chunks writes
            else:
                lo = _skip_chars(data, lo, hi, reach - starts[c])
        if hi - lo <= 0:
            return -1  # adds nothing (or empty): not worth a special case
        dstart = o
        base = o - (lo - offsets[c])
        dend = dstart + (hi - lo)
        if base < d_lo or dend > d_hi:
            return -1
        if _cont(doc_data[base]) or (dend < d_hi and _cont(doc_data[dend])):
            return -1
        for q in range(offsets[c], lo):  # the overlap: the joined text's bytes?
            if data[q] != doc_data[base + q - offsets[c]]:
                return -1
        if c > c0:
            if gap:
                cut = dstart - 1
                nxt = dstart
            else:
                # a separator of the overlap, inside the owner's own bytes
                floor = max(base, owner_dstart)
                cut = -1
                p = offsets[c]
                while p < lo:
                    cp, width = _decode(data, p, hi)
                    at = base + p - offsets[c]
                    if at >= floor and not (0 <= cp < n_classes and classes[cp] != 0):
                        cut = at
                        nxt = at + width
                        break
                    p += width
                if cut < 0:
                    return -1
            # close the owner's piece [seg, cut)
            shift = offsets[owner] - owner_base
            a = _first_run(tok_starts, tok_offsets[owner], tok_offsets[owner + 1], seg + shift)
            b = _first_run(tok_starts, a, tok_offsets[owner + 1], cut + shift)
            piece_lo[owner] = a
            piece_hi[owner] = b
            total += b - a
            seg = nxt
        else:
            seg = dstart
        owner = c
        owner_base = base
        owner_dstart = dstart
        o = dend
        reach = max(reach, ends[c])
    if o != d_hi:
        return -1
    shift = offsets[owner] - owner_base
    a = _first_run(tok_starts, tok_offsets[owner], tok_offsets[owner + 1], seg + shift)
    b = tok_offsets[owner + 1]
    piece_lo[owner] = a
    piece_hi[owner] = b
    return total + b - a


@parallel_kernel
def _doc_pieces_pass(
    data, offsets, starts, ends, doc_starts, doc_data, doc_offsets, tok_offsets, tok_starts,
    classes, piece_lo, piece_hi, counts,
):  # fmt: skip
    for d in prange(doc_starts.size - 1):
        # np.int64: the gufunc's prange index is uint64 (one signature, not two)
        counts[d] = _doc_pieces(
            np.int64(d), data, offsets, starts, ends, doc_starts, doc_data, doc_offsets,
            tok_offsets, tok_starts, classes, piece_lo, piece_hi,
        )  # fmt: skip


@parallel_kernel
def _doc_gather_pass(
    doc_starts, hashes, piece_lo, piece_hi, counts, out_offsets, out, fb_offsets, fb_hashes,
    fb_tok_offsets,
):  # fmt: skip
    """Write every document's tokens: its chunks' runs, or its own (re-tokenised) ones."""
    for d in prange(doc_starts.size - 1):
        o = out_offsets[d]
        if counts[d] < 0:
            f = fb_offsets[d]
            for t in range(fb_tok_offsets[f], fb_tok_offsets[f + 1]):
                out[o] = fb_hashes[t]
                o += 1
            continue
        for c in range(doc_starts[d], doc_starts[d + 1]):
            for t in range(piece_lo[c], piece_hi[c]):
                out[o] = hashes[t]
                o += 1


def document_pieces(
    data: np.ndarray,
    offsets: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    doc_starts: np.ndarray,
    doc_data: np.ndarray,
    doc_offsets: np.ndarray,
    tok_offsets: np.ndarray,
    tok_starts: np.ndarray,
    classes: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Which tokens of its chunks make every joined document's tokens (see the comment above).

    Parameters
    ----------
    data, offsets : uint8[::1], int64[::1]
        The chunks' UTF-8 bytes and ``n_chunks + 1`` offsets.
    starts, ends : int64[::1]
        Character offsets of every chunk into its document.
    doc_starts : int64[::1]
        ``n_docs + 1`` chunk indices of the documents.
    doc_data, doc_offsets : uint8[::1], int64[::1]
        The joined documents (``join_chunks`` of the arguments above).
    tok_offsets : int64[::1]
        ``n_chunks + 1`` offsets of the chunks' tokens.
    tok_starts : int64[::1]
        Absolute start byte in ``data`` of every chunk token.
    classes : uint8[::1]
        The tokenizer's class table.

    Returns
    -------
    piece_lo, piece_hi : int64[n_chunks]
        Chunk ``c`` gives its document tokens ``piece_lo[c]:piece_hi[c]``.
    counts : int64[n_docs]
        Tokens of every document; -1 where the document must be tokenised
        from its joined text.
    """
    args = frozen(
        data, offsets, starts, ends, doc_starts, doc_data, doc_offsets, tok_offsets, tok_starts,
        classes,
    )  # fmt: skip
    n_chunks = offsets.size - 1
    piece_lo = np.zeros(n_chunks, dtype=np.int64)
    piece_hi = np.zeros(n_chunks, dtype=np.int64)
    counts = np.empty(doc_starts.size - 1, dtype=np.int64)
    _doc_pieces_pass(*args, piece_lo, piece_hi, counts)
    return piece_lo, piece_hi, counts


def gather_document_tokens(
    doc_starts: np.ndarray,
    hashes: np.ndarray,
    piece_lo: np.ndarray,
    piece_hi: np.ndarray,
    counts: np.ndarray,
    fb_hashes: np.ndarray,
    fb_tok_offsets: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Every document's token hashes (CSR), from :func:`document_pieces`.

    Parameters
    ----------
    doc_starts : int64[::1]
        ``n_docs + 1`` chunk indices of the documents.
    hashes : uint64[::1]
        The chunks' token hashes.
    piece_lo, piece_hi, counts : int64[::1]
        From :func:`document_pieces`.
    fb_hashes, fb_tok_offsets : uint64[::1], int64[::1]
        Tokens of the flagged documents (``counts < 0``), in order.

    Returns
    -------
    hashes : uint64[n_tokens]
        Every document's tokens, document after document.
    tok_offsets : int64[n_docs + 1]
        CSR offsets.
    """
    n_docs = doc_starts.size - 1
    flagged = counts < 0
    sizes = counts.copy()
    sizes[flagged] = np.diff(fb_tok_offsets)
    out_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_offsets[1:])
    fb_offsets = np.cumsum(flagged) - 1
    out = np.empty(int(out_offsets[-1]), dtype=np.uint64)
    args = frozen(doc_starts, hashes, piece_lo, piece_hi, counts, out_offsets)
    _doc_gather_pass(*args, out, *frozen(fb_offsets, fb_hashes, fb_tok_offsets))
    return out, out_offsets
