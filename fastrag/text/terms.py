"""Content terms: what the answer stages compare questions and sentences by.

:func:`question_terms` gives a text's content terms as two sets:

- ``terms``: lower-cased words that are not stop words
  (:data:`~fastrag.text.stopwords.ENGLISH_STOPWORDS`), Porter-stemmed as
  the BM25 tokenizer stems them (PyStemmer; words of one or two characters
  are left alone), numbers kept; and CJK character bigrams that contain no
  function character (:data:`~fastrag.text.stopwords.CHINESE_STOP_CHARS`);
- ``chars``: the CJK characters that are not function characters.

Chinese question phrases (怎么, 多少, ...) are removed first, so no bigram
spans them. The extractive answerer scores sentences by :func:`coverage`;
the faithfulness check and the conflict detector use the same terms.
:func:`text_terms` caches them for source texts, which recur.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Set

from .cjk import CJK_CHAR, CJK_RUN
from .stopwords import (
    CHINESE_QUESTION_PHRASES,
    CHINESE_STOP_BIGRAMS,
    CHINESE_STOP_CHARS,
    ENGLISH_STOPWORDS,
)

__all__ = ["coverage", "question_terms", "stem", "text_terms"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP_SPLIT = re.compile("[" + "".join(sorted(CHINESE_STOP_CHARS)) + "]")


@functools.lru_cache(maxsize=1)
def _stemmer():  # type: ignore[no-untyped-def]
    import Stemmer  # PyStemmer: a core dependency

    return Stemmer.Stemmer("porter")


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """The Porter stem of a lower-case word, as the BM25 tokenizer stems it (cached)."""
    if len(word) <= 2:
        return word
    return str(_stemmer().stemWord(word))


def question_terms(text: str) -> tuple[set[str], set[str]]:
    """Content terms of a text: ``(terms, cjk_chars)`` (see the module docstring)."""
    text = text.lower()
    if text.isascii():  # no CJK: no question phrases, bigrams or characters
        plain = set(_WORD.findall(text))
        plain -= ENGLISH_STOPWORDS
        return {stem(w) for w in plain if len(w) > 1 or w.isdigit()}, set()
    terms: set[str] = set()
    chars: set[str] = set()
    text = CHINESE_QUESTION_PHRASES.sub(" ", text)
    # Each distinct word once (the terms are a set); ASCII words, the common case, by set
    # operations and without the CJK split.
    words = set(_WORD.findall(text))
    plain = {w for w in words if w.isascii()}
    words -= plain
    plain -= ENGLISH_STOPWORDS
    terms.update([stem(w) for w in plain if len(w) > 1 or w.isdigit()])
    for word in words:
        for part in CJK_RUN.split(word):
            if not part:
                continue
            if CJK_CHAR.match(part):
                chars.update(part)
                if len(part) == 1:
                    terms.add(part)  # a lone function character is removed below
                    continue
                # Bigrams with a function character are dropped: split the run at them.
                for run in _STOP_SPLIT.split(part):
                    if len(run) > 1:
                        terms.update(map(str.__add__, run, run[1:]))
            elif part not in ENGLISH_STOPWORDS and (len(part) > 1 or part.isdigit()):
                terms.add(stem(part))
    terms -= CHINESE_STOP_BIGRAMS
    terms -= CHINESE_STOP_CHARS
    chars -= CHINESE_STOP_CHARS
    return terms, chars


@functools.lru_cache(maxsize=16384)
def text_terms(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`question_terms` of a source text, remembered (thread-safe)."""
    terms, chars = question_terms(text)
    return frozenset(terms), frozenset(chars)


def coverage(question: tuple[Set[str], Set[str]], sentence: tuple[Set[str], Set[str]]) -> float:
    """Share of a question's terms a sentence contains (CJK: half bigrams, half characters)."""
    q_terms, q_chars = question
    s_terms, s_chars = sentence
    term_cov = len(q_terms & s_terms) / len(q_terms) if q_terms else 0.0
    if not q_chars:
        return term_cov
    return 0.5 * term_cov + 0.5 * len(q_chars & s_chars) / len(q_chars)
