"""The per-request fast paths of the server: cached metric children, pre-encoded headers, direct routes."""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from typing import Any

import anyio
import httpx
import pytest
from conftest import DOCS
from serve_harness import ThreadServer, save_kb, sse_events

from fastrag._threads import usable_cores
from fastrag.serve import ServeSettings
from fastrag.serve.app import _Direct, _direct_routes, _SecurityHeaders
from fastrag.serve.keys import TRUSTED
from fastrag.serve.metrics import Metrics
from fastrag.serve.routes_native import native_routes
from fastrag.serve.routes_openai import openai_routes
from fastrag.serve.service import SECURITY_HEADERS, Deadline, EnginePool


def _value(m: Metrics, name: str, labels: dict[str, str]) -> float:
    got = m.registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def test_served_and_retrieved_count_as_labels_do() -> None:
    m = Metrics()
    for status in (200, 200, 404):
        m.served("retrieve", status, 0.001)
    m.retrieved("kb", 3)
    m.retrieved("kb", 2)
    assert _value(m, "fastrag_requests_total", {"endpoint": "retrieve", "status": "200"}) == 2
    assert _value(m, "fastrag_requests_total", {"endpoint": "retrieve", "status": "404"}) == 1
    assert _value(m, "fastrag_request_seconds_count", {"endpoint": "retrieve"}) == 3
    assert _value(m, "fastrag_retrievals_total", {"kb": "kb"}) == 5


def _start(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    sent: list[Any] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": headers})

    async def send(message: Any) -> None:
        sent.append(message)

    anyio.run(_SecurityHeaders(app), {"type": "http"}, None, send)
    return list(sent[0]["headers"])


def test_security_headers_added_once_and_never_overriding() -> None:
    got = _start([(b"content-type", b"application/json"), (b"x-frame-options", b"SAMEORIGIN")])
    names = [n for n, _ in got]
    for name in SECURITY_HEADERS:
        assert names.count(name.lower().encode()) == 1
    assert (b"x-frame-options", b"SAMEORIGIN") in got
    assert got[0] == (b"content-type", b"application/json")


# -- the JSON API's routes called directly (app._Direct) -----------------------------


@pytest.fixture(scope="module")
def direct_server(tmp_path_factory):
    path = save_kb([dict(d) for d in DOCS], tmp_path_factory.mktemp("direct") / "kb")
    with ThreadServer(ServeSettings(kbs=(("kb", str(path)),), reload_interval=0)) as s:
        yield s


def test_every_fixed_json_route_is_called_directly() -> None:
    direct = _direct_routes([*native_routes(), *openai_routes()])
    assert set(direct) == {
        ("GET", "/healthz"), ("GET", "/metrics"), ("GET", "/v1/kbs"),
        ("POST", "/v1/retrieve"), ("POST", "/v1/retrieve/batch"), ("POST", "/v1/answer"),
        ("POST", "/v1/answer/batch"), ("POST", "/v1/sql"), ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"), ("POST", "/v1/embeddings"),
    }  # fmt: skip
    # the page and its static files, MCP and HEAD requests stay with Starlette


def _secured(response: httpx.Response) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert response.headers.get_list(name) == [value]


def test_direct_and_starlette_routes_answer_alike(direct_server) -> None:
    url = direct_server.url
    assert isinstance(direct_server.app, _Direct) and direct_server.app.routes
    # one process: its engine threads are the usable cores (the default)
    assert direct_server.service.engine.n == usable_cores()
    with httpx.Client(base_url=url, timeout=30) as client:
        # a direct route: the same hits as the library, the security headers once
        r = client.post("/v1/retrieve", json={"question": DOCS[0]["text"][:40], "k": 2})
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        _secured(r)
        kb = direct_server.service.registry.get(None, TRUSTED).current.kb
        want = [h.chunk_id for h in kb.retrieve(DOCS[0]["text"][:40], 2)]
        assert [h["chunk_id"] for h in r.json()["hits"]] == want
        # its failures are the endpoint's JSON errors, with the headers
        bad = client.post(
            "/v1/retrieve", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_json"
        _secured(bad)
        # another method on a direct path, an unknown path, HEAD of a GET route: Starlette's
        wrong = client.get("/v1/retrieve")
        assert wrong.status_code == 405 and wrong.json()["error"]["type"] == "method_not_allowed"
        _secured(wrong)
        missing = client.post("/v1/nothing", json={})
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"
        _secured(missing)
        head = client.head("/healthz")
        assert head.status_code == 200
        _secured(head)
        # a stream from a direct route
        with client.stream(
            "POST", "/v1/answer", json={"question": "annual leave", "stream": True}
        ) as s:
            assert s.status_code == 200 and s.headers["content-type"].startswith(
                "text/event-stream"
            )
            _secured(s)
            events = [e for e, _ in sse_events(s.read().decode())]
        assert events[0] == "hits" and events[-1] == "answer"
        # and the page, served by Starlette
        page = client.get("/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        _secured(page)


# -- the request deadline (service.Deadline) ------------------------------------------


def test_deadline_turns_its_own_cancellation_into_timeout_only() -> None:
    async def main() -> None:
        # fires: TimeoutError at the block's end, and the task goes on unharmed
        task = asyncio.current_task()
        assert task is not None
        with pytest.raises(TimeoutError), Deadline().start(0.01):
            await asyncio.sleep(5)
        if hasattr(task, "cancelling"):  # Python 3.11+: its cancellation taken back
            assert task.cancelling() == 0
        await asyncio.sleep(0)
        # settled in time: nothing happens later
        with Deadline().start(0.05):
            await asyncio.sleep(0)
        await asyncio.sleep(0.1)
        # restarted (as the body's deadline is): the later setting holds
        deadline = Deadline().start(0.01)
        with deadline:
            deadline.start(5)
            await asyncio.sleep(0.05)
        # a cancellation from elsewhere (a client gone, a shutdown) passes through
        asyncio.get_running_loop().call_later(0.01, task.cancel)
        with pytest.raises(asyncio.CancelledError), Deadline().start(5):
            await asyncio.sleep(5)

    asyncio.run(main())
    if sys.version_info >= (3, 11):

        async def outer() -> None:
            task = asyncio.current_task()
            assert task is not None
            loop = asyncio.get_running_loop()
            with pytest.raises(asyncio.CancelledError), Deadline().start(0.01):
                loop.call_later(0.01, task.cancel)  # ... and so does someone else
                await asyncio.sleep(0.05)
                await asyncio.sleep(0.05)

        asyncio.run(outer())


def test_engine_threads_default_to_the_cores_shared_among_workers(monkeypatch) -> None:
    from fastrag import _threads
    from fastrag.errors import ConfigError
    from fastrag.serve.settings import engine_threads_for

    monkeypatch.setattr(_threads, "usable_cores", lambda: 4)
    assert ServeSettings(kbs=(("kb", "x"),)).engine_threads is None
    assert [engine_threads_for(None, w) for w in (1, 2, 3, 4, 8)] == [4, 2, 1, 1, 1]
    assert engine_threads_for(0, 2) == 0 and engine_threads_for(3, 8) == 3  # as set
    with pytest.raises(ConfigError, match="engine_threads"):
        ServeSettings(kbs=(("kb", "x"),), engine_threads=-1)


# -- the engine threads (service.EnginePool) ------------------------------------------


def test_engine_pool_runs_calls_in_at_most_n_threads() -> None:
    import contextvars
    import threading

    pool = EnginePool(2)
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    inside, most, lock = [0], [0], threading.Lock()
    names: set[str] = set()

    def work(i: int) -> tuple[int, str]:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            names.add(threading.current_thread().name)
        time.sleep(0.01)
        with lock:
            inside[0] -= 1
        return i, var.get()

    def fail() -> None:
        raise KeyError("from the pool")

    async def main() -> None:
        var.set("caller's")
        got = await asyncio.gather(*(pool.run(functools.partial(work, i)) for i in range(12)))
        assert got == [(i, "caller's") for i in range(12)]  # results, in the callers' context
        # one call at a time: always the thread that went idle last (warm caches)
        seen = [await pool.run(lambda: threading.current_thread().name) for _ in range(8)]
        assert len(set(seen)) == 1
        with pytest.raises(KeyError, match="from the pool"):
            await pool.run(fail)
        # a StopIteration reaches the caller as a RuntimeError (a future cannot hold one)
        with pytest.raises(RuntimeError, match="StopIteration"):
            await pool.run(lambda: next(iter(())))
        # a caller cancelled while its call runs stops waiting; the call's result is dropped;
        # one cancelled while its call waits in the queue: the call never runs
        slow, ran = threading.Event(), []

        async def call(fn: Any) -> Any:
            return await pool.run(fn)

        running = [asyncio.ensure_future(call(lambda: slow.wait(5))) for _ in range(2)]
        queued = asyncio.ensure_future(call(lambda: ran.append(1)))
        await asyncio.sleep(0.05)
        for task in (*running, queued):
            task.cancel()
        for task in (*running, queued):
            with pytest.raises(asyncio.CancelledError):
                await task
        slow.set()
        assert await pool.run(lambda: 7) == 7  # the pool goes on
        assert ran == []

    errors: list[Any] = []

    def run(coro: Any) -> None:
        async def watched() -> None:
            asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx))
            await coro

        asyncio.run(watched())

    run(main())
    assert errors == []  # no result landed on a cancelled future, nothing logged by the loop
    assert most[0] == 2 and len(names) == 2  # never more than n at once, n threads
    threads = list(pool._threads)
    pool.close()
    for t in threads:
        t.join(5)
        assert not t.is_alive()

    async def after_close() -> None:
        with pytest.raises(RuntimeError, match="closed"):
            await pool.run(lambda: 1)

    asyncio.run(after_close())  # a closed pool takes no more calls


def test_a_failure_escaping_a_direct_route_is_a_json_500(direct_server, monkeypatch) -> None:
    svc = direct_server.service

    def broken(*args: Any) -> None:
        raise RuntimeError("the metrics broke")

    monkeypatch.setattr(svc.metrics, "served", broken)  # called after the endpoint's try
    r = httpx.get(direct_server.url + "/v1/kbs", timeout=30)
    assert r.status_code == 500 and r.json()["error"]["type"] == "internal_error"
    _secured(r)
    monkeypatch.undo()
    assert httpx.get(direct_server.url + "/v1/kbs", timeout=30).status_code == 200
