"""``kb.retrieve()`` against the legs it runs, timed alone: what the call adds to its kernels.

    python benchmarks/bench_call_kernel.py --chunks 100000 --questions 300 --repeat 5

Issue 21 asks that each of keyword, vector (HNSW) and hybrid ``retrieve()``
costs at most 1.5x the time its kernels take. On the cached 100,000-chunk
knowledge base of ``_kbcache`` (seeded English/Chinese documents,
``VocabularyEmbedder(max_features=384)``, HNSW, both keyword legs), per
question and mode, interleaved question by question:

- **the call**: ``kb.retrieve(q, k=10, mode=m)``, hits built (texts
  readable, as a user gets them);
- **its legs alone**, the same arrays in and out as inside the call, with
  the width the call asks of them (``k`` alone, ``oversample * k`` fused):
  vector: the question's embedding (``query_vectors``) and the HNSW search
  (``corpus.vectors.search``); keyword: the question's tokens
  (``tokenizer.tokenize``) and the chunk BM25 search (``search_weighted``);
  hybrid: all of these, the document BM25 search (``search_tokens``) and
  the fusion kernel. Each is the index layer's call, so the figure counts
  a kernel's thin array wrapper (its checks, the output arrays) as kernel
  time: the ratio is, if anything, flattering to the call.

Each question's time is its best of ``--repeat`` passes (both sides alike);
the mean over questions is printed with the ratio call / legs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kbcache import cached_kb, questions  # noqa: E402

from fastrag import KnowledgeBase, _native  # noqa: E402
from fastrag.embed.base import query_vectors  # noqa: E402
from fastrag.retrieve.fusion import fusion_plan  # noqa: E402

K = 10


def legs(kb: KnowledgeBase, mode: str):
    """A function of one question running the legs of ``mode`` as the call runs them."""
    corpus = kb._corpus
    cfg = kb._retriever.config
    plan = fusion_plan(cfg, corpus.embedder)
    n = len(kb)
    width = min(n, K * cfg.oversample) if mode == "hybrid" else K
    keyword, documents, index = corpus.keyword, corpus.documents, corpus.vectors
    groups = _native.readonly(np.ascontiguousarray(corpus.store.row_docs()))
    fusion = _native.fusion
    doc_width = min(width, documents.n_rows) if documents is not None else 0

    def vector(q: str):
        v = query_vectors(corpus.embedder, [q])
        return index.search(v, width)

    def key(q: str):
        t = keyword.tokenizer.tokenize([q])
        return keyword.search_weighted(t, width)

    def hybrid(q: str):
        v = query_vectors(corpus.embedder, [q])
        vr, vs = index.search(v, width)
        t = keyword.tokenizer.tokenize([q])
        kr, ks, _ = keyword.search_weighted(t, width)
        stacked = np.full((2, 1, width), -1, dtype=np.int64)
        stacked[0, :, : vr.shape[1]] = vr
        stacked[1, :, : kr.shape[1]] = kr
        scores = np.zeros((2, 1, width), dtype=np.float32)  # as the call stacks them
        scores[0, :, : vs.shape[1]] = vs
        scores[1, :, : ks.shape[1]] = ks
        weights = np.array([plan.vector, plan.keyword], dtype=np.float64)
        if documents is not None and plan.document > 0:
            dr, ds = documents.search_tokens(t, doc_width)
            group_lists = np.ascontiguousarray(dr[None, :, :])
            group_scores = np.zeros(group_lists.shape, dtype=np.float32)
            group_scores[0, :, : ds.shape[1]] = ds
            group_weights = np.array([plan.document], dtype=np.float64)
        else:
            group_lists = np.zeros((0, 1, 1), dtype=np.int64)
            group_scores = np.zeros((0, 1, 1), dtype=np.float32)
            group_weights = np.zeros(0, dtype=np.float64)
        if plan.method == "convex":
            return fusion.convex_fuse(
                stacked, scores, weights, group_lists, group_scores, group_weights,
                groups, K, False,
            )  # fmt: skip
        return fusion.rrf_fuse(
            stacked, weights, group_lists, group_weights, groups, float(cfg.rrf_k), K, False
        )

    return {"vector": vector, "keyword": key, "hybrid": hybrid}[mode]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--modes", default="keyword,vector,hybrid")
    ap.add_argument("--workdir", type=Path, default=None, help="_kbcache's folder (its default)")
    args = ap.parse_args()
    where = {} if args.workdir is None else {"workdir": args.workdir}
    kb = KnowledgeBase.load(cached_kb(args.chunks, **where))
    qs = questions(kb, args.questions, seed=3)
    print(
        f"{len(kb):,} chunks, index {kb.stats()['index']}, {len(qs)} questions, k = {K}, "
        f"best of {args.repeat}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    print(f"{'mode':<9} {'call ms':>9} {'legs ms':>9} {'call / legs':>12}  {'p50 call':>9} "
          f"{'p50 legs':>9}")  # fmt: skip
    for mode in args.modes.split(","):
        run = legs(kb, mode)
        same = 0
        for q in qs:  # warm (kernels loaded, caches filled), and check the legs rank as the call
            hits = kb.retrieve(q, k=K, mode=mode)
            rows = np.asarray(run(q)[0])[0]
            same += list(np.asarray(hits.rows)) == [int(r) for r in rows[rows >= 0][:K]]
        call = np.full(len(qs), np.inf)
        alone = np.full(len(qs), np.inf)

        def the_call(q: str, mode: str = mode) -> None:
            hits = kb.retrieve(q, k=K, mode=mode)
            _ = [h.text for h in hits]

        for rep in range(args.repeat):
            for i, q in enumerate(qs):
                # Whichever runs second finds the question's graph nodes and postings in
                # the cache the first one filled: the order alternates, so each side runs
                # first for half of the (pass, question) pairs.
                pair = [(call, the_call), (alone, run)]
                for best, f in pair if (i + rep) % 2 == 0 else pair[::-1]:
                    t0 = time.perf_counter()
                    f(q)
                    best[i] = min(best[i], time.perf_counter() - t0)
        print(
            f"{mode:<9} {call.mean() * 1e3:9.3f} {alone.mean() * 1e3:9.3f} "
            f"{call.mean() / alone.mean():11.2f}x  {np.median(call) * 1e3:9.3f} "
            f"{np.median(alone) * 1e3:9.3f}  (same rows as the call: {same}/{len(qs)})",
            flush=True,
        )
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
