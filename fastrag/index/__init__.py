"""The index layer: the :class:`VectorIndex` protocol, exact and HNSW search, and BM25.

Indexes take arrays and masks and return rows and scores; they know nothing
of questions, documents or hits.
"""

from .base import VectorIndex
from .exact import ExactIndex
from .graph import GraphIndex
from .hnsw import HnswConfig, HnswIndex
from .keyword import BM25Index

__all__ = ["BM25Index", "ExactIndex", "GraphIndex", "HnswConfig", "HnswIndex", "VectorIndex"]
