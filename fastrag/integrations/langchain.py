"""A LangChain retriever over a fastrag knowledge base.

::

    from fastrag.integrations.langchain import FastragRetriever

    retriever = FastragRetriever(kb=kb, k=5, where={"team": "hr"}, principal=Principal("ana"))
    docs = retriever.invoke("How many days of annual leave?")

Each result is a ``langchain_core.documents.Document`` whose
``page_content`` is the chunk text, whose ``id`` is the chunk id (as a
string) and whose ``metadata`` holds fastrag's metadata plus ``chunk_id``,
``doc_id``, ``ord``, ``start``, ``end``, ``score`` and ``relevance``
(:func:`fastrag.integrations.hit_metadata`). The retriever is a Runnable:
it composes into LCEL chains (``{"context": retriever | format, ...} |
prompt | llm``). Needs ``pip install 'fastrag-engine[langchain]'``.
"""

from __future__ import annotations

from typing import Any

from ..errors import MissingDependencyError
from ..options import DEFAULT_K, RetrievalOptions
from . import hit_metadata, retrieval_of

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError as _exc:
    raise MissingDependencyError(
        "fastrag.integrations.langchain needs langchain-core: "
        "pip install 'fastrag-engine[langchain]'"
    ) from _exc

__all__ = ["FastragRetriever"]


class FastragRetriever(BaseRetriever):
    """LangChain ``BaseRetriever`` returning the chunks ``kb.retrieve`` finds.

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
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kb: Any
    k: int = DEFAULT_K
    retrieval: RetrievalOptions | None = None
    mode: str | None = None
    where: dict[str, Any] | None = None
    principal: Any = None
    options: dict[str, Any] = {}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        retrieval = retrieval_of(
            self.retrieval, self.mode, self.where, self.principal, self.options
        )
        hits = self.kb.retrieve(query, k=self.k, retrieval=retrieval)
        return [
            Document(page_content=h.text, metadata=hit_metadata(h), id=str(h.chunk_id))
            for h in hits
        ]
