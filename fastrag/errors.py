"""Exceptions raised by fastrag.

Every exception fastrag raises derives from :class:`FastragError`, so one
``except FastragError`` catches them all. Errors about bad input also derive
from :class:`ValueError` (or :class:`KeyError` / :class:`TypeError` where that
is the natural builtin), so existing ``except ValueError`` code keeps working.
Foreign exceptions (pyarrow, hnswlib, OS errors) are translated where they
cross into fastrag, with the original chained as ``__cause__``.

::

    FastragError
    ├── ConfigError (ValueError)             bad parameter: window, k, threads, ...
    │   └── OntologyError                    an ontology is malformed
    │       ├── DuplicateAliasError          one alias (or name) for two entities
    │       └── UnknownRelationTargetError   a relation to an entity not defined
    ├── DocumentError (ValueError)           a document is malformed
    │   ├── DuplicateDocumentError           an id seen twice, or already stored
    │   └── SourceError                      a file, page or database query cannot be read
    │       ├── SourceLimitError             ... it is over a cap (size, ratio, text, pages, time)
    │       ├── SourceRefusedError           ... reading it is not allowed (a private address,
    │       │                                    a symlink out of the folder, a database write)
    │       └── SqlQueryError                a SqlTool query is refused or fails to run
    ├── DocumentNotFoundError (KeyError)     delete() of an id that is not stored
    ├── MissingDependencyError (ImportError) an optional extra is not installed
    │   └── OcrUnavailableError              a page needs OCR and Tesseract (or its data) is missing
    ├── EmbedderError                        an embedder failed or gave bad vectors
    │   ├── EmbedderMismatchError (ValueError)  query embedder differs from the index's
    │   └── NotFittedError                   VocabularyEmbedder used before fit()
    ├── StoreError                           reading or writing a knowledge base failed
    │   ├── StoreNotFoundError (FileNotFoundError)
    │   │   └── SnapshotNotFoundError        no kept snapshot has the id or tag asked for
    │   ├── StoreCorruptedError              a file is truncated, corrupt or inconsistent
    │   └── StoreVersionError                written by an incompatible fastrag
    ├── SearchIndexError                     a search index (HNSW, BM25) failed
    ├── GenerationError                      a generator failed or returned no answer
    │   └── StructuredOutputError            no reply matched the JSON Schema, even after retries
    ├── StageTimeoutError (TimeoutError)     a stage or fallback level missed its deadline
    ├── RequestError (ValueError)            fastrag serve: a request is malformed or not allowed
    └── ModelError                           a call to a model server failed
        ├── AuthenticationError              the server rejected the API key (401/403)
        ├── ModelResponseError               malformed answer: bad JSON, missing field
        │   └── EmbeddingResponseError (EmbedderError)  wrong vector size, NaN/inf
        └── RetryExhaustedError              429/5xx/timeouts outlasted the retries
            ├── RateLimitError               ... and the last answer was 429
            └── ModelTimeoutError (TimeoutError)  ... and the last attempt timed out
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "ConfigError",
    "DocumentError",
    "DocumentNotFoundError",
    "DuplicateAliasError",
    "DuplicateDocumentError",
    "EmbedderError",
    "EmbedderMismatchError",
    "EmbeddingResponseError",
    "FastragError",
    "MissingDependencyError",
    "GenerationError",
    "ModelError",
    "ModelResponseError",
    "ModelTimeoutError",
    "NotFittedError",
    "OcrUnavailableError",
    "OntologyError",
    "RateLimitError",
    "RequestError",
    "RetryExhaustedError",
    "SearchIndexError",
    "SnapshotNotFoundError",
    "SourceError",
    "SourceLimitError",
    "SourceRefusedError",
    "SqlQueryError",
    "StageTimeoutError",
    "StoreCorruptedError",
    "StoreError",
    "StoreNotFoundError",
    "StoreVersionError",
    "StructuredOutputError",
    "UnknownRelationTargetError",
]


class FastragError(Exception):
    """Base class of every error fastrag raises."""


class ConfigError(FastragError, ValueError):
    """A parameter is out of range or of the wrong type."""


class OntologyError(ConfigError):
    """An ontology (entities, aliases, relations) is malformed."""


class DuplicateAliasError(OntologyError):
    """One alias or name stands for two entities, or an entity is defined twice."""


class UnknownRelationTargetError(OntologyError):
    """A relation points at an entity the ontology does not define."""


class DocumentError(FastragError, ValueError):
    """A document is malformed: missing or empty id, text that is not a string, ..."""


class DuplicateDocumentError(DocumentError):
    """A document id appears twice in one call, or is already in the knowledge base."""


class SourceError(DocumentError):
    """A source of documents (a file, a page, a database query) cannot be read or parsed.

    The message names the source and the reason: an encrypted or corrupt
    PDF, a PDF without a text layer, a query that fails or lacks a column.
    """


class SourceLimitError(SourceError):
    """A source is over one of the caps of :class:`~fastrag.store.loaders.LoadLimits`.

    A part or page too large, a compression ratio of a zip bomb, too much
    text, too many pages, a fetch past its deadline; the message names the
    source and the cap.
    """


class SourceRefusedError(SourceError):
    """Reading a source is not allowed: the message names it and why.

    A URL whose host resolves to a loopback, private, link-local or other
    non-public address (unless ``allow_private``), a symbolic link that
    leads out of the folder being indexed, a database query that would
    write or attach files.
    """


class SqlQueryError(SourceError):
    """A :class:`~fastrag.SqlTool` query was refused (not one allowed SELECT) or failed to run."""


class MissingDependencyError(FastragError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class OcrUnavailableError(MissingDependencyError):
    """A page or image needs OCR and Tesseract, or its language data, is not installed.

    The message names the page and says how to install it (or to turn OCR
    off with ``LoadLimits(ocr=False)``).
    """


class DocumentNotFoundError(FastragError, KeyError):
    """An operation names a document id the knowledge base does not hold."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class EmbedderError(FastragError):
    """An embedder failed, or returned vectors of the wrong shape or with non-finite values."""


class EmbedderMismatchError(EmbedderError, ValueError):
    """The embedder used for a query differs from the one the knowledge base was built with."""


class NotFittedError(EmbedderError, ValueError):
    """A :class:`~fastrag.VocabularyEmbedder` was used before :meth:`fit`."""


class StoreError(FastragError):
    """Reading or writing a knowledge base on disk failed."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """The path holds no knowledge base."""


class SnapshotNotFoundError(StoreNotFoundError):
    """No kept snapshot of the knowledge base has the id or tag a call names."""


class StoreCorruptedError(StoreError):
    """A knowledge-base file is truncated, corrupt, or inconsistent with the manifest."""


class StoreVersionError(StoreError):
    """The knowledge base was written in a format this fastrag cannot read."""


class SearchIndexError(FastragError):
    """A search index (HNSW, BM25) failed to build, load or answer."""


class ModelError(FastragError):
    """A call to a model server (chat, embeddings) failed.

    Messages name the request (method and URL) but never the API key.

    Parameters
    ----------
    message : str
        What went wrong.
    status : int, optional
        HTTP status of the (last) answer; ``None`` when no answer came.
    attempts : int, optional
        How many times the request was sent.
    url : str, optional
        The request's URL (credentials masked).

    Attributes
    ----------
    status, attempts, url
        As given.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        attempts: int | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.url = url


class AuthenticationError(ModelError):
    """The server rejected the API key (HTTP 401 or 403); never retried."""


class ModelResponseError(ModelError):
    """The server answered 2xx, but not with what the API promises.

    Invalid JSON, a missing or mistyped field (named in the message), or
    vectors that cannot be used.
    """


class EmbeddingResponseError(ModelResponseError, EmbedderError):
    """An embedding has the wrong number of values, or a NaN or infinite one.

    Attributes
    ----------
    index : int or None
        Position, in the texts passed to ``embed``, of the offending item.
    """

    def __init__(self, message: str, *, index: int | None = None, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.index = index


class RetryExhaustedError(ModelError):
    """Every attempt failed with a retryable error (429, 5xx, timeout, transport).

    ``status`` is the last HTTP status (``None`` when the last attempt got no
    answer) and ``attempts`` the number of requests sent; ``retry_after``
    the seconds the server last asked to wait, when it said.
    """

    retry_after: float | None = None


class RateLimitError(RetryExhaustedError):
    """The server kept answering 429 Too Many Requests until the retries ran out."""


class ModelTimeoutError(RetryExhaustedError, TimeoutError):
    """The server did not answer in time, on the last of the allowed attempts."""


class GenerationError(FastragError):
    """A generator failed or returned something that is not an answer."""


class StructuredOutputError(GenerationError):
    """A chat model's reply did not match the requested JSON Schema, even after the retries.

    Parameters
    ----------
    message : str
        What went wrong, naming the (last) validation problem.
    problem : str, optional
        The last validation problem alone, e.g. ``"$.days: expected integer, got string"``.
    raw : str, optional
        The model's last reply.
    attempts : int, optional
        How many replies were requested.

    Attributes
    ----------
    problem, raw, attempts
        As given.
    """

    def __init__(
        self,
        message: str,
        *,
        problem: str | None = None,
        raw: str | None = None,
        attempts: int | None = None,
    ) -> None:
        super().__init__(message)
        self.problem = problem
        self.raw = raw
        self.attempts = attempts


class StageTimeoutError(FastragError, TimeoutError):
    """A stage run with a deadline (an LLM judge, a fallback level) did not finish in time.

    The call is abandoned, not stopped; see :func:`fastrag.answer.stages.call_with_timeout`.
    """


class RequestError(FastragError, ValueError):
    """A request to ``fastrag serve`` is malformed, too large, unauthorised or names nothing known.

    The server answers it with ``status`` and the JSON body
    ``{"error": {"type": type, "message": message}}``.

    Parameters
    ----------
    message : str
        What is wrong, naming the field or value (never an API key).
    status : int, default 400
        The HTTP status of the answer.
    type : str, default "invalid_request"
        A stable, machine-readable name of the problem (``invalid_json``,
        ``unknown_option``, ``missing_field``, ``unknown_kb``, ...).
    headers : dict, optional
        Extra response headers (``Retry-After``, ``WWW-Authenticate``).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        type: str = "invalid_request",  # noqa: A002 - the wire name
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.headers = dict(headers or {})
