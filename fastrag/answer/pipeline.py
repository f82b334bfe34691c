"""The stages of an answer after retrieval: context, redaction, generation, verification, audit.

``KnowledgeBase.answer`` and ``answer_batch`` retrieve, then call
:func:`prepare` for each question (context assembly within the token
budget, PII redaction of model-bound text, freshness and conflict notes),
generate from the prepared blocks, and call :func:`finish` (confidence,
faithfulness, audit digest) to make the :class:`~fastrag.Answer`.

Model-bound means a generator other than the offline
:class:`~fastrag.ExtractiveGenerator`: redaction is on by default for such
text (the question and the blocks), and the notes about stale or
conflicting sources are written into the blocks the model reads. The
extractive generator reads the original blocks (it must quote them
verbatim) while ``Answer.prompt`` still shows what a model would have been
sent, redacted.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConfigError
from ..types import Answer, Generation, Hit
from .audit import audit_digest
from .conflicts import Conflict, detect_conflicts
from .context import Context, assemble_context, estimate_tokens
from .generate import ExtractiveGenerator
from .prompt import build_user_message, is_chinese, not_found_message
from .redact import Redactor
from .stages import StageHook, StageTimer
from .verify import LLMJudge, check_faithfulness, confidence, freshness_warnings, split_sentences

__all__ = ["AnswerOptions", "Prepared", "finish", "is_model_bound", "prepare"]


@dataclass(frozen=True)
class AnswerOptions:
    """How answers are assembled and checked (keyword arguments of ``answer``).

    Parameters
    ----------
    budget : int or None, default 3000
        Context token budget (see :func:`fastrag.answer.context.estimate_tokens`);
        ``None`` packs every hit.
    estimator : callable, default estimate_tokens
        ``estimator(text) -> tokens``.
    redact : bool, default True
        Redact PII from model-bound text.
    max_age_days : float or None, default 180
        Sources older than this get a freshness warning (``None``: never).
    min_faithfulness : float, default 0.5
        An answer whose faithfulness is below this is flagged.
    replace_unfaithful : bool, default False
        Replace a flagged answer with the not-found answer.
    judge : LLMJudge or None
        Judge faithfulness with a model (falls back to the rules); default rules.
    detect_conflicts : bool or callable, default True
        Look for sources that state different numbers for the same thing:
        True for the rules, or a checker ``check(hits) -> list[Conflict]``
        such as :class:`~fastrag.answer.conflicts.LLMConflictCheck` (it is given
        the redacted hits when ``redact``).
    on_stage : callable, optional
        ``on_stage(name, seconds, info)`` after each stage, for tracing.
    now : datetime, optional
        The clock for freshness (tests).
    """

    budget: int | None = 3000
    estimator: Callable[[str], int] = estimate_tokens
    redact: bool = True
    max_age_days: float | None = 180
    min_faithfulness: float = 0.5
    replace_unfaithful: bool = False
    judge: LLMJudge | None = None
    detect_conflicts: bool | Callable[[Sequence[Hit]], list[Conflict]] = True
    on_stage: StageHook | None = None
    now: _dt.datetime | None = None

    def __post_init__(self) -> None:
        if self.budget is not None and (
            isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget < 1
        ):
            raise ConfigError(f"budget must be a positive int or None, got {self.budget!r}")
        if not 0.0 <= float(self.min_faithfulness) <= 1.0:
            raise ConfigError(f"min_faithfulness must be in [0, 1], got {self.min_faithfulness!r}")


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


def is_model_bound(generator: Any) -> bool:
    """Whether a generator sends text to a model (anything but the extractive answerer)."""
    return generator is not None and not isinstance(generator, ExtractiveGenerator)


def _note(block: Hit, notes: list[str]) -> Hit:
    if not notes:
        return block
    return replace(block, text=block.text + "\n(" + " ".join(notes) + ")")


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
    with timer("context") as info:
        ctx = assemble_context(list(hits), budget=options.budget, estimator=options.estimator)
        shown = ctx.hits
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
        noted = [_note(b, notes.get(i, [])) for i, b in enumerate(blocks_for_prompt, 1)]
        prompt = build_user_message(model_question, noted)
        info.update(redacted=sum(pii.values()))
    blocks = noted if model_bound else shown
    scrub = (lambda text: redactor.redact(text).text) if options.redact else str
    return Prepared(
        question, model_question, ctx, blocks, shown, prompt, pii, warnings, conflicts,
        [b.text for b in blocks_for_prompt], scrub,
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
            faith = check_faithfulness(
                generation.text, [b.text for b in shown], found=generation.found
            )
        conf = (
            confidence([shown[c - 1].relevance for c in cited], len(cited), len(shown))
            if generation.found
            else 0.0
        )
        info.update(faithfulness=faith.score, confidence=conf)
    text, found, citations = generation.text, generation.found, tuple(cited)
    flagged = found and faith.score < options.min_faithfulness
    if flagged and options.replace_unfaithful:
        text, found, citations = not_found_message(prep.question), False, ()
        conf = 0.0
    prompt = generation.prompt if generation.prompt is not None and generation.model else prep.prompt
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
    )


def _unredacted(faith: Any, text: str, prep: Prepared) -> Any:
    """Map a judge's unsupported claims (made on redacted text) back to the answer's sentences.

    A claim that is a redacted sentence of the answer is replaced by that
    sentence; other claims (the judge's paraphrases) are kept as given.
    """
    by_redacted = {prep.scrub(s).strip(): s for s, _ in split_sentences(text)}
    claims = tuple(by_redacted.get(c.strip(), c) for c in faith.unsupported)
    return replace(faith, unsupported=claims)


def stage_timer(options: AnswerOptions, timings: dict[str, float]) -> StageTimer:
    """A timer that records into ``timings`` and calls the options' hook."""
    return StageTimer(timings, options.on_stage)


def elapsed(t0: float) -> float:
    """Seconds since ``t0``."""
    return time.perf_counter() - t0


def check_options(options: Mapping[str, Any]) -> AnswerOptions:
    """Build :class:`AnswerOptions` from keyword arguments, naming any unknown one."""
    known = AnswerOptions.__dataclass_fields__
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"unknown answer option(s): {', '.join(unknown)}")
    return AnswerOptions(**options)
