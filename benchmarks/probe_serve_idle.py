"""How this machine treats an idle server: the latency of a request after an idle gap.

    python benchmarks/probe_serve_idle.py [--chunks 100000]

Starts ``fastrag serve --workers 1`` on the cached benchmark knowledge base
(``_kbcache.cached_kb``), sends 200 retrievals on one connection, then one
request after each of several idle gaps, and prints the latencies. A second
part starts a fresh server, waits ``--start-delay`` seconds after every
worker is ready, and times its first request. On the shared 2-vCPU VM of
BENCHMARKS.md an idle gap alone costs milliseconds (the vCPU's wake-up),
which is what limits "first request after start" there.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_serve as b  # noqa: E402
from _kbcache import cached_kb, questions  # noqa: E402

import fastrag  # noqa: E402


async def _gaps(port: int, bodies: list[bytes], gaps: list[float]) -> list[tuple[float, float]]:
    reader, writer = await b._connect(port)
    for body in bodies[:200]:
        await b._exchange(reader, writer, b._request("/v1/retrieve", body))
    out = []
    for i, gap in enumerate(gaps):
        await asyncio.sleep(gap)
        t = time.perf_counter()
        await b._exchange(reader, writer, b._request("/v1/retrieve", bodies[200 + i]))
        out.append((gap, (time.perf_counter() - t) * 1e3))
    writer.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--gaps", default="0,0.05,0.5,2,2,2")
    ap.add_argument("--start-delay", type=float, default=2.0)
    args = ap.parse_args()
    path = cached_kb(args.chunks)
    kb = fastrag.KnowledgeBase.load(path)
    bodies = [
        orjson.dumps({"question": q, "k": 5, "mode": "vector"}) for q in questions(kb, 300, seed=3)
    ]
    first = orjson.dumps({"question": questions(kb, 1, seed=99)[0], "k": 5, "mode": "vector"})
    del kb
    log = Path(tempfile.mkdtemp(prefix="probe-idle-")) / "server.log"
    server = b.Server("fastrag", path, 1, log)
    try:
        for gap, ms in asyncio.run(
            _gaps(server.port, bodies, [float(g) for g in args.gaps.split(",")])
        ):
            print(f"after {gap:5.2f} s idle: {ms:6.2f} ms")
    finally:
        server.stop()
    for delay in (0.0, args.start_delay):
        server = b.Server("fastrag", path, 1, log)
        try:
            time.sleep(delay)
            first_ms, steady = asyncio.run(
                b._first_and_steady(server.port, "/v1/retrieve", first, bodies, 200)
            )
        finally:
            server.stop()
        print(
            f"fresh server, {delay:.1f} s after ready: first request {first_ms:.2f} ms, steady p50 "
            f"{statistics.median(steady):.2f} ms"
        )


if __name__ == "__main__":
    main()
