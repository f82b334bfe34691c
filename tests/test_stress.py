"""Stress: add / delete / compact / save / load interleaved with reads, against a serial model.

Bounded by operations, never by time: hypothesis runs a fixed number of
examples of a fixed number of steps, and the processes perform a fixed
number of operations each.

- A hypothesis state machine drives one knowledge base through random
  add / delete / compact / save / load steps and checks, after every step,
  that it holds exactly the chunks of the model's live documents, and that
  no read returns a deleted document.
- Processes: a writer process runs a seeded sequence of the same operations,
  saving after each and recording the model of every snapshot; reader
  processes load and read the knowledge base meanwhile. Every snapshot a
  reader saw must equal the writer's model of that snapshot.

- Threads: a writer thread mutates one ``KnowledgeBase`` while reader
  threads retrieve from it; every read must match one version of the
  model that was current at some moment during that read.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import shutil
import tempfile
import threading
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from fastrag import KnowledgeBase, VocabularyEmbedder
from fastrag.text.chunking import Chunker

pytestmark = pytest.mark.stress

WORDS = ["leave", "policy", "expense", "travel", "report", "annual", "年假", "申请", "vpn", "badge"]
WINDOW, OVERLAP = 48, 8


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30)))


def _embedder() -> VocabularyEmbedder:
    return VocabularyEmbedder().fit([" ".join(WORDS)])


def _chunks(kb: KnowledgeBase) -> list[tuple[str, int, str]]:
    """Every live chunk, as (doc_id, ord, text), sorted."""
    n = len(kb)
    if n == 0:
        return []
    hits = kb.retrieve("leave policy", k=n, mode="vector")
    return sorted((h.doc_id, h.ord, h.text) for h in hits)


def _expected(model: dict[str, str]) -> list[tuple[str, int, str]]:
    """The chunks a fresh build of the model's documents holds."""
    chunker = Chunker(window=WINDOW, overlap=OVERLAP)
    return sorted(
        (doc_id, ord_, text)
        for doc_id, doc in model.items()
        for ord_, text in enumerate(chunker.split(doc))
    )


class KnowledgeBaseModel(RuleBasedStateMachine):
    """One knowledge base against a dict of its live documents."""

    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="fastrag-stress-")) / "kb"
        self.model: dict[str, str] = {}
        self.saved: dict[str, dict[str, str]] = {}  # snapshot id -> model at that save
        self.counter = 0
        self.kb: KnowledgeBase | None = None

    def teardown(self) -> None:
        shutil.rmtree(self.root.parent, ignore_errors=True)

    def _new_id(self) -> str:
        self.counter += 1
        return f"doc-{self.counter}"

    @initialize(target=ids, seed=st.integers(0, 2**16))
    def build(self, seed):
        rng = random.Random(seed)
        doc_id = self._new_id()
        self.model[doc_id] = _text(rng)
        self.kb = KnowledgeBase.build(
            [{"id": doc_id, "text": self.model[doc_id]}],
            embedder=_embedder(),
            window=WINDOW,
            overlap=OVERLAP,
        )
        return doc_id

    @rule(target=ids, seed=st.integers(0, 2**16))
    def add(self, seed):
        rng = random.Random(seed)
        doc_id = self._new_id()
        text = _text(rng)
        self.kb.add([{"id": doc_id, "text": text}])
        self.model[doc_id] = text
        return doc_id

    @rule(doc_id=consumes(ids))
    def delete(self, doc_id):
        self.kb.delete(doc_id, missing_ok=True)
        self.model.pop(doc_id, None)

    @rule()
    def compact(self):
        self.kb.compact()

    @rule(keep=st.sampled_from([None, 1, 2]))
    def save(self, keep):
        sid = self.kb.save(self.root, keep=keep)
        self.saved[sid] = dict(self.model)
        listed = {s.id for s in self.kb.snapshots()}
        assert sid in listed
        self.saved = {k: v for k, v in self.saved.items() if k in listed}

    @rule(data=st.data())
    def load(self, data):
        if not self.saved:
            return
        sid = data.draw(st.sampled_from(sorted(self.saved)))
        loaded = KnowledgeBase.load(self.root, snapshot=sid, verify=True)
        assert _chunks(loaded) == _expected(self.saved[sid])
        # Carry on from the loaded snapshot (saving it back makes it current again).
        self.kb, self.model = loaded, dict(self.saved[sid])

    @rule(word=st.sampled_from(WORDS), mode=st.sampled_from(["keyword", "hybrid", "vector"]))
    def read(self, word, mode):
        for h in self.kb.retrieve(word, k=20, mode=mode):
            assert h.doc_id in self.model, f"deleted document {h.doc_id} returned"
            assert h.text in self.model[h.doc_id]

    @invariant()
    def holds_exactly_the_models_chunks(self):
        if self.kb is not None:
            assert self.kb.stats()["documents"] == len(self.model)
            assert _chunks(self.kb) == _expected(self.model)


KnowledgeBaseModel.TestCase.settings = settings(
    max_examples=10,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,  # the same operations on every run
    suppress_health_check=[HealthCheck.too_slow],
)
test_knowledge_base_against_a_serial_model = KnowledgeBaseModel.TestCase


# -- processes ----------------------------------------------------------------------

WRITER_OPS = 25
READERS = 2


def _writer(root: str, models: str, seed: int, started, errors) -> None:
    """A seeded sequence of add / delete / compact / save; the model of every snapshot."""
    try:
        rng = random.Random(seed)
        kb = KnowledgeBase.load(root)
        model = json.loads(Path(models, "initial.json").read_text())
        started.set()
        counter = 0
        for _ in range(WRITER_OPS):
            op = rng.choice(["add", "add", "delete", "compact"])
            if op == "add":
                counter += 1
                doc_id, text = f"w-{counter}", _text(rng)
                kb.add([{"id": doc_id, "text": text}])
                model[doc_id] = text
            elif op == "delete" and model:
                doc_id = rng.choice(sorted(model))
                kb.delete(doc_id)
                del model[doc_id]
            else:
                kb.compact()
            sid = kb.save(root, keep=rng.choice([1, 2]))
            Path(models, f"{sid}.json").write_text(json.dumps(model))
    except BaseException:
        errors.put(traceback.format_exc())
        raise
    finally:
        started.set()


def _reader(root: str, seen: str, stop, errors) -> None:
    """Load and read until told to stop; record what each loaded snapshot held."""
    try:
        out = []
        while not stop.is_set() and len(out) < 2000:
            kb = KnowledgeBase.load(root)
            sid = kb.stats()["snapshot"]
            live = {d for d, _, _ in _chunks(kb)}
            for h in kb.retrieve("leave policy", k=10, mode="hybrid"):
                assert h.doc_id in live
            out.append([sid, sorted(live), kb.stats()["documents"]])
        Path(seen).write_text(json.dumps(out))
    except BaseException:
        errors.put(traceback.format_exc())
        raise


def test_readers_in_processes_see_whole_snapshots_of_a_writer_process(tmp_path):
    rng = random.Random(13)
    root, models = tmp_path / "kb", tmp_path / "models"
    models.mkdir()
    initial = {f"d-{i}": _text(rng) for i in range(40)}
    kb = KnowledgeBase.build(
        [{"id": i, "text": t} for i, t in initial.items()],
        embedder=_embedder(),
        window=WINDOW,
        overlap=OVERLAP,
    )
    sid = kb.save(root)
    (models / "initial.json").write_text(json.dumps(initial))
    (models / f"{sid}.json").write_text(json.dumps(initial))

    ctx = multiprocessing.get_context("spawn")
    started, stop, errors = ctx.Event(), ctx.Event(), ctx.Queue()
    seen = [str(tmp_path / f"seen-{i}.json") for i in range(READERS)]
    readers = [ctx.Process(target=_reader, args=(str(root), s, stop, errors)) for s in seen]
    writer = ctx.Process(target=_writer, args=(str(root), str(models), 7, started, errors))
    for p in readers:
        p.start()
    writer.start()
    try:
        writer.join(600)
    finally:
        stop.set()
        for p in readers:
            p.join(600)
    assert errors.empty(), errors.get()
    assert writer.exitcode == 0 and all(p.exitcode == 0 for p in readers)
    checked = 0
    for path in seen:
        for sid, live, documents in json.loads(Path(path).read_text()):
            model = json.loads((models / f"{sid}.json").read_text())
            assert live == sorted(model) and documents == len(model), sid
            checked += 1
    assert checked > 0
    final = KnowledgeBase.load(root)
    model = json.loads((models / f"{final.stats()['snapshot']}.json").read_text())
    assert _chunks(final) == _expected(model)


# -- threads ------------------------------------------------------------------------

THREAD_WRITES, THREAD_READS = 40, 60


def test_reader_threads_see_one_version_of_the_model_per_read(tmp_path):
    rng = random.Random(29)
    texts = {f"d-{i}": _text(rng) for i in range(60)}
    kb = KnowledgeBase.build(
        [{"id": i, "text": t} for i, t in texts.items()],
        embedder=_embedder(),
        window=WINDOW,
        overlap=OVERLAP,
    )
    # versions[-1] is published before the operation that makes it true, so at any
    # moment the knowledge base holds versions[-2] or versions[-1].
    versions: list[frozenset[str]] = [frozenset(texts)]
    lock = threading.Lock()
    errors: list[str] = []
    bad: list[str] = []

    def publish(model: frozenset[str]) -> None:
        with lock:
            versions.append(model)

    def writer() -> None:
        try:
            live, counter = set(texts), 0
            for step in range(THREAD_WRITES):
                op = rng.choice(["add", "add", "delete", "compact", "save"])
                if op == "add":
                    counter += 1
                    doc_id = f"t-{counter}"
                    texts[doc_id] = _text(rng)
                    live.add(doc_id)
                    publish(frozenset(live))
                    kb.add([{"id": doc_id, "text": texts[doc_id]}])
                elif op == "delete" and live:
                    doc_id = rng.choice(sorted(live))
                    live.discard(doc_id)
                    publish(frozenset(live))
                    kb.delete(doc_id)
                elif op == "compact":
                    kb.compact()
                else:
                    kb.save(tmp_path / "kb", keep=1 + step % 2)
        except BaseException:  # noqa: BLE001 - reported below
            errors.append(traceback.format_exc())

    def reader(mode: str) -> None:
        try:
            for i in range(THREAD_READS):
                with lock:
                    first = max(0, len(versions) - 2)
                hits = kb.retrieve(WORDS[i % len(WORDS)], k=8, mode=mode)
                with lock:
                    seen = versions[first:]
                ids = {h.doc_id for h in hits}
                if not any(ids <= v for v in seen):
                    bad.append(f"{mode}: {sorted(ids)} matches no version of the model")
                bad.extend(f"{h.doc_id}: wrong text" for h in hits if h.text not in texts[h.doc_id])
        except BaseException:  # noqa: BLE001
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(m,)) for m in ("vector", "keyword", "hybrid")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert not bad, bad[:3]
    assert sorted({d for d, _, _ in _chunks(kb)}) == sorted(versions[-1])
    assert _chunks(kb) == _expected({d: texts[d] for d in versions[-1]})
