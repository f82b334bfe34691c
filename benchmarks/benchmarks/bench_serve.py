"""``fastrag serve`` requests over loopback: retrieve and answer, one request at a time.

``setup_cache`` builds the shared user knowledge base (as :class:`~.common.UserKB`
does) and starts ``fastrag serve --workers 1`` on 127.0.0.1 under a small
watchdog process. asv has no class-level teardown, so the watchdog stops the
server when asv deletes the setup_cache directory (after the last benchmark of
this class, or at the end of the run, failed or not), when the asv process is
gone, or after an hour. Each benchmark process opens one keep-alive
``httpx.Client`` in ``setup`` and closes it in ``teardown``. The figures
include the client's own cost (about 0.1-0.3 ms per request); the
load generator of ``benchmarks/bench_serve.py`` (wrk) is the one for
throughput under concurrency.

Skipped (``NotImplementedError``) where the ``serve`` extra is not installed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

from .common import (
    COLD_COMPILE_TIMEOUT,
    UserKB,
    build_user_kb,
    compile_kernels,
    user_documents,
    user_questions,
)

_WATCHDOG = r"""
import os, subprocess, sys, time
port, kb, cache_dir, asv_pid, log = sys.argv[1:6]
cmd = [sys.executable, "-m", "fastrag", "serve", "--kb", "bench=" + kb, "--port", port,
       "--workers", "1", "--reload-interval", "0"]
with open(log, "ab") as out:
    server = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 3600
    def asv_alive():
        try:
            os.kill(int(asv_pid), 0)
            return True
        except OSError:
            return False
    while server.poll() is None and os.path.isdir(cache_dir) and asv_alive() and time.monotonic() < deadline:
        time.sleep(0.5)
    server.terminate()
    try:
        server.wait(15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_available() -> bool:
    try:
        import httpx  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        return False
    return True


class Serve:
    """``POST /v1/retrieve`` (hybrid, vector) and ``POST /v1/answer`` (extractive, hybrid)."""

    timeout = 120.0

    def setup_cache(self) -> dict:
        if not _serve_available():
            return {"url": None, "questions": []}
        compile_kernels()  # the server's warmup() then loads, it does not compile
        cache_dir = os.getcwd()
        kb = build_user_kb(os.path.abspath("serve-kb"), UserKB.N_DOCS)
        questions = user_questions(user_documents(UserKB.N_DOCS), 64)
        port = _free_port()
        log = os.path.abspath("serve.log")
        subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(port), kb, cache_dir, str(os.getppid()), log],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this process; stops with the cache directory
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        import httpx

        deadline = time.monotonic() + 600
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                with open(log, errors="replace") as fh:
                    raise RuntimeError(f"fastrag serve did not start:\n{fh.read()[-2000:]}")
            time.sleep(0.2)
        return {"url": url, "questions": questions}

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]

    def setup(self, server: dict) -> None:
        if server["url"] is None:
            raise NotImplementedError("the serve extra is not installed")
        import httpx

        self.client = httpx.Client(base_url=server["url"], timeout=30)
        self.bodies = {
            name: [
                json.dumps({"kb": "bench", "question": q, "k": 5, **extra})
                for q in server["questions"]
            ]
            for name, extra in (("hybrid", {}), ("vector", {"mode": "vector"}))
        }
        for path in ("/v1/retrieve", "/v1/answer"):  # the connection is open, paths warm
            for bodies in self.bodies.values():
                self._post(path, bodies[0])

    def teardown(self, server: dict) -> None:
        self.client.close()

    def _post(self, path: str, body: str) -> None:
        r = self.client.post(path, content=body, headers={"Content-Type": "application/json"})
        r.raise_for_status()

    def time_retrieve_hybrid(self, server: dict) -> None:
        self._post("/v1/retrieve", self.bodies["hybrid"][1])

    def time_retrieve_vector(self, server: dict) -> None:
        self._post("/v1/retrieve", self.bodies["vector"][1])

    def time_answer_hybrid(self, server: dict) -> None:
        self._post("/v1/answer", self.bodies["hybrid"][1])

    def time_retrieve_hybrid_64(self, server: dict) -> None:
        """64 different questions in a row (one connection): the server's per-question cost."""
        for body in self.bodies["hybrid"]:
            self._post("/v1/retrieve", body)
