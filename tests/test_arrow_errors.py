"""One mapping of pyarrow's errors (``fastrag._fs.arrow_errors``; ``arrow_read_errors`` for a file)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from fastrag._fs import arrow_errors, arrow_read_errors
from fastrag.embed.table import StaticTable
from fastrag.errors import DocumentError, StoreCorruptedError
from fastrag.index.keyword import BM25Index
from fastrag.text.utf8 import encode_utf8


def _open(path):
    return pa.ipc.open_file(pa.memory_map(str(path), "r"))


def test_pyarrow_errors_become_a_corrupted_store_naming_the_file(tmp_path):
    path = tmp_path / "x.arrow"
    path.write_bytes(b"ARROW1 but nothing after")
    with pytest.raises(StoreCorruptedError, match=r"x\.arrow: cannot be read as X: ") as info:
        with arrow_read_errors(path, "cannot be read as X", "x is missing"):
            _open(path)
    assert isinstance(info.value.__cause__, pa.ArrowException)


def test_a_missing_file_has_its_own_message_or_the_failure_one(tmp_path):
    path = tmp_path / "gone.arrow"
    with pytest.raises(StoreCorruptedError, match=r"gone\.arrow: x is missing$"):
        with arrow_read_errors(path, "cannot be read as X", "x is missing"):
            _open(path)
    with pytest.raises(StoreCorruptedError, match=r"gone\.arrow: cannot be read as X: "):
        with arrow_read_errors(path, "cannot be read as X"):
            _open(path)


def test_malformed_values_are_mapped_and_its_own_errors_pass_through(tmp_path):
    path = tmp_path / "x.arrow"
    for exc in (KeyError("vector"), TypeError("bad"), ValueError("bad")):
        with pytest.raises(StoreCorruptedError, match="cannot be read as X") as info:
            with arrow_read_errors(path, "cannot be read as X"):
                raise exc
        assert info.value.__cause__ is exc
    own = StoreCorruptedError(f"{path}: unexpected schema")
    with pytest.raises(StoreCorruptedError) as info:
        with arrow_read_errors(path, "cannot be read as X"):
            raise own
    assert info.value is own
    with pytest.raises(ZeroDivisionError):  # a bug is not a damaged file
        with arrow_read_errors(path, "cannot be read as X"):
            _ = 1 / 0


def test_the_readers_use_it(tmp_path):
    table_path, bm25_path = tmp_path / "static.arrow", tmp_path / "bm25.arrow"
    for p in (table_path, bm25_path):
        p.write_bytes(b"ARROW1" + b"\0" * 64)
    with pytest.raises(StoreCorruptedError, match="cannot read the static table"):
        StaticTable.read(table_path)
    with pytest.raises(StoreCorruptedError, match="cannot be read as a BM25 index"):
        BM25Index.load(bm25_path)
    table_path.unlink()
    bm25_path.unlink()
    with pytest.raises(StoreCorruptedError, match="the static table is missing"):
        StaticTable.read(table_path)
    with pytest.raises(StoreCorruptedError, match="bm25.arrow: file is missing"):
        BM25Index.load(bm25_path)


def test_texts_pyarrow_cannot_encode_name_the_culprit():
    texts = ["fine"] * 100
    with pytest.raises(DocumentError, match=r"^text at index 70 is int, not str$") as info:
        encode_utf8([*texts[:70], 7, *texts[71:]])
    assert info.value.__cause__ is not None  # what pyarrow raised
    with pytest.raises(DocumentError, match=r"^text at index 80 is not valid Unicode"):
        encode_utf8([*texts[:80], "a \ud800 b", *texts[81:]])
    data, offsets = encode_utf8(texts)
    assert bytes(data) == b"fine" * 100 and offsets[-1] == 400


def test_the_generic_mapping_passes_its_own_errors_and_bugs_through():
    own = DocumentError("already ours")
    with pytest.raises(DocumentError) as info:
        with arrow_errors(lambda exc: DocumentError(f"mapped: {exc}")):
            raise own
    assert info.value is own
    with pytest.raises(DocumentError, match="^mapped: boom$"):
        with arrow_errors(lambda exc: DocumentError(f"mapped: {exc}")):
            raise pa.ArrowInvalid("boom")
    with pytest.raises(ZeroDivisionError):
        with arrow_errors(lambda exc: DocumentError(f"mapped: {exc}")):
            _ = 1 / 0
