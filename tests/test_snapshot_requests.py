"""Snapshots chosen per request: ``snapshot=`` on retrieve/answer, over HTTP and MCP (issue 25)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import threading
import time

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from serve_harness import ThreadServer

import fastrag
from fastrag.errors import ConfigError, SnapshotNotFoundError, StoreNotFoundError
from fastrag.serve import ServeSettings
from fastrag.store.snapshots import read_manifest

Q = "spindle alarm SV0432 firmware"
OLD = [
    {"id": f"v32-{i}", "text": f"Firmware 3.2 note {i}: spindle alarm SV0432 means overheating."}
    for i in range(4)
]
NEW = [
    {"id": f"v33-{i}", "text": f"Firmware 3.3 note {i}: spindle alarm SV0432 was renamed SV0500."}
    for i in range(4)
]


def _versions(path):
    """A knowledge base with two kept snapshots: tag v3.2 (OLD docs only), then v3.3 (NEW only)."""
    kb = fastrag.KnowledgeBase.build(OLD, window=80, overlap=10)
    old = kb.save(path, tag="fanuc-0imd-v3.2", keep=None)
    kb.add(NEW)
    kb.delete([d["id"] for d in OLD])
    new = kb.save(path, tag="fanuc-0imd-v3.3", keep=None)
    return old, new


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    path = tmp_path_factory.mktemp("versions") / "fanuc"
    old, new = _versions(path)
    return path, old, new


def _docs(hits):
    return {h.doc_id for h in hits}


def test_tags_are_kept_in_the_manifest_and_unique(versions, tmp_path):
    path, old, new = versions
    entries = {e.id: e.tag for e in read_manifest(path).snapshots}
    assert entries == {old: "fanuc-0imd-v3.2", new: "fanuc-0imd-v3.3"}
    kb = fastrag.KnowledgeBase.load(path)
    assert [(s.id, s.tag) for s in kb.snapshots()] == list(entries.items())
    with pytest.raises(ConfigError, match="already tagged"):
        kb.save(path, tag="fanuc-0imd-v3.2", keep=None)
    for bad in ("", "1abc", "a b", "../x", "a/b", "x" * 101, 3):
        with pytest.raises(ConfigError, match="tag must be"):
            kb.save(tmp_path / "other", tag=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "other").exists()


def test_a_call_naming_an_older_snapshot_reads_only_its_documents(versions):
    path, old, new = versions
    kb = fastrag.KnowledgeBase.load(path)
    assert _docs(kb.retrieve(Q, 10)) <= {d["id"] for d in NEW}
    for name in (old, "fanuc-0imd-v3.2"):
        assert _docs(kb.retrieve(Q, 10, snapshot=name)) == {d["id"] for d in OLD}
        ans = kb.answer(Q, 10, snapshot=name)
        assert ans.snapshot == old and _docs(ans.hits) <= {d["id"] for d in OLD}
        table = kb.retrieve_batch([Q, "overheating"], 10, snapshot=name)
        assert set(table.column("doc_id").to_pylist()) <= {d["id"] for d in OLD}
        batch = kb.answer_batch([Q, "overheating"], snapshot=name, output="answers")
        assert all(a is not None and a.snapshot == old for a in batch)
        events = list(kb.answer_stream(Q, snapshot=name))
        assert events[-1].answer is not None and events[-1].answer.snapshot == old
        assert _docs(events[-1].answer.hits) <= {d["id"] for d in OLD}
    # Naming the loaded snapshot is the loaded corpus; no name is the loaded one too.
    assert kb.answer(Q, snapshot="fanuc-0imd-v3.3").snapshot == new
    assert kb.answer(Q).snapshot == new
    assert kb.snapshot_id("fanuc-0imd-v3.2") == old and kb.snapshot_id() == new


def test_an_unknown_snapshot_is_a_named_error(versions):
    path, _, _ = versions
    kb = fastrag.KnowledgeBase.load(path)
    for name in ("nope", "000009-20990101T000000000000Z", "../../etc"):
        with pytest.raises(SnapshotNotFoundError, match="no snapshot"):
            kb.retrieve(Q, snapshot=name)
    assert issubclass(SnapshotNotFoundError, StoreNotFoundError)
    with pytest.raises(ConfigError):
        kb.retrieve(Q, snapshot=7)  # type: ignore[arg-type]
    unsaved = fastrag.KnowledgeBase.build(OLD)
    with pytest.raises(SnapshotNotFoundError, match="never saved"):
        unsaved.answer(Q, snapshot="fanuc-0imd-v3.2")


def test_opened_snapshots_are_cached_with_a_bound_and_survive_pruning(tmp_path):
    path = tmp_path / "kb"
    kb = fastrag.KnowledgeBase.build(OLD, window=80, overlap=10)
    ids = [kb.save(path, tag="t0", keep=None)]
    for i in range(1, 7):
        kb.add([{"id": f"extra-{i}", "text": f"Extra document {i} about coolant pumps."}])
        ids.append(kb.save(path, tag=f"t{i}", keep=None))
    reader = fastrag.KnowledgeBase.load(path)
    for i in range(6):
        hits = reader.retrieve("coolant pumps extra document", 20, snapshot=f"t{i}")
        assert {h.doc_id for h in hits if h.doc_id.startswith("extra")} == {
            f"extra-{j}" for j in range(1, i + 1)
        }
    assert len(reader._views) == fastrag.kb.SNAPSHOT_CACHE
    # A snapshot in use stays readable when a writer prunes it (its files are mapped) ...
    held = reader.retrieve("coolant", 20, snapshot="t5")
    kb.prune(keep=1)
    assert reader.retrieve("coolant", 20, snapshot=ids[-1]) and held
    # ... and a pruned one is no longer a kept snapshot a call may name.
    with pytest.raises(SnapshotNotFoundError):
        reader.retrieve("coolant", snapshot="t5")


def test_threads_asking_two_snapshots_at_once_never_mix(versions):
    path, old, new = versions
    kb = fastrag.KnowledgeBase.load(path)
    wanted = {
        "fanuc-0imd-v3.2": (old, {d["id"] for d in OLD}),
        "fanuc-0imd-v3.3": (new, {d["id"] for d in NEW}),
    }

    def ask(i: int) -> int:
        name = "fanuc-0imd-v3.2" if i % 2 else "fanuc-0imd-v3.3"
        sid, docs = wanted[name]
        mixed = 0
        for _ in range(25):
            ans = kb.answer(Q, 8, snapshot=name)
            mixed += ans.snapshot != sid or not _docs(ans.hits) <= docs
        return mixed

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        assert sum(pool.map(ask, range(8))) == 0


# -- over the wire --------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(versions):
    path, _, _ = versions
    settings = ServeSettings(kbs=(("fanuc", str(path)),), reload_interval=0, engine_threads=2)
    with ThreadServer(settings) as s:
        yield s


def test_http_snapshot_field(server, versions):
    _, old, new = versions
    olds, news = {d["id"] for d in OLD}, {d["id"] for d in NEW}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        r = http.post("/v1/retrieve", json={"question": Q, "k": 10, "snapshot": "fanuc-0imd-v3.2"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["snapshot"] == old and {h["doc_id"] for h in body["hits"]} == olds
        r = http.post("/v1/retrieve", json={"question": Q, "k": 10})
        assert r.json()["snapshot"] == new and {h["doc_id"] for h in r.json()["hits"]} <= news
        r = http.post("/v1/answer", json={"question": Q, "snapshot": old})
        assert r.json()["snapshot"] == old and {h["doc_id"] for h in r.json()["hits"]} <= olds
        r = http.post("/v1/answer", json={"question": Q, "snapshot": old, "stream": True})
        events = [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]
        assert events[0]["snapshot"] == old and events[-1]["snapshot"] == old
        r = http.post("/v1/answer/batch", json={"questions": [Q], "snapshot": "fanuc-0imd-v3.2"})
        assert r.json()["snapshot"] == old
        assert {h["doc_id"] for h in r.json()["results"][0]["hits"]} <= olds
        r = http.post("/v1/retrieve/batch", json={"questions": [Q], "snapshot": "fanuc-0imd-v3.2"})
        assert {h["doc_id"] for h in r.json()["results"][0]["hits"]} <= olds
        for path in ("/v1/retrieve", "/v1/answer"):
            r = http.post(path, json={"question": Q, "snapshot": "v9"})
            assert r.status_code == 404 and r.json()["error"]["type"] == "snapshot_not_found"
        r = http.post("/v1/answer", json={"question": Q, "snapshot": "v9", "stream": True})
        assert "snapshot_not_found" in r.text
        r = http.post("/v1/retrieve", json={"question": Q, "snapshot": 3})
        assert r.status_code == 400


def test_http_clients_asking_two_snapshots_at_once_never_mix(server, versions):
    _, old, new = versions
    wanted = {old: {d["id"] for d in OLD}, new: {d["id"] for d in NEW}}
    names = {old: "fanuc-0imd-v3.2", new: "fanuc-0imd-v3.3"}
    stop = time.monotonic() + 4.0
    counts = {"requests": 0, "mixed": 0}
    lock = threading.Lock()

    def client(i: int) -> None:
        sid = old if i % 2 else new
        with httpx.Client(base_url=server.url, timeout=30) as http:
            while time.monotonic() < stop:
                r = http.post("/v1/answer", json={"question": Q, "k": 8, "snapshot": names[sid]})
                body = r.json()
                bad = (
                    r.status_code != 200
                    or body["snapshot"] != sid
                    or not {h["doc_id"] for h in body["hits"]} <= wanted[sid]
                )
                with lock:
                    counts["requests"] += 1
                    counts["mixed"] += bad

    threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts["requests"] >= 16 and counts["mixed"] == 0, counts


def test_mcp_tools_take_a_snapshot_argument(server, versions):
    _, old, _ = versions

    async def run():
        async with contextlib.AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=30))
            c = await stack.enter_async_context(
                Client(streamable_http_client(server.url + "/mcp", http_client=http))
            )
            found = await c.call_tool(
                "search", {"query": Q, "k": 10, "snapshot": "fanuc-0imd-v3.2"}
            )
            ans = await c.call_tool("answer", {"question": Q, "snapshot": old})
            missing = await c.call_tool("search", {"query": Q, "snapshot": "nope"})
            return found, ans, missing

    found, ans, missing = anyio.run(run)
    found, ans = json.loads(found.content[0].text), json.loads(ans.content[0].text)
    assert found["snapshot"] == old and {h["doc_id"] for h in found["hits"]} == {
        d["id"] for d in OLD
    }
    assert ans["snapshot"] == old and {h["doc_id"] for h in ans["hits"]} <= {d["id"] for d in OLD}
    assert missing.is_error and "no snapshot 'nope'" in missing.content[0].text
