"""The Arrow chunk store: columns of chunks, their vectors and metadata.

A store is a list of *segments*, each one Arrow record batch whose ``vector``
column is one contiguous ``float32`` buffer, seen as an ``(n, dim)`` matrix
without a copy. A freshly built knowledge base is one segment; each ``add``
appends one, and small neighbours are merged as they accumulate. On disk the
segments are the record batches of one Arrow IPC file (``chunks.arrow``),
memory-mapped on load: opening a store reads the schema and footer, never the
vectors.

Deletes are tombstones (an ``alive`` mask per segment) applied at search time;
they are saved as a list of chunk ids (``tombstones.arrow``) and dropped for
good by :meth:`ChunkStore.compacted`.

Global row numbers run over the segments in order; they are what the search
kernels return. ``chunk_id`` is the stable identity of a chunk: assigned in
increasing order, never reused, unchanged by compaction.

Reading rows as hits (:class:`~.rows.RowReader`) lives in :mod:`.rows`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from .._fs import arrow_read_errors, check_recorded, write_arrow
from ..errors import StoreCorruptedError, StoreError
from ..types import Hit, Hits
from .rows import HIT_TABLE, RowReader, metadata_of

__all__ = [
    "CHUNKS_FILE",
    "ChunkStore",
    "Segment",
    "TOMBSTONES_FILE",
    "build_batch",
    "chunk_schema",
    "instance_starts",
]

CHUNKS_FILE = "chunks.arrow"
TOMBSTONES_FILE = "tombstones.arrow"

_DICT_STR = pa.dictionary(pa.int32(), pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_HIT_COLUMNS = (
    "chunk_id",
    "doc_id",
    "ord",
    "start",
    "end",
    "text",
    "title",
    "source",
    "updated_at",
    "acl",
    "metadata",
    "section",
)
"""Every column but ``vector``: what a :class:`~fastrag.Hit` is made of."""


def chunk_schema(dim: int, *, legacy: bool = False) -> pa.Schema:
    """Schema of ``chunks.arrow`` for vectors of ``dim`` columns.

    ``section`` (the chunk's heading path, per chunk) is the last column;
    ``legacy=True`` gives the schema of stores written before it existed,
    which :meth:`ChunkStore.read` upgrades with an all-null column.
    """
    fields = [
        pa.field("chunk_id", pa.int64(), nullable=False),
        pa.field("doc_id", _DICT_STR, nullable=False),
        pa.field("ord", pa.int32(), nullable=False),
        pa.field("start", pa.int64(), nullable=False),
        pa.field("end", pa.int64(), nullable=False),
        pa.field("text", pa.large_string(), nullable=False),
        pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        pa.field("title", _DICT_STR),
        pa.field("source", _DICT_STR),
        pa.field("updated_at", _TIMESTAMP),
        pa.field("acl", pa.list_(pa.string())),
        pa.field("metadata", _DICT_STR),
    ]
    if not legacy:
        fields.append(pa.field("section", _DICT_STR))
    return pa.schema(fields)


def _with_section(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A legacy batch with an all-null ``section`` column appended (no other column copied)."""
    return batch.append_column(pa.field("section", _DICT_STR), pa.nulls(batch.num_rows, _DICT_STR))


def _dict_column(values: Sequence[str | None], take: np.ndarray) -> pa.DictionaryArray:
    """Per-document strings -> dictionary-encoded per-chunk column (no string copies)."""
    per_doc = pa.array(values, type=pa.string()).dictionary_encode()
    indices = per_doc.indices.take(pa.array(take))
    return pa.DictionaryArray.from_arrays(indices, per_doc.dictionary)


def build_batch(
    *,
    dim: int,
    first_chunk_id: int,
    doc_ids: Sequence[str],
    chunk_doc: np.ndarray,
    chunk_ord: np.ndarray,
    chunk_start: np.ndarray,
    chunk_end: np.ndarray,
    text: pa.LargeStringArray,
    vectors: np.ndarray,
    titles: Sequence[str | None],
    sources: Sequence[str | None],
    updated_at: Sequence[_dt.datetime | None],
    acl: Sequence[list[str] | None],
    metadata: Sequence[str | None],
    section: pa.DictionaryArray | None = None,
    table: np.ndarray | None = None,
    table_row: np.ndarray | None = None,
) -> pa.RecordBatch:
    """Assemble one segment from chunk arrays and per-document columns.

    ``chunk_doc`` indexes the per-document sequences; ``vectors`` is wrapped,
    not copied. ``section`` is per chunk (the heading path of structure-aware
    chunks), null for every chunk when omitted. ``table`` and ``table_row``
    (per chunk, -1 off a table) add ``table`` and ``row`` to the metadata of
    the chunks cut from a table row.
    """
    n = int(chunk_doc.size)
    take = np.ascontiguousarray(chunk_doc, dtype=np.int64)
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
    columns = [
        pa.array(np.arange(first_chunk_id, first_chunk_id + n, dtype=np.int64)),
        _dict_column(doc_ids, take),
        pa.array(np.ascontiguousarray(chunk_ord, dtype=np.int32)),
        pa.array(np.ascontiguousarray(chunk_start, dtype=np.int64)),
        pa.array(np.ascontiguousarray(chunk_end, dtype=np.int64)),
        text,
        pa.FixedSizeListArray.from_arrays(flat, dim),
        _dict_column(titles, take),
        _dict_column(sources, take),
        pa.array(updated_at, type=_TIMESTAMP).take(pa.array(take)),
        pa.array(acl, type=pa.list_(pa.string())).take(pa.array(take)),
        _metadata_column(metadata, take, table, table_row),
        pa.nulls(n, _DICT_STR) if section is None else section.cast(_DICT_STR),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=chunk_schema(dim))


def _metadata_column(
    metadata: Sequence[str | None],
    take: np.ndarray,
    table: np.ndarray | None,
    table_row: np.ndarray | None,
) -> pa.DictionaryArray:
    """The per-chunk metadata: the document's, and ``table`` and ``row`` on a table row's chunks."""
    if table is None or table_row is None or not (table >= 0).any():
        return _dict_column(metadata, take)
    rows = np.flatnonzero(table >= 0)
    values: list[str | None] = list(metadata)
    indices = take.copy()
    extra: dict[tuple[int, int, int], int] = {}
    for r in rows.tolist():
        key = (int(take[r]), int(table[r]), int(table_row[r]))
        at = extra.get(key)
        if at is None:
            base = metadata[key[0]]
            meta = orjson.loads(base) if base else {}
            meta["table"], meta["row"] = key[1], key[2]
            at = extra[key] = len(values)
            values.append(orjson.dumps(meta, option=orjson.OPT_SORT_KEYS).decode())
        indices[r] = at
    return _dict_column(values, indices)


def instance_starts(batch: pa.RecordBatch) -> np.ndarray:
    """Local row of the first chunk of every document instance in ``batch``, ascending.

    A document's chunks are one contiguous run of rows with ``ord`` 0, 1, 2,
    ...; an instance starts where the ``doc_id`` changes *or* ``ord`` is 0.
    The second condition matters: a document deleted and added again under
    the same id can end up in the row right after its dead instance once
    segments merge, and the two are different instances (the document
    BM25 index holds one row for each).

    This is the one definition every index of documents uses: the row
    document numbers (:meth:`ChunkStore.row_docs`), the document index, the
    document BM25 texts and the sync's stored documents.
    """
    n = batch.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    codes = batch.column("doc_id").indices.to_numpy(zero_copy_only=False)
    ords = batch.column("ord").to_numpy(zero_copy_only=False)
    start = ords == 0
    start[0] = True
    start[1:] |= codes[1:] != codes[:-1]
    return np.flatnonzero(start).astype(np.int64)


def _vector_view(batch: pa.RecordBatch, dim: int) -> np.ndarray:
    col = batch.column("vector")
    n = len(col)
    values = col.values
    if col.offset or len(values) != n * dim:
        values = values.slice(col.offset * dim, n * dim)
    if n == 0:
        return np.zeros((0, dim), dtype=np.float32)
    view = values.to_numpy(zero_copy_only=True).reshape(n, dim)
    view.flags.writeable = False
    return view


_UNSET = object()


class Segment:
    """One record batch of the store, with numpy views of its hot columns."""

    __slots__ = ("_reader", "alive", "batch", "chunk_ids", "filter_cache", "n_dead", "vectors")

    def __init__(self, batch: pa.RecordBatch, dim: int) -> None:
        self.batch = batch
        self.vectors = _vector_view(batch, dim)
        self.chunk_ids = batch.column("chunk_id").to_numpy(zero_copy_only=True)
        self.alive: np.ndarray | None = None  # None: every row is alive
        self.n_dead = 0
        # Filter masks by canonical filter key (the segment's rows never change).
        self.filter_cache: dict[bytes, np.ndarray] = {}
        self._reader: RowReader | None = None

    def __len__(self) -> int:
        return self.batch.num_rows

    @property
    def reader(self) -> RowReader:
        """Single-row access to the hit columns (made on first use)."""
        if self._reader is None:
            self._reader = RowReader(self.batch)
        return self._reader

    def copy(self) -> Segment:
        """A segment over the same rows whose deletions can change without touching this one.

        The batch, the vector view, the row reader and the filter-mask cache
        are shared (rows never change); the alive mask is an array that
        :meth:`kill` replaces, never edits, so sharing it is safe too.
        """
        twin = Segment.__new__(Segment)
        twin.batch = self.batch
        twin.vectors = self.vectors
        twin.chunk_ids = self.chunk_ids
        twin.alive = self.alive
        twin.n_dead = self.n_dead
        twin.filter_cache = self.filter_cache
        twin._reader = self.reader
        return twin

    def kill(self, local_rows: np.ndarray) -> int:
        """Mark rows deleted; return how many were alive."""
        if local_rows.size == 0:
            return 0
        alive = np.ones(len(self), dtype=np.bool_) if self.alive is None else self.alive.copy()
        newly = int(alive[local_rows].sum())
        alive[local_rows] = False
        # A new array, swapped in whole: a concurrent reader sees the old mask or the new one.
        self.alive = alive
        self.n_dead += newly
        return newly


@dataclass(frozen=True, slots=True)
class _DocSpan:
    start: int  # global row of the document's first chunk
    count: int


class ChunkStore:
    """Segments of chunks with stable ids, tombstones and a document index.

    Parameters
    ----------
    dim : int
        Vector columns.
    segments : sequence of pyarrow.RecordBatch
        Batches with :func:`chunk_schema` ``(dim)``.
    next_chunk_id : int
        First id the next appended chunk gets.
    """

    def __init__(
        self, dim: int, segments: Sequence[pa.RecordBatch] = (), next_chunk_id: int = 0
    ) -> None:
        self.dim = dim
        self.schema = chunk_schema(dim)
        self.segments: list[Segment] = []
        self.next_chunk_id = next_chunk_id
        self._bases = np.zeros(1, dtype=np.int64)
        self._doc_index: dict[str, _DocSpan] | None = None
        self._chunk_ids: np.ndarray | None = None
        self._row_docs: np.ndarray | None = None
        self._alive: Any = _UNSET
        for batch in segments:
            self._push(batch)

    def copy(self) -> ChunkStore:
        """A copy to change while readers keep using this store (copy-on-write).

        Segments are copied shallowly (:meth:`Segment.copy`): the rows and
        vectors are shared, only the deletion state is the copy's own. Cost:
        the document index (one dict entry per document), nothing per row.
        """
        twin = ChunkStore.__new__(ChunkStore)
        twin.dim = self.dim
        twin.schema = self.schema
        twin.segments = [s.copy() for s in self.segments]
        twin.next_chunk_id = self.next_chunk_id
        twin._bases = self._bases
        twin._doc_index = None if self._doc_index is None else dict(self._doc_index)
        twin._chunk_ids = self._chunk_ids
        twin._row_docs = self._row_docs
        twin._alive = self._alive
        return twin

    # -- sizes -----------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        """Rows, deleted ones included."""
        return int(self._bases[-1])

    @property
    def n_dead(self) -> int:
        """Rows deleted but not yet compacted away."""
        return sum(s.n_dead for s in self.segments)

    def __len__(self) -> int:
        return self.n_rows - self.n_dead

    @property
    def bases(self) -> np.ndarray:
        """Global row number of each segment's first row, plus the total at the end."""
        return self._bases

    # -- growth ----------------------------------------------------------------
    def _push(self, batch: pa.RecordBatch) -> None:
        if not batch.schema.equals(self.schema):
            raise StoreError(f"segment schema differs from the store's:\n{batch.schema}")
        self.segments.append(Segment(batch, self.dim))
        self._bases = np.append(self._bases, self._bases[-1] + batch.num_rows)
        self._chunk_ids = self._row_docs = None
        self._alive = _UNSET
        if batch.num_rows:
            self.next_chunk_id = max(self.next_chunk_id, int(self.segments[-1].chunk_ids[-1]) + 1)

    def append(self, batch: pa.RecordBatch) -> None:
        """Append a segment (from :func:`build_batch`), then merge small tail segments."""
        if batch.num_rows == 0:
            return
        first = int(batch.column("chunk_id")[0].as_py())
        if first < self.next_chunk_id:
            raise StoreError("appended chunk ids must continue the store's sequence")
        base = self.n_rows
        self._push(batch)
        if self._doc_index is not None:
            self._index_segment(len(self.segments) - 1, base, self._doc_index)
        self._merge_tail()

    def _merge_tail(self) -> None:
        # A binary-counter policy: merge the last two segments while they are of
        # similar size, so there are O(log n) segments and each row is copied
        # O(log n) times over the store's life. Rows keep their global numbers.
        while len(self.segments) > 1 and len(self.segments[-2]) < 4 * len(self.segments[-1]):
            b, a = self.segments.pop(), self.segments.pop()
            table = pa.Table.from_batches([a.batch, b.batch]).unify_dictionaries()
            merged = Segment(table.combine_chunks().to_batches()[0], self.dim)
            if a.alive is not None or b.alive is not None:
                merged.alive = np.concatenate(
                    [
                        a.alive if a.alive is not None else np.ones(len(a), np.bool_),
                        b.alive if b.alive is not None else np.ones(len(b), np.bool_),
                    ]
                )
                merged.n_dead = a.n_dead + b.n_dead
            self.segments.append(merged)
            self._bases = np.concatenate([self._bases[:-2], self._bases[-1:]])

    # -- row access ----------------------------------------------------------
    def chunk_ids(self) -> np.ndarray:
        """Chunk id of every global row (ascending; cached)."""
        ids = self._chunk_ids
        if ids is None:
            parts = [s.chunk_ids for s in self.segments]
            ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            ids.flags.writeable = False
            self._chunk_ids = ids
        return ids

    def rows_of(self, chunk_ids: np.ndarray) -> np.ndarray:
        """Global rows of chunk ids that are in the store (as ``chunk_ids()`` is sorted)."""
        ids = self.chunk_ids()
        return np.searchsorted(ids, chunk_ids)

    def row_docs(self) -> np.ndarray:
        """Document number of every global row (cached).

        Documents are numbered in store order, one number per stored
        instance: the chunks of a document are one contiguous run of rows, and
        a document deleted and added again is a new instance with a new number.
        """
        docs = self._row_docs
        if docs is None:
            parts = []
            base = 0
            for seg in self.segments:
                if len(seg) == 0:
                    continue
                start = np.zeros(len(seg), dtype=np.int64)
                start[instance_starts(seg.batch)] = 1
                numbers = np.cumsum(start) - 1 + base
                base = int(numbers[-1]) + 1
                parts.append(numbers)
            docs = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            docs.flags.writeable = False
            self._row_docs = docs
        return docs

    def doc_starts(self) -> np.ndarray:
        """First global row of every document instance (see :meth:`row_docs`), plus ``n_rows``."""
        docs = self.row_docs()
        if docs.size == 0:
            return np.zeros(1, dtype=np.int64)
        starts = np.flatnonzero(np.concatenate([[True], docs[1:] != docs[:-1]]))
        return np.append(starts, docs.size).astype(np.int64)

    def alive_mask(self) -> np.ndarray | None:
        """Alive flag of every global row, or None when nothing is deleted.

        Cached: the same read-only array until rows are added or deleted.
        """
        alive = self._alive
        if alive is _UNSET:
            if not any(s.alive is not None for s in self.segments):
                alive = None
            else:
                alive = np.concatenate(
                    [s.alive if s.alive is not None else np.ones(len(s), np.bool_)
                     for s in self.segments]
                )  # fmt: skip
                alive.flags.writeable = False
            self._alive = alive
        return alive  # type: ignore[return-value]

    def locate(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Global rows -> (segment index, local row)."""
        seg = np.searchsorted(self._bases, rows, side="right") - 1
        return seg, rows - self._bases[seg]

    def rows(self, rows: np.ndarray, columns: Sequence[str] = _HIT_COLUMNS) -> pa.Table:
        """The given global rows (in the given order) as a table of ``columns``."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(self.segments) == 1:
            batch = self.segments[0].batch.select(list(columns))
            return pa.Table.from_batches([batch.take(pa.array(rows))])
        seg, local = self.locate(rows)
        parts, order = [], []
        for s in np.unique(seg):
            pick = np.flatnonzero(seg == s)
            batch = self.segments[int(s)].batch.select(list(columns))
            parts.append(batch.take(pa.array(local[pick])))
            order.append(pick)
        if not parts:
            return self.schema_table(columns)
        table = pa.Table.from_batches(parts).unify_dictionaries()
        inverse = np.empty(rows.size, dtype=np.int64)
        inverse[np.concatenate(order)] = np.arange(rows.size)
        return table.take(pa.array(inverse))

    def records(self, rows: np.ndarray) -> list[dict[str, Any]]:
        """The given global rows as dicts of every column but ``vector`` (few rows: fast).

        Equal to ``self.rows(rows).to_pylist()``; for more than a few hundred
        rows that is the faster of the two.
        """
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size > 256:
            return self.rows(rows).to_pylist()
        if len(self.segments) == 1:
            reader = self.segments[0].reader
            return [reader.record(i) for i in rows.tolist()]
        seg, local = self.locate(rows)
        return [
            self.segments[s].reader.record(i)
            for s, i in zip(seg.tolist(), local.tolist(), strict=True)
        ]

    def hits(
        self, rows: np.ndarray, scores: np.ndarray, relevance: np.ndarray | None = None
    ) -> list[Hit]:
        """:class:`~fastrag.Hit` objects for global rows (``-1`` padding is skipped).

        Parameters
        ----------
        rows : numpy.ndarray
            int64 global rows, ``-1`` for padding.
        scores : numpy.ndarray
            The ranking score of each row.
        relevance : numpy.ndarray, optional
            The relevance of each row, in ``[0, 1]``.

        Returns
        -------
        list of Hit
            In the order of ``rows``.
        """
        keep = rows >= 0
        if not keep.all():
            rows, scores = rows[keep], scores[keep]
            relevance = None if relevance is None else relevance[keep]
        if rows.size == 0:
            return []
        if rows.size <= 256:  # a retrieval's few rows: straight from the Arrow buffers
            rel = [None] * rows.size if relevance is None else relevance.tolist()
            score_list = scores.tolist()
            segments = self.segments
            if len(segments) == 1:
                return segments[0].reader.hits(rows.tolist(), score_list, rel)
            # one reader.hits() call per segment, then the hits back in the order of rows
            seg, local = self.locate(rows)
            out: list[Hit | None] = [None] * rows.size
            for s in np.unique(seg).tolist():
                where = np.flatnonzero(seg == s)
                at = where.tolist()
                found = segments[s].reader.hits(
                    local[where].tolist(), [score_list[j] for j in at], [rel[j] for j in at]
                )
                for j, hit in zip(at, found, strict=True):
                    out[j] = hit
            return out  # type: ignore[return-value]  # every slot was filled above
        records = self.records(rows)
        rel = [None] * rows.size if relevance is None else relevance.tolist()
        return [
            Hit(
                chunk_id=r["chunk_id"],
                doc_id=r["doc_id"],
                ord=r["ord"],
                start=r["start"],
                end=r["end"],
                text=r["text"],
                score=float(s),
                metadata=metadata_of(r),
                relevance=rv,
            )
            for r, s, rv in zip(records, scores.tolist(), rel, strict=True)
        ]

    def hits_matrix(
        self, rows: np.ndarray, scores: np.ndarray, relevance: np.ndarray | None = None
    ) -> list[Hits]:
        """:meth:`hits` of every row of a ``(m, k)`` search result, from one read of the table."""
        m, kk = rows.shape
        if kk == 0:
            return [Hits() for _ in range(m)]
        if m == 1 and len(self.segments) == 1:  # one question (the question path)
            return [self._hits_one(rows[0], scores[0], None if relevance is None else relevance[0])]
        valid = rows >= 0
        counts = valid.sum(axis=1)
        rows_v, scores_v = rows[valid], scores[valid]
        rel_v = None if relevance is None else relevance[valid]
        flat = self.hits(rows_v, scores_v, rel_v)
        out, start = [], 0
        for c in counts.tolist():
            end = start + c
            out.append(
                Hits(
                    flat[start:end],
                    rows=rows_v[start:end],
                    scores=scores_v[start:end],
                    relevance=None if rel_v is None else rel_v[start:end],
                )  # fmt: skip
            )
            start = end
        return out

    def _hits_one(self, rows: np.ndarray, scores: np.ndarray, relevance: np.ndarray | None) -> Hits:
        """:meth:`hits_matrix` of one question of a one-segment store (no flattening)."""
        row_list = rows.tolist()
        if min(row_list) < 0:  # padding: only the rows of hits
            keep = rows >= 0
            rows, scores = rows[keep], scores[keep]
            relevance = None if relevance is None else relevance[keep]
            row_list = rows.tolist()
        seg = self.segments[0]
        found = seg.reader.hits(
            row_list, scores.tolist(),
            [None] * rows.size if relevance is None else relevance.tolist(),
        )  # fmt: skip
        rows = rows.astype(np.int64)  # copies: the hits' arrays are theirs alone, as before
        rel = (
            np.full(rows.size, np.nan, np.float32)
            if relevance is None
            else relevance.astype(np.float32)
        )  # fmt: skip
        return Hits._of(found, seg.chunk_ids[rows], rows, scores.astype(np.float32), rel)

    def hit_table(self, rows: np.ndarray, scores: np.ndarray) -> pa.Table:
        """A ``(m, k)`` search result as one table row per (question, hit) (:data:`HIT_TABLE`)."""
        m, kk = rows.shape
        valid = rows >= 0
        if not valid.any():
            return HIT_TABLE.empty_table()
        q_index = np.repeat(np.arange(m, dtype=np.int32), kk).reshape(m, kk)[valid]
        rank = np.tile(np.arange(1, kk + 1, dtype=np.int32), m).reshape(m, kk)[valid]
        found = self.rows(rows[valid], ["chunk_id", "doc_id", "text"])
        return pa.table(
            [
                pa.array(q_index),
                pa.array(rank),
                found.column("chunk_id"),
                found.column("doc_id").cast(pa.string()),
                pa.array(scores[valid].astype(np.float32)),
                found.column("text"),
            ],
            schema=HIT_TABLE,
        )

    def schema_table(self, columns: Sequence[str]) -> pa.Table:
        """An empty table with the given columns."""
        return pa.Table.from_batches([], schema=pa.schema([self.schema.field(c) for c in columns]))

    def alive_masks(self) -> list[np.ndarray | None]:
        """Per segment: the alive mask, or ``None`` when no row is deleted."""
        return [s.alive for s in self.segments]

    # -- documents -------------------------------------------------------------
    def _index_segment(self, s: int, base: int, index: dict[str, _DocSpan]) -> None:
        seg = self.segments[s]
        if len(seg) == 0:
            return
        col = seg.batch.column("doc_id")
        codes = col.indices.to_numpy(zero_copy_only=False)
        names = col.dictionary.to_pylist()
        starts = instance_starts(seg.batch)
        ends = np.append(starts[1:], codes.size)
        alive = seg.alive
        for lo, hi, code in zip(
            starts.tolist(), ends.tolist(), codes[starts].tolist(), strict=True
        ):
            if alive is not None and not alive[lo]:
                continue  # a deleted document (possibly re-added later)
            index[names[code]] = _DocSpan(base + lo, hi - lo)

    def doc_index(self) -> dict[str, _DocSpan]:
        """Live document id -> span of its chunks' global rows (built on first use)."""
        if self._doc_index is None:
            index: dict[str, _DocSpan] = {}
            for s in range(len(self.segments)):
                self._index_segment(s, int(self._bases[s]), index)
            self._doc_index = index
        return self._doc_index

    @property
    def n_docs(self) -> int:
        """Live documents."""
        return len(self.doc_index())

    def delete_docs(self, doc_ids: Sequence[str]) -> int:
        """Tombstone every chunk of the given (live) documents; return chunks deleted."""
        index = self.doc_index()
        spans = [index[d] for d in doc_ids]
        rows = (
            np.concatenate([np.arange(sp.start, sp.start + sp.count) for sp in spans])
            if spans
            else np.zeros(0, dtype=np.int64)
        )
        killed = self.kill_rows(rows)
        for d in doc_ids:
            index.pop(d, None)
        return killed

    def kill_rows(self, rows: np.ndarray) -> int:
        """Tombstone global rows; return how many were alive."""
        if rows.size == 0:
            return 0
        seg, local = self.locate(rows)
        killed = 0
        for s in np.unique(seg):
            killed += self.segments[int(s)].kill(local[seg == s])
        self._alive = _UNSET
        return killed

    def kill_chunk_ids(self, chunk_ids: np.ndarray) -> int:
        """Tombstone chunks by id (ids not in the store are ignored)."""
        killed = 0
        for seg in self.segments:
            if len(seg) == 0 or chunk_ids.size == 0:
                continue
            pos = np.searchsorted(seg.chunk_ids, chunk_ids)
            inside = pos < len(seg)
            pos = pos[inside]
            found = pos[seg.chunk_ids[pos] == chunk_ids[inside]]
            killed += seg.kill(found)
        self._doc_index = None
        self._alive = _UNSET
        return killed

    def dead_chunk_ids(self) -> np.ndarray:
        """Ids of tombstoned chunks, ascending."""
        parts = [s.chunk_ids[~s.alive] for s in self.segments if s.alive is not None]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    # -- compaction ------------------------------------------------------------
    def compacted(self) -> ChunkStore:
        """A new store without deleted rows (copies the live rows of touched segments)."""
        batches = []
        for seg in self.segments:
            if seg.alive is None:
                batches.append(seg.batch)
            elif seg.n_dead < len(seg):
                batches.append(seg.batch.filter(pa.array(seg.alive)))
        return ChunkStore(self.dim, [b for b in batches if b.num_rows], self.next_chunk_id)

    # -- persistence -----------------------------------------------------------
    def write(self, directory: Path) -> dict[str, dict[str, Any]]:
        """Write ``chunks.arrow`` and ``tombstones.arrow`` into ``directory``; fsync both.

        Returns
        -------
        dict
            File name -> ``{"bytes": size, "sha256": hex}``.
        """
        batches = [s.batch for s in self.segments if len(s)]
        table = pa.Table.from_batches(batches, schema=self.schema).unify_dictionaries()
        dead = self.dead_chunk_ids()
        tomb = pa.table({"chunk_id": pa.array(dead, type=pa.int64())})
        out = {}
        for name, schema, parts in (
            (CHUNKS_FILE, self.schema, table.to_batches()),
            (TOMBSTONES_FILE, tomb.schema, tomb.to_batches()),
        ):
            out[name] = write_arrow(directory / name, schema, parts, what=name, atomic=False)
        return out

    @classmethod
    def read(
        cls,
        directory: Path,
        *,
        dim: int,
        next_chunk_id: int,
        files: Mapping[str, Mapping[str, Any]],
        verify: bool = False,
    ) -> ChunkStore:
        """Memory-map a store written by :meth:`write`.

        Parameters
        ----------
        directory : Path
            The snapshot directory.
        dim : int
            Expected vector columns.
        next_chunk_id : int
            Id counter saved in the manifest.
        files : dict
            The manifest's record of the files (sizes and checksums).
        verify : bool, default False
            Also check SHA-256 checksums, full Arrow validation and that every
            vector is finite (reads every byte; slow for large stores).

        Returns
        -------
        ChunkStore
            The store; vectors stay on disk, mapped.
        """
        for name in (CHUNKS_FILE, TOMBSTONES_FILE):
            path = directory / name
            info = files.get(name)
            if info is None:
                raise StoreCorruptedError(f"{path}: not recorded in the manifest")
            check_recorded(path, info, verify)
        batches = _read_ipc(
            directory / CHUNKS_FILE,
            chunk_schema(dim),
            verify,
            legacy=chunk_schema(dim, legacy=True),
        )
        if batches and batches[0].schema.names[-1] != "section":
            batches = [_with_section(b) for b in batches]
        store = cls(dim, [b for b in batches if b.num_rows], next_chunk_id)
        prev = -1
        for seg in store.segments:
            ids = seg.chunk_ids
            if ids.size and (ids[0] <= prev or (ids.size > 1 and np.any(np.diff(ids) <= 0))):
                raise StoreCorruptedError(
                    f"{directory / CHUNKS_FILE}: chunk ids are not strictly increasing"
                )
            if ids.size:
                prev = int(ids[-1])
            if verify and not np.isfinite(seg.vectors).all():
                raise StoreCorruptedError(f"{directory / CHUNKS_FILE}: non-finite vector values")
        if prev >= next_chunk_id:
            raise StoreCorruptedError(
                f"{directory / CHUNKS_FILE}: chunk id {prev} is not below the manifest's "
                f"next_chunk_id {next_chunk_id}"
            )
        tomb_schema = pa.schema([pa.field("chunk_id", pa.int64())])
        tomb = _read_ipc(directory / TOMBSTONES_FILE, tomb_schema, verify)
        dead = [b.column(0).to_numpy(zero_copy_only=False) for b in tomb]
        if dead:
            store.kill_chunk_ids(np.sort(np.concatenate(dead)))
        return store


_ARROW_MAGIC = b"ARROW1"


def _read_ipc(
    path: Path, schema: pa.Schema, verify: bool, legacy: pa.Schema | None = None
) -> list[pa.RecordBatch]:
    with arrow_read_errors(path, "cannot be read as an Arrow IPC file"):
        with open(path, "rb") as fh:
            head = fh.read(len(_ARROW_MAGIC))
        if head != _ARROW_MAGIC:
            raise StoreCorruptedError(f"{path}: does not start with the Arrow file magic: corrupt")
        source = pa.memory_map(str(path), "r")
        reader = pa.ipc.open_file(source)
        if not reader.schema.equals(schema) and not (
            legacy is not None and reader.schema.equals(legacy)
        ):
            raise StoreCorruptedError(
                f"{path}: unexpected schema\n{reader.schema}\nexpected\n{schema}"
            )
        batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        for batch in batches:
            batch.validate(full=verify)
    return batches
