r"""Structure-aware chunking over UTF-8 text: units, packing, heading paths.

Text arrives in the Arrow ``large_string`` layout, as for
:func:`fastrag._native.chunking.chunk_utf8`, and is normalised the same way
(every white-space run becomes one space, both ends stripped). Before the
normalisation erases them, the line structure of the raw text is read (lines
end at ``\n``; leading white space of a line is ignored):

- a **heading** is a line starting with one to six ``#`` then white space or
  the line's end; its level is the number of ``#``;
- a **table row** is a line starting with ``|`` (Markdown);
- a **record** is a line of at least two ``Header: value`` cells separated
  by ``|`` with white space on both sides (what the PDF, HTML and Word
  loaders write for a table row, ``Fault code: SV0432 | Fix: ...``): a cell
  is a header cell when one to eighty characters other than ``:`` and ``|``
  are followed by ``:`` and white space;
- a **list item** starts with ``-``, ``*`` or ``+``, or with one to nine
  ASCII digits then ``.`` or ``)``, each followed by white space or the
  line's end, and takes the lines after it up to a blank line or the next
  unit;
- a **fenced block** runs from a line starting with three backticks (or
  tildes) to the next line starting with three of the same character, blank
  lines included (a ``#`` line inside it is code, not a heading);
- a **paragraph** is any other run of lines up to a blank line or the next
  unit.

Units are packed into chunks of at most ``window`` characters: whole
consecutive units while they fit; a heading starts a new chunk unless the
chunk so far holds only headings; a unit that does not fit an empty chunk
(or one holding only headings, which are then cut with it) is cut into
sliding windows of ``window`` characters overlapping by ``overlap``. A
record is a chunk of its own, never packed with another unit (the chunk
before it, even one of headings only, is closed first); a record longer
than ``window`` is cut at its cell separators into runs of whole cells of
at most ``window`` characters (a cell longer than that by sliding windows).
Consecutive records are one table: every chunk of a record carries its
table's number in the document and its row's number in the table (from 1;
-1 for other chunks). Every
chunk is ``normalised[start:end]``; two packed chunks in a row are separated
by the single space between their units. Each chunk carries the heading path
in effect at its end (``"Guide > Install"``) as an index into a table of
paths, ``-1`` before the first heading.

The reference twin is ``tests/naive/chunking.py`` (``structure_chunks``).

:func:`structure_utf8` makes two passes parallel over documents, like
:func:`~fastrag._native.chunking.chunk_utf8`: the first normalises a
document, scans its raw bytes once for units (counting normalised
characters and bytes as it goes) and packs them, keeping only chunk
boundaries and sizes; after prefix sums the second normalises again and
writes the chunk table, the chunk bytes and the heading paths.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import kernel, parallel_kernel, readonly
from .chunking import _copy, _find_windows, _n_chunks, _normalise_doc, _space_width, byte_classes

__all__ = ["count_lines", "structure_utf8", "warmup"]

_PARA = 1
_HEADING = 2
_LIST = 3
_TABLE = 4
_FENCE = 5
_RECORD = 6

_HEADER_CHARS = 80  # most characters before the ':' of a header cell

_MAX_DEPTH = 6  # heading levels


@parallel_kernel
def _count_lines(data, offsets, out) -> None:
    r"""``out[i]`` = number of ``\n`` in document ``i`` plus one."""
    for i in prange(offsets.size - 1):
        n = 1
        for p in range(offsets[i], offsets[i + 1]):
            n += data[p] == 10
        out[i] = n


def count_lines(data: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    r"""Lines of every document (``\n`` count plus one).

    Parameters
    ----------
    data : uint8[::1]
        UTF-8 bytes of every document.
    offsets : int64[::1]
        ``n_docs + 1`` offsets into ``data``.

    Returns
    -------
    int64[n_docs]
        Lines per document (at least 1).
    """
    out = np.empty(offsets.size - 1, dtype=np.int64)
    _count_lines(readonly(data), readonly(offsets), out)
    return out


@kernel(inline="always")
def _is_sep(src, q, hi, classes) -> bool:  # pragma: no cover - inlined
    """Whether ``src[q]`` ends a marker: the document's end, a line end or white space."""
    if q >= hi:
        return True
    if src[q] == 10:
        return True
    return _space_width(src, q, hi, classes) > 0


@kernel
def _header_cell(src, r, hi, classes) -> bool:
    """Whether the cell starting at ``src[r]`` opens with ``Header:`` and white space."""
    k = 0
    while r < hi and k <= _HEADER_CHARS:
        c = src[r]
        if c == 10 or c == 124:
            return False
        if c == 58:
            return (
                k >= 1
                and r + 1 < hi
                and src[r + 1] != 10
                and _space_width(src, r + 1, hi, classes) > 0
            )
        r += 1
        while r < hi and (src[r] & 0xC0) == 0x80:
            r += 1
        k += 1
    return False


@kernel
def _is_record(src, q, hi, classes) -> bool:
    r"""Whether the line whose first non-space byte is ``src[q]`` has two header cells.

    Cells are separated like ``re.finditer(r"\s+\|\s+", line)`` separates them:
    a ``|`` with white space before and after it, the white space included.
    """
    count = 1 if _header_cell(src, q, hi, classes) else 0
    p = q
    prev_space = False
    while p < hi:
        c = src[p]
        if c == 10:
            break
        if c > 0x20 and classes[c] == 0:
            if c == 124 and prev_space:
                r = p + 1
                if r < hi and src[r] != 10 and _space_width(src, r, hi, classes) > 0:
                    while r < hi and src[r] != 10:
                        w = _space_width(src, r, hi, classes)
                        if w == 0:
                            break
                        r += w
                    if r < hi and src[r] != 10 and _header_cell(src, r, hi, classes):
                        count += 1
                        if count >= 2:
                            return True
                    p = r
                    prev_space = False
                    continue
            prev_space = False
            p += 1
            continue
        w = _space_width(src, p, hi, classes)
        prev_space = w > 0
        p += w if w > 0 else 1
    return False


@kernel
def _classify(src, q, hi, classes):
    """Kind and level of the line whose first non-space byte is ``src[q]``.

    Returns ``(kind, level)``: level is the heading level, or the fence
    character for a fenced block, else 0.
    """
    b = src[q]
    if (b == 96 or b == 126) and q + 2 < hi and src[q + 1] == b and src[q + 2] == b:
        return _FENCE, np.int64(b)
    if b == 35:  # '#'
        k = 0
        while q + k < hi and src[q + k] == 35:
            k += 1
        if k <= _MAX_DEPTH and _is_sep(src, q + k, hi, classes):
            return _HEADING, np.int64(k)
    if b == 124:  # '|'
        return _TABLE, np.int64(0)
    if b == 45 or b == 42 or b == 43:  # '-', '*', '+'
        if _is_sep(src, q + 1, hi, classes):
            return _LIST, np.int64(0)
    elif 48 <= b <= 57:
        k = 0
        while q + k < hi and 48 <= src[q + k] <= 57:
            k += 1
        if k <= 9 and q + k < hi and (src[q + k] == 46 or src[q + k] == 41):
            if _is_sep(src, q + k + 1, hi, classes):
                return _LIST, np.int64(0)
    if _is_record(src, q, hi, classes):
        return _RECORD, np.int64(0)
    return _PARA, np.int64(0)


@kernel
def _scan_units(src, lo, hi, classes, units, cap) -> int:
    """Find the units of raw document ``src[lo:hi]``; return how many.

    ``units[j]`` receives ``(start_char, end_char, start_byte, end_byte,
    kind, level)`` of unit ``j`` in the normalised document, for ``j < cap``.
    """
    nu = 0
    nch = 0
    nby = 0
    emitted = False
    pending = False
    last_ch = 0
    last_by = 0
    at_start = True
    open_kind = 0
    fence = 0
    p = lo
    while p < hi:
        b = src[p]
        if b == 10:
            if at_start and fence == 0:
                open_kind = 0  # a blank line ends a paragraph or list item
            at_start = True
            pending = emitted
            p += 1
            continue
        w = _space_width(src, p, hi, classes)
        if w > 0:
            pending = emitted
            p += w
            continue
        if at_start:
            at_start = False
            if fence != 0:
                if b == fence and p + 2 < hi and src[p + 1] == b and src[p + 2] == b:
                    fence = 0
                    open_kind = 0
            else:
                kind, level = _classify(src, p, hi, classes)
                if not (kind == _PARA and (open_kind == _PARA or open_kind == _LIST)):
                    if 0 < nu <= cap:
                        units[nu - 1, 1] = last_ch
                        units[nu - 1, 3] = last_by
                    if nu < cap:
                        extra = 1 if pending else 0
                        units[nu, 0] = nch + extra
                        units[nu, 2] = nby + extra
                        units[nu, 4] = kind
                        units[nu, 5] = 0 if kind == _FENCE else level
                    nu += 1
                    open_kind = kind if (kind == _PARA or kind == _LIST) else 0
                    if kind == _FENCE:
                        fence = level
        if pending:
            nch += 1
            nby += 1
            pending = False
        # This byte and the run of bytes after it that cannot be white space
        # or a line end (the rare lead bytes that may start white space go
        # back to the test above).
        q = p + 1
        leads = 1 if (b & 0xC0) != 0x80 else 0
        while q < hi:
            c = src[q]
            if c <= 0x20 or classes[c] != 0:
                break
            leads += 1 if (c & 0xC0) != 0x80 else 0
            q += 1
        nch += leads
        nby += q - p
        emitted = True
        last_ch = nch
        last_by = nby
        p = q
    if 0 < nu <= cap:
        units[nu - 1, 1] = last_ch
        units[nu - 1, 3] = last_by
    return min(nu, cap)


@kernel
def _cut(buf, lo_ch, hi_ch, lo_by, hi_by, step, window, cells, nc, cap) -> int:
    """Cut ``normalised[lo_ch:hi_ch]`` into sliding windows at ``cells[nc:]``; return the count."""
    sub = buf[lo_by:hi_by]
    room = min(cap - nc, (hi_ch - lo_ch) // step + 2)
    starts = np.empty(room, dtype=np.int64)
    ends = np.empty(room, dtype=np.int64)
    n = _find_windows(sub, step, window, starts, ends, room)
    k = min(_n_chunks(n, window, step), room)
    for j in range(k):
        c = nc + j
        cells[c, 0] = lo_ch + j * step
        cells[c, 1] = min(lo_ch + j * step + window, hi_ch)
        cells[c, 2] = lo_by + starts[j]
        cells[c, 3] = lo_by + ends[j] if j < k - 1 else hi_by
        cells[c, 5] = -1
        cells[c, 6] = -1
    return k


@kernel(inline="always")
def _emit(cells, nc, cap, s_ch, e_ch, s_by, e_by) -> int:  # pragma: no cover - inlined
    if nc < cap:
        cells[nc, 0] = s_ch
        cells[nc, 1] = e_ch
        cells[nc, 2] = s_by
        cells[nc, 3] = e_by
        cells[nc, 5] = -1
        cells[nc, 6] = -1
    return nc + 1


@kernel
def _cut_record(buf, s_ch, e_ch, s_by, e_by, step, window, cells, nc, cap) -> int:
    """Cut a record longer than ``window`` at its ``" | "`` separators; return the chunk count.

    Whole cells are packed while the run stays within ``window`` characters;
    a cell longer than that is cut into sliding windows.
    """
    active = False
    ps_ch = 0
    ps_by = 0
    pe_ch = 0
    pe_by = 0
    c_ch = s_ch
    c_by = s_by
    while True:
        q = c_by
        q_ch = c_ch
        found = False
        while q < e_by:
            if buf[q] == 32 and q + 2 < e_by and buf[q + 1] == 124 and buf[q + 2] == 32:
                found = True
                break
            q += 1
            while q < e_by and (buf[q] & 0xC0) == 0x80:
                q += 1
            q_ch += 1
        if active and q_ch - ps_ch <= window:
            pe_ch = q_ch
            pe_by = q
        else:
            if active:
                nc = _emit(cells, nc, cap, ps_ch, pe_ch, ps_by, pe_by)
                active = False
            if q_ch - c_ch <= window:
                active = True
                ps_ch, ps_by, pe_ch, pe_by = c_ch, c_by, q_ch, q
            elif nc < cap:
                nc += _cut(buf, c_ch, q_ch, c_by, q, step, window, cells, nc, cap)
        if not found:
            break
        c_by = q + 3
        c_ch = q_ch + 3
    if active:
        nc = _emit(cells, nc, cap, ps_ch, pe_ch, ps_by, pe_by)
    return nc


@kernel
def _pack(buf, units, nu, window, step, cells, cap, heads, hcap):
    """Pack units into chunks; return ``(chunks, headings)``.

    ``cells[c]`` receives ``(start_char, end_char, start_byte, end_byte,
    heading, table, row)`` (heading: local index of the innermost heading in
    effect, or -1; table and row of a record's chunks, from 1, else -1);
    ``heads[h]`` receives ``(parent, text_start_byte, text_end_byte,
    path_bytes)`` of heading ``h``.
    """
    stack_lv = np.zeros(_MAX_DEPTH + 1, dtype=np.int64)
    stack_h = np.zeros(_MAX_DEPTH + 1, dtype=np.int64)
    depth = 0
    nh = 0
    nc = 0
    table = 0
    row = 0
    active = False
    content = False
    cs_ch = 0
    ce_ch = 0
    cs_by = 0
    ce_by = 0
    for j in range(nu):
        s_ch = units[j, 0]
        e_ch = units[j, 1]
        s_by = units[j, 2]
        e_by = units[j, 3]
        kind = units[j, 4]
        if kind == _HEADING:
            if active and content:
                first = nc
                nc = _emit(cells, nc, cap, cs_ch, ce_ch, cs_by, ce_by)
                for c in range(first, min(nc, cap)):
                    cells[c, 4] = stack_h[depth - 1] if depth > 0 else -1
                active = False
            level = units[j, 5]
            while depth > 0 and stack_lv[depth - 1] >= level:
                depth -= 1
            parent = stack_h[depth - 1] if depth > 0 else -1
            if nh < hcap:
                t_by = min(s_by + level + 1, e_by)
                heads[nh, 0] = parent
                heads[nh, 1] = t_by
                heads[nh, 2] = e_by
                heads[nh, 3] = (heads[parent, 3] + 3 if parent >= 0 else 0) + (e_by - t_by)
            stack_lv[depth] = level
            stack_h[depth] = nh
            depth += 1
            nh += 1
        if kind == _RECORD:
            # A record is a chunk of its own: close the chunk before it, even
            # one of headings only.
            sec = stack_h[depth - 1] if depth > 0 else -1
            first = nc
            if active:
                nc = _emit(cells, nc, cap, cs_ch, ce_ch, cs_by, ce_by)
                active = False
                content = False
            if j > 0 and units[j - 1, 4] == _RECORD:
                row += 1
            else:
                table += 1
                row = 1
            mid = nc
            if e_ch - s_ch <= window:
                nc = _emit(cells, nc, cap, s_ch, e_ch, s_by, e_by)
            elif nc < cap:
                nc = _cut_record(buf, s_ch, e_ch, s_by, e_by, step, window, cells, nc, cap)
            for c in range(first, min(nc, cap)):
                cells[c, 4] = sec
                if c >= mid:
                    cells[c, 5] = table
                    cells[c, 6] = row
            continue
        is_content = kind != _HEADING
        if active and e_ch - cs_ch <= window:
            ce_ch = e_ch
            ce_by = e_by
            content = content or is_content
            continue
        first = nc
        if active and content:
            nc = _emit(cells, nc, cap, cs_ch, ce_ch, cs_by, ce_by)
            active = False
        if active:
            lo_ch, lo_by = cs_ch, cs_by
        else:
            lo_ch, lo_by = s_ch, s_by
        if e_ch - lo_ch <= window:
            active = True
            content = is_content
            cs_ch, cs_by, ce_ch, ce_by = lo_ch, lo_by, e_ch, e_by
        else:
            if nc < cap:
                nc += _cut(buf, lo_ch, e_ch, lo_by, e_by, step, window, cells, nc, cap)
            active = False
            content = False
        # Chunks emitted here belong to the headings in effect before this
        # unit, which (not a heading: those emitted above) changed nothing.
        for c in range(first, min(nc, cap)):
            cells[c, 4] = stack_h[depth - 1] if depth > 0 else -1
    if active:
        first = nc
        nc = _emit(cells, nc, cap, cs_ch, ce_ch, cs_by, ce_by)
        for c in range(first, min(nc, cap)):
            cells[c, 4] = stack_h[depth - 1] if depth > 0 else -1
    return min(nc, cap), min(nh, hcap)


@kernel
def _structure_doc(
    i, data, offsets, classes, window, step, uslot, units, cslot, cells, heads,
    clean_bytes, counts, sizes, n_heads, head_sizes,
) -> None:  # fmt: skip
    """Pass 1 for document ``i``: units, chunk boundaries, headings and sizes."""
    lo = offsets[i]
    hi = offsets[i + 1]
    buf = np.empty(hi - lo, dtype=np.uint8)
    nb = _normalise_doc(data, lo, hi, buf, 0, classes)
    u0 = uslot[i]
    ucap = uslot[i + 1] - u0
    ulocal = units[u0 : u0 + ucap]
    nu = _scan_units(data, lo, hi, classes, ulocal, ucap)
    c0 = cslot[i]
    ccap = cslot[i + 1] - c0
    nc, nh = _pack(
        buf[:nb], ulocal, nu, window, step, cells[c0 : c0 + ccap], ccap, heads[u0 : u0 + ucap], ucap
    )
    clean_bytes[i] = nb
    counts[i] = nc
    n_heads[i] = nh
    total = 0
    for c in range(c0, c0 + nc):
        total += cells[c, 3] - cells[c, 2]
    sizes[i] = total
    hb = 0
    for h in range(u0, u0 + nh):
        hb += heads[h, 3]
    head_sizes[i] = hb


@parallel_kernel
def _structure_pass(
    data, offsets, window, step, uslot, units, cslot, cells, heads,
    clean_bytes, counts, sizes, n_heads, head_sizes,
) -> None:  # fmt: skip
    """Pass 1 of :func:`structure_utf8`, parallel over documents."""
    classes = byte_classes()
    for i in prange(offsets.size - 1):
        # np.int64: the gufunc's prange index is uint64 (one signature, not two)
        _structure_doc(
            np.int64(i), data, offsets, classes, window, step, uslot, units, cslot, cells, heads,
            clean_bytes, counts, sizes, n_heads, head_sizes,
        )  # fmt: skip


@kernel
def _write_doc(
    i, data, offsets, classes, uslot, cslot, cells, heads, counts, n_heads,
    first_chunk, first_byte, first_head, first_head_byte,
    chunk_doc, chunk_ord, chunk_start, chunk_end, chunk_section, chunk_table, chunk_row,
    text_offsets, text_data, section_offsets, section_data,
) -> None:  # fmt: skip
    """Pass 2 for document ``i``: chunk rows, chunk bytes and heading paths."""
    k = counts[i]
    nh = n_heads[i]
    if k == 0 and nh == 0:
        return
    lo = offsets[i]
    hi = offsets[i + 1]
    buf = np.empty(hi - lo, dtype=np.uint8)
    _normalise_doc(data, lo, hi, buf, 0, classes)
    h0 = first_head[i]
    u0 = uslot[i]
    o = first_head_byte[i]
    for h in range(nh):
        section_offsets[h0 + h] = o
        parent = heads[u0 + h, 0]
        if parent >= 0:
            p_lo = section_offsets[h0 + parent]
            p_hi = section_offsets[h0 + parent + 1]
            _copy(section_data[p_lo:p_hi], section_data[o : o + p_hi - p_lo])
            o += p_hi - p_lo
            section_data[o] = 32
            section_data[o + 1] = 62
            section_data[o + 2] = 32
            o += 3
        t_lo = heads[u0 + h, 1]
        t_hi = heads[u0 + h, 2]
        _copy(buf[t_lo:t_hi], section_data[o : o + t_hi - t_lo])
        o += t_hi - t_lo
        section_offsets[h0 + h + 1] = o
    c0 = cslot[i]
    r0 = first_chunk[i]
    t = first_byte[i]
    for j in range(k):
        r = r0 + j
        chunk_doc[r] = i
        chunk_ord[r] = j
        chunk_start[r] = cells[c0 + j, 0]
        chunk_end[r] = cells[c0 + j, 1]
        local = cells[c0 + j, 4]
        chunk_section[r] = h0 + local if local >= 0 else -1
        chunk_table[r] = cells[c0 + j, 5]
        chunk_row[r] = cells[c0 + j, 6]
        b_lo = cells[c0 + j, 2]
        b_hi = cells[c0 + j, 3]
        size = b_hi - b_lo
        _copy(buf[b_lo:b_hi], text_data[t : t + size])
        t += size
        text_offsets[r + 1] = t


@parallel_kernel
def _write_pass(
    data, offsets, uslot, cslot, cells, heads, counts, n_heads,
    first_chunk, first_byte, first_head, first_head_byte,
    chunk_doc, chunk_ord, chunk_start, chunk_end, chunk_section, chunk_table, chunk_row,
    text_offsets, text_data, section_offsets, section_data,
) -> None:  # fmt: skip
    """Pass 2 of :func:`structure_utf8`, parallel over documents."""
    classes = byte_classes()
    for i in prange(offsets.size - 1):
        _write_doc(  # np.int64(i): see _structure_pass
            np.int64(i), data, offsets, classes, uslot, cslot, cells, heads, counts, n_heads,
            first_chunk, first_byte, first_head, first_head_byte,
            chunk_doc, chunk_ord, chunk_start, chunk_end, chunk_section, chunk_table, chunk_row,
            text_offsets, text_data, section_offsets, section_data,
        )  # fmt: skip


def structure_utf8(
    data: np.ndarray, offsets: np.ndarray, window: int, overlap: int
) -> tuple[np.ndarray, ...]:
    """Normalise white space and cut every document into structure-aware chunks.

    Parameters
    ----------
    data : uint8[::1]
        UTF-8 bytes of all documents; never written (passed on read-only).
    offsets : int64[::1]
        ``n_docs + 1`` non-decreasing byte offsets into ``data`` (a non-zero
        ``offsets[0]`` is fine).
    window : int
        Most characters in a chunk, ``>= 1``.
    overlap : int
        Overlap of the sliding windows that cut a long unit,
        ``0 <= overlap < window``.

    Returns
    -------
    chunk_doc : int64[n_chunks]
        Source document of every chunk (non-decreasing).
    chunk_ord : int32[n_chunks]
        Position of the chunk within its document.
    chunk_start, chunk_end : int64[n_chunks]
        Character offsets of the chunk into its normalised document.
    text_offsets : int64[n_chunks + 1]
        Arrow ``large_string`` offsets of the chunk texts.
    text_data : uint8[text_offsets[-1]]
        UTF-8 bytes of the chunks.
    chunk_section : int64[n_chunks]
        Index of the chunk's heading path in ``section_offsets``, or -1.
    section_offsets : int64[n_headings + 1]
        Offsets of the heading paths into ``section_data``.
    section_data : uint8[section_offsets[-1]]
        UTF-8 bytes of every heading path (`` > ``-joined), one per heading
        (equal paths may repeat).
    chunk_table, chunk_row : int32[n_chunks]
        Table of the chunk's record in its document and row of the record
        in its table, both from 1; -1 for a chunk that is not a record's.
    """
    n_docs = offsets.size - 1
    step = window - overlap
    data = readonly(data)
    offsets = readonly(offsets)
    lines = count_lines(data, offsets)
    raw = np.diff(offsets)
    uslot = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lines, out=uslot[1:])
    # Chunks: packed ones start at distinct units; the windows of a cut span
    # of c <= raw characters number at most c // step + 1 (one span per unit);
    # a cut record gives at most one chunk per cell (a cell and its " | " take
    # four characters or more) besides the windows of its long cells.
    cslot = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(3 * lines + raw // step + raw // 4 + 1, out=cslot[1:])
    units = np.empty((int(uslot[-1]), 6), dtype=np.int64)
    heads = np.empty((int(uslot[-1]), 4), dtype=np.int64)
    cells = np.empty((int(cslot[-1]), 7), dtype=np.int64)
    clean_bytes = np.empty(n_docs, dtype=np.int64)
    counts = np.empty(n_docs, dtype=np.int64)
    sizes = np.empty(n_docs, dtype=np.int64)
    n_heads = np.empty(n_docs, dtype=np.int64)
    head_sizes = np.empty(n_docs, dtype=np.int64)
    _structure_pass(
        data, offsets, window, step, uslot, units, cslot, cells, heads,
        clean_bytes, counts, sizes, n_heads, head_sizes,
    )  # fmt: skip

    def prefix(values: np.ndarray) -> np.ndarray:
        out = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(values, out=out[1:])
        return out

    first_chunk, first_byte = prefix(counts), prefix(sizes)
    first_head, first_head_byte = prefix(n_heads), prefix(head_sizes)
    n_chunks = int(first_chunk[-1])
    chunk_doc = np.empty(n_chunks, dtype=np.int64)
    chunk_ord = np.empty(n_chunks, dtype=np.int32)
    chunk_start = np.empty(n_chunks, dtype=np.int64)
    chunk_end = np.empty(n_chunks, dtype=np.int64)
    chunk_section = np.empty(n_chunks, dtype=np.int64)
    chunk_table = np.empty(n_chunks, dtype=np.int32)
    chunk_row = np.empty(n_chunks, dtype=np.int32)
    text_offsets = np.empty(n_chunks + 1, dtype=np.int64)
    text_offsets[0] = 0
    text_data = np.empty(int(first_byte[-1]), dtype=np.uint8)
    section_offsets = np.empty(int(first_head[-1]) + 1, dtype=np.int64)
    section_offsets[0] = 0
    section_data = np.empty(int(first_head_byte[-1]), dtype=np.uint8)
    _write_pass(
        data, offsets, uslot, cslot, cells, heads, counts, n_heads,
        first_chunk, first_byte, first_head, first_head_byte,
        chunk_doc, chunk_ord, chunk_start, chunk_end, chunk_section, chunk_table, chunk_row,
        text_offsets, text_data, section_offsets, section_data,
    )  # fmt: skip
    return (
        chunk_doc, chunk_ord, chunk_start, chunk_end, text_offsets, text_data,
        chunk_section, section_offsets, section_data, chunk_table, chunk_row,
    )  # fmt: skip


@parallel_kernel
def _joined_sizes(data, offsets, starts, ends, doc_starts, sizes) -> None:
    for d in prange(doc_starts.size - 1):
        total = 0
        reach = 0
        for c in range(doc_starts[d], doc_starts[d + 1]):
            lo = offsets[c]
            hi = offsets[c + 1]
            if c > doc_starts[d]:
                if starts[c] > reach:
                    total += 1
                else:
                    lo = _skip(data, lo, hi, reach - starts[c])
            total += hi - lo
            reach = max(reach, ends[c])
        sizes[d] = total


@parallel_kernel
def _joined_copy(data, offsets, starts, ends, doc_starts, out_offsets, out) -> None:
    for d in prange(doc_starts.size - 1):
        o = out_offsets[d]
        reach = 0
        for c in range(doc_starts[d], doc_starts[d + 1]):
            lo = offsets[c]
            hi = offsets[c + 1]
            if c > doc_starts[d]:
                if starts[c] > reach:
                    out[o] = 32
                    o += 1
                else:
                    lo = _skip(data, lo, hi, reach - starts[c])
            for p in range(lo, hi):
                out[o] = data[p]
                o += 1
            reach = max(reach, ends[c])


@kernel
def _skip(data, p, end, n):
    """Byte position after ``n`` code points from ``data[p]`` (not past ``end``)."""
    while n > 0 and p < end:
        p += 1
        while p < end and (data[p] & 0xC0) == 0x80:
            p += 1
        n -= 1
    return p


def join_chunks(
    data: np.ndarray,
    offsets: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    doc_starts: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Rebuild normalised documents from their chunks and character offsets.

    Works for windows and for structure-aware chunks alike: a chunk that
    starts before the end of the previous ones loses the characters already
    written; one that starts after it is preceded by one space (the white
    space between two units of a normalised document is one space; between
    two chunks of a record cut at its cells it is ``" | "``, which comes back
    as one space: the words are the same).

    Parameters
    ----------
    data : uint8[::1]
        UTF-8 bytes of the chunks.
    offsets : int64[::1]
        ``n_chunks + 1`` offsets into ``data``.
    starts, ends : int64[::1]
        Character offsets of every chunk into its document.
    doc_starts : int64[::1]
        ``n_docs + 1`` chunk indices: document ``d`` is chunks
        ``doc_starts[d]:doc_starts[d + 1]``, in order of ``starts``.

    Returns
    -------
    tuple of numpy.ndarray
        The documents' UTF-8 bytes and ``n_docs + 1`` offsets.
    """
    data, offsets, starts, ends, doc_starts = (
        readonly(a) for a in (data, offsets, starts, ends, doc_starts)
    )
    n_docs = doc_starts.size - 1
    sizes = np.empty(n_docs, dtype=np.int64)
    _joined_sizes(data, offsets, starts, ends, doc_starts, sizes)
    out_offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_offsets[1:])
    out = np.empty(int(out_offsets[-1]), dtype=np.uint8)
    _joined_copy(data, offsets, starts, ends, doc_starts, out_offsets, out)
    return out, out_offsets


def warmup() -> None:
    """Compile the kernels' one signature each (read-only inputs), or load them from cache."""
    data = np.frombuffer(
        b"# a\n\nb c\n- d\n| e\n```\nf\n```\ng h i\nk: v | l: w x y", dtype=np.uint8
    )
    out = structure_utf8(data, np.array([0, 3, data.size], dtype=np.int64), 3, 1)
    doc_starts = np.array([0, 1, out[0].size], dtype=np.int64)
    join_chunks(out[5], out[4], out[2], out[3], doc_starts)
