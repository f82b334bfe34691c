"""Million-chunk scale: build throughput and memory, then load + first retrieve.

    python benchmarks/scale_build_load.py --chunks 1000000 --workdir /tmp/fastrag-scale [--embedder default]

1. Writes a seeded mixed English/Chinese corpus as JSON Lines (once; reused).
2. In a child process: ``KnowledgeBase.build(read_jsonl(...))`` with
   ``VocabularyEmbedder(max_features=384)`` (``--embedder 384``, default) or
   the default ``VocabularyEmbedder()`` (``--embedder default``: up to 1,024
   columns), JSON parsing included, then ``save``; reports MB/s of UTF-8
   text, peak resident memory (ru_maxrss) and the size on disk. The same
   process then builds again (``--builds``): on this VM the first touch of
   fresh memory is slow (the host backs it page by page), later builds
   reuse memory the process already had.
3. In a fresh child process, the two keyword indexes alone, from the saved
   store's chunk texts: the chunk BM25 and the document BM25 (documents
   joined from their windows) each tokenised, then both as a build makes
   them (``add_with_documents``: the documents' tokens taken from the
   chunks'), seconds and peak resident memory above the mapped store
   (``--bm25-builds`` times).
4. In a fresh child process: ``warmup()``, then ``KnowledgeBase.load`` and
   the first ``retrieve``, timed together, with the resident-memory growth.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import orjson

CHILD_BUILD = r"""
import json, resource, sys, time
from fastrag import KnowledgeBase, VocabularyEmbedder, warmup
from fastrag.store.sources import read_jsonl
corpus, out, threads, builds, embedder = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
warmup()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
def build():
    t = time.perf_counter()
    emb = VocabularyEmbedder() if embedder == "default" else VocabularyEmbedder(max_features=int(embedder))
    kb = KnowledgeBase.build(read_jsonl(corpus), embedder=emb,
                             threads=None if threads == "0" else int(threads))
    return kb, time.perf_counter() - t
kb, first = build()
t = time.perf_counter()
kb.save(out, overwrite=True)
save = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
s = kb.stats()
del kb
again = []
for _ in range(builds - 1):
    kb, seconds = build()
    del kb
    again.append(seconds)
print(json.dumps({"build_s": first, "rebuild_s": again, "save_s": save, "peak_rss": peak, "base_rss": base,
                  "chunks": s["chunks"], "documents": s["documents"], "dim": s["dim"]}))
"""

CHILD_BM25 = r"""
import json, resource, sys, time
import numpy as np
from fastrag import KnowledgeBase, warmup
from fastrag._native.chunking import join_windows
from fastrag._native.structure import join_chunks
from fastrag.index.keyword import BM25Index, add_with_documents
from fastrag.text.utf8 import utf8_buffers
warmup()
kb = KnowledgeBase.load(sys.argv[1])
(seg,) = kb._corpus.store.segments
data, offsets = utf8_buffers(seg.batch.column("text"))
tok = kb._corpus.keyword.tokenizer
codes = seg.batch.column("doc_id").indices.to_numpy(zero_copy_only=False)
starts = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
doc_starts = np.append(starts, codes.size).astype(np.int64)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
runs = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    chunk = BM25Index.build(data, offsets, tok)
    t1 = time.perf_counter() - t
    t = time.perf_counter()
    doc_data, doc_offsets = join_windows(data, offsets, doc_starts, kb._settings.chunker.overlap)
    doc = BM25Index.build(doc_data, doc_offsets, tok)
    t2 = time.perf_counter() - t
    del chunk, doc
    # both the way a build makes them: the documents' tokens from the chunks'
    starts = seg.batch.column("start").to_numpy(zero_copy_only=False)
    ends = seg.batch.column("end").to_numpy(zero_copy_only=False)
    t = time.perf_counter()
    chunk, doc = BM25Index(tok), BM25Index(tok)
    joined = join_chunks(data, offsets, starts, ends, doc_starts)
    add_with_documents(chunk, doc, data, offsets, starts, ends, doc_starts, *joined)
    t3 = time.perf_counter() - t
    runs.append({"chunk_s": t1, "doc_s": t2, "both_s": t3, "chunk_postings": chunk.n_postings,
                 "doc_postings": doc.n_postings, "doc_bytes": int(doc_data.size),
                 "peak_growth": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base})
    del chunk, doc, doc_data, doc_offsets, joined
print(json.dumps({"text_bytes": int(data.size), "chunks": int(offsets.size - 1), "runs": runs}))
"""

CHILD_LOAD = r"""
import json, sys, time
from fastrag import KnowledgeBase, warmup
def status():
    out = {}
    for line in open("/proc/self/status"):
        key, value = line.split(":", 1)
        if key in ("VmRSS", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) * 1024
    return out
path = sys.argv[1]
t = time.perf_counter(); warmup(); warm = time.perf_counter() - t
s0 = status()
t = time.perf_counter()
kb = KnowledgeBase.load(path)
hits = kb.retrieve("年假申请需提前几天提交 annual leave", k=5)
first = time.perf_counter() - t
s1 = status()
t = time.perf_counter()
for _ in range(5):
    kb.retrieve("expense reports 报销", k=5)
again = (time.perf_counter() - t) / 5
print(json.dumps({"warmup_s": warm, "load_first_retrieve_s": first,
                  "rss_growth": s1["VmRSS"] - s0["VmRSS"], "anon_growth": s1["RssAnon"] - s0["RssAnon"],
                  "file_growth": s1["RssFile"] - s0["RssFile"],
                  "vector_bytes": kb.stats()["vector_bytes"], "retrieve_s": again, "hits": len(hits)}))
"""


def write_corpus(path: Path, chunks: int) -> int:
    from fastrag.datasets.synthetic import mixed_documents

    # 200/40 windows advance 160 characters: about chunks * 160 characters of text.
    target = chunks * 160
    total = 0
    n = 0
    with open(path, "wb") as fh:
        for doc in mixed_documents(10**9, seed=7, mean_chars=2000):
            fh.write(orjson.dumps(doc) + b"\n")
            total += len(doc["text"])
            n += 1
            if total >= target:
                break
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--workdir", default="/tmp/fastrag-scale")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="load+retrieve runs (fresh processes)")
    ap.add_argument(
        "--embedder", default="384", help="'default' (VocabularyEmbedder()) or max_features"
    )
    ap.add_argument("--bm25-builds", type=int, default=2, help="keyword-index builds (step 3)")
    ap.add_argument(
        "--builds",
        type=int,
        default=3,
        help="builds in the build process: the first pays for fresh memory, later ones reuse it",
    )
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / f"corpus-{args.chunks}.jsonl"
    if not corpus.exists():
        t = time.perf_counter()
        n = write_corpus(corpus, args.chunks)
        print(f"wrote {n:,} documents to {corpus} in {time.perf_counter() - t:.0f} s")
    text_bytes = sum(len(orjson.loads(line)["text"].encode()) for line in open(corpus, "rb"))
    kb_dir = work / "kb"
    shutil.rmtree(kb_dir, ignore_errors=True)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD_BUILD,
            str(corpus),
            str(kb_dir),
            str(args.threads),
            str(args.builds),
            args.embedder,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    b = json.loads(out.stdout.strip().splitlines()[-1])
    disk = sum(f.stat().st_size for f in kb_dir.rglob("*") if f.is_file())
    print(
        f"build: {b['documents']:,} documents, {b['chunks']:,} chunks, dim {b['dim']} "
        f"(embedder {args.embedder})"
    )
    print(
        f"  text {text_bytes / 1e6:,.0f} MB in {b['build_s']:.2f} s = {text_bytes / 1e6 / b['build_s']:.1f} MB/s "
        f"(first build of a fresh process; save {b['save_s']:.2f} s)"
    )
    for i, secs in enumerate(b["rebuild_s"], 2):
        print(f"  build {i} in the same process: {secs:.2f} s = {text_bytes / 1e6 / secs:.1f} MB/s")
    print(
        f"  peak RSS {b['peak_rss'] / 1e9:.2f} GB (before build {b['base_rss'] / 1e9:.2f} GB), "
        f"store on disk {disk / 1e9:.2f} GB, ratio {b['peak_rss'] / disk:.2f}x"
    )
    out = subprocess.run(
        [sys.executable, "-c", CHILD_BM25, str(kb_dir), str(args.bm25_builds)],
        check=True,
        capture_output=True,
        text=True,
    )
    kw = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"keyword indexes alone ({kw['chunks']:,} chunks, {kw['text_bytes'] / 1e6:,.0f} MB of chunk text):"
    )
    for i, r in enumerate(kw["runs"], 1):
        print(
            f"  build {i}: chunk BM25 {r['chunk_s']:.2f} s ({r['chunk_postings']:,} postings, "
            f"{kw['text_bytes'] / 1e6 / r['chunk_s']:.0f} MB/s), document BM25 {r['doc_s']:.2f} s "
            f"({r['doc_postings']:,} postings, {r['doc_bytes'] / 1e6:,.0f} MB joined); both as a "
            f"build makes them (document tokens from the chunks') {r['both_s']:.2f} s; peak "
            f"resident memory above the mapped store {r['peak_growth'] / 1e9:.2f} GB"
        )
    runs = []
    for _ in range(args.repeat):
        subprocess.run(["sync"], check=False)
        out = subprocess.run(
            [sys.executable, "-c", CHILD_LOAD, str(kb_dir)],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    runs.sort(key=lambda r: r["load_first_retrieve_s"])
    r = runs[len(runs) // 2]
    print(
        f"load + first retrieve (median of {len(runs)} fresh processes, after warmup() "
        f"{r['warmup_s']:.2f} s): {r['load_first_retrieve_s'] * 1e3:.0f} ms; "
        f"RSS growth {r['rss_growth'] / 1e6:.0f} MB (anonymous {r['anon_growth'] / 1e6:.0f} MB, "
        f"mapped file pages {r['file_growth'] / 1e6:.0f} MB) vs {r['vector_bytes'] / 1e6:.0f} MB of vectors; "
        f"next retrieves {r['retrieve_s'] * 1e3:.1f} ms each"
    )
    print(
        json.dumps(
            {"build": b, "disk": disk, "text_bytes": text_bytes, "keyword": kw, "load": runs}
        ),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
