"""Retrieval quality of fastrag's BM25 on a BEIR-layout set (chunked documents).

Documents (title + "\\n" + text) are cut with ``fastrag.Chunker(window,
overlap)``, every chunk is a row of a ``BM25Index``, the top ``--depth``
chunks of every query are retrieved and each document is scored by its best
chunk. Prints nDCG@10, Recall@100 and MRR@10.

    python benchmarks/eval_bm25.py --data ../shared/datasets/scifact --stem porter
    python benchmarks/eval_bm25.py --data ../shared/datasets/cmrc2018
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from fastrag.datasets.beir import evaluate, load_beir

from fastrag.index.keyword import BM25Index
from fastrag.text import Chunker
from fastrag.text.tokenize import Tokenizer


def mrr_at_k(ranked: list[str], relevant: dict[str, int], k: int = 10) -> float:
    for i, d in enumerate(ranked[:k]):
        if relevant.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="BEIR folder (corpus, queries, qrels)")
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--overlap", type=int, default=40)
    parser.add_argument("--stem", choices=["none", "porter"], default="none")
    parser.add_argument("--stopwords", choices=["english", "none"], default="english")
    parser.add_argument("--cjk", default="unigram+bigram")
    parser.add_argument("--k1", type=float, default=0.9)
    parser.add_argument("--b", type=float, default=0.4)
    parser.add_argument("--depth", type=int, default=1000, help="chunks retrieved per query")
    args = parser.parse_args()

    ds = load_beir(args.data)
    docs = list(ds.documents())
    doc_ids = [d["id"] for d in docs]
    t0 = time.perf_counter()
    chunks = Chunker(args.window, args.overlap).chunk([d["text"] for d in docs])
    tokenizer = Tokenizer(
        stopwords=None if args.stopwords == "none" else "english",
        stem=None if args.stem == "none" else args.stem,
        cjk=args.cjk,
    )
    t1 = time.perf_counter()
    index = BM25Index.build(chunks.text_data, chunks.text_offsets, tokenizer, k1=args.k1, b=args.b)
    t2 = time.perf_counter()
    questions = [q["text"] for q in ds.queries]
    rows, scores = index.search(questions, args.depth)
    t3 = time.perf_counter()
    chunk_doc = chunks.chunk_doc
    run: dict[str, list[str]] = {}
    for q, r in zip(ds.queries, rows, strict=False):
        seen: dict[str, None] = {}
        for row in r[r >= 0].tolist():
            seen.setdefault(doc_ids[chunk_doc[row]], None)
        run[q["_id"]] = list(seen)
    result = evaluate(run, ds.qrels)
    mrr = float(np.mean([mrr_at_k(run[q], ds.qrels[q]) for q in ds.qrels if q in run]))
    print(
        f"{args.data.rstrip('/').split('/')[-1]} window={args.window} overlap={args.overlap} "
        f"stem={args.stem} stopwords={args.stopwords} cjk={args.cjk}: "
        f"{len(chunks)} chunks, {index.n_terms} terms"
    )
    print(
        f"nDCG@10={result['ndcg@10']:.4f}  R@100={result['recall@100']:.4f}  "
        f"MRR@10={mrr:.4f}  ({result['queries']} queries)"
    )
    print(f"chunk {t1 - t0:.2f} s, index {t2 - t1:.2f} s, {len(questions)} queries {t3 - t2:.2f} s")


if __name__ == "__main__":
    main()
