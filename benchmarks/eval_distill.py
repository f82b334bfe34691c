"""Context distillation on CMRC 2018: is the gold answer kept, at what share of the tokens?

    python benchmarks/eval_distill.py --data /work/shared/datasets/cmrc2018 [--limit N] [--kb DIR]

Builds a knowledge base on the CMRC 2018 contexts with the default settings
(``KnowledgeBase.build(documents)``: 200/40 windows, the default embedder and
BM25; the paragraph text without its title), saved under ``--kb`` and reused
when it is there. Every question is answered twice from its top 5 chunks
with the offline extractive generator: with the whole context, and with
``distill="extractive"``. Reported:

- **kept**: among the questions whose full top-5 context (the packed
  blocks) contains a gold answer string, the share whose distilled facts
  contain one (target >= 95 %);
- **tokens**: distilled / full context tokens (``Answer.distilled``;
  summed over questions, and the mean of the per-question ratios; target
  <= 50 %);
- **answer found**: the share of questions whose extractive answer text
  contains a gold answer string, on the full and on the distilled context.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from fastrag.datasets.beir import load_beir

from fastrag import KnowledgeBase, warmup


def has_gold(texts: list[str], golds: list[str]) -> bool:
    """Whether any gold answer string occurs in any of the texts."""
    return any(g and g in t for g in golds for t in texts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="the CMRC 2018 BEIR folder")
    ap.add_argument("--kb", default="/tmp/fastrag-eval-distill/kb", help="saved knowledge base")
    ap.add_argument("--limit", type=int, default=0, help="first N questions only (0: all)")
    ap.add_argument("--build-only", action="store_true", help="build and save the KB, then stop")
    args = ap.parse_args()

    ds = load_beir(args.data)
    path = Path(args.kb)
    if (path / "manifest.json").exists():
        kb = KnowledgeBase.load(path)
    else:
        t = time.perf_counter()
        kb = KnowledgeBase.build(ds.documents(with_title=False))
        print(f"built {len(kb)} chunks in {time.perf_counter() - t:.0f} s", flush=True)
        kb.save(path)
    if args.build_only:
        return
    warmup()
    queries = ds.queries[: args.limit] if args.limit else ds.queries
    questions = [q["text"] for q in queries]
    golds = [list(q.get("answers") or []) for q in queries]

    t = time.perf_counter()
    full = kb.answer_batch(questions, k=5, output="answers")
    t_full = time.perf_counter() - t
    t = time.perf_counter()
    dist = kb.answer_batch(questions, k=5, output="answers", distill="extractive")
    t_dist = time.perf_counter() - t

    n = len(questions)
    in_full = kept = found_full = found_dist = 0
    before = after = 0
    ratios: list[float] = []
    for g, a, d in zip(golds, full, dist, strict=True):
        assert a is not None and d is not None and d.distilled is not None
        if has_gold([h.text for h in d.hits], g):
            in_full += 1
            kept += has_gold([f.text for f in d.distilled.facts], g)
        before += d.distilled.tokens_before
        after += d.distilled.tokens_after
        ratios.append(d.distilled.ratio)
        found_full += a.found and has_gold([a.text], g)
        found_dist += d.found and has_gold([d.text], g)
    print(f"questions: {n} ({'first ' + str(n) if args.limit else 'all'})")
    print(f"gold span in the full top-5 context: {in_full} ({in_full / n:.1%})")
    print(f"kept by the distilled context: {kept} / {in_full} = {kept / max(in_full, 1):.2%}")
    print(f"tokens distilled / full: {after} / {before} = {after / max(before, 1):.1%} "
          f"(mean per question {sum(ratios) / n:.1%})")  # fmt: skip
    print(f"extractive answer holds the gold span: full {found_full} ({found_full / n:.1%}), "
          f"distilled {found_dist} ({found_dist / n:.1%})")  # fmt: skip
    print(f"seconds: full {t_full:.0f}, distilled {t_dist:.0f}")


if __name__ == "__main__":
    main()
