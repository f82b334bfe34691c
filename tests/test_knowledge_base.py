from __future__ import annotations

import datetime as dt
import json
import os

import numpy as np
import pyarrow as pa
import pytest
from fastrag.datasets.synthetic import mixed_documents

import fastrag
from fastrag import Document, KnowledgeBase, VocabularyEmbedder
from fastrag.errors import (
    ConfigError,
    DocumentError,
    DocumentNotFoundError,
    DuplicateDocumentError,
    EmbedderMismatchError,
    StoreCorruptedError,
    StoreError,
    StoreNotFoundError,
)


def _hit_tuples(hits):
    return [(h.chunk_id, h.doc_id, h.ord, h.start, h.end, h.text, round(h.score, 6)) for h in hits]


def test_relevant_chunk_ranks_first(kb):
    hits = kb.retrieve("How many days in advance must annual leave requests be submitted?", k=3)
    assert hits[0].doc_id == "leave"
    assert hits[0].score >= hits[1].score >= hits[2].score
    zh = kb.retrieve("年假需要提前几天申请？", k=1)
    assert zh[0].doc_id == "leave-zh"


def test_hits_carry_text_offsets_and_metadata(kb, docs):
    hit = kb.retrieve("annual leave requests in advance", k=1)[0]
    assert hit.metadata["title"] == "Annual leave"
    assert hit.metadata["source"] == "hr/leave.md"
    assert hit.metadata["acl"] == ["staff"]
    assert hit.updated_at == dt.datetime(2026, 9, 1, tzinfo=dt.timezone.utc)
    clean = " ".join(docs[0]["text"].split())
    assert clean[hit.start : hit.end] == hit.text
    other = kb.retrieve("expense reports receipts", k=1)[0]
    assert other.doc_id == "expense" and other.metadata["team"] == "finance"


def test_cosine_identical_is_one_and_unrelated_is_zero():
    kb = KnowledgeBase.build([{"id": "a", "text": "abc"}, {"id": "b", "text": "xyz"}])
    hits = kb.retrieve("abc", k=2, mode="vector")
    assert hits[0].doc_id == "a" and hits[0].score == pytest.approx(1.0, abs=1e-6)
    assert hits[1].doc_id == "b" and hits[1].score == pytest.approx(0.0, abs=1e-7)


def test_chunking_window_and_overlap_in_store():
    text = "".join(chr(ord("a") + i % 26) for i in range(250))
    kb = KnowledgeBase.build([{"id": "d", "text": text}], window=100, overlap=20)
    table = kb.retrieve_batch(["abc"], k=10)
    assert table.num_rows == 3
    hits = sorted(kb.retrieve("abc", k=10), key=lambda h: h.ord)
    assert [(h.start, h.end) for h in hits] == [(0, 100), (80, 180), (160, 250)]
    assert all(h.text == text[h.start : h.end] for h in hits)


def test_k_larger_than_corpus_returns_all(kb):
    assert len(kb.retrieve("leave", k=1000)) == len(kb)


def test_retrieve_batch_table(kb):
    questions = ["annual leave", "passwords", "报销", "年假"]
    table = kb.retrieve_batch(questions, k=2)
    assert table.column_names == ["query_index", "rank", "chunk_id", "doc_id", "score", "text"]
    assert table.num_rows == 8
    assert table.column("query_index").to_pylist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert table.column("rank").to_pylist() == [1, 2] * 4
    for i, q in enumerate(questions):
        single = kb.retrieve(q, k=2)
        rows = table.filter(pa.compute.equal(table.column("query_index"), i)).to_pylist()
        assert [r["chunk_id"] for r in rows] == [h.chunk_id for h in single]
        assert [r["text"] for r in rows] == [h.text for h in single]
        np.testing.assert_allclose([r["score"] for r in rows], [h.score for h in single], rtol=1e-5)
    assert kb.retrieve_batch([], k=3).num_rows == 0


def test_save_load_round_trip_gives_identical_results(kb, tmp_path):
    questions = ["annual leave days", "expense receipts", "年假", "VPN authentication"]
    before = [_hit_tuples(kb.retrieve(q, k=4)) for q in questions]
    sid = kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert [_hit_tuples(loaded.retrieve(q, k=4)) for q in questions] == before
    assert loaded.stats()["snapshot"] == sid
    assert len(loaded) == len(kb)
    assert loaded.retrieve_batch(questions, k=4).equals(kb.retrieve_batch(questions, k=4))


def test_loading_maps_vectors_without_copy(kb, tmp_path):
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    seg = loaded._corpus.store.segments[0]
    assert not seg.vectors.flags.writeable
    assert not seg.vectors.flags.owndata  # a view of the mapped Arrow buffer


def test_deletes_never_come_back(kb, tmp_path):
    assert kb.delete(["leave"]) > 0
    assert all(h.doc_id != "leave" for h in kb.retrieve("annual leave in advance", k=100))
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert all(h.doc_id != "leave" for h in loaded.retrieve("annual leave in advance", k=100))
    table = loaded.retrieve_batch(["annual leave"] * 3, k=100)
    assert "leave" not in set(table.column("doc_id").to_pylist())
    assert loaded.stats()["documents"] == 3
    with pytest.raises(DocumentNotFoundError, match="leave"):
        loaded.delete("leave")
    # Re-adding the id after deleting it is allowed.
    loaded.add([{"id": "leave", "text": "Leave is now requested two days ahead."}])
    hits = loaded.retrieve("leave requested two days ahead", k=100)
    assert [h.text for h in hits if h.doc_id == "leave"] == [
        "Leave is now requested two days ahead."
    ]


def test_delete_missing_changes_nothing(kb):
    n = len(kb)
    with pytest.raises(DocumentNotFoundError, match="'nope'"):
        kb.delete(["security", "nope"])
    assert len(kb) == n
    assert kb.delete(["security", "nope"], missing_ok=True) > 0
    assert len(kb) < n


def test_add_then_search_across_segments_equals_fresh_build(docs):
    extra = [dict(d, id=f"extra-{i}") for i, d in enumerate(docs)]
    kb = KnowledgeBase.build(docs, window=60, overlap=10)
    for doc in extra:
        kb.add([doc])
    fresh = KnowledgeBase.build(
        docs + extra,
        window=60,
        overlap=10,
        embedder=VocabularyEmbedder(vocabulary=kb.embedder.vocabulary),
    )
    for q in ["annual leave", "expense", "年假申请", "password"]:
        a = [(h.doc_id, h.ord, round(h.score, 5)) for h in kb.retrieve(q, k=6)]
        b = [(h.doc_id, h.ord, round(h.score, 5)) for h in fresh.retrieve(q, k=6)]
        assert sorted(x[2] for x in a) == sorted(x[2] for x in b)
    assert len(kb) == len(fresh)
    assert kb.stats()["segments"] < 1 + len(extra)  # small segments were merged


def test_failed_add_leaves_kb_unchanged(kb):
    before = (len(kb), kb.stats()["documents"], _hit_tuples(kb.retrieve("leave", k=5)))
    bad_batches = [
        [{"id": "new-1", "text": "fine"}, {"id": "leave", "text": "duplicate of a stored id"}],
        [{"id": "new-2", "text": "fine"}, {"id": "new-2", "text": "twice in one call"}],
        [{"id": "new-3", "text": "fine"}, {"id": "new-4", "text": 42}],
        [{"id": "new-5", "text": "fine"}, {"text": "no id"}],
        [{"id": "new-6", "text": "fine", "updated_at": "not a date"}],
        [{"id": "new-7", "text": "fine", "acl": "staff"}],
    ]
    for batch in bad_batches:
        with pytest.raises(DocumentError):
            kb.add(batch)
        assert (len(kb), kb.stats()["documents"], _hit_tuples(kb.retrieve("leave", k=5))) == before


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"id": "", "text": "x"}, "id is empty"),
        ({"id": "  ", "text": "x"}, "id is empty"),
        ({"id": 7, "text": "x"}, "id must be a string"),
        ({"id": "a", "text": None}, "'a'.*text must be a string"),
        ({"id": "a", "text": b"bytes"}, "text must be a string"),
        ({"id": "a"}, "has no 'text'"),
        ("just a string", "wrap a single document"),
        (["a", "b"], "expected fastrag.Document"),
        ({"id": "a", "text": "x", "title": 3}, "title must be a string"),
        ({"id": "a", "text": "x", "blob": object()}, "not JSON-serialisable"),
    ],
)
def test_bad_documents_are_named(doc, message):
    docs = doc if isinstance(doc, str) else [{"id": "ok", "text": "fine"}, doc]
    with pytest.raises(DocumentError, match=message):
        KnowledgeBase.build(docs)


def test_duplicate_ids_in_build():
    with pytest.raises(DuplicateDocumentError, match="'a' appears twice"):
        KnowledgeBase.build([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])


def test_documents_and_dataclass_inputs_agree():
    a = KnowledgeBase.build([Document("x", "hello there", {"title": "T", "k": 1})])
    b = KnowledgeBase.build([{"id": "x", "text": "hello there", "title": "T", "k": 1}])
    ha, hb = a.retrieve("hello", k=1)[0], b.retrieve("hello", k=1)[0]
    assert _hit_tuples([ha]) == _hit_tuples([hb]) and ha.metadata == hb.metadata == {
        "title": "T",
        "k": 1,
    }


def test_streaming_build_from_generator_in_batches():
    docs = mixed_documents(300, seed=3, mean_chars=400)
    seen = []
    kb = KnowledgeBase.build(docs, progress=seen.append)
    assert kb.stats()["documents"] == 300
    assert seen[-1].stage == "done" and seen[-1].documents == 300 and seen[-1].chunks == len(kb)


def test_empty_documents_are_skipped_and_all_empty_is_an_error():
    kb = KnowledgeBase.build([{"id": "a", "text": "   "}, {"id": "b", "text": "hello"}])
    assert kb.stats()["documents"] == 1
    with pytest.raises(DocumentError, match="no document has any text"):
        KnowledgeBase.build([{"id": "a", "text": ""}])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 10, "overlap": 10},
        {"window": 0},
        {"overlap": -1},
        {"index": "annoy"},
        {"embedder": "x"},
    ],
)
def test_bad_build_parameters(kwargs, docs):
    with pytest.raises(ConfigError):
        KnowledgeBase.build(docs, **kwargs)


@pytest.mark.parametrize("k", [0, -1, True, 1.5])
def test_bad_k(kb, k):
    with pytest.raises(ConfigError):
        kb.retrieve("leave", k=k)


@pytest.mark.parametrize("question", ["", "   ", None, 3])
def test_bad_question(kb, question):
    with pytest.raises(ConfigError):
        kb.retrieve(question)


def test_query_with_other_embedder_is_an_error(kb, tmp_path):
    kb.save(tmp_path / "kb")
    other = VocabularyEmbedder().fit(["completely different corpus"])
    with pytest.raises(EmbedderMismatchError, match="vocabulary"):
        KnowledgeBase.load(tmp_path / "kb", embedder=other)
    same = VocabularyEmbedder.from_config(kb.embedder.config())
    KnowledgeBase.load(tmp_path / "kb", embedder=same)


def test_corrupted_or_truncated_files_fail_with_the_file_named(kb, tmp_path):
    root = tmp_path / "kb"
    sid = kb.save(root)
    chunks = root / "snapshots" / sid / "chunks.arrow"
    original = chunks.read_bytes()

    chunks.write_bytes(original[: len(original) // 2])
    with pytest.raises(StoreCorruptedError, match="chunks.arrow.*truncated"):
        KnowledgeBase.load(root)

    chunks.write_bytes(b"\0" * 16 + original[16:])  # same size, broken header
    with pytest.raises(StoreCorruptedError, match="chunks.arrow"):
        KnowledgeBase.load(root)

    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0xFF  # same size, data changed: only checksums see it
    chunks.write_bytes(bytes(flipped))
    with pytest.raises(StoreCorruptedError, match="chunks.arrow.*checksum"):
        KnowledgeBase.load(root, verify=True)

    chunks.write_bytes(original)
    KnowledgeBase.load(root, verify=True)

    manifest = root / "manifest.json"
    manifest.write_text("{not json")
    with pytest.raises(StoreCorruptedError, match="manifest.json"):
        KnowledgeBase.load(root)


def test_missing_or_foreign_paths(tmp_path, kb):
    with pytest.raises(StoreNotFoundError):
        KnowledgeBase.load(tmp_path / "nothing")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hi")
    with pytest.raises(StoreNotFoundError):
        KnowledgeBase.load(tmp_path / "plain")
    with pytest.raises(StoreError, match="not a fastrag knowledge base"):
        kb.save(tmp_path / "plain")
    assert (tmp_path / "plain" / "notes.txt").read_text() == "hi"


def test_saving_a_different_kb_over_another_needs_overwrite(kb, tmp_path):
    kb.save(tmp_path / "kb")
    other = KnowledgeBase.build([{"id": "z", "text": "zzz other corpus"}])
    with pytest.raises(StoreError, match="overwrite=True"):
        other.save(tmp_path / "kb")
    assert len(KnowledgeBase.load(tmp_path / "kb")) == len(kb)
    other.save(tmp_path / "kb", overwrite=True)
    assert len(KnowledgeBase.load(tmp_path / "kb")) == len(other)


def test_snapshots_keep_and_prune(kb, tmp_path):
    root = tmp_path / "kb"
    first = kb.save(root, keep=None)
    kb.add([{"id": "n1", "text": "new document one"}])
    second = kb.save(root, keep=None)
    kb.delete("n1")
    third = kb.save(root, keep=None)
    ids = [s.id for s in kb.snapshots()]
    assert ids == [first, second, third] and kb.snapshots()[-1].current
    old = KnowledgeBase.load(root, snapshot=second)
    assert "n1" in {h.doc_id for h in old.retrieve("new document one", k=50)}
    assert kb.prune(keep=1) == [first, second]
    assert [s.id for s in kb.snapshots()] == [third]
    assert not (root / "snapshots" / first).exists()
    # A reader of a pruned snapshot keeps working: its files are mapped.
    assert "n1" in {h.doc_id for h in old.retrieve("new document one", k=50)}


def test_save_is_noop_when_unchanged(kb, tmp_path):
    sid = kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.save(tmp_path / "kb") == sid
    assert len(loaded.snapshots()) == 1


def test_crashed_save_leftovers_do_not_break_loading(kb, tmp_path):
    root = tmp_path / "kb"
    sid = kb.save(root)
    junk = root / "snapshots" / ".tmp-000009-x-1"
    junk.mkdir()
    (junk / "chunks.arrow").write_bytes(b"partial")
    assert len(KnowledgeBase.load(root)) == len(kb)
    kb.add([{"id": "n", "text": "more"}])
    kb.save(root)
    assert not junk.exists()
    assert sid in [s.id for s in kb.snapshots()]


def test_manifest_records_format_embedder_and_counts(kb, tmp_path):
    kb.save(tmp_path / "kb")
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    assert manifest["format"] == "fastrag-kb" and manifest["format_version"] == 1
    assert manifest["kernel_abi"] == fastrag._native.KERNEL_ABI
    assert manifest["dim"] == kb.embedder.dim
    assert manifest["embedder"]["vocabulary"] == kb.embedder.vocabulary
    assert manifest["chunking"] == {"window": 60, "overlap": 10, "mode": "auto"}
    entry = manifest["snapshots"][-1]
    assert entry["chunks"] == len(kb) and entry["documents"] == 4
    for name, info in entry["files"].items():
        path = tmp_path / "kb" / "snapshots" / entry["id"] / name
        assert os.path.getsize(path) == info["bytes"]


def test_stats_and_len(kb):
    s = kb.stats()
    assert s["chunks"] == len(kb) > 4 and s["documents"] == 4 and s["deleted_chunks"] == 0
    assert s["vector_bytes"] == len(kb) * kb.embedder.dim * 4
    assert "vocabulary" not in s["embedder"]
    assert repr(kb).startswith("KnowledgeBase(chunks=")


def test_empty_knowledge_base_with_fitted_embedder(tmp_path):
    emb = VocabularyEmbedder().fit(["abc"])
    kb = KnowledgeBase.build([], embedder=emb)
    assert len(kb) == 0 and kb.retrieve("abc") == [] and kb.retrieve_batch(["abc"]).num_rows == 0
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert len(loaded) == 0
    loaded.add([{"id": "a", "text": "abc"}])
    assert loaded.retrieve("abc", k=1)[0].doc_id == "a"


def test_everything_deleted_gives_no_hits(kb):
    kb.delete(["leave", "expense", "leave-zh", "security"])
    assert len(kb) == 0 and kb.retrieve("leave") == []
    assert kb.retrieve_batch(["leave", "x"]).num_rows == 0


def test_threads_argument(kb):
    a = _hit_tuples(kb.retrieve("annual leave", k=3, threads=1))
    assert a == _hit_tuples(kb.retrieve("annual leave", k=3))
    with pytest.raises(ConfigError):
        kb.retrieve("annual leave", threads=0)


def test_failed_save_keeps_previous_snapshot(kb, tmp_path, monkeypatch):
    import errno

    from fastrag.store.chunks import ChunkStore

    root = tmp_path / "kb"
    sid = kb.save(root)
    before = (root / "manifest.json").read_bytes()
    kb.add([{"id": "n", "text": "new text"}])

    def disk_full(self, directory):
        (directory / "chunks.arrow").write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ChunkStore, "write", disk_full)
    with pytest.raises(StoreError, match="No space left"):
        kb.save(root)
    assert (root / "manifest.json").read_bytes() == before
    assert [p.name for p in (root / "snapshots").iterdir()] == [sid]
    assert len(KnowledgeBase.load(root)) == len(kb) - 1


def test_records_equal_arrow_to_pylist(tmp_path):
    import datetime as dt

    docs = [
        {"id": "a", "text": "alpha " * 80, "title": "A", "updated_at": "2026-01-02", "acl": ["g1"]},
        {"id": "b", "text": "年假 " * 90, "source": "b.md", "metadata": {"team": "hr", "n": 3}},
        {"id": "c", "text": "", "title": None},
        {
            "id": "d",
            "text": "short",
            "updated_at": dt.datetime(2025, 5, 6, 7, 8, 9, 10, tzinfo=dt.timezone.utc),
        },
    ]
    kb = fastrag.KnowledgeBase.build(docs)
    kb.add([{"id": "e", "text": "echo " * 70, "acl": []}])  # a second segment
    kb.save(tmp_path / "kb")
    for k in (kb, fastrag.KnowledgeBase.load(tmp_path / "kb")):
        store = k._corpus.store
        n = len(store)
        assert len(store.segments) >= 1
        rows = np.array([n - 1, 0, *range(n), 2], dtype=np.int64)
        assert store.records(rows) == store.rows(rows).to_pylist()
        assert store.records(np.array([], dtype=np.int64)) == []


def test_records_of_sliced_segments():
    from fastrag.store.chunks import ChunkStore

    docs = [
        {"id": f"d{i}", "text": f"text {i} " * (10 + i), "title": None if i % 2 else f"T{i}",
         "updated_at": None if i % 3 else "2026-03-04", "acl": None if i % 4 else [f"g{i}"]}
        for i in range(12)
    ]  # fmt: skip
    kb = fastrag.KnowledgeBase.build(docs, window=30, overlap=5)
    batch = kb._corpus.store.segments[0].batch
    sliced = ChunkStore(
        kb._corpus.store.dim, [batch.slice(3, batch.num_rows - 5), batch.slice(1, 2)]
    )
    rows = np.arange(len(sliced), dtype=np.int64)[::-1].copy()
    assert sliced.records(rows) == sliced.rows(rows).to_pylist()
