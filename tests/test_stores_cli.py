"""The command line over the external stores: what it holds open, and what it refuses.

Qdrant's local mode and Milvus Lite lock their directory or file: one
process at a time opens them. Every CLI command closes the knowledge bases
it opened (so a second command in the same process, or another process,
opens the store next), and ``fastrag serve --workers N`` refuses such a
knowledge base before any worker starts, with a message saying why and
what to do. Real engines, real processes, offline.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import orjson
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


def test_successive_cli_calls_in_one_process_release_a_qdrant_local_store(tmp_path, capsys):
    """index, query, query, sync-index in one process; then another process opens the store.

    A command that left its knowledge base open would keep the directory's
    lock in this process: the child's ``fastrag query`` would fail on it.
    """
    _need("qdrant")
    from fastrag.cli import main
    from fastrag.index.stores.qdrant import _local_clients

    src = _source_folder(tmp_path)
    kb_dir = tmp_path / "kb"
    spec = _spec("qdrant", tmp_path)
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
    assert spec.split(":", 1)[1] not in _local_clients  # no client of the directory left open
    child = _fastrag("query", str(kb_dir), QUESTION, "-k", "4", "--json", cwd=tmp_path)
    assert child.returncode == 0, child.stderr
    hits = orjson.loads(child.stdout.splitlines()[0])["hits"]
    assert any(h["doc_id"].startswith("extra") for h in hits)  # the synced file is searched
    with KnowledgeBase.load(kb_dir) as kb:  # and this process opens it again after the child
        assert [h.chunk_id for h in kb.retrieve(QUESTION, 4)] == [h["chunk_id"] for h in hits]


@pytest.mark.parametrize("engine", ["qdrant", "milvus"])
def test_serve_workers_refuse_a_store_one_process_locks(engine, tmp_path):
    """fastrag serve --workers 2 on Qdrant local / Milvus Lite: a clear error, exit 1, no server."""
    _need(engine)
    kb_dir = tmp_path / "kb"
    with KnowledgeBase.build(_docs(6), index=_spec(engine, tmp_path), window=120) as kb:
        kb.save(kb_dir)
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


@pytest.mark.parametrize("engine", ["faiss", "lancedb"])
def test_serve_workers_allow_stores_every_process_opens(engine, tmp_path):
    """FAISS (a copy per worker) and LanceDB (files read by many) pass the workers check."""
    _need(engine)
    from fastrag.cli import _check_workers

    kb_dir = tmp_path / "kb"
    with KnowledgeBase.build(_docs(6), index=_spec(engine, tmp_path), window=120) as kb:
        kb.save(kb_dir)
    _check_workers([("kb", str(kb_dir))], 4)  # raises for a store one process locks
