"""Many threads of one process calling the engine at once (a web service's workers)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import pytest
from fastrag.datasets.synthetic import mixed_documents

from fastrag import KnowledgeBase, VocabularyEmbedder
from fastrag._threads import threading_layer, threads


@pytest.fixture(scope="module")
def corpus():
    return list(mixed_documents(300, seed=8, mean_chars=500))


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_concurrent_callers_get_the_serial_results(corpus, index):
    kb = KnowledgeBase.build(
        corpus, embedder=VocabularyEmbedder(max_features=64), index=index, threads=1
    )
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
        return (
            "retrieve",
            i % len(questions),
            [(h.chunk_id, round(h.score, 5)) for h in kb.retrieve(q, k=5)],
        )

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


# -- generate_stream: preparation overlapped with model calls ---------------------------------


class _AsyncEcho:
    """An async generator that records when each call starts (and signals the first)."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.called = threading.Event()

    async def agenerate(self, question, hits):
        import asyncio

        from fastrag.types import Generation

        self.events.append(f"call {question}")
        self.called.set()
        await asyncio.sleep(0.01)
        return Generation(text=f"answer to {question}", found=True)

    def __call__(self, question, hits):  # the sync form, for the non-streaming path
        from fastrag.types import Generation

        return Generation(text=f"answer to {question}", found=True)


def test_generate_stream_overlaps_blocks_and_keeps_order():
    from fastrag.models.concurrency import generate_stream

    events: list[str] = []
    gen = _AsyncEcho(events)

    def blocks(wait_for_a_call: bool):
        for b in range(3):
            if b == 2 and wait_for_a_call:
                # Slow preparation: block 2 is produced only once a call of the blocks before
                # has started. Without the overlap no call starts before every block is
                # produced, and the wait ends unsignalled (a failure, not a hang).
                events.append(f"block 2 waited: {gen.called.wait(timeout=30)}")
            events.append(f"block {b}")
            yield [(f"q{b}-{i}", []) for i in range(4)]

    out = generate_stream(gen, blocks(True), max_concurrency=8)
    assert [g.text for g in out] == [f"answer to q{b}-{i}" for b in range(3) for i in range(4)]
    assert "block 2 waited: True" in events
    # block 0's calls started before block 2 was produced
    assert events.index("call q0-0") < events.index("block 2")
    events.clear()
    serial = generate_stream(gen, blocks(False), max_concurrency=1)  # no async path: collected
    assert [g.text for g in serial] == [g.text for g in out]
    assert not any(e.startswith("call") for e in events)  # the sync form answered


def test_generate_stream_raises_what_preparation_raised():
    from fastrag.models.concurrency import generate_stream

    def blocks():
        yield [("a", [])]
        raise ValueError("retrieval failed")

    with pytest.raises(ValueError, match="retrieval failed"):
        generate_stream(_AsyncEcho([]), blocks(), max_concurrency=4)


def test_streamed_answer_batch_equals_the_serial_one(monkeypatch):
    from fastrag.datasets import demo_documents
    from openai_server import OpenAIServer

    import fastrag.answer.pipeline
    from fastrag import OpenAIChatGenerator
    from fastrag.config import ClientConfig

    monkeypatch.setattr(
        fastrag.answer.pipeline, "STREAM_BLOCK", 4
    )  # 9 blocks of 4 (and a last of 2)
    kb = KnowledgeBase.build(demo_documents())
    base = ["年假怎么申请？", "How many days of annual leave?", "设备丢失后多久内要报告？"]
    questions = [f"{base[i % 3]} #{i}" for i in range(38)]
    with OpenAIServer() as server:
        config = ClientConfig(base_url=server.base_url, model="m", api_key=None, max_retries=0,
                              read_timeout=10.0, trust_env=False)  # fmt: skip
        with OpenAIChatGenerator(config=config) as gen:
            streamed = kb.answer_batch(questions, k=3, generator=gen, max_concurrency=16)
            serial = kb.answer_batch(questions, k=3, generator=gen, max_concurrency=1)
    assert streamed.column("error").null_count == len(questions)
    for name in ("query_index", "answer", "found", "chunk_ids", "citations"):
        assert streamed.column(name).to_pylist() == serial.column(name).to_pylist()
