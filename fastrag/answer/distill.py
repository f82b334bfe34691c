"""Context distillation: the facts of the top chunks that answer the question, with their ids.

``AnswerOptions(distill=...)`` replaces the packed context blocks by a few
facts, each with the citation id ``[n]`` of the block it came from; the
prompt carries the facts instead of the whole chunks, and
:attr:`~fastrag.Answer.distilled` holds them with the token counts before
and after (``AnswerOptions.estimator``, by default
:func:`~fastrag.text.tokens.estimate_tokens`).

- :class:`ExtractiveDistiller` (``distill="extractive"``, offline): the
  sentences of the blocks (:func:`~fastrag.text.sentences.text_units`)
  and the cells of their table rows (``Fault code: SV0432 | Symptom: ... |
  Fix: ...``) that carry the question's terms and numbers (the BM25
  :class:`~fastrag.text.tokenize.Tokenizer`, Porter-stemmed, stop words
  dropped; CJK characters and bigrams), best first, up to ``max_facts``.
  Every fact is a verbatim substring of its block.
- :class:`ModelDistiller` (``distill=OpenAIChatGenerator(...)`` or any
  generator): a model condenses the question and the blocks into at most
  ``max_facts`` facts as JSON; a reply that is not JSON, or names a block
  that does not exist, or any error, falls back to the extractive
  distiller, and the answer's warnings say so. The model reads the
  redacted question and blocks only (the pipeline redacts before it calls).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import orjson

from ..errors import ConfigError, ModelResponseError
from ..text.sentences import text_units
from ..text.tokenize import Tokenizer
from ..text.tokens import estimate_tokens
from ..types import Generation, Hit
from .prompt import build_user_message
from .stages import call_chat

__all__ = [
    "Distilled",
    "ExtractiveDistiller",
    "Fact",
    "ModelDistiller",
    "as_distiller",
    "distilled_blocks",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Fact:
    """One distilled fact.

    Attributes
    ----------
    text : str
        The fact (a sentence or a table cell of its block, verbatim, for the
        extractive distiller; the model's words for a model distiller).
    marker : int
        Its citation id: the context block ``[marker]`` it came from.
    chunk_id : int
        The chunk it came from (within a merged block, the window that
        holds it).
    """

    text: str
    marker: int
    chunk_id: int

    def to_dict(self) -> dict[str, Any]:
        """``text``, ``marker`` and ``chunk_id`` as a dict."""
        return {"text": self.text, "marker": self.marker, "chunk_id": self.chunk_id}


@dataclass(frozen=True, slots=True)
class Distilled:
    """The facts a prompt carried instead of its context blocks.

    Attributes
    ----------
    facts : tuple of Fact
        In marker order, then in the order of their block's text.
    tokens_before : int
        Estimated tokens of the context blocks (``"[n] text"`` each).
    tokens_after : int
        Estimated tokens of the distilled blocks (``"[n] facts"`` each).
    distiller : str
        ``"extractive"`` or ``"model"`` (what produced the facts).
    """

    facts: tuple[Fact, ...]
    tokens_before: int
    tokens_after: int
    distiller: str = "extractive"

    @property
    def ratio(self) -> float:
        """``tokens_after / tokens_before`` (0 for an empty context)."""
        return self.tokens_after / self.tokens_before if self.tokens_before else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "facts": [f.to_dict() for f in self.facts],
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "distiller": self.distiller,
        }


# -- units: sentences and table cells -------------------------------------------------------

_NUMBER = re.compile(r"[^\W_]*\d[^\W_]*")  # a word with a digit: a number or a code


@functools.lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    """The BM25 tokenizer's rules with Porter stemming (the terms of the question)."""
    return Tokenizer(stem="porter")


def _chunk_of(block: Hit, members: Sequence[Hit], offset: int) -> int:
    """The chunk id of the window of a (merged) block that holds ``block.text[offset]``."""
    if len(members) > 1 and block.end - block.start == len(block.text):
        at = block.start + offset
        for m in members:
            if m.start <= at < m.end:
                return m.chunk_id
    return block.chunk_id


@dataclass(frozen=True)
class ExtractiveDistiller:
    """Keep the sentences and table cells that carry the question's terms; no model.

    Parameters
    ----------
    max_facts : int, default 8
        Most facts kept (the fact budget).
    min_coverage : float, default 0.1
        Least weighted share of the question's terms a sentence (or a table
        row, for its cells) must carry; numbers weigh twice.
    max_share : float, default 0.7
        Most estimated tokens of the facts, as a share of the blocks' (the
        best fact is kept whatever its size).
    max_fact_chars : int, default 400
        A sentence longer than this is not a fact (a run without
        punctuation is not a sentence).

    Notes
    -----
    Units are scored by the distinct question terms they contain (the
    tokenizer's terms: stemmed words and numbers, CJK characters and
    bigrams; numbers count twice), relative to all the question's terms.
    The best ``max_facts`` units at or above ``min_coverage`` are kept (ties:
    the higher-ranked block, then the earlier text). A table row is scored
    as a whole and is one fact: its cells that carry a question term, joined
    by ``" | "`` (a header matching "fix" keeps its ``Fix: ...`` cell); when
    the question names numbers or codes, only a row that holds one counts.
    """

    max_facts: int = 8
    min_coverage: float = 0.1
    max_share: float = 0.7
    max_fact_chars: int = 400

    def __post_init__(self) -> None:
        if isinstance(self.max_facts, bool) or not (
            isinstance(self.max_facts, int) and self.max_facts >= 1
        ):
            raise ConfigError(f"max_facts must be a positive int, got {self.max_facts!r}")
        if not 0.0 <= self.min_coverage <= 1.0:
            raise ConfigError(f"min_coverage must be in [0, 1], got {self.min_coverage!r}")
        if not 0.0 < self.max_share <= 1.0:
            raise ConfigError(f"max_share must be in (0, 1], got {self.max_share!r}")

    def facts(
        self, question: str, blocks: Sequence[Hit], members: Sequence[Sequence[Hit]] = ()
    ) -> list[Fact]:
        """The facts of ``blocks`` (``blocks[i]`` is ``[i + 1]``) for ``question``.

        Parameters
        ----------
        question : str
            The question.
        blocks : sequence of Hit
            The context blocks, in marker order.
        members : sequence of sequences of Hit, optional
            The chunks merged into each block (for the facts' chunk ids).

        Returns
        -------
        list of Fact
            In marker order, then text order.
        """
        units: list[tuple[int, int, int, int]] = []  # (block, start, end, row)
        texts: list[str] = [question]
        for b, block in enumerate(blocks):
            for s, e, row in text_units(block.text):
                if e - s <= self.max_fact_chars:
                    units.append((b, s, e, row))
                    texts.append(block.text[s:e])
        if not units:
            return []
        tokens = _tokenizer().tokenize(texts)
        q = np.unique(tokens[0])
        if q.size == 0:
            return []
        numbers = {int(h) for h in _tokenizer().tokenize(_NUMBER.findall(question)).hashes}
        keys = np.array(sorted(numbers), dtype=np.uint64)
        weights = np.array([2.0 if int(h) in numbers else 1.0 for h in q.tolist()])
        total = float(weights.sum())

        def score(i: int) -> float:
            return float(weights[np.isin(q, tokens[i], assume_unique=False)].sum()) / total

        own = [score(i + 1) for i in range(len(units))]
        # A table row is scored as a whole; its cells that carry a term are its facts.
        rows: dict[tuple[int, int], list[int]] = {}
        for i, (b, _, _, row) in enumerate(units):
            if row >= 0:
                rows.setdefault((b, row), []).append(i)
        ranked: list[tuple[float, int, int]] = []  # (-score, block, unit)
        for i, (b, _, _, row) in enumerate(units):
            if row < 0 and own[i] >= self.min_coverage:
                ranked.append((-own[i], b, i))
        for (b, _), cells in rows.items():
            matched = np.unique(np.concatenate([tokens[i + 1] for i in cells]))
            if keys.size and not np.isin(keys, matched).any():
                continue  # a row is a record: it must be the one the question names
            whole = float(weights[np.isin(q, matched)].sum()) / total
            if whole >= self.min_coverage:
                ranked.append((-whole, b, cells[0]))
        ranked.sort()
        room = self.max_share * sum(estimate_tokens(b.text) for b in blocks)
        kept: list[int] = []
        used = 0
        for _, _, i in ranked:
            cost = estimate_tokens(texts[i + 1]) + 1
            if used + cost > room and kept:
                continue
            kept.append(i)
            used += cost
            if len(kept) == self.max_facts:
                break
        kept.sort()
        out = []
        for i in kept:
            b, s, e, row = units[i]
            block = blocks[b]
            text = block.text[s:e]
            if row >= 0:  # the row's cells that carry a question term, on one line
                cells = [j for j, u in enumerate(units) if u[0] == b and u[3] == row]
                text = " | ".join(
                    block.text[units[j][1] : units[j][2]] for j in cells if own[j] > 0
                )
            chunk = _chunk_of(block, members[b] if b < len(members) else (), s)
            out.append(Fact(text, b + 1, chunk))
        return out


_SYSTEM = (
    "You condense numbered passages into the facts that answer a question. Give at most "
    "{n} facts; each is one short statement taken from one passage, in the passage's own "
    "words where you can, with that passage's number as its id. Leave out facts that do not "
    "help answer the question; never add facts the passages do not state. Answer with JSON "
    'only: {{"facts": [{{"text": "...", "id": 1}}]}}'
)


@dataclass
class ModelDistiller:
    """Condense the question and blocks with a model into at most ``max_facts`` facts.

    Parameters
    ----------
    model : object
        A chat client such as :class:`~fastrag.OpenAIChatGenerator` (its
        ``chat(messages)`` is called with the distillation prompt), or any
        generator ``generator(question, hits)`` (called with the
        instruction before the question; its text must be the JSON).
    max_facts : int, default 3
        Most facts; a longer list is cut to this.
    timeout : float, optional
        Seconds to wait for the model (see
        :func:`~fastrag.answer.stages.call_with_timeout`).
    fallback : ExtractiveDistiller, optional
        Used on any failure (default ``ExtractiveDistiller()``).

    Notes
    -----
    The reply must hold a JSON object ``{"facts": [{"text": str, "id": int},
    ...]}`` with at least one fact, every ``id`` naming a block (``1..n``)
    and every ``text`` non-empty. Anything else raises
    :class:`~fastrag.errors.ModelResponseError`, on which the pipeline uses
    ``fallback`` and adds a warning.
    """

    model: Any
    max_facts: int = 3
    timeout: float | None = None
    fallback: ExtractiveDistiller | None = None

    def __post_init__(self) -> None:
        if not (callable(getattr(self.model, "chat", None)) or callable(self.model)):
            raise ConfigError(
                "distill= must be 'extractive', a chat client (with chat(messages)) or a "
                f"generator(question, hits), got {type(self.model).__name__}"
            )
        if isinstance(self.max_facts, bool) or not (
            isinstance(self.max_facts, int) and self.max_facts >= 1
        ):
            raise ConfigError(f"max_facts must be a positive int, got {self.max_facts!r}")

    def facts(self, question: str, blocks: Sequence[Hit]) -> list[Fact]:
        """The model's facts (raises :class:`~fastrag.errors.ModelResponseError` if invalid)."""
        system = _SYSTEM.format(n=self.max_facts)
        chat = getattr(self.model, "chat", None)
        if callable(chat):
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": build_user_message(question, blocks)},
            ]
            text = call_chat(self.model, messages, self.timeout)
        else:
            from .generate import as_generator

            call = as_generator(self.model)
            out: Generation = call(f"{system}\n\n{question}", blocks)
            text = out.text
        return self.parse(text, blocks)

    def parse(self, text: str, blocks: Sequence[Hit]) -> list[Fact]:
        """Validate a model's reply into facts (see the class Notes)."""
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            raise ModelResponseError("no JSON object in the distiller's reply")
        try:
            data = orjson.loads(text[start : end + 1])
        except orjson.JSONDecodeError as exc:
            raise ModelResponseError(f"the distiller's reply is not JSON: {exc}") from exc
        items = data.get("facts") if isinstance(data, dict) else None
        if not isinstance(items, list) or not items:
            raise ModelResponseError("the distiller's reply has no list of facts")
        out: list[Fact] = []
        for item in items[: self.max_facts]:
            if not isinstance(item, dict):
                raise ModelResponseError("a fact is not an object")
            fact, marker = item.get("text"), item.get("id")
            if not isinstance(fact, str) or not fact.strip():
                raise ModelResponseError("a fact has no text")
            if isinstance(marker, str) and marker.strip("[] ").isdigit():
                marker = int(marker.strip("[] "))
            if isinstance(marker, bool) or not isinstance(marker, int):
                raise ModelResponseError(f"a fact's id {marker!r} is not a number")
            if not 1 <= marker <= len(blocks):
                raise ModelResponseError(f"a fact cites [{marker}], which is not a passage")
            out.append(Fact(fact.strip(), marker, blocks[marker - 1].chunk_id))
        out.sort(key=lambda f: f.marker)
        return out


Distiller = ExtractiveDistiller | ModelDistiller


def as_distiller(value: Any) -> Distiller | None:
    """The distiller of ``AnswerOptions.distill`` (None: no distillation).

    ``"extractive"`` gives :class:`ExtractiveDistiller`; a distiller is kept;
    any chat client or generator is wrapped in :class:`ModelDistiller`.
    """
    if value is None:
        return None
    if isinstance(value, (ExtractiveDistiller, ModelDistiller)):
        return value
    if isinstance(value, str):
        if value == "extractive":
            return ExtractiveDistiller()
        raise ConfigError(f"distill must be None, 'extractive' or a model, got {value!r}")
    return ModelDistiller(value)


def distilled_blocks(blocks: Sequence[Hit], facts: Sequence[Fact]) -> list[Hit]:
    """The blocks with their facts as text (one per line); a block without facts is empty.

    Markers stay those of the context (``[n]`` is ``blocks[n - 1]``), so
    citations name the same chunks; an empty block is left out of the
    prompt (:func:`~fastrag.answer.prompt.build_user_message`).
    """
    by_marker: dict[int, list[str]] = {}
    for f in facts:
        by_marker.setdefault(f.marker, []).append(f.text)
    return [replace(b, text="\n".join(by_marker.get(i, []))) for i, b in enumerate(blocks, 1)]


def run_distiller(
    distiller: Distiller,
    question: str,
    blocks: Sequence[Hit],
    members: Sequence[Sequence[Hit]],
    *,
    model_question: str,
    model_blocks: Sequence[Hit],
    estimator: Callable[[str], int] = estimate_tokens,
    tokens_before: int,
) -> tuple[Distilled, list[str]]:
    """Distil a context: the facts and token counts, and warnings (a model's fallback).

    A :class:`ModelDistiller` reads ``model_question`` and ``model_blocks``
    (the redacted text); the extractive distiller reads the original.
    """
    warnings: list[str] = []
    if isinstance(distiller, ModelDistiller):
        try:
            facts = distiller.facts(model_question, model_blocks)
            kind = "model"
        except Exception as exc:  # noqa: BLE001 - any failure means the extractive distiller
            log.warning("model distiller failed (%s: %s)", type(exc).__name__, exc)
            warnings.append(
                f"distillation by the model failed ({type(exc).__name__}: {exc}); "
                "used the extractive distiller"
            )
            facts = (distiller.fallback or ExtractiveDistiller()).facts(question, blocks, members)
            kind = "extractive"
    else:
        facts = distiller.facts(question, blocks, members)
        kind = "extractive"
    after = sum(
        estimator(f"[{i}] {b.text}")
        for i, b in enumerate(distilled_blocks(blocks, facts), 1)
        if b.text
    )
    return Distilled(tuple(facts), tokens_before, after, kind), warnings
