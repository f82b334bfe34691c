"""Retrieval time against question length: the keyword path must stay linear.

    python benchmarks/bench_long_questions.py [--docs 500] [--sizes 160000,320000,640000,1280000]

Builds a knowledge base of ``--docs`` seeded mixed English/Chinese documents,
raises ``max_question_chars`` far above its default (10,000) and times one
``retrieve(q, k=5)`` per mode for questions of each size in characters
(random words of the corpus). Doubling the size should about double the
time.
"""

from __future__ import annotations

import argparse
import random
import time

from fastrag.datasets.synthetic import mixed_documents

from fastrag import KnowledgeBase, RetrievalConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=500)
    ap.add_argument("--sizes", default="160000,320000,640000,1280000")
    ap.add_argument("--modes", default="keyword,hybrid")
    args = ap.parse_args()
    docs = list(mixed_documents(args.docs, seed=3))
    kb = KnowledgeBase.build(docs, retrieval=RetrievalConfig(max_question_chars=10**8))
    words = " ".join(d["text"] for d in docs).split()
    rng = random.Random(1)
    print(f"{len(kb):,} chunks from {args.docs:,} documents")
    for n in (int(x) for x in args.sizes.split(",")):
        parts, size = [], 0
        while size < n:
            w = rng.choice(words)
            parts.append(w)
            size += len(w) + 1
        q = " ".join(parts)[:n]
        for mode in args.modes.split(","):
            kb.retrieve(q[:1000], k=5, mode=mode)  # compiled and warm
            t = time.perf_counter()
            kb.retrieve(q, k=5, mode=mode)
            print(f"{n:>11,} characters  {mode:8s} {(time.perf_counter() - t) * 1e3:9.1f} ms")


if __name__ == "__main__":
    main()
