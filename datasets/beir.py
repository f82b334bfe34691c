"""Load BEIR-layout evaluation sets from a path and score ranked results.

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``),
``queries.jsonl`` (``_id``, ``text``) and ``qrels.tsv`` (``query-id``,
``corpus-id``, ``score`` with a header line). Evaluation sets are read from
where the user keeps them; none ships with fastrag.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["BeirSet", "evaluate", "load_beir", "ndcg_at_k", "recall_at_k"]


@dataclass(frozen=True)
class BeirSet:
    """An evaluation set: documents, questions and relevance judgements."""

    path: Path
    queries: list[dict[str, Any]]
    qrels: dict[str, dict[str, int]]

    def documents(self, *, with_title: bool = True) -> Iterator[dict[str, Any]]:
        """Stream the corpus as fastrag documents (title prepended to the text by default)."""
        with open(self.path / "corpus.jsonl", "rb") as fh:
            for line in fh:
                if not line.strip():
                    continue
                d = orjson.loads(line)
                title = d.get("title") or ""
                text = f"{title}\n{d['text']}" if with_title and title else d["text"]
                yield {"id": d["_id"], "text": text, "title": title or None}


def load_beir(path: str | Path) -> BeirSet:
    """Read the queries and qrels of a BEIR folder (the corpus is streamed on demand)."""
    root = Path(path)
    with open(root / "queries.jsonl", "rb") as fh:
        queries = [orjson.loads(line) for line in fh if line.strip()]
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            if not line.strip():
                continue
            qid, did, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[did] = int(score)
    queries = [q for q in queries if q["_id"] in qrels]
    return BeirSet(root, queries, qrels)


def ndcg_at_k(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    """nDCG@k with graded gains ``rel`` (as BEIR's pytrec_eval computes it)."""
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranked: Sequence[str], relevant: dict[str, int], k: int = 100) -> float:
    """Share of the relevant documents found in the top ``k``."""
    rel = {d for d, g in relevant.items() if g > 0}
    return len(rel & set(ranked[:k])) / len(rel) if rel else 0.0


def evaluate(run: dict[str, Sequence[str]], qrels: dict[str, dict[str, int]]) -> dict[str, float]:
    """Mean nDCG@10 and Recall@100 of a run (query id -> ranked document ids)."""
    ids = [q for q in qrels if q in run]
    if not ids:
        return {"ndcg@10": 0.0, "recall@100": 0.0, "queries": 0}
    return {
        "ndcg@10": sum(ndcg_at_k(run[q], qrels[q], 10) for q in ids) / len(ids),
        "recall@100": sum(recall_at_k(run[q], qrels[q], 100) for q in ids) / len(ids),
        "queries": len(ids),
    }
