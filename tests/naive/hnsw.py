"""Reference twin of ``fastrag._native.hnsw``: hnswlib's file layout and search, in Python.

Obvious rather than fast: ``struct`` for the file, ``heapq`` for hnswlib's two
priority queues, float64 dot products.
"""

from __future__ import annotations

import heapq
import struct

import numpy as np

HEADER = struct.Struct("<QQQQQQiIQQQdQ")


def parse(blob: bytes) -> dict:
    """Every element's links per layer, vector, label and deleted mark."""
    (_, _, count, per_elem, label_off, data_off, maxlevel, entry, max_m, _, _, _, _) = (
        HEADER.unpack_from(blob, 0)
    )
    dim = (label_off - data_off) // 4
    links, vectors, labels, deleted = [], [], [], []
    for i in range(count):
        at = HEADER.size + i * per_elem
        n = struct.unpack_from("<H", blob, at)[0]
        deleted.append(bool(blob[at + 2] & 1))
        links.append([list(struct.unpack_from(f"<{n}I", blob, at + 4))])
        vectors.append(np.frombuffer(blob, np.float32, dim, at + data_off).astype(np.float64))
        labels.append(struct.unpack_from("<Q", blob, at + label_off)[0])
    pos = HEADER.size + count * per_elem
    rec = 4 * (max_m + 1)
    for i in range(count):
        size = struct.unpack_from("<I", blob, pos)[0]
        pos += 4
        for level in range(size // rec):
            n = struct.unpack_from("<H", blob, pos + level * rec)[0]
            links[i].append(list(struct.unpack_from(f"<{n}I", blob, pos + level * rec + 4)))
        pos += size
    return {"links": links, "vectors": vectors, "labels": labels, "deleted": deleted,
            "entry": entry, "maxlevel": maxlevel}  # fmt: skip


def search(graph: dict, q: np.ndarray, k: int, ef: int, allowed=None) -> list[tuple[float, int]]:
    """hnswlib's ``searchKnn``: ``(distance, label)`` pairs, nearest first (``1 - dot``)."""
    vec, links = graph["vectors"], graph["links"]
    labels, deleted = graph["labels"], graph["deleted"]
    q = np.asarray(q, dtype=np.float64)

    def dist(i: int) -> float:
        return 1.0 - float(vec[i] @ q)

    def ok(i: int) -> bool:
        return not deleted[i] and (allowed is None or bool(allowed[labels[i]]))

    cur = graph["entry"]
    cur_d = dist(cur)
    for level in range(graph["maxlevel"], 0, -1):
        changed = True
        while changed:
            changed = False
            for c in links[cur][level]:
                d = dist(c)
                if d < cur_d:
                    cur, cur_d, changed = c, d, True
    bare = not any(deleted) and allowed is None
    top: list[tuple[float, int]] = []  # max-heap of (dist, id) as (-dist, -id)
    cand: list[tuple[float, int]] = []  # max-heap of (-dist, id) as (dist, -id)
    if bare or ok(cur):
        d = dist(cur)
        lower = d
        heapq.heappush(top, (-d, -cur))
        heapq.heappush(cand, (d, -cur))
    else:
        lower = float("inf")
        heapq.heappush(cand, (lower, -cur))
    seen = {cur}
    while cand:
        c_d, neg = cand[0]
        if c_d > lower and (bare or len(top) == ef):
            break
        heapq.heappop(cand)
        for c in links[-neg][0]:
            if c in seen:
                continue
            seen.add(c)
            d = dist(c)
            if len(top) < ef or lower > d:
                heapq.heappush(cand, (d, -c))
                if bare or ok(c):
                    heapq.heappush(top, (-d, -c))
                while len(top) > ef:
                    heapq.heappop(top)
                if top:
                    lower = -top[0][0]
    best = sorted((-nd, -ni) for nd, ni in top)[:k]
    return [(d, labels[i]) for d, i in best]
