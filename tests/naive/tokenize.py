"""Reference twin of ``fastrag._native.tokenize`` and ``fastrag.text.tokenize``.

Obvious rather than fast: walks the Python string one character at a time
with ``unicodedata``, and hashes token strings with FNV-1a in Python ints.
"""

from __future__ import annotations

import unicodedata

from fastrag.text.stopwords import STOPWORDS

ENGLISH = frozenset(STOPWORDS)  # the tokenizer's default list (data, not logic)

CJK_RANGES = (
    (0x1100, 0x1200),
    (0x3000, 0x3400),
    (0x3400, 0xA000),
    (0xA960, 0xA980),
    (0xAC00, 0xD800),
    (0xF900, 0xFB00),
    (0xFF66, 0xFFDD),
    (0x1B000, 0x1B170),
    (0x20000, 0x32400),
)


def fnv1a64(text: str) -> int:
    """FNV-1a 64 of the UTF-8 bytes of ``text``."""
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def char_class(c: str) -> str:
    """'word', 'cjk', 'mark' or 'sep'."""
    cp = ord(c)
    if 0x32400 <= cp < 0xE0000 or cp >= 0xE01F0:
        return "sep"
    cat = unicodedata.category(c)[0]
    if cat == "M":
        return "mark"
    if cat not in "LN":
        return "sep"
    if any(lo <= cp < hi for lo, hi in CJK_RANGES):
        return "cjk"
    return "word"


def fold(c: str, lowercase: bool = True) -> str:
    """Full-width ASCII to ASCII, then (optionally) a one-code-point lower-casing."""
    cp = ord(c)
    if 0xFF01 <= cp <= 0xFF5E:
        c = chr(cp - 0xFEE0)
    if lowercase and ord(c) < 0x20000:
        low = c.lower()
        if len(low) == 1:
            c = low
    return c


def tokens(
    text: str,
    *,
    lowercase: bool = True,
    stopwords: frozenset[str] = ENGLISH,
    cjk: str = "unigram+bigram",
    stem=None,
) -> list[str]:
    """Token strings of ``text`` in emission order (see ``fastrag.text.tokenize``)."""
    out: list[tuple[str, str]] = []  # (kind, text)
    word: list[str] = []
    run: list[str] = []

    def end_word() -> None:
        if word:
            out.append(("word", "".join(word)))
            word.clear()

    def end_run() -> None:
        if cjk == "bigram" and len(run) == 1:
            out.append(("cjk", run[0]))
        run.clear()

    for c in text:
        kind = char_class(c)
        if kind == "word":
            end_run()
            word.append(fold(c, lowercase))
        elif kind == "mark":
            if word:
                word.append(fold(c, lowercase))
        elif kind == "cjk":
            end_word()
            f = fold(c, lowercase)
            if cjk != "bigram":
                out.append(("cjk", f))
            if run and cjk != "unigram":
                out.append(("cjk", run[-1] + f))
            run.append(f)
        else:
            end_word()
            end_run()
    end_word()
    end_run()
    result = []
    for kind, t in out:
        if t in stopwords:
            continue
        if kind == "word" and stem is not None and len(t) > 2:
            t = stem(t) or t
        result.append(t)
    return result


def token_hashes(text: str, **options) -> list[int]:
    """FNV-1a 64 hashes of :func:`tokens`."""
    return [fnv1a64(t) for t in tokens(text, **options)]
