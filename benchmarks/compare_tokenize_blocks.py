"""A stemming tokenizer over a build's chunks: counted then filled (before) or one pass by blocks (after).

    python benchmarks/compare_tokenize_blocks.py --chunks 200000 --workdir /tmp/fastrag-scale [--rounds 5]

Reuses (or writes) the seeded corpus of ``scale_build_load.py`` and chunks it
as a build does (200/40 windows); then tokenises the chunk texts with
``Tokenizer(stem="porter")`` and their start bytes (what a build's keyword
legs ask for) both ways in one process, alternating, after one unmeasured
call of each (the stem cache is warm for both): before, the kernels of the
previous step (a count pass, a fill pass with spans, the serial
``distinct_words`` and ``replace_words``: ``Tokenizer._run``); after, the
one pass by blocks with the blocks' distinct words and the packing pass
that writes the stems (``Tokenizer._run_stemmed``). Prints the medians (wall
and CPU seconds), their ratios, and checks that both give the same arrays.
Give the load average with the figures (``uptime``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import orjson
    from scale_build_load import write_corpus

    from fastrag import warmup
    from fastrag.text.chunking import Chunker
    from fastrag.text.tokenize import Tokenizer

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--workdir", default="/tmp/fastrag-scale")
    ap.add_argument("--rounds", type=int, default=5)
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
    tok = Tokenizer(stem="porter")
    ways = {
        "before": lambda: tok._run(data, offsets, spans=True),
        "after": lambda: tok._run_stemmed(data, offsets, starts=True),
    }
    got = {name: way() for name, way in ways.items()}  # unmeasured: the stem cache, paging
    (b_tokens, b_starts), (a_tokens, a_starts) = got["before"], got["after"]
    same = (
        np.array_equal(b_tokens.hashes, a_tokens.hashes)
        and np.array_equal(b_tokens.offsets, a_tokens.offsets)
        and np.array_equal(b_starts, a_starts)
    )
    del got, b_tokens, b_starts, a_tokens, a_starts
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for r in range(args.rounds):
        for name in ways if r % 2 == 0 else list(ways)[::-1]:
            t, c = time.perf_counter(), time.process_time()
            out = ways[name]()
            times[name].append((time.perf_counter() - t, time.process_time() - c))
            del out
    print(
        f"{offsets.size - 1:,} chunks, {data.size / 1e6:,.1f} MB of chunk text; same arrays: {same}"
    )
    med = {n: [statistics.median(x[i] for x in v) for i in (0, 1)] for n, v in times.items()}
    for name, (wall, cpu) in med.items():
        print(f"  {name:6s} {wall:.3f} s wall ({data.size / 1e6 / wall:.0f} MB/s), {cpu:.3f} s CPU")
    print(
        f"  before/after: {med['before'][0] / med['after'][0]:.2f}x wall, "
        f"{med['before'][1] / med['after'][1]:.2f}x CPU"
    )


if __name__ == "__main__":
    main()
