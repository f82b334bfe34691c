"""Retrieval: the vector leg, the keyword leg, and their fusion.

Modes:

- ``vector``: cosine similarity of the question's vector with every chunk's
  (exact batched top-k, or the HNSW index when the knowledge base has one);
- ``keyword``: BM25 over the chunks' tokens (see :mod:`fastrag.index.keyword`);
- ``hybrid`` (default): both legs, each oversampled to ``oversample * k``
  candidates, fused by weighted reciprocal rank fusion::

      score(chunk) = sum over legs of  weight(leg) / (rrf_k + rank(leg, chunk))

  with ranks starting at 1 and ``rrf_k = 60`` by default. A chunk a leg did
  not return contributes nothing for that leg.

Every leg applies the same row mask (deletions, ``where`` filters, the
caller's :class:`~fastrag.retrieve.filters.Principal`) before ranking, so an
ineligible chunk can never be returned, whatever the mode or index.

Each hit carries ``score`` (the ranking score of the mode: cosine, BM25, or
fused) and ``relevance`` in ``[0, 1]`` for thresholds and confidence:

- vector: the cosine, clipped to ``[0, 1]``;
- keyword: the BM25 score over the question's keyword weight (the sum of
  its tokens' idf, an upper bound of any chunk's score): the share of the
  question's weight the chunk matches;
- hybrid: the larger of the two (the keyword share is 0 for a chunk the
  keyword leg did not return).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError

__all__ = ["MODES", "RetrievalConfig", "fuse", "group_first"]

MODES = ("hybrid", "vector", "keyword")


@dataclass(frozen=True)
class RetrievalConfig:
    """How a knowledge base retrieves by default (saved in the manifest).

    Parameters
    ----------
    mode : {"hybrid", "vector", "keyword"}
        Default retrieval mode.
    rrf_k : int, default 60
        Reciprocal rank fusion constant.
    oversample : int, default 3
        Each leg returns ``oversample * k`` candidates for fusion.
    vector_weight : float or None
        Weight of the vector leg. ``None`` (default) chooses by embedder
        kind and fusion method (:data:`fastrag.retrieve.fusion.DEFAULTS`):
        with RRF 0.05 for the :class:`~fastrag.VocabularyEmbedder`
        (character counts rank poorly on their own: they only break
        near-ties and reach questions with no known keyword) and 1.0 for
        any other embedder.
    keyword_weight : float or None
        Weight of the chunk-level keyword leg (RRF default 1.0).
    document_weight : float or None
        Weight of the document-level keyword leg (BM25 over whole documents;
        every chunk of a ranked document receives its document's share);
        RRF default 3.0. BENCHMARKS.md ("Hybrid retrieval") has the grid these
        defaults were chosen from.
    fusion : {"rrf", "convex"} or None
        How the legs are fused: weighted reciprocal rank fusion, or a
        weighted sum of min-max-normalised scores (see
        :mod:`fastrag.retrieve.fusion`); ``None`` (default) chooses by
        embedder kind.
    """

    mode: str = "hybrid"
    rrf_k: int = 60
    oversample: int = 3
    vector_weight: float | None = None
    keyword_weight: float | None = None
    document_weight: float | None = None
    fusion: str | None = None

    def __post_init__(self) -> None:
        check_mode(self.mode)
        if self.fusion is not None and self.fusion not in ("rrf", "convex"):
            raise ConfigError(f"fusion must be 'rrf', 'convex' or None, got {self.fusion!r}")
        for name in ("rrf_k", "oversample"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive int, got {value!r}")
        for name in ("vector_weight", "keyword_weight", "document_weight"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{name} must be a non-negative number, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings."""
        return {
            "mode": self.mode,
            "rrf_k": self.rrf_k,
            "oversample": self.oversample,
            "vector_weight": self.vector_weight,
            "keyword_weight": self.keyword_weight,
            "document_weight": self.document_weight,
            "fusion": self.fusion,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetrievalConfig:
        """Inverse of :meth:`to_dict` (unknown keys are ignored)."""
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


VOCABULARY_VECTOR_WEIGHT = 0.05
"""Vector-leg weight with the character-count embedder (see :class:`RetrievalConfig`)."""


def vector_weight_for(config: RetrievalConfig, embedder: object) -> float:
    """The vector leg's weight: the configured one, or the embedder-dependent default."""
    from .fusion import fusion_plan

    return fusion_plan(config, embedder).vector


def check_mode(mode: object) -> str:
    """Validate a retrieval mode."""
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(map(repr, MODES))}; got {mode!r}")
    return str(mode)


def fuse(
    legs: Sequence[tuple[np.ndarray, float]], k: int, rrf_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted reciprocal rank fusion of ranked row lists, per question.

    Parameters
    ----------
    legs : sequence of (rows, weight)
        ``rows`` int64 ``(m, c)``, best first, ``-1`` padding.
    k : int
        Results per question.
    rrf_k : int
        The fusion constant.

    Returns
    -------
    tuple of numpy.ndarray
        rows int64 ``(m, k')`` and fused scores float32, best first (ties by
        the lower row), ``-1`` / ``-inf`` padding when fewer than ``k'``
        distinct rows were found; ``k'`` is ``min(k, widest candidate list)``.
    """
    m = legs[0][0].shape[0]
    width = min(k, sum(r.shape[1] for r, _ in legs))
    out_rows = np.full((m, width), -1, dtype=np.int64)
    out_scores = np.full((m, width), -np.inf, dtype=np.float32)
    if width == 0:
        return out_rows, out_scores
    for q in range(m):
        ids_parts, score_parts = [], []
        for rows, weight in legs:
            r = rows[q]
            valid = r >= 0
            r = r[valid]
            if r.size == 0 or weight == 0:
                continue
            ids_parts.append(r)
            score_parts.append(weight / (rrf_k + np.flatnonzero(valid) + 1.0))
        if not ids_parts:
            continue
        ids = np.concatenate(ids_parts)
        contrib = np.concatenate(score_parts)
        uniq, inverse = np.unique(ids, return_inverse=True)
        total = np.zeros(uniq.size, dtype=np.float64)
        np.add.at(total, inverse, contrib)
        order = np.lexsort((uniq, -total))[:width]
        out_rows[q, : order.size] = uniq[order]
        out_scores[q, : order.size] = total[order]
    return out_rows, out_scores


def group_first(rows: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
    """Per question, the first ``k`` rows of distinct groups (``-1`` padding kept last).

    Parameters
    ----------
    rows : numpy.ndarray
        int64 ``(m, c)`` ranked rows, ``-1`` padding.
    groups : numpy.ndarray
        Group (document) number of every global row.
    k : int
        Results per question.

    Returns
    -------
    numpy.ndarray
        int64 ``(m, c)``: column positions into ``rows`` of the kept rows,
        ``-1`` padding (use them to pick rows and their scores).
    """
    m, c = rows.shape
    out = np.full((m, min(k, c)), -1, dtype=np.int64)
    for q in range(m):
        seen: set[int] = set()
        n = 0
        for j in range(c):
            r = rows[q, j]
            if r < 0:
                break
            g = int(groups[r])
            if g in seen:
                continue
            seen.add(g)
            out[q, n] = j
            n += 1
            if n == out.shape[1]:
                break
    return out
