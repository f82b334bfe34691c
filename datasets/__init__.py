"""Data that ships with fastrag: the demo knowledge base, synthetic corpora, evaluation loaders.

The seeded synthetic corpora are for benchmarks; the loaders read evaluation
sets from a user-given path.

Installed as ``fastrag.datasets`` (the top-level ``datasets/`` folder of the
repository is mapped into the package by ``pyproject.toml``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEMO_DIR", "demo_documents"]

DEMO_DIR = Path(__file__).resolve().parent / "demo"
"""Folder holding the bundled demo knowledge base documents."""


def demo_documents() -> list[dict[str, object]]:
    """Return the bundled demo documents (bilingual company handbook excerpts).

    Returns
    -------
    list of dict
        One dict per document with ``id``, ``title``, ``text`` and ``source``.
    """
    import orjson

    docs: list[dict[str, object]] = []
    with open(DEMO_DIR / "docs.jsonl", "rb") as fh:
        for line in fh:
            if line.strip():
                docs.append(orjson.loads(line))
    return docs
