"""HTTP clients of OpenAI-compatible model servers: the transport every model call uses.

:class:`ModelClient` is the machinery; :class:`ChatClient` speaks
``POST {base_url}/chat/completions`` (``chat`` / ``achat``), and
:class:`fastrag.embed.OpenAIEmbedder` speaks ``POST {base_url}/embeddings``
on top of it. Nothing above this package talks HTTP to a model directly.

- ``httpx.Client`` / ``httpx.AsyncClient``, created lazily, one of each per
  instance, with connect and read timeouts; close them with :meth:`close` /
  :meth:`aclose` or use the object as a (async) context manager;
- at most ``max_concurrency`` requests in flight per instance;
- retries on HTTP 408, 429 and 5xx, on timeouts and on transport errors,
  with exponential backoff and full jitter, waiting at least what a
  ``Retry-After`` (or ``retry-after-ms``) header asks, capped at
  ``max_retry_after``; after ``max_retries`` retries a
  :class:`~fastrag.errors.RetryExhaustedError` (or its subclasses
  :class:`~fastrag.errors.RateLimitError`,
  :class:`~fastrag.errors.ModelTimeoutError`) carries the last status;
- HTTP 401/403 raise :class:`~fastrag.errors.AuthenticationError` at once;
  other 4xx raise :class:`~fastrag.errors.ModelError` at once;
- an answer that is not valid JSON or lacks a field raises
  :class:`~fastrag.errors.ModelResponseError` naming what is missing;
- httpx exceptions are translated at the boundary (``raise ... from exc``);
- the API key appears in no error message, log line or ``repr``: server
  messages are scrubbed of it before they are quoted.

Settings come from arguments, then from a :class:`~fastrag.config.ClientConfig`
given as ``config=``, then from the environment (see :mod:`fastrag.config`).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import email.utils
import functools
import json
import logging
import random
import ssl
import threading
import time
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import orjson

from ..config import ENV_API_KEY, ENV_CHAT_MODEL, ClientConfig, mask_url
from ..errors import (
    AuthenticationError,
    ConfigError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
    RetryExhaustedError,
)

__all__ = [
    "ChatClient",
    "ModelClient",
    "all_or_cancel",
    "parse_retry_after",
    "resolve_config",
]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")
_MASK = "***"
_SNIPPET = 300  # characters of a server's message quoted in an error


# --------------------------------------------------------------------------- helpers
def parse_retry_after(
    headers: Mapping[str, str], *, now: _dt.datetime | None = None
) -> float | None:
    """Seconds a server asks the client to wait before retrying.

    Reads ``retry-after-ms`` (milliseconds, sent by OpenAI) or else
    ``Retry-After``, as a number of seconds (fractions allowed) or an HTTP
    date. Header names are matched case-insensitively.

    Parameters
    ----------
    headers : mapping of str to str
        The response headers.
    now : datetime, optional
        The current time, for an HTTP date (default: now, UTC).

    Returns
    -------
    float or None
        Seconds, ``>= 0``; ``None`` when no usable header is present.
    """
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            millis = float(raw_ms.strip())
        except ValueError:
            millis = float("nan")
        if millis == millis and millis != float("inf"):
            return max(millis, 0.0) / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return max(seconds, 0.0) if seconds == seconds and seconds != float("inf") else None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:  # pragma: no cover - older Pythons returned None
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True)
class _Failure:
    """A retryable failure of one attempt."""

    reason: str
    status: int | None = None
    retry_after: float | None = None
    timeout: bool = False
    exc: BaseException | None = None


def _retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def resolve_config(config: ClientConfig | None, model_env: str, **overrides: Any) -> ClientConfig:
    """``config`` with ``overrides`` applied, or one read from the environment when it is None."""
    if config is None:
        return ClientConfig.from_env(model_env=model_env, **overrides)
    if not isinstance(config, ClientConfig):
        raise ConfigError(f"config must be a ClientConfig, got {type(config).__name__}")
    return config.replace(**overrides)


async def all_or_cancel(aws: Iterable[Awaitable[_T]]) -> list[_T]:
    """Run awaitables concurrently; on the first failure cancel the rest and re-raise it."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for t in tasks:
            if not t.done():
                t.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
            raise outcome
    return list(outcomes)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- machinery
_SHARD_CONNECTIONS = 4
"""Connections per pool of :class:`ShardedAsyncTransport`.

httpcore's connection pool matches every queued request against every
connection on each request and each response (O(requests x connections));
with 64 connections in one pool that cost about 10 ms of CPU per call and
capped ``answer_batch`` at 66 questions/s against a 50 ms server. Pools of
4 connections cut it 4-5x (``benchmarks/bench_answer_batch.py server``).
"""


@functools.lru_cache(maxsize=2)
def _ssl_context(trust_env: bool) -> ssl.SSLContext:
    """One default SSL context per setting (each costs ~20 ms to make)."""
    return httpx.create_ssl_context(trust_env=trust_env)


class ShardedAsyncTransport(httpx.AsyncBaseTransport):
    """Several small httpx connection pools behind one transport, least busy first.

    The async client of :class:`OpenAIChatGenerator` and
    :class:`OpenAIEmbedder` uses it when ``max_concurrency`` exceeds 4 and no
    transport is given: ``ceil(max_concurrency / 4)`` pools of 4 connections.
    Responses are read in full before they are handed over (model replies
    are small), so a connection goes back to its pool at once.

    Parameters
    ----------
    connections : int
        Total connections (the client's ``max_concurrency``).
    per_pool : int, default 4
        Connections per pool.
    trust_env : bool, default True
        Passed to the pools (``SSL_CERT_FILE`` and friends).
    """

    def __init__(self, connections: int, *, per_pool: int = _SHARD_CONNECTIONS,
                 trust_env: bool = True) -> None:  # fmt: skip
        if connections < 1 or per_pool < 1:
            raise ConfigError("connections and per_pool must be positive")
        n = -(-connections // per_pool)
        limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool)
        ctx = _ssl_context(trust_env)
        self._pools = [
            httpx.AsyncHTTPTransport(limits=limits, verify=ctx, trust_env=trust_env)
            for _ in range(n)
        ]
        self._busy = [0] * n

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` through the least busy pool and read the whole response."""
        busy = self._busy
        i = busy.index(min(busy))
        busy[i] += 1
        try:
            response = await self._pools[i].handle_async_request(request)
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
            return response
        finally:
            busy[i] -= 1

    async def aclose(self) -> None:
        """Close every pool."""
        for pool in self._pools:
            await pool.aclose()


class ModelClient:
    """Shared HTTP machinery of the OpenAI-compatible clients.

    Parameters
    ----------
    client_config : ClientConfig
        Where and how to connect.
    transport : httpx.BaseTransport or httpx.AsyncBaseTransport, optional
        Used by the sync client when it is a sync transport, and by the async
        client when it is an async one (``httpx.MockTransport`` is both).
    async_transport : httpx.AsyncBaseTransport, optional
        Transport of the async client (wins over ``transport``).
    """

    _UNPICKLED = ("_client", "_aclient", "_aloop", "_asem", "_lock", "_slots", "_rng")

    def __init__(
        self,
        client_config: ClientConfig,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if transport is not None and not isinstance(
            transport, (httpx.BaseTransport, httpx.AsyncBaseTransport)
        ):
            raise ConfigError(
                f"transport must be an httpx transport, got {type(transport).__name__}"
            )
        if async_transport is not None and not isinstance(
            async_transport, httpx.AsyncBaseTransport
        ):
            raise ConfigError(
                f"async_transport must be an httpx.AsyncBaseTransport, got "
                f"{type(async_transport).__name__}"
            )
        self.client_config = client_config
        self._transport = transport if isinstance(transport, httpx.BaseTransport) else None
        self._async_transport = async_transport or (
            transport if isinstance(transport, httpx.AsyncBaseTransport) else None
        )
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._client: httpx.Client | None = None
        self._aclient: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._asem: asyncio.Semaphore | None = None
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.client_config.max_concurrency)
        self._rng = random.Random()

    # -- pickling (e.g. to ship a client to worker processes) -----------------
    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in self._UNPICKLED}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    # -- clients --------------------------------------------------------------
    def _client_kwargs(self) -> dict[str, Any]:
        cfg = self.client_config
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": "fastrag (python-httpx)",
        }
        if cfg.api_key is not None:
            headers["Authorization"] = f"Bearer {cfg.api_key}"
        return {
            "base_url": cfg.base_url + "/",
            "headers": headers,
            "timeout": httpx.Timeout(cfg.read_timeout, connect=cfg.connect_timeout),
            "limits": httpx.Limits(
                max_connections=max(cfg.max_concurrency, 10),
                max_keepalive_connections=cfg.max_concurrency,
            ),
            "trust_env": cfg.trust_env,
            "follow_redirects": False,
        }

    def _sync_client(self) -> httpx.Client:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = httpx.Client(transport=self._transport, **self._client_kwargs())
                client = self._client
        return client

    def _async_state(self) -> tuple[httpx.AsyncClient, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._asem is None or self._aloop is not loop:
            # One async client per event loop: a client bound to a finished loop
            # cannot be reused (call aclose() before that loop ends).
            cfg = self.client_config
            transport = self._async_transport
            if transport is None and cfg.max_concurrency > _SHARD_CONNECTIONS:
                transport = ShardedAsyncTransport(cfg.max_concurrency, trust_env=cfg.trust_env)
            self._aclient = httpx.AsyncClient(transport=transport, **self._client_kwargs())
            self._asem = asyncio.Semaphore(self.client_config.max_concurrency)
            self._aloop = loop
        return self._aclient, self._asem

    def close(self) -> None:
        """Close the sync HTTP client (a later call opens a new one)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close the async HTTP client (a later call opens a new one)."""
        client, self._aclient, self._asem, self._aloop = self._aclient, None, None, None
        if client is not None:
            await client.aclose()

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self: _T) -> _T:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
        self.close()

    # -- messages ---------------------------------------------------------------
    def _redact(self, text: str) -> str:
        key = self.client_config.api_key
        if key and len(key) >= 4:
            text = text.replace(key, _MASK)
        return text

    def _url(self, path: str) -> str:
        return f"{mask_url(self.client_config.base_url)}/{path}"

    def _server_message(self, content: bytes) -> str:
        """The error message a server put in its answer, scrubbed and shortened."""
        message: Any = None
        try:
            payload = orjson.loads(content)
        except orjson.JSONDecodeError:
            payload = None
        if isinstance(payload, dict):
            err = payload.get("error")
            if isinstance(err, dict):
                message = err.get("message")
            elif isinstance(err, str):
                message = err
            if message is None:
                message = payload.get("message") or payload.get("detail")
        if message is None:
            message = content.decode("utf-8", "replace")
        message = " ".join(str(message).split())
        if len(message) > _SNIPPET:
            message = message[: _SNIPPET - 1] + "…"
        return self._redact(message)

    def _payload_error(self, payload: Mapping[str, Any]) -> str:
        """The ``error`` a 2xx answer holds instead of a result, scrubbed and shortened."""
        return self._server_message(orjson.dumps(payload, default=str))

    def _status_failure(self, response: httpx.Response, url: str, attempt: int) -> _Failure | None:
        """None for a 2xx answer, a failure to retry, or raise for a final one."""
        status = response.status_code
        if 200 <= status < 300:
            return None
        detail = self._server_message(response.content)
        said = f": {detail}" if detail else ""
        head = f"POST {url}: HTTP {status} {response.reason_phrase}".rstrip()
        if status in (401, 403):
            if self.client_config.api_key is None:
                hint = f"no API key was sent; pass api_key=... or set {ENV_API_KEY}"
            elif status == 401:
                hint = f"the server rejected the API key; check api_key or {ENV_API_KEY}"
            else:
                hint = (
                    "the server rejected the API key for this request (it may lack access to "
                    f"model {self.client_config.model!r})"
                )
            raise AuthenticationError(
                f"{head}{said} ({hint})", status=status, attempts=attempt, url=url
            )
        if _retryable_status(status):
            return _Failure(
                reason=f"{head}{said}",
                status=status,
                retry_after=parse_retry_after(response.headers),
            )
        hint = ""
        if status == 404:
            hint = " (check base_url, which usually ends in /v1, and the model name)"
        elif 300 <= status < 400:
            hint = " (redirects are not followed; check base_url)"
        raise ModelError(f"{head}{said}{hint}", status=status, attempts=attempt, url=url)

    def _transport_failure(self, exc: Exception, url: str, attempt: int) -> _Failure:
        """A failure to retry for a timeout or network error; raise for anything else."""
        cfg = self.client_config
        if isinstance(exc, httpx.TimeoutException):
            if isinstance(exc, httpx.ConnectTimeout):
                why = f"could not connect within the connect timeout of {cfg.connect_timeout:g} s"
            elif isinstance(exc, httpx.PoolTimeout):
                why = f"no free connection within {cfg.read_timeout:g} s"
            elif isinstance(exc, httpx.WriteTimeout):
                why = f"could not send the request within {cfg.read_timeout:g} s"
            else:
                why = f"no answer within the read timeout of {cfg.read_timeout:g} s"
            return _Failure(reason=f"POST {url}: {why}", timeout=True, exc=exc)
        text = self._redact(str(exc)) or "no details"
        if isinstance(exc, (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError)):
            return _Failure(reason=f"POST {url}: {type(exc).__name__}: {text}", exc=exc)
        if isinstance(exc, httpx.DecodingError):
            raise ModelResponseError(
                f"POST {url}: the response body could not be decoded: {text}",
                attempts=attempt,
                url=url,
            ) from exc
        raise ModelError(
            f"POST {url}: {type(exc).__name__}: {text}", attempts=attempt, url=url
        ) from exc

    def _exhausted(self, failure: _Failure, url: str, attempts: int) -> RetryExhaustedError:
        cls: type[RetryExhaustedError]
        if failure.timeout:
            cls = ModelTimeoutError
        elif failure.status == 429:
            cls = RateLimitError
        else:
            cls = RetryExhaustedError
        plural = "s" if attempts != 1 else ""
        return cls(
            f"{failure.reason} (gave up after {attempts} attempt{plural}, "
            f"max_retries={self.client_config.max_retries})",
            status=failure.status,
            attempts=attempts,
            url=url,
        )

    def _retry_delay(self, retry: int, failure: _Failure) -> float:
        """Seconds to wait before retry number ``retry`` (from 0)."""
        cfg = self.client_config
        ceiling = min(cfg.backoff_cap, cfg.backoff_base * 2.0 ** min(retry, 60))
        delay = self._rng.uniform(0.0, ceiling) if cfg.jitter else ceiling
        if failure.retry_after is not None:
            delay = max(delay, min(failure.retry_after, cfg.max_retry_after))
        return delay

    def _log_retry(self, failure: _Failure, attempt: int, delay: float) -> None:
        _log.warning(
            "%s; retry %d of %d in %.3g s",
            failure.reason,
            attempt,
            self.client_config.max_retries,
            delay,
        )

    def _decode(self, response: httpx.Response, url: str, attempt: int) -> dict[str, Any]:
        content = response.content
        try:
            payload = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            try:  # the standard library also accepts NaN / Infinity, checked by the caller
                payload = json.loads(content)
            except (ValueError, RecursionError):
                start = self._redact(content[:60].decode("utf-8", "replace"))
                raise ModelResponseError(
                    f"POST {url}: the response (HTTP {response.status_code}, {len(content)} "
                    f"bytes) is not valid JSON; it starts {start!r}",
                    status=response.status_code,
                    attempts=attempt,
                    url=url,
                ) from exc
        if not isinstance(payload, dict):
            raise ModelResponseError(
                f"POST {url}: the response is a JSON {type(payload).__name__}, expected an object",
                status=response.status_code,
                attempts=attempt,
                url=url,
            )
        return payload

    # -- requests -----------------------------------------------------------------
    def _post_json(self, path: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``payload`` as JSON to ``{base_url}/{path}``, with retries; the decoded answer."""
        body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
        url = self._url(path)
        client = self._sync_client()
        attempt = 0
        while True:
            attempt += 1
            try:
                with self._slots:
                    response = client.post(path, content=body)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                failure = self._transport_failure(exc, url, attempt)
            else:
                failure = self._status_failure(response, url, attempt)  # type: ignore[assignment]
                if failure is None:
                    return self._decode(response, url, attempt)
            if attempt > self.client_config.max_retries:
                raise self._exhausted(failure, url, attempt) from failure.exc
            delay = self._retry_delay(attempt - 1, failure)
            self._log_retry(failure, attempt, delay)
            time.sleep(delay)

    def _post_lines(self, path: str, payload: Mapping[str, Any]) -> Iterator[str]:
        """POST ``payload`` and yield the lines of a streamed answer (Server-Sent Events).

        Retries as :meth:`_post_json` until the first line arrives; a failure
        after that raises (a retry would repeat what was already yielded).
        Closing the iterator closes the connection, which cancels the call
        on the server's side.
        """
        body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
        url = self._url(path)
        client = self._sync_client()
        attempt = 0
        while True:
            attempt += 1
            started = False
            try:
                with self._slots, client.stream("POST", path, content=body) as response:
                    if not 200 <= response.status_code < 300:
                        response.read()
                    failure = self._status_failure(response, url, attempt)
                    if failure is None:
                        for line in response.iter_lines():
                            started = True
                            yield line
                        return
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                failure = self._transport_failure(exc, url, attempt)
                if started:
                    raise ModelError(
                        f"{failure.reason} (the stream broke off after it had started)",
                        attempts=attempt,
                        url=url,
                    ) from exc
            if attempt > self.client_config.max_retries:
                raise self._exhausted(failure, url, attempt) from failure.exc
            delay = self._retry_delay(attempt - 1, failure)
            self._log_retry(failure, attempt, delay)
            time.sleep(delay)

    async def _apost_json(self, path: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Async twin of :meth:`_post_json`."""
        body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
        url = self._url(path)
        client, slots = self._async_state()
        attempt = 0
        while True:
            attempt += 1
            try:
                async with slots:
                    response = await client.post(path, content=body)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                failure = self._transport_failure(exc, url, attempt)
            else:
                failure = self._status_failure(response, url, attempt)  # type: ignore[assignment]
                if failure is None:
                    return self._decode(response, url, attempt)
            if attempt > self.client_config.max_retries:
                raise self._exhausted(failure, url, attempt) from failure.exc
            delay = self._retry_delay(attempt - 1, failure)
            self._log_retry(failure, attempt, delay)
            await asyncio.sleep(delay)


# --------------------------------------------------------------------------- chat
class ChatClient(ModelClient):
    """A client of ``POST {base_url}/chat/completions``: ``chat`` and ``achat``.

    Rewriters, rerankers, judges and conflict checks take one of these (or
    any callable of the form of :meth:`chat`); the answer generator,
    :class:`~fastrag.OpenAIChatGenerator`, is one with the grounded prompt.

    Parameters
    ----------
    base_url : str, optional
        Server root, e.g. ``https://api.openai.com/v1``; default
        ``FASTRAG_BASE_URL``.
    api_key : str, optional
        Bearer token; default ``FASTRAG_API_KEY`` (none is sent if unset).
    model : str, optional
        Chat model; default ``FASTRAG_CHAT_MODEL``.
    config : ClientConfig, optional
        Ready connection settings; the environment is then not read, and
        the other arguments override its fields.
    timeout : float, optional
        Read timeout in seconds (``ClientConfig.read_timeout``).
    connect_timeout : float, optional
        Connect timeout in seconds.
    max_retries : int, optional
        Retries after the first attempt.
    max_concurrency : int, optional
        Requests in flight at once from this instance.
    temperature : float, default 0.0
        Sampling temperature (0 keeps answers as deterministic as the
        server allows).
    max_tokens : int, optional
        Cap on the answer's length; the server's default when ``None``.
    extra_body : mapping, optional
        More JSON fields for every chat request (``seed``, ``stop``, ...).
    transport : httpx transport, optional
        Replaces the network, e.g. ``httpx.MockTransport`` in tests.
    async_transport : httpx.AsyncBaseTransport, optional
        Transport of the async client, when it differs from ``transport``.

    Raises
    ------
    ConfigError
        When the base URL or model is missing (the message names the
        variable to set) or a value is invalid.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        *,
        config: ClientConfig | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        max_retries: int | None = None,
        max_concurrency: int | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        extra_body: Mapping[str, Any] | None = None,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        cfg = resolve_config(
            config,
            ENV_CHAT_MODEL,
            base_url=base_url,
            api_key=api_key,
            model=model,
            read_timeout=timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
        )
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not (0.0 <= float(temperature) <= 2.0)
        ):
            raise ConfigError(f"temperature must be a number in [0, 2], got {temperature!r}")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise ConfigError(f"max_tokens must be a positive int or None, got {max_tokens!r}")
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ConfigError(f"extra_body must be a mapping, got {type(extra_body).__name__}")
        super().__init__(cfg, transport, async_transport)
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})

    @property
    def model(self) -> str:
        """The configured model name."""
        return self.client_config.model

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"base_url={mask_url(self.client_config.base_url)!r}, "
            f"temperature={self.temperature!r}, max_tokens={self.max_tokens!r})"
        )

    # -- low level --------------------------------------------------------------
    def _chat_body(
        self, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
    ) -> dict[str, Any]:
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
            raise ConfigError("messages must be a non-empty list of {'role': ..., 'content': ...}")
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping) or "role" not in m or "content" not in m:
                raise ConfigError(f"messages[{i}] must be a mapping with 'role' and 'content'")
        body: dict[str, Any] = {
            "model": self.client_config.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        body.update(self.extra_body)
        body.update(params)
        return {k: v for k, v in body.items() if v is not None}

    def _parse_chat(self, payload: Mapping[str, Any]) -> tuple[str, dict[str, Any], str]:
        url = self._url("chat/completions")
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices:
            err = payload.get("error")
            extra = f"; it holds an error: {self._payload_error(payload)}" if err else ""
            raise ModelResponseError(
                f"POST {url}: the response has no 'choices' list{extra}", url=url
            )
        first = choices[0]
        message = first.get("message") if isinstance(first, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, str):
            raise ModelResponseError(
                f"POST {url}: the response has no string 'choices[0].message.content'", url=url
            )
        if isinstance(first, Mapping) and first.get("finish_reason") == "length":
            _log.warning("POST %s: the answer was cut off at max_tokens", url)
        usage = payload.get("usage")
        model = payload.get("model")
        return (
            content,
            dict(usage) if isinstance(usage, Mapping) else {},
            model if isinstance(model, str) and model else self.client_config.model,
        )

    def chat(
        self, messages: Sequence[Mapping[str, Any]], **params: Any
    ) -> tuple[str, dict[str, Any]]:
        """One chat completion: the assistant's text and the server's usage.

        For other stages (rerankers, judges) that need a model but not the
        grounded prompt.

        Parameters
        ----------
        messages : sequence of mapping
            Chat messages, each with ``role`` and ``content``.
        **params
            More request fields (``temperature``, ``max_tokens``, ``stop``,
            ``response_format``, ...); they override the instance's. ``None``
            drops a field.

        Returns
        -------
        text : str
            ``choices[0].message.content``.
        usage : dict
            The response's ``usage`` object (empty when absent).

        Raises
        ------
        AuthenticationError, ModelError, ModelResponseError, RetryExhaustedError
            See the module documentation.
        """
        text, usage, _ = self._parse_chat(
            self._post_json("chat/completions", self._chat_body(messages, params))
        )
        return text, usage

    async def achat(
        self, messages: Sequence[Mapping[str, Any]], **params: Any
    ) -> tuple[str, dict[str, Any]]:
        """Async twin of :meth:`chat`.

        Parameters
        ----------
        messages : sequence of mapping
            Chat messages, each with ``role`` and ``content``.
        **params
            More request fields; see :meth:`chat`.

        Returns
        -------
        text : str
        usage : dict
        """
        payload = await self._apost_json("chat/completions", self._chat_body(messages, params))
        text, usage, _ = self._parse_chat(payload)
        return text, usage

    def chat_stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        info: dict[str, Any] | None = None,
        **params: Any,
    ) -> Iterator[str]:
        """One streamed chat completion: the assistant's text as it is generated.

        Sends ``stream: true`` and reads ``chat.completion.chunk`` events
        until ``data: [DONE]``. Stop iterating (or ``close()`` the iterator)
        to cancel the call: the connection is closed.

        Parameters
        ----------
        messages : sequence of mapping
            Chat messages, each with ``role`` and ``content``.
        info : dict, optional
            Filled with ``model`` (the model the server says answered) and
            ``usage`` (when the server reports it) as they arrive.
        **params
            More request fields; see :meth:`chat`.

        Yields
        ------
        str
            Non-empty pieces of ``choices[0].delta.content``, in order.

        Raises
        ------
        AuthenticationError, ModelError, ModelResponseError, RetryExhaustedError
            See the module documentation.
        """
        url = self._url("chat/completions")
        body = self._chat_body(messages, {**params, "stream": True})
        if info is not None:
            info.setdefault("model", self.client_config.model)
            info.setdefault("usage", {})
        for line in self._post_lines("chat/completions", body):
            if not line.startswith("data:"):
                continue  # comments, event names, blank separators
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise ModelResponseError(
                    f"POST {url}: a streamed event is not valid JSON: {self._redact(data[:60])!r}",
                    url=url,
                ) from exc
            if not isinstance(chunk, dict):
                raise ModelResponseError(
                    f"POST {url}: a streamed event is not a JSON object", url=url
                )
            if chunk.get("error"):
                raise ModelResponseError(
                    f"POST {url}: the stream reported an error: {self._payload_error(chunk)}",
                    url=url,
                )
            if info is not None:
                if isinstance(chunk.get("model"), str) and chunk["model"]:
                    info["model"] = chunk["model"]
                if isinstance(chunk.get("usage"), Mapping):
                    info["usage"] = dict(chunk["usage"])
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") if isinstance(choice, Mapping) else None
                content = delta.get("content") if isinstance(delta, Mapping) else None
                if isinstance(content, str) and content:
                    yield content
