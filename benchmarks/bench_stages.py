"""Cost of each answer stage after retrieval, on the demo knowledge base.

    python benchmarks/bench_stages.py [--rounds 300] [--k 5] [--cold]

Builds the bundled demo knowledge base, retrieves the top ``--k`` hits for a
set of English and Chinese questions, and times, per question, on those real
hits (interleaved, so machine noise hits every stage alike):

- ``context``       assemble_context (merge windows, pack 3000 tokens)
- ``pii``           redact_hits over the packed blocks (all built-in types)
- ``confidence``    confidence() of the extractive answer
- ``faithfulness``  check_faithfulness() of the extractive answer
- ``freshness``     freshness_warnings() (180 days, language by question)
- ``conflicts``     detect_conflicts() over the top 5 hits
- ``audit``         audit_digest() of question, cited chunks, prompt, answer
- ``timer``         StageTimer bookkeeping for the 7 stages above (no hook)
- ``all stages``    the above back to back (what answer() would add)

and, for scale, the extractive ``generate`` step and a whole ``answer()``;
side by side, ``answer()`` with the optional stages off (no budget, no
redaction, freshness or conflicts; verify and audit always run) and the bare
``retrieve()`` + extractive generate that ``answer()`` wraps.
Prints p50 / p99 in microseconds. The target: ``all stages`` adds at most
2 ms p50 to answer().

The verify stages cache the terms and quantities of texts they have seen
(chunks recur from question to question). ``--cold`` clears those caches
before every call, to show the cost for chunks never seen before.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from fastrag.datasets import demo_documents

from fastrag import ExtractiveGenerator, KnowledgeBase, warmup
from fastrag.answer.audit import audit_digest
from fastrag.answer.conflicts import detect_conflicts
from fastrag.answer.context import assemble_context
from fastrag.answer.stages import StageTimer, clear_caches
from fastrag.answer.verify import check_faithfulness, confidence, freshness_warnings
from fastrag.text.pii import Redactor

QUESTIONS = [
    "How many days of paid annual leave do employees receive?",
    "How far in advance must annual leave be requested?",
    "Within how many days must expense reports be submitted?",
    "How much is reimbursed for meals during business travel?",
    "How many days per week can employees work remotely?",
    "How often must passwords be changed?",
    "What is the hotel limit in tier-one cities?",
    "How long does the probation period last?",
    "When is the IT help desk open?",
    "How many people does the large conference room seat?",
    "年假有多少天？",
    "费用报销须在多少天内提交？",
    "出差住宿费每晚最高报销多少？",
    "每周可以远程办公几天？",
    "密码多久更换一次？",
    "子女教育补贴每月多少钱？",
]
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)  # some demo sources are then stale
SNAPSHOT = "demo-snapshot"


def pct(values: list[int], q: float) -> float:
    return float(np.percentile(np.array(values, dtype=np.float64) / 1e3, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300, help="passes over the questions")
    parser.add_argument("--k", type=int, default=5, help="hits per question")
    parser.add_argument(
        "--cold", action="store_true", help="clear the stage caches before each call"
    )
    args = parser.parse_args()

    warmup()
    kb = KnowledgeBase.build(demo_documents())
    generate = ExtractiveGenerator()
    redactor = Redactor()
    cases = []
    for q in QUESTIONS:
        hits = kb.retrieve(q, k=args.k)
        ctx = assemble_context(hits)
        gen = generate(q, ctx.hits)
        cases.append((q, hits, ctx, gen))
        kb.answer(q, k=args.k)

    def stages(q: str, hits: list[Any], timer: StageTimer | None = None) -> None:
        """Every stage back to back, as answer() would run them."""
        ctx = assemble_context(hits)
        blocks, _ = redactor.redact_hits(ctx.hits)
        gen = generate(q, blocks)
        cited = [blocks[c - 1] for c in gen.citations]
        confidence([h.relevance for h in cited], len(cited), len(blocks))
        check_faithfulness(gen.text, [h.text for h in blocks], found=gen.found)
        freshness_warnings(blocks, question=q, now=NOW)
        detect_conflicts(blocks)
        audit_digest(q, SNAPSHOT, [(h.chunk_id, h.text) for h in cited], gen.prompt or "", gen.text)

    def timed_stages(q: str, hits: list[Any]) -> None:
        timer = StageTimer()
        with timer("context"):
            ctx = assemble_context(hits)
        with timer("pii"):
            blocks, _ = redactor.redact_hits(ctx.hits)
        with timer("generate"):
            gen = generate(q, blocks)
        cited = [blocks[c - 1] for c in gen.citations]
        with timer("confidence"):
            confidence([h.relevance for h in cited], len(cited), len(blocks))
        with timer("faithfulness"):
            check_faithfulness(gen.text, [h.text for h in blocks], found=gen.found)
        with timer("freshness"):
            freshness_warnings(blocks, question=q, now=NOW)
        with timer("conflicts"):
            detect_conflicts(blocks)
        with timer("audit"):
            audit_digest(
                q, SNAPSHOT, [(h.chunk_id, h.text) for h in cited], gen.prompt or "", gen.text
            )

    bench: dict[str, Callable[[Any], Any]] = {
        "context": lambda c: assemble_context(c[1]),
        "pii": lambda c: redactor.redact_hits(c[2].hits),
        "confidence": lambda c: confidence(
            [c[2].hits[i - 1].relevance for i in c[3].citations],
            len(c[3].citations),
            len(c[2].blocks),
        ),
        "faithfulness": lambda c: check_faithfulness(
            c[3].text, [h.text for h in c[2].hits], found=c[3].found
        ),
        "freshness": lambda c: freshness_warnings(c[2].hits, question=c[0], now=NOW),
        "conflicts": lambda c: detect_conflicts(c[2].hits),
        "audit": lambda c: audit_digest(
            c[0],
            SNAPSHOT,
            [(c[2].hits[i - 1].chunk_id, c[2].hits[i - 1].text) for i in c[3].citations],
            c[3].prompt or "",
            c[3].text,
        ),  # fmt: skip
        "timer": lambda c: _timer_only(),
        "all stages": lambda c: stages(c[0], c[1]),
        "all stages, timed": lambda c: timed_stages(c[0], c[1]),
        "(generate, extractive)": lambda c: generate(c[0], c[2].hits),
        "(answer(), whole)": lambda c: kb.answer(c[0], k=args.k),
        "(answer(), stages off)": lambda c: kb.answer(
            c[0], k=args.k, budget=None, redact=False, max_age_days=None, detect_conflicts=False
        ),
        "(retrieve + generate)": lambda c: generate(c[0], kb.retrieve(c[0], k=args.k)),
    }
    samples: dict[str, list[int]] = {name: [] for name in bench}
    clock = time.perf_counter_ns
    for _ in range(args.rounds):
        for case in cases:
            for name, fn in bench.items():
                if args.cold:
                    clear_caches()
                t0 = clock()
                fn(case)
                samples[name].append(clock() - t0)

    n = args.rounds * len(cases)
    print(f"demo knowledge base: {len(kb)} chunks, k={args.k}, {len(QUESTIONS)} questions, "
          f"{n} calls per stage, {'cold' if args.cold else 'warm'} caches")  # fmt: skip
    print(f"{'stage':<24} {'p50 us':>9} {'p99 us':>9}")
    for name, values in samples.items():
        print(f"{name:<24} {pct(values, 50):9.1f} {pct(values, 99):9.1f}")
    added = pct(samples["all stages, timed"], 50) - pct(samples["(generate, extractive)"], 50)
    print(f"stages added to answer() (all stages, timed - generate), p50: {added:.1f} us "
          f"(target <= 2000 us)")  # fmt: skip
    whole = pct(samples["(answer(), whole)"], 50)
    for base in ("(answer(), stages off)", "(retrieve + generate)"):
        print(f"answer() - {base}, p50: {whole - pct(samples[base], 50):.1f} us")


def _timer_only() -> None:
    timer = StageTimer()
    for name in ("context", "pii", "confidence", "faithfulness", "freshness", "conflicts", "audit"):
        with timer(name):
            pass


if __name__ == "__main__":
    main()
