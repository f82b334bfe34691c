"""fastrag side by side with the frameworks users would pick instead, one process per system.

    pip install -e ".[compare]"
    python benchmarks/compare_frameworks.py --n 2000 --repeat 3 --threads 1 --out /tmp/cmp-2000.json
    python benchmarks/compare_frameworks.py --n 20000 --threads 1 --budget 60 --min-questions 10 \
        --out /tmp/cmp-20000.json
    python benchmarks/compare_frameworks.py --bm25 --data ../shared/datasets/cmrc2018 \
        --threads 1 --out /tmp/cmp-cmrc.json
    python benchmarks/compare_frameworks.py --report /tmp/cmp-2000.json   # the tables again
    python benchmarks/compare_frameworks.py --n 200 --systems fastrag,numpy --single 50   # smoke

The tables give every figure, then each system's cost relative to plain
numpy and to fastrag exact (its time / the baseline's, so > 1 means slower),
then the issue's targets with met / missed.

**Threads.** ``--threads N`` caps every thread pool a child may start (OpenMP,
OpenBLAS, MKL, Numba, Rayon, Lance, Tokio) at N. On a shared machine use 1: a
parallel region waits for its slowest thread, and a core busy with another
process turns a 2 ms two-thread scan into 16 ms (measured on the 2-core
machine of the BENCHMARKS.md run), for fastrag's kernels and numpy's BLAS
alike. The Python frameworks are single-threaded in their search either way.

**Knowledge base.** ``frameworks.common.generate_kb(N)``: seeded documents of
1,000-2,200 characters mixing Chinese and English sentences from Zipfian
vocabularies (those of ``fastrag.datasets.synthetic``), each with one to three
policy sentences ("年假申请需提前3天提交。", "Expense reports must be
submitted within 15 days.", most naming an office and a department), and
``--questions`` questions drawn from the documents (60 % ask about a policy
sentence, 40 % are an excerpt). N = 2,000 gives about 22,000 chunks at
200/40, N = 20,000 about 220,000. Cached as JSON Lines under ``--cache-dir``.

**Embedder.** ``frameworks.common.HashedBigramEmbedder``: hashed character
bigrams, 384 dimensions, L2-normalised, numpy; the same object behind every
system's custom-embedding interface (fastrag ``embedder=``, LangChain
``Embeddings``, LlamaIndex ``BaseEmbedding``, Haystack custom components,
Chroma ``embedding_function``, LanceDB precomputed vectors). Its own time is
reported apart (``embed s`` of ingestion, and per question). With
``--static-table TABLE`` every system embeds with a fastrag
``StaticEmbedder`` loaded from that table instead (fastrag through its
kernel on the chunks' Arrow buffers, the others through ``embed``), which
measures HNSW's agreement with exact search on static vectors.

**Systems** (``--systems``), each in its own subprocess, each the way its
documentation shows:

- ``fastrag``: ``KnowledgeBase.build(docs, embedder=..., keyword=False)``,
  ``retrieve(q, k=10, mode="vector", rewrite=False)``, ``retrieve_batch``,
  ``save`` / ``load``. ``keyword=False`` because no other system builds a
  keyword index; the default build (with BM25) is timed too
  (``ingest_keyword_s`` in the JSON). ``rewrite=False`` so that every system
  embeds the very same question string.
- ``fastrag-hnsw``: the same with ``index="hnsw"`` (default HnswConfig).
- ``numpy``: Python windows with fastrag's chunking semantics (the same
  chunks), one float32 matrix, ``V @ q`` + ``argpartition``; batches as
  ``Q @ V.T`` in blocks of 256; persisted as ``np.save`` + the chunk texts as
  JSON, reloaded with ``np.load`` + ``json.load``.
- ``langchain``: ``RecursiveCharacterTextSplitter(200, 40)``,
  ``InMemoryVectorStore.from_documents``, ``similarity_search(k=10)``;
  batch = ``as_retriever().batch`` (Runnable.batch: a thread pool over single
  searches); ``dump`` / ``load``.
- ``llamaindex``: ``SentenceSplitter(200, 40, tokenizer=list)`` (sizes in
  characters; its default tiktoken tokens would make ~500-character chunks),
  ``VectorStoreIndex.from_documents`` (default SimpleVectorStore),
  ``as_retriever(similarity_top_k=10)``; no batch API (a loop);
  ``storage_context.persist`` / ``load_index_from_storage``.
- ``haystack``: ``RecursiveDocumentSplitter(200, 40, split_unit="char")``
  (``DocumentSplitter`` has no character unit), a custom document embedder and
  ``DocumentWriter`` in an indexing Pipeline, ``InMemoryDocumentStore``; a
  query Pipeline of a custom text embedder and ``InMemoryEmbeddingRetriever``
  (top_k=10); no batch API (a loop); ``save_to_disk`` / ``load_from_disk``.
- ``chroma``: plain 200/40 windows (Chroma has no splitter),
  ``PersistentClient`` + ``create_collection(embedding_function=...,
  configuration={"hnsw": {"space": "cosine"}})``, ``add`` in batches of
  ``get_max_batch_size()``; ``query(query_texts=[...])`` is its batch API.
  Chroma's only index is HNSW, and it writes to disk while adding
  (ingestion includes persisting; no separate persist step).
- ``lancedb``: plain windows, precomputed vectors in a local table
  (``create_table`` from Arrow), no ANN index (flat search),
  ``search(v).distance_type("cosine").limit(10)``; batch = ``search([v1,
  ...])``. Written to disk by ``create_table``.

A system that does not install or import is skipped with the reason.

**Measured**, per system and N (medians of ``--repeat`` runs, each a fresh
process): a warm-up ingest of 50 documents and a few queries first (import,
JIT and first-call costs are not counted), then

- chunking throughput: the system's splitter alone over the raw documents,
  MB/s of UTF-8 text;
- ingestion: from the list of ``{"id", "title", "text"}`` dicts to a
  searchable store (convert + chunk + embed + index), and how much of it was
  the embedder's own time;
- single-question latency p50 / p99, k = 10, question embedding included
  (``--single`` questions, stopping early after ``--budget`` seconds, at
  least ``--min-questions``; the table marks an early stop with ``*``);
- batch throughput on min(``--batch``, max(``--min-questions``, ``--budget`` / p50)) questions
  with the system's batch API, or a loop where it has none (the table says
  which); a batch under 1 s is repeated (up to 5 times) and the median kept;
- persist time and size on disk; reload (load + first query) in a fresh
  process, checked to return the same top 10 as before saving;
- peak resident memory: ``VmHWM`` of the child at the end (corpus, imports
  and the harness's own float64 exact reference included: about 0.7 GB at
  N = 20,000, the same for every system); ``peak_rss_ingest_mb`` in the JSON
  is the peak right after ingestion, before that reference;
  ``rss_base_mb`` the resident size before the ingest;
- **agree@10**: systems chunk differently, so each is compared with exact
  cosine search (numpy, float64) over *its own* chunk vectors: the share of
  its top 10 whose true cosine reaches the exact 10th-best (a tie at 10th
  place counts as right; without ties, |top10 ∩ exact top10| / 10);
- hit@10: share of questions whose source document owns one of the 10
  returned chunks (a sanity check of the embedder, the same for every
  engine up to chunking).

**Keyword search on Chinese** (``--bm25``): fastrag BM25 (``mode="keyword",
group_by="doc"``, default tokenizer) against LlamaIndex ``BM25Retriever``
and Haystack ``InMemoryBM25Retriever``, each with its default tokenisation,
on a BEIR-layout folder (CMRC 2018: 1,104 passages, 3,219 questions), the
same 200/40 chunks for all; document rank = its best chunk's; nDCG@10 with
``fastrag.datasets.beir.evaluate``. ``--bm25-max-queries`` subsamples the
questions with ``--seed`` (default: all).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from frameworks import BM25_SYSTEMS, SYSTEMS, load  # noqa: E402
from frameworks.common import (  # noqa: E402
    agree_at_k,
    corpus_files,
    current_rss_mb,
    dir_size_mb,
    exact_reference,
    hit_at_k,
    make_embedder,
    peak_rss_mb,
    percentile,
    read_jsonl,
)

DEFAULT_SYSTEMS = list(SYSTEMS)
WARM_DOCS = 50

# ---------------------------------------------------------------------------
# Children (one system, one N, one run).
# ---------------------------------------------------------------------------


def _skip(reason: str) -> dict[str, Any]:
    return {"skipped": reason}


def child_build(args: argparse.Namespace) -> dict[str, Any]:
    try:
        runner_cls = load(args.system)
    except Exception as exc:  # ImportError, or a framework failing at import
        return _skip(f"{type(exc).__name__}: {exc}")
    if args.hnsw_ef_search and args.system == "fastrag-hnsw":
        runner_cls.hnsw = {"ef_search": args.hnsw_ef_search}
    emb = make_embedder(args.static_table)
    docs = read_jsonl(Path(args.docs))
    questions = read_jsonl(Path(args.questions_file))
    qtexts = [q["text"] for q in questions]
    workdir = Path(args.workdir)
    res: dict[str, Any] = {
        "loadavg_start": os.getloadavg()[0],
        "system": runner_cls.name,
        "label": runner_cls.label,
        "version": runner_cls.version(),
        "batch_api": runner_cls.batch_api,
        "batch_is_loop": runner_cls.batch_is_loop,
        "n_docs": len(docs),
        "corpus_mb": sum(len(d["text"].encode()) for d in docs) / 2**20,
    }

    # Warm-up: a small knowledge base, thrown away.
    warm = runner_cls(emb, workdir / "warm")
    res["chunker"] = warm.chunker
    warm.prepare()
    warm.chunk(docs[:WARM_DOCS])
    warm.ingest(docs[:WARM_DOCS])
    for q in qtexts[-3:]:
        warm.query(q)
    warm.batch_keys(warm.batch(qtexts[-5:]))
    warm.close()
    del warm
    gc.collect()
    res["rss_base_mb"] = current_rss_mb()

    runner = runner_cls(emb, workdir)
    t = time.perf_counter()
    res["n_chunks_split"] = runner.chunk(docs)
    res["chunk_s"] = time.perf_counter() - t
    res["chunk_mb_s"] = res["corpus_mb"] / res["chunk_s"]
    gc.collect()

    emb.reset()
    t = time.perf_counter()
    runner.ingest(docs)
    res["ingest_s"] = time.perf_counter() - t
    res["ingest_embed_s"] = emb.seconds
    res["ingest_engine_s"] = res["ingest_s"] - emb.seconds
    res["peak_rss_ingest_mb"] = peak_rss_mb()  # before the harness's own exact reference

    keys, vectors, doc_ids = runner.chunk_table()
    res["n_chunks"] = len(keys)
    row_of = {k: i for i, k in enumerate(keys)}
    n_ref = max(args.single, args.batch)
    qvec = emb.embed(qtexts[:n_ref])
    _, kth = exact_reference(qvec, vectors)

    def rows(result: list[Any]) -> list[int]:
        return [row_of.get(k, -1) for k in result]

    # Single questions.
    for q in qtexts[-3:]:
        runner.query(q)
    lat: list[float] = []
    single: list[list[Any]] = []
    emb.reset()
    deadline = time.perf_counter() + args.budget
    for i, q in enumerate(qtexts[: args.single]):
        t = time.perf_counter()
        r = runner.query(q)
        lat.append(time.perf_counter() - t)
        single.append(r)
        if i + 1 >= args.min_questions and time.perf_counter() > deadline:
            break
    m = len(lat)
    res["single_n"] = m
    res["query_embed_us"] = emb.seconds / max(1, emb.calls) * 1e6
    res["p50_ms"] = percentile(lat, 50) * 1e3
    res["p99_ms"] = percentile(lat, 99) * 1e3
    res["mean_ms"] = statistics.fmean(lat) * 1e3
    res["agree10"] = agree_at_k([rows(r) for r in single], qvec[:m], vectors, kth[:m])
    gold = [q["doc"] for q in questions[:m]]
    res["hit10"] = hit_at_k([[doc_ids[x] for x in rows(r) if x >= 0] for r in single], gold)
    res["first_keys"] = [[str(k) for k in r] for r in single[:3]]

    # Batch.
    p50 = max(res["p50_ms"] / 1e3, 1e-9)
    nb = min(args.batch, max(args.min_questions, int(args.budget / p50)))
    batch_q = qtexts[:nb]
    times = []
    out = None
    for _ in range(5):
        t = time.perf_counter()
        native = runner.batch(batch_q)
        times.append(time.perf_counter() - t)
        if out is None:
            out = runner.batch_keys(native)
        del native
        if sum(times) >= 1.0:
            break
    res["batch_n"] = nb
    res["single_early_stop"] = m < args.single
    res["batch_early_stop"] = nb < args.batch
    res["batch_runs"] = len(times)
    res["batch_s"] = statistics.median(times)
    res["batch_qps"] = nb / res["batch_s"]
    assert out is not None
    res["batch_agree10"] = agree_at_k([rows(r) for r in out], qvec[:nb], vectors, kth[:nb])

    # Persist.
    store = workdir / "store"
    t = time.perf_counter()
    runner.persist(store)
    res["persist_s"] = time.perf_counter() - t
    res["persist_note"] = runner_cls.persist_note
    res["disk_mb"] = dir_size_mb(store) if store.exists() else float("nan")
    if hasattr(runner, "persist_durable"):  # numpy: also with fsync, as fastrag's save does
        t = time.perf_counter()
        runner.persist_durable(workdir / "store-fsync")
        res["persist_fsync_s"] = time.perf_counter() - t
        shutil.rmtree(workdir / "store-fsync", ignore_errors=True)
    res["peak_rss_mb"] = peak_rss_mb()
    runner.close()
    del runner
    gc.collect()

    if (
        args.system == "fastrag"
    ):  # with the BM25 index (keyword=True, the default), after the RSS reading
        from fastrag import KnowledgeBase

        t = time.perf_counter()
        kb = KnowledgeBase.build(docs, embedder=emb, index="exact")
        res["ingest_keyword_s"] = time.perf_counter() - t
        kb.close()
    res["loadavg_end"] = os.getloadavg()[0]
    return res


def child_reload(args: argparse.Namespace) -> dict[str, Any]:
    runner_cls = load(args.system)
    emb = make_embedder(args.static_table)
    questions = read_jsonl(Path(args.questions_file))
    workdir = Path(args.workdir)
    runner = runner_cls(emb, workdir / "reload")
    t = time.perf_counter()
    runner.prepare()
    prepare_s = time.perf_counter() - t
    t = time.perf_counter()
    runner.reload(workdir / "store")
    load_s = time.perf_counter() - t
    t = time.perf_counter()
    first = runner.query(questions[0]["text"])
    first_s = time.perf_counter() - t
    again = [[str(k) for k in runner.query(q["text"])] for q in questions[:3]]
    expected = json.loads(Path(args.expect).read_text())
    runner.close()
    return {
        "prepare_s": prepare_s,
        "load_s": load_s,
        "first_query_s": first_s,
        "reload_s": load_s + first_s,
        "reload_same_top10": again == expected and [str(k) for k in first] == expected[0],
        "reload_peak_rss_mb": peak_rss_mb(),
    }


def child_bm25(args: argparse.Namespace) -> dict[str, Any]:
    import random

    from fastrag.datasets.beir import evaluate, load_beir, recall_at_k

    try:
        runner_cls = load(args.system, BM25_SYSTEMS)
    except Exception as exc:
        return _skip(f"{type(exc).__name__}: {exc}")
    beir = load_beir(args.data)
    docs = list(beir.documents())
    queries = beir.queries
    if args.bm25_max_queries and args.bm25_max_queries < len(queries):
        queries = random.Random(args.seed).sample(queries, args.bm25_max_queries)
    texts = [q["text"] for q in queries]
    warm = runner_cls()  # warm-up on 20 documents: imports, JIT, first calls
    warm.index(docs[:20])
    warm.search(texts[:3], 10)
    del warm
    gc.collect()
    runner = runner_cls()
    t = time.perf_counter()
    runner.index(docs)
    index_s = time.perf_counter() - t
    t = time.perf_counter()
    ranked = runner.search(texts, 10)
    search_s = time.perf_counter() - t
    run = {q["_id"]: r for q, r in zip(queries, ranked, strict=True)}
    scores = evaluate(run, beir.qrels)
    recall10 = statistics.fmean(
        recall_at_k(run[q["_id"]], beir.qrels[q["_id"]], 10) for q in queries
    )
    return {
        "system": runner_cls.name,
        "label": runner_cls.label,
        "version": runner_cls.version(),
        "tokenisation": runner_cls.tokenisation,
        "batch_api": runner_cls.batch_api,
        "n_docs": len(docs),
        "n_chunks": runner.n_chunks,
        "queries": scores["queries"],
        "ndcg10": scores["ndcg@10"],
        "recall10": recall10,
        "index_s": index_s,
        "search_s": search_s,
        "qps": len(texts) / search_s,
        "peak_rss_mb": peak_rss_mb(),
    }


# ---------------------------------------------------------------------------
# Parent.
# ---------------------------------------------------------------------------


THREAD_VARS = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
    "RAYON_NUM_THREADS", "LANCE_CPU_THREADS", "TOKIO_WORKER_THREADS",
)  # fmt: skip


def _child_env(threads: int) -> dict[str, str]:
    """The child's environment: with ``--threads N``, every thread pool we know of capped at N."""
    env = dict(os.environ)
    if threads > 0:
        for var in THREAD_VARS:
            env[var] = str(threads)
    return env


def _spawn(argv: list[str], timeout: float, threads: int = 0) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        result = fh.name
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--result", result]
    try:
        proc = subprocess.run(
            cmd, timeout=timeout, capture_output=True, text=True, env=_child_env(threads)
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    try:
        data = json.loads(Path(result).read_text()) if Path(result).stat().st_size else None
    finally:
        os.unlink(result)
    if proc.returncode != 0 or data is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    return data


def _median_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r and "skipped" not in r]
    if not ok:
        return runs[0] if runs else {"error": "no run"}
    out = dict(ok[0])
    for key, value in ok[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            vals = [r[key] for r in ok if isinstance(r.get(key), (int, float))]
            out[key] = statistics.median(vals)
        elif isinstance(value, bool):
            out[key] = all(r.get(key) for r in ok)
    out["runs"] = len(ok)
    return out


def _env() -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import numpy as np
        from threadpoolctl import threadpool_info

        info["numpy"] = np.__version__
        info["blas"] = [
            {k: p.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for p in threadpool_info()
        ]
    except Exception:  # pragma: no cover - informational only
        pass
    info["OPENBLAS_CORETYPE"] = os.environ.get("OPENBLAS_CORETYPE")
    return info


def _fmt(x: Any, spec: str = ".3g") -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    if isinstance(x, float):
        if spec == ".3g" and abs(x) >= 1000:
            return f"{x:,.0f}"
        return format(x, spec)
    return str(x)


def print_vector_table(n: int, rows: list[dict[str, Any]]) -> None:
    head = (
        "| system | chunks | chunking MB/s | ingest s (embed s) | p50 ms | p99 ms | questions "
        "| batch q/s (API, questions) | agree@10 | hit@10 | persist s | reload s | disk MB "
        "| peak RSS MB | runs |"
    )
    print(f"\nN = {n:,} documents\n")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        if "skipped" in r or "error" in r:
            print(f"| {r.get('name')} | skipped: {r.get('skipped') or r.get('error')} |")
            continue
        persist = _fmt(r["persist_s"]) if not r.get("persist_note") else "(in ingest)"
        api = "loop" if r.get("batch_is_loop") else "batch"
        stop = "*" if r.get("single_early_stop") else ""
        bstop = "*" if r.get("batch_early_stop") else ""
        reload = (
            _fmt(r.get("reload_s"))
            if "reload_s" in r
            else f"error: {r.get('reload_error', '?')[:60]}"
        )
        if r.get("reload_same_top10") is False:
            reload += " (top 10 differ!)"
        print(
            f"| {r['label']} | {int(r['n_chunks']):,} | {_fmt(r['chunk_mb_s'])} "
            f"| {_fmt(r['ingest_s'])} ({_fmt(r['ingest_embed_s'])}) | {_fmt(r['p50_ms'])} "
            f"| {_fmt(r['p99_ms'])} | {r['single_n']:.0f}{stop} "
            f"| {_fmt(r['batch_qps'])} ({api}, {r['batch_n']:.0f}{bstop}) "
            f"| {_fmt(r['agree10'], '.3f')} "
            f"| {_fmt(r['hit10'], '.3f')} | {persist} | {reload} "
            f"| {_fmt(r['disk_mb'])} | {_fmt(r['peak_rss_mb'], '.0f')} | {r.get('runs', 1)} |"
        )
    print(
        "\n(*: the timing loop stopped early at the --budget; questions = how many were timed; "
        "agree@10 and hit@10 are over those questions. Embedder time: 'embed s' of ingestion; "
        "per question it is the same function for every system.)"
    )


COST_KEYS = {  # ratio name -> (key, "time" = X / base, "rate" = base / X)
    "p50": ("p50_ms", "time"),
    "p99": ("p99_ms", "time"),
    "batch": ("batch_qps", "rate"),
    "ingest": ("ingest_s", "time"),
    "ingest_engine": ("ingest_engine_s", "time"),
    "chunking": ("chunk_mb_s", "rate"),
    "persist": ("persist_s", "time"),
    "reload": ("reload_s", "time"),
    "disk": ("disk_mb", "time"),
    "peak_rss": ("peak_rss_mb", "time"),
}


def ratios(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Every system's cost relative to plain numpy and to fastrag exact (> 1: it costs more).

    ``p50`` = its p50 / the baseline's; ``batch`` = the baseline's q/s / its
    q/s; ``ingest``, ``persist``, ``reload``, ``disk``, ``peak_rss`` = its
    figure / the baseline's. A system that persists while ingesting has no
    persist ratio.
    """
    by = {r.get("system"): r for r in rows if "skipped" not in r and "error" not in r}

    def ratio(x: dict[str, Any], base: dict[str, Any], key: str, kind: str) -> float | None:
        if key == "persist_s" and (x.get("persist_note") or base.get("persist_note")):
            return None
        a, b = x.get(key), base.get(key)
        ok = all(isinstance(v, (int, float)) and v == v and v > 0 for v in (a, b))
        if not ok:
            return None
        return a / b if kind == "time" else b / a

    out: dict[str, Any] = {}
    for base_name in ("numpy", "fastrag"):
        base = by.get(base_name)
        if base is None:
            continue
        out[f"vs_{base_name}"] = {
            name: {k: ratio(r, base, key, kind) for k, (key, kind) in COST_KEYS.items()}
            for name, r in by.items()
            if name != base_name
        }
    hn = by.get("fastrag-hnsw")
    if hn is not None:
        out["fastrag-hnsw"] = {
            "p50_ms": hn["p50_ms"],
            "agree10": hn["agree10"],
            "n_chunks": hn["n_chunks"],
        }
    return out


def targets(rows: list[dict[str, Any]], rat: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """The issue's targets: (target, measured, met) for what this run measured."""
    out: list[tuple[str, str, bool | None]] = []
    vf = rat.get("vs_fastrag", {})
    vn = rat.get("vs_numpy", {})
    fw = [s for s in ("langchain", "llamaindex", "haystack") if s in vf]
    if fw:
        worst = min(vf[s]["p50"] or 0 for s in fw)
        out.append((
            "fastrag exact >= 150x faster per question than LangChain, LlamaIndex, Haystack",
            ", ".join(f"{s} {_fmt(vf[s]['p50'])}x" for s in fw), worst >= 150,
        ))  # fmt: skip
        worst = min(vf[s]["batch"] or 0 for s in fw)
        out.append((
            "fastrag exact batch >= 1,000x theirs",
            ", ".join(f"{s} {_fmt(vf[s]['batch'])}x" for s in fw), worst >= 1000,
        ))  # fmt: skip
    if "fastrag" in vn:
        f = vn["fastrag"]
        out.append(
            (
                "fastrag exact no slower than plain numpy per question (p50)",
                f"{_fmt(f['p50'])}x numpy's p50",
                None if f["p50"] is None else f["p50"] <= 1.0,
            )
        )
        out.append(
            (
                "ingestion at most 1.5x plain numpy's",
                f"{_fmt(f['ingest'])}x",
                None if f["ingest"] is None else f["ingest"] <= 1.5,
            )
        )
        if f.get("ingest_engine") is not None:
            out.append(
                (
                    "  the same without the (shared) embedder's time",
                    f"{_fmt(f['ingest_engine'])}x",
                    f["ingest_engine"] <= 1.5,
                )
            )
        out.append(
            (
                "persist no slower than numpy's own files (np.save + json.dump)",
                f"{_fmt(f['persist'])}x",
                None if f["persist"] is None else f["persist"] <= 1.0,
            )
        )
        fr = next((r for r in rows if r.get("system") == "fastrag"), {})
        npr = next((r for r in rows if r.get("system") == "numpy"), {})
        if npr.get("persist_fsync_s") and fr.get("persist_s"):
            x = fr["persist_s"] / npr["persist_fsync_s"]
            out.append(
                (
                    "  the same, numpy's files fsynced as fastrag's save does",
                    f"{_fmt(x)}x",
                    x <= 1.0,
                )
            )
        reload_ok = None if f["reload"] is None else f["reload"] <= 1.0
        out.append(("reload no slower than numpy's own files", f"{_fmt(f['reload'])}x", reload_ok))
    h = rat.get("fastrag-hnsw")
    if h is not None:
        big = h["n_chunks"] >= 150_000
        out.append((
            "fastrag HNSW p50 < 1 ms at ~200,000 chunks, agree@10 >= 0.95",
            f"p50 {_fmt(h['p50_ms'])} ms, agree@10 {h['agree10']:.3f} at {h['n_chunks']:,} chunks",
            (h["p50_ms"] < 1.0 and h["agree10"] >= 0.95) if big else None,
        ))  # fmt: skip
    return out


def print_ratios(n: int, rat: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    if not rat:
        return
    cols = [
        "p50",
        "p99",
        "batch",
        "ingest",
        "ingest_engine",
        "chunking",
        "persist",
        "reload",
        "disk",
        "peak_rss",
    ]
    for base in ("numpy", "fastrag"):
        table = rat.get(f"vs_{base}")
        if not table:
            continue
        print(
            f"\nN = {n:,}: cost relative to {'plain numpy' if base == 'numpy' else 'fastrag exact'}"
            " "
            "(its time / the baseline's; batch and chunking: the baseline's rate / its rate; "
            "> 1 = slower or larger)\n"
        )
        print("| system | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for name, r in table.items():
            print(f"| {name} | " + " | ".join(
                (_fmt(r[c]) + "x") if r.get(c) is not None else "-" for c in cols
            ) + " |")  # fmt: skip
    tg = targets(rows, rat)
    if tg:
        print(f"\nIssue targets at N = {n:,}:\n")
        print("| target | measured | met |")
        print("|---|---|---|")
        for name, measured, met in tg:
            verdict = "n/a at this N" if met is None else ("met" if met else "missed")
            print(f"| {name} | {measured} | {verdict} |")


def run_vector(args: argparse.Namespace) -> dict[str, Any]:
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for s in systems:
        if s not in SYSTEMS:
            raise SystemExit(f"unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    cache = Path(args.cache_dir)
    results: dict[str, Any] = {}
    for n in [int(x) for x in str(args.n).split(",")]:
        t = time.perf_counter()
        docs_path, q_path = corpus_files(cache, n, args.questions, args.seed)
        print(f"corpus N={n:,}: {docs_path} ({time.perf_counter() - t:.1f} s)", flush=True)
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
        skipped: set[str] = set()
        for rep in range(args.repeat):
            for s in systems:  # rounds interleave the systems: the machine is shared
                if s in skipped:
                    continue
                work = Path(tempfile.mkdtemp(prefix=f"cmp-{s}-{n}-", dir=args.workdir))
                try:
                    argv = [
                        "--child-build", s, "--docs", str(docs_path), "--questions-file",
                        str(q_path), "--workdir", str(work), "--single", str(args.single),
                        "--batch", str(args.batch), "--budget", str(args.budget),
                        "--min-questions", str(args.min_questions),
                    ]  # fmt: skip
                    if args.hnsw_ef_search:
                        argv += ["--hnsw-ef-search", str(args.hnsw_ef_search)]
                    if args.static_table:
                        argv += ["--static-table", args.static_table]
                    r = _spawn(argv, args.child_timeout, args.threads)
                    if "skipped" in r:
                        skipped.add(s)
                        print(f"  {s}: skipped: {r['skipped']}", flush=True)
                    elif "error" not in r:
                        expect = work / "expect.json"
                        expect.write_text(json.dumps(r["first_keys"]))
                        rl = _spawn(
                            ["--child-reload", s, "--questions-file", str(q_path), "--workdir",
                             str(work), "--expect", str(expect)]
                            + (["--static-table", args.static_table] if args.static_table else []),
                            args.reload_timeout, args.threads,
                        )  # fmt: skip
                        if "error" in rl:
                            r["reload_error"] = rl["error"]
                        else:
                            r.update(rl)
                    r["name"] = s
                    runs[s].append(r)
                    if "error" in r:
                        print(f"  {s} run {rep + 1}: ERROR {r['error']}", flush=True)
                    elif "skipped" not in r:
                        print(
                            f"  {s} run {rep + 1}: {r['n_chunks']:,} chunks, ingest "
                            f"{r['ingest_s']:.2f} s, p50 {r['p50_ms']:.3f} ms, batch "
                            f"{r['batch_qps']:,.0f} q/s, agree@10 {r['agree10']:.3f}, reload "
                            f"{r.get('reload_s', float('nan')):.3f} s",
                            flush=True,
                        )
                finally:
                    shutil.rmtree(work, ignore_errors=True)
        rows = []
        for s in systems:
            m = _median_runs(runs[s])
            m["name"] = s
            rows.append(m)
        print_vector_table(n, rows)
        rat = ratios(rows)
        print_ratios(n, rat, rows)
        results[str(n)] = {"systems": rows, "ratios": rat, "raw": runs}
    return results


def run_bm25(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for s in BM25_SYSTEMS:
        argv = ["--child-bm25", s, "--data", args.data, "--seed", str(args.seed)]
        if args.bm25_max_queries:
            argv += ["--bm25-max-queries", str(args.bm25_max_queries)]
        r = _spawn(argv, args.child_timeout, args.threads)
        r["name"] = s
        rows.append(r)
        print(
            f"  {s}: {json.dumps({k: v for k, v in r.items() if k not in ('tokenisation',)})}",
            flush=True,
        )
    print_bm25_table(args.data, rows)
    return {"data": args.data, "systems": rows}


def print_bm25_table(data: str, rows: list[dict[str, Any]]) -> None:
    print(f"\nBM25 on {data}\n")
    print(
        "| system | tokenisation | chunks | questions | nDCG@10 | recall@10 | index s | q/s (API) "
        "| peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r or "error" in r:
            print(f"| {r['name']} | skipped: {r.get('skipped') or r.get('error')} |")
            continue
        print(
            f"| {r['label']} | {r['tokenisation']} | {r['n_chunks']:,} | {r['queries']:,} "
            f"| {r['ndcg10']:.4f} | {r['recall10']:.4f} | {_fmt(r['index_s'])} "
            f"| {_fmt(r['qps'])} ({r['batch_api']}) | {_fmt(r['peak_rss_mb'], '.0f')} |"
        )


def report(out: dict[str, Any]) -> None:
    """Print the tables of a JSON written by ``--out``."""
    print(f"command: {out.get('command')}")
    env = out.get("env", {})
    print(f"machine: {env.get('cpu')}, {env.get('cpus')} CPUs, Python {env.get('python')}")
    for n, res in out.get("vector", {}).items():
        print_vector_table(int(n), res["systems"])
        print_ratios(int(n), ratios(res["systems"]), res["systems"])
    if "bm25" in out:
        print_bm25_table(out["bm25"]["data"], out["bm25"]["systems"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--n", default="2000", help="documents; comma-separated for several (default 2000)"
    )
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS))
    p.add_argument("--repeat", type=int, default=1, help="runs per system and N; medians reported")
    p.add_argument("--questions", type=int, default=1000, help="questions generated (default 1000)")
    p.add_argument("--single", type=int, default=300, help="single-question calls at most")
    p.add_argument("--batch", type=int, default=1000, help="questions in the batch at most")
    p.add_argument(
        "--budget", type=float, default=30.0, help="seconds per timing loop (see --help)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--min-questions", type=int, default=20,
        help="questions timed at least, whatever --budget (single loop and batch)",
    )  # fmt: skip
    p.add_argument(
        "--threads", type=int, default=0,
        help="cap every child's thread pools (OMP, BLAS, Numba, Rayon, Lance, Tokio) at this "
        "many threads; 0 = each library's default",
    )  # fmt: skip
    p.add_argument(
        "--report", default=None, help="print the tables of a JSON written by --out, and exit"
    )
    p.add_argument(
        "--hnsw-ef-search", type=int, default=0,
        help="fastrag-hnsw: HnswConfig ef_search (0 = the library default)",
    )  # fmt: skip
    p.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "fastrag-compare"))
    p.add_argument("--workdir", default=None, help="where stores are written (default: temp dir)")
    p.add_argument("--child-timeout", type=float, default=7200.0, help="seconds per build child")
    p.add_argument(
        "--reload-timeout", type=float, default=1800.0,
        help="seconds per reload child (LlamaIndex's JSON reload is slow: see the docstring)",
    )  # fmt: skip
    p.add_argument("--out", default=None, help="write JSON results here")
    p.add_argument("--bm25", action="store_true", help="run the Chinese BM25 comparison instead")
    p.add_argument("--data", default="../shared/datasets/cmrc2018", help="BEIR folder for --bm25")
    p.add_argument("--bm25-max-queries", type=int, default=0, help="subsample questions (0 = all)")
    # Internal: one child.
    p.add_argument(
        "--static-table", default=None, metavar="TABLE",
        help="embed with this fastrag static table (StaticEmbedder) instead of hashed bigrams, "
        "for every system",
    )  # fmt: skip
    p.add_argument("--child-build", dest="system_build", help=argparse.SUPPRESS)
    p.add_argument("--child-reload", dest="system_reload", help=argparse.SUPPRESS)
    p.add_argument("--child-bm25", dest="system_bm25", help=argparse.SUPPRESS)
    p.add_argument("--docs", help=argparse.SUPPRESS)
    p.add_argument("--questions-file", help=argparse.SUPPRESS)
    p.add_argument("--expect", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    child = None
    if args.system_build:
        args.system, child = args.system_build, child_build
    elif args.system_reload:
        args.system, child = args.system_reload, child_reload
    elif args.system_bm25:
        args.system, child = args.system_bm25, child_bm25
    if child is not None:
        res = child(args)
        Path(args.result).write_text(json.dumps(res))
        return 0

    if args.report:
        report(json.loads(Path(args.report).read_text()))
        return 0
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    if args.threads:
        print(f"children run with {', '.join(THREAD_VARS)} = {args.threads}", flush=True)
    out: dict[str, Any] = {"command": " ".join(sys.argv), "env": _env(), "args": vars(args)}
    if args.bm25:
        out["bm25"] = run_bm25(args)
    else:
        out["vector"] = run_vector(args)
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
