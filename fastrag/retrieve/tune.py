"""Fusion weights chosen for one corpus without labelled questions (pseudo-questions).

A user's corpus has no labelled questions, so :func:`tune_fusion` makes its
own from the corpus (:func:`pseudo_queries`):

1. a seeded sample of chunks, at most one per document;
2. from each, one sentence of 6 or more terms (the longest of the chunk's
   sentences up to 40 terms); its terms (words, or CJK characters) are
   thinned at random to ``keep`` (default 0.6) in their order, so the
   question shares only part of its source's wording, as a real question
   does (the sentence itself stays in the index: the thinning is what
   keeps the keyword legs from finding it verbatim);
3. the pseudo-question's positive is its source document.

Every fusion setting of a small grid (RRF and convex, the legs' weights,
:data:`GRID`) ranks documents for the pseudo-questions (``search``), and
the setting of the highest mean nDCG@10 wins; the embedder kind's default
is kept unless a setting beats it by more than :data:`MARGIN`.
Deterministic for a seed. The knowledge base's :meth:`tune_fusion` runs it
over its own chunks and keeps the choice in its retrieval settings (saved
in the manifest).

Measured (BENCHMARKS.md, "Fusion tuned without labels"): on SciFact these
pseudo-questions are too easy for the chunk keyword leg (0.99 found), the
tuning drops the other legs and loses 0.05 nDCG@10 on the real questions,
so it is not run by default.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..options import RetrievalConfig
from ..text.cjk import CJK_CHAR
from ..text.sentences import split_sentences

__all__ = ["GRID", "MARGIN", "FusionChoice", "pseudo_queries", "tune_corpus", "tune_fusion"]

GRID: dict[str, dict[str, tuple[float, ...]]] = {
    "rrf": {
        "vector_weight": (0.0, 0.05, 0.25, 1.0),
        "keyword_weight": (1.0,),
        "document_weight": (0.0, 1.0, 3.0),
    },
    "convex": {
        "vector_weight": (0.05, 0.2, 0.5),
        "keyword_weight": (0.0, 0.15, 0.3),
        "document_weight": (0.2, 0.35, 0.65),
    },
}
"""The settings tried, per fusion method (39 in all, plus the defaults)."""

MARGIN = 0.005
"""A setting replaces the default only when its pseudo-nDCG@10 is higher by more than this."""

_TERM = re.compile(r"[^\W\d_]{2,}|\d+", re.UNICODE)


@dataclass(frozen=True)
class FusionChoice:
    """The fusion a tuning chose, with what it measured.

    Attributes
    ----------
    fusion : str
        ``"rrf"`` or ``"convex"``.
    vector_weight, keyword_weight, document_weight : float
        The legs' weights.
    score : float
        Mean pseudo-nDCG@10 of the chosen setting.
    default_score : float
        The same for the embedder kind's default fusion.
    queries : int
        Pseudo-questions used.
    seconds : float
        Time the tuning took.
    scores : dict
        Pseudo-nDCG@10 of every setting tried (``"rrf 0.05/1/3"``: score).
    """

    fusion: str
    vector_weight: float
    keyword_weight: float
    document_weight: float
    score: float
    default_score: float
    queries: int
    seconds: float
    scores: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    def config(self, base: RetrievalConfig | None = None) -> RetrievalConfig:
        """``base`` (default settings) with this fusion and these weights."""
        data = (base or RetrievalConfig()).to_dict()
        data.update(
            fusion=self.fusion, vector_weight=self.vector_weight,
            keyword_weight=self.keyword_weight, document_weight=self.document_weight,
        )  # fmt: skip
        return RetrievalConfig.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the per-setting scores)."""
        return {
            "fusion": self.fusion, "vector_weight": self.vector_weight,
            "keyword_weight": self.keyword_weight, "document_weight": self.document_weight,
            "pseudo_ndcg10": round(self.score, 4),
            "default_pseudo_ndcg10": round(self.default_score, 4), "queries": self.queries,
            "seconds": round(self.seconds, 2), "method": "pseudo-questions",
        }  # fmt: skip


def _terms(sentence: str) -> list[tuple[str, bool]]:
    """(term, is_cjk) in order: Latin words and numbers, and single CJK characters."""
    out: list[tuple[str, bool]] = []
    for m in _TERM.finditer(sentence):
        word = m.group(0)
        if CJK_CHAR.search(word):
            out.extend((c, True) for c in word if CJK_CHAR.match(c))
        else:
            out.append((word, False))
    return out


def pseudo_queries(
    doc_ids: Sequence[str],
    texts: Sequence[str],
    *,
    n: int = 200,
    seed: int = 0,
    keep: float = 0.6,
) -> list[tuple[str, str]]:
    """Pseudo-questions and their source documents, from chunks (module docstring).

    Parameters
    ----------
    doc_ids, texts : sequence of str
        Each chunk's document and text.
    n : int, default 200
        Pseudo-questions wanted, at most (one per document).
    seed : int, default 0
        Seed of the sample and of the thinning.
    keep : float, default 0.6
        Share of a sentence's terms kept.

    Returns
    -------
    list of (str, str)
        ``(question, doc_id)``.
    """
    if len(doc_ids) != len(texts):
        raise ConfigError("doc_ids and texts must have the same length")
    if not 0 < keep <= 1:
        raise ConfigError(f"keep must be in (0, 1], got {keep!r}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    out: list[tuple[str, str]] = []
    used: set[str] = set()
    for i in order.tolist():
        if len(out) >= n:
            break
        doc = doc_ids[i]
        if doc in used:
            continue
        best: list[tuple[str, bool]] = []
        for sentence in split_sentences(texts[i]):
            terms = _terms(sentence)
            if 6 <= len(terms) <= 40 and len(terms) > len(best):
                best = terms
        if not best:
            continue
        mask = rng.random(len(best)) < keep
        kept = [t for t, m in zip(best, mask.tolist(), strict=True) if m]
        if len(kept) < 3:
            continue
        question = ""
        for term, cjk in kept:
            question += (
                term
                if cjk and (not question or CJK_CHAR.match(question[-1]))
                else ((" " if question else "") + term)
            )
        used.add(doc)
        out.append((question, doc))
    return out


def _ndcg(ranked: Sequence[str], doc: str) -> float:
    for i, d in enumerate(ranked[:10]):
        if d == doc:
            return 1.0 / math.log2(i + 2)
    return 0.0


def _settings(default: RetrievalConfig) -> list[RetrievalConfig]:
    out = [default]
    base = default.to_dict()
    for method, grid in GRID.items():
        for v in grid["vector_weight"]:
            for k in grid["keyword_weight"]:
                for d in grid["document_weight"]:
                    out.append(RetrievalConfig.from_dict({
                        **base, "fusion": method, "vector_weight": v, "keyword_weight": k,
                        "document_weight": d,
                    }))  # fmt: skip
    return out


def _label(cfg: RetrievalConfig) -> str:
    return f"{cfg.fusion} {cfg.vector_weight:g}/{cfg.keyword_weight:g}/{cfg.document_weight:g}"


def tune_fusion(
    search: Callable[[list[str], RetrievalConfig], list[list[str]]],
    queries: Sequence[tuple[str, str]],
    default: RetrievalConfig,
) -> FusionChoice:
    """The fusion setting that best retrieves each pseudo-question's source document.

    Parameters
    ----------
    search : callable
        ``search(questions, config) -> ranked document ids per question``
        (hybrid retrieval with ``config``'s fusion).
    queries : sequence of (str, str)
        Pseudo-questions and their documents (:func:`pseudo_queries`).
    default : RetrievalConfig
        The current settings with the embedder kind's default fusion filled
        in (``fusion`` and the three weights set).

    Returns
    -------
    FusionChoice
    """
    if not queries:
        raise ConfigError("no pseudo-question could be made from this corpus (too few sentences)")
    t0 = time.perf_counter()
    questions = [q for q, _ in queries]
    docs = [d for _, d in queries]
    scores: dict[str, float] = {}
    best: tuple[float, RetrievalConfig] | None = None
    default_score = 0.0
    for i, cfg in enumerate(_settings(default)):
        ranked = search(questions, cfg)
        s = sum(_ndcg(r, d) for r, d in zip(ranked, docs, strict=True)) / len(docs)
        scores[_label(cfg)] = s
        if i == 0:
            default_score = s
            best = (s + MARGIN, cfg)  # the default wins unless beaten by the margin
        elif best is not None and s > best[0]:
            best = (s, cfg)
    assert best is not None
    chosen = best[1]
    return FusionChoice(
        fusion=str(chosen.fusion),
        vector_weight=float(chosen.vector_weight or 0.0),
        keyword_weight=float(chosen.keyword_weight or 0.0),
        document_weight=float(chosen.document_weight or 0.0),
        score=scores[_label(chosen)],
        default_score=default_score,
        queries=len(queries),
        seconds=time.perf_counter() - t0,
        scores=scores,
    )


def tune_corpus(
    corpus: Any,
    retriever: Any,
    *,
    queries: int = 200,
    seed: int = 0,
    keep: float = 0.6,
) -> FusionChoice:
    """:func:`tune_fusion` over a corpus's own chunks, with ``retriever``'s settings as the base.

    Parameters
    ----------
    corpus : Corpus
        What is searched.
    retriever : Retriever
        Its settings and rewriter are used (it is not changed).
    queries, seed, keep
        As for :func:`pseudo_queries`.

    Returns
    -------
    FusionChoice
    """
    from ..options import RetrievalOptions
    from .fusion import fusion_plan
    from .retriever import Retriever

    store = corpus.store
    alive = store.alive_mask()
    rows = np.flatnonzero(alive) if alive is not None else np.arange(store.n_rows)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.permutation(rows)[: max(queries * 4, queries)])
    table = store.rows(rows, columns=("doc_id", "text"))
    pairs = pseudo_queries(
        [str(d) for d in table.column("doc_id").to_pylist()],
        table.column("text").to_pylist(), n=queries, seed=seed, keep=keep,
    )  # fmt: skip
    base = retriever.config
    plan = fusion_plan(base, corpus.embedder)
    default = RetrievalConfig.from_dict({
        **base.to_dict(), "fusion": plan.method, "vector_weight": plan.vector,
        "keyword_weight": plan.keyword, "document_weight": plan.document,
    })  # fmt: skip
    opts = RetrievalOptions(mode="hybrid", group_by="doc")

    def search(questions: list[str], cfg: RetrievalConfig) -> list[list[str]]:
        r = Retriever(cfg, retriever.rewriter, retriever.redactor)
        rewritten = r.rewrite(questions, opts, ontology=corpus.ontology)
        ranked = r.rank(corpus, rewritten, 10, opts)
        hits = store.hit_table(ranked.rows, ranked.scores)
        out: list[list[str]] = [[] for _ in questions]
        for qi, doc in zip(
            hits.column("query_index").to_pylist(), hits.column("doc_id").to_pylist(), strict=True
        ):
            out[qi].append(str(doc))
        return out

    return tune_fusion(search, pairs, default)
