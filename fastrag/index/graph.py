"""An HNSW graph seen as a :class:`~fastrag.index.base.VectorIndex` over store rows.

The graph (:class:`~fastrag.index.hnsw.HnswIndex`) is labelled by chunk id,
which never changes; a version of the store numbers its rows ``0..n-1``.
:class:`GraphIndex` pairs one graph with one version's ``chunk_id`` column
and answers in rows:

- no filter (the mask is the store's own liveness, or ``None``): the graph
  alone, which marks deleted chunks itself;
- a filter: the graph with a label mask, or exact search over the eligible
  rows when :func:`~fastrag.index.hnsw.filter_strategy` says that is
  cheaper; ``exact=True`` always searches exactly.

A graph is shared by the versions of the store while chunks are added (the
writer adds to it in place, under its write lock): a reader of an older
version may meet labels that version does not hold, and drops them,
searching again with a label mask when that leaves it short.

:func:`build_graph` and :func:`choose_index` build the graph of a store and
decide ``index="auto"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .exact import ExactIndex
from .hnsw import AUTO_MIN_ROWS, HnswConfig, HnswIndex, auto_choice

__all__ = ["COMPACT_GRAPH_SHARE", "GraphIndex", "build_graph", "choose_index"]

_FEW = 256
"""Up to this many labels a search's rows are checked in Python (numpy's reductions beyond)."""

COMPACT_GRAPH_SHARE = 0.2
"""Compaction rebuilds the graph when this share of its elements is deleted."""


class GraphIndex:
    """An HNSW graph over one version of the store's rows (see the module docstring).

    Parameters
    ----------
    graph : HnswIndex
        The graph, labelled by chunk id.
    labels : numpy.ndarray
        int64, ascending: the chunk id of every row of this version.
    exact : ExactIndex
        Exact search over the same rows (for ``exact=True`` and selective
        filters); its ``alive`` mask is this version's liveness.
    """

    kind = "hnsw"

    def __init__(self, graph: HnswIndex, labels: np.ndarray, exact: ExactIndex) -> None:
        self.graph = graph
        self.labels = labels
        self.exact = exact
        # chunk ids 0..n-1 (a built or compacted store): a label is its own row
        n = labels.size
        self._dense = n > 0 and int(labels[0]) == 0 and int(labels[-1]) == n - 1

    def search(
        self,
        queries: np.ndarray,
        k: int,
        *,
        mask: np.ndarray | None = None,
        exact: bool = False,
        threads: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-``k`` (see :meth:`fastrag.index.base.VectorIndex.search`)."""
        if exact:
            return self.exact.search(queries, k, mask=mask, threads=threads)
        filtered = mask is not None and mask is not self.exact.alive
        eligible = self._eligible(mask) if filtered else None
        result = self.graph.search(queries, k, eligible=eligible, threads=threads)
        if result is None:  # exact search over the eligible rows is the cheaper plan
            return self.exact.search(queries, k, mask=mask, threads=threads)
        found, scores = result
        if self._dense and found.size <= _FEW:
            # ascending unique chunk ids from 0 to n - 1 are 0..n-1: each label is its row
            # (Python's min and max over a question's few labels beat numpy's reductions)
            flat = found.ravel().tolist()
            if not flat or (min(flat) >= 0 and max(flat) < self.labels.size):
                return found, scores
        rows, known = self._rows(found)
        if known.all():
            return rows, scores
        # Labels this version does not hold (added since): search again among its own.
        if eligible is None:
            eligible = self._eligible(self.exact.alive)
        result = self.graph.search(queries, k, eligible=eligible, threads=threads)
        if result is None:
            return self.exact.search(queries, k, mask=mask, threads=threads)
        found, scores = result
        rows, known = self._rows(found)
        return np.where(known, rows, -1), np.where(known, scores, -np.inf).astype(np.float32)

    def _eligible(self, mask: np.ndarray | None) -> np.ndarray:
        """A label-indexed mask admitting the labels of this version's eligible rows."""
        bound = max(self.graph.label_bound, int(self.labels[-1]) + 1 if self.labels.size else 0)
        eligible = np.zeros(bound, dtype=np.bool_)
        eligible[self.labels if mask is None else self.labels[mask]] = True
        return eligible

    def _rows(self, found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of graph labels, and which labels this version holds."""
        labels = self.labels
        if labels.size == 0:
            return np.full(found.shape, -1, np.int64), np.zeros(found.shape, np.bool_)
        rows = np.minimum(np.searchsorted(labels, found), labels.size - 1)
        known = labels[rows] == found
        return rows.astype(np.int64), known


def build_graph(
    blocks: Sequence[tuple[np.ndarray, np.ndarray]],
    dim: int,
    config: HnswConfig,
    *,
    capacity: int,
    threads: int | None = None,
) -> HnswIndex:
    """An HNSW graph over live vectors.

    Parameters
    ----------
    blocks : sequence of (vectors, labels)
        float32 ``(n_i, dim)`` live vectors and their int64 chunk ids, in
        store order.
    dim : int
        Vector dimension.
    config : HnswConfig
        Graph parameters.
    capacity : int
        Elements to reserve.
    threads : int, optional
        Build threads.

    Returns
    -------
    HnswIndex
        The graph.
    """
    graph: HnswIndex | None = None
    for vectors, labels in blocks:
        if graph is None:
            graph = HnswIndex.build(vectors, labels, config, threads=threads, max_elements=capacity)
        elif len(labels):
            graph.add(vectors, labels, threads=threads)
    if graph is None:
        graph = HnswIndex.build(np.zeros((0, dim), np.float32), np.zeros(0, np.int64), config)
    return graph


def choose_index(
    blocks: Sequence[tuple[np.ndarray, np.ndarray]],
    dim: int,
    index: str,
    config: HnswConfig,
    *,
    threads: int | None = None,
) -> tuple[str, HnswIndex | None, dict[str, Any] | None]:
    """Resolve ``index`` (``"exact"``, ``"hnsw"`` or ``"auto"``) and build the graph if needed.

    ``"auto"`` keeps exact search below :data:`~fastrag.index.hnsw.AUTO_MIN_ROWS`
    live chunks, and above it keeps the graph only when its recall@10 on the
    largest block's own vectors reaches the target (:func:`auto_choice`).

    Parameters
    ----------
    blocks : sequence of (vectors, labels)
        Live vectors and chunk ids, in store order.
    dim : int
        Vector dimension.
    index : str
        The requested index.
    config : HnswConfig
        Graph parameters.
    threads : int, optional
        Build threads.

    Returns
    -------
    tuple
        The index kind, the graph (or None) and the ``auto`` record for
        the manifest (or None).
    """
    n = sum(len(labels) for _, labels in blocks)
    if index == "exact":
        return "exact", None, None
    if index == "hnsw":
        return "hnsw", build_graph(blocks, dim, config, capacity=n, threads=threads), None
    if n < AUTO_MIN_ROWS:
        return "exact", None, {"rows": n, "reason": f"fewer than {AUTO_MIN_ROWS} chunks"}
    graph = build_graph(blocks, dim, config, capacity=n, threads=threads)
    vectors, labels = max(blocks, key=lambda b: len(b[1]))
    use, recall = auto_choice(vectors, labels, config, threads=threads, index=graph)
    info = {"rows": n, "recall_at_10": round(float(recall), 4)}
    if use:
        return "hnsw", graph, {**info, "reason": "recall at ef_search >= 0.95"}
    return "exact", None, {**info, "reason": "HNSW recall under 0.95 on these vectors"}
