"""Configuration objects, and the one place fastrag reads its environment.

:class:`ClientConfig` describes how to reach an OpenAI-compatible model
server: where it is, which key and model to use, how long to wait and how
often to retry. It is a frozen, validated value object; build it from
arguments, or with :meth:`ClientConfig.from_env` from these environment
variables (arguments always win):

=============================  =============================================
``FASTRAG_BASE_URL``           server root, e.g. ``https://api.openai.com/v1``
``FASTRAG_API_KEY``            bearer token (optional: local servers need none)
``FASTRAG_CHAT_MODEL``         model of :class:`~fastrag.answer.chat.OpenAIChatGenerator`
``FASTRAG_EMBED_MODEL``        model of :class:`~fastrag.embed.openai.OpenAIEmbedder`
``FASTRAG_CONNECT_TIMEOUT``    seconds to establish a connection (default 5)
``FASTRAG_READ_TIMEOUT``       seconds to wait for each read (default 60)
``FASTRAG_MAX_RETRIES``        retries after the first attempt (default 3)
``FASTRAG_MAX_CONCURRENCY``    requests in flight per client (default 4)
=============================  =============================================

The API key never appears in a ``repr``, a log line or an error message.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .errors import ConfigError

__all__ = [
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_CHAT_MODEL",
    "ENV_CONNECT_TIMEOUT",
    "ENV_EMBED_MODEL",
    "ENV_MAX_CONCURRENCY",
    "ENV_MAX_RETRIES",
    "ENV_READ_TIMEOUT",
    "ENV_SERVE_SETTINGS",
    "ENV_MILVUS_TOKEN",
    "ENV_QDRANT_API_KEY",
    "ClientConfig",
    "mask_url",
    "store_secret",
]

ENV_BASE_URL = "FASTRAG_BASE_URL"
ENV_API_KEY = "FASTRAG_API_KEY"
ENV_CHAT_MODEL = "FASTRAG_CHAT_MODEL"
ENV_EMBED_MODEL = "FASTRAG_EMBED_MODEL"
ENV_CONNECT_TIMEOUT = "FASTRAG_CONNECT_TIMEOUT"
ENV_READ_TIMEOUT = "FASTRAG_READ_TIMEOUT"
ENV_MAX_RETRIES = "FASTRAG_MAX_RETRIES"
ENV_MAX_CONCURRENCY = "FASTRAG_MAX_CONCURRENCY"
ENV_SERVE_SETTINGS = "FASTRAG_SERVE_SETTINGS"
"""``fastrag serve``: the settings (JSON) handed to each worker process."""

ENV_QDRANT_API_KEY = "QDRANT_API_KEY"
"""API key of a Qdrant server (``index="qdrant://host:6333"``), when none is passed."""
ENV_MILVUS_TOKEN = "MILVUS_TOKEN"
"""Token (``user:password`` or an API key) of a Milvus server, when none is passed."""

_MASK = "***"

# Numeric settings read from the environment: variable -> (field, parser).
_NUMERIC_ENV: dict[str, tuple[str, type]] = {
    ENV_CONNECT_TIMEOUT: ("connect_timeout", float),
    ENV_READ_TIMEOUT: ("read_timeout", float),
    ENV_MAX_RETRIES: ("max_retries", int),
    ENV_MAX_CONCURRENCY: ("max_concurrency", int),
}


def mask_url(url: str) -> str:
    """``url`` with any ``user:password@`` part replaced by ``***@``.

    Parameters
    ----------
    url : str
        An absolute URL.

    Returns
    -------
    str
        The URL, safe to print.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{_MASK}@{host}"))


def _positive_seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number of seconds, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a positive, finite number of seconds, got {value!r}")
    return value


def _non_negative(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
    return value


def _int_at_least(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an int, got {value!r}")
    if value < low:
        raise ConfigError(f"{name} must be >= {low}, got {value!r}")
    return value


@dataclass(frozen=True, repr=False)
class ClientConfig:
    """How to reach an OpenAI-compatible model server.

    Parameters
    ----------
    base_url : str
        Root of the API, up to and including the version segment, e.g.
        ``https://api.openai.com/v1`` or ``http://127.0.0.1:8000/v1``. A
        trailing ``/`` is dropped.
    model : str
        Model name sent with every request.
    api_key : str or None, default None
        Sent as ``Authorization: Bearer <api_key>``; ``None`` (or ``""``)
        sends no ``Authorization`` header. Masked in ``repr``.
    connect_timeout : float, default 5.0
        Seconds to establish a connection.
    read_timeout : float, default 60.0
        Seconds to wait for each read of the response (also used for writes
        and for waiting on a pooled connection).
    max_retries : int, default 3
        Retries after the first attempt, on HTTP 408, 429 and 5xx, timeouts
        and transport errors; ``0`` disables retrying.
    backoff_base : float, default 0.5
        Seconds; retry ``k`` (from 0) waits up to ``backoff_base * 2**k``.
    backoff_cap : float, default 20.0
        Upper bound of one backoff wait, in seconds.
    jitter : bool, default True
        Full jitter: wait a uniform random time in ``[0, backoff]`` instead
        of ``backoff`` itself, so that many clients do not retry in step.
    max_retry_after : float, default 60.0
        Cap on a server's ``Retry-After`` wait, in seconds.
    max_concurrency : int, default 4
        Requests one client keeps in flight at once (batches of an
        embedder, concurrent calls from threads or tasks).
    trust_env : bool, default True
        Let httpx read proxy and certificate settings (``HTTPS_PROXY``,
        ``SSL_CERT_FILE``, ...) from the environment.

    Raises
    ------
    ConfigError
        When a value is missing, of the wrong type or out of range.
    """

    base_url: str
    model: str
    api_key: str | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 20.0
    jitter: bool = True
    max_retry_after: float = 60.0
    max_concurrency: int = 4
    trust_env: bool = True

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if not isinstance(self.base_url, str) or not self.base_url.strip():
            raise ConfigError(
                f"base_url must be a non-empty URL string (or set {ENV_BASE_URL}), "
                f"got {self.base_url!r}"
            )
        base_url = self.base_url.strip().rstrip("/")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(
                f"base_url must be an http:// or https:// URL with a host, "
                f"got {mask_url(base_url)!r}"
            )
        set_(self, "base_url", base_url)
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"model must be a non-empty string, got {self.model!r}")
        if self.api_key is not None:
            if not isinstance(self.api_key, str):
                raise ConfigError(
                    f"api_key must be a string or None, not {type(self.api_key).__name__}"
                )
            if self.api_key == "":
                set_(self, "api_key", None)
            elif any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in self.api_key):
                # The key itself is never echoed back.
                raise ConfigError("api_key holds white space or control characters")
        set_(self, "connect_timeout", _positive_seconds("connect_timeout", self.connect_timeout))
        set_(self, "read_timeout", _positive_seconds("read_timeout", self.read_timeout))
        _int_at_least("max_retries", self.max_retries, 0)
        set_(self, "backoff_base", _non_negative("backoff_base", self.backoff_base))
        set_(self, "backoff_cap", _non_negative("backoff_cap", self.backoff_cap))
        set_(self, "max_retry_after", _non_negative("max_retry_after", self.max_retry_after))
        _int_at_least("max_concurrency", self.max_concurrency, 1)
        for name in ("jitter", "trust_env"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def __repr__(self) -> str:
        fields = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "api_key" and value is not None:
                value = _MASK
            elif f.name == "base_url":
                value = mask_url(value)
            fields.append(f"{f.name}={value!r}")
        return f"ClientConfig({', '.join(fields)})"

    def replace(self, **changes: Any) -> ClientConfig:
        """A copy with some fields changed (``None`` values are ignored).

        Parameters
        ----------
        **changes
            Field names and their new values.

        Returns
        -------
        ClientConfig
            The new, validated configuration.

        Raises
        ------
        ConfigError
            For an unknown field or an invalid value.
        """
        changes = {k: v for k, v in changes.items() if v is not None}
        _check_names(changes)
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(
        cls,
        *,
        model_env: str = ENV_CHAT_MODEL,
        environ: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> ClientConfig:
        """Build a configuration from the environment; ``overrides`` win.

        Parameters
        ----------
        model_env : str, default ``"FASTRAG_CHAT_MODEL"``
            The variable that names the model: ``FASTRAG_CHAT_MODEL`` for a
            chat client, ``FASTRAG_EMBED_MODEL`` for an embedder.
        environ : mapping, optional
            Where to read variables; ``os.environ`` by default.
        **overrides
            Any :class:`ClientConfig` field. ``None`` means "not given" and
            falls back to the environment or the default.

        Returns
        -------
        ClientConfig

        Raises
        ------
        ConfigError
            When the base URL or the model is neither given nor set (the
            message names the variable to set), when a variable does not
            parse, or when a value is out of range.
        """
        env = os.environ if environ is None else environ
        given = {k: v for k, v in overrides.items() if v is not None}
        _check_names(given)
        values: dict[str, Any] = {}
        named = ((ENV_BASE_URL, "base_url"), (model_env, "model"), (ENV_API_KEY, "api_key"))
        for var, field in named:
            raw = env.get(var, "").strip()
            if raw:
                values[field] = raw
        for var, (field, parse) in _NUMERIC_ENV.items():
            raw = env.get(var, "").strip()
            if raw and field not in given:
                try:
                    values[field] = parse(raw)
                except ValueError:
                    raise ConfigError(f"{var}={raw!r} is not a valid {parse.__name__}") from None
        values.update(given)
        if "base_url" not in values:
            raise ConfigError(
                f"no model server URL: pass base_url=... or set {ENV_BASE_URL} "
                "(e.g. https://api.openai.com/v1)"
            )
        if "model" not in values:
            raise ConfigError(f"no model name: pass model=... or set {model_env}")
        try:
            return cls(**values)
        except ConfigError as exc:
            from_env = sorted(
                var
                for var, (field, _) in _NUMERIC_ENV.items()
                if field in values and field not in given and field in str(exc)
            )
            if from_env:
                raise ConfigError(f"{exc} (from {from_env[0]})") from None
            raise


_FIELDS = frozenset(f.name for f in dataclasses.fields(ClientConfig))


def _check_names(values: Mapping[str, Any]) -> None:
    unknown = sorted(set(values) - _FIELDS)
    if unknown:
        raise ConfigError(
            f"unknown ClientConfig field(s): {', '.join(unknown)}; "
            f"known fields: {', '.join(sorted(_FIELDS))}"
        )


FAULT_ENV = "FASTRAG_FAULT"
"""Test hook: a save exits the process (status 86) at the named point; never set in production."""

FAULT_POINTS = (
    "snapshot-files-written",
    "snapshot-renamed",
    "manifest-written",
    "pruned",
)
"""Points of a save where :func:`fault` can kill the process (see ``fastrag.store.snapshots``)."""


def fault(point: str) -> None:
    """Exit the process at once if ``FASTRAG_FAULT`` names ``point`` (crash tests only)."""
    if os.environ.get(FAULT_ENV) == point:
        os._exit(86)


def serve_settings_json() -> str | None:
    """The JSON settings ``fastrag serve`` left for its worker processes, if any."""
    return os.environ.get(ENV_SERVE_SETTINGS)


def store_secret(variable: str) -> str | None:
    """A vector store's credential from the environment (never saved, never shown)."""
    return os.environ.get(variable) or None
