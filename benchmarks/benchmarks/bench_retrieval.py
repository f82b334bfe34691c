"""End-to-end retrieval through ``KnowledgeBase`` (embed question, top-k, hits).

``Retrieve``: vector-leg defaults over 2,000 synthetic documents (about 26,000 chunks).
``HybridFiltered``: the default hybrid mode with a ``where`` filter and a
principal over the shared :class:`~.common.UserKB`. ``Threads``: questions
answered from one or two Python threads of one process (a service's
request threads), throughput.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

from fastrag.datasets.synthetic import mixed_documents

from fastrag import KnowledgeBase, Principal, VocabularyEmbedder

from .common import COLD_COMPILE_TIMEOUT, UserKB, compile_kernels


class Retrieve:
    params = [[2_000], [384]]  # 20,000 documents (260,000 chunks) said the same at 10x the build
    param_names = ["documents", "max_features"]
    timeout = 600

    def setup_cache(self):
        compile_kernels()
        paths = {}
        for n in self.params[0]:
            kb = KnowledgeBase.build(
                mixed_documents(n, seed=11), embedder=VocabularyEmbedder(max_features=384)
            )
            path = tempfile.mkdtemp(prefix=f"fastrag-asv-{n}-", dir=os.getcwd())  # asv removes it
            kb.save(path)
            paths[n] = path
        return paths

    setup_cache.timeout = COLD_COMPILE_TIMEOUT

    def setup(self, paths, documents, max_features):
        self.kb = KnowledgeBase.load(paths[documents])
        self.questions = [d["text"][:60] for d in mixed_documents(256, seed=99, mean_chars=200)]
        self.kb.retrieve(self.questions[0], k=5)
        self.kb.retrieve_batch(self.questions, k=5)
        KnowledgeBase.load(paths[documents]).close()

    def time_retrieve_one(self, paths, documents, max_features):
        self.kb.retrieve(self.questions[0], k=5)

    def time_retrieve_batch_256(self, paths, documents, max_features):
        self.kb.retrieve_batch(self.questions, k=5)

    def time_load(self, paths, documents, max_features):
        KnowledgeBase.load(paths[documents])

    def peakmem_load_and_retrieve(self, paths, documents, max_features):
        KnowledgeBase.load(paths[documents]).retrieve(self.questions[1], k=5)


class HybridFiltered(UserKB):
    """Hybrid ``retrieve`` (vector + BM25, fused) with and without a filter and a principal.

    ``where={"team": "hr", "updated_at": {">=": "2025-06-01"}}`` keeps about
    an eighth of the chunks; the principal (groups ``hr``) is admitted to
    the chunks with an empty ACL or ``hr`` in it.
    """

    params = [["none", "where+principal"]]  # "where" and "principal" alone ran between the two
    param_names = ["filter"]

    def setup(self, kb: dict, filter: str) -> None:
        self.kb = KnowledgeBase.load(kb["path"])
        self.questions = kb["questions"]
        where = {"team": "hr", "updated_at": {">=": "2025-06-01"}}
        principal = Principal(user="u", groups=("hr",))
        self.options = {
            "none": {},
            "where": {"where": where},
            "principal": {"principal": principal},
            "where+principal": {"where": where, "principal": principal},
        }[filter]
        self.kb.retrieve(self.questions[0], k=10, mode="hybrid", **self.options)
        self.kb.retrieve_batch(self.questions, k=10, mode="hybrid", **self.options)

    def teardown(self, kb: dict, filter: str) -> None:
        self.kb.close()

    def time_retrieve(self, kb: dict, filter: str) -> None:
        self.kb.retrieve(self.questions[1], k=10, mode="hybrid", **self.options)

    def time_retrieve_batch_256(self, kb: dict, filter: str) -> None:
        self.kb.retrieve_batch(self.questions, k=10, mode="hybrid", **self.options)


class Threads(UserKB):
    """256 single-question ``retrieve`` calls from 1 or 2 threads of one process.

    The question path's kernels release the GIL; with 2 callers on 2 cores
    the time falls below the 1-caller time by what they overlap. Skipped
    when the machine has fewer cores than callers.
    """

    params = [[1, 2], ["hybrid"]]
    param_names = ["callers", "mode"]

    def setup(self, kb: dict, callers: int, mode: str) -> None:
        if callers > (os.cpu_count() or 1):
            raise NotImplementedError("fewer cores than callers")
        self.kb = KnowledgeBase.load(kb["path"])
        questions = kb["questions"]
        self.shares = [questions[i::callers] for i in range(callers)]
        self.mode = mode
        self.pool = ThreadPoolExecutor(callers)
        list(self.pool.map(self._run, self.shares))  # threads started, first calls made

    def _run(self, questions: list[str]) -> None:
        for q in questions:
            self.kb.retrieve(q, k=10, mode=self.mode)

    def teardown(self, kb: dict, callers: int, mode: str) -> None:
        self.pool.shutdown()
        self.kb.close()

    def time_retrieve_256(self, kb: dict, callers: int, mode: str) -> None:
        list(self.pool.map(self._run, self.shares))
