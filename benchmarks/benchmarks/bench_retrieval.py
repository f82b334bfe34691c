"""End-to-end retrieval through ``KnowledgeBase`` (embed question, top-k, hits)."""

from __future__ import annotations

import tempfile

from fastrag.datasets.synthetic import mixed_documents

from fastrag import KnowledgeBase, VocabularyEmbedder, warmup


class Retrieve:
    params = [[2_000, 20_000], [384]]
    param_names = ["documents", "max_features"]
    timeout = 600

    def setup_cache(self):
        paths = {}
        for n in self.params[0]:
            kb = KnowledgeBase.build(
                mixed_documents(n, seed=11), embedder=VocabularyEmbedder(max_features=384)
            )
            path = tempfile.mkdtemp(prefix=f"fastrag-asv-{n}-")
            kb.save(path)
            paths[n] = path
        return paths

    def setup(self, paths, documents, max_features):
        warmup()
        self.kb = KnowledgeBase.load(paths[documents])
        self.questions = [d["text"][:60] for d in mixed_documents(256, seed=99, mean_chars=200)]
        self.kb.retrieve(self.questions[0])

    def time_retrieve_one(self, paths, documents, max_features):
        self.kb.retrieve(self.questions[0], k=5)

    def time_retrieve_batch_256(self, paths, documents, max_features):
        self.kb.retrieve_batch(self.questions, k=5)

    def time_load(self, paths, documents, max_features):
        KnowledgeBase.load(paths[documents])

    def peakmem_load_and_retrieve(self, paths, documents, max_features):
        KnowledgeBase.load(paths[documents]).retrieve(self.questions[1], k=5)
