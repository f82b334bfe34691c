"""A lightweight ontology: entities with aliases and relations, expanding the keyword legs.

The format (YAML, read with ``yaml.safe_load``, or the same as a dict)::

    entities:
      - name: fault_code
        aliases: [报警代码, 故障码, alarm number]
        relations:
          - {to: repair_action, via: caused_by}
          - {to: work_order, via: recorded_in}
      - name: repair_action
        aliases: [维修措施, fix]
      - name: work_order
        aliases: [工单]

A question naming an entity (its name, with ``_`` read as a space, or any
alias; matched case-insensitively after NFKC, as whole words for Latin
terms and as substrings for CJK ones) is expanded, for the keyword legs
only, with the entity's canonical name. A **relation-aware** question also
gets the names and aliases of the related entities: one that names a
relation (``caused by``, ``recorded in``) or asks for one with a cue
word (:data:`RELATION_CUES`: cause, fix, repair, solution, record,
related, 原因, 怎么, 如何, 处理, 解决, 维修, 记录, 相关, ...). The vector leg
always embeds the question as asked. The expansion is recorded in
:attr:`~fastrag.RewrittenQuery.ontology` (and ``expansions``), so
:attr:`~fastrag.Answer.rewrites` shows it.

Validation raises named errors: :class:`~fastrag.errors.DuplicateAliasError`
(one term for two entities, or an entity twice) and
:class:`~fastrag.errors.UnknownRelationTargetError` (a relation to an
entity not defined), both :class:`~fastrag.errors.OntologyError`.

An ontology is saved with the snapshot as ``ontology.json`` (never pickled)
and replaced without a rebuild (``KnowledgeBase.set_ontology``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import (
    DuplicateAliasError,
    MissingDependencyError,
    OntologyError,
    UnknownRelationTargetError,
)

__all__ = ["Entity", "Ontology", "RELATION_CUES", "Relation", "as_ontology"]

RELATION_CUES = (
    "cause", "caused", "causes", "why", "fix", "fixed", "repair", "repaired", "solution",
    "solve", "resolve", "remedy", "action", "record", "records", "recorded", "history",
    "related", "relation", "handle", "原因", "为什么", "导致", "怎么", "如何", "处理", "解决",
    "维修", "措施", "记录", "相关", "关联",
)  # fmt: skip
"""Words that make a question relation-aware (besides naming a relation's ``via``)."""

_LATIN = re.compile(r"^[\w\s.\-/+#]*$", re.ASCII)
_MAX_TERMS = 10_000


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).lower().replace("_", " ").split())


def _pattern(terms: list[str]) -> re.Pattern[str] | None:
    """One alternation, longest first; Latin terms as whole words, CJK ones as substrings."""
    if not terms:
        return None
    parts = []
    for term in sorted(set(terms), key=lambda t: (-len(t), t)):
        escaped = re.escape(term)
        parts.append(rf"(?<!\w){escaped}(?!\w)" if _LATIN.match(term) else escaped)
    return re.compile("|".join(parts))


@dataclass(frozen=True, slots=True)
class Relation:
    """An edge from an entity to another one (``to``), named ``via``."""

    to: str
    via: str


@dataclass(frozen=True, slots=True)
class Entity:
    """An entity: its canonical name, aliases (any language) and relations."""

    name: str
    aliases: tuple[str, ...] = ()
    relations: tuple[Relation, ...] = ()

    def terms(self) -> tuple[str, ...]:
        """The name (``_`` as a space) and the aliases, normalised."""
        return tuple(dict.fromkeys([_norm(self.name), *(_norm(a) for a in self.aliases)]))


class Ontology:
    """Entities with aliases and relations (see the module docstring).

    Parameters
    ----------
    entities : iterable of Entity
        Checked: names and aliases unique across entities, relation targets defined.
    """

    def __init__(self, entities: Any) -> None:
        self.entities: tuple[Entity, ...] = tuple(entities)
        by_name: dict[str, Entity] = {}
        owner: dict[str, str] = {}
        for e in self.entities:
            if not isinstance(e, Entity):
                raise OntologyError(f"entities must be Entity objects, got {type(e).__name__}")
            if e.name in by_name:
                raise DuplicateAliasError(f"ontology: entity {e.name!r} is defined twice")
            by_name[e.name] = e
            for term in e.terms():
                if not term:
                    raise OntologyError(f"ontology: entity {e.name!r} has an empty alias")
                other = owner.get(term)
                if other is not None and other != e.name:
                    raise DuplicateAliasError(
                        f"ontology: alias {term!r} names both {other!r} and {e.name!r}"
                    )
                owner[term] = e.name
        if len(owner) > _MAX_TERMS:
            raise OntologyError(f"ontology: {len(owner):,} terms; at most {_MAX_TERMS:,}")
        for e in self.entities:
            for r in e.relations:
                if r.to not in by_name:
                    raise UnknownRelationTargetError(
                        f"ontology: entity {e.name!r} relates {r.via!r} to {r.to!r}, "
                        "which is not an entity of the ontology"
                    )
        self._by_name = by_name
        self._owner = owner
        self._terms = _pattern(list(owner))
        vias = {_norm(r.via) for e in self.entities for r in e.relations}
        self._cues = _pattern([*vias, *RELATION_CUES])

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any) -> Ontology:
        """An ontology from ``{"entities": [{"name", "aliases", "relations": [{to, via}]}]}``."""
        if not isinstance(data, Mapping) or not isinstance(data.get("entities"), list):
            raise OntologyError("ontology: expected a mapping with a list under 'entities'")
        unknown = set(data) - {"entities"}
        if unknown:
            raise OntologyError(f"ontology: unknown top-level key(s) {sorted(map(str, unknown))}")
        entities = []
        for i, raw in enumerate(data["entities"]):
            at = f"ontology: entities[{i}]"
            if not isinstance(raw, Mapping):
                raise OntologyError(f"{at} must be a mapping")
            extra = set(raw) - {"name", "aliases", "relations"}
            if extra:
                raise OntologyError(f"{at}: unknown key(s) {sorted(map(str, extra))}")
            name = raw.get("name")
            if not isinstance(name, str) or not name.strip():
                raise OntologyError(f"{at}.name must be a non-empty string")
            aliases = raw.get("aliases") or []
            if not isinstance(aliases, list) or not all(
                isinstance(a, (str, int, float)) and not isinstance(a, bool) for a in aliases
            ):
                raise OntologyError(f"{at}.aliases must be a list of strings")
            relations = []
            for j, rel in enumerate(raw.get("relations") or []):
                if (
                    not isinstance(rel, Mapping)
                    or set(rel) != {"to", "via"}
                    or not all(isinstance(rel[k], str) and rel[k].strip() for k in ("to", "via"))
                ):
                    raise OntologyError(f"{at}.relations[{j}] must be {{to: NAME, via: NAME}}")
                relations.append(Relation(rel["to"], rel["via"]))
            entities.append(Entity(name, tuple(str(a) for a in aliases), tuple(relations)))
        return cls(entities)

    @classmethod
    def from_yaml(cls, source: str | Path) -> Ontology:
        """An ontology from a YAML file (``yaml.safe_load``: no object construction)."""
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - installed with the extra
            raise MissingDependencyError(
                "reading an ontology from YAML needs PyYAML: pip install 'fastrag-engine[ontology]'"
            ) from exc
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise OntologyError(f"{path}: cannot read the ontology: {exc}") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise OntologyError(f"{path}: not valid YAML: {exc}") from exc
        try:
            return cls.from_dict(data)
        except OntologyError as exc:
            raise type(exc)(f"{path}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        """The ontology as the dict :meth:`from_dict` reads (what a snapshot saves)."""
        return {
            "entities": [
                {
                    "name": e.name,
                    "aliases": list(e.aliases),
                    "relations": [{"to": r.to, "via": r.via} for r in e.relations],
                }
                for e in self.entities
            ]
        }

    def to_json(self) -> bytes:
        """:meth:`to_dict` as JSON bytes."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ontology) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Ontology(entities={len(self.entities)}, terms={len(self._owner)})"

    # -- expansion -------------------------------------------------------------------
    def entities_in(self, question: str) -> list[str]:
        """The entities a question names, in order of first mention."""
        if self._terms is None:
            return []
        found = [self._owner[m.group(0)] for m in self._terms.finditer(_norm(question))]
        return list(dict.fromkeys(found))

    def relation_aware(self, question: str) -> bool:
        """Whether the question asks about a relation (names one, or has a cue word)."""
        return self._cues is not None and self._cues.search(_norm(question)) is not None

    def expand(self, question: str) -> tuple[str, ...]:
        """The terms a question's keyword query gains: canonical names, related entities' terms.

        Terms the question already holds are not repeated.
        """
        named = self.entities_in(question)
        if not named:
            return ()
        text = _norm(question)
        out: list[str] = [_norm(n) for n in named]
        if self.relation_aware(question):
            for name in named:
                for r in self._by_name[name].relations:
                    out.extend(self._by_name[r.to].terms())
        seen: set[str] = set()
        result = []
        for term in out:
            if term and term not in seen and term not in text:
                seen.add(term)
                result.append(term)
        return tuple(result)


def as_ontology(value: Any) -> Ontology | None:
    """An :class:`Ontology` from a path (YAML or JSON), a dict, an Ontology, or None."""
    if value is None or isinstance(value, Ontology):
        return value
    if isinstance(value, Mapping):
        return Ontology.from_dict(value)
    if isinstance(value, (str, Path)):
        path = Path(value)
        if path.suffix.lower() == ".json":
            try:
                return Ontology.from_dict(orjson.loads(path.read_bytes()))
            except (OSError, orjson.JSONDecodeError) as exc:
                raise OntologyError(f"{path}: cannot read the ontology: {exc}") from exc
        return Ontology.from_yaml(path)
    raise OntologyError(
        f"ontology must be a YAML/JSON path, a dict or an Ontology, got {type(value).__name__}"
    )
