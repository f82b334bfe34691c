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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError, GenerationError
from ..types import Generation, Hit
from .prompt import build_user_message, is_chinese, not_found_message, parse_citations

__all__ = ["ExtractiveGenerator", "Generator", "as_generator", "coverage", "question_terms", "text_terms"]


@runtime_checkable
class Generator(Protocol):
    """Anything that answers a question from hits."""

    def __call__(self, question: str, hits: Sequence[Hit]) -> Generation | str:
        """Answer ``question`` from ``hits`` (cite ``hits[i]`` as ``[i + 1]``)."""
        ...


# -- terms -----------------------------------------------------------------------

_EN_STOP = frozenset(
    """a about above after again all am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just
    me more most my no nor not now of off on once only or other our ours out over own
    same she should so some such than that the their theirs them then there these they
    this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours many much get got please tell
    does do i'm it's there's""".split()
)
# CJK question phrases (removed before terms are taken, so no bigram spans
# them), and characters that make a bigram a question or function word.
_ZH_QUESTION_PHRASES = re.compile(
    "多长时间|多长|多久|多少|几点|几天|几个|几次|什么时候|什么|怎么样|怎么|怎样|如何|为什么|为何"
    "|是否|能否|可否|可以|请问|有没有|哪些|哪里|哪个|吗|呢"
)
_ZH_STOP_CHARS = frozenset("的了吗呢吧啊么什怎哪几谁何是个这那要在")
_ZH_STOP_PAIRS = frozenset("需要 时候 没有".split())
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)")
_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "s", "ly")


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """A light suffix stripper, enough to match report/reports and submit/submitted."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]
    return word


_ZH_STOP_SPLIT = re.compile("[" + "".join(sorted(_ZH_STOP_CHARS)) + "]")


def question_terms(text: str) -> tuple[set[str], set[str]]:
    """Content terms of a text: ``(terms, cjk_chars)``.

    ``terms`` holds stemmed non-stop words and the CJK character bigrams that
    contain no question or function character; ``cjk_chars`` the CJK
    characters that are not function characters. Question phrases (多少,
    怎么, 几点, ...) are removed first, so no bigram spans them.
    """
    terms: set[str] = set()
    chars: set[str] = set()
    text = _ZH_QUESTION_PHRASES.sub(" ", text.lower())
    for word in _WORD.findall(text):
        if word.isascii():  # the common case, without the CJK split
            if word not in _EN_STOP and (len(word) > 1 or word.isdigit()):
                terms.add(_stem(word))
            continue
        for part in _CJK_RUN.split(word):
            if not part:
                continue
            if _CJK_CHAR.match(part):
                chars.update(part)
                if len(part) == 1:
                    terms.add(part)  # a lone function character is removed below
                    continue
                # Bigrams with a function character are dropped: split the run at them.
                for run in _ZH_STOP_SPLIT.split(part):
                    if len(run) > 1:
                        terms.update(map(str.__add__, run, run[1:]))
            elif part not in _EN_STOP and (len(part) > 1 or part.isdigit()):
                terms.add(_stem(part))
    terms -= _ZH_STOP_PAIRS
    terms -= _ZH_STOP_CHARS
    chars -= _ZH_STOP_CHARS
    return terms, chars


@functools.lru_cache(maxsize=16384)
def text_terms(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`question_terms` of a source text, remembered (thread-safe).

    Sources recur from question to question, and the verify stages read the
    sentences the extractive generator has just read: one cache serves both
    (:func:`fastrag.answer.stages.content_terms`).
    """
    terms, chars = question_terms(text)
    return frozenset(terms), frozenset(chars)


def coverage(question: tuple[set[str], set[str]], sentence: tuple[set[str], set[str]]) -> float:
    """Share of a question's terms a sentence contains (CJK: half bigrams, half characters)."""
    q_terms, q_chars = question
    s_terms, s_chars = sentence
    term_cov = len(q_terms & s_terms) / len(q_terms) if q_terms else 0.0
    if not q_chars:
        return term_cov
    return 0.5 * term_cov + 0.5 * len(q_chars & s_chars) / len(q_chars)


# -- sentences -------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])|(?<=[.])\s+(?=\S)|\n+")


def _sentences(text: str) -> list[str]:
    """Split a chunk into sentences (verbatim substrings, stripped)."""
    out = []
    for piece in _SENTENCE_END.split(text):
        piece = piece.strip()
        if piece:
            out.append(piece)
    return out


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
        prompt = build_user_message(question, hits)
        best = max((h.relevance if h.relevance is not None else h.score) for h in hits) if hits else 0.0
        if not hits or best < self.min_score:
            return Generation(not_found_message(question), False, (), prompt)
        terms = question_terms(question)
        if not terms[0] and not terms[1]:
            return Generation(not_found_message(question), False, (), prompt)
        scored: list[tuple[float, int, int, str]] = []  # (-coverage, hit, position, sentence)
        for h, hit in enumerate(hits):
            for pos, sentence in enumerate(_sentences(hit.text)):
                cov = coverage(terms, text_terms(sentence))
                if cov >= self.min_coverage:
                    scored.append((-cov, h, pos, sentence))
        if not scored:
            return Generation(not_found_message(question), False, (), prompt)
        scored.sort()
        floor = -scored[0][0] - self.slack
        chosen: list[tuple[int, int, str]] = []
        seen: set[str] = set()
        for neg_coverage, h, pos, sentence in scored:
            if -neg_coverage < floor:
                break
            if sentence in seen:
                continue  # the same sentence from an overlapping window
            seen.add(sentence)
            chosen.append((h, pos, sentence))
            if len(chosen) == self.max_sentences:
                break
        # Chinese: "句子。[1]"; English: "Sentence. [1]".
        zh = is_chinese(question)
        sep, gap = ("", "") if zh else (" ", " ")
        text = sep.join(f"{sentence}{gap}[{h + 1}]" for h, _, sentence in chosen)
        # The markers it appended, not a parse: a hit's own "[1]" is not a citation.
        cited = tuple(dict.fromkeys(h + 1 for h, _, _ in chosen))
        return Generation(text, True, cited, prompt)


def as_generator(generator: Any) -> Callable[[str, Sequence[Hit]], Generation]:
    """Wrap ``None`` (the extractive default) or any generator callable into one that returns a Generation."""
    if generator is None:
        return ExtractiveGenerator()
    if not callable(generator):
        raise ConfigError(
            f"generator must be callable as generator(question, hits), got {type(generator).__name__}"
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
