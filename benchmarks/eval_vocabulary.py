"""Quality and cost of the VocabularyEmbedder's vocabulary cap on real retrieval sets.

    python benchmarks/eval_vocabulary.py --data ../shared/datasets/cmrc2018 --caps 256,384,512,1024,2048,0

Builds one knowledge base per cap (documents = title + text, chunks 200/40),
retrieves 300 chunks per question, keeps each document's best chunk, and
reports nDCG@10 and Recall@100 against the qrels, with the vector bytes and the
batch retrieval throughput of each cap.
"""

from __future__ import annotations

import argparse
import time

from fastrag.datasets.beir import evaluate, load_beir

from fastrag import KnowledgeBase, VocabularyEmbedder, warmup


def doc_ranking(table, m: int) -> list[list[str]]:
    """Per question: document ids in order of their best chunk."""
    q = table.column("query_index").to_numpy()
    docs = table.column("doc_id").to_pylist()
    out: list[list[str]] = [[] for _ in range(m)]
    seen: list[set[str]] = [set() for _ in range(m)]
    for qi, d in zip(q.tolist(), docs, strict=False):
        if d not in seen[qi]:
            seen[qi].add(d)
            out[qi].append(d)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data", required=True, help="BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv)"
    )
    ap.add_argument(
        "--caps", default="256,384,512,1024,2048,0", help="max_features values, 0 = no cap"
    )
    ap.add_argument("--chunks", type=int, default=300, help="chunks retrieved per question")
    ap.add_argument("--no-lowercase", action="store_true")
    args = ap.parse_args()

    warmup()
    ds = load_beir(args.data)
    questions = [q["text"] for q in ds.queries]
    qids = [q["_id"] for q in ds.queries]
    print(f"{args.data}: {len(questions)} questions")
    print(
        f"{'cap':>6} {'dim':>6} {'chunks':>8} {'nDCG@10':>8} {'R@100':>7} {'MB vectors':>11} {'q/s batch':>10}"
    )
    for cap in [int(c) for c in args.caps.split(",")]:
        emb = VocabularyEmbedder(None if cap == 0 else cap, lowercase=not args.no_lowercase)
        kb = KnowledgeBase.build(ds.documents(), embedder=emb)
        kb.retrieve_batch(questions[:8], k=args.chunks)
        t = time.perf_counter()
        table = kb.retrieve_batch(questions, k=args.chunks)
        secs = time.perf_counter() - t
        ranking = doc_ranking(table, len(questions))
        scores = evaluate(dict(zip(qids, ranking, strict=False)), ds.qrels)
        s = kb.stats()
        label = "none" if cap == 0 else str(cap)
        print(
            f"{label:>6} {s['dim']:>6} {s['chunks']:>8} {scores['ndcg@10']:>8.4f} "
            f"{scores['recall@100']:>7.4f} {s['vector_bytes'] / 1e6:>11.1f} {len(questions) / secs:>10.0f}"
        )


if __name__ == "__main__":
    main()
