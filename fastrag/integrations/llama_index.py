"""A LlamaIndex retriever over a fastrag knowledge base.

::

    from fastrag.integrations.llama_index import FastragRetriever

    retriever = FastragRetriever(kb, k=5, where={"team": "hr"}, principal=Principal("ana"))
    nodes = retriever.retrieve("How many days of annual leave?")
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

Each result is a ``NodeWithScore`` whose node is a ``TextNode`` with the
chunk text, ``id_`` the chunk id (as a string), the chunk's character
offsets as ``start_char_idx``/``end_char_idx``, a ``SOURCE`` relationship to
its document id, and ``metadata`` holding fastrag's metadata plus chunk
identity and scores (:func:`fastrag.integrations.hit_metadata`; chunk
identity, scores, ``acl`` and ``origin*`` are left out of what LlamaIndex
shows a model); the score is fastrag's. Needs ``pip install 'fastrag-engine[llama-index]'``.
"""

from __future__ import annotations

from typing import Any

from ..errors import MissingDependencyError
from ..options import DEFAULT_K, RetrievalOptions
from . import hit_metadata, retrieval_of

try:
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as _exc:
    raise MissingDependencyError(
        "fastrag.integrations.llama_index needs llama-index-core: "
        "pip install 'fastrag-engine[llama-index]'"
    ) from _exc

__all__ = ["FastragRetriever"]

_NOT_FOR_MODELS = frozenset(
    {"chunk_id", "doc_id", "ord", "start", "end", "score", "relevance", "acl", "origin",
     "origin_sha256"}
)  # fmt: skip
"""Metadata kept on the node but left out of the text LlamaIndex shows a model."""


class FastragRetriever(BaseRetriever):
    """LlamaIndex ``BaseRetriever`` returning the chunks ``kb.retrieve`` finds.

    Parameters
    ----------
    kb : KnowledgeBase
        The knowledge base to search.
    k : int, default DEFAULT_K (5)
        Chunks per question.
    retrieval : RetrievalOptions, optional
        The retrieval options, as ``retrieval=`` of :meth:`KnowledgeBase.retrieve`.
    mode : {"hybrid", "vector", "keyword"}, optional
        Shorthand for ``retrieval.mode``; default the knowledge base's.
    where : dict, optional
        Shorthand for ``retrieval.where`` (a metadata filter).
    principal : Principal, optional
        Shorthand for ``retrieval.principal``: who asks (chunks whose ``acl``
        does not admit them are never returned).
    options : dict, optional
        Deprecated (a :class:`DeprecationWarning` per call): further shorthand;
        pass ``retrieval=RetrievalOptions(...)``.
    **kwargs
        Passed to LlamaIndex's ``BaseRetriever`` (``callback_manager``, ...).
    """

    def __init__(
        self,
        kb: Any,
        *,
        k: int = DEFAULT_K,
        retrieval: RetrievalOptions | None = None,
        mode: str | None = None,
        where: dict[str, Any] | None = None,
        principal: Any = None,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kb = kb
        self.k = k
        self.retrieval = retrieval
        self.mode = mode
        self.where = where
        self.principal = principal
        self.options = dict(options or {})

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        retrieval = retrieval_of(
            self.retrieval, self.mode, self.where, self.principal, self.options
        )
        hits = self.kb.retrieve(query_bundle.query_str, k=self.k, retrieval=retrieval)
        out = []
        for h in hits:
            node_metadata = hit_metadata(h)
            node = TextNode(
                id_=str(h.chunk_id),
                text=h.text,
                metadata=node_metadata,
                start_char_idx=h.start,
                end_char_idx=h.end,
                relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=h.doc_id)},
                excluded_llm_metadata_keys=[k for k in node_metadata if k in _NOT_FOR_MODELS],
                excluded_embed_metadata_keys=[k for k in node_metadata if k in _NOT_FOR_MODELS],
            )
            out.append(NodeWithScore(node=node, score=float(h.score)))
        return out
