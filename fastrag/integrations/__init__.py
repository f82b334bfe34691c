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

import warnings
from collections.abc import Mapping
from typing import Any

from ..options import RetrievalOptions, parse_options, shorthand_of
from ..types import Hit

__all__ = ["hit_metadata", "retrieval_of"]


def retrieval_of(
    retrieval: RetrievalOptions | None,
    mode: str | None,
    where: Mapping[str, Any] | None,
    principal: Any,
    options: Mapping[str, Any] | None = None,
) -> RetrievalOptions:
    """The retrieval options of a framework retriever: ``retrieval`` with the shorthand it sets.

    ``mode``, ``where`` and ``principal`` apply when set (``None``: not
    given, the object's or the default's value stands); ``options`` (a dict
    of further shorthand) is deprecated.
    """
    shorthand = shorthand_of(mode=mode, where=where, principal=principal)
    if options:
        warnings.warn(
            "options= of a FastragRetriever is deprecated: pass retrieval=RetrievalOptions(...)",
            DeprecationWarning,
            stacklevel=3,
        )
        shorthand = {**dict(options), **shorthand}
    return parse_options(shorthand, retrieval, answers=False)[0]


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
