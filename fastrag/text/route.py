"""Question classes for routing: code/identifier, numeric with units, natural language, mixed.

A small rule set, the same for Chinese and English (NFKC first, so full-width
forms count as their ASCII twins):

- a **code** token is an identifier mixing letters and digits: ``SV0432``,
  ``OT-0500``, ``FANUC-0iMD``, ``E-07``, ``A06B-6079-H106`` (at least one
  letter and one digit, or a dash-joined run with a digit; 3 characters or
  more);
- a **numeric** token is a number with a unit: ``85℃``, ``85 °C``,
  ``0.3MPa``, ``1500 rpm``, ``24V``, ``3 mm``, ``80%``, ``5分钟``, ``3 毫米``
  (:data:`UNITS`);
- the **words** are the rest: Latin words of 2 letters or more that are not
  stop words, and CJK characters (each counted as half a word, since a
  Chinese word is about two characters), question phrases (怎么, 多少, ...)
  and stop words left out.

The class: ``code`` when code tokens are found and at most
:data:`MAX_CONTEXT_WORDS` words besides them; ``numeric`` likewise for
numbers with units (code wins when both are present and words are few);
``mixed`` when code or numeric tokens come with more words; ``natural``
otherwise.
"""

from __future__ import annotations

import re
import unicodedata

from .cjk import CJK_CHAR
from .stopwords import CHINESE_QUESTION_PHRASES, ENGLISH_STOPWORDS

__all__ = ["MAX_CONTEXT_WORDS", "ROUTES", "UNITS", "classify_question", "route_tokens"]

ROUTES = ("code", "numeric", "natural", "mixed")
"""The classes a question is routed by."""

MAX_CONTEXT_WORDS = 3
"""Words a code or numeric question may hold besides its codes and numbers."""

UNITS = (
    "℃", "°c", "°f", "°", "k", "mpa", "kpa", "pa", "bar", "psi", "mm", "cm", "μm", "um", "m",
    "km", "kg", "g", "mg", "t", "n", "nm", "kn", "rpm", "r/min", "v", "kv", "mv", "a", "ma",
    "w", "kw", "kwh", "hz", "khz", "s", "ms", "min", "h", "hr", "hrs", "%", "l", "ml", "db",
    "度", "伏", "安", "瓦", "千瓦", "转", "公斤", "千克", "克", "吨", "毫米", "厘米", "米",
    "秒", "毫秒", "分钟", "小时", "升", "毫升", "兆帕", "千帕", "帕",
)  # fmt: skip
"""Units a number may carry to make a numeric token (case-insensitive)."""

_UNIT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
_NUMERIC = re.compile(rf"(?<![0-9a-z.])\d+(?:[.,]\d+)?\s?(?:{_UNIT})(?![a-z])", re.IGNORECASE)
_CODE = re.compile(
    r"(?<![\w-])(?=[a-z0-9-]*[a-z])(?=[a-z0-9-]*\d)[a-z0-9]+(?:-[a-z0-9]+)*(?![\w-])",
    re.IGNORECASE | re.ASCII,
)
_WORD = re.compile(r"[a-z]{2,}", re.IGNORECASE | re.ASCII)


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def route_tokens(question: str) -> tuple[list[str], list[str], float]:
    """The code tokens, the numbers with units and the count of other words of a question."""
    text = _normalise(question)
    numeric = [m.group(0) for m in _NUMERIC.finditer(text)]
    rest = _NUMERIC.sub(" ", text)
    codes = [m.group(0) for m in _CODE.finditer(rest) if len(m.group(0)) >= 3]
    rest = _CODE.sub(" ", rest)
    rest = CHINESE_QUESTION_PHRASES.sub(" ", rest)
    words = float(sum(1 for w in _WORD.findall(rest) if w not in ENGLISH_STOPWORDS))
    words += len(CJK_CHAR.findall(rest)) / 2
    return codes, numeric, words


def classify_question(question: str) -> str:
    """``code``, ``numeric``, ``natural`` or ``mixed``, by the rules of the module docstring."""
    codes, numeric, words = route_tokens(question)
    if not codes and not numeric:
        return "natural"
    if words > MAX_CONTEXT_WORDS:
        return "mixed"
    return "code" if codes else "numeric"
