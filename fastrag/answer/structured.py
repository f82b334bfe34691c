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

Validation uses the ``jsonschema`` package when it is installed (imported on
first use, any draft it supports), and otherwise a built-in validator of the
common subset: ``type`` (one or a list; ``integer`` accepts ``3.0``, booleans
are never numbers), ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties`` (false or a schema), ``items`` (one schema),
``minItems`` / ``maxItems``, ``minimum`` / ``maximum`` /
``exclusiveMinimum`` / ``exclusiveMaximum`` (numbers), ``minLength`` /
``maxLength``. Other keywords (``$ref``, ``anyOf``, ``pattern``, ``format``,
...) are ignored by the built-in validator; install ``jsonschema`` to have
them checked.

Only generators with a model can do this: :func:`check_schema_support`
rejects :class:`~fastrag.ExtractiveGenerator` and anything without
``chat(messages, **params)``.
"""

from __future__ import annotations

import math
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
    "builtin_validate",
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


_JSON_TYPES = {
    dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
    int: "integer", float: "number",
}  # fmt: skip


def _type_name(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not (
            isinstance(value, float) and math.isnan(value)
        )
    raise ConfigError(f"unknown JSON Schema type {name!r}")


def _check(value: Any, schema: Any, path: list[Any], problems: list[str]) -> None:
    if len(problems) >= _MAX_PROBLEMS or schema is True or schema is None:
        return
    if schema is False:
        problems.append(f"{_path(path)}: no value is allowed here")
        return
    if not isinstance(schema, Mapping):
        raise ConfigError(f"schema at {_path(path)} must be an object or a boolean")
    where = _path(path)
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_is_type(value, n) for n in names):
            want = " or ".join(names)
            problems.append(f"{where}: expected {want}, got {_type_name(value)}")
            return
    if "enum" in schema and not any(_equal(value, e) for e in schema["enum"]):
        problems.append(f"{where}: {value!r} is not one of {list(schema['enum'])!r}")
    if "const" in schema and not _equal(value, schema["const"]):
        problems.append(f"{where}: {value!r} is not {schema['const']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, ok, words in (
            ("minimum", lambda v, b: v >= b, "below the minimum"),
            ("maximum", lambda v, b: v <= b, "above the maximum"),
            ("exclusiveMinimum", lambda v, b: v > b, "not above the exclusive minimum"),
            ("exclusiveMaximum", lambda v, b: v < b, "not below the exclusive maximum"),
        ):
            bound = schema.get(key)
            if (
                isinstance(bound, (int, float))
                and not isinstance(bound, bool)
                and not ok(value, bound)
            ):
                problems.append(f"{where}: {value!r} is {words} {bound!r}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{where}: shorter than minLength {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than maxLength {schema['maxLength']}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(f"{where}: fewer than minItems {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(f"{where}: more than maxItems {schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, (Mapping, bool)):
            for i, item in enumerate(value):
                _check(item, items, [*path, i], problems)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key in schema.get("required") or ():
            if key not in value:
                problems.append(f"{where}: missing required property {key!r}")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _check(item, props[key], [*path, key], problems)
            elif extra is False:
                problems.append(f"{where}: additional property {key!r} is not allowed")
            elif isinstance(extra, Mapping):
                _check(item, extra, [*path, key], problems)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but True != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def builtin_validate(data: Any, schema: Mapping[str, Any]) -> list[str]:
    """Validate ``data`` against ``schema`` with the built-in subset (see the module docstring).

    Parameters
    ----------
    data : object
        Parsed JSON.
    schema : mapping
        A JSON Schema.

    Returns
    -------
    list of str
        Problems, each as ``"<JSON path>: <what is wrong>"`` (at most 5);
        empty when ``data`` matches.

    Raises
    ------
    ConfigError
        When the schema is not an object or names an unknown type.
    """
    problems: list[str] = []
    _check(data, schema, [], problems)
    return problems


def validate_json(data: Any, schema: Mapping[str, Any]) -> list[str]:
    """Validate ``data`` against ``schema``: with ``jsonschema`` if installed, else built in.

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
        When the schema itself is invalid.
    """
    js = _jsonschema()
    if js is None:
        return builtin_validate(data, schema)
    cls = js.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except js.exceptions.SchemaError as exc:
        raise ConfigError(f"invalid JSON Schema: {exc.message}") from exc
    errors = sorted(cls(schema).iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(list(e.absolute_path))}: {e.message}" for e in errors[:_MAX_PROBLEMS]]


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
