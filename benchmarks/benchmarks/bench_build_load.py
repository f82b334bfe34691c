"""The million-chunk build and load of BENCHMARKS.md, scaled down to about 20,000 chunks.

``benchmarks/scale_build_load.py --chunks 1000000`` measures the real thing
(20-40 minutes); this keeps the same path in the suite: a seeded mixed
English/Chinese corpus written once as JSON Lines, then
``KnowledgeBase.build(read_jsonl(...))`` with
``VocabularyEmbedder(max_features=384)``, exact vectors and both BM25 legs
(JSON parsing included), ``save`` of the result, and ``load`` followed by the first
question. A 400-document HNSW knowledge base stands in for the million-chunk
HNSW load (``load`` and the first hybrid answer while the graph comes in
behind it); its graph is built in ``setup_cache``, since a 20,000-row graph
would take a minute there.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile

import orjson

from fastrag import KnowledgeBase, VocabularyEmbedder

from .common import (
    COLD_COMPILE_TIMEOUT,
    build_user_kb,
    compile_kernels,
    user_documents,
    user_questions,
)

N_DOCS = 1560  # 3.1 M characters: about 20,000 chunks of 200/40 windows (Load.track_chunks)
N_DOCS_HNSW = 400


def _build(corpus: str) -> KnowledgeBase:
    from fastrag.store.sources import read_jsonl

    return KnowledgeBase.build(read_jsonl(corpus), embedder=VocabularyEmbedder(max_features=384))


class _Scaled:
    timeout = 600.0

    def setup_cache(self) -> dict[str, str]:
        compile_kernels()
        corpus = os.path.abspath("corpus.jsonl")
        with open(corpus, "wb") as fh:
            for doc in user_documents(N_DOCS, seed=5):
                fh.write(orjson.dumps(doc) + b"\n")
        kb = _build(corpus)
        store = os.path.abspath("kb-exact")
        kb.save(store)
        kb.close()
        hnsw = build_user_kb(os.path.abspath("kb-hnsw"), N_DOCS_HNSW, index="hnsw")
        return {"corpus": corpus, "exact": store, "hnsw": hnsw}

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]


class Build(_Scaled):
    """Build from JSON Lines: parsing, chunking, embedding, vectors and both BM25 legs."""

    number = 1
    repeat = (1, 3, 120.0)

    def setup(self, paths: dict[str, str]) -> None:
        small = os.path.abspath("small.jsonl")
        with open(paths["corpus"], "rb") as src, open(small, "wb") as dst:
            dst.writelines(itertools.islice(src, 20))
        _build(small).close()  # every build path once in this process: nothing compiles

    def time_build(self, paths: dict[str, str]) -> None:
        _build(paths["corpus"]).close()

    def peakmem_build(self, paths: dict[str, str]) -> None:
        _build(paths["corpus"]).close()


class Save(_Scaled):
    """``save`` of the built knowledge base to a new folder (Arrow files hashed and fsynced)."""

    number = 1
    repeat = (1, 3, 120.0)

    def setup(self, paths: dict[str, str]) -> None:
        self.kb = _build(paths["corpus"])
        self.root = tempfile.mkdtemp(prefix="saves-", dir=os.getcwd())
        self.saves = 0
        self.kb.save(os.path.join(self.root, "warm"))  # the writer's first call: not timed

    def teardown(self, paths: dict[str, str]) -> None:
        self.kb.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def time_save(self, paths: dict[str, str]) -> None:
        self.saves += 1
        self.kb.save(os.path.join(self.root, str(self.saves)))


class Load(_Scaled):
    """``load`` and the first question, in a process that has loaded another knowledge base."""

    def setup(self, paths: dict[str, str]) -> None:
        self.question = user_questions(user_documents(N_DOCS_HNSW), 1)[0]
        # per-process tables (tokenizer, pyarrow) built, as after warmup(): not timed
        other = KnowledgeBase.load(paths["hnsw"])
        other.wait_ready()
        other.answer(self.question)
        other.retrieve(self.question, mode="vector", exact=True)
        other.close()

    def time_load(self, paths: dict[str, str]) -> None:
        KnowledgeBase.load(paths["exact"]).close()

    def time_load_and_first_retrieve(self, paths: dict[str, str]) -> None:
        kb = KnowledgeBase.load(paths["exact"])
        kb.retrieve(self.question, k=5, mode="vector")
        kb.close()

    def peakmem_load_and_first_retrieve(self, paths: dict[str, str]) -> None:
        kb = KnowledgeBase.load(paths["exact"])
        kb.retrieve(self.question, k=5, mode="vector")
        kb.close()

    def track_chunks(self, paths: dict[str, str]) -> int:
        """Chunks in the scaled-down knowledge base: the size the figures above are for."""
        kb = KnowledgeBase.load(paths["exact"])
        try:
            return len(kb)
        finally:
            kb.close()

    track_chunks.unit = "chunks"  # type: ignore[attr-defined]

    def time_load_hnsw_and_first_answer(self, paths: dict[str, str]) -> None:
        """The graph loads behind the first answer (exact until it is in)."""
        kb = KnowledgeBase.load(paths["hnsw"])
        kb.answer(self.question)
        kb.close()
