"""Pay the JIT cost once, at start-up, for every path a service will take.

:func:`warmup` compiles (or loads from Numba's on-disk cache) every kernel
signature the engine uses, in two steps:

1. :func:`fastrag._native.warmup.compile_all`: each kernel module's own
   warm-up on tiny arrays (on a cold cache in two processes at once);
2. a small end-to-end run of the engine itself, on a bilingual knowledge
   base of a few documents: build (exact and HNSW), add, delete, compact,
   save and load (so read-only, memory-mapped inputs are seen), retrieve in
   every mode with and without filters and a principal, exact and HNSW,
   single and batched (batches large enough for the batched kernels),
   answer with every stage, answer_batch and answer_stream.

A test (``tests/test_warmup.py``) runs the engine's operations after
``warmup()`` in a fresh process with an empty cache and checks that no
dispatcher gains a compiled signature.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from ._native.warmup import compile_all, start_query_compile
from .embed.vocabulary import VocabularyEmbedder
from .text.tokenize import Tokenizer

__all__ = ["start_query_compile", "warmup"]

_DOCS = [
    {"id": "en", "text": "Annual leave requests must be submitted three days in advance. "
     "Employees receive 15 days of paid leave a year; call 13812345678 with questions.",
     "title": "Leave", "source": "hr/leave.md", "updated_at": "2020-01-01", "acl": ["hr"]},
    {"id": "zh", "text": "年假申请需提前3天提交。工作未满五年的员工每年享有15天带薪年假。",
     "team": "hr"},
    {"id": "ex", "text": "Expense reports are due within 10 days of the trip, receipts attached."},
]  # fmt: skip

_QUESTIONS = ["How many days of annual leave?", "年假需要提前几天申请？", "expense report deadline"]


def _exercise() -> None:
    """Run every operation of the engine once on a tiny knowledge base (see the module doc)."""
    from ._threads import max_threads
    from .kb import KnowledgeBase
    from .retrieve.filters import Principal

    principal = Principal(user="u", groups=("hr",))
    batch = [_QUESTIONS[i % len(_QUESTIONS)] + f" {i}" for i in range(64)]
    with tempfile.TemporaryDirectory(prefix="fastrag-warmup-") as tmp:
        for index in ("exact", "hnsw"):
            built = KnowledgeBase.build(_DOCS, window=40, overlap=8, index=index)
            built.add(
                [
                    {
                        "id": "more",
                        "text": "Remote work is allowed two days a week. 远程办公每周两天。",
                    }
                ]
            )
            built.delete(["more"])
            built.compact()
            path = Path(tmp) / index
            built.save(path)
            for kb in (built, KnowledgeBase.load(path)):
                for mode in ("hybrid", "vector", "keyword"):
                    for exact in (False, True):
                        kb.retrieve(_QUESTIONS[0], k=3, mode=mode, exact=exact)
                        kb.retrieve(
                            _QUESTIONS[1], k=3, mode=mode, exact=exact, where={"team": "hr"}
                        )
                        kb.retrieve(_QUESTIONS[2], k=3, mode=mode, exact=exact, principal=principal)
                    kb.retrieve(_QUESTIONS[0], k=3, mode=mode, group_by="doc")
                    for threads in sorted({1, max_threads()}):  # serial and parallel kernels
                        kb.retrieve_batch(batch, k=3, mode=mode, threads=threads)
                    kb.retrieve_batch(batch[:5], k=3, mode=mode, where={"team": "hr"})
                    kb.answer(_QUESTIONS[1], k=3, mode=mode)
                kb.answer_batch(batch[:8], k=3)
                for _ in kb.answer_stream(_QUESTIONS[0], k=3):
                    pass


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
    """Compile every Numba kernel signature fastrag uses, and run each engine path once.

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
    _exercise()
    return time.perf_counter() - t0
