"""The build's write path: files hashed while written, byte for byte what a plain writer makes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pytest

from fastrag import KnowledgeBase, VocabularyEmbedder, _fs
from fastrag._fs import HashingFile, deferred_sync, write_arrow


def naive_ipc_file(path: Path, schema: pa.Schema, batches: list[pa.RecordBatch]) -> bytes:
    """The reference: pyarrow's own file writer, no hashing, read back whole."""
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for b in batches:
            writer.write_batch(b)
    return path.read_bytes()


def _batches(rows: int, dim: int, parts: int) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    rng = np.random.default_rng(3)
    out = []
    for p in range(parts):
        vec = rng.standard_normal(rows * dim).astype(np.float32)
        out.append(
            pa.record_batch(
                {
                    "id": pa.array(np.arange(rows, dtype=np.int64) + p * rows),
                    "text": pa.array(
                        [f"chunk {p}-{i} 文本" for i in range(rows)], pa.large_string()
                    ),
                    "vector": pa.FixedSizeListArray.from_arrays(pa.array(vec), dim),
                }
            )
        )
    return out[0].schema, out


@pytest.mark.parametrize("ahead", [1 << 28, 1 << 20, 1])
def test_hashing_file_digest_is_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ahead: int
) -> None:
    # small writes hashed inline, large ones on the hashing thread, however far behind it may lag
    monkeypatch.setattr(_fs, "_HASH_AHEAD", ahead)
    rng = np.random.default_rng(1)
    parts = [
        rng.integers(0, 256, size=n, dtype=np.uint8).tobytes() for n in (5, 3 << 20, 7, 2 << 20, 1)
    ]
    f = HashingFile(tmp_path / "x.bin")
    for part in parts:
        assert f.write(part) == len(part)
    f.close()
    f.close()  # idempotent
    data = (tmp_path / "x.bin").read_bytes()
    assert data == b"".join(parts)
    assert f.size == len(data) == f.tell()
    assert f.hexdigest() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("atomic", [True, False])
def test_write_arrow_matches_a_plain_writer(tmp_path: Path, atomic: bool) -> None:
    schema, batches = _batches(rows=3000, dim=128, parts=3)  # 1.5 MB vector buffers: threaded hash
    got = write_arrow(tmp_path / "a.arrow", schema, batches, what="test", atomic=atomic)
    want = naive_ipc_file(tmp_path / "ref.arrow", schema, batches)
    data = (tmp_path / "a.arrow").read_bytes()
    assert data == want
    assert got == {"bytes": len(want), "sha256": hashlib.sha256(want).hexdigest()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.arrow", "ref.arrow"]  # no temp left


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_deferred_sync_flushes_at_the_end(tmp_path: Path) -> None:
    schema, batches = _batches(rows=3000, dim=128, parts=2)
    before = _open_fds()
    with deferred_sync():
        a = write_arrow(tmp_path / "a.arrow", schema, batches, what="test")
        with deferred_sync():  # nested: joins the outer block
            b = write_arrow(tmp_path / "b.arrow", schema, batches[:1], what="test", atomic=False)
        assert _open_fds() == before + 2  # kept until the block ends
    assert _open_fds() == before
    for name, info, parts in (("a.arrow", a, batches), ("b.arrow", b, batches[:1])):
        want = naive_ipc_file(tmp_path / f"ref-{name}", schema, parts)
        assert (tmp_path / name).read_bytes() == want
        assert info["sha256"] == hashlib.sha256(want).hexdigest()


def test_deferred_sync_closes_on_error(tmp_path: Path) -> None:
    schema, batches = _batches(rows=10, dim=4, parts=1)
    before = _open_fds()
    with pytest.raises(RuntimeError, match="stop"), deferred_sync():
        write_arrow(tmp_path / "a.arrow", schema, batches, what="test")
        raise RuntimeError("stop")
    assert _open_fds() == before


def test_saved_files_are_what_a_plain_writer_makes(tmp_path: Path) -> None:
    # the on-disk format is unchanged: the same bytes as pyarrow's own writer of the same
    # batches, the manifest's checksums those of the files, and the store loaded back equal
    docs = [
        {"id": f"d{i}", "text": f"Document {i} about annual leave 年假 and expense reports. " * 30}
        for i in range(40)
    ]
    kb = KnowledgeBase.build(docs, embedder=VocabularyEmbedder(), tune=False)
    kb.save(tmp_path / "kb")
    manifest = orjson.loads((tmp_path / "kb" / "manifest.json").read_bytes())
    (entry,) = manifest["snapshots"]
    snap = tmp_path / "kb" / "snapshots" / entry["id"]
    for name, info in entry["files"].items():
        data = (snap / name).read_bytes()
        assert info == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    store = kb._corpus.store
    table = pa.Table.from_batches([s.batch for s in store.segments], schema=store.schema)
    want = naive_ipc_file(tmp_path / "ref.arrow", store.schema, table.to_batches())
    assert (snap / "chunks.arrow").read_bytes() == want
    back = KnowledgeBase.load(tmp_path / "kb", verify=True)
    (seg,) = back._corpus.store.segments
    assert seg.batch.equals(store.segments[0].batch)
    for old, new in (
        (kb._corpus.keyword, back._corpus.keyword),
        (kb._corpus.documents, back._corpus.documents),
    ):
        assert old is not None and new is not None
        for x, y in zip(old._state, new._state, strict=True):
            assert np.array_equal(x, y)
