"""Metadata filters and access control, evaluated to boolean row masks.

A filter never post-processes results: it becomes a mask over the store's
rows that every search leg (exact, HNSW, BM25) applies before ranking, so a
chunk that is filtered out or not admitted cannot appear in any result,
prompt, citation or batch row.

``where`` maps a field to a condition:

- a scalar: equality (``{"source": "hr/leave.md"}``);
- a list, tuple or set: membership (``{"team": ["hr", "finance"]}``);
- a dict of operators: ``eq``, ``ne``, ``in``, ``not_in``, ``gt``, ``gte``,
  ``lt``, ``lte`` (also ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``), all of
  which must hold (``{"updated_at": {">=": "2026-01-01"}}``).

Fields are the chunk columns (``doc_id``, ``title``, ``source``,
``section``, ``updated_at``, ``ord``, ``start``, ``end``, ``chunk_id``) and any user
metadata field. A chunk without the field never matches. ``updated_at``
conditions take datetimes, dates, ISO-8601 strings or epoch seconds.

Limits (bounded work for any input): at most :data:`MAX_WHERE_CONDITIONS`
field-operator conditions, and values nested at most :data:`MAX_WHERE_DEPTH`
levels deep (counting ``where`` itself); beyond either, a ``ConfigError``.

Access control: a chunk is admitted to a :class:`Principal` when its ``acl``
is empty or missing (public), or shares an entry with the principal's user
and groups.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from ..index.stores.base import Condition, Pushdown
from ..options import Principal
from ..store.documents import parse_updated_at

__all__ = [
    "MAX_WHERE_CONDITIONS",
    "MAX_WHERE_DEPTH",
    "Principal",
    "acl_mask",
    "canonical_key",
    "check_where",
    "pushdown",
    "where_mask",
]

MAX_WHERE_CONDITIONS = 1024
"""Field-operator conditions one ``where`` may hold."""
MAX_WHERE_DEPTH = 16
"""Nesting levels of a ``where`` (itself, a field's operators, a list of values, ...)."""

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
_ALIASES = {"==": "eq", "!=": "ne", ">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}
_NUMERIC_COLUMNS = ("chunk_id", "ord", "start", "end")
_STRING_COLUMNS = ("doc_id", "title", "source", "section")


def _conditions(field: str, cond: Any) -> list[tuple[str, Any]]:
    if isinstance(cond, Mapping):
        out = []
        for op, value in cond.items():
            name = _ALIASES.get(op, op)
            if name not in _OPS and name not in ("in", "not_in"):
                raise ConfigError(f"where[{field!r}]: unknown operator {op!r}")
            if name in ("in", "not_in"):
                if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                    raise ConfigError(f"where[{field!r}]: {op!r} takes a list of values")
                value = _Members(value)
            out.append((name, value))
        if not out:
            raise ConfigError(f"where[{field!r}]: empty condition")
        return out
    if isinstance(cond, (list, tuple, set, frozenset)):
        return [("in", _Members(cond))]
    return [("eq", cond)]


class _Members(list):  # type: ignore[type-arg]
    """The values of an ``in`` condition: a list, with O(1) membership for hashable values."""

    def __init__(self, values: Iterable[Any]) -> None:
        super().__init__(values)
        hashable, rest = set(), []
        for v in self:
            try:
                hashable.add(v)
            except TypeError:
                rest.append(v)
        self._set, self._rest = hashable, rest

    def __contains__(self, value: object) -> bool:
        try:
            if value in self._set:
                return True
        except TypeError:  # an unhashable value (a list or dict from the metadata)
            pass
        return any(value == v for v in self._rest)


_CONTAINERS = (Mapping, list, tuple, set, frozenset)


def check_where(where: Mapping[str, Any] | None) -> None:
    """Check the shape and the size of a ``where`` filter (bounded work, whatever its size).

    Raises
    ------
    ConfigError
        ``where`` is not a mapping of field names, holds more than
        :data:`MAX_WHERE_CONDITIONS` conditions, or nests deeper than
        :data:`MAX_WHERE_DEPTH` levels.
    """
    if where is None:
        return
    if not isinstance(where, Mapping):
        raise ConfigError(
            f"where must be a mapping of field to condition, got {type(where).__name__}"
        )
    if len(where) > MAX_WHERE_CONDITIONS:
        raise ConfigError(
            f"where has {len(where):,} fields; at most {MAX_WHERE_CONDITIONS:,} conditions "
            "are allowed"
        )
    count = 0
    for field, cond in where.items():
        if not isinstance(field, str):
            raise ConfigError(f"where keys are field names, got {field!r}")
        count += len(cond) if isinstance(cond, Mapping) else 1
        if count > MAX_WHERE_CONDITIONS:
            raise ConfigError(f"where has more than {MAX_WHERE_CONDITIONS:,} conditions")
        stack = [(cond, 2)]  # iterative: a hostile depth cannot exhaust the Python stack
        while stack:
            value, depth = stack.pop()
            if not isinstance(value, _CONTAINERS):
                continue
            if depth > MAX_WHERE_DEPTH:
                raise ConfigError(f"where[{field!r}] nests deeper than {MAX_WHERE_DEPTH} levels")
            children = value.values() if isinstance(value, Mapping) else value
            stack.extend((c, depth + 1) for c in children if isinstance(c, _CONTAINERS))


def canonical_key(where: Mapping[str, Any] | None, principal: Principal | None) -> bytes:
    """A stable key for a filter (for caching masks); checks ``where`` (:func:`check_where`)."""
    check_where(where)
    try:
        return orjson.dumps(
            {
                "where": where or {},
                "principal": None
                if principal is None
                else {"user": principal.user, "groups": sorted(principal.groups)},
            },
            option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS,
            default=str,
        )
    except orjson.JSONEncodeError as exc:  # e.g. a lone surrogate in a value or a name
        raise ConfigError(
            f"where or principal holds a value that is not valid text: {exc}"
        ) from exc


def _test_value(value: Any, conds: list[tuple[str, Any]]) -> bool:
    if value is None:
        return False
    try:
        for name, target in conds:
            if name == "in":
                if value not in target:
                    return False
            elif name == "not_in":
                if value in target:
                    return False
            elif not _OPS[name](value, target):
                return False
    except TypeError:
        return False  # incomparable types (a number against a string): no match
    return True


def _dict_column_mask(column: pa.Array, conds: list[tuple[str, Any]]) -> np.ndarray:
    """Evaluate on the (small) dictionary, then spread over the rows by index."""
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    values = column.dictionary.to_pylist()
    ok = np.array([_test_value(v, conds) for v in values] + [False], dtype=np.bool_)
    idx = column.indices.fill_null(len(values)).to_numpy(zero_copy_only=False)
    return ok[idx]


def _metadata_mask(
    column: pa.Array, rows: np.ndarray, fields: list[tuple[str, list[tuple[str, Any]]]]
) -> np.ndarray:
    """Rows whose metadata satisfies every ``(field, conditions)``, among ``rows`` (a mask).

    Each distinct metadata object that ``rows`` use is parsed once and tested
    field by field until one fails, so the work is bounded by the distinct
    objects times the conditions, never the rows times the conditions.
    """
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    dictionary = column.dictionary
    indices = column.indices.fill_null(len(dictionary)).to_numpy(zero_copy_only=False)
    ok = np.zeros(len(dictionary) + 1, dtype=np.bool_)  # the last slot: no metadata
    used = np.unique(indices[rows])
    used = used[used < len(dictionary)]
    for i, raw in zip(used, dictionary.take(pa.array(used)).to_pylist(), strict=True):
        meta = orjson.loads(raw) if raw else {}
        if isinstance(meta, dict):
            ok[i] = all(_test_value(meta.get(field), conds) for field, conds in fields)
    return ok[indices]


def _timestamp_mask(column: pa.Array, conds: list[tuple[str, Any]]) -> np.ndarray:
    mask = pc.is_valid(column)
    for name, target in conds:
        if name in ("in", "not_in"):
            values = pa.array(
                [parse_updated_at(t, where="where['updated_at']") for t in target], column.type
            )
            test = pc.is_in(column, value_set=values)
            test = pc.invert(test) if name == "not_in" else test
        else:
            when = parse_updated_at(target, where="where['updated_at']")
            fn = {"eq": pc.equal, "ne": pc.not_equal, "gt": pc.greater, "gte": pc.greater_equal,
                  "lt": pc.less, "lte": pc.less_equal}[name]  # fmt: skip
            test = fn(column, pa.scalar(when, column.type))
        mask = pc.and_kleene(mask, test)
    return mask.fill_null(False).to_numpy(zero_copy_only=False)


def _numeric_mask(column: pa.Array, field: str, conds: list[tuple[str, Any]]) -> np.ndarray:
    values = column.to_numpy(zero_copy_only=False)
    mask = np.ones(values.size, dtype=np.bool_)
    for name, target in conds:
        if name in ("in", "not_in"):
            test = np.isin(values, np.asarray(target))
            mask &= ~test if name == "not_in" else test
            continue
        if isinstance(target, bool) or not isinstance(
            target, (int, float, np.integer, np.floating)
        ):
            raise ConfigError(f"where[{field!r}]: compare with a number, got {target!r}")
        mask &= _OPS[name](values, target)
    return mask


def where_mask(batch: pa.RecordBatch, where: Mapping[str, Any]) -> np.ndarray:
    """Rows of ``batch`` (a store segment) that satisfy every condition of ``where``."""
    check_where(where)
    mask = np.ones(batch.num_rows, dtype=np.bool_)
    metadata: list[tuple[str, list[tuple[str, Any]]]] = []
    for field, cond in where.items():
        conds = _conditions(field, cond)
        if field == "updated_at":
            mask &= _timestamp_mask(batch.column("updated_at"), conds)
        elif field in _NUMERIC_COLUMNS:
            mask &= _numeric_mask(batch.column(field), field, conds)
        elif field in _STRING_COLUMNS:
            mask &= _dict_column_mask(batch.column(field), conds)
        elif field in ("text", "vector", "acl", "metadata"):
            raise ConfigError(
                f"where[{field!r}]: cannot filter on {field}; use principal= for access control"
            )
        else:
            metadata.append((field, conds))
    if metadata and mask.any():
        mask &= _metadata_mask(batch.column("metadata"), mask, metadata)
    return mask


def acl_mask(batch: pa.RecordBatch, principal: Principal) -> np.ndarray:
    """Rows of ``batch`` that ``principal`` may read (public rows included)."""
    acl = batch.column("acl")
    lengths = pc.list_value_length(acl).fill_null(0).to_numpy(zero_copy_only=False)
    mask = lengths == 0
    names = principal.names()
    if names and len(acl):
        flat = pc.list_flatten(acl)
        parents = pc.list_parent_indices(acl).to_numpy(zero_copy_only=False)
        hit = pc.is_in(flat, value_set=pa.array(sorted(names), pa.string()))
        hit = hit.fill_null(False).to_numpy(zero_copy_only=False)
        mask[parents[hit]] = True
    return mask


_EPOCH = pa.scalar(0, pa.timestamp("us", tz="UTC")).as_py()


def _micros(value: Any) -> int:
    when = parse_updated_at(value, where="where['updated_at']")
    assert when is not None
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def pushdown(where: Mapping[str, Any] | None, principal: Principal | None) -> Pushdown | None:
    """``where`` and ``principal`` in the store-neutral form external vector stores translate.

    ``updated_at`` values become int microseconds since the epoch (UTC), as
    the stores keep them; ``None`` when there is no filter at all.
    """
    if where is None and principal is None:
        return None
    check_where(where)
    conditions: list[Condition] = []
    for field, cond in (where or {}).items():
        if field in _NUMERIC_COLUMNS:
            kind = "number"
        elif field in _STRING_COLUMNS:
            kind = "string"
        elif field == "updated_at":
            kind = "timestamp"
        else:
            kind = "metadata"
        for op, value in _conditions(field, cond):
            if isinstance(value, _Members):
                value = tuple(_micros(v) for v in value) if kind == "timestamp" else tuple(value)
            elif kind == "timestamp":
                value = _micros(value)
            conditions.append(Condition(field, kind, op, value))
    acl = None if principal is None else principal.names()
    return Pushdown(tuple(conditions), acl)
