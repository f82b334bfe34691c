"""The character-count embedder: counts of a corpus's most frequent characters.

Deterministic, offline and fast (a Numba kernel over UTF-8 bytes); good for
tests and as a passenger of hybrid retrieval, weak for meaning.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import _native  # noqa: F401  (the package must import before its submodules)
from .._native import embedding as _kernels
from .._native import readonly
from .._threads import PARALLEL_MIN_WORK, resolve_threads
from .._threads import threads as _threads
from ..errors import ConfigError, EmbedderError, NotFittedError
from ..text.utf8 import encode_utf8
from .base import Utf8Embedder

__all__ = ["DEFAULT_MAX_FEATURES", "CodepointCounter", "VocabularyEmbedder"]

_HELD_TEXTS = 16
"""Up to this many short texts (questions) embed on the calling thread with the GIL kept.

A microsecond kernel that released the GIL would hand it to another caller
thread and queue to get it back (:data:`fastrag._native._jit.held_kernel`).
"""

DEFAULT_MAX_FEATURES = 1024
"""Default cap on the vocabulary (columns of a :class:`VocabularyEmbedder`).

A Chinese corpus has thousands of distinct characters; every column costs
4 bytes per chunk in memory and in every exact search. See BENCHMARKS.md
("Vocabulary size") for the quality and speed measured at each cap on
CMRC 2018.
"""


@functools.lru_cache(maxsize=1)
def _lowercase_map() -> tuple[tuple[int, str], ...]:
    """Every code point whose lower case is one different character: ``(cp, lower)``.

    Cased scripts all lie below U+1F000 (Adlam, U+1E900, is the last).
    """
    out = []
    for cp in range(0x1F000):
        ch = chr(cp)
        low = ch.lower()
        if low != ch and len(low) == 1:
            out.append((cp, low))
    return tuple(out)


def fold_case(ch: str) -> str:
    """The lower case of ``ch`` when that is one character, else ``ch`` itself."""
    low = ch.lower()
    return low if len(low) == 1 else ch


class VocabularyEmbedder(Utf8Embedder):
    """Character-count vectors over a vocabulary learnt from the corpus.

    Each text becomes the counts of the vocabulary's characters, L2-normalised.
    Characters outside the vocabulary are ignored; a text with none of them
    embeds to the zero vector (never NaN). The separating space is not a
    feature (it would dominate every English vector), and with
    ``lowercase=True`` upper- and lower-case forms share a column.

    Parameters
    ----------
    max_features : int or None, default DEFAULT_MAX_FEATURES
        Keep only the most frequent characters (ties broken by code point).
        ``None`` keeps every distinct character.
    lowercase : bool, default True
        Fold case: ``"A"`` counts as ``"a"``.
    vocabulary : str, optional
        A ready vocabulary (the characters of the columns, in order); the
        embedder is then fitted already.
    """

    kind = "vocabulary"
    """Character counts (:data:`~fastrag.embed.base.EMBEDDER_KINDS`)."""

    def __init__(
        self,
        max_features: int | None = DEFAULT_MAX_FEATURES,
        *,
        lowercase: bool = True,
        vocabulary: str | None = None,
    ) -> None:
        if max_features is not None and (
            isinstance(max_features, bool) or not isinstance(max_features, int) or max_features < 1
        ):
            raise ConfigError(f"max_features must be a positive int or None, got {max_features!r}")
        if not isinstance(lowercase, bool):
            raise ConfigError(f"lowercase must be a bool, got {lowercase!r}")
        self.max_features = max_features
        self.lowercase = lowercase
        self._vocabulary: str | None = None
        self._table: np.ndarray | None = None
        if vocabulary is not None:
            self._set_vocabulary(vocabulary)

    # -- state ---------------------------------------------------------------
    @property
    def fitted(self) -> bool:
        """Whether the vocabulary is known."""
        return self._vocabulary is not None

    @property
    def vocabulary(self) -> str:
        """The characters of the columns, in column order."""
        if self._vocabulary is None:
            raise NotFittedError("VocabularyEmbedder is not fitted: call fit(texts) first")
        return self._vocabulary

    @property
    def dim(self) -> int:
        """Number of columns (the vocabulary size)."""
        return len(self.vocabulary)

    def _set_vocabulary(self, vocabulary: str) -> None:
        if not isinstance(vocabulary, str) or not vocabulary:
            raise ConfigError("vocabulary must be a non-empty string of distinct characters")
        if len(set(vocabulary)) != len(vocabulary):
            raise ConfigError("vocabulary holds a character twice")
        if self.max_features is not None and len(vocabulary) > self.max_features:
            raise ConfigError(
                f"vocabulary has {len(vocabulary)} characters, more than max_features="
                f"{self.max_features}"
            )
        codes = np.frombuffer(vocabulary.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        columns = np.arange(codes.size, dtype=np.int32)
        if self.lowercase:
            # Every character whose lower case is a vocabulary character shares its column.
            column_of = {ch: col for col, ch in enumerate(vocabulary)}
            extra = [
                (cp, column_of[low])
                for cp, low in _lowercase_map()
                if low in column_of and chr(cp) not in column_of
            ]
            if extra:
                pairs = np.array(extra, dtype=np.int64)
                codes = np.concatenate([codes, pairs[:, 0]])
                columns = np.concatenate([columns, pairs[:, 1].astype(np.int32)])
        table = np.full(int(codes.max()) + 1, -1, dtype=np.int32)
        table[codes] = columns
        table.flags.writeable = False
        self._vocabulary = vocabulary
        self._table = table

    # -- fitting -------------------------------------------------------------
    @staticmethod
    def count_utf8(data: np.ndarray, lo: int, hi: int, *, threads: int | None = None) -> np.ndarray:
        """Count the code points of ``data[lo:hi]`` (UTF-8): an int64 histogram of 0x110000."""
        counter = CodepointCounter(threads=threads if hi - lo >= (1 << 20) else 1)
        counter.add(data, lo, hi)
        return counter.total()

    def fit_counts(self, counts: np.ndarray) -> VocabularyEmbedder:
        """Fit the vocabulary from a code-point histogram (see :meth:`count_utf8`).

        Parameters
        ----------
        counts : numpy.ndarray
            int64 array of length 0x110000; ``counts[cp]`` occurrences of ``cp``.

        Returns
        -------
        VocabularyEmbedder
            ``self``, fitted.
        """
        counts = np.asarray(counts, dtype=np.int64)
        present = np.flatnonzero(counts)
        folded: dict[int, int] = {}
        for cp in present.tolist():
            ch = chr(cp)
            if ch.isspace():
                continue
            if self.lowercase:
                ch = fold_case(ch)
            key = ord(ch)
            folded[key] = folded.get(key, 0) + int(counts[cp])
        if not folded:
            raise EmbedderError("cannot fit a vocabulary: the texts hold no non-space character")
        order = sorted(folded.items(), key=lambda kv: (-kv[1], kv[0]))
        if self.max_features is not None:
            order = order[: self.max_features]
        self._set_vocabulary("".join(chr(cp) for cp, _ in order))
        return self

    def fit(self, texts: Iterable[str], *, threads: int | None = None) -> VocabularyEmbedder:
        """Learn the vocabulary from texts (streamed in batches; any iterable).

        Parameters
        ----------
        texts : iterable of str
            The corpus (or the chunks that will be embedded).
        threads : int, optional
            Numba threads for counting.

        Returns
        -------
        VocabularyEmbedder
            ``self``, fitted.
        """
        if isinstance(texts, str):
            raise ConfigError("fit() takes an iterable of texts, not one string")
        counter = CodepointCounter(threads=threads)
        batch: list[str] = []
        size = 0
        for text in texts:
            batch.append(text)
            size += len(text) if isinstance(text, str) else 0
            if size >= (8 << 20):
                counter.add(*_span(batch))
                batch, size = [], 0
        if batch:
            counter.add(*_span(batch))
        return self.fit_counts(counter.total())

    # -- embedding -----------------------------------------------------------
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
            Writable float32 ``(n, dim)`` C-contiguous array to fill (for
            example a slice of a larger matrix); allocated when omitted.
        threads : int, optional
            Numba threads.

        Returns
        -------
        numpy.ndarray
            float32 ``(n, dim)``, rows L2-normalised or zero.
        """
        table = self._table
        if table is None:
            raise NotFittedError("VocabularyEmbedder is not fitted: call fit(texts) first")
        n = offsets.size - 1
        if out is None:
            out = np.empty((n, self.dim), dtype=np.float32)
        elif (
            out.dtype != np.float32
            or out.shape != (n, self.dim)
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ConfigError(
                f"out must be a writable C-contiguous float32 array of shape {(n, self.dim)}"
            )
        if n:
            work = int(offsets[-1] - offsets[0]) + n * self.dim * 4
            if threads is None and n <= _HELD_TEXTS and work < PARALLEL_MIN_WORK:
                _kernels.embed_counts_held(readonly(data), readonly(offsets), table, out)
            else:
                with _threads(threads, work=work):
                    _kernels.embed_counts(readonly(data), readonly(offsets), table, out)
        return out

    # -- persistence ---------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """JSON-serialisable configuration, vocabulary included."""
        vocab = self.vocabulary
        return {
            "type": "vocabulary",
            "max_features": self.max_features,
            "lowercase": self.lowercase,
            "dim": len(vocab),
            "vocabulary": vocab,
            "vocabulary_sha256": hashlib.sha256(vocab.encode("utf-8")).hexdigest(),
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> VocabularyEmbedder:
        """Rebuild an embedder from :meth:`config` output."""
        try:
            emb = cls(
                config["max_features"],
                lowercase=config["lowercase"],
                vocabulary=config["vocabulary"],
            )
        except (KeyError, TypeError) as exc:
            raise EmbedderError(f"invalid vocabulary embedder configuration: {exc!r}") from exc
        expected = config.get("vocabulary_sha256")
        if expected is not None and emb.config()["vocabulary_sha256"] != expected:
            raise EmbedderError("vocabulary does not match its recorded sha256")
        return emb

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, VocabularyEmbedder):
            return NotImplemented
        return (self.max_features, self.lowercase, self._vocabulary) == (
            other.max_features,
            other.lowercase,
            other._vocabulary,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable: fit() changes it

    def __repr__(self) -> str:
        state = f"dim={self.dim}" if self.fitted else "unfitted"
        return (
            f"VocabularyEmbedder(max_features={self.max_features}, "
            f"lowercase={self.lowercase}, {state})"
        )


def _span(texts: list[str]) -> tuple[np.ndarray, int, int]:
    data, offsets = encode_utf8(texts)
    return data, int(offsets[0]), int(offsets[-1])


class CodepointCounter:
    """Code-point histogram of a stream of UTF-8 batches (for fitting a vocabulary).

    Parameters
    ----------
    threads : int, optional
        Slices counted in parallel per batch (one histogram row each).
    """

    def __init__(self, *, threads: int | None = None) -> None:
        self._threads = resolve_threads(threads)
        self._hists = np.zeros((self._threads, 0x110000), dtype=np.int64)

    def add(self, data: np.ndarray, lo: int, hi: int) -> None:
        """Count the code points of ``data[lo:hi]`` (valid UTF-8, whole code points)."""
        if hi > lo:
            with _threads(self._threads):
                _kernels.count_codepoints(readonly(data), int(lo), int(hi), self._hists)

    def total(self) -> np.ndarray:
        """The histogram so far: int64 ``(0x110000,)``."""
        return self._hists.sum(axis=0)
