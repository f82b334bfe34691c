r"""PII redaction: replace personal data with typed placeholders before text reaches a model.

:class:`Redactor` finds, in any string it is given:

========== ================ =================================================================
type       placeholder      what matches
========== ================ =================================================================
EMAIL      ``[EMAIL]``      ``local@domain.tld``: ASCII local part, dotted domain, a TLD of
                            two or more letters (``user@localhost`` and ``user@`` do not match)
ID_CARD    ``[ID_CARD]``    mainland-China resident ID: 18 characters, region code (first
                            digit 1-9), birth date 18xx/19xx/20xx with month 01-12 and day
                            01-31, three digits, and a check character (digit or ``X``) that
                            must satisfy ISO 7064 MOD 11-2
BANK_CARD  ``[BANK_CARD]``  13-19 digits starting 1-9, contiguous or grouped by one kind of
                            separator (space or dash) as 4-4-4-4(-1..3), 4-4-4-1..4, 4-6-4/5
                            or 6-7..13, passing the Luhn check. An 18-digit number shaped like
                            a resident ID (region + plausible birth date) whose ID checksum
                            fails is *not* taken for a card
PHONE      ``[PHONE]``      mainland-China mobile ``1[3-9]`` + 9 digits, optionally prefixed
                            ``+86``, ``0086`` or ``86`` and grouped 3-4-4 by spaces or dashes;
                            international numbers written with ``+`` and a country code
                            (``+1 415 555 0100``, ``+44 20 7946 0958``, ``+1 (415) 555-0100``)
                            holding 8 to 15 digits in all (E.164)
IPV4       ``[IPV4]``       four dot-separated octets 0-255 without leading zeros, not part
                            of a longer dotted or numeric sequence (``1.2.3.4.5``,
                            ``256.1.1.1``, ``v1.2.3.4`` do not match)
========== ================ =================================================================

Numbers are matched only as whole numbers: a digit, a decimal point or a
``+`` right before a candidate, or a digit (for IDs and cards also an ``X``,
for cards a decimal part) right after it, rules it out, so order numbers,
amounts, versions and timestamps of other lengths stay as they are. An
18-digit number with a wrong ID checksum is neither an ID nor a card; a
13-19 digit number that happens to pass Luhn is a card (as it may well be).
Landline numbers without a ``+`` country code, 15-digit first-generation ID
numbers, IDs or cards split over lines, and IPv6 addresses are not detected.

Digits and separators are matched in any of their Unicode forms: the text
is first folded (:func:`fold`: every Unicode decimal digit -- full-width
``１３８``, Arabic-Indic, Devanagari, ... -- to its ASCII digit, full-width
ASCII forms such as ``＠``, ``．``, ``＋``, ``－`` and letters to ASCII as NFKC
maps them, other dashes to ``-`` and other spaces to `` ``), one character
for one so that offsets hold, the patterns run on the fold, and the spans
they find are replaced in the text as written. User patterns run on both the
fold and the text as written (a pattern may spell a full-width ``：``).

Each type is one precompiled regex pass with its validator, skipped outright
when a cheap scan shows the text cannot hold it (no ``@``; no digit-dot-digit;
no run of 7 digits), so clean text costs a few microseconds.

User patterns (``extra_pii_patterns={"EMPLOYEE_ID": r"E\d{6}"}``) are
replaced by ``[EMPLOYEE_ID]``. They run first, in the order given, so a
user's more specific pattern wins over a built-in type; the built-in types
then run in the order EMAIL, IPV4, ID_CARD, BANK_CARD, PHONE.

Redaction works on the strings it is given and returns new ones; stored
chunks are never changed. In the answer pipeline, redact the context blocks
*after* :func:`fastrag.answer.context.assemble_context` (merging needs the original
offsets). :class:`Redaction` counts what was replaced, by
type, and never holds the values.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import ConfigError
from ..types import Hit, with_text

__all__ = [
    "BUILTIN_TYPES",
    "Redaction",
    "Redactor",
    "fold",
    "id_card_valid",
    "luhn_valid",
    "redact_hits",
]

BUILTIN_TYPES = ("EMAIL", "IPV4", "ID_CARD", "BANK_CARD", "PHONE")
"""The built-in PII types, in the order they are applied."""

# -- validators ------------------------------------------------------------------------------

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def id_card_valid(number: str) -> bool:
    """Whether an 18-character resident ID number passes ISO 7064 MOD 11-2.

    Parameters
    ----------
    number : str
        17 digits and a check character (a digit, or ``X`` / ``x`` for 10).

    Returns
    -------
    bool
    """
    if len(number) != 18 or not number[:17].isdigit():
        return False
    total = sum(int(d) * w for d, w in zip(number, _ID_WEIGHTS, strict=False))
    return _ID_CHECK[total % 11] == number[17].upper()


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn check (payment cards).

    Parameters
    ----------
    digits : str
        Digits only.

    Returns
    -------
    bool
    """
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i & 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# -- patterns --------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,24}(?![A-Za-z0-9-])",
)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![0-9A-Za-z.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\.?\d)")
_ID_SHAPE = r"[1-9]\d{5}(?:18|19|20)\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}"
_ID_CARD = re.compile(rf"(?<![\d.+]){_ID_SHAPE}[\dXx](?![\dXx])")
_ID_SHAPED_DIGITS = re.compile(rf"{_ID_SHAPE}\d")
_CARD = re.compile(
    r"(?<![\d.+])(?:"
    r"[1-9]\d{12,18}"  # contiguous
    r"|[1-9]\d{3}(?P<a>[ -])\d{4}(?P=a)\d{4}(?P=a)\d{1,4}(?:(?P=a)\d{1,3})?"  # 4-4-4-4(-3)
    r"|[1-9]\d{3}(?P<b>[ -])\d{6}(?P=b)\d{4,5}"  # 4-6-4 / 4-6-5
    r"|[1-9]\d{5}(?P<c>[ -])\d{7,13}"  # 6-13 (UnionPay 19)
    r")(?![\dXx]|[.,]\d)"
)
_PHONE = re.compile(
    r"(?<![\d.+])(?:"
    # mainland-China mobile, optional +86 / 0086 / 86 prefix
    r"(?:(?:\+|00)?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}"
    # international: + country code (and maybe more digits), then groups each opened by a
    # separator or an area code in parentheses; unambiguous, so no runaway backtracking
    r"|\+[1-9]\d{0,14}(?:(?:[ -]|[ -]?\(\d{1,4}\)[ -]?)\d{1,10}){0,6}"
    r")(?!\d)"
)
_NOT_DIGIT = re.compile(r"\D")


def _check_card(match: re.Match[str]) -> bool:
    digits = _NOT_DIGIT.sub("", match.group())
    if not 13 <= len(digits) <= 19 or not luhn_valid(digits):
        return False
    # an ID-shaped number with a bad ID checksum is a mistyped ID, not a card
    return not (len(digits) == 18 and _ID_SHAPED_DIGITS.fullmatch(digits))


def _check_phone(match: re.Match[str]) -> bool:
    text = match.group()
    if text[0] != "+":
        return True
    return 8 <= len(_NOT_DIGIT.sub("", text)) <= 15


def _check_id(match: re.Match[str]) -> bool:
    return id_card_valid(match.group())


# Cheap tests that rule a whole text out for a type (one scan each, in C):
# "@" for e-mail, digit-dot-digit for IPv4, 7+ digits with single separators for the rest.
_IP_HINT = re.compile(r"\d\.\d")
_LONG_NUMBER = re.compile(r"\d(?:[ -]?\d){6}")

# (name, pattern, validator or None, hint: "at" | "ip" | "long" | None)
_Rule = tuple[str, "re.Pattern[str]", "Callable[[re.Match[str]], bool] | None", "str | None"]

_BUILTIN: dict[str, _Rule] = {
    "EMAIL": ("EMAIL", _EMAIL, None, "at"),
    "IPV4": ("IPV4", _IPV4, None, "ip"),
    "ID_CARD": ("ID_CARD", _ID_CARD, _check_id, "long"),
    "BANK_CARD": ("BANK_CARD", _CARD, _check_card, "long"),
    "PHONE": ("PHONE", _PHONE, _check_phone, "long"),
}
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


# -- folding: what is matched is the text with Unicode digits and separators made ASCII -------

_SPACES = "\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
_DASHES = "\u2010-\u2015\u2212\ufe58\ufe63"
# Full-width ASCII forms, less the CJK punctuation no pattern reads (！，：；？), which is
# frequent in Chinese text: text without a foldable character is not copied.
_FULL_WIDTH = "\uff02-\uff0b\uff0d-\uff19\uff1c-\uff1e\uff20-\uff5e"
_FOLDABLE = re.compile(rf"(?:(?![0-9])\d)|[{_FULL_WIDTH}{_SPACES}{_DASHES}]")
_DASH_SET = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63")


@functools.lru_cache(maxsize=1024)
def _fold_char(ch: str) -> str:
    cp = ord(ch)
    if 0xFF01 <= cp <= 0xFF5E:  # full-width ASCII (digits, letters, @ . + - ( ) ...)
        return chr(cp - 0xFEE0)
    if ch.isdecimal():  # any script's decimal digit
        return str(unicodedata.decimal(ch))
    return "-" if ch in _DASH_SET else " "


def _fold_match(match: re.Match[str]) -> str:
    return _fold_char(match.group())


def fold(text: str) -> str:
    """``text`` as the PII patterns read it: one ASCII character for each foldable one.

    Every Unicode decimal digit (``１``, ``٣``, ``७`` ...) becomes its ASCII
    digit, full-width ASCII forms (U+FF01-U+FF5E: ``＠``, ``．``, ``＋``,
    ``－``, letters; not the punctuation ``！，：；？`` no pattern reads)
    their ASCII characters (as NFKC maps them), other
    dashes and minus signs ``-`` and other spaces (no-break, ideographic,
    ...) `` ``. Each character maps to exactly one, so a span of the folded
    text is the same span of ``text``: matches are found in the fold and the
    original characters replaced. ASCII text, and text with nothing to
    fold, is returned as is (the same object).

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    str
        The folded text, ``len(text)`` characters long.
    """
    if text.isascii() or _FOLDABLE.search(text) is None:
        return text
    return _FOLDABLE.sub(_fold_match, text)


def _replace(text: str, spans: Sequence[tuple[int, int]], placeholder: str) -> str:
    """``text`` with each of the sorted, disjoint ``spans`` replaced by ``placeholder``."""
    parts, at = [], 0
    for lo, hi in spans:
        parts.append(text[at:lo])
        parts.append(placeholder)
        at = hi
    parts.append(text[at:])
    return "".join(parts)


def _union(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans covering ``a`` and ``b``, overlapping ones merged."""
    if not b:
        return a
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(a + b):
        if out and lo < out[-1][1]:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


@dataclass(frozen=True, slots=True)
class Redaction:
    """A redacted text and how many items of each type were replaced.

    Attributes
    ----------
    text : str
        The text with placeholders such as ``[EMAIL]``.
    counts : dict of str to int
        Replacements per type name (only types that occurred); never the
        replaced values.
    """

    text: str
    counts: dict[str, int] = field(default_factory=dict)


class Redactor:
    r"""Replace PII in strings with typed placeholders (see the module docstring).

    Parameters
    ----------
    extra_pii_patterns : mapping of str to str or compiled pattern, optional
        More types: ``{"EMPLOYEE_ID": r"E\d{6}"}`` replaces each match with
        ``[EMPLOYEE_ID]``. Names start with a letter and hold letters,
        digits and ``_``. Applied before the built-in types, in order.
    types : iterable of str, optional
        The built-in types to apply (default: all of :data:`BUILTIN_TYPES`);
        ``()`` applies only the extra patterns.

    Raises
    ------
    ConfigError
        For an unknown type, a bad name, or a pattern that does not compile.

    Examples
    --------
    >>> r = Redactor({"EMPLOYEE_ID": r"E\d{6}"})
    >>> out = r.redact("Mail a.b@example.com about E123456")
    >>> out.text, out.counts
    ('Mail [EMAIL] about [EMPLOYEE_ID]', {'EMPLOYEE_ID': 1, 'EMAIL': 1})
    """

    def __init__(
        self,
        extra_pii_patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        types: Iterable[str] | None = None,
    ) -> None:
        rules: list[_Rule] = []
        for name, pattern in dict(extra_pii_patterns or {}).items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ConfigError(
                    f"PII type names must start with a letter and hold letters, digits and _, "
                    f"got {name!r}"
                )
            if isinstance(pattern, str):
                try:
                    pattern = re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"PII pattern {name!r} does not compile: {exc}") from exc
            elif not isinstance(pattern, re.Pattern) or not isinstance(pattern.pattern, str):
                raise ConfigError(
                    f"PII pattern {name!r} must be a str or a compiled str pattern, "
                    f"got {type(pattern).__name__}"
                )
            rules.append((name, pattern, None, None))
        chosen: tuple[str, ...]
        if types is None:
            chosen = BUILTIN_TYPES
        else:
            if isinstance(types, str):
                raise ConfigError("types must be an iterable of type names, not a str")
            wanted = set(types)
            unknown = sorted(wanted - set(BUILTIN_TYPES))
            if unknown:
                raise ConfigError(f"unknown PII types {unknown}; known: {list(BUILTIN_TYPES)}")
            chosen = tuple(t for t in BUILTIN_TYPES if t in wanted)
        rules.extend(_BUILTIN[t] for t in chosen)
        self._rules: tuple[_Rule, ...] = tuple(rules)
        self.types: tuple[str, ...] = tuple(r[0] for r in rules)
        # A hit's redaction depends on its text and whether its window is cut at the start
        # only; context blocks recur across questions, so it is remembered (thread-safe).
        self._hit_text = functools.lru_cache(maxsize=HIT_CACHE)(self._redact_hit_text)

    def __repr__(self) -> str:
        return f"Redactor(types={self.types!r})"

    def redact(self, text: str) -> Redaction:
        """Replace every PII item in ``text`` by its placeholder.

        Parameters
        ----------
        text : str
            Any text; it is not modified.

        Returns
        -------
        Redaction
            The new text and the counts per type.
        """
        out, _, counts = self._redact(text, fold(text))
        return Redaction(out, counts)

    def _redact(self, text: str, folded: str) -> tuple[str, str, dict[str, int]]:
        """Redact ``text`` by the matches in ``folded`` (its :func:`fold`, same length).

        Returns the redacted text, its folded twin (placeholders at the same
        places) and the counts.
        """
        counts: dict[str, int] = {}
        same = folded is text
        long_number: bool | None = None  # computed once, again only if the text changed
        for name, pattern, check, hint in self._rules:
            if hint == "at":
                if "@" not in folded:
                    continue
            elif hint == "long":
                if long_number is None:
                    long_number = _LONG_NUMBER.search(folded) is not None
                if not long_number:
                    continue
            elif hint == "ip" and _IP_HINT.search(folded) is None:
                continue
            spans = [
                m.span()
                for m in pattern.finditer(folded)
                if m.group() and (check is None or check(m))
            ]
            if hint is None and not same:  # a user pattern: also as written (it may hold "：")
                spans = _union(spans, [m.span() for m in pattern.finditer(text) if m.group()])
            if not spans:
                continue
            placeholder = f"[{name}]"
            text = _replace(text, spans, placeholder)
            folded = text if same else _replace(folded, spans, placeholder)
            counts[name] = counts.get(name, 0) + len(spans)
            long_number = None
        return text, folded, counts

    __call__ = redact

    def redact_hits(self, hits: Sequence[Hit]) -> tuple[list[Hit], dict[str, int]]:
        """Redact the text of each hit, and digit runs its window may have cut.

        A window (or a merged block) can begin or end in the middle of a
        value: a card number cut by two windows is no longer a card number
        in either, and would pass whole-value matching. So at the end of a
        hit, and at its start when the hit does not start its document
        (``start > 0``), a fragment that looks like a piece of a value is
        replaced too (conservative: the same text is whole, and matched as a
        whole, in the neighbouring window that overlaps it):

        - a run of at least :data:`EDGE_DIGITS` digits, grouped by spaces,
          dashes or parentheses or not (a phone, card or ID number), by
          ``[NUMBER]`` (counted as ``PARTIAL_NUMBER``);
        - a run of digits and dots with two dots or more, or a leading dot
          at a cut start (``.10.77.``: part of an IPv4 address), by
          ``[IPV4]`` (``PARTIAL_IPV4``);
        - e-mail characters around an ``@`` (``john.doe@exam``,
          ``@example.com``), by ``[EMAIL]`` (``PARTIAL_EMAIL``).

        Fragments are found in the folded text (:func:`fold`: full-width and
        other Unicode digits and separators), as whole values are. A local
        part cut before its ``@`` reads as a word and is not detected.

        Parameters
        ----------
        hits : sequence of Hit
            The hits; they are not modified (a hit with nothing to redact
            is returned as is, others as copies with the new text).

        Returns
        -------
        hits : list of Hit
            In the same order.
        counts : dict of str to int
            Replacements per type over all hits.
        """
        out: list[Hit] = []
        counts: dict[str, int] = {}
        for hit in hits:
            text, found = self._hit_text(hit.text, hit.start > 0)
            if found:
                for name, n in found:
                    counts[name] = counts.get(name, 0) + n
                hit = with_text(hit, text)
            out.append(hit)
        return out, counts

    def _redact_hit_text(
        self, text: str, cut_start: bool
    ) -> tuple[str, tuple[tuple[str, int], ...]]:
        """A hit's redacted text and its ``(type, count)`` pairs, whole values then fragments."""
        text, folded, found = self._redact(text, fold(text))
        text, cut = _cut_edges(text, folded, cut_start)
        return text, (*found.items(), *cut.items())


HIT_CACHE = 4096
"""Hit texts whose redaction each :class:`Redactor` remembers."""

EDGE_DIGITS = 5
"""Digits of a run at a cut window edge from which it is taken for a fragment of an identifier."""

PARTIAL_NUMBER = "PARTIAL_NUMBER"
"""Type name of a digit run at a cut window edge (placeholder ``[NUMBER]``)."""

PARTIAL_IPV4 = "PARTIAL_IPV4"
"""Type name of a dotted digit run at a cut window edge (placeholder ``[IPV4]``)."""

PARTIAL_EMAIL = "PARTIAL_EMAIL"
"""Type name of e-mail characters around an ``@`` at a cut window edge (``[EMAIL]``)."""

_RUN = r"\d(?:[ ()-]{0,3}\d)*"  # digits grouped by spaces, dashes, parentheses
_HEAD = re.compile(rf"^[ ()+-]*{_RUN}")
_TAIL = re.compile(rf"{_RUN}[ ()+-]*$")
_DOTTED_HEAD = re.compile(r"^[\d.]*\d[\d.]*")
_DOTTED_TAIL = re.compile(r"[\d.]*\d[\d.]*$")
_EMAIL_CHARS = r"[A-Za-z0-9._%+-]"
_EMAIL_HEAD = re.compile(rf"^{_EMAIL_CHARS}*@[A-Za-z0-9.-]*")
_EMAIL_TAIL = re.compile(rf"{_EMAIL_CHARS}*@[A-Za-z0-9.-]*$")


def _digits(s: str) -> int:
    return sum(c.isdigit() for c in s)


def _number_fragment(s: str, head: bool) -> bool:
    return _digits(s) >= EDGE_DIGITS


def _ip_fragment(s: str, head: bool) -> bool:
    return _digits(s) >= 1 and (s.count(".") >= 2 or (head and s[0] == "." and len(s) > 1))


def _email_fragment(s: str, head: bool) -> bool:
    return len(s) > 1


# (type, placeholder, head pattern, tail pattern, test), applied in this order
_FRAGMENTS = (
    (PARTIAL_EMAIL, "[EMAIL]", _EMAIL_HEAD, _EMAIL_TAIL, _email_fragment),
    (PARTIAL_IPV4, "[IPV4]", _DOTTED_HEAD, _DOTTED_TAIL, _ip_fragment),
    (PARTIAL_NUMBER, "[NUMBER]", _HEAD, _TAIL, _number_fragment),
)


def _cut_edges(text: str, folded: str, cut_start: bool) -> tuple[str, dict[str, int]]:
    """Replace value fragments at the end (and, when ``cut_start``, the start) of ``text``.

    ``folded`` is ``text`` folded (:func:`fold`, same length): the patterns
    read it and the spans found are replaced in both.
    """
    counts: dict[str, int] = {}
    for name, placeholder, head_re, tail_re, test in _FRAGMENTS:
        tail = tail_re.search(folded)
        if tail is not None and test(tail.group(), False):
            text = text[: tail.start()] + placeholder
            folded = folded[: tail.start()] + placeholder
            counts[name] = counts.get(name, 0) + 1
        if cut_start:
            head = head_re.match(folded)
            if head is not None and test(head.group(), True):
                text = placeholder + text[head.end() :]
                folded = placeholder + folded[head.end() :]
                counts[name] = counts.get(name, 0) + 1
    return text, counts


_DEFAULT: Redactor | None = None


def redact_hits(
    hits: Sequence[Hit], redactor: Redactor | None = None
) -> tuple[list[Hit], dict[str, int]]:
    """Redact the text of each hit with ``redactor`` (default: all built-in types).

    Parameters
    ----------
    hits : sequence of Hit
        The hits; they are not modified.
    redactor : Redactor, optional
        The redactor to use.

    Returns
    -------
    hits : list of Hit
        Copies with redacted text where something was found.
    counts : dict of str to int
        Replacements per type over all hits.
    """
    global _DEFAULT
    if redactor is None:
        if _DEFAULT is None:
            _DEFAULT = Redactor()
        redactor = _DEFAULT
    return redactor.redact_hits(hits)
