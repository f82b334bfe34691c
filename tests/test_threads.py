"""Caller threads on the read path: the same results as serial calls, locks that keep their word."""

from __future__ import annotations

import _thread
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest
from fastrag.datasets.synthetic import mixed_documents

from fastrag import KnowledgeBase, VocabularyEmbedder, _threads
from fastrag._threads import Admission, admission, admitted, current_threads, set_admission, threads
from fastrag.errors import ConfigError
from fastrag.index.ef_lock import EfLock


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """A saved and loaded HNSW knowledge base: its graph is the memory-mapped one."""
    docs = list(mixed_documents(400, seed=21, mean_chars=600))
    kb = KnowledgeBase.build(
        docs, embedder=VocabularyEmbedder(max_features=64), index="hnsw", threads=1
    )
    path = tmp_path_factory.mktemp("threads") / "kb"
    kb.save(path)
    out = KnowledgeBase.load(path)
    out.wait_ready()
    questions = [d["text"][5:55] for d in docs[:60]]
    return out, questions


def _key(hits):
    return [(h.chunk_id, h.score, h.relevance, h.text) for h in hits]


@pytest.mark.parametrize("mode", ["vector", "keyword", "hybrid"])
def test_threads_get_exactly_the_serial_results_on_the_mapped_graph(loaded, mode):
    kb, questions = loaded
    assert type(kb._corpus.graph._index).__name__ == "MappedGraph"
    serial = [_key(kb.retrieve(q, k=5, mode=mode)) for q in questions]
    exact = [_key(kb.retrieve(q, k=5, mode=mode, exact=True)) for q in questions[:10]]
    barrier = threading.Barrier(16)

    def work(t):
        barrier.wait()
        got = []
        for j in range(40):
            i = (t + 16 * j) % len(questions)
            if j % 10 == 9 and i < 10:  # an exact call between graph calls
                got.append(
                    ("exact", i, _key(kb.retrieve(questions[i], k=5, mode=mode, exact=True)))
                )
            got.append(("graph", i, _key(kb.retrieve(questions[i], k=5, mode=mode))))
        return got

    with ThreadPoolExecutor(max_workers=16) as pool:
        for got in pool.map(work, range(16)):
            for kind, i, hits in got:
                assert hits == (exact[i] if kind == "exact" else serial[i])


def test_mapped_graph_one_query_search_equals_the_batched_kernel(loaded):
    kb, questions = loaded
    graph = kb._corpus.graph._index
    vecs = kb.embed_questions(questions)
    whole_l, whole_d = graph.knn_query(vecs, 5, 1)  # one serial kernel call, every query
    parallel_l, parallel_d = graph.knn_query(vecs, 5, 2)  # the parallel kernel (8+ queries)
    np.testing.assert_array_equal(whole_l, parallel_l)
    np.testing.assert_array_equal(whole_d, parallel_d)
    for i in range(len(questions)):
        one_l, one_d = graph.knn_query(vecs[i : i + 1], 5, 1)
        np.testing.assert_array_equal(one_l[0], whole_l[i])
        np.testing.assert_array_equal(one_d[0], whole_d[i])
    allowed = np.zeros(int(graph.get_ids_list().max()) + 1, np.bool_)
    allowed[::3] = True
    lab, _ = graph.knn_query(vecs[:4], 5, 1, allowed)
    assert allowed[lab].all()
    with pytest.raises(RuntimeError, match="contiguous"):
        graph.knn_query(vecs[:1], 5, 1, np.zeros_like(allowed))  # nothing allowed: too few


def test_thread_scope_sets_and_restores_numba_per_thread():
    outer = current_threads()
    assert outer == numba.get_num_threads()
    seen = {}

    def other():
        seen["other"] = numba.get_num_threads()

    with threads(1) as n:
        assert n == 1 and numba.get_num_threads() == 1 and current_threads() == 1
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert numba.get_num_threads() == outer == current_threads()
    assert seen["other"] == numba.config.NUMBA_NUM_THREADS  # another thread is untouched
    with pytest.raises(KeyError), threads(1):
        raise KeyError("restored on an exception too")
    assert numba.get_num_threads() == outer


def test_ef_lock_never_mixes_efs_nor_readers_with_a_writer():
    backend = {"ef": None}
    state = {"readers": {}, "writer": 0, "writes": 0, "reads": 0}
    check = threading.Lock()  # guards the bookkeeping below only, not what is tested
    errors: list[str] = []
    lock = EfLock(lambda ef: backend.__setitem__("ef", ef))
    stop = threading.Event()

    def enter(ef):
        with check:
            if state["writer"]:
                errors.append("a reader beside a writer")
            if ef is not None and backend["ef"] != ef:
                errors.append(f"reader of ef {ef} runs at {backend['ef']}")
            others = {e for e, c in state["readers"].items() if c and e is not None and e != ef}
            if ef is not None and others:
                errors.append(f"ef {ef} beside {others}")
            state["readers"][ef] = state["readers"].get(ef, 0) + 1
            state["reads"] += 1

    def leave(ef):
        with check:
            state["readers"][ef] -= 1

    def reader(efs):
        i = 0
        while not stop.is_set():
            ef = efs[i % len(efs)]
            i += 1
            lock.acquire_read(ef)
            try:
                enter(ef)
                for _ in range(50):  # a short search: let other threads interleave
                    pass
                leave(ef)
            finally:
                lock.release_read()

    def writer():
        while not stop.is_set():
            with lock.write():
                with check:
                    if any(state["readers"].values()):
                        errors.append("a writer beside readers")
                    state["writer"] += 1
                    state["writes"] += 1
                lock.forget_ef()
                for _ in range(200):  # an insertion: readers arriving now must wait
                    pass
                with check:
                    state["writer"] -= 1

    plans = [[10]] * 6 + [[10, 20]] * 3 + [[20, None, 10]] * 2 + [[30]]
    workers = [threading.Thread(target=reader, args=(p,)) for p in plans]
    workers.append(threading.Thread(target=writer))
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch often: races show within a second
    try:
        for w in workers:
            w.start()
        stop.wait(1.5)
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=30)
        sys.setswitchinterval(old)
    assert not any(w.is_alive() for w in workers), "a thread never got the lock"
    assert not errors, errors[:5]
    assert state["writes"] > 0 and state["reads"] > 100  # both sides got in
    assert not lock._readers and not lock._writer  # all left


def test_a_question_embeds_with_the_gil_held_to_the_same_bits():
    from fastrag._native import embedding as kernels
    from fastrag._native import readonly

    from fastrag.text.utf8 import encode_utf8

    emb = VocabularyEmbedder(max_features=64).fit([d["text"] for d in mixed_documents(50, seed=3)])
    texts = [d["text"][:80] for d in mixed_documents(40, seed=4)] + ["", "zzz 😀"]
    data, offsets = encode_utf8(texts)
    table = emb._table
    held = np.empty((len(texts), emb.dim), np.float32)
    parallel = np.empty_like(held)
    kernels.embed_counts_held(readonly(data), readonly(offsets), table, held)
    with threads(2):
        kernels.embed_counts(readonly(data), readonly(offsets), table, parallel)
    np.testing.assert_array_equal(held, parallel)
    for i, t in enumerate(texts):  # one question at a time (the held path) gives the batch's rows
        np.testing.assert_array_equal(emb.embed([t])[0], parallel[i])


# -- the admission gate ---------------------------------------------------------------


@pytest.fixture
def gate_of():
    """Set the process's gate for one test, then put the previous one back."""
    before = admission()
    yield lambda n: set_admission(n)
    _threads._gate = before


def test_the_gate_admits_at_most_n_and_every_caller_gets_in(gate_of):
    gate_of(2)
    gate = admission()
    assert isinstance(gate, Admission) and gate.n == 2
    inside, most, done = [0], [0], []
    count = threading.Lock()  # the bookkeeping's own lock, not what is tested
    barrier = threading.Barrier(12)

    def caller(t):
        barrier.wait()
        for _ in range(200):
            with admission():
                with count:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0 if t % 2 else 1e-5)  # the GIL given up inside: others come in
                with count:
                    inside[0] -= 1
        done.append(t)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch often: a lane handed twice would show
    try:
        workers = [threading.Thread(target=caller, args=(t,)) for t in range(12)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=60)
    finally:
        sys.setswitchinterval(old)
    assert not any(w.is_alive() for w in workers), "a caller never got in"
    assert sorted(done) == list(range(12))
    assert most[0] <= 2  # never more than n inside
    assert gate.inside == 0 and gate.waiting == 0  # every place given back

    # two places: a second caller gets in while the first stays; a third waits for one
    first_in, second_in, third_in, leave = (threading.Event() for _ in range(4))

    def stay(entered, out):
        with admission():
            entered.set()
            out.wait(30)

    held = [threading.Thread(target=stay, args=(e, leave)) for e in (first_in, second_in)]
    for th in held:
        th.start()
    assert first_in.wait(30) and second_in.wait(30)
    third = threading.Thread(target=stay, args=(third_in, leave))
    third.start()
    deadline = time.monotonic() + 30
    while gate.waiting < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert gate.waiting == 1 and not third_in.is_set()  # both places taken: the third sleeps
    leave.set()  # the first two leave: the third gets a place
    assert third_in.wait(30)
    for th in (*held, third):
        th.join(timeout=60)


def test_the_gate_lets_waiters_in_first_come_first_in(gate_of):
    gate_of(1)
    gate = admission()
    order, entered, leave = [], threading.Event(), threading.Event()

    def holder():
        with admission():
            entered.set()
            leave.wait(30)

    def waiter(i):
        with admission():
            order.append(i)

    first = threading.Thread(target=holder)
    first.start()
    assert entered.wait(30)
    waiters = []
    for i in range(6):  # queued one after another, each seen waiting before the next comes
        th = threading.Thread(target=waiter, args=(i,))
        th.start()
        deadline = time.monotonic() + 30
        while gate.waiting < i + 1 and time.monotonic() < deadline:
            time.sleep(0.001)
        waiters.append(th)
    assert gate.waiting == 6 and gate.inside == 1
    leave.set()
    for th in (first, *waiters):
        th.join(timeout=60)
    assert order == list(range(6))  # in the order they came
    assert (gate.inside, gate.waiting) == (0, 0)


def test_a_waiter_interrupted_at_the_gate_loses_no_place(gate_of, monkeypatch):
    gate_of(1)
    gate = admission()

    class Interrupted:
        """A waiter's lock whose blocking acquire is cut short (as Ctrl-C does)."""

        def __init__(self, handed_first: bool) -> None:
            self.lock = _thread.allocate_lock()
            self.handed_first = handed_first

        def acquire(self, blocking: bool = True) -> bool:
            if not blocking or not self.lock.locked():
                return self.lock.acquire(blocking)
            if self.handed_first:  # the holder leaves and hands the place over, then the cut
                gate._give_back()
            raise KeyboardInterrupt

        def release(self) -> None:
            self.lock.release()

    for handed_first in (False, True):
        monkeypatch.setattr(_threads, "_new_lock", lambda h=handed_first: Interrupted(h))
        if handed_first:
            gate._free -= 1  # a holder inside, whose leaving is simulated in the cut
        else:
            holder = threading.Event()
            out = threading.Event()

            def hold(holder: threading.Event, out: threading.Event) -> None:
                with admission():
                    holder.set()
                    out.wait(30)

            th = threading.Thread(target=hold, args=(holder, out))
            th.start()
            assert holder.wait(30)
        with pytest.raises(KeyboardInterrupt):
            with admission():
                pass
        assert not admitted() and gate.waiting == 0
        if not handed_first:
            out.set()
            th.join(30)
        assert gate.inside == 0  # every place is free again: none lost to the gone waiter
        monkeypatch.undo()
    with admission():  # and the gate still admits
        assert gate.inside == 1


def test_the_gate_is_reentrant_and_exception_safe(gate_of):
    gate_of(1)
    gate = admission()
    with admission():
        assert admitted()
        with admission():  # a call inside an admitted call: no wait for its own place
            with admission():
                assert admitted()
        assert admitted() and gate.inside == 1
    assert not admitted() and gate.inside == 0
    with pytest.raises(KeyError), admission():
        raise KeyError("the place is given back on an exception")
    assert gate.inside == 0
    with admission():  # switched off while inside: the place held is still given back
        gate_of(None)
        with admission():
            pass
    assert gate.inside == 0 and not admitted()
    with admission():  # off: everyone in, nothing held
        assert not admitted()


def test_gate_settings(gate_of, monkeypatch):
    gate_of("auto")
    assert admission().n == _threads.usable_cores() >= 1
    gate_of(None)
    assert admission() is _threads.OPEN
    for bad in (0, -1, True, 1.5, "two"):
        with pytest.raises(ConfigError):
            set_admission(bad)
    monkeypatch.delenv("FASTRAG_ADMISSION", raising=False)
    assert _threads._from_env() is _threads.OPEN  # off unless asked for
    monkeypatch.setenv("FASTRAG_ADMISSION", "auto")
    assert _threads._from_env().n == _threads.usable_cores()
    monkeypatch.setenv("FASTRAG_ADMISSION", "3")
    assert _threads._from_env().n == 3
    monkeypatch.setenv("FASTRAG_ADMISSION", "off")
    assert _threads._from_env() is _threads.OPEN
    monkeypatch.setenv("FASTRAG_ADMISSION", "many")
    with pytest.raises(ConfigError, match="FASTRAG_ADMISSION"):
        _threads._from_env()


@pytest.mark.parametrize("n", [1, 2, None])
def test_threads_behind_the_gate_get_the_serial_results(loaded, gate_of, n):
    kb, questions = loaded
    gate_of(n)
    modes = ["vector", "keyword", "hybrid"]
    serial = {m: [_key(kb.retrieve(q, k=5, mode=m)) for q in questions[:20]] for m in modes}

    def work(t):
        got = []
        for j in range(30):
            m, i = modes[(t + j) % 3], (t * 7 + j) % 20
            if j % 5 == 4:  # a retrieval inside an admitted block: passes straight through
                with admission():
                    got.append((m, i, _key(kb.retrieve(questions[i], k=5, mode=m))))
            else:
                got.append((m, i, _key(kb.retrieve(questions[i], k=5, mode=m))))
        return got

    with ThreadPoolExecutor(max_workers=16) as pool:
        for got in pool.map(work, range(16)):
            for m, i, hits in got:
                assert hits == serial[m][i]
    gate = admission()
    assert not isinstance(gate, Admission) or (gate.inside, gate.waiting) == (0, 0)


def test_answers_behind_the_gate_never_wait_on_a_place_held_for_them(loaded, gate_of):
    kb, questions = loaded
    gate_of(1)
    seen = []

    def generator(question, hits):
        # generation runs outside the gate: a retrieval on another thread, waited for, gets in
        with ThreadPoolExecutor(max_workers=1) as pool:
            more = pool.submit(kb.retrieve, question, 3).result(timeout=30)
        seen.append((len(hits), len(more)))
        return "see [1]"

    def reranker(question, hits):  # a reranker may be user code: such calls skip the gate
        assert not admitted()
        return hits

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda q: kb.answer(q, k=3, generator=generator), questions[:8]))
        reranked = list(pool.map(lambda q: kb.retrieve(q, k=3, reranker=reranker), questions[:8]))
    assert len(answers) == len(seen) == 8 and all(more == 3 for _, more in seen)
    assert all(len(h) == 3 for h in reranked)
    assert admission().inside == 0
