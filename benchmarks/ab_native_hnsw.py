"""The mapped-graph HNSW search kernel before and after a change, in one process, interleaved.

    python benchmarks/ab_native_hnsw.py --base /path/to/old/checkout/native [--rounds 9]

Builds one hnswlib graph (``--n`` seeded unit vectors of ``--dim``, a few
deleted), saves it, opens it as a :class:`fastrag.index.hnsw_mapped.MappedGraph`
and runs its ``knn_query`` with the installed kernels and with the copy in
``--base`` (``ab_native_heap.load_copy``), round-robin: unfiltered and with
every other label allowed, at two ``ef``. Checks that both return identical
labels and distances (bit for bit), then prints the median time of each and
the ratio new / base. Quote ratios with the load average, not absolute times.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from ab_native_heap import load_copy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the native/ directory to compare")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    from fastrag.index import hnsw_mapped
    from fastrag.index.hnsw import HnswConfig, HnswIndex

    load_copy(args.base.resolve())
    base_kernels = importlib.import_module("base_native.hnsw")
    new_kernels = hnsw_mapped._kernels
    rng = np.random.default_rng(5)
    x = rng.standard_normal((args.n + args.queries, args.dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    corpus, queries = x[: args.n], x[args.n :]
    idx = HnswIndex.build(corpus, np.arange(args.n), HnswConfig(M=12, ef_construction=80))
    idx.mark_deleted(list(range(0, args.n, 97)))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hnsw.bin"
        idx.save(path)
        graph = hnsw_mapped.MappedGraph.open(path, args.dim, 12)
        allowed = np.zeros(args.n, bool)
        allowed[::2] = True
        cases = {
            f"ef={ef} {'filtered' if mask is not None else 'all'}": (ef, mask)
            for ef in (16, 64)
            for mask in (None, allowed)
        }

        def run(kernels: object, ef: int, mask: np.ndarray | None) -> object:
            hnsw_mapped._kernels = kernels  # type: ignore[assignment]
            graph.set_ef(ef)
            return graph.knn_query(queries, 10, 1, mask)

        for name, (ef, mask) in cases.items():  # compile (or load) both, check both agree
            a, b = run(new_kernels, ef, mask), run(base_kernels, ef, mask)
            assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True)), name  # type: ignore[call-overload]
        times = {name: {"base": [], "new": []} for name in cases}
        for r in range(args.rounds):
            for name, (ef, mask) in cases.items():
                for which in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    kernels = new_kernels if which == "new" else base_kernels
                    t = time.perf_counter()
                    run(kernels, ef, mask)
                    times[name][which].append(time.perf_counter() - t)
        hnsw_mapped._kernels = new_kernels
    print(f"load average {os.getloadavg()}; medians of {args.rounds} interleaved rounds")
    for name, t in times.items():
        b, n = statistics.median(t["base"]), statistics.median(t["new"])
        print(f"hnsw mapped {name:<14} new/base {n / b:.3f}")


if __name__ == "__main__":
    main()
