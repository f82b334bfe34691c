"""Incremental re-indexing (store/sync.py, KnowledgeBase.sync, fastrag index on an existing KB)."""

from __future__ import annotations

import shutil

import numpy as np
import orjson
import pyarrow as pa
import pytest
from fixtures_sources import QUERY, write_docx, write_pdf, write_sqlite

import fastrag
from fastrag.cli import main
from fastrag.errors import DuplicateDocumentError, EmbedderError, SourceError
from fastrag.store import loaders
from fastrag.store.loaders import load_documents, resolve_sources
from fastrag.store.sync import StoredDocument, plan_sync


def _folder(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Alpha\n\nThe alpha pump moves coolant.\n", encoding="utf-8")
    (docs / "b.txt").write_text("Bravo: the belt drives the spindle.\n", encoding="utf-8")
    (docs / "c.txt").write_text("Charlie: the chuck holds the part.\n", encoding="utf-8")
    (docs / "items.jsonl").write_text(
        '{"id": "j1", "text": "Juliet one"}\n{"id": "j2", "text": "Juliet two"}\n', encoding="utf-8"
    )
    write_pdf(docs / "manual.pdf")
    write_docx(docs / "proc.docx")
    return docs


def _embedder(folder):
    """One fitted embedder for both knowledge bases, so vectors are comparable."""
    emb = fastrag.VocabularyEmbedder()
    emb.fit([d["text"] for d in load_documents(folder)] + ["delta echo new text changed zulu"])
    return emb


def _content(kb):
    """Everything a fresh build and a synced one must share (chunk ids aside)."""
    store = kb._corpus.store.compacted()
    table = pa.Table.from_batches([s.batch for s in store.segments]).unify_dictionaries()
    rows = table.drop_columns(["chunk_id", "vector"]).to_pylist()
    vectors = np.concatenate([s.vectors for s in store.segments])
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["doc_id"], rows[i]["ord"]))
    return [rows[i] for i in order], vectors[order]


def _change(docs):
    (docs / "b.txt").write_text("Bravo changed: the belt was replaced.\n", encoding="utf-8")
    (docs / "c.txt").unlink()
    (docs / "d.md").write_text("## Delta\n\nDelta echo: a new file.\n", encoding="utf-8")
    (docs / "items.jsonl").write_text(
        '{"id": "j1", "text": "Juliet one"}\n{"id": "j3", "text": "Juliet three"}\n',
        encoding="utf-8",
    )


@pytest.mark.parametrize("chunking", ["windows", "structure"])
def test_sync_equals_a_fresh_build(tmp_path, chunking):
    docs = _folder(tmp_path)
    emb = _embedder(docs)
    kb = fastrag.KnowledgeBase.build(
        load_documents(docs), embedder=emb, chunking=chunking, window=80, overlap=10
    )
    kb.save(tmp_path / "kb")
    _change(docs)
    plan = kb.sync(resolve_sources(docs))
    assert sorted(d["id"] for d in plan.add) == ["d.md", "j3"]
    assert [d["id"] for d in plan.replace] == ["b.txt", "j1"]  # a changed file: all its documents
    assert sorted(plan.delete) == ["c.txt", "j2"]
    assert sorted(plan.unchanged) == [
        "a.md", "manual.pdf#page=1", "manual.pdf#page=2", "proc.docx",
    ]  # fmt: skip
    origins = {o.origin.rsplit("/", 1)[-1]: o for o in plan.origins.values()}
    assert (origins["c.txt"].deleted, origins["d.md"].added, origins["b.txt"].replaced) == (1, 1, 1)
    assert not origins["manual.pdf"].changed
    fresh = fastrag.KnowledgeBase.build(
        load_documents(docs), embedder=emb, chunking=chunking, window=80, overlap=10
    )
    (rows, vectors), (fresh_rows, fresh_vectors) = _content(kb), _content(fresh)
    assert rows == fresh_rows
    np.testing.assert_array_equal(vectors, fresh_vectors)
    # Keyword statistics count tombstoned chunks until they are compacted away (as after delete()).
    kb.compact()
    # Scores per leg do not depend on row order (hybrid ties do: rows are in another order).
    for q in ("belt replaced", "coolant level fix", "Juliet", "chuck holds the part"):
        for mode in ("vector", "keyword"):
            got = {(h.doc_id, h.ord): round(h.score, 5) for h in kb.retrieve(q, k=50, mode=mode)}
            want = {
                (h.doc_id, h.ord): round(h.score, 5) for h in fresh.retrieve(q, k=50, mode=mode)
            }
            assert got == want, (q, mode)
    kb.save(tmp_path / "kb")
    again = fastrag.KnowledgeBase.load(tmp_path / "kb")
    assert _content(again)[0] == fresh_rows
    assert not again.sync(resolve_sources(docs)).changed


def test_unchanged_files_are_hashed_not_parsed(tmp_path, monkeypatch):
    docs = _folder(tmp_path)
    kb = fastrag.KnowledgeBase.build(load_documents(docs))
    parsed = []
    real = loaders.FileSource.load

    def spy(self, sha256=None):
        parsed.append(self.path.name)
        return real(self, sha256)

    monkeypatch.setattr(loaders.FileSource, "load", spy)
    (docs / "b.txt").write_text("Bravo again\n", encoding="utf-8")
    plan = kb.sync(resolve_sources(docs))
    assert parsed == ["b.txt"]
    assert [d["id"] for d in plan.replace] == ["b.txt"]


def test_documents_through_the_api(tmp_path):
    kb = fastrag.KnowledgeBase.build(
        [{"id": "x", "text": "first text"}, {"id": "y", "text": "why"}]
    )
    plan = kb.sync([{"id": "x", "text": "first text"}, {"id": "z", "text": "zulu"}])
    # "x" was built without a hash: replaced once, compared by its hash from then on.
    assert ([d["id"] for d in plan.add], [d["id"] for d in plan.replace], plan.delete) == (
        ["z"],
        ["x"],
        ["y"],
    )
    plan = kb.sync([fastrag.Document("x", "first text"), {"id": "z", "text": "zulu"}])
    assert sorted(plan.unchanged) == ["x", "z"] and not plan.changed
    plan = kb.sync([{"id": "z", "text": "zulu", "team": "ops"}], delete_missing=False)
    assert [d["id"] for d in plan.replace] == ["z"] and plan.delete == []
    assert kb.retrieve("zulu", k=1)[0].metadata["team"] == "ops"
    assert sorted(kb._corpus.store.doc_index()) == ["x", "z"]
    with pytest.raises(DuplicateDocumentError, match="'q'"):
        kb.sync([{"id": "q", "text": "a"}, {"id": "q", "text": "b"}])


class FlakyEmbedder:
    """A small deterministic embedder that can be told to fail (an embedding server going down)."""

    dim = 16

    def __init__(self) -> None:
        self.fail = False

    def embed(self, texts):
        if self.fail:
            raise EmbedderError("embedding server down")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t:
                out[i, ord(ch) % self.dim] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)

    def config(self):
        return {"type": "flaky", "dim": self.dim}


def test_a_failing_sync_loses_nothing(tmp_path):
    docs = _folder(tmp_path)
    emb = FlakyEmbedder()
    kb = fastrag.KnowledgeBase.build(load_documents(docs), embedder=emb)
    sid = kb.save(tmp_path / "kb")
    before = _content(kb)[0]
    _change(docs)
    emb.fail = True  # the plan is made, then embedding the new documents fails
    with pytest.raises(EmbedderError):
        kb.sync(resolve_sources(docs))
    assert _content(kb)[0] == before  # nothing deleted, nothing added
    manifest = orjson.loads((tmp_path / "kb" / "manifest.json").read_bytes())
    assert manifest["current"] == sid
    emb.fail = False
    # A source that fails while the plan is made changes nothing either.
    (docs / "bad.jsonl").write_text('{"id": "ok", "text": "fine"}\nnot json\n', encoding="utf-8")
    with pytest.raises(SourceError, match="bad.jsonl:2: not valid JSON"):
        kb.sync(resolve_sources(docs))
    assert _content(kb)[0] == before
    (docs / "bad.jsonl").unlink()
    assert kb.sync(resolve_sources(docs)).changed  # and the same sync then goes through


def test_an_unreadable_file_keeps_its_stored_documents(tmp_path):
    docs = _folder(tmp_path)
    kb = fastrag.KnowledgeBase.build(load_documents(docs))
    (docs / "manual.pdf").write_bytes(b"%PDF-1.4 damaged")
    (docs / "b.txt").write_text("Bravo changed\n", encoding="utf-8")
    failures = []
    plan = kb.sync(resolve_sources(docs), on_error=lambda p, r: failures.append((p.name, r)))
    assert failures and failures[0][0] == "manual.pdf" and "not a readable PDF" in failures[0][1]
    assert [o.origin for o in plan.failed] == [str(docs / "manual.pdf")]
    assert {"manual.pdf#page=1", "manual.pdf#page=2"} <= set(kb._corpus.store.doc_index())
    assert [d["id"] for d in plan.replace] == ["b.txt"]


def test_plan_alone_changes_nothing():
    stored = [StoredDocument("a", None, "h1"), StoredDocument("b", "f.txt", "h2")]
    plan = plan_sync(stored, [{"id": "a", "text": "t", "origin_sha256": "h1"}])
    assert plan.unchanged == ["a"] and plan.delete == ["b"]
    assert plan.summary() == "0 added, 0 replaced, 1 deleted, 1 unchanged documents"


def test_older_knowledge_bases_without_a_section_column_load(tmp_path):
    kb = fastrag.KnowledgeBase.build(
        [{"id": "a", "text": "alpha text"}, {"id": "b", "text": "bravo"}]
    )
    kb.save(tmp_path / "kb")
    manifest = orjson.loads((tmp_path / "kb" / "manifest.json").read_bytes())
    entry = next(s for s in manifest["snapshots"] if s["id"] == manifest["current"])
    path = tmp_path / "kb" / "snapshots" / entry["id"] / "chunks.arrow"
    table = pa.ipc.open_file(
        pa.BufferReader(path.read_bytes())
    ).read_all()  # not mapped: rewritten below
    legacy = table.drop_columns(["section"])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, legacy.schema) as writer:
        writer.write_table(legacy)
    import hashlib

    entry["files"]["chunks.arrow"] = {
        "bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }  # fmt: skip
    (tmp_path / "kb" / "manifest.json").write_bytes(orjson.dumps(manifest))
    old = fastrag.KnowledgeBase.load(tmp_path / "kb", verify=True)
    assert old.retrieve("alpha", k=1)[0].doc_id == "a"
    old.add([{"id": "c", "text": "# H\n\ncharlie"}])
    old.save(tmp_path / "kb")
    assert fastrag.KnowledgeBase.load(tmp_path / "kb").retrieve("charlie", k=1)[0].doc_id == "c"


def test_structure_chunking_is_saved_and_sections_filter(tmp_path):
    docs = _folder(tmp_path)
    kb = fastrag.KnowledgeBase.build(load_documents(docs), chunking="structure")
    kb.save(tmp_path / "kb")
    kb = fastrag.KnowledgeBase.load(tmp_path / "kb")
    assert kb.stats()["chunking"] == "structure"
    hits = kb.retrieve("coolant", k=10, where={"section": "Coolant procedure > Faults"})
    assert hits and all(h.metadata["section"] == "Coolant procedure > Faults" for h in hits)
    kb.add([{"id": "new", "text": "# Zeta\n\nzeta words"}])
    assert kb.retrieve("zeta", k=1)[0].metadata["section"] == "Zeta"  # add() uses the saved mode


def test_a_documents_own_section_fills_the_chunks_without_a_heading_path():
    docs = [
        {"id": "fig", "text": "coolant line diagram", "section": "Figure 2: Coolant"},
        {"id": "plain", "text": "coolant pump notes"},
        {"id": "md", "text": "# Pump\n\ncoolant pump heading", "format": "markdown",
         "section": "ignored under a heading"},
        {"id": "odd", "text": "coolant odd", "section": 7},  # not a string: metadata only
    ]  # fmt: skip
    for chunking in ("windows", "auto"):
        kb = fastrag.KnowledgeBase.build(docs, chunking=chunking)
        by_doc = {h.doc_id: h for h in kb.retrieve("coolant", k=10, mode="keyword")}
        assert set(by_doc) == {"fig", "plain", "md", "odd"}
        got = kb.retrieve("coolant", k=10, where={"section": "Figure 2: Coolant"})
        assert [h.doc_id for h in got] == ["fig"]
        assert by_doc["fig"].metadata["section"] == "Figure 2: Coolant"
        assert "section" not in by_doc["plain"].metadata
        assert by_doc["odd"].metadata["section"] == 7
        # Windows have no heading path, so the document's section holds; under "auto" the
        # markdown chunk's heading path is its section and the document's field does not win.
        own = kb.retrieve("coolant", k=10, where={"section": "ignored under a heading"})
        heading = kb.retrieve("coolant", k=10, where={"section": "Pump"})
        if chunking == "windows":
            assert [h.doc_id for h in own] == ["md"] and heading == []
        else:
            assert own == [] and [h.doc_id for h in heading] == ["md"]


# -- the command line ------------------------------------------------------------------


def test_cli_index_syncs_an_existing_knowledge_base(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    docs = _folder(tmp_path)
    write_sqlite(tmp_path / "repairs.db")
    base = ["index", "docs", "sqlite:///repairs.db", "--query", QUERY, "--kb", "kb"]
    assert main([*base, "--chunking", "structure"]) == 0
    assert "indexed 11 documents" in capsys.readouterr().out
    assert main(base) == 0
    assert "0 added, 0 replaced, 0 deleted, 11 unchanged" in capsys.readouterr().out
    _change(docs)
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "  + docs/d.md (1 added)" in out
    assert "  ~ docs/b.txt (1 replaced)" in out
    assert "  - docs/c.txt (1 deleted)" in out
    assert "  ~ docs/items.jsonl (1 added, 1 replaced, 1 deleted)" in out
    assert "synced: 2 added, 2 replaced, 2 deleted, 7 unchanged documents" in out
    fresh = tmp_path / "fresh"
    assert main(["index", "docs", "sqlite:///repairs.db", "--query", QUERY, "--kb", str(fresh),
                 "--chunking", "structure"]) == 0  # fmt: skip
    assert sorted(fastrag.KnowledgeBase.load("kb")._corpus.store.doc_index()) == sorted(
        fastrag.KnowledgeBase.load(fresh)._corpus.store.doc_index()
    )
    with pytest.raises(SystemExit):
        main(["index", "docs", "--kb", "kb", "--chunking", "bogus"])
    assert main(["index", "docs", "--kb", "kb", "--chunking", "windows"]) == 1
    assert "built with chunking 'structure'" in capsys.readouterr().err
    assert main(["index", "docs", "--kb", "kb", "--max-features", "10"]) == 1
    assert "keeps the embedder it was built with" in capsys.readouterr().err
    assert main(["index", "docs", "--kb", "kb", "--index", "hnsw"]) == 0
    assert fastrag.KnowledgeBase.load("kb").stats()["index"] == "hnsw"


def test_cli_since_adds_and_replaces_newer_rows_only(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_sqlite(tmp_path / "repairs.db")
    base = ["index", "sqlite:///repairs.db", "--query", QUERY, "--kb", "kb"]
    assert main(base) == 0
    write_sqlite(tmp_path / "repairs.db", rows=[
        (1, "Replace the pump seal and flush the lines.", "SV0432", "M-7", "2026-03-02"),
        (4, "Tighten the drive belt.", "SV0500", "M-7", "2026-03-01T00:00:00Z"),
    ])  # fmt: skip
    capsys.readouterr()
    assert main([*base, "--since"]) == 0
    out = capsys.readouterr().out
    assert "1 added, 1 replaced, 0 deleted, 0 unchanged" in out
    kb = fastrag.KnowledgeBase.load("kb")
    assert sorted(kb._corpus.store.doc_index()) == ["1", "2", "3", "4"]
    assert kb.retrieve("flush the lines", k=1)[0].doc_id == "1"
    assert main([*base, "--since"]) == 0  # nothing newer now
    assert "0 added, 0 replaced, 0 deleted" in capsys.readouterr().out
    assert main(["index", "sqlite:///repairs.db", "--query", "SELECT id FROM repair_records",
                 "--kb", "other"]) == 1  # fmt: skip
    assert "no 'text' column" in capsys.readouterr().err


def test_cli_reports_bad_files_and_indexes_the_rest(tmp_path, capsys):
    docs = _folder(tmp_path)
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 nothing")
    assert main(["index", str(docs), "--kb", str(tmp_path / "kb")]) == 1
    captured = capsys.readouterr()
    assert "skipped" in captured.err and "broken.pdf: not a readable PDF" in captured.err
    assert "indexed 8 documents" in captured.out
    shutil.rmtree(tmp_path / "kb")
