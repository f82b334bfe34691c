"""Saved embedders rebuilt from their manifest entry: the ``config()["type"]`` -> class table.

The protocol module (:mod:`fastrag.embed.base`) builds no embedder: this
module stands above the concrete embedders and imports each one only when a
manifest names it (the HTTP client is not needed otherwise). An embedder
that needs secrets or weights it did not save is passed to
:meth:`KnowledgeBase.load <fastrag.KnowledgeBase.load>` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import EmbedderError
from .base import Embedder

__all__ = ["REBUILT", "embedder_from_config"]


def _vocabulary(config: dict[str, Any], directory: Path | None, verify: bool) -> Embedder | None:
    from .vocabulary import VocabularyEmbedder

    return VocabularyEmbedder.from_config(config)


def _openai(config: dict[str, Any], directory: Path | None, verify: bool) -> Embedder | None:
    from .openai import OpenAIEmbedder

    # The key is never saved: it comes from FASTRAG_API_KEY (or pass embedder=...).
    return OpenAIEmbedder.from_config(config)


def _static(config: dict[str, Any], directory: Path | None, verify: bool) -> Embedder | None:
    if directory is None:  # the table is a snapshot file
        return None
    from .static import StaticEmbedder

    return StaticEmbedder.from_snapshot(config, directory, verify=verify)


REBUILT: dict[str, Callable[[dict[str, Any], Path | None, bool], Embedder | None]] = {
    "vocabulary": _vocabulary,
    "openai": _openai,
    "static": _static,
}
"""``config()["type"]`` -> a function of ``(config, snapshot directory, verify)``."""


def embedder_from_config(
    config: dict[str, Any], *, directory: Any = None, verify: bool = False
) -> Embedder:
    """Rebuild a saved embedder; embedders that need secrets or weights must be passed in instead.

    Parameters
    ----------
    config : dict
        The manifest's ``embedder`` entry.
    directory : Path, optional
        The snapshot directory, for embedders that saved files there
        (see :func:`~fastrag.embed.base.embedder_files`).
    verify : bool, default False
        Check those files' content hashes.

    Returns
    -------
    Embedder
        The embedder it describes.

    Raises
    ------
    EmbedderError
        When the configuration cannot be rebuilt alone.
    """
    kind = config.get("type")
    rebuild = REBUILT.get(kind) if isinstance(kind, str) else None
    embedder = rebuild(config, directory, verify) if rebuild is not None else None
    if embedder is None:
        raise EmbedderError(
            f"the knowledge base was built with a {kind!r} embedder, which cannot be rebuilt "
            "from the manifest alone: pass embedder=... to KnowledgeBase.load()"
        )
    return embedder
