"""Structured answers: ask a chat model for JSON that matches a JSON Schema, and check it.

:func:`answer_json` sends the grounded prompt of :mod:`fastrag.answer.prompt` with an
instruction to reply with one JSON object matching the schema, and asks the
server to enforce it with ``response_format``:

1. ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}``
   (OpenAI structured outputs; vLLM, llama.cpp and others accept it too);
2. if the server rejects that form with a 4xx other than 401/403/408/429, the
   same request again with ``{"type": "json_object"}`` (JSON mode), and that
   form for the rest of the call.

The reply is parsed (a code fence around it is tolerated) and validated. When
it is not valid JSON or does not match, the problem is put back into the
conversation and the model asked again, up to ``max_retries`` times; then
:class:`~fastrag.errors.StructuredOutputError` names the last problem.

Validation uses the ``jsonschema`` package (imported on first use, any draft
it supports, every keyword: ``$ref``, ``anyOf``, ``pattern``, ...): install
it with ``pip install "fastrag-engine[schema]"``; without it a ``schema=``
call fails at once with a :class:`~fastrag.errors.ConfigError` saying so,
rather than checking a subset and letting the rest pass.

Only generators with a model can do this: :func:`check_schema_support`
rejects :class:`~fastrag.ExtractiveGenerator` and anything without
``chat(messages, **params)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ..errors import (
    AuthenticationError,
    ConfigError,
    ModelError,
    RetryExhaustedError,
    StructuredOutputError,
)
from ..types import Hit
from .generate import ExtractiveGenerator
from .prompt import SYSTEM_PROMPT, build_user_message

__all__ = [
    "StructuredAnswer",
    "answer_json",
    "require_jsonschema",
    "check_schema_support",
    "validate_json",
]

_MODES = ("auto", "json_schema", "json_object", "prompt")
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_MAX_PROBLEMS = 5


@dataclass(frozen=True, slots=True)
class StructuredAnswer:
    """A reply that matches the schema.

    Attributes
    ----------
    data : object
        The parsed JSON (usually a dict).
    raw : str
        The model's reply as sent.
    attempts : int
        Replies requested, the accepted one included (1 when the first
        reply was valid).
    response_format : str
        How the server was asked: ``"json_schema"``, ``"json_object"`` or
        ``"prompt"`` (no ``response_format``).
    """

    data: Any
    raw: str
    attempts: int
    response_format: str = "json_schema"


def check_schema_support(generator: Any) -> None:
    """Raise unless ``generator`` can answer in a JSON Schema (it needs a chat model).

    Parameters
    ----------
    generator : object
        The generator to check.

    Raises
    ------
    ConfigError
        For :class:`~fastrag.ExtractiveGenerator` (it has no model and can
        only quote sentences) and for anything without a callable
        ``chat(messages, **params)``.
    """
    if isinstance(generator, ExtractiveGenerator):
        raise ConfigError(
            "ExtractiveGenerator cannot answer in a JSON Schema: it has no model and only quotes "
            "sentences; use OpenAIChatGenerator (or any object with chat(messages, **params))"
        )
    if not callable(getattr(generator, "chat", None)):
        raise ConfigError(
            f"structured answers need a chat model: {type(generator).__name__} has no "
            "chat(messages, **params) method; use OpenAIChatGenerator"
        )
    require_jsonschema()


# -- validation ------------------------------------------------------------------------------

_UNSET: Any = object()
_jsonschema_module: Any = _UNSET


def _jsonschema() -> Any:
    """The ``jsonschema`` module, or ``None`` when it is not installed (looked up once)."""
    global _jsonschema_module
    if _jsonschema_module is _UNSET:
        try:
            import jsonschema
        except ImportError:
            jsonschema = None
        _jsonschema_module = jsonschema
    return _jsonschema_module


def _path(parts: Sequence[Any]) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def validate_json(data: Any, schema: Mapping[str, Any]) -> list[str]:
    """Validate ``data`` against ``schema`` with ``jsonschema`` (every keyword, ``$ref`` included).

    Parameters
    ----------
    data : object
        Parsed JSON.
    schema : mapping
        A JSON Schema.

    Returns
    -------
    list of str
        Problems as ``"<JSON path>: <message>"`` (at most 5); empty when
        ``data`` matches.

    Raises
    ------
    ConfigError
        When the schema itself is invalid, or ``jsonschema`` is not installed.
    """
    js = require_jsonschema()
    cls = js.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except js.exceptions.SchemaError as exc:
        raise ConfigError(f"invalid JSON Schema: {exc.message}") from exc
    errors = sorted(cls(schema).iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(list(e.absolute_path))}: {e.message}" for e in errors[:_MAX_PROBLEMS]]


def require_jsonschema() -> Any:
    """The ``jsonschema`` module, or a :class:`ConfigError` saying how to install it."""
    js = _jsonschema()
    if js is None:
        raise ConfigError(
            "structured answers (schema=) are validated with jsonschema: pip install "
            '"fastrag-engine[schema]"'
        )
    return js


# -- answering -------------------------------------------------------------------------------


def _parse(raw: str) -> tuple[Any, str | None]:
    """``(data, None)`` or ``(None, problem)`` for a reply."""
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        return orjson.loads(text), None
    except orjson.JSONDecodeError as exc:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                return orjson.loads(text[start : end + 1]), None
            except orjson.JSONDecodeError:
                pass
        return None, f"the reply is not valid JSON ({exc})"


def _schema_rejected(exc: Exception) -> bool:
    """Whether a chat error means "this server does not take the json_schema form"."""
    return (
        isinstance(exc, ModelError)
        and not isinstance(exc, (AuthenticationError, RetryExhaustedError))
        and exc.status is not None
        and 400 <= exc.status < 500
        and exc.status not in (401, 403, 408, 429)
    )


def answer_json(
    chat_generator: Any,
    question: str,
    hits: Sequence[Hit],
    schema: Mapping[str, Any],
    *,
    max_retries: int = 1,
    name: str = "answer",
    mode: str = "auto",
) -> StructuredAnswer:
    """Answer ``question`` from ``hits`` as JSON that matches ``schema``.

    Parameters
    ----------
    chat_generator : object
        An :class:`~fastrag.OpenAIChatGenerator`, or any object with
        ``chat(messages, **params) -> (text, usage)``.
    question : str
        The question.
    hits : sequence of Hit
        The sources, shown as ``[1]``, ``[2]``, ... under 【知识库】.
    schema : mapping
        A JSON Schema for the reply. Let it express "not in the knowledge
        base" (a nullable field, a ``found`` flag): the model is told never
        to guess.
    max_retries : int, default 1
        Further replies requested after an invalid one, each with the
        problem in the conversation.
    name : str, default "answer"
        Schema name sent with ``json_schema`` (letters, digits, ``_``, ``-``).
    mode : str, default "auto"
        ``"auto"`` (``json_schema``, falling back to ``json_object`` if the
        server rejects it), ``"json_schema"``, ``"json_object"``, or
        ``"prompt"`` (no ``response_format``; the instruction only).

    Returns
    -------
    StructuredAnswer
        The data, the raw reply, the replies requested and the format used.

    Raises
    ------
    ConfigError
        For a generator without a chat model (see
        :func:`check_schema_support`), a schema that is not an object, or
        a bad option.
    StructuredOutputError
        When the last reply is still invalid; the message, ``.problem``,
        ``.raw`` and ``.attempts`` say why.
    ModelError
        As raised by the chat call (other than the schema-form rejection
        that ``"auto"`` handles).
    """
    check_schema_support(chat_generator)
    if not isinstance(schema, Mapping):
        raise ConfigError(
            f"schema must be a JSON Schema object (a mapping), got {type(schema).__name__}"
        )
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigError(f"max_retries must be a non-negative int, got {max_retries!r}")
    if mode not in _MODES:
        raise ConfigError(f"mode must be one of {list(_MODES)}, got {mode!r}")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"name must be 1-64 letters, digits, _ or -, got {name!r}")
    schema_text = orjson.dumps(dict(schema)).decode()
    messages: list[dict[str, str]] = [
        {
            "role": "system",
            "content": f"{SYSTEM_PROMPT}\n- Reply with one JSON object only, no prose and no code "
            f"fence, matching this JSON Schema:\n{schema_text}",
        },
        {"role": "user", "content": build_user_message(question, hits)},
    ]
    fmt = "json_schema" if mode == "auto" else mode
    formats: dict[str, Any] = {
        "json_schema": {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": dict(schema)},
        },
        "json_object": {"type": "json_object"},
    }
    attempts = 0
    raw = ""
    problem = ""
    for _ in range(max_retries + 1):
        while True:
            params = {"response_format": formats[fmt]} if fmt in formats else {}
            try:
                raw, _usage = chat_generator.chat(messages, **params)
                break
            except Exception as exc:
                if mode == "auto" and fmt == "json_schema" and _schema_rejected(exc):
                    fmt = "json_object"
                    continue
                raise
        attempts += 1
        if not isinstance(raw, str):
            raise StructuredOutputError(
                f"the chat model returned {type(raw).__name__}, not text",
                problem="no text",
                attempts=attempts,
            )
        data, problem_or_none = _parse(raw)
        if problem_or_none is None:
            problems = validate_json(data, schema)
            if not problems:
                return StructuredAnswer(data, raw, attempts, fmt)
            problem = "; ".join(problems)
        else:
            problem = problem_or_none
        messages = [
            *messages,
            {"role": "assistant", "content": raw},
            {
                "role": "user",
                "content": f"That reply does not match the JSON Schema: {problem}. Reply again "
                "with only the corrected JSON object.",
            },
        ]
    plural = "s" if attempts != 1 else ""
    raise StructuredOutputError(
        f"no reply matched the JSON Schema after {attempts} attempt{plural}: {problem}",
        problem=problem,
        raw=raw,
        attempts=attempts,
    )
