"""Reranking: reorder retrieved hits, never add to them.

A reranker is any callable ``reranker(question, hits) -> hits``. The pipeline
calls it through :func:`apply_reranker`, which keeps only hits the reranker
was given (so a reranker can never bring in a chunk the caller's filters or
access rights excluded), appends any it dropped in their retrieval order,
and keeps the retrieval order outright when the reranker raises or returns
something that is not a list of hits.

:class:`LLMReranker` asks a chat model to score at most 20 candidates and
reorders them by the scores it returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import ModelResponseError
from ..types import Hit
from .rewrite import chat_callable

__all__ = ["LLMReranker", "Reranker", "apply_reranker"]

log = logging.getLogger(__name__)

Reranker = Callable[[str, Sequence[Hit]], Sequence[Hit]]

_PROMPT = (
    "You rank passages by how well they answer a question. Score every passage from 0 "
    "(irrelevant) to 1 (answers it). Answer with JSON only: "
    '{"rankings": [{"chunk_id": <id>, "relevance_score": <0..1>}, ...]}'
)


def apply_reranker(
    reranker: Reranker | None, question: str, hits: list[Hit], failures: list[str] | None = None
) -> list[Hit]:
    """Run a reranker safely (see the module docstring).

    A failure is logged as a warning and, when ``failures`` is given,
    appended to it (``"TypeError: ..."``): the caller reports it.
    """
    if reranker is None or len(hits) < 2:
        return hits
    try:
        out = list(reranker(question, hits))
    except Exception as exc:  # noqa: BLE001 - a failing reranker keeps the retrieval order
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("reranker failed (%s); keeping the retrieval order", reason)
        if failures is not None:
            failures.append(reason)
        return hits
    given = {h.chunk_id: h for h in hits}
    ordered: list[Hit] = []
    seen: set[int] = set()
    for h in out:
        if isinstance(h, Hit) and h.chunk_id in given and h.chunk_id not in seen:
            ordered.append(given[h.chunk_id])
            seen.add(h.chunk_id)
    ordered.extend(h for h in hits if h.chunk_id not in seen)
    return ordered


@dataclass
class LLMReranker:
    """Rerank with a chat model (JSON relevance scores), keeping the order on any failure.

    Parameters
    ----------
    chat : object
        A chat client such as :class:`~fastrag.OpenAIChatGenerator` (its
        ``chat`` method is used), or any ``chat(messages) -> (text, usage)``.
    max_candidates : int, default 20
        Hits sent to the model; the rest keep their place after them.
    max_chars : int, default 1000
        Characters of each hit's text sent.
    """

    chat: Any
    max_candidates: int = 20
    max_chars: int = 1000

    def __post_init__(self) -> None:
        chat_callable(self.chat)  # fail now on an object that cannot chat

    def __call__(self, question: str, hits: Sequence[Hit]) -> list[Hit]:
        """Return the candidates ordered by the model's scores, then the rest."""
        candidates = list(hits[: self.max_candidates])
        rest = list(hits[self.max_candidates :])
        passages = "\n\n".join(
            f"chunk_id: {h.chunk_id}\n{h.text[: self.max_chars]}" for h in candidates
        )
        text, _ = chat_callable(self.chat)(
            [
                {"role": "system", "content": _PROMPT},
                {"role": "user", "content": f"Question: {question}\n\nPassages:\n\n{passages}"},
            ]
        )
        scores = _parse_scores(text)
        position = {h.chunk_id: i for i, h in enumerate(candidates)}
        ranked = sorted(
            candidates, key=lambda h: (-scores.get(h.chunk_id, -1.0), position[h.chunk_id])
        )
        return ranked + rest


def _parse_scores(text: Any) -> dict[int, float]:
    """Chunk id -> score of a reranker reply, or :class:`ModelResponseError` naming the problem."""
    if not isinstance(text, str):
        raise ModelResponseError(f"the reranker's reply is {type(text).__name__}, not text")
    start, end = text.find("{"), text.rfind("}")
    try:
        data = orjson.loads(text[start : end + 1]) if start >= 0 < end else None
        rankings = data["rankings"] if isinstance(data, dict) else None
        if not isinstance(rankings, list):
            raise ModelResponseError("the reranker's reply has no 'rankings' list")
        scores: dict[int, float] = {}
        for item in rankings:
            score = float(item["relevance_score"])
            if not 0.0 <= score <= 1.0:
                raise ModelResponseError(f"relevance_score {score} outside [0, 1]")
            scores[int(item["chunk_id"])] = score
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ModelResponseError(
            f"the reranker's reply is malformed: {type(exc).__name__}: {exc}"
        ) from exc
    return scores
