"""Pay the JIT cost once, at start-up."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from ._native.warmup import compile_all
from .embed.vocabulary import VocabularyEmbedder
from .text.tokenize import Tokenizer

__all__ = ["warmup"]


def _prime() -> None:
    """Build what every process builds once, so that the first load does not.

    The tokenizer's code-point tables (about 0.1 s), the vocabulary
    embedder's case map, and pyarrow's first ``to_numpy`` (which imports its
    pandas shim, about 0.2 s): measured on a 20,000-chunk knowledge base,
    ``KnowledgeBase.load`` after ``warmup()`` went from 0.36 s to 0.08 s.
    """
    Tokenizer(stem="porter")
    VocabularyEmbedder(vocabulary="ab")
    pa.array(np.zeros(1, dtype=np.float32)).to_numpy(zero_copy_only=True)


def warmup() -> float:
    """Compile every Numba kernel fastrag uses (both writable and read-only inputs).

    Call it when a service starts so that no request pays for compilation.
    With the on-disk cache warm (the normal case after the first run) this
    loads compiled code and takes well under a second. It also builds the
    per-process tables a knowledge base's first load would build.

    Returns
    -------
    float
        Seconds spent.
    """
    t0 = time.perf_counter()
    compile_all()
    _prime()
    return time.perf_counter() - t0
