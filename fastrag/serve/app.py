"""The ASGI application of ``fastrag serve`` (Starlette): the factory and what wraps every route.

The rooms:

- :mod:`~fastrag.serve.service` — the :class:`Service` the routes share, the
  endpoint wrapper (keys, admission, deadlines, errors, metrics), SSE;
- :mod:`~fastrag.serve.routes_native` — ``/v1/retrieve``, ``/v1/answer``
  (+ batch), ``/v1/sql``, ``/v1/kbs``, ``/healthz``, ``/metrics``, the page;
- :mod:`~fastrag.serve.routes_openai` — ``/v1/chat/completions``,
  ``/v1/models``, ``/v1/embeddings``;
- :mod:`~fastrag.serve.mcp_http` — the MCP tools mounted at ``/mcp``;
- this module — :func:`create_app`: the routes, the security headers on
  every response (:data:`SECURITY_HEADERS`), JSON for unknown routes, the
  in-process warm-up and the snapshot watcher.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import ConfigError
from .keys import TRUSTED
from .mcp_http import mount_mcp
from .registry import Registry
from .routes_native import native_routes
from .routes_openai import openai_routes
from .service import SECURITY_HEADERS, Service, error_body, json_response
from .settings import ServeSettings

__all__ = ["SECURITY_HEADERS", "Service", "create_app", "create_app_from_env"]

_log = logging.getLogger("fastrag.serve")


async def _not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 500)
    if status == 404:
        body = error_body("not_found", f"no route {request.method} {request.url.path}")
    elif status == 405:
        body = error_body(
            "method_not_allowed", f"{request.method} is not allowed on {request.url.path}"
        )
    else:
        body = error_body("http_error", str(getattr(exc, "detail", "")) or f"HTTP {status}")
    return json_response(body, status)


async def _server_error(request: Request, exc: Exception) -> Response:
    _log.error("unhandled error on %s", request.url.path, exc_info=exc)
    # Sent from outside the middleware stack: the security headers are added here.
    return json_response(
        error_body("internal_error", "internal server error"), 500, dict(SECURITY_HEADERS)
    )


_SECURITY_RAW = [
    (n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in SECURITY_HEADERS.items()
]


def _securing(send: Any) -> Any:
    """``send`` adding :data:`SECURITY_HEADERS` to a response's start (those it lacks)."""

    async def send_with_headers(message: Any) -> None:
        if message["type"] == "http.response.start":
            # As MutableHeaders.setdefault, without its per-header scans and encoding.
            headers = message["headers"] = list(message.get("headers", ()))
            present = {name.lower() for name, _ in headers}
            headers.extend(item for item in _SECURITY_RAW if item[0] not in present)
        await send(message)

    return send_with_headers


class _SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every HTTP response (streams included)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        await self.app(scope, receive, _securing(send))


class _Direct:
    """ASGI: the JSON API's routes straight to their endpoints, everything else to Starlette.

    A ``POST /v1/retrieve`` needs none of what Starlette puts around a route:
    its endpoint (:func:`~fastrag.serve.service.endpoint`) already answers
    every failure as JSON, counts it and keeps the deadline. So each route of
    ``routes`` (an exact method and path, streamed answers included) is
    called here by a dictionary lookup, with the :data:`SECURITY_HEADERS`
    added to its response, and is spared the error and exception
    middlewares, the linear match of every route's pattern and the
    request-response wrappers (BENCHMARKS.md, "Session 11"). A failure that
    escapes the endpoint before the response has started is answered as
    Starlette's error handler answers it (a JSON 500, logged). Other methods
    on those paths (a 405), every other path (the page, static files, MCP),
    websockets and the lifespan go through the Starlette ``app``. Middleware
    added to ``app`` does not see the direct routes.
    """

    def __init__(self, app: Starlette, routes: dict[tuple[str, str], Any]) -> None:
        self.app = app
        self.routes = routes

    @property
    def state(self) -> Any:
        """The Starlette application's state (``state.service``: the :class:`Service`)."""
        return self.app.state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            root = scope.get("root_path")
            if root and path.startswith(root):  # as Starlette's router reads the path
                path = path[len(root) :]
            handler = self.routes.get((scope["method"], path))
            if handler is not None:
                await self._direct(handler, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _direct(self, handler: Any, scope: Any, receive: Any, send: Any) -> None:
        scope["app"] = self.app  # as Starlette sets them: request.app.state.service
        scope.setdefault("router", self.app.router)
        started = False
        secured = _securing(send)

        async def sending(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await secured(message)

        request = Request(scope, receive, send)
        try:
            response = await handler(request)
            await response(scope, receive, sending)
        except Exception as exc:
            if started:  # the client has part of an answer: nothing else can be said
                raise
            failed = await _server_error(request, exc)
            await failed(scope, receive, secured)


def _direct_routes(routes: list[Any]) -> dict[tuple[str, str], Any]:
    """(method, path) -> endpoint of every fixed-path route wrapped by ``endpoint``."""
    direct: dict[tuple[str, str], Any] = {}
    for route in routes:
        if not isinstance(route, Route) or "{" in route.path:
            continue
        if getattr(route.endpoint, "endpoint_name", None) is None:
            continue
        for method in route.methods or ():
            if method != "HEAD":  # HEAD of a GET route: Starlette (uvicorn drops the body)
                direct[(method, route.path)] = route.endpoint
    return direct


async def _warm_app(app: Any, svc: Service) -> None:
    """Send each endpoint a request in-process before the server accepts any.

    The first request over a socket then finds the worker threads started,
    the lazily imported code loaded and every route's path warm; these
    requests are not counted in the metrics. Answers are skipped when they
    would call a chat model.
    """
    import httpx

    svc.warming = True
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://warm-up") as client:
            for name in svc.registry.names(TRUSTED):
                calls: list[tuple[str, dict[str, Any]]] = [
                    ("/v1/retrieve", {"kb": name, "question": "warm up"}),
                    ("/v1/retrieve", {"kb": name, "question": "warm up", "mode": "vector"}),
                    ("/v1/retrieve/batch", {"kb": name, "questions": ["warm up", "预热"]}),
                    ("/v1/embeddings", {"model": name, "input": ["warm up"]}),
                ]
                if not svc.model_bound:
                    chat = {"model": name, "messages": [{"role": "user", "content": "预热"}]}
                    calls += [
                        ("/v1/answer", {"kb": name, "question": "warm up"}),
                        ("/v1/answer", {"kb": name, "question": "warm up", "stream": True}),
                        ("/v1/answer/batch", {"kb": name, "questions": ["warm up"]}),
                        ("/v1/chat/completions", chat),
                        ("/v1/chat/completions", {**chat, "stream": True}),
                    ]
                for path, body in calls:
                    await client.post(path, json=body)
            await client.get("/v1/kbs")
            await client.get("/healthz")
    finally:
        svc.warming = False


async def _watch(svc: Service) -> None:
    interval = svc.settings.reload_interval
    while True:
        await anyio.sleep(interval)
        try:
            switched = await anyio.to_thread.run_sync(svc.registry.refresh)
        except Exception:  # noqa: BLE001 - the watcher must outlive one bad check
            _log.exception("snapshot check failed")
            continue
        for name in switched:
            svc.metrics.switches.labels(name).inc()


def create_app(settings: ServeSettings, *, registry: Registry | None = None) -> Any:
    """The ASGI application serving ``settings.kbs``.

    Loads (and warms) every knowledge base now, so a worker accepts requests
    only once it can answer them at full speed.

    Parameters
    ----------
    settings : ServeSettings
        What to serve and how.
    registry : Registry, optional
        Knowledge bases already loaded.

    Returns
    -------
    ASGI application
        The JSON API's routes called directly (:class:`_Direct`), the rest by
        Starlette; ``.state.service`` is the :class:`Service`.
    """
    svc = Service(settings, registry)
    mcp_server, mcp_route = mount_mcp(svc)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with mcp_server.session_manager.run(), anyio.create_task_group() as tg:
                await _warm_app(direct, svc)
                if settings.reload_interval > 0:
                    tg.start_soon(_watch, svc)
                yield
                tg.cancel_scope.cancel()
        finally:
            svc.close()

    routes = [*native_routes(), *openai_routes(), mcp_route]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(_SecurityHeaders)],
        exception_handlers={HTTPException: _not_found, Exception: _server_error},
    )
    app.state.service = svc
    direct = _Direct(app, _direct_routes(routes))
    return direct


def create_app_from_env() -> Any:
    """The uvicorn factory in each worker process: warm the kernels, load, build the app.

    The settings come from :data:`fastrag.config.ENV_SERVE_SETTINGS`.
    """
    from ..config import ENV_SERVE_SETTINGS, serve_settings_json
    from ..warmup import warmup

    raw = serve_settings_json()
    if raw is None:
        raise ConfigError(f"{ENV_SERVE_SETTINGS} is not set: start the server with `fastrag serve`")
    warmup()
    app = create_app(ServeSettings.from_json(raw))
    # What start-up allocated stays for the life of the worker: move it out of the
    # collector's way, so that no request pays for a full collection of it.
    gc.collect()
    gc.freeze()
    return app
