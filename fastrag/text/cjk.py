"""What counts as CJK: one definition for the tokenizer, term extraction and language tests.

:data:`CJK_RANGES` are the code-point ranges of the Han, Kana, Hangul and
Bopomofo scripts (with the CJK symbols block, whose letters and numbers
such as 々 〆 〇 count). The tokenizer classifies letters and numbers in these
ranges as CJK (every character a token, and every pair); :data:`CJK_CHAR`
matches one such character in Python code; :func:`is_chinese` decides a
question's language for the not-found message and the answer's spacing.
"""

from __future__ import annotations

import functools
import re

__all__ = ["CJK_CHAR", "CJK_RANGES", "CJK_RUN", "is_chinese"]

CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x1200),  # Hangul Jamo
    (0x3000, 0x3400),  # CJK symbols (only letters/numbers count: 々 〆 〇), Kana, Bopomofo
    (0x3400, 0xA000),  # CJK Unified Ideographs and extension A
    (0xA960, 0xA980),  # Hangul Jamo extended A
    (0xAC00, 0xD800),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFB00),  # CJK compatibility ideographs
    (0xFF66, 0xFFDD),  # half-width Katakana and Hangul
    (0x1B000, 0x1B170),  # Kana supplement and extensions
    (0x20000, 0x32400),  # CJK extensions B-H, compatibility supplement
)
"""Half-open ``[lo, hi)`` code-point ranges of the CJK scripts."""

_CLASS = "".join(f"\\U{lo:08x}-\\U{hi - 1:08x}" for lo, hi in CJK_RANGES)
_PUNCT = "\u3000-\u303f"  # CJK symbols and punctuation: not letters

CJK_CHAR = re.compile(f"(?![{_PUNCT}])[{_CLASS}]")
"""One CJK letter or number (punctuation such as 。、 excluded)."""

CJK_RUN = re.compile(f"((?:(?![{_PUNCT}])[{_CLASS}])+)")
"""A run of CJK letters and numbers (a capturing group, for ``re.split``)."""

_LATIN = re.compile(r"[A-Za-z]")


@functools.lru_cache(maxsize=1024)  # the answer stages ask it of one question several times
def is_chinese(text: str) -> bool:
    """Whether a text is (mostly) CJK: at least a quarter as many CJK characters as Latin letters.

    Parameters
    ----------
    text : str
        A question.

    Returns
    -------
    bool
        True when the answer should be in Chinese (CJK spacing, Chinese not-found message).
    """
    return len(CJK_CHAR.findall(text)) >= max(1, len(_LATIN.findall(text)) // 4)
