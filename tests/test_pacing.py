"""Distillation paced to its teacher: a real slow server on 127.0.0.1 that answers one request at a time."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fastrag import OpenAIEmbedder, StaticEmbedder
from fastrag.embed import pacing
from fastrag.embed.distill import DistillProgress
from fastrag.embed.pacing import TeacherPacer
from fastrag.errors import EmbedderError, ModelTimeoutError, RateLimitError, RetryExhaustedError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _slow_teacher import SlowTeacher  # noqa: E402

WORDS = [f"w{i:03d}" for i in range(160)]
CORPUS = [" ".join(WORDS[(7 * j + 3 * k) % len(WORDS)] for k in range(12)) for j in range(80)]
OPTS = dict(dim=8, min_count=1, fit_sample=40, retries=2)


def _teacher(server: SlowTeacher, timeout: float = 1.0) -> OpenAIEmbedder:
    # The client's own retries are what used to resend into the teacher's queue.
    return OpenAIEmbedder(server.base_url, model="m", timeout=timeout, max_retries=3)


def _run(texts, teacher, **kw):
    got: list[np.ndarray] = []
    pacer = TeacherPacer(teacher, "document", **kw)
    pacer.run(texts, 0, got.append)
    return pacer, np.concatenate(got)


def _repeats(server: SlowTeacher) -> int:
    asked = [t for s in server.seen for t in s.texts]
    return len(asked) - len(set(asked))


def test_defaults_finish_with_no_failed_call_where_fixed_settings_time_out():
    # 5 ms per text, one request at a time, a 1 s timeout: 4 calls of 64 texts in flight
    # wait 1.4 s for the last answer, so the fixed setting times out and resends.
    with SlowTeacher(per_text=0.005, overhead=0.02) as server:
        teacher = _teacher(server)
        emb = StaticEmbedder.distill(CORPUS, teacher, **OPTS)
        teacher.close()
    assert emb.fitted
    assert server.failures() == [] and _repeats(server) == 0  # every text asked once
    with SlowTeacher(per_text=0.005, overhead=0.02) as slow:
        teacher = _teacher(slow)
        pacer, _ = _run(WORDS * 2, teacher, batch_size=64, max_concurrency=4, retries=6)
        teacher.close()
    assert pacer.stats.timeouts > 0 and _repeats(slow) > 0


def test_a_timed_out_call_is_resent_only_to_an_idle_teacher():
    # The request holding w100 stalls for 1.3 s (a 1 s timeout): its texts are resent, in
    # smaller batches, once no call is in flight and the teacher has had time to finish it.
    with SlowTeacher(per_text=0.002, overhead=0.01, stall_on={"w100": 1.3}) as server:
        teacher = _teacher(server)
        pacer, vectors = _run(WORDS, teacher)
        teacher.close()
    assert 1 <= pacer.stats.timeouts <= 2  # the stalled call, and one queued behind it
    stalled = next(s for s in server.seen if "w100" in s.texts)
    again = [s for s in server.seen[stalled.number :] if set(s.texts) & set(stalled.texts)]
    assert again and all(s.depth == 0 for s in again)  # nothing left in the teacher's queue
    assert all(s.arrived >= stalled.finished for s in again)
    with SlowTeacher(per_text=0.002, overhead=0.01) as clean:
        teacher = _teacher(clean)
        _, expected = _run(WORDS, teacher)
        teacher.close()
    np.testing.assert_array_equal(vectors, expected)  # the same answers, in order


def test_429_and_503_back_off_and_finish():
    inject = {3: 503, 8: 429, 9: 503, 15: 503}
    with SlowTeacher(per_text=0.001, overhead=0.005, inject=inject, retry_after=0.05) as server:
        teacher = _teacher(server, timeout=5.0)
        pacer, vectors = _run(WORDS * 3, teacher)
        teacher.close()
    assert pacer.stats.busy == len(inject) and pacer.stats.timeouts == 0
    assert vectors.shape == (len(WORDS) * 3, 16) and np.isfinite(vectors).all()
    for n in inject:  # after a refusal the next request finds the teacher idle
        nxt = server.seen[n]  # request n + 1
        assert nxt.depth == 0 and nxt.arrived - server.seen[n - 1].arrived >= 0.05
    answered = server.asked()
    assert sorted(answered) == sorted(WORDS * 3)  # each text answered once


def test_a_teacher_with_a_short_queue_is_not_overrun():
    # The server refuses (503) a request that finds another one already waiting.
    with SlowTeacher(per_text=0.002, overhead=0.01, max_queue=1, retry_after=0.02) as server:
        teacher = _teacher(server, timeout=5.0)
        pacer, vectors = _run(WORDS * 4, teacher)
        teacher.close()
    assert vectors.shape[0] == len(WORDS) * 4
    # Not overrun: the teacher refused at most a few calls, and none failed. (The calls in
    # flight at the end are not asserted: whether a third one "pays" depends on timings,
    # which a busy machine moves; a third call that finds the queue full is a 503, counted.)
    assert pacer.stats.busy <= 3 and pacer.stats.errors == 0 and pacer.stats.timeouts == 0


def test_fixed_settings_are_kept_and_batches_grow_when_they_pay():
    with SlowTeacher(per_text=0.0002, overhead=0.05) as server:
        teacher = _teacher(server, timeout=5.0)
        fixed, _ = _run(WORDS, teacher, batch_size=10, max_concurrency=1)
        assert {len(s.texts) for s in server.seen} == {10}
        server.seen.clear()
        adaptive, _ = _run(WORDS * 4, teacher)
        teacher.close()
    sizes = [len(s.texts) for s in server.seen]
    assert sizes[0] == 4 and max(sizes) >= 16  # one small call, then larger batches
    assert set(fixed.stats.batches()) == {10}, fixed.stats.history


def test_timeouts_scale_with_the_batch():
    with SlowTeacher(per_text=0.001, overhead=0.005) as server:
        teacher = _teacher(server, timeout=30.0)
        pacer, _ = _run(WORDS, teacher)
        teacher.close()
    assert pacer.timeout(4, 1) < pacer.timeout(400, 1) <= 30.0
    assert pacer.timeout(400, 2) > pacer.timeout(400, 1)


def test_a_teacher_that_keeps_failing_stops_with_a_named_error():
    with SlowTeacher(per_text=0.001, inject={n: 400 for n in range(1, 40)}) as s:
        teacher = _teacher(s, timeout=5.0)
        with pytest.raises(EmbedderError, match="attempts"):
            _run(WORDS, teacher)
        teacher.close()


def test_embed_once_raises_at_once_with_the_servers_wait():
    with SlowTeacher(per_text=0.001, inject={1: 429}, stall={3: 1.5}, retry_after=7) as server:
        teacher = _teacher(server)
        with pytest.raises(RateLimitError) as info:
            teacher.embed_once(["a", "b"], side="document")
        assert info.value.retry_after == 7 and info.value.attempts == 1
        out = teacher.embed_once(["a", "", "b"], side="query")
        assert out.shape == (3, 16) and not out[1].any()
        with pytest.raises(ModelTimeoutError, match="0.3 s"):
            teacher.embed_once(["c"], timeout=0.3)
        teacher.close()
    assert len(server.seen) == 3  # no retry of its own
    assert issubclass(RateLimitError, RetryExhaustedError)


def test_progress_names_items_and_texts_per_second_and_the_pace():
    seen: list[DistillProgress] = []
    with SlowTeacher(per_text=0.0005, overhead=0.002) as server:
        teacher = _teacher(server, timeout=5.0)
        StaticEmbedder.distill(CORPUS, teacher, progress=seen.append, **OPTS)
        teacher.close()
    items = [p for p in seen if p.stage == "items"][-1].line()
    sample = [p for p in seen if p.stage == "sample"][-1].line()
    assert "items/s" in items and "ETA" in items and "batch" in items
    assert "texts/s" in sample
    assert "1:01:01" in DistillProgress("sample", 1, 3662, 1.0).line()


# -- noise, back-off episodes and regrowth --------------------------------------------------
# A serial teacher whose calls cost mostly their overhead: the larger the batch, the faster,
# so the pacer should grow to MAX_BATCH (512) and stay there unless the teacher refuses.
FAST = dict(per_text=0.0002, overhead=0.03)


def _sizes(server: SlowTeacher) -> list[int]:
    return [len(s.texts) for s in server.seen]


def _history(pacer: TeacherPacer) -> str:
    """The pacer's settings, one per line: printed in full when an assertion fails."""
    return "\n" + "\n".join(map(str, pacer.stats.history))


def _lowered(pacer: TeacherPacer) -> int:
    """How many times the batch went down, not counting the sizing or a probe going back a step."""
    h = pacer.stats.history
    sizing = ("measure", "settle")

    def back(x: tuple[str, int, int], y: tuple[str, int, int]) -> bool:
        return y[0] == "steady" and x[0] in ("probe", "regrow")  # a probe that did not pay

    pairs = zip(h, h[1:], strict=False)
    return sum(1 for x, y in pairs if y[1] < x[1] and y[0] not in sizing and not back(x, y))


def test_one_slow_call_does_not_shrink_the_batch():
    # Call 9 (at 512 texts, one call in flight) takes 1.5 s more, well within its 5 s
    # timeout: the median of the last 3 calls holds, and slowness alone never halves.
    with SlowTeacher(**FAST, stall={9: 1.5}) as server:
        teacher = _teacher(server, timeout=5.0)
        pacer, vectors = _run(WORDS * 32, teacher, max_concurrency=1)
        teacher.close()
    history = _history(pacer)
    assert len(server.seen) > 9 and server.failures() == [], history
    assert _lowered(pacer) == 0 and pacer.batch == 512, history
    assert vectors.shape == (len(WORDS) * 32, 16)


@pytest.mark.parametrize("seed", [5, 11])
def test_noisy_latency_keeps_a_large_batch(seed):
    # Every call's cost is multiplied by a log-normal factor (sigma 0.5): one call at a new
    # size can look slower than the size before. Decided on the median of the last 3 calls,
    # the batch still grows to (nearly) the largest and is never lowered.
    with SlowTeacher(**FAST, jitter=0.5, seed=seed) as server:
        teacher = _teacher(server, timeout=5.0)
        pacer, _ = _run(WORDS * 16, teacher, max_concurrency=1)
        teacher.close()
    history = _history(pacer)
    assert server.failures() == [] and _lowered(pacer) == 0, history
    assert pacer.batch >= 256 and max(_sizes(server)) == 512, history


def test_a_single_503_lowers_the_batch_once_then_it_regrows():
    with SlowTeacher(**FAST, refuse_on={9}, retry_after=0.01) as server:
        teacher = _teacher(server, timeout=5.0)
        pacer, vectors = _run(WORDS * 40, teacher, max_concurrency=1)
        teacher.close()
    history = _history(pacer)
    assert pacer.stats.busy == 1 and pacer.stats.reasons().count("back-off") == 1, history
    sizes = _sizes(server)
    before, after = sizes[7], sizes[9]  # the call before the refusal, the one resent
    assert after == before // 2, f"{sizes}{history}"  # lowered once
    assert sizes[9:17] == [after] * 8 and max(sizes[17:]) == before, f"{sizes}{history}"
    assert "regrow" in pacer.stats.reasons() and pacer.batch == before, history
    assert sorted(server.asked()) == sorted(WORDS * 40)  # each text answered once


def test_after_a_timeout_the_batch_regrows():
    # Call 9 stalls past its 1 s timeout: the batch is halved, and probed larger again
    # after 8 good calls (the old pacer halved for good).
    with SlowTeacher(**FAST, stall={9: 1.3}) as server:
        teacher = _teacher(server, timeout=1.0)
        pacer, _ = _run(WORDS * 40, teacher, max_concurrency=1)
        teacher.close()
    history = _history(pacer)
    assert pacer.stats.timeouts == 1 and _lowered(pacer) == 1, history
    lowered = pacer.stats.reasons().index("back-off")
    assert "regrow" in pacer.stats.reasons()[lowered:], history
    assert pacer.batch == pacer.stats.batches()[lowered - 1], history  # back where it was


def test_a_burst_of_timeouts_from_calls_in_flight_lowers_the_batch_once():
    # 4 calls in flight; call 10 stalls past the 1 s timeout, and the calls queued behind it
    # in the teacher time out too: one episode, one halving (the old pacer halved per call).
    with SlowTeacher(**FAST, stall={10: 1.5}) as server:
        teacher = _teacher(server, timeout=1.0)
        pacer, vectors = _run(WORDS * 40, teacher, max_concurrency=4, retries=3)
        teacher.close()
    history = _history(pacer)
    assert pacer.stats.timeouts >= 2, history  # a burst
    assert pacer.stats.reasons().count("back-off") == 1 and _lowered(pacer) == 1, history
    lowered = pacer.stats.reasons().index("back-off")
    b = pacer.stats.batches()
    assert b[lowered] == b[lowered - 1] // 2, history
    assert "regrow" in pacer.stats.reasons()[lowered:], history
    assert vectors.shape == (len(WORDS) * 40, 16)


# -- steady-state probes: the ratchet undone -------------------------------------------------
def test_a_batch_sizing_misled_by_slow_calls_is_probed_larger_in_steady_state():
    # Calls 3-5 (the first three of 8 texts) stall 0.3 s: the sizing keeps 4 texts per call,
    # where every larger batch is faster. The old pacer stayed at 4 for the whole run;
    # after PROBE_AFTER good calls a doubled batch is tried, kept while it pays.
    with SlowTeacher(**FAST, stall={3: 0.3, 4: 0.3, 5: 0.3}) as server:
        teacher = _teacher(server, timeout=5.0)
        pacer, vectors = _run(WORDS * 16, teacher, max_concurrency=1)
        teacher.close()
    history = _history(pacer)
    reasons = pacer.stats.reasons()
    assert ("settle", 4, 1) in pacer.stats.history, history  # the sizing was misled
    settled = reasons.index("settle")
    assert "probe" in reasons[settled:] and pacer.batch >= 256, history
    sizes = _sizes(server)
    assert sizes[5:7] == [4, 4] and max(sizes) == 512, sizes  # measured at 4, then probed up
    assert server.failures() == [] and sorted(server.asked()) == sorted(WORDS * 16)
    assert vectors.shape == (len(WORDS) * 16, 16)


def test_calls_in_flight_lowered_by_a_back_off_are_probed_back():
    # A teacher with 4 workers (more calls in flight pay); request 40 is refused (503): the
    # back-off halves the calls in flight and lowers their ceiling. The old pacer never
    # raised it again; a steady-state probe tries one more call in flight.
    with SlowTeacher(per_text=0.002, overhead=0.02, workers=4, refuse_on={40},
                     retry_after=0.01) as server:  # fmt: skip
        teacher = _teacher(server, timeout=5.0)
        pacer, _ = _run(WORDS * 40, teacher, batch_size=16)
        teacher.close()
    history = _history(pacer)
    h = pacer.stats.history
    assert pacer.stats.busy == 1 and pacer.stats.reasons().count("back-off") == 1, history
    at = pacer.stats.reasons().index("back-off")
    lowered = h[at][2]
    assert lowered < h[at - 1][2], history  # fewer calls in flight after the refusal
    assert any(r == "probe in flight" and c == lowered + 1 for r, _, c in h[at:]), history
    assert pacer.concurrency >= lowered, history
    assert max(c for _, _, c in h) <= 8 and set(pacer.stats.batches()) == {16}, history
    assert sorted(server.asked()) == sorted(WORDS * 40)  # each text answered once


def test_probes_stay_within_what_the_teacher_answers_in_the_timeout_with_a_margin():
    # 4 ms per text, a 1 s timeout: a call of more than ~200 texts (or two of 128 queued)
    # would leave less than the smallest margin (MARGIN_MIN); no probe may go there, and
    # nothing times out.
    with SlowTeacher(per_text=0.004, overhead=0.01) as server:
        teacher = _teacher(server, timeout=1.0)
        pacer, _ = _run(WORDS * 20, teacher)
        teacher.close()
    history = _history(pacer)
    assert pacer.stats.failed_calls == 0 and server.failures() == [], history
    bound = 1.0 / pacing.MARGIN_MIN
    assert max(b * c for _, b, c in pacer.stats.history) * 0.004 <= bound, history
    assert max(len(s.texts) for s in server.seen) * 0.004 <= bound, history
    assert max(s.depth for s in server.seen) <= 1, history  # never a call queued behind two


def test_a_teacher_slowed_past_the_estimate_is_waited_for_not_given_up(monkeypatch):
    # After request 4 the teacher answers 40x slower (a loaded machine): calls time out
    # against the pacer's estimate, far below the client's 30 s. Those timeouts do not use
    # up the batch's retries (0 here): the texts go again with longer timeouts and finish.
    monkeypatch.setattr(pacing, "MIN_TIMEOUT", 0.2)
    with SlowTeacher(per_text=0.001, overhead=0.005, slowdown=(4, 40.0)) as server:
        teacher = _teacher(server, timeout=30.0)
        pacer, got = _run(WORDS[:60], teacher, retries=0)  # before: gave up after 1 attempt
        teacher.close()
    assert got.shape == (60, 16)
    assert pacer.stats.timeouts > 0  # the slowdown was hit, and waited out
    assert "back-off" in pacer.stats.reasons()


# -- the margin under the timeout, read from the latency's spread ----------------------------
def test_a_near_miss_lowers_the_batch_before_a_call_times_out():
    # Request 10 stalls 3.4 s against a 4 s timeout: more than the timeout / MARGIN_MIN, but
    # answered. The batch is halved at once (nothing failed, nothing resent), and a
    # steady-state probe takes it back up later.
    with SlowTeacher(**FAST, stall={10: 3.4}) as server:
        teacher = _teacher(server, timeout=4.0)
        pacer, vectors = _run(WORDS * 64, teacher, max_concurrency=1)
        teacher.close()
    history = _history(pacer)
    h = pacer.stats.history
    assert pacer.stats.failed_calls == 0 and server.failures() == [], history
    assert pacer.stats.reasons().count("near miss") == 1, history
    at = pacer.stats.reasons().index("near miss")
    assert h[at][1] == h[at - 1][1] // 2, history  # halved once
    assert "probe" in pacer.stats.reasons()[at:] and pacer.batch > h[at][1], history
    assert sorted(server.asked()) == sorted(WORDS * 64)  # each text answered once
    assert vectors.shape == (len(WORDS) * 64, 16)


def test_a_noisy_teacher_gets_a_wider_margin_and_smaller_calls():
    # Calls of 50 ms and more; with jitter (sigma 0.5) the measured spread widens the margin
    # past the assumed one (2, half the timeout) and keeps calls smaller than on the steady
    # teacher, with no failed call against a 3 s timeout.
    margins, largest = {}, {}
    for jitter in (0.0, 0.5):
        with SlowTeacher(per_text=0.004, overhead=0.05, jitter=jitter, seed=3) as server:
            teacher = _teacher(server, timeout=3.0)
            pacer, _ = _run(WORDS * 10, teacher)
            teacher.close()
        history = _history(pacer)
        assert pacer.stats.failed_calls == 0 and server.failures() == [], history
        margins[jitter] = pacer.margin()
        largest[jitter] = max(b * c for _, b, c in pacer.stats.history[-3:])
    assert margins[0.5] > 2.0 and margins[0.5] > margins[0.0], margins
    assert largest[0.5] <= largest[0.0], largest
