"""HNSW (``fastrag.index.hnsw.HnswIndex``) on clustered 384-d vectors.

One 50,000-row graph is built per run in the ``setup_cache`` the search,
filtered-search and persistence classes share (about half a minute on two
quiet cores; 100,000 rows took twice that, the largest share of a ``--quick``
run), with its corpus and queries saved as ``.npy`` files beside it; each
benchmark's ``setup`` loads the graph and memory-maps the vectors instead of
generating them again. ``HnswBuild`` builds a 10,000-row graph in the timed
region. ``benchmarks/compare_hnsw.py`` sets these figures against raw
hnswlib, faiss and exact search, and holds the 100k- and 1M-row numbers.
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
N = 50_000
"""Rows of the searched, filtered and persisted graph."""
QUERIES = 1024
K = 10


def _root() -> str:
    return os.path.join(tempfile.gettempdir(), "fastrag-asv-hnsw")


def _data_paths(n: int) -> tuple[str, str]:
    stem = os.path.join(_root(), f"data-n{n}-q{QUERIES}-d{DIM}-c{CLUSTERS}")
    return stem + "-corpus.npy", stem + "-queries.npy"


@functools.lru_cache(maxsize=4)
def _data(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A read-only clustered corpus of ``n`` rows and 1024 held-out queries.

    Memory-mapped from the files :func:`_build_all` saved when they are
    there (generating 51,024 clustered rows costs every process seconds),
    else generated; both hold the same seeded vectors.
    """
    corpus_path, queries_path = _data_paths(n)
    if os.path.exists(corpus_path) and os.path.exists(queries_path):
        return np.asarray(np.load(corpus_path, mmap_mode="r")), np.load(queries_path)
    allv = random_unit_vectors(n + QUERIES, DIM, seed=0, clusters=CLUSTERS)
    corpus = allv[:n]
    corpus.flags.writeable = False
    return corpus, np.ascontiguousarray(allv[n:])


def _build_all() -> dict[int, str]:
    """Build (or reuse) the graph of :data:`N` rows and save its vectors; return ``{N: path}``.

    The graph lives in a directory shared by later runs (unless ``TMPDIR``
    moves), keyed by the data and the default config (a graph file does not
    depend on fastrag's code).
    """
    compile_kernels()
    config = HnswConfig()
    key = "-".join(f"{k}{v}" for k, v in config.to_dict().items())
    root = _root()
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"n{N}-d{DIM}-c{CLUSTERS}-{key}.bin")
    corpus, queries = _data(N)
    for file, array in zip(_data_paths(N), (corpus, queries), strict=True):
        if not os.path.exists(file):
            np.save(file + ".tmp.npy", array)
            os.replace(file + ".tmp.npy", file)
    try:
        HnswIndex.load(path, DIM, config)
    except SearchIndexError:
        HnswIndex.build(corpus, np.arange(N), config).save(path)
    return {N: path}


class _Graph:
    """Base of the classes over the :data:`N`-row graph: one ``setup_cache`` for all of them."""

    timeout = 300

    def setup_cache(self) -> dict[int, str]:
        return _build_all()

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]


class HnswSearch(_Graph):
    """One question and a batch of 1,024 at ``ef`` 64 (the default), and recall@10 there."""

    params = [[N], [1, 1024], [64]]
    param_names = ["n", "batch", "ef"]

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


class HnswFilteredSearch(_Graph):
    """Random filters of 20 % and 2 % over a batch of 64: oversampling and the exact verdict."""

    params = [[N], [64], [0.2, 0.02]]
    param_names = ["n", "batch", "selectivity"]

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
    """A 10,000-row graph built from two threads (skipped on one core), and its peak memory."""

    params = [[10_000], [2]]
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


class HnswPersistence(_Graph):
    params = [[N]]
    param_names = ["n"]

    def setup(self, paths, n):
        self.index = HnswIndex.load(paths[n], DIM, HnswConfig())

    def time_load(self, paths, n):
        HnswIndex.load(paths[n], DIM, HnswConfig())

    def peakmem_load(self, paths, n):
        HnswIndex.load(paths[n], DIM, HnswConfig())

    def time_save(self, paths, n):
        self.index.save(os.path.abspath(f"hnsw-{n}.copy"))  # asv's working directory
