"""What ``/v1/retrieve/batch`` costs the server, before and after the one hit serialiser.

    python benchmarks/ab_retrieve_batch_route.py --questions 64 --rounds 30

In one process, interleaved, medians of the calling thread's CPU time:

- *before*: ``retrieve_batch`` (an Arrow table of six columns) turned into
  five-field hit dicts, as the route did before;
- *after*: ``retrieve_batch(output="hits")`` (the same batched search,
  :class:`~fastrag.Hit` objects) written by :func:`fastrag.serve.shared.hits_json`
  (every field of a hit, as ``/v1/retrieve`` writes it);
- *per question*: one ``retrieve`` per question, for scale.

Prints the ratios to *before* (the payload of *after* carries more: ``ord``,
``start``, ``end``, ``relevance``, metadata, title, source, marker).
"""

from __future__ import annotations

import argparse
import statistics
import time

from fastrag.datasets import demo_documents

from fastrag import KnowledgeBase
from fastrag.serve.shared import hits_json

QUESTIONS = (
    "年假怎么申请？",
    "How many days do I have to submit an expense report?",
    "设备丢失后多久内要报告？",
    "公司食堂几点开门？",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("-k", type=int, default=5)
    args = parser.parse_args()
    kb = KnowledgeBase.build(demo_documents())
    qs = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.questions)]
    k = args.k

    def before() -> object:
        t = kb.retrieve_batch(qs, k).to_pydict()
        out: list[dict] = [{"question": q, "hits": []} for q in qs]
        cols = ("query_index", "rank", "chunk_id", "doc_id", "score", "text")
        for qi, r, c, d, s, x in zip(*(t[n] for n in cols), strict=True):
            out[qi]["hits"].append({"rank": r, "chunk_id": c, "doc_id": d, "score": s, "text": x})
        return out

    def after() -> object:
        found = kb.retrieve_batch(qs, k, output="hits")
        return [{"question": q, "hits": hits_json(h)} for q, h in zip(qs, found, strict=True)]

    def per_question() -> object:
        return [{"question": q, "hits": hits_json(kb.retrieve(q, k))} for q in qs]

    runs = {"before": before, "after": after, "per question": per_question}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for fn in runs.values():
        fn()
    for _ in range(args.rounds):
        for name, fn in runs.items():
            t0 = time.thread_time()
            fn()
            times[name].append(time.thread_time() - t0)
    base = statistics.median(times["before"])
    for name in runs:
        print(f"{name:>12}: {statistics.median(times[name]) / base:5.2f}x the time of before")


if __name__ == "__main__":
    main()
