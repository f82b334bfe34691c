"""The heap kernels of ``native/`` before and after a change, in one process, interleaved.

    python benchmarks/ab_native_heap.py --base /path/to/old/checkout/native [--rounds 7]

Loads a second copy of the kernel package (``--base``: the ``native/``
directory of another checkout, e.g. ``git worktree add /tmp/base main``) beside
the installed ``fastrag._native`` and times the kernels that hold a heap on
the same inputs, round-robin, ``--rounds`` times: exact top-k
(``scan_topk`` + ``merge_topk`` at 1 and 16 queries, ``select_block`` +
``finalize_heaps``), the BM25 search (``maxscore`` and ``exhaustive``, serial, common-word and mixed queries,
on a seeded Zipf corpus) and both fusions. Prints the median time of each
and the ratio new / base, after checking that both give identical arrays.
``--compile`` also times each module's ``warmup()`` from an empty cache in
fresh processes (``FASTRAG_NUMBA_CACHE=0``), alternating base and new. Quote
ratios with the load average (``uptime``), not absolute times.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np


def load_copy(native_dir: Path, name: str = "base_native") -> dict[str, ModuleType]:
    """Import the kernel package in ``native_dir`` as ``name`` (its own Numba cache)."""
    spec = importlib.util.spec_from_file_location(
        name, native_dir / "__init__.py", submodule_search_locations=[str(native_dir)]
    )
    assert spec is not None and spec.loader is not None
    pkg = importlib.util.module_from_spec(spec)
    sys.modules[name] = pkg
    spec.loader.exec_module(pkg)
    return {m: importlib.import_module(f"{name}.{m}") for m in ("topk", "bm25", "fusion")}


def zipf_index(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """A BM25 index of ``n`` seeded Zipf documents and 64 queries (new kernels build it)."""
    from fastrag._native import bm25

    rng = np.random.default_rng(seed)
    vocab_size = 20000
    p = 1.0 / np.arange(1, vocab_size + 1) ** 1.1
    p /= p.sum()
    lens = rng.integers(20, 120, n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    ids = rng.choice(vocab_size, int(offsets[-1]), p=p).astype(np.uint64)
    hashes = ids * np.uint64(0x9E3779B97F4A7C15)
    voc, term_offsets, rows, tfs = bm25.build_postings(hashes, offsets)
    doc_len = lens.astype(np.int32)
    imp = bm25.impacts(rows, tfs, doc_len, 0.9, 0.4, float(lens.mean()))
    df = np.diff(term_offsets)
    idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
    wts = bm25.weights(term_offsets, imp, idf)
    max_w = bm25.term_maxima(term_offsets, wts)
    block_offsets, block_max = bm25.block_maxima(term_offsets, wts, bm25.BLOCK_SIZE)
    qlen = rng.integers(2, 7, 64)
    q_offsets = np.zeros(65, np.int64)
    np.cumsum(qlen, out=q_offsets[1:])
    q = rng.choice(2000, int(q_offsets[-1])).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    # mixed: each query one word of rank 2,000-20,000 and 1-5 of the top 200 (one
    # essential term in most windows once theta is up)
    mixed: list[int] = []
    m_offsets = np.zeros(65, np.int64)
    for j in range(64):
        mixed.append(int(rng.integers(2000, vocab_size)))
        mixed.extend(int(w) for w in rng.choice(200, int(rng.integers(1, 6))))
        m_offsets[j + 1] = len(mixed)
    mq = np.asarray(mixed, np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return (
        term_offsets,
        rows,
        wts,
        max_w,
        block_offsets,
        block_max,
        voc,
        q,
        q_offsets,
        mq,
        m_offsets,
    )


def cases(mods: dict[str, ModuleType], args: argparse.Namespace) -> dict[str, Callable[[], object]]:
    """The timed calls on one copy of the kernels (each returns its arrays)."""
    topk, bm25, fusion = mods["topk"], mods["bm25"], mods["fusion"]
    rng = np.random.default_rng(7)
    corpus = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    corpus.flags.writeable = False
    no_mask = np.zeros(0, np.bool_)
    out: dict[str, Callable[[], object]] = {}
    for m in (1, 16):
        queries = rng.standard_normal((m, args.dim)).astype(np.float32)

        def scan(queries: np.ndarray = queries, m: int = m) -> object:
            ids = np.empty((m, 2 * args.k), np.int64)
            scores = np.empty((m, 2 * args.k), np.float32)
            topk.scan_topk(queries, corpus, no_mask, 2, ids, scores)
            return topk.merge_topk(ids, scores, args.k)

        out[f"topk scan+merge m={m}"] = scan
    block = np.ascontiguousarray(corpus[:4096] @ rng.standard_normal((args.dim, 64)).astype("f4"))

    def select() -> object:
        heap_ids = np.empty((64, args.k), np.int64)
        heap_scores = np.empty((64, args.k), np.float32)
        topk.init_heaps(heap_ids, heap_scores)
        topk.select_block(block, 0, no_mask, heap_ids, heap_scores)
        topk.finalize_heaps(heap_ids, heap_scores)
        return heap_ids, heap_scores

    out["topk select_block m=64"] = select
    index = args.bm25_index
    for method in ("maxscore", "exhaustive"):

        def search(method: str = method) -> object:
            return bm25.search(
                *index[:9], args.bm25_n, args.k, no_mask, 1, method=method, stats=False
            )

        out[f"bm25 {method} 64 queries"] = search

        def mixed(method: str = method) -> object:
            return bm25.search(
                *index[:7], *index[9:11], args.bm25_n, args.k, no_mask, 1, method=method,
                stats=False,
            )  # fmt: skip

        out[f"bm25 {method} 64 mixed queries"] = mixed
    lists = np.stack([rng.permutation(400)[:100] for _ in range(3 * 64)]).reshape(3, 64, 100)
    lists = lists.astype(np.int64)
    groups = np.arange(400, dtype=np.int64) // 4
    groups.flags.writeable = False
    glists = np.zeros((0, 64, 1), np.int64)
    weights = np.ones(3)
    scores = rng.random(lists.shape).astype(np.float32)
    out["fusion rrf 64 questions"] = lambda: fusion.rrf_fuse(
        lists, weights, glists, np.zeros(0), groups, 60.0, args.k, False
    )
    out["fusion convex 64 questions"] = lambda: fusion.convex_fuse(
        lists, scores, weights, glists, np.zeros((0, 64, 1), np.float32), np.zeros(0), groups,
        args.k, False,
    )  # fmt: skip
    return out


def same(a: object, b: object) -> bool:
    if isinstance(a, tuple):
        return all(same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    return np.array_equal(a, b)  # type: ignore[arg-type]


def compile_times(base: Path, rounds: int) -> None:
    """Each module's cold warm-up, base and new alternately, in fresh processes, no cache."""
    env = {**os.environ, "FASTRAG_NUMBA_CACHE": "0"}
    load = f"import importlib.util, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
    for module in ("topk", "bm25", "fusion"):
        times: dict[str, list[float]] = {"base": [], "new": []}
        for _ in range(rounds):
            for which in ("base", "new"):
                if which == "base":
                    code = (
                        load + "from ab_native_heap import load_copy; "
                        f"m = load_copy(__import__('pathlib').Path({str(base)!r}))[{module!r}]; "
                    )
                else:
                    code = f"from fastrag._native import {module} as m; "
                code += "import time; t = time.perf_counter(); m.warmup(); "
                code += "print(time.perf_counter() - t)"
                out = subprocess.run(
                    [sys.executable, "-c", code], env=env, capture_output=True, text=True,
                    check=True,
                )  # fmt: skip
                times[which].append(float(out.stdout.strip().splitlines()[-1]))
        b, n = statistics.median(times["base"]), statistics.median(times["new"])
        print(f"compile {module:<7} warmup(): new/base {n / b:.3f}  (medians of {rounds})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the native/ directory to compare")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=50000, help="exact top-k corpus rows")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--bm25-n", type=int, default=100000, help="BM25 documents")
    ap.add_argument("--compile", type=int, default=0, help="rounds of cold compile timing")
    ap.add_argument("--only", default="", help="time only the cases whose name contains this")
    args = ap.parse_args()
    from fastrag._native import bm25, fusion, topk

    args.bm25_index = zipf_index(args.bm25_n, 3)
    new = cases({"topk": topk, "bm25": bm25, "fusion": fusion}, args)
    base = cases(load_copy(args.base.resolve()), args)
    new = {name: fn for name, fn in new.items() if args.only in name}
    times: dict[str, dict[str, list[float]]] = {name: {"base": [], "new": []} for name in new}
    for name in new:  # compile (or load) both, check both agree
        assert same(new[name](), base[name]()), name
    reps = {}
    for name, fn in new.items():  # calls per timing: about 20 ms each
        t = time.perf_counter()
        fn()
        reps[name] = max(1, int(0.02 / max(time.perf_counter() - t, 1e-6)))
    for r in range(args.rounds):
        for name in new:
            order = ("base", "new") if r % 2 == 0 else ("new", "base")
            for which in order:
                fn = new[name] if which == "new" else base[name]
                t = time.perf_counter()
                for _ in range(reps[name]):
                    fn()
                times[name][which].append(time.perf_counter() - t)
    print(f"load average {os.getloadavg()}; medians of {args.rounds} interleaved rounds")
    for name, t in times.items():
        b, n = statistics.median(t["base"]), statistics.median(t["new"])
        print(f"{name:<28} new/base {n / b:.3f}")
    if args.compile:
        compile_times(args.base.resolve(), args.compile)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
