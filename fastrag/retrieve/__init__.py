"""The retrieval layer: questions to ranked rows and hits (see :mod:`.retriever`)."""

from ..options import RetrievalConfig, RetrievalOptions
from .filters import Principal
from .rerank import LLMReranker
from .retriever import Ranked, Retriever
from .rewrite import LLMRewriter, QueryRewriter, RewrittenQuery

__all__ = [
    "LLMReranker",
    "LLMRewriter",
    "Principal",
    "QueryRewriter",
    "Ranked",
    "RetrievalConfig",
    "RetrievalOptions",
    "Retriever",
    "RewrittenQuery",
]
