"""Starting the server: binding rules, worker processes, uvicorn."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import tempfile

from ..config import ENV_SERVE_SETTINGS
from ..errors import ConfigError
from .settings import ServeSettings

__all__ = ["is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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

    Each worker process imports :func:`fastrag.serve.app.create_app_from_env`,
    which compiles (or loads) the kernels and loads and warms every knowledge
    base before the worker accepts a request.

    Raises
    ------
    ConfigError
        Without keys, for an address other than loopback unless ``insecure``.
    """
    if settings.keys is None and not is_loopback(settings.host) and not insecure:
        raise ConfigError(
            f"refusing to serve on {settings.host} without API keys: anyone who can reach it "
            "could read every document. Give --keys FILE, bind to 127.0.0.1, or pass --insecure"
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be a positive int, got {workers!r}")
    if workers > 1 and settings.threads is None:
        settings = dataclasses.replace(settings, threads=1)  # one process per core already
    os.environ[ENV_SERVE_SETTINGS] = settings.to_json()
    if workers > 1 and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        # Set before any worker imports prometheus_client: /metrics then sums every worker.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="fastrag-metrics-")
    import uvicorn

    uvicorn.run(
        "fastrag.serve.app:create_app_from_env",
        factory=True,
        host=settings.host,
        port=port,
        workers=workers,
        access_log=access_log,
        log_level=log_level,
        timeout_graceful_shutdown=5,
    )
