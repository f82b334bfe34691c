"""Fusion weights per question class on the generated maintenance corpus (the router's basis).

Builds the corpus of ``fastrag.datasets.maintenance`` once per weight setting
of a small grid (vector, chunk keyword, document keyword; RRF), retrieves
every question, and scores nDCG@10 (one relevant document per question) per
class (code, numeric, natural, mixed: the class the generator gave it, and
the class ``fastrag.text.route`` assigns, reported as agreement). Weights
are chosen on the questions of even-numbered documents and reported on the
odd-numbered ones: per class, and for the best single setting over all
classes.

    python benchmarks/eval_route.py --machines 40 --seed 0
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

from fastrag.datasets.maintenance import generate

from fastrag import KnowledgeBase, RetrievalConfig
from fastrag.text.route import classify_question

GRID = list(itertools.product((0.0, 0.05, 0.3, 1.0), (0.5, 1.0, 2.0), (0.0, 1.0, 3.0)))


def ndcg(ranked: list[str], doc: str) -> float:
    for i, d in enumerate(ranked[:10]):
        if d == doc:
            return 1.0 / math.log2(i + 2)
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    docs, questions = generate(args.machines, args.seed)
    half = {d["id"]: i % 2 for i, d in enumerate(docs)}
    agree = sum(classify_question(q) == kind for q, _, kind in questions) / len(questions)
    print(f"{len(docs)} documents, {len(questions)} questions; rules agree on {agree:.3f}")
    texts = [q for q, _, _ in questions]
    scores: dict[tuple, list[float]] = {}
    t0 = time.perf_counter()
    for weights in [None, *GRID]:
        cfg = RetrievalConfig(fusion="rrf") if weights is None else RetrievalConfig(
            fusion="rrf", vector_weight=weights[0], keyword_weight=weights[1],
            document_weight=weights[2],
        )  # fmt: skip
        kb = KnowledgeBase.build(docs, retrieval=cfg)
        table = kb.retrieve_batch(texts, 10, group_by="doc").to_pydict()
        ranked: list[list[str]] = [[] for _ in texts]
        for qi, doc in zip(table["query_index"], table["doc_id"], strict=True):
            ranked[qi].append(doc)
        scores[weights or ("default",)] = [
            ndcg(r, d) for r, (_, d, _) in zip(ranked, questions, strict=True)
        ]
    print(f"grid of {len(GRID)} settings in {time.perf_counter() - t0:.0f} s")

    def mean(key: tuple, kind: str | None, side: int) -> float:
        vals = [
            s for s, (_, d, k) in zip(scores[key], questions, strict=True)
            if half[d] == side and (kind is None or k == kind)
        ]  # fmt: skip
        return sum(vals) / len(vals)

    single = max(GRID, key=lambda w: mean(w, None, 0))
    print(f"best single setting on the choice half: {single}")
    print(f"{'class':<8} {'default':>8} {'single':>8} {'per-class':>9}  per-class weights")
    for kind in ("code", "numeric", "natural", "mixed"):
        best = max(GRID, key=lambda w: mean(w, kind, 0))
        print(
            f"{kind:<8} {mean(('default',), kind, 1):>8.3f} {mean(single, kind, 1):>8.3f} "
            f"{mean(best, kind, 1):>9.3f}  {best}"
        )


if __name__ == "__main__":
    main()
