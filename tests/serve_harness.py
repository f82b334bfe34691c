"""Real servers on 127.0.0.1 for the serve tests: uvicorn in a thread, or ``fastrag serve`` in a process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import uvicorn

import fastrag
from fastrag.serve import ServeSettings, create_app
from fastrag.serve.run import uvicorn_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadServer:
    """``create_app(settings)`` served by uvicorn in a thread of the test process."""

    def __init__(self, settings: ServeSettings, **kwargs: Any) -> None:
        self.app = create_app(settings, **kwargs)
        self.port = free_port()
        # fastrag serve's own uvicorn configuration: its timeouts, connection cap and protocol.
        config = uvicorn_config(
            settings, self.app, port=self.port, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def service(self) -> Any:
        return self.app.state.service

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class ProcessServer:
    """``fastrag serve ARGS`` in a child process, its output collected in a file."""

    def __init__(self, args: Sequence[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.log_path = log
        self.args = ["--port", str(self.port), *args]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ProcessServer:
        self._log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fastrag", "serve", *self.args],
            stdout=self._log, stderr=subprocess.STDOUT, env=self.env,
            cwd=self.log_path.parent,  # not the checkout, whose fastrag/ folder would shadow the install
        )  # fmt: skip
        try:
            self._wait_healthy(deadline=time.monotonic() + 120)
        except BaseException:
            self.__exit__()  # a server that never came up leaves no process or open log behind
            raise
        return self

    def _wait_healthy(self, deadline: float) -> None:
        assert self.proc is not None
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"fastrag serve exited: {self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"fastrag serve did not start: {self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def save_kb(docs: list[dict], path: Path, **build: Any) -> Path:
    kb = fastrag.KnowledgeBase.build(
        docs, window=build.pop("window", 60), overlap=build.pop("overlap", 10), **build
    )
    kb.save(path)
    return path


def sse_events(text: str) -> list[tuple[str, Any]]:
    """(event, data) pairs of a Server-Sent Events body (data decoded as JSON when it parses)."""
    import json

    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        event, data = "message", ""
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
        try:
            out.append((event, json.loads(data)))
        except ValueError:
            out.append((event, data))
    return out
