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

from ._native import KERNEL_ABI
from .chunking import Chunker
from .embedding import Embedder, VocabularyEmbedder
from .errors import (
    ConfigError,
    DocumentError,
    DocumentNotFoundError,
    DuplicateDocumentError,
    EmbedderError,
    EmbedderMismatchError,
    FastragError,
    NotFittedError,
    SearchIndexError,
    StoreCorruptedError,
    StoreError,
    StoreNotFoundError,
    StoreVersionError,
)
from .pipeline import BuildProgress, KnowledgeBase
from .snapshots import SnapshotInfo
from .types import Document, Hit
from .warmup import warmup

__version__ = "0.1.0"

__all__ = [
    "BuildProgress",
    "Chunker",
    "ConfigError",
    "Document",
    "DocumentError",
    "DocumentNotFoundError",
    "DuplicateDocumentError",
    "Embedder",
    "EmbedderError",
    "EmbedderMismatchError",
    "FastragError",
    "Hit",
    "KERNEL_ABI",
    "KnowledgeBase",
    "NotFittedError",
    "SearchIndexError",
    "SnapshotInfo",
    "StoreCorruptedError",
    "StoreError",
    "StoreNotFoundError",
    "StoreVersionError",
    "VocabularyEmbedder",
    "__version__",
    "warmup",
]
