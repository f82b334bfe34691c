"""The static table: vocabulary items with one vector and one weight each, and its Arrow file.

What a :class:`~fastrag.embed.static.StaticEmbedder` embeds with and what
:mod:`fastrag.embed.distill` produces; both import it from here (neither
imports the other at module level). The file format is described in
:mod:`fastrag.embed.static`.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from .._fs import arrow_read_errors, write_arrow
from ..errors import ConfigError, StoreCorruptedError
from ..text.tokenize import Tokenizer

__all__ = [
    "DEFAULT_SIF_A",
    "ITEM_TOKENIZER",
    "STATIC_FILE",
    "StaticTable",
    "check_sif",
    "item_tokenizer",
    "quantize_rows",
    "sif_weights",
]

STATIC_FILE = "static.arrow"
"""File name of the table in a knowledge-base snapshot."""

DEFAULT_SIF_A = 1e-4
"""Default smooth-inverse-frequency constant ``a`` of the weights ``a / (a + p)``."""

_FORMAT = "fastrag-static"
_FORMAT_VERSION = 1
_QUANTIZE = ("int8", "float16", "float32")
_MODES = ("items", "subword")


def item_tokenizer() -> Tokenizer:
    """The tokenizer that defines items: lower-cased, no stop words, no stemming, CJK 1+2-grams."""
    return Tokenizer(lowercase=True, stopwords=None, stem=None, cjk="unigram+bigram")


ITEM_TOKENIZER = item_tokenizer()
"""The items' tokenizer (see :func:`item_tokenizer`)."""


def sif_weights(counts: np.ndarray, total: int, a: float | None) -> np.ndarray:
    """Smooth inverse frequency ``a / (a + count / total)`` per item (all ones when ``a`` is None).

    Parameters
    ----------
    counts : numpy.ndarray
        Occurrences of every item in the corpus.
    total : int
        Tokens in the corpus (items and others).
    a : float or None
        The constant; ``None`` weighs every item 1.

    Returns
    -------
    numpy.ndarray
        float32 weights in ``(0, 1]``.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if a is None:
        return np.ones(counts.size, dtype=np.float32)
    p = counts / max(int(total), 1)
    return (a / (a + p)).astype(np.float32)


def check_sif(a: object) -> float | None:
    """The smooth-inverse-frequency constant ``a`` checked: a positive number, or None."""
    if a is None:
        return None
    if isinstance(a, bool) or not isinstance(a, (int, float)) or not (0 < float(a) < 1e6):
        raise ConfigError(f"sif_a must be a positive number or None, got {a!r}")
    return float(a)


def quantize_rows(vectors: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Store ``vectors`` as ``kind``: ``(rows, scales)``; ``int8`` rows scale by ``max|x| / 127``.

    Parameters
    ----------
    vectors : numpy.ndarray
        float32 ``(n, dim)``.
    kind : {"int8", "float16", "float32"}
        Storage type.

    Returns
    -------
    tuple of numpy.ndarray
        The stored rows and float32 scales (ones unless ``int8``).
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if kind == "int8":
        peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(vectors.shape[0])
        scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        q = np.rint(vectors / scales[:, None]).clip(-127, 127).astype(np.int8)
        return q, scales
    if kind == "float16":
        return vectors.astype(np.float16), np.ones(vectors.shape[0], dtype=np.float32)
    if kind == "float32":
        return vectors, np.ones(vectors.shape[0], dtype=np.float32)
    raise ConfigError(f"quantize must be one of {_QUANTIZE}, got {kind!r}")


@dataclass(frozen=True, eq=False)
class StaticTable:
    """Vocabulary items with one vector and one weight each (immutable).

    Attributes
    ----------
    items : tuple of str
        The item texts, row order (for a subword table: the tokens by id).
    hashes : numpy.ndarray
        uint64 FNV-1a 64 hash of every item (the tokenizer's token hash).
    counts : numpy.ndarray
        int64 occurrences of every item in the corpus it was learnt from.
    weights : numpy.ndarray
        float32 weight of every item.
    vectors : numpy.ndarray
        ``(items, dim)`` int8, float16 or float32 rows.
    scales : numpy.ndarray
        float32 per-row scale (the vector is ``scales[i] * vectors[i]``).
    meta : dict
        JSON-ready facts: ``total`` (corpus tokens), ``sif_a``, ``teacher``
        (its config), ``mode`` (``"items"`` or ``"subword"``), fitting
        statistics, and for subword tables the tokenizer JSON.
    projection : tuple of numpy.ndarray, optional
        ``(mean, components)`` that map a teacher vector into the table's
        space (``(x - mean) @ components``), for items learnt later.
    """

    items: tuple[str, ...]
    hashes: np.ndarray
    counts: np.ndarray
    weights: np.ndarray
    vectors: np.ndarray
    scales: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    projection: tuple[np.ndarray, np.ndarray] | None = None
    _sha: list[str] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        n = len(self.items)
        if self.vectors.ndim != 2 or self.vectors.shape[0] != n or self.vectors.shape[1] < 1:
            raise ConfigError(f"vectors must be ({n}, dim), got {self.vectors.shape}")
        if self.vectors.dtype not in (np.int8, np.float16, np.float32):
            raise ConfigError(f"vectors must be int8, float16 or float32, got {self.vectors.dtype}")
        for name, dtype in (
            ("hashes", np.uint64),
            ("counts", np.int64),
            ("weights", np.float32),
            ("scales", np.float32),
        ):
            a = getattr(self, name)
            if a.dtype != dtype or a.shape != (n,):
                raise ConfigError(
                    f"{name} must be {np.dtype(dtype).name} ({n},), got {a.dtype} {a.shape}"
                )
        if n and not (np.isfinite(self.weights).all() and np.isfinite(self.scales).all()):
            raise ConfigError("weights and scales must be finite")
        if self.vectors.dtype != np.int8 and n and not np.isfinite(self.vectors).all():
            raise ConfigError("vectors must be finite")

    # -- facts -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.items)

    @property
    def dim(self) -> int:
        """Columns of every vector."""
        return int(self.vectors.shape[1])

    @property
    def dtype(self) -> str:
        """Storage type of the vectors (``int8``, ``float16`` or ``float32``)."""
        return str(self.vectors.dtype)

    @property
    def mode(self) -> str:
        """``"items"`` (fastrag's tokenizer) or ``"subword"`` (a model2vec tokenizer)."""
        return str(self.meta.get("mode", "items"))

    @property
    def sha256(self) -> str:
        """SHA-256 of everything that decides an embedding (items, weights, vectors, mode)."""
        if not self._sha:
            h = hashlib.sha256()
            h.update(orjson.dumps([_FORMAT_VERSION, self.mode, self.dtype, self.dim, len(self)]))
            h.update("\x00".join(self.items).encode("utf-8", "surrogatepass"))
            for a in (self.hashes, self.weights, self.scales, self.vectors):
                h.update(np.ascontiguousarray(a).data)
            if self.mode == "subword":
                h.update(str(self.meta.get("tokenizer_json", "")).encode())
                h.update(orjson.dumps(self.meta.get("subword", {}), option=orjson.OPT_SORT_KEYS))
            self._sha.append(h.hexdigest())
        return self._sha[0]

    def dense(self) -> np.ndarray:
        """The vectors as float32 ``(items, dim)`` (scales applied; a copy unless float32)."""
        if self.vectors.dtype == np.float32 and bool((self.scales == 1).all()):
            return self.vectors
        return self.vectors.astype(np.float32) * self.scales[:, None]

    def quantized(self, kind: str) -> StaticTable:
        """Return the same table with its vectors stored as ``kind`` (int8, float16, float32)."""
        if kind == self.dtype and kind != "int8":
            return self
        q, s = quantize_rows(self.dense(), kind)
        return replace(self, vectors=q, scales=s, _sha=[])

    def with_weights(self, sif_a: float | None) -> StaticTable:
        """The same table with smooth-inverse-frequency weights for another ``a``."""
        a = check_sif(sif_a)
        w = sif_weights(self.counts, int(self.meta.get("total", 1)), a)
        return replace(self, weights=w, meta={**self.meta, "sif_a": a}, _sha=[])

    # -- persistence -----------------------------------------------------------
    def write(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Write the table as one Arrow IPC file, atomically (temp, fsync, rename).

        Parameters
        ----------
        path : str or PathLike
            The file (conventionally ``static.arrow``).

        Returns
        -------
        dict
            ``{"bytes", "sha256"}`` of the file.

        Raises
        ------
        StoreError
            If the file cannot be written.
        """
        path = Path(path)
        meta = {
            "format": _FORMAT,
            "version": _FORMAT_VERSION,
            "sha256": self.sha256,
            "meta": self.meta,
        }
        md: dict[bytes, bytes] = {b"fastrag": orjson.dumps(meta)}
        if self.projection is not None:
            mean, comp = self.projection
            md[b"fastrag.projection"] = orjson.dumps(
                {
                    "shape": list(comp.shape),
                    "mean": base64.b64encode(np.ascontiguousarray(mean, np.float32).data).decode(),
                    "components": base64.b64encode(
                        np.ascontiguousarray(comp, np.float32).data
                    ).decode(),
                }
            )
        dim = self.dim
        value_type = pa.from_numpy_dtype(self.vectors.dtype)
        vectors = pa.FixedSizeListArray.from_arrays(
            pa.array(np.ascontiguousarray(self.vectors).reshape(-1), type=value_type), dim
        )
        schema = _schema(value_type, dim).with_metadata(md)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(list(self.items), type=pa.large_string()),
                pa.array(self.hashes, type=pa.uint64()),
                pa.array(self.counts, type=pa.int64()),
                pa.array(self.weights, type=pa.float32()),
                pa.array(self.scales, type=pa.float32()),
                vectors,
            ],
            schema=schema,
        )
        return write_arrow(path, schema, [batch], what="static table")

    @classmethod
    def read(cls, path: str | os.PathLike[str], *, verify: bool = False) -> StaticTable:
        """Memory-map a table written by :meth:`write` (int8 and float32 rows are not copied).

        Parameters
        ----------
        path : str or PathLike
            The file.
        verify : bool, default False
            Recompute the content hash and compare it with the recorded one.

        Returns
        -------
        StaticTable
            The table.

        Raises
        ------
        StoreCorruptedError
            If the file is missing, truncated, corrupt or not a static table.
        """
        path = Path(path)
        with arrow_read_errors(path, "cannot read the static table", "the static table is missing"):
            with open(path, "rb") as fh:
                if fh.read(6) != b"ARROW1":
                    raise StoreCorruptedError(f"{path}: not an Arrow file: corrupt or truncated")
            reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
            schema = reader.schema
            md = schema.metadata or {}
            info = orjson.loads(md.get(b"fastrag", b"null"))
            if not isinstance(info, dict) or info.get("format") != _FORMAT:
                raise StoreCorruptedError(f"{path}: not a fastrag static table")
            if info.get("version") != _FORMAT_VERSION:
                raise StoreCorruptedError(
                    f"{path}: static table format {info.get('version')!r}, this fastrag reads "
                    f"{_FORMAT_VERSION}"
                )
            vtype = schema.field("vector").type
            if not pa.types.is_fixed_size_list(vtype) or not schema.remove_metadata().equals(
                _schema(vtype.value_type, vtype.list_size)
            ):
                raise StoreCorruptedError(f"{path}: unexpected schema for a static table")
            if reader.num_record_batches != 1:
                raise StoreCorruptedError(f"{path}: expected one record batch")
            batch = reader.get_batch(0)
            if any(batch.column(i).null_count for i in range(batch.num_columns)):
                raise StoreCorruptedError(f"{path}: a column has nulls")
            n, dim = batch.num_rows, vtype.list_size
            vec = batch.column(5)
            values = vec.values.to_numpy(zero_copy_only=True)
            if vec.offset:
                values = values[vec.offset * dim :]
            vectors = values[: n * dim].reshape(n, dim)  # float16 is widened by the embedder
            projection = None
            if b"fastrag.projection" in md:
                p = orjson.loads(md[b"fastrag.projection"])
                shape = tuple(p["shape"])
                mean = np.frombuffer(base64.b64decode(p["mean"]), dtype=np.float32)
                comp = np.frombuffer(base64.b64decode(p["components"]), dtype=np.float32)
                projection = (mean, comp.reshape(shape))
            table = cls(
                items=tuple(batch.column(0).to_pylist()),
                hashes=batch.column(1).to_numpy(zero_copy_only=True),
                counts=batch.column(2).to_numpy(zero_copy_only=True),
                weights=batch.column(3).to_numpy(zero_copy_only=True),
                scales=batch.column(4).to_numpy(zero_copy_only=True),
                vectors=vectors,
                meta=dict(info.get("meta") or {}),
                projection=projection,
            )
        recorded = info.get("sha256")
        if verify:
            if table.sha256 != recorded:
                raise StoreCorruptedError(f"{path}: the static table does not match its SHA-256")
        elif isinstance(recorded, str):
            table._sha.append(recorded)
        return table


def _schema(value_type: pa.DataType, dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("item", pa.large_string(), nullable=False),
            pa.field("hash", pa.uint64(), nullable=False),
            pa.field("count", pa.int64(), nullable=False),
            pa.field("weight", pa.float32(), nullable=False),
            pa.field("scale", pa.float32(), nullable=False),
            pa.field("vector", pa.list_(pa.field("item", value_type), dim), nullable=False),
        ]
    )
