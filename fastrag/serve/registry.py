"""The knowledge bases a server holds, and the switch to a newly saved snapshot.

Each served knowledge base is loaded once per worker process (its vectors and
keyword index are memory-mapped, so the workers share the pages). A request
takes the :class:`~fastrag.KnowledgeBase` object current when it starts and
keeps it to the end. :meth:`Registry.refresh` (run every
``reload_interval`` seconds) looks at each ``manifest.json``: when a save has
made another snapshot current, it loads that snapshot, warms it with one
query, and only then replaces the reference in one assignment. Requests in
flight finish on the object they hold; an unlinked file of a pruned snapshot
stays readable while it is mapped.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import FastragError, RequestError
from ..kb import KnowledgeBase
from ..store.snapshots import MANIFEST, read_manifest
from .keys import Caller

__all__ = ["Current", "Registry", "Served"]

_log = logging.getLogger("fastrag.serve")


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path / MANIFEST)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _prefetch(folder: Path) -> None:
    """Read a snapshot's files once, so that their pages are cached before a request maps them."""
    for path in sorted(folder.iterdir()):
        if path.is_file():
            with open(path, "rb", buffering=0) as f:
                while f.read(1 << 22):
                    pass


def _warm(kb: KnowledgeBase) -> None:
    """Touch every path a request can take, so the first request runs at full speed.

    The snapshot's files are read into the page cache, an exact search maps
    every vector page into this process, and each mode retrieves and answers
    once (first calls fill caches and load lazily imported code).
    """
    s = kb.stats()
    if s["path"] is not None and s["snapshot"] is not None:
        _prefetch(Path(s["path"]) / "snapshots" / s["snapshot"])
    if not len(kb):
        return
    modes = ["vector"] if s["keyword"] is None else ["vector", "keyword", "hybrid"]
    for question in ("warm up the knowledge base", "预热知识库"):
        kb.retrieve(question, k=5, mode="vector", exact=True)
        for mode in modes:
            kb.retrieve(question, k=5, mode=mode)
            kb.answer(question, k=5, mode=mode)
        kb.retrieve_batch([question, question + "?"], k=5, mode=modes[-1])


class Current(NamedTuple):
    """A loaded snapshot: the knowledge base and its snapshot id."""

    kb: KnowledgeBase
    snapshot: str | None


def _open(path: Path, rewriter: Any = None) -> Current:
    kb = KnowledgeBase.load(path, rewriter=rewriter)
    _warm(kb)
    return Current(kb, kb.stats()["snapshot"])


@dataclass
class Served:
    """One knowledge base served under a name.

    Attributes
    ----------
    name : str
        The name requests use (``kb`` field, OpenAI ``model``).
    path : Path
        Its directory.
    current : Current
        The snapshot served now and its id; replaced whole (one assignment)
        when a new one is saved. A request reads it once and keeps it.
    """

    name: str
    path: Path
    current: Current
    stamp: tuple[int, int, int] | None = None

    def describe(self) -> dict[str, Any]:
        """Name, sizes, snapshot and index, as ``GET /v1/kbs`` lists them."""
        kb = self.current.kb
        s = kb.stats()
        return {
            "name": self.name,
            "chunks": s["chunks"],
            "documents": s["documents"],
            "dim": s["dim"],
            "index": s["index"],
            "keyword": s["keyword"] is not None,
            "snapshot": s["snapshot"],
            "snapshots": [snap.id for snap in kb.snapshots()],
        }


class Registry:
    """Knowledge bases by name (see the module docstring).

    Parameters
    ----------
    kbs : sequence of (name, path)
        What to serve; each is loaded (and warmed) now.
    """

    def __init__(self, kbs: tuple[tuple[str, str], ...], rewriter: Any = None) -> None:
        self._rewriter = rewriter  # the query rewriter of every knowledge base (None: the rules)
        self._served: dict[str, Served] = {}
        self._lock = threading.Lock()
        for name, path in kbs:
            root = Path(path)
            stamp = _stamp(root)
            self._served[name] = Served(name, root, _open(root, self._rewriter), stamp)
        self.default = kbs[0][0]

    def __iter__(self) -> Iterator[Served]:
        return iter(self._served.values())

    def names(self, caller: Caller) -> list[str]:
        """The names ``caller`` may use, in the order served."""
        return [n for n in self._served if caller.may_use(n)]

    def get(self, name: str | None, caller: Caller) -> Served:
        """The knowledge base ``name``, if ``caller`` may use it.

        Without a name, the first served that ``caller`` may use: a key
        restricted to some knowledge bases never meets the name of another,
        not even the server's default.

        Raises
        ------
        RequestError
            404 ``unknown_kb`` for a name not served, or not allowed to the
            caller (the two give the same message, which names only the
            knowledge bases the caller may use), or when the caller may use none.
        """
        allowed = self.names(caller)
        if name is None:
            if not allowed:
                raise RequestError(
                    "no knowledge base is available to this key", status=404, type="unknown_kb"
                )
            name = allowed[0]
        served = self._served.get(name)
        if served is None or not caller.may_use(name):
            known = ", ".join(repr(n) for n in allowed) or "none"
            raise RequestError(
                f"unknown knowledge base {name!r} (available: {known})",
                status=404,
                type="unknown_kb",
            )
        return served

    def refresh(self) -> list[str]:
        """Switch every knowledge base whose current snapshot changed; return their names.

        A snapshot that fails to load is logged and tried again at the next
        call; the old one keeps serving.
        """
        switched = []
        with self._lock:
            for served in self._served.values():
                stamp = _stamp(served.path)
                if stamp is None or stamp == served.stamp:
                    continue
                try:
                    current = read_manifest(served.path).current
                    if current != served.current.snapshot:
                        # One assignment: requests in flight keep the object they hold.
                        served.current = _open(served.path, self._rewriter)
                        switched.append(served.name)
                        _log.info("%s: now serving snapshot %s", served.name, current)
                except FastragError as exc:
                    _log.warning("%s: new snapshot not loaded (will retry): %s", served.name, exc)
                    continue
                served.stamp = stamp
        return switched
