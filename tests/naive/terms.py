"""Reference for :func:`fastrag.answer.generate.question_terms`: one character pair at a time."""

from __future__ import annotations

from fastrag.answer.generate import (
    _CJK_CHAR,
    _CJK_RUN,
    _EN_STOP,
    _WORD,
    _ZH_QUESTION_PHRASES,
    _ZH_STOP_CHARS,
    _ZH_STOP_PAIRS,
    _stem,
)


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
