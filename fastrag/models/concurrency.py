"""Running many generator calls at once, within concurrency and rate limits.

:func:`generate_all` answers a list of (question, hits) pairs:

- a generator with an async form (``agenerate``, as
  :class:`~fastrag.OpenAIChatGenerator` has) runs on one event loop, at most
  ``max_concurrency`` calls in flight;
- a plain callable runs on a thread pool of ``max_concurrency`` workers
  (``max_concurrency=1``: in this thread, one after the other);
- ``requests_per_minute`` and ``tokens_per_minute`` space the calls out: a
  call starts only when both budgets allow it (tokens are what the caller's
  ``cost(question, hits)`` estimates: the answer pipeline passes the same
  estimator as its context budget, applied to the prompt);
- a call that finally fails (after the client's own retries) yields its
  exception in its slot; the others go on. Results keep the input order.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from ..errors import ConfigError
from ..text.tokens import estimate_tokens
from ..types import Generation, Hit

__all__ = [
    "STREAM_BLOCK",
    "Cost",
    "RateLimiter",
    "generate_all",
    "generate_stream",
    "streams",
]

Cost = Callable[[str, Sequence[Hit]], int]
"""``cost(question, hits) -> tokens``: what one call spends of ``tokens_per_minute``."""


def _default_cost(question: str, hits: Sequence[Hit]) -> int:
    return estimate_tokens(question) + sum(estimate_tokens(h.text) for h in hits)


class RateLimiter:
    """Spaces out calls to stay within requests and tokens per minute (thread- and task-safe).

    Parameters
    ----------
    requests_per_minute : float, optional
        Most calls started per minute.
    tokens_per_minute : float, optional
        Most (estimated) prompt tokens sent per minute.

    Notes
    -----
    A call reserves the next free start time under a lock, so concurrent
    callers are spaced evenly: call ``i`` starts no earlier than
    ``i * 60 / requests_per_minute`` seconds after the first, and a call of
    ``t`` tokens pushes the next start by ``t * 60 / tokens_per_minute``.
    """

    def __init__(
        self, requests_per_minute: float | None = None, tokens_per_minute: float | None = None
    ) -> None:
        for name, value in (
            ("requests_per_minute", requests_per_minute),
            ("tokens_per_minute", tokens_per_minute),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
            ):
                raise ConfigError(f"{name} must be a positive number, got {value!r}")
        self._request_gap = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._token_gap = 60.0 / tokens_per_minute if tokens_per_minute else 0.0
        self._next_request = 0.0
        self._next_token = 0.0
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """Whether any limit is set."""
        return bool(self._request_gap or self._token_gap)

    def reserve(self, tokens: int = 1) -> float:
        """Reserve a start slot; return how many seconds to wait before starting."""
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next_request, self._next_token)
            self._next_request = start + self._request_gap
            self._next_token = start + tokens * self._token_gap
            return start - now

    async def acquire_async(self, tokens: int = 1) -> None:
        """Wait (asynchronously) for a start slot."""
        delay = self.reserve(tokens)
        if delay > 0:
            await asyncio.sleep(delay)

    def acquire(self, tokens: int = 1) -> None:
        """Wait (blocking) for a start slot."""
        delay = self.reserve(tokens)
        if delay > 0:
            time.sleep(delay)


_UNLIMITED = RateLimiter()
"""The limiter of calls without limits (never reserves: shared)."""


def _has_async(generator: Any) -> bool:
    if generator is None:
        return False  # the default (offline) generator
    return inspect.iscoroutinefunction(getattr(generator, "agenerate", None))


def _check_concurrency(max_concurrency: Any) -> None:
    if (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or max_concurrency < 1
    ):
        raise ConfigError(f"max_concurrency must be a positive int, got {max_concurrency!r}")


STREAM_BLOCK = 256
"""Questions per block when :func:`generate_stream` overlaps preparation and generation."""


def streams(generator: Any, max_concurrency: int) -> bool:
    """Whether :func:`generate_stream` overlaps producing blocks with generating (async clients)."""
    return _has_async(generator) and max_concurrency > 1


def generate_stream(
    generator: Any,
    blocks: Iterable[Sequence[tuple[str, Sequence[Hit]]]],
    *,
    call: Callable[[str, Sequence[Hit]], Generation] | None = None,
    max_concurrency: int = 1,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    cost: Cost | None = None,
) -> list[Generation | BaseException]:
    """:func:`generate_all` over items that arrive in blocks, in order.

    With an async generator and ``max_concurrency > 1`` (see :func:`streams`)
    the next block is produced on a worker thread while the calls of the
    blocks before are in flight, so slow preparation (retrieval) and slow
    generation (a model server) overlap. Otherwise the blocks are collected
    first and handed to :func:`generate_all`. An exception raised while
    producing a block cancels the calls in flight and is raised here.

    Parameters
    ----------
    blocks : iterable of sequences of (str, sequence of Hit)
        Questions and their hits, block by block.
    generator, call, max_concurrency, requests_per_minute, tokens_per_minute, cost
        As for :func:`generate_all`.

    Returns
    -------
    list
        A :class:`~fastrag.Generation` or the exception raised, per item, in order.
    """
    _check_concurrency(max_concurrency)
    if not streams(generator, max_concurrency):
        items = [item for block in blocks for item in block]
        return generate_all(
            generator, items, call=call, max_concurrency=max_concurrency,
            requests_per_minute=requests_per_minute, tokens_per_minute=tokens_per_minute,
            cost=cost,
        )  # fmt: skip
    limiter = RateLimiter(requests_per_minute, tokens_per_minute)
    return _run_loop(
        _stream_async(generator, iter(blocks), max_concurrency, limiter, cost or _default_cost)
    )


def generate_all(
    generator: Any,
    items: Sequence[tuple[str, Sequence[Hit]]],
    *,
    call: Callable[[str, Sequence[Hit]], Generation] | None = None,
    max_concurrency: int = 1,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    cost: Cost | None = None,
) -> list[Generation | BaseException]:
    """Generate an answer for every ``(question, hits)``, concurrently (see the module docstring).

    Parameters
    ----------
    generator : object
        The generator (its ``agenerate`` is used when it has one).
    items : sequence of (str, sequence of Hit)
        Questions and their hits.
    call : callable, optional
        The synchronous call to make for each item (default ``generator``).
    max_concurrency : int
        Calls in flight at once.
    requests_per_minute, tokens_per_minute : float, optional
        Rate limits.
    cost : callable, optional
        ``cost(question, hits) -> tokens`` of one call (default: the token
        estimate of the question and the hits' texts).

    Returns
    -------
    list
        A :class:`~fastrag.Generation` or the exception raised, per item, in order.
    """
    _check_concurrency(max_concurrency)
    limiter = (
        _UNLIMITED
        if requests_per_minute is None and tokens_per_minute is None
        else RateLimiter(requests_per_minute, tokens_per_minute)
    )
    sync_call = call or generator
    cost = cost or _default_cost
    if not items:
        return []
    if _has_async(generator) and (max_concurrency > 1 or limiter.active):
        return _run_loop(_generate_async(generator, items, max_concurrency, limiter, cost))

    def one(item: tuple[str, Sequence[Hit]]) -> Generation | BaseException:
        question, hits = item
        if limiter.active:
            limiter.acquire(cost(question, hits))
        try:
            return sync_call(question, hits)
        except Exception as exc:  # noqa: BLE001 - reported in the item's slot
            return exc

    if max_concurrency == 1:
        return [one(item) for item in items]
    with ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="fastrag-gen") as pool:
        return list(pool.map(one, items))


async def _generate_async(
    generator: Any,
    items: Sequence[tuple[str, Sequence[Hit]]],
    max_concurrency: int,
    limiter: RateLimiter,
    cost: Cost,
) -> list[Generation | BaseException]:
    return await _stream_async(generator, iter([items]), max_concurrency, limiter, cost)


async def _stream_async(
    generator: Any,
    blocks: Iterator[Sequence[tuple[str, Sequence[Hit]]]],
    max_concurrency: int,
    limiter: RateLimiter,
    cost: Cost,
) -> list[Generation | BaseException]:
    semaphore = asyncio.Semaphore(max_concurrency)

    async def one(question: str, hits: Sequence[Hit]) -> Generation | BaseException:
        async with semaphore:
            if limiter.active:
                await limiter.acquire_async(cost(question, hits))
            try:
                return await generator.agenerate(question, hits)
            except Exception as exc:  # noqa: BLE001 - reported in the item's slot
                return exc

    loop = asyncio.get_running_loop()
    end = object()
    tasks: list[asyncio.Future[Generation | BaseException]] = []
    try:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fastrag-prepare") as pool:
            while True:
                block = await loop.run_in_executor(pool, next, blocks, end)
                if block is end:
                    break
                items = cast("Sequence[tuple[str, Sequence[Hit]]]", block)
                tasks.extend(asyncio.ensure_future(one(q, h)) for q, h in items)
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        aclose = getattr(generator, "aclose", None)
        if aclose is not None:
            await aclose()  # the async client is bound to this loop, which ends here


def _run_loop(coro: Any) -> Any:
    """Run a coroutine to completion, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def runner() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=runner, name="fastrag-async")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
