r"""Cut documents into chunks: overlapping character windows, or structure-aware chunks.

Every document is first normalised exactly like
``re.sub(r"\\s+", " ", text).strip()`` (every run of Unicode white space
becomes one space, and both ends are stripped); then windows of ``window``
characters are cut from it, each starting ``window - overlap`` characters after
the previous one, the last ending at the end of the document. A document of at
most ``window`` characters is one chunk; an empty or all-white-space document
gives none. Offsets count characters (code points) of the normalised text,
never bytes.

The work is done by the parallel Numba kernel
:func:`fastrag._native.chunking.chunk_utf8` over the Arrow ``large_string``
layout; Python strings are encoded once with pyarrow, and the chunk texts come
back as Arrow buffers, so :meth:`Chunks.text_array` is zero-copy.

``mode="structure"`` reads the line structure of the raw text first (Markdown
headings, paragraphs, list items, table rows, fenced blocks, and the records
``Header: value | Header: value`` the PDF, HTML and Word loaders write for
table rows; see :mod:`fastrag._native.structure`) and packs whole
consecutive units into chunks of at most ``window`` characters, cutting only
a unit longer than the window with the sliding windows. A record is always a
chunk of its own (cut at its cells when longer than the window) and carries
its table and row numbers (:attr:`Chunks.chunk_table`, :attr:`Chunks.chunk_row`).
Offsets stay exact (``normalised[start:end]`` is the chunk) and every chunk
carries its heading path (:meth:`Chunks.section_array`).

``mode="auto"`` (the default of :meth:`fastrag.KnowledgeBase.build`) chooses
per document: structure for the documents flagged ``structured`` (those
whose ``format`` a structured loader set: :data:`STRUCTURED_FORMATS`), the
windows, exactly as ``mode="windows"`` cuts them, for every other one.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import _native  # noqa: F401  (the package must import before its submodules)
from .._native import chunking as _kernels
from .._native import structure as _structure
from .._threads import threads as _threads
from ..errors import ConfigError, DocumentError
from .utf8 import encode_utf8, utf8_buffers

__all__ = ["CHUNKING_MODES", "STRUCTURED_FORMATS", "Chunker", "Chunks", "is_structured"]

CHUNKING_MODES = ("auto", "windows", "structure")
"""What ``Chunker(mode=...)`` accepts."""

STRUCTURED_FORMATS = frozenset(("pdf", "html", "docx", "markdown"))
"""Document ``format`` values (set by the loaders) that ``mode="auto"`` cuts by structure."""


def is_structured(fmt: Any) -> bool:
    """Whether a document's ``format`` metadata value asks ``mode="auto"`` for structure."""
    return isinstance(fmt, str) and fmt in STRUCTURED_FORMATS


TextsLike: TypeAlias = Sequence[str] | pa.Array | pa.ChunkedArray
"""What :meth:`Chunker.chunk` accepts."""


@dataclass(frozen=True, eq=False)
class Chunks:
    """The chunks of a batch of documents, as contiguous arrays.

    Row ``i`` is one chunk. The arrays are read-only; the chunk texts are in
    the Arrow ``large_string`` layout so :meth:`text_array` needs no copy.

    Attributes
    ----------
    chunk_doc : numpy.ndarray
        int64, index of the source document in the batch (non-decreasing).
    chunk_ord : numpy.ndarray
        int32, position of the chunk within its document: 0, 1, 2, ...
    chunk_start, chunk_end : numpy.ndarray
        int64, character offsets of the chunk into its normalised document.
    text_offsets : numpy.ndarray
        int64, ``len(self) + 1`` offsets into ``text_data``, starting at 0.
    text_data : numpy.ndarray
        uint8, the UTF-8 bytes of every chunk, one after the other.
    n_docs : int
        Number of documents in the batch (including those without chunks).
    chunk_section : numpy.ndarray or None
        int64, index of every chunk's heading path in :attr:`sections`, or
        -1 before a document's first heading; None for windows.
    sections : pyarrow.LargeStringArray or None
        Heading paths (``"Guide > Install"``); None for windows.
    chunk_table, chunk_row : numpy.ndarray or None
        int32, the table (in its document) and row (in its table) of a
        chunk cut from a table record, both from 1, else -1; None for
        windows.
    """

    chunk_doc: np.ndarray
    chunk_ord: np.ndarray
    chunk_start: np.ndarray
    chunk_end: np.ndarray
    text_offsets: np.ndarray
    text_data: np.ndarray
    n_docs: int
    chunk_section: np.ndarray | None = None
    sections: pa.LargeStringArray | None = None
    chunk_table: np.ndarray | None = None
    chunk_row: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.chunk_doc.shape[0])

    def __repr__(self) -> str:
        return (
            f"Chunks({len(self)} chunks of {self.n_docs} documents, "
            f"{int(self.text_offsets[-1])} bytes of text)"
        )

    def text_array(self) -> pa.LargeStringArray:
        """Return the chunk texts as a pyarrow ``large_string`` array, without a copy.

        Returns
        -------
        pyarrow.LargeStringArray
            ``len(self)`` strings backed by :attr:`text_offsets` and :attr:`text_data`.
        """
        return pa.LargeStringArray.from_buffers(
            len(self), pa.py_buffer(self.text_offsets), pa.py_buffer(self.text_data)
        )

    def texts(self) -> list[str]:
        """Return the chunk texts as Python strings.

        Returns
        -------
        list of str
            One string per chunk, in order.
        """
        return self.text_array().to_pylist()

    def section_array(self) -> pa.DictionaryArray | None:
        """Return every chunk's heading path, dictionary-encoded (null without one).

        Returns
        -------
        pyarrow.DictionaryArray or None
            ``dictionary<int32, string>`` of ``len(self)`` entries, each path
            once in the dictionary; None when the chunks are windows.
        """
        if self.chunk_section is None or self.sections is None:
            return None
        unique = pc.unique(self.sections)
        remap = pc.index_in(self.sections, value_set=unique).to_numpy(zero_copy_only=False)
        codes = self.chunk_section
        indices = np.where(codes >= 0, remap[np.maximum(codes, 0)] if remap.size else 0, 0)
        missing = codes < 0
        return pa.DictionaryArray.from_arrays(
            pa.array(indices.astype(np.int32), mask=missing if missing.any() else None),
            unique.cast(pa.string()),
        )


@dataclass(frozen=True, slots=True)
class Chunker:
    r"""Fixed-size, overlapping character windows over normalised text.

    Parameters
    ----------
    window : int, default 200
        Chunk length in characters (the last chunk of a document may be
        shorter); at least 1.
    overlap : int, default 40
        Characters shared by consecutive chunks of a document;
        ``0 <= overlap < window``. In structure mode, the overlap of the
        windows that cut a unit longer than ``window``.
    mode : {"windows", "structure", "auto"}, default "windows"
        Fixed windows, or whole structural units (headings, paragraphs, list
        items, table rows) packed up to ``window`` characters, or per
        document: structure for those flagged ``structured`` in
        :meth:`chunk`, windows for the others.

    Raises
    ------
    ConfigError
        If ``window`` or ``overlap`` is not an int (``bool`` is refused),
        ``window > overlap >= 0`` does not hold or ``mode`` is unknown.

    Examples
    --------
    >>> Chunker(window=4, overlap=1).split("one  two\\n three")
    ['one ', ' two', 'o th', 'hree']
    """

    window: int = 200
    overlap: int = 40
    mode: str = "windows"

    def __post_init__(self) -> None:
        if self.mode not in CHUNKING_MODES:
            raise ConfigError(
                f"chunking must be one of {', '.join(map(repr, CHUNKING_MODES))}, got {self.mode!r}"
            )
        window, overlap = self.window, self.overlap
        for name, value in (("window", window), ("overlap", overlap)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ConfigError(f"{name} must be an int, got {value!r}")
        # Plain ints from here on (numpy integers are accepted and converted).
        object.__setattr__(self, "window", int(window))
        object.__setattr__(self, "overlap", int(overlap))
        if self.overlap < 0:
            raise ConfigError(f"overlap must be >= 0, got overlap={self.overlap}")
        if self.window <= self.overlap:
            raise ConfigError(
                "window must be greater than overlap, got "
                f"window={self.window}, overlap={self.overlap}"
            )

    def chunk(
        self, texts: TextsLike, *, threads: int | None = None, structured: Any = None
    ) -> Chunks:
        """Chunk a batch of documents.

        Parameters
        ----------
        texts : sequence of str, or pyarrow string / large_string array
            The documents. A pyarrow array (or chunked array) is used without
            copying its text, and may be a slice.
        threads : int, optional
            Numba threads for this call; default: the current setting.
        structured : sequence of bool, optional
            ``mode="auto"`` only: which documents are cut by structure (the
            others by windows); default none. Ignored by the other modes.

        Returns
        -------
        Chunks
            Every chunk of every document, in document order.

        Raises
        ------
        DocumentError
            If a text is null or not a ``str`` (the message names its index),
            or cannot be encoded as UTF-8 (a lone surrogate).
        ConfigError
            If ``threads`` is invalid.
        """
        data, offsets = _as_utf8(texts)
        n_docs = int(offsets.size - 1)
        mode = self.mode
        if mode == "auto":
            flags = np.zeros(n_docs, dtype=bool)
            if structured is not None:
                flags = np.asarray(structured, dtype=bool).reshape(-1)
                if flags.size != n_docs:
                    raise ConfigError(f"structured has {flags.size} flags for {n_docs} documents")
            if flags.all() and n_docs:
                mode = "structure"
            elif not flags.any():
                mode = "windows"
            else:
                return _mixed(self, data, offsets, flags, threads)
        if mode == "structure":
            return self._structure(data, offsets, threads)
        return self._windows(data, offsets, threads)

    def _structure(self, data: np.ndarray, offsets: np.ndarray, threads: int | None) -> Chunks:
        n_docs = int(offsets.size - 1)
        with _threads(threads, work=int(offsets[-1] - offsets[0]) * 16):
            out = _structure.structure_utf8(data, offsets, self.window, self.overlap)
        for array in out:
            array.flags.writeable = False
        doc, ord_, start, end, text_offsets, text_data, section, sec_offsets, sec_data = out[:9]
        sections = pa.LargeStringArray.from_buffers(
            sec_offsets.size - 1, pa.py_buffer(sec_offsets), pa.py_buffer(sec_data)
        )
        return Chunks(
            doc, ord_, start, end, text_offsets, text_data, n_docs, section, sections,
            out[9], out[10],
        )  # fmt: skip

    def _windows(self, data: np.ndarray, offsets: np.ndarray, threads: int | None) -> Chunks:
        n_docs = int(offsets.size - 1)
        with _threads(threads, work=int(offsets[-1] - offsets[0]) * 4):
            doc, ord_, start, end, text_offsets, text_data = _kernels.chunk_utf8(
                data, offsets, self.window, self.overlap
            )
        for array in (doc, ord_, start, end, text_offsets, text_data):
            array.flags.writeable = False
        return Chunks(doc, ord_, start, end, text_offsets, text_data, n_docs)

    def split(self, text: str) -> list[str]:
        """Return the chunk texts of one document.

        Parameters
        ----------
        text : str
            The document.

        Returns
        -------
        list of str
            Its chunks, in order (empty for an empty or all-white-space text).
        """
        return self.chunk([text]).texts()

    def config(self) -> dict[str, Any]:
        """Return the chunker as saved in a manifest (``Chunker(**config)`` rebuilds it)."""
        out: dict[str, Any] = {"window": self.window, "overlap": self.overlap}
        if self.mode != "windows":
            out["mode"] = self.mode
        return out


def _subset(
    data: np.ndarray, offsets: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)`` of the documents ``rows`` only (their bytes copied)."""
    base = offsets - offsets[0]
    texts = pa.LargeStringArray.from_buffers(
        int(offsets.size - 1), pa.py_buffer(base), pa.py_buffer(data[int(offsets[0]) :])
    )
    return utf8_buffers(texts.take(pa.array(rows)))


def _mixed(
    chunker: Chunker, data: np.ndarray, offsets: np.ndarray, flags: np.ndarray, threads: int | None
) -> Chunks:
    """``mode="auto"`` on a batch of both kinds: each part cut its way, merged in document order."""
    n_docs = int(offsets.size - 1)
    rows_s = np.flatnonzero(flags)
    rows_w = np.flatnonzero(~flags)
    s_data, s_offsets = _subset(data, offsets, rows_s)
    w_data, w_offsets = _subset(data, offsets, rows_w)
    s = chunker._structure(s_data, s_offsets, threads)
    w = chunker._windows(w_data, w_offsets, threads)
    doc = np.concatenate([rows_s[s.chunk_doc], rows_w[w.chunk_doc]]).astype(np.int64)
    order = np.argsort(doc, kind="stable")  # each part is in order within a document

    def merged(a: np.ndarray | None, b: np.ndarray | None, dtype: Any, fill: int) -> np.ndarray:
        left = np.full(len(s), fill, dtype) if a is None else a
        right = np.full(len(w), fill, dtype) if b is None else b
        out = np.concatenate([left, right]).astype(dtype)[order]
        out.flags.writeable = False
        return out

    text = pa.concat_arrays([s.text_array(), w.text_array()]).take(pa.array(order))
    text_offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[: len(text) + 1].copy()
    body = text.buffers()[2]
    text_data = (
        np.frombuffer(body, dtype=np.uint8)[: int(text_offsets[-1])].copy()
        if body is not None
        else np.zeros(0, dtype=np.uint8)
    )
    for array in (text_offsets, text_data):
        array.flags.writeable = False
    doc = doc[order]
    doc.flags.writeable = False
    return Chunks(
        doc,
        merged(s.chunk_ord, w.chunk_ord, np.int32, 0),
        merged(s.chunk_start, w.chunk_start, np.int64, 0),
        merged(s.chunk_end, w.chunk_end, np.int64, 0),
        text_offsets,
        text_data,
        n_docs,
        merged(s.chunk_section, None, np.int64, -1),
        s.sections,
        merged(s.chunk_table, None, np.int32, -1),
        merged(s.chunk_row, None, np.int32, -1),
    )


def _as_utf8(texts: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(data uint8, offsets int64)`` for ``texts``, validated."""
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            raise DocumentError(f"expected an array of strings, got an array of {texts.type}")
        return utf8_buffers(texts)
    if isinstance(texts, (str, bytes)):
        raise DocumentError(
            f"texts must be a sequence of str, got a single {type(texts).__name__}; "
            "wrap it in a list or use Chunker.split"
        )
    if not isinstance(texts, Sequence):  # an iterator is read once: keep it
        texts = list(texts)
    # pyarrow would accept bytes (and None, as null); only str is a document.
    # One pass in C over the types first; the slow search only on failure.
    if not all(issubclass(kind, str) for kind in set(map(type, texts))):
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise DocumentError(f"text at index {i} is {type(t).__name__}, not str")
    return encode_utf8(texts)
