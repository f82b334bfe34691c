"""Load and latency of ``fastrag serve`` against a plain FastAPI + numpy service, in one run.

    pip install ".[bench]" && apt-get install -y wrk
    nice -n 10 python benchmarks/bench_serve.py                    # ~10 minutes on 2 cores
    python benchmarks/bench_serve.py --quick                       # a short smoke run

What it measures, on loopback, against a 100,000-chunk knowledge base
(``_kbcache.cached_kb``: seeded English/Chinese documents, VocabularyEmbedder
384 dims, HNSW):

1. **closed loop** (``wrk`` with a Lua script rotating 1,000 POST bodies: each
   of ``c`` connections sends its next request when the last is answered),
   for ``c`` in 1..64: throughput and p50/p99 latency of ``/v1/retrieve``
   (vector over HNSW, vector exact, hybrid) and ``/v1/answer`` (extractive;
   vector and hybrid), for ``fastrag serve --workers 1`` and ``2``, and
   ``/v1/retrieve`` of the peer (``_serve_baseline.py``: FastAPI + numpy, exact
   cosine) with 1 and 2 workers;
2. **open loop**: requests sent on a fixed schedule (not after the previous
   answer; latency counted from the scheduled send time, so a slow server
   cannot hide its queue) at fixed offered rates, for vector retrieval;
3. **first request** after start (every worker up, nothing asked yet)
   against the steady-state p50 of the same client;
4. the CPU the load generator spends per request, next to the server's.

Why wrk: an httpx async client costs about 2.5 ms of CPU per request here
and saturates a core at 400 requests/s, so it would measure itself; wrk
costs a few microseconds. The open-loop client is a minimal asyncio client
over raw sockets (its CPU per request is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import platform
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _kbcache import cached_kb, questions  # noqa: E402

import fastrag  # noqa: E402

WORKLOADS = {
    # name: (path, extra body fields)
    "retrieve-vector": ("/v1/retrieve", {"mode": "vector"}),
    "retrieve-vector-exact": ("/v1/retrieve", {"mode": "vector", "exact": True}),
    "retrieve-hybrid": ("/v1/retrieve", {"mode": "hybrid"}),
    "answer-vector": ("/v1/answer", {"mode": "vector"}),
    "answer-hybrid": ("/v1/answer", {"mode": "hybrid"}),
}
PEER_WORKLOADS = {"retrieve-vector": ("/v1/retrieve", {})}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- servers
class Server:
    """A server process (fastrag or the peer) and its CPU time."""

    def __init__(
        self, kind: str, kb: Path, workers: int, log: Path, extra: list[str] | None = None
    ) -> None:
        self.kind, self.workers, self.port = kind, workers, free_port()
        env = {**os.environ}
        if kind == "fastrag":
            cmd = [sys.executable, "-m", "fastrag", "serve", "--kb", f"bench={kb}", "--port", str(self.port),
                   "--workers", str(workers), "--max-queue", "256", "--reload-interval", "0", *(extra or [])]  # fmt: skip
        else:
            env["FASTRAG_BASELINE_KB"] = str(kb)
            for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # they slow a current numpy
                env.pop(var, None)
            # One BLAS thread per call: concurrent requests already run on FastAPI's thread
            # pool, and OpenBLAS threads spinning against each other cut the peer's
            # throughput tenfold (measured: 30 req/s at 8 connections on 3,000 chunks).
            env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
            cmd = [sys.executable, "-m", "uvicorn", "_serve_baseline:app", "--app-dir", str(HERE),
                   "--port", str(self.port), "--workers", str(workers), "--no-access-log",
                   "--log-level", "warning"]  # fmt: skip
        self.t_start = time.perf_counter()
        self._log = open(log, "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        self.ready_seconds = self._wait_ready()

    def _wait_ready(self) -> float:
        """Seconds until every worker has answered /healthz (asks nothing of the knowledge base)."""
        import http.client

        pids: set[int] = set()
        deadline = time.monotonic() + 300
        while len(pids) < self.workers:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.kind} server did not start")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/healthz", headers={"Connection": "close"})
                pids.add(json.loads(conn.getresponse().read())["pid"])
                conn.close()
            except OSError:
                time.sleep(0.05)
        return time.perf_counter() - self.t_start

    def cpu_seconds(self) -> float:
        try:
            procs = [psutil.Process(self.proc.pid)]
            procs += procs[0].children(recursive=True)
        except psutil.NoSuchProcess:
            return 0.0
        total = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return total

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


# --------------------------------------------------------------------------- wrk
LUA = """
local bodies = {%s}
local i = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i + 1
  return wrk.format(nil, "%s", nil, bodies[(i %% #bodies) + 1])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%%d,"duration_us":%%d,"status_errors":%%d,"socket_errors":%%d,' ..
    '"p50_us":%%d,"p90_us":%%d,"p99_us":%%d,"max_us":%%d}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
"""


def lua_script(path: str, bodies: list[bytes], workdir: Path) -> Path:
    items = []
    for b in bodies:
        text = b.decode()
        assert "]==]" not in text
        items.append(f"[==[{text}]==]")
    script = workdir / f"load-{abs(hash((path, len(bodies), bodies[0])))}.lua"
    script.write_text(LUA % (",\n".join(items), path))
    return script


def run_wrk(server: Server, script: Path, connections: int, seconds: float) -> dict:
    """One closed-loop cell: wrk with ``connections`` connections for ``seconds``."""
    before_server = server.cpu_seconds()
    before_gen = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s", "-s", str(script),
         f"http://127.0.0.1:{server.port}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    after_gen = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = server.cpu_seconds() - before_server
    line = next(x for x in out.stdout.splitlines() if x.startswith("WRKJSON "))
    r = json.loads(line[8:])
    n = max(1, r["requests"])
    gen_cpu = (after_gen.ru_utime - before_gen.ru_utime) + (
        after_gen.ru_stime - before_gen.ru_stime
    )
    return {
        "connections": connections,
        "requests": r["requests"],
        "rps": r["requests"] / (r["duration_us"] / 1e6),
        "p50_ms": r["p50_us"] / 1e3,
        "p90_ms": r["p90_us"] / 1e3,
        "p99_ms": r["p99_us"] / 1e3,
        "max_ms": r["max_us"] / 1e3,
        "errors": r["status_errors"] + r["socket_errors"],
        "server_cpu_us_per_request": server_cpu / n * 1e6,
        "generator_cpu_us_per_request": gen_cpu / n * 1e6,
    }


# --------------------------------------------------------------------------- raw client
def _request(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: bytes) -> int:
    writer.write(req)
    status = int((await reader.readline()).split()[1])
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return status


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return reader, writer


async def _open_loop(port: int, reqs: list[bytes], rate: float, seconds: float, pool: int) -> dict:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    latencies: list[float] = []
    errors = 0

    async def worker() -> None:
        nonlocal errors
        reader, writer = await _connect(port)
        while True:
            item = await queue.get()
            if item is None:
                break
            scheduled, req = item
            if await _exchange(reader, writer, req) != 200:
                errors += 1
            latencies.append(loop.time() - scheduled)
        writer.close()

    workers = [asyncio.ensure_future(worker()) for _ in range(pool)]
    await asyncio.sleep(0.2)  # connections open
    n = int(rate * seconds)
    cpu0 = time.process_time()
    t0 = loop.time() + 0.01
    sent = 0
    while sent < n:
        now = loop.time()
        due = min(n, int((now - t0) * rate) + 1)
        while sent < due:  # everything due now, stamped with its scheduled time
            queue.put_nowait((t0 + sent / rate, reqs[sent % len(reqs)]))
            sent += 1
        await asyncio.sleep(max(0.0, t0 + sent / rate - loop.time()))
    for _ in workers:
        queue.put_nowait(None)
    # An overloaded server is given as long again as the run to drain its queue; what is
    # still unanswered then counts as lost (and the percentiles as beyond the run).
    done, pending = await asyncio.wait(workers, timeout=seconds + 1.0)
    for w in pending:
        w.cancel()
    cpu = time.process_time() - cpu0
    lost = n - len(latencies)
    ms = np.sort(np.array(latencies) * 1e3)

    def pct(q: float) -> float | None:
        rank = int(np.ceil(q / 100 * n)) - 1  # over every request sent, answered or not
        return float(ms[rank]) if rank < ms.size else None

    return {
        "offered_rps": rate,
        "achieved_rps": len(latencies) / (loop.time() - t0),
        "p50_ms": pct(50),
        "p90_ms": pct(90),
        "p99_ms": pct(99),
        "max_ms": float(ms[-1]) if ms.size and not lost else None,
        "errors": errors,
        "lost": lost,
        "generator_cpu_us_per_request": cpu / max(1, len(latencies)) * 1e6,
    }


def open_loop(server: Server, path: str, bodies: list[bytes], rate: float, seconds: float) -> dict:
    reqs = [_request(path, b) for b in bodies]
    before = server.cpu_seconds()
    out = asyncio.run(_open_loop(server.port, reqs, rate, seconds, pool=64))
    out["server_cpu_us_per_request"] = (server.cpu_seconds() - before) / (rate * seconds) * 1e6
    return out


async def _first_and_steady(
    port: int, path: str, first: bytes, bodies: list[bytes], n: int
) -> tuple[float, list[float]]:
    reader, writer = await _connect(port)
    t = time.perf_counter()
    status = await _exchange(reader, writer, _request(path, first))
    first_ms = (time.perf_counter() - t) * 1e3
    assert status == 200, status
    steady = []
    for i in range(n):
        t = time.perf_counter()
        await _exchange(reader, writer, _request(path, bodies[i % len(bodies)]))
        steady.append((time.perf_counter() - t) * 1e3)
    writer.close()
    return first_ms, steady


# --------------------------------------------------------------------------- report
def table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    head = "| " + " | ".join(c[1] for c in columns) + " |"
    sep = "|" + "|".join("---:" for _ in columns) + "|"
    lines = [head, sep]
    for r in rows:
        lines.append(
            "| "
            + " | ".join(format(r[c[0]], c[2]) if r.get(c[0]) is not None else "-" for c in columns)
            + " |"
        )
    return "\n".join(lines)


def median_cells(runs: list[dict]) -> dict:
    """The median of each numeric field over repeated runs of one cell."""
    out = dict(runs[0])
    for key in runs[0]:
        values = [r[key] for r in runs]
        if key in ("connections", "offered_rps") or not all(
            v is None or isinstance(v, (int, float)) for v in values
        ):
            continue
        middle = statistics.median(float("inf") if v is None else v for v in values)
        if middle != float("inf") and all(isinstance(v, int) for v in values):
            middle = round(middle)  # a count stays an int (the tables format it with "d")
        out[key] = None if middle == float("inf") else middle
    return out


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers on the way out
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per closed-loop cell")
    ap.add_argument("--concurrency", default="1,2,4,8,16,32,64")
    ap.add_argument("--rates", default="25,50,100,250,500,1000,1500")
    ap.add_argument("--open-seconds", type=float, default=4.0)
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs of each cell (medians are reported)"
    )
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="1 s cells at 1, 8, 64 connections")
    ap.add_argument("--out", default=None, help="write every figure as JSON here")
    ap.add_argument(
        "--fastrag-args", default="", help="more `fastrag serve` options, e.g. '--engine-threads 0'"
    )
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("bench_serve.py needs wrk (Debian: apt-get install -y wrk)")
    if args.quick:
        args.duration, args.concurrency, args.rates, args.open_seconds = (
            1.0,
            "1,8,64",
            "250,500",
            2.0,
        )
    conc = [int(c) for c in args.concurrency.split(",")]
    rates = [float(r) for r in args.rates.split(",")]
    workloads = [w for w in args.workloads.split(",") if w]

    kb_path = cached_kb(args.chunks)
    kb = fastrag.KnowledgeBase.load(kb_path)
    qs = questions(kb, 1000, seed=3)
    first_question = questions(kb, 1, seed=99)[0]
    stats = kb.stats()
    del kb
    bodies = {
        name: [orjson.dumps({"question": q, "k": 5, **extra}) for q in qs]
        for name, (_, extra) in WORKLOADS.items()
    }
    peer_bodies = [orjson.dumps({"question": q, "k": 5}) for q in qs]
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    log = work / "servers.log"
    report: dict = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "kb": {"chunks": stats["chunks"], "dim": stats["dim"], "index": stats["index"]},
        "closed": {}, "open": {}, "first": {}, "ready_seconds": {},
    }  # fmt: skip
    print(f"knowledge base: {stats['chunks']:,} chunks, dim {stats['dim']}, index {stats['index']}; "
          f"server log {log}", flush=True)  # fmt: skip

    # Every server runs for the whole benchmark and the cells are interleaved (each
    # repetition visits every system in turn), so that a change in the machine's other
    # load falls on all of them alike; an idle server costs nothing.
    systems = [("fastrag", 1), ("fastrag", 2), ("peer", 1), ("peer", 2)]
    servers: dict[str, Server] = {}
    try:
        for kind, workers in systems:
            label = f"{kind}-{workers}w"
            extra = args.fastrag_args.split() if kind == "fastrag" else None
            server = servers[label] = Server(kind, kb_path, workers, log, extra)
            report["ready_seconds"][label] = server.ready_seconds
            path0, extra0 = (WORKLOADS if kind == "fastrag" else PEER_WORKLOADS)["retrieve-vector"]
            first_body = orjson.dumps({"question": first_question, "k": 5, **extra0})
            steady_bodies = bodies["retrieve-vector"] if kind == "fastrag" else peer_bodies
            first_ms, steady = asyncio.run(
                _first_and_steady(server.port, path0, first_body, steady_bodies, 300)
            )
            report["first"][label] = {
                "first_ms": first_ms,
                "steady_p50_ms": statistics.median(steady),
            }
            print(f"{label}: ready in {server.ready_seconds:.1f} s; first request {first_ms:.2f} ms, "
                  f"steady p50 {statistics.median(steady):.2f} ms", flush=True)  # fmt: skip
        for name in workloads:
            path, _ = WORKLOADS[name]
            labels = [lb for lb in servers if lb.startswith("fastrag") or name in PEER_WORKLOADS]
            scripts = {
                lb: lua_script(
                    path, bodies[name] if lb.startswith("fastrag") else peer_bodies, work
                )
                for lb in labels
            }
            for lb in labels:
                run_wrk(servers[lb], scripts[lb], 8, 1.0)  # warm connections and caches
            for c in conc:
                runs: dict[str, list[dict]] = {lb: [] for lb in labels}
                for _ in range(args.repeat):
                    for lb in labels:
                        runs[lb].append(run_wrk(servers[lb], scripts[lb], c, args.duration))
                for lb in labels:
                    cell = median_cells(runs[lb])
                    report["closed"].setdefault(name, {}).setdefault(lb, []).append(cell)
                    print(f"  {lb} {name:<22} c={c:<3} {cell['rps']:8.0f} req/s  p50 "
                          f"{cell['p50_ms']:7.2f} ms  p99 {cell['p99_ms']:7.2f} ms  errors "
                          f"{cell['errors']}  server {cell['server_cpu_us_per_request']:.0f} us/req  "
                          f"wrk {cell['generator_cpu_us_per_request']:.1f} us/req", flush=True)  # fmt: skip
        for rate in rates:
            for lb, server in servers.items():
                peak = max(
                    (c["rps"] for c in report["closed"].get("retrieve-vector", {}).get(lb, [])),
                    default=float("inf"),
                )
                if rate > 1.5 * peak:  # its queue would only grow: the closed loop says enough
                    report["open"].setdefault(lb, []).append(
                        {"offered_rps": rate, "skipped": f"over 1.5x the peak of {peak:.0f}/s"}
                    )
                    print(
                        f"  {lb} open loop {rate:6.0f}/s: skipped (peak {peak:.0f}/s)", flush=True
                    )
                    continue
                path0 = "/v1/retrieve"
                script_bodies = (
                    bodies["retrieve-vector"] if lb.startswith("fastrag") else peer_bodies
                )
                cell = median_cells([open_loop(server, path0, script_bodies, rate, args.open_seconds)
                                     for _ in range(args.repeat)])  # fmt: skip
                report["open"].setdefault(lb, []).append(cell)
                print(f"  {lb} open loop {rate:6.0f}/s: achieved {cell['achieved_rps']:6.0f}/s  p50 "
                      f"{_ms(cell['p50_ms'])}  p99 {_ms(cell['p99_ms'])}  errors {cell['errors']}  lost "
                      f"{cell['lost']}  client {cell['generator_cpu_us_per_request']:.0f} us/req",
                      flush=True)  # fmt: skip
    finally:
        for server in servers.values():
            server.stop()

    print_summary(report, conc)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


def _ms(value: float | None) -> str:
    return f"{value:7.2f} ms" if value is not None else "  (lost)"


def _peak(cells: list[dict]) -> dict:
    return max(cells, key=lambda c: c["rps"])


def print_summary(report: dict, conc: list[int]) -> None:
    print()
    for name, by in report["closed"].items():
        systems = [s for s in ("fastrag-1w", "fastrag-2w", "peer-1w", "peer-2w") if s in by]
        cols = [("connections", "connections", "d")]
        for s in systems:
            cols += [
                (f"{s} rps", f"{s} req/s", ",.0f"),
                (f"{s} p50", "p50 ms", ".2f"),
                (f"{s} p99", "p99 ms", ".2f"),
            ]
        rows = []
        for i, c in enumerate(conc):
            row: dict = {"connections": c}
            for s in systems:
                cell = by[s][i]
                row[f"{s} rps"], row[f"{s} p50"], row[f"{s} p99"] = (
                    cell["rps"],
                    cell["p50_ms"],
                    cell["p99_ms"],
                )
            rows.append(row)
        print(f"### {name} (closed loop)\n")
        print(table(rows, cols))
        print()
    for label, cells in report["open"].items():
        print(f"### open loop, {label}\n")
        print(table(cells, [("offered_rps", "offered req/s", ",.0f"), ("achieved_rps", "achieved", ",.0f"),
                            ("p50_ms", "p50 ms", ".2f"), ("p90_ms", "p90 ms", ".2f"),
                            ("p99_ms", "p99 ms", ".2f"), ("max_ms", "max ms", ".1f"), ("lost", "lost", "d")]))  # fmt: skip
        print()
    print("### summary\n")
    rv = report["closed"].get("retrieve-vector", {})
    if "fastrag-1w" in rv and "fastrag-2w" in rv:
        one, two = _peak(rv["fastrag-1w"]), _peak(rv["fastrag-2w"])
        print(
            f"- retrieve-vector peak: 1 worker {one['rps']:,.0f} req/s (c={one['connections']}), "
            f"2 workers {two['rps']:,.0f} req/s (c={two['connections']}): {two['rps'] / one['rps']:.2f}x"
        )
    for name in report["closed"]:
        by = report["closed"][name]
        if "fastrag-1w" in by and "fastrag-2w" in by:
            r = _peak(by["fastrag-2w"])["rps"] / _peak(by["fastrag-1w"])["rps"]
            print(f"- {name}: 2 workers / 1 worker at peak = {r:.2f}x")
    for w in ("1w", "2w"):
        f, p = rv.get(f"fastrag-{w}"), rv.get(f"peer-{w}")
        if f and p:
            best_peer = _peak(p)
            # fastrag's best throughput at a p99 no worse than the peer's at its peak
            ok = [c for c in f if c["p99_ms"] <= best_peer["p99_ms"]]
            mine = max(ok, key=lambda c: c["rps"]) if ok else None
            if mine:
                print(
                    f"- {w}: fastrag {mine['rps']:,.0f} req/s at p99 {mine['p99_ms']:.2f} ms vs peer peak "
                    f"{best_peer['rps']:,.0f} req/s at p99 {best_peer['p99_ms']:.2f} ms: "
                    f"{mine['rps'] / best_peer['rps']:.1f}x"
                )
    for label, cells in report["open"].items():
        at = [c for c in cells if c["offered_rps"] == 500 and "skipped" not in c]
        if at:
            print(
                f"- {label}: open loop at 500 req/s offered: p99 {_ms(at[0]['p99_ms']).strip()}, "
                f"{at[0]['lost']} lost"
            )
    for label, f in report["first"].items():
        print(
            f"- {label}: first request {f['first_ms']:.2f} ms = {f['first_ms'] / f['steady_p50_ms']:.2f}x "
            f"the steady p50 ({f['steady_p50_ms']:.2f} ms); ready {report['ready_seconds'][label]:.1f} s after start"
        )


if __name__ == "__main__":
    main()
