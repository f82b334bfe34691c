"""fastrag serve under slow, idle, too many and badly started clients (issue 20, server items).

Real servers on 127.0.0.1 and real clients: raw sockets where a client must
misbehave at the byte level, httpx and ``fastrag serve`` in a process
otherwise. Timeouts are configured small; assertions on time only bound them
generously.
"""

from __future__ import annotations

import json
import logging
import select
import socket
import subprocess
import sys
import threading
import time

import httpx
import orjson
import pytest
from conftest import DOCS
from serve_harness import ThreadServer, save_kb

import fastrag
from fastrag import cli
from fastrag.errors import ConfigError, RequestError
from fastrag.serve import ServeSettings
from fastrag.serve.app import SECURITY_HEADERS
from fastrag.serve.keys import TRUSTED
from fastrag.serve.registry import Current
from fastrag.serve.run import serve
from fastrag.serve.schemas import check_k

Q = "How many days in advance must annual leave requests be submitted?"


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return save_kb([dict(d) for d in DOCS], tmp_path_factory.mktemp("limits") / "policies")


def settings(kb_path, **kw):
    return ServeSettings(kbs=(("policies", str(kb_path)),), reload_interval=0, **kw)


def connect(server, timeout: float = 15.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (the socket's timeout bounds it)."""
    out = b""
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return out
        if not data:
            return out
        out += data


def split_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return status, headers, body


# -- 1. a body that arrives too slowly is the client's fault: 408 ----------------------------


def test_slow_body_is_408_not_504(kb_path):
    # The request timeout (0.3 s) is shorter than the body timeout (1 s): before the fix,
    # the slow upload ran into the request's deadline and was answered 504.
    with ThreadServer(settings(kb_path, timeout=0.3, body_timeout=1.0)) as s:
        body = orjson.dumps({"question": Q})
        for path in ("/v1/retrieve", "/mcp"):
            sock = connect(s)
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Accept: application/json, text/event-stream\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body[:10]
            )
            t0 = time.monotonic()
            status, headers, payload = split_response(read_until_closed(sock))
            elapsed = time.monotonic() - t0
            sock.close()
            assert status == 408, payload
            assert headers["content-type"] == "application/json"
            assert headers["connection"] == "close"
            err = json.loads(payload)["error"]
            assert err["type"] == "body_timeout" and "within 1 s" in err["message"]
            assert 0.5 < elapsed < 10  # the body timeout, not the request's, and not forever
        # A body that arrives in time is answered as ever.
        r = httpx.post(s.url + "/v1/retrieve", json={"question": Q, "k": 2}, timeout=30)
        assert r.status_code == 200 and len(r.json()["hits"]) == 2


# -- 2. an overload is expected: one log line, no traceback -----------------------------------


class _Gate:
    """A stand-in knowledge base whose retrieve waits for a signal."""

    def __init__(self, kb):
        self.kb = kb
        self.entered, self.release = threading.Event(), threading.Event()

    def retrieve(self, *args, **kwargs):
        self.entered.set()
        self.release.wait(10)
        return self.kb.retrieve(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.kb, name)


def test_overload_503_logs_one_line_without_traceback(kb_path, caplog):
    with ThreadServer(settings(kb_path, max_queue=1)) as s:
        served = s.service.registry.get("policies", TRUSTED)
        gate = _Gate(served.current.kb)
        served.current = Current(gate, served.current.snapshot)
        first = {}
        t = threading.Thread(
            target=lambda: first.update(
                r=httpx.post(s.url + "/v1/retrieve", json={"question": Q}, timeout=30)
            )
        )
        t.start()
        assert gate.entered.wait(10)
        with caplog.at_level(logging.WARNING, logger="fastrag.serve"):
            for _ in range(3):
                r = httpx.post(s.url + "/v1/retrieve", json={"question": Q}, timeout=30)
                assert r.status_code == 503 and r.json()["error"]["type"] == "overloaded"
        gate.release.set()
        t.join(10)
        assert first["r"].status_code == 200
    records = [r for r in caplog.records if r.name == "fastrag.serve"]
    assert len(records) == 3
    for record in records:
        assert record.exc_info is None and record.levelno == logging.WARNING
        text = record.getMessage()
        assert "\n" not in text and "503 overloaded" in text and "Traceback" not in text


# -- 3. idle, slow-header and kept-alive connections are closed; connections are capped -------


def test_idle_and_slow_header_connections_are_closed(kb_path):
    with ThreadServer(settings(kb_path, header_timeout=0.5, keep_alive=0.5)) as s:
        # A connection that sends nothing is closed, silently.
        sock = connect(s)
        t0 = time.monotonic()
        assert read_until_closed(sock) == b""
        assert 0.3 < time.monotonic() - t0 < 10
        sock.close()

        # A client sending a header every 0.1 s never finishes its head: 408, then closed.
        sock = connect(s)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        t0, received = time.monotonic(), b""
        try:
            while time.monotonic() - t0 < 10:
                readable, _, _ = select.select([sock], [], [], 0.1)
                if readable:
                    data = sock.recv(65536)
                    if not data:
                        break
                    received += data
                    continue
                sock.sendall(b"X-Slow: 1\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        received += read_until_closed(sock)
        elapsed = time.monotonic() - t0
        sock.close()
        assert elapsed < 10  # closed by the server, long before the client gave up
        status, headers, payload = split_response(received)
        assert status == 408 and headers["connection"] == "close"
        assert json.loads(payload)["error"]["type"] == "header_timeout"

        # A kept-alive connection is answered, then closed once idle for keep_alive.
        sock = connect(s)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        t0 = time.monotonic()
        status, _, payload = split_response(read_until_closed(sock))
        assert status == 200 and json.loads(payload)["status"] == "ok"
        assert time.monotonic() - t0 < 10
        sock.close()

        # Two requests on one connection, each head in time: both answered.
        with httpx.Client(base_url=s.url, timeout=30) as c:
            assert c.get("/healthz").status_code == 200
            assert c.get("/healthz").status_code == 200


def test_connections_beyond_the_limit_are_refused_at_once(kb_path):
    with ThreadServer(settings(kb_path, max_connections=2, keep_alive=30)) as s:
        held = []
        for _ in range(2):  # two kept-alive connections, each known to the server (answered)
            sock = connect(s)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            held.append(sock)
        sock = connect(s)
        status, headers, payload = split_response(read_until_closed(sock))
        sock.close()
        assert status == 503 and headers["retry-after"] == "1"
        assert json.loads(payload)["error"]["type"] == "overloaded"
        assert headers["x-content-type-options"] == "nosniff"
        held.pop().close()
        deadline = time.monotonic() + 10
        while True:  # once the server has seen the close, a new connection is served
            try:
                r = httpx.get(s.url + "/healthz", headers={"Connection": "close"}, timeout=5)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for sock in held:
            sock.close()


def test_timeouts_are_validated(kb_path):
    for field in ("body_timeout", "header_timeout", "keep_alive", "timeout"):
        for bad in (0, -1, float("nan"), True, "5"):
            with pytest.raises(ConfigError, match=field):
                settings(kb_path, **{field: bad})
    with pytest.raises(ConfigError, match="max_connections"):
        settings(kb_path, max_connections=0)


# -- 4. the port: checked as usage, bound before the warm-up ---------------------------------


@pytest.mark.parametrize("port", ["99999", "0", "-1", "65536"])
def test_port_out_of_range_is_a_usage_error(kb_path, capsys, port):
    with pytest.raises(SystemExit) as exc:
        cli.main(["serve", "--kb", str(kb_path), "--port", port])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --port: must be between 1 and 65535, got {int(port)}" in err
    with pytest.raises(ConfigError, match="port must be an int between 1 and 65535"):
        serve(settings(kb_path), port=int(port))


def test_port_in_use_fails_at_once_in_one_line(kb_path, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "fastrag", "serve", "--kb", str(kb_path), "--port", str(port)],
            capture_output=True, text=True, timeout=120,
            cwd=tmp_path,  # not the checkout, whose fastrag/ folder would shadow the install
        )  # fmt: skip
    out = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 1, out
    assert len(out) == 1, out  # no warm-up, no uvicorn log: one line
    assert out[0].startswith(f"fastrag: error: cannot listen on 127.0.0.1:{port}: ")
    assert "in use" in out[0]


# -- 5. one rule for k -------------------------------------------------------------------------


def test_k_has_one_rule():
    assert check_k(5, 100) == 5
    for bad, kind in ((True, "wrong_type"), (5.0, "wrong_type"), (0, "out_of_range"),
                      (101, "out_of_range")):  # fmt: skip
        with pytest.raises(RequestError) as exc:
            check_k(bad, 100)
        assert exc.value.type == kind and exc.value.status == 400
    with pytest.raises(ConfigError, match="k must be between 1 and 100,000"):
        fastrag.options.check_k(100_001)
    with pytest.raises(ConfigError, match="k must be an int, got True"):
        fastrag.options.check_k(True)


def test_http_refuses_k_true(kb_path):
    with ThreadServer(settings(kb_path)) as s:
        for path in ("/v1/retrieve", "/v1/answer"):
            r = httpx.post(s.url + path, json={"question": Q, "k": True}, timeout=30)
            assert r.status_code == 400 and r.json()["error"]["type"] == "wrong_type"
        chat = {"model": "policies", "messages": [{"role": "user", "content": Q}], "k": True}
        r = httpx.post(s.url + "/v1/chat/completions", json=chat, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["type"] == "wrong_type"


# -- security headers on every response ------------------------------------------------------


def test_security_headers_on_every_response(kb_path):
    with ThreadServer(settings(kb_path)) as s:
        responses = [
            httpx.get(s.url + "/"),
            httpx.get(s.url + "/static/app.js"),
            httpx.get(s.url + "/healthz"),
            httpx.get(s.url + "/v1/kbs"),
            httpx.get(s.url + "/v1/nothing"),
            httpx.get(s.url + "/v1/retrieve"),
            httpx.post(s.url + "/v1/retrieve", content=b"{bad"),
            httpx.post(s.url + "/v1/answer", json={"question": Q, "stream": True}, timeout=30),
            httpx.post(
                s.url + "/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Accept": "application/json, text/event-stream"},
            ),
        ]
    for r in responses:
        for name, value in SECURITY_HEADERS.items():
            assert r.headers.get(name) == value, (r.request.url, name)
    csp = SECURITY_HEADERS["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "'unsafe-inline'" not in csp
    assert "frame-ancestors 'none'" in csp
