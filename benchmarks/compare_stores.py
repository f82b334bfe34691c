"""External vector stores side by side: each through fastrag and through its own client.

The same N x 384 unit vectors (default 100,000) and 300 questions for every
store: FAISS (Flat, HNSW32), LanceDB (flat), Qdrant local, Milvus Lite,
beside fastrag's own exact and HNSW indexes; FAISS IVF256,Flat, LanceDB
with its IVF_HNSW_SQ index and Qdrant Edge (its HNSW graph, in process) are
the ANN configurations beside them. Per store:
whether its top-10 equals fastrag's exact top-10 (``same``), recall@10
against exact (no filter, and filters keeping 10 % and 1 % of the rows),
whether every filtered question got k results, questions/s, p50/p99 of one
question through fastrag and through the store's own client (interleaved;
``overhead`` is the p50 ratio), the build time, the process's memory growth,
and 10,000 deletes in one call.

The vector leg is driven directly (``StoreIndex.search`` with the filter's
mask and pushdown, as the retriever calls it) so that the ratio to the
store's own client measures fastrag's overhead, not embedding or fusion.

Smoke run:  python benchmarks/compare_stores.py --n 5000 --questions 50
Real run:   python benchmarks/compare_stores.py          (on a quiet machine)

Qdrant's local mode is skipped beyond ``--qdrant-max`` vectors (default
20,000): its writes are one SQLite transaction per call through the adapter,
but its search is brute force in Python with a filter checked point by point
(at 20,000 its rows alone took over 10 minutes on a loaded machine); Qdrant
Edge (``qdrant-edge``, Qdrant's engine in process) runs at every size. Its
graph is built only over segments of its indexing threshold and more (the
engine's default: 5,000 x 384 vectors stayed a plain segment, 8,000 x 384 were
indexed); a smoke run below it searches plain segments, exactly, unless the
store says ``qdrant-edge?indexing_threshold=1``. ``mem_MB`` counts this process and its
children (the Milvus Lite server).
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from fastrag.index.exact import ExactIndex
from fastrag.index.stores import Condition, Pushdown, StoreIndex, parse_store
from fastrag.index.stores.base import write_rows


def _rss_pages(pid: str) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1])


def rss_mb() -> float:
    """Resident memory of this process and its children (Milvus Lite's server), MB."""
    try:
        pages = _rss_pages("self")
    except OSError:
        return float("nan")
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = f.read().rsplit(")", 1)[1].split()[1]
            if ppid == me:
                pages += _rss_pages(entry)
        except (OSError, IndexError):
            continue
    return pages * resource.getpagesize() / 2**20


def make_data(n: int, q: int, dim: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((64, dim)).astype(np.float32)
    x = centers[rng.integers(0, 64, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    qs = x[rng.integers(0, n, q)] + 0.3 * rng.standard_normal((q, dim)).astype(np.float32)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    bucket = rng.integers(0, 100, n)  # "team": t<bucket>; 10 % = bucket < 10, 1 % = bucket 0
    return x.astype(np.float32), qs.astype(np.float32), bucket


def payload(n: int, bucket: np.ndarray) -> pa.Table:
    teams = np.array([f"t{b}" for b in range(100)])[bucket]
    return pa.table(
        {
            "chunk_id": pa.array(np.arange(n), pa.int64()),
            "doc_id": pa.array(teams),  # filterable as a column in every store
            "title": pa.nulls(n, pa.string()),
            "source": pa.nulls(n, pa.string()),
            "section": pa.nulls(n, pa.string()),
            "ord": pa.array(np.zeros(n, np.int32)),
            "start": pa.array(np.zeros(n, np.int64)),
            "end": pa.array(np.zeros(n, np.int64)),
            "updated_at": pa.nulls(n, pa.int64()),
            "acl": pa.array([[]] * n, pa.list_(pa.string())),
            "public": pa.array(np.ones(n, np.bool_)),
            "metadata": pa.nulls(n, pa.string()),
        }
    )


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    hits = [
        len(set(f[f >= 0]) & set(t[t >= 0])) / max(1, (t >= 0).sum())
        for f, t in zip(found, truth, strict=True)
    ]
    return float(np.mean(hits))


def timed(fn, qs: np.ndarray, singles: int | None = None):
    """Questions/s of one batch call, p50/p99 ms of single questions (the first ``singles``)."""
    return timed_pair(fn, None, qs, singles)[0]


def timed_pair(fn_a, fn_b, qs: np.ndarray, singles: int | None = None):
    """``timed`` of two functions, interleaved question by question (one load for both).

    The first ``singles`` questions (default all) are timed one at a time;
    the batch call (questions/s) has every question.

    Which goes first alternates: the second search of a question finds the
    store's pages in the CPU cache that the first brought in (on an IVF
    index at 20,000 rows that alone made the second 1.5-2x faster).
    """
    fns = [f for f in (fn_a, fn_b) if f is not None]
    lat: list[list[float]] = [[] for _ in fns]
    for i in range(len(qs) if singles is None else min(singles, len(qs))):
        order = list(range(len(fns)))
        if i % 2:
            order.reverse()
        for j in order:
            t = time.perf_counter()
            fns[j](qs[i : i + 1])
            lat[j].append(time.perf_counter() - t)
    out = []
    for j, fn in enumerate(fns):
        t = time.perf_counter()
        fn(qs)
        batch = time.perf_counter() - t
        ms = np.array(lat[j]) * 1e3
        out.append((len(qs) / batch, float(np.percentile(ms, 50)), float(np.percentile(ms, 99))))
    return out


def client_search(store, engine: str, k: int):
    """The store's own client doing the unfiltered search fastrag asks of it (raw results).

    The same request the adapter sends, without fastrag around it: the
    ``overhead`` column is fastrag's search over this one.
    """
    if engine == "faiss":
        import faiss

        index = store.index
        params, keep = store._params(faiss, index, None)  # the adapter's nprobe / efSearch
        return lambda q, _keep=keep: index.search(q, k, params=params)
    if engine == "lancedb":
        table = store.table

        def run(q):
            req = table.search(q if len(q) > 1 else q[0]).distance_type("dot").limit(k)
            if not store.exact:
                req = req.nprobes(store.nprobes).refine_factor(store.refine)
                if store.ef is not None:
                    req = req.ef(max(store.ef, k * max(1, store.refine)))
            return req.select(["chunk_id", "_distance"]).to_arrow()

        return run
    if engine == "qdrant":
        from qdrant_client import models

        client = store.client

        def run(q):
            requests = [models.QueryRequest(query=v.tolist(), limit=k) for v in q]
            return client.query_batch_points(store.collection, requests=requests)

        return run
    if engine == "qdrant-edge":
        import qdrant_edge as qe

        shard = store._live()
        params = qe.SearchParams(hnsw_ef=store.ef, exact=store.exact)

        def run(q):
            requests = [
                qe.QueryRequest(
                    limit=k,
                    query=qe.Query.Nearest(v),
                    params=params,
                    with_payload=False,
                    with_vector=False,
                )  # fmt: skip
                for v in q.tolist()
            ]
            if len(requests) == 1:
                return shard.query(requests[0])
            return shard.query_batch(qe.QueryBatchRequest(requests))

        return run
    if engine == "milvus":
        client = store.client

        def run(q):
            return client.search(
                store.collection, data=list(q), limit=k, output_fields=["chunk_id"],
                search_params={"metric_type": "IP"},
            )  # fmt: skip

        return run
    raise ValueError(engine)


NAMES = {"none": "recall", "10%": "r@10%", "1%": "r@1%"}


_T0 = time.perf_counter()


class Stage:
    """``with Stage("faiss", "build"):`` prints the stage's seconds and the run's elapsed (stderr)."""

    def __init__(self, store: str, what: str) -> None:
        self.store, self.what = store, what

    def __enter__(self) -> Stage:
        self.t = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        took = time.perf_counter() - self.t
        print(
            f"  [{time.perf_counter() - _T0:7.1f} s] {self.store}: {self.what} {took:.1f} s",
            file=sys.stderr, flush=True,
        )  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--deletes", type=int, default=10_000)
    ap.add_argument("--qdrant-max", type=int, default=20_000)
    ap.add_argument(
        "--latency-questions", type=int, default=100,
        help="questions timed one by one for p50/p99 (each path; the batch qps uses all)",
    )  # fmt: skip
    ap.add_argument(
        "--stores",
        default=(
            "exact,hnsw,faiss,faiss:HNSW32,faiss:IVF256,Flat,lancedb,lancedb?index=IVF_HNSW_SQ,"
            "qdrant,qdrant-edge,milvus"
        ),
        help="comma-separated: exact, hnsw[?ef_search=N&M=N], faiss[:factory][?ef_search=N] "
        "(a factory's own commas are kept), lancedb[?index=...&ef=N], qdrant, "
        "qdrant-edge[?ef=...&indexing_threshold=...], milvus",
    )
    args = ap.parse_args()
    singles = args.latency_questions
    n, k = args.n, args.k
    x, qs, bucket = make_data(n, args.questions, args.dim)
    ids = np.arange(n, dtype=np.int64)
    table = payload(n, bucket)
    exact = ExactIndex([x], args.dim, None)
    filters = {
        "none": (None, None),
        "10%": (
            bucket < 10,
            Pushdown((Condition("doc_id", "string", "in", tuple(f"t{b}" for b in range(10))),)),
        ),
        "1%": (bucket == 0, Pushdown((Condition("doc_id", "string", "eq", "t0"),))),
    }
    truth = {name: exact.search(qs, k, mask=m)[0] for name, (m, _) in filters.items()}
    tmp = Path(tempfile.mkdtemp(prefix="compare_stores-"))
    print(f"n={n:,} dim={args.dim} questions={len(qs)} k={k}  (machine load matters: see --help)")
    print(
        "same: share of questions whose top-k ids equal fastrag's exact top-k (all three "
        "filters); overhead: fastrag's p50 over the client's; del_s: one delete call of "
        f"{args.deletes:,} ids (del_ok: the store's count fell by exactly that)"
    )
    cols = (
        "store", "path", "build_s", "mem_MB", "same", "recall", "r@10%", "r@1%", "full_k",
        "qps", "p50_ms", "p99_ms", "overhead", "del_s", "del_ok",
    )  # fmt: skip
    print(" | ".join(f"{c:>9}" for c in cols))
    specs = []
    for part in args.stores.split(","):  # "faiss:IVF256,Flat": a factory's commas stay with it
        part = part.strip()
        if (
            specs
            and specs[-1].startswith("faiss:")
            and part
            and part.split(":")[0].split("?")[0]
            not in ("exact", "hnsw", "faiss", "lancedb", "qdrant", "qdrant-edge", "milvus")
        ):
            specs[-1] += "," + part
        elif part:
            specs.append(part)

    def quality(row, search) -> bool:
        full, same = True, []
        for name, (mask, push) in filters.items():
            found = search(mask, push)
            eligible = n if mask is None else int(mask.sum())
            full &= bool(((found >= 0).sum(axis=1) >= min(k, eligible)).all())
            same.extend((found == truth[name]).all(axis=1).tolist())
            row[NAMES[name]] = recall(found, truth[name])
        row["same"] = float(np.mean(same))
        row["full_k"] = full
        return full

    for spec in specs:
        gc.collect()
        m0 = rss_mb()
        t0 = time.perf_counter()
        print(f"  [{time.perf_counter() - _T0:7.1f} s] {spec}: start", file=sys.stderr, flush=True)
        if spec == "exact" or spec.split("?")[0] == "hnsw":
            with Stage(spec, "build"):
                if spec == "exact":
                    index = exact
                else:
                    from fastrag.index.graph import GraphIndex
                    from fastrag.index.hnsw import HnswConfig, HnswIndex

                    graph = HnswIndex.build(x, ids, HnswConfig(**hnsw_options(spec)))
                    index = GraphIndex(graph, ids, exact)
            build = time.perf_counter() - t0
            mem = rss_mb() - m0
            row = {"store": spec, "path": "fastrag", "build_s": build, "mem_MB": mem}
            with Stage(spec, "quality (3 filters)"):
                quality(row, lambda mask, push, index=index: index.search(qs, k, mask=mask)[0])
            with Stage(spec, f"timing ({min(singles, len(qs))} single questions + 1 batch)"):
                qps, p50, p99 = timed(lambda q, index=index: index.search(q, k), qs, singles)
            row.update(qps=qps, p50_ms=p50, p99_ms=p99)
            print_row(row, cols)
            continue
        engine, _, options = spec.split(":", 1)[0].partition("?")
        if engine == "qdrant" and n > args.qdrant_max:
            print(f"{spec}: skipped (local mode above --qdrant-max vectors)")
            continue
        where = f"{tmp}/{len(specs)}-{abs(hash(spec))}"
        target = {
            "lancedb": f"lancedb:{where}-lance",
            "qdrant": f"qdrant:{where}-qdrant",
            "qdrant-edge": f"qdrant-edge:{where}-edge",
            "milvus": f"milvus:{where}-milvus.db",
        }.get(engine)
        target = spec if target is None else target + (f"?{options}" if options else "")
        try:
            store = parse_store(target)
            store.create(args.dim)
            with Stage(spec, "train"):
                store.train(x)
            with Stage(spec, f"write {n:,} rows"):
                write_rows(store, ids, x, table)
            with Stage(spec, "finish (ANN index build)"):
                store.finish()
        except Exception as exc:  # an engine missing or failing: say so, go on
            print(f"{spec}: cannot build ({type(exc).__name__}: {exc})")
            continue
        build = time.perf_counter() - t0
        mem = rss_mb() - m0
        view = StoreIndex(store, ids, exact)
        own = client_search(store, engine, k)
        rows = {}
        for path in ("fastrag", "client"):
            row = rows[path] = {"store": spec, "path": path, "build_s": build, "mem_MB": mem}
            if path == "fastrag":
                with Stage(spec, "quality through fastrag (3 filters)"):
                    quality(row, lambda mask, push: view.search(qs, k, mask=mask, pushdown=push)[0])
            else:

                def direct(mask, push):
                    native = None if push is None else store.translate(push)
                    share = 1.0 if mask is None else float(mask.mean())  # as fastrag passes it
                    if push is not None and native is None:  # FAISS: the id selector
                        return store.search(qs, k, ids=ids[mask], share=share)[0]
                    return store.search(qs, k, native=native, share=share)[0]

                with Stage(spec, "quality through the client (3 filters)"):
                    quality(row, direct)
        with Stage(spec, f"timing (2 x {min(singles, len(qs))} single questions + 2 batches)"):
            (fq, f50, f99), (cq, c50, c99) = timed_pair(
                lambda q: view.search(q, k), own, qs, singles
            )
        rows["fastrag"].update(qps=fq, p50_ms=f50, p99_ms=f99, overhead=f50 / c50)
        rows["client"].update(qps=cq, p50_ms=c50, p99_ms=c99)
        dead = ids[:: max(1, n // args.deletes)][: args.deletes]
        before = store.count()
        with Stage(spec, f"delete {len(dead):,}"):
            t = time.perf_counter()
            store.delete(dead)  # what fastrag's delete sends: one call for every id
            rows["fastrag"]["del_s"] = time.perf_counter() - t
        rows["fastrag"]["del_ok"] = store.count() == before - len(dead) or (
            engine == "faiss" and "HNSW" in spec  # kept in the graph, never returned
        )
        for row in rows.values():
            print_row(row, cols)
        print(f"  plans through fastrag: {dict(store.plans)}")
        store.close()
        print(
            f"  [{time.perf_counter() - _T0:7.1f} s] {spec}: done in "
            f"{time.perf_counter() - t0:.1f} s",
            file=sys.stderr, flush=True,
        )  # fmt: skip
    return 0


def hnsw_options(spec: str) -> dict[str, int]:
    """``HnswConfig`` fields from ``hnsw?ef_search=1024&M=32`` (none from ``hnsw``)."""
    from urllib.parse import parse_qsl

    from fastrag.index.hnsw import HnswConfig

    known = {"M", "ef_construction", "ef_search", "random_seed"}
    out = {}
    for key, value in parse_qsl(spec.partition("?")[2], strict_parsing=False):
        if key not in known:
            raise SystemExit(f"{spec}: unknown HNSW option {key!r} (known: {sorted(known)})")
        out[key] = int(value)
    HnswConfig(**out)  # its own checks
    return out


def print_row(row: dict, cols) -> None:
    out = []
    for c in cols:
        v = row.get(c, "")
        out.append(f"{v:>9.3f}" if isinstance(v, float) else f"{v!s:>9}")
    print(" | ".join(out))
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
