"""What every route of ``fastrag serve`` shares: the :class:`Service`, the endpoint wrapper, errors.

Every route parses its request, calls the public :class:`~fastrag.KnowledgeBase`
API (in a worker thread, so the event loop keeps accepting) and writes the
result; the engine does the retrieval and answering. Around each call
(:func:`endpoint`):

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
- **metrics**: requests, errors and latency by endpoint.

Streams are Server-Sent Events. A client that disconnects mid-stream stops
the stream: the answer's iterator is closed, which closes the connection to
a chat model and so cancels the model call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import logging
import os
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse

from ..errors import (
    ConfigError,
    FastragError,
    ModelError,
    RequestError,
    SnapshotNotFoundError,
    SqlQueryError,
    StageTimeoutError,
)
from .keys import TRUSTED, Caller, KeyRing, presented_key
from .metrics import Metrics
from .registry import Registry, Served
from .settings import ServeSettings, engine_threads_for
from .shared import llm_generator

__all__ = [
    "SECURITY_HEADERS",
    "Deadline",
    "EnginePool",
    "Handler",
    "Service",
    "classify",
    "endpoint",
    "error_body",
    "error_response",
    "guarded",
    "json_response",
    "log_failure",
    "snapshot_of",
    "sse",
    "stream",
]

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


class EnginePool:
    """The worker threads of a worker process's engine calls (retrievals, extractive answers).

    ``await pool.run(fn)`` hands ``fn`` to one of ``n`` threads and waits
    for its result; at most ``n`` calls run at once, the others queue. What
    :func:`anyio.to_thread.run_sync` with a capacity limiter does, with a
    hand-off of one lock release to the thread and one
    ``call_soon_threadsafe`` back: about half its CPU per hand-off, most of
    it GIL-held Python that another thread's kernel could have overlapped
    (BENCHMARKS.md, "Session 11"). An idle thread is
    woken last in, first out: one caller at a time keeps meeting the same
    thread, whose caches (and Numba's thread team) are warm; woken in turn,
    two threads served one connection 15 % fewer requests. A caller cancelled
    while its call waits in the queue (a deadline, a disconnect) takes it
    out: the call never runs; one cancelled while its call runs stops
    waiting at once, and the thread finishes the call and drops its result,
    as ``abandon_on_cancel=True`` does. A ``StopIteration`` escaping ``fn``
    reaches the caller as a ``RuntimeError`` (a future cannot hold it). The
    call runs in a copy of the caller's context variables. Threads start on
    first use (again in a forked child) and end at :meth:`close`, after
    which the pool takes no more calls.

    Parameters
    ----------
    n : int
        Threads, ``>= 1``.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._mutex = threading.Lock()
        self._idle: list[_Worker] = []  # a stack: the last to go idle is the first woken
        self._pending: collections.deque[Any] = collections.deque()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._pid = os.getpid()

    def run(self, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        """A future of ``fn()``'s result (or exception), computed in a pool thread."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        job = (loop, future, contextvars.copy_context(), fn)
        start = False
        with self._mutex:
            if self._pid != os.getpid():  # a forked child: the parent's threads are not here
                self._pid, self._idle, self._threads = os.getpid(), [], []
                self._pending = collections.deque()
            if self._closed:
                raise RuntimeError("the engine pool is closed (the server is shutting down)")
            if self._idle:
                worker = self._idle.pop()  # the one idle the shortest: its caches are warm
                worker.job = job
                worker.wake.release()
                return future
            self._pending.append(job)
            if len(self._threads) < self.n:
                start = True
                thread = threading.Thread(
                    target=self._work, daemon=True, name=f"fastrag-engine-{len(self._threads)}"
                )
                self._threads.append(thread)
        if start:
            thread.start()
        return future

    def _work(self) -> None:
        me = _Worker()
        job = self._next(me)
        while job is not None:
            loop, future, context, fn = job
            if future.done():  # its caller was cancelled while it waited: nobody wants it
                job = self._next(me)
                continue
            settle: Callable[[Any, Any], None]
            try:
                settle, value = _succeed, context.run(fn)
            except StopIteration as exc:  # a future cannot hold one (asyncio refuses it)
                settle, value = _fail, RuntimeError(f"an engine call raised StopIteration: {exc!r}")
                value.__cause__ = exc
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                settle, value = _fail, exc
            # Queue this thread (or take the next job) before replying: a caller that asks
            # again as soon as it has its answer then finds this thread first.
            job = self._next(me, reply=(loop, settle, future, value))

    def _next(self, me: _Worker, reply: tuple[Any, ...] | None = None) -> Any:
        """The next job of thread ``me``: a pending one, else one handed over once idle.

        ``reply`` (the last call's answer) is sent once ``me`` is queued as
        idle or has its next job. ``None``: the pool is closed.
        """
        with self._mutex:
            if self._pending:
                job = self._pending.popleft()
            elif self._closed:
                job = None
            else:
                job = _IDLE
                self._idle.append(me)
        if reply is not None:
            _reply(*reply)
        if job is _IDLE:
            me.wake.acquire()  # until run() hands this thread a job, or close() a None
            job, me.job = me.job, None
        return job

    def close(self) -> None:
        """End the threads once the calls queued before are done (does not wait)."""
        with self._mutex:
            self._closed = True
            for worker in self._idle:
                worker.job = None
                worker.wake.release()
            self._idle = []
            self._threads = []


class _Worker:
    """An engine thread's hand-off slot: ``wake`` is released with ``job`` set."""

    __slots__ = ("job", "wake")

    def __init__(self) -> None:
        self.job: Any = None
        self.wake = threading.Lock()
        self.wake.acquire()


_IDLE = object()  # EnginePool._next: wait for a job to be handed over


def _reply(loop: asyncio.AbstractEventLoop, settle: Any, future: Any, value: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
        loop.call_soon_threadsafe(settle, future, value)


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():  # a cancelled caller has gone: the result is dropped
        future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


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
        self.generator: Any = llm_generator(settings.llm)
        rewriter = None
        if self.generator is not None:
            from ..retrieve.rewrite import LLMRewriter

            # A chat's follow-up ("and for contractors?") is rewritten by the model
            # from the conversation; a question asked alone keeps the rule-based rewrite.
            rewriter = LLMRewriter(self.generator, follow_ups_only=True)
        self.registry = registry if registry is not None else Registry(settings.kbs, rewriter)
        self.metrics = Metrics()
        engine_threads = engine_threads_for(settings.engine_threads)
        self.inline = engine_threads == 0
        self.engine = EnginePool(max(1, engine_threads))
        self.model_limiter = anyio.CapacityLimiter(settings.model_threads)
        from .mcp import sql_tool_of

        self.sql_tool = sql_tool_of(settings)
        self.held = 0
        self.warming = False  # set while the app warms itself up, before it serves anyone

    def close(self) -> None:
        """Close network connections: the chat model's and any HTTP embedder's."""
        self.engine.close()
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
            self.metrics.retrieved(kb, questions)

    def answered(self, kb: str, found: bool, citing: bool) -> None:
        """Count one answer (not while warming up)."""
        if not self.warming:
            self.metrics.answered(kb, found, citing)

    # -- engine calls --------------------------------------------------------------
    async def call(
        self, fn: Callable[..., Any], *args: Any, model_bound: bool = False, **kwargs: Any
    ) -> Any:
        """Run a blocking engine call: on the event loop (``engine_threads=0``) or in a thread.

        In a thread, the deadline answers the request at once; the thread
        finishes its call in the background and its result is dropped.
        """
        if not model_bound:
            if self.inline:
                return fn(*args, **kwargs)
            return await self.engine.run(functools.partial(fn, *args, **kwargs))
        return await anyio.to_thread.run_sync(
            functools.partial(fn, *args, **kwargs),
            limiter=self.model_limiter,
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
        deadline: Deadline | None = getattr(request.state, "deadline_scope", None)
        own = deadline is None  # called outside an endpoint: a deadline of its own
        if own:
            deadline = Deadline()
        assert deadline is not None
        deadline.start(self.settings.body_timeout)  # the body's own deadline while it is read
        parts, size, late = [], 0, False
        try:
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
        except asyncio.CancelledError:
            if not deadline.settle():  # not (only) the body's deadline: passed on
                raise
            late = True
        finally:
            if own:
                deadline.settle()
            else:
                deadline.start(self.settings.timeout)  # the request's deadline again
                request.state.deadline = time.monotonic() + self.settings.timeout
        if late:
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
                        item = await self.call(pump.step, model_bound=model_bound)
                if item is _END:
                    return
                yield item
        finally:
            pump.abandon()


class Deadline:
    """A request's deadline on the event loop: :meth:`start` arms a timer that cancels its task.

    What :func:`anyio.fail_after` does for a request, for less: one
    ``loop.call_at`` timer instead of a cancel scope's bookkeeping (measured
    in BENCHMARKS.md, "Session 11"). Leaving the
    ``with`` block stops the timer; a cancellation the timer made is turned
    into :class:`TimeoutError` there (answered 504), or, while the body is
    being received under its own deadline, into the body's 408 by
    :meth:`Service.body`. Any other cancellation (a client gone, a shutdown)
    passes through, also one that arrives beside the timer's (on Python
    3.11+, counted as :func:`asyncio.timeout` counts them; 3.10 cannot tell
    them apart). A worker thread the request waits on (:class:`EnginePool`,
    or ``anyio.to_thread.run_sync(abandon_on_cancel=True)``) is abandoned.
    Unlike a cancel scope, the timer cancels once: a handler that swallows
    that cancellation runs on past the deadline.
    """

    __slots__ = ("_base", "_handle", "_loop", "_task", "fired")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._base = 0  # the task's pending cancellations when first armed (3.11+)
        self.fired = False  # the timer cancelled the task

    def start(self, seconds: float) -> Deadline:
        """Cancel the current task ``seconds`` from now (instead of any earlier setting)."""
        if self._handle is not None:
            self._handle.cancel()
        if self._task is None:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            cancelling = getattr(self._task, "cancelling", None)
            self._base = cancelling() if cancelling is not None else 0
        assert self._loop is not None
        self._handle = self._loop.call_at(self._loop.time() + seconds, self._fire)
        return self

    def _fire(self) -> None:
        self._handle = None
        if self._task is not None and not self._task.done():
            self.fired = True
            self._task.cancel()

    def settle(self) -> bool:
        """Stop the timer; whether its cancellation is the only one (it is taken back then)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        fired, self.fired = self.fired, False
        if not fired:
            return False
        uncancel = getattr(self._task, "uncancel", None)
        if uncancel is None:  # Python 3.10: the timer's cancellation, as far as one can tell
            return True
        return bool(uncancel() <= self._base)  # nobody else asked for a cancellation meanwhile

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if self.settle() and kind is not None and issubclass(kind, asyncio.CancelledError):
            raise TimeoutError("the request took longer than the server's timeout") from exc


# ------------------------------------------------------------------ the endpoint wrapper
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
                with Deadline().start(svc.settings.timeout) as deadline:
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
                svc.metrics.served(name, response.status_code, time.perf_counter() - t0)
            return response

        route.endpoint_name = name  # type: ignore[attr-defined]  # app._direct_routes
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


def stream(body: AsyncIterator[bytes]) -> StreamingResponse:
    """A Server-Sent Events response of ``body`` (not cached, not buffered by a proxy)."""
    return StreamingResponse(
        body,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def guarded(svc: Service, name: str, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """A stream that ends with an ``error`` event instead of breaking off on a failure."""
    try:
        async for chunk in body:
            yield chunk
    except Exception as exc:  # noqa: BLE001 - the client is told, the log has the rest
        status, kind, message, _ = classify(exc)
        log_failure(f"{name} (stream)", exc, status, kind, message)
        svc.metrics.errors.labels(name, kind).inc()
        yield sse("error", {**error_body(kind, message), "status": status})


async def snapshot_of(svc: Service, kb: Any, snapshot: str | None, req: Any) -> str | None:
    """The id of the snapshot a request reads: its ``"snapshot"`` resolved, or the served one."""
    if req.snapshot is None:
        return snapshot
    return await svc.call(kb.snapshot_id, req.snapshot)  # type: ignore[no-any-return]
