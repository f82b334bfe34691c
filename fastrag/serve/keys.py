"""API keys of ``fastrag serve --keys FILE``: who is calling, and what they may read.

The keys file is JSON::

    {"keys": [
        {"key": "sk-alice-...", "user": "alice", "groups": ["hr", "staff"]},
        {"sha256": "9f86d081...", "user": "ci-bot", "groups": [], "kbs": ["policies"]}
    ]}

Each entry names a key, either as the key itself (``key``) or as the hex
SHA-256 of it (``sha256``, so the file need not hold the secret), the
principal it stands for (``user``, ``groups``: the names a chunk's ``acl``
is matched against) and, optionally, the knowledge bases it may use
(``kbs``; absent means all). A caller sends its key as ``Authorization:
Bearer KEY`` (what OpenAI clients send) or ``X-API-Key: KEY``.

Keys are compared in constant time: the presented key is hashed and its
digest compared with every entry's by :func:`hmac.compare_digest`, without
stopping at a match, so the time taken says nothing about which key or how
much of one matched. No key or digest appears in any message or log line.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import ConfigError
from ..retrieve.filters import Principal

__all__ = ["Caller", "KeyRing", "TRUSTED"]

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_ENTRY_FIELDS = frozenset({"key", "sha256", "user", "groups", "kbs"})


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a request comes from.

    Attributes
    ----------
    principal : Principal or None
        Passed to every retrieval and answer; ``None`` is the trusted local
        caller of a server without keys (no ACL check).
    kbs : frozenset of str or None
        Knowledge bases this caller may use (``None``: all).
    """

    principal: Principal | None
    kbs: frozenset[str] | None = None

    def may_use(self, name: str) -> bool:
        """Whether this caller may use the knowledge base ``name``."""
        return self.kbs is None or name in self.kbs

    @property
    def user(self) -> str | None:
        """The caller's user name, if it has one."""
        return None if self.principal is None else self.principal.user


TRUSTED = Caller(None, None)
"""The caller of a server started without ``--keys`` (loopback only)."""


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class KeyRing:
    """API keys and the callers they stand for (see the module docstring).

    Parameters
    ----------
    entries : sequence of mapping
        The ``keys`` list of a keys file.
    """

    def __init__(self, entries: Sequence[Mapping[str, Any]]) -> None:
        if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
            raise ConfigError("keys: expected a list of key entries")
        self._entries: list[tuple[bytes, Caller]] = []
        seen: set[bytes] = set()
        for i, entry in enumerate(entries):
            where = f"keys[{i}]"
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{where}: expected an object with 'key' or 'sha256' and 'user'")
            unknown = sorted(set(entry) - _ENTRY_FIELDS)
            if unknown:
                raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)}")
            if ("key" in entry) == ("sha256" in entry):
                raise ConfigError(f"{where}: give exactly one of 'key' and 'sha256'")
            if "key" in entry:
                key = entry["key"]
                if not isinstance(key, str) or len(key) < 8:
                    raise ConfigError(f"{where}: 'key' must be a string of at least 8 characters")
                digest = _digest(key)
            else:
                hexed = entry["sha256"]
                if not isinstance(hexed, str) or not _HEX64.match(hexed.lower()):
                    raise ConfigError(f"{where}: 'sha256' must be 64 hexadecimal digits")
                digest = bytes.fromhex(hexed)
            if digest in seen:
                raise ConfigError(f"{where}: the same key is listed twice")
            seen.add(digest)
            user = entry.get("user")
            if not isinstance(user, str) or not user:
                raise ConfigError(f"{where}: 'user' must be a non-empty string")
            groups = entry.get("groups", [])
            if (
                isinstance(groups, str)
                or not isinstance(groups, list)
                or not all(isinstance(g, str) for g in groups)
            ):
                raise ConfigError(f"{where}: 'groups' must be a list of strings")
            kbs = entry.get("kbs")
            if kbs is not None and (
                isinstance(kbs, str)
                or not isinstance(kbs, list)
                or not all(isinstance(k, str) for k in kbs)
            ):
                raise ConfigError(f"{where}: 'kbs' must be a list of knowledge-base names")
            caller = Caller(
                Principal(user=user, groups=tuple(groups)), None if kbs is None else frozenset(kbs)
            )
            self._entries.append((digest, caller))
        if not self._entries:
            raise ConfigError("keys: the file lists no key")

    @classmethod
    def from_file(cls, path: str | Path) -> KeyRing:
        """Read a keys file (see the module docstring)."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the keys file: {exc.strerror}") from exc
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"{path}: the keys file is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or "keys" not in data:
            raise ConfigError(f"{path}: expected a JSON object with a 'keys' list")
        try:
            return cls(data["keys"])
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"KeyRing({len(self._entries)} keys)"

    def authenticate(self, key: str | None) -> Caller | None:
        """The caller a presented key stands for, or ``None`` (compared in constant time)."""
        if not key:
            return None
        digest = _digest(key)
        found: Caller | None = None
        for stored, caller in self._entries:  # no early exit: every entry is compared
            if hmac.compare_digest(digest, stored):
                found = caller
        return found


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``."""
    auth = headers.get("authorization")
    if auth:
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = headers.get("x-api-key")
    return key.strip() if key else None
