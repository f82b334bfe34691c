"""Top-5 hit rate with and without the ontology, on the generated alias/canonical set.

Documents use only canonical terms, questions only aliases (English and
Chinese); see ``fastrag.datasets.ontology_set``. Prints the share of
questions whose answering document is among the top 5 hits (by document),
per question kind, with and without the ontology.

    python benchmarks/eval_ontology.py --n 100 --seed 0
"""

from __future__ import annotations

import argparse
import time

from fastrag.datasets.ontology_set import generate

from fastrag import KnowledgeBase


def hit_rates(kb: KnowledgeBase, questions: list[tuple], k: int = 5) -> dict[str, float]:
    """Share of questions (per kind and overall) whose document is in the top ``k``."""
    found: dict[str, list[bool]] = {}
    for question, doc_id, kind in questions:
        hits = kb.retrieve(question, k, group_by="doc")
        ok = doc_id in {h.doc_id for h in hits}
        found.setdefault(kind, []).append(ok)
        found.setdefault("all", []).append(ok)
    return {kind: sum(v) / len(v) for kind, v in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="fault (and repair) entities")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    docs, ontology, questions = generate(args.n, args.seed)
    t0 = time.perf_counter()
    kb = KnowledgeBase.build(docs)
    without = hit_rates(kb, questions)
    kb.set_ontology(ontology)
    with_ = hit_rates(kb, questions)
    print(f"{len(docs)} documents, {len(questions)} questions ({time.perf_counter() - t0:.1f} s)")
    print(f"{'kind':<10} {'without':>8} {'with':>8}")
    for kind in ("direct", "relation", "all"):
        print(f"{kind:<10} {without[kind]:>8.3f} {with_[kind]:>8.3f}")


if __name__ == "__main__":
    main()
