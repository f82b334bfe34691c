"""The vector-index protocol: what the retriever needs of any nearest-neighbour index.

An index answers top-``k`` by inner product over the rows of one version of
the chunk store (global row numbers ``0..n-1``, deleted rows included in the
numbering but never returned). It takes arrays and masks and returns rows
and scores; it knows nothing of questions, documents or hits.

Implementations: :class:`~fastrag.index.exact.ExactIndex` (exact batched
top-k over the store's vector blocks) and
:class:`~fastrag.index.graph.GraphIndex` (an hnswlib graph, with exact search
when asked or when a filter makes exact search the cheaper plan). An
external vector database plugs in by implementing the same method.

:func:`check_k` is the index layer's one rule for ``k`` (the exact, HNSW and
keyword indexes use it); :func:`fastrag.options.check_k` adds the engine's
upper bound above this layer.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigError

__all__ = ["VectorIndex", "check_k"]


def check_k(k: object) -> int:
    """``k`` as an int ``>= 1`` (a numpy integer too, a bool never), or a :class:`ConfigError`."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k must be a positive int, got {k!r}")
    return int(k)


@runtime_checkable
class VectorIndex(Protocol):
    """Top-``k`` rows by inner product, per query vector."""

    kind: str
    """Short name saved in the manifest (``"exact"``, ``"hnsw"``)."""

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        mask: np.ndarray | None = None,
        exact: bool = False,
        threads: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` eligible rows of every query.

        Parameters
        ----------
        queries : numpy.ndarray
            float32 ``(m, dim)``, L2-normalised.
        k : int
            Results per query, ``>= 1``.
        mask : numpy.ndarray, optional
            bool ``(n,)``: the eligible rows (filters, access control and
            deletions). ``None``: every live row.
        exact : bool, default False
            Exact results even when the index is approximate.
        threads : int, optional
            Threads for this call.

        Returns
        -------
        tuple of numpy.ndarray
            int64 rows and float32 scores, ``(m, k')`` with ``k' <= k``,
            best first (ties: lower row), ``-1`` padding where a query has
            fewer results.
        """
        ...
