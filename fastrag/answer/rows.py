"""Structured rows as context: SQL results cited beside the retrieved chunks.

``kb.answer(question, rows=result)`` takes the rows of a
:meth:`SqlTool.query <fastrag.SqlTool.query>` (a :class:`~fastrag.SqlResult`,
several, or :class:`~fastrag.Hit` objects made by
:meth:`SqlResult.hits() <fastrag.SqlResult.hits>`) and puts them in the
context before the retrieved chunks. Each row is one entry with its own
citation marker: its text is the row as ``column: value | column: value``,
its ``doc_id`` and ``source`` are ``sql:<table>#<primary key>``, and its
metadata keeps the structured row (``row``), the database, table, key and
the query. From there a row is context like any chunk: packed within the
budget, PII-redacted before a model reads it, cited as ``[n]``, listed in
``Answer.hits`` and ``Answer.citations`` and covered by the audit digest.

A row the query selected is an exact match: its ``relevance`` is 1.0.
The same row given twice is one entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError
from ..types import Hit

__all__ = ["row_hits", "rows_per_question", "with_rows"]


def row_hits(rows: Any) -> list[Hit]:
    """The context entries of ``rows``: a result with ``hits()``, a Hit, or a sequence of them."""
    items = [rows] if not isinstance(rows, (list, tuple)) else list(rows)
    out: list[Hit] = []
    for item in items:
        method = getattr(item, "hits", None)
        if isinstance(item, Hit):
            out.append(item)
        elif callable(method):
            out.extend(method())
        else:
            raise ConfigError(
                "rows must be SqlTool query results (fastrag.SqlResult) or the Hits of "
                f"SqlResult.hits(), got {type(item).__name__}"
            )
    seen: set[tuple[int, str]] = set()
    unique = []
    for hit in out:
        if (hit.chunk_id, hit.doc_id) not in seen:
            seen.add((hit.chunk_id, hit.doc_id))
            unique.append(hit)
    return unique


def with_rows(hits: Sequence[Hit], rows: Any) -> list[Hit]:
    """The rows' entries first (see :func:`row_hits`), then the retrieved hits."""
    if rows is None:
        return list(hits)
    return [*row_hits(rows), *hits]


def rows_per_question(rows: Any, n: int) -> list[list[Hit]] | None:
    """The context entries of ``answer_batch(questions, rows=...)``, one list per question.

    A list or tuple has one entry per question (``None``, a result, a Hit
    list or several results, as :func:`row_hits` takes); anything else (one
    :class:`~fastrag.SqlResult`) is given to every question.
    """
    if rows is None:
        return None
    if not isinstance(rows, (list, tuple)):
        return [row_hits(rows)] * n
    if len(rows) != n:
        raise ConfigError(
            f"rows has {len(rows)} entries for {n} questions: give one entry per question "
            "(None for a question without rows), or one SqlResult for all of them"
        )
    return [row_hits(r) if r is not None else [] for r in rows]
