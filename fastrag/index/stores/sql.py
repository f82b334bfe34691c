"""Filters as SQL-like boolean expressions (LanceDB's DataFusion SQL, Milvus's expressions).

Both engines keep the payload of :func:`~fastrag.index.stores.base.payload_table`
as typed columns, so the string, numeric and timestamp conditions and the
ACL translate; conditions on user metadata do not (LanceDB keeps it as JSON
text; Milvus's JSON paths are used by its own module) and fall back to an
id allow-list.
"""

from __future__ import annotations

from typing import Any

from .base import Condition, Pushdown

__all__ = ["Dialect", "translate"]

_COLUMN = {"doc_id", "title", "source", "section", "chunk_id", "ord", "start", "end", "updated_at"}
_NULLABLE = {"title", "source", "section", "updated_at"}


class Dialect:
    """How one engine spells literals, operators and the ACL test."""

    eq = "="
    conj, disj = " AND ", " OR "

    def string(self, value: str) -> str:
        """A quoted string literal."""
        return "'" + value.replace("'", "''") + "'"

    def column(self, name: str) -> str:
        """A column reference."""
        return f'"{name}"' if name in ("start", "end") else name

    def in_list(self, column: str, values: list[str], negate: bool) -> str:
        """``column IN (...)``."""
        return f"{column} {'NOT IN' if negate else 'IN'} ({', '.join(values)})"

    def not_null(self, column: str) -> str:
        """``column IS NOT NULL``."""
        return f"{column} IS NOT NULL"

    def acl(self, names: list[str]) -> str:
        """A row is public or its acl shares a name."""
        if not names:
            return "public"
        listed = ", ".join(self.string(n) for n in names)
        return f"(public OR array_has_any(acl, make_array({listed})))"

    def metadata(self, cond: Condition) -> str | None:
        """A condition on the user metadata (None: not expressible)."""
        return None


_SQL_OPS = {"ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _literal(dialect: Dialect, cond: Condition, value: Any) -> str | None:
    if cond.kind == "string":
        return dialect.string(value) if isinstance(value, str) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and value != value:  # NaN matches nothing in fastrag
        return None
    return repr(value) if isinstance(value, float) else str(int(value))


def _condition(dialect: Dialect, cond: Condition) -> str | None:
    if cond.kind == "metadata":
        return dialect.metadata(cond)
    if cond.field not in _COLUMN:
        return None
    column = dialect.column(cond.field)
    if cond.op in ("in", "not_in"):
        values = [_literal(dialect, cond, v) for v in cond.value]
        if any(v is None for v in values):
            return None
        if not values:
            return None
        test = dialect.in_list(column, [v for v in values if v is not None], cond.op == "not_in")
    else:
        value = _literal(dialect, cond, cond.value)
        if value is None:
            return None
        op = dialect.eq if cond.op == "eq" else _SQL_OPS[cond.op]
        test = f"{column} {op} {value}"
    # A chunk without the field never matches (NULL comparisons are not true either, but
    # say so for NOT IN, whose NULL semantics differ between engines).
    if cond.field not in _NULLABLE:
        return f"({test})"
    return f"({dialect.not_null(column)}{dialect.conj}{test})"


def translate(dialect: Dialect, pushdown: Pushdown) -> str | None:
    """The filter as one boolean expression, or None when some condition cannot be expressed."""
    parts = []
    for cond in pushdown.conditions:
        text = _condition(dialect, cond)
        if text is None:
            return None
        parts.append(text)
    if pushdown.acl is not None:
        parts.append(dialect.acl(sorted(pushdown.acl)))
    return dialect.conj.join(parts) if parts else None
