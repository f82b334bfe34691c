"""Calling a teacher model at the pace it answers: batch size, calls in flight, timeouts.

A distillation asks its teacher for tens of thousands of vectors. A local
CPU teacher (a server with two threads) answers one request after the
other: with fixed settings (64 texts per call, 4 calls in flight, a 60 s
read timeout) the calls queue behind each other inside the teacher, time
out, and a retry joins the same queue again. :class:`TeacherPacer` sizes
the calls from what it measures instead:

1. **One small call first** (:data:`FIRST_BATCH` texts): its latency per
   text is the first estimate of the teacher's speed.
2. **Batch size** doubles (quadruples while throughput nearly doubles with
   it) while the teacher's throughput (texts per second of one call at a
   time) rises by at least :data:`GAIN` and a call's expected time stays
   within half the call timeout; the size with the best throughput is kept.
3. **Calls in flight** then go to two, and grow by one while the throughput measured
   between completions rises by :data:`GAIN`, never beyond what the teacher
   answers in half the timeout (``in flight x batch <= throughput x timeout
   / 2``) nor :data:`MAX_CONCURRENCY` (nor the teacher client's own
   ``max_concurrency``).
4. **Latency must hold**: a call that takes :data:`SLOW` times its expected
   time takes one call out of flight (or halves the batch at one in flight).
5. **Back off** on a timeout, HTTP 429 or 503 (or a dropped connection):
   calls in flight are halved (and the batch too after a timeout), no new
   call is sent until every call in flight has returned (the teacher's queue
   drained: a retried call never joins the queue it timed out in), then the
   pacer waits what the teacher asked (``Retry-After``) or an exponential
   back-off, and the failed texts are sent again in batches of the new size.
   After a timeout the timeout's slack doubles and the texts that timed out
   are given time to finish inside the teacher before anything is resent.
6. **Timeouts scale with the batch**: a call's timeout is
   ``MIN_TIMEOUT + slack x expected time`` (``slack`` starts at
   :data:`SLACK`), at most the teacher client's read timeout.

A setting given by the caller (``batch_size`` or ``max_concurrency``) is
kept fixed; the other one adapts. Teachers that run in process (no HTTP)
have no timeouts; their batch and concurrency adapt the same way by
throughput. A teacher takes part in timeouts through
``embed_once(texts, side=..., timeout=...)`` (one request, no retry of its
own; :meth:`fastrag.OpenAIEmbedder.embed_once`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import EmbedderError, FastragError, ModelError, ModelTimeoutError
from .base import document_vectors, query_vectors

__all__ = [
    "FIRST_BATCH",
    "GAIN",
    "MAX_BATCH",
    "MAX_CONCURRENCY",
    "MIN_TIMEOUT",
    "SLACK",
    "SLOW",
    "PacerStats",
    "TeacherPacer",
]

FIRST_BATCH = 4
"""Texts in the first call (it measures the teacher and fixes its dimension)."""
MAX_BATCH = 512
"""Most texts per call the pacer grows to."""
MAX_CONCURRENCY = 8
"""Most calls in flight the pacer grows to."""
GAIN = 1.1
"""A step up (a doubled batch, one more call in flight) is kept when throughput rises this much."""
SLOW = 3.0
"""A call this many times slower than expected means latency did not hold."""
SLACK = 4.0
"""A call's timeout is ``MIN_TIMEOUT`` plus this many times its expected time (x2 per timeout)."""
MIN_TIMEOUT = 5.0
"""Seconds every call may take, whatever the estimate (a loaded machine stalls)."""
BUSY_RETRIES = 10
"""Times one batch may be answered 429 / 503 before the distillation gives up."""
_BACKOFF_CAP = 8.0


@dataclass
class PacerStats:
    """What a pacer did: calls, failures by kind, settings reached, texts per second."""

    calls: int = 0
    texts: int = 0
    timeouts: int = 0
    busy: int = 0
    errors: int = 0
    seconds: float = 0.0
    batch: int = 0
    concurrency: int = 0
    history: list[tuple[int, int]] = field(default_factory=list)

    @property
    def failed_calls(self) -> int:
        """Calls that did not return vectors (each was sent again)."""
        return self.timeouts + self.busy + self.errors

    @property
    def rate(self) -> float:
        """Texts per second over the whole run."""
        return self.texts / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {
            "calls": self.calls, "texts": self.texts, "timeouts": self.timeouts,
            "busy": self.busy, "errors": self.errors, "seconds": round(self.seconds, 3),
            "batch": self.batch, "concurrency": self.concurrency,
            "texts_per_second": round(self.rate, 3),
        }  # fmt: skip


@dataclass
class _Call:
    lo: int
    hi: int
    attempts: int
    busy: int
    sent: float
    expected: float
    in_flight: int


def _busy(exc: BaseException) -> bool:
    """A 429 / 503 (or any 5xx) answer, or a dropped connection: the teacher is overloaded."""
    if isinstance(exc, ModelTimeoutError):
        return False
    if isinstance(exc, ModelError):
        return exc.status is None or exc.status == 429 or exc.status >= 500
    return isinstance(exc, (ConnectionError, OSError))


class TeacherPacer:
    """Adaptive calls of one teacher over a list of texts (module docstring).

    Parameters
    ----------
    teacher : Embedder
        The teacher; with ``embed_once`` its calls get a timeout each.
    side : {"document", "query"}
        Which side of the teacher embeds the texts.
    batch_size : int, optional
        Fixed texts per call; ``None``: adaptive.
    max_concurrency : int, optional
        Fixed calls in flight; ``None``: adaptive.
    retries : int
        Retries of a batch after a timeout or an error (429 / 503 answers
        get :data:`BUSY_RETRIES`).
    """

    def __init__(
        self,
        teacher: Any,
        side: str,
        *,
        batch_size: int | None = None,
        max_concurrency: int | None = None,
        retries: int = 2,
    ) -> None:
        self.teacher = teacher
        self.side = side
        self.fixed_batch = batch_size
        self.fixed_concurrency = max_concurrency
        self.retries = retries
        once = getattr(teacher, "embed_once", None)
        self._once: Callable[..., np.ndarray] | None = once if callable(once) else None
        cap = getattr(getattr(teacher, "client_config", None), "read_timeout", None)
        self.timeout_cap = float(cap) if isinstance(cap, (int, float)) and cap > 0 else 60.0
        self.batch = batch_size or FIRST_BATCH
        self.concurrency = max_concurrency or 1
        self.slack = SLACK
        self.stats = PacerStats()
        # Throughput model: texts per second at the current settings (None until measured).
        self.rate: float | None = None
        self._phase = "batch" if batch_size is None else "concurrency"
        if max_concurrency is not None and self._phase == "concurrency":
            self._phase = "steady"
        self._best: tuple[float, int] | None = None  # (rate, batch) while sizing the batch
        self._window: list[tuple[float, int]] = []  # (completion time, texts) at this setting
        self._window_rate: float | None = None  # rate before the last concurrency step
        self._ceiling = MAX_CONCURRENCY if max_concurrency is None else max_concurrency
        client_cap = getattr(getattr(teacher, "client_config", None), "max_concurrency", None)
        if max_concurrency is None and isinstance(client_cap, int) and client_cap >= 1:
            self._ceiling = min(self._ceiling, client_cap)  # the client's own bound holds too
        self._steady_calls = 0

    # -- the model of the teacher ---------------------------------------------------
    def expected(self, texts: int, in_flight: int) -> float:
        """Seconds a call of ``texts`` should take with ``in_flight`` calls queued."""
        if self.rate is None or self.rate <= 0:
            return self.timeout_cap / SLACK
        return max(texts, 1) * max(in_flight, 1) / self.rate

    def timeout(self, texts: int, in_flight: int) -> float:
        """The timeout of a call: ``MIN_TIMEOUT + slack x expected``, at most the client's."""
        if self.rate is None:
            return self.timeout_cap
        return min(self.timeout_cap, MIN_TIMEOUT + self.slack * self.expected(texts, in_flight))

    def _fits(self, batch: int, concurrency: int) -> bool:
        """Whether ``concurrency`` calls of ``batch`` are answered within half the timeout."""
        if self._once is None or self.rate is None:
            return True
        return batch * concurrency <= self.rate * self.timeout_cap / 2

    def _set(self, batch: int | None = None, concurrency: int | None = None) -> None:
        if batch is not None and self.fixed_batch is None:
            self.batch = max(1, min(MAX_BATCH, batch))
        if concurrency is not None and self.fixed_concurrency is None:
            self.concurrency = max(1, min(self._ceiling, concurrency))
        self._window = []
        self.stats.history.append((self.batch, self.concurrency))

    def _observe(self, call: _Call, now: float) -> None:
        """Learn from one answered call and take the next step of the sizing."""
        texts = call.hi - call.lo
        latency = max(now - call.sent, 1e-6)
        single = texts / latency * max(call.in_flight, 1)  # Little's law, one call's view
        first = self.rate is None
        if first:
            self.rate = single
        if self._phase == "batch":
            if first:
                return  # the first call also pays for the connection: measure again
            if call.in_flight > 1 or texts != self.batch:
                return
            self.rate = single
            leap = self._best is not None and single > self._best[0] * 1.6
            if self._best is None or single > self._best[0] * GAIN:
                self._best = (single, self.batch)  # this size paid
            # Throughput nearly doubled with the batch: the call's fixed cost dominates, so
            # grow faster.
            grow = (4 if leap else 2) * self.batch
            improving = self._best[1] == self.batch
            if improving and grow <= MAX_BATCH and self.expected(grow, 1) * 2 <= self.timeout_cap:
                self._set(batch=grow)
                return
            self.batch = self._best[1]
            self.rate = self._best[0]
            if self.fixed_concurrency is None and self._fits(self.batch, 2) and self._ceiling > 1:
                # Measured at one call in flight; try two at once (the client's work then
                # overlaps the teacher's), kept only if it pays.
                self._phase = "concurrency"
                self._window_rate = self._best[0]
                self._set(concurrency=2)
            else:
                self._phase = "steady"
                self._set()
            return
        self._window.append((now, texts))
        if latency > SLOW * max(call.expected, 1e-3) + 1.0 and self._phase == "steady":
            # Latency did not hold: one call fewer in flight, or a smaller batch.
            if self.concurrency > 1 and self.fixed_concurrency is None:
                self._ceiling = self.concurrency - 1
                self._set(concurrency=self.concurrency - 1)
            elif self.fixed_batch is None and self.batch > 1:
                self._set(batch=self.batch // 2)
            self.rate = texts / latency
            return
        need = max(3, self.concurrency + 2)
        if len(self._window) < need:
            return
        span = self._window[-1][0] - self._window[0][0]
        done = sum(t for _, t in self._window[1:])
        measured = done / span if span > 0 else single
        if self._phase == "concurrency":
            if self._window_rate is not None and measured < self._window_rate * GAIN:
                # The step did not pay: back to one call fewer, and stay there.
                self._ceiling = self.concurrency - 1
                self._set(concurrency=self.concurrency - 1)
                self.rate = self._window_rate
                self._phase = "steady"
                return
            self.rate = measured
            self._window_rate = measured
            nxt = self.concurrency + 1
            if nxt <= self._ceiling and self._fits(self.batch, nxt):
                self._set(concurrency=nxt)
            else:
                self._phase = "steady"
                self._set()
            return
        # steady: keep the estimate fresh; now and then try one more call in flight again.
        self.rate = 0.5 * (self.rate or measured) + 0.5 * measured
        self._window = self._window[-need:]
        self._steady_calls += 1
        if (
            self._steady_calls >= 32
            and self.fixed_concurrency is None
            and self.concurrency < self._ceiling
            and self._fits(self.batch, self.concurrency + 1)
        ):
            self._steady_calls = 0
            self._window_rate = measured
            self._phase = "concurrency"
            self._set(concurrency=self.concurrency + 1)

    def _back_off(self, timed_out: bool) -> None:
        self._phase = "steady"
        self._ceiling = (
            max(1, self.concurrency // 2) if self.fixed_concurrency is None else (self._ceiling)
        )
        self._set(concurrency=max(1, self.concurrency // 2))
        if timed_out:
            self.slack *= 2
            if self.concurrency == 1 or self.fixed_concurrency is not None:
                self._set(batch=self.batch // 2)
            if self.rate is not None:
                self.rate /= 2

    # -- running ----------------------------------------------------------------------
    def _call(self, texts: list[str], timeout: float) -> np.ndarray:
        if self._once is not None:
            return self._once(texts, side=self.side, timeout=timeout)
        fn = query_vectors if self.side == "query" else document_vectors
        return fn(self.teacher, texts)

    def run(
        self,
        texts: Sequence[str],
        start: int,
        emit: Callable[[np.ndarray], None],
        progress: Callable[[int, float], None] | None = None,
    ) -> None:
        """Embed ``texts[start:]``; ``emit`` receives the vectors in text order, block by block.

        Parameters
        ----------
        texts : sequence of str
            All the texts.
        start : int
            The first text to ask for (earlier ones are done: a resume).
        emit : callable
            Called with each next block of vectors, in order.
        progress : callable, optional
            ``progress(done, seconds)`` after each block.

        Raises
        ------
        EmbedderError
            When a batch fails more often than allowed (what came before it
            was emitted).
        """
        n = len(texts)
        t0 = time.perf_counter()
        queue: deque[tuple[int, int, int, int]] = deque()  # failed ranges: lo, hi, attempts, busy
        nxt = start
        flushed = start
        ready: dict[int, tuple[int, np.ndarray]] = {}
        pending: dict[Future[np.ndarray], _Call] = {}
        draining = False
        resume_at = 0.0
        delay = 0.5
        width = MAX_CONCURRENCY if self.fixed_concurrency is None else self.fixed_concurrency
        pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="fastrag-teacher")
        try:
            while flushed < n:
                now = time.perf_counter()
                if draining and not pending:
                    if resume_at > now:
                        time.sleep(resume_at - now)
                    draining = False
                while not draining and len(pending) < self.concurrency and (queue or nxt < n):
                    if self.rate is None and pending:
                        break  # the first call alone: it measures the teacher
                    if self._phase == "batch" and pending:
                        break  # batch sizing: one call at a time
                    if queue:
                        lo, hi, attempts, busy = queue.popleft()
                        if hi - lo > self.batch:  # resend in batches of the current size
                            queue.appendleft((lo + self.batch, hi, attempts, busy))
                            hi = lo + self.batch
                    else:
                        lo, hi, attempts, busy = nxt, min(n, nxt + self.batch), 0, 0
                        nxt = hi
                    flight = len(pending) + 1
                    timeout = self.timeout(hi - lo, flight)
                    call = _Call(lo, hi, attempts, busy, time.perf_counter(),
                                 self.expected(hi - lo, flight), flight)  # fmt: skip
                    pending[pool.submit(self._call, list(texts[lo:hi]), timeout)] = call
                    self.stats.calls += 1
                if not pending:
                    continue
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                now = time.perf_counter()
                for fut in done:
                    call = pending.pop(fut)
                    try:
                        vectors = fut.result()
                    except (FastragError, OSError) as exc:
                        timed_out = isinstance(exc, (ModelTimeoutError, TimeoutError))
                        busy = _busy(exc) and not timed_out
                        if timed_out:
                            self.stats.timeouts += 1
                        elif busy:
                            self.stats.busy += 1
                        else:
                            self.stats.errors += 1
                        attempts = call.attempts + (0 if busy else 1)
                        busy_count = call.busy + (1 if busy else 0)
                        if attempts > self.retries or busy_count > BUSY_RETRIES:
                            tries = attempts + busy_count
                            raise EmbedderError(
                                f"the teacher failed on a batch of {call.hi - call.lo} texts "
                                f"after {tries} attempts: {exc}"
                            ) from exc
                        queue.append((call.lo, call.hi, attempts, busy_count))
                        queue = deque(sorted(queue))  # resent in text order
                        if timed_out or busy:
                            self._back_off(timed_out)
                            draining = True
                        wait_s = delay
                        after = getattr(exc, "retry_after", None)
                        if isinstance(after, (int, float)) and after > 0:
                            wait_s = max(wait_s, float(after))
                        if timed_out:  # let the texts that timed out leave the teacher's queue
                            wait_s = max(wait_s, min(self.timeout_cap, now - call.sent))
                        resume_at = max(resume_at, now + wait_s)
                        delay = min(2 * delay, _BACKOFF_CAP)
                        if not (timed_out or busy):
                            draining = True  # an error: wait as well, with the others back
                        continue
                    delay = 0.5
                    self._observe(call, now)
                    ready[call.lo] = (call.hi, np.asarray(vectors, dtype=np.float32))
                    self.stats.texts += call.hi - call.lo
                    while flushed in ready:
                        hi, block = ready.pop(flushed)
                        emit(block)
                        flushed = hi
                        if progress is not None:
                            progress(flushed, time.perf_counter() - t0)
        except BaseException:
            for fut in pending:
                fut.cancel()
            # What was answered in order before the failure is kept (a resume starts there).
            for fut, call in list(pending.items()):
                if not fut.cancelled():
                    try:
                        ready[call.lo] = (call.hi, np.asarray(fut.result(), dtype=np.float32))
                    except BaseException:  # noqa: BLE001 - the first failure is raised
                        pass
            while flushed in ready:
                hi, block = ready.pop(flushed)
                emit(block)
                flushed = hi
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            self.stats.seconds += time.perf_counter() - t0
            self.stats.batch = self.batch
            self.stats.concurrency = self.concurrency
