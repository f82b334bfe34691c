"""Request bodies of the HTTP API, validated with pydantic (strict: no silent coercion).

A body that is not JSON, has a field of the wrong type, lacks a required
field or carries one the endpoint does not know is refused with a
:class:`~fastrag.errors.RequestError` naming the field, before any engine
call. Bounds that depend on the server (``k``, batch sizes) are checked by
:func:`check_k` and :func:`check_batch`.

``k`` has one definition for the HTTP API and the MCP tools: the type
:data:`K` (a JSON integer, never a boolean, a string or a float) and
:func:`check_k`, which applies the engine's own rule
(:func:`fastrag.options.check_k`) with the server's ``max_k``.

Defaults are not written here: every field an option carries defaults to
the option's own default (:data:`fastrag.options.RETRIEVAL_DEFAULTS`,
:data:`~fastrag.options.ANSWER_DEFAULTS`, :data:`~fastrag.options.DEFAULT_K`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, Strict, ValidationError

from ..errors import ConfigError, RequestError
from ..options import ANSWER_DEFAULTS, DEFAULT_K, RETRIEVAL_DEFAULTS
from ..options import check_k as _engine_check_k

__all__ = [
    "AnswerBatchRequest",
    "AnswerRequest",
    "ChatMessage",
    "ChatRequest",
    "EmbeddingsRequest",
    "K",
    "MultimodalBody",
    "RetrieveBatchRequest",
    "RetrieveRequest",
    "SqlRequest",
    "parse",
]

Mode = Literal["hybrid", "vector", "keyword"]
K = Annotated[int, Strict()]
"""The type of ``k`` in every request body and MCP tool: an int, strictly (``true`` is refused)."""
AclStatistics = Literal["per_principal", "global"]
_M = TypeVar("_M", bound=BaseModel)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Retrieval(_Body):
    kb: str | None = None
    k: K = DEFAULT_K
    mode: Mode | None = None
    where: dict[str, Any] | None = None
    exact: bool = RETRIEVAL_DEFAULTS.exact
    rewrite: bool = RETRIEVAL_DEFAULTS.rewrite
    snapshot: str | None = Field(default=None, min_length=1, max_length=128)
    """A kept snapshot's id or tag to answer from (default: the served one)."""
    acl_statistics: AclStatistics | None = None


class MultimodalBody(_Body):
    """A request's ``multimodal`` object: what was seen besides the question.

    See :mod:`fastrag.serve.multimodal` (images base64, limits, errors).
    """

    captions: list[str] = []
    ocr_text: list[str] = []
    labels: list[str] = []
    images: list[str] = []
    ocr_languages: str | None = Field(default=None, min_length=1, max_length=200)


class RetrieveRequest(_Retrieval):
    """``POST /v1/retrieve``."""

    question: str = Field(min_length=1)
    group_by: Literal["doc"] | None = None
    multimodal: MultimodalBody | None = None


class RetrieveBatchRequest(_Retrieval):
    """``POST /v1/retrieve/batch``."""

    questions: list[str]
    group_by: Literal["doc"] | None = None


class _Answering(_Retrieval):
    stream: bool = False
    budget: int | None = Field(default=ANSWER_DEFAULTS.budget, ge=1)
    max_age_days: float | None = Field(default=ANSWER_DEFAULTS.max_age_days, ge=0)
    min_faithfulness: float = Field(default=ANSWER_DEFAULTS.min_faithfulness, ge=0.0, le=1.0)
    replace_unfaithful: bool = ANSWER_DEFAULTS.replace_unfaithful
    detect_conflicts: bool = True  # the rules (ANSWER_DEFAULTS.detect_conflicts); no callable here
    distill: Literal["extractive", "llm"] | None = None
    """``"llm"``: distilled by the server's ``--llm`` model (refused without one)."""

    def answer_options(self) -> dict[str, Any]:
        """The :class:`~fastrag.AnswerOptions` this request sets."""
        return {
            "budget": self.budget,
            "max_age_days": self.max_age_days,
            "min_faithfulness": self.min_faithfulness,
            "replace_unfaithful": self.replace_unfaithful,
            "detect_conflicts": self.detect_conflicts,
            "distill": self.distill,
        }


class SqlRequest(_Body):
    """``POST /v1/sql``: one read-only SELECT, named parameters (:class:`~fastrag.SqlTool`).

    The same object is the ``sql`` field of ``/v1/answer`` (and of
    ``/v1/answer/batch``): the server runs it with its SQL tool and the
    answer cites the rows beside the chunks. Rows are never taken from the
    request itself: a client's rows could cite the database for text it
    never held.
    """

    sql: str = Field(min_length=1)
    params: dict[str, str | int | float | bool | None] | None = None
    limit: int | None = Field(default=None, ge=1)


class AnswerRequest(_Answering):
    """``POST /v1/answer``; ``sql``: a query whose rows the answer cites (:class:`SqlRequest`)."""

    question: str = Field(min_length=1)
    multimodal: MultimodalBody | None = None
    sql: SqlRequest | None = None


class AnswerBatchRequest(_Answering):
    """``POST /v1/answer/batch``; ``sql``: one query for all questions, or one per question."""

    questions: list[str]
    sql: SqlRequest | list[SqlRequest | None] | None = None


class ChatMessage(BaseModel):
    """One OpenAI chat message (text content, or a list of text parts)."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None

    def text(self) -> str:
        """The message's text (text parts joined)."""
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        parts = []
        for i, part in enumerate(self.content):
            if part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise RequestError(
                    f"messages: content part {i} is of type {part.get('type')!r}; only text "
                    "parts are understood",
                    type="unsupported_content",
                )
            parts.append(part["text"])
        return "".join(parts)


class ChatRequest(_Body):
    """``POST /v1/chat/completions``: OpenAI's fields plus retrieval options.

    The retrieval options are ``k``, ``mode``, ``where`` and ``acl_statistics``.
    The fields that steer a model are accepted and ignored, since the answer
    comes from the knowledge base.
    """

    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    k: K = DEFAULT_K
    mode: Mode | None = None
    where: dict[str, Any] | None = None
    acl_statistics: AclStatistics | None = None
    n: int = 1
    # Accepted for compatibility; they do not change an answer drawn from the knowledge base.
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    user: str | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    store: bool | None = None
    parallel_tool_calls: bool | None = None


class EmbeddingsRequest(_Body):
    """``POST /v1/embeddings``: ``model`` names a knowledge base, whose embedder is used."""

    model: str
    input: str | list[str]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    input_type: Literal["query", "document"] = "query"
    user: str | None = None


_MESSAGES = {
    "missing": ("missing_field", " is required"),
    "extra_forbidden": ("unknown_option", " is not a known option"),
}


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "int", "float", "bool", "list[str]", "dict[str,any]", "none"):
            continue  # pydantic's union branch names, not fields
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def parse(model: type[_M], body: bytes) -> _M:
    """Validate a JSON body into ``model``, or raise a RequestError naming the first problem."""
    if not body.strip():
        raise RequestError("the request body is empty; send a JSON object", type="invalid_json")
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        kind = first["type"]
        if kind == "json_invalid":
            detail = first.get("ctx", {}).get("error", first["msg"])
            raise RequestError(
                f"the request body is not valid JSON: {detail}", type="invalid_json"
            ) from None
        if kind == "model_type" or (kind == "model_attributes_type" and not first["loc"]):
            raise RequestError(
                "the request body must be a JSON object", type="invalid_json"
            ) from None
        field = _where(tuple(first["loc"]))
        wire, text = _MESSAGES.get(kind, ("invalid_value", None))
        if text is None:
            wire = "wrong_type" if kind.endswith("_type") or kind.endswith("_parsing") else wire
            text = ": " + first["msg"][0].lower() + first["msg"][1:]
            if "input" in first and kind not in ("missing",):
                shown = repr(first["input"])
                text += f" (got {shown[:60]})"
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise RequestError(f"field {field!r} {text}{more}", type=wire) from None


def check_k(k: object, max_k: int) -> int:
    """``k`` by the engine's rule within ``1..max_k``, or a 400 naming the field.

    ``out_of_range`` for an int outside the bounds, ``wrong_type`` for
    anything else (a bool included).
    """
    try:
        return _engine_check_k(k, max_k)
    except ConfigError as exc:
        kind = "out_of_range" if isinstance(k, int) and not isinstance(k, bool) else "wrong_type"
        raise RequestError(f"field 'k': {exc}", type=kind) from None


def check_acl_statistics(value: str | None, keyed: bool) -> str | None:
    """``acl_statistics`` of a request: ``"global"`` is refused (403) to a keyed caller.

    Global keyword statistics let a caller with an ACL test words against the
    documents it may not read (a visible hit's score moves when a hidden
    document holds a query word), so only the trusted caller of a server
    without keys, who can read everything, may choose them.
    """
    if value == "global" and keyed:
        raise RequestError(
            "field 'acl_statistics': 'global' keyword statistics would let a caller learn "
            "which words the documents it may not read contain; a caller with an API key "
            "gets 'per_principal'",
            status=403,
            type="not_allowed",
        )
    return value


def check_batch(questions: list[str], max_batch: int) -> list[str]:
    """A non-empty batch of at most ``max_batch`` non-empty questions."""
    if not questions:
        raise RequestError(
            "field 'questions' must hold at least one question", type="invalid_value"
        )
    if len(questions) > max_batch:
        raise RequestError(
            f"field 'questions' holds {len(questions)} questions; at most {max_batch} per request",
            type="out_of_range",
        )
    for i, q in enumerate(questions):
        if not q.strip():
            raise RequestError(f"field 'questions[{i}]' is empty", type="invalid_value")
    return questions
