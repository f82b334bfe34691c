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
    from ._native import KERNEL_ABI as _KERNEL_ABI  # noqa: F401 (the kernels must be installed)
except ModuleNotFoundError as _exc:  # pragma: no cover - a packaging mistake, not a runtime path
    if _exc.name != f"{__name__}._native":
        raise
    raise ImportError(
        f"fastrag was imported from {__path__[0]} without its kernels (fastrag._native, "
        "installed from the top-level native/ folder): this is a source checkout, not an "
        "installed copy. Install it (pip install . or pip install -e .) or run from another "
        "directory."
    ) from _exc
from ._version import __version__
from .answer.chat import OpenAIChatGenerator
from .answer.fallback import FallbackChain, Level
from .answer.generate import ExtractiveGenerator, Generator
from .answer.pipeline import AnswerEvent
from .embed.base import Embedder
from .embed.openai import OpenAIEmbedder
from .embed.static import StaticEmbedder
from .embed.vocabulary import VocabularyEmbedder
from .errors import FastragError
from .index.hnsw import HnswConfig
from .kb import BuildProgress, KnowledgeBase
from .options import AnswerOptions, Principal, RetrievalConfig, RetrievalOptions
from .retrieve.multimodal import MultimodalContext
from .retrieve.rerank import LLMReranker
from .retrieve.rewrite import LLMRewriter, QueryRewriter, RewrittenQuery
from .store.loaders import load_documents
from .store.sql_tool import SqlResult, SqlTool
from .text.pii import Redactor
from .types import Answer, Document, Generation, Hit, Hits
from .warmup import warmup

__all__ = [
    "Answer",
    "AnswerEvent",
    "AnswerOptions",
    "BuildProgress",
    "Document",
    "Embedder",
    "ExtractiveGenerator",
    "FallbackChain",
    "FastragError",
    "Generation",
    "Generator",
    "Hit",
    "Hits",
    "HnswConfig",
    "KnowledgeBase",
    "LLMReranker",
    "LLMRewriter",
    "Level",
    "MultimodalContext",
    "OpenAIChatGenerator",
    "OpenAIEmbedder",
    "Principal",
    "QueryRewriter",
    "Redactor",
    "RetrievalConfig",
    "RetrievalOptions",
    "RewrittenQuery",
    "SqlResult",
    "SqlTool",
    "StaticEmbedder",
    "VocabularyEmbedder",
    "__version__",
    "load_documents",
    "warmup",
]
