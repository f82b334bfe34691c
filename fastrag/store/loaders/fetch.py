"""Fetching a web source safely: public addresses only, redirects checked, bounded time and size.

:func:`fetch` is what :class:`~fastrag.store.loaders.WebSource` reads a URL
with. Before any connection the host is resolved (``getaddrinfo``) and every
address it resolves to must be public: loopback, private (RFC 1918),
shared (100.64/10), link-local (169.254/16, the cloud metadata address
169.254.169.254 among them), unique-local IPv6, multicast, reserved and
unspecified addresses are refused with
:class:`~fastrag.errors.SourceRefusedError`, unless the caller passes
``allow_private=True`` (``--allow-private`` on ``fastrag index``). The
connection goes to the address that was checked (the URL's host kept as the
``Host`` header and TLS server name, so certificates are verified against
it), so a name that resolves differently a moment later (DNS rebinding)
cannot slip past the check. Redirects are followed here, one by one, each
new location checked the same way, at most ``LoadLimits.redirects`` of them.

The whole fetch, redirects and body included, has one deadline
(``LoadLimits.fetch_seconds``), and the body is read as a stream and
abandoned past ``LoadLimits.part_bytes``: both raise
:class:`~fastrag.errors.SourceLimitError`. Environment proxies are not used
(a proxy would connect to an address that was never checked).
"""

from __future__ import annotations

import ipaddress
import socket
import time
from typing import Any

from ...errors import SourceError, SourceLimitError, SourceRefusedError
from ._common import DEFAULT_LIMITS, LoadLimits
from .sql import safe_url

__all__ = ["check_address", "fetch", "resolve"]

_REDIRECTS = (301, 302, 303, 307, 308)
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def check_address(ip: _Address) -> str | None:
    """Why ``ip`` is not a public address (``"loopback"``, ``"private"``, ...), or None."""
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if mapped is not None:
            why = check_address(mapped)
            if why is not None:
                return why
    for kind in ("loopback", "link_local", "multicast", "unspecified", "reserved", "private"):
        if getattr(ip, f"is_{kind}"):
            return kind.replace("_", "-")
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "site-local"
    if not ip.is_global:
        return "non-public"
    return None


def resolve(host: str, port: int) -> list[_Address]:
    """Every address ``host`` resolves to (an IP literal: itself), in resolver order."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise SourceError(f"cannot resolve the host {host!r}: {exc}") from exc
    out: list[_Address] = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in out:
            out.append(ip)
    return out


def _pinned(url: Any, *, allow_private: bool, shown: str) -> tuple[list[Any], dict[str, str], str]:
    """The URLs to try (the host replaced by each checked address), headers, the TLS name."""
    if url.scheme not in ("http", "https"):
        raise SourceRefusedError(
            f"{shown}: only http and https URLs are fetched, not {url.scheme!r}"
        )
    host = url.raw_host.decode("ascii")  # IDNA-encoded, as DNS and TLS want it
    if not host:
        raise SourceError(f"{shown}: the URL names no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        addresses = resolve(host, port)
    except SourceError as exc:
        raise SourceError(f"{shown}: {exc}") from exc
    if not addresses:
        raise SourceError(f"{shown}: the host {host!r} resolves to no address")
    if not allow_private:
        for ip in addresses:
            why = check_address(ip)
            if why is not None:
                raise SourceRefusedError(
                    f"{shown}: the host {host!r} resolves to {ip}, a {why} address; private "
                    "addresses are not fetched (allow_private=True or --allow-private allows them)"
                )
    host_header = host if url.port is None else f"{host}:{url.port}"
    if ":" in host and not host.startswith("["):
        host_header = f"[{host}]" if url.port is None else f"[{host}]:{url.port}"
    return [url.copy_with(host=str(ip)) for ip in addresses], {"Host": host_header}, host


def fetch(
    url: str, *, limits: LoadLimits = DEFAULT_LIMITS, allow_private: bool = False
) -> tuple[bytes, str]:
    """GET ``url`` (following redirects): its body and content type (``text/html``, ...).

    Raises
    ------
    SourceRefusedError
        The URL (or a redirect) leads to a non-public address, or is not http(s).
    SourceLimitError
        The fetch outlasted ``limits.fetch_seconds``, took more than
        ``limits.redirects`` redirects, or its body is over ``limits.part_bytes``.
    SourceError
        The host cannot be resolved or reached, or answered other than HTTP 200.
    """
    import httpx

    shown = safe_url(url)
    deadline = time.monotonic() + limits.fetch_seconds
    try:
        current = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise SourceError(f"{shown}: not a valid URL: {exc}") from exc

    def late() -> SourceLimitError:
        return SourceLimitError(
            f"{shown}: not fetched within {limits.fetch_seconds:g} s (LoadLimits.fetch_seconds)"
        )

    with httpx.Client(trust_env=False, follow_redirects=False) as client:
        for _ in range(limits.redirects + 1):
            here = safe_url(str(current))
            targets, headers, sni = _pinned(current, allow_private=allow_private, shown=here)
            response = None
            for number, target in enumerate(targets, 1):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise late()
                timeout = {"connect": left, "read": left, "write": left, "pool": left}
                request = client.build_request(
                    "GET", target, headers=headers,
                    extensions={"sni_hostname": sni, "timeout": timeout},
                )  # fmt: skip
                try:
                    response = client.send(request, stream=True)
                    break
                except httpx.ConnectError as exc:  # the next checked address, if any
                    if number == len(targets):
                        raise SourceError(f"{here}: cannot be fetched: {exc}") from exc
                except httpx.TimeoutException as exc:
                    raise late() from exc
                except httpx.HTTPError as exc:
                    raise SourceError(f"{here}: cannot be fetched: {exc}") from exc
            assert response is not None
            try:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    current = current.join(response.headers["location"])
                    continue
                if response.status_code != 200:
                    raise SourceError(f"{here}: the server answered HTTP {response.status_code}")
                kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                return _read(response, limits, deadline, here, late), kind
            finally:
                response.close()
    raise SourceLimitError(
        f"{shown}: more than {limits.redirects} redirects (LoadLimits.redirects)"
    )


def _read(response: Any, limits: LoadLimits, deadline: float, here: str, late: Any) -> bytes:
    """The body, read as a stream: stopped past the size cap or the deadline."""
    import httpx

    cap = limits.part_bytes
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise SourceLimitError(
            f"{here}: the body is {int(declared):,} bytes, more than {cap:,} "
            "(LoadLimits.part_bytes); not read"
        )
    parts: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > cap:
                raise SourceLimitError(
                    f"{here}: the body is more than {cap:,} bytes (LoadLimits.part_bytes); "
                    "stopped reading"
                )
            parts.append(chunk)
            if time.monotonic() > deadline:
                raise late()
    except httpx.TimeoutException as exc:
        raise late() from exc
    except httpx.HTTPError as exc:
        raise SourceError(f"{here}: the body could not be read: {exc}") from exc
    return b"".join(parts)
