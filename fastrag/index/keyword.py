"""BM25 lexical search over chunk texts (Lucene's BM25, Okapi ``k1``/``b``).

:class:`BM25Index` keeps term-major postings (term -> rows, term frequencies
and each posting's weight, its share of a score), document lengths and
per-term idf::

    idf(t)      = log(1 + (N - df + 0.5) / (df + 0.5))
    score(q, d) = sum over query tokens t:
                  idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))

which is Lucene's ``BM25Similarity`` (since Lucene 8, without the constant
factor ``k1 + 1`` of the textbook formula: the ranking is the same) and
bm25s ``method="lucene"``; scores match bm25s to float32 precision (weights
are fixed point, within ``2**-26`` of each term's share: see
:mod:`fastrag._native.bm25`). ``N`` counts every row, including rows without
a token; ``dl`` is a row's token count after stop-word removal. A query
token that occurs twice counts twice.

Search prunes: block-max MaxScore skips the postings that cannot change the
top ``k``, with the largest weight of every term and of every block of
:data:`BLOCK_SIZE` postings stored with the index; a query with a term in
at least one row of 32 in the whole index (the Zipfian head: "the", a
product's name in every chunk) is bounded instead by the largest weight of
its terms in every cell of 32 consecutive rows (and where each cell's
postings start), computed with the arrays (build, add, compact; a loaded
index on its first pruned search) and kept beside them. The results (rows and scores) are exactly
those of scoring every posting (``search(..., method="exhaustive")``, the
reference).

Rows are the store's global row numbers ``0..n-1``. :meth:`BM25Index.add`
appends rows; the merged postings and the recomputed statistics (``N``,
``df``, ``avgdl``) make the result identical to a fresh build on all rows
(merging costs one pass over the postings, measured far below a rebuild).
:meth:`BM25Index.compact` drops rows and renumbers the rest.

On disk an index is one Arrow IPC file (``bm25.arrow``): one record batch of
one row whose columns are ``large_list`` arrays (vocabulary hashes, postings,
document lengths, idf), with the parameters and tokenizer settings in the
schema metadata. :meth:`BM25Index.load` memory-maps it and views the arrays
without a copy or a parse.
"""

from __future__ import annotations

import math
import numbers
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import orjson
import pyarrow as pa

from .. import _native  # noqa: F401  (the package must import before its submodules)
from .._fs import arrow_read_errors, write_arrow
from .._native import bm25 as _kernels
from .._native import tokenize as _tokenize_kernels
from .._threads import resolve_threads
from .._threads import threads as _threads
from ..errors import ConfigError, DocumentError, StoreCorruptedError
from ..text.tokenize import TextsLike, Tokenizer, Tokens, as_utf8, check_utf8
from .base import check_k

__all__ = ["BLOCK_SIZE", "BM25_FILE", "BM25Index", "add_with_documents"]

BM25_FILE = "bm25.arrow"
"""File name of a saved index inside a snapshot."""

BLOCK_SIZE = _kernels.BLOCK_SIZE
"""Postings per block maximum (saved in the file; a file of another size is
re-blocked on load)."""

FORMAT = "fastrag-bm25"
FORMAT_VERSION = 2
"""Version 2 stores the postings' fixed-point weights and their per-term and
per-block maxima (for pruning) in place of version 1's float32 impacts;
version 1 files still load (what they lack is computed on load) and the next
save writes version 2."""

_COLUMNS = (
    ("vocab", pa.uint64()),
    ("term_offsets", pa.int64()),
    ("rows", pa.int32()),
    ("tfs", pa.int32()),
    ("weights", pa.int32()),
    ("idf", pa.float32()),
    ("doc_len", pa.int32()),
    ("max_weight", pa.int32()),
    ("block_offsets", pa.int64()),
    ("block_max", pa.int32()),
)
_V1_COLUMNS = (
    ("vocab", pa.uint64()),
    ("term_offsets", pa.int64()),
    ("rows", pa.int32()),
    ("tfs", pa.int32()),
    ("impacts", pa.float32()),
    ("idf", pa.float32()),
    ("doc_len", pa.int32()),
    ("max_impact", pa.float32()),
)


def _schema(columns: Sequence[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema([pa.field(name, pa.large_list(t), nullable=False) for name, t in columns])


_SCHEMA = _schema(_COLUMNS)
_SCHEMAS = {1: _schema(_V1_COLUMNS), FORMAT_VERSION: _SCHEMA}
_MAX_ROWS = 2**31 - 1
_NO_MASK = np.zeros(0, dtype=np.bool_)
_NO_MASK.flags.writeable = False  # the kernels take their inputs read-only (one signature)


def _check_param(name: str, value: object, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not (lo <= v <= hi) or not math.isfinite(v):
        raise ConfigError(f"{name} must be in [{lo}, {hi}], got {value!r}")
    return v


class _Arrays(NamedTuple):
    """Everything a search reads, swapped in as one attribute (columns of the file, in order)."""

    vocab: np.ndarray  # uint64[V], sorted token hashes
    term_offsets: np.ndarray  # int64[V + 1]
    rows: np.ndarray  # int32[nnz]
    tfs: np.ndarray  # int32[nnz]
    weights: np.ndarray  # int32[nnz], ceil(idf * impact * 2**26)
    idf: np.ndarray  # float32[V]
    doc_len: np.ndarray  # int32[n]
    max_weight: np.ndarray  # int32[V], largest weight per term
    block_offsets: np.ndarray  # int64[V + 1], blocks of block_max per term
    block_max: np.ndarray  # int32[n_blocks], largest weight per BLOCK_SIZE postings


class BM25Index:
    """A BM25 index over the rows ``0..n-1`` of a chunk store.

    Build it with :meth:`build` (or :meth:`from_texts`), grow it with
    :meth:`add`, query it with :meth:`search` / :meth:`search_tokens`, shrink
    it with :meth:`compact`, persist it with :meth:`save` / :meth:`load`. The
    arrays are read-only; :meth:`add` swaps in new ones, so a search running
    in another thread sees the old or the new index, whole (concurrent
    :meth:`add` calls run one after the other).

    Parameters
    ----------
    tokenizer : Tokenizer
        How texts (and queries) become tokens.
    k1 : float, default 0.9
        Term-frequency saturation, ``0 <= k1 <= 1000``.
    b : float, default 0.4
        Length normalisation, ``0 <= b <= 1``.

    Notes
    -----
    The constructor makes an empty index (zero rows); use :meth:`build`.
    """

    def __init__(self, tokenizer: Tokenizer | None = None, *, k1: float = 0.9, b: float = 0.4):
        if tokenizer is None:
            tokenizer = Tokenizer()
        if not isinstance(tokenizer, Tokenizer):
            raise ConfigError(f"tokenizer must be a Tokenizer, got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self.k1 = _check_param("k1", k1, 0.0, 1000.0)
        self.b = _check_param("b", b, 0.0, 1.0)
        self._write_lock = threading.Lock()  # one add() at a time; searches never wait
        self._cells_of: tuple[_Arrays, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = None
        self.upgraded = False
        """True when :meth:`load` read an older format (computing what it lacked):
        saving rewrites it in the current one."""
        empty_i64 = np.zeros(1, dtype=np.int64)
        self._set(
            np.zeros(0, np.uint64),
            empty_i64,
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
            np.zeros(0, np.int32),
            weights=np.zeros(0, np.int32),
            idf=np.zeros(0, np.float32),
        )

    # -- state ---------------------------------------------------------------
    def _set(
        self,
        vocab: np.ndarray,
        term_offsets: np.ndarray,
        rows: np.ndarray,
        tfs: np.ndarray,
        doc_len: np.ndarray,
        *,
        weights: np.ndarray | None = None,
        idf: np.ndarray | None = None,
        max_weight: np.ndarray | None = None,
        block_offsets: np.ndarray | None = None,
        block_max: np.ndarray | None = None,
        cells: bool = True,
    ) -> None:
        """Install new arrays (computing idf, weights and their maxima unless given) in one swap.

        With ``cells`` the row cells of the long terms are made here too (a
        pass over their postings, beside the passes that made the arrays), so
        the first search does not pay for them; :meth:`load` leaves them to
        the first search (a load maps the file, it reads no posting).
        """
        n = int(doc_len.size)
        total = int(doc_len.sum(dtype=np.int64))
        avgdl = total / n if n else 0.0
        if weights is None or idf is None:
            df = np.diff(term_offsets).astype(np.float64)
            idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32)
            impacts = _kernels.impacts(rows, tfs, doc_len, self.k1, self.b, avgdl or 1.0)
            weights = _kernels.weights(term_offsets, impacts, idf)
            del impacts
            max_weight = block_offsets = block_max = None
        if max_weight is None:
            max_weight = _kernels.term_maxima(term_offsets, weights)
        if block_offsets is None or block_max is None:
            block_offsets, block_max = _kernels.block_maxima(term_offsets, weights, BLOCK_SIZE)
        state = _Arrays(
            vocab, term_offsets, rows, tfs, weights, idf, doc_len, max_weight, block_offsets,
            block_max,
        )  # fmt: skip
        for a in state:
            a.flags.writeable = False  # shared by every reader; never changed in place
        # one attribute holds everything a search reads: swapped atomically
        self._state = state
        self._avgdl = avgdl
        if cells:
            self._cells(state)

    @property
    def n_rows(self) -> int:
        """Number of rows (documents) in the index."""
        return int(self._state.doc_len.size)

    def __len__(self) -> int:
        return self.n_rows

    @property
    def n_terms(self) -> int:
        """Number of distinct terms."""
        return int(self._state.vocab.size)

    @property
    def n_postings(self) -> int:
        """Number of (term, row) pairs."""
        return int(self._state.rows.size)

    @property
    def avgdl(self) -> float:
        """Mean document length in tokens (0 for an empty index)."""
        return float(self._avgdl)

    @property
    def doc_len(self) -> np.ndarray:
        """Tokens per row (int32, read-only)."""
        return self._state.doc_len

    def __repr__(self) -> str:
        return (
            f"BM25Index({self.n_rows} rows, {self.n_terms} terms, {self.n_postings} postings, "
            f"k1={self.k1}, b={self.b}, {self.tokenizer!r})"
        )

    def config(self) -> dict[str, Any]:
        """Return the index parameters and tokenizer settings (JSON-ready, for the manifest).

        Returns
        -------
        dict
            ``{"k1": ..., "b": ..., "tokenizer": {...}}``.
        """
        return {"k1": self.k1, "b": self.b, "tokenizer": self.tokenizer.config()}

    # -- building ------------------------------------------------------------
    @classmethod
    def build(
        cls,
        data: np.ndarray,
        offsets: np.ndarray,
        tokenizer: Tokenizer | None = None,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        threads: int | None = None,
    ) -> BM25Index:
        """Build an index over texts in the Arrow layout (row ``i`` is text ``i``).

        Parameters
        ----------
        data : numpy.ndarray
            uint8, UTF-8 bytes of the texts (read-only is fine).
        offsets : numpy.ndarray
            int64, ``n + 1`` non-decreasing offsets into ``data``.
        tokenizer : Tokenizer, optional
            Default: ``Tokenizer()``.
        k1, b : float
            BM25 parameters.
        threads : int, optional
            Numba threads for this call.

        Returns
        -------
        BM25Index
            The index.
        """
        index = cls(tokenizer, k1=k1, b=b)
        data, offsets = check_utf8(data, offsets)
        with _threads(threads):
            tokens = index.tokenizer.tokenize_utf8(data, offsets)
            index._add_tokens(tokens)
        return index

    @classmethod
    def from_texts(
        cls,
        texts: TextsLike,
        tokenizer: Tokenizer | None = None,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        threads: int | None = None,
    ) -> BM25Index:
        """Build an index over a list of strings (or a pyarrow string array).

        Parameters
        ----------
        texts : sequence of str, or pyarrow string array
            Row ``i`` is ``texts[i]``.
        tokenizer : Tokenizer, optional
            Default: ``Tokenizer()``.
        k1, b : float
            BM25 parameters.
        threads : int, optional
            Numba threads for this call.

        Returns
        -------
        BM25Index
            The index.
        """
        data, offsets = as_utf8(texts)
        return cls.build(data, offsets, tokenizer, k1=k1, b=b, threads=threads)

    @classmethod
    def from_tokens(
        cls,
        tokens: Tokens,
        tokenizer: Tokenizer | None = None,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        threads: int | None = None,
    ) -> BM25Index:
        """Build an index from already tokenised rows.

        Parameters
        ----------
        tokens : Tokens
            Token hashes per row (from ``tokenizer.tokenize``).
        tokenizer : Tokenizer, optional
            The tokenizer that made them (used for queries).
        k1, b : float
            BM25 parameters.
        threads : int, optional
            Numba threads for this call.

        Returns
        -------
        BM25Index
            The index.
        """
        index = cls(tokenizer, k1=k1, b=b)
        with _threads(threads):
            index._add_tokens(_check_tokens(tokens))
        return index

    def add(self, data: np.ndarray, offsets: np.ndarray, *, threads: int | None = None) -> None:
        """Append rows ``n .. n + a - 1`` (texts in the Arrow layout), in place.

        Statistics stay global: the result equals a fresh build on all rows.

        Parameters
        ----------
        data : numpy.ndarray
            uint8, UTF-8 bytes of the new texts.
        offsets : numpy.ndarray
            int64, ``a + 1`` offsets into ``data``.
        threads : int, optional
            Numba threads for this call.
        """
        data, offsets = check_utf8(data, offsets)
        with _threads(threads):
            self._add_tokens(self.tokenizer.tokenize_utf8(data, offsets))

    def add_texts(self, texts: TextsLike, *, threads: int | None = None) -> None:
        """Append rows from strings (see :meth:`add`).

        Parameters
        ----------
        texts : sequence of str, or pyarrow string array
            The new rows' texts.
        threads : int, optional
            Numba threads for this call.
        """
        data, offsets = as_utf8(texts)
        self.add(data, offsets, threads=threads)

    def add_tokens(self, tokens: Tokens, *, threads: int | None = None) -> None:
        """Append already tokenised rows (see :meth:`add`).

        Parameters
        ----------
        tokens : Tokens
            Token hashes of the new rows.
        threads : int, optional
            Numba threads for this call.
        """
        with _threads(threads):
            self._add_tokens(_check_tokens(tokens))

    def _add_tokens(self, tokens: Tokens) -> None:
        with self._write_lock:
            self._add_tokens_locked(tokens)

    def _add_tokens_locked(self, tokens: Tokens) -> None:
        vocab, term_offsets, rows, tfs, *_ = self._state
        doc_len = self._state.doc_len
        n_old = doc_len.size
        n_new = len(tokens)
        if n_old + n_new > _MAX_ROWS:
            raise ConfigError(f"a BM25 index holds at most {_MAX_ROWS} rows")
        new_len = tokens.lengths()
        if new_len.size and new_len.max() > np.iinfo(np.int32).max:
            raise DocumentError("a text has more than 2**31 tokens")
        # every pass parallel, no serial pass over the pairs; rows of an earlier
        # empty-vocabulary index have no postings
        built = _kernels.build_postings(tokens.hashes, tokens.offsets, n_old)
        if n_old == 0 or vocab.size == 0:
            new_vocab, term_offsets, rows, tfs = built
        else:
            new_vocab, term_offsets, rows, tfs = _kernels.merge_indexes(
                vocab, term_offsets, rows, tfs, *built
            )
            del built
        doc_len = np.concatenate([doc_len, new_len.astype(np.int32)])
        self._set(new_vocab, term_offsets, rows, tfs, doc_len)

    def compact(self, keep_mask: np.ndarray, *, threads: int | None = None) -> BM25Index:
        """Return a new index over the kept rows only, renumbered in order.

        Parameters
        ----------
        keep_mask : numpy.ndarray
            bool, shape ``(n,)``: True for every row to keep.
        threads : int, optional
            Numba threads for this call.

        Returns
        -------
        BM25Index
            Equal to a fresh build on the kept rows (this index is unchanged).
        """
        keep = self._check_mask(keep_mask, "keep_mask")
        vocab, term_offsets, rows, tfs, *_ = self._state
        doc_len = self._state.doc_len
        out = BM25Index(self.tokenizer, k1=self.k1, b=self.b)
        with _threads(threads):
            new_offsets, new_rows, new_tfs, df = _kernels.compact_postings(
                term_offsets, rows, tfs, keep.view(np.uint8)
            )
        alive = df > 0
        if not alive.all():
            new_offsets = np.concatenate([[0], new_offsets[1:][alive]]).astype(np.int64)
            vocab = vocab[alive]
        else:
            vocab = vocab.copy()
        out._set(vocab, new_offsets, new_rows, new_tfs, doc_len[keep].copy())
        return out

    def remove_rows(self, rows: Sequence[int] | np.ndarray) -> BM25Index:
        """Return a new index without the given rows (the rest renumbered in order).

        Parameters
        ----------
        rows : sequence of int
            Rows to drop (``0 <= row < n``; duplicates are fine).

        Returns
        -------
        BM25Index
            See :meth:`compact`.
        """
        r = np.asarray(rows, dtype=np.int64).reshape(-1)
        if r.size and (r.min() < 0 or r.max() >= self.n_rows):
            raise ConfigError(f"rows must be in [0, {self.n_rows})")
        keep = np.ones(self.n_rows, dtype=bool)
        keep[r] = False
        return self.compact(keep)

    # -- searching -----------------------------------------------------------
    def search(
        self,
        questions: Sequence[str] | str,
        k: int = 10,
        *,
        mask: np.ndarray | None = None,
        threads: int | None = None,
        method: str = "auto",
    ) -> tuple[np.ndarray, np.ndarray]:
        """Return the best ``k`` rows of every question by BM25 score.

        Parameters
        ----------
        questions : sequence of str
            The questions (a single str is taken as one question).
        k : int, default 10
            Rows per question, ``>= 1``.
        mask : numpy.ndarray, optional
            bool, shape ``(n,)``: True for every eligible row (deletes and
            filters); masked rows are never returned.
        threads : int, optional
            Numba threads for this call.
        method : {"auto", "maxscore", "exhaustive"}, default "auto"
            Block-max MaxScore, which skips the postings that cannot change
            the top ``k``, or every posting of every query term (the
            reference). Both return the same rows and scores. ``"auto"``
            prunes an index of at least 32,768 postings
            (``fastrag._native.bm25.PRUNE_MIN_POSTINGS``) and scores a
            smaller one in full, as it does a query of more than 48 tokens
            (``PRUNE_MAX_TOKENS``), where pruning costs more than it saves.

        Returns
        -------
        rows : numpy.ndarray
            int64, shape ``(m, min(k, n))``, best first (score descending,
            then lower row). Only rows sharing a token with the question are
            hits; when fewer than ``k`` rows match, the row is padded with
            ``-1`` (score ``-inf``), as :func:`fastrag.index.exact.exact_topk` pads.
        scores : numpy.ndarray
            float32, same shape.
        """
        if isinstance(questions, str):
            questions = [questions]
        if len(questions) == 1 and type(questions[0]) is str:  # the latency path
            try:
                raw = questions[0].encode("utf-8")
            except UnicodeEncodeError as exc:
                raise DocumentError(f"question 0 is not valid Unicode: {exc}") from exc
            data = np.frombuffer(raw, dtype=np.uint8)
            offsets = np.array([0, len(raw)], dtype=np.int64)
        else:
            data, offsets = as_utf8(questions)
        if offsets.size <= _kernels.PARALLEL_MIN_QUERIES:  # serial kernels: no thread setting
            # a few questions: tokenised on one thread (a two-thread region for a
            # few bytes costs milliseconds on a busy machine)
            with _threads(threads, work=int(offsets[-1] - offsets[0]) * 8):
                tokens = self.tokenizer.tokenize_buffers(data, offsets)
            return self._search(tokens.hashes, tokens.offsets, k, mask, 1, method)[:2]
        with _threads(threads) as n_threads:
            tokens = self.tokenizer.tokenize_buffers(data, offsets)
            return self._search(tokens.hashes, tokens.offsets, k, mask, n_threads, method)[:2]

    def search_tokens(
        self,
        queries: Tokens | Sequence[Sequence[str]],
        k: int = 10,
        *,
        mask: np.ndarray | None = None,
        threads: int | None = None,
        method: str = "auto",
    ) -> tuple[np.ndarray, np.ndarray]:
        """Like :meth:`search`, for tokenised queries.

        Parameters
        ----------
        queries : Tokens or sequence of sequences of str
            Token hashes from ``tokenizer.tokenize``, or token strings taken
            as they are (already folded and stemmed, as
            ``Tokenizer.token_strings`` gives them).
        k : int, default 10
            Rows per query.
        mask : numpy.ndarray, optional
            Eligible rows.
        threads : int, optional
            Numba threads for this call.
        method : {"auto", "maxscore", "exhaustive"}, default "auto"
            As for :meth:`search`.

        Returns
        -------
        tuple of numpy.ndarray
            ``rows`` (int64) and ``scores`` (float32), as :meth:`search`.
        """
        hashes, offsets = self._query_hashes(queries)
        return self._search_threads(hashes, offsets, k, mask, threads, method)

    def search_weighted(
        self,
        tokens: Tokens,
        k: int = 10,
        *,
        mask: np.ndarray | None = None,
        threads: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`search_tokens` and :meth:`query_weights` of the same queries, checked once.

        The question path's keyword leg: the rows and scores of a search and
        the weight each query could reach (for its relevance), from one
        validation of ``tokens``.

        Returns
        -------
        tuple of numpy.ndarray
            ``rows`` (int64 ``(m, k)``), ``scores`` (float32 ``(m, k)``) and
            ``weights`` (float32 ``(m,)``).
        """
        tokens = _check_tokens(tokens)
        hashes, offsets = tokens.hashes, tokens.offsets
        state = self._state
        weights = _kernels.query_weights(state.vocab, state.idf, hashes, offsets)
        rows, scores = self._search_threads(hashes, offsets, k, mask, threads, "auto")
        return rows, scores, weights

    def _search_threads(
        self, hashes: np.ndarray, offsets: np.ndarray, k: int, mask: np.ndarray | None,
        threads: int | None, method: str,
    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """:meth:`_search`'s rows and scores: serially for a few queries (no thread switch)."""
        if offsets.size <= _kernels.PARALLEL_MIN_QUERIES:
            if threads is not None:
                resolve_threads(threads)  # checked all the same
            return self._search(hashes, offsets, k, mask, 1, method)[:2]  # type: ignore[return-value]
        with _threads(threads) as n_threads:
            return self._search(hashes, offsets, k, mask, n_threads, method)[:2]  # type: ignore[return-value]

    def postings_read(
        self,
        queries: Tokens | Sequence[Sequence[str]],
        k: int = 10,
        *,
        mask: np.ndarray | None = None,
        threads: int | None = None,
        method: str = "auto",
    ) -> np.ndarray:
        """How many postings a search reads, per query (what pruning saves).

        Parameters
        ----------
        queries, k, mask, threads, method
            As for :meth:`search_tokens`.

        Returns
        -------
        numpy.ndarray
            int64 ``(m, 2)``: the postings the search read (scored) and the
            postings of the query's terms (what the exhaustive search reads).
        """
        hashes, offsets = self._query_hashes(queries)
        with _threads(threads) as n_threads:
            return self._search(hashes, offsets, k, mask, n_threads, method)[2]

    def _query_hashes(
        self, queries: Tokens | Sequence[Sequence[str]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Token hashes and offsets of :meth:`search_tokens`' queries."""
        if isinstance(queries, Tokens):
            tokens = _check_tokens(queries)
            hashes, offsets = tokens.hashes, tokens.offsets
        else:
            if isinstance(queries, str):
                raise DocumentError("queries must be Tokens or a sequence of token lists")
            lists = [list(q) for q in queries]
            flat = [t for q in lists for t in q]
            if not all(isinstance(t, str) for t in flat):
                raise DocumentError("every query token must be a str")
            hashes = self.tokenizer.hash(flat) if flat else np.zeros(0, np.uint64)
            offsets = np.zeros(len(lists) + 1, dtype=np.int64)
            np.cumsum([len(q) for q in lists], out=offsets[1:])
        return hashes, offsets

    def query_weights(self, tokens: Tokens) -> np.ndarray:
        """The highest score each tokenised query could reach: the sum of its tokens' idf.

        A row's score is ``sum idf * tf / (tf + k1 * norm)`` with every factor
        after ``idf`` below 1, so ``score / query_weight`` lies in ``[0, 1)``:
        the share of the question's keyword weight a row matches. Unknown
        tokens weigh 0; a repeated token counts as often as it occurs.

        Parameters
        ----------
        tokens : Tokens
            Queries tokenised by this index's tokenizer.

        Returns
        -------
        numpy.ndarray
            float32, one weight per query (0 for a query with no known token).
        """
        state = self._state
        tokens = _check_tokens(tokens)
        return _kernels.query_weights(state.vocab, state.idf, tokens.hashes, tokens.offsets)

    def _search(
        self,
        hashes: np.ndarray,
        offsets: np.ndarray,
        k: int,
        mask: np.ndarray | None,
        n_threads: int,
        method: str,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = check_k(k)
        if method not in _kernels.METHODS:
            raise ConfigError(f"method must be one of {_kernels.METHODS}, got {method!r}")
        state = self._state
        n = state.doc_len.size
        m = offsets.size - 1
        kk = min(int(k), n)
        if kk == 0 or m == 0:
            return (
                np.full((m, kk), -1, dtype=np.int64),
                np.full((m, kk), -np.inf, np.float32),
                np.zeros((m, 2), dtype=np.int64),
            )
        mask_arr = _NO_MASK if mask is None else self._check_mask(mask, "mask")
        cells = None if method == "exhaustive" else self._cells(state)
        return _kernels.search(  # type: ignore[return-value]
            state.term_offsets, state.rows, state.weights, state.max_weight, state.block_offsets,
            state.block_max, state.vocab, hashes, offsets, n, kk, mask_arr, n_threads,
            block_size=BLOCK_SIZE, method=method, stats=True, cells=cells,
        )  # fmt: skip

    def _cells(self, state: _Arrays) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The row cells of ``state``'s long terms (``_native.bm25.cell_maxima``), made once.

        Computed when the arrays are made (build, add, compact) or, for a
        loaded index, on its first pruned search (one pass over the long
        terms' postings; none for an index that ``method="auto"`` scores
        exhaustively) and kept beside them: an index swapped by ``add`` or
        ``compact`` computes its own. Two searches racing here compute the
        same arrays; the last assignment wins.
        """
        got = self._cells_of
        if got is not None and got[0] is state:
            return got[1]
        if state.rows.size < _kernels.PRUNE_MIN_POSTINGS:
            return None
        cells = _kernels.cell_maxima(
            state.term_offsets, state.rows, state.weights, int(state.doc_len.size)
        )
        for a in cells:
            a.flags.writeable = False
        self._cells_of = (state, cells)
        return cells

    def _check_mask(self, mask: object, name: str) -> np.ndarray:
        n = self.n_rows
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,):
            raise ConfigError(f"{name} must be a bool array of shape ({n},)")
        return np.ascontiguousarray(mask)

    # -- persistence ---------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Write the index to one Arrow IPC file, atomically (temp, fsync, rename).

        Parameters
        ----------
        path : str or PathLike
            The file to write (conventionally ``<snapshot>/bm25.arrow``).

        Returns
        -------
        dict
            ``{"bytes": size, "sha256": hex digest}`` of the file.

        Raises
        ------
        StoreError
            If the file cannot be written.
        """
        path = Path(path)
        state = self._state
        meta = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "k1": self.k1,
            "b": self.b,
            "n_rows": self.n_rows,
            "avgdl": self._avgdl,
            "block_size": BLOCK_SIZE,
            "tokenizer": self.tokenizer.config(),
        }
        columns = []
        for (_, typ), a in zip(_COLUMNS, state, strict=True):
            values = pa.array(a, type=typ)
            offs = pa.array(np.array([0, len(a)], dtype=np.int64))
            columns.append(pa.LargeListArray.from_arrays(offs, values))
        schema = _SCHEMA.with_metadata({b"fastrag": orjson.dumps(meta)})
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        return write_arrow(path, schema, [batch], what="BM25 index")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BM25Index:
        """Memory-map an index written by :meth:`save` (no copy, no parse of the postings).

        A file of an older format version (1: no block maxima) loads too: what
        it lacks is computed (one pass over the postings) and
        :attr:`upgraded` is set, so that the next save writes the current
        version.

        Parameters
        ----------
        path : str or PathLike
            The file.

        Returns
        -------
        BM25Index
            The index; its arrays are read-only views of the mapped file.

        Raises
        ------
        StoreCorruptedError
            If the file is missing, truncated, corrupt or inconsistent (the
            message names the file).
        """
        path = Path(path)
        with arrow_read_errors(path, "cannot be read as a BM25 index", "file is missing"):
            with open(path, "rb") as fh:
                if fh.read(6) != b"ARROW1":
                    raise StoreCorruptedError(
                        f"{path}: does not start with the Arrow file magic: corrupt"
                    )
            source = pa.memory_map(str(path), "r")
            reader = pa.ipc.open_file(source)
            schema = reader.schema
            meta = orjson.loads((schema.metadata or {}).get(b"fastrag", b"null"))
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise StoreCorruptedError(f"{path}: not a fastrag BM25 index (no metadata)")
            version = meta.get("version")
            if version not in _SCHEMAS:
                raise StoreCorruptedError(
                    f"{path}: BM25 format version {version!r}, this fastrag reads "
                    f"{', '.join(map(str, sorted(_SCHEMAS)))}"
                )
            expected = _SCHEMAS[version]
            if not schema.remove_metadata().equals(expected) or reader.num_record_batches != 1:
                raise StoreCorruptedError(f"{path}: not a fastrag BM25 index (unexpected schema)")
            batch = reader.get_batch(0)
            if batch.num_rows != 1:
                raise StoreCorruptedError(f"{path}: expected one record, got {batch.num_rows}")
            arrays = []
            for i, name in enumerate(expected.names):
                col = batch.column(i)
                if col.null_count or col.offsets[0].as_py() != 0:
                    raise StoreCorruptedError(f"{path}: column {name} is malformed")
                values = col.values
                if values.null_count:
                    raise StoreCorruptedError(f"{path}: column {name} has nulls")
                arrays.append(values.to_numpy(zero_copy_only=True))
            tokenizer = Tokenizer.from_config(meta["tokenizer"])
            index = cls(tokenizer, k1=meta["k1"], b=meta["b"])
        vocab, term_offsets, rows, tfs, weights, idf, doc_len, max_weight = arrays[:8]
        v = vocab.size
        nnz = rows.size
        ok = (
            term_offsets.size == v + 1
            and idf.size == v
            and max_weight.size == v
            and tfs.size == nnz
            and weights.size == nnz
            and doc_len.size == meta.get("n_rows")
            and term_offsets[0] == 0
            and term_offsets[-1] == nnz
            and bool(np.all(term_offsets[1:] >= term_offsets[:-1]))
            and bool(np.all(vocab[1:] > vocab[:-1]))
        )
        if not ok:
            raise StoreCorruptedError(f"{path}: inconsistent array sizes or offsets: corrupt")
        if version == 1:
            # float32 impacts: the weights and their maxima are computed here
            index._set(vocab, term_offsets, rows, tfs, doc_len, cells=False)
            index.upgraded = True
            return index
        block_offsets, block_max = arrays[8:]
        if meta.get("block_size") == BLOCK_SIZE:
            blocks = (np.diff(term_offsets) + BLOCK_SIZE - 1) // BLOCK_SIZE
            if not (
                block_offsets.size == v + 1
                and block_offsets[0] == 0
                and block_offsets[-1] == block_max.size
                and np.array_equal(np.diff(block_offsets), blocks)
            ):
                raise StoreCorruptedError(f"{path}: inconsistent block maxima: corrupt")
        else:
            block_offsets = block_max = None  # blocked otherwise: re-blocked here
        index._set(
            vocab, term_offsets, rows, tfs, doc_len, weights=weights, idf=idf,
            max_weight=max_weight, block_offsets=block_offsets, block_max=block_max,
            cells=False,
        )  # fmt: skip
        index.upgraded = block_max is None
        return index


def _check_tokens(tokens: object) -> Tokens:
    if not isinstance(tokens, Tokens):
        raise DocumentError(f"expected Tokens, got {type(tokens).__name__}")
    h, o = tokens.hashes, tokens.offsets
    if h.dtype != np.uint64 or o.dtype != np.int64 or o.ndim != 1 or o.size < 1:
        raise DocumentError("Tokens must hold uint64 hashes and int64 offsets")
    if o[0] != 0 or o[-1] != h.size or (o.size > 2 and np.any(o[1:] < o[:-1])):
        raise DocumentError("Tokens offsets must rise from 0 to the number of hashes")
    if h.flags.c_contiguous and o.flags.c_contiguous:
        return tokens
    return Tokens(np.ascontiguousarray(h), np.ascontiguousarray(o))


def add_with_documents(
    chunks: BM25Index,
    documents: BM25Index,
    data: np.ndarray,
    offsets: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    doc_starts: np.ndarray,
    doc_data: np.ndarray,
    doc_offsets: np.ndarray,
    *,
    threads: int | None = None,
) -> None:
    """Append chunk rows to ``chunks`` and their joined documents to ``documents``.

    Equal to ``chunks.add(data, offsets)`` then
    ``documents.add(doc_data, doc_offsets)``, but the documents' tokens are
    taken from the chunks' (see :func:`fastrag._native.tokenize.document_pieces`);
    only a document whose pieces cannot be checked is tokenised from its
    joined text.

    Parameters
    ----------
    chunks, documents : BM25Index
        The chunk index and the document index (changed in place).
    data, offsets : numpy.ndarray
        UTF-8 bytes and ``n_chunks + 1`` offsets of the chunk texts.
    starts, ends : numpy.ndarray
        int64 character offsets of every chunk into its document.
    doc_starts : numpy.ndarray
        int64 ``n_docs + 1`` chunk indices of the documents (runs of chunks).
    doc_data, doc_offsets : numpy.ndarray
        The documents joined from their chunks
        (:func:`fastrag._native.structure.join_chunks` of the arguments above).
    threads : int, optional
        Numba threads for this call.
    """
    data, offsets = check_utf8(data, offsets)
    doc_data, doc_offsets = check_utf8(doc_data, doc_offsets)
    tok = chunks.tokenizer
    classes = tok.kernel_tables().classes
    starts, ends, doc_starts = (
        np.ascontiguousarray(a, dtype=np.int64) for a in (starts, ends, doc_starts)
    )
    n_docs = doc_offsets.size - 1
    if (
        tok != documents.tokenizer
        or (classes.size > 32 and classes[32] != 0)  # the space join_chunks writes: a separator
        or starts.size != offsets.size - 1
        or ends.size != starts.size
        or doc_starts.size != n_docs + 1
        or doc_starts[0] != 0
        or doc_starts[-1] != starts.size
        or np.any(np.diff(doc_starts) < 0)
    ):
        chunks.add(data, offsets, threads=threads)
        documents.add(doc_data, doc_offsets, threads=threads)
        return
    with _threads(threads):
        tokens, tok_starts = tok.tokenize_starts(data, offsets)
        chunks._add_tokens(tokens)
        piece_lo, piece_hi, counts = _tokenize_kernels.document_pieces(
            data, offsets, starts, ends, doc_starts, doc_data, doc_offsets, tokens.offsets,
            tok_starts, classes,
        )  # fmt: skip
        del tok_starts
        flagged = np.flatnonzero(counts < 0)
        lo, hi = doc_offsets[flagged], doc_offsets[flagged + 1]
        fb_offsets = np.zeros(flagged.size + 1, dtype=np.int64)
        np.cumsum(hi - lo, out=fb_offsets[1:])
        at = np.arange(int(fb_offsets[-1])) + np.repeat(lo - fb_offsets[:-1], hi - lo)
        fb = tok.tokenize_buffers(doc_data[at], fb_offsets)
        hashes, tok_offsets = _tokenize_kernels.gather_document_tokens(
            doc_starts, tokens.hashes, piece_lo, piece_hi, counts, fb.hashes, fb.offsets
        )
        documents._add_tokens(Tokens(hashes, tok_offsets))
