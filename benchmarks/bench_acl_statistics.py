"""The cost of per-principal keyword statistics: ``kb.retrieve`` with a principal.

    python benchmarks/bench_acl_statistics.py --chunks 20000 --repeat 7

Builds a synthetic knowledge base of about ``--chunks`` chunks (seeded words
from a 2,000-word vocabulary, one chunk per document, half of the documents
readable by the group ``staff`` only), then times ``kb.retrieve(q, k=5,
mode=..., principal=staff)`` over ``--questions`` questions with
``acl_statistics="global"`` (BM25 statistics over every row: the old default,
leaking) and ``"per_principal"`` (the default with a principal). Each timing
is the median of ``--repeat`` rounds (every round runs both settings once, in
turn, since the machine is shared); the ratio is per-principal over global.
The load average is printed before and after, from ``os.getloadavg``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from fastrag import KnowledgeBase, Principal


def _docs(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}x" for i in range(2000)]
    p = 1.0 / np.arange(1, len(words) + 1)  # Zipf-like word frequencies
    p /= p.sum()
    out = []
    for i in range(n):
        text = " ".join(rng.choice(words, size=25, p=p))
        doc = {"id": f"d{i}", "text": text}
        if i % 2:
            doc["acl"] = ["staff"]
        else:
            doc["acl"] = ["board"]
        out.append(doc)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    print("load average before:", os.getloadavg())
    t = time.perf_counter()
    docs = _docs(args.chunks, 0)
    kb = KnowledgeBase.build(docs, window=400, overlap=40, threads=args.threads)
    print(f"built {kb.stats()['chunks']} chunks in {time.perf_counter() - t:.1f} s")
    rng = np.random.default_rng(1)
    words = [f"w{i}x" for i in range(2000)]
    questions = [" ".join(rng.choice(words, size=4)) for _ in range(args.questions)]
    staff = Principal(user="s", groups=["staff"])
    for mode in ("keyword", "hybrid"):
        for stats in ("global", "per_principal"):  # warm-up: compile, masks, caches
            kb.retrieve(questions[0], k=5, mode=mode, principal=staff, acl_statistics=stats)
        times: dict[str, list[float]] = {"global": [], "per_principal": []}
        for _ in range(args.repeat):
            for stats in times:
                t = time.perf_counter()
                for q in questions:
                    kb.retrieve(
                        q, k=5, mode=mode, principal=staff, acl_statistics=stats,
                        threads=args.threads,
                    )  # fmt: skip
                times[stats].append((time.perf_counter() - t) / len(questions))
        g, p = (statistics.median(times[s]) * 1e6 for s in ("global", "per_principal"))
        print(
            f"{mode:8s} global {g:8.1f} us/question  per_principal {p:8.1f} us/question  "
            f"ratio {p / g:.2f}"
        )
    print("load average after:", os.getloadavg())


if __name__ == "__main__":
    main()
