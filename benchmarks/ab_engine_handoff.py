"""What handing one engine call to a thread costs the server: ``EnginePool`` against anyio.

    python benchmarks/ab_engine_handoff.py [--calls 20000]

``fastrag serve`` runs each retrieval in a worker thread so that the event
loop keeps accepting. This times ``await`` of a no-op handed to one thread,
``--calls`` times in a loop on uvloop, alternated: ``EnginePool.run``
(:mod:`fastrag.serve.service`) against ``anyio.to_thread.run_sync`` with a
capacity limiter (what the server used before) and
``loop.run_in_executor``; wall time and process CPU (both threads) per call.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import anyio
import anyio.to_thread
import uvloop

from fastrag.serve.service import EnginePool


def _noop() -> int:
    return 1


async def _main(calls: int, rounds: int) -> None:
    loop = asyncio.get_running_loop()
    limiter = anyio.CapacityLimiter(1)
    pool = EnginePool(1)
    executor = ThreadPoolExecutor(1)
    ways = {
        "EnginePool.run": lambda: pool.run(_noop),
        "anyio.to_thread.run_sync": lambda: anyio.to_thread.run_sync(
            _noop, limiter=limiter, abandon_on_cancel=True
        ),
        "loop.run_in_executor": lambda: loop.run_in_executor(executor, _noop),
    }
    for r in range(rounds):
        for name, call in ways.items():
            for _ in range(calls // 10):  # warm: threads started, code paths hot
                await call()
            t, c = time.perf_counter(), time.process_time()
            for _ in range(calls):
                await call()
            wall = (time.perf_counter() - t) / calls * 1e6
            cpu = (time.process_time() - c) / calls * 1e6
            print(f"round {r + 1}  {name:26s} wall {wall:6.1f} us  cpu {cpu:6.1f} us per call")
    pool.close()
    executor.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    print(f"load average {open('/proc/loadavg').read().split()[:3]}")
    uvloop.run(_main(args.calls, args.rounds))


if __name__ == "__main__":
    main()
