"""What answer() costs over retrieve() on the demo knowledge base, interleaved in one process.

    python benchmarks/ab_answer_overhead.py --rounds 3000
    python benchmarks/ab_answer_overhead.py --synthetic 1500     # answer_batch, 19k chunks
    python benchmarks/ab_answer_overhead.py --dump before.json   # answers, for --check
    python benchmarks/ab_answer_overhead.py --check before.json  # same answers as then?

Builds the demo knowledge base as ``fastrag demo`` does
(``KnowledgeBase.build(demo_documents())``), then, per round, times
``kb.retrieve(q)`` and ``kb.answer(q)`` (extractive generator, default
options) on the same question, alternating which goes first, over the demo's
questions (``fastrag demo``'s four and the other policy questions of the
tests). Prints the medians of the per-call times (wall and the process CPU
time) and answer()'s extra cost. Then the same for ``answer_batch`` against
``retrieve_batch`` over ``--batch`` distinct questions (the demo questions
and prefixes of the demo chunks), ``--batch-rounds`` interleaved pairs,
per question.

``--synthetic DOCS`` instead builds ``mixed_documents(DOCS)`` (exact
index, ``VocabularyEmbedder(max_features=384)``) and times, in process CPU
seconds, ``retrieve_batch`` then ``answer_batch`` on 2,000 new questions
(chunk prefixes), then both again on the same questions, twice.

``--dump FILE`` writes every field of the answers (timings aside) for the
demo questions, for a knowledge base of README.md's sections (questions:
its headings and the first words of each section) and for the demo with
outdated copies that disagree on numbers (conflicts), by ``answer``,
``answer_batch`` and with conflicts, freshness, a small budget and
redaction on; ``--check FILE`` recomputes them and names the first
difference (exit status 1), so a change to the answer stages can be shown
to leave every answer as it was.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from fastrag.datasets import demo_documents

from fastrag import AnswerOptions, KnowledgeBase

DEMO_QUESTIONS = [
    "年假怎么申请？",
    "How many days do I have to submit an expense report?",
    "设备丢失后多久内要报告？",
    "公司食堂几点开门？",
    "How many days of annual leave do employees receive?",
    "报销需要在几天内提交？",
    "What is the password policy?",
    "远程办公每周最多几天？",
    "Who won the 1998 World Cup?",
]
README = Path(__file__).resolve().parents[1] / "README.md"


def readme_corpus() -> tuple[list[dict[str, Any]], list[str]]:
    """README.md's sections as documents; its headings and section openings as questions."""
    text = README.read_text()
    parts = re.split(r"^(#{2,4} .*)$", text, flags=re.M)
    docs, questions = [], []
    for i in range(1, len(parts) - 1, 2):
        title, body = parts[i].lstrip("# ").strip(), parts[i + 1].strip()
        if not body:
            continue
        docs.append({"id": f"readme-{i}", "title": title, "text": body})
        questions.append(title)
        words = re.sub(r"[`*#|]", " ", body).split()
        questions.append(" ".join(words[:8]))
    return docs, questions


def batch_questions(kb: KnowledgeBase, n: int) -> list[str]:
    """The demo questions, then distinct prefixes of the demo chunks, ``n`` in all."""
    texts = [h.text for h in kb.retrieve_batch(["x"], k=len(kb), mode="vector", output="hits")[0]]
    out = list(DEMO_QUESTIONS)
    length = 12
    while len(out) < n:
        for t in texts:
            q = t[:length].strip()
            if q and q not in out:
                out.append(q)
        length += 5
        if length > 400:
            break
    return out[:n]


def fingerprint(answer: Any) -> Any:
    fields = dataclasses.asdict(answer)
    fields.pop("timings")
    return orjson.loads(orjson.dumps(fields, default=repr, option=orjson.OPT_NON_STR_KEYS))


OPTION_SETS: list[tuple[str, dict[str, Any]]] = [
    ("default", {}),
    ("k8", {"k": 8}),
    ("conflicts-off", {"answer": AnswerOptions(detect_conflicts=False)}),
    ("fresh-budget", {"answer": AnswerOptions(max_age_days=30, budget=120,
                                             now=dt.datetime(2026, 12, 1, tzinfo=dt.UTC))}),
    ("redact", {"answer": AnswerOptions(redact=True)}),
    ("keyword", {"mode": "keyword"}),
]  # fmt: skip


def answers_of(kb: KnowledgeBase, questions: list[str], label: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kw in OPTION_SETS:
        for i, q in enumerate(questions):
            out[f"{label}/{name}/answer/{i}"] = fingerprint(kb.answer(q, **kw))
        batch = kb.answer_batch(questions, output="answers", **kw)
        for i, a in enumerate(batch):
            out[f"{label}/{name}/batch/{i}"] = fingerprint(a)
    return out


def conflict_corpus() -> tuple[list[dict[str, Any]], list[str]]:
    """The demo documents with outdated copies that disagree on numbers, and questions on them."""
    docs = demo_documents()
    by_id = {d["id"]: d for d in docs}
    old_zh = dict(by_id["expense-zh"], id="expense-zh-2023", updated_at="2023-01-01")
    old_zh["text"] = str(old_zh["text"]).replace("15天", "10天")
    old_en = dict(by_id["leave-en"], id="leave-en-2022", updated_at="2022-06-01")
    old_en["text"] = str(old_en["text"]).replace("15 days", "12 days").replace("20 days", "25 days")
    questions = [
        "费用报销须在费用发生后多少天内提交？",
        "How many days of paid annual leave do employees receive?",
        "How many days of leave may be carried over?",
        *DEMO_QUESTIONS,
    ]
    return [*docs, old_zh, old_en], questions


def all_answers(demo: KnowledgeBase) -> dict[str, Any]:
    out = answers_of(demo, batch_questions(demo, 60), "demo")
    for label, corpus in (("readme", readme_corpus), ("conflict", conflict_corpus)):
        docs, questions = corpus()
        out.update(answers_of(KnowledgeBase.build(docs), questions, label))
    return out


def first_difference(a: Any, b: Any, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(a.keys() ^ b.keys())[:5]}"
        for key in a:
            d = first_difference(a[key], b[key], f"{path}.{key}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def timed(fn: Any) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def med(values: list[float], scale: float = 1e3) -> float:
    return statistics.median(values) * scale


def synthetic(n_docs: int) -> None:
    """answer_batch against retrieve_batch (process CPU) on new, then repeated, contexts."""
    import numpy as np
    from fastrag.datasets.synthetic import mixed_documents

    from fastrag import VocabularyEmbedder

    kb = KnowledgeBase.build(
        mixed_documents(n_docs, seed=5), embedder=VocabularyEmbedder(max_features=384)
    )
    rng = np.random.default_rng(1)
    texts = kb._corpus.store.rows(rng.integers(0, len(kb), 4000), ["text"]).column("text")
    qs = [s[: 20 + int(rng.integers(0, 40))] for s in texts.to_pylist()]
    kb.answer_batch(qs[:64])
    kb.retrieve_batch(qs[:64])

    def cpu(fn: Any) -> float:
        t = time.process_time()
        fn()
        return time.process_time() - t

    print(f"load average {os.getloadavg()[0]:.2f}; {len(kb):,} chunks (exact, hybrid)")
    for half in (qs[:2000], qs[2000:]):
        r, a = cpu(lambda h=half: kb.retrieve_batch(h)), cpu(lambda h=half: kb.answer_batch(h))
        r2, a2 = cpu(lambda h=half: kb.retrieve_batch(h)), cpu(lambda h=half: kb.answer_batch(h))
        print(
            f"  2,000 new questions: retrieve_batch {r:.3f} s, answer_batch {a:.3f} s CPU "
            f"({len(half) / a:,.0f} q/s, +{(a - r) / len(half) * 1e6:,.0f} us/q); the same again: "
            f"{r2:.3f} / {a2:.3f} s (+{(a2 - r2) / len(half) * 1e6:,.0f} us/q)"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


def interleaved(rounds, retrieve, answer):
    """Time ``retrieve(r)`` and ``answer(r)`` for each round r, alternating which goes first.

    Returns the wall and CPU times of each: (retrieve wall, retrieve cpu, answer wall, answer cpu).
    """
    rw, rc, aw, ac = [], [], [], []
    for r in range(rounds):
        first, second = (answer, retrieve) if r % 2 else (retrieve, answer)
        for fn in (first, second):
            w, c = timed(lambda fn=fn: fn(r))
            (rw if fn is retrieve else aw).append(w)
            (rc if fn is retrieve else ac).append(c)
    return rw, rc, aw, ac


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--batch-rounds", type=int, default=15)
    ap.add_argument("--dump", metavar="FILE")
    ap.add_argument("--check", metavar="FILE")
    ap.add_argument("--profile", metavar="FILE", help="cProfile --rounds answer() calls to FILE")
    ap.add_argument(
        "--synthetic",
        type=int,
        metavar="DOCS",
        help="instead: answer_batch on mixed_documents(DOCS)",
    )
    args = ap.parse_args()
    if args.synthetic:
        synthetic(args.synthetic)
        return
    demo = KnowledgeBase.build(demo_documents())
    if args.dump or args.check:
        got = all_answers(demo)
        if args.dump:
            Path(args.dump).write_bytes(orjson.dumps(got))
            print(f"wrote {len(got)} answers to {args.dump}")
            return
        want = orjson.loads(Path(args.check).read_bytes())
        diff = first_difference(want, got, "answers")
        print(f"{len(got)} answers: " + ("identical" if diff is None else f"DIFFER at {diff}"))
        sys.exit(0 if diff is None else 1)
    questions = DEMO_QUESTIONS
    for q in questions:  # compile and fill the caches a long-running process has
        demo.retrieve(q)
        demo.answer(q)
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        for r in range(args.rounds):
            demo.answer(questions[r % len(questions)])
        prof.disable()
        prof.dump_stats(args.profile)
        print(f"profile of {args.rounds} answer() calls in {args.profile}")
        return
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (under load if > 0.5)")
    rw, rc, aw, ac = interleaved(
        args.rounds,
        lambda r: demo.retrieve(questions[r % len(questions)]),
        lambda r: demo.answer(questions[r % len(questions)]),
    )
    print(
        f"demo knowledge base ({len(demo)} chunks), {args.rounds} interleaved pairs, p50 per call"
    )
    print(f"  retrieve()  wall {med(rw):.3f} ms  cpu {med(rc):.3f} ms")
    print(f"  answer()    wall {med(aw):.3f} ms  cpu {med(ac):.3f} ms")
    diffs = [a - r for a, r in zip(aw, rw, strict=True)]
    cdiffs = [a - r for a, r in zip(ac, rc, strict=True)]
    print(
        f"  answer() - retrieve(): wall {med(aw) - med(rw):+.3f} ms (median of pair differences "
        f"{med(diffs):+.3f}), cpu {med(ac) - med(rc):+.3f} ms ({med(cdiffs):+.3f}); target <= 0.2 ms"
    )
    bq = batch_questions(demo, args.batch)
    demo.answer_batch(bq)
    demo.retrieve_batch(bq)
    bw, bc, ab, ac2 = interleaved(
        args.batch_rounds, lambda r: demo.retrieve_batch(bq), lambda r: demo.answer_batch(bq)
    )
    per = 1e6 / len(bq)
    print(f"batches of {len(bq)} distinct questions, {args.batch_rounds} interleaved pairs, p50")
    print(
        f"  retrieve_batch  wall {med(bw):.2f} ms  cpu {med(bc):.2f} ms  ({med(bc, per):.1f} us/q)"
    )
    print(
        f"  answer_batch    wall {med(ab):.2f} ms  cpu {med(ac2):.2f} ms  ({med(ac2, per):.1f} us/q)"
    )
    print(
        f"  answer_batch - retrieve_batch: cpu {med(ac2, per) - med(bc, per):+.1f} us/question; "
        f"answer_batch {len(bq) / statistics.median(ac2):,.0f} q/s of CPU"
    )
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")


if __name__ == "__main__":
    main()
