"""What the two Qdrant adapters share: the points' payload and the filter translation.

``qdrant-client`` (:mod:`.qdrant`: local mode, a server) and Qdrant Edge
(:mod:`.qdrant_edge`: the engine in process) speak the same filter
language, spelled by two sets of classes (``models.IsEmptyCondition(
is_empty=models.PayloadField(key=...))`` against ``IsEmptyCondition(key=...)``,
``models.Range`` against ``RangeFloat``, ...). Each adapter spells the
clauses (a :class:`Clauses`); which clauses a fastrag filter becomes is
decided here, once (:func:`translate`, :func:`ids_filter`), as
:mod:`.sql` does for LanceDB and Milvus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .base import Condition, Pushdown, metadata_objects

__all__ = ["Clauses", "ids_filter", "point_payloads", "translate"]


class Clauses:
    """How one Qdrant client spells the clauses of a filter (subclass per client).

    ``models`` is the client's module of filter classes (qdrant-client's
    ``models``, or ``qdrant_edge``); both take a ``Filter(must=, should=,
    must_not=)``.
    """

    def __init__(self, models: Any) -> None:
        self.models = models

    def any_of(self, key: str, values: list[Any]) -> Any:
        """The field (or one of its list's values) is one of ``values``."""
        raise NotImplementedError

    def range(self, key: str, op: str, value: float) -> Any:
        """The field compares with ``value`` (``op``: ``gt``, ``gte``, ``lt`` or ``lte``)."""
        raise NotImplementedError

    def empty(self, key: str) -> Any:
        """The field is missing, null or an empty list."""
        raise NotImplementedError

    def null(self, key: str) -> Any:
        """The field is null."""
        raise NotImplementedError

    def has_id(self, ids: list[int]) -> Any:
        """The point is one of ``ids``."""
        raise NotImplementedError

    def filter(
        self,
        *,
        must: Sequence[Any] | None = None,
        should: Sequence[Any] | None = None,
        must_not: Sequence[Any] | None = None,
    ) -> Any:
        """A ``Filter`` of the clauses."""
        return self.models.Filter(
            must=None if must is None else list(must),
            should=None if should is None else list(should),
            must_not=None if must_not is None else list(must_not),
        )

    def public(self) -> Any:
        """A public chunk (its ``acl`` empty): the ``public`` payload flag is true."""
        raise NotImplementedError


def point_payloads(payload: pa.Table) -> list[dict[str, Any]]:
    """The payload of each point: the chunk's columns, the user metadata parsed under ``meta``."""
    rows = payload.drop_columns(["metadata"]).to_pylist()
    for row, meta in zip(rows, metadata_objects(payload), strict=True):
        row["meta"] = meta
    return rows


def ids_filter(clauses: Clauses, ids: np.ndarray) -> Any:
    """A filter admitting only the chunk ids ``ids``."""
    return clauses.filter(must=[clauses.has_id([int(i) for i in ids])])


def translate(clauses: Clauses, pushdown: Pushdown) -> Any:
    """The filter of ``pushdown``, or None when a condition has no exact translation."""
    must = []
    for cond in pushdown.conditions:
        clause = _condition(clauses, cond)
        if clause is None:
            return None
        must.append(clause)
    if pushdown.acl is not None:
        public = clauses.public()
        names = sorted(pushdown.acl)
        if names:
            must.append(clauses.filter(should=[public, clauses.any_of("acl", names)]))
        else:
            must.append(public)
    return clauses.filter(must=must) if must else None


def _absent(clauses: Clauses, key: str) -> list[Any]:
    """The clauses a point without the field matches (``must_not``: it has the field)."""
    return [clauses.empty(key), clauses.null(key)]


def _condition(clauses: Clauses, cond: Condition) -> Any:
    """One condition as a filter clause, or None (no exact translation)."""
    key = cond.field
    op, value = cond.op, cond.value
    if cond.kind == "metadata":
        # Only string equality and membership mean the same in Qdrant as in fastrag.
        if op not in ("eq", "in"):
            return None
        values = (value,) if op == "eq" else value
        if not values or not all(isinstance(v, str) for v in values):
            return None
        return clauses.any_of(f"meta.{key}", list(values))
    if cond.kind == "string":
        if op not in ("eq", "ne", "in", "not_in"):
            return None
        values = (value,) if op in ("eq", "ne") else value
        if not values or not all(isinstance(v, str) for v in values):
            return None
    elif op in ("in", "not_in", "eq", "ne"):  # numbers and timestamps (int microseconds)
        values = (value,) if op in ("eq", "ne") else value
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return None
    else:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            return None
        return clauses.range(key, op, value)
    match = clauses.any_of(key, list(values))
    if op in ("eq", "in"):
        return match
    # ne / not_in: a chunk without the field never matches (as in fastrag's own filters).
    return clauses.filter(must_not=[match, *_absent(clauses, key)])
