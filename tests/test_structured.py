from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from openai_server import CHAT, OpenAIServer

import fastrag.answer.structured as structured
from fastrag.answer.chat import OpenAIChatGenerator
from fastrag.answer.generate import ExtractiveGenerator
from fastrag.answer.structured import (
    StructuredAnswer,
    answer_json,
    check_schema_support,
    validate_json,
)
from fastrag.config import ClientConfig
from fastrag.errors import (
    AuthenticationError,
    ConfigError,
    GenerationError,
    StructuredOutputError,
)
from fastrag.types import Hit

SCHEMA = {
    "type": "object",
    "properties": {
        "days": {"type": "integer", "minimum": 1, "maximum": 365},
        "unit": {"enum": ["days", "working days"]},
        "citations": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    },
    "required": ["days", "unit", "citations"],
    "additionalProperties": False,
}
HITS = [Hit(1, "leave", 0, 0, 56, "Employees receive 15 days of paid annual leave per year.", 1.0)]
QUESTION = "How many days of annual leave?"
GOOD = '{"days": 15, "unit": "days", "citations": [1]}'


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as s:
        yield s


def chat_gen(server: OpenAIServer) -> OpenAIChatGenerator:
    config = ClientConfig(
        base_url=server.base_url, model="m", api_key=None, max_retries=0, read_timeout=5.0,
        connect_timeout=2.0, trust_env=False,
    )  # fmt: skip
    return OpenAIChatGenerator(config=config)


def scripted(*replies: str):
    queue = list(replies)

    def reply(body: dict) -> str:
        return queue.pop(0)

    return reply


# -- against the local OpenAI-compatible server ---------------------------------------------------


def test_success_first_time(server):
    server.chat_answer = scripted(GOOD)
    with chat_gen(server) as gen:
        out = answer_json(gen, QUESTION, HITS, SCHEMA)
    assert out == StructuredAnswer(
        {"days": 15, "unit": "days", "citations": [1]}, GOOD, 1, "json_schema"
    )
    (req,) = server.requests_to(CHAT)
    fmt = req.body["response_format"]
    assert fmt == {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}
    system, user = req.body["messages"]
    assert (
        "JSON Schema" in system["content"]
        and json.dumps(SCHEMA, separators=(",", ":")) in system["content"]
    )
    assert user["content"].startswith("【知识库】\n[1] Employees receive 15 days")


def test_one_retry_then_success(server):
    server.chat_answer = scripted('{"days": "fifteen", "unit": "days", "citations": [1]}', GOOD)
    with chat_gen(server) as gen:
        out = answer_json(gen, QUESTION, HITS, SCHEMA)
    assert out.data["days"] == 15 and out.attempts == 2
    first, second = server.requests_to(CHAT)
    assert len(second.body["messages"]) == 4
    assistant, feedback = second.body["messages"][2:]
    assert assistant == {
        "role": "assistant",
        "content": '{"days": "fifteen", "unit": "days", "citations": [1]}',
    }
    assert "$.days: " in feedback["content"] and "integer" in feedback["content"]


def test_failure_after_the_retry(server):
    server.chat_answer = scripted(
        "The answer is 15 days.", '{"days": 15, "unit": "weeks", "citations": []}'
    )
    with chat_gen(server) as gen, pytest.raises(StructuredOutputError) as info:
        answer_json(gen, QUESTION, HITS, SCHEMA)
    err = info.value
    assert isinstance(err, GenerationError)
    assert err.attempts == 2 and err.raw == '{"days": 15, "unit": "weeks", "citations": []}'
    assert "$.unit: 'weeks' is not one of ['days', 'working days']" in str(err)
    assert "$.citations: " in err.problem
    assert len(server.requests_to(CHAT)) == 2


def test_retry_messages_name_the_problem(server):
    server.chat_answer = scripted('{"days": 15, "unit": "days"}', GOOD)
    with chat_gen(server) as gen:
        assert answer_json(gen, QUESTION, HITS, SCHEMA).attempts == 2
    feedback = server.requests_to(CHAT)[1].body["messages"][-1]["content"]
    assert "citations" in feedback and "required" in feedback


def test_no_retries(server):
    server.chat_answer = scripted("not json")
    with chat_gen(server) as gen, pytest.raises(StructuredOutputError, match="not valid JSON"):
        answer_json(gen, QUESTION, HITS, SCHEMA, max_retries=0)
    assert len(server.requests_to(CHAT)) == 1


def test_falls_back_to_json_object_when_the_schema_form_is_rejected(server):
    server.fail(400, path=CHAT, message="response_format json_schema is not supported")
    server.chat_answer = scripted(f"```json\n{GOOD}\n```")
    with chat_gen(server) as gen:
        out = answer_json(gen, QUESTION, HITS, SCHEMA)
    assert out.response_format == "json_object" and out.attempts == 1 and out.data["days"] == 15
    rejected, accepted = server.requests_to(CHAT)
    assert rejected.body["response_format"]["type"] == "json_schema"
    assert accepted.body["response_format"] == {"type": "json_object"}


def test_auth_errors_are_not_taken_for_a_rejected_schema(server):
    server.fail(401, path=CHAT)
    with chat_gen(server) as gen, pytest.raises(AuthenticationError):
        answer_json(gen, QUESTION, HITS, SCHEMA)
    assert len(server.requests_to(CHAT)) == 1


@pytest.mark.parametrize(
    ("mode", "expected"), [("json_object", {"type": "json_object"}), ("prompt", None)]
)
def test_modes(server, mode, expected):
    server.chat_answer = scripted(GOOD)
    with chat_gen(server) as gen:
        out = answer_json(gen, QUESTION, HITS, SCHEMA, mode=mode)
    assert out.response_format == mode
    assert server.requests_to(CHAT)[0].body.get("response_format") == expected


def test_json_schema_mode_does_not_fall_back(server):
    server.fail(400, path=CHAT)
    with chat_gen(server) as gen, pytest.raises(Exception, match="HTTP 400"):
        answer_json(gen, QUESTION, HITS, SCHEMA, mode="json_schema")


# -- support and configuration --------------------------------------------------------------------


def test_extractive_generator_declines():
    with pytest.raises(ConfigError, match="ExtractiveGenerator cannot answer in a JSON Schema"):
        check_schema_support(ExtractiveGenerator())
    with pytest.raises(ConfigError, match="ExtractiveGenerator"):
        answer_json(ExtractiveGenerator(), QUESTION, HITS, SCHEMA)
    with pytest.raises(ConfigError, match="no chat"):
        check_schema_support(lambda q, hits: "text")


def test_any_object_with_chat_works():
    class Chat:
        def chat(self, messages, **params):
            return GOOD, {}

    check_schema_support(Chat())
    assert answer_json(Chat(), QUESTION, HITS, SCHEMA).data["days"] == 15


@pytest.mark.parametrize(
    "kwargs",
    [
        {"schema": "not a schema"},
        {"max_retries": -1},
        {"max_retries": True},
        {"mode": "xml"},
        {"name": "bad name!"},
    ],
)
def test_bad_options(kwargs):
    class Chat:
        def chat(self, messages, **params):
            return GOOD, {}

    args = {"schema": SCHEMA, **kwargs}
    schema = args.pop("schema")
    with pytest.raises(ConfigError):
        answer_json(Chat(), QUESTION, HITS, schema, **args)


# -- validation -----------------------------------------------------------------------------------


def test_validation_covers_every_keyword():
    # $ref, anyOf and pattern: a hand-written subset used to let these through.
    schema = {
        "$defs": {"day": {"type": "integer", "minimum": 1}},
        "type": "object",
        "properties": {
            "days": {"$ref": "#/$defs/day"},
            "unit": {"anyOf": [{"const": "days"}, {"const": "weeks"}]},
            "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
        },
        "required": ["days"],
    }
    assert validate_json({"days": 3, "unit": "days", "code": "SV432"}, schema) == []
    problems = validate_json({"days": 0, "unit": "months", "code": "sv432"}, schema)
    assert [p.split(":")[0] for p in problems] == ["$.code", "$.days", "$.unit"]


def test_without_jsonschema_a_schema_call_says_what_to_install(monkeypatch, server):
    monkeypatch.setattr(structured, "_jsonschema_module", None)
    with pytest.raises(ConfigError, match=r"fastrag-engine\[schema\]"):
        validate_json({"days": "x"}, SCHEMA)
    with chat_gen(server) as gen, pytest.raises(ConfigError, match="jsonschema"):
        answer_json(gen, QUESTION, HITS, SCHEMA)
    assert server.requests_to(CHAT) == []  # refused before any model call


def test_validate_json_with_jsonschema_if_installed():
    js = pytest.importorskip("jsonschema")
    assert js is not None
    problems = validate_json({"days": "x", "unit": "days", "citations": [1]}, SCHEMA)
    assert problems and problems[0].startswith("$.days: ")
    with pytest.raises(ConfigError):
        validate_json({}, {"type": 5})
