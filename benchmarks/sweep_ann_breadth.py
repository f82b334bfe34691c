"""Recall@10 by search breadth: fastrag's HNSW, FAISS HNSW32 and LanceDB IVF_HNSW_SQ.

The same data as ``compare_stores.py`` (N x 384 unit vectors around 64
clusters, 300 noisy questions, default N = 100,000), each index built once
and searched at each breadth: ``ef`` for fastrag's graph, ``ef_search`` for
FAISS, ``ef`` for LanceDB's HNSW (over ``nprobes`` 32 partitions, refine 4).
Recall is against exact search over the same vectors; it does not depend on
the machine's load, so this finds the breadth at which each ANN index meets
recall 0.95 before ``compare_stores.py`` times it.

Smoke run:  python benchmarks/sweep_ann_breadth.py --n 5000 --questions 50
Real run:   python benchmarks/sweep_ann_breadth.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

import numpy as np
from compare_stores import make_data, payload, recall

from fastrag.index.exact import ExactIndex
from fastrag.index.hnsw import HnswConfig, HnswIndex
from fastrag.index.stores import parse_store
from fastrag.index.stores.base import write_rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--breadths", default="64,128,256,512,1024,2048")
    args = ap.parse_args()
    n, k = args.n, args.k
    breadths = [int(b) for b in args.breadths.split(",")]
    x, qs, bucket = make_data(n, args.questions, args.dim)
    ids = np.arange(n, dtype=np.int64)
    truth = ExactIndex([x], args.dim, None).search(qs, k)[0]
    tmp = tempfile.mkdtemp(prefix="sweep_ann-")
    print(f"n={n:,} dim={args.dim} questions={len(qs)} k={k}: recall@{k} against exact")
    print(f"{'index':>22} | " + " | ".join(f"{b:>6}" for b in breadths) + " | build_s")

    t = time.perf_counter()
    graph = HnswIndex.build(x, ids, HnswConfig())
    build = time.perf_counter() - t
    found = [graph.search(qs, k, ef=max(b, k))[0] for b in breadths]
    _row("fastrag HNSW (M=16)", [recall(f, truth) for f in found], build)

    for name, spec, attr in (
        ("FAISS HNSW32", "faiss:HNSW32", "ef_search"),
        ("LanceDB IVF_HNSW_SQ", f"lancedb:{tmp}/lance?index=IVF_HNSW_SQ", "ef"),
    ):
        try:
            store = parse_store(spec)
            t = time.perf_counter()
            store.create(args.dim)
            store.train(x)
            write_rows(store, ids, x, payload(n, bucket))
            store.finish()
            build = time.perf_counter() - t
        except Exception as exc:  # an engine missing: say so, go on
            print(f"{name}: cannot build ({type(exc).__name__}: {exc})")
            continue
        got = []
        for b in breadths:
            setattr(store, attr, b)
            got.append(recall(store.search(qs, k)[0], truth))
        _row(name, got, build)
        store.close()
    return 0


def _row(name: str, values: list[float], build: float) -> None:
    print(f"{name:>22} | " + " | ".join(f"{v:6.3f}" for v in values) + f" | {build:7.1f}")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
