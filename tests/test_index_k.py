"""The index layer's one rule for ``k`` (``fastrag.index.base.check_k``), in each index."""

from __future__ import annotations

import numpy as np
import pytest

from fastrag.errors import ConfigError
from fastrag.index.base import check_k
from fastrag.index.exact import exact_topk
from fastrag.index.hnsw import HnswConfig, HnswIndex
from fastrag.index.keyword import BM25Index
from fastrag.text.tokenize import Tokenizer

BAD = [0, -3, True, np.bool_(True), 1.5, "2", None]


@pytest.fixture(scope="module")
def searches():
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((40, 8)).astype(np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    hnsw = HnswIndex.build(corpus, np.arange(40), HnswConfig(M=4, ef_construction=20), threads=1)
    tok = Tokenizer(stopwords=None)
    bm25 = BM25Index.from_tokens(tok.tokenize(["cat mat", "dog log", "cat dog"]), tok)
    return {
        "exact": lambda k: exact_topk(corpus[:2], corpus, k)[0],
        "hnsw": lambda k: hnsw.search(corpus[:2], k)[0],
        "bm25": lambda k: bm25.search(["cat"], k)[0],
    }


@pytest.mark.parametrize("which", ["exact", "hnsw", "bm25"])
def test_every_index_refuses_the_same_ks(searches, which):
    for k in BAD:
        with pytest.raises(ConfigError, match=r"^k must be a positive int, got "):
            searches[which](k)
    assert len(searches[which](np.int64(2))[0]) == 2


def test_check_k():
    assert check_k(3) == 3 and type(check_k(np.int32(3))) is int
    for k in BAD:
        with pytest.raises(ConfigError):
            check_k(k)
