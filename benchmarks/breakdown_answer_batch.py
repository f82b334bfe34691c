"""Where a hybrid ``answer_batch`` question's time goes, stage by stage.

    python benchmarks/breakdown_answer_batch.py --chunks 300000 [--batch 5000] [--mode hybrid]

On the cached HNSW knowledge base of ``_kbcache.py`` (built once under
``--workdir``), times the pieces of one ``answer_batch`` of ``--batch``
distinct questions (chunk-text prefixes), each piece run on the whole
batch as ``answer_batch`` runs it, in microseconds per question:

- ``rewrite``      the rule-based query rewrite (keywords, intent, route)
- ``tokenize``     the keyword legs' tokenizer over the rewritten keywords
- ``bm25 chunks``  the chunk BM25 leg (``search_weighted``, 3 x k candidates)
- ``bm25 docs``    the document BM25 leg
- ``embed``        the question embedding
- ``hnsw``         the HNSW search (3 x k candidates)
- ``legs+fusion``  the whole ``Retriever._legs`` (all of the above but rewrite, plus fusion)
- ``relevance``    relevance in ``[0, 1]`` (row cosines, keyword shares)
- ``hits``         ``hits_matrix``: rows to :class:`~fastrag.Hit` objects
- the answer stages as ``Answer.timings`` records them (context, conflicts,
  redact, generate, verify, audit), summed over the batch
- ``answer_batch`` the whole call, best of ``--repeat``.

Each piece is given in wall time and in process CPU time (all threads): on
two cores, 1,000 questions/s means at most 2 ms of CPU per question.

The machine's load changes these figures: compare ratios from one run only.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _kbcache import WORKDIR, cached_kb, questions  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=300_000)
    ap.add_argument("--workdir", type=Path, default=WORKDIR)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mode", default="hybrid")
    args = ap.parse_args()

    import fastrag
    from fastrag._threads import threads
    from fastrag.embed.base import query_vectors
    from fastrag.options import DEFAULT_K, parse_options

    fastrag.warmup()
    kb = fastrag.KnowledgeBase.load(cached_kb(args.chunks, args.workdir))
    kb.wait_ready()
    qs = list(dict.fromkeys(questions(kb, args.batch * 2)))[: args.batch]
    n = len(qs)
    corpus, retriever = kb._corpus, kb._retriever
    ropts, aopts = parse_options({"mode": args.mode}, None, None)
    k = DEFAULT_K
    width = k * retriever.config.oversample
    kb.answer_batch(qs[:200], mode=args.mode)  # warm

    best: dict[str, float] = defaultdict(lambda: float("inf"))
    cpu: dict[str, float] = defaultdict(lambda: float("inf"))

    def timed(name, fn, *args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        out = fn(*args, **kwargs)
        best[name] = min(best[name], time.perf_counter() - t)
        cpu[name] = min(cpu[name], time.process_time() - c)
        return out

    keyword, documents, store = corpus.keyword, corpus.documents, corpus.store
    mode = args.mode
    for _ in range(args.repeat):
        queries = timed(
            "rewrite", retriever.rewrite, qs, ropts, redact=aopts.redact, keep_intent=True,
            ontology=corpus.ontology,
        )  # fmt: skip
        tokens = timed("tokenize", keyword.tokenizer.tokenize, [q.keywords for q in queries])
        with threads(None, work=store.n_rows * store.dim * 4 * n):
            timed("bm25 chunks", keyword.search_weighted, tokens, width)
            if documents is not None:
                timed("bm25 docs", documents.search_tokens, tokens, min(width, documents.n_rows))
            texts = [q.text for q in queries]
            vectors = timed("embed", query_vectors, corpus.embedder, texts)
            timed("hnsw", corpus.vectors.search, vectors, width)
            legs = timed(
                "legs+fusion", retriever._legs, corpus, queries, k, width, mode, None, ropts
            )
            rows = legs.rows[:, :k]
            scores = legs.scores[:, :k].astype("float32")
            rel = timed("relevance", retriever._relevance, corpus, legs, rows, scores, mode)
        timed("hits", store.hits_matrix, rows, scores, rel)
        answers = timed("answer_batch", kb.answer_batch, qs, mode=mode, output="answers")
    stages: dict[str, float] = defaultdict(float)
    for a in answers:
        for name, s in a.timings.items():
            stages[name] += s
    us = 1e6 / n
    print(f"{len(kb):,} chunks, {n:,} questions, mode {args.mode}, k {k}, width {width}")
    print("pieces (best of repeat, microseconds per question; wall, and CPU of all threads):")
    for name, s in best.items():
        print(f"  {name:<14} {s * us:9.1f} {cpu[name] * us:9.1f}")
    legs = sum(
        best[x] for x in ("tokenize", "bm25 chunks", "bm25 docs", "embed", "hnsw") if x in best
    )
    glue = (best["legs+fusion"] - legs) * us
    print(f"  {'fusion+glue':<14} {glue:9.1f}  (legs+fusion less its legs; noisy under load)")
    print(f"answer_batch: {n / best['answer_batch']:,.0f} questions/s")
    print("Answer.timings of the last answer_batch (microseconds per question):")
    for name, s in stages.items():
        if name != "total":  # each answer's total counts from the batch's start
            print(f"  {name:<14} {s * us:9.1f}")


if __name__ == "__main__":
    main()
