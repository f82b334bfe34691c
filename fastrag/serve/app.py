"""The ASGI application of ``fastrag serve`` (Starlette).

Every route parses its request, calls the public :class:`~fastrag.KnowledgeBase`
API (in a worker thread, so the event loop keeps accepting) and writes the
result; the engine does the retrieval and answering. Around each call:

- **keys**: with a key ring, a request without a valid key is answered 401,
  and the caller's principal is passed to every retrieval and answer, so a
  chunk its ACL does not admit never appears in a response;
- **admission**: at most ``max_queue`` requests are held per worker; beyond
  that the answer is 503 with ``Retry-After``;
- **deadlines**: a request body not received within ``body_timeout`` seconds
  is answered 408 (and the connection closed); a request whose answer takes
  longer than ``timeout`` seconds once its body has arrived is answered 504
  (a stream ends with an ``error`` event);
- **errors**: every failure is ``{"error": {"type", "message"}}`` with a 4xx
  status for a bad request and a 5xx for a server-side failure, never a
  traceback (that goes to the server's log, without request bodies or keys,
  and only for a failure nobody expected: an overload or a timeout is one
  line);
- **headers**: every response carries a strict ``Content-Security-Policy``
  and ``X-Content-Type-Options``, ``Referrer-Policy`` and ``X-Frame-Options``
  (:data:`SECURITY_HEADERS`);
- **metrics**: requests, errors and latency by endpoint.

Streams are Server-Sent Events. A client that disconnects mid-stream stops
the stream: the answer's iterator is closed, which closes the connection to
a chat model and so cancels the model call.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import gc
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator
from importlib import resources
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import numpy as np
import orjson
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import __version__
from ..embed.base import document_vectors
from ..errors import (
    ConfigError,
    FastragError,
    ModelError,
    RequestError,
    SnapshotNotFoundError,
    SqlQueryError,
    StageTimeoutError,
)
from ..retrieve.options import MAX_HISTORY_TURNS
from ..types import Answer
from .keys import TRUSTED, Caller, KeyRing, presented_key
from .metrics import CONTENT_TYPE, Metrics
from .registry import Registry, Served
from .schemas import (
    AnswerBatchRequest,
    AnswerRequest,
    ChatRequest,
    EmbeddingsRequest,
    RetrieveBatchRequest,
    RetrieveRequest,
    SqlRequest,
    check_acl_statistics,
    check_batch,
    check_k,
    parse,
)
from .settings import ServeSettings

__all__ = ["SECURITY_HEADERS", "Service", "create_app"]

_log = logging.getLogger("fastrag.serve")
_END = object()
_JSON = "application/json"

SECURITY_HEADERS: dict[str, str] = {
    # The page loads its script, style and data from this server only: no inline
    # script or style, no plug-ins, no framing, no form posted elsewhere.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
"""Headers of every response of the application."""


def _dumps(obj: Any) -> bytes:
    return orjson.dumps(
        obj, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
    )


def json_response(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response (orjson; datetimes as ISO-8601, anything else unknown as its ``str``)."""
    return Response(_dumps(obj), status_code=status, media_type=_JSON, headers=headers)


def error_body(kind: str, message: str) -> dict[str, Any]:
    """The error shape of every endpoint."""
    return {"error": {"type": kind, "message": message}}


def classify(exc: BaseException) -> tuple[int, str, str, dict[str, str]]:
    """Status, type, message and headers of the answer to an exception (never a traceback)."""
    if isinstance(exc, RequestError):
        return exc.status, exc.type, str(exc), exc.headers
    if isinstance(exc, ModelError):
        status = 504 if isinstance(exc, TimeoutError) else 502
        return status, "model_error", str(exc), {}
    if isinstance(exc, StageTimeoutError):
        return 504, "timeout", str(exc), {}
    if isinstance(exc, TimeoutError):
        return 504, "timeout", "the request took longer than the server's timeout", {}
    if isinstance(exc, SnapshotNotFoundError):  # a request's "snapshot" names no kept one
        return 404, "snapshot_not_found", str(exc), {}
    if isinstance(exc, SqlQueryError):  # refused by the SQL tool, or the database said no
        return 400, "sql_refused", str(exc), {}
    if isinstance(exc, ConfigError):  # the engine refused an option (a bad filter, ...)
        return 400, "invalid_request", str(exc), {}
    if isinstance(exc, ClientDisconnect):  # nobody reads the answer; said for the log
        return 400, "client_disconnected", "the client closed the connection", {}
    if isinstance(exc, FastragError):
        return 500, "engine_error", f"{type(exc).__name__}: {exc}", {}
    return 500, "internal_error", "internal server error (the server's log has the details)", {}


class _Pump:
    """Steps a blocking iterator in worker threads; closing it is safe at any moment.

    ``abandon()`` (a disconnect, a deadline) closes the iterator at once when
    no step is running, else as soon as the running step returns, so the
    iterator's cleanup (closing a model connection) always runs.
    """

    def __init__(self, it: Iterator[Any]) -> None:
        self._it = it
        self._lock = threading.Lock()
        self._closed = False

    def step(self) -> Any:
        with self._lock:
            if self._closed:
                return _END
            try:
                return next(self._it)
            except StopIteration:
                return _END

    def _close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                close = getattr(self._it, "close", None)
                if callable(close):
                    close()

    def abandon(self) -> None:
        if self._lock.acquire(blocking=False):
            self._lock.release()
            self._close()
        else:  # a step is running in its thread: close when it returns
            threading.Thread(target=self._close, daemon=True, name="fastrag-close").start()


class Service:
    """What the routes share: settings, knowledge bases, keys, limits, metrics, generator.

    Parameters
    ----------
    settings : ServeSettings
        The server's settings.
    registry : Registry, optional
        Ready knowledge bases (default: loaded from ``settings.kbs``).
    """

    def __init__(self, settings: ServeSettings, registry: Registry | None = None) -> None:
        self.settings = settings
        self.keys = KeyRing.from_file(settings.keys) if settings.keys else None
        self.generator: Any = None
        rewriter = None
        if settings.llm:
            from ..answer.chat import OpenAIChatGenerator
            from ..retrieve.rewrite import LLMRewriter

            self.generator = OpenAIChatGenerator()
            # A chat's follow-up ("and for contractors?") is rewritten by the model
            # from the conversation; a question asked alone keeps the rule-based rewrite.
            rewriter = LLMRewriter(self.generator, follow_ups_only=True)
        self.registry = registry if registry is not None else Registry(settings.kbs, rewriter)
        self.metrics = Metrics()
        self.inline = settings.engine_threads == 0
        self.engine_limiter = anyio.CapacityLimiter(max(1, settings.engine_threads))
        self.model_limiter = anyio.CapacityLimiter(settings.model_threads)
        from .mcp import sql_tool_of

        self.sql_tool = sql_tool_of(settings)
        self.held = 0
        self.warming = False  # set while the app warms itself up, before it serves anyone

    def close(self) -> None:
        """Close network connections: the chat model's and any HTTP embedder's."""
        if self.generator is not None:
            self.generator.close()
        for served in self.registry:
            served.current.kb.close()
        if self.sql_tool is not None:
            self.sql_tool.close()

    # -- callers and admission ---------------------------------------------------
    def authenticate(self, request: Request) -> Caller:
        """The caller of a request (401 without a valid key when keys are configured)."""
        if self.keys is None or self.warming:
            return TRUSTED
        caller = self.keys.authenticate(presented_key(request.headers))
        if caller is None:
            raise RequestError(
                "a valid API key is required: send 'Authorization: Bearer KEY'",
                status=401,
                type="unauthorized",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return caller

    def admit(self) -> None:
        """Hold a place for one request, or 503 when ``max_queue`` are held already."""
        if self.held >= self.settings.max_queue:
            raise RequestError(
                f"the server is busy ({self.held} requests in progress); retry shortly",
                status=503,
                type="overloaded",
                headers={"Retry-After": "1"},
            )
        self.held += 1

    def release(self) -> None:
        """Give back a place taken by :meth:`admit`."""
        self.held -= 1

    # -- counting ------------------------------------------------------------------
    def retrieved(self, kb: str, questions: int) -> None:
        """Count questions retrieved for (not while warming up)."""
        if not self.warming:
            self.metrics.retrievals.labels(kb).inc(questions)

    def answered(self, kb: str, found: bool, citing: bool) -> None:
        """Count one answer (not while warming up)."""
        if not self.warming:
            self.metrics.answered(kb, found, citing)

    # -- engine calls --------------------------------------------------------------
    def limiter(self, model_bound: bool) -> anyio.CapacityLimiter:
        """Threads for CPU-bound engine work, or for waiting on a chat model."""
        return self.model_limiter if model_bound else self.engine_limiter

    async def call(
        self, fn: Callable[..., Any], *args: Any, model_bound: bool = False, **kwargs: Any
    ) -> Any:
        """Run a blocking engine call: on the event loop (``engine_threads=0``) or in a thread.

        In a thread, the deadline answers the request at once; the thread
        finishes its call in the background and its result is dropped.
        """
        if self.inline and not model_bound:
            return fn(*args, **kwargs)
        return await anyio.to_thread.run_sync(
            functools.partial(fn, *args, **kwargs),
            limiter=self.limiter(model_bound),
            abandon_on_cancel=True,
        )

    @property
    def model_bound(self) -> bool:
        """Whether answers wait on a chat model."""
        return self.generator is not None

    async def body(self, request: Request) -> bytes:
        """The request body: 413 beyond ``max_body`` bytes, 408 when not all in ``body_timeout``.

        Receiving the body is the client's part and has its own deadline,
        answered 408 (with ``Connection: close``: the rest of the body is not
        read); the request's ``timeout`` (504) starts again once it is in.
        """
        limit = self.settings.max_body
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise RequestError(
                f"the request body is {int(declared):,} bytes; the limit is {limit:,}",
                status=413,
                type="body_too_large",
                headers={"Connection": "close"},
            )
        deadline: anyio.CancelScope | None = getattr(request.state, "deadline_scope", None)
        if deadline is not None:
            deadline.deadline = math.inf  # the body's own deadline holds while it is read
        parts, size = [], 0
        try:
            with anyio.move_on_after(self.settings.body_timeout) as reading:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise RequestError(
                            f"the request body is over the limit of {limit:,} bytes",
                            status=413,
                            type="body_too_large",
                            headers={"Connection": "close"},
                        )
                    parts.append(chunk)
        finally:
            if deadline is not None:
                deadline.deadline = anyio.current_time() + self.settings.timeout
                request.state.deadline = time.monotonic() + self.settings.timeout
        if reading.cancelled_caught:
            raise RequestError(
                f"the request body did not arrive within {self.settings.body_timeout:g} s "
                f"({size:,} bytes received)",
                status=408,
                type="body_timeout",
                headers={"Connection": "close"},
            )
        return b"".join(parts)

    def served(self, name: str | None, caller: Caller) -> Served:
        """The knowledge base a request names (404 when unknown or not allowed)."""
        return self.registry.get(name, caller)

    # -- streams -------------------------------------------------------------------
    async def events(
        self, it: Iterator[Any], *, model_bound: bool, deadline: float
    ) -> AsyncIterator[Any]:
        """Items of a blocking iterator, each step in a worker thread, within ``deadline``.

        When the consumer stops early (a client disconnect cancels it) or the
        deadline passes, the iterator is closed (see :class:`_Pump`).
        """
        pump = _Pump(it)
        limiter = self.limiter(model_bound)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                if self.inline and not model_bound:
                    item = pump.step()
                    await anyio.lowlevel.checkpoint()  # let the loop send what is ready
                else:
                    with anyio.fail_after(remaining):
                        item = await anyio.to_thread.run_sync(
                            pump.step, limiter=limiter, abandon_on_cancel=True
                        )
                if item is _END:
                    return
                yield item
        finally:
            pump.abandon()


# --------------------------------------------------------------------------- routes
Handler = Callable[[Service, Request, Caller], Awaitable[Response]]


def endpoint(
    name: str, *, admit: bool = True, auth: bool = True
) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """Wrap a handler with keys, admission, the deadline, errors and metrics."""

    def wrap(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(handler)
        async def route(request: Request) -> Response:
            svc: Service = request.app.state.service
            t0 = time.perf_counter()
            held = False
            try:
                caller = svc.authenticate(request) if auth else TRUSTED
                if admit:
                    svc.admit()
                    held = True
                request.state.deadline = time.monotonic() + svc.settings.timeout
                with anyio.fail_after(svc.settings.timeout) as deadline:
                    request.state.deadline_scope = deadline  # Service.body moves it
                    response = await handler(svc, request, caller)
                if held and isinstance(response, StreamingResponse):
                    response.body_iterator = _releasing(response.body_iterator, svc)
                    held = False  # the stream gives its place back when it ends
            except Exception as exc:  # noqa: BLE001 - every failure becomes a JSON error
                response = error_response(svc, name, exc)
            finally:
                if held:
                    svc.release()
            if not svc.warming:
                svc.metrics.requests.labels(name, str(response.status_code)).inc()
                svc.metrics.latency.labels(name).observe(time.perf_counter() - t0)
            return response

        return route

    return wrap


async def _releasing(body: AsyncIterable[Any], svc: Service) -> AsyncIterator[Any]:
    try:
        async for chunk in body:
            yield chunk
    finally:
        svc.release()
        aclose = getattr(body, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


def log_failure(name: str, exc: BaseException, status: int, kind: str, message: str) -> None:
    """Log a failed request: one line when the failure is expected, a traceback when not.

    A refusal the server decided on (a :class:`RequestError`, such as the 503
    of an overload), a deadline or a model's failure is expected behaviour:
    one warning line with the status, type and message. Only a failure nobody
    foresaw (a bug, a broken knowledge base) logs its traceback. 4xx answers
    are the client's business and are not logged.
    """
    if status < 500:
        return
    if isinstance(exc, RequestError) or kind in ("timeout", "model_error"):
        _log.warning("%s: %d %s: %s", name, status, kind, message)
    else:
        _log.error("%s: %s", name, kind, exc_info=exc)


def error_response(svc: Service, name: str, exc: BaseException) -> Response:
    """The JSON error answer to ``exc``, logged by :func:`log_failure`."""
    status, kind, message, headers = classify(exc)
    log_failure(name, exc, status, kind, message)
    if not svc.warming:
        svc.metrics.errors.labels(name, kind).inc()
    return json_response(error_body(kind, message), status, headers)


def sse(event: str | None, data: Any) -> bytes:
    """One Server-Sent Event (``data`` as one line of JSON, or a literal string)."""
    payload = data if isinstance(data, (bytes, str)) else _dumps(data)
    if isinstance(payload, str):
        payload = payload.encode()
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + payload + b"\n\n"


def _stream(body: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(
        body,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _hits_json(hits: Any) -> list[dict[str, Any]]:
    return [{"rank": i, **h.to_dict()} for i, h in enumerate(hits, 1)]


def _answer_json(served: Served, snapshot: str | None, ans: Answer) -> dict[str, Any]:
    return {"kb": served.name, "snapshot": snapshot, **ans.to_dict()}


def _retrieval_args(svc: Service, req: Any, caller: Caller) -> dict[str, Any]:
    return {
        "mode": req.mode,
        "where": req.where,
        "principal": caller.principal,
        "exact": req.exact,
        "rewrite": req.rewrite,
        "acl_statistics": check_acl_statistics(req.acl_statistics, caller.principal is not None),
        "threads": svc.settings.threads,
        **({"snapshot": req.snapshot} if req.snapshot is not None else {}),
    }


async def _snapshot_of(svc: Service, kb: Any, snapshot: str | None, req: Any) -> str | None:
    """The id of the snapshot a request reads: its ``"snapshot"`` resolved, or the served one."""
    if req.snapshot is None:
        return snapshot
    return await svc.call(kb.snapshot_id, req.snapshot)  # type: ignore[no-any-return]


@endpoint("retrieve")
async def retrieve(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(RetrieveRequest, await svc.body(request))
    k = check_k(req.k, svc.settings.max_k)
    served = svc.served(req.kb, caller)
    kb, snapshot = served.current
    snapshot = await _snapshot_of(svc, kb, snapshot, req)
    hits = await svc.call(
        kb.retrieve, req.question, k, group_by=req.group_by, **_retrieval_args(svc, req, caller)
    )
    svc.retrieved(served.name, 1)
    return json_response(
        {
            "kb": served.name,
            "snapshot": snapshot,
            "question": req.question,
            "hits": _hits_json(hits),
        }
    )


def _batch_results(
    kb: Any, questions: list[str], k: int, options: dict[str, Any]
) -> list[dict[str, Any]]:
    table = kb.retrieve_batch(questions, k, **options)
    out: list[dict[str, Any]] = [{"question": q, "hits": []} for q in questions]
    cols = table.to_pydict()
    for qi, rank, cid, doc, score, text in zip(
        cols["query_index"],
        cols["rank"],
        cols["chunk_id"],
        cols["doc_id"],
        cols["score"],
        cols["text"],
        strict=True,
    ):
        out[qi]["hits"].append(
            {"rank": rank, "chunk_id": cid, "doc_id": doc, "score": score, "text": text}
        )
    return out


@endpoint("retrieve_batch")
async def retrieve_batch(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(RetrieveBatchRequest, await svc.body(request))
    k = check_k(req.k, svc.settings.max_k)
    questions = check_batch(req.questions, svc.settings.max_batch)
    served = svc.served(req.kb, caller)
    kb, snapshot = served.current
    snapshot = await _snapshot_of(svc, kb, snapshot, req)
    options = {"group_by": req.group_by, **_retrieval_args(svc, req, caller)}
    results = await svc.call(_batch_results, kb, questions, k, options)
    svc.retrieved(served.name, len(questions))
    return json_response({"kb": served.name, "snapshot": snapshot, "results": results})


def _answer_stream_args(svc: Service, req: Any, caller: Caller) -> dict[str, Any]:
    return {"generator": svc.generator, **_retrieval_args(svc, req, caller), **req.answer_options()}


async def _answer_events(
    svc: Service,
    served: Served,
    question: str,
    k: int,
    args: dict[str, Any],
    deadline: float,
    index: int | None = None,
) -> AsyncIterator[bytes]:
    """SSE events of one streamed answer: ``hits``, ``delta``..., ``answer``."""
    kb, snapshot = served.current
    if args.get("snapshot") is not None:
        snapshot = await svc.call(kb.snapshot_id, args["snapshot"])
    tag = {} if index is None else {"index": index}
    it = kb.answer_stream(question, k, **args)
    async for ev in svc.events(it, model_bound=svc.model_bound, deadline=deadline):
        if ev.kind == "hits":
            yield sse(
                "hits",
                {**tag, "kb": served.name, "snapshot": snapshot, "hits": _hits_json(ev.hits)},
            )
        elif ev.kind == "delta":
            yield sse("delta", {**tag, "text": ev.text})
        else:
            ans = ev.answer
            svc.answered(served.name, ans.found, bool(ans.citations))
            yield sse("answer", {**tag, **_answer_json(served, ans.snapshot or snapshot, ans)})


async def _guarded(svc: Service, name: str, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A stream that ends with an ``error`` event instead of breaking off on a failure."""
    try:
        async for chunk in body:
            yield chunk
    except Exception as exc:  # noqa: BLE001 - the client is told, the log has the rest
        status, kind, message, _ = classify(exc)
        log_failure(f"{name} (stream)", exc, status, kind, message)
        svc.metrics.errors.labels(name, kind).inc()
        yield sse("error", {**error_body(kind, message), "status": status})


@endpoint("answer")
async def answer(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(AnswerRequest, await svc.body(request))
    k = check_k(req.k, svc.settings.max_k)
    served = svc.served(req.kb, caller)
    args = _answer_stream_args(svc, req, caller)
    if req.stream:
        events = _answer_events(svc, served, req.question, k, args, request.state.deadline)
        return _stream(_guarded(svc, "answer", events))
    kb, snapshot = served.current
    ans = await svc.call(kb.answer, req.question, k, model_bound=svc.model_bound, **args)
    svc.answered(served.name, ans.found, bool(ans.citations))
    return json_response(_answer_json(served, ans.snapshot or snapshot, ans))


@endpoint("answer_batch")
async def answer_batch(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(AnswerBatchRequest, await svc.body(request))
    k = check_k(req.k, svc.settings.max_k)
    questions = check_batch(req.questions, svc.settings.max_batch)
    served = svc.served(req.kb, caller)
    args = _answer_stream_args(svc, req, caller)
    deadline = request.state.deadline
    if req.stream:

        async def events() -> AsyncIterator[bytes]:
            for i, q in enumerate(questions):
                async for chunk in _answer_events(svc, served, q, k, args, deadline, index=i):
                    yield chunk
            yield sse("done", {"questions": len(questions)})

        return _stream(_guarded(svc, "answer_batch", events()))
    kb, snapshot = served.current
    snapshot = await _snapshot_of(svc, kb, snapshot, req)
    results = await svc.call(
        kb.answer_batch, questions, k, model_bound=svc.model_bound, output="results", **args
    )
    rows: list[dict[str, Any]] = []
    for i, (question, (ans, why)) in enumerate(zip(questions, results, strict=True)):
        if ans is None:  # the question's own failure: the others are answered
            rows.append({"index": i, "question": question, **error_body(
                "answer_failed", why or "this question could not be answered"
            )})  # fmt: skip
            continue
        svc.answered(served.name, ans.found, bool(ans.citations))
        rows.append({"index": i, **ans.to_dict()})
    return json_response({"kb": served.name, "snapshot": snapshot, "results": rows})


@endpoint("sql")
async def sql_query(svc: Service, request: Request, caller: Caller) -> Response:
    tool = svc.sql_tool
    if tool is None:
        raise RequestError(
            "this server has no SQL source (start it with --sql URL --sql-tables ...)",
            status=404,
            type="not_found",
        )
    req = parse(SqlRequest, await svc.body(request))
    result = await svc.call(tool.query, req.sql, req.params, limit=req.limit)
    return json_response(result.to_dict())


@endpoint("kbs")
async def list_kbs(svc: Service, request: Request, caller: Caller) -> Response:
    kbs = [svc.registry.get(n, caller).describe() for n in svc.registry.names(caller)]
    return json_response({"kbs": kbs, "user": caller.user})


@endpoint("healthz", admit=False, auth=False)
async def healthz(svc: Service, request: Request, caller: Caller) -> Response:
    return json_response({"status": "ok", "version": __version__, "pid": os.getpid()})


@endpoint("metrics", admit=False)
async def metrics(svc: Service, request: Request, caller: Caller) -> Response:
    # The metrics are labelled by knowledge base: only a key that may use every one reads them.
    if svc.registry.names(caller) != svc.registry.names(TRUSTED):
        raise RequestError(
            "/metrics needs a key that may use every knowledge base",
            status=403,
            type="forbidden",
        )
    return Response(svc.metrics.render(), media_type=CONTENT_TYPE)


# -- OpenAI-compatible -------------------------------------------------------------


def _usage(ans: Answer) -> dict[str, int]:
    from ..answer.context import estimate_tokens

    prompt = estimate_tokens(ans.prompt or "")
    completion = estimate_tokens(ans.text)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chat_question(req: ChatRequest) -> tuple[str, list[tuple[str, str]]]:
    """The last user message, and the user and assistant turns before it.

    The turns are the rewriter's history.
    """
    last = max((i for i, m in enumerate(req.messages) if m.role == "user"), default=None)
    if last is None:
        raise RequestError("messages: no 'user' message holds a question", type="invalid_value")
    question = req.messages[last].text()
    if not question.strip():
        raise RequestError("messages: the last user message is empty", type="invalid_value")
    turns: list[tuple[str, str]] = [
        (m.role, m.text()) for m in req.messages[:last] if m.role in ("user", "assistant")
    ]
    return question, turns[-MAX_HISTORY_TURNS:]


@endpoint("chat_completions")
async def chat_completions(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(ChatRequest, await svc.body(request))
    if req.n != 1:
        raise RequestError("field 'n': only n=1 is supported", type="invalid_value")
    k = check_k(req.k, svc.settings.max_k)
    question, history = _chat_question(req)
    served = svc.served(req.model, caller)
    args = {
        "generator": svc.generator,
        "history": history,
        "mode": req.mode,
        "where": req.where,
        "principal": caller.principal,
        "acl_statistics": check_acl_statistics(req.acl_statistics, caller.principal is not None),
        "threads": svc.settings.threads,
    }
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if req.stream:
        include_usage = bool((req.stream_options or {}).get("include_usage"))
        kb, snapshot = served.current

        def chunk(delta: dict[str, Any], finish: str | None, **extra: Any) -> bytes:
            body = {
                "id": ident, "object": "chat.completion.chunk", "created": created,
                "model": served.name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }  # fmt: skip
            return sse(None, body)

        async def events() -> AsyncIterator[bytes]:
            it = kb.answer_stream(question, k, **args)
            async for ev in svc.events(
                it, model_bound=svc.model_bound, deadline=request.state.deadline
            ):
                if ev.kind == "hits":
                    yield chunk(
                        {"role": "assistant", "content": ""}, None,
                        fastrag={
                            "kb": served.name, "snapshot": snapshot, "hits": _hits_json(ev.hits),
                        },
                    )  # fmt: skip
                elif ev.kind == "delta":
                    yield chunk({"content": ev.text}, None)
                else:
                    ans = ev.answer
                    svc.answered(served.name, ans.found, bool(ans.citations))
                    yield chunk({}, "stop", fastrag=_answer_json(served, snapshot, ans))
                    if include_usage:
                        yield sse(None, {
                            "id": ident, "object": "chat.completion.chunk", "created": created,
                            "model": served.name, "choices": [], "usage": _usage(ans),
                        })  # fmt: skip
            yield sse(None, "[DONE]")

        return _stream(_guarded(svc, "chat_completions", events()))
    kb, snapshot = served.current
    ans = await svc.call(kb.answer, question, k, model_bound=svc.model_bound, **args)
    svc.answered(served.name, ans.found, bool(ans.citations))
    return json_response(
        {
            "id": ident,
            "object": "chat.completion",
            "created": created,
            "model": served.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ans.text},
                    "finish_reason": "stop",
                }
            ],
            "usage": _usage(ans),
            "fastrag": _answer_json(served, snapshot, ans),
        }
    )


@endpoint("models")
async def list_models(svc: Service, request: Request, caller: Caller) -> Response:
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "fastrag"}
        for name in svc.registry.names(caller)
    ]
    return json_response({"object": "list", "data": data})


def _embed(kb: Any, texts: list[str], input_type: str) -> np.ndarray:
    if input_type == "document":
        return document_vectors(kb.embedder, texts)
    return kb.embed_questions(texts)


@endpoint("embeddings")
async def embeddings(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(EmbeddingsRequest, await svc.body(request))
    texts = [req.input] if isinstance(req.input, str) else list(req.input)
    if not texts:
        raise RequestError("field 'input' must hold at least one text", type="invalid_value")
    if len(texts) > svc.settings.max_batch * 8:
        raise RequestError(
            f"field 'input' holds {len(texts)} texts; at most {svc.settings.max_batch * 8}",
            type="out_of_range",
        )
    for i, t in enumerate(texts):
        if not t.strip():
            raise RequestError(f"field 'input[{i}]' is empty", type="invalid_value")
    served = svc.served(req.model, caller)
    kb, _ = served.current
    dim = kb.embedder.dim
    if req.dimensions is not None and req.dimensions != dim:
        raise RequestError(
            f"field 'dimensions': the embedder of {served.name!r} makes {dim} dimensions, "
            f"not {req.dimensions}",
            type="invalid_value",
        )
    vectors = np.ascontiguousarray(await svc.call(_embed, kb, texts, req.input_type), dtype="<f4")
    if req.encoding_format == "base64":
        items: list[Any] = [base64.b64encode(v.tobytes()).decode() for v in vectors]
    else:
        items = vectors.tolist()
    tokens = sum(len(t) for t in texts) // 4 or 1
    return json_response(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(items)
            ],
            "model": served.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


# -- page --------------------------------------------------------------------------


def _static_dir() -> str:
    return str(resources.files("fastrag.serve") / "static")


async def page(request: Request) -> Response:
    return FileResponse(f"{_static_dir()}/index.html", media_type="text/html; charset=utf-8")


# -- application -------------------------------------------------------------------


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


class _SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every HTTP response (streams included)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


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


async def _warm_app(app: Starlette, svc: Service) -> None:
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


def create_app(settings: ServeSettings, *, registry: Registry | None = None) -> Starlette:
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
    starlette.applications.Starlette
    """
    svc = Service(settings, registry)
    from .mcp import build_mcp

    mcp_server = build_mcp(
        svc.registry, generator=svc.generator, max_k=settings.max_k, threads=settings.threads,
        sql_tool=svc.sql_tool,
    )  # fmt: skip
    mcp_app = mcp_server.streamable_http_app(
        stateless_http=True, json_response=True, host=settings.host,
        max_request_body_size=settings.max_body,
    )  # fmt: skip
    mcp_endpoint = mcp_app.routes[0].endpoint  # type: ignore[attr-defined]

    mcp_route = _MCPRoute(svc, mcp_endpoint)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with mcp_server.session_manager.run(), anyio.create_task_group() as tg:
                await _warm_app(app, svc)
                if settings.reload_interval > 0:
                    tg.start_soon(_watch, svc)
                yield
                tg.cancel_scope.cancel()
        finally:
            svc.close()

    routes = [
        Route("/", page, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=_static_dir()), name="static"),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/kbs", list_kbs, methods=["GET"]),
        Route("/v1/retrieve", retrieve, methods=["POST"]),
        Route("/v1/retrieve/batch", retrieve_batch, methods=["POST"]),
        Route("/v1/answer", answer, methods=["POST"]),
        Route("/v1/answer/batch", answer_batch, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
        Route("/v1/sql", sql_query, methods=["POST"]),
        Route("/mcp", mcp_route, methods=["GET", "POST", "DELETE"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(_SecurityHeaders)],
        exception_handlers={HTTPException: _not_found, Exception: _server_error},
    )
    app.state.service = svc
    return app


def create_app_from_env() -> Starlette:
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
