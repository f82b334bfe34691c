"""``/mcp``: the MCP tools (:mod:`fastrag.serve.mcp`) mounted in the HTTP application.

Streamable HTTP, stateless (any worker answers). The caller's API key is
checked here, under the server's body limits, and its principal handed to
the tools through the ASGI scope.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.routing import Route

from ..errors import RequestError
from .service import Service, error_response

__all__ = ["mount_mcp"]


class _MCPRoute:
    """``/mcp``: the caller's key is checked here, and its principal handed to the tools."""

    def __init__(self, svc: Service, app: Any) -> None:
        self.svc = svc
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        svc = self.svc
        t0 = time.perf_counter()
        try:
            caller = svc.authenticate(Request(scope, receive))
        except RequestError as exc:
            response = error_response(svc, "mcp", exc)
            svc.metrics.requests.labels("mcp", str(response.status_code)).inc()
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["fastrag_caller"] = caller
        if scope.get("method") == "POST":
            # The body is read here, under the server's limits (413, 408), then handed on.
            try:
                body = await svc.body(Request(scope, receive))
            except (RequestError, ClientDisconnect) as exc:
                response = error_response(svc, "mcp", exc)
                svc.metrics.requests.labels("mcp", str(response.status_code)).inc()
                await response(scope, receive, send)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)
        svc.metrics.requests.labels("mcp", "200").inc()
        svc.metrics.latency.labels("mcp").observe(time.perf_counter() - t0)


def _replay(body: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that gives ``body`` once, then waits on the connection as before."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def mount_mcp(svc: Service) -> tuple[Any, Route]:
    """The MCP server of ``svc``'s knowledge bases and its ``/mcp`` route.

    The server's ``session_manager`` must run for the application's lifetime.
    """
    from .mcp import build_mcp

    settings = svc.settings
    server = build_mcp(
        svc.registry, generator=svc.generator, max_k=settings.max_k, threads=settings.threads,
        sql_tool=svc.sql_tool, ocr_seconds=settings.timeout,
    )  # fmt: skip
    mcp_app = server.streamable_http_app(
        stateless_http=True, json_response=True, host=settings.host,
        max_request_body_size=settings.max_body,
    )  # fmt: skip
    mcp_endpoint = mcp_app.routes[0].endpoint  # type: ignore[attr-defined]
    route = Route("/mcp", _MCPRoute(svc, mcp_endpoint), methods=["GET", "POST", "DELETE"])
    return server, route
