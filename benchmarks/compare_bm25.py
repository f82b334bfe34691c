"""BM25: fastrag against bm25s and rank_bm25, one process, same documents and tokens.

    python benchmarks/compare_bm25.py --n 100000 --mean-chars 300 --queries 1000
    python benchmarks/compare_bm25.py --corpus scifact --data ../shared/datasets/scifact

Corpus: ``--corpus synthetic`` (default) is ``fastrag.datasets.synthetic.
mixed_documents(n, mean_chars=..., zh_share=...)`` (English-only by default,
so that bm25s's regex tokenizer and fastrag's see the same words);
``--corpus scifact`` is the SciFact documents chunked at 200/40 (about 50,000
chunks). Questions: ``--queries`` random sets of 2-6 words drawn from random
documents (seeded).

Measured, every system warmed up first (JIT compiled), medians of
``--repeat`` runs:

- **query throughput**, k = ``--k``, on the *same tokens*: bm25s (numba
  backend, ``method="lucene"``) and rank_bm25 (``BM25Okapi``) are given
  fastrag's token strings for the documents and the queries (bm25s gets the
  query token ids, its fastest input); fastrag is timed from raw question
  text (tokenisation included) and from pre-tokenised queries. Single = one
  query per call in a loop, one thread; batched = all queries in one call,
  ``--threads`` threads. rank_bm25 scores every document in Python, so it
  is timed on ``--rank-queries`` queries only;
- **index build from raw text**, tokenisation included: fastrag
  ``BM25Index.from_texts`` (default tokenizer: English stop words, no
  stemming; and with Porter stemming) against ``bm25s.tokenize`` (English
  stop words; and with PyStemmer's English stemmer) + ``BM25.index``, and
  rank_bm25 (its own ``str.split`` tokens);
- **tokenisation throughput** in MB/s of UTF-8 input.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from fastrag.index.keyword import BM25Index
from fastrag.text import Chunker
from fastrag.text.tokenize import Tokenizer
from fastrag.text.utf8 import encode_utf8


def timeit(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``repeat`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def load_corpus(args: argparse.Namespace) -> list[str]:
    if args.corpus == "scifact":
        from fastrag.datasets.beir import load_beir

        docs = [d["text"] for d in load_beir(args.data).documents()]
        return Chunker(200, 40).chunk(docs).texts()
    from fastrag.datasets.synthetic import mixed_documents

    return [
        d["text"]
        for d in mixed_documents(
            args.n, seed=args.seed, mean_chars=args.mean_chars, zh_share=args.zh_share
        )
    ]


def make_questions(texts: list[str], tok: Tokenizer, m: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.integers(0, len(texts), m * 2):
        words = Tokenizer(stopwords=None, cjk="unigram").tokens(texts[int(i)])
        if not words:
            continue
        pick = rng.choice(len(words), min(len(words), int(rng.integers(2, 7))), replace=False)
        out.append(" ".join(words[j] for j in sorted(pick)))
        if len(out) == m:
            break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=["synthetic", "scifact"], default="synthetic")
    parser.add_argument("--data", default="../shared/datasets/scifact")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--mean-chars", type=int, default=300)
    parser.add_argument("--zh-share", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--single", type=int, default=300, help="queries in the single loop")
    parser.add_argument("--rank-queries", type=int, default=10)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma list: rank_bm25, build")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    import bm25s

    texts = load_corpus(args)
    data, offsets = encode_utf8(texts)
    mb = data.size / 1e6
    tok = Tokenizer()
    questions = make_questions(texts, tok, args.queries, args.seed + 1)
    print(
        f"corpus: {args.corpus}, {len(texts)} texts, {mb:.1f} MB UTF-8; "
        f"{len(questions)} questions, k={args.k}, threads={args.threads}"
    )
    rows = []

    # -- tokenisation ------------------------------------------------------------
    t_tok = timeit(lambda: tok.tokenize_utf8(data, offsets, threads=args.threads), args.repeat)
    t_tok1 = timeit(lambda: tok.tokenize_utf8(data, offsets, threads=1), args.repeat)
    stem_tok = Tokenizer(stem="porter")
    t_stem = timeit(lambda: stem_tok.tokenize_utf8(data, offsets, threads=args.threads), 1)
    t_bm25s_tok = timeit(
        lambda: bm25s.tokenize(texts, stopwords="en", show_progress=False), 1
    )
    print("\ntokenisation (MB/s of UTF-8 input)")
    print(f"  fastrag, {args.threads} threads      {mb / t_tok:8.1f}")
    print(f"  fastrag, 1 thread        {mb / t_tok1:8.1f}")
    print(f"  fastrag + porter (cached) {mb / t_stem:7.1f}")
    print(f"  bm25s.tokenize           {mb / t_bm25s_tok:8.1f}")

    # -- build -----------------------------------------------------------------
    if "build" not in skip:
        print("\nindex build from raw text, tokenisation included (seconds)")

        def fr_build(stem: str | None) -> float:
            t = time.perf_counter()
            BM25Index.from_texts(texts, Tokenizer(stem=stem), threads=args.threads)
            return time.perf_counter() - t

        fr_build(None)  # warm-up
        fr = statistics.median(fr_build(None) for _ in range(args.repeat))
        fr_stem = statistics.median(fr_build("porter") for _ in range(args.repeat))

        def bm_build(stemmer) -> float:
            t = time.perf_counter()
            ids = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
            r = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
            r.index(ids, show_progress=False)
            return time.perf_counter() - t

        import Stemmer

        bm = bm_build(None)
        bm_stem = bm_build(Stemmer.Stemmer("english").stemWords)
        print(f"  fastrag                  {fr:8.2f}   bm25s {bm:8.2f}   ratio {bm / fr:5.1f}x")
        print(
            f"  fastrag + porter         {fr_stem:8.2f}   bm25s {bm_stem:8.2f}   "
            f"ratio {bm_stem / fr_stem:5.1f}x"
        )
        if "rank_bm25" not in skip:
            from rank_bm25 import BM25Okapi

            t = time.perf_counter()
            BM25Okapi([s.lower().split() for s in texts])
            print(f"  rank_bm25 (str.split)    {time.perf_counter() - t:8.2f}")

    # -- queries on the same tokens -------------------------------------------
    index = BM25Index.build(data, offsets, tok, threads=args.threads)
    doc_tokens = tok.token_strings(texts)
    q_tokens = tok.token_strings(questions)
    q_tok = tok.tokenize(questions)
    retriever = bm25s.BM25(k1=0.9, b=0.4, method="lucene", backend="numba")
    retriever.index(doc_tokens, show_progress=False)
    vocab = retriever.vocab_dict
    q_ids = [[vocab[t] for t in q if t in vocab] or [0] for q in q_tokens]
    k = args.k
    single_q = questions[: args.single]
    single_ids = q_ids[: args.single]
    single_tok = [tok.tokenize([q]) for q in single_q]

    def fr_single() -> None:
        for q in single_q:
            index.search([q], k, threads=1)

    def fr_single_tok() -> None:
        for t in single_tok:
            index.search_tokens(t, k, threads=1)

    def bm_single() -> None:
        for ids in single_ids:
            retriever.retrieve([ids], k=k, n_threads=1, show_progress=False)

    def fr_batch() -> None:
        index.search(questions, k, threads=args.threads)

    def fr_batch_tok() -> None:
        index.search_tokens(q_tok, k, threads=args.threads)

    def bm_batch() -> None:
        retriever.retrieve(q_ids, k=k, n_threads=args.threads, show_progress=False)

    # agreement check on scores (same tokens -> same scores)
    r_fr, s_fr = index.search_tokens(q_tok, k)
    _, s_bm = retriever.retrieve(q_ids, k=k, n_threads=1, show_progress=False)
    top_fr = np.where(np.isfinite(s_fr[:, 0]), s_fr[:, 0], 0)
    known = np.array([any(t in vocab for t in q) for q in q_tokens])  # else bm25s gets [0]
    same = np.isclose(top_fr, s_bm[:, 0], rtol=1e-5, atol=1e-6)
    agree = float(np.mean(same[known]))

    ns = len(single_q)
    nb = len(questions)
    t = {
        "fr_single": timeit(fr_single, args.repeat) / ns,
        "fr_single_tok": timeit(fr_single_tok, args.repeat) / ns,
        "bm_single": timeit(bm_single, args.repeat) / ns,
        "fr_batch": timeit(fr_batch, args.repeat) / nb,
        "fr_batch_tok": timeit(fr_batch_tok, args.repeat) / nb,
        "bm_batch": timeit(bm_batch, args.repeat) / nb,
    }
    print(
        f"\nqueries per second (k={k}; top-1 scores equal bm25s's on {agree:.1%} of the "
        f"{int(known.sum())} questions with a known token)"
    )
    print(f"  {'':34s}{'fastrag':>10s}{'bm25s':>10s}{'ratio':>8s}")
    for label, a, b in [
        ("single, raw text, 1 thread", "fr_single", "bm_single"),
        ("single, pre-tokenised, 1 thread", "fr_single_tok", "bm_single"),
        (f"batch {nb}, raw text, {args.threads} thr", "fr_batch", "bm_batch"),
        (f"batch {nb}, pre-tokenised, {args.threads} thr", "fr_batch_tok", "bm_batch"),
    ]:
        print(f"  {label:34s}{1 / t[a]:10.0f}{1 / t[b]:10.0f}{t[b] / t[a]:7.1f}x")
    if "rank_bm25" not in skip:
        from rank_bm25 import BM25Okapi

        rank = BM25Okapi(doc_tokens)
        few = q_tokens[: args.rank_queries]
        t0 = time.perf_counter()
        for q in few:
            np.argsort(-rank.get_scores(q))[:k]
        per = (time.perf_counter() - t0) / len(few)
        print(f"  rank_bm25 single (same tokens)  {1 / per:10.1f} q/s")
    rows.append(t)


if __name__ == "__main__":
    main()
