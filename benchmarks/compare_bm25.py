"""BM25: fastrag against bm25s and rank_bm25, one process, same documents and tokens.

    python benchmarks/compare_bm25.py --n 100000 --mean-chars 300 --queries 1000
    python benchmarks/compare_bm25.py --corpus zipf --n 1000000 --skip build,rank_bm25
    python benchmarks/compare_bm25.py --corpus synthetic --zh-share 1.0 --skip build,rank_bm25
    python benchmarks/compare_bm25.py --corpus scifact --data ../shared/datasets/scifact

Corpus: ``--corpus synthetic`` (default) is ``fastrag.datasets.synthetic.
mixed_documents(n, mean_chars=..., zh_share=...)`` (English-only by default,
so that bm25s's regex tokenizer and fastrag's see the same words;
``--zh-share 1.0`` for Chinese); ``--corpus zipf`` is ``zipf_documents(n)``:
short documents (``--mean-words``, default 16) over a 100,000-word
vocabulary with Zipfian frequencies (exponent 1.1), the case where a few
words are in most documents; ``--corpus scifact`` is the SciFact documents
chunked at 200/40 (about 50,000 chunks). Questions: ``--queries`` random
sets of 2-6 words drawn from random documents (seeded); on the zipf corpus
each question mixes a document's most common and rarest words.

Measured, every system warmed up first (JIT compiled), medians of
``--repeat`` runs:

- **query throughput**, k = ``--k``, on the *same tokens*: bm25s (numba
  backend, ``method="lucene"``) and rank_bm25 (``BM25Okapi``) are given
  fastrag's token strings for the documents and the queries (bm25s gets the
  query token ids, its fastest input); fastrag is timed from raw question
  text (tokenisation included) and from pre-tokenised queries. Single = one
  query per call, one thread, the systems interleaved question by question
  (rotating which goes first), each question's best of ``--repeat``, the
  mean over questions; batched = all queries in one call, ``--threads``
  threads, best of ``--repeat``. rank_bm25 scores every document in
  Python, so it is timed on ``--rank-queries`` queries only;
- **pruning**: fastrag's block-max MaxScore against its exhaustive kernel
  (every posting of every query term), one question per call, one thread,
  questions of 1 to 8 words: the share of postings scored and the speedup
  per query length (1, 2, 3-5, 6+ known terms), and whether every top-k
  (rows and float32 scores) is identical;
- **retrieve**: at the level a user calls it, ``KnowledgeBase.retrieve(
  question, k, mode="keyword")`` (rewrite, tokenisation, both masks, the
  search and the hits built) of a knowledge base built from the documents,
  against bm25s ``retrieve`` with the same tokens (as ids) on the same chunk
  texts, question after question, interleaved;
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
from collections import Counter
from collections.abc import Callable

import numpy as np

from fastrag.index.keyword import BM25Index
from fastrag.text import Chunker
from fastrag.text.tokenize import Tokenizer
from fastrag.text.utf8 import encode_utf8

BUCKETS = (("1", 1, 1), ("2", 2, 2), ("3-5", 3, 5), ("6+", 6, 10**9))


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
    if args.corpus == "zipf":
        from fastrag.datasets.synthetic import zipf_documents

        return [
            d["text"] for d in zipf_documents(args.n, seed=args.seed, mean_words=args.mean_words)
        ]
    from fastrag.datasets.synthetic import mixed_documents

    return [
        d["text"]
        for d in mixed_documents(
            args.n, seed=args.seed, mean_chars=args.mean_chars, zh_share=args.zh_share
        )
    ]


def make_questions(
    texts: list[str], tok: Tokenizer, m: int, seed: int, lengths: tuple[int, int] = (2, 6)
) -> list[str]:
    """``m`` questions of ``lengths`` words drawn from random documents."""
    rng = np.random.default_rng(seed)
    words_of = Tokenizer(stopwords=None, cjk="unigram")
    out = []
    for i in rng.integers(0, len(texts), m * 2):
        words = words_of.tokens(texts[int(i)])
        if not words:
            continue
        size = int(rng.integers(lengths[0], lengths[1] + 1))
        pick = rng.choice(len(words), min(len(words), size), replace=False)
        out.append(" ".join(words[j] for j in sorted(pick)))
        if len(out) == m:
            break
    return out


def mixed_questions(texts: list[str], m: int, seed: int, lengths: tuple[int, int]) -> list[str]:
    """Questions mixing common and rare words: half a document's most frequent words, half its rarest."""
    rng = np.random.default_rng(seed)
    split = [t.rstrip(".").lower().split() for t in texts]
    df = Counter(w for words in split for w in set(words))
    out = []
    for i in rng.integers(0, len(texts), m):
        words = sorted(set(split[int(i)]), key=lambda w: (-df[w], w))
        size = min(len(words), int(rng.integers(lengths[0], lengths[1] + 1)))
        common = (size + 1) // 2
        pick = (
            words[:common] + words[len(words) - (size - common) :]
            if size > common
            else words[:common]
        )
        rng.shuffle(pick)
        out.append(" ".join(pick))
    return out


def bucket_of(n_terms: int) -> str:
    return next(name for name, lo, hi in BUCKETS if lo <= n_terms <= hi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=["synthetic", "zipf", "scifact"], default="synthetic")
    parser.add_argument("--data", default="../shared/datasets/scifact")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--mean-chars", type=int, default=300)
    parser.add_argument("--mean-words", type=int, default=16)
    parser.add_argument("--zh-share", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--single", type=int, default=300, help="queries in the single loop")
    parser.add_argument("--rank-queries", type=int, default=10)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--breakdown", action="store_true", help="retrieve: the kernel alone, the slowest questions"
    )
    parser.add_argument(
        "--skip",
        default="",
        help="comma list: tokenize, build, rank_bm25, queries, pruning, retrieve",
    )
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    import bm25s

    t0 = time.perf_counter()
    texts = load_corpus(args)
    data, offsets = encode_utf8(texts)
    mb = data.size / 1e6
    tok = Tokenizer()
    if args.corpus == "zipf":
        questions = mixed_questions(texts, args.queries, args.seed + 1, (2, 6))
    else:
        questions = make_questions(texts, tok, args.queries, args.seed + 1)
    print(
        f"corpus: {args.corpus}, {len(texts)} texts, {mb:.1f} MB UTF-8 (made in "
        f"{time.perf_counter() - t0:.0f} s); {len(questions)} questions, k={args.k}, "
        f"threads={args.threads}"
    )

    # -- tokenisation ------------------------------------------------------------
    if "tokenize" not in skip:
        t_tok = timeit(lambda: tok.tokenize_utf8(data, offsets, threads=args.threads), args.repeat)
        t_tok1 = timeit(lambda: tok.tokenize_utf8(data, offsets, threads=1), args.repeat)
        stem_tok = Tokenizer(stem="porter")
        t_stem = timeit(lambda: stem_tok.tokenize_utf8(data, offsets, threads=args.threads), 1)
        t_bm25s_tok = timeit(lambda: bm25s.tokenize(texts, stopwords="en", show_progress=False), 1)
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

    k = args.k
    index = BM25Index.build(data, offsets, tok, threads=args.threads)

    # -- queries on the same tokens -------------------------------------------
    if "queries" not in skip:
        doc_tokens = tok.token_strings(texts)
        q_tokens = tok.token_strings(questions)
        q_tok = tok.tokenize(questions)
        retriever = bm25s.BM25(k1=0.9, b=0.4, method="lucene", backend="numba")
        retriever.index(doc_tokens, show_progress=False)
        del doc_tokens
        vocab = retriever.vocab_dict
        q_ids = [[vocab[t] for t in q if t in vocab] or [0] for q in q_tokens]
        single_q = questions[: args.single]
        single_ids = q_ids[: args.single]
        single_tok = [tok.tokenize([q]) for q in single_q]

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

        # single questions: the three calls interleaved question by question, in
        # rotating order (the first to touch a question's postings pays the cache
        # misses), each question's best of --repeat; batches: alternated
        calls = [
            ("fr_single", lambda i: index.search([single_q[i]], k, threads=1)),
            ("fr_single_tok", lambda i: index.search_tokens(single_tok[i], k, threads=1)),
            ("bm_single", lambda i: retriever.retrieve([single_ids[i]], k=k, n_threads=1,
                                                       show_progress=False)),
        ]  # fmt: skip
        best = {name: np.full(len(single_q), np.inf) for name, _ in calls}
        for _name, fn in calls:
            fn(0)
        for rep in range(args.repeat):
            for i in range(len(single_q)):
                for j in range(len(calls)):
                    name, fn = calls[(i + j + rep) % len(calls)]
                    t0 = time.perf_counter()
                    fn(i)
                    best[name][i] = min(best[name][i], time.perf_counter() - t0)
        nb = len(questions)
        t = {name: float(v.mean()) for name, v in best.items()}
        batches = {"fr_batch": [], "fr_batch_tok": [], "bm_batch": []}
        fns = {"fr_batch": fr_batch, "fr_batch_tok": fr_batch_tok, "bm_batch": bm_batch}
        for fn in fns.values():
            fn()
        for _ in range(args.repeat):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                fn()
                batches[name].append(time.perf_counter() - t0)
        t.update({name: min(v) / nb for name, v in batches.items()})
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

            rank = BM25Okapi(tok.token_strings(texts))
            few = q_tokens[: args.rank_queries]
            t0 = time.perf_counter()
            for q in few:
                np.argsort(-rank.get_scores(q))[:k]
            per = (time.perf_counter() - t0) / len(few)
            print(f"  rank_bm25 single (same tokens)  {1 / per:10.1f} q/s")
        del retriever

    # -- pruning against the exhaustive kernel -----------------------------------
    if "pruning" not in skip:
        if args.corpus == "zipf":
            prune_q = mixed_questions(texts, args.single, args.seed + 2, (1, 8))
        else:
            prune_q = make_questions(texts, tok, args.single, args.seed + 2, (1, 8))
        prune_tok = [tok.tokenize([q]) for q in prune_q]
        batch_tok = tok.tokenize(prune_q)
        r1, s1 = index.search_tokens(batch_tok, k, threads=1)
        r2, s2 = index.search_tokens(batch_tok, k, threads=1, method="exhaustive")
        identical = np.all((r1 == r2) & ((s1 == s2) | (r1 < 0)), axis=1)
        read = index.postings_read(batch_tok, k, threads=1)
        times = {"maxscore": np.zeros(len(prune_q)), "exhaustive": np.zeros(len(prune_q))}
        for method in times:
            index.search_tokens(prune_tok[0], k, threads=1, method=method)
        for _ in range(args.repeat):
            for i, t in enumerate(prune_tok):
                for method, out in times.items():
                    t0 = time.perf_counter()
                    index.search_tokens(t, k, threads=1, method=method)
                    took = time.perf_counter() - t0
                    out[i] = took if out[i] == 0 else min(out[i], took)
        print(
            f"\npruning (block-max MaxScore vs exhaustive, single questions, 1 thread, k={k}): "
            f"identical top-{k} (rows and float32 scores) on {identical.mean():.1%} of "
            f"{len(prune_q)} questions"
        )
        print(f"  {'known terms':12s}{'questions':>10s}{'postings':>12s}{'scored':>9s}"
              f"{'maxscore q/s':>14s}{'exhaustive q/s':>16s}{'speedup':>9s}")  # fmt: skip
        known_terms = _known_terms(index, prune_tok)
        for name, lo, hi in (*BUCKETS, ("all", 0, 10**9)):
            sel = (known_terms >= lo) & (known_terms <= hi) & (read[:, 1] > 0)
            if not sel.any():
                continue
            tm, te = times["maxscore"][sel].mean(), times["exhaustive"][sel].mean()
            print(
                f"  {name:12s}{int(sel.sum()):10d}{read[sel, 1].mean():12.0f}"
                f"{read[sel, 0].sum() / read[sel, 1].sum():9.2%}{1 / tm:14.0f}{1 / te:16.0f}"
                f"{te / tm:8.1f}x"
            )

    # -- at the level a user calls it --------------------------------------------
    if "retrieve" not in skip:
        retrieve_compare(args, texts, questions, bm25s)


def _known_terms(index: BM25Index, queries: list) -> np.ndarray:
    """Distinct query terms that occur in the index, per tokenised question."""
    vocab = index._state.vocab
    out = []
    for t in queries:
        h = np.unique(t.hashes)
        pos = np.minimum(np.searchsorted(vocab, h), max(vocab.size - 1, 0))
        out.append(int(np.count_nonzero(vocab[pos] == h)) if vocab.size else 0)
    return np.array(out)


def retrieve_compare(
    args: argparse.Namespace, texts: list[str], questions: list[str], bm25s
) -> None:
    """``KnowledgeBase.retrieve(q, k, mode="keyword")`` against bm25s ``retrieve``, same tokens."""
    from fastrag import KnowledgeBase

    t0 = time.perf_counter()
    kb = KnowledgeBase.build({"id": f"d{i}", "text": t} for i, t in enumerate(texts))
    build = time.perf_counter() - t0
    kb_tok = kb._corpus.keyword.tokenizer  # the tokens fastrag searches with, given to bm25s too
    chunks = kb._corpus.store.rows(np.arange(len(kb)), ["text"]).column("text").to_pylist()
    retriever = bm25s.BM25(
        k1=kb._corpus.keyword.k1, b=kb._corpus.keyword.b, method="lucene", backend="numba"
    )
    retriever.index(kb_tok.token_strings(chunks), show_progress=False)
    del chunks
    vocab = retriever.vocab_dict
    qs = questions[: args.single]
    q_ids = [[vocab[t] for t in q if t in vocab] for q in kb_tok.token_strings(qs)]
    pairs = [(q, ids) for q, ids in zip(qs, q_ids, strict=True) if ids]
    k = args.k
    for q, ids in pairs[:5]:
        kb.retrieve(q, k=k, mode="keyword")
        retriever.retrieve([ids], k=k, n_threads=1, show_progress=False)
    fr_t = np.zeros(len(pairs))
    bm_t = np.zeros(len(pairs))
    same = 0
    for rep in range(args.repeat):
        for i, (q, ids) in enumerate(pairs):
            t = time.perf_counter()
            hits = kb.retrieve(q, k=k, mode="keyword")
            a = time.perf_counter() - t
            t = time.perf_counter()
            docs, scores = retriever.retrieve([ids], k=k, n_threads=1, show_progress=False)
            b = time.perf_counter() - t
            fr_t[i] = a if rep == 0 else min(fr_t[i], a)
            bm_t[i] = b if rep == 0 else min(bm_t[i], b)
            if rep == 0:
                got = np.array([h.score for h in hits], dtype=np.float32)
                want = scores[0][: len(got)]
                same += bool(len(got) and np.allclose(got, want, rtol=1e-5, atol=1e-6))
    print(
        f"\nretrieve() at the user level: {len(kb):,} chunks (knowledge base built in {build:.0f} s), "
        f"{len(pairs)} questions one at a time, k={k}; scores of the top {k} equal bm25s's on "
        f"{same / len(pairs):.1%}"
    )
    print(f"  kb.retrieve(mode='keyword'), hits built  {1 / fr_t.mean():8.0f} q/s  "
          f"p50 {np.median(fr_t) * 1e3:6.3f} ms")  # fmt: skip
    print(f"  bm25s retrieve (token ids)               {1 / bm_t.mean():8.0f} q/s  "
          f"p50 {np.median(bm_t) * 1e3:6.3f} ms")  # fmt: skip
    print(f"  ratio (mean time)                        {bm_t.mean() / fr_t.mean():8.1f}x")
    print(f"  p99: fastrag {np.percentile(fr_t, 99) * 1e3:.3f} ms, bm25s "
          f"{np.percentile(bm_t, 99) * 1e3:.3f} ms")  # fmt: skip
    if args.breakdown:
        retrieve_breakdown(kb, pairs, fr_t, bm_t, args.repeat)


def retrieve_breakdown(kb, pairs: list, fr_t: np.ndarray, bm_t: np.ndarray, repeat: int) -> None:
    """Where the time of ``retrieve_compare`` goes: the keyword kernel alone, and the slowest questions."""
    keyword = kb._corpus.keyword
    tokens = [keyword.tokenizer.tokenize([q]) for q, _ in pairs]
    kern = np.full(len(pairs), np.inf)
    for _ in range(repeat):
        for i, t in enumerate(tokens):
            t0 = time.perf_counter()
            keyword.search_weighted(t, 10)
            kern[i] = min(kern[i], time.perf_counter() - t0)
    read = np.array([keyword.postings_read(t, 10, threads=1)[0] for t in tokens])
    slow = np.argsort(-fr_t)
    tenth = max(1, len(pairs) // 10)
    print(
        f"  keyword search alone (search_weighted): mean {kern.mean() * 1e3:.3f} ms, p50 "
        f"{np.median(kern) * 1e3:.3f}, p99 {np.percentile(kern, 99) * 1e3:.3f}; the call is "
        f"{fr_t.mean() / kern.mean():.1f}x it; the slowest tenth of the questions take "
        f"{fr_t[slow[:tenth]].sum() / fr_t.sum():.0%} of fastrag's time"
    )
    print("  slowest questions: retrieve ms, kernel ms, bm25s ms, postings read / of its terms")
    for i in slow[:10]:
        print(f"    {fr_t[i] * 1e3:7.3f} {kern[i] * 1e3:7.3f} {bm_t[i] * 1e3:7.3f} "
              f"{read[i, 0]:8d} / {read[i, 1]:8d}  {pairs[i][0]!r}")  # fmt: skip


if __name__ == "__main__":
    main()
