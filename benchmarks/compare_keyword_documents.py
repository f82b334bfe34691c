"""Both keyword indexes of a build: documents tokenised again (before) or from the chunks' tokens.

    python benchmarks/compare_keyword_documents.py --chunks 200000 --workdir /tmp/fastrag-scale [--rounds 2] [--whole]

Reuses (or writes) the seeded corpus of ``scale_build_load.py`` and chunks it
as a build does (200/40 windows); then builds the chunk BM25 and the
document BM25 (``Tokenizer(stem="porter")``, a knowledge base's) the way a
build did before (``chunks.add`` on the chunk texts, ``documents.add`` on
the joined documents: every document tokenised again) and the way it does
now (``add_with_documents``: the documents' tokens taken from the chunks'),
alternating, ``--rounds`` times each after one unmeasured build of each
(compiling, the stem cache); prints the medians, their ratio, the share of
documents tokenised again, and checks that both give the same arrays.
``--whole`` also times the whole ``KnowledgeBase.build`` (default embedder,
both keyword legs) both ways, alternating. Give the load average with the
figures (``uptime``): the ratio is what to quote.
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


def main() -> None:
    import orjson
    from fastrag._native import tokenize as tk
    from fastrag._native.structure import join_chunks
    from scale_build_load import write_corpus

    from fastrag import KnowledgeBase, VocabularyEmbedder, warmup
    from fastrag.corpus import build as build_mod
    from fastrag.index.keyword import BM25Index, add_with_documents
    from fastrag.store.sources import read_jsonl
    from fastrag.text.chunking import Chunker
    from fastrag.text.tokenize import Tokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--workdir", default="/tmp/fastrag-scale")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--whole", action="store_true", help="also the whole build, both ways")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus-{args.chunks}.jsonl"
    if not corpus.exists():
        write_corpus(corpus, args.chunks)
    warmup()
    texts = [orjson.loads(line)["text"] for line in open(corpus, "rb")]
    chunks = Chunker().chunk(texts)
    del texts
    data, offsets = chunks.text_data, chunks.text_offsets
    starts, ends = chunks.chunk_start, chunks.chunk_end
    doc_starts = np.unique(np.searchsorted(chunks.chunk_doc, np.arange(chunks.n_docs + 1))).astype(
        np.int64
    )
    doc_data, doc_offsets = join_chunks(data, offsets, starts, ends, doc_starts)
    tok = Tokenizer(stem="porter")

    def before(c: BM25Index, d: BM25Index, *a: np.ndarray, threads: int | None = None) -> None:
        c.add(a[0], a[1], threads=threads)
        d.add(a[5], a[6], threads=threads)

    def keyword(new: bool) -> tuple[float, BM25Index, BM25Index]:
        c, d = BM25Index(tok), BM25Index(tok)
        t = time.perf_counter()
        (add_with_documents if new else before)(
            c, d, data, offsets, starts, ends, doc_starts, doc_data, doc_offsets
        )
        return time.perf_counter() - t, c, d

    keyword(False)
    keyword(True)
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for new in (False, True):
            seconds, c, d = keyword(new)
            times[new].append(seconds)
            result = (c, d) if new else None
            if not new:
                ref = (c, d)
        del c, d
    assert result is not None
    for x, y in zip(ref, result, strict=True):
        for name, a, b in zip(x._state._fields, x._state, y._state, strict=True):
            assert np.array_equal(a, b), f"{name} differs"
    tokens, tok_starts = tok.tokenize_starts(data, offsets)
    *_, counts = tk.document_pieces(
        data, offsets, starts, ends, doc_starts, doc_data, doc_offsets, tokens.offsets,
        tok_starts, tok.kernel_tables().classes,
    )  # fmt: skip
    b, a = statistics.median(times[False]), statistics.median(times[True])
    print(
        f"{len(starts):,} chunks, {doc_starts.size - 1:,} documents, "
        f"{data.size / 1e6:.0f} MB of chunk text; load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"both keyword indexes: before {b:.2f} s, after {a:.2f} s (medians of {args.rounds}), "
        f"{b / a:.2f}x; arrays identical; documents tokenised again "
        f"{(counts < 0).mean() * 100:.2f} %"
    )
    if args.whole:
        wtimes: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for new in (False, True):
                build_mod.add_with_documents = add_with_documents if new else before  # type: ignore[assignment]
                t = time.perf_counter()
                kb = KnowledgeBase.build(read_jsonl(corpus), embedder=VocabularyEmbedder())
                wtimes[new].append(time.perf_counter() - t)
                del kb
        build_mod.add_with_documents = add_with_documents  # type: ignore[assignment]
        b, a = statistics.median(wtimes[False]), statistics.median(wtimes[True])
        print(
            f"whole KnowledgeBase.build: before {b:.2f} s, after {a:.2f} s, {b / a:.2f}x; "
            f"load average {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
