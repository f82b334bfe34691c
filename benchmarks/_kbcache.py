"""Shared by bench_load.py and bench_answer_batch.py: a cached synthetic HNSW knowledge base.

``cached_kb(chunks, workdir)`` returns the directory of a saved knowledge
base of about ``chunks`` chunks (seeded mixed English/Chinese documents,
``VocabularyEmbedder(max_features=384)``, 200/40 windows, ``index="hnsw"``
with the default :class:`~fastrag.index.hnsw.HnswConfig`), building and saving it
on first use. A 1,000,000-chunk build takes 20-40 minutes on a 2-core
machine, so it is kept under ``workdir`` (default ``/tmp/fastrag-issue7``)
and reused; ``build_seconds`` is recorded in ``kb-hnsw-<chunks>.json`` next to it.

``questions(kb, n, seed)`` draws ``n`` questions as chunk-text prefixes of
20-59 characters (the pattern of ``compare_answer.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
from fastrag.datasets.synthetic import mixed_documents

from fastrag import KnowledgeBase, VocabularyEmbedder

WORKDIR = Path(os.environ.get("FASTRAG_BENCH_CACHE", "/tmp/fastrag-issue7"))
"""Where the cached knowledge bases live (``FASTRAG_BENCH_CACHE`` moves them: one folder per
checkout when two versions are compared side by side)."""
SEED = 7


def _docs(chunks: int):
    """Mean 2,000-character documents until about ``chunks * 160`` characters (200/40 windows)."""
    target = chunks * 160
    total = 0
    for doc in mixed_documents(10**9, seed=SEED, mean_chars=2000):
        yield doc
        total += len(doc["text"])
        if total >= target:
            return


def cached_kb(
    chunks: int, workdir: Path = WORKDIR, *, threads: int | None = None, rebuild: bool = False
) -> Path:
    """Path of the saved HNSW knowledge base of about ``chunks`` chunks (built once)."""
    path = Path(workdir) / f"kb-hnsw-{chunks}"
    meta = path.parent / f"{path.name}.json"
    if meta.exists() and not rebuild:
        return path
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    kb = KnowledgeBase.build(
        _docs(chunks), embedder=VocabularyEmbedder(max_features=384), index="hnsw", threads=threads
    )
    seconds = time.perf_counter() - t
    kb.save(path)
    meta.write_text(json.dumps({"chunks": len(kb), "build_seconds": seconds, "seed": SEED}))
    return path


def build_info(path: Path) -> dict:
    """What :func:`cached_kb` recorded for ``path``."""
    path = Path(path)
    return json.loads((path.parent / f"{path.name}.json").read_text())


def questions(kb: KnowledgeBase, n: int, seed: int = 1) -> list[str]:
    """``n`` questions: prefixes (20-59 characters) of randomly drawn chunks."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(kb), n)
    texts = kb._corpus.store.rows(picks, ["text"]).column("text").to_pylist()
    return [s[: 20 + int(rng.integers(0, 40))] for s in texts]
