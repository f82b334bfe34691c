"""The command line over the external stores: what it holds open, and what it refuses.

Qdrant's local mode, Qdrant Edge and Milvus Lite lock their directory or
file: one process at a time opens them. Every CLI command closes the knowledge bases
it opened (so a second command in the same process, or another process,
opens the store next), and ``fastrag serve --workers N`` refuses such a
knowledge base before any worker starts, with a message saying why and
what to do. Real engines, real processes, offline.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys

import numpy as np
import orjson
import pyarrow as pa
import pytest
from serve_harness import free_port
from test_stores import ENGINES, WORDS, _docs, _source_folder, _spec

from fastrag import KnowledgeBase

QUESTION = " ".join(WORDS[:4])


def _need(engine: str) -> None:
    if importlib.util.find_spec(ENGINES[engine]) is None:
        pytest.skip(f"{ENGINES[engine]} is not installed")


def _fastrag(*args: str, cwd, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m fastrag ARGS`` in a child process (its own lock on any local store)."""
    return subprocess.run(
        [sys.executable, "-m", "fastrag", *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _hits(text: str) -> list[int]:
    return [h["chunk_id"] for h in orjson.loads(text.splitlines()[0])["hits"]]


def _held_here(engine: str, spec: str) -> bool:
    """Whether this process still has the local store ``spec`` names open."""
    where = spec.split(":", 1)[1].split("?", 1)[0]
    if engine == "qdrant":
        from fastrag.index.stores.qdrant import _local_clients

        return where in _local_clients
    from fastrag.index.stores.qdrant_edge import _shards

    return any(path.startswith(where) for path in _shards)


@pytest.mark.parametrize("engine", ["qdrant", "qdrant-edge"])
def test_successive_cli_calls_in_one_process_release_a_local_store(engine, tmp_path, capsys):
    """index, query, query, sync-index in one process; then another process opens the store.

    A command that left its knowledge base open would keep the directory's
    lock in this process: the child's ``fastrag query`` would fail on it.
    """
    _need(engine)
    from fastrag.cli import main

    src = _source_folder(tmp_path)
    kb_dir = tmp_path / "kb"
    spec = _spec(engine, tmp_path)
    assert main(["index", str(src), "--kb", str(kb_dir), "--index", spec]) == 0
    capsys.readouterr()
    found = []
    for _ in range(2):
        assert main(["query", str(kb_dir), QUESTION, "-k", "4", "--json"]) == 0
        found.append(_hits(capsys.readouterr().out))
    assert len(found[0]) == 4 and found[0] == found[1]
    (src / "extra.txt").write_text(" ".join(WORDS[:60]), encoding="utf-8")
    assert main(["index", str(src), "--kb", str(kb_dir)]) == 0  # the sync path
    assert main(["info", str(kb_dir)]) == 0
    capsys.readouterr()
    assert not _held_here(engine, spec)  # no client of the directory left open
    child = _fastrag("query", str(kb_dir), QUESTION, "-k", "4", "--json", cwd=tmp_path)
    assert child.returncode == 0, child.stderr
    hits = orjson.loads(child.stdout.splitlines()[0])["hits"]
    assert any(h["doc_id"].startswith("extra") for h in hits)  # the synced file is searched
    with KnowledgeBase.load(kb_dir) as kb:  # and this process opens it again after the child
        assert [h.chunk_id for h in kb.retrieve(QUESTION, 4)] == [h["chunk_id"] for h in hits]


def _saved_kb(engine: str, tmp_path):
    """A small knowledge base with its vectors in ``engine``, saved to tmp_path/kb."""
    kb_dir = tmp_path / "kb"
    with KnowledgeBase.build(_docs(6), index=_spec(engine, tmp_path), window=120) as kb:
        kb.save(kb_dir)
    return kb_dir


@pytest.mark.parametrize("engine", ["qdrant", "qdrant-edge", "milvus"])
def test_serve_workers_refuse_a_store_one_process_locks(engine, tmp_path):
    """fastrag serve --workers 2 on Qdrant local / Edge / Milvus Lite: a clear error, exit 1, no server."""
    _need(engine)
    kb_dir = _saved_kb(engine, tmp_path)
    port = free_port()
    run = _fastrag(
        "serve", "--workers", "2", "--port", str(port), "--kb", f"kb={kb_dir}",
        cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("fastrag: error: --workers 2: knowledge base 'kb'"), run.stderr
    assert str(tmp_path) in lines[-1] and "--workers 1" in lines[-1]
    assert "Uvicorn running" not in run.stderr and "Started" not in run.stderr  # before workers


@pytest.mark.parametrize("engine", ["qdrant", "qdrant-edge", "milvus"])
def test_serve_from_python_refuses_workers_on_a_store_one_process_locks(engine, tmp_path):
    """fastrag.serve.run.serve(workers=2) refuses as the CLI does, before it binds the port."""
    _need(engine)
    from fastrag.errors import ConfigError
    from fastrag.serve.run import serve
    from fastrag.serve.settings import ServeSettings

    kb_dir = _saved_kb(engine, tmp_path)
    port = free_port()
    with pytest.raises(ConfigError, match="--workers 2: knowledge base 'kb'"):
        serve(ServeSettings(kbs=(("kb", str(kb_dir)),)), port=port, workers=2)
    with socket.create_server(("127.0.0.1", port)):  # the port was never bound: free still
        pass


@pytest.mark.parametrize("engine", ["faiss", "lancedb"])
def test_serve_workers_allow_stores_every_process_opens(engine, tmp_path):
    """FAISS (a copy per worker) and LanceDB (files read by many) pass the workers check."""
    _need(engine)
    from fastrag.serve.run import check_workers

    kb_dir = _saved_kb(engine, tmp_path)
    check_workers([("kb", str(kb_dir))], 4)  # raises for a store one process locks


# -- search settings and the question path (real engines, small) -----------------------------


def _unit(rng, n: int, dim: int = 16):
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _payload(n: int) -> pa.Table:
    """The payload of n plain chunks (the columns of ``payload_table``)."""
    return pa.table(
        {
            "chunk_id": pa.array(np.arange(n), pa.int64()),
            "doc_id": pa.array([f"d{i % 7}" for i in range(n)]),
            "title": pa.nulls(n, pa.string()),
            "source": pa.nulls(n, pa.string()),
            "section": pa.nulls(n, pa.string()),
            "ord": pa.array(np.zeros(n, np.int32)),
            "start": pa.array(np.zeros(n, np.int64)),
            "end": pa.array(np.zeros(n, np.int64)),
            "updated_at": pa.nulls(n, pa.int64()),
            "acl": pa.array([[]] * n, pa.list_(pa.string())),
            "public": pa.array(np.ones(n, np.bool_)),
            "metadata": pa.nulls(n, pa.string()),
        }
    )


def _store_view(spec: str, x, dim: int = 16):
    from fastrag.index.exact import ExactIndex
    from fastrag.index.stores import StoreIndex, parse_store
    from fastrag.index.stores.base import write_rows

    n = len(x)
    ids = np.arange(n, dtype=np.int64)
    store = parse_store(spec)
    store.create(dim)
    store.train(x)
    write_rows(store, ids, x, _payload(n))
    store.finish()
    exact = ExactIndex([x], dim, None)
    return store, StoreIndex(store, ids, exact), exact


def test_exact_store_breaks_ties_at_the_kth_score_as_exact_search():
    """Duplicated vectors tie at the k-th score: fastrag asks again and keeps the lower rows."""
    _need("faiss")
    rng = np.random.default_rng(3)
    base = _unit(rng, 40)
    x = np.concatenate([base] * 4)  # every vector 4 times: ties everywhere, at k too
    store, view, exact = _store_view("faiss", x)
    qs = _unit(rng, 12)
    for k in (1, 5, 10, 11):
        got_rows, got_scores = view.search(qs, k)
        want_rows, want_scores = exact.search(qs, k)
        np.testing.assert_array_equal(got_rows, want_rows)
        np.testing.assert_allclose(got_scores, want_scores, rtol=1e-5, atol=1e-6)
    mask = np.zeros(len(x), np.bool_)
    mask[::3] = True
    got = view.search(qs, 10, mask=mask)[0]
    np.testing.assert_array_equal(got, exact.search(qs, 10, mask=mask)[0])


def test_faiss_hnsw_is_built_with_the_adapter_ef_construction(tmp_path):
    _need("faiss")
    import faiss

    from fastrag.index.stores import parse_store, store_from_record

    store = parse_store("faiss:HNSW16?ef_construction=120")
    store.create(16)
    assert faiss.downcast_index(store.index.index).hnsw.efConstruction == 120
    again = store_from_record(store.describe())  # a compaction rebuilds with the same
    assert again.ef_construction == 120 and again.ef_search == store.ef_search
    default = parse_store("faiss:HNSW16")
    default.create(16)
    assert faiss.downcast_index(default.index.index).hnsw.efConstruction == 200  # not 40


def test_lancedb_hnsw_ef_below_the_rows_refined_still_searches(tmp_path):
    """ef smaller than k * refine: raised to it (LanceDB refuses ef < its own k)."""
    _need("lancedb")
    rng = np.random.default_rng(5)
    x = _unit(rng, 600)
    spec = f"lancedb:{tmp_path}/l?index=IVF_HNSW_SQ&ef=4&refine=4"
    store, view, exact = _store_view(spec, x)
    assert not store.exact and store.ef == 4
    qs = _unit(rng, 8)
    rows = view.search(qs, 10)[0]
    assert (rows >= 0).all()
    truth = exact.search(qs, 10)[0]
    hits = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(rows, truth, strict=True)])
    assert hits >= 0.9
    default = _store_view(f"lancedb:{tmp_path}/d?index=IVF_HNSW_SQ", x)[0]
    assert default.ef == 200 and default.describe()["ef"] == 200


def test_qdrant_local_write_leaves_the_connection_settings_as_they_were(tmp_path):
    """A write call may relax secure_delete to FAST inside it; the connection gets its own back."""
    _need("qdrant")
    rng = np.random.default_rng(7)
    x = _unit(rng, 50)
    store, view, exact = _store_view(f"qdrant:{tmp_path}/q", x)
    conn = store.client._client.collections[store.collection].storage.storage
    before = conn.execute("PRAGMA secure_delete").fetchone()[0]
    store.delete(np.arange(0, 50, 2, dtype=np.int64))
    assert conn.execute("PRAGMA secure_delete").fetchone()[0] == before
    assert store.count() == 25
    rows = view.search(_unit(rng, 3), 5, mask=np.arange(50) % 2 == 1)[0]
    assert (rows % 2 == 1).all()
    store.close()


# -- Qdrant Edge: its graph, its options, its directory lock ---------------------------------


def _recall(rows, truth) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(rows, truth, strict=True)]))


def test_qdrant_edge_searches_through_its_hnsw_graph_with_filters(tmp_path):
    """Its graph is built over every point and searched; recall and full k under filters hold.

    The filters go down as a Qdrant filter (plan ``native``) over the payload
    indexes; exact=1 on the same shard settings answers as exact search.
    """
    _need("qdrant-edge")
    from fastrag.index.stores import Condition, Pushdown

    rng = np.random.default_rng(11)
    x = _unit(rng, 1500)
    spec = f"qdrant-edge:{tmp_path}/e?indexing_threshold=1&full_scan_threshold=1&ef=128"
    store, view, exact = _store_view(spec, x)
    info = store._live().info()
    assert info.indexed_vectors_count == info.points_count == 1500  # the graph holds them all
    qs = _unit(rng, 30)
    assert _recall(view.search(qs, 10)[0], exact.search(qs, 10)[0]) >= 0.95
    doc = np.array([i % 7 for i in range(1500)])
    for keep in ([0, 1], [3]):  # ~29 % and ~14 % of the rows, through the graph's filter
        mask = np.isin(doc, keep)
        push = Pushdown((Condition("doc_id", "string", "in", tuple(f"d{i}" for i in keep)),))
        rows = view.search(qs, 10, mask=mask, pushdown=push)[0]
        assert (rows >= 0).all() and mask[rows].all()
        assert _recall(rows, exact.search(qs, 10, mask=mask)[0]) >= 0.95
    assert store.plans["native"] >= 2
    store.close()
    same, view, exact = _store_view(f"qdrant-edge:{tmp_path}/x?exact=1", x)
    np.testing.assert_array_equal(view.search(qs, 10)[0], exact.search(qs, 10)[0])
    same.close()


def test_qdrant_edge_widens_its_breadth_under_a_filter(tmp_path):
    """A filter keeping a share of the rows searches the graph ``1 / share`` times wider.

    At ef 10 on this graph the same filtered searches without the widening
    gave recall@10 0.88-0.94; through StoreIndex (which passes the share) and
    with the share given they reach 0.99-1.00.
    """
    _need("qdrant-edge")
    from fastrag.index.stores import Condition, Pushdown

    rng = np.random.default_rng(11)
    x = _unit(rng, 3000)
    spec = f"qdrant-edge:{tmp_path}/w?indexing_threshold=1&full_scan_threshold=1&ef=10"
    store, view, exact = _store_view(spec, x)
    qs = _unit(rng, 40)
    doc = np.array([i % 7 for i in range(3000)])
    for keep in ([3], [0, 1], [0, 1, 2]):  # ~14 %, ~29 %, ~43 % of the rows
        mask = np.isin(doc, keep)
        push = Pushdown((Condition("doc_id", "string", "in", tuple(f"d{i}" for i in keep)),))
        truth = exact.search(qs, 10, mask=mask)[0]
        widened = store.search(qs, 10, native=store.translate(push), share=float(mask.mean()))
        assert _recall(widened[0], truth) >= 0.97, keep
        rows = view.search(qs, 10, mask=mask, pushdown=push)[0]
        assert _recall(rows, truth) >= 0.97, keep
    assert store.plans["native"] == 3  # answered by the graph's filter, no allow-list retry
    store.close()


def test_qdrant_edge_options_are_parsed_recorded_and_checked(tmp_path):
    _need("qdrant-edge")
    from fastrag.errors import ConfigError
    from fastrag.index.stores import parse_store, store_from_record

    spec = (
        f"qdrant-edge:{tmp_path}/o?collection=kb1&ef=64&exact=1&m=8&ef_construct=50"
        "&full_scan_threshold=100&indexing_threshold=2000"
    )
    store = parse_store(spec)
    record = store.describe()
    assert record == {
        "engine": "qdrant-edge", "path": str(tmp_path / "o"), "collection": "kb1", "ef": 64,
        "exact": True, "m": 8, "ef_construct": 50, "full_scan_threshold": 100,
        "indexing_threshold": 2000,
    }  # fmt: skip
    assert store_from_record(record).describe() == record
    default = parse_store(f"qdrant-edge:{tmp_path}/o").describe()
    assert (default["ef"], default["exact"], default["ef_construct"]) == (256, False, 200)
    assert default["indexing_threshold"] is None and default["collection"] == "fastrag"
    for bad in ("?ef=0", "?exact=maybe", "?m=x", "?bogus=1", "?collection=../up"):
        with pytest.raises(ConfigError):
            parse_store(f"qdrant-edge:{tmp_path}/o{bad}")
    for bad in ("qdrant-edge:", "qdrant-edge://host:6333"):
        with pytest.raises(ConfigError):
            parse_store(bad)


def test_qdrant_edge_reattach_checks_the_shard(tmp_path):
    """A shard of other vectors, or none, is a StoreCorruptedError; the right one reattaches."""
    _need("qdrant-edge")
    from fastrag.errors import StoreCorruptedError
    from fastrag.index.stores import parse_store

    x = _unit(np.random.default_rng(2), 40)
    spec = f"qdrant-edge:{tmp_path}/r"
    store, _, _ = _store_view(spec, x)
    store.close()
    again = parse_store(spec)
    with pytest.raises(StoreCorruptedError, match="dimension"):
        again.attach(8, None, {})
    again.attach(16, None, {})
    assert again.count() == 40
    with pytest.raises(StoreCorruptedError, match="dimension"):  # this process has it open
        parse_store(spec).attach(8, None, {})
    again.close()
    with pytest.raises(StoreCorruptedError, match="no shard"):
        parse_store(f"qdrant-edge:{tmp_path}/none").attach(16, None, {})


def test_qdrant_edge_directory_is_held_by_one_process(tmp_path):
    """Another process cannot open the shard while this one holds it: a clear error, exit 1.

    Once this process closes the knowledge base, the other opens it; in this
    process, two knowledge bases of one directory share the shard.
    """
    _need("qdrant-edge")
    from fastrag.errors import SearchIndexError
    from fastrag.index.stores import parse_store

    kb_dir = _saved_kb("qdrant-edge", tmp_path)
    kb = KnowledgeBase.load(kb_dir)
    twin = KnowledgeBase.load(kb_dir)  # the same process: one shard, two users
    assert [h.chunk_id for h in twin.retrieve(QUESTION, 3)] == [
        h.chunk_id for h in kb.retrieve(QUESTION, 3)
    ]
    twin.close()
    child = _fastrag("query", str(kb_dir), QUESTION, "-k", "3", "--json", cwd=tmp_path)
    assert child.returncode == 1
    last = child.stderr.strip().splitlines()[-1]
    assert last.startswith("fastrag: error: ") and "open in another process" in last, last
    assert str(tmp_path) in last
    hits = [h.chunk_id for h in kb.retrieve(QUESTION, 3)]  # the twin's close left it open here
    kb.close()
    child = _fastrag("query", str(kb_dir), QUESTION, "-k", "3", "--json", cwd=tmp_path)
    assert child.returncode == 0, child.stderr
    assert _hits(child.stdout) == hits
    with pytest.raises(SearchIndexError, match="create or attach"):
        parse_store(f"qdrant-edge:{tmp_path}/never").count()
