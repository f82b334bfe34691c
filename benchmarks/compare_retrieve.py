"""A vector ``retrieve()`` against plain numpy, side by side, with a plugged-in 384-d embedder.

    python benchmarks/compare_retrieve.py --docs 2000,20000 --questions 300 --repeat 5

What a user sees: ``kb.retrieve(q, k=10, mode="vector")`` (the question
embedded, exact search, hits built with text and metadata) against the
numpy way of the same thing: embed the question with the same embedder,
``vectors @ q``, ``argpartition`` + ``argsort`` of the top 10 (indices only,
no text). Both read the same float32 vectors (fastrag's, memory-mapped
after a save and load). The questions are embedded per call in both.

Per size, rounds are interleaved (fastrag, numpy, fastrag, ...) and the
medians over rounds of each one's median per-question latency are printed
with their ratio; the top-10 of both are checked to agree (ties aside).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from frameworks.common import HashedBigramEmbedder, generate_kb  # noqa: E402

from fastrag import KnowledgeBase, warmup  # noqa: E402


def numpy_top_k(vectors: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    s = vectors @ q
    part = np.argpartition(-s, k - 1)[:k]
    return part[np.argsort(-s[part])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--docs", default="2000,20000", help="documents per size (about 11 chunks each)"
    )
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None, help="retrieve(threads=...)")
    args = ap.parse_args()
    warmup()
    print(
        "| documents | chunks | fastrag retrieve() p50 ms | numpy p50 ms | numpy / fastrag | top-10 agree |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n_docs in (int(x) for x in args.docs.split(",")):
        docs, questions = generate_kb(n_docs, args.questions, seed=7)
        emb = HashedBigramEmbedder()
        with tempfile.TemporaryDirectory() as tmp:
            KnowledgeBase.build(docs, embedder=emb).save(Path(tmp) / "kb")
            kb = KnowledgeBase.load(Path(tmp) / "kb", embedder=emb)
            store = kb._corpus.store  # benchmark code: the very vectors fastrag searches
            vectors = np.ascontiguousarray(np.concatenate([s.vectors for s in store.segments]))
            ids = store.chunk_ids()
            qs = [q["text"] for q in questions]
            extra = {} if args.threads is None else {"threads": args.threads}
            agree = []
            for q in qs[:50]:
                ours = [h.chunk_id for h in kb.retrieve(q, k=args.k, mode="vector", **extra)]
                theirs = ids[numpy_top_k(vectors, emb.embed([q])[0], args.k)].tolist()
                agree.append(len(set(ours) & set(theirs)) / args.k)
            ours_ms, numpy_ms = [], []
            for _ in range(args.repeat):
                lat = []
                for q in qs:
                    t = time.perf_counter()
                    kb.retrieve(q, k=args.k, mode="vector", **extra)
                    lat.append(time.perf_counter() - t)
                ours_ms.append(statistics.median(lat) * 1e3)
                lat = []
                for q in qs:
                    t = time.perf_counter()
                    numpy_top_k(vectors, emb.embed([q])[0], args.k)
                    lat.append(time.perf_counter() - t)
                numpy_ms.append(statistics.median(lat) * 1e3)
            a, b = statistics.median(ours_ms), statistics.median(numpy_ms)
            print(
                f"| {n_docs:,} | {len(kb):,} | {a:.3f} | {b:.3f} | {b / a:.2f}x | "
                f"{statistics.mean(agree):.3f} |",
                flush=True,
            )
            kb.close()


if __name__ == "__main__":
    main()
