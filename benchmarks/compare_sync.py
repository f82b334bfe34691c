"""Incremental re-indexing against a rebuild, side by side, through the command line a user runs.

A folder of Markdown files (the long descriptions of the installed
distributions, each written ``--copies`` times under different names) is
indexed once; then ``fastrag index`` on the same knowledge base is timed
with nothing changed, with one file changed, and against a rebuild from
scratch (``--overwrite``). Each run is a fresh process (``python -m
fastrag``), as a user would run it; medians of ``--repeat``.

Usage::

    python benchmarks/compare_sync.py --copies 5 --repeat 3 --workdir /tmp/fastrag-sync
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fastrag", *args], check=True, capture_output=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/fastrag-sync"))
    args = ap.parse_args(argv)
    shutil.rmtree(args.workdir, ignore_errors=True)
    docs = args.workdir / "docs"
    docs.mkdir(parents=True)
    n = size = 0
    for dist in importlib.metadata.distributions():
        body = dist.metadata.get_payload() if dist.metadata is not None else None
        if not isinstance(body, str) or len(body) < 500:
            continue
        for c in range(args.copies):
            path = docs / f"{dist.metadata['Name']}-{c}.md"
            path.write_text(body, encoding="utf-8")
            n += 1
            size += path.stat().st_size
    kb = str(args.workdir / "kb")
    print(f"{n} Markdown files, {size / 1e6:.1f} MB")
    run("warmup")
    run("index", str(docs), "--kb", kb, "--chunking", "structure")
    times: dict[str, list[float]] = {}
    victim = sorted(docs.iterdir())[0]
    for r in range(args.repeat):
        times.setdefault("sync, nothing changed", []).append(run("index", str(docs), "--kb", kb))
        victim.write_text(
            victim.read_text(encoding="utf-8") + f"\n\nchange {r}\n", encoding="utf-8"
        )
        times.setdefault("sync, one file changed", []).append(run("index", str(docs), "--kb", kb))
        times.setdefault("rebuild (--overwrite)", []).append(
            run("index", str(docs), "--kb", kb, "--chunking", "structure", "--overwrite")
        )
    base = statistics.median(times["rebuild (--overwrite)"])
    print(f"{'fastrag index':<26} {'median s':>9} {'vs rebuild':>11}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<26} {med:>9.2f} {med / base:>10.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
