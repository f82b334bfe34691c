"""Exact top-k: fastrag against numpy and faiss IndexFlatIP, one process, same data.

    python benchmarks/compare_topk.py --n 100000 --dim 384 \
        --batches 1,64,1024 --repeat 5 --threads 1,2

Systems (every configuration tried is printed; ``*`` marks the fastest faiss
configuration of each batch size, which the "vs faiss" column divides by):

- numpy: ``S = Q @ C.T`` then ``argpartition`` + ``argsort`` (the naive user
  approach), at each BLAS thread count;
- faiss ``IndexFlatIP`` at each OpenMP thread count and each
  ``distance_compute_blas_threshold`` in ``--faiss-thresholds`` (faiss 1.15
  compares it with ``batch * dim``, default 128000; older releases compared
  it with ``batch``, default 20);
- fastrag :func:`~fastrag.index.exact.exact_topk` at each thread count.

Limits, measured in the same rounds as the systems (the machine is shared
and noisy, so every round runs every configuration once, limits included,
and medians are compared): the memory read rate (a Numba ``prange`` sum over
a ``--mem-gb`` array, at each thread count; and a single-stream
``numpy.sum``) and the sgemm rate (numpy ``matmul`` of 1024x384 by
384x16384 float32, at each BLAS thread count, set with threadpoolctl).

Columns: QPS (from the median time) and best QPS (fastest run); the ratio
to faiss's best (medians); ``read/lim``, corpus bytes read per
second (``n * d * 4`` per batch) over the Numba read rate at the same thread
count; ``sgemm/lim``, useful FLOP/s (``2 * m * n * d``) over the sgemm rate
at the same thread count; agree@k, the share of numpy's top-k ids returned.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fastrag._native.topk as kernels
import numba
import numpy as np
from fastrag._native._jit import parallel_kernel
from threadpoolctl import threadpool_limits

from fastrag._threads import threads as numba_threads
from fastrag.index.exact import BLAS_MIN_BATCH, exact_topk

try:
    from fastrag.datasets.synthetic import random_unit_vectors
except ImportError:  # a checkout without the package mapping
    from datasets.synthetic import random_unit_vectors


@parallel_kernel
def _parallel_sum(a: np.ndarray) -> float:
    """Sum a float32 array with a ``prange`` reduction: the multi-stream read rate."""
    s = np.float32(0.0)
    for i in numba.prange(a.shape[0]):
        s += a[i]
    return s


@dataclass
class Config:
    """One measured configuration: a system at one setting, or a limit."""

    system: str
    label: str
    threads: int
    run: Callable[[], Any]
    times: list[float] = field(default_factory=list)
    spent: float = 0.0
    out: Any = None

    @property
    def seconds(self) -> float:
        return statistics.median(self.times)


def measure(configs: list[Config], repeat: int, max_seconds: float, pause: float) -> None:
    """Round-robin: a warm-up round, then ``repeat`` rounds of every config.

    A warm-up slower than 2 s counts as a sample; a config that has used
    ``max_seconds`` is skipped in later rounds (it keeps >= 1 sample). The
    untimed ``pause`` before each run lets the previous system's spinning
    thread pools (OpenMP, OpenBLAS) go to sleep.
    """
    for rnd in range(repeat + 1):
        for c in configs:
            if rnd > 0 and c.times and c.spent >= max_seconds:
                continue
            time.sleep(pause)
            t = time.perf_counter()
            c.out = c.run()
            sec = time.perf_counter() - t
            c.spent += sec
            if rnd > 0 or sec > 2.0:
                c.times.append(sec)
        gc.collect()


def numpy_topk(queries: np.ndarray, corpus: np.ndarray, k: int) -> np.ndarray:
    s = queries @ corpus.T
    part = np.argpartition(-s, k - 1, axis=1)[:, :k]
    top = np.take_along_axis(s, part, axis=1)
    order = np.argsort(-top, axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def agree(ids: np.ndarray, ref: np.ndarray) -> float:
    k = ref.shape[1]
    shares = [
        len(set(a[:k].tolist()) & set(b.tolist())) / k for a, b in zip(ids, ref, strict=False)
    ]
    return float(np.mean(shares))


def with_blas(t: int, fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with threadpool_limits(t, user_api="blas"):
            return fn()

    return run


def with_numba(t: int, fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with numba_threads(t):
            return fn()

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--batches", default="1,64,1024")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--faiss-thresholds", default="default,1,1000000000")
    ap.add_argument("--mem-gb", type=float, default=1.0)
    ap.add_argument("--max-seconds", type=float, default=30.0, help="time cap per configuration")
    ap.add_argument("--pause", type=float, default=0.05, help="idle seconds before each run")
    ap.add_argument("--no-numpy", action="store_true")
    ap.add_argument("--no-faiss", action="store_true")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    thread_counts = [int(t) for t in args.threads.split(",")]
    n, d, k = args.n, args.dim, args.k

    kernels.warmup()
    corpus = random_unit_vectors(n, d, seed=0)
    corpus.flags.writeable = False  # as a loaded store exposes it
    all_queries = random_unit_vectors(max(batches), d, seed=1)
    big = np.ones(int(args.mem_gb * 2**30) // 4, dtype=np.float32)
    _parallel_sum(big[:1024])
    ga = np.random.default_rng(0).standard_normal((1024, 384), dtype=np.float32)
    gb = np.random.default_rng(1).standard_normal((384, 16384), dtype=np.float32)
    gc_ = np.empty((1024, 16384), dtype=np.float32)
    index = None
    if not args.no_faiss:
        import faiss

        index = faiss.IndexFlatIP(d)
        index.add(corpus)
        default_threshold = faiss.cvar.distance_compute_blas_threshold
    print(
        f"corpus {n:,} x {d} float32 ({n * d * 4 / 1e6:,.0f} MB, read-only), k={k}, "
        f"fastrag BLAS path from batch {BLAS_MIN_BATCH}; "
        f"medians of {args.repeat} round-robin rounds"
    )
    print(
        f"{'batch':>5}  {'system':<8} {'config':<34} {'runs':>4} {'QPS':>10} {'best QPS':>10} "
        f"{'vs faiss':>8} {'read/lim':>8} {'sgemm/lim':>9} {'agree@k':>7}"
    )

    for m in batches:
        q = np.ascontiguousarray(all_queries[:m])
        reference = numpy_topk(q, corpus, k)
        limits: list[Config] = []
        for t in thread_counts:
            limits.append(
                Config(
                    "read",
                    f"Numba prange sum, {t} thr",
                    t,
                    with_numba(t, lambda: _parallel_sum(big)),
                )
            )
            limits.append(
                Config(
                    "sgemm",
                    f"1024x384x16384, {t} BLAS thr",
                    t,
                    with_blas(t, lambda: np.matmul(ga, gb, out=gc_)),
                )
            )
        limits.append(Config("read1", "numpy sum, single stream", 1, lambda: big.sum()))
        systems: list[Config] = []
        for t in thread_counts:
            if not args.no_numpy:
                systems.append(
                    Config(
                        "numpy", f"{t} BLAS thr", t, with_blas(t, lambda: numpy_topk(q, corpus, k))
                    )
                )
        if index is not None:
            for t in thread_counts:
                for thr in args.faiss_thresholds.split(","):
                    value = default_threshold if thr == "default" else int(thr)

                    def run_faiss(t: int = t, value: int = value) -> np.ndarray:
                        faiss.omp_set_num_threads(t)
                        faiss.cvar.distance_compute_blas_threshold = value
                        with threadpool_limits(t, user_api="blas"):
                            return index.search(q, k)[1]

                    label = f"omp {t}, blas_thr {value}"
                    label += " (default)" if thr == "default" else ""
                    systems.append(Config("faiss", label, t, run_faiss))
        for t in thread_counts:
            path = "scan" if m < BLAS_MIN_BATCH else "blas"
            systems.append(
                Config(
                    "fastrag",
                    f"{t} thr ({path})",
                    t,
                    lambda t=t: exact_topk(q, corpus, k, threads=t)[0],
                )
            )
        measure(limits + systems, args.repeat, args.max_seconds, args.pause)
        if index is not None:
            faiss.cvar.distance_compute_blas_threshold = default_threshold

        read = {c.threads: big.nbytes / c.seconds for c in limits if c.system == "read"}
        flop = 2 * 1024 * 384 * 16384
        sgemm = {c.threads: flop / c.seconds for c in limits if c.system == "sgemm"}
        single = next(big.nbytes / c.seconds for c in limits if c.system == "read1")
        faiss_best = min((c.seconds for c in systems if c.system == "faiss"), default=float("nan"))
        print(
            f"{m:>5}  limits: read "
            + ", ".join(f"{read[t] / 1e9:.1f}" for t in thread_counts)
            + f" GB/s (threads {args.threads}; numpy single stream {single / 1e9:.1f}); sgemm "
            + ", ".join(f"{sgemm[t] / 1e9:.0f}" for t in thread_counts)
            + " GFLOP/s"
        )
        for c in systems:
            sec = c.seconds
            star = " *" if c.system == "faiss" and sec == faiss_best else ""
            print(
                f"{m:>5}  {c.system:<8} {c.label + star:<34} {len(c.times):>4} {m / sec:>10,.1f} "
                f"{m / min(c.times):>10,.1f} "
                f"{faiss_best / sec:>7.2f}x {n * d * 4 / sec / read[c.threads]:>8.2f} "
                f"{2 * m * n * d / sec / sgemm[c.threads]:>9.2f} {agree(c.out, reference):>7.3f}"
            )
        print()


if __name__ == "__main__":
    main()
