"""HNSW: fastrag HnswIndex against raw hnswlib, faiss IndexHNSWFlat and exact search.

    python benchmarks/compare_hnsw.py --n 100000 --dim 384 --clusters 1000 \
        --efs 32,64,128,256 --repeat 3
    python benchmarks/compare_hnsw.py --n 100000 --filters   # filter strategies
    python benchmarks/compare_hnsw.py --auto --threads 1     # AUTO_MIN_ROWS crossover
    python benchmarks/compare_hnsw.py --build --n 20000      # build-time ratio, fresh builds

One process, the same clustered vectors (``random_unit_vectors(n + queries,
dim, seed=0, clusters=...)``; the last rows are the queries, drawn from the
same mixture). Systems:

- fastrag :class:`~fastrag.index.hnsw.HnswIndex` (``'ip'`` space, labels 0..n-1);
- raw hnswlib ``knn_query`` on the *same graph object* fastrag wraps, so the
  QPS ratio isolates the wrapper's overhead (two loaded copies of one file
  were measured up to 10 % apart); its build is timed on a graph of its own
  (same M / ef_construction / seed / threads) for the build-time ratio, or
  with ``--build`` (fresh builds taking turns);
- faiss ``IndexHNSWFlat`` (METRIC_INNER_PRODUCT, same M, efConstruction,
  efSearch, OpenMP threads = ``--threads``);
- fastrag :func:`~fastrag.index.exact.exact_topk` (recall 1 by definition).

Reported per ef: build seconds; QPS at batch 1 (a loop of single queries)
and at ``--batch``; recall@10 against exact search; p50/p99 single-query
latency; ratios fastrag / hnswlib. Rounds are interleaved (every round runs
every system once) and medians reported: the machine is shared and noisy.

Built indexes are cached under ``--cache-dir`` (default
/tmp/fastrag-hnsw-cache), keyed by n, dim, clusters, M, ef_construction,
seed; their build time is recorded next to them and reported as
``(cached)``. ``--rebuild`` forces fresh builds. A 1M build takes 20-40
minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np

from fastrag.index.exact import exact_topk
from fastrag.index.hnsw import (
    HnswConfig,
    HnswIndex,
    exact_over_rows,
    filter_strategy,
    recall_at_k,
)
from fastrag.index.hnsw_checks import check_labels, check_vectors

try:
    from fastrag.datasets.synthetic import random_unit_vectors
except ImportError:  # a checkout without the package mapping
    from datasets.synthetic import random_unit_vectors

K = 10


def _data(n: int, nq: int, dim: int, clusters: int) -> tuple[np.ndarray, np.ndarray]:
    allv = random_unit_vectors(n + nq, dim, seed=0, clusters=clusters)
    corpus = allv[:n]
    corpus.flags.writeable = False  # as a loaded store exposes it
    return corpus, np.ascontiguousarray(allv[n:])


class Cache:
    """Index files and build times under one directory, keyed by the build parameters."""

    def __init__(self, root: Path, args: argparse.Namespace, n: int) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.key = (
            f"n{n}-d{args.dim}-c{args.clusters}-M{args.M}-efc{args.efc}-s{args.seed}-q{args.nq}"
        )
        self.rebuild = args.rebuild

    def path(self, system: str, ext: str = "bin") -> Path:
        return self.root / f"{system}-{self.key}.{ext}"

    def get(self, system: str) -> float | None:
        meta = self.path(system, "json")
        if self.rebuild or not meta.exists() or not self.path(system).exists():
            return None
        return float(json.loads(meta.read_text())["build_seconds"])

    def put(self, system: str, seconds: float) -> None:
        self.path(system, "json").write_text(json.dumps({"build_seconds": seconds}))


def _truth(cache: Cache, queries: np.ndarray, corpus: np.ndarray, threads: int) -> np.ndarray:
    p = cache.path("truth", "npy")
    if p.exists():
        t = np.load(p)
        if t.shape == (queries.shape[0], K):
            return t
    t, _ = exact_topk(queries, corpus, K, threads=threads)
    np.save(p, t)
    return t


def _fastrag_index(
    cache: Cache, corpus: np.ndarray, config: HnswConfig, threads: int
) -> tuple[HnswIndex, float, bool]:
    seconds = cache.get("fastrag")
    if seconds is not None:
        return HnswIndex.load(cache.path("fastrag"), corpus.shape[1], config), seconds, True
    t0 = time.perf_counter()
    index = HnswIndex.build(corpus, np.arange(corpus.shape[0]), config, threads=threads)
    seconds = time.perf_counter() - t0
    index.save(cache.path("fastrag"))
    cache.put("fastrag", seconds)
    return index, seconds, False


def _raw_build_seconds(
    cache: Cache, corpus: np.ndarray, args: argparse.Namespace
) -> tuple[float, bool]:
    seconds = cache.get("hnswlib")
    if seconds is not None:
        return seconds, True
    n, dim = corpus.shape
    t0 = time.perf_counter()
    raw = hnswlib.Index(space="ip", dim=dim)
    raw.init_index(max_elements=n, M=args.M, ef_construction=args.efc, random_seed=args.seed)
    raw.add_items(corpus, np.arange(n), num_threads=args.threads)
    seconds = time.perf_counter() - t0
    raw.save_index(str(cache.path("hnswlib")))
    cache.put("hnswlib", seconds)
    del raw
    return seconds, False


def _faiss_index(
    cache: Cache, corpus: np.ndarray, args: argparse.Namespace
) -> tuple[Any, float, bool]:
    import faiss

    faiss.omp_set_num_threads(args.threads)
    seconds = cache.get("faiss")
    if seconds is not None:
        return faiss.read_index(str(cache.path("faiss"))), seconds, True
    t0 = time.perf_counter()
    index = faiss.IndexHNSWFlat(corpus.shape[1], args.M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = args.efc
    index.add(corpus)
    seconds = time.perf_counter() - t0
    faiss.write_index(index, str(cache.path("faiss")))
    cache.put("faiss", seconds)
    return index, seconds, False


def _loop(fn: Callable[[np.ndarray], Any], rows: list[np.ndarray]) -> list[float]:
    """Run ``fn`` once per single-query row; return per-call seconds."""
    times = []
    clock = time.perf_counter_ns
    for r in rows:
        t0 = clock()
        fn(r)
        times.append((clock() - t0) * 1e-9)
    return times


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def run_compare(args: argparse.Namespace) -> None:
    n = args.n
    corpus, queries = _data(n, args.nq, args.dim, args.clusters)
    cache = Cache(Path(args.cache_dir), args, n)
    config = HnswConfig(M=args.M, ef_construction=args.efc, random_seed=args.seed)
    truth = _truth(cache, queries, corpus, args.threads)
    fr, fr_build, fr_cached = _fastrag_index(cache, corpus, config, args.threads)
    raw_build, raw_cached = (
        (float("nan"), False) if args.no_raw_build else _raw_build_seconds(cache, corpus, args)
    )
    t0 = time.perf_counter()
    check_vectors(corpus, None)
    check_labels(np.arange(n), n)
    checks = time.perf_counter() - t0
    fa = None
    if not args.no_faiss:
        fa, fa_build, fa_cached = _faiss_index(cache, corpus, args)

    def tag(cached: bool) -> str:
        return " (cached)" if cached else ""

    print(
        f"n={n} dim={args.dim} clusters={args.clusters} M={args.M} efc={args.efc} "
        f"threads={args.threads} batch={args.batch} single-query loop={args.loop} rounds={args.repeat}"
    )
    print(
        f"build s: fastrag {fr_build:.1f}{tag(fr_cached)}  hnswlib {raw_build:.1f}{tag(raw_cached)}"
        f"  ratio {fr_build / raw_build:.3f}  (fastrag's input checks: {checks:.2f} s;"
        " one build each, run apart: --build for a fair ratio)"
        + (f"  faiss {fa_build:.1f}{tag(fa_cached)}" if fa is not None else "")
    )

    single = [queries[i : i + 1] for i in range(args.loop)]
    batch = queries[: args.batch]
    th = args.threads
    systems: dict[str, tuple[Callable[[int], None], Callable[[np.ndarray], Any]]] = {}

    # Raw hnswlib queries the very hnswlib.Index fastrag wraps: two loaded
    # copies of one file differ by up to 10 % (memory placement), which
    # would swamp the wrapper's cost. Its ef is set to the same value.
    raw = fr._index
    systems["fastrag"] = (fr.set_ef, lambda q: fr.search(q, K, threads=th))
    systems["hnswlib"] = (raw.set_ef, lambda q: raw.knn_query(q, k=K, num_threads=th))
    if fa is not None:

        def fa_set(ef: int) -> None:
            fa.hnsw.efSearch = ef

        systems["faiss"] = (fa_set, lambda q: fa.search(q, K))

    efs = [int(e) for e in args.efs.split(",")]
    b1: dict[tuple[str, int], list[float]] = {}
    bb: dict[tuple[str, int], list[float]] = {}
    lat: dict[tuple[str, int], list[float]] = {}
    rec: dict[tuple[str, int], float] = {}
    names = list(systems)
    orders = list(itertools.permutations(names))
    clock = time.perf_counter_ns
    for rnd in range(args.repeat):
        for ef in efs:
            for set_ef, search in systems.values():
                set_ef(ef)
                search(single[0])  # warm (and, for fastrag, set ef under the lock)
            # Batch 1: the systems take turns query by query, cycling through
            # every order (each system follows each other equally often: a
            # faiss call leaves OpenMP threads spinning on the other core),
            # so load changes on the shared machine hit all alike. At each
            # turn they run different queries (offset by L / systems), so
            # none finds the graph region warmed by another's same query.
            per: dict[str, list[float]] = {name: [] for name in names}
            nl = len(single)
            for i in range(nl):
                for name in orders[i % len(orders)]:
                    r = single[(i + (names.index(name) * nl) // len(names)) % nl]
                    search = systems[name][1]
                    t0 = clock()
                    search(r)
                    per[name].append((clock() - t0) * 1e-9)
            for name in names:
                b1.setdefault((name, ef), []).append(len(per[name]) / sum(per[name]))
                lat.setdefault((name, ef), []).extend(per[name])
            for rep in range(args.batch_calls):  # big batches: turns, every order
                for name in orders[(rnd * args.batch_calls + rep) % len(orders)]:
                    search = systems[name][1]
                    t0 = time.perf_counter()
                    out = search(batch)
                    bb.setdefault((name, ef), []).append(
                        batch.shape[0] / (time.perf_counter() - t0)
                    )
                    labels = out[1] if name == "faiss" else out[0]
                    rec[(name, ef)] = recall_at_k(
                        np.asarray(labels, dtype=np.int64), truth[: args.batch]
                    )
        times = _loop(lambda q: exact_topk(q, corpus, K, threads=th), single[: args.exact_loop])
        b1.setdefault(("exact", 0), []).append(len(times) / sum(times))
        lat.setdefault(("exact", 0), []).extend(times)
        t0 = time.perf_counter()
        exact_topk(batch, corpus, K, threads=th)
        bb.setdefault(("exact", 0), []).append(batch.shape[0] / (time.perf_counter() - t0))
        rec[("exact", 0)] = 1.0

    med = statistics.median
    print(
        f"{'system':<9}{'ef':>5}{'QPS b1':>10}{'QPS b' + str(args.batch):>11}{'recall@10':>11}"
        f"{'p50 us':>9}{'p99 us':>9}{'b1 vs hnswlib':>15}{'b' + str(args.batch) + ' vs hnswlib':>17}"
    )
    for ef in efs:
        for name in systems:
            key = (name, ef)
            r1 = med(b1[key]) / med(b1[("hnswlib", ef)])
            rb = med(bb[key]) / med(bb[("hnswlib", ef)])
            print(
                f"{name:<9}{ef:>5}{med(b1[key]):>10.0f}{med(bb[key]):>11.0f}{rec[key]:>11.4f}"
                f"{_pct(lat[key], 50) * 1e6:>9.0f}{_pct(lat[key], 99) * 1e6:>9.0f}"
                f"{r1:>15.3f}{rb:>17.3f}"
            )
    key = ("exact", 0)
    print(
        f"{'exact':<9}{'-':>5}{med(b1[key]):>10.0f}{med(bb[key]):>11.0f}{1.0:>11.4f}"
        f"{_pct(lat[key], 50) * 1e6:>9.0f}{_pct(lat[key], 99) * 1e6:>9.0f}"
    )
    print(
        "fastrag overhead (QPS hnswlib / fastrag - 1, same graph, medians): "
        + ", ".join(
            f"ef={ef}: b1 {med(b1[('hnswlib', ef)]) / med(b1[('fastrag', ef)]) - 1:+.1%}"
            f" b{args.batch} {med(bb[('hnswlib', ef)]) / med(bb[('fastrag', ef)]) - 1:+.1%}"
            for ef in efs
        )
    )


def run_build(args: argparse.Namespace) -> None:
    """Fresh builds, fastrag and raw hnswlib taking turns: medians and their ratio."""
    corpus, _ = _data(args.n, args.nq, args.dim, args.clusters)
    labels = np.arange(args.n)
    config = HnswConfig(M=args.M, ef_construction=args.efc, random_seed=args.seed)
    times: dict[str, list[float]] = {"fastrag": [], "hnswlib": []}
    for rnd in range(args.repeat):
        for name in ["fastrag", "hnswlib"] if rnd % 2 == 0 else ["hnswlib", "fastrag"]:
            t0 = time.perf_counter()
            if name == "fastrag":
                HnswIndex.build(corpus, labels, config, threads=args.threads)
            else:
                raw = hnswlib.Index(space="ip", dim=args.dim)
                raw.init_index(
                    max_elements=args.n, M=args.M, ef_construction=args.efc, random_seed=args.seed
                )
                raw.add_items(corpus, labels, num_threads=args.threads)
            times[name].append(time.perf_counter() - t0)
    f, r = statistics.median(times["fastrag"]), statistics.median(times["hnswlib"])
    print(
        f"build n={args.n} dim={args.dim} clusters={args.clusters} threads={args.threads}, "
        f"{args.repeat} rounds taking turns: fastrag {f:.2f} s, hnswlib {r:.2f} s, ratio {f / r:.3f} "
        f"(all: fastrag {[round(t, 2) for t in times['fastrag']]}, "
        f"hnswlib {[round(t, 2) for t in times['hnswlib']]})"
    )


def run_auto(args: argparse.Namespace) -> None:
    """Batch-1 latency of exact scan vs HNSW (ef_search default) over corpus sizes."""
    config = HnswConfig(M=args.M, ef_construction=args.efc, random_seed=args.seed)
    sizes = [int(s) for s in args.auto_sizes.split(",")]
    print(
        f"batch-1 median latency (us), dim={args.dim} clusters={args.clusters} "
        f"threads={args.threads} ef={config.ef_search}; {args.loop} queries x {args.repeat} rounds"
    )
    print(f"{'n':>9}{'exact':>9}{'hnsw':>9}{'exact/hnsw':>12}{'recall':>9}")
    for n in sizes:
        corpus, queries = _data(n, args.nq, args.dim, args.clusters)
        cache = Cache(Path(args.cache_dir), args, n)
        index, _, _ = _fastrag_index(cache, corpus, config, args.threads)
        truth = _truth(cache, queries, corpus, args.threads)
        single = [queries[i : i + 1] for i in range(args.loop)]
        ex: list[float] = []
        hn: list[float] = []
        th = args.threads
        for _ in range(args.repeat):
            exact_topk(single[0], corpus, K, threads=th)
            ex.append(
                statistics.median(_loop(lambda q: exact_topk(q, corpus, K, threads=th), single))
            )
            index.search(single[0], K, threads=th)
            hn.append(statistics.median(_loop(lambda q: index.search(q, K, threads=th), single)))
        out = index.search(queries, K, threads=th)
        assert out is not None
        r = recall_at_k(out[0], truth)
        e, h = statistics.median(ex), statistics.median(hn)
        print(f"{n:>9}{e * 1e6:>9.0f}{h * 1e6:>9.0f}{e / h:>12.2f}{r:>9.4f}")


def run_filters(args: argparse.Namespace) -> None:
    """Per-query cost and recall of each filter strategy over selectivities and batch sizes."""
    n = args.n
    corpus, queries = _data(n, args.nq, args.dim, args.clusters)
    cache = Cache(Path(args.cache_dir), args, n)
    config = HnswConfig(M=args.M, ef_construction=args.efc, random_seed=args.seed)
    index, _, _ = _fastrag_index(cache, corpus, config, args.threads)
    th = args.threads
    rng = np.random.default_rng(7)
    sels = [float(s) for s in args.selectivities.split(",")]
    batches = [int(b) for b in args.filter_batches.split(",")]
    direction = rng.standard_normal(args.dim).astype(np.float32)
    proj = corpus @ direction
    print(
        f"n={n} dim={args.dim} ef={config.ef_search} k={K} threads={th}: ms per query "
        f"(median of {args.repeat} rounds), recall@{K} vs exact filtered search"
    )
    print(
        f"{'mask':<7}{'sel':>7}{'n_elig':>8}{'m':>6}  {'rule':<11}"
        + "".join(f"{s:>20}" for s in ("oversample", "filter", "exact-mask", "exact-gather"))
    )
    for kind in args.mask_kinds.split(","):
        for s in sels:
            n_e = max(1, round(s * n))
            mask = np.zeros(n, dtype=np.bool_)
            if kind == "random":
                mask[rng.choice(n, size=n_e, replace=False)] = True
            else:  # correlated with the geometry: the n_e rows furthest along one direction
                mask[np.argsort(proj)[-n_e:]] = True
            for m in batches:
                total = max(m, args.filter_queries)
                qs = queries[:total]
                chunks = [qs[i : i + m] for i in range(0, total, m)]
                truth, _ = exact_topk(qs, corpus, K, mask=mask, threads=th)
                rows = np.flatnonzero(mask)

                def over(
                    fn: Callable[[np.ndarray], Any], chunks: list[np.ndarray] = chunks
                ) -> np.ndarray:
                    return np.concatenate([np.asarray(fn(c)[0]) for c in chunks])

                def gather(c: np.ndarray, rows: np.ndarray = rows) -> tuple[np.ndarray, np.ndarray]:
                    return exact_over_rows(c, corpus, rows, K, threads=th)

                runs: dict[str, Callable[[np.ndarray], Any]] = {
                    "oversample": lambda c, mask=mask: index.search(
                        c, K, eligible=mask, threads=th, strategy="oversample"
                    ),
                    "filter": lambda c, mask=mask: index.search(
                        c, K, eligible=mask, threads=th, strategy="filter"
                    ),
                    "exact-mask": lambda c, mask=mask: exact_topk(
                        c, corpus, K, mask=mask, threads=th
                    ),
                    "exact-gather": gather,
                }
                cells = []
                for name, fn in runs.items():
                    # the callback visits about 2 * ef / s nodes per query, ~1 us each
                    est = total * min(n, 2 * config.ef_search * n / n_e) * 1e-6
                    if name == "filter" and est * args.repeat > args.filter_budget:
                        cells.append(f"{'skipped':>20}")
                        continue
                    fn(chunks[0])  # warm: JIT signatures, hnswlib ef
                    ts = []
                    ids = None
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        ids = over(fn)
                        ts.append(time.perf_counter() - t0)
                    assert ids is not None
                    assert mask[ids].all(), name
                    r = recall_at_k(ids, truth)
                    cells.append(f"{statistics.median(ts) / total * 1e3:>11.3f} r={r:.3f}")
                rule = filter_strategy(n, n_e, K, m)
                print(f"{kind:<7}{s:>7.3f}{n_e:>8}{m:>6}  {rule:<11}" + "".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--efs", default="32,64,128,256")
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--M", type=int, default=16)
    ap.add_argument("--efc", type=int, default=200)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--nq", type=int, default=1024, help="held-out queries generated")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument(
        "--batch-calls", type=int, default=3, help="big-batch calls per system and round"
    )
    ap.add_argument("--loop", type=int, default=500, help="single queries per round")
    ap.add_argument("--exact-loop", type=int, default=100, help="single exact queries per round")
    ap.add_argument(
        "--no-raw-build",
        action="store_true",
        help="skip the raw hnswlib build (no build-time ratio)",
    )
    ap.add_argument("--cache-dir", default="/tmp/fastrag-hnsw-cache")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--no-faiss", action="store_true")
    ap.add_argument(
        "--build",
        action="store_true",
        help="fresh builds only (no cache), fastrag and hnswlib taking turns",
    )
    ap.add_argument("--auto", action="store_true", help="exact vs HNSW batch-1 crossover")
    ap.add_argument("--auto-sizes", default="2000,5000,10000,20000,50000")
    ap.add_argument("--filters", action="store_true", help="filter strategy grid")
    ap.add_argument("--selectivities", default="0.5,0.2,0.1,0.05,0.02,0.01,0.005,0.002")
    ap.add_argument("--filter-batches", default="1,16,64,256")
    ap.add_argument("--mask-kinds", default="random,slab")
    ap.add_argument(
        "--filter-queries",
        type=int,
        default=64,
        help="queries per cell (batches of m; at least one batch)",
    )
    ap.add_argument(
        "--filter-budget",
        type=float,
        default=20.0,
        help="skip the callback filter when its estimated seconds per cell exceed this",
    )
    args = ap.parse_args()
    if args.build:
        run_build(args)
    elif args.auto:
        run_auto(args)
    elif args.filters:
        run_filters(args)
    else:
        run_compare(args)


if __name__ == "__main__":
    main()
