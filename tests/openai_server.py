"""A small, scriptable OpenAI-compatible server for tests (127.0.0.1 only).

Usage::

    from openai_server import OpenAIServer, Reply

    with OpenAIServer(embed_dim=8) as server:
        server.fail(429, retry_after="0.05")          # next request: 429
        server.enqueue(Reply(body=b"{oops"))          # then malformed JSON
        gen = OpenAIChatGenerator(server.base_url, model="m")
        ...
        server.requests                                # everything received

or the ``openai_server`` fixture below (import it into a test module).

Default answers:

- ``POST /v1/chat/completions`` answers from the first passage of the
  grounded prompt and cites ``[1]`` (or says not found when the prompt has
  no passages); set ``chat_answer`` to a string or a ``callable(body)`` to
  answer something else.
- ``POST /v1/embeddings`` returns :func:`hashed_vector` of each input, of
  ``embed_dim`` values (or the request's ``dimensions``); in reversed order
  when ``reverse_embeddings`` is set (the ``index`` fields stay right).
- ``GET /v1/models`` lists one model.

Scripted replies are consumed first-in first-out, per path (or for any path);
failures are served before authentication and default answers. ``api_key``
makes the server answer 401 (echoing the wrong key, as real servers do) to
requests without ``Authorization: Bearer <api_key>``. ``max_concurrent``
answers 429 to requests beyond that many in flight; ``latency`` delays every
default answer; ``max_in_flight`` records the most requests seen at once.
"""

from __future__ import annotations

import collections
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["OpenAIServer", "Reply", "Request", "embedding_body", "hashed_vector", "openai_server"]

CHAT = "/v1/chat/completions"
EMBED = "/v1/embeddings"


def hashed_vector(text: str, dim: int) -> list[float]:
    """Deterministic, unnormalised vector of ``text``: character counts hashed into ``dim`` bins."""
    out = [0.0] * dim
    for ch in text:
        out[zlib.crc32(ch.encode("utf-8")) % dim] += 1.0
    return out


def embedding_body(
    vectors: list[list[Any]], *, indices: list[int] | None = None, model: str = "m"
) -> bytes:
    """An embeddings answer; NaN / inf values are written as ``NaN`` / ``Infinity``."""
    idx = list(range(len(vectors))) if indices is None else indices
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in zip(idx, vectors)]
    return json.dumps({"object": "list", "data": data, "model": model}).encode()


@dataclass
class Reply:
    """One scripted answer.

    ``body`` may be bytes (sent as is), a str, or any JSON-serialisable
    object. ``delay`` sleeps before answering; ``hang`` never answers (until
    the server closes or ``hang`` seconds pass) and drops the connection.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    hang: float | None = None
    stream: list[str] | None = None  # chat.completion.chunk contents, sent as Server-Sent Events


@dataclass(frozen=True)
class Request:
    """One request as received."""

    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # decoded JSON, or None
    raw: bytes
    time: float  # time.monotonic() when the request had been read


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass

    def do_POST(self) -> None:  # noqa: N802
        self.server.owner._handle(self)

    do_GET = do_POST


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops bursts of concurrent connections
    owner: OpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out and hang up are expected


class OpenAIServer:
    """A scriptable OpenAI-compatible HTTP server on 127.0.0.1 (see the module docstring).

    Parameters
    ----------
    embed_dim : int
        Size of the default embeddings.
    api_key : str, optional
        When set, requests must carry ``Authorization: Bearer <api_key>``.
    """

    def __init__(self, *, embed_dim: int = 8, api_key: str | None = None) -> None:
        self.embed_dim = embed_dim
        self.api_key = api_key
        self.chat_answer: str | Callable[[dict[str, Any]], str] | None = None
        self.reverse_embeddings = False
        self.latency = 0.0
        self.max_concurrent: int | None = None
        self.limit_retry_after = "0"
        self.stream_delay = 0.0  # seconds between streamed chunks
        self.streams_started = 0
        self.streams_finished = 0  # every chunk and [DONE] written
        self.streams_broken = 0  # the client hung up mid-stream
        self.requests: list[Request] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._script: dict[str | None, collections.deque[Reply]] = collections.defaultdict(
            collections.deque
        )
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------
    def start(self) -> OpenAIServer:
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -----------------------------------------------------------------
    def enqueue(self, reply: Reply, *, path: str | None = None, times: int = 1) -> None:
        """Serve ``reply`` to the next ``times`` requests to ``path`` (any path if None)."""
        with self._lock:
            self._script[path].extend([reply] * times)

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        retry_after: str | None = None,
        path: str | None = None,
        message: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests with an OpenAI-style error of ``status``."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        body = {"error": {"message": message or f"scripted failure {status}", "type": "test"}}
        self.enqueue(Reply(status=status, body=body, headers=headers), path=path, times=times)

    def hang(self, *, times: int = 1, seconds: float = 10.0, path: str | None = None) -> None:
        """Never answer the next ``times`` requests (for ``seconds`` or until close)."""
        self.enqueue(Reply(hang=seconds), path=path, times=times)

    def requests_to(self, path: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self._script.clear()
            self.max_in_flight = 0

    # -- serving --------------------------------------------------------------------
    def _next_reply(self, path: str) -> Reply | None:
        with self._lock:
            for key in (path, None):
                queue = self._script.get(key)
                if queue:
                    return queue.popleft()
        return None

    def _handle(self, h: _Handler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = h.path.split("?", 1)[0]
        request = Request(
            method=h.command,
            path=path,
            headers={k.lower(): v for k, v in h.headers.items()},
            body=body,
            raw=raw,
            time=time.monotonic(),
        )
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            crowded = self.max_concurrent is not None and self.in_flight > self.max_concurrent
        try:
            reply = self._reply(request, crowded)
            if reply.hang is not None:
                self._release.wait(reply.hang)
                h.close_connection = True
                return
            if reply.delay:
                time.sleep(reply.delay)
            self._send(h, reply)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, request: Request, crowded: bool) -> Reply:
        if crowded:
            return Reply(
                status=429,
                body={"error": {"message": "too many concurrent requests", "type": "rate_limit"}},
                headers={"Retry-After": self.limit_retry_after},
            )
        scripted = self._next_reply(request.path)
        if scripted is not None:
            return scripted
        if self.api_key is not None:
            auth = request.headers.get("authorization", "")
            if auth != f"Bearer {self.api_key}":
                given = auth.removeprefix("Bearer ")
                return Reply(
                    status=401,
                    body={
                        "error": {
                            "message": f"Incorrect API key provided: {given}",
                            "type": "invalid_request_error",
                        }
                    },
                )
        if self.latency:
            time.sleep(self.latency)
        if request.method == "POST" and request.path == CHAT:
            body = request.body or {}
            reply = self._chat(body)
            if body.get("stream"):
                text = reply["choices"][0]["message"]["content"]
                pieces = [w + " " for w in text.split(" ")]
                pieces[-1] = pieces[-1].rstrip(" ")
                return Reply(body=reply, stream=pieces)
            return Reply(body=reply)
        if request.method == "POST" and request.path == EMBED:
            return self._embed(request.body or {})
        if request.method == "GET" and request.path == "/v1/models":
            return Reply(body={"object": "list", "data": [{"id": "test-model", "object": "model"}]})
        return Reply(status=404, body={"error": {"message": f"no route {request.path}"}})

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        users = [m.get("content", "") for m in messages if m.get("role") == "user"]
        user = users[-1] if users else ""
        if callable(self.chat_answer):
            answer = self.chat_answer(body)
        elif self.chat_answer is not None:
            answer = self.chat_answer
        elif "[1] " in user:
            passage = user.split("[1] ", 1)[1].split("\n---\n", 1)[0].split("\n\n【问题】", 1)[0]
            answer = f"According to the knowledge base, {passage.strip()} [1]"
        else:
            answer = "The knowledge base does not contain an answer to this question."
        prompt_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4
        completion_tokens = len(answer) // 4
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "test-model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _embed(self, body: dict[str, Any]) -> Reply:
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or any(not isinstance(t, str) or not t for t in inputs):
            error = {"error": {"message": "'input' must be non-empty strings"}}
            return Reply(status=400, body=error)
        dim = body.get("dimensions") or self.embed_dim
        data = [
            {"object": "embedding", "index": i, "embedding": hashed_vector(t, dim)}
            for i, t in enumerate(inputs)
        ]
        if self.reverse_embeddings:
            data.reverse()
        tokens = sum(len(t) for t in inputs) // 4
        return Reply(
            body={
                "object": "list",
                "data": data,
                "model": body.get("model", "test-model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def _send_stream(self, h: _Handler, reply: Reply) -> None:
        with self._lock:
            self.streams_started += 1
        model = reply.body.get("model", "test-model") if isinstance(reply.body, dict) else "m"
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/event-stream")
            h.send_header("Connection", "close")
            h.end_headers()
            h.close_connection = True
            for piece in reply.stream or []:
                chunk = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion.chunk",
                    "model": model,
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
                h.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
                h.wfile.flush()
                if self.stream_delay:
                    time.sleep(self.stream_delay)
            h.wfile.write(b"data: [DONE]\n\n")
            h.wfile.flush()
        except OSError:
            with self._lock:
                self.streams_broken += 1
            return
        with self._lock:
            self.streams_finished += 1

    def _send(self, h: _Handler, reply: Reply) -> None:
        if reply.stream is not None:
            self._send_stream(h, reply)
            return
        if isinstance(reply.body, bytes):
            payload = reply.body
        elif isinstance(reply.body, str):
            payload = reply.body.encode()
        elif reply.body is None:
            payload = b""
        else:
            payload = json.dumps(reply.body, ensure_ascii=False).encode()
        try:
            h.send_response(reply.status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(payload)))
            for name, value in reply.headers.items():
                h.send_header(name, value)
            h.end_headers()
            h.wfile.write(payload)
            h.wfile.flush()
        except OSError:
            h.close_connection = True


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started :class:`OpenAIServer`, closed after the test."""
    with OpenAIServer() as server:
        yield server
