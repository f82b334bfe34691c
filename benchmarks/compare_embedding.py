"""Vocabulary embedding: fastrag's kernel against the pure-Python references, one process.

    python benchmarks/compare_embedding.py --mb 20 --repeat 3

The references are the seed's algorithm (``vocab.index(ch)`` for every
character, as JavaScript's ``indexOf``) and a dict-lookup version; both run on
a subset of the chunks (they are slow) and their vectors are checked against
fastrag's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.append(
    str(Path(__file__).resolve().parents[1] / "tests")
)  # naive references; installed fastrag first

from fastrag.datasets.synthetic import mixed_texts  # noqa: E402
from naive.embedding import embed_dict, embed_index_of  # noqa: E402

from fastrag import VocabularyEmbedder, warmup  # noqa: E402
from fastrag.text import Chunker  # noqa: E402


def timed(fn, repeat):
    times = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0, help="MB of mixed text to chunk and embed")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-features", default="384,1024,0", help="vocabulary caps, 0 = none")
    ap.add_argument("--index-of-chunks", type=int, default=1000)
    ap.add_argument("--dict-chunks", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()

    warmup()
    texts = mixed_texts(int(args.mb * 1e6 / 1.6), seed=0)
    chunks = Chunker(200, 40).chunk(texts)
    chunk_texts = chunks.texts()
    n = len(chunk_texts)
    print(f"{n:,} chunks of mixed English/Chinese text ({args.mb:.0f} MB of documents)")
    print(f"{'max_features':>12} {'dim':>6} {'system':<22} {'chunks/s':>14} {'vs dict':>9}")
    for cap in [int(c) for c in args.max_features.split(",")]:
        emb = VocabularyEmbedder(None if cap == 0 else cap).fit(chunk_texts[:50000])
        dim = emb.dim
        vocab = emb.vocabulary
        column = {ch: j for j, ch in enumerate(vocab)}
        sub_i = chunk_texts[: args.index_of_chunks]
        sub_d = chunk_texts[: args.dict_chunks]
        t_i, ref_i = timed(lambda: [embed_index_of(t, vocab) for t in sub_i], 1)
        t_d, ref_d = timed(lambda: [embed_dict(t, column, dim) for t in sub_d], 1)
        out = np.empty((n, dim), dtype=np.float32)
        out.fill(0)  # fault the pages in outside the timed region
        t_f, got = timed(
            lambda: emb.embed_utf8(
                chunks.text_data, chunks.text_offsets, out=out, threads=args.threads
            ),
            args.repeat,
        )
        np.testing.assert_allclose(got[: len(sub_i)], np.array(ref_i), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[: len(sub_d)], np.array(ref_d), rtol=1e-5, atol=1e-6)
        rate_i, rate_d, rate_f = len(sub_i) / t_i, len(sub_d) / t_d, n / t_f
        label = "none" if cap == 0 else str(cap)
        for name, rate in (
            ("seed indexOf (Python)", rate_i),
            ("dict lookup (Python)", rate_d),
            ("fastrag", rate_f),
        ):
            print(f"{label:>12} {dim:>6} {name:<22} {rate:>14,.0f} {rate / rate_d:>8.1f}x")
        gb = n * dim * 4 / t_f / 1e9
        print(f"{'':>12} {'':>6} {'(fastrag output write rate)':<22} {gb:>11.2f} GB/s")


if __name__ == "__main__":
    main()
