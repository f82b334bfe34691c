"""Reference for :func:`fastrag.text.terms.question_terms`: one character pair at a time."""

from __future__ import annotations

import re

import Stemmer

from fastrag.text.cjk import CJK_CHAR as _CJK_CHAR
from fastrag.text.cjk import CJK_RUN as _CJK_RUN
from fastrag.text.stopwords import CHINESE_QUESTION_PHRASES as _ZH_QUESTION_PHRASES
from fastrag.text.stopwords import CHINESE_STOP_BIGRAMS as _ZH_STOP_PAIRS
from fastrag.text.stopwords import CHINESE_STOP_CHARS as _ZH_STOP_CHARS
from fastrag.text.stopwords import ENGLISH_STOPWORDS as _EN_STOP

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_PORTER = Stemmer.Stemmer("porter")


def _stem(word: str) -> str:
    return word if len(word) <= 2 else _PORTER.stemWord(word)


def question_terms(text: str) -> tuple[set[str], set[str]]:
    terms: set[str] = set()
    chars: set[str] = set()
    text = _ZH_QUESTION_PHRASES.sub(" ", text.lower())
    for match in _WORD.finditer(text):
        for part in _CJK_RUN.split(match.group()):
            if not part:
                continue
            if _CJK_CHAR.match(part):
                chars.update(c for c in part if c not in _ZH_STOP_CHARS)
                if len(part) == 1:
                    if part not in _ZH_STOP_CHARS:
                        terms.add(part)
                    continue
                for i in range(len(part) - 1):
                    pair = part[i : i + 2]
                    if (
                        pair[0] not in _ZH_STOP_CHARS
                        and pair[1] not in _ZH_STOP_CHARS
                        and pair not in _ZH_STOP_PAIRS
                    ):
                        terms.add(pair)
            elif part not in _EN_STOP and (len(part) > 1 or part.isdigit()):
                terms.add(_stem(part))
    return terms, chars
