"""How the legs of hybrid retrieval are fused: method and weights, by embedder kind.

Two methods (``RetrievalConfig.fusion``):

- ``"rrf"``: weighted reciprocal rank fusion, ``sum of weight / (rrf_k + rank)``
  (``fastrag._native.fusion.rrf_fuse``);
- ``"convex"``: a weighted sum of each leg's scores min-max normalised over
  that leg's candidates for the question (``convex_fuse``); it keeps how
  far apart the candidates' scores are, which ranks throw away, and is what
  a strong dense leg needs.

Unset fields of :class:`~fastrag.options.RetrievalConfig` (``None``)
take the defaults of :data:`DEFAULTS` for the embedder's kind (the ``kind``
its class declares, :func:`~fastrag.embed.base.embedder_kind`), measured on
one half of the SciFact and CMRC 2018 queries and reported on the other half
(BENCHMARKS.md, "Static embeddings"):
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..embed.base import embedder_kind

__all__ = ["DEFAULTS", "FUSIONS", "FusionPlan", "embedder_kind", "fusion_plan"]

FUSIONS = ("rrf", "convex")


@dataclass(frozen=True)
class FusionPlan:
    """Resolved fusion settings of one retrieval: method and the three legs' weights."""

    method: str
    vector: float
    keyword: float
    document: float


DEFAULTS: dict[str, tuple[str, dict[str, tuple[float, float, float]]]] = {
    # kind: (default method, {method: (vector, keyword, document) weights})
    # Character counts: convex (weights chosen on SciFact's even queries). Measured with
    # `fastrag eval --mode hybrid --fusion rrf|convex` on 2026-12-02: SciFact all 300
    # queries 0.6832 against RRF's 0.6786 (odd half 0.6679 against 0.6626), CMRC 2018 all
    # 3,219 0.9915 against 0.9905; and on table rows (benchmarks/eval_tables.py, 690
    # questions) the row is the top hit for 0.997 against 0.648: RRF turns the keyword
    # leg's wide margin between rows of one document into 1/61 - 1/62, which the vector
    # leg's noise reorders.
    "vocabulary": ("convex", {"rrf": (0.05, 1.0, 3.0), "convex": (0.05, 0.3, 0.65)}),
    # Static tables: convex (SciFact, MiniLM-distilled table: chosen on the even queries,
    # 0.6793 on the odd ones against RRF's 0.6714; 2-fold 0.6916 against 0.6826).
    "static": ("convex", {"rrf": (0.25, 1.0, 4.0), "convex": (0.2, 0.15, 0.35)}),
    # Model endpoints: RRF at equal weight, as before (not re-measured here).
    "model": ("rrf", {"rrf": (1.0, 1.0, 3.0), "convex": (0.5, 0.15, 0.35)}),
}
"""Default fusion per embedder kind (character counts, static tables, model endpoints)."""


def fusion_plan(config: Any, embedder: object) -> FusionPlan:
    """Resolve the fusion method and weights: the configured ones, else the kind's defaults.

    Parameters
    ----------
    config : RetrievalConfig
        The knowledge base's retrieval settings.
    embedder : Embedder
        Its embedder.

    Returns
    -------
    FusionPlan
    """
    default_method, weights = DEFAULTS[embedder_kind(embedder)]
    method = config.fusion if config.fusion is not None else default_method
    vector, keyword, document = weights[method]
    return FusionPlan(
        method=method,
        vector=float(config.vector_weight if config.vector_weight is not None else vector),
        keyword=float(config.keyword_weight if config.keyword_weight is not None else keyword),
        document=float(config.document_weight if config.document_weight is not None else document),
    )
