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
from . import hit_metadata

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
    k : int, default 5
        Chunks per question.
    mode : {"hybrid", "vector", "keyword"}, optional
        Retrieval mode; default the knowledge base's.
    where : dict, optional
        Metadata filter (see :meth:`KnowledgeBase.retrieve`).
    principal : Principal, optional
        Who asks: chunks whose ``acl`` does not admit them are never returned.
    options : dict, optional
        Further keyword arguments of :meth:`KnowledgeBase.retrieve`
        (``group_by``, ``exact``, ``rewrite``, ``reranker``, ``threads``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kb: Any
    k: int = 5
    mode: str | None = None
    where: dict[str, Any] | None = None
    principal: Any = None
    options: dict[str, Any] = {}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = self.kb.retrieve(
            query, k=self.k, mode=self.mode, where=self.where, principal=self.principal,
            **self.options,
        )  # fmt: skip
        return [
            Document(page_content=h.text, metadata=hit_metadata(h), id=str(h.chunk_id))
            for h in hits
        ]
