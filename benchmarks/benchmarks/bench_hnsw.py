"""HNSW (``fastrag.index.hnsw.HnswIndex``) on clustered 384-d vectors.

Graphs are built once per run in ``setup_cache`` (10k rows: seconds; 100k
rows: about two minutes on two cores) and loaded from its files by each
benchmark's ``setup``. ``benchmarks/compare_hnsw.py`` sets these figures
against raw hnswlib, faiss and exact search, and holds the 1M-row numbers.
"""

from __future__ import annotations

import functools
import os
import tempfile

import numpy as np
from fastrag.datasets.synthetic import random_unit_vectors

from fastrag.errors import SearchIndexError
from fastrag.index.exact import exact_topk
from fastrag.index.hnsw import HnswConfig, HnswIndex, recall_at_k

from .common import COLD_COMPILE_TIMEOUT, Compiled, compile_kernels

DIM = 384
CLUSTERS = 1000
SIZES = (10_000, 100_000)
QUERIES = 1024
K = 10


@functools.lru_cache(maxsize=4)
def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A read-only clustered corpus of ``n`` rows and 1024 held-out queries."""
    allv = random_unit_vectors(n + QUERIES, DIM, seed=0, clusters=CLUSTERS)
    corpus = allv[:n]
    corpus.flags.writeable = False
    return corpus, np.ascontiguousarray(allv[n:])


def _build_all() -> dict[int, str]:
    """Build (or reuse) one graph per size; return their paths.

    asv runs ``setup_cache`` once per class, so the graphs live in one
    directory shared by the classes and by later runs, keyed by the data and
    the default config (a graph file does not depend on fastrag's code).
    """
    compile_kernels()
    config = HnswConfig()
    key = "-".join(f"{k}{v}" for k, v in config.to_dict().items())
    root = os.path.join(tempfile.gettempdir(), "fastrag-asv-hnsw")
    os.makedirs(root, exist_ok=True)
    paths = {}
    for n in SIZES:
        path = os.path.join(root, f"n{n}-d{DIM}-c{CLUSTERS}-{key}.bin")
        try:
            HnswIndex.load(path, DIM, config)
        except SearchIndexError:
            corpus, _ = _data(n)
            HnswIndex.build(corpus, np.arange(n), config).save(path)
        paths[n] = path
    return paths


class HnswSearch:
    params = [list(SIZES), [1, 1024], [32, 64, 128]]
    param_names = ["n", "batch", "ef"]
    timeout = 900

    def setup_cache(self):
        return _build_all()

    setup_cache.timeout = COLD_COMPILE_TIMEOUT

    def setup(self, paths, n, batch, ef):
        self.index = HnswIndex.load(paths[n], DIM, HnswConfig())
        self.index.set_ef(ef)
        corpus, queries = _data(n)
        self.corpus = corpus
        self.queries = queries[:batch]
        self.index.search(self.queries[:1], K)  # sets ef in hnswlib

    def time_search(self, paths, n, batch, ef):
        self.index.search(self.queries, K)

    def track_recall_at_10(self, paths, n, batch, ef):
        _, queries = _data(n)
        truth, _ = exact_topk(queries, self.corpus, K)
        labels, _ = self.index.search(queries, K)
        return recall_at_k(labels, truth)

    track_recall_at_10.unit = "recall"


class HnswFilteredSearch:
    """Random filters of 20 % and 2 %: oversampling and the exact verdict."""

    params = [[100_000], [1, 64], [0.2, 0.02]]
    param_names = ["n", "batch", "selectivity"]
    timeout = 900

    def setup_cache(self):
        return _build_all()

    setup_cache.timeout = COLD_COMPILE_TIMEOUT

    def setup(self, paths, n, batch, selectivity):
        self.index = HnswIndex.load(paths[n], DIM, HnswConfig())
        _, queries = _data(n)
        self.queries = queries[:batch]
        rng = np.random.default_rng(0)
        self.eligible = rng.random(n) < selectivity
        self.index.search(self.queries[:1], K)

    def time_search_filtered(self, paths, n, batch, selectivity):
        """Whatever :func:`filter_strategy` picks (None for exact is cheap here)."""
        self.index.search(self.queries, K, eligible=self.eligible)

    def time_search_oversample(self, paths, n, batch, selectivity):
        self.index.search(self.queries, K, eligible=self.eligible, strategy="oversample")


class HnswBuild(Compiled):
    params = [[10_000], [1, 2]]
    param_names = ["n", "threads"]
    timeout = 600
    number = 1
    repeat = 2

    def setup(self, n, threads):
        if threads > (os.cpu_count() or 1):
            raise NotImplementedError("not enough cores")
        self.corpus, _ = _data(n)
        self.labels = np.arange(n)

    def time_build(self, n, threads):
        HnswIndex.build(self.corpus, self.labels, HnswConfig(), threads=threads)

    def peakmem_build(self, n, threads):
        HnswIndex.build(self.corpus, self.labels, HnswConfig(), threads=threads)


class HnswPersistence:
    params = [list(SIZES)]
    param_names = ["n"]
    timeout = 900

    def setup_cache(self):
        return _build_all()

    setup_cache.timeout = COLD_COMPILE_TIMEOUT

    def setup(self, paths, n):
        self.index = HnswIndex.load(paths[n], DIM, HnswConfig())

    def time_load(self, paths, n):
        HnswIndex.load(paths[n], DIM, HnswConfig())

    def peakmem_load(self, paths, n):
        HnswIndex.load(paths[n], DIM, HnswConfig())

    def time_save(self, paths, n):
        self.index.save(os.path.abspath(f"hnsw-{n}.copy"))  # asv's working directory
