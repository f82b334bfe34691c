"""Chunking: white-space normalisation and overlapping windows (fastrag.Chunker).

Corpora are mixed English/Chinese text from ``common.texts`` (about 1.47
UTF-8 bytes per character). ``time_chunk`` starts from ``list[str]``, so it
includes pyarrow's UTF-8 encoding; note that CPython caches a string's UTF-8
form after the first encoding, so repeats measure the cached case.
``time_chunk_arrow`` starts from a ``large_string`` array (the kernel and the
result arrays only).
"""

from __future__ import annotations

import pyarrow as pa
from fastrag._native import chunking as kernels

from fastrag.text.chunking import Chunker

from .common import Compiled, texts

BYTES_PER_CHAR = 1.47


class Chunk(Compiled):
    """``Chunker.chunk`` on 10 MB of text, window 200 (overlap = window / 5).

    One size and one window: 1 MB and window 1000 ran the same kernel at the
    same throughput, each a process more per run.
    """

    params = [[10], [200]]
    param_names = ["mb", "window"]

    def setup(self, mb: int, window: int) -> None:
        kernels.warmup()
        self.chunker = Chunker(window=window, overlap=window // 5)
        self.chunker.chunk(["warm up the wrapper"])
        self.texts = list(texts(int(mb * 1e6 / BYTES_PER_CHAR)))
        self.array = pa.array(self.texts, type=pa.large_string())

    def time_chunk(self, mb: int, window: int) -> None:
        self.chunker.chunk(self.texts)

    def time_chunk_arrow(self, mb: int, window: int) -> None:
        self.chunker.chunk(self.array)

    def time_chunk_one_thread(self, mb: int, window: int) -> None:
        self.chunker.chunk(self.array, threads=1)

    def peakmem_chunk(self, mb: int, window: int) -> None:
        self.chunker.chunk(self.texts)


class ChunkOne(Compiled):
    """Latency of chunking one short document (the per-call overhead)."""

    def setup(self) -> None:
        kernels.warmup()
        self.chunker = Chunker()
        self.text = texts(3000)[0]
        self.chunker.split(self.text)

    def time_split(self) -> None:
        self.chunker.split(self.text)

    def time_chunk_list(self) -> None:
        self.chunker.chunk([self.text])
