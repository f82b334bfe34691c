"""Bytes per chunk of each piece of a saved knowledge base, and what they make at 10M and 100M chunks.

Builds the benchmarks' mixed English/Chinese ``user_documents`` (seeded) with
``VocabularyEmbedder(max_features=384)``, saves it with ``index="exact"`` and
``index="hnsw"``, and reads the size of every file and of every column of the
chunk store. Bytes do not depend on the machine's load, so a small build is
enough; the 10M / 100M columns are per-chunk bytes times the chunk count
(BM25 vocabularies grow slower than the corpus, so its figures there are an
upper bound).

    python benchmarks/scale_bytes.py                # 2,000 documents, about 25,500 chunks
    python benchmarks/scale_bytes.py --docs 8000
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc

sys.path.append(str(Path(__file__).resolve().parent))  # the asv suite's seeded documents

SCALES = (10_000_000, 100_000_000)


def _sizes(path: str) -> dict[str, int]:
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            if f.endswith((".arrow", ".bin", ".faiss")):
                out[f] = out.get(f, 0) + os.path.getsize(os.path.join(root, f))
    return out


def _gb(x: float) -> str:
    return f"{x / 1e9:,.1f} GB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=2000)
    args = ap.parse_args()
    from benchmarks.common import user_documents

    from fastrag import KnowledgeBase, VocabularyEmbedder

    docs = user_documents(args.docs, seed=5)
    chars = sum(len(d["text"]) for d in docs)
    files: dict[str, int] = {}
    columns: dict[str, float] = {}
    n = 0
    for index in ("exact", "hnsw"):
        kb = KnowledgeBase.build(docs, embedder=VocabularyEmbedder(max_features=384), index=index)
        n = len(kb)
        with tempfile.TemporaryDirectory() as path:
            kb.save(path)
            kb.close()
            files.update(_sizes(path))
            if not columns:
                (chunks,) = Path(path).glob("snapshots/*/chunks.arrow")
                table = ipc.open_file(pa.memory_map(str(chunks))).read_all()
                columns = {c: table.column(c).nbytes / n for c in table.column_names}
    print(f"{len(docs):,} documents, {n:,} chunks, {chars / n:.0f} characters per chunk")
    print(
        "\nchunk store columns (B/chunk): " + ", ".join(f"{c} {b:.1f}" for c, b in columns.items())
    )
    vec = columns["vector"]
    rest = sum(b for c, b in columns.items() if c != "vector")
    per = {
        "chunk store without vectors (text, metadata)": rest,
        "vectors (384 float32, in chunks.arrow)": vec,
        "chunk BM25 (bm25.arrow)": files["bm25.arrow"] / n,
        "document BM25 (bm25_docs.arrow)": files["bm25_docs.arrow"] / n,
        "HNSW graph (hnsw.bin, vectors included)": files["hnsw.bin"] / n,
    }
    print(f"\n{'piece':48s} {'B/chunk':>9s} " + " ".join(f"{s:>14,d}" for s in SCALES))
    for name, b in per.items():
        print(f"{name:48s} {b:9.1f} " + " ".join(f"{_gb(b * s):>14s}" for s in SCALES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
