"""Query rewriting: keywords for the keyword legs, the question as asked for the vector leg.

:class:`QueryRewriter` is rule-based and the default. It

1. normalises: NFKC (full-width forms to half-width, ideographic space to
   space), lower case, white space collapsed;
2. removes question and stop words for the keyword legs (the one stop-word
   list of :mod:`fastrag.text.stopwords`, Chinese question phrases such as
   怎么 / 多少 / 几点);
3. expands from a user-supplied synonym table: every key found in the
   normalised question adds its synonyms (``{"退款": ["退钱", "退费"]}``);
4. labels the intent from simple rules: ``procedural`` (how to, 怎么, 如何,
   流程, 申请, ...), ``analytical`` (why, compare, 为什么, 区别, ...) or
   ``factual`` (everything else).

The rule-based rewrite feeds the keyword legs only: case folding, stop-word
removal and synonyms change what an embedding model sees, so the vector leg
embeds the question as asked (:attr:`RewrittenQuery.text`). An
:class:`LLMRewriter` asks a chat model for a better search query, which
both legs use; on any failure it falls back to the rules, logs a warning
and says so in :attr:`RewrittenQuery.fallback`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..errors import ConfigError, ModelResponseError
from ..text.stopwords import CHINESE_QUESTION_PHRASES, ENGLISH_STOPWORDS

__all__ = ["LLMRewriter", "QueryRewriter", "RewrittenQuery", "chat_callable"]

log = logging.getLogger(__name__)

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
        What the vector leg embeds: the question as asked, or an LLM
        rewriter's query.
    keywords : str
        What the keyword legs search: the normalised question without
        question and stop words, plus the expansions (or the LLM's query).
    expansions : tuple of str
        Synonyms added from the table.
    intent : str
        ``factual``, ``procedural`` or ``analytical``.
    source : str
        ``rules`` or ``llm``.
    fallback : str or None
        Why a model rewriter fell back to the rules (``None`` when it did not).
    ontology : tuple of str
        Terms the knowledge base's ontology added to the keywords (canonical
        names, related entities' terms; also in ``expansions``).
    route : str or None
        The question's routing class (``code``, ``numeric``, ``natural``,
        ``mixed``; :mod:`fastrag.text.route`) when routing is on.
    """

    original: str
    text: str
    keywords: str
    expansions: tuple[str, ...] = ()
    intent: str = "factual"
    source: str = "rules"
    fallback: str | None = None
    ontology: tuple[str, ...] = ()
    route: str | None = None

    def with_ontology(self, terms: tuple[str, ...]) -> RewrittenQuery:
        """The query with ``terms`` added to the keyword legs' query (the vector text kept)."""
        if not terms:
            return self
        return dataclasses.replace(
            self, keywords=" ".join([self.keywords, *terms]).strip(),
            expansions=self.expansions + tuple(t for t in terms if t not in self.expansions),
            ontology=terms,
        )  # fmt: skip


def _normalise(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().lower()


def intent_of(text: str) -> str:
    """``analytical``, ``procedural`` or ``factual``, by the rules of the module docstring."""
    return _intent(_normalise(text))


# Text that every match of the rules above contains (each alternative holds one of
# them): a question holding none is factual without running the regular expressions,
# which cost most of a rule-based rewrite. The CJK ones only in a non-ASCII question.
_ANALYTICAL_ASCII = (
    "why", "compar", "differ", "impact", "analy", "versus", "vs", "pros", "cons",
)  # fmt: skip
_ANALYTICAL_CJK = ("为什么", "为何", "比较", "区别", "差异", "影响", "分析", "优缺点", "原因")
_PROCEDURAL_ASCII = ("how ", "step", "proce", "apply", "request", "submit")
_PROCEDURAL_CJK = ("怎么", "如何", "怎样", "流程", "步骤", "申请", "办理", "手续")


def _may_hold(text: str, ascii_words: tuple[str, ...], cjk_words: tuple[str, ...]) -> bool:
    """Whether ``text`` holds one of the words (else no rule of theirs can match)."""
    for word in ascii_words:
        if word in text:
            return True
    if text.isascii():
        return False
    for word in cjk_words:
        if word in text:
            return True
    return False


def _intent(lowered: str) -> str:
    """:func:`intent_of` of a text :func:`_normalise` gave already."""
    if _may_hold(lowered, _ANALYTICAL_ASCII, _ANALYTICAL_CJK) and _ANALYTICAL.search(lowered):
        return "analytical"
    if _may_hold(lowered, _PROCEDURAL_ASCII, _PROCEDURAL_CJK) and _PROCEDURAL.search(lowered):
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
        Words dropped from the keyword query (default: the one list,
        :data:`fastrag.text.stopwords.ENGLISH_STOPWORDS`).
    """

    synonyms: Mapping[str, Sequence[str]] = field(default_factory=dict)
    stopwords: frozenset[str] = ENGLISH_STOPWORDS

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

    def __call__(self, question: str, history: Sequence[tuple[str, str]] = ()) -> RewrittenQuery:
        """Rewrite one question (rules see only the question: ``history`` is ignored)."""
        text = _normalise(question)
        stripped = CHINESE_QUESTION_PHRASES.sub(" ", text)
        words = [w for w in _WORD.findall(stripped) if w not in self.stopwords]
        expansions: list[str] = []
        for key, values in self.synonyms.items():
            if key in text:
                expansions.extend(v for v in values if v not in expansions and v != key)
        keywords = " ".join(words + expansions)
        return RewrittenQuery(
            original=question,
            text=question,
            keywords=keywords or text,
            expansions=tuple(expansions),
            intent=_intent(text),  # the question normalised above
        )


def chat_callable(chat: Any) -> Any:
    """``chat(messages, **kw) -> (text, usage)`` of a chat client, or the callable itself.

    Rewriters, rerankers, judges and conflict checks take either a client
    with a ``chat`` method (such as :class:`~fastrag.OpenAIChatGenerator`,
    whose own ``__call__`` answers questions from hits) or that method.
    """
    method = getattr(chat, "chat", None)
    if callable(method):
        return method
    if callable(chat):
        return chat
    raise ConfigError(
        f"a chat model must have chat(messages) or be callable, got {type(chat).__name__}"
    )


_LLM_PROMPT = (
    "Rewrite the user's question into a short search query for a keyword and vector search "
    "engine over a company knowledge base. Keep the question's language. Keep names, numbers "
    "and terms exactly; add at most three close synonyms. Earlier turns of the conversation, "
    "when given, come before the question: use them only to resolve what the question refers "
    "to, and search for what the last question asks. Answer with JSON only: "
    '{"query": "...", "intent": "factual" | "procedural" | "analytical"}'
)


@dataclass
class LLMRewriter:
    """Rewrite questions with a chat model, falling back to the rules on any failure.

    Parameters
    ----------
    chat : object
        A chat client such as :class:`~fastrag.OpenAIChatGenerator` (its
        ``chat`` method is used), or any ``chat(messages) -> (text, usage)``.
    fallback : QueryRewriter, optional
        The rule-based rewriter used when the model fails or answers badly;
        the fallback is logged and recorded in :attr:`RewrittenQuery.fallback`.
    follow_ups_only : bool, default False
        Ask the model only about questions that come with a conversation
        (``history``); a question asked alone gets the rule-based rewrite,
        without a model call.
    """

    chat: Any
    fallback: QueryRewriter = field(default_factory=QueryRewriter)
    follow_ups_only: bool = False

    def __post_init__(self) -> None:
        chat_callable(self.chat)  # fail now on an object that cannot chat

    def __call__(self, question: str, history: Sequence[tuple[str, str]] = ()) -> RewrittenQuery:
        """Rewrite one question, reading ``history`` (earlier ``(role, content)`` turns).

        Never raises on a model failure: the rule-based rewrite of the
        question alone is returned, with the reason in ``fallback``.
        """
        base = self.fallback(question)
        if self.follow_ups_only and not history:
            return base
        turns = [{"role": role, "content": content} for role, content in history]
        try:
            text, _ = chat_callable(self.chat)(
                [{"role": "system", "content": _LLM_PROMPT}, *turns,
                 {"role": "user", "content": question}]
            )  # fmt: skip
            query, intent = _parse_rewrite(text, base.intent)
        except Exception as exc:  # noqa: BLE001 - any failure means the rule-based rewrite
            reason = f"{type(exc).__name__}: {exc}"
            log.warning("LLM rewriter failed (%s); using the rule-based rewrite", reason)
            return RewrittenQuery(
                original=base.original, text=base.text, keywords=base.keywords,
                expansions=base.expansions, intent=base.intent, fallback=reason,
            )  # fmt: skip
        keywords = " ".join([_normalise(query), *base.expansions])
        return RewrittenQuery(
            original=question,
            text=query,
            keywords=keywords,
            expansions=base.expansions,
            intent=intent,
            source="llm",
        )


def _parse_rewrite(text: Any, default_intent: str) -> tuple[str, str]:
    """The query and intent of a rewriter reply, or :class:`ModelResponseError`."""
    if not isinstance(text, str):
        raise ModelResponseError(f"the rewriter's reply is {type(text).__name__}, not text")
    start, end = text.find("{"), text.rfind("}")
    try:
        data = orjson.loads(text[start : end + 1]) if start >= 0 < end else None
    except orjson.JSONDecodeError as exc:
        raise ModelResponseError(f"the rewriter's reply is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelResponseError("the rewriter's reply holds no JSON object")
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ModelResponseError("the rewriter's reply has no non-empty 'query'")
    intent = data.get("intent", default_intent)
    if intent not in ("factual", "procedural", "analytical"):
        intent = default_intent
    return query, intent
