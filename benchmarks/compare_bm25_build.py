"""The BM25 builds before and after issue 21's parallel build, in one process, interleaved.

    python benchmarks/compare_bm25_build.py --chunks 200000 --workdir /tmp/fastrag-scale [--rounds 3] [--whole]

Reuses (or writes) the seeded corpus of ``scale_build_load.py``, builds the
knowledge base once, then times the two keyword indexes of its store (the
chunk BM25 and the document BM25, tokenisation included) built the current
way (``build_postings``) and the serial way they were built before
(``tests/naive/bm25.py`` ``serial_postings`` on the kernels of
``tests/naive/bm25_serial.py``: per-text sorts, one serial hash table over
every pair, a serial counting sort), alternating, ``--rounds``
times each; prints the medians and their ratio, and checks that both give
the same arrays. ``--whole`` also times the whole ``KnowledgeBase.build``
(default embedder, both keyword legs) both ways, alternating. Give the load
average with the figures (``uptime``): the ratio is what to quote.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def main() -> None:
    from fastrag._native import bm25 as kernels
    from naive import bm25 as naive
    from scale_build_load import write_corpus

    from fastrag import KnowledgeBase, VocabularyEmbedder, warmup
    from fastrag.index import keyword
    from fastrag.store.ingest import keyword_texts
    from fastrag.store.sources import read_jsonl

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--workdir", default="/tmp/fastrag-scale")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--whole", action="store_true", help="also the whole build, both ways")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus-{args.chunks}.jsonl"
    if not corpus.exists():
        write_corpus(corpus, args.chunks)
    warmup()
    new_postings = kernels.build_postings

    def build(serial: bool) -> tuple[KnowledgeBase, float]:
        keyword._kernels.build_postings = naive.serial_postings if serial else new_postings
        try:
            t = time.perf_counter()
            kb = KnowledgeBase.build(read_jsonl(corpus), embedder=VocabularyEmbedder())
            return kb, time.perf_counter() - t
        finally:
            keyword._kernels.build_postings = new_postings

    kb, _ = build(False)
    (seg,) = kb._corpus.store.segments
    chunk_texts, doc_texts = keyword_texts(seg.batch)
    tok = kb._corpus.keyword.tokenizer
    n_bytes = int(chunk_texts[0].size + doc_texts[0].size)
    times: dict[str, list[float]] = {"new": [], "serial": []}
    whole: dict[str, list[float]] = {"new": [], "serial": []}
    ref_state = None
    for _ in range(args.rounds):
        for way in ("serial", "new"):
            keyword._kernels.build_postings = (
                naive.serial_postings if way == "serial" else new_postings
            )
            try:
                t = time.perf_counter()
                a = keyword.BM25Index.build(*chunk_texts, tok)
                b = keyword.BM25Index.build(*doc_texts, tok)
                times[way].append(time.perf_counter() - t)
            finally:
                keyword._kernels.build_postings = new_postings
            state = [x.copy() for x in (*a._state, *b._state)]
            if ref_state is None:
                ref_state = state
            assert all(np.array_equal(x, y) for x, y in zip(ref_state, state, strict=True))
            del a, b, state
    load = os.getloadavg()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"{len(kb):,} chunks; both keyword indexes ({n_bytes / 1e6:,.0f} MB of chunk and "
        f"document text), median of {args.rounds}: serial {med['serial']:.2f} s, "
        f"new {med['new']:.2f} s, ratio {med['serial'] / med['new']:.2f}x "
        f"(identical arrays); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    if args.whole:
        del kb
        for _ in range(args.rounds):
            for way in ("serial", "new"):
                kb, seconds = build(way == "serial")
                whole[way].append(seconds)
                del kb
        load = os.getloadavg()
        med = {k: statistics.median(v) for k, v in whole.items()}
        print(
            f"whole KnowledgeBase.build, median of {args.rounds}: serial {med['serial']:.2f} s, "
            f"new {med['new']:.2f} s, ratio {med['serial'] / med['new']:.2f}x; "
            f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )


if __name__ == "__main__":
    main()
