"""Adaptive teacher calls against the best hand-tuned setting, on a slow serial teacher.

A real OpenAI-compatible server on 127.0.0.1 (``_slow_teacher.py``) answers
one request at a time, ``overhead + per_text x n`` seconds each (a CPU
teacher whose threads work on one batch). The same texts are embedded with
the pacer's defaults (``TeacherPacer``, batch and concurrency adaptive) and
with every fixed (batch, calls in flight) setting of a grid, each on a fresh
server; runs are interleaved round by round and the median texts/s per
setting is reported, with the adaptive run's ratio to the best fixed one and
the failed calls (timeouts, 429/503) of each. Speeds are ratios within one
process: state the load average with them.

    python benchmarks/bench_teacher.py                      # "items": short, cheap texts
    python benchmarks/bench_teacher.py --scenario sample    # long texts, 2 s timeout
    python benchmarks/bench_teacher.py --jitter 0.5 --seeds 1,2,3   # a noisy teacher, 3 seeds

With ``--jitter`` every request's cost is multiplied by a seeded log-normal
factor (``_slow_teacher.py``); each setting of one seed meets the same noise
(request by request), and the ratio is reported per seed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SCENARIOS = {
    # name: (texts, per_text s, overhead s, client timeout s, batches, concurrencies)
    "items": (3000, 0.001, 0.02, 60.0, (16, 64, 256), (1, 2, 4)),
    "sample": (600, 0.01, 0.03, 2.0, (16, 64, 128), (1, 2, 4)),
}


def run_pacer(teacher, setting, texts):
    """Embed ``texts`` through a TeacherPacer at ``setting`` (batch, in flight; None: adaptive).

    Returns the pacer's stats, the seconds taken and whether it finished; closes ``teacher``.
    """
    from fastrag.embed.pacing import TeacherPacer
    from fastrag.errors import EmbedderError

    pacer = TeacherPacer(teacher, "document", batch_size=setting[0], max_concurrency=setting[1])
    t0 = time.perf_counter()
    ok = True
    try:
        pacer.run(texts, 0, lambda block: None)
    except EmbedderError:
        ok = False
    seconds = time.perf_counter() - t0
    teacher.close()
    return pacer.stats, seconds, ok


def path(stats) -> str:
    """The settings a pacer took (``stats.history``), e.g. ``4x1 8x1 32x1 back-off:16x1``.

    Consecutive entries of the same setting are shown once; a back-off or a
    regrowth is named.
    """
    out: list[str] = []
    last = None
    for reason, batch, in_flight in stats.history:
        named = ("back-off", "near miss", "margin", "regrow", "probe", "probe in flight")
        if (batch, in_flight) == last and reason not in named:
            continue
        last = (batch, in_flight)
        tag = f"{reason}:" if reason in named else ""
        out.append(f"{tag}{batch}x{in_flight}")
    return " ".join(out)


def one(setting, texts, per_text, overhead, timeout, jitter=0.0, seed=0):
    from _slow_teacher import SlowTeacher

    from fastrag import OpenAIEmbedder

    with SlowTeacher(per_text=per_text, overhead=overhead, jitter=jitter, seed=seed) as server:
        teacher = OpenAIEmbedder(server.base_url, model="m", timeout=timeout)
        s, seconds, ok = run_pacer(teacher, setting, texts)
    rate = s.texts / seconds if ok else 0.0
    return rate, s.failed_calls, (s.batch, s.concurrency), path(s)


def grid(args, seed):
    """One seed's runs: every setting ``args.rounds`` times; returns the adaptive/best ratio."""
    n, per_text, overhead, timeout, batches, concs = SCENARIOS[args.scenario]
    n = args.texts or n
    texts = [f"text {i} " + "word " * (i % 7) for i in range(n)]
    settings = [(None, None)] + [(b, c) for b in batches for c in concs]
    rates: dict[tuple, list[float]] = {s: [] for s in settings}
    failed: dict[tuple, int] = {s: 0 for s in settings}
    reached: dict[tuple, tuple[int, int]] = {}
    paths: list[str] = []
    print(
        f"load average {os.getloadavg()[0]:.2f}; {n} texts, {per_text * 1000:g} ms per text, "
        f"{overhead * 1000:g} ms per call, one request at a time, timeout {timeout:g} s, "
        f"jitter {args.jitter:g}, seed {seed}"
    )
    for r in range(args.rounds):
        order = settings if r % 2 == 0 else settings[::-1]
        for s in order:
            rate, fails, end, took = one(s, texts, per_text, overhead, timeout, args.jitter, seed)
            if s == (None, None):
                paths.append(took)
            rates[s].append(rate)
            failed[s] += fails
            reached[s] = end
    med = {s: statistics.median(v) for s, v in rates.items()}
    best = max((s for s in settings if s != (None, None)), key=lambda s: med[s])
    print(f"{'setting':<18} {'texts/s':>9} {'failed calls':>13}  ends at (batch, in flight)")
    for s in settings:
        name = "adaptive" if s == (None, None) else f"fixed {s[0]} x {s[1]}"
        print(f"{name:<18} {med[s]:>9.1f} {failed[s]:>13}  {reached[s]}")
    for r, took in enumerate(paths):
        print(f"adaptive round {r}: {took}")
    ratio = med[(None, None)] / med[best] if med[best] else float("nan")
    print(
        f"adaptive / best fixed ({best[0]} x {best[1]}): {ratio:.3f}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="items")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--texts", type=int, default=None)
    parser.add_argument("--jitter", type=float, default=0.0, help="log-normal sigma of each cost")
    parser.add_argument("--seeds", default="0", help="jitter seeds, comma-separated")
    args = parser.parse_args()
    seeds = [int(v) for v in args.seeds.split(",") if v.strip()]
    ratios = {seed: grid(args, seed) for seed in seeds}
    if len(ratios) > 1:
        shown = ", ".join(f"seed {k}: {v:.3f}" for k, v in ratios.items())
        mid = statistics.median(ratios.values())
        print(f"adaptive / best fixed per seed: {shown}; median {mid:.3f}")


if __name__ == "__main__":
    main()
