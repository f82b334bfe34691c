"""External vector stores (FAISS, LanceDB, Qdrant local and Edge, Milvus Lite) behind VectorIndex.

Every engine runs for real, in this process or started by the test from a
temporary directory, offline. Sizes are small: Qdrant's local mode still
writes every point to SQLite one statement at a time (the adapter makes a
call one transaction, not one per point). Qdrant Edge runs with indexing and
full-scan thresholds of 1 KB, so that even these small sets are searched
through its HNSW graph (a filter through the graph with its payload
indexes), not by brute force.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import shutil
import sqlite3

import httpx
import numpy as np
import orjson
import pytest

from fastrag import KnowledgeBase
from fastrag.errors import ConfigError, SearchIndexError
from fastrag.retrieve.filters import Principal

ENGINES = {
    "faiss": "faiss",
    "lancedb": "lancedb",
    "qdrant": "qdrant_client",
    "qdrant-edge": "qdrant_edge",
    "milvus": "milvus_lite",
}

EDGE_OPTIONS = "indexing_threshold=1&full_scan_threshold=1"
"""Qdrant Edge builds its HNSW graph over segments of 1 KB and more, and consults it."""


def _spec(engine: str, tmp_path) -> str:
    return {
        "faiss": "faiss",
        "lancedb": f"lancedb:{tmp_path}/lance",
        "qdrant": f"qdrant:{tmp_path}/qdrant",
        "qdrant-edge": f"qdrant-edge:{tmp_path}/edge?{EDGE_OPTIONS}",
        "milvus": f"milvus:{tmp_path}/milvus.db",
    }[engine]


@pytest.fixture(scope="module", params=sorted(ENGINES))
def engine(request):
    if importlib.util.find_spec(ENGINES[request.param]) is None:
        pytest.skip(f"{ENGINES[request.param]} is not installed")
    return request.param


_ALPHABET = list("abcdefghijklmnopqrstuvwxyz0123456789")
WORDS = ["".join(np.random.default_rng(i).choice(_ALPHABET, 3 + i % 4)) for i in range(300)]


def _docs(n: int, seed: int = 0, prefix: str = "d") -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(
            {
                "id": f"{prefix}{i}",
                "text": " ".join(rng.choice(WORDS, 70)),
                "title": f"title {i % 4}",
                "source": f"src/{i % 5}.md",
                "updated_at": dt.datetime(2026, 1, 1 + i % 28, tzinfo=dt.timezone.utc),
                "acl": ["hr"] if i % 3 == 0 else (["eng", "ops"] if i % 3 == 1 else []),
                "metadata": {"team": ["hr", "eng", "ops"][i % 3], "level": i % 4},
            }
        )
    return out


QUESTIONS = [" ".join(WORDS[i : i + 4]) for i in (0, 40, 80, 120)]


def _build(docs, index):
    return KnowledgeBase.build(docs, index=index, window=120, overlap=20)


def _same(kb, ref, k=8, **options):
    for q in QUESTIONS:
        got = kb.retrieve(q, k, **options)
        want = ref.retrieve(q, k, **options)
        assert len(got) == len(want), (q, options)
        # Fused scores move by a rank where float rounding swaps two near-tied vector scores.
        tol = 1e-4 if options.get("mode") == "vector" else 2e-3
        np.testing.assert_allclose(
            [h.score for h in got], [h.score for h in want], rtol=tol, atol=1e-6
        )
        for g, w in zip(got, want):  # rows differ only where rounding ties the scores
            assert g.chunk_id == w.chunk_id or abs(g.score - w.score) <= tol * abs(w.score), (
                q,
                options,
            )


@pytest.fixture
def pair(engine, tmp_path):
    """A knowledge base in the store and its exact twin, for tests that change them."""
    docs = _docs(24)
    kb = _build(docs, _spec(engine, tmp_path))
    ref = _build(docs, "exact")
    yield kb, ref
    kb.close()


@pytest.fixture(scope="module")
def shared(engine, tmp_path_factory):
    """The same, built once per engine, for tests that only read."""
    docs = _docs(24)
    kb = _build(docs, _spec(engine, tmp_path_factory.mktemp(engine)))
    ref = _build(docs, "exact")
    yield kb, ref
    kb.close()


def test_build_vector_and_hybrid_identical_to_exact(shared, engine):
    kb, ref = shared
    assert kb.index == engine
    assert len(kb) == len(ref)
    _same(kb, ref, mode="vector")
    _same(kb, ref, mode="hybrid")
    stats = kb.stats()["store"]
    assert stats["engine"] == engine and stats["vectors"] == len(kb)


FILTERS = [
    {"doc_id": "d3"},
    {"doc_id": ["d1", "d4", "d9"]},
    {"source": {"ne": "src/1.md"}},
    {"source": {"not_in": ["src/1.md", "src/2.md"]}},
    {"title": {"eq": "title 2"}},
    {"ord": {"gt": 0}},
    {"ord": {">=": 1, "<": 3}},
    {"start": {"lte": 200}},
    {"end": {"lt": 400}},
    {"chunk_id": {"in": [1, 2, 3, 5, 8, 13, 21]}},
    {"updated_at": {">=": "2026-01-10"}},
    {"updated_at": {"lt": dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)}},
    {"updated_at": {"in": ["2026-01-02T00:00:00+00:00", "2026-01-03T00:00:00+00:00"]}},
    {"team": "hr"},
    {"team": {"in": ["eng", "ops"]}},
    {"team": {"ne": "hr"}},
    {"level": {"gte": 2}},
    {"level": {"not_in": [0, 1]}},
    {"source": "src/2.md", "team": "ops"},
    {"source": "nowhere"},
]


@pytest.mark.parametrize("where", FILTERS, ids=lambda w: str(w)[:40])
def test_filters_identical_to_exact(shared, where):
    kb, ref = shared
    _same(kb, ref, k=6, mode="vector", where=where)


@pytest.mark.parametrize(
    "principal", [Principal("nobody"), Principal("x", ("hr",)), Principal(None, ("eng", "zz"))]
)
def test_acl_principals_identical_to_exact(shared, principal):
    kb, ref = shared
    _same(kb, ref, k=6, mode="vector", principal=principal)
    _same(kb, ref, k=6, mode="hybrid", principal=principal, where={"ord": {"gte": 1}})
    for q in QUESTIONS:
        for h in kb.retrieve(q, 20, mode="vector", principal=principal):
            acl = h.metadata.get("acl") or []
            assert not acl or set(acl) & principal.names()


def test_filtered_query_returns_k_when_k_eligible(shared):
    kb, ref = shared
    where = {"doc_id": ["d2", "d5"]}
    eligible = len(ref.retrieve(QUESTIONS[0], 1000, mode="vector", where=where))
    assert eligible >= 3
    for k in (1, eligible, eligible + 5):
        hits = kb.retrieve(QUESTIONS[0], k, mode="vector", where=where)
        assert len(hits) == min(k, eligible)


def test_add_delete_replace_compact(pair, engine):
    kb, ref = pair
    more = _docs(6, seed=1, prefix="n")
    for x in (kb, ref):
        x.add(more)
    _same(kb, ref, mode="vector")
    for x in (kb, ref):
        assert x.delete(["d0", "d1", "n2"]) > 0
    _same(kb, ref, mode="vector")
    _same(kb, ref, mode="vector", where={"team": "eng"})
    gone = {h.doc_id for q in QUESTIONS for h in kb.retrieve(q, 500, mode="vector")}
    assert not gone & {"d0", "d1", "n2"}
    repl = [dict(_docs(1, seed=7, prefix="d")[0], id="d5")]
    for x in (kb, ref):
        x.add(repl, replace=["d5"])
    _same(kb, ref, mode="hybrid")
    for x in (kb, ref):
        x.compact()
    _same(kb, ref, mode="vector")
    assert kb.stats()["store"]["vectors"] >= len(kb)
    report = kb.verify(QUESTIONS)
    assert report["index"] == engine and report["recall"] == 1.0


def test_save_load_reattach(pair, engine, tmp_path):
    kb, ref = pair
    kb.save(tmp_path / "kb")
    first = kb.stats()["snapshot"]
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.index == engine
    _same(loaded, ref, mode="hybrid")
    _same(loaded, ref, mode="vector", where={"team": {"in": ["hr", "ops"]}})
    # An older snapshot never returns a chunk deleted after it was saved.
    loaded.delete(["d3"])
    ref.delete(["d3"])
    loaded.save(tmp_path / "kb")
    older = KnowledgeBase.load(tmp_path / "kb", snapshot=first)
    found = {h.doc_id for q in QUESTIONS for h in older.retrieve(q, 200, mode="vector")}
    assert "d3" not in found or engine == "faiss"  # FAISS: the snapshot's own saved index
    newest = KnowledgeBase.load(tmp_path / "kb")
    _same(newest, ref, mode="vector")
    for x in (loaded, older, newest):
        x.close()


def test_manifest_names_the_store_without_secrets(engine, tmp_path, monkeypatch):
    monkeypatch.setenv("QDRANT_API_KEY", "s3cret-qdrant")
    monkeypatch.setenv("MILVUS_TOKEN", "s3cret-milvus")
    kb = _build(_docs(4), _spec(engine, tmp_path))
    kb.save(tmp_path / "kb")
    text = (tmp_path / "kb" / "manifest.json").read_text()
    assert f'"engine": "{engine}"' in text.replace('":"', '": "')
    assert "s3cret" not in text
    kb.close()


def _break(engine, kb, tmp_path):
    """Make the store fail on its next write."""
    store = kb._corpus.external
    if engine == "faiss":
        store._index = None
    elif engine == "lancedb":
        shutil.rmtree(tmp_path / "lance")
        (tmp_path / "lance").write_text("not a directory")
    elif engine == "qdrant":
        store.client.close()  # the local instance refuses every call from now on
    elif engine == "qdrant-edge":
        store._live().close()  # the shard refuses every call from now on
    elif engine == "milvus":
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_all()  # stops the Milvus Lite server


def test_store_failing_mid_write_leaves_kb_unchanged(pair, engine, tmp_path):
    kb, ref = pair
    before = [[h.chunk_id for h in kb.retrieve(q, 8, mode="keyword")] for q in QUESTIONS]
    n, docs = len(kb), kb.stats()["documents"]
    _break(engine, kb, tmp_path)
    with pytest.raises(SearchIndexError) as info:
        kb.add(_docs(3, seed=5, prefix="x"))
    assert "s3cret" not in str(info.value)
    with pytest.raises(SearchIndexError):
        kb.delete(["d2"])
    assert len(kb) == n and kb.stats()["documents"] == docs
    after = [[h.chunk_id for h in kb.retrieve(q, 8, mode="keyword")] for q in QUESTIONS]
    assert after == before


def test_bad_store_strings():
    with pytest.raises(ConfigError):
        KnowledgeBase.build(_docs(2), index="nosuchstore:/x")
    with pytest.raises(ConfigError):
        KnowledgeBase.build(_docs(2), index="faiss:IVF4,Flat?nprobe=x")
    with pytest.raises(ConfigError):
        KnowledgeBase.build(_docs(2), index="faiss?bogus=1")
    with pytest.raises(ConfigError) as info:
        KnowledgeBase.build(_docs(2), index="qdrant://admin:hunter2@db:6333")
    assert "hunter2" not in str(info.value)


def test_faiss_ivf_and_hnsw_recall(tmp_path):
    pytest.importorskip("faiss")
    docs = _docs(60)
    ref = _build(docs, "exact")
    for spec in ("faiss:IVF4,Flat?nprobe=4", "faiss:HNSW16"):
        kb = _build(docs, spec)
        _same(kb, ref, mode="vector")
        _same(kb, ref, mode="vector", where={"team": "hr"})
        kb.delete(["d0", "d7"])
        ref2 = _build([d for d in docs if d["id"] not in ("d0", "d7")], "exact")
        assert kb.verify(QUESTIONS)["recall"] >= 0.95
        assert len(kb.retrieve(QUESTIONS[0], 10, mode="vector")) == 10
        kb.compact()
        kb.save(tmp_path / spec.replace(":", "_").replace(",", "_").replace("?", "_"))
        del ref2


def test_cli_index_and_serve_load_a_store(tmp_path, capsys):
    pytest.importorskip("faiss")
    from fastrag.cli import main
    from fastrag.serve.registry import _open

    src = tmp_path / "docs"
    src.mkdir()
    for d in _docs(5):
        (src / f"{d['id']}.txt").write_text(d["text"], encoding="utf-8")
    assert main(["index", str(src), "--kb", str(tmp_path / "kb"), "--index", "faiss:HNSW16"]) == 0
    kb = KnowledgeBase.load(tmp_path / "kb")
    assert kb.index == "faiss" and kb.stats()["store"]["factory"] == "HNSW16"
    # A second run syncs into the same store.
    (src / "extra.txt").write_text(" ".join(WORDS[:60]), encoding="utf-8")
    assert main(["index", str(src), "--kb", str(tmp_path / "kb"), "--index", "faiss"]) == 0
    served = _open(tmp_path / "kb")  # what fastrag serve does with a knowledge base
    assert served.kb.index == "faiss"
    assert served.kb.retrieve(" ".join(WORDS[:4]), 3, mode="vector")[0].doc_id.startswith("extra")


def _source_folder(tmp_path, n: int = 6):
    src = tmp_path / "docs"
    src.mkdir()
    for d in _docs(n):
        (src / f"{d['id']}.txt").write_text(d["text"], encoding="utf-8")
    return src


def _cli_query(main, capsys, kb_dir, question: str) -> list[int]:
    capsys.readouterr()
    assert main(["query", str(kb_dir), question, "-k", "4", "--json"]) == 0
    return [h["chunk_id"] for h in orjson.loads(capsys.readouterr().out.splitlines()[0])["hits"]]


def test_cli_index_query_serve_and_load_on_each_store(engine, tmp_path, capsys):
    """fastrag index --index <store>, fastrag query, the server and KnowledgeBase.load agree.

    Each against the same folder indexed with --index exact: the same hits.
    """
    from serve_harness import ThreadServer

    from fastrag.cli import main
    from fastrag.serve import ServeSettings

    src = _source_folder(tmp_path)
    kb_dir, ref_dir = tmp_path / "kb", tmp_path / "ref"
    spec = _spec(engine, tmp_path)
    assert main(["index", str(src), "--kb", str(kb_dir), "--index", spec]) == 0
    assert main(["index", str(src), "--kb", str(ref_dir), "--index", "exact"]) == 0
    manifest = orjson.loads((kb_dir / "manifest.json").read_bytes())
    assert manifest["index"]["type"] == engine
    assert manifest["index"]["store"]["engine"] == engine
    question = " ".join(WORDS[:4])
    want = _cli_query(main, capsys, ref_dir, question)
    assert len(want) == 4
    assert _cli_query(main, capsys, kb_dir, question) == want
    loaded = KnowledgeBase.load(kb_dir)
    assert loaded.index == engine and loaded.stats()["store"]["vectors"] == len(loaded)
    assert [h.chunk_id for h in loaded.retrieve(question, 4)] == want
    with ThreadServer(ServeSettings(kbs=(("kb", str(kb_dir)),), reload_interval=0)) as server:
        r = httpx.post(f"{server.url}/v1/retrieve", json={"question": question, "k": 4}, timeout=60)
        assert r.status_code == 200, r.text
        assert [h["chunk_id"] for h in r.json()["hits"]] == want
        doc = r.json()["hits"][-1]["doc_id"]
        r = httpx.post(
            f"{server.url}/v1/retrieve",
            json={"question": question, "k": 4, "mode": "vector", "where": {"doc_id": doc}},
            timeout=60,
        )
        assert r.status_code == 200 and {h["doc_id"] for h in r.json()["hits"]} == {doc}
    loaded.close()


@pytest.mark.parametrize("name", ["qdrant", "qdrant-edge"])
def test_fastrag_serve_process_reattaches_to_a_local_store(name, tmp_path):
    """fastrag serve in its own process opens the store the manifest names (local mode locks it).

    Qdrant's local directory (and Qdrant Edge's) is held by one process at a time: the index run
    releases it when it exits, the server takes it, this process after the
    server. (Milvus Lite is served in process by the test above; its server
    start is too slow for a second process in the test budget.)
    """
    import subprocess
    import sys

    from serve_harness import ProcessServer

    if importlib.util.find_spec(ENGINES[name]) is None:
        pytest.skip(f"{ENGINES[name]} is not installed")
    src = _source_folder(tmp_path)
    kb_dir = tmp_path / "kb"
    run = subprocess.run(
        [sys.executable, "-m", "fastrag", "index", str(src), "--kb", str(kb_dir),
         "--index", _spec(name, tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    question = " ".join(WORDS[:4])
    with ProcessServer(["--kb", f"kb={kb_dir}"], tmp_path / "serve.log") as server:
        r = httpx.post(f"{server.url}/v1/retrieve", json={"question": question, "k": 4}, timeout=60)
        assert r.status_code == 200, r.text
        hits = r.json()["hits"]
    assert len(hits) == 4
    kb = KnowledgeBase.load(kb_dir)  # the server is gone: this process reattaches in turn
    assert [h.chunk_id for h in kb.retrieve(question, 4)] == [h["chunk_id"] for h in hits]
    kb.close()


def _lance_indexed_rows(kb) -> int:
    """Rows LanceDB's vector index holds (0: none built), from the table itself."""
    return sum(
        ix.num_indexed_rows
        for ix in kb._corpus.external.table.list_indices()
        if "vector" in list(ix.columns)
    )


MORE_QUESTIONS = [" ".join(WORDS[i : i + 5]) for i in range(0, 290, 10)]


def test_lancedb_ann_index_recall_against_exact(tmp_path):
    pytest.importorskip("lancedb")
    docs = _docs(80)  # 320 chunks: past ann_rows=256, so the ANN path is taken
    kb = _build(docs, f"lancedb:{tmp_path}/lance?index=auto&ann_rows=256")
    ref = _build(docs, "exact")
    assert _lance_indexed_rows(kb) == len(kb) == len(ref)
    stats = kb.stats()["store"]
    assert stats["indexed"] is True and stats["index"] == "AUTO"
    report = kb.verify(MORE_QUESTIONS)
    assert report["index"] == "lancedb" and report["recall"] >= 0.95
    for where in ({"team": "hr"}, {"doc_id": ["d1", "d4"]}):  # filtered: still k when k exist
        eligible = len(ref.retrieve(MORE_QUESTIONS[0], 1000, mode="vector", where=where))
        for q in MORE_QUESTIONS[:5]:
            assert len(kb.retrieve(q, 10, mode="vector", where=where)) == min(10, eligible)
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")  # reattached: the index is found again
    assert loaded.stats()["store"]["indexed"] is True
    assert loaded.verify(MORE_QUESTIONS)["recall"] >= 0.95
    loaded.close()
    kb.close()


def test_lancedb_auto_index_built_by_the_add_that_crosses_the_threshold(tmp_path):
    pytest.importorskip("lancedb")
    kb = _build(_docs(40), f"lancedb:{tmp_path}/lance?index=auto&ann_rows=256")
    assert _lance_indexed_rows(kb) == 0 and kb.stats()["store"]["indexed"] is False
    kb.add(_docs(40, seed=3, prefix="n"))  # grows past 256 rows: the add builds the index
    assert _lance_indexed_rows(kb) == len(kb) > 256
    assert kb.stats()["store"]["indexed"] is True
    assert kb.verify(MORE_QUESTIONS)["recall"] >= 0.95
    kb.close()
    with pytest.raises(ConfigError):
        KnowledgeBase.build(_docs(2), index=f"lancedb:{tmp_path}/x?index=auto&ann_rows=10")
    with pytest.raises(ConfigError):
        KnowledgeBase.build(_docs(2), index=f"lancedb:{tmp_path}/x?index=bogus")


def test_compact_without_deletes_still_compacts_the_store(tmp_path):
    """kb.compact() with nothing deleted folds the rows added since into LanceDB's ANN index."""
    pytest.importorskip("lancedb")
    kb = _build(_docs(80), f"lancedb:{tmp_path}/lance?index=auto&ann_rows=256")
    indexed = _lance_indexed_rows(kb)
    assert indexed == len(kb)
    kb.add(_docs(10, seed=3, prefix="n"))
    assert _lance_indexed_rows(kb) == indexed < len(kb)  # the new rows: searched beside it
    assert kb.compact() == 0  # no chunk dropped, the knowledge base as it was
    assert _lance_indexed_rows(kb) == len(kb)
    assert kb.verify(MORE_QUESTIONS)["recall"] >= 0.95
    kb.close()


def test_lancedb_delete_of_many_documents_is_one_commit(tmp_path):
    """kb.delete of many documents reaches LanceDB as one delete: one new table version."""
    pytest.importorskip("lancedb")
    kb = _build(_docs(30), f"lancedb:{tmp_path}/lance")
    table = kb._corpus.external.table
    before, rows = table.version, table.count_rows()
    doomed = [f"d{i}" for i in range(0, 30, 2)]
    deleted = kb.delete(doomed)
    assert table.version == before + 1
    assert table.count_rows() == rows - deleted
    assert not {h.doc_id for q in QUESTIONS for h in kb.retrieve(q, 500, mode="vector")} & set(
        doomed
    )
    kb.close()


def _store_rows(n: int, dim: int = 8):
    from fastrag.index.stores.base import payload_table

    vectors = np.random.default_rng(0).standard_normal((n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.arange(n, dtype=np.int64) * 3 + 1
    import pyarrow as pa

    batch = pa.record_batch(
        {
            "chunk_id": pa.array(ids),
            "doc_id": pa.array([f"d{i}" for i in range(n)]),
            "ord": pa.array(np.zeros(n, np.int32)),
            "start": pa.array(np.zeros(n, np.int64)),
            "end": pa.array(np.zeros(n, np.int64)),
            "updated_at": pa.nulls(n, pa.int64()),
            "acl": pa.array([[]] * n, pa.list_(pa.string())),
        }
    )
    return ids, vectors, payload_table(batch)


@pytest.mark.parametrize(
    ("name", "n", "deletes"),
    [("faiss", 10_500, 10_000), ("lancedb", 10_500, 10_000), ("milvus", 10_500, 10_000),
     ("qdrant-edge", 10_500, 10_000), ("qdrant", 2_500, 2_000)],
)  # fmt: skip
def test_many_deletes_in_one_call(name, n, deletes, tmp_path):
    """Thousands of ids in one delete call remove exactly those rows (LanceDB: in one commit).

    Qdrant's local mode runs smaller (it still writes one SQLite statement per
    point, in one transaction per call); 10,000 of its deletes are timed by
    benchmarks/compare_stores.py. Qdrant Edge runs with its default indexing
    threshold here (a plain segment: building the graph over 10,500 points
    would be most of the test; deletes from a graph are in the tests above).
    """
    if importlib.util.find_spec(ENGINES[name]) is None:
        pytest.skip(f"{ENGINES[name]} is not installed")
    from fastrag.index.stores import parse_store
    from fastrag.index.stores.base import write_rows

    spec = _spec(name, tmp_path).split("?")[0]  # qdrant-edge: without EDGE_OPTIONS
    store = parse_store(spec)
    ids, vectors, payload = _store_rows(n)
    store.create(vectors.shape[1])
    store.train(vectors)
    write_rows(store, ids, vectors, payload)
    store.finish()
    assert store.count() == n
    version = store.table.version if name == "lancedb" else None
    store.delete(ids[:deletes])
    assert store.count() == n - deletes
    if name == "lancedb":
        assert store.table.version == version + 1
    found, _ = store.search(vectors[:3], 5)  # deleted rows never come back
    assert not set(found.ravel().tolist()) & set(ids[:deletes].tolist())
    found, _ = store.search(vectors[deletes : deletes + 3], 1)  # survivors are found as themselves
    assert found[:, 0].tolist() == ids[deletes : deletes + 3].tolist()
    store.close()
    if name != "faiss":  # on disk too: a new client sees the same
        again = parse_store(spec)
        again.attach(vectors.shape[1], None, {})
        assert again.count() == n - deletes
        again.close()


def _qdrant_sqlite(store) -> sqlite3.Connection:
    """The SQLite connection under a Qdrant local-mode collection (qdrant-client's own)."""
    return store.client._client.collections[store.collection].storage.storage


def _fail_from(connection: sqlite3.Connection, statement: str, n: int) -> None:
    """Make the real SQLite under Qdrant's local mode fail its n-th point ``statement`` on.

    A temporary trigger (this connection only, never saved in the file) that
    aborts the statement, as a full disk or an I/O error would.
    """
    connection.executescript(
        f"""
        CREATE TEMP TABLE IF NOT EXISTS countdown (statement TEXT PRIMARY KEY, n INTEGER);
        INSERT OR REPLACE INTO countdown VALUES ('{statement}', {n});
        DROP TRIGGER IF EXISTS temp.fail_{statement};
        CREATE TEMP TRIGGER fail_{statement} BEFORE {statement} ON main.points BEGIN
            UPDATE countdown SET n = n - 1 WHERE statement = '{statement}';
            SELECT RAISE(ABORT, 'disk I/O error (injected)')
            WHERE (SELECT n FROM countdown WHERE statement = '{statement}') <= 0;
        END;
        """
    )


def _heal(connection: sqlite3.Connection) -> None:
    connection.executescript(
        "DROP TRIGGER IF EXISTS temp.fail_INSERT; DROP TRIGGER IF EXISTS temp.fail_DELETE;"
    )


def test_qdrant_local_write_is_one_transaction(tmp_path):
    """A local-mode upsert or delete commits once: one failing mid-call changes nothing.

    Neither on disk (a new client reads what was there before the call) nor
    in memory (the points a failed delete had hidden are found again, the
    ones a failed upsert had added are not).
    """
    pytest.importorskip("qdrant_client")
    from fastrag.index.stores import parse_store
    from fastrag.index.stores.base import write_rows

    spec = f"qdrant:{tmp_path}/qdrant"
    store = parse_store(spec)
    ids, vectors, payload = _store_rows(300)
    store.create(8)
    write_rows(store, ids[:200], vectors[:200], payload.slice(0, 200))
    sql = _qdrant_sqlite(store)
    _fail_from(sql, "DELETE", 50)
    with pytest.raises(sqlite3.Error, match="injected"):
        store.delete(ids[:120])
    assert store.count() == 200
    found, _ = store.search(vectors[:60], 1)
    assert found[:, 0].tolist() == ids[:60].tolist()
    _fail_from(sql, "INSERT", 50)
    with pytest.raises(sqlite3.Error, match="injected"):
        store.upsert(ids[200:], vectors[200:], payload.slice(200))
    assert store.count() == 200
    found, _ = store.search(vectors[200:300], 1)
    assert not set(found[:, 0].tolist()) & set(ids[200:].tolist())
    _heal(sql)
    store.close()
    store = parse_store(spec)  # a new client, from the directory: no failed call left a trace
    store.attach(8, None, {})
    assert store.count() == 200
    store.upsert(ids[200:], vectors[200:], payload.slice(200))  # the same ids again: now in
    store.delete(ids[:120])
    assert store.count() == 180
    found, _ = store.search(vectors[200:203], 1)
    assert found[:, 0].tolist() == ids[200:203].tolist()
    store.close()
    store = parse_store(spec)
    store.attach(8, None, {})
    assert store.count() == 180
    store.close()


def test_qdrant_local_failure_mid_add_or_delete_leaves_kb_and_store_as_before(tmp_path):
    pytest.importorskip("qdrant_client")
    docs = _docs(24)
    kb, ref = _build(docs, f"qdrant:{tmp_path}/qdrant"), _build(docs, "exact")
    sql = _qdrant_sqlite(kb._corpus.external)
    n = len(kb)
    _fail_from(sql, "INSERT", 3)
    with pytest.raises(SearchIndexError, match="injected"):
        kb.add(_docs(6, seed=1, prefix="n"))
    _fail_from(sql, "DELETE", 3)
    with pytest.raises(SearchIndexError, match="injected"):
        kb.delete(["d0", "d1", "d2", "d3"])
    assert len(kb) == n and kb.stats()["store"]["vectors"] == n
    _same(kb, ref, mode="vector")
    _heal(sql)
    kb.save(tmp_path / "kb")
    kb.close()  # the last client of the directory: the next one reads it from disk
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.stats()["store"]["vectors"] == n
    _same(loaded, ref, mode="hybrid")
    for x in (loaded, ref):
        x.delete(["d0", "d1"])
        x.add(_docs(3, seed=1, prefix="n"))
    _same(loaded, ref, mode="vector")
    loaded.close()
