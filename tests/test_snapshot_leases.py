"""A load racing another process's save finishes: pruning never removes a snapshot being opened."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import traceback

import pytest

from fastrag import KnowledgeBase
from fastrag.corpus.persist import open_corpus
from fastrag.errors import StoreNotFoundError
from fastrag.retrieve.options import RetrievalConfig
from fastrag.store.snapshots import hold_snapshot, read_manifest

SAVES = 30


def _writer(root: str, saves: int, started, errors) -> None:
    """Another process: add a document, save with keep=1 (prunes the previous snapshot)."""
    try:
        kb = KnowledgeBase.load(root)
        started.set()
        for i in range(saves):
            kb.add([{"id": f"w{i}", "text": f"written document {i} about the leave policy"}])
            kb.save(root, keep=1)
    except BaseException:  # reported to the test, which fails on it
        errors.put(traceback.format_exc())
        raise
    finally:
        started.set()


def _documents(n: int) -> list[dict]:
    return [
        {"id": f"d{i}", "text": f"document {i}: leave policy, expense reports, travel " * 4}
        for i in range(n)
    ]


def test_loads_racing_saves_of_another_process_never_fail(tmp_path):
    root = tmp_path / "kb"
    KnowledgeBase.build(_documents(300)).save(root)
    ctx = multiprocessing.get_context("spawn")
    started, errors = ctx.Event(), ctx.Queue()
    writer = ctx.Process(target=_writer, args=(str(root), SAVES, started, errors))
    writer.start()
    failures, loads = [], 0
    try:
        assert started.wait(120)
        # Bounded: the writer makes SAVES saves, and this loop stops when it is done.
        while writer.is_alive() and loads < 5000:
            try:
                kb = KnowledgeBase.load(root, verify=loads % 4 == 3)
            except Exception as exc:  # noqa: BLE001 - every failure is the bug
                failures.append(f"{type(exc).__name__}: {exc}")
                continue
            loads += 1
            # The loaded snapshot is whole, and stays readable after it is pruned.
            stats = kb.stats()
            assert stats["documents"] >= 300
            assert kb.retrieve("leave policy", k=3)
    finally:
        writer.join(300)
    assert errors.empty(), errors.get()
    assert writer.exitcode == 0
    assert not failures, f"{len(failures)} of {len(failures) + loads} loads failed: {failures[:3]}"
    assert loads > 0
    final = KnowledgeBase.load(root)
    assert final.stats()["documents"] == 300 + SAVES
    # keep=1: once the readers are gone, the next prune leaves only the current snapshot.
    final.prune(keep=1)
    names = sorted(p.name for p in (root / "snapshots").iterdir() if not p.name.startswith("."))
    assert names == [final.stats()["snapshot"]]


def test_a_held_snapshot_survives_pruning_until_released(kb, tmp_path):
    root = tmp_path / "kb"
    first = kb.save(root)
    with hold_snapshot(root) as held:
        assert held.entry.id == first and held.directory == root / "snapshots" / first
        for i in range(2):
            kb.add([{"id": f"n{i}", "text": "more text"}])
            kb.save(root, keep=1)
        # Gone from the manifest, still on disk for the reader holding it.
        assert first not in [s.id for s in read_manifest(root).snapshots]
        assert held.directory.is_dir()
        corpus, _, _ = open_corpus(held, retrieval=RetrievalConfig.from_dict, verify=True)
        assert len(corpus.store) == len(kb) - 2
    kb.add([{"id": "n2", "text": "more text"}])
    kb.save(root, keep=1)
    assert not (root / "snapshots" / first).exists()
    assert not (root / "snapshots" / f".lease-{first}").exists()


def test_an_explicit_snapshot_being_pruned_is_not_found_not_corrupt(kb, tmp_path):
    root = tmp_path / "kb"
    first = kb.save(root, keep=None)
    kb.add([{"id": "n", "text": "more text"}])
    kb.save(root, keep=None)
    # What a pruner holds while it removes the directory.
    fd = os.open(root / "snapshots" / f".lease-{first}", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(StoreNotFoundError, match="pruned while being opened"):
            KnowledgeBase.load(root, snapshot=first)
        KnowledgeBase.load(root)  # the current snapshot is not affected
    finally:
        os.close(fd)
    assert len(KnowledgeBase.load(root, snapshot=first)) == len(kb) - 1


def test_a_lost_snapshot_directory_is_corrupt_not_a_race(kb, tmp_path):
    import shutil

    from fastrag.errors import StoreCorruptedError

    root = tmp_path / "kb"
    sid = kb.save(root)
    shutil.rmtree(root / "snapshots" / sid)
    with pytest.raises(StoreCorruptedError, match=f"{sid}: the snapshot's directory is missing"):
        KnowledgeBase.load(root)
    shutil.rmtree(root / "snapshots")
    with pytest.raises(StoreCorruptedError, match="directory is missing"):
        KnowledgeBase.load(root)


def test_a_knowledge_base_the_reader_may_not_write_still_loads(kb, tmp_path, monkeypatch):
    root = tmp_path / "kb"
    kb.save(root)
    real_open = os.open

    def read_only(path, flags, *args):
        if ".lease-" in str(path):  # as on a read-only mount: no lease file can be made
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    assert len(KnowledgeBase.load(root)) == len(kb)
