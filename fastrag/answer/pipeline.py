"""The answer pipeline: the stages after retrieval, one path for single and batch answers.

:class:`AnswerPipeline` turns a question and its retrieved hits into an
:class:`~fastrag.Answer`:

1. **context** -- overlapping windows of one document merged into
   continuous blocks, packed within the token budget;
2. **freshness** and **conflicts** -- notes about stale sources and sources
   that disagree on a number;
3. **redact** -- PII removed from everything bound for a model (the
   question, the blocks as the prompt shows them);
4. **generate** -- the generator (the offline extractive answerer by
   default, a chat model, any callable; JSON for ``schema=``);
5. **verify** -- confidence and faithfulness (rules or an LLM judge);
6. **audit** -- a SHA-256 digest over question, snapshot, cited chunks,
   prompt and answer.

:meth:`AnswerPipeline.answer_many` runs these for a stream of blocks of
questions; generation runs concurrently (a model client's async form, or
threads) within the rate limits, while the next block is retrieved. A
single answer is ``answer_many`` of one question, so the two cannot
drift. :meth:`AnswerPipeline.stream` yields the hits first, then the text
as the generator produces it, then the final :class:`~fastrag.Answer`.

Model-bound means a generator other than the offline
:class:`~fastrag.ExtractiveGenerator`: redaction is on by default for such
text (the question and the blocks), and the notes about stale or
conflicting sources are written into the blocks the model reads. The
extractive generator reads the original blocks (it must quote them
verbatim) while ``Answer.prompt`` still shows what a model would have been
sent, redacted.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import ConfigError
from ..models.concurrency import STREAM_BLOCK, generate_stream, streams
from ..options import AnswerOptions
from ..text.cjk import is_chinese
from ..text.pii import Redactor
from ..text.sentences import split_cited
from ..types import Answer, Generation, Hit, with_text
from .audit import audit_digest
from .conflicts import Conflict, detect_conflicts
from .context import Context, assemble_context
from .distill import Distilled, as_distiller, distilled_blocks, run_distiller
from .generate import ExtractiveGenerator, as_generator
from .prompt import build_user_message, not_found_message
from .stages import StageTimer
from .structured import answer_json, check_schema_support
from .verify import check_faithfulness, confidence, freshness_warnings

__all__ = [
    "AnswerEvent",
    "AnswerPipeline",
    "Item",
    "Prepared",
    "finish",
    "is_model_bound",
    "prepare",
]


@dataclass
class Prepared:
    """A question ready for its generator."""

    question: str
    model_question: str
    context: Context
    blocks: list[Hit]  # what the generator reads
    shown: list[Hit]  # the blocks as retrieved (unredacted), for citations and audit
    prompt: str
    pii: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    conflicts: list[Conflict] = field(default_factory=list)
    model_sources: list[str] = field(default_factory=list)  # redacted block texts, for a judge
    scrub: Callable[[str], str] = str  # redacts text bound for a model (identity when off)
    distilled: Distilled | None = None  # the facts the prompt carries instead of the blocks


def is_model_bound(generator: Any) -> bool:
    """Whether a generator sends text to a model (anything but the extractive answerer)."""
    return generator is not None and not isinstance(generator, ExtractiveGenerator)


def _note(block: Hit, notes: list[str]) -> Hit:
    if not notes:
        return block
    return with_text(block, block.text + "\n(" + " ".join(notes) + ")")


def prepare(
    question: str,
    hits: Sequence[Hit],
    options: AnswerOptions,
    redactor: Redactor,
    *,
    model_bound: bool,
    timer: StageTimer,
) -> Prepared:
    """Context, redaction and notes for one question (see the module docstring)."""
    report = timer.on_stage is not None  # only a hook reads the stages' info
    with timer("context") as info:
        ctx = assemble_context(hits, budget=options.budget, estimator=options.estimator)
        shown = ctx.hits
        if report:
            info.update(blocks=len(shown), dropped=len(ctx.dropped), tokens=ctx.tokens)
    warnings: list[str] = []
    notes: dict[int, list[str]] = {}
    if options.max_age_days is not None:
        with timer("freshness") as info:
            for w in freshness_warnings(
                shown, question=question, now=options.now, max_age_days=options.max_age_days
            ):
                warnings.append(f"[{w.marker}] {w.message}")
                notes.setdefault(w.marker, []).append(w.message)
            if report:
                info.update(warnings=len(warnings))
    conflicts: list[Conflict] = []
    if options.detect_conflicts:
        with timer("conflicts") as info:
            if callable(options.detect_conflicts):  # a model check: it reads redacted text
                seen = redactor.redact_hits(shown)[0] if options.redact else shown
                conflicts = [
                    replace(c, hits=tuple(shown[m - 1] for m in c.markers))
                    for c in options.detect_conflicts(seen)
                ]
            else:
                conflicts = detect_conflicts(shown)
            chinese = is_chinese(question)
            for c in conflicts:
                text = c.describe(chinese=chinese)
                warnings.append(text)
                for m in c.markers:
                    notes.setdefault(m, []).append(text)
            if report:
                info.update(conflicts=len(conflicts))
    model_question = question
    pii: dict[str, int] = {}
    with timer("redact") as info:
        blocks_for_prompt = shown
        if options.redact:
            blocks_for_prompt, pii = redactor.redact_hits(shown)
            q = redactor.redact(question)
            for kind, n in q.counts.items():
                pii[kind] = pii.get(kind, 0) + n
            model_question = q.text
        if report:
            info.update(redacted=sum(pii.values()))
    scrub = (lambda text: redactor.redact(text).text) if options.redact else str
    distiller = as_distiller(options.distill)
    distilled: Distilled | None = None
    readable = shown  # what the offline generator reads
    if distiller is not None:
        with timer("distill") as info:
            distilled, failed = run_distiller(
                distiller, question, shown, [b.hits for b in ctx.blocks],
                model_question=model_question, model_blocks=blocks_for_prompt,
                estimator=options.estimator, tokens_before=ctx.tokens,
            )  # fmt: skip
            warnings.extend(failed)
            readable = distilled_blocks(shown, distilled.facts)
            # A model distiller's facts come from redacted text; the extractive ones are scrubbed.
            redacted = distilled.distiller == "model" or not options.redact
            blocks_for_prompt = (
                readable
                if redacted
                else [with_text(b, scrub(b.text)) if b.text else b for b in readable]
            )
            info.update(
                facts=len(distilled.facts),
                tokens_before=distilled.tokens_before,
                tokens_after=distilled.tokens_after,
                distiller=distilled.distiller,
            )
    noted = (
        [
            _note(b, notes[i]) if i in notes and b.text else b
            for i, b in enumerate(blocks_for_prompt, 1)
        ]
        if notes
        else list(blocks_for_prompt)
    )
    prompt = build_user_message(model_question, noted)
    blocks = noted if model_bound else readable
    sources = [b.text for b in blocks_for_prompt]
    if distilled is not None:  # a judge reads the facts and their redacted blocks
        full = redactor.redact_hits(shown)[0] if options.redact else shown
        sources = [f"{f}\n{b.text}" if f else b.text for f, b in zip(sources, full, strict=True)]
    return Prepared(
        question, model_question, ctx, blocks, shown, prompt, pii, warnings, conflicts,
        sources, scrub, distilled,
    )  # fmt: skip


def finish(
    prep: Prepared,
    generation: Generation,
    options: AnswerOptions,
    *,
    snapshot: str | None,
    timings: dict[str, float],
    timer: StageTimer,
    query: Any = None,
) -> Answer:
    """Verify and audit a generation into an Answer (see the module docstring)."""
    shown = prep.shown
    cited = [c for c in generation.citations if 1 <= c <= len(shown)]
    with timer("verify") as info:
        if options.judge is not None:  # a model: it reads redacted text only
            faith = options.judge(
                prep.scrub(generation.text), prep.model_sources, found=generation.found
            )
            if faith.unsupported and options.redact:  # report the answer's own sentences
                faith = _unredacted(faith, generation.text, prep)
        else:
            sources = [b.text for b in shown]
            if prep.distilled is not None:  # the facts and the chunks they come from
                for f in prep.distilled.facts:
                    sources[f.marker - 1] += "\n" + f.text
            faith = check_faithfulness(generation.text, sources, found=generation.found)
        conf = (
            confidence([shown[c - 1].relevance for c in cited], len(cited), len(shown))
            if generation.found
            else 0.0
        )
        if timer.on_stage is not None:  # only a hook reads the info
            info.update(faithfulness=faith.score, confidence=conf)
    text, found, citations = generation.text, generation.found, tuple(cited)
    flagged = found and faith.score < options.min_faithfulness
    if flagged and options.replace_unfaithful:
        text, found, citations = not_found_message(prep.question), False, ()
        conf = 0.0
    prompt = (
        generation.prompt if generation.prompt is not None and generation.model else prep.prompt
    )
    with timer("audit"):
        digest = audit_digest(
            prep.question,
            snapshot,
            [(shown[c - 1].chunk_id, shown[c - 1].text) for c in citations],
            prompt,
            text,
        )
    return Answer(
        question=prep.question,
        text=text,
        found=found,
        hits=tuple(shown),
        citations={c: shown[c - 1] for c in citations},
        prompt=prompt,
        timings=timings,
        model=generation.model,
        query=query,
        confidence=conf,
        faithfulness=faith.score,
        unsupported=faith.unsupported,
        flagged=flagged,
        warnings=tuple(prep.warnings),
        conflicts=tuple(prep.conflicts),
        high_risk=bool(prep.conflicts),
        pii=dict(prep.pii),
        audit_digest=digest,
        snapshot=snapshot,
        dropped=tuple(prep.context.dropped),
        data=generation.data,
        distilled=prep.distilled,
    )


def _unredacted(faith: Any, text: str, prep: Prepared) -> Any:
    """Map a judge's unsupported claims (made on redacted text) back to the answer's sentences.

    A claim that is a redacted sentence of the answer is replaced by that
    sentence; other claims (the judge's paraphrases) are kept as given.
    """
    by_redacted = {prep.scrub(s).strip(): s for s, _ in split_cited(text)}
    claims = tuple(by_redacted.get(c.strip(), c) for c in faith.unsupported)
    return replace(faith, unsupported=claims)


Item = tuple[str, Sequence[Hit], Any, dict[str, float]]
"""``(question, hits, query, timings)``: one question ready for the answer stages.

``query`` is the question as retrieval saw it (a :class:`~fastrag.RewrittenQuery`);
``timings`` the seconds of the stages before (rewrite, retrieve), which
start the answer's :attr:`~fastrag.Answer.timings`.
"""


@dataclass(frozen=True, slots=True)
class AnswerEvent:
    """One event of :meth:`AnswerPipeline.stream`.

    Attributes
    ----------
    kind : {"hits", "delta", "answer"}
        ``hits``: the context blocks the answer will cite (``[1]`` is
        ``hits[0]``), before generation starts; ``delta``: a piece of the
        answer text as the generator produced it; ``answer``: the final
        :class:`~fastrag.Answer` (verified and audited).
    hits : tuple of Hit
        With ``hits``.
    text : str
        With ``delta``.
    answer : Answer or None
        With ``answer``.
    """

    kind: Literal["hits", "delta", "answer"]
    hits: tuple[Hit, ...] = ()
    text: str = ""
    answer: Answer | None = None


class _Structured:
    """A sync generator call that answers in a JSON Schema (no async form: threads run it)."""

    def __init__(self, generator: Any, schema: Any) -> None:
        self.generator = generator
        self.schema = schema

    def __call__(self, question: str, hits: Sequence[Hit]) -> Generation:
        out = answer_json(self.generator, question, hits, self.schema)
        model = getattr(self.generator, "model", None)
        prompt = build_user_message(question, hits)
        return Generation(out.raw, True, (), prompt, model, data=out.data)


def _default_concurrency(generator: Any) -> int:
    """Model clients: their configured concurrency; anything else: one call at a time."""
    config = getattr(generator, "client_config", None)
    return int(getattr(config, "max_concurrency", 1)) if config is not None else 1


class AnswerPipeline:
    """The stages after retrieval (see the module docstring).

    Parameters
    ----------
    redactor : Redactor, optional
        PII rules for model-bound text.
    """

    def __init__(self, redactor: Redactor | None = None) -> None:
        self.redactor = redactor or Redactor()

    def _call(
        self, generator: Any, options: AnswerOptions
    ) -> tuple[Any, Callable[..., Generation]]:
        """The object whose async form (if any) generation may use, and the sync call."""
        if options.schema is not None:
            check_schema_support(ExtractiveGenerator() if generator is None else generator)
            structured = _Structured(generator, options.schema)
            return structured, structured
        call = as_generator(generator)
        if type(call) is ExtractiveGenerator:  # Answer.prompt is prep.prompt: build no other
            return generator, call.generate
        return generator, call

    def answer_many(
        self,
        blocks: Iterable[Sequence[Item]],
        *,
        generator: Any = None,
        options: AnswerOptions | None = None,
        snapshot: str | None = None,
        max_concurrency: int | None = None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
    ) -> list[Answer | BaseException]:
        """Answer questions that arrive in blocks (retrieval may produce each block lazily).

        Parameters
        ----------
        blocks : iterable of sequences of Item
            ``(question, hits, query, timings)``: the questions, their
            retrieved (reranked) hits, their rewritten queries and the
            seconds of the stages before, block after block.
        generator : callable, optional
            Default the offline :class:`~fastrag.ExtractiveGenerator`.
        options : AnswerOptions, optional
            Context, redaction, freshness, conflicts, verification, schema.
        snapshot : str, optional
            The knowledge-base snapshot the hits come from (for the audit).
        max_concurrency : int, optional
            Generator calls in flight (default: a model client's own
            ``max_concurrency``, 1 otherwise).
        requests_per_minute, tokens_per_minute : float, optional
            Rate limits of the generator calls; tokens are ``options.estimator``
            of each prompt.

        Returns
        -------
        list
            An :class:`~fastrag.Answer`, or the exception that stopped it
            (a model error after the client's retries), per question, in order.
        """
        options = options or AnswerOptions()
        model_bound = is_model_bound(generator)
        target, call = self._call(generator, options)
        if max_concurrency is None:
            max_concurrency = _default_concurrency(generator)
        prepared: list[tuple[Prepared, dict[str, float], StageTimer, Any, float]] = []

        def prepared_blocks() -> Iterator[list[tuple[str, list[Hit]]]]:
            for block in blocks:
                items = []
                for question, hits, query, before in block:
                    t0 = time.perf_counter() - sum(before.values())
                    timings: dict[str, float] = dict(before)
                    timer = StageTimer(timings, options.on_stage)
                    prep = prepare(
                        question, hits, options, self.redactor, model_bound=model_bound, timer=timer
                    )
                    prepared.append((prep, timings, timer, query, t0))
                    timer_of[id(prep.blocks)] = timer
                    items.append((prep.model_question if model_bound else question, prep.blocks))
                yield items

        estimator = options.estimator
        timer_of: dict[int, StageTimer] = {}  # by id of the blocks list handed to the call

        def cost(question: str, hits: Sequence[Hit]) -> int:
            return int(estimator(build_user_message(question, hits)))

        def timed(question: str, hits: Sequence[Hit]) -> Generation:
            with timer_of[id(hits)]("generate"):
                return call(question, hits)

        results = generate_stream(
            target,
            prepared_blocks(),
            call=timed,
            max_concurrency=max_concurrency,
            requests_per_minute=requests_per_minute,
            tokens_per_minute=tokens_per_minute,
            cost=cost,
        )
        out: list[Answer | BaseException] = []
        for (prep, timings, timer, query, t0), result in zip(prepared, results, strict=True):
            if not isinstance(result, Generation):
                out.append(result)
                continue
            answer = finish(
                prep, result, options, snapshot=snapshot, timings=timings, timer=timer, query=query
            )
            timings["total"] = time.perf_counter() - t0
            out.append(answer)
        return out

    def answer_questions(
        self,
        questions: Sequence[Any],
        retrieve: Callable[[list[str]], Sequence[Item]],
        check: Callable[[Any], str],
        *,
        generator: Any = None,
        options: AnswerOptions | None = None,
        snapshot: str | None = None,
        max_concurrency: int | None = None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        rows: Sequence[Sequence[Hit]] | None = None,
    ) -> tuple[list[Answer | None], list[str | None]]:
        """Answer a batch of questions as given: check each, answer each distinct one once.

        Parameters
        ----------
        questions : sequence
            The questions (anything; a bad one gets its error, the others
            are answered).
        retrieve : callable
            ``retrieve(block_of_questions) -> items`` (rewrite, retrieval and
            reranking of one block, see :data:`Item`).
        check : callable
            ``check(question) -> question``, raising ``ConfigError`` on a bad one.
        generator, options, snapshot, max_concurrency, requests_per_minute, tokens_per_minute
            As for :meth:`answer_many`.
        rows : sequence, optional
            Per question, context entries put before its retrieved hits (SQL
            rows, see :mod:`fastrag.answer.rows`); a question asked twice with
            different rows is answered twice.

        Returns
        -------
        tuple
            Per question, in order: its :class:`~fastrag.Answer` (None when
            it failed) and its error (None when it was answered).
        """
        errors: list[str | None] = [None] * len(questions)
        if rows is not None and len(rows) != len(questions):
            raise ConfigError(f"rows has {len(rows)} entries for {len(questions)} questions")
        extra = [list(r) for r in rows] if rows is not None else None
        unique: dict[tuple[str, tuple[tuple[int, str], ...]], int] = {}
        keys: list[tuple[str, tuple[tuple[int, str], ...]] | None] = [None] * len(questions)
        first: dict[tuple[str, tuple[tuple[int, str], ...]], int] = {}
        for i, q in enumerate(questions):
            try:
                text = check(q)
            except ConfigError as exc:
                errors[i] = str(exc)
                continue
            tag = tuple((h.chunk_id, h.doc_id) for h in extra[i]) if extra is not None else ()
            keys[i] = (text, tag)
            unique.setdefault((text, tag), len(unique))
            first.setdefault((text, tag), i)
        ordered = list(unique)
        texts = [text for text, _ in ordered]
        bounds = block_bounds(len(texts), generator, max_concurrency)

        def block(lo: int, hi: int) -> Sequence[Item]:
            items = retrieve(texts[lo:hi])
            if extra is None:
                return items
            own = [extra[first[key]] for key in ordered[lo:hi]]
            return [(q, [*r, *h], x, t) for (q, h, x, t), r in zip(items, own, strict=True)]

        spans = list(zip(bounds, bounds[1:], strict=False))
        limited = requests_per_minute is not None or tokens_per_minute is not None
        if (
            len(spans) < 2
            or limited
            or streams(generator, _concurrency(generator, max_concurrency))
        ):
            blocks = (block(lo, hi) for lo, hi in spans)
            results = self.answer_many(
                blocks, generator=generator, options=options, snapshot=snapshot,
                max_concurrency=max_concurrency, requests_per_minute=requests_per_minute,
                tokens_per_minute=tokens_per_minute,
            )  # fmt: skip
        else:  # a local generator: retrieve the next block while this one is answered
            results = []
            for items in _prefetched(block, spans):
                results += self.answer_many(
                    [items], generator=generator, options=options, snapshot=snapshot,
                    max_concurrency=max_concurrency,
                )  # fmt: skip
        answers: list[Answer | None] = [None] * len(questions)
        for i, key in enumerate(keys):
            if errors[i] is None and key is not None:
                out = results[unique[key]]
                if isinstance(out, Answer):
                    answers[i] = out
                else:
                    errors[i] = f"{type(out).__name__}: {out}"
        return answers, errors

    def answer(
        self,
        question: str,
        hits: Sequence[Hit],
        *,
        query: Any = None,
        timings: dict[str, float] | None = None,
        generator: Any = None,
        options: AnswerOptions | None = None,
        snapshot: str | None = None,
    ) -> Answer:
        """One answer: :meth:`answer_many` of one question (its errors are raised)."""
        (result,) = self.answer_many(
            [[(question, hits, query, timings or {})]], generator=generator, options=options,
            snapshot=snapshot, max_concurrency=1,
        )  # fmt: skip
        if isinstance(result, BaseException):
            raise result
        return result

    def stream(
        self,
        question: str,
        hits: Sequence[Hit],
        *,
        query: Any = None,
        timings: dict[str, float] | None = None,
        generator: Any = None,
        options: AnswerOptions | None = None,
        snapshot: str | None = None,
    ) -> Iterator[AnswerEvent]:
        """Answer one question as events: the hits, then text deltas, then the Answer.

        A generator with ``stream(question, hits)`` (yielding text pieces,
        then a :class:`~fastrag.Generation`) streams its text as it comes;
        any other generator yields its whole text as one delta. The final
        Answer equals :meth:`answer`'s for the same inputs (timings aside).
        Closing the iterator early stops the generator's stream (a model
        call is abandoned with it).

        Yields
        ------
        AnswerEvent
            ``hits``, then ``delta`` events, then ``answer``.
        """
        options = options or AnswerOptions()
        model_bound = is_model_bound(generator)
        before = dict(timings or {})
        t0 = time.perf_counter() - sum(before.values())
        timer = StageTimer(before, options.on_stage)
        prep = prepare(question, hits, options, self.redactor, model_bound=model_bound, timer=timer)
        yield AnswerEvent("hits", hits=tuple(prep.shown))
        asked = prep.model_question if model_bound else question
        method = getattr(generator, "stream", None)
        generation: Generation | None = None
        with timer("generate"):
            if options.schema is None and callable(method):
                pieces = method(asked, prep.blocks)
                try:
                    for piece in pieces:
                        if isinstance(piece, Generation):
                            generation = piece
                        elif piece:
                            yield AnswerEvent("delta", text=str(piece))
                finally:
                    close = getattr(pieces, "close", None)
                    if callable(close):
                        close()
                if generation is None:
                    raise TypeError(f"{type(generator).__name__}.stream() yielded no Generation")
            else:
                _, call = self._call(generator, options)
                generation = call(asked, prep.blocks)
                if generation.text:
                    yield AnswerEvent("delta", text=generation.text)
        answer = finish(
            prep, generation, options, snapshot=snapshot, timings=before, timer=timer, query=query
        )
        before["total"] = time.perf_counter() - t0
        yield AnswerEvent("answer", answer=answer)


LOCAL_BLOCK = 1024
"""Questions per block of a batch answered by a local generator (see :func:`block_bounds`)."""


def _concurrency(generator: Any, max_concurrency: int | None) -> int:
    return _default_concurrency(generator) if max_concurrency is None else max_concurrency


def block_bounds(n: int, generator: Any, max_concurrency: int | None) -> list[int]:
    """Where to cut ``n`` questions into blocks for :meth:`AnswerPipeline.answer_many`.

    With a model client (async, concurrent) retrieval runs in blocks while
    the model answers the blocks before, so a batch takes about the longer
    of the two, not their sum; the first block is small, so the first calls
    start at once. With a local generator (the extractive one, a callable)
    a batch of more than ``2 * LOCAL_BLOCK`` questions is cut into blocks of
    ``LOCAL_BLOCK``: the next block is retrieved on a worker thread (the
    kernels release the GIL) while this thread answers the one before, so
    the answer stages' Python runs beside retrieval, not after it (see
    :func:`_prefetched`). Otherwise one block.
    """
    concurrency = _concurrency(generator, max_concurrency)
    if streams(generator, concurrency):
        if n > 2 * STREAM_BLOCK:
            first = min(concurrency, STREAM_BLOCK)
            return [0, *range(first, n, STREAM_BLOCK), n]
    elif n > 2 * LOCAL_BLOCK:
        return [*range(0, n, LOCAL_BLOCK), n]
    return [0, n] if n else [0]


def _prefetched(
    block: Callable[[int, int], Sequence[Item]], spans: Sequence[tuple[int, int]]
) -> Iterator[Sequence[Item]]:
    """``block(lo, hi)`` of every span in order, each computed on a worker thread ahead of use.

    While the caller works on one block the next is being computed (one
    worker, one block ahead; each in a copy of the caller's
    :mod:`contextvars`). An exception raised computing a block is raised
    when that block is due; leaving early waits for the block in flight.
    """
    with ThreadPoolExecutor(1, thread_name_prefix="fastrag-retrieve") as pool:
        lo, hi = spans[0]
        ahead = pool.submit(contextvars.copy_context().run, block, lo, hi)
        for lo, hi in spans[1:]:
            items = ahead.result()
            ahead = pool.submit(contextvars.copy_context().run, block, lo, hi)
            yield items
        yield ahead.result()
