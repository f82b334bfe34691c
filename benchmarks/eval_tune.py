"""Label-free fusion tuning (pseudo-questions) against the default and a label-tuned fusion.

For a BEIR-layout set: builds the knowledge base once (200/40 windows; the
character-count embedder, or ``--table`` a saved static table), then scores
hybrid nDCG@10 (documents ranked by their best chunk) on the odd and even
halves of the real questions with

- the embedder kind's default fusion;
- the fusion ``kb.tune_fusion()`` chooses from pseudo-questions of the
  corpus (no label seen);
- for reference, the best setting of the same grid chosen on the even half's
  labels (reported on the odd half), and on the odd half's (on the even).

    python benchmarks/eval_tune.py --data ../shared/datasets/scifact
    python benchmarks/eval_tune.py --data ../shared/datasets/cmrc2018
"""

from __future__ import annotations

import argparse
import json
import os
import time

from fastrag.datasets.beir import load_beir, ndcg_at_k

from fastrag import KnowledgeBase, StaticEmbedder


def ranked_docs(kb: KnowledgeBase, questions: list[str]) -> list[list[str]]:
    table = kb.retrieve_batch(questions, k=10, mode="hybrid", group_by="doc")
    out: list[list[str]] = [[] for _ in questions]
    for qi, doc in zip(
        table.column("query_index").to_pylist(), table.column("doc_id").to_pylist(), strict=True
    ):
        out[qi].append(doc)
    return out


def ndcg(kb, ds, qids, texts) -> float:
    ranked = ranked_docs(kb, texts)
    return sum(ndcg_at_k(r, ds.qrels[q], 10) for q, r in zip(qids, ranked, strict=True)) / len(qids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--table", default=None, help="a saved static table (.arrow)")
    parser.add_argument("--queries", type=int, default=200, help="pseudo-questions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-queries", type=int, default=None, help="real questions, at most")
    args = parser.parse_args()
    from fastrag.retrieve.tune import _settings

    ds = load_beir(args.data)
    qids = [q["_id"] for q in ds.queries if q["_id"] in ds.qrels][: args.max_queries]
    texts = {q["_id"]: q["text"] for q in ds.queries}
    halves = [(qids[p::2], [texts[i] for i in qids[p::2]]) for p in (0, 1)]
    emb = StaticEmbedder.load(args.table) if args.table else None
    t0 = time.perf_counter()
    kb = KnowledgeBase.build(ds.documents(), embedder=emb)
    build = time.perf_counter() - t0
    out: dict = {"data": args.data, "embedder": "static" if emb else "characters",
                 "build_seconds": round(build, 1), "load_average": os.getloadavg()[0]}  # fmt: skip
    out["default"] = {h: ndcg(kb, ds, *halves[i]) for i, h in enumerate(("even", "odd"))}
    t0 = time.perf_counter()
    choice = kb.tune_fusion(queries=args.queries, seed=args.seed)
    out["tune_seconds"] = round(time.perf_counter() - t0, 1)
    out["label_free_choice"] = choice.to_dict()
    out["label_free"] = {h: ndcg(kb, ds, *halves[i]) for i, h in enumerate(("even", "odd"))}
    # Reference: the same grid chosen on one half's labels, scored on the other half.
    grid = _settings(kb._retriever.config)  # noqa: SLF001 - a benchmark
    per: list[tuple[str, dict[str, float]]] = []
    for cfg in grid:
        kb._retriever.config = cfg  # noqa: SLF001
        per.append((f"{cfg.fusion} {cfg.vector_weight:g}/{cfg.keyword_weight:g}/"
                    f"{cfg.document_weight:g}",
                    {h: ndcg(kb, ds, *halves[i]) for i, h in enumerate(("even", "odd"))}))  # fmt: skip
    best_even = max(per, key=lambda p: p[1]["even"])
    best_odd = max(per, key=lambda p: p[1]["odd"])
    out["label_tuned"] = {
        "chosen_on_even": best_even[0], "odd": best_even[1]["odd"],
        "chosen_on_odd": best_odd[0], "even": best_odd[1]["even"],
    }  # fmt: skip
    out["load_average_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
