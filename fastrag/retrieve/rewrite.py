"""Query rewriting: normalise, drop stop words, expand synonyms, label the intent.

:class:`QueryRewriter` is rule-based and the default. It

1. normalises: NFKC (full-width forms to half-width, ideographic space to
   space), lower case, white space collapsed;
2. removes question and stop words for the keyword leg (English stop words,
   Chinese question phrases such as 怎么 / 多少 / 几点);
3. expands from a user-supplied synonym table: every key found in the
   normalised question adds its synonyms (``{"退款": ["退钱", "退费"]}``);
4. labels the intent from simple rules: ``procedural`` (how to, 怎么, 如何,
   流程, 申请, ...), ``analytical`` (why, compare, 为什么, 区别, ...) or
   ``factual`` (everything else).

:class:`LLMRewriter` asks a chat model for a better search query and falls
back to the rule-based rewrite on any failure.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError

__all__ = ["LLMRewriter", "QueryRewriter", "RewrittenQuery"]

_EN_STOP = frozenset(
    """a an and are as at be but by can could did do does doing for from had has have how i
    if in into is it its me my of on or our please should so tell than that the their them
    then there these they this those to us was we were what when where which who whom why
    will with would you your""".split()
)
_ZH_QUESTION = re.compile(
    "请问|多长时间|多长|多久|多少|几点|什么时候|什么|怎么样|怎么|怎样|如何|为什么|为何|是否|能否|可否|有没有|哪些|哪里|哪个|吗|呢|吧|？"
)
_PROCEDURAL = re.compile(
    r"\bhow (do|can|should|to)\b|\bsteps?\b|\bprocess\b|\bprocedure\b|\bapply\b|\brequest\b"
    r"|\bsubmit\b|怎么|如何|怎样|流程|步骤|申请|办理|手续"
)
_ANALYTICAL = re.compile(
    r"\bwhy\b|\bcompare\b|\bcomparison\b|\bdifference\b|\bdiffer\b|\bimpact\b|\banaly[sz]e\b"
    r"|\bversus\b|\bvs\.?\b|\bpros\b|\bcons\b|为什么|为何|比较|区别|差异|影响|分析|优缺点|原因"
)
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class RewrittenQuery:
    """A question as the retrieval legs see it.

    Attributes
    ----------
    original : str
        The question as asked.
    text : str
        The normalised question (used for the vector leg).
    keywords : str
        The normalised question without question and stop words, plus the
        expansions (used for the keyword leg).
    expansions : tuple of str
        Synonyms added from the table.
    intent : str
        ``factual``, ``procedural`` or ``analytical``.
    source : str
        ``rules`` or ``llm``.
    """

    original: str
    text: str
    keywords: str
    expansions: tuple[str, ...] = ()
    intent: str = "factual"
    source: str = "rules"


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().lower()


def intent_of(text: str) -> str:
    """``analytical``, ``procedural`` or ``factual``, by the rules of the module docstring."""
    lowered = _normalise(text)
    if _ANALYTICAL.search(lowered):
        return "analytical"
    if _PROCEDURAL.search(lowered):
        return "procedural"
    return "factual"


@dataclass(frozen=True)
class QueryRewriter:
    """Rule-based query rewriting (see the module docstring).

    Parameters
    ----------
    synonyms : mapping of str to list of str, optional
        Expansion table: a key found in the question adds its synonyms.
    stopwords : iterable of str, optional
        English words dropped from the keyword query (default: a built-in list).
    """

    synonyms: Mapping[str, Sequence[str]] = field(default_factory=dict)
    stopwords: frozenset[str] = _EN_STOP

    def __post_init__(self) -> None:
        table = {}
        for key, values in dict(self.synonyms).items():
            if not isinstance(key, str) or not key.strip():
                raise ConfigError(f"synonym keys must be non-empty strings, got {key!r}")
            if isinstance(values, str) or not all(isinstance(v, str) for v in values):
                raise ConfigError(f"synonyms[{key!r}] must be a list of strings")
            table[_normalise(key)] = tuple(_normalise(v) for v in values)
        object.__setattr__(self, "synonyms", table)
        object.__setattr__(self, "stopwords", frozenset(w.lower() for w in self.stopwords))

    def __call__(self, question: str) -> RewrittenQuery:
        """Rewrite one question."""
        text = _normalise(question)
        stripped = _ZH_QUESTION.sub(" ", text)
        words = [
            w for w in _WORD.findall(stripped) if w not in self.stopwords
        ]
        expansions: list[str] = []
        for key, values in self.synonyms.items():
            if key in text:
                expansions.extend(v for v in values if v not in expansions and v != key)
        keywords = " ".join(words + expansions)
        return RewrittenQuery(
            original=question,
            text=text,
            keywords=keywords or text,
            expansions=tuple(expansions),
            intent=intent_of(question),
        )


_LLM_PROMPT = (
    "Rewrite the user's question into a short search query for a keyword and vector search "
    "engine over a company knowledge base. Keep the question's language. Keep names, numbers "
    "and terms exactly; add at most three close synonyms. Answer with JSON only: "
    '{"query": "...", "intent": "factual" | "procedural" | "analytical"}'
)


@dataclass
class LLMRewriter:
    """Rewrite questions with a chat model, falling back to the rules on any failure.

    Parameters
    ----------
    chat : object
        Anything with ``chat(messages) -> (text, usage)``, such as
        :class:`~fastrag.OpenAIChatGenerator`.
    fallback : QueryRewriter, optional
        The rule-based rewriter used when the model fails or answers badly.
    """

    chat: Any
    fallback: QueryRewriter = field(default_factory=QueryRewriter)

    def __call__(self, question: str) -> RewrittenQuery:
        """Rewrite one question (never raises on a model failure)."""
        base = self.fallback(question)
        try:
            import orjson

            text, _ = self.chat(
                [{"role": "system", "content": _LLM_PROMPT}, {"role": "user", "content": question}]
            )
            start, end = text.find("{"), text.rfind("}")
            data = orjson.loads(text[start : end + 1])
            query = data["query"]
            intent = data.get("intent", base.intent)
            if not isinstance(query, str) or not query.strip():
                raise ValueError("empty query")
            if intent not in ("factual", "procedural", "analytical"):
                intent = base.intent
        except Exception:  # noqa: BLE001 - any failure means the rule-based rewrite
            return base
        normalised = _normalise(query)
        keywords = " ".join([normalised, *base.expansions])
        return RewrittenQuery(
            original=question,
            text=base.text,
            keywords=keywords,
            expansions=base.expansions,
            intent=intent,
            source="llm",
        )
