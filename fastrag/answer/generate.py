"""Generators: turn a question and its hits into a cited answer.

A generator is any callable ``generator(question, hits) -> Generation | str``;
``hits[0]`` is cited as ``[1]``, ``hits[1]`` as ``[2]``, and so on. A plain
string is taken as the answer text, its ``[n]`` markers as its citations.

:class:`ExtractiveGenerator` is the default: no model and no network. It
answers with the sentences of the hits that best cover the question's terms,
each followed by the marker of its hit, and says "not found" (in the
question's language) when no sentence covers enough of the question. Every
sentence it returns is a verbatim substring of a hit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError, GenerationError
from ..text.cjk import is_chinese
from ..text.sentences import text_units
from ..text.terms import coverage, question_terms, text_terms
from ..types import Generation, Hit
from .prompt import build_user_message, not_found_message, parse_citations
from .stages import register_cache

__all__ = ["ExtractiveGenerator", "Generator", "as_generator"]


@runtime_checkable
class Generator(Protocol):
    """Anything that answers a question from hits."""

    def __call__(self, question: str, hits: Sequence[Hit]) -> Generation | str:
        """Answer ``question`` from ``hits`` (cite ``hits[i]`` as ``[i + 1]``)."""
        ...


@dataclass(frozen=True)
class ExtractiveGenerator:
    """Answer with the hits' sentences that best cover the question; no model.

    Parameters
    ----------
    min_score : float, default 0.05
        Below this best-hit relevance (``Hit.relevance``, or the score when a
        hit has none) the answer is "not found".
    min_coverage : float, default 0.5
        Share of the question's content terms that one sentence must contain
        to support an answer (see :func:`coverage`: stemmed words; for CJK,
        half character bigrams and half characters).
    max_sentences : int, default 3
        Most sentences in an answer.
    slack : float, default 0.25
        Sentences after the best one are kept only when their coverage is
        within ``slack`` of the best sentence's.
    """

    min_score: float = 0.05
    min_coverage: float = 0.5
    max_sentences: int = 3
    slack: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_coverage <= 1.0:
            raise ConfigError(f"min_coverage must be in [0, 1], got {self.min_coverage!r}")
        if isinstance(self.max_sentences, bool) or not (
            isinstance(self.max_sentences, int) and self.max_sentences >= 1
        ):
            raise ConfigError(f"max_sentences must be a positive int, got {self.max_sentences!r}")

    def __call__(self, question: str, hits: Sequence[Hit]) -> Generation:
        """Answer ``question`` from ``hits`` (see the class docstring)."""
        return self.generate(question, hits, build_user_message(question, hits))

    def generate(self, question: str, hits: Sequence[Hit], prompt: str | None = None) -> Generation:
        """:meth:`__call__` with the prompt given (the answer pipeline has built its own).

        ``Generation.prompt`` is ``prompt`` (None: none); the answer pipeline
        shows its own prompt (redacted, with the notes) in ``Answer.prompt``,
        so it does not have this generator build another one.
        """
        best = 0.0
        for i, hit in enumerate(hits):
            score = hit.relevance if hit.relevance is not None else hit.score
            if i == 0 or score > best:
                best = score
        if not hits or best < self.min_score:
            return Generation(not_found_message(question), False, (), prompt)
        terms = question_terms(question)
        q_terms, q_chars = terms
        if not q_terms and not q_chars:
            return Generation(not_found_message(question), False, (), prompt)
        n_terms, n_chars = len(q_terms), len(q_chars)
        min_coverage = self.min_coverage
        scored: list[tuple[float, int, int, str]] = []  # (-coverage, hit, position, sentence)
        for h, hit in enumerate(hits):
            section = hit.metadata.get("section")
            sentences, rows, (u_terms, u_chars) = _units(
                hit.text, hit.start > 0, section if isinstance(section, str) else None
            )
            # coverage(terms, found), inline. No sentence covers more than all of them together
            # (coverage grows with the terms found): a hit whose sentences fall short is skipped.
            cov = len(q_terms & u_terms) / n_terms if n_terms else 0.0
            if n_chars:
                cov = 0.5 * cov + 0.5 * len(q_chars & u_chars) / n_chars
            if cov >= min_coverage:
                for pos, (sentence, (s_terms, s_chars)) in enumerate(sentences):
                    cov = len(q_terms & s_terms) / n_terms if n_terms else 0.0
                    if n_chars:
                        cov = 0.5 * cov + 0.5 * len(q_chars & s_chars) / n_chars
                    if cov >= min_coverage:
                        scored.append((-cov, h, pos, sentence))
            if rows:
                for pos, (cov, piece) in enumerate(_row_candidates(terms, rows), len(sentences)):
                    if cov >= min_coverage:
                        scored.append((-cov, h, pos, piece))
        if not scored:
            return Generation(not_found_message(question), False, (), prompt)
        scored.sort()
        floor = -scored[0][0] - self.slack
        chosen: list[tuple[int, str]] = []
        seen: set[str] = set()
        for neg_coverage, h, _, sentence in scored:
            if -neg_coverage < floor:
                break
            if sentence in seen:
                continue  # the same sentence from an overlapping window
            seen.add(sentence)
            chosen.append((h, sentence))
            if len(chosen) == self.max_sentences:
                break
        # Chinese: "句子。[1]"; English: "Sentence. [1]".
        zh = is_chinese(question)
        sep, gap = ("", "") if zh else (" ", " ")
        text = sep.join([f"{sentence}{gap}[{h + 1}]" for h, sentence in chosen])
        # The markers it appended, not a parse: a hit's own "[1]" is not a citation.
        cited = tuple(dict.fromkeys([h + 1 for h, _ in chosen]))
        return Generation(text, True, cited, prompt)

    @staticmethod
    def _candidates(terms: tuple[set[str], set[str]], hit: Hit) -> list[tuple[float, str]]:
        """``(coverage, text)`` of a hit's whole sentences and of its table rows' answering cells.

        The headings a structure chunk opens with are not part of its first sentence, but
        their terms count toward every sentence's coverage (they name what the sentences
        below them are about). A sentence cut by the hit's window is left out: the first one
        of a hit that starts inside its document when it starts with a lower-case letter,
        and the last one when it has no end punctuation, ends in a letter or digit and
        follows whole sentences (it was cut inside a word or a sentence). A table row is
        scored as a whole and answers with its cells whose header carries a question term
        and whose value does not merely repeat the question (the value of ``Fix: ...`` alone
        for "What is the fix for SV0432?" when one cell answers, ``Header: value`` pairs
        when several do), or the whole row when no cell does; when the question names
        numbers or codes, only a row that holds one answers. (:meth:`generate` reads the
        same candidates, with the coverage of the sentences computed inline.)
        """
        section = hit.metadata.get("section")
        sentences, rows, _ = _units(
            hit.text, hit.start > 0, section if isinstance(section, str) else None
        )
        out = [(coverage(terms, found), piece) for piece, found in sentences]
        return out + _row_candidates(terms, rows) if rows else out


_Terms = tuple[frozenset[str], frozenset[str]]
_Row = tuple[str, _Terms, tuple[tuple[str, frozenset[str], frozenset[str]], ...]]


@functools.lru_cache(maxsize=4096)
def _units(
    text: str, cut_start: bool, section: str | None
) -> tuple[tuple[tuple[str, _Terms], ...], tuple[_Row, ...], _Terms]:
    """What :meth:`ExtractiveGenerator._candidates` reads of a hit, whatever the question.

    ``(sentences, rows, union)``: each candidate sentence (the cut ones left
    out) with its terms (and those of the headings the chunk opens with),
    each table row as ``(text, terms, cells)``, a cell as ``(text, header
    terms, value terms)``, and the union of the sentences' terms. A hit's
    text, whether its window starts inside its document and its section
    decide them, and context blocks recur across questions, so they are
    remembered (thread-safe).
    """
    units = text_units(text)
    sentences = [(s, e) for s, e, row in units if row < 0]
    row_cells: dict[int, list[tuple[int, int]]] = {}
    for s, e, row in units:
        if row >= 0:
            row_cells.setdefault(row, []).append((s, e))
    lead = _headings_length(text, section)
    # The headings a structure chunk opens with name what its sentences are about
    # (a window keeps them inline, in its first sentence): their terms count for
    # every sentence below them, which the answer then quotes without them.
    heading = text_terms(text[:lead]) if lead else None
    out: list[tuple[str, _Terms]] = []
    for i, (s, e) in enumerate(sentences):
        if e <= lead:
            continue  # only the headings the chunk opens with
        if s < lead:
            s = lead  # a sentence after the chunk's opening headings, without them
        piece = text[s:e]
        if i == 0 and s == units[0][0] and cut_start and piece[0].islower():
            continue  # starts inside a sentence (or a word) the window cut
        last = i == len(sentences) - 1 and e == units[-1][1] and i > 0
        if last and piece[-1].isalnum() and piece[-1].isascii():
            continue  # ends where the window cut it
        found = text_terms(piece)
        if heading is not None:
            found = (found[0] | heading[0], found[1] | heading[1])
        out.append((piece, found))
    rows: list[_Row] = []
    for cells in row_cells.values():
        whole = text[cells[0][0] : cells[-1][1]]
        parts = []
        for s, e in cells:
            cell = text[s:e]
            head, _, value = cell.partition(":")
            value_terms = text_terms(value)
            parts.append((cell, text_terms(head)[0], value_terms[0] | value_terms[1]))
        rows.append((whole, text_terms(whole), tuple(parts)))
    union = (
        frozenset().union(*(found[0] for _, found in out)),
        frozenset().union(*(found[1] for _, found in out)),
    )
    return tuple(out), tuple(rows), union


register_cache(_units.cache_clear)


def _row_candidates(
    terms: tuple[Set[str], Set[str]], rows: tuple[_Row, ...]
) -> list[tuple[float, str]]:
    """``(coverage, text)`` of a hit's table rows (see :meth:`ExtractiveGenerator._candidates`)."""
    out: list[tuple[float, str]] = []
    q_terms = terms[0] | terms[1]
    keys = {t for t in terms[0] if any(c.isdigit() for c in t)}
    for whole, whole_terms, cells in rows:
        if keys and not keys & whole_terms[0]:
            continue  # a row is a record: it must be the one the question names
        cov = coverage(terms, whole_terms)
        answering = [
            cell
            for cell, head_terms, value_terms in cells
            if head_terms & q_terms and not value_terms <= q_terms
        ]
        if len(answering) == 1:  # the one cell that answers: its value
            out.append((cov, answering[0].partition(":")[2].strip() or answering[0]))
        else:
            out.append((cov, "; ".join(answering) if answering else whole))
    return out


def _headings_length(text: str, section: Any) -> int:
    """Characters of the Markdown headings a structure chunk opens with.

    A chunk starts with its headings, the last of them the innermost, whose
    name ends its ``section``; 0 when the chunk does not open so.
    """
    if not isinstance(section, str) or not text.startswith("#"):
        return 0
    name = section.rsplit(" > ", 1)[-1]
    at = text.find("# " + name)
    end = at + 2 + len(name)
    if at < 0 or (end < len(text) and text[end] != " "):
        return 0
    while end < len(text) and text[end] == " ":
        end += 1
    return end


_DEFAULT = ExtractiveGenerator()  # frozen: one instance serves every call


def as_generator(generator: Any) -> Callable[[str, Sequence[Hit]], Generation]:
    """A call ``(question, hits) -> Generation`` of ``generator`` (``None``: the extractive one)."""
    if generator is None:
        return _DEFAULT
    if not callable(generator):
        raise ConfigError(
            "generator must be callable as generator(question, hits), got "
            f"{type(generator).__name__}"
        )

    def call(question: str, hits: Sequence[Hit]) -> Generation:
        out = generator(question, hits)
        if isinstance(out, Generation):
            return out
        if isinstance(out, str):
            return Generation(out, bool(out.strip()), parse_citations(out, len(hits)))
        raise GenerationError(
            f"generator returned {type(out).__name__}; expected fastrag.Generation or str"
        )

    return call
