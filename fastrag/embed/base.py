"""The embedder protocol, and the checks every embedding passes through.

An embedder turns texts into L2-normalised float32 vectors of ``dim``
columns and describes itself with a JSON-serialisable ``config()`` that is
saved in the knowledge-base manifest. Models trained for retrieval often
embed a question and a passage differently (e5: ``query: `` / ``passage: ``
prefixes; some servers take an ``input_type`` field), so the protocol has
two sides:

- ``embed_documents(texts)`` for chunks, ``embed_queries(texts)`` for
  questions; an embedder that defines only ``embed(texts)`` is symmetric and
  serves both;
- an embedder with ``embed_utf8(data, offsets, *, out=None, threads=None)``
  embeds texts in the Arrow string layout without Python strings (the
  kernel embedders); it is used for both sides when present.

:func:`document_vectors` and :func:`query_vectors` are what the layers above
call: they pick the side, then check the shape, reject NaN and infinity,
and L2-normalise. Indexing and querying must use the same embedder: a
knowledge base compares configurations (:func:`check_embedder_matches`) and
raises :class:`~fastrag.errors.EmbedderMismatchError` when they differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import ConfigError, EmbedderError, EmbedderMismatchError
from ..text.utf8 import encode_utf8

__all__ = [
    "Embedder",
    "check_embedder",
    "check_embedder_matches",
    "EMBEDDER_KINDS",
    "document_vectors",
    "embedder_files",
    "embedder_kind",
    "query_vectors",
    "Utf8Embedder",
    "utf8_embedder",
]


@runtime_checkable
class Embedder(Protocol):
    """What fastrag needs of an embedder.

    That is ``embed``, or both ``embed_documents`` and ``embed_queries``.
    """

    @property
    def dim(self) -> int:
        """Number of columns of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return a float32 ``(len(texts), dim)`` matrix of L2-normalised rows."""
        ...

    def config(self) -> dict[str, Any]:
        """Return a JSON-serialisable description, with a ``"type"`` key."""
        ...


EMBEDDER_KINDS = ("vocabulary", "static", "model")
"""What an embedder's vectors are, for the defaults that depend on it (fusion weights).

``"vocabulary"``: character counts; ``"static"``: a static table; ``"model"``:
a model's dense vectors. An embedder class declares its own as a ``kind``
class attribute; one without (any user embedder) is a ``"model"``.
"""


def embedder_kind(embedder: object) -> str:
    """The ``kind`` its class declares (one of :data:`EMBEDDER_KINDS`), else ``"model"``."""
    kind = getattr(type(embedder), "kind", None)
    return kind if isinstance(kind, str) and kind in EMBEDDER_KINDS else "model"


def check_embedder(embedder: object) -> None:
    """Raise :class:`ConfigError` unless ``embedder`` looks like an :class:`Embedder`.

    Checked on the class: reading ``dim`` of an unfitted embedder would raise.
    """
    cls = type(embedder)
    sides = callable(getattr(cls, "embed", None)) or (
        callable(getattr(cls, "embed_documents", None))
        and callable(getattr(cls, "embed_queries", None))
    )
    if not (sides and callable(getattr(cls, "config", None)) and hasattr(cls, "dim")):
        raise ConfigError(
            "embedder must provide embed(texts) (or embed_documents(texts) and "
            f"embed_queries(texts)), dim and config(); got {type(embedder).__name__}"
        )


class _EmbedsUtf8(Protocol):
    def embed_utf8(
        self, data: np.ndarray, offsets: np.ndarray, *, threads: int | None = None
    ) -> np.ndarray: ...


class Utf8Embedder:
    """Base of the embedders whose kernel reads UTF-8 buffers: ``embed(texts)`` over ``embed_utf8``.

    A subclass defines ``embed_utf8(data, offsets, *, threads=None)``
    (uint8 bytes and int64 offsets, the Arrow layout); the texts of
    :meth:`embed` are encoded once and handed to it.
    """

    __slots__ = ()

    def embed(self: _EmbedsUtf8, texts: Sequence[str], *, threads: int | None = None) -> np.ndarray:
        """Embed texts (both sides: the embedding is symmetric).

        Parameters
        ----------
        texts : sequence of str
            The texts.
        threads : int, optional
            Numba threads.

        Returns
        -------
        numpy.ndarray
            float32 ``(len(texts), dim)``, rows L2-normalised or zero.

        Raises
        ------
        ConfigError
            ``texts`` is one string, not a sequence of them.
        """
        if isinstance(texts, str):
            raise ConfigError("embed() takes a sequence of texts; wrap one text in a list")
        data, offsets = encode_utf8(texts)
        return self.embed_utf8(data, offsets, threads=threads)


def utf8_embedder(embedder: object) -> Any:
    """The embedder itself when it embeds UTF-8 buffers in a kernel (``embed_utf8``), else None."""
    return embedder if callable(getattr(type(embedder), "embed_utf8", None)) else None


def _validated(embedder: Any, vectors: Any, n: int) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != n or vectors.shape[1] < 1:
        raise EmbedderError(f"embedder returned shape {vectors.shape} for {n} texts")
    try:
        dim = embedder.dim
    except EmbedderError:  # an HTTP embedder learns its size from its first answer
        dim = vectors.shape[1]
    if vectors.shape[1] != dim:
        raise EmbedderError(f"embedder returned shape {vectors.shape}, expected {(n, dim)}")
    if not np.isfinite(vectors).all():
        raise EmbedderError("embedder returned non-finite values")
    if not vectors.flags.writeable:
        vectors = vectors.copy()
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


def _side(embedder: Any, texts: Sequence[str], name: str, threads: int | None) -> np.ndarray:
    kernel = utf8_embedder(embedder)
    if kernel is not None:
        data, offsets = encode_utf8(texts)
        return kernel.embed_utf8(data, offsets, threads=threads)  # type: ignore[no-any-return]
    method = getattr(embedder, name, None)
    fn = method if callable(method) else embedder.embed
    return _validated(embedder, fn(list(texts)), len(texts))


def document_vectors(
    embedder: Any, texts: Sequence[str], *, threads: int | None = None
) -> np.ndarray:
    """Embed chunk texts (``embed_documents``, else ``embed``): checked, L2-normalised float32.

    Parameters
    ----------
    embedder : Embedder
        The embedder.
    texts : sequence of str
        The texts.
    threads : int, optional
        Threads of a kernel embedder.

    Returns
    -------
    numpy.ndarray
        float32 ``(len(texts), dim)``, C-contiguous, writable.

    Raises
    ------
    EmbedderError
        On a wrongly shaped answer or a NaN/infinite value.
    """
    return _side(embedder, texts, "embed_documents", threads)


def query_vectors(embedder: Any, texts: Sequence[str], *, threads: int | None = None) -> np.ndarray:
    """Embed questions (``embed_queries``, else ``embed``); as :func:`document_vectors`.

    Parameters
    ----------
    embedder : Embedder
        The embedder.
    texts : sequence of str
        The questions.
    threads : int, optional
        Threads of a kernel embedder.

    Returns
    -------
    numpy.ndarray
        float32 ``(len(texts), dim)``.
    """
    return _side(embedder, texts, "embed_queries", threads)


def embedder_files(embedder: object) -> dict[str, Any]:
    """Files an embedder saves in each knowledge-base snapshot: name -> ``write(path) -> info``.

    An embedder with weights of its own (a static table) lists them in
    ``snapshot_files()``; :func:`fastrag.embed.registry.embedder_from_config`
    gets the snapshot directory back to read them.
    """
    files = getattr(embedder, "snapshot_files", None)
    return dict(files()) if callable(files) else {}


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    # The vocabulary itself is represented by its hash; secrets never appear in configs.
    return {k: v for k, v in config.items() if k != "vocabulary"}


def check_embedder_matches(expected: dict[str, Any], embedder: Embedder) -> None:
    """Raise :class:`EmbedderMismatchError` unless ``embedder`` is configured as ``expected``.

    Parameters
    ----------
    expected : dict
        The configuration the knowledge base was built with.
    embedder : Embedder
        The embedder offered for querying.
    """
    got = _comparable(embedder.config())
    want = _comparable(expected)
    # A value the embedder does not know yet (an HTTP embedder's dim before its
    # first answer) is not a difference; the vectors' shape is checked later.
    diffs = sorted(
        k for k in set(got) | set(want) if got.get(k) is not None and got.get(k) != want.get(k)
    )
    if diffs:
        detail = ", ".join(f"{k}: built with {want.get(k)!r}, given {got.get(k)!r}" for k in diffs)
        raise EmbedderMismatchError(
            "the embedder differs from the one this knowledge base was built with ("
            + detail
            + "); query with the same embedder and vocabulary, or rebuild"
        )
