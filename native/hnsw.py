"""Search an hnswlib graph in place: its saved file, memory-mapped, read by Numba.

hnswlib's ``load_index`` copies the whole file (graph and vectors) into its
own memory while holding the GIL, seconds for a million vectors. These
kernels read the file where it lies instead, viewed as ``uint32`` words
(``words``) and the same bytes as ``float32`` (``vecs``):

- a header of :data:`HEADER_WORDS` words;
- ``count`` elements of ``per_w`` words each (the base layer): a link header
  (bits 0-15: the number of links, bit 16 of the word: deleted), ``maxM0``
  links (internal ids), the vector (``dim`` float32 at word ``data_w``), the
  label (uint64 at word ``label_w``);
- then, element after element, a size in bytes and that many bytes of upper
  layer links: ``level`` lists of ``maxM + 1`` words (a count, then links).

:func:`graph_layout` checks every link and locates every element's upper
layers (one pass, the GIL released); :func:`search` is hnswlib's
``searchKnn`` for the inner-product space (distance ``1 - dot``): a greedy
descent through the upper layers, then the base-layer beam search of width
``ef`` (``searchBaseLayerST``), with deleted elements and an optional filter
by label excluded from the results but not from the walk, exactly as hnswlib
does. Both priority queues break ties as hnswlib's ``std::pair`` queues do.
:func:`search_serial` is its serial kernel, called directly by a caller that
keeps the read-only views and int64 scalars of a graph (one call a question).

Kernels never write into their inputs (the visited-tag arrays are scratch
space owned by the caller) and stay in bounds on a file that passed
:func:`graph_layout`.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from . import heap
from ._jit import frozen, kernel, parallel_kernel

__all__ = ["HEADER_WORDS", "LAYOUT_ERRORS", "graph_layout", "search", "search_serial", "warmup"]

HEADER_WORDS = 24
"""hnswlib's file header is 96 bytes: 24 words (the kernels write the literal 24)."""

LAYOUT_ERRORS = {
    1: "a base-layer node has more links than 2 * M",
    2: "a base-layer link points past the last element",
    3: "the upper layers are truncated",
    4: "an upper-layer record has a size that is not a whole number of levels",
    5: "an upper-layer node has more links than M",
    6: "an upper-layer link points past the last element or below its layer",
    7: "the entry point is not on the top layer",
    8: "bytes follow the last upper-layer record",
}
"""What a non-zero error code of :func:`graph_layout` means."""


@kernel
def _layout_pass(words, count, per_w, label_w, max_m0, max_m, maxlevel, entry, labels, deleted,
                 upper_off, levels):  # fmt: skip
    """Fill the per-element arrays; return ``(error code, element)`` (code 0: valid)."""
    nw = words.size
    for i in range(count):
        base = 24 + i * per_w
        head = words[base]
        cnt = head & 0xFFFF
        if cnt > max_m0:
            return 1, i
        for j in range(cnt):
            if words[base + 1 + j] >= count:
                return 2, i
        deleted[i] = (head >> 16) & 1
        labels[i] = np.int64(words[base + label_w]) | (np.int64(words[base + label_w + 1]) << 32)
    pos = 24 + count * per_w
    rec = max_m + 1
    for i in range(count):
        if pos >= nw:
            return 3, i
        size = np.int64(words[pos])
        pos += 1
        if size % (4 * rec) != 0:
            return 4, i
        lvl = size // (4 * rec)
        if pos + lvl * rec > nw:
            return 3, i
        upper_off[i] = pos
        levels[i] = lvl
        pos += lvl * rec
    if pos != nw:
        return 8, count
    for i in range(count):
        off = upper_off[i]
        for lv in range(levels[i]):
            cnt = words[off + lv * rec] & 0xFFFF
            if cnt > max_m:
                return 5, i
            for j in range(cnt):
                c = words[off + lv * rec + 1 + j]
                if c >= count or levels[c] < lv + 1:
                    return 6, i
    if count and (levels[entry] != maxlevel):
        return 7, entry
    return 0, 0


def graph_layout(
    words: np.ndarray,
    count: int,
    per_w: int,
    label_w: int,
    max_m0: int,
    max_m: int,
    maxlevel: int,
    entry: int,
) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Check an hnswlib file's links and locate its elements (GIL released).

    Parameters
    ----------
    words : uint32[::1]
        The whole file (its size a multiple of 4 bytes).
    count : int
        Elements (from the header).
    per_w : int
        Words per base-layer element.
    label_w : int
        Word offset of the label within an element.
    max_m0, max_m : int
        Link capacities of the base layer and of the upper layers.
    maxlevel, entry : int
        Top layer and entry point (from the header).

    Returns
    -------
    error : int
        0 when valid, else a key of :data:`LAYOUT_ERRORS`.
    at : int
        The element where the error was found.
    labels : int64[count]
        Label of every element.
    deleted : bool[count]
        hnswlib's deleted mark of every element.
    upper_off : int64[count]
        Word offset of every element's upper-layer lists.
    levels : int32[count]
        Upper layers of every element (0: base layer only).
    """
    (words,) = frozen(words)
    labels = np.zeros(count, dtype=np.int64)
    deleted = np.zeros(count, dtype=np.bool_)
    upper_off = np.zeros(count, dtype=np.int64)
    levels = np.zeros(count, dtype=np.int32)
    err, at = _layout_pass(
        words, np.int64(count), np.int64(per_w), np.int64(label_w), np.int64(max_m0),
        np.int64(max_m), np.int64(maxlevel), np.int64(entry), labels, deleted, upper_off, levels,
    )  # fmt: skip
    return int(err), int(at), labels, deleted, upper_off, levels


@kernel(inline="always")
def _dist(vecs, at, q):  # pragma: no cover - inlined
    """The inner-product distance of hnswlib, ``1 - dot`` of ``q`` and the vector at word ``at``."""
    d = q.size
    v = vecs[at : at + d]  # a slice: unit-stride loads the loop vectorises
    s = np.float32(0.0)
    for j in range(d):
        s += v[j] * q[j]
    return np.float32(1.0) - s


@kernel
def _search_one(words, vecs, per_w, data_w, label_w, max_m, upper_off, levels, labels, deleted,
                n_deleted, allowed, entry, maxlevel, q, k, ef, visited, cd, ci, td, ti, out_labels,
                out_dist):  # fmt: skip
    """The ``searchKnn`` of hnswlib for one query; return how many results it wrote (``<= k``).

    ``visited`` holds one uint16 tag per element and the current tag in its
    last slot; ``cd``/``ci`` (the candidate queue) and ``td``/``ti`` (the
    results) are scratch space; the candidate queue is grown when full and
    returned. Both are :mod:`.heap` heaps, whose root is the entry that ranks
    last (lowest score, then highest row): hnswlib's max-heap of ``(-dist,
    id)`` pairs is the heap of scores ``dist`` (root: the nearest candidate,
    the highest id among equals), its max-heap of ``(dist, id)`` the heap of
    scores ``-dist`` (root: the farthest result), so both pop in hnswlib's
    order (negating a float32 is exact).
    """
    count = labels.size
    use_allowed = allowed.size > 0
    cur = entry
    curdist = _dist(vecs, 24 + cur * per_w + data_w, q)
    rec = max_m + 1
    for level in range(maxlevel, 0, -1):
        changed = True
        while changed:
            changed = False
            if levels[cur] < level:
                break
            off = upper_off[cur] + (level - 1) * rec
            cnt = words[off] & 0xFFFF
            for j in range(cnt):
                c = np.int64(words[off + 1 + j])
                d = _dist(vecs, 24 + c * per_w + data_w, q)
                if d < curdist:
                    curdist = d
                    cur = c
                    changed = True
    tag = np.uint16(visited[count] + 1)
    if tag == 0:
        visited[:] = 0
        tag = np.uint16(1)
    visited[count] = tag
    bare = n_deleted == 0 and not use_allowed
    nt = np.int64(0)  # typed from the start: no Literal[int](0) signature of heap.push
    nc = np.int64(0)
    ep = cur
    if bare or (not deleted[ep] and (not use_allowed or allowed[labels[ep]])):
        dist = _dist(vecs, 24 + ep * per_w + data_w, q)
        lower = dist
        nt = heap.push(td, ti, nt, -dist, ep)
        nc = heap.push(cd, ci, nc, dist, ep)
    else:
        lower = np.float32(np.inf)
        nc = heap.push(cd, ci, nc, lower, ep)
    visited[ep] = tag
    while nc > 0:
        cdist = cd[0]
        node = ci[0]
        if cdist > lower and (bare or nt == ef):
            break
        nc = heap.pop(cd, ci, nc)
        base = 24 + node * per_w
        cnt = words[base] & 0xFFFF
        for j in range(cnt):
            c = np.int64(words[base + 1 + j])
            if visited[c] == tag:
                continue
            visited[c] = tag
            dist = _dist(vecs, 24 + c * per_w + data_w, q)
            if nt < ef or lower > dist:
                if nc == cd.size:
                    grown_d = np.empty(2 * cd.size, dtype=cd.dtype)
                    grown_i = np.empty(2 * ci.size, dtype=ci.dtype)
                    for t in range(nc):  # not a slice assignment: see tokenize's grown
                        grown_d[t] = cd[t]
                        grown_i[t] = ci[t]
                    cd = grown_d
                    ci = grown_i
                nc = heap.push(cd, ci, nc, dist, c)
                if bare or (not deleted[c] and (not use_allowed or allowed[labels[c]])):
                    nt = heap.push(td, ti, nt, -dist, c)
                while nt > ef:
                    nt = heap.pop(td, ti, nt)
                if nt > 0:
                    lower = -td[0]
    while nt > k:
        nt = heap.pop(td, ti, nt)
    found = nt
    for j in range(found - 1, -1, -1):
        out_labels[j] = labels[ti[0]]
        out_dist[j] = -td[0]
        nt = heap.pop(td, ti, nt)
    for j in range(found, out_labels.size):
        out_labels[j] = -1
        out_dist[j] = np.inf
    return found, cd, ci


@kernel
def search_serial(words, vecs, per_w, data_w, label_w, max_m, upper_off, levels, labels, deleted,
                  n_deleted, allowed, entry, maxlevel, queries, k, ef, visited):  # fmt: skip
    """:func:`_search_one` for every query, in order, on the caller's ``visited`` tags.

    The serial search in one call: returns ``(out_labels, out_dist, fewest)``,
    the arrays of :func:`search` and the fewest results any query found
    (``k`` when every query found ``k``; ``k`` for no query).
    """
    m = queries.shape[0]
    out_labels = np.empty((m, k), dtype=np.int64)
    out_dist = np.empty((m, k), dtype=np.float32)
    fewest = k
    if labels.size == 0:
        out_labels[:] = -1
        out_dist[:] = np.inf
        return out_labels, out_dist, np.int64(0) if m else fewest
    cap = max(64, 2 * ef)
    cd = np.empty(cap, dtype=np.float32)
    ci = np.empty(cap, dtype=np.int64)
    td = np.empty(ef + 1, dtype=np.float32)
    ti = np.empty(ef + 1, dtype=np.int64)
    for qi in range(m):
        f, cd, ci = _search_one(
            words, vecs, per_w, data_w, label_w, max_m, upper_off, levels, labels, deleted,
            n_deleted, allowed, entry, maxlevel, queries[qi], k, ef, visited, cd, ci, td, ti,
            out_labels[qi], out_dist[qi],
        )  # fmt: skip
        fewest = min(fewest, f)
    return out_labels, out_dist, fewest


@parallel_kernel
def _search_parallel(words, vecs, per_w, data_w, label_w, max_m, upper_off, levels, labels,
                     deleted, n_deleted, allowed, entry, maxlevel, queries, k, ef, visited,
                     n_blocks, out_labels, out_dist, found):  # fmt: skip
    """Queries ``b, b + n_blocks, ...`` on worker ``b``, each on its own row of ``visited``."""
    m = queries.shape[0]
    for b in prange(n_blocks):
        cap = max(64, 2 * ef)
        cd = np.empty(cap, dtype=np.float32)
        ci = np.empty(cap, dtype=np.int64)
        td = np.empty(ef + 1, dtype=np.float32)
        ti = np.empty(ef + 1, dtype=np.int64)
        vis = visited[b]
        for qi in range(b, m, n_blocks):
            f, cd, ci = _search_one(
                words, vecs, per_w, data_w, label_w, max_m, upper_off, levels, labels, deleted,
                n_deleted, allowed, entry, maxlevel, queries[qi], k, ef, vis, cd, ci, td, ti,
                out_labels[qi], out_dist[qi],
            )  # fmt: skip
            found[qi] = f


def search(
    words: np.ndarray,
    vecs: np.ndarray,
    layout: tuple[int, int, int, int, int, int],
    upper_off: np.ndarray,
    levels: np.ndarray,
    labels: np.ndarray,
    deleted: np.ndarray,
    n_deleted: int,
    allowed: np.ndarray,
    queries: np.ndarray,
    k: int,
    ef: int,
    visited: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hnswlib search of every query, on the mapped file.

    Parameters
    ----------
    words, vecs : uint32[::1], float32[::1]
        The file, twice (the same bytes).
    layout : tuple of int
        ``(per_w, data_w, label_w, max_m, entry, maxlevel)``.
    upper_off, levels, labels : arrays
        From :func:`graph_layout`.
    deleted : bool[count]
        Elements never returned (hnswlib's marks, plus later deletions).
    n_deleted : int
        ``deleted.sum()``: 0 runs hnswlib's bare-bone search.
    allowed : bool[label_bound] or bool[0]
        Labels that may be returned (empty: all).
    queries : float32[m, dim]
        C-contiguous queries.
    k, ef : int
        Results per query and beam width (``ef >= k``).
    visited : uint16[count + 1] or uint16[w, count + 1]
        Visited tags (zeros to start; reused across calls): one row runs the
        queries serially, ``w`` rows run them on ``w`` workers.

    Returns
    -------
    out_labels : int64[m, k]
        Labels, nearest first, padded with ``-1``.
    out_dist : float32[m, k]
        Their distances ``1 - dot``, padded with ``inf``.
    found : int64[m]
        Results per query (fewer than ``k`` when the walk found fewer).
    """
    words, vecs, upper_off, levels, labels, deleted, allowed, queries = frozen(
        words, vecs, upper_off, levels, labels, deleted, allowed, queries
    )
    per_w, data_w, label_w, max_m, entry, maxlevel = (np.int64(x) for x in layout)
    m = queries.shape[0]
    out_labels = np.empty((m, k), dtype=np.int64)
    out_dist = np.empty((m, k), dtype=np.float32)
    found = np.zeros(m, dtype=np.int64)
    if m == 0 or labels.size == 0:
        out_labels[:] = -1
        out_dist[:] = np.inf
        return out_labels, out_dist, found
    args = (
        words, vecs, per_w, data_w, label_w, max_m, upper_off, levels, labels, deleted,
        np.int64(n_deleted), allowed, entry, maxlevel, queries, np.int64(k), np.int64(ef),
    )  # fmt: skip
    if visited.ndim == 1:
        out_labels, out_dist, _ = search_serial(*args, visited)
        found = np.count_nonzero(out_labels >= 0, axis=1).astype(np.int64)  # labels are >= 0
    else:
        _search_parallel(*args, visited, np.int64(visited.shape[0]), out_labels, out_dist, found)
    return out_labels, out_dist, found


def warmup() -> None:
    """Compile the layout pass and both searches (filtered or not) on a tiny graph file."""
    dim, max_m = 4, 2
    max_m0 = 2 * max_m
    links_w = 1 + max_m0
    per_w = links_w + dim + 2
    count = 3
    words = np.zeros(HEADER_WORDS + count * per_w + count, dtype=np.uint32)
    for i in range(count):
        base = HEADER_WORDS + i * per_w
        others = [j for j in range(count) if j != i]
        words[base] = len(others)
        words[base + 1 : base + 1 + len(others)] = others
        words[base + links_w : base + links_w + dim] = np.full(dim, 0.5, np.float32).view(np.uint32)
        words[base + links_w + dim] = i
    err, _, labels, deleted, upper_off, levels = graph_layout(
        words, count, per_w, links_w + dim, max_m0, max_m, 0, 0
    )
    assert err == 0
    vecs = words.view(np.float32)
    q = np.full((2, dim), 0.5, dtype=np.float32)
    layout = (per_w, links_w, links_w + dim, max_m, 0, 0)
    for allowed in (np.zeros(0, np.bool_), np.ones(count, np.bool_)):
        for visited in (np.zeros(count + 1, np.uint16), np.zeros((2, count + 1), np.uint16)):
            search(words, vecs, layout, upper_off, levels, labels, deleted, 0, allowed, q, 2, 2,
                   visited)  # fmt: skip
