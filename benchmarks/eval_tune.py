"""Label-free fusion tuning (pseudo-questions) against the default and a label-tuned fusion.

For a BEIR-layout set: builds the knowledge base once (200/40 windows; the
character-count embedder, or ``--table`` a saved static table; ``--cache``
keeps it for the next run), runs the three legs once for all real questions
(``fastrag.retrieve.tune.collect_legs``) and scores hybrid nDCG@10
(documents ranked by their best chunk, the same kernels as ``retrieve``) on
the even and odd halves of the real questions (positions in queries.jsonl) with

- the embedder kind's default fusion;
- the fusion ``kb.tune_fusion()`` chooses from pseudo-questions of the
  corpus (no label seen), for each of ``--seeds``;
- for reference, the best setting of a wide grid chosen on one half's
  labels and scored on the other half.

The tuning's time is reported as a fraction of the build measured in the
same process.

    python benchmarks/eval_tune.py --data ../shared/datasets/scifact
    python benchmarks/eval_tune.py --data ../shared/datasets/cmrc2018
    python benchmarks/eval_tune.py --data ../shared/datasets/scifact --table scifact-minilm.arrow
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from fastrag.datasets.beir import load_beir, ndcg_at_k

from fastrag import KnowledgeBase, RetrievalConfig, StaticEmbedder
from fastrag.retrieve.fusion import fusion_plan
from fastrag.retrieve.tune import collect_legs, fuse_docs

WIDE = [
    *[("convex", v, k, d) for v in (0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
      for k in (0.0, 0.15, 0.3, 0.6, 1.0) for d in (0.0, 0.2, 0.35, 0.65, 1.0) if k or d],
    *[("rrf", v, 1.0, d) for v in (0.0, 0.05, 0.25, 0.5, 1.0, 2.0) for d in (0.0, 1.0, 3.0, 5.0)],
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--table", default=None, help="a saved static table (.arrow)")
    parser.add_argument("--queries", type=int, default=60, help="pseudo-questions")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--max-queries", type=int, default=None, help="real questions, at most")
    parser.add_argument("--cache", default=None, help="save/load the built knowledge base here")
    parser.add_argument(
        "--start", default=None,
        help="method,vector,keyword,document: the fusion in force before tuning (default: kind's)",
    )  # fmt: skip
    parser.add_argument(
        "--at-build", action="store_true",
        help="build with tune='auto' (the default of KnowledgeBase.build) and report its choice",
    )  # fmt: skip
    args = parser.parse_args()

    ds = load_beir(args.data)
    qids = [q["_id"] for q in ds.queries if q["_id"] in ds.qrels][: args.max_queries]
    texts = {q["_id"]: q["text"] for q in ds.queries}
    emb = StaticEmbedder.load(args.table) if args.table else None
    t0 = time.perf_counter()
    if args.cache and os.path.exists(args.cache):
        kb = KnowledgeBase.load(args.cache)
        build = None
    else:
        kb = KnowledgeBase.build(
            ds.documents(), embedder=emb, tune="auto" if args.at_build else False
        )
        build = time.perf_counter() - t0
        if args.cache:
            kb.save(args.cache)
    corpus, retriever = kb._corpus, kb._retriever  # noqa: SLF001 - a benchmark
    if args.start:
        method, *w = args.start.split(",")
        retriever.config = RetrievalConfig.from_dict({
            **retriever.config.to_dict(), "fusion": method, "vector_weight": float(w[0]),
            "keyword_weight": float(w[1]), "document_weight": float(w[2]),
        })  # fmt: skip
    store = corpus.store
    groups = store.row_docs()
    ids = store.rows(np.arange(store.n_rows), columns=("doc_id",)).column("doc_id").to_pylist()
    doc_of: dict[int, str] = {}
    for g, d in zip(groups.tolist(), ids, strict=True):
        doc_of.setdefault(g, d)
    legs = collect_legs(corpus, retriever, [texts[q] for q in qids])

    def halves(setting: tuple[str, float, float, float]) -> dict[str, float]:
        ranked = fuse_docs(legs, *setting, rrf_k=float(retriever.config.rrf_k))
        s = np.array([
            ndcg_at_k([doc_of[int(x)] for x in row if x >= 0], ds.qrels[q], 10)
            for q, row in zip(qids, ranked, strict=True)
        ])  # fmt: skip
        return {"even": round(float(s[0::2].mean()), 4), "odd": round(float(s[1::2].mean()), 4)}

    in_force = fusion_plan(retriever.config, corpus.embedder)
    plan = in_force if args.start else fusion_plan(RetrievalConfig(), corpus.embedder)
    default = (plan.method, plan.vector, plan.keyword, plan.document)
    out: dict = {
        "data": args.data, "embedder": "static" if emb else "characters",
        "real_questions": len(qids), "build_seconds": None if build is None else round(build, 1),
        "load_average": os.getloadavg()[0], "default": [*default, halves(default)],
    }  # fmt: skip
    if args.at_build:
        report = kb.stats()["fusion_tuning"]
        chosen = (in_force.method, in_force.vector, in_force.keyword, in_force.document)
        out["at_build"] = {**report, "in_force": [*chosen, halves(chosen)]}
        if build is not None and "seconds" in report:
            out["at_build"]["share_of_build"] = round(report["seconds"] / build, 3)
    out["label_free"] = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        choice = kb.tune_fusion(queries=args.queries, seed=seed, apply=False)
        c = (choice.fusion, choice.vector_weight, choice.keyword_weight, choice.document_weight)
        row = {"seed": seed, **choice.to_dict(), **halves(c)}
        if build is not None:
            row["share_of_build"] = round(choice.seconds / build, 3)
        out["label_free"].append(row)
    per = [(s, halves(s)) for s in WIDE]
    be = max(per, key=lambda p: p[1]["even"])
    bo = max(per, key=lambda p: p[1]["odd"])
    out["label_tuned"] = {
        "chosen_on_even": [*be[0], "odd", be[1]["odd"]],
        "chosen_on_odd": [*bo[0], "even", bo[1]["even"]],
    }  # fmt: skip
    out["load_average_end"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
