"""Retrieval quality on BEIR-layout evaluation sets (nDCG@10, Recall@100, MRR@10).

A document's rank is that of its best chunk (``group_by="doc"``). The data
sets are read from where the user keeps them; none ships with fastrag.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..datasets.beir import load_beir, ndcg_at_k, recall_at_k

__all__ = ["EvalReport", "evaluate_beir", "mrr_at_k"]


def mrr_at_k(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document within the top ``k`` (0 if none)."""
    for i, d in enumerate(ranked[:k]):
        if relevant.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


@dataclass(frozen=True)
class EvalReport:
    """Scores of one mode on one data set."""

    dataset: str
    mode: str
    queries: int
    ndcg_at_10: float
    recall_at_100: float
    mrr_at_10: float
    ms_per_query: float
    build_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return dict(self.__dict__)


def evaluate_beir(
    path: str | Path,
    *,
    modes: Sequence[str] = ("vector", "keyword", "hybrid"),
    window: int = 200,
    overlap: int = 40,
    depth: int = 100,
    build_options: dict[str, Any] | None = None,
    retrieve_options: dict[str, Any] | None = None,
    kb: Any = None,
    progress: Callable[[str], None] | None = None,
) -> list[EvalReport]:
    """Index a BEIR folder (title + text per document) and score each retrieval mode.

    Parameters
    ----------
    path : str or Path
        Folder with ``corpus.jsonl``, ``queries.jsonl`` and ``qrels.tsv``.
    modes : sequence of str
        Retrieval modes to score.
    window, overlap : int
        Chunking.
    depth : int
        Documents retrieved per question (Recall@depth is reported as R@100
        when depth is 100).
    build_options, retrieve_options : dict, optional
        Extra arguments for :meth:`KnowledgeBase.build` and ``retrieve_batch``.
    kb : KnowledgeBase, optional
        An index of this data set built already (skips the build).
    progress : callable, optional
        Called with a line of text as each mode finishes.

    Returns
    -------
    list of EvalReport
        One per mode.
    """
    from ..kb import KnowledgeBase

    ds = load_beir(path)
    name = Path(path).name
    t = time.perf_counter()
    if kb is None:
        kb = KnowledgeBase.build(
            ds.documents(), window=window, overlap=overlap, **(build_options or {})
        )
    build_seconds = time.perf_counter() - t
    questions = [q["text"] for q in ds.queries]
    qids = [q["_id"] for q in ds.queries]
    reports = []
    for mode in modes:
        t = time.perf_counter()
        table = kb.retrieve_batch(
            questions, k=depth, mode=mode, group_by="doc", **(retrieve_options or {})
        )
        seconds = time.perf_counter() - t
        ranked: list[list[str]] = [[] for _ in questions]
        columns = (table.column("query_index").to_pylist(), table.column("doc_id").to_pylist())
        for qi, doc in zip(*columns, strict=True):
            ranked[qi].append(doc)
        run = dict(zip(qids, ranked, strict=False))
        ids = [q for q in ds.qrels if q in run]
        n = max(1, len(ids))
        report = EvalReport(
            dataset=name,
            mode=mode,
            queries=len(ids),
            ndcg_at_10=sum(ndcg_at_k(run[q], ds.qrels[q], 10) for q in ids) / n,
            recall_at_100=sum(recall_at_k(run[q], ds.qrels[q], 100) for q in ids) / n,
            mrr_at_10=sum(mrr_at_k(run[q], ds.qrels[q], 10) for q in ids) / n,
            ms_per_query=seconds * 1e3 / max(1, len(questions)),
            build_seconds=build_seconds,
        )
        reports.append(report)
        if progress is not None and not math.isnan(report.ndcg_at_10):
            progress(f"{name} {mode}: nDCG@10 {report.ndcg_at_10:.4f}")
    return reports
