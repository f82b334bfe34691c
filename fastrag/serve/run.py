"""Starting the server: binding rules, the listening socket, worker processes, uvicorn."""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import os
import socket
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import ENV_SERVE_SETTINGS
from ..errors import ConfigError, FastragError
from .settings import ServeSettings, engine_threads_for

if TYPE_CHECKING:
    import uvicorn

__all__ = ["bind", "check_port", "check_workers", "is_loopback", "serve", "uvicorn_config"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_port(port: object) -> int:
    """A TCP port to listen on: an int in 1..65535."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise ConfigError(f"port must be an int between 1 and 65535, got {port!r}")
    return port


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (as uvicorn binds: ``SO_REUSEADDR``, inheritable).

    Raises
    ------
    ConfigError
        When the address cannot be bound (in use, not this machine's, a
        privileged port): one line, before anything is loaded.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            + (" (another server is using the port: stop it or pick another --port)"
               if exc.errno == errno.EADDRINUSE else "")
        ) from None  # fmt: skip
    sock.set_inheritable(True)
    return sock


def uvicorn_config(
    settings: ServeSettings, app: Any, *, port: int, **kwargs: Any
) -> uvicorn.Config:
    """The uvicorn configuration of ``settings`` (timeouts, connection limit, guarded protocol).

    Parameters
    ----------
    settings : ServeSettings
        The server's settings.
    app : Any
        The application, or the import string of its factory (``factory=True``).
    port : int
        The port (the socket itself may be passed to ``uvicorn.Server.run``).
    **kwargs : Any
        More :class:`uvicorn.Config` options (``workers``, ``log_level``, ...).

    Returns
    -------
    uvicorn.Config
    """
    import uvicorn

    from .protocol import protocol_name

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=port,
        http=protocol_name(),
        # uvicorn answers 503 from this many; the protocol's cap refuses connections before.
        limit_concurrency=settings.max_connections + 1,
        timeout_keep_alive=settings.keep_alive,  # type: ignore[arg-type]  # call_later takes a float
        timeout_graceful_shutdown=5,
        **kwargs,
    )
    # Read by the protocol. Plain attributes and an import string: a worker process
    # unpickles this without importing fastrag, so it answers uvicorn's health check at once.
    config.header_timeout = settings.header_timeout  # type: ignore[attr-defined]
    config.max_connections = settings.max_connections  # type: ignore[attr-defined]
    return config


def check_workers(kbs: Sequence[tuple[str, str]], workers: int) -> None:
    """Refuse ``workers`` > 1 for a knowledge base whose store one process locks.

    Read from each manifest before any worker starts: every worker would
    open the store, and all but the first would fail on its lock.

    Raises
    ------
    ConfigError
        A knowledge base keeps its vectors in Qdrant's local mode, Qdrant Edge or Milvus Lite.
    """
    if workers <= 1:
        return
    from ..index.stores import ENGINES, store_from_record
    from ..store.snapshots import read_manifest

    for name, path in kbs:
        try:
            index = read_manifest(Path(path)).index
            if index.get("type") not in ENGINES:
                continue
            held = store_from_record(dict(index.get("store") or {})).one_process()
        except FastragError:
            continue  # not a knowledge base (yet): each worker reports it as it loads
        if held is not None:
            raise ConfigError(
                f"--workers {workers}: knowledge base {name!r} keeps its vectors where one "
                f"process at a time can open them ({held}); serve it with --workers 1, or "
                "keep its vectors in a server ('qdrant://host:6333', 'milvus://host:19530') "
                "that every worker can reach"
            )


def serve(
    settings: ServeSettings,
    *,
    port: int = 8000,
    workers: int = 1,
    insecure: bool = False,
    access_log: bool = False,
    log_level: str = "info",
) -> None:
    """Run the server until interrupted (uvicorn, ``workers`` processes sharing the socket).

    The port is bound first, so a port in use fails at once; then each worker
    process imports :func:`fastrag.serve.app.create_app_from_env`, which
    compiles (or loads) the kernels and loads and warms every knowledge base
    before the worker accepts a request.

    Raises
    ------
    ConfigError
        Without keys, for an address other than loopback unless ``insecure``;
        for a port outside 1..65535 or one that cannot be bound; for
        ``workers`` > 1 over a store one process locks (:func:`check_workers`).
    FastragError
        When the server did not start (its log says why).
    """
    if settings.keys is None and not is_loopback(settings.host) and not insecure:
        raise ConfigError(
            f"refusing to serve on {settings.host} without API keys: anyone who can reach it "
            "could read every document. Give --keys FILE, bind to 127.0.0.1, or pass --insecure"
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be a positive int, got {workers!r}")
    check_port(port)
    check_workers(settings.kbs, workers)
    if workers > 1 and settings.threads is None:
        settings = dataclasses.replace(settings, threads=1)  # one process per core already
    sock = bind(settings.host, port)  # before any warm-up: a port in use fails in a moment
    try:
        if settings.engine_threads is None:  # the usable cores shared among the workers
            settings = dataclasses.replace(
                settings, engine_threads=engine_threads_for(None, workers)
            )
        os.environ[ENV_SERVE_SETTINGS] = settings.to_json()
        if workers > 1 and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
            # Set before any worker imports prometheus_client: /metrics then sums every worker.
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="fastrag-metrics-")
        import uvicorn
        from uvicorn.supervisors import Multiprocess

        config = uvicorn_config(
            settings, "fastrag.serve.app:create_app_from_env", port=port, factory=True,
            workers=workers, access_log=access_log, log_level=log_level,
        )  # fmt: skip
        server = uvicorn.Server(config)
        try:
            if workers > 1:
                Multiprocess(config, sockets=[sock]).run()
            else:
                server.run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        if workers == 1 and not server.started:
            raise FastragError("the server did not start (the log above says why)")
    finally:
        sock.close()
