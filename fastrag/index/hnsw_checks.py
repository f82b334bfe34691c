"""Input checks of the HNSW wrapper: vectors, labels, queries, ints, threads, hnswlib's errors.

Each check raises a :class:`~fastrag.errors.ConfigError` naming the problem
before anything reaches hnswlib, and returns the array hnswlib takes without
a copy (float32 or int64, C-contiguous); :func:`hnswlib_errors` maps what
hnswlib itself raises to :class:`~fastrag.errors.SearchIndexError`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np

from .._threads import max_threads, resolve_threads
from ..errors import ConfigError, SearchIndexError

__all__ = [
    "check_int",
    "check_labels",
    "check_queries",
    "check_vectors",
    "hnsw_threads",
    "hnswlib_errors",
]


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]`` (``high`` None: no upper bound), or a ConfigError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{name} must be an int, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{name} must be {bound}, got {value}")
    return int(value)


@contextlib.contextmanager
def hnswlib_errors(what: str) -> Iterator[None]:
    """Translate hnswlib's exceptions into :class:`SearchIndexError`."""
    try:
        yield
    except (RuntimeError, MemoryError, OverflowError) as exc:
        raise SearchIndexError(f"hnswlib failed to {what}: {exc}") from exc


def hnsw_threads(threads: int | None) -> int:
    """The hnswlib worker threads of one call: ``threads``, or all cores when None."""
    return max_threads() if threads is None else resolve_threads(threads)


def check_vectors(vectors: object, dim: int | None) -> np.ndarray:
    """``(n, dim)`` finite, L2-normalised (or zero) vectors as float32 C-contiguous."""
    if not isinstance(vectors, np.ndarray):
        vectors = np.asarray(vectors)
    if vectors.dtype.kind not in "fiu":
        raise ConfigError(f"vectors must be real numbers, got dtype {vectors.dtype}")
    if vectors.ndim != 2:
        raise ConfigError(f"vectors must be 2-D (n, dim), got shape {vectors.shape}")
    if dim is not None and vectors.shape[1] != dim:
        raise ConfigError(f"vectors have dimension {vectors.shape[1]}, the index has {dim}")
    if vectors.shape[1] < 1:
        raise ConfigError(f"vectors must have dimension >= 1, got shape {vectors.shape}")
    # float32 C-contiguous input (read-only memory maps included) reaches
    # hnswlib without a copy; anything else is converted once here.
    with np.errstate(over="ignore"):
        x = np.ascontiguousarray(vectors, dtype=np.float32)
    if x.size:
        if not np.isfinite(x).all():
            raise ConfigError("vectors contain NaN or infinity (or values beyond float32)")
        norms = np.einsum("ij,ij->i", x, x)
        bad = (np.abs(norms - 1.0) > 1e-3) & (norms != 0.0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ConfigError(
                f"vectors must be L2-normalised (or zero): row {row} has norm "
                f"{math.sqrt(float(norms[row])):.6g}"
            )
    return x


def check_labels(labels: object, n: int) -> np.ndarray:
    """``n`` unique non-negative integer labels as int64."""
    lab = np.asarray(labels)
    if lab.dtype.kind not in "iu" or lab.dtype == np.bool_:
        raise ConfigError(f"labels must be integers, got dtype {lab.dtype}")
    if lab.shape != (n,):
        raise ConfigError(f"labels must have shape ({n},), got {lab.shape}")
    if n and (lab.min() < 0 or lab.max() > np.iinfo(np.int64).max):
        raise ConfigError("labels must be non-negative int64 values")
    lab = np.ascontiguousarray(lab, dtype=np.int64)
    if n > 1 and np.unique(lab).size != n:
        raise ConfigError("labels must be unique")
    return lab


_F32 = np.dtype(np.float32)


def check_queries(queries: object, dim: int) -> np.ndarray:
    """``(m, dim)`` finite queries as float32 C-contiguous (no copy when they already are)."""
    q = queries
    if (
        type(q) is np.ndarray
        and q.dtype is _F32
        and q.ndim == 2
        and q.shape[1] == dim
        and q.flags.c_contiguous
    ):  # the common case, checked in ~0.3 us
        if not np.isfinite(q).all():
            raise ConfigError("queries contain NaN or infinity (or values beyond float32)")
        return q
    q = queries if isinstance(queries, np.ndarray) else np.asarray(queries)
    if q.dtype.kind not in "fiu":
        raise ConfigError(f"queries must be real numbers, got dtype {q.dtype}")
    if q.ndim != 2:
        raise ConfigError(f"queries must be 2-D (m, dim), got shape {q.shape}")
    if q.shape[1] != dim:
        raise ConfigError(f"queries have dimension {q.shape[1]}, the index has {dim}")
    if q.dtype != np.float32 or not q.flags.c_contiguous:
        with np.errstate(over="ignore"):
            q = np.ascontiguousarray(q, dtype=np.float32)
    if not np.isfinite(q).all():
        raise ConfigError("queries contain NaN or infinity (or values beyond float32)")
    return q
