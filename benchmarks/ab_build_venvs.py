"""The whole ``KnowledgeBase.build`` in two environments, alternated, fresh processes.

    python benchmarks/ab_build_venvs.py --corpus /tmp/fastrag-scale/corpus-200000.jsonl \\
        --before /work/main/.venv/bin/python --after .venv/bin/python [--rounds 3] [--builds 2]

Each round runs one child process per environment (the order alternates from
round to round); a child calls ``warmup()``, then builds the knowledge base
``--builds`` times from ``read_jsonl`` (JSON parsing included) with the
default ``VocabularyEmbedder()`` and both keyword legs, and reports the wall
and CPU seconds of every build (the first pays for fresh memory). Children
run from a neutral directory, so each imports its own environment's
installed package. Prints the medians of the first builds and of all builds,
their ratios, and the load average around every child (``/proc/loadavg``):
quote the ratio on a loaded machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, sys, time
import fastrag
from fastrag import KnowledgeBase, VocabularyEmbedder, warmup
from fastrag.store.sources import read_jsonl
warmup()
runs = []
for _ in range(int(sys.argv[2])):
    t, c = time.perf_counter(), time.process_time()
    kb = KnowledgeBase.build(read_jsonl(sys.argv[1]), embedder=VocabularyEmbedder())
    runs.append([time.perf_counter() - t, time.process_time() - c])
    n = kb.stats()["chunks"]
    del kb
print(json.dumps({"runs": runs, "package": fastrag.__file__, "chunks": n,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def _load() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="a JSON Lines corpus (scale_build_load.py's)")
    ap.add_argument("--before", required=True, help="python of the environment before")
    ap.add_argument("--after", default=sys.executable, help="python of the environment after")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--builds", type=int, default=2, help="builds per child process")
    args = ap.parse_args()
    envs = {"before": args.before, "after": args.after}
    runs: dict[str, list[list[float]]] = {k: [] for k in envs}
    firsts: dict[str, list[list[float]]] = {k: [] for k in envs}
    with tempfile.TemporaryDirectory() as neutral:
        for r in range(args.rounds):
            order = list(envs.items()) if r % 2 == 0 else list(envs.items())[::-1]
            for name, py in order:
                l0 = _load()
                out = subprocess.run(
                    [py, "-c", CHILD, args.corpus, str(args.builds)],
                    cwd=neutral,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode:
                    sys.exit(f"{name} failed:\n{out.stderr[-3000:]}")
                got = json.loads(out.stdout.strip().splitlines()[-1])
                runs[name] += got["runs"]
                firsts[name].append(got["runs"][0])
                shown = ", ".join(f"{w:.2f} s wall / {c:.2f} s CPU" for w, c in got["runs"])
                print(
                    f"round {r + 1} {name:6s} ({got['package']}, {got['chunks']:,} chunks): "
                    f"{shown}; peak RSS {got['peak_rss'] / 1e9:.2f} GB; load {l0} -> {_load()}",
                    flush=True,
                )

    def med(rows: list[list[float]], i: int) -> float:
        return statistics.median(row[i] for row in rows)

    for label, table in (("first builds", firsts), ("all builds", runs)):
        b, a = table["before"], table["after"]
        print(
            f"{label}: before {med(b, 0):.2f} s wall / {med(b, 1):.2f} s CPU, "
            f"after {med(a, 0):.2f} s / {med(a, 1):.2f} s; before/after "
            f"{med(b, 0) / med(a, 0):.2f}x wall, {med(b, 1) / med(a, 1):.2f}x CPU"
        )


if __name__ == "__main__":
    main()
