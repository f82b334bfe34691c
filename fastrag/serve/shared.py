"""What the server's routes, the MCP tools and the CLI share (no web framework imported).

- :func:`hit_json`: the one JSON shape of a retrieved chunk, in
  ``/v1/retrieve``, ``/v1/retrieve/batch``, streamed answers' ``hits``
  events, the MCP ``search`` tool and ``fastrag query --json``;
- :func:`llm_generator`: the chat model of ``--llm`` (``fastrag ask``,
  ``batch`` and ``serve``), configured by the ``FASTRAG_*`` variables;
- :func:`distill_option`: a request's ``distill`` (``"extractive"``, or
  ``"llm"``: the ``--llm`` model, refused without one);
- :func:`request_options`: a request's retrieval and answer options,
  resolved from its fields by :func:`fastrag.options.parse_options` (the
  request schemas take their defaults from :mod:`fastrag.options`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import RequestError
from ..options import AnswerOptions, Principal, RetrievalOptions, parse_options
from ..types import Hit

__all__ = ["distill_option", "hit_json", "hits_json", "llm_generator", "request_options"]


def hit_json(hit: Hit, rank: int) -> dict[str, Any]:
    """One hit as JSON-ready data: ``rank`` (1 = best), its ``[n]`` marker and every field.

    Keys: ``rank``, ``marker``, then :meth:`~fastrag.Hit.to_dict` (``chunk_id``,
    ``doc_id``, ``ord``, ``start``, ``end``, ``text``, ``score``,
    ``metadata``, ``relevance``), then ``title`` and ``source`` from the
    metadata (``None`` when unset). Dates and times in the metadata are
    ISO-8601 strings (``isoformat()``), so every way out writes the same text.
    """
    out = {"rank": rank, "marker": f"[{rank}]", **hit.to_dict()}
    meta = out["metadata"]
    if any(isinstance(v, _dt.date) for v in meta.values()):
        out["metadata"] = {
            k: v.isoformat() if isinstance(v, _dt.date) else v for k, v in meta.items()
        }
    out["title"], out["source"] = meta.get("title"), meta.get("source")
    return out


def hits_json(hits: Iterable[Hit]) -> list[dict[str, Any]]:
    """:func:`hit_json` of each hit, ranked from 1 in the order given."""
    return [hit_json(h, i) for i, h in enumerate(hits, 1)]


def llm_generator(llm: bool) -> Any:
    """``--llm``: an :class:`~fastrag.OpenAIChatGenerator` configured by ``FASTRAG_*``, or None."""
    if not llm:
        return None
    from ..answer.chat import OpenAIChatGenerator

    return OpenAIChatGenerator()


def distill_option(value: str | None, generator: Any) -> Any:
    """``distill`` from outside: None, ``"extractive"``, or ``"llm"`` (the server's model).

    A caller names no model of its own: ``"llm"`` is the model the server
    (or ``fastrag ask``) was started with by ``--llm``, and is refused
    (400 ``not_available``) without one.
    """
    if value != "llm":
        return value
    if generator is None:
        raise RequestError(
            "field 'distill': 'llm' distils with the server's model, and this server was "
            "started without --llm; use 'extractive'",
            type="not_available",
        )
    return generator


def request_options(
    fields: Mapping[str, Any],
    *,
    principal: Principal | None,
    threads: int | None,
    answer: Mapping[str, Any] | None = None,
) -> tuple[RetrievalOptions, AnswerOptions]:
    """The options of a request: its retrieval (and answer) fields as shorthand, resolved once.

    Parameters
    ----------
    fields : mapping
        Retrieval fields the request carries (``mode``, ``where``, ``exact``, ...).
    principal : Principal, optional
        The caller's (from its API key).
    threads : int, optional
        The server's threads per engine call.
    answer : mapping, optional
        Answer fields (``budget``, ``max_age_days``, ...); None for a retrieval.
    """
    shorthand = {**fields, "principal": principal, "threads": threads, **(answer or {})}
    return parse_options(shorthand, answers=answer is not None)
