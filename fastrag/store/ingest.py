"""Ingestion: validated documents to chunk segments of the store.

:func:`chunk_batches` validates and chunks documents in batches (a stream
is never held whole); :func:`assemble` embeds the chunks of the pending
batches into one matrix (through an ``embed`` callback: the store knows no
embedder) and builds one segment; :func:`keyword_texts` gives the texts the
keyword indexes take from a segment: its chunks, and its documents (the
chunk windows joined back, overlaps removed).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._native.structure import join_chunks
from ..text.chunking import Chunker, Chunks
from ..text.utf8 import utf8_buffers
from .chunks import build_batch, instance_starts
from .documents import DocBatch, iter_batches

__all__ = ["BuildProgress", "Pending", "assemble", "chunk_batches", "keyword_texts"]


@dataclass(frozen=True, slots=True)
class BuildProgress:
    """What a long build has done so far (passed to ``progress=`` callbacks).

    Attributes
    ----------
    stage : str
        ``"chunk"`` (after each batch), ``"index"`` or ``"done"``.
    documents, chunks, text_bytes : int
        Documents, chunks and UTF-8 bytes of chunk text so far.
    seconds : float
        Since the build started.
    """

    stage: str
    documents: int
    chunks: int
    text_bytes: int
    seconds: float


@dataclass(slots=True)
class Pending:
    """One validated batch of documents and its chunks, waiting to be embedded."""

    docs: DocBatch
    chunks: Chunks | None


def chunk_batches(
    docs: Iterable[Any],
    chunker: Chunker,
    *,
    threads: int | None = None,
    progress: Callable[[BuildProgress], None] | None = None,
    seen: Callable[[DocBatch], None] | None = None,
) -> Iterator[Pending]:
    """Validate and chunk documents, batch by batch.

    Parameters
    ----------
    docs : iterable
        Documents (see :func:`~fastrag.store.documents.iter_batches`).
    chunker : Chunker
        How to cut them.
    threads : int, optional
        Chunking threads.
    progress : callable, optional
        Called with a :class:`BuildProgress` after each batch.
    seen : callable, optional
        Called with each validated batch before it is chunked (for checks
        such as ids already stored).

    Yields
    ------
    Pending
        A batch and its chunks; the batch's raw text is released once chunked.
    """
    t0 = time.perf_counter()
    n_docs = n_chunks = n_bytes = 0
    for batch in iter_batches(docs):
        if seen is not None:
            seen(batch)
        chunks = chunker.chunk(batch.texts, threads=threads, structured=batch.structured)
        batch.texts.clear()  # the strings (and the UTF-8 copies CPython caches) can go
        n_docs += len(batch)
        n_chunks += len(chunks)
        n_bytes += int(chunks.text_offsets[-1] - chunks.text_offsets[0])
        if progress is not None:
            progress(BuildProgress("chunk", n_docs, n_chunks, n_bytes, time.perf_counter() - t0))
        yield Pending(batch, chunks)


def assemble(
    pending: list[Pending],
    embed: Callable[[Chunks, np.ndarray | None], np.ndarray],
    *,
    dim: int | None,
    first_chunk_id: int,
) -> pa.RecordBatch | None:
    """Embed pending chunk batches into one matrix and build one segment.

    Parameters
    ----------
    pending : list of Pending
        Chunked batches (consumed: their chunk buffers are released as
        they are copied, so the text is never held twice in full).
    embed : callable
        ``embed(chunks, out)``: the vectors of ``chunks``; ``out`` is the
        ``(len(chunks), dim)`` slice of the segment's matrix to fill when
        the dimension is known (``dim`` given), else ``None`` (an HTTP
        embedder learns its size from its first answer).
    dim : int or None
        Vector dimension, when known before embedding.
    first_chunk_id : int
        Id of the first chunk.

    Returns
    -------
    pyarrow.RecordBatch or None
        The segment (``None`` when there are no chunks).
    """
    n = sum(len(p.chunks) for p in pending if p.chunks is not None)
    if n == 0:
        return None
    vectors = np.empty((n, dim), dtype=np.float32) if dim is not None else None
    row = 0
    for p in pending:
        c = p.chunks
        if c is None or len(c) == 0:
            continue
        if vectors is not None:
            out = vectors[row : row + len(c)]
            got = embed(c, out)
            if got is not out:
                out[...] = got
        else:
            got = embed(c, None)
            vectors = np.empty((n, got.shape[1]), dtype=np.float32)
            vectors[row : row + len(c)] = got
        row += len(c)
    assert vectors is not None
    nbytes = sum(int(p.chunks.text_offsets[-1]) for p in pending if p.chunks is not None)
    data = np.empty(nbytes, dtype=np.uint8)
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    chunk_doc = np.empty(n, dtype=np.int64)
    chunk_ord = np.empty(n, dtype=np.int32)
    chunk_start = np.empty(n, dtype=np.int64)
    chunk_end = np.empty(n, dtype=np.int64)
    parts = [p.chunks for p in pending if p.chunks is not None and len(p.chunks)]
    sections = [c.section_array() for c in parts]
    section = None
    if any(a is not None for a in sections):  # windows' batches have none: all null
        filled = [
            pa.DictionaryArray.from_arrays(pa.nulls(len(c), pa.int32()), pa.array([], pa.string()))
            if a is None
            else a
            for a, c in zip(sections, parts, strict=True)
        ]
        section = pa.chunked_array(filled).unify_dictionaries().combine_chunks()
    table = np.full(n, -1, dtype=np.int32)
    table_row = np.full(n, -1, dtype=np.int32)
    row = byte = docs = 0
    for p in pending:
        c = p.chunks
        if c is not None:
            k, b = len(c), int(c.text_offsets[-1])
            data[byte : byte + b] = c.text_data[:b]
            offsets[row + 1 : row + k + 1] = c.text_offsets[1:] + byte
            chunk_doc[row : row + k] = c.chunk_doc + docs
            chunk_ord[row : row + k] = c.chunk_ord
            chunk_start[row : row + k] = c.chunk_start
            chunk_end[row : row + k] = c.chunk_end
            if c.chunk_table is not None and c.chunk_row is not None:
                table[row : row + k] = c.chunk_table
                table_row[row : row + k] = c.chunk_row
            p.chunks = None  # release this batch's buffers now
            row, byte = row + k, byte + b
        docs += len(p.docs)
    text = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))

    def docs_field(name: str) -> list[Any]:
        return [v for p in pending for v in getattr(p.docs, name)]

    doc_sections = docs_field("sections")
    if any(s is not None for s in doc_sections):
        section = _doc_sections(section, doc_sections, chunk_doc)

    return build_batch(
        dim=vectors.shape[1],
        first_chunk_id=first_chunk_id,
        doc_ids=docs_field("ids"),
        chunk_doc=chunk_doc,
        chunk_ord=chunk_ord,
        chunk_start=chunk_start,
        chunk_end=chunk_end,
        text=text,
        vectors=vectors,
        titles=docs_field("titles"),
        sources=docs_field("sources"),
        updated_at=docs_field("updated_at"),
        acl=docs_field("acl"),
        metadata=docs_field("metadata"),
        section=section,
        table=table,
        table_row=table_row,
    )


def keyword_texts(
    batch: pa.RecordBatch, overlap: int | None = None
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The texts the keyword indexes take from a segment, as UTF-8 buffers.

    Parameters
    ----------
    batch : pyarrow.RecordBatch
        A segment of the store.
    overlap : int, optional
        Unused: documents are rebuilt from the chunks' character offsets
        (windows and structure-aware chunks alike; see
        :func:`fastrag._native.structure.join_chunks`).

    Returns
    -------
    tuple
        ``(data, offsets)`` of the chunk texts (row by row, zero-copy) and
        of the document texts (one per run of a document's chunks).
    """
    data, offsets = utf8_buffers(batch.column("text"))
    if batch.num_rows == 0:
        return (data, offsets), (np.zeros(0, np.uint8), np.zeros(1, np.int64))
    doc_starts = np.append(instance_starts(batch), batch.num_rows).astype(np.int64)
    starts = batch.column("start").to_numpy(zero_copy_only=False)
    ends = batch.column("end").to_numpy(zero_copy_only=False)
    return (data, offsets), join_chunks(data, offsets, starts, ends, doc_starts)


def _doc_sections(
    section: pa.DictionaryArray | None, doc_sections: list[str | None], chunk_doc: np.ndarray
) -> pa.DictionaryArray:
    """Chunk sections with each document's own ``section`` where a chunk has no heading path.

    A document that names its section in its metadata (an OCR figure names
    its caption, a user their own field) is then filtered by it like a
    heading: ``where={"section": ...}`` reads this column.
    """
    per_chunk = pa.array(doc_sections, pa.string()).take(pa.array(chunk_doc))
    if section is not None:
        per_chunk = pc.coalesce(section.cast(pa.string()), per_chunk)
    return per_chunk.dictionary_encode()
