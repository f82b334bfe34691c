"""fastrag: fast, honest retrieval-augmented question answering.

Documents are cut into overlapping character windows, embedded, kept in Arrow
columnar chunk stores and searched by exact batched top-k; every result comes
with the chunks it stands on. The hot loops are Numba kernels in
``fastrag._native``.

Quick start::

    import fastrag
    kb = fastrag.KnowledgeBase.build([{"id": "a", "text": "..."}])
    hits = kb.retrieve("a question", k=5)
"""

from __future__ import annotations

try:
    from ._native import KERNEL_ABI
except ModuleNotFoundError as _exc:  # pragma: no cover - a packaging mistake, not a runtime path
    if _exc.name != f"{__name__}._native":
        raise
    raise ImportError(
        f"fastrag was imported from {__path__[0]} without its kernels (fastrag._native, "
        "installed from the top-level native/ folder): this is a source checkout, not an "
        "installed copy. Install it (pip install . or pip install -e .) or run from another "
        "directory."
    ) from _exc
from .answer.chat import OpenAIChatGenerator
from .answer.fallback import FallbackChain, Level
from .answer.generate import ExtractiveGenerator, Generator
from .answer.pipeline import AnswerOptions
from .answer.redact import Redactor
from .config import ClientConfig
from .embed.base import Embedder
from .embed.openai import OpenAIEmbedder
from .embed.static import StaticEmbedder
from .embed.vocabulary import VocabularyEmbedder
from .errors import (
    AuthenticationError,
    ConfigError,
    DocumentError,
    DocumentNotFoundError,
    DuplicateDocumentError,
    EmbedderError,
    EmbedderMismatchError,
    EmbeddingResponseError,
    FastragError,
    GenerationError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    NotFittedError,
    RateLimitError,
    RetryExhaustedError,
    SearchIndexError,
    StageTimeoutError,
    StoreCorruptedError,
    StoreError,
    StoreNotFoundError,
    StoreVersionError,
    StructuredOutputError,
)
from .index.hnsw import HnswConfig
from .kb import BuildProgress, KnowledgeBase
from .retrieve.filters import Principal
from .retrieve.options import RetrievalConfig
from .retrieve.rerank import LLMReranker
from .retrieve.rewrite import LLMRewriter, QueryRewriter, RewrittenQuery
from .store.snapshots import SnapshotInfo
from .text.chunking import Chunker
from .text.tokenize import Tokenizer
from .types import Answer, Document, Generation, Hit
from .warmup import warmup

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "AnswerOptions",
    "AuthenticationError",
    "BuildProgress",
    "Chunker",
    "ClientConfig",
    "ConfigError",
    "Document",
    "DocumentError",
    "DocumentNotFoundError",
    "DuplicateDocumentError",
    "Embedder",
    "EmbedderError",
    "EmbedderMismatchError",
    "EmbeddingResponseError",
    "ExtractiveGenerator",
    "FallbackChain",
    "FastragError",
    "Generation",
    "GenerationError",
    "Generator",
    "Hit",
    "HnswConfig",
    "KERNEL_ABI",
    "KnowledgeBase",
    "LLMReranker",
    "LLMRewriter",
    "Level",
    "ModelError",
    "ModelResponseError",
    "ModelTimeoutError",
    "NotFittedError",
    "OpenAIChatGenerator",
    "OpenAIEmbedder",
    "Principal",
    "QueryRewriter",
    "RateLimitError",
    "Redactor",
    "RetrievalConfig",
    "RetryExhaustedError",
    "RewrittenQuery",
    "SearchIndexError",
    "SnapshotInfo",
    "StageTimeoutError",
    "StaticEmbedder",
    "StoreCorruptedError",
    "StoreError",
    "StoreNotFoundError",
    "StoreVersionError",
    "StructuredOutputError",
    "Tokenizer",
    "VocabularyEmbedder",
    "__version__",
    "warmup",
]
