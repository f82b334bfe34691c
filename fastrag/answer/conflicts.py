"""Conflict detection: sources that state different numbers for the same thing.

:func:`detect_conflicts` looks at the top hits for quantities — a number and
a unit, such as ``十五日``, ``15 days``, ``5天``, ``200元``, ``CNY 300``,
``20%`` — and flags two hits from different documents (which includes two
versions of one document stored under different ids) that give different
values in the same unit for the same subject. The lead of the answer stage
can then tell the model, or the reader, that the sources disagree.

Numbers
    Arabic numerals (``15``, ``5,000``, ``1.5``, ``5万``) and Chinese
    numerals (``十``, ``十五``, ``二十``, ``一百零五``, ``两``, ``三千``,
    ``一万二千``); spelled-out English numbers ("two days") are not read.
    Dates, ordinals and codes are skipped: a day right after a month
    (``3月31日``), a four-digit year (``2025年``), anything after ``第``, a
    number glued to a letter (``A4``) or after a decimal point.

Units
    Normalised, so that languages and spellings meet: ``天`` / ``日`` /
    ``day(s)`` are ``day``; ``工作日`` / ``working days`` / ``business days``
    are ``working day``; ``元`` / ``块`` / ``CNY`` / ``RMB`` / ``yuan`` /
    ``¥`` are ``CNY``; hours, minutes, weeks, months (``个月``, not the
    calendar ``月``), years, nights, times (``次``), characters (``位``),
    percent. Numbers with no known unit are ignored.

Same subject
    The subject of a quantity is the set of content terms (CJK character
    bigrams and stemmed non-stop words, :func:`fastrag.text.terms.question_terms`)
    of the text before it in its clause: back to the previous ``。！？；，,;:``
    or sentence end, and at most :data:`WINDOW_CHARS` characters; words that
    surround any quantity ("must", "within", "up to", "at least", ...) are
    left out. Two
    quantities have the same subject when their subjects share at least two
    terms and at least a third of their union (Jaccard >= 1/3).

A pair of quantities is not a conflict when either hit also states the
other's value for the same subject (one document listing both 15 and 20
days, for different seniorities, does not contradict another that says 15).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import ConfigError, ModelResponseError
from ..text.terms import text_terms
from ..types import Hit
from .stages import call_chat, content_terms, register_cache

__all__ = [
    "Conflict",
    "LLMConflictCheck",
    "Quantity",
    "WINDOW_CHARS",
    "detect_conflicts",
    "find_quantities",
    "parse_chinese_numeral",
]

log = logging.getLogger(__name__)

WINDOW_CHARS = 48
"""Most characters before a number that make up its subject."""

MIN_SHARED_TERMS = 2
"""Least number of subject terms two quantities must share."""

MIN_JACCARD = 1 / 3
"""Least share of the union of two subjects' terms that they must share."""

# -- numbers ---------------------------------------------------------------------------------

_ZH_DIGITS = {
    "零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4,
    "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
}  # fmt: skip
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000}
_ZH_BIG = {"万": 10_000, "亿": 100_000_000}


def parse_chinese_numeral(text: str) -> int | None:
    """The value of a Chinese numeral, or ``None`` when it is not one.

    Parameters
    ----------
    text : str
        Characters from 零〇一二两三四五六七八九十百千万亿.

    Returns
    -------
    int or None
        ``十`` 10, ``十五`` 15, ``二十`` 20, ``一百零五`` 105, ``两`` 2,
        ``一万二千`` 12000; a run of bare digits reads positionally when
        it holds a zero (``二〇二五`` 2025) and is no number otherwise
        (``三五``, "three or five").

    Examples
    --------
    >>> parse_chinese_numeral("十五"), parse_chinese_numeral("一百零五")
    (15, 105)
    """
    if not text:
        return None
    if all(ch in _ZH_DIGITS for ch in text):
        if len(text) == 1:
            return _ZH_DIGITS[text]
        if "〇" not in text and "零" not in text:
            return None  # 三五天 is "three to five days", 统一五天 is 统一 + 五天: not a number
        value = 0
        for ch in text:
            value = value * 10 + _ZH_DIGITS[ch]
        return value
    total = 0
    section = 0
    digit: int | None = None
    for ch in text:
        if ch in _ZH_DIGITS:
            if digit not in (None, 0) and _ZH_DIGITS[ch] != 0:
                return None  # two digits in a row inside a numeral: 一二十
            digit = _ZH_DIGITS[ch]
        elif ch in _ZH_UNITS:
            section += (1 if digit is None else digit) * _ZH_UNITS[ch]
            digit = None
        elif ch in _ZH_BIG:
            section += digit or 0
            if not section and not total:
                return None  # a bare 万 is a word (万一), not a number
            total += section * _ZH_BIG[ch]
            section = 0
            digit = None
        else:
            return None
    return total + section + (digit or 0)


# -- units -----------------------------------------------------------------------------------

# surface form -> canonical unit; longest forms first in the pattern below
_UNITS = {
    "个工作日": "working day", "工作日": "working day", "working days": "working day",
    "working day": "working day", "business days": "working day", "business day": "working day",
    "天": "day", "日": "day", "days": "day", "day": "day",
    "个小时": "hour", "小时": "hour", "hours": "hour", "hour": "hour",
    "分钟": "minute", "minutes": "minute", "minute": "minute", "mins": "minute",
    "个星期": "week", "星期": "week", "周": "week", "weeks": "week", "week": "week",
    "个月": "month", "months": "month", "month": "month",
    "年": "year", "years": "year", "year": "year",
    "晚": "night", "nights": "night", "night": "night",
    "万元": "CNY", "元": "CNY", "块": "CNY", "cny": "CNY", "rmb": "CNY", "yuan": "CNY",
    "usd": "USD", "dollars": "USD", "eur": "EUR", "euros": "EUR",
    "次": "time", "times": "time",
    "位": "character", "个字符": "character", "characters": "character",
    "%": "percent", "％": "percent", "percent": "percent", "per cent": "percent",
}  # fmt: skip
_PREFIX_UNITS = {"cny": "CNY", "rmb": "CNY", "¥": "CNY", "￥": "CNY", "usd": "USD", "$": "USD",
                 "eur": "EUR", "€": "EUR"}  # fmt: skip
_UNIT_NAMES = {
    "day": ("day", "days"), "working day": ("working day", "working days"),
    "hour": ("hour", "hours"), "minute": ("minute", "minutes"), "week": ("week", "weeks"),
    "month": ("month", "months"), "year": ("year", "years"), "night": ("night", "nights"),
    "time": ("time", "times"), "character": ("character", "characters"),
}  # fmt: skip
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
_NUMERAL_CHARS = "0-9零〇一二两三四五六七八九十百千万亿"
# One character class to start: the regex engine skips to candidates in C.
_NUMBER = re.compile(f"[{_NUMERAL_CHARS}][{_NUMERAL_CHARS},.]*")
_ARABIC = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?([万亿]?)")
_SUFFIX_UNIT = re.compile(f" ?({_UNIT_ALT})", re.IGNORECASE)
_PREFIX_UNIT = re.compile(r"(?:(?<![A-Za-z])(cny|rmb|usd|eur)|([¥￥$€])) ?\Z", re.IGNORECASE)
_ASCII_LETTER = re.compile(r"[A-Za-z]")
_CLAUSE_END = re.compile(r"[。！？；，、,;:：!?\n]|\.(?=\s|$)")


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number with a unit found in a text.

    Attributes
    ----------
    value : float
        The number (``万`` applied).
    unit : str
        The canonical unit (``day``, ``CNY``, ...).
    start, end : int
        Where the quantity is in the text.
    window : str
        The text before it that makes up its subject.
    """

    value: float
    unit: str
    start: int
    end: int
    window: str


@functools.lru_cache(maxsize=4096)
def _quantities(text: str) -> tuple[Quantity, ...]:
    return tuple(find_quantities(text))


register_cache(_quantities.cache_clear)  # this stage's cache is its own; stages clears it


def find_quantities(text: str) -> list[Quantity]:
    """The quantities (number + known unit) in a text, in order.

    Parameters
    ----------
    text : str
        Any text.

    Returns
    -------
    list of Quantity
        See the module docstring for what counts and what is skipped.
    """
    out: list[Quantity] = []
    for m in _NUMBER.finditer(text):
        token = m.group().rstrip(",.")
        start = m.start()
        end = start + len(token)
        before = text[start - 1] if start else ""
        if before == "第" or before == "." or (before.isascii() and before.isalpha()):
            continue  # an ordinal, a decimal or version tail, a model number (A4)
        if token[0].isdigit():
            arabic = _ARABIC.fullmatch(token)
            if arabic is None:
                continue  # 3.14.15, 1,2,3, 5万三
            value = float(arabic.group(1).replace(",", "") + (arabic.group(2) or ""))
            if arabic.group(3):
                value *= _ZH_BIG[arabic.group(3)]
        else:
            parsed = parse_chinese_numeral(token)
            if parsed is None:
                continue
            value = float(parsed)
        unit_match = _SUFFIX_UNIT.match(text, end)
        if unit_match is not None:
            surface = unit_match.group(1)
            if surface[-1].isascii() and surface[-1].isalpha():
                after = unit_match.end()
                glued = after < len(text) and _ASCII_LETTER.match(text, after) is not None
                if not token[0].isdigit() or glued:
                    continue  # 十五 days (mixed scripts), 15 dayspring (no unit)
            elif unit_match.end() - end > len(surface) and not token[0].isdigit():
                continue  # 十五 天: Chinese numerals take no space
            unit = _UNITS[surface.lower()]
            if surface == "万元":
                value *= 10_000
            if surface == "年" and value >= 1000:
                continue  # a year: 2025年
            if surface in ("日", "天") and before == "月":
                continue  # a date: 3月31日
            end = unit_match.end()
        elif token[0].isdigit():
            prefix = _PREFIX_UNIT.search(text, max(0, start - 5), start)
            if prefix is None:
                continue
            unit = _PREFIX_UNITS[(prefix.group(1) or prefix.group(2)).lower()]
            start = prefix.start()
        else:
            continue
        out.append(Quantity(value, unit, start, end, _window(text, start)))
    return out


def _window(text: str, start: int) -> str:
    """The clause before ``start``, at most :data:`WINDOW_CHARS` characters."""
    lo = max(0, start - WINDOW_CHARS)
    last = lo
    for m in _CLAUSE_END.finditer(text, lo, start):
        last = m.end()
    return text[last:start]


# -- conflicts -------------------------------------------------------------------------------


def _fmt_value(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


_UNIT_NAMES_ZH = {
    "day": "天", "working day": "个工作日", "hour": "小时", "minute": "分钟", "week": "周",
    "month": "个月", "year": "年", "night": "晚", "time": "次", "character": "位", "CNY": "元",
    "USD": "美元", "EUR": "欧元", "percent": "%",
}  # fmt: skip


def _fmt_quantity(value: float, unit: str, chinese: bool = False) -> str:
    if chinese:
        return f"{_fmt_value(value)}{_UNIT_NAMES_ZH.get(unit, unit)}"
    if unit == "percent":
        return f"{_fmt_value(value)}%"
    names = _UNIT_NAMES.get(unit)
    if names is None:
        return f"{_fmt_value(value)} {unit}"
    return f"{_fmt_value(value)} {names[0] if value == 1 else names[1]}"


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two sources that give different values for the same thing.

    Attributes
    ----------
    subject : str
        A few of the shared subject terms, in text order (e.g. ``费用 报销 发生``).
    unit : str
        The canonical unit (``day``, ``CNY``, ``percent``, ...).
    values : tuple of float
        The values, one per hit.
    hits : tuple of Hit
        The disagreeing hits.
    markers : tuple of int
        Their markers (positions in the hits given, from 1).
    """

    subject: str
    unit: str
    values: tuple[float, ...]
    hits: tuple[Hit, ...]
    markers: tuple[int, ...]

    @property
    def description(self) -> str:
        """One line for a prompt or a reader.

        ``Sources [1] and [3] disagree: 15 days vs 10 days for 报销 提交``.
        """
        refs = " and ".join(f"[{m}]" for m in self.markers)
        values = " vs ".join(_fmt_quantity(v, self.unit) for v in self.values)
        about = f" for {self.subject}" if self.subject else ""
        return f"Sources {refs} disagree: {values}{about}"

    def describe(self, chinese: bool = False) -> str:
        """:attr:`description`, or in Chinese (``来源[1]和[3]不一致：……``).

        Parameters
        ----------
        chinese : bool, default False
            Whether to write Chinese.

        Returns
        -------
        str
        """
        if not chinese:
            return self.description
        refs = "和".join(f"[{m}]" for m in self.markers)
        values = "与".join(_fmt_quantity(v, self.unit, chinese=True) for v in self.values)
        about = f"（{self.subject}）" if self.subject else ""
        return f"来源{refs}不一致{about}：{values}"


# Words around any quantity ("must ... within", "up to", "at least"): no subject in them.
_QUANTITY_WORDS = frozenset(
    "must may might shall need within up least most than more less per every each over under "
    "only maximum minimum max min total about approximately around".split()
)


class _Mention:
    __slots__ = ("hit", "q", "_terms")

    def __init__(self, hit: int, q: Quantity) -> None:
        self.hit = hit
        self.q = q
        self._terms: frozenset[str] | None = None

    @property
    def terms(self) -> frozenset[str]:
        if self._terms is None:
            self._terms = content_terms(self.q.window) - _QUANTITY_WORDS
        return self._terms


def _same_subject(a: _Mention, b: _Mention) -> bool:
    ta, tb = a.terms, b.terms
    shared = len(ta & tb)
    return shared >= MIN_SHARED_TERMS and shared >= MIN_JACCARD * len(ta | tb)


def _label(window: str, shared: frozenset[str], limit: int = 3) -> str:
    """Up to ``limit`` shared terms, in text order, as the reader saw them."""
    out: list[str] = []
    for word in re.findall(r"[^\W_]+", window):
        if len(out) == limit:
            break
        if word.isascii():
            if text_terms(word)[0] & shared and word.lower() not in out:
                out.append(word.lower())
            continue
        i = 0
        while i < len(word) - 1 and len(out) < limit:
            pair = word[i : i + 2]
            if pair in shared:
                if pair not in out:
                    out.append(pair)
                i += 2
            else:
                i += 1
    return " ".join(out)


def detect_conflicts(hits: Sequence[Hit], *, top: int | None = 5) -> list[Conflict]:
    """Flag hits from different documents that give different values for the same subject.

    Parameters
    ----------
    hits : sequence of Hit
        The sources, best first, in marker order (``hits[0]`` is ``[1]``).
    top : int or None, default 5
        Only the first ``top`` hits are compared (``None``: all).

    Returns
    -------
    list of Conflict
        One per disagreeing pair of hits, unit and pair of values, in order
        of the first hit's marker, then the second's. Empty when nothing
        disagrees.

    Raises
    ------
    ConfigError
        When ``top`` is not a positive int or None.

    Notes
    -----
    See the module docstring for the numbers, units and same-subject rule.
    Two hits of the same document are never compared.

    Examples
    --------
    >>> a = Hit(1, "old", 0, 0, 17, "费用报销须在费用发生后十五日内提交", 1.0)
    >>> b = Hit(2, "new", 0, 0, 16, "费用报销须在费用发生后十日内提交", 0.9)
    >>> detect_conflicts([a, b])[0].description
    'Sources [1] and [2] disagree: 15 days vs 10 days for 费用 报销 发生'
    >>> detect_conflicts([a, b])[0].describe(chinese=True)
    '来源[1]和[2]不一致（费用 报销 发生）：15天与10天'
    """
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise ConfigError(f"top must be a positive int or None, got {top!r}")
    chosen = list(hits if top is None else hits[:top])
    if len({h.doc_id for h in chosen}) < 2:
        return []
    # Nothing to compare unless two documents state a number (most contexts): no quantities read.
    if len({h.doc_id for h in chosen if _states_number(h.text)}) < 2:
        return []
    found = _conflicts(tuple([(h.doc_id, h.text) for h in chosen]))
    return [
        Conflict(subject, unit, values, (chosen[a], chosen[b]), (a + 1, b + 1))
        for a, b, subject, unit, values in found
    ]


@functools.lru_cache(maxsize=8192)
def _states_number(text: str) -> bool:
    """Whether a text holds a numeral (a chunk's text recurs across questions: remembered)."""
    return _NUMBER.search(text) is not None


register_cache(_states_number.cache_clear)


@functools.lru_cache(maxsize=4096)
def _conflicts(
    sources: tuple[tuple[str, str], ...],
) -> tuple[tuple[int, int, str, str, tuple[float, float]], ...]:
    """``(hit, hit, subject, unit, values)`` of the conflicts among ``(doc_id, text)`` sources.

    What :func:`detect_conflicts` finds depends on the hits' documents and
    texts only; the same context recurs across questions, so it is remembered.
    """
    by_unit: dict[str, list[_Mention]] = {}
    for i, (_, text) in enumerate(sources):
        for q in _quantities(text):
            by_unit.setdefault(q.unit, []).append(_Mention(i, q))
    found: dict[
        tuple[int, int, str, float, float], tuple[int, int, str, str, tuple[float, float]]
    ] = {}
    for unit, mentions in by_unit.items():
        if len({m.q.value for m in mentions}) < 2:
            continue
        if len({sources[m.hit][0] for m in mentions}) < 2:
            continue
        stating: dict[tuple[int, float], list[_Mention]] = {}  # (hit, value) -> its mentions
        for m in mentions:
            stating.setdefault((m.hit, m.q.value), []).append(m)
        for x, a in enumerate(mentions):
            for b in mentions[x + 1 :]:
                if (
                    b.hit == a.hit
                    or a.q.value == b.q.value
                    or sources[a.hit][0] == sources[b.hit][0]
                ):
                    continue
                key = (a.hit, b.hit, unit, a.q.value, b.q.value)
                if key in found or not _same_subject(a, b):
                    continue
                # either side also stating the other's value for this subject is no conflict
                if any(_same_subject(m, b) for m in stating.get((a.hit, b.q.value), ())) or any(
                    _same_subject(m, a) for m in stating.get((b.hit, a.q.value), ())
                ):
                    continue
                shared = a.terms & b.terms
                found[key] = (
                    a.hit,
                    b.hit,
                    _label(a.q.window, shared),
                    unit,
                    (a.q.value, b.q.value),
                )
    return tuple(found[k] for k in sorted(found, key=lambda k: (k[0], k[1])))


register_cache(_conflicts.cache_clear)


_CONFLICT_PROMPT = (
    "You compare numbered source passages and find contradictions: passages that give "
    "different numbers for the same thing (deadlines, amounts, limits). Answer with JSON only: "
    '{"conflicts": [{"sources": [<marker>, <marker>], "subject": "...", "unit": "...", '
    '"values": [<number>, <number>]}]} — an empty list when they agree.'
)


@dataclass
class LLMConflictCheck:
    """Find conflicts with a chat model, falling back to :func:`detect_conflicts` on any failure.

    Parameters
    ----------
    chat : object
        A chat client such as :class:`~fastrag.OpenAIChatGenerator` (anything
        with ``chat(messages) -> (text, usage)``), or that method itself.
    top : int, default 5
        Hits sent to the model.
    timeout : float, optional
        Seconds to wait for the model (see
        :func:`fastrag.answer.stages.call_with_timeout`).
    max_chars : int, default 1000
        Characters of each hit sent.

    Notes
    -----
    The model answers ``{"conflicts": [{"sources": [1, 3], "subject": ...,
    "unit": ..., "values": [15, 10]}]}``; markers must name hits sent, of
    different documents, with one numeric value each. Any failure (an
    exception, a timeout, no JSON, a bad field) returns the rule-based
    :func:`detect_conflicts` instead.
    """

    chat: Any
    top: int = 5
    timeout: float | None = None
    max_chars: int = 1000

    def __call__(self, hits: Sequence[Hit]) -> list[Conflict]:
        """The conflicts among the top hits (see the class docstring)."""
        chosen = list(hits[: self.top])
        if len({h.doc_id for h in chosen}) < 2:
            return []
        try:
            return self._check(chosen)
        except Exception as exc:  # noqa: BLE001 - any failure means the rules
            log.warning(
                "LLM conflict check failed (%s: %s); using the rules", type(exc).__name__, exc
            )
            return detect_conflicts(chosen, top=None)

    def _check(self, chosen: list[Hit]) -> list[Conflict]:
        passages = "\n---\n".join(
            f"[{i}] {h.text[: self.max_chars]}" for i, h in enumerate(chosen, 1)
        )
        messages = [
            {"role": "system", "content": _CONFLICT_PROMPT},
            {"role": "user", "content": passages},
        ]
        text = call_chat(self.chat, messages, self.timeout)
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            raise ModelResponseError("no JSON object in the reply")
        try:
            items = orjson.loads(text[start : end + 1])["conflicts"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ModelResponseError(f"the conflict check's reply is malformed: {exc!r}") from exc
        if not isinstance(items, list):
            raise ModelResponseError("conflicts is not a list")
        out: list[Conflict] = []
        for item in items:
            if not isinstance(item, dict) or "sources" not in item or "values" not in item:
                raise ModelResponseError(f"a conflict lacks 'sources' or 'values': {item!r}")
            markers = item["sources"]
            values = item["values"]
            if (
                not isinstance(markers, list)
                or len(markers) < 2
                or not all(isinstance(m, int) and not isinstance(m, bool) for m in markers)
                or not all(1 <= m <= len(chosen) for m in markers)
                or len(set(markers)) != len(markers)
            ):
                raise ModelResponseError(f"bad sources {markers!r}")
            if (
                not isinstance(values, list)
                or len(values) != len(markers)
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            ):
                raise ModelResponseError(f"bad values {values!r}")
            if len({chosen[m - 1].doc_id for m in markers}) < 2:
                continue  # one document does not contradict itself here
            subject, unit = item.get("subject", ""), item.get("unit", "")
            if not isinstance(subject, str) or not isinstance(unit, str):
                raise ModelResponseError("subject and unit must be strings")
            out.append(
                Conflict(
                    subject=subject,
                    unit=unit,
                    values=tuple(float(v) for v in values),
                    hits=tuple(chosen[m - 1] for m in markers),
                    markers=tuple(markers),
                )
            )
        return out
