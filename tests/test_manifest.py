"""A hostile or damaged manifest.json: every field is checked before it is used.

Nothing read from a manifest may make ``load`` read, or ``save``/``prune``
delete, anything outside the knowledge base; a bad field is a
StoreCorruptedError naming the field, never a raw ValueError/KeyError/...
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys

import pytest

from fastrag import KnowledgeBase
from fastrag.cli import main
from fastrag.errors import EmbedderError, StoreCorruptedError, StoreVersionError
from fastrag.store.snapshots import list_snapshots


@pytest.fixture
def saved(kb, tmp_path):
    root = tmp_path / "kb"
    kb.save(root)
    manifest = json.loads((root / "manifest.json").read_text())
    return kb, root, manifest


def _write(root, manifest):
    (root / "manifest.json").write_text(json.dumps(manifest))


def _set(path, value):
    def mutate(m):
        *parents, last = path
        obj = m
        for key in parents:
            obj = obj[key]
        obj[last] = value

    return mutate


def _drop(path):
    def mutate(m):
        *parents, last = path
        obj = m
        for key in parents:
            obj = obj[key]
        del obj[last]

    return mutate


CORRUPTIONS = [
    ("dim", _set(["dim"], "abc"), "'dim'"),
    ("dim zero", _set(["dim"], 0), "'dim'"),
    ("dim bool", _set(["dim"], True), "'dim'"),
    ("no dim", _drop(["dim"]), "'dim'"),
    ("format_version 0", _set(["format_version"], 0), "'format_version'"),
    ("format_version true", _set(["format_version"], True), "'format_version'"),
    ("format_version str", _set(["format_version"], "1"), "'format_version'"),
    ("entry without id", _drop(["snapshots", 0, "id"]), r"'snapshots\[0\]\.id'"),
    ("entry not an object", _set(["snapshots", 0], "x"), r"'snapshots\[0\]'"),
    ("snapshots not a list", _set(["snapshots"], {"a": 1}), "'snapshots'"),
    ("id traversal", _set(["snapshots", 0, "id"], "1/../../../victim"), r"snapshots\[0\]\.id"),
    ("current unknown", _set(["current"], "000099-20260101T000000000000Z"), "'current'"),
    ("current not str", _set(["current"], 7), "'current'"),
    ("next_chunk_id", _set(["snapshots", 0, "next_chunk_id"], "z"), "next_chunk_id"),
    ("chunks negative", _set(["snapshots", 0, "chunks"], -1), r"snapshots\[0\]\.chunks"),
    ("created_at", _set(["snapshots", 0, "created_at"], "yesterday"), "created_at"),
    ("files list", _set(["snapshots", 0, "files"], []), r"snapshots\[0\]\.files"),
    ("file bytes", _set(["snapshots", 0, "files", "chunks.arrow", "bytes"], "x"), "arrow.*bytes"),
    ("file sha", _set(["snapshots", 0, "files", "chunks.arrow", "sha256"], 5), "arrow.*sha256"),
    ("file entry", _set(["snapshots", 0, "files", "chunks.arrow"], None), "chunks.arrow"),
    ("chunking str", _set(["chunking"], "200/40"), "'chunking'"),
    ("window", _set(["chunking", "window"], "200"), "chunking.window"),
    ("overlap >= window", _set(["chunking", "overlap"], 60), "chunking.overlap"),
    ("index list", _set(["index"], []), "'index'"),
    ("index type", _set(["index", "type"], "annoy"), "index.type"),
    ("no index type", _drop(["index", "type"]), "index.type"),
    ("index.hnsw str", _set(["index", "hnsw"], "M=16"), "index.hnsw"),
    ("index.hnsw key", _set(["index", "hnsw"], {"M": "sixteen"}), "index.hnsw"),
    ("hnsw without file", _set(["index", "type"], "hnsw"), "index.type.*hnsw.bin"),
    ("embedder str", _set(["embedder"], "vocabulary"), "'embedder'"),
    ("retrieval list", _set(["retrieval"], [1]), "'retrieval'"),
    ("retrieval value", _set(["retrieval"], {"mode": 3}), "'retrieval'"),
    ("keyword str", _set(["keyword"], "bm25"), "'keyword'"),
]
LOAD_ONLY = {"index.hnsw key", "hnsw without file", "retrieval value"}


@pytest.mark.parametrize(("name", "mutate", "field"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_every_bad_field_is_a_store_corrupted_error_naming_it(saved, name, mutate, field):
    kb, root, manifest = saved
    bad = copy.deepcopy(manifest)
    mutate(bad)
    _write(root, bad)
    with pytest.raises(StoreCorruptedError, match=field):
        KnowledgeBase.load(root)
    if name in LOAD_ONLY:
        return  # parsed by the layer that owns it, when loading
    # A writer refuses to build on it too, instead of failing half-way.
    kb.add([{"id": "new", "text": "a new document"}])
    with pytest.raises(StoreCorruptedError, match=field):
        kb.save(root)
    with pytest.raises(StoreCorruptedError, match=field):
        list_snapshots(root)


def test_an_embedder_config_the_embedder_cannot_rebuild_is_an_embedder_error(saved):
    _, root, manifest = saved
    _write(root, {**manifest, "embedder": {"type": "vocabulary"}})
    with pytest.raises(EmbedderError, match="max_features"):
        KnowledgeBase.load(root)


def test_a_newer_format_is_a_version_error(saved):
    _, root, manifest = saved
    _write(root, {**manifest, "format_version": 99})
    with pytest.raises(StoreVersionError, match="format version 99"):
        KnowledgeBase.load(root)


def _victim_with_a_copy_of(root, manifest, name):
    """A directory outside the knowledge base holding a loadable copy of its snapshot."""
    victim = root.parent / name
    shutil.copytree(root / "snapshots" / manifest["current"], victim)
    (victim / "keep-me.txt").write_text("outside the knowledge base")
    return victim


def test_a_traversing_current_id_reads_nothing_outside(saved):
    _, root, manifest = saved
    victim = _victim_with_a_copy_of(root, manifest, "victim2")
    bad = copy.deepcopy(manifest)
    evil = f"{manifest['current']}/../../../victim2"
    bad["current"] = bad["snapshots"][0]["id"] = evil
    _write(root, bad)
    with pytest.raises(StoreCorruptedError, match="'current'"):
        KnowledgeBase.load(root)
    with pytest.raises(StoreCorruptedError):
        KnowledgeBase.load(root, snapshot=evil)
    assert (victim / "keep-me.txt").exists()


def test_a_traversing_old_id_is_never_pruned(saved, docs):
    kb, root, manifest = saved
    victim = _victim_with_a_copy_of(root, manifest, "victim3")
    bad = copy.deepcopy(manifest)
    old = copy.deepcopy(bad["snapshots"][0])
    old["id"] = f"{manifest['current']}/../../../victim3"
    bad["snapshots"].insert(0, old)
    _write(root, bad)
    kb.add([{"id": "new", "text": "a new document"}])
    for _ in range(3):  # each save would prune the oldest entry, the "victim"
        with pytest.raises(StoreCorruptedError, match=r"snapshots\[0\]\.id"):
            kb.save(root, keep=1)
    with pytest.raises(StoreCorruptedError):
        kb.prune(keep=1)
    assert (victim / "keep-me.txt").read_text() == "outside the knowledge base"
    assert sorted(p.name for p in victim.iterdir()) == sorted(
        ["keep-me.txt", *manifest["snapshots"][0]["files"]]
    )


def test_a_traversing_file_name_is_refused(saved):
    _, root, manifest = saved
    bad = copy.deepcopy(manifest)
    files = bad["snapshots"][0]["files"]
    files["../../../x.arrow"] = files["chunks.arrow"]
    _write(root, bad)
    with pytest.raises(StoreCorruptedError, match="plain file name"):
        KnowledgeBase.load(root)


def test_a_snapshot_symlinked_out_of_the_knowledge_base_is_refused(saved):
    _, root, manifest = saved
    sid = manifest["current"]
    outside = root.parent / "elsewhere"
    shutil.move(root / "snapshots" / sid, outside)
    (root / "snapshots" / sid).symlink_to(outside, target_is_directory=True)
    with pytest.raises(StoreCorruptedError, match="outside"):
        KnowledgeBase.load(root)


def test_the_cli_reports_a_bad_manifest_in_one_line(saved, capsys):
    _, root, manifest = saved
    _write(root, {**manifest, "dim": "abc"})
    assert main(["info", str(root)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("fastrag: error: ") and "'dim'" in err and "Traceback" not in err
    proc = subprocess.run(
        [sys.executable, "-m", "fastrag", "ask", "leave", "--kb", str(root)],
        capture_output=True,
        text=True,
        check=False,
        cwd=root.parent,  # not the checkout, whose fastrag/ folder would shadow the install
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "'dim'" in proc.stderr


def test_a_manifest_that_round_trips_still_loads(saved):
    kb, root, manifest = saved
    _write(root, manifest)
    assert len(KnowledgeBase.load(root)) == len(kb)
