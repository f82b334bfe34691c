"""Batch answering on a local Ray (fastrag.batch.distributed) against the single-process path.

    python benchmarks/bench_ray.py [--questions 20000] [--actors 2] [--batch-size 256]

Builds the demo knowledge base in a temporary folder, writes a questions file,
answers it with ``fastrag.batch.files.answer_file`` and with
``fastrag.batch.distributed.answer_file_ray`` (starting and stopping a local Ray),
checks that both give the same rows, and prints the times and the peak
resident memory of the Ray actors (Linux ``/proc``; includes pages of the
memory-mapped knowledge base shared with the page cache).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from fastrag.datasets import demo_documents

from fastrag import KnowledgeBase
from fastrag.batch.distributed import answer_file_ray
from fastrag.batch.files import answer_file

BASE = ["年假怎么申请？", "公司食堂几点开门？", "设备丢失后多久内要报告？", "密码多久更换一次？",
        "How many days do I have to submit an expense report?", "remote work", "lost laptop"]  # fmt: skip


def _actor_rss_mib() -> dict[int, float]:
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"MapWorker" not in cmd:
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    out[int(pid)] = int(line.split()[1]) / 1024
        except OSError:
            continue
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=20_000)
    ap.add_argument("--actors", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fastrag-bench-ray-") as tmp:
        root = Path(tmp)
        KnowledgeBase.build(demo_documents()).save(root / "kb")
        qfile = root / "questions.jsonl"
        qs = [f"{BASE[i % len(BASE)]} {i}" for i in range(args.questions)]
        qfile.write_text(
            "\n".join(json.dumps({"id": str(i), "question": q}) for i, q in enumerate(qs))
        )

        t = time.perf_counter()
        one = answer_file(KnowledgeBase.load(root / "kb"), qfile, root / "one.jsonl",
                          batch_size=args.batch_size)  # fmt: skip
        t_one = time.perf_counter() - t

        peak: dict[int, float] = {}
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                for pid, rss in _actor_rss_mib().items():
                    peak[pid] = max(peak.get(pid, 0.0), rss)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t = time.perf_counter()
        ray_sum = answer_file_ray(root / "kb", qfile, root / "ray.jsonl", batch_size=args.batch_size,
                                  concurrency=args.actors, local_cpus=args.actors)  # fmt: skip
        t_ray = time.perf_counter() - t
        done.set()
        sampler.join()

        a = (root / "one.jsonl").read_text().splitlines()
        b = (root / "ray.jsonl").read_text().splitlines()
        same = sum(
            json.loads(x)["answer"] == json.loads(y)["answer"] for x, y in zip(a, b, strict=False)
        )
        print(f"{args.questions:,} questions, batch size {args.batch_size}, {args.actors} actors")
        print(f"single process: {t_one:.1f} s ({one.questions_per_second:,.0f} q/s)")
        print(f"ray, start-up included: {t_ray:.1f} s; answering and writing {ray_sum.seconds:.1f} s "
              f"({ray_sum.questions_per_second:,.0f} q/s)")  # fmt: skip
        print(f"same answers: {same}/{len(a)}; rows {len(b)}")
        print("peak actor RSS (MiB): " + ", ".join(f"{v:.0f}" for v in peak.values()))


if __name__ == "__main__":
    main()
