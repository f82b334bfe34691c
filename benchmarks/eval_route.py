"""Fusion weights per question class: does routing pay? (the router's basis, issue 25).

One knowledge base per data set; for each fusion setting of a grid (method
RRF or convex; vector, chunk keyword and document keyword weights) every
question is retrieved (top 10 documents) and scored by nDCG@10. Questions
are split in two halves: settings are *chosen* on one and *reported* on the
other. Per class (``fastrag.text.route.classify_question``: code, numeric,
natural, mixed) the table shows the shipped default fusion, the best single
setting (chosen over all classes of the choice half) and the best setting
per class (chosen on that class of the choice half): routing pays when the
last beats the single one on the report half.

- the generated maintenance corpus (``fastrag.datasets.maintenance``,
  ``--hard`` by default: near codes, documents citing many codes, shared
  quantities): halves by document (even / odd);
- BEIR folders given with ``--beir`` (SciFact, CMRC 2018): halves by query
  (even / odd index), and the per-class weights chosen on the maintenance
  corpus are applied as ``route="auto"`` would ("auto (maint.)").

    python benchmarks/eval_route.py --machines 40 --seed 0 \\
        --beir ../shared/datasets/scifact --beir ../shared/datasets/cmrc2018 --max-queries 1000

Only quality figures are printed (they do not depend on the machine's load).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
from collections.abc import Sequence
from pathlib import Path

from fastrag.datasets.beir import load_beir, ndcg_at_k
from fastrag.datasets.maintenance import generate

from fastrag import KnowledgeBase
from fastrag.text.route import ROUTES, classify_question

Setting = tuple[str, float, float, float]
GRID: list[Setting] = [
    (m, v, k, d)
    for m in ("rrf", "convex")
    for v, k, d in itertools.product((0.0, 0.05, 0.2, 1.0), (0.3, 1.0, 2.0), (0.0, 1.0, 3.0))
]
DEFAULT: Setting = ("default", 0.0, 0.0, 0.0)


@dataclasses.dataclass
class Set:
    """Questions of one data set: text, relevance, class, half (0 choose, 1 report)."""

    name: str
    kb: KnowledgeBase
    questions: list[str]
    relevant: list[dict[str, int]]
    kinds: list[str]
    halves: list[int]


def scores(s: Set) -> dict[Setting, list[float]]:
    """nDCG@10 of every question under the default and each grid setting (one build)."""
    retriever = s.kb._retriever  # noqa: SLF001 - a benchmark swaps the fusion without rebuilding
    base = retriever.config
    out: dict[Setting, list[float]] = {}
    for setting in [DEFAULT, *GRID]:
        m, v, k, d = setting
        retriever.config = base if m == "default" else dataclasses.replace(
            base, fusion=m, vector_weight=v, keyword_weight=k, document_weight=d
        )  # fmt: skip
        table = s.kb.retrieve_batch(s.questions, 10, group_by="doc").to_pydict()
        ranked: list[list[str]] = [[] for _ in s.questions]
        for qi, doc in zip(table["query_index"], table["doc_id"], strict=True):
            ranked[qi].append(doc)
        out[setting] = [ndcg_at_k(r, rel, 10) for r, rel in zip(ranked, s.relevant, strict=True)]
    retriever.config = base
    return out


def mean(vals: Sequence[float]) -> float:
    return sum(vals) / len(vals) if vals else float("nan")


def pick(s: Set, sc: dict[Setting, list[float]], kind: str | None, half: int, setting: Setting):
    return mean(
        [
            x
            for x, k, h in zip(sc[setting], s.kinds, s.halves, strict=True)
            if h == half and (kind is None or k == kind)
        ]  # fmt: skip
    )


def report(s: Set, sc: dict[Setting, list[float]], routed: dict[str, Setting] | None) -> dict:
    """Print the table of one set; return the per-class settings chosen on its choice half."""
    single = max(GRID, key=lambda w: pick(s, sc, None, 0, w))
    per = {}
    print(f"\n{s.name}: {len(s.questions)} questions; best single setting {single}")
    head = f"{'class':<8} {'n (report)':>10} {'default':>8} {'single':>8} {'per-class':>9}"
    print(head + ("  auto (maint.)" if routed else "") + "  per-class setting")
    auto_all: list[float] = []
    for kind in ROUTES:
        n = sum(1 for k, h in zip(s.kinds, s.halves, strict=True) if k == kind and h == 1)
        if not n:
            continue
        best = max(GRID, key=lambda w: pick(s, sc, kind, 0, w))
        per[kind] = best
        line = (
            f"{kind:<8} {n:>10} {pick(s, sc, kind, 1, DEFAULT):>8.4f} "
            f"{pick(s, sc, kind, 1, single):>8.4f} {pick(s, sc, kind, 1, best):>9.4f}"
        )
        if routed:
            line += f"  {pick(s, sc, kind, 1, routed.get(kind, single)):>13.4f}"
        print(line + f"  {best}")
    if routed:
        for i, (k, h) in enumerate(zip(s.kinds, s.halves, strict=True)):
            if h == 1:
                auto_all.append(sc[routed.get(k, single)][i])
    own = [sc[per[k]][i] for i, (k, h) in enumerate(zip(s.kinds, s.halves, strict=True)) if h == 1]
    line = (
        f"{'all':<8} {sum(s.halves):>10} {pick(s, sc, None, 1, DEFAULT):>8.4f} "
        f"{pick(s, sc, None, 1, single):>8.4f} {mean(own):>9.4f}"
    )
    print(line + (f"  {mean(auto_all):>13.4f}" if routed else ""))
    return per


def maintenance(machines: int, seed: int, hard: bool) -> Set:
    docs, questions = generate(machines, seed, hard=hard)
    targets = sorted({d for _, d, _ in questions}, key=[d["id"] for d in docs].index)
    half = {d: i % 2 for i, d in enumerate(targets)}
    texts = [q for q, _, _ in questions]
    kinds = [classify_question(q) for q in texts]
    agree = sum(k == label for k, (_, _, label) in zip(kinds, questions, strict=True))
    print(f"maintenance: {len(docs)} documents; rules agree with the labels on "
          f"{agree / len(questions):.3f}")  # fmt: skip
    return Set(
        f"maintenance (hard={hard})", KnowledgeBase.build(docs), texts,
        [{d: 1} for _, d, _ in questions], kinds, [half[d] for _, d, _ in questions],
    )  # fmt: skip


def beir(path: str, max_queries: int | None) -> Set:
    ds = load_beir(path)
    queries = ds.queries[:max_queries] if max_queries else ds.queries
    kb = KnowledgeBase.build(ds.documents(), window=200, overlap=40)
    texts = [q["text"] for q in queries]
    return Set(
        Path(path).name, kb, texts, [ds.qrels[q["_id"]] for q in queries],
        [classify_question(t) for t in texts], [i % 2 for i in range(len(texts))],
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--easy", action="store_true", help="the earlier, easier generator")
    parser.add_argument("--beir", action="append", default=[], help="a BEIR folder (repeat)")
    parser.add_argument("--max-queries", type=int, default=None, help="first N queries of each")
    args = parser.parse_args()
    m = maintenance(args.machines, args.seed, not args.easy)
    routed = report(m, scores(m), None)
    for path in args.beir:
        s = beir(path, args.max_queries)
        report(s, scores(s), routed)


if __name__ == "__main__":
    main()
