"""Exact batched top-k (``fastrag.index.exact.exact_topk``) on a read-only corpus.

Batch 1 runs the fused scan (memory-bound), batches 64 and 1024 the blocked
sgemm path; ``benchmarks/compare_topk.py`` sets these against numpy and faiss.
"""

from __future__ import annotations

import numpy as np
from fastrag._native import topk as kernels

from fastrag.index.exact import exact_topk, merge_topk

from .common import Compiled, unit_vectors


def _warm() -> None:
    """Compile every top-k signature and run both paths once on tiny input."""
    kernels.warmup()
    tiny = unit_vectors(300, 8)
    exact_topk(unit_vectors(1, 8, seed=1), tiny, 5)
    exact_topk(unit_vectors(70, 8, seed=1), tiny, 5)


class ExactTopK(Compiled):
    params = [[100_000], [384], [1, 64, 1024]]
    param_names = ["n", "dim", "batch"]
    timeout = 300

    def setup(self, n, dim, batch):
        _warm()
        self.corpus = unit_vectors(n, dim)  # read-only, as a loaded store exposes it
        self.queries = np.array(unit_vectors(batch, dim, seed=1))  # writable
        self.mask = np.ones(n, dtype=bool)
        self.mask[::10] = False  # 10 % tombstones

    def time_exact_topk(self, n, dim, batch):
        exact_topk(self.queries, self.corpus, 10)

    def peakmem_exact_topk(self, n, dim, batch):
        exact_topk(self.queries, self.corpus, 10)

    def time_exact_topk_masked(self, n, dim, batch):
        exact_topk(self.queries, self.corpus, 10, mask=self.mask)


class MergeTopK(Compiled):
    params = [[1, 1024], [64]]
    param_names = ["batch", "segments"]

    def setup(self, batch, segments):
        _warm()
        rng = np.random.default_rng(0)
        self.ids = rng.integers(0, 10**9, size=(batch, segments * 10), dtype=np.int64)
        self.scores = rng.random((batch, segments * 10), dtype=np.float32)

    def time_merge_topk(self, batch, segments):
        merge_topk(self.ids, self.scores, 10)
