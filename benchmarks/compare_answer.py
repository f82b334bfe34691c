"""Pipeline overhead: answer() vs retrieve() vs the raw top-k kernel, side by side.

    python benchmarks/compare_answer.py --chunks 100000 --batch 10000

For the demo knowledge base and a synthetic mixed English/Chinese one of about
``--chunks`` chunks (``VocabularyEmbedder(max_features=384)``, exact index),
after ``warmup()``: p50/p99 latency of the raw kernel (``exact_topk`` on the
same question vectors), ``retrieve()`` and ``answer()`` (extractive
generator), interleaved in the same loop so machine noise hits all three;
then ``answer_batch`` throughput over ``--batch`` questions.

``--static TABLE`` runs every measurement again with a
``StaticEmbedder`` loaded from a static table (for example the general
table of ``benchmarks/build_general_table.py``) beside the character
embedder.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from fastrag.datasets import demo_documents
from fastrag.datasets.synthetic import mixed_documents

from fastrag import KnowledgeBase, StaticEmbedder, VocabularyEmbedder, warmup
from fastrag.index.exact import exact_topk


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values) * 1e3, q))


def measure(kb: KnowledgeBase, questions: list[str], rounds: int, k: int, mode_kw: dict) -> dict:
    vectors = kb.embed_questions(questions)
    corpus_parts = [(s.vectors, s.alive) for s in kb._corpus.store.segments]
    t_kernel, t_retrieve, t_answer = [], [], []
    for r in range(rounds):
        i = r % len(questions)
        q = questions[i]
        t = time.perf_counter()
        for vecs, alive in corpus_parts:
            exact_topk(vectors[i : i + 1], vecs, k, mask=alive)
        t_kernel.append(time.perf_counter() - t)
        t = time.perf_counter()
        kb.retrieve(q, k=k, **mode_kw)
        t_retrieve.append(time.perf_counter() - t)
        t = time.perf_counter()
        kb.answer(q, k=k, **mode_kw)
        t_answer.append(time.perf_counter() - t)
    return {
        name: (pct(v, 50), pct(v, 99))
        for name, v in (("kernel", t_kernel), ("retrieve", t_retrieve), ("answer", t_answer))
    }


def report(label: str, res: dict) -> None:
    k50, k99 = res["kernel"]
    r50, r99 = res["retrieve"]
    a50, a99 = res["answer"]
    print(f"{label}")
    print(f"  raw top-k kernel   p50 {k50:8.3f} ms   p99 {k99:8.3f} ms")
    print(
        f"  retrieve()         p50 {r50:8.3f} ms   p99 {r99:8.3f} ms   "
        f"overhead {r50 - k50:+.3f} ms ({(r50 - k50) / k50:+.1%}); budget 10% + 0.2 ms = {0.1 * k50 + 0.2:.3f} ms"
    )
    print(
        f"  answer()           p50 {a50:8.3f} ms   p99 {a99:8.3f} ms   "
        f"over retrieve {a50 - r50:+.3f} ms (budget 1 ms)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument(
        "--mode", default=None, help="retrieval mode passed to retrieve/answer (default: the KB's)"
    )
    ap.add_argument(
        "--static", default=None, metavar="TABLE", help="also run with this static table"
    )
    args = ap.parse_args()
    mode_kw = {} if args.mode is None else {"mode": args.mode}
    warmup()
    embedders = [("characters", lambda: VocabularyEmbedder(max_features=384))]
    if args.static:
        embedders.append(("static", lambda: StaticEmbedder.load(args.static)))
    for label, make in embedders:
        run(label, make, args, mode_kw)


def run(label, make, args, mode_kw) -> None:
    print(f"=== embedder: {label}")
    demo = KnowledgeBase.build(demo_documents(), embedder=None if label == "characters" else make())
    demo_q = [
        "年假怎么申请？",
        "设备丢失后多久内要报告？",
        "公司食堂几点开门？",
        "报销需要在多少天内提交？",
    ]
    report(
        f"demo knowledge base ({len(demo)} chunks), {args.rounds} rounds",
        measure(demo, demo_q, args.rounds, args.k, mode_kw),
    )

    n_docs = max(1, args.chunks // 12)  # mean 2,000 characters = about 12 chunks at 200/40
    t = time.perf_counter()
    kb = KnowledgeBase.build(mixed_documents(n_docs, seed=5), embedder=make())
    print(
        f"\nsynthetic: {len(kb):,} chunks from {n_docs:,} documents, built in {time.perf_counter() - t:.1f} s"
    )
    rng = np.random.default_rng(1)
    picks = rng.integers(0, len(kb), args.batch)
    texts = kb._corpus.store.rows(picks, ["text"]).column("text").to_pylist()
    questions = [s[: 20 + int(rng.integers(0, 40))] for s in texts]
    report(
        f"synthetic ({len(kb):,} chunks), {min(args.rounds, 300)} rounds",
        measure(kb, questions[:300], min(args.rounds, 300), args.k, mode_kw),
    )
    kb.answer_batch(questions[:64], k=args.k, **mode_kw)
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        table = kb.answer_batch(questions, k=args.k, **mode_kw)
        runs.append(time.perf_counter() - t)
    secs = statistics.median(runs)
    found = sum(table.column("found").to_pylist())
    print(
        f"  answer_batch({len(questions):,} questions): {secs:.2f} s = {len(questions) / secs:,.0f} questions/s "
        f"(median of 3; {found:,} found)"
    )


if __name__ == "__main__":
    main()
