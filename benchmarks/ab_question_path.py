"""The question path against its reference (tests/naive/reference_retriever.py), in one process.

    python benchmarks/ab_question_path.py --docs 20000

Builds a KnowledgeBase of ``zipf_documents(n)``, then times 300 three-word
questions through the current :class:`~fastrag.retrieve.Retriever` (options
from the cached shorthand parser) and through the reference retriever kept
in ``tests/naive`` (options built fresh per call, as before), interleaved,
five rounds each, per mode. Times are the calling thread's CPU time
(``time.thread_time``), so the ratio holds on a loaded machine better than
wall time does. Run from the checkout root (it imports ``tests/naive``).

``--calls`` also counts the Python function calls (cProfile) of one keyword
``kb.retrieve(q, k=10, mode="keyword")`` at the user level, averaged over the
questions: a count, so it does not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fastrag.datasets.synthetic import zipf_documents  # noqa: E402
from naive.reference_retriever import Retriever as Reference  # noqa: E402

from fastrag import KnowledgeBase  # noqa: E402
from fastrag.options import (
    RetrievalOptions,  # noqa: E402
    parse_options,  # noqa: E402
)
from fastrag.retrieve.retriever import Retriever  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", action="store_true", help="count Python calls per kb.retrieve")
    args = ap.parse_args()
    docs = list(zipf_documents(args.docs, seed=1))
    kb = KnowledgeBase.build(docs)
    rng = np.random.default_rng(0)
    questions = [
        " ".join(docs[int(rng.integers(len(docs)))]["text"].split()[:3]) for _ in range(300)
    ]
    if args.calls:
        for q in questions:  # warm: kernels compiled, caches filled
            kb.retrieve(q, k=10, mode="keyword")
        profile = cProfile.Profile()
        profile.enable()
        for q in questions:
            kb.retrieve(q, k=10, mode="keyword")
        profile.disable()
        calls = pstats.Stats(profile).total_calls / len(questions)  # type: ignore[attr-defined]
        print(f"Python function calls per kb.retrieve(q, k=10, mode='keyword'): {calls:.1f}")
    corpus, config = kb._corpus, kb._retriever.config
    new, old = Retriever(config), Reference(config)

    def run(retriever, mode: str, cached: bool) -> float:
        t = time.thread_time()
        for q in questions:
            if cached:
                options = parse_options({"mode": mode}, None, answers=False)[0]
            else:
                options = RetrievalOptions(mode=mode)
            retriever.retrieve(corpus, [q], 10, options)
        return (time.thread_time() - t) / len(questions) * 1e6

    print(f"{len(kb):,} chunks; CPU microseconds per retrieve (median of {args.rounds} rounds)")
    for mode in ("keyword", "hybrid", "vector"):
        run(new, mode, True)
        run(old, mode, False)
        a, b = [], []
        for _ in range(args.rounds):
            a.append(run(new, mode, True))
            b.append(run(old, mode, False))
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{mode:8s} now {ma:8.1f}  reference {mb:8.1f}  reference / now {mb / ma:.2f}")


if __name__ == "__main__":
    main()
