"""The chat-model generator: a :class:`~fastrag.models.ChatClient` that answers from hits.

:class:`OpenAIChatGenerator` sends the grounded prompt of
:mod:`fastrag.answer.prompt` and decides with :func:`is_not_found` whether
the model said the knowledge base does not hold the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import ConfigError
from ..models.client import ChatClient
from ..types import Generation, Hit
from .prompt import (
    NOT_FOUND_EN,
    NOT_FOUND_ZH,
    build_messages,
    build_user_message,
    not_found_message,
    parse_citations,
)

__all__ = ["OpenAIChatGenerator", "is_not_found"]


_CANONICAL_NOT_FOUND = (
    NOT_FOUND_EN,
    NOT_FOUND_ZH,
    "The knowledge base does not contain this information.",  # SYSTEM_PROMPT's examples
    "知识库中没有找到相关信息。",
)
_MARKER = re.compile(r"\[\d{1,4}\]")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
_EN_SOURCE = (
    r"(?:knowledge base|passages?|context|documents?|sources?|excerpts?|"
    r"(?:provided|given|available|supplied) (?:information|text|documents?|passages?|sources?"
    r"|context|material|excerpts?))"
)
_NOT_FOUND_EN_PATTERNS = [
    rf"\b{_EN_SOURCE}\b[^.!?]*?\b(?:does not|doesn't|do not|don't|did not|didn't|cannot|can't)"
    r"\s+(?:contain|include|mention|provide|say|specify|state|cover|address|answer|discuss"
    r"|give|have)\b",
    r"\b(?:no|not any)\s+(?:relevant |such |specific |further )?(?:information|answer|mention"
    r"|details?|data)\b[^.!?]*\b(?:knowledge base|passages?|context|provided|available|found)\b",
    r"\bthere (?:is|was) no (?:relevant |such |specific )?(?:information|answer|mention|data"
    r"|details?)\s+(?:about|on|regarding|of|in|for|available|provided)\b",
    rf"\bnot\s+(?:found|mentioned|covered|stated|provided|specified|addressed|available|given)"
    rf"\s+(?:in|within|by)\s+(?:the\s+|any\s+of\s+the\s+)?{_EN_SOURCE}",
    r"\b(?:i|we)\s+(?:cannot|can't|could not|couldn't|am unable to|are unable to|was unable to"
    r"|were unable to|am not able to)\s+(?:find|locate|answer|determine|tell)\b",
    r"\b(?:unable|not able) to (?:find|locate|answer|determine)\b",
    r"\b(?:this|the) question cannot be answered\b",
    r"^(?:i|we) (?:do not|don't) know\b",
]
_ZH_SOURCE = r"(?:知识库|资料|文档|文本|上下文|段落|材料|参考信息|所给信息|给出的信息|提供的信息)"
_NOT_FOUND_ZH_PATTERNS = [
    rf"{_ZH_SOURCE}[^。！？!?]*?(?:没有|并没有|并未|未|不|无)(?:包含|包括|提及|提到|涉及|找到|给出|说明|记载|相关)",
    r"(?:没有|未能|未|无法|不能)找到[^。！？!?]{0,12}?(?:信息|答案|内容|资料|说明|记录)",
    r"找不到[^。！？!?]{0,12}?(?:信息|答案|内容|资料)",
    r"无法(?:回答|确定|得知|判断|给出答案)",
    r"(?:没有|无|缺少|缺乏)(?:相关|有关|足够)的?(?:信息|资料|内容|答案|记载|说明)",
    r"^我?不(?:知道|清楚)",
]
_NOT_FOUND_RE = re.compile(
    "|".join(f"(?:{p})" for p in _NOT_FOUND_EN_PATTERNS + _NOT_FOUND_ZH_PATTERNS),
    re.IGNORECASE | re.MULTILINE,
)


def _canonical(text: str) -> str:
    text = _MARKER.sub("", text).lower()
    return re.sub(r"[\s.。!！]+", "", text)


_CANONICAL_SET = frozenset(_canonical(t) for t in _CANONICAL_NOT_FOUND)


def is_not_found(text: str) -> bool:
    """Whether an answer says the knowledge base does not hold the answer.

    Deliberately conservative, so that a real answer is never discarded:

    1. the text equals (ignoring case, white space, final punctuation and
       ``[n]`` markers) :data:`~fastrag.answer.prompt.NOT_FOUND_EN`,
       :data:`~fastrag.answer.prompt.NOT_FOUND_ZH` or the phrasings the system
       prompt suggests; or
    2. the text cites no passage (no ``[n]`` marker) *and* its first two
       sentences hold a not-found statement about the knowledge base, e.g.
       "the passages do not mention ...", "no information ... in the
       context", "I cannot find/answer ...", "知识库中没有提及……",
       "没有找到相关信息", "无法回答". Negations that are not about the
       sources ("leave does not include holidays", "年假不包括病假") do not
       count.

    An empty answer counts as not found.

    Parameters
    ----------
    text : str
        The model's answer.

    Returns
    -------
    bool
    """
    stripped = text.strip()
    if not stripped:
        return True
    if _canonical(stripped) in _CANONICAL_SET:
        return True
    if _MARKER.search(stripped):
        return False
    head = "".join(s for s in _SENTENCE_END.split(stripped, maxsplit=2)[:2])
    return _NOT_FOUND_RE.search(head) is not None


class OpenAIChatGenerator(ChatClient):
    """A generator that asks an OpenAI-compatible chat model, grounded in the hits.

    ``gen(question, hits)`` sends the system prompt
    (:data:`~fastrag.answer.prompt.SYSTEM_PROMPT`) and the user message of
    :func:`~fastrag.answer.prompt.build_messages` (【知识库】 with the hits
    numbered ``[1]``, ``[2]``, ..., then 【问题】 and the question) to
    ``POST {base_url}/chat/completions`` and returns a
    :class:`~fastrag.Generation`. With no hits the model is not called and
    the answer is "not found" in the question's language. Constructor
    arguments are those of :class:`~fastrag.models.ChatClient`.

    Notes
    -----
    ``Generation.prompt`` is the user message (the system prompt is always
    :data:`~fastrag.answer.prompt.SYSTEM_PROMPT`); ``Generation.model`` is the
    model the server says answered; ``Generation.usage`` its ``usage`` object.
    ``found`` is decided by :func:`is_not_found`. An empty answer is replaced
    by the not-found message.
    """

    # -- generator ----------------------------------------------------------------
    @staticmethod
    def _check(question: str, hits: Sequence[Hit]) -> list[Hit]:
        if not isinstance(question, str):
            raise ConfigError(f"question must be a string, got {type(question).__name__}")
        hits = list(hits)
        for i, h in enumerate(hits):
            if not isinstance(getattr(h, "text", None), str):
                raise ConfigError(f"hits[{i}] has no text (expected fastrag.Hit objects)")
        return hits

    @staticmethod
    def _no_hits(question: str) -> Generation:
        return Generation(
            text=not_found_message(question),
            found=False,
            citations=(),
            prompt=build_user_message(question, []),
            model=None,
            usage={},
        )

    @staticmethod
    def _generation(
        question: str,
        hits: Sequence[Hit],
        prompt: str,
        text: str,
        usage: dict[str, Any],
        model: str,
    ) -> Generation:
        text = text.strip()
        found = not is_not_found(text)
        if not text:
            text = not_found_message(question)
        return Generation(
            text=text,
            found=found,
            citations=parse_citations(text, len(hits)),
            prompt=prompt,
            model=model,
            usage=usage,
        )

    def generate(self, question: str, hits: Sequence[Hit]) -> Generation:
        """Answer ``question`` from ``hits`` with the chat model.

        Parameters
        ----------
        question : str
            The question.
        hits : sequence of Hit
            Retrieved chunks, most relevant first; shown as ``[1]``, ``[2]``, ...

        Returns
        -------
        Generation
            Text, found flag, citations (within ``1..len(hits)``), the user
            message as ``prompt``, model and usage.

        Raises
        ------
        AuthenticationError, ModelError, ModelResponseError, RetryExhaustedError
            See the module documentation.
        """
        hits = self._check(question, hits)
        if not hits:
            return self._no_hits(question)
        messages = build_messages(question, hits)
        payload = self._post_json("chat/completions", self._chat_body(messages, {}))
        text, usage, model = self._parse_chat(payload)
        return self._generation(question, hits, messages[1]["content"], text, usage, model)

    __call__ = generate

    async def agenerate(self, question: str, hits: Sequence[Hit]) -> Generation:
        """Async twin of :meth:`generate` (uses this instance's ``httpx.AsyncClient``).

        Parameters
        ----------
        question : str
            The question.
        hits : sequence of Hit
            Retrieved chunks, most relevant first.

        Returns
        -------
        Generation
        """
        hits = self._check(question, hits)
        if not hits:
            return self._no_hits(question)
        messages = build_messages(question, hits)
        payload = await self._apost_json("chat/completions", self._chat_body(messages, {}))
        text, usage, model = self._parse_chat(payload)
        return self._generation(question, hits, messages[1]["content"], text, usage, model)

    def stream(self, question: str, hits: Sequence[Hit]) -> Iterator[str | Generation]:
        """Answer like :meth:`generate`, yielding the text as the model writes it.

        Yields
        ------
        str or Generation
            Pieces of the answer text, then one final :class:`~fastrag.Generation`
            (found flag, citations, model, usage) for the whole text.
            Closing the iterator early closes the connection to the model
            server, which cancels the call.
        """
        hits = self._check(question, hits)
        if not hits:
            generation = self._no_hits(question)
            yield generation.text
            yield generation
            return
        messages = build_messages(question, hits)
        info: dict[str, Any] = {}
        parts: list[str] = []
        for piece in self.chat_stream(messages, info=info):
            parts.append(piece)
            yield piece
        yield self._generation(
            question, hits, messages[1]["content"], "".join(parts), info["usage"], info["model"]
        )
