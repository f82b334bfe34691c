"""Plumbing shared by the answer stages: per-stage timing and calls with a deadline.

:class:`StageTimer` measures each stage of one answer into a dict (what
becomes ``Answer.timings``) and reports every stage to an optional
``on_stage`` hook::

    timings: dict[str, float] = {}
    timer = StageTimer(timings, on_stage=lambda name, seconds, info: ...)
    with timer("context") as info:
        context = assemble_context(hits)
        info["blocks"] = len(context.blocks)

:func:`call_with_timeout` runs a callable in a daemon worker thread and stops
*waiting* for it after a deadline; used by :class:`~fastrag.answer.fallback.FallbackChain`
and by the optional LLM stages.

:func:`content_terms` is :func:`fastrag.text.terms.question_terms` with a
bounded cache: the verify stages look at the same chunk texts again and
again, so their terms are computed once.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import StageTimeoutError
from ..text.terms import text_terms

__all__ = [
    "StageHook",
    "StageTimer",
    "call_chat",
    "call_with_timeout",
    "clear_caches",
    "content_terms",
    "register_cache",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

StageHook = Callable[[str, float, dict[str, Any]], None]
"""``on_stage(name, seconds, info)``: called after each stage with what it measured.

``info`` is the dict the stage filled in (counts, sizes; never text), plus
``"error"`` (the exception's class name) when the stage raised.
"""


class _Stage:
    """One timed stage (the object ``StageTimer.__call__`` returns)."""

    __slots__ = ("_name", "_timings", "_hook", "_t0", "info")

    def __init__(self, timer: StageTimer, name: str) -> None:
        self._name = name
        self._timings = timer.timings
        self._hook = timer.on_stage
        self.info: dict[str, Any] = {}

    def __enter__(self) -> dict[str, Any]:
        self._t0 = time.perf_counter()
        return self.info

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        seconds = time.perf_counter() - self._t0
        timings, name = self._timings, self._name
        timings[name] = timings.get(name, 0.0) + seconds
        if self._hook is not None:
            if exc_type is not None:
                self.info["error"] = exc_type.__name__
            _report(self._hook, name, seconds, self.info)


def _report(hook: StageHook, name: str, seconds: float, info: dict[str, Any]) -> None:
    """Call an ``on_stage`` hook; its exception is logged and swallowed."""
    try:
        hook(name, seconds, info)
    except Exception as exc:  # noqa: BLE001 - a metrics hook must not break answers
        log.warning("on_stage hook failed for stage %r: %s: %s", name, type(exc).__name__, exc)


class StageTimer:
    """Record seconds per stage into a dict and report each stage to a hook.

    Parameters
    ----------
    timings : dict of str to float, optional
        Where to record (a new dict when omitted; see :attr:`timings`). A
        stage timed twice adds up.
    on_stage : callable, optional
        ``on_stage(name, seconds, info)`` (:data:`StageHook`), called after
        every stage, also when the stage raised. An exception from the hook
        is logged and swallowed: metrics never break an answer.

    Examples
    --------
    >>> timer = StageTimer()
    >>> with timer("context") as info:
    ...     info["blocks"] = 3
    >>> sorted(timer.timings)
    ['context']
    """

    __slots__ = ("on_stage", "timings")

    def __init__(
        self, timings: dict[str, float] | None = None, on_stage: StageHook | None = None
    ) -> None:
        self.timings: dict[str, float] = {} if timings is None else timings
        self.on_stage = on_stage

    def __call__(self, name: str) -> _Stage:
        """A context manager timing stage ``name``; it yields an ``info`` dict to fill in."""
        return _Stage(self, name)


def call_chat(chat: Any, messages: list[dict[str, str]], timeout: float | None) -> str:
    """The reply text of ``chat`` to ``messages`` within ``timeout`` seconds.

    ``chat`` is a chat client (an object with ``chat(messages) -> (text,
    usage)``, such as :class:`~fastrag.OpenAIChatGenerator`) or that method
    itself (any callable of the same form).
    """
    method = getattr(chat, "chat", None)
    fn = method if callable(method) else chat
    text, _ = call_with_timeout(lambda: fn(messages), timeout)
    return text


def call_with_timeout(fn: Callable[[], _T], timeout: float | None) -> _T:
    """Call ``fn()``, waiting at most ``timeout`` seconds for it.

    Parameters
    ----------
    fn : callable
        Called with no arguments.
    timeout : float or None
        Seconds to wait; ``None`` calls ``fn`` in the current thread.

    Returns
    -------
    object
        What ``fn`` returned.

    Raises
    ------
    StageTimeoutError
        When ``fn`` has not returned after ``timeout`` seconds (a
        :class:`TimeoutError`).
    Exception
        Whatever ``fn`` raised.

    Notes
    -----
    With a timeout, ``fn`` runs in a new daemon thread (with a copy of the
    caller's :mod:`contextvars`). Python cannot kill a thread: on timeout the
    call is *abandoned*, not stopped. It keeps running until it returns on
    its own (an HTTP call ends at its client's read timeout), its result or
    exception is discarded, and, being a daemon thread, it never keeps the
    interpreter from exiting. Give abandoned work its own timeout so that
    threads do not pile up.
    """
    if timeout is None:
        return fn()
    done = threading.Event()
    box: list[Any] = [None, None]  # [result, exception]
    ctx = contextvars.copy_context()

    def run() -> None:
        try:
            box[0] = ctx.run(fn)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            box[1] = exc
        finally:
            done.set()

    thread = threading.Thread(target=run, name="fastrag-deadline", daemon=True)
    thread.start()
    if not done.wait(timeout):
        raise StageTimeoutError(f"no result within {timeout:g} s")
    if box[1] is not None:
        raise box[1]
    return box[0]  # type: ignore[no-any-return]


def content_terms(text: str) -> frozenset[str]:
    """The content terms of a text (``question_terms(text)[0]``), cached.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    frozenset of str
        Stemmed non-stop words, numbers and CJK bigrams (see
        :func:`fastrag.text.terms.question_terms`), from the cache the
        extractive generator fills (:func:`fastrag.text.terms.text_terms`).
    """
    return text_terms(text)[0]


_CACHES: list[Callable[[], None]] = [text_terms.cache_clear]
"""The ``cache_clear`` of every stage's cache (each stage registers its own)."""


def register_cache(clear: Callable[[], None]) -> None:
    """Have :func:`clear_caches` also call ``clear`` (a stage's own cache's ``cache_clear``)."""
    _CACHES.append(clear)


def clear_caches() -> None:
    """Forget every cached result of the answer stages (for cold-start measurements)."""
    for clear in _CACHES:
        clear()
