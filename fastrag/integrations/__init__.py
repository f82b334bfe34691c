"""Adapters that let other RAG frameworks retrieve from a fastrag knowledge base.

- :mod:`fastrag.integrations.langchain`: ``FastragRetriever``, a LangChain
  ``BaseRetriever`` (``pip install 'fastrag-engine[langchain]'``);
- :mod:`fastrag.integrations.llama_index`: ``FastragRetriever``, a
  LlamaIndex ``BaseRetriever`` (``pip install 'fastrag-engine[llama-index]'``).

Each module imports its framework when it is imported itself, never when
``fastrag`` is; a missing framework raises
:class:`~fastrag.errors.MissingDependencyError` naming the extra to install.
"""

from __future__ import annotations

from typing import Any

from ..types import Hit

__all__ = ["hit_metadata"]


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """Return a hit's metadata for a framework document: its fields plus chunk identity and scores.

    Keys: every metadata field of the hit (``title``, ``source``,
    ``updated_at``, ``acl``, ``section``, ``page``, user fields), then
    ``chunk_id``, ``doc_id``, ``ord``, ``start``, ``end``, ``score`` and
    ``relevance``.
    """
    return {
        **hit.metadata,
        "chunk_id": hit.chunk_id,
        "doc_id": hit.doc_id,
        "ord": hit.ord,
        "start": hit.start,
        "end": hit.end,
        "score": hit.score,
        "relevance": hit.relevance,
    }
