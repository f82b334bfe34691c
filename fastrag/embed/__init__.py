"""Embedders: texts to L2-normalised float32 vectors (see :mod:`fastrag.embed.base`)."""

from .base import Embedder, check_embedder_matches, document_vectors, query_vectors
from .openai import OpenAIEmbedder
from .vocabulary import VocabularyEmbedder

__all__ = [
    "Embedder",
    "OpenAIEmbedder",
    "VocabularyEmbedder",
    "check_embedder_matches",
    "document_vectors",
    "query_vectors",
]
