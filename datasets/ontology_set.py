"""A generated set for the ontology: documents use only canonical terms, questions only aliases.

``generate(n=100, seed=0)`` returns ``(docs, ontology, questions)``:

- ``n`` *fault* entities and ``n`` *repair* entities, each with a canonical
  name of two invented words (``zorvek tamil``), an English alias of two
  other invented words and a Chinese alias of three characters; every fault
  relates to one repair (``{to: repair_k, via: caused_by}``);
- one document per entity, naming it only by its canonical name, in
  maintenance filler shared by all documents (so no other word points at it);
- questions of two kinds, ``(question, doc_id, kind)``:
  ``direct`` names an entity by an alias (English or Chinese) and is answered
  by that entity's document; ``relation`` asks how to fix a fault named by
  an alias and is answered by the document of the repair it relates to.

No question shares a content word with its answering document except through
the ontology, so retrieval without it finds the answer only by chance.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["generate"]

_C = "bdfgklmnprstvz"
_V = "aeiou"
_CJK = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 3000))
_FILLER = [
    "Maintenance note: check the {t} on every machine during the {s} shift.",
    "Technicians record readings of the {t} in the shift log and report drift.",
    "The {t} is inspected after each service interval by the line supervisor.",
]
_SHIFTS = ["morning", "evening", "night"]


def _word(rng: random.Random, used: set[str]) -> str:
    while True:
        w = "".join(rng.choice(_C) + rng.choice(_V) for _ in range(3))
        if w not in used:
            used.add(w)
            return w


def _cjk(rng: random.Random, used: set[str]) -> str:
    while True:
        w = "".join(rng.choice(_CJK) for _ in range(3))
        if w not in used and not any(ch in u for u in used for ch in w):
            used.add(w)
            return w


def generate(n: int = 100, seed: int = 0) -> tuple[list[dict], dict[str, Any], list[tuple]]:
    """Documents, the ontology (as a dict) and ``(question, doc_id, kind)`` questions."""
    rng = random.Random(seed)
    words: set[str] = set()
    cjk: set[str] = set()
    entities: list[dict[str, Any]] = []
    docs: list[dict] = []
    questions: list[tuple] = []
    for kind in ("fault", "repair"):
        for i in range(n):
            canonical = f"{_word(rng, words)} {_word(rng, words)}"
            english = f"{_word(rng, words)} {_word(rng, words)}"
            chinese = _cjk(rng, cjk)
            name = canonical.replace(" ", "_")
            entity: dict[str, Any] = {"name": name, "aliases": [english, chinese]}
            entities.append(entity)
            doc_id = f"{kind}-{i}"
            text = " ".join(
                f.format(t=canonical, s=rng.choice(_SHIFTS)) for f in rng.sample(_FILLER, 3)
            )
            docs.append({"id": doc_id, "text": text})
            questions.append((f"What do technicians check about the {english}?", doc_id, "direct"))
            questions.append((f"{chinese}需要检查什么？", doc_id, "direct"))
    for i in range(n):
        fault, repair = entities[i], entities[n + i]
        fault["relations"] = [{"to": repair["name"], "via": "caused_by"}]
        questions.append((f"How to fix the {fault['aliases'][0]}?", f"repair-{i}", "relation"))
        questions.append((f"{fault['aliases'][1]}怎么处理？", f"repair-{i}", "relation"))
    return docs, {"entities": entities}, questions
