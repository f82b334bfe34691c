"""Token estimates: how many tokens a chat model's tokenizer makes of a text.

One estimator for the context budget and the ``tokens_per_minute`` rate
limit alike (both take any ``estimator(text) -> int`` instead, such as a
real tokenizer's ``len(encode(text))``).
"""

from __future__ import annotations

__all__ = ["ASCII_CHARS_PER_TOKEN", "CJK_CHARS_PER_TOKEN", "estimate_tokens"]

ASCII_CHARS_PER_TOKEN = 4
"""ASCII characters (letters, digits, punctuation, white space) per token."""

CJK_CHARS_PER_TOKEN = 2
"""CJK characters per token; every other non-ASCII character is counted at this rate too."""


def estimate_tokens(text: str) -> int:
    """Estimate how many tokens a chat model's tokenizer makes of ``text``.

    Characters are counted per class and the classes summed:

    - ASCII (code points below 128: English letters, digits, punctuation,
      white space): 4 characters per token;
    - CJK (Han, kana, Hangul, full-width punctuation): 2 characters per token;
    - every other character (accented Latin, Cyrillic, Greek, emoji, ...) is
      counted like CJK, 2 characters per token, which over-estimates
      accented European text a little and under-estimates emoji; both are
      rare in a knowledge base's context.

    The sum is rounded up. Any callable ``estimator(text) -> int`` can
    replace this function, e.g. a real tokenizer's ``len(encode(text))``.

    Parameters
    ----------
    text : str
        The text.

    Returns
    -------
    int
        The estimate, ``0`` for an empty text.

    Examples
    --------
    >>> estimate_tokens("Annual leave")
    3
    >>> estimate_tokens("年假申请")
    2
    """
    n = len(text)
    if text.isascii():
        return (n + 3) // 4
    ascii_chars = len(text.encode("ascii", "ignore"))
    # 4 * (ascii / 4 + other / 2), rounded up, in integers
    return (ascii_chars + 2 * (n - ascii_chars) + 3) // 4
