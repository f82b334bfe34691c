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

Access control: a chunk is admitted to a :class:`Principal` when its ``acl``
is empty or missing (public), or shares an entry with the principal's user
and groups.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from ..store.documents import parse_updated_at

__all__ = ["Principal", "acl_mask", "canonical_key", "where_mask"]

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


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking: a user and the groups they belong to.

    Parameters
    ----------
    user : str, optional
        The user's principal name.
    groups : iterable of str
        Group names.
    """

    user: str | None = None
    groups: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.user is not None and not isinstance(self.user, str):
            raise ConfigError(f"Principal.user must be a str, got {type(self.user).__name__}")
        groups = self.groups
        if isinstance(groups, str) or not isinstance(groups, Iterable):
            raise ConfigError("Principal.groups must be a list of group names, not a string")
        groups = tuple(groups)
        if not all(isinstance(g, str) for g in groups):
            raise ConfigError("Principal.groups must hold strings")
        object.__setattr__(self, "groups", groups)

    def names(self) -> frozenset[str]:
        """Every name that can admit this principal (the user and the groups)."""
        return frozenset(([self.user] if self.user else []) + list(self.groups))


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
                value = list(value)
            out.append((name, value))
        if not out:
            raise ConfigError(f"where[{field!r}]: empty condition")
        return out
    if isinstance(cond, (list, tuple, set, frozenset)):
        return [("in", list(cond))]
    return [("eq", cond)]


def canonical_key(where: Mapping[str, Any] | None, principal: Principal | None) -> bytes:
    """A stable key for a filter (for caching masks)."""
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


def _metadata_mask(column: pa.Array, field: str, conds: list[tuple[str, Any]]) -> np.ndarray:
    values = column.dictionary.to_pylist()
    ok = []
    for raw in values:
        meta = orjson.loads(raw) if raw else {}
        ok.append(_test_value(meta.get(field), conds) if isinstance(meta, dict) else False)
    table = np.array(ok + [False], dtype=np.bool_)
    idx = column.indices.fill_null(len(values)).to_numpy(zero_copy_only=False)
    return table[idx]


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
        if isinstance(target, bool) or not isinstance(target, (int, float, np.integer, np.floating)):
            raise ConfigError(f"where[{field!r}]: compare with a number, got {target!r}")
        mask &= _OPS[name](values, target)
    return mask


def where_mask(batch: pa.RecordBatch, where: Mapping[str, Any]) -> np.ndarray:
    """Rows of ``batch`` (a store segment) that satisfy every condition of ``where``."""
    if not isinstance(where, Mapping):
        raise ConfigError(f"where must be a mapping of field to condition, got {type(where).__name__}")
    mask = np.ones(batch.num_rows, dtype=np.bool_)
    for field, cond in where.items():
        if not isinstance(field, str):
            raise ConfigError(f"where keys are field names, got {field!r}")
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
            mask &= _metadata_mask(batch.column("metadata"), field, conds)
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

