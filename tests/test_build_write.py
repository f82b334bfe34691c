"""The build's write path: files hashed while written, byte for byte what a plain writer makes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from fastrag import _fs
from fastrag._fs import HashingFile, write_arrow


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
