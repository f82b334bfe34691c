"""Many threads of one process calling the engine at once (a web service's workers)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import pytest

from fastrag import KnowledgeBase, VocabularyEmbedder
from fastrag._threads import threading_layer, threads
from fastrag.datasets.synthetic import mixed_documents


@pytest.fixture(scope="module")
def corpus():
    return list(mixed_documents(300, seed=8, mean_chars=500))


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_concurrent_callers_get_the_serial_results(corpus, index):
    kb = KnowledgeBase.build(corpus, embedder=VocabularyEmbedder(max_features=64), index=index, threads=1)
    questions = [d["text"][10:60] for d in corpus[:48]]
    serial_r = [[(h.chunk_id, round(h.score, 5)) for h in kb.retrieve(q, k=5)] for q in questions]
    serial_a = [kb.answer(q, k=5).text for q in questions]
    serial_b = kb.retrieve_batch(questions[:20], k=5).to_pylist()

    def work(i):
        q = questions[i % len(questions)]
        if i % 7 == 0:
            return "batch", kb.retrieve_batch(questions[:20], k=5).to_pylist()
        if i % 2:
            return "answer", i % len(questions), kb.answer(q, k=5).text
        return "retrieve", i % len(questions), [(h.chunk_id, round(h.score, 5)) for h in kb.retrieve(q, k=5)]

    with ThreadPoolExecutor(max_workers=16) as pool:
        for out in pool.map(work, range(160)):
            if out[0] == "batch":
                assert out[1] == serial_b
            elif out[0] == "answer":
                assert out[2] == serial_a[out[1]]
            else:
                assert out[2] == serial_r[out[1]]


def test_threading_layer_is_safe_for_concurrent_callers():
    assert threading_layer() in ("omp", "tbb", "workqueue", "none (JIT disabled)")
    # workqueue only when nothing else loads; then calls are serialised (no crash).


def test_thread_setting_is_per_call_and_restored():
    before = numba.get_num_threads()
    seen = []

    def worker():
        with threads(1):
            seen.append(numba.get_num_threads())
        seen.append(numba.get_num_threads())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen[0] == 1
    assert numba.get_num_threads() == before
