"""Calling a teacher model at the pace it answers: batch size, calls in flight, timeouts.

A distillation asks its teacher for tens of thousands of vectors. A local
CPU teacher (a server with two threads) answers one request after the
other: with fixed settings (64 texts per call, 4 calls in flight, a 60 s
read timeout) the calls queue behind each other inside the teacher, time
out, and a retry joins the same queue again. :class:`TeacherPacer` sizes
the calls from what it measures instead. Every decision reads the
**median latency per text of the last 3 calls** (:data:`WINDOW`) at a
setting, never one call alone, so one slow (or lucky) call on a noisy
machine neither stops the growth nor shrinks the batch:

1. **One small call first** (:data:`FIRST_BATCH` texts): its latency per
   text is the first estimate of the teacher's speed.
2. **Batch size** doubles (quadruples while throughput nearly doubles with
   it) while the teacher's throughput (texts per second of one call at a
   time) rises and a call's expected time (along the line through the two
   sizes measured: a cost per call plus a cost per text) stays within the
   client's timeout divided by the **margin** (:meth:`TeacherPacer.margin`:
   ``exp(3 sigma)`` of the latency's measured spread, at least
   :data:`MARGIN_MIN`; 2, half the timeout, before any spread is measured).
   A steady teacher's calls may so come near the timeout, a noisy one's stay
   well within it. A step whose first call raises throughput by
   :data:`GAIN` is taken at once; otherwise the step and the size before it
   are measured until each has 3 calls, and the step is taken unless its
   median is :data:`GAIN` slower (a larger batch costs no more per text on
   a teacher with a cost per call), else the size before is kept and a
   larger batch probed again soon (:data:`PROBE_SOON`). A step measured
   once is bounded by the size before's cost per text too (one lucky call
   must not lead to a call that times out), and a step whose measured calls
   leave less than the margin is not kept.
3. **Calls in flight** then go to two, and grow by one while the throughput measured
   between completions rises by :data:`GAIN`, never beyond what the teacher
   answers in the timeout over the margin (``in flight x batch x margin <=
   throughput x timeout``) nor :data:`MAX_CONCURRENCY` (nor the teacher
   client's own ``max_concurrency``).
4. **Latency must hold**: when the median of the last 3 calls takes
   :data:`SLOW` times its expected time, one call is taken out of flight.
   Slowness alone never lowers the batch size, short of a **near miss**: a
   call answered in more than the timeout / :data:`MARGIN_MIN`, or a setting
   whose median call (x calls in flight) no longer leaves the margin (the
   spread grew), takes one call out of flight or, at one in flight, halves
   the batch at once, before a call times out (nothing failed: nothing is
   resent or waited for).
5. **Back off** on a timeout, HTTP 429 or 503 (or a dropped connection),
   once per episode: the calls that were already in flight when the first
   one failed belong to the same episode, so a burst of failures lowers the
   settings once, not once per failed call. A back-off halves the calls in
   flight (and the batch too after a timeout that leaves one call in
   flight); with one call in flight already (or calls in flight fixed) it
   halves the batch. No new call is sent until every call in flight has
   returned (the teacher's queue drained: a retried call never joins the
   queue it timed out in), then the pacer waits what the teacher asked
   (``Retry-After``) or an exponential back-off, and the failed texts are
   sent again in batches of the new size. After a timeout the timeout's
   slack doubles and the texts that timed out are given time to finish
   inside the teacher before anything is resent. A timeout shorter than
   the client's own read timeout does not use up one of the batch's
   ``retries`` (the estimate was short, as when a loaded machine slows
   the teacher): only timeouts at the client's cap do, or more than
   :data:`BUSY_RETRIES` of the short kind and 429 / 503 answers together.
6. **Regrow**: after :data:`REGROW_AFTER` successful calls at a lowered
   batch, a doubled batch is probed, and kept (and doubled again, up to the
   size before the back-off) while the median latency per text holds
   (rises by less than :data:`GAIN`).
7. **Probe in steady state**: after :data:`PROBE_AFTER` successful calls
   at one setting, a larger one is tried, a doubled batch and one more
   call in flight in turn (each within the bounds above). A doubled batch
   is kept (and doubled again) unless its median latency per text is
   :data:`GAIN` worse (as in a regrowth: larger calls cost no more per text
   on a teacher whose calls cost a fixed part plus a part per text, and
   noise should not keep a batch small); one more call in flight as in
   step 3. A lowered ceiling of calls in flight (a back-off, a slow
   stretch, a step that did not pay) is raised by one for the try. A probe
   that does not pay doubles the wait before the next one of its kind (up
   to :data:`PROBE_MAX` calls); one that pays resets it. So sizing that
   stopped early on noise, or a setting lowered for good reasons that no
   longer hold, is undone within a few dozen calls, at the cost of a few
   calls per probe.
8. **Timeouts scale with the batch**: a call's timeout is
   ``MIN_TIMEOUT + slack x expected time`` (``slack`` starts at
   :data:`SLACK`), at most the teacher client's read timeout.

What the pacer did is in :attr:`PacerStats.history`: one
``(reason, batch, in_flight)`` entry per setting it took.

A setting given by the caller (``batch_size`` or ``max_concurrency``) is
kept fixed; the other one adapts. Teachers that run in process (no HTTP)
have no timeouts; their batch and concurrency adapt the same way by
throughput. A teacher takes part in timeouts through
``embed_once(texts, side=..., timeout=...)`` (one request, no retry of its
own; :meth:`fastrag.OpenAIEmbedder.embed_once`).
"""

from __future__ import annotations

import math
import statistics
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
    "MARGIN_MIN",
    "MAX_BATCH",
    "MAX_CONCURRENCY",
    "MIN_TIMEOUT",
    "PROBE_AFTER",
    "PROBE_MAX",
    "PROBE_SOON",
    "REGROW_AFTER",
    "SLACK",
    "SLOW",
    "SPREAD_Z",
    "WINDOW",
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
"""Calls this many times slower than expected (median of :data:`WINDOW`): latency did not hold."""
SLACK = 4.0
"""A call's timeout is ``MIN_TIMEOUT`` plus this many times its expected time (x2 per timeout)."""
MIN_TIMEOUT = 5.0
"""Seconds every call may take, whatever the estimate (a loaded machine stalls)."""
WINDOW = 3
"""Calls whose median latency per text a decision reads."""
REGROW_AFTER = 8
"""Successful calls at a lowered batch before a larger one is probed again."""
PROBE_AFTER = 16
"""Successful calls at one steady setting before a larger one is probed."""
PROBE_SOON = 4
"""Steady calls before the first batch probe when the sizing turned a larger batch down."""
PROBE_MAX = 256
"""Most calls between two probes of one kind (the wait doubles after a probe that did not pay)."""
MARGIN_MIN = 1.25
"""A call's expected time is kept within the timeout divided by at least this much."""
SPREAD_Z = 3.0
"""The margin covers this many standard deviations of the log latency of calls at one setting."""
PRIOR_SIGMA = math.log(2.0) / SPREAD_Z
"""The spread assumed before any is measured: a margin of 2, half the timeout."""
PRIOR_DOF = 2
"""How many measured deviations the assumed spread weighs as."""
SPREAD_CALLS = 32
"""Latest calls whose latency spread (within one setting) the margin reads."""
BUSY_RETRIES = 10
"""Times one batch may be answered 429 / 503, or time out short of the client's cap, before the
distillation gives up."""
_BACKOFF_CAP = 8.0


@dataclass
class PacerStats:
    """What a pacer did: calls, failures by kind, settings reached, texts per second.

    ``history`` holds one ``(reason, batch, in_flight)`` entry per setting
    the pacer took, in order: ``"start"``, ``"grow"`` and ``"measure"``
    (sizing the batch), ``"settle"`` (the batch chosen), ``"in flight"``
    (a concurrency step), ``"steady"``, ``"slow"`` (one call fewer in
    flight), ``"near miss"`` (a call that took nearly its timeout: one call
    fewer in flight or half the batch), ``"margin"`` (the same, as the
    setting's calls no longer leave the margin), ``"back-off"`` (a timeout, 429 or
    503), ``"regrow"`` (a larger
    batch probed after a back-off), ``"probe"`` (a doubled batch tried in
    steady state) and ``"probe in flight"`` (one more call in flight tried
    in steady state).
    """

    calls: int = 0
    texts: int = 0
    timeouts: int = 0
    busy: int = 0
    errors: int = 0
    seconds: float = 0.0
    batch: int = 0
    concurrency: int = 0
    history: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def failed_calls(self) -> int:
        """Calls that did not return vectors (each was sent again)."""
        return self.timeouts + self.busy + self.errors

    @property
    def rate(self) -> float:
        """Texts per second over the whole run."""
        return self.texts / self.seconds if self.seconds > 0 else 0.0

    def batches(self) -> list[int]:
        """The batch size of each entry of ``history``, in order."""
        return [batch for _, batch, _ in self.history]

    def reasons(self) -> list[str]:
        """The reason of each entry of ``history``, in order."""
        return [reason for reason, _, _ in self.history]

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
    seq: int
    """The call's number (from 0): calls numbered below a back-off's were already in flight."""
    timeout: float = 0.0
    """Its timeout: one below the client's cap says the estimate was short, not the teacher gone."""


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
        # Latency per text (seconds, x calls in flight) of the last WINDOW calls of each batch
        # size while sizing (or regrowing) the batch; `_kept` is the size the step started from.
        self._samples: dict[int, deque[float]] = {}
        self._step = self.batch  # the size being tried
        self._kept: int | None = None
        self._recent: deque[float] = deque(maxlen=WINDOW)  # latency per text at this setting
        self._regrow_to = 0  # the batch before the last back-off (0: nothing to regrow)
        self._window: list[tuple[float, int]] = []  # (completion time, texts) at this setting
        self._window_rate: float | None = None  # rate before the last concurrency step
        self._slow: deque[float] = deque(maxlen=WINDOW)  # latency / (SLOW x expected + 1 s)
        self._ceiling = MAX_CONCURRENCY if max_concurrency is None else max_concurrency
        client_cap = getattr(getattr(teacher, "client_config", None), "max_concurrency", None)
        if max_concurrency is None and isinstance(client_cap, int) and client_cap >= 1:
            self._ceiling = min(self._ceiling, client_cap)  # the client's own bound holds too
        self._cap = self._ceiling  # the hard bound; `_ceiling` is lowered and probed back up
        self._steady_calls = 0  # steady calls measured at this setting
        # Steady-state probes: the calls to wait before the next one of each kind, the kind
        # in progress (None: none) and the setting it started from.
        self._probe_wait = {"batch": PROBE_AFTER, "in flight": PROBE_AFTER}
        self._probing: str | None = None
        self._probe_from = (self.batch, self.concurrency)
        self._probe_next = "batch"
        self._episode = 0  # calls numbered below this were in flight at the last back-off
        self._since_back_off = -1  # successful calls at the lowered batch (-1: none lowered)
        # (texts, in flight, log latency) of the latest calls: the spread the margin covers.
        self._spread: deque[tuple[int, int, float]] = deque(maxlen=SPREAD_CALLS)
        self.stats.history.append(("start", self.batch, self.concurrency))

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

    def margin(self) -> float:
        """How many times a call's expected time must fit in the client's timeout.

        ``exp(SPREAD_Z x sigma)``, at least :data:`MARGIN_MIN`, where sigma is the
        pooled standard deviation of the log latency of the last
        :data:`SPREAD_CALLS` calls around the mean of their setting (texts, calls in
        flight), weighed with an assumed spread (:data:`PRIOR_SIGMA`, a margin of 2)
        counted as :data:`PRIOR_DOF` deviations. A steady teacher lets calls near the
        timeout (a margin of 1.25); a noisy one keeps them well within it.
        """
        groups: dict[tuple[int, int], list[float]] = {}
        for texts, flight, log_latency in self._spread:
            groups.setdefault((texts, flight), []).append(log_latency)
        squares, dof = 0.0, 0
        for logs in groups.values():
            if len(logs) >= 2:
                mean = sum(logs) / len(logs)
                squares += sum((x - mean) ** 2 for x in logs)
                dof += len(logs) - 1
        var = (squares + PRIOR_DOF * PRIOR_SIGMA**2) / (dof + PRIOR_DOF)
        return max(MARGIN_MIN, math.exp(SPREAD_Z * math.sqrt(var)))

    def _fits(self, batch: int, concurrency: int) -> bool:
        """Whether ``concurrency`` calls of ``batch`` are answered within the timeout / margin."""
        if self._once is None or self.rate is None:
            return True
        return batch * concurrency * self.margin() <= self.rate * self.timeout_cap

    def _set(self, reason: str, batch: int | None = None, concurrency: int | None = None) -> None:
        if batch is not None and self.fixed_batch is None:
            self.batch = max(1, min(MAX_BATCH, batch))
        if concurrency is not None and self.fixed_concurrency is None:
            self.concurrency = max(1, min(self._ceiling, concurrency))
        self._window = []
        self._slow.clear()
        self._recent.clear()
        self._steady_calls = 0
        self.stats.history.append((reason, self.batch, self.concurrency))

    def _median(self, size: int) -> float:
        return statistics.median(self._samples[size])

    def _can_grow(self, batch: int) -> bool:
        """Whether calls of ``batch`` texts stay within the timeout / margin at this concurrency.

        With two sizes measured :data:`WINDOW` times each, a call's time is extrapolated
        along the line through their medians (a fixed cost per call plus a cost per
        text); otherwise in proportion to the step's latency per text (which overstates a
        larger call, never understates it: one lucky call on a noisy teacher must not
        lead to a call that times out).
        """
        if batch > MAX_BATCH:
            return False
        if self._phase == "regrow" and batch > self._regrow_to:
            return False  # no larger than before the back-off
        steady = self._phase in ("regrow", "probe")
        flight = self.concurrency if steady or self.fixed_concurrency else 1
        step, kept = self._step, self._kept
        margin = self.margin() if self._once is not None else 2.0
        full = (
            kept is not None
            and kept != step
            and {kept, step} <= self._samples.keys()
            and min(len(self._samples[step]), len(self._samples[kept])) >= WINDOW
        )
        if full:
            assert kept is not None
            at_step, at_kept = step * self._median(step), kept * self._median(kept)
            per_text = max(0.0, (at_step - at_kept) / (step - kept))
            call = max(at_step, at_step + per_text * (batch - step))
            return call * max(flight, 1) * margin <= self.timeout_cap
        if step in self._samples:
            per_text = self._median(step)
            if kept in self._samples and len(self._samples[step]) < WINDOW:
                # One lucky call at the step must not send a call that times out: the size
                # before costs at least as much per text on a teacher with a cost per call.
                per_text = max(per_text, self._median(kept))
            return batch * per_text * max(flight, 1) * margin <= self.timeout_cap
        return self.expected(batch, flight) * margin <= self.timeout_cap

    def _within(self, batch: int, per_text: float) -> bool:
        """Whether calls of ``batch`` at ``per_text`` (x calls in flight) leave the margin."""
        if self._once is None:
            return True
        flight = max(self.concurrency, 1)
        return batch * per_text * flight * self.margin() <= self.timeout_cap

    def _size(self, texts: int, per_text: float) -> None:
        """One call of a batch-sizing step answered: grow, measure again or settle."""
        step, kept = self._step, self._kept
        if texts not in (step, kept):
            return  # a short call (the last texts) or one of an earlier setting
        self._samples.setdefault(texts, deque(maxlen=WINDOW)).append(per_text)
        if step not in self._samples:
            return  # the step's own size not measured yet
        cur = self._median(step)
        ref = self._median(kept) if kept in self._samples else None
        regrow = self._phase == "regrow"
        probe = self._phase == "probe"
        lenient = regrow or probe  # from a setting known to work: larger unless clearly worse
        # A step is taken at once when its first call raised throughput by GAIN (in a
        # regrowth or a steady-state probe: when latency per text held, rose by less than
        # GAIN: the teacher answered that batch before the back-off, or the setting probed
        # from works and a larger batch costs no more per text on a teacher whose calls
        # cost a fixed part plus a part per text); else once the medians of 3 calls at it
        # and at the size before show it did not lower throughput.
        full = (
            kept is not None
            and min(len(self._samples[step]), len(self._samples.get(kept, ()))) >= WINDOW
        )
        held = ref is not None and cur <= ref * GAIN and full  # not clearly slower per text
        if ref is None or (cur <= ref * GAIN if lenient else cur * GAIN <= ref) or held:
            self.rate = 1.0 / cur
            leap = ref is not None and cur * 1.6 <= ref and not lenient
            grow = (4 if leap else 2) * step
            limit = self._regrow_to if regrow else MAX_BATCH
            if grow > 2 * step and not (grow <= limit and self._can_grow(grow)):
                grow = 2 * step  # a leap too far: a doubling may still fit
            if grow <= limit and self._can_grow(grow):
                self._kept, self._step = step, grow
                self._samples = {step: self._samples[step]}
                self._set("regrow" if regrow else "probe" if probe else "grow", batch=grow)
            elif kept is not None and not self._within(step, cur):
                # Measured, the step's calls leave less than the margin (the spread grew).
                self.rate = 1.0 / ref if ref else self.rate
                self._settle(kept)
            else:
                self._settle(step)
            return
        assert kept is not None  # nothing kept: the step above is always taken
        if len(self._samples[step]) < WINDOW:
            nxt = step  # one call is not enough to give a step up: measure it again
        elif len(self._samples[kept]) < WINDOW:
            nxt = kept  # nor to be the size it is compared with
        else:
            self.rate = 1.0 / self._median(kept)
            self._settle(kept)  # the step lowered throughput
            if self.fixed_batch is None and not lenient:
                # Medians of 3 noisy calls can mislead: try the larger batch again soon.
                self._probe_wait["batch"] = PROBE_SOON
            return
        if self.batch != nxt:
            self._set("measure", batch=nxt)

    def _settle(self, batch: int) -> None:
        """The batch is chosen: try a second call in flight, or go steady."""
        regrow = self._phase == "regrow"
        self._samples = {}
        self._kept = None
        self._step = batch
        if self._phase == "probe":
            self._phase = "steady"
            self._set("steady", batch=batch)
            self._probe_done(paid=self.batch > self._probe_from[0])
            return
        if regrow:
            self._regrow_to = 0
            self._since_back_off = -1
            self._phase = "steady"
            self._set("steady", batch=batch)
            return
        self.batch = batch if self.fixed_batch is None else self.batch
        if self.fixed_concurrency is None and self._fits(batch, 2) and self._ceiling > 1:
            # Measured at one call in flight; try two at once (the client's work then
            # overlaps the teacher's), kept only if it pays.
            self._phase = "concurrency"
            self._window_rate = self.rate
            self._set("settle", batch=batch, concurrency=2)
        else:
            self._phase = "steady"
            self._set("settle", batch=batch)

    def _observe(self, call: _Call, now: float) -> None:
        """Learn from one answered call and take the next step of the sizing."""
        texts = call.hi - call.lo
        latency = max(now - call.sent, 1e-6)
        per_text = latency / (max(texts, 1) * max(call.in_flight, 1))  # Little's law
        single = 1.0 / per_text
        first = self.rate is None
        if first:
            self.rate = single
        elif self._once is not None:
            # The first call also pays for the connection: its latency is no noise.
            self._spread.append((texts, call.in_flight, math.log(latency)))
            if latency * MARGIN_MIN > self.timeout_cap and call.seq >= self._episode:
                self.rate = min(self.rate or single, single)
                self._near_miss()
                return
        if self._phase == "batch":
            if first:
                return  # the first call also pays for the connection: measure again
            if call.in_flight > 1:
                return
            self._size(texts, per_text)
            return
        if self._phase in ("regrow", "probe"):
            self._size(texts, per_text)
            return
        self._window.append((now, texts))
        self._recent.append(per_text)
        self._slow.append(latency / (SLOW * max(call.expected, 1e-3) + 1.0))
        if (
            self._phase == "steady"
            and self._since_back_off >= 0
            and call.seq >= self._episode
            and texts == self.batch
        ):
            self._since_back_off += 1  # a good call at the lowered batch
            if self._since_back_off >= REGROW_AFTER and self._start_regrow():
                return
        if (
            self._phase == "steady"
            and self.fixed_batch is None
            and len(self._recent) == WINDOW
            and self.batch > 1
            and not self._within(self.batch, statistics.median(self._recent))
        ):
            # The spread measured since leaves this setting less than the margin: lower it
            # before a call times out.
            self._near_miss("margin")
            return
        if (
            self._phase == "steady"
            and len(self._slow) == WINDOW
            and statistics.median(self._slow) > 1.0
        ):
            # Latency did not hold (the median of the last calls): one call fewer in flight.
            # The batch stays: only a timeout, 429 or 503 lowers it.
            self.rate = 1.0 / statistics.median(self._recent)
            if self.concurrency > 1 and self.fixed_concurrency is None:
                self._ceiling = self.concurrency - 1
                self._set("slow", concurrency=self.concurrency - 1)
            else:
                self._slow.clear()
            return
        need = max(3, self.concurrency + 2)
        if len(self._window) < need:
            return
        span = self._window[-1][0] - self._window[0][0]
        done = sum(t for _, t in self._window[1:])
        measured = done / span if span > 0 else single
        if self._phase == "concurrency":
            # A second call in flight is kept unless it lowered throughput (GAIN): it
            # overlaps the client's work (sending, decoding) with the teacher's, which pays
            # a few per cent on a teacher that answers one call at a time, below GAIN.
            # Further calls must raise throughput by GAIN.
            need_gain = 1.0 / GAIN if self.concurrency == 2 else GAIN
            if self._window_rate is not None and measured < self._window_rate * need_gain:
                # The step did not pay: back to one call fewer, and stay there (until a probe).
                self._ceiling = self.concurrency - 1
                self._phase = "steady"
                self._set("in flight", concurrency=self.concurrency - 1)
                self.rate = self._window_rate
                if self._probing == "in flight":
                    self._probe_done(paid=False)
                return
            self.rate = measured
            self._window_rate = measured
            nxt = self.concurrency + 1
            if nxt <= self._ceiling and self._fits(self.batch, nxt):
                self._set("in flight", concurrency=nxt)
            else:
                self._phase = "steady"
                self._set("steady")
                if self._probing == "in flight":
                    self._probe_done(paid=True)
            return
        # steady: keep the estimate fresh; now and then probe a larger setting.
        self.rate = 0.5 * (self.rate or measured) + 0.5 * measured
        self._window = self._window[-need:]
        self._steady_calls += 1
        if self._since_back_off < 0 and call.seq >= self._episode:
            self._start_probe(measured)

    def _start_probe(self, measured: float) -> bool:
        """In steady state, after enough good calls: try a doubled batch or one more in flight.

        The two kinds take turns; a kind is tried only within the pacer's
        bounds (the batch: :data:`MAX_BATCH` and the timeout / margin at this
        concurrency; calls in flight: the hard ceiling and what the teacher
        answers in the timeout / margin).
        """
        kinds = ["batch", "in flight"]
        if self._probe_next == "in flight":
            kinds.reverse()
        for kind in kinds:
            if self._steady_calls < self._probe_wait[kind]:
                continue
            if kind == "batch":
                grow = 2 * self.batch
                if self.fixed_batch is not None or grow > MAX_BATCH or not self._recent:
                    continue
                self._phase, self._kept, self._step = "probe", None, self.batch
                self._samples = {}
                if not self._can_grow(grow):
                    self._phase = "steady"
                    continue
                self._probing, self._probe_from = kind, (self.batch, self.concurrency)
                self._kept, self._step = self.batch, grow
                self._samples = {self.batch: deque(self._recent, maxlen=WINDOW)}
                self._probe_next = "in flight"
                self._set("probe", batch=grow)
                return True
            nxt = self.concurrency + 1
            if self.fixed_concurrency is not None or nxt > self._cap:
                continue
            if not self._fits(self.batch, nxt):
                continue
            self._probing, self._probe_from = kind, (self.batch, self.concurrency)
            self._ceiling = max(self._ceiling, nxt)  # a lowered ceiling is tried one higher
            self._window_rate = measured
            self._phase = "concurrency"
            self._probe_next = "batch"
            self._set("probe in flight", concurrency=nxt)
            return True
        return False

    def _probe_done(self, paid: bool) -> None:
        """A steady-state probe ended: reset its kind's wait when it paid, else double it."""
        kind = self._probing
        self._probing = None
        if kind is None:
            return
        wait = self._probe_wait[kind]
        self._probe_wait[kind] = PROBE_AFTER if paid else min(PROBE_MAX, 2 * wait)

    def _start_regrow(self) -> bool:
        """After REGROW_AFTER good calls at a lowered batch: probe a doubled one."""
        grow = min(2 * self.batch, self._regrow_to)
        self._phase = "regrow"  # (_can_grow reads it)
        if self.fixed_batch is not None or grow <= self.batch or not self._can_grow(grow):
            self._phase = "steady"
            self._since_back_off = -1
            return False
        self._kept, self._step = self.batch, grow
        self._samples = {self.batch: deque(self._recent, maxlen=WINDOW)}
        self._set("regrow", batch=grow)
        return True

    def _near_miss(self, reason: str = "near miss") -> None:
        """A call answered in more than the timeout / MARGIN_MIN: lower before one times out.

        One call fewer in flight, or at one in flight (or calls in flight fixed) half the
        batch, at once and once per episode (the calls already in flight do not lower
        again). Nothing failed, so nothing is resent or waited for; the batch is not
        regrown after it (a steady-state probe may try it again, within the margin, which
        the slow call widened).
        """
        self._episode = self.stats.calls
        if self._probing is not None:
            self._probe_done(paid=False)
        self._phase = "steady"
        self._samples = {}
        self._kept = None
        self._since_back_off = -1
        self._regrow_to = 0
        if self.concurrency > 1 and self.fixed_concurrency is None:
            self._ceiling = self.concurrency - 1
            self._set(reason, concurrency=self.concurrency - 1)
        else:
            self._set(reason, batch=self.batch // 2)
        self._step = self.batch

    def _back_off(self, call: _Call, timed_out: bool) -> None:
        """A timeout, 429 or 503: lower the settings, once per episode of failures."""
        self._since_back_off = -1 if self._regrow_to == 0 else 0  # the count starts again
        if call.seq < self._episode:
            return  # in flight when the episode's first failure came: lowered already
        self._episode = self.stats.calls  # every call sent so far belongs to this episode
        # The batch to regrow to: the one in use, or during a regrowth (or a probe) the last
        # one that held. A probe that ends in a back-off did not pay.
        steady_step = self._phase in ("regrow", "probe")
        before = self._kept if steady_step and self._kept else self.batch
        if self._probing is not None:
            self._probe_done(paid=False)
        self._phase = "steady"
        self._samples = {}
        self._kept = None
        conc = self.concurrency
        batch: int | None = None
        if self.fixed_concurrency is None and conc > 1:
            self._ceiling = max(1, conc // 2)
            conc = max(1, conc // 2)
            if timed_out and conc == 1:
                batch = self.batch // 2
        else:
            batch = self.batch // 2
        self._set("back-off", batch=batch, concurrency=conc)
        self._step = self.batch
        if self.fixed_batch is None and self.batch < before:
            self._regrow_to = before
            self._since_back_off = 0
        if timed_out:
            self.slack *= 2
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
                                 self.expected(hi - lo, flight), flight,
                                 self.stats.calls, timeout)  # fmt: skip
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
                        # A timeout shorter than the client's own is the pacer's estimate
                        # falling short (a teacher slowed by a loaded machine): the texts go
                        # again with a longer timeout (the back-off doubles the slack), and
                        # only timeouts at the client's cap, or too many, use up attempts.
                        short = timed_out and call.timeout < 0.999 * self.timeout_cap
                        free = busy or short
                        attempts = call.attempts + (0 if free else 1)
                        busy_count = call.busy + (1 if free else 0)
                        if attempts > self.retries or busy_count > BUSY_RETRIES:
                            tries = attempts + busy_count
                            raise EmbedderError(
                                f"the teacher failed on a batch of {call.hi - call.lo} texts "
                                f"after {tries} attempts: {exc}"
                            ) from exc
                        queue.append((call.lo, call.hi, attempts, busy_count))
                        queue = deque(sorted(queue))  # resent in text order
                        if timed_out or busy:
                            self._back_off(call, timed_out)
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
