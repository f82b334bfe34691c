"""HNSW behind KnowledgeBase: recall, updates, filters, snapshots and crashes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from fastrag.datasets.synthetic import mixed_documents
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrag import KnowledgeBase, Principal, VocabularyEmbedder
from fastrag.config import FAULT_POINTS
from fastrag.errors import ConfigError, StoreCorruptedError
from fastrag.index.hnsw import AUTO_MIN_ROWS, HnswConfig


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    return list(mixed_documents(400, seed=21, mean_chars=600))


@pytest.fixture(scope="module")
def questions(corpus) -> list[str]:
    rng = np.random.default_rng(4)
    out = []
    for i in rng.integers(0, len(corpus), 60):
        text = corpus[int(i)]["text"]
        start = int(rng.integers(0, max(1, len(text) - 60)))
        out.append(text[start : start + 50])
    return out


@pytest.fixture(scope="module")
def hnsw_kb(corpus) -> KnowledgeBase:
    return KnowledgeBase.build(
        corpus, embedder=VocabularyEmbedder(max_features=64), index="hnsw", threads=1
    )


def test_hnsw_recall_against_exact(hnsw_kb, questions):
    assert hnsw_kb.index == "hnsw"
    report = hnsw_kb.verify(questions, k=10)
    assert report["recall"] >= 0.95
    assert {"exact_ms_p50", "index_ms_p50", "exact_batch_qps", "index_batch_qps"} <= set(report)


def test_exact_flag_forces_exact(hnsw_kb, questions):
    q = questions[0]
    exact = hnsw_kb.retrieve(q, k=10, mode="vector", exact=True)
    approx = hnsw_kb.retrieve(q, k=10, mode="vector")
    assert len(exact) == len(approx) == 10
    assert [h.score for h in exact] == sorted((h.score for h in exact), reverse=True)
    # Exact is the upper bound of what any index can find.
    assert exact[0].score >= approx[0].score - 1e-6


def test_hnsw_survives_save_load(hnsw_kb, questions, tmp_path):
    before = [
        [h.chunk_id for h in hnsw_kb.retrieve(q, k=10, mode="vector")] for q in questions[:20]
    ]
    hnsw_kb.save(tmp_path / "kb")
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    assert manifest["index"]["type"] == "hnsw" and manifest["index"]["hnsw"]["M"] == 16
    assert "hnsw.bin" in manifest["snapshots"][-1]["files"]
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.index == "hnsw"
    assert loaded.wait_ready(timeout=60) and loaded.ready()  # the graph loads in the background
    after = [[h.chunk_id for h in loaded.retrieve(q, k=10, mode="vector")] for q in questions[:20]]
    assert after == before
    assert loaded.verify(questions, k=10)["recall"] >= 0.95


def test_vector_search_is_exact_until_the_graph_is_in(hnsw_kb, questions, tmp_path, monkeypatch):
    from fastrag.index import hnsw_mapped

    hnsw_kb.save(tmp_path / "kb")
    gate = threading.Event()
    real_open = hnsw_mapped.MappedGraph.open

    def slow_open(*args, **kwargs):
        gate.wait(30)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(hnsw_mapped.MappedGraph, "open", slow_open)
    loaded = KnowledgeBase.load(tmp_path / "kb")
    try:
        assert not loaded.ready() and not loaded.wait_ready(timeout=0.01)
        for q in questions[:10]:
            got = [h.chunk_id for h in loaded.retrieve(q, k=10, mode="vector")]
            assert got == [h.chunk_id for h in hnsw_kb.retrieve(q, k=10, mode="vector", exact=True)]
            assert loaded.answer(q, mode="hybrid").hits  # hybrid answers too, meanwhile
    finally:
        gate.set()
    assert loaded.wait_ready(timeout=60) and loaded.ready()
    assert loaded.stats()["hnsw"]["elements"] == len(hnsw_kb)


def test_a_damaged_graph_leaves_exact_search(hnsw_kb, questions, tmp_path):
    hnsw_kb.save(tmp_path / "kb")
    (graph,) = (tmp_path / "kb").rglob("hnsw.bin")
    blob = bytearray(graph.read_bytes())
    per_elem = int.from_bytes(blob[24:32], "little")
    blob[96 + 3 * per_elem + 4 : 96 + 3 * per_elem + 8] = (10**9).to_bytes(4, "little")
    graph.write_bytes(bytes(blob))  # same size: only the links check notices
    loaded = KnowledgeBase.load(tmp_path / "kb")
    with pytest.raises(StoreCorruptedError, match="hnsw.bin"):
        loaded.wait_ready(timeout=60)
    assert not loaded.ready()
    q = questions[0]
    got = [h.chunk_id for h in loaded.retrieve(q, k=10, mode="vector")]
    assert got == [h.chunk_id for h in hnsw_kb.retrieve(q, k=10, mode="vector", exact=True)]
    with pytest.raises(StoreCorruptedError, match="SHA-256"):
        KnowledgeBase.load(tmp_path / "kb", verify=True)  # verify: checked before load returns


def test_hnsw_adds_and_deletes(corpus, questions):
    kb = KnowledgeBase.build(
        corpus[:300], embedder=VocabularyEmbedder(max_features=64), index="hnsw", threads=1
    )
    kb.add(corpus[300:])
    assert kb.verify(questions, k=10)["recall"] >= 0.95
    victims = [d["id"] for d in corpus[::3]]
    kb.delete(victims)
    gone = set(victims)
    for q in questions:
        for mode in ("vector", "hybrid"):
            assert not {h.doc_id for h in kb.retrieve(q, k=20, mode=mode)} & gone
    assert kb.verify(questions, k=10)["recall"] >= 0.95
    kb.compact()  # a third deleted: the graph is rebuilt without them
    assert kb.stats()["hnsw"]["deleted"] == 0
    for q in questions[:10]:
        assert not {h.doc_id for h in kb.retrieve(q, k=20, mode="vector")} & gone


@settings(max_examples=20, deadline=None)
@given(keep=st.floats(0.001, 1.0), seed=st.integers(0, 1000))
def test_hnsw_filters_never_leak_and_never_starve(hnsw_kb, questions, keep, seed):
    rng = np.random.default_rng(seed)
    ids = sorted(
        {
            h
            for h in hnsw_kb._corpus.store.rows(np.arange(len(hnsw_kb)), ["doc_id"])
            .column("doc_id")
            .to_pylist()
        }
    )
    allowed = {d for d in ids if rng.random() < keep}
    if not allowed:
        allowed = {ids[0]}
    eligible_chunks = sum(
        1
        for d in hnsw_kb._corpus.store.rows(np.arange(len(hnsw_kb)), ["doc_id"])
        .column("doc_id")
        .to_pylist()
        if d in allowed
    )
    for q in questions[:3]:
        hits = hnsw_kb.retrieve(q, k=10, mode="vector", where={"doc_id": sorted(allowed)})
        assert {h.doc_id for h in hits} <= allowed
        assert len(hits) == min(10, eligible_chunks)


def test_hnsw_with_access_control(corpus):
    docs = [dict(d, acl=["team-a"] if i % 2 else None) for i, d in enumerate(corpus[:200])]
    kb = KnowledgeBase.build(
        docs, embedder=VocabularyEmbedder(max_features=64), index="hnsw", threads=1
    )
    public = {d["id"] for i, d in enumerate(docs) if i % 2 == 0}
    for q in [docs[1]["text"][:40], docs[3]["text"][:40]]:
        hits = kb.retrieve(q, k=10, principal=Principal(user="x"))
        assert {h.doc_id for h in hits} <= public and len(hits) == 10


def test_auto_chooses_exact_for_small_corpora(corpus):
    kb = KnowledgeBase.build(corpus[:50], index="auto")
    assert kb.index == "exact" and len(kb) < AUTO_MIN_ROWS
    assert "fewer than" in kb.stats()["auto"]["reason"]


def test_switch_index(corpus, questions):
    kb = KnowledgeBase.build(corpus, embedder=VocabularyEmbedder(max_features=64))
    assert kb.index == "exact"
    assert kb.set_index("hnsw", hnsw={"M": 8, "ef_search": 80}, threads=1) == "hnsw"
    assert kb.stats()["hnsw"]["M"] == 8
    assert kb.verify(questions, k=10)["recall"] >= 0.9
    assert kb.set_index("exact") == "exact" and kb.stats()["hnsw"] is None
    with pytest.raises(ConfigError):
        kb.set_index("annoy")
    with pytest.raises(ConfigError):
        HnswConfig(M=1)


def test_missing_or_corrupt_hnsw_file_is_named(hnsw_kb, tmp_path):
    root = tmp_path / "kb"
    sid = hnsw_kb.save(root)
    path = root / "snapshots" / sid / "hnsw.bin"
    original = path.read_bytes()
    path.unlink()
    with pytest.raises(StoreCorruptedError, match="hnsw.bin.*missing"):
        KnowledgeBase.load(root)
    path.write_bytes(original[: len(original) // 3])
    with pytest.raises(StoreCorruptedError, match="hnsw.bin"):
        KnowledgeBase.load(root)
    garbage = bytearray(original)
    garbage[:64] = b"\xff" * 64
    path.write_bytes(bytes(garbage))
    # The store-level load reports a damaged file as StoreCorruptedError, as documented.
    with pytest.raises(StoreCorruptedError, match="hnsw.bin"):
        KnowledgeBase.load(root)
    flipped = bytearray(original)
    flipped[-5] ^= 0xFF  # same size, an upper layer changed: only the checksum sees it
    path.write_bytes(bytes(flipped))
    with pytest.raises(StoreCorruptedError, match="hnsw.bin.*SHA-256"):
        KnowledgeBase.load(root, verify=True)
    path.write_bytes(original)
    assert KnowledgeBase.load(root, verify=True).index == "hnsw"


SAVER = textwrap.dedent(
    """
    import sys
    from fastrag import KnowledgeBase
    kb = KnowledgeBase.load(sys.argv[1])
    kb.add([{"id": "new-doc", "text": "a brand new document about crash tests"}])
    kb.delete(["doc-000001"])
    kb.save(sys.argv[1], keep=1)
    print("saved")
    """
)


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_a_crash_at_any_point_of_a_save_leaves_a_loadable_snapshot(corpus, tmp_path, point):
    root = tmp_path / "kb"
    kb = KnowledgeBase.build(
        corpus[:80], embedder=VocabularyEmbedder(max_features=64), index="hnsw", threads=1
    )
    first = kb.save(root)
    env = dict(os.environ, FASTRAG_FAULT=point)
    proc = subprocess.run(
        [sys.executable, "-c", SAVER, str(root)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 86, proc.stderr  # killed at the fault point
    loaded = KnowledgeBase.load(root, verify=True)
    ids = {
        h.doc_id
        for h in loaded.retrieve("a brand new document about crash tests", k=200, mode="keyword")
    }
    if point in ("snapshot-files-written", "snapshot-renamed"):
        # The manifest was not replaced: the previous snapshot is current, untouched.
        assert loaded.stats()["snapshot"] == first and "new-doc" not in ids
        assert len(loaded) == len(kb)
    else:
        assert loaded.stats()["snapshot"] != first and "new-doc" in ids
        assert "doc-000001" not in {h.doc_id for h in loaded.retrieve("x", k=500, mode="vector")}
    # The next save cleans whatever the crash left behind.
    loaded.add([{"id": "after", "text": "after the crash"}])
    loaded.save(root, keep=1)
    leftovers = [p.name for p in (root / "snapshots").iterdir()]
    assert leftovers == [loaded.stats()["snapshot"]]


def test_reader_keeps_working_while_a_writer_saves(corpus, tmp_path):
    root = tmp_path / "kb"
    KnowledgeBase.build(
        corpus[:60], embedder=VocabularyEmbedder(max_features=64), index="hnsw", threads=1
    ).save(root)
    reader = KnowledgeBase.load(root)
    before = [h.chunk_id for h in reader.retrieve("document", k=5)]
    writer = KnowledgeBase.load(root)
    for i in range(3):
        writer.add([{"id": f"w{i}", "text": f"writer document {i}"}])
        writer.save(root, keep=1)  # prunes the reader's snapshot
    assert [h.chunk_id for h in reader.retrieve("document", k=5)] == before
    assert "w2" in {h.doc_id for h in KnowledgeBase.load(root).retrieve("writer document 2", k=3)}
