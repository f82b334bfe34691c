"""The per-request fast paths of the server: cached metric children, pre-encoded headers."""

from __future__ import annotations

from typing import Any

import anyio

from fastrag.serve.app import _SecurityHeaders
from fastrag.serve.metrics import Metrics
from fastrag.serve.service import SECURITY_HEADERS


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
