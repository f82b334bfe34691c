"""Edited documents: replacing a document under the same id, across saves, loads and compactions.

A replaced document is a new *instance* of its id: its chunks may land in
the row right after its dead instance once segments merge, and every index
of documents (the row document numbers, the document index, document BM25,
the sync's stored documents) must still count them as two. These tests
drive random edit sequences against a model of the live documents, through
the library and through ``fastrag index`` of a changing folder.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import examples
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from fastrag import KnowledgeBase, VocabularyEmbedder
from fastrag.cli import main

WORDS = ["pump", "coolant", "spindle", "belt", "alarm", "servo", "chuck", "filter", "valve"]
WINDOW, OVERLAP = 40, 8


def _embedder() -> VocabularyEmbedder:
    return VocabularyEmbedder().fit([" ".join(WORDS) + " v0123456789"])


def _text(rng: random.Random, tag: str) -> str:
    """A document carrying one word no other version has (``tag``), 1 to 4 chunks long."""
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 18))]
    words.insert(rng.randint(0, len(words)), tag)
    return " ".join(words)


def _check(kb: KnowledgeBase, model: dict[str, tuple[str, str]]) -> None:
    """``kb`` holds exactly the model's documents, each findable by its version's own word."""
    corpus = kb._corpus
    store = corpus.store
    assert set(store.doc_index()) == set(model)
    assert kb.stats()["documents"] == len(model)
    n_instances = store.doc_starts().size - 1
    if corpus.documents is not None:
        assert corpus.documents.n_rows == n_instances
        assert corpus.keyword.n_rows == store.n_rows
    for doc_id, (tag, _) in model.items():
        for mode in ("keyword", "hybrid"):
            hits = kb.retrieve(tag, k=3, mode=mode)
            assert hits and hits[0].doc_id == doc_id, (mode, tag, [h.doc_id for h in hits])


class Edits(RuleBasedStateMachine):
    """add / delete / replace / sync / save / load / compact against a dict of live documents."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="fastrag-edits-")) / "kb"
        self.model: dict[str, tuple[str, str]] = {}  # id -> (tag, text)
        self.versions = 0
        self.kb: KnowledgeBase | None = None

    def teardown(self) -> None:
        shutil.rmtree(self.root.parent, ignore_errors=True)

    def _doc(self, doc_id: str, seed: int) -> dict[str, str]:
        self.versions += 1
        tag = f"v{self.versions:04d}"
        text = _text(random.Random(seed), tag)
        self.model[doc_id] = (tag, text)
        return {"id": doc_id, "text": text}

    @initialize(
        n=st.integers(1, 4), seed=st.integers(0, 2**16), index=st.sampled_from(["exact", "hnsw"])
    )
    def build(self, n, seed, index):
        docs = [self._doc(f"d{i}", seed + i) for i in range(n)]
        self.kb = KnowledgeBase.build(
            docs, embedder=_embedder(), window=WINDOW, overlap=OVERLAP, index=index
        )

    @rule(seed=st.integers(0, 2**16))
    def add(self, seed):
        doc_id = f"d{len(self.model) + self.versions}"
        if doc_id not in self.model:
            self.kb.add([self._doc(doc_id, seed)])

    @rule(pick=st.integers(0, 50))
    def delete(self, pick):
        if len(self.model) > 1:
            doc_id = sorted(self.model)[pick % len(self.model)]
            self.kb.delete(doc_id)
            del self.model[doc_id]

    @rule(
        pick=st.integers(0, 50),
        seed=st.integers(0, 2**16),
        how=st.sampled_from(["delete-add", "replace", "sync"]),
    )
    def replace(self, pick, seed, how):
        doc_id = sorted(self.model)[pick % len(self.model)]
        doc = self._doc(doc_id, seed)
        if how == "delete-add":
            self.kb.delete([doc_id])
            self.kb.add([doc])
        elif how == "replace":
            self.kb.add([doc], replace=[doc_id])
        else:
            others = [{"id": d, "text": t} for d, (_, t) in self.model.items() if d != doc_id]
            plan = self.kb.sync([*others, doc])
            assert plan.changed

    @rule()
    def compact(self):
        self.kb.compact()

    @rule(share=st.sampled_from([0.0, 0.2, 1.0]))
    def save_and_load(self, share):
        self.kb.save(self.root, compact_share=share)
        self.kb = KnowledgeBase.load(self.root, verify=True)

    @invariant()
    def holds_the_model(self):
        if self.kb is not None:
            _check(self.kb, self.model)


Edits.TestCase.settings = settings(
    max_examples=examples(12),
    stateful_step_count=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
test_edits_against_a_model = Edits.TestCase


def test_the_reported_sequence_loads(tmp_path):
    """The report: 20 documents, then twice load, replace d7, save; the next load failed."""
    root = tmp_path / "kb"
    docs = [
        {"id": f"d{i}", "text": f"document {i} about pumps and belts number{i}"} for i in range(20)
    ]
    KnowledgeBase.build(docs).save(root)
    for round_ in range(3):
        kb = KnowledgeBase.load(root)
        kb.delete(["d7"])
        kb.add([{"id": "d7", "text": f"replaced text round{round_}"}])
        kb.save(root)
    kb = KnowledgeBase.load(root, verify=True)
    assert kb.stats()["documents"] == 20
    assert kb.retrieve("round2", k=1, mode="keyword")[0].doc_id == "d7"
    assert not kb.retrieve("round1", k=1, mode="keyword")


@pytest.mark.parametrize("times", [1, 3])
def test_compact_after_a_replaced_document(times):
    kb = KnowledgeBase.build([{"id": "a", "text": "alpha text"}, {"id": "b", "text": "beta text"}])
    for i in range(times):
        kb.delete(["b"])
        kb.add([{"id": "b", "text": f"beta new{i}"}])
    assert kb.compact() == times
    assert kb.stats()["documents"] == 2
    assert kb.retrieve(f"new{times - 1}", k=1, mode="keyword")[0].doc_id == "b"


def test_a_folder_edited_and_indexed_again_and_again(tmp_path, capsys):
    """Edit files of a folder and run ``fastrag index`` after each edit: the KB always loads."""
    rng = random.Random(7)
    docs, kb_path = tmp_path / "docs", tmp_path / "kb"
    docs.mkdir()
    live: dict[str, str] = {}
    for i in range(4):
        live[f"f{i}.txt"] = f"file {i} initial text token{i}x"
        (docs / f"f{i}.txt").write_text(live[f"f{i}.txt"], encoding="utf-8")
    for step in range(12):
        op = rng.choice(["edit", "edit", "edit", "add", "remove"])
        name = rng.choice(sorted(live))
        if op == "add":
            name = f"n{step}.txt"
        if op == "remove" and len(live) > 1:
            (docs / name).unlink()
            del live[name]
        else:
            live[name] = (
                f"{name} edit {step} "
                + " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
                + f" mark{step}z"
            )
            (docs / name).write_text(live[name], encoding="utf-8")
        assert main(["index", str(docs), "--kb", str(kb_path)]) == 0
        kb = KnowledgeBase.load(kb_path, verify=True)
        assert kb.stats()["documents"] == len(live)
        for name, text in live.items():
            mark = text.split()[-1]
            hits = kb.retrieve(mark, k=1, mode="keyword")
            assert hits and hits[0].metadata["origin"].endswith(name), (step, name, mark)
        capsys.readouterr()
