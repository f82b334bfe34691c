"""Where a build's and a save's seconds go, stage by stage.

    python benchmarks/scale_build_stages.py CORPUS.jsonl [--out DIR] [--embedder default]

Builds ``KnowledgeBase.build(read_jsonl(CORPUS))`` (a corpus written by
``scale_build_load.py``: ``--workdir/corpus-N.jsonl``) in this process, then
saves it to ``--out`` (default: a temporary directory, removed after), with
every stage's function wrapped in a timer: reading and validating documents,
chunking, the vocabulary fit, embedding (and the rest of the segment's
assembly), the keyword legs (the chunk tokens, both legs' postings and
weights, the documents' tokens from the chunks'), the vector index, the
fusion tuning; and in the save the chunk store, the BM25 files, the manifest
and the final flush. Nested stages are indented; a parent's seconds include
its children's. Stages that run once per batch are summed. The wrappers cost
microseconds per call (a few hundred calls in a million-chunk build).

Prints seconds, share of the build and MB/s of UTF-8 chunk text (overlaps counted in every
chunk: more bytes than the documents' text, which scale_build_load.py divides by).
"""

from __future__ import annotations

import argparse
import functools
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import fastrag.corpus.build as build
import fastrag.embed.vocabulary as vocabulary
import fastrag.index.keyword as keyword
import fastrag.kb as kbmod
import fastrag.store.chunks as chunks
import fastrag.store.ingest as ingest
import fastrag.store.snapshots as snapshots
import fastrag.text.chunking as chunking
import fastrag.text.tokenize as tokenize
from fastrag import KnowledgeBase, VocabularyEmbedder, warmup
from fastrag.store.sources import read_jsonl

SECONDS: dict[str, float] = {}
CALLS: dict[str, int] = {}


def _timed(owner: Any, name: str, label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SECONDS[label] = SECONDS.get(label, 0.0) + time.perf_counter() - t
            CALLS[label] = CALLS.get(label, 0) + 1

    setattr(owner, name, wrapper)


def _timed_factory(owner: Any, name: str, label: str) -> None:
    """Time the calls of the function ``owner.name`` returns (``build._embed``'s callback)."""
    make = getattr(owner, name)

    @functools.wraps(make)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        fn = make(*args, **kwargs)

        def timed(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                SECONDS[label] = SECONDS.get(label, 0.0) + time.perf_counter() - t
                CALLS[label] = CALLS.get(label, 0) + 1

        return timed

    setattr(owner, name, wrapper)


def _timed_iter(owner: Any, name: str, label: str) -> None:
    """A generator's own time (between its yields), not its consumer's."""
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        it = iter(fn(*args, **kwargs))
        while True:
            t = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                SECONDS[label] = SECONDS.get(label, 0.0) + time.perf_counter() - t
            CALLS[label] = CALLS.get(label, 0) + 1
            yield item

    setattr(owner, name, wrapper)


BUILD = [
    (ingest, "iter_batches", "read + validate documents (JSON parsing included)", True),
    (chunking.Chunker, "chunk", "chunking", False),
    (vocabulary.CodepointCounter, "add", "codepoint counts (vocabulary fit)", False),
    (vocabulary.VocabularyEmbedder, "fit_counts", "vocabulary from counts", False),
    (build, "assemble", "assemble the segment (embedding included)", False),
    (build, "_embed", "  embedding", False),
    (build, "_index_keywords", "keyword legs (chunks and documents)", False),
    (build, "keyword_texts", "  join documents from chunks", False),
    (tokenize.Tokenizer, "tokenize_starts", "  tokenize chunks (with stems)", False),
    (keyword.BM25Index, "_add_tokens", "  postings + weights (2 legs)", False),
    (keyword._tokenize_kernels, "document_pieces", "  document pieces", False),
    (
        keyword._tokenize_kernels,
        "gather_document_tokens",
        "  documents' tokens from chunks'",
        False,
    ),
    (build, "choose_index", "vector index", False),
    (kbmod.KnowledgeBase, "_tune_at_build", "fusion tuning", False),
]
SAVE = [
    (chunks.ChunkStore, "write", "chunks.arrow + tombstones.arrow", False),
    (keyword.BM25Index, "save", "bm25.arrow + bm25_docs.arrow", False),
    (snapshots, "fsync_dir", "directory fsyncs", False),
    (snapshots, "atomic_write_bytes", "manifest.json", False),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("corpus")
    ap.add_argument("--out", default=None, help="save here (default: a temporary directory)")
    ap.add_argument("--embedder", default="default", help="'default' or max_features")
    args = ap.parse_args()
    for owner, name, label, gen in BUILD + SAVE:
        if name == "_embed":
            _timed_factory(owner, name, label)
        else:
            (_timed_iter if gen else _timed)(owner, name, label)
    warmup()  # builds a tiny knowledge base: its stages are not counted
    SECONDS.clear()
    CALLS.clear()
    emb = (
        VocabularyEmbedder()
        if args.embedder == "default"
        else VocabularyEmbedder(max_features=int(args.embedder))
    )
    t = time.perf_counter()
    kb = KnowledgeBase.build(read_jsonl(args.corpus), embedder=emb)
    built = time.perf_counter() - t
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="fastrag-stages-"))
    t = time.perf_counter()
    kb.save(out / "kb", overwrite=True)
    saved = time.perf_counter() - t
    s = kb.stats()
    mb = s["text_bytes"] / 1e6
    disk = sum(f.stat().st_size for f in (out / "kb").rglob("*") if f.is_file())
    print(
        f"{s['documents']:,} documents, {s['chunks']:,} chunks, {mb:,.0f} MB of chunk text, "
        f"dim {s['dim']}; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB"
    )
    print(f"build {built:.2f} s = {mb / built:.1f} MB/s; save {saved:.2f} s ({disk / 1e9:.2f} GB)")
    for title, stages, whole in (("build", BUILD, built), ("save", SAVE, saved)):
        print(f"{title}:")
        for _, _, label, _ in stages:
            if label in SECONDS:
                sec = SECONDS[label]
                print(
                    f"  {label:54s} {sec:7.2f} s {100 * sec / whole:5.1f} %  ({CALLS[label]} calls)"
                )
        top = sum(SECONDS.get(label, 0.0) for _, _, label, _ in stages if label[0] != " ")
        rest = "the final flush of the files, and the rest" if title == "save" else "the rest"
        print(f"  {rest:54s} {whole - top:7.2f} s {100 * (whole - top) / whole:5.1f} %")
    print(f"fusion tuning: {s.get('fusion_tuning')}")
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
