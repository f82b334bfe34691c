"""Hits read from the chunk store's Arrow buffers: single rows as hits, hit tables.

:class:`RowReader` turns rows of one segment (one record batch of
:mod:`.chunks`) into :class:`~fastrag.Hit` objects and record dicts, reading
memoryviews of the Arrow buffers rather than going through ``take`` and
``to_pylist``; :func:`metadata_of` is the same metadata dict from a row dict.
:data:`HIT_TABLE` is the Arrow table of a batched retrieval and
:func:`hits_table` builds it from hits.
"""

from __future__ import annotations

import datetime as _dt
import struct as _struct
import zoneinfo
from collections.abc import Sequence
from typing import Any, Literal

import orjson
import pyarrow as pa

from ..types import Hit, LazyMetadata

__all__ = ["HIT_TABLE", "RowReader", "hits_table", "metadata_of"]

HIT_TABLE = pa.schema(
    [
        pa.field("query_index", pa.int32(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("chunk_id", pa.int64(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
    ]
)
"""Columns of a batched retrieval: one row per (question, hit), by question then rank."""


def hits_table(hits: Sequence[Sequence[Hit]]) -> pa.Table:
    """Hits per question as :data:`HIT_TABLE` rows (for hits reordered after the search)."""
    rows = [(q, r, h) for q, hs in enumerate(hits) for r, h in enumerate(hs, 1)]
    return pa.table(
        [
            pa.array([q for q, _, _ in rows], pa.int32()),
            pa.array([r for _, r, _ in rows], pa.int32()),
            pa.array([h.chunk_id for _, _, h in rows], pa.int64()),
            pa.array([h.doc_id for _, _, h in rows], pa.string()),
            pa.array([h.score for _, _, h in rows], pa.float32()),
            pa.array([h.text for _, _, h in rows], pa.large_string()),
        ],
        schema=HIT_TABLE,
    )


_UTC_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=zoneinfo.ZoneInfo("UTC"))


def _view(buf: pa.Buffer | None, fmt: Literal["i", "q"], first: int, count: int) -> memoryview:
    """``count`` values of format ``fmt`` from value ``first`` of an Arrow buffer (zero-copy).

    Indexing a memoryview gives a Python ``int`` in tens of nanoseconds; a
    numpy scalar read plus its conversion costs several times that, and a hit
    reads a dozen such values, so the hit path reads memoryviews. A missing
    buffer reads as ``count`` zeros (an empty array's offsets).
    """
    size = _struct.calcsize(fmt)
    if buf is None:
        return memoryview(bytes(size * count)).cast(fmt)
    return memoryview(buf).cast("B")[first * size : (first + count) * size].cast(fmt)


def _values(arr: pa.Array, fmt: Literal["i", "q"]) -> memoryview:
    """The values of a fixed-width Arrow array as a memoryview (zero-copy)."""
    return _view(arr.buffers()[1] if len(arr) else None, fmt, arr.offset, len(arr))


def _offsets(arr: pa.Array, fmt: Literal["i", "q"]) -> memoryview:
    """The ``n + 1`` offsets of a string or list array (``"i"``: 32-bit, ``"q"``: 64-bit)."""
    return _view(arr.buffers()[1], fmt, arr.offset, len(arr) + 1)


class _Valid:
    """Validity bits of an Arrow array (zero-copy); every row is valid without a bitmap."""

    __slots__ = ("bits", "offset")

    def __init__(self, arr: pa.Array) -> None:
        buf = arr.buffers()[0]
        self.bits: memoryview | None = (
            memoryview(buf).cast("B") if arr.null_count and buf is not None else None
        )
        self.offset = arr.offset

    def __call__(self, i: int) -> bool:
        bits = self.bits
        if bits is None:
            return True
        j = self.offset + i
        return bool((bits[j >> 3] >> (j & 7)) & 1)


class _DictColumn:
    """A dictionary-encoded string column read one row at a time, decoding each entry once.

    Safe to share between threads: the cache of decoded entries only grows,
    and a race decodes one entry twice to the same value.
    """

    __slots__ = ("codes", "dictionary", "seen", "valid")

    def __init__(self, arr: pa.DictionaryArray) -> None:
        self.codes = _values(arr.indices, "i")
        self.valid = _Valid(arr.indices)
        self.dictionary = arr.dictionary
        self.seen: dict[int, Any] = {}

    def __call__(self, i: int) -> Any:
        if not self.valid(i):
            return None  # a null's code is not an index into the dictionary
        code = self.codes[i]
        value = self.seen.get(code, _MISSING)
        if value is _MISSING:
            value = self.seen[code] = self.dictionary[code].as_py()
        return value


class _StringList:
    """A ``list<string>`` column (the ACL) read one row at a time from its buffers."""

    __slots__ = ("data", "list_offsets", "str_offsets", "valid")

    def __init__(self, arr: pa.ListArray) -> None:
        self.valid = _Valid(arr)
        self.list_offsets = _offsets(arr, "i")
        values = arr.values  # the child array as a whole: list offsets index it directly
        vbuf = values.buffers()
        self.str_offsets = _view(vbuf[1], "i", values.offset, len(values) + 1)
        self.data = memoryview(vbuf[2]) if vbuf[2] is not None else memoryview(b"")

    def __call__(self, i: int) -> list[str] | None:
        if not self.valid(i):
            return None
        offs, data = self.str_offsets, self.data
        return [
            str(data[offs[j] : offs[j + 1]], "utf-8")
            for j in range(self.list_offsets[i], self.list_offsets[i + 1])
        ]


_MISSING = object()


class RowReader:
    """Hit fields of single rows, read straight from a segment's Arrow buffers.

    ``pyarrow``'s ``take`` + ``to_pylist`` costs about 0.2 ms for a handful of
    rows whatever their number (per-call overhead of every column), and numpy
    fancy indexing a few microseconds per column; a retrieval returns 5-10
    rows, so this reader indexes memoryviews of the buffers instead: every
    value is a Python int or a slice of the text bytes, dictionary entries are
    decoded once. It allocates nothing per row of the segment (the store stays
    memory-mapped) and is safe to share between threads (the decoded-entry
    caches only grow).
    """

    def __init__(self, batch: pa.RecordBatch) -> None:
        col = batch.column
        self.chunk_id = _values(col("chunk_id"), "q")
        self.ord = _values(col("ord"), "i")
        self.start = _values(col("start"), "q")
        self.end = _values(col("end"), "q")
        text = col("text")
        self._text_offsets = _offsets(text, "q")
        data = text.buffers()[2]
        self._text_data = memoryview(data) if data is not None else memoryview(b"")
        self.doc_id = _DictColumn(col("doc_id"))
        self.title = _DictColumn(col("title"))
        self.source = _DictColumn(col("source"))
        self.metadata = _DictColumn(col("metadata"))
        self.section = _DictColumn(col("section"))
        ts = col("updated_at")
        self._ts = _values(ts, "q")
        self._ts_valid = _Valid(ts)
        self._acl = _StringList(col("acl"))
        # The metadata fields in their order, leaving out columns that hold no value in
        # this segment (most stores set a few of them): a hit then reads only the rest.
        fields: list[tuple[str, Any]] = [
            ("title", self.title), ("source", self.source), ("updated_at", self._updated_at),
            ("acl", self._acl), ("section", self.section),
        ]  # fmt: skip
        self._meta_fields = tuple((name, read) for name, read in fields if _any_value(col(name)))
        self._extra = self.metadata if _any_value(col("metadata")) else None

    def text(self, i: int) -> str:
        """The chunk text of local row ``i``."""
        offsets = self._text_offsets
        return str(self._text_data[offsets[i] : offsets[i + 1]], "utf-8")

    def meta(self, i: int) -> dict[str, Any]:
        """The metadata dict of local row ``i`` (what :func:`metadata_of` gives its record)."""
        meta: dict[str, Any] = {}
        for name, read in self._meta_fields:  # columns with no value in the segment are skipped
            value = read(i)
            if value is not None:
                meta[name] = value
        extra = self._extra(i) if self._extra is not None else None
        if extra:
            meta.update(orjson.loads(extra))
        return meta

    def _updated_at(self, i: int) -> _dt.datetime | None:
        if not self._ts_valid(i):
            return None
        return _UTC_EPOCH + _dt.timedelta(microseconds=self._ts[i])

    def hits(
        self, rows: Sequence[int], scores: Sequence[float], relevance: Sequence[Any]
    ) -> list[Hit]:
        """Local ``rows`` (Python ints) as :class:`~fastrag.Hit` objects.

        What :meth:`hit` gives each row, in one loop over local names (a
        retrieval's ten hits otherwise cost five method calls each).
        """
        chunk_id, ords, starts, ends = self.chunk_id, self.ord, self.start, self.end
        offsets, data = self._text_offsets, self._text_data
        doc = self.doc_id
        codes, seen = doc.codes, doc.seen
        plain_doc = doc.valid.bits is None  # no null doc_id: the cache of decoded ids answers
        # a segment with no metadata column holding a value: every row's metadata is {}
        meta = self.meta if self._meta_fields or self._extra is not None else None
        out = []
        for i, score, rel in zip(rows, scores, relevance, strict=True):
            doc_id: Any = seen.get(codes[i], _MISSING) if plain_doc else _MISSING
            if doc_id is _MISSING:
                doc_id = doc(i)
            text = str(data[offsets[i] : offsets[i + 1]], "utf-8")
            metadata: Any = {} if meta is None else LazyMetadata(meta, i)
            out.append(
                Hit(chunk_id[i], doc_id, ords[i], starts[i], ends[i], text, score, metadata, rel)
            )
        return out

    def hit(self, i: int, score: float, relevance: float | None) -> Hit:
        """Local row ``i`` as a :class:`~fastrag.Hit`.

        What :meth:`record` and :func:`metadata_of` give (:meth:`hits` of one row).
        """
        return self.hits((i,), (score,), (relevance,))[0]

    def record(self, i: int) -> dict[str, Any]:
        """Local row ``i`` as the dict ``Table.to_pylist`` would give (every column but vector)."""
        return {
            "chunk_id": self.chunk_id[i],
            "doc_id": self.doc_id(i),
            "ord": self.ord[i],
            "start": self.start[i],
            "end": self.end[i],
            "text": self.text(i),
            "title": self.title(i),
            "source": self.source(i),
            "updated_at": self._updated_at(i),
            "acl": self._acl(i),
            "metadata": self.metadata(i),
            "section": self.section(i),
        }


def _any_value(arr: pa.Array) -> bool:
    """Whether some row of ``arr`` is not null."""
    return arr.null_count < len(arr)


def metadata_of(row: dict[str, Any]) -> dict[str, Any]:
    """Collect the metadata fields of a row dict (as produced by ``to_pylist``) into one dict."""
    meta: dict[str, Any] = {}
    for key in ("title", "source", "updated_at", "acl", "section"):
        value = row.get(key)
        if value is not None:
            meta[key] = value
    extra = row.get("metadata")
    if extra:
        meta.update(orjson.loads(extra))
    return meta
