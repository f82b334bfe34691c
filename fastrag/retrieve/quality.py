"""How good an approximate vector index is on given questions: recall against exact, and latency."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..corpus import Corpus
from ..index.hnsw import recall_at_k
from .masks import eligible_rows

__all__ = ["verify_index"]


def verify_index(
    corpus: Corpus, vectors: np.ndarray, k: int, *, threads: int | None = None
) -> dict[str, Any]:
    """Recall@k of the corpus's vector index against exact search, with the latency of each.

    Parameters
    ----------
    corpus : Corpus
        What to search.
    vectors : numpy.ndarray
        float32 ``(m, dim)`` question vectors.
    k : int
        Results per question.
    threads : int, optional
        Threads.

    Returns
    -------
    dict
        ``recall`` (mean share of the exact top-k the index returns),
        ``questions``, ``k``, ``index``, and per path ``*_ms_p50`` /
        ``*_ms_p99`` (single-question latency) and ``*_batch_qps``.
    """
    index = corpus.vectors
    mask = eligible_rows(corpus.store, None, None)
    report: dict[str, Any] = {"questions": int(vectors.shape[0]), "k": k, "index": index.kind}
    truth, _ = index.search(vectors, k, mask=mask, exact=True, threads=threads)
    found, _ = index.search(vectors, k, mask=mask, threads=threads)
    report["recall"] = recall_at_k(found, truth)
    for name, exact in (("exact", True), ("index", False)):
        lat = []
        for i in range(vectors.shape[0]):
            t = time.perf_counter()
            index.search(vectors[i : i + 1], k, mask=mask, exact=exact, threads=threads)
            lat.append(time.perf_counter() - t)
        t = time.perf_counter()
        index.search(vectors, k, mask=mask, exact=exact, threads=threads)
        batch = time.perf_counter() - t
        ms = np.array(lat) * 1e3
        report[f"{name}_ms_p50"] = float(np.percentile(ms, 50))
        report[f"{name}_ms_p99"] = float(np.percentile(ms, 99))
        report[f"{name}_batch_qps"] = vectors.shape[0] / batch if batch > 0 else float("inf")
    return report
