"""Exceptions raised by fastrag.

Every exception fastrag raises derives from :class:`FastragError`, so one
``except FastragError`` catches them all. Errors about bad input also derive
from :class:`ValueError` (or :class:`KeyError` / :class:`TypeError` where that
is the natural builtin), so existing ``except ValueError`` code keeps working.
Foreign exceptions (pyarrow, hnswlib, OS errors) are translated where they
cross into fastrag, with the original chained as ``__cause__``.

::

    FastragError
    ├── ConfigError (ValueError)             bad parameter: window, k, threads, ...
    ├── DocumentError (ValueError)           a document is malformed
    │   └── DuplicateDocumentError           an id seen twice, or already stored
    ├── DocumentNotFoundError (KeyError)     delete() of an id that is not stored
    ├── EmbedderError                        an embedder failed or gave bad vectors
    │   ├── EmbedderMismatchError (ValueError)  query embedder differs from the index's
    │   └── NotFittedError                   VocabularyEmbedder used before fit()
    ├── StoreError                           reading or writing a knowledge base failed
    │   ├── StoreNotFoundError (FileNotFoundError)
    │   ├── StoreCorruptedError              a file is truncated, corrupt or inconsistent
    │   └── StoreVersionError                written by an incompatible fastrag
    └── SearchIndexError                     a search index (HNSW, BM25) failed
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DocumentError",
    "DocumentNotFoundError",
    "DuplicateDocumentError",
    "EmbedderError",
    "EmbedderMismatchError",
    "FastragError",
    "NotFittedError",
    "SearchIndexError",
    "StoreCorruptedError",
    "StoreError",
    "StoreNotFoundError",
    "StoreVersionError",
]


class FastragError(Exception):
    """Base class of every error fastrag raises."""


class ConfigError(FastragError, ValueError):
    """A parameter is out of range or of the wrong type."""


class DocumentError(FastragError, ValueError):
    """A document is malformed: missing or empty id, text that is not a string, ..."""


class DuplicateDocumentError(DocumentError):
    """A document id appears twice in one call, or is already in the knowledge base."""


class DocumentNotFoundError(FastragError, KeyError):
    """An operation names a document id the knowledge base does not hold."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class EmbedderError(FastragError):
    """An embedder failed, or returned vectors of the wrong shape or with non-finite values."""


class EmbedderMismatchError(EmbedderError, ValueError):
    """The embedder used for a query differs from the one the knowledge base was built with."""


class NotFittedError(EmbedderError, ValueError):
    """A :class:`~fastrag.VocabularyEmbedder` was used before :meth:`fit`."""


class StoreError(FastragError):
    """Reading or writing a knowledge base on disk failed."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """The path holds no knowledge base."""


class StoreCorruptedError(StoreError):
    """A knowledge-base file is truncated, corrupt, or inconsistent with the manifest."""


class StoreVersionError(StoreError):
    """The knowledge base was written in a format this fastrag cannot read."""


class SearchIndexError(FastragError):
    """A search index (HNSW, BM25) failed to build, load or answer."""
