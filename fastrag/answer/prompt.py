"""The grounded prompt: what a chat model is told and shown.

The system prompt tells the model to answer only from the knowledge base
section (【知识库】), to say plainly when the answer is not there, never to
fabricate, to cite the passages it uses as ``[n]``, and to answer in the
question's language. The user message is::

    【知识库】
    [1] first hit's text
    ---
    [2] second hit's text

    【问题】
    the question
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..text.cjk import is_chinese
from ..types import Hit

__all__ = [
    "NOT_FOUND_EN",
    "NOT_FOUND_ZH",
    "SYSTEM_PROMPT",
    "build_messages",
    "build_user_message",
    "not_found_message",
    "parse_citations",
]

SYSTEM_PROMPT = (
    "You answer questions using only the passages in the 【知识库】 (knowledge base) section "
    "of the user's message.\n"
    "- Use only facts stated in those passages. Never add facts, numbers or names they do not "
    "contain, and never guess.\n"
    '- If the passages do not contain the answer, say so plainly (for example "The knowledge '
    'base does not contain this information." or "知识库中没有找到相关信息。") and stop.\n'
    "- Cite every passage you use with its marker, such as [1] or [2], right after the "
    "statement it supports.\n"
    "- Answer in the language of the question (Chinese for a Chinese question, English for an "
    "English one), concisely."
)
"""The grounded system prompt sent with every chat request."""

NOT_FOUND_EN = "The knowledge base does not contain an answer to this question."
NOT_FOUND_ZH = "知识库中没有找到该问题的答案。"

_MARKER = re.compile(r"\[(\d{1,4})\]")


def not_found_message(question: str) -> str:
    """The "not found" answer, in the question's language."""
    return NOT_FOUND_ZH if is_chinese(question) else NOT_FOUND_EN


def build_user_message(question: str, hits: Sequence[Hit]) -> str:
    """The user message: numbered hit texts under 【知识库】, then 【问题】 and the question.

    A hit with no text (a context block the distiller kept nothing of) is
    left out; the others keep their numbers.
    """
    passages = "\n---\n".join([f"[{i}] {h.text}" for i, h in enumerate(hits, 1) if h.text])
    return f"【知识库】\n{passages}\n\n【问题】\n{question}"


def build_messages(question: str, hits: Sequence[Hit]) -> list[dict[str, str]]:
    """Chat messages (system + user) for a question and its hits."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": build_user_message(question, hits)},
    ]


def parse_citations(text: str, n_hits: int) -> tuple[int, ...]:
    """The ``[n]`` markers of ``text`` naming one of ``n_hits`` hits, in order of first use."""
    seen: dict[int, None] = {}
    for match in _MARKER.finditer(text):
        n = int(match.group(1))
        if 1 <= n <= n_hits:
            seen.setdefault(n, None)
    return tuple(seen)
