"""Vocabulary embedding kernel throughput."""

from __future__ import annotations

import numpy as np
from fastrag._native import embedding as kernels

from fastrag import VocabularyEmbedder
from fastrag.text import Chunker

from .common import Compiled, texts


class VocabularyEmbed(Compiled):
    params = [[2_000_000], [384, None]]  # one size: 20 M characters said the same
    param_names = ["chars", "max_features"]

    def setup(self, chars, max_features):
        kernels.warmup()
        chunks = Chunker(200, 40).chunk(list(texts(chars)))
        self.data, self.offsets = chunks.text_data, chunks.text_offsets
        self.emb = VocabularyEmbedder(max_features).fit(chunks.texts()[:20000])
        self.out = np.ones((len(chunks), self.emb.dim), dtype=np.float32)  # pages faulted in

    def time_embed(self, chars, max_features):
        self.emb.embed_utf8(self.data, self.offsets, out=self.out)

    def peakmem_embed(self, chars, max_features):
        self.emb.embed_utf8(self.data, self.offsets)


class VocabularyFit(Compiled):
    params = [[2_000_000]]
    param_names = ["chars"]

    def setup(self, chars):
        kernels.warmup()
        chunks = Chunker(200, 40).chunk(list(texts(chars)))
        self.data, self.offsets = chunks.text_data, chunks.text_offsets

    def time_count_and_fit(self, chars):
        counts = VocabularyEmbedder.count_utf8(
            self.data, int(self.offsets[0]), int(self.offsets[-1])
        )
        VocabularyEmbedder(1024).fit_counts(counts)
