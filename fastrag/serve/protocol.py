"""uvicorn's HTTP protocol with two guards of ``fastrag serve``'s connections.

uvicorn bounds an idle kept-alive connection (``timeout_keep_alive``) and the
size of a request's head (``h11_max_incomplete_event_size``), but not the
time a client takes to send the head: a connection that sends nothing, or a
header a second, is held for as long as the client likes, and a few hundred
of them hold every descriptor the worker has. So:

- **head deadline**: the request line and headers must be complete within
  ``header_timeout`` seconds, counted from the connection's opening, or, on a
  kept-alive connection, from the first byte of the next request (the idle
  time before it is ``timeout_keep_alive``'s). Past it the connection is
  closed: silently if nothing had arrived, after a 408 if part of a request
  had;
- **connection cap**: a connection beyond ``max_connections`` open at once is
  answered 503 with ``Retry-After`` and closed at once, instead of being held
  until it sends a request (uvicorn's ``limit_concurrency`` only answers
  requests).

The settings are two attributes of the :class:`uvicorn.Config`,
``header_timeout`` and ``max_connections`` (see
:func:`fastrag.serve.run.uvicorn_config`), and the protocol is named to
uvicorn by its import string (:func:`protocol_name`): worker processes
receive the configuration pickled, and unpickling it must not import
fastrag, or a worker would miss uvicorn's first health check while it does.
"""

from __future__ import annotations

import asyncio
import http
import importlib.util
import logging
from typing import Any

import orjson
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - uvicorn without its [standard] extra
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

__all__ = ["GuardedH11Protocol", "GuardedHttpToolsProtocol", "protocol_name", "raw_error"]

_log = logging.getLogger("fastrag.serve")


def raw_error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 response with the JSON error body, closing the connection."""
    from .app import SECURITY_HEADERS, error_body

    body = orjson.dumps(error_body(kind, message))
    lines = [
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *(f"{name}: {value}" for name, value in {**SECURITY_HEADERS, **(headers or {})}.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Guards:
    """The guards (see the module docstring), mixed into one of uvicorn's protocols.

    Both of uvicorn's protocols make a new ``self.cycle`` when a request's
    head is complete; that is the sign the head deadline is met.
    """

    # From uvicorn's protocol:
    config: uvicorn.Config
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    connections: set[Any]
    cycle: Any

    _head_timer: asyncio.TimerHandle | None = None
    _head_partial = False

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        limit = getattr(self.config, "max_connections", None)
        if limit is not None and len(self.connections) > limit:
            _log.warning("refused a connection: the limit of %d connections is reached", limit)
            self.transport.write(
                raw_error(
                    503,
                    "overloaded",
                    f"the server holds its limit of {limit} connections; retry shortly",
                    {"Retry-After": "1"},
                )
            )
            self.transport.close()
            return
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not before:  # a request's head is complete
            self._disarm_head_timer()
        elif self.cycle is None or self.cycle.response_complete:  # part of a request's head
            self._head_partial = True
            if self._head_timer is None and not self.transport.is_closing():
                self._arm_head_timer()  # the first bytes of a request on a kept-alive connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def _arm_head_timer(self) -> None:
        timeout = getattr(self.config, "header_timeout", None)
        if timeout is not None:
            self._head_timer = self.loop.call_later(timeout, self._head_timed_out)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._head_partial = False

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self._head_partial:
            timeout = getattr(self.config, "header_timeout", None)
            self.transport.write(
                raw_error(
                    408,
                    "header_timeout",
                    f"the request's line and headers did not arrive within {timeout:g} s",
                )
            )
        self.transport.close()


class GuardedH11Protocol(_Guards, H11Protocol):
    """uvicorn's h11 protocol with the guards."""


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(_Guards, HttpToolsProtocol):
        """uvicorn's httptools protocol with the guards."""

else:  # pragma: no cover
    GuardedHttpToolsProtocol = None  # type: ignore[assignment,misc]


def protocol_name() -> str:
    """The guarded protocol uvicorn's ``http="auto"`` would pick (httptools when installed).

    An import string, resolved by uvicorn when a worker loads its configuration.
    """
    name = (
        "GuardedHttpToolsProtocol"
        if importlib.util.find_spec("httptools")
        else "GuardedH11Protocol"
    )
    return f"{__name__}:{name}"
