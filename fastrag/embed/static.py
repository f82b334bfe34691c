"""Static embeddings: one dense vector per vocabulary item, a weighted mean per text.

A :class:`StaticEmbedder` holds a *table*: vocabulary items (lower-cased
words of alphabetic scripts as :class:`~fastrag.Tokenizer` splits them,
numbers as they appear, CJK characters and CJK bigrams), one vector and one
weight each. A text's vector is the weighted mean of the vectors of the items
it contains (every occurrence counts), L2-normalised; items outside the
vocabulary are ignored, and a text with none embeds to the zero vector, never
NaN. Weights are smooth inverse frequency, ``a / (a + p(item))`` with
``p(item)`` the item's share of the corpus's tokens (``sif_a``, default
1e-4, chosen on SciFact: 1e-3 and 3e-5 scored lower), so frequent function
words barely count.

Embedding is one Numba kernel over the Arrow string buffers (``uint8`` bytes
and ``int64`` offsets): the tokenizer's kernel finds the items, a hash table
maps them to rows, and the rows are summed (``fastrag._native.static``); no
Python runs per text, and no model is called at query time.

Tables come from:

- :meth:`StaticEmbedder.distill`: a teacher model (any
  :class:`~fastrag.embed.base.Embedder`: an OpenAI-compatible endpoint or a
  model run in process, see :mod:`fastrag.embed.teachers`) is asked once per
  item, and the item vectors are then fitted so that a chunk's static vector
  approximates the teacher's vector of that chunk (see
  :mod:`fastrag.embed.distill`);
- :meth:`StaticEmbedder.from_model2vec`: a model2vec folder (safetensors
  embeddings and a ``tokenizer.json``), embedded with its own subword
  tokenizer and weights;
- :meth:`StaticEmbedder.load`: a table file written by :meth:`StaticEmbedder.save`.

A table is an Arrow IPC file (``static.arrow``), memory-mapped on load:
columns ``item``, ``hash``, ``count``, ``weight``, ``scale`` and ``vector``
(``fixed_size_list<int8 | float16 | float32>[dim]``; ``int8`` rows carry a
scale and are used from the mapped file without a copy, ``float16`` is
widened to float32 on load). A knowledge base saves the table in each
snapshot and records its SHA-256 (``revision``); querying with another table
raises :class:`~fastrag.errors.EmbedderMismatchError`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .. import _native  # noqa: F401  (the package must import before its submodules)
from .._native import readonly
from .._native import static as _kernels
from .._threads import threads as _threads
from ..errors import (
    ConfigError,
    EmbedderError,
    NotFittedError,
    StoreCorruptedError,
)
from ..text.tokenize import check_utf8
from .base import Utf8Embedder, check_embedder
from .model2vec import read_model2vec
from .subword import SubwordTokenizer
from .table import (
    _MODES,
    DEFAULT_SIF_A,
    ITEM_TOKENIZER,
    STATIC_FILE,
    StaticTable,
    item_tokenizer,
    quantize_rows,
    sif_weights,
)

__all__ = [
    "DEFAULT_SIF_A",
    "ITEM_TOKENIZER",
    "STATIC_FILE",
    "StaticEmbedder",
    "StaticTable",
    "item_tokenizer",
    "quantize_rows",
    "sif_weights",
]


class _Compiled:
    """What the kernel needs of a table: lookup, per-item factors, rows (immutable)."""

    __slots__ = ("coef", "keys", "rows", "table", "vectors")

    def __init__(self, table: StaticTable) -> None:
        self.table = table
        vectors = table.vectors
        if table.mode == "subword":  # embed_ids reads float32 rows
            vectors = table.dense()
            table = replace(table, scales=np.ones(len(table), dtype=np.float32))
        elif vectors.dtype == np.float16:
            vectors = vectors.astype(np.float32)
        self.vectors = readonly(np.ascontiguousarray(vectors))
        coef = (table.weights.astype(np.float32) * table.scales).astype(np.float32)
        coef.flags.writeable = False
        self.coef = coef
        self.keys, self.rows = _kernels.build_lookup(np.ascontiguousarray(table.hashes))


class StaticEmbedder(Utf8Embedder):
    """Semantic static embeddings: a weighted mean of per-item vectors, in a Numba kernel.

    Build one with :meth:`distill` (from a teacher model), :meth:`load` (a
    saved table), :meth:`from_model2vec` (a model2vec folder), or
    ``StaticEmbedder(teacher=...)``, which :meth:`KnowledgeBase.build
    <fastrag.KnowledgeBase.build>` distils from the knowledge base's own
    chunks. See the module docstring for the rules.

    Parameters
    ----------
    table : StaticTable, optional
        A ready table; without one the embedder is unfitted and needs a
        ``teacher`` to distil from.
    teacher : Embedder, optional
        The model asked for item vectors: by :meth:`fit_utf8` (unfitted) and
        by :meth:`learn_utf8` for items of new documents. Never saved.
    options : DistillOptions, optional
        Distillation settings for :meth:`fit_utf8` (see
        :class:`~fastrag.embed.distill.DistillOptions`).
    workdir : str or Path, optional
        Where a distillation keeps its progress (resumable).
    progress : callable or bool, optional
        Distillation progress: a callable receiving
        :class:`~fastrag.embed.distill.DistillProgress`, or ``True`` for a
        line on standard error.
    learn : bool, default True
        Let :meth:`learn_utf8` ask the teacher for items new documents bring.
    """

    kind = "static"
    """A static table (:data:`~fastrag.embed.base.EMBEDDER_KINDS`)."""

    def __init__(
        self,
        table: StaticTable | None = None,
        *,
        teacher: Any = None,
        options: Any = None,
        workdir: str | os.PathLike[str] | None = None,
        progress: Callable[[Any], None] | bool | None = None,
        learn: bool = True,
    ) -> None:
        if table is not None and not isinstance(table, StaticTable):
            raise ConfigError(f"table must be a StaticTable, got {type(table).__name__}")
        if table is None and teacher is None:
            raise ConfigError(
                "StaticEmbedder needs a table (StaticEmbedder.load / distill / from_model2vec) "
                "or a teacher to distil one from"
            )
        if teacher is not None:
            check_embedder(teacher)
        self.teacher = teacher
        self.options = options
        self.workdir = None if workdir is None else Path(workdir)
        self.progress = progress
        self.learn = bool(learn)
        self._lock = threading.Lock()
        self._compiled: _Compiled | None = None
        self._subword: Any = None
        if table is not None:
            self._set_table(table)

    # -- state -----------------------------------------------------------------
    def _set_table(self, table: StaticTable) -> None:
        if table.mode not in _MODES:
            raise EmbedderError(f"unknown static table mode {table.mode!r}")
        compiled = _Compiled(table)
        subword = SubwordTokenizer(table) if table.mode == "subword" else None
        self._compiled, self._subword = compiled, subword

    @property
    def fitted(self) -> bool:
        """Whether the embedder has a table."""
        return self._compiled is not None

    @property
    def table(self) -> StaticTable:
        """The table (raises :class:`NotFittedError` before distillation)."""
        if self._compiled is None:
            raise NotFittedError(
                "StaticEmbedder has no table yet: distil one (fit_utf8, or KnowledgeBase.build)"
            )
        return self._compiled.table

    @property
    def dim(self) -> int:
        """Columns of every vector."""
        return self.table.dim

    # -- construction ------------------------------------------------------------
    @classmethod
    def distill(
        cls,
        texts: Iterable[str] | pa.Array | pa.ChunkedArray,
        teacher: Any,
        *,
        dim: int | None = 256,
        max_items: int = 100_000,
        workdir: str | os.PathLike[str] | None = None,
        progress: Callable[[Any], None] | bool | None = None,
        threads: int | None = None,
        **options: Any,
    ) -> StaticEmbedder:
        """Distil a table from ``teacher`` over the vocabulary of ``texts``.

        The vocabulary is the corpus's items, most frequent first (at most
        ``max_items``, each seen at least ``min_count`` times); the teacher
        embeds every item once, in batches (bounded concurrency, retries);
        with ``fit=True`` (default) the teacher also embeds a sample of the
        texts and the item vectors are fitted so that each sampled text's
        static vector approximates the teacher's vector of it; PCA reduces
        to ``dim`` columns. With a ``workdir``, every answer of the teacher is
        written there as it arrives, and a new call with the same arguments
        resumes where an interrupted one stopped.

        Parameters
        ----------
        texts : iterable of str, or pyarrow string array
            The corpus (for a knowledge base: its chunks).
        teacher : Embedder
            Any embedder: :class:`~fastrag.OpenAIEmbedder`, a teacher of
            :mod:`fastrag.embed.teachers`, ... (its document side is used).
        dim : int or None, default 256
            Columns after PCA; ``None`` keeps the teacher's.
        max_items : int, default 100,000
            Vocabulary size, at most.
        workdir : str or Path, optional
            Directory for resumable progress.
        progress : callable or bool, optional
            Progress callback, or ``True`` for a line on standard error.
        threads : int, optional
            Numba threads for counting and fitting.
        **options
            Further :class:`~fastrag.embed.distill.DistillOptions` fields
            (``min_count``, ``sif_a``, ``fit``, ``fit_sample``, ``ridge``,
            ``quantize``, ``batch_size``, ``max_concurrency``, ``retries``,
            ``seed``, ...).

        Returns
        -------
        StaticEmbedder
            Fitted, with ``teacher`` attached (for :meth:`learn_utf8`).
        """
        from .distill import DistillOptions, distill_table, utf8_batches

        opts = DistillOptions(dim=dim, max_items=max_items, **options)
        table = distill_table(
            utf8_batches(texts), teacher, opts, workdir=workdir, progress=progress, threads=threads
        )
        return cls(table, teacher=teacher, options=opts, workdir=workdir, progress=progress)

    def fit_utf8(
        self, batches: Sequence[tuple[np.ndarray, np.ndarray]], *, threads: int | None = None
    ) -> StaticEmbedder:
        """Distil the table from texts in the Arrow layout (what ``KnowledgeBase.build`` calls).

        Parameters
        ----------
        batches : sequence of (data, offsets)
            UTF-8 buffers and int64 offsets of the corpus's texts.
        threads : int, optional
            Numba threads.

        Returns
        -------
        StaticEmbedder
            ``self``, fitted.
        """
        from .distill import DistillOptions, distill_table

        if self.teacher is None:
            raise NotFittedError("StaticEmbedder has no teacher to distil a table from")
        opts = self.options if self.options is not None else DistillOptions()
        checked = [check_utf8(d, o) for d, o in batches]
        table = distill_table(
            checked, self.teacher, opts, workdir=self.workdir, progress=self.progress,
            threads=threads,
        )  # fmt: skip
        with self._lock:
            self._set_table(table)
        return self

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, teacher: Any = None, verify: bool = False
    ) -> StaticEmbedder:
        """Open a table file (memory-mapped).

        Parameters
        ----------
        path : str or Path
            A file written by :meth:`save` (or a knowledge-base snapshot's
            ``static.arrow``).
        teacher : Embedder, optional
            Attach a teacher, so that new documents' items can be learnt.
        verify : bool, default False
            Recompute the table's SHA-256.

        Returns
        -------
        StaticEmbedder
        """
        return cls(StaticTable.read(path, verify=verify), teacher=teacher)

    def save(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Write the table to ``path`` (atomic); return ``{"bytes", "sha256"}`` of the file."""
        return self.table.write(path)

    @classmethod
    def from_model2vec(cls, folder: str | os.PathLike[str]) -> StaticEmbedder:
        """Load a model2vec folder: ``model.safetensors``, ``tokenizer.json``, ``config.json``.

        Texts are tokenised by the model's own subword tokenizer (the
        ``tokenizers`` library, special tokens left out, the unknown token
        dropped, at most 512 tokens as model2vec does), and embedded as the
        mean of the model's vectors (times its per-token ``weights`` when it
        has them, through its ``mapping`` when its vocabulary is quantised),
        L2-normalised, by :func:`fastrag._native.static.embed_ids`. The
        tokenizer runs in Python (Rust underneath); the mean in the kernel.

        Parameters
        ----------
        folder : str or Path
            The model folder.

        Returns
        -------
        StaticEmbedder

        Raises
        ------
        EmbedderError
            When a file is missing or malformed.
        ImportError
            Without the ``tokenizers`` and ``safetensors`` packages
            (``pip install "fastrag-engine[static]"``).
        """
        return cls(read_model2vec(folder))

    # -- learning new items --------------------------------------------------------
    def learn_utf8(
        self, data: np.ndarray, offsets: np.ndarray, *, threads: int | None = None
    ) -> int:
        """Add the items of new texts that the table lacks, asking the teacher once for each.

        Does nothing without a teacher, with ``learn=False``, or for a
        subword (model2vec) table. The vectors of the items already in the
        table, and their weights, do not change, so chunks embedded before
        keep their meaning; the table's revision (its SHA-256) does change.

        Parameters
        ----------
        data, offsets : numpy.ndarray
            The new texts in the Arrow layout.
        threads : int, optional
            Numba threads.

        Returns
        -------
        int
            Items added.
        """
        if self.teacher is None or not self.learn or self._compiled is None:
            return 0
        table = self._compiled.table
        if table.mode != "items":
            return 0
        from .distill import DistillOptions, grow_table

        data, offsets = check_utf8(data, offsets)
        opts = self.options if self.options is not None else DistillOptions()
        with self._lock:
            grown = grow_table(
                self._compiled.table, [(data, offsets)], self.teacher, opts, threads=threads
            )
            if grown is None:
                return 0
            self._set_table(grown)
            return len(grown) - len(table)

    # -- embedding ---------------------------------------------------------------
    def embed_utf8(
        self,
        data: np.ndarray,
        offsets: np.ndarray,
        *,
        out: np.ndarray | None = None,
        threads: int | None = None,
    ) -> np.ndarray:
        """Embed texts given in the Arrow string layout.

        Parameters
        ----------
        data : numpy.ndarray
            uint8 UTF-8 bytes.
        offsets : numpy.ndarray
            int64 offsets, ``n + 1`` of them.
        out : numpy.ndarray, optional
            Writable float32 ``(n, dim)`` C-contiguous array to fill.
        threads : int, optional
            Numba threads.

        Returns
        -------
        numpy.ndarray
            float32 ``(n, dim)``, rows L2-normalised or zero.
        """
        compiled = self._compiled
        if compiled is None:
            raise NotFittedError("StaticEmbedder has no table yet: distil or load one first")
        n = offsets.size - 1
        dim = compiled.vectors.shape[1]
        if out is None:
            out = np.empty((n, dim), dtype=np.float32)
        elif (
            out.dtype != np.float32
            or out.shape != (n, dim)
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ConfigError(
                f"out must be a writable C-contiguous float32 array of shape {(n, dim)}"
            )
        if n == 0:
            return out
        if self._subword is not None:
            self._subword.embed(compiled.coef, compiled.vectors, data, offsets, out, threads)
            return out
        nbytes = int(offsets[-1] - offsets[0])
        tok = ITEM_TOKENIZER
        classes, fold, stop_hashes, cjk_mode = tok.kernel_tables()
        if n == 1 or (threads is None and nbytes < _kernels.PARALLEL_MIN_BYTES) or threads == 1:
            _kernels.embed_static(
                data, offsets, classes, fold, stop_hashes, cjk_mode, compiled.keys,
                compiled.rows, compiled.coef, compiled.vectors, out, blocks=1,
            )  # fmt: skip
            return out
        with _threads(threads, work=nbytes * 4 + n * dim * 4) as used:
            _kernels.embed_static(
                data, offsets, classes, fold, stop_hashes, cjk_mode, compiled.keys,
                compiled.rows, compiled.coef, compiled.vectors, out,
                blocks=1 if used <= 1 else min(n, 8 * used),
            )  # fmt: skip
        return out

    # -- knowledge-base persistence --------------------------------------------------
    def config(self) -> dict[str, Any]:
        """JSON-serialisable description: the table's SHA-256 identifies it.

        Returns
        -------
        dict
            ``type`` ``"static"``, ``dim``, ``mode``, ``dtype``, ``items``,
            ``table`` (the SHA-256 of the table as first distilled: its
            lineage), ``revision`` (the SHA-256 of the table now: it
            changes when new documents' items are learnt), ``file``,
            ``sif_a`` and the teacher's configuration (for the record).
        """
        table = self.table
        return {
            "type": "static",
            "dim": table.dim,
            "mode": table.mode,
            "dtype": table.dtype,
            "items": len(table),
            "table": table.meta.get("lineage") or table.sha256,
            "revision": table.sha256,
            "file": STATIC_FILE,
            "sif_a": table.meta.get("sif_a"),
            "teacher": table.meta.get("teacher"),
        }

    def snapshot_files(self) -> dict[str, Callable[[Path], dict[str, Any]]]:
        """Files a knowledge base saves beside its chunks: ``{"static.arrow": writer}``."""
        table = self.table
        return {STATIC_FILE: table.write}

    @classmethod
    def from_snapshot(
        cls, config: dict[str, Any], directory: Path, *, verify: bool = False
    ) -> StaticEmbedder:
        """Rebuild the embedder a knowledge base snapshot was saved with.

        Parameters
        ----------
        config : dict
            The manifest's ``embedder`` entry (from :meth:`config`).
        directory : Path
            The snapshot directory.
        verify : bool, default False
            Recompute the table's SHA-256.

        Returns
        -------
        StaticEmbedder

        Raises
        ------
        StoreCorruptedError
            When the table is missing or is not the one the manifest names.
        """
        path = Path(directory) / str(config.get("file", STATIC_FILE))
        table = StaticTable.read(path, verify=verify)
        if table.sha256 != config.get("revision"):
            raise StoreCorruptedError(
                f"{path}: the static table's SHA-256 is not the one the manifest records"
            )
        return cls(table)

    def __repr__(self) -> str:
        if self._compiled is None:
            return f"StaticEmbedder(unfitted, teacher={type(self.teacher).__name__})"
        t = self._compiled.table
        return (
            f"StaticEmbedder(items={len(t):,}, dim={t.dim}, dtype={t.dtype}, mode={t.mode}, "
            f"revision={t.sha256[:12]})"
        )
