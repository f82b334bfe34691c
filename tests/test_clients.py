"""OpenAIChatGenerator, OpenAIEmbedder, ClientConfig and the HTTP machinery.

Most tests drive a real OpenAI-compatible server on 127.0.0.1 (tests/openai_server.py);
a few error paths use httpx.MockTransport.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import pickle
import socket

import httpx
import numpy as np
import orjson
import pytest
from openai_server import CHAT, EMBED, OpenAIServer, Reply, embedding_body, hashed_vector
from openai_server import openai_server as openai_server  # noqa: F401  (fixture)

from fastrag.answer.chat import OpenAIChatGenerator, is_not_found
from fastrag.answer.prompt import NOT_FOUND_EN, NOT_FOUND_ZH, SYSTEM_PROMPT
from fastrag.config import ClientConfig
from fastrag.embed.base import Embedder
from fastrag.embed.openai import OpenAIEmbedder
from fastrag.errors import (
    AuthenticationError,
    ConfigError,
    EmbedderError,
    EmbeddingResponseError,
    FastragError,
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
    RetryExhaustedError,
)
from fastrag.models.client import parse_retry_after
from fastrag.types import Generation, Hit

KEY = "sk-test-FAKE-KEY-0123456789abcdef"
ENV_VARS = (
    "FASTRAG_BASE_URL",
    "FASTRAG_API_KEY",
    "FASTRAG_CHAT_MODEL",
    "FASTRAG_EMBED_MODEL",
    "FASTRAG_CONNECT_TIMEOUT",
    "FASTRAG_READ_TIMEOUT",
    "FASTRAG_MAX_RETRIES",
    "FASTRAG_MAX_CONCURRENCY",
)

HITS = [
    Hit(0, "leave", 0, 0, 60, "Employees receive 15 days of paid annual leave per year.", 0.9),
    Hit(1, "expense", 0, 0, 50, "Expense reports are due within 15 days.", 0.5),
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)


def fast_config(base_url: str, model: str = "test-chat", **kw: object) -> ClientConfig:
    """Small timeouts and backoff so that retries cost milliseconds."""
    values: dict[str, object] = {
        "api_key": KEY,
        "read_timeout": 5.0,
        "connect_timeout": 2.0,
        "max_retries": 2,
        "backoff_base": 0.001,
        "backoff_cap": 0.01,
        "trust_env": False,
    }
    values.update(kw)
    return ClientConfig(base_url=base_url, model=model, **values)  # type: ignore[arg-type]


def chat_gen(server: OpenAIServer, **kw: object) -> OpenAIChatGenerator:
    return OpenAIChatGenerator(config=fast_config(server.base_url, **kw))


def embedder(
    server: OpenAIServer, *, batch_size: int = 256, dim: int | None = None, **kw: object
) -> OpenAIEmbedder:
    cfg = fast_config(server.base_url, model="test-embed", **kw)
    return OpenAIEmbedder(config=cfg, batch_size=batch_size, dim=dim)


def assert_no_key(*texts: object) -> None:
    for text in texts:
        assert KEY not in str(text)


def assert_error_is_clean(exc: BaseException) -> None:
    assert_no_key(str(exc), repr(exc), exc.args)
    assert isinstance(exc, FastragError)


# --------------------------------------------------------------------------- config
def test_config_from_env_and_arguments_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FASTRAG_BASE_URL", "https://models.example/v1/")
    monkeypatch.setenv("FASTRAG_API_KEY", KEY)
    monkeypatch.setenv("FASTRAG_CHAT_MODEL", "chat-env")
    monkeypatch.setenv("FASTRAG_EMBED_MODEL", "embed-env")
    monkeypatch.setenv("FASTRAG_READ_TIMEOUT", "7.5")
    monkeypatch.setenv("FASTRAG_MAX_RETRIES", "5")
    cfg = ClientConfig.from_env()
    assert cfg.base_url == "https://models.example/v1"
    assert (cfg.model, cfg.api_key, cfg.read_timeout, cfg.max_retries) == ("chat-env", KEY, 7.5, 5)
    assert ClientConfig.from_env(model_env="FASTRAG_EMBED_MODEL").model == "embed-env"
    over = ClientConfig.from_env(model="chat-arg", max_retries=0, base_url=None)
    assert (over.model, over.max_retries) == ("chat-arg", 0)
    assert over.base_url == "https://models.example/v1"
    gen = OpenAIChatGenerator(model="chat-arg2", timeout=1.5)
    emb = OpenAIEmbedder()
    try:
        assert (gen.model, gen.client_config.read_timeout) == ("chat-arg2", 1.5)
        assert emb.model == "embed-env"
    finally:
        gen.close()
        emb.close()


def test_config_missing_values_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="FASTRAG_BASE_URL"):
        OpenAIChatGenerator(model="m")
    with pytest.raises(ConfigError, match="FASTRAG_CHAT_MODEL"):
        OpenAIChatGenerator("http://127.0.0.1:1/v1")
    with pytest.raises(ConfigError, match="FASTRAG_EMBED_MODEL"):
        OpenAIEmbedder("http://127.0.0.1:1/v1")
    monkeypatch.setenv("FASTRAG_MAX_RETRIES", "many")
    with pytest.raises(ConfigError, match="FASTRAG_MAX_RETRIES"):
        ClientConfig.from_env(base_url="http://h/v1", model="m")
    monkeypatch.setenv("FASTRAG_MAX_RETRIES", "-1")
    with pytest.raises(ConfigError, match="FASTRAG_MAX_RETRIES"):
        ClientConfig.from_env(base_url="http://h/v1", model="m")


@pytest.mark.parametrize(
    "kw",
    [
        {"base_url": "ftp://h/v1"},
        {"base_url": "not a url"},
        {"model": ""},
        {"read_timeout": 0},
        {"connect_timeout": math.inf},
        {"max_retries": -1},
        {"max_retries": 1.5},
        {"max_concurrency": 0},
        {"backoff_base": -1.0},
        {"jitter": "yes"},
    ],
)
def test_config_rejects_bad_values(kw: dict[str, object]) -> None:
    values: dict[str, object] = {"base_url": "http://h/v1", "model": "m"}
    values.update(kw)
    with pytest.raises(ConfigError):
        ClientConfig(**values)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown"):
        ClientConfig.from_env(base_url="http://h/v1", model="m", colour="blue")


def test_config_repr_masks_the_key() -> None:
    cfg = ClientConfig(base_url="https://user:pw@h.example/v1", model="m", api_key=KEY)
    assert "api_key='***'" in repr(cfg)
    assert_no_key(repr(cfg), str(cfg))
    assert "pw" not in repr(cfg)
    with pytest.raises(ConfigError) as info:
        ClientConfig(base_url="http://h/v1", model="m", api_key=KEY + " \n")
    assert_no_key(info.value)
    assert ClientConfig(base_url="http://h/v1", model="m", api_key="").api_key is None
    assert cfg.replace(model="n").model == "n" and cfg.replace(model="n").api_key == KEY


# --------------------------------------------------------------------------- chat
def test_chat_request_is_the_grounded_prompt(openai_server: OpenAIServer) -> None:
    with chat_gen(openai_server) as gen:
        out = gen("How many days of annual leave?", HITS)
    assert isinstance(out, Generation)
    (req,) = openai_server.requests
    assert (req.method, req.path) == ("POST", CHAT)
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["content-type"] == "application/json"
    body = req.body
    assert body["model"] == "test-chat" and body["temperature"] == 0.0
    system, user = body["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["role"] == "user"
    content = user["content"]
    assert content.startswith("【知识库】\n[1] Employees receive 15 days")
    assert f"\n---\n[2] {HITS[1].text}" in content
    assert content.endswith("\n\n【问题】\nHow many days of annual leave?")
    assert out.found is True
    assert out.citations == (1,)
    assert "[1]" in out.text and "15 days" in out.text
    assert out.prompt == content
    assert out.model == "test-chat"
    assert out.usage["total_tokens"] > 0


def test_chat_options_and_low_level_chat(openai_server: OpenAIServer) -> None:
    openai_server.chat_answer = "pong"
    gen = OpenAIChatGenerator(
        config=fast_config(openai_server.base_url),
        temperature=0.3,
        max_tokens=64,
        extra_body={"seed": 7},
    )
    with gen:
        text, usage = gen.chat([{"role": "user", "content": "ping"}], stop=["\n"], temperature=None)
    assert text == "pong" and "total_tokens" in usage
    body = openai_server.requests[0].body
    assert body["max_tokens"] == 64 and body["seed"] == 7 and body["stop"] == ["\n"]
    assert "temperature" not in body
    with pytest.raises(ConfigError):
        gen.chat([])
    with pytest.raises(ConfigError):
        OpenAIChatGenerator(config=fast_config(openai_server.base_url), temperature=5)


@pytest.mark.parametrize(
    ("question", "expected"),
    [("What is the VPN policy?", NOT_FOUND_EN), ("公司的差旅政策是什么？", NOT_FOUND_ZH)],
)
def test_no_hits_means_no_request(
    openai_server: OpenAIServer, question: str, expected: str
) -> None:
    with chat_gen(openai_server) as gen:
        out = gen(question, [])
        out_async = asyncio.run(gen.agenerate(question, []))
    assert out == out_async
    assert (out.text, out.found, out.citations, out.model) == (expected, False, (), None)
    assert openai_server.requests == []


@pytest.mark.parametrize(
    "answer", [NOT_FOUND_EN, NOT_FOUND_ZH, "知识库中没有找到相关信息。", "", "  "]
)
def test_model_saying_not_found(openai_server: OpenAIServer, answer: str) -> None:
    openai_server.chat_answer = answer
    with chat_gen(openai_server) as gen:
        out = gen("What is the VPN policy?", HITS)
    assert out.found is False
    assert out.citations == ()
    assert out.text == (answer.strip() or NOT_FOUND_EN)


@pytest.mark.parametrize(
    "text",
    [
        NOT_FOUND_EN,
        NOT_FOUND_ZH,
        "the knowledge base does not contain this information",
        "The knowledge base does not contain an answer to this question. [1]",
        "Unfortunately, the provided passages do not mention the VPN policy.",
        "The passages don't say when the office opens.",
        "There is no information about parking in the knowledge base.",
        "I cannot find the answer in the context.",
        "I'm sorry. I am unable to answer this from the given documents.",
        "This is not mentioned in the knowledge base.",
        "I don't know.",
        "知识库中没有提及差旅政策。",
        "根据提供的资料，没有找到相关信息。",
        "抱歉，无法回答这个问题。",
        "资料中并未包含该问题的答案。",
        "没有相关信息。",
    ],
)
def test_is_not_found_positive(text: str) -> None:
    assert is_not_found(text)


@pytest.mark.parametrize(
    "text",
    [
        "Employees receive 15 days of paid annual leave per year [1].",
        "Annual leave does not include public holidays.",
        "The knowledge base does not mention a cap, but [1] says requests need 3 days' notice.",
        "Passwords must be at least 12 characters long.",
        "年假不包括法定节假日。",
        "年假申请需提前3天提交[1]。",
        "If the receipt cannot be found, ask finance for a duplicate.",
        "No, employees cannot carry leave over [2].",
    ],
)
def test_is_not_found_negative(text: str) -> None:
    assert not is_not_found(text)


def test_agenerate_and_bounded_concurrency(openai_server: OpenAIServer) -> None:
    openai_server.latency = 0.02
    gen = chat_gen(openai_server, max_concurrency=2)

    async def main() -> list[Generation]:
        async with gen:
            outs = await asyncio.gather(*(gen.agenerate(f"question {i}?", HITS) for i in range(6)))
            text, _ = await gen.achat([{"role": "user", "content": "hi"}])
            assert text
            return list(outs)

    outs = asyncio.run(main())
    assert all(o.found and o.citations == (1,) for o in outs)
    assert len(openai_server.requests_to(CHAT)) == 7
    assert openai_server.max_in_flight <= 2
    sent = openai_server.requests[:6]
    questions = {r.body["messages"][1]["content"].rsplit("\n", 1)[1] for r in sent}
    assert questions == {f"question {i}?" for i in range(6)}


# --------------------------------------------------------------------------- embeddings
def test_embeddings_batched_ordered_normalised(openai_server: OpenAIServer) -> None:
    openai_server.reverse_embeddings = True
    texts = ["alpha", "beta", "gamma delta", "年假申请", "epsilon"]
    with embedder(openai_server, batch_size=2) as emb:
        vectors = emb.embed(texts)
        assert emb.dim == 8
        assert isinstance(emb, Embedder)  # (reading dim before the first answer raises)
        cfg = emb.config()
    reqs = openai_server.requests_to(EMBED)
    assert len(reqs) == 3
    assert sorted(tuple(r.body["input"]) for r in reqs) == [
        ("alpha", "beta"),
        ("epsilon",),
        ("gamma delta", "年假申请"),
    ]
    assert all(r.body["model"] == "test-embed" for r in reqs)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in reqs)
    assert vectors.dtype == np.float32 and vectors.shape == (5, 8) and vectors.flags.c_contiguous
    expected = np.array([hashed_vector(t, 8) for t in texts])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)
    assert cfg == {
        "type": "openai",
        "model": "test-embed",
        "dim": 8,
        "base_url": openai_server.base_url,
    }
    assert_no_key(cfg, orjson.dumps(cfg), repr(emb))


def test_embedding_edge_cases(openai_server: OpenAIServer) -> None:
    with embedder(openai_server, dim=8) as emb:
        empty = emb.embed([])
        assert empty.shape == (0, 8) and empty.dtype == np.float32
        assert openai_server.requests == []
        out = emb.embed(["", "abc", ""])
        assert np.all(out[[0, 2]] == 0) and np.isclose(np.linalg.norm(out[1]), 1.0)
        assert openai_server.requests[0].body["input"] == ["abc"]
        with pytest.raises(ConfigError):
            emb.embed("a single string")  # type: ignore[arg-type]
    unknown = embedder(openai_server)
    with pytest.raises(EmbedderError, match="dim"):
        unknown.embed([])
    with pytest.raises(EmbedderError, match="dim"):
        _ = unknown.dim
    # A zero vector from the server stays zero (no NaN).
    openai_server.enqueue(Reply(body=embedding_body([[0.0, 0.0], [3.0, 4.0]])))
    with unknown:
        zero = unknown.embed(["x", "y"])
    np.testing.assert_array_equal(zero, np.array([[0, 0], [0.6, 0.8]], dtype=np.float32))


@pytest.mark.parametrize(
    ("vectors", "bad", "match"),
    [
        ([[1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0]], 3, "3 values, expected 2"),
        ([[1.0, 0.0], [math.nan, 1.0], [0.0, 1.0]], 3, "NaN"),
        ([[1.0, 0.0], [0.0, 1.0], [math.inf, 1.0]], 4, "NaN, infinite"),
        ([[1.0, 0.0], [0.0, 1.0], [1e39, 1.0]], 4, "infinite"),
        ([[1.0, 0.0], [0.0, "x"], [1.0, 1.0]], 3, "non-numeric"),
    ],
)
def test_bad_vectors_name_the_index(
    openai_server: OpenAIServer, vectors: list[list[object]], bad: int, match: str
) -> None:
    openai_server.enqueue(Reply(body=embedding_body(vectors)))
    with embedder(openai_server) as emb, pytest.raises(EmbeddingResponseError, match=match) as info:
        emb.embed(["", "", "a", "b", "c"])  # empty texts are not sent: item j is text j + 2
    exc = info.value
    assert exc.index == bad and f"input {bad}" in str(exc)
    assert isinstance(exc, EmbedderError) and isinstance(exc, ModelResponseError)
    assert_error_is_clean(exc)


def test_wrong_size_against_a_known_dim(openai_server: OpenAIServer) -> None:
    with embedder(openai_server, dim=4) as emb, pytest.raises(EmbeddingResponseError) as info:
        emb.embed(["a", "b"])
    assert info.value.index == 0 and "expected 4" in str(info.value)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b'{"object": "list"}', "no 'data'"),
        (b'{"data": [{"index": 0}, {"index": 1}]}', "no 'embedding'"),
        (b'{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [1]}]}', "index"),
        (b'{"data": [{"index": 0, "embedding": [1]}]}', "1 embeddings for 2 inputs"),
        (
            b'{"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]}',
            "not a list",
        ),
        (b"[1, 2]", "JSON list"),
        (b"<html>bad gateway</html>", "not valid JSON"),
    ],
)
def test_malformed_embedding_answers(openai_server: OpenAIServer, body: bytes, match: str) -> None:
    openai_server.enqueue(Reply(body=body))
    with embedder(openai_server) as emb, pytest.raises(ModelResponseError, match=match) as info:
        emb.embed(["a", "b"])
    assert_error_is_clean(info.value)
    assert len(openai_server.requests) == 1  # not retried


def test_aembed_matches_embed(openai_server: OpenAIServer) -> None:
    texts = [f"text number {i}" for i in range(7)]
    openai_server.latency = 0.01
    emb = embedder(openai_server, batch_size=2, max_concurrency=2)

    async def main() -> np.ndarray:
        async with emb:
            return await emb.aembed(texts)

    got = asyncio.run(main())
    assert len(openai_server.requests) == 4 and openai_server.max_in_flight <= 2
    with emb:
        np.testing.assert_array_equal(got, emb.embed(texts))


def test_aembed_failure_cancels_and_raises(openai_server: OpenAIServer) -> None:
    emb = embedder(openai_server, batch_size=1, dim=8, max_retries=0)
    openai_server.fail(400, path=EMBED)

    async def main() -> None:
        async with emb:
            await emb.aembed(["a", "b", "c"])

    with pytest.raises(ModelError, match="HTTP 400"):
        asyncio.run(main())


def test_sync_embed_runs_batches_concurrently(openai_server: OpenAIServer) -> None:
    openai_server.latency = 0.05
    with embedder(openai_server, batch_size=1, dim=8, max_concurrency=3) as emb:
        out = emb.embed([f"t{i}" for i in range(6)])
    assert out.shape == (6, 8)
    assert 1 <= openai_server.max_in_flight <= 3


# --------------------------------------------------------------------------- errors and retries
def test_401_is_not_retried_and_key_not_leaked(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.api_key = "sk-the-right-one"
    caplog.set_level(logging.DEBUG)
    with chat_gen(openai_server, max_retries=3) as gen, pytest.raises(AuthenticationError) as info:
        gen("q?", HITS)
    exc = info.value
    assert exc.status == 401 and exc.attempts == 1
    assert len(openai_server.requests) == 1
    assert "rejected the API key" in str(exc) and "***" in str(exc)  # the echoed key is scrubbed
    assert_error_is_clean(exc)
    assert_no_key(caplog.text, repr(gen))
    openai_server.fail(403)
    with embedder(openai_server) as emb, pytest.raises(AuthenticationError) as info403:
        emb.embed(["x"])
    assert info403.value.status == 403
    assert_error_is_clean(info403.value)


def test_no_key_sent_when_none_configured(openai_server: OpenAIServer) -> None:
    openai_server.api_key = "sk-needed"
    with chat_gen(openai_server, api_key=None) as gen:
        with pytest.raises(AuthenticationError, match="no API key"):
            gen("q?", HITS)
    assert "authorization" not in openai_server.requests[0].headers


def test_429_retry_after_is_honoured(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.fail(429, retry_after="0.05")
    caplog.set_level(logging.WARNING, logger="fastrag.models.client")
    with chat_gen(openai_server) as gen:
        out = gen("q?", HITS)
    assert out.found
    first, second = openai_server.requests
    assert second.time - first.time >= 0.05
    assert "HTTP 429" in caplog.text and "retry 1 of 2" in caplog.text
    assert_no_key(caplog.text)


def test_500_then_success(openai_server: OpenAIServer) -> None:
    openai_server.fail(500, path=EMBED)
    openai_server.fail(503, path=EMBED)
    with embedder(openai_server) as emb:
        out = emb.embed(["a", "b"])
    assert out.shape == (2, 8)
    assert len(openai_server.requests) == 3


def test_500_forever_exhausts_the_budget(
    openai_server: OpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    openai_server.fail(500, times=10, message=f"internal error for key {KEY}")
    caplog.set_level(logging.DEBUG)
    with chat_gen(openai_server, max_retries=2) as gen, pytest.raises(RetryExhaustedError) as info:
        gen("q?", HITS)
    exc = info.value
    assert type(exc) is RetryExhaustedError
    assert (exc.status, exc.attempts) == (500, 3)
    assert "HTTP 500" in str(exc) and "3 attempts" in str(exc)
    assert len(openai_server.requests) == 3
    assert_error_is_clean(exc)
    assert_no_key(caplog.text)


def test_429_forever_is_a_rate_limit_error(openai_server: OpenAIServer) -> None:
    openai_server.fail(429, times=10, retry_after="0")
    with chat_gen(openai_server, max_retries=1) as gen, pytest.raises(RateLimitError) as info:
        gen.chat([{"role": "user", "content": "hi"}])
    assert info.value.status == 429 and info.value.attempts == 2


def test_other_4xx_fail_at_once(openai_server: OpenAIServer) -> None:
    openai_server.fail(404, message="model not found")
    with chat_gen(openai_server) as gen, pytest.raises(ModelError, match="model not found") as info:
        gen("q?", HITS)
    assert type(info.value) is ModelError and info.value.status == 404
    assert "/v1" in str(info.value)
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"choices": []}', "no 'choices'"),
        (b'{"choices": [{"message": {"role": "assistant"}}]}', r"choices\[0\]\.message\.content"),
        (b'{"error": {"message": "overloaded"}}', "overloaded"),
    ],
)
def test_malformed_chat_answers(openai_server: OpenAIServer, body: bytes, match: str) -> None:
    openai_server.enqueue(Reply(body=body), path=CHAT)
    with chat_gen(openai_server) as gen, pytest.raises(ModelResponseError, match=match) as info:
        gen("q?", HITS)
    assert_error_is_clean(info.value)


def test_server_that_never_answers_times_out(openai_server: OpenAIServer) -> None:
    openai_server.hang(times=2)
    with chat_gen(openai_server, read_timeout=0.2, max_retries=1) as gen:
        with pytest.raises(ModelTimeoutError) as info:
            gen("q?", HITS)
    exc = info.value
    assert isinstance(exc, TimeoutError) and isinstance(exc, RetryExhaustedError)
    assert exc.status is None and exc.attempts == 2
    assert "read timeout of 0.2 s" in str(exc)
    assert isinstance(exc.__cause__, httpx.ReadTimeout)
    assert len(openai_server.requests) == 2


def test_async_errors(openai_server: OpenAIServer) -> None:
    openai_server.fail(500)
    openai_server.hang()
    openai_server.fail(401)
    gen = chat_gen(openai_server, read_timeout=0.2, max_retries=1)

    async def main() -> None:
        async with gen:
            with pytest.raises(ModelTimeoutError):
                await gen.agenerate("q?", HITS)
            with pytest.raises(AuthenticationError) as info:
                await gen.achat([{"role": "user", "content": "hi"}])
            assert_error_is_clean(info.value)
            assert (await gen.agenerate("q?", HITS)).found

    asyncio.run(main())
    assert len(openai_server.requests) == 4


def test_connection_refused_is_retried_then_exhausted() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = fast_config(f"http://127.0.0.1:{port}/v1", max_retries=1)
    with OpenAIChatGenerator(config=cfg) as gen:
        with pytest.raises(RetryExhaustedError) as info:
            gen("q?", HITS)
    assert info.value.status is None and info.value.attempts == 2
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert_error_is_clean(info.value)


# --------------------------------------------------------------------------- MockTransport
def test_transport_errors_map_at_the_boundary() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.RemoteProtocolError("server hung up", request=request)
        if len(calls) == 2:
            return httpx.Response(502, text="bad gateway", headers={"retry-after-ms": "1"})
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok [1]"}}]})

    transport = httpx.MockTransport(handler)
    gen = OpenAIChatGenerator(config=fast_config("http://mock/v1"), transport=transport)
    with gen:
        out = gen("q?", HITS)
    assert (out.text, out.citations, out.model, out.usage) == ("ok [1]", (1,), "test-chat", {})
    assert str(calls[0].url) == "http://mock/v1/chat/completions"
    assert calls[0].headers["authorization"] == f"Bearer {KEY}"

    def broken(request: httpx.Request) -> httpx.Response:
        raise httpx.UnsupportedProtocol("no such scheme", request=request)

    bad = OpenAIChatGenerator(
        config=fast_config("http://mock/v1"), transport=httpx.MockTransport(broken)
    )

    async def main() -> None:
        async with bad:
            await bad.achat([{"role": "user", "content": "x"}])

    with pytest.raises(ModelError, match="UnsupportedProtocol") as info:
        asyncio.run(main())
    assert type(info.value) is ModelError
    assert isinstance(info.value.__cause__, httpx.UnsupportedProtocol)


def test_retry_delays_use_full_jitter_and_retry_after() -> None:
    from fastrag.models.client import _Failure

    gen = OpenAIChatGenerator(
        config=ClientConfig(
            base_url="http://h/v1",
            model="m",
            backoff_base=1.0,
            backoff_cap=4.0,
            max_retry_after=2.0,
        ),
        transport=httpx.MockTransport(lambda r: httpx.Response(500)),
    )
    plain = _Failure(reason="x")
    for retry, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (10, 4.0)]:
        delays = [gen._retry_delay(retry, plain) for _ in range(50)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1
    assert gen._retry_delay(0, _Failure(reason="x", retry_after=1.5)) >= 1.5
    assert gen._retry_delay(0, _Failure(reason="x", retry_after=99.0)) <= 2.0 + 1e-9
    steady = OpenAIChatGenerator(
        config=ClientConfig(base_url="http://h/v1", model="m", jitter=False, backoff_base=0.5)
    )
    assert [steady._retry_delay(k, plain) for k in range(3)] == [0.5, 1.0, 2.0]


def test_parse_retry_after() -> None:
    now = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
    assert parse_retry_after({"Retry-After": "0.05"}) == 0.05
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "-3"}) == 0.0
    assert parse_retry_after({"Retry-After": "Thu, 01 Jan 2026 12:00:30 GMT"}, now=now) == 30.0
    assert parse_retry_after({"Retry-After": "Thu, 01 Jan 2026 11:00:00 GMT"}, now=now) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "nan"}) is None
    assert parse_retry_after({}) is None


# --------------------------------------------------------------------------- hygiene
def test_reprs_and_pickles_hold_no_key_in_text(openai_server: OpenAIServer) -> None:
    gen = chat_gen(openai_server)
    emb = embedder(openai_server)
    for obj in (gen, emb, gen.client_config, emb.client_config):
        assert_no_key(repr(obj), str(obj))
    assert "OpenAIChatGenerator(model='test-chat'" in repr(gen)
    with gen:
        gen("q?", HITS)  # opens the client; pickling must still work
        clone = pickle.loads(pickle.dumps(gen))
    with clone:
        assert clone("q?", HITS).found
    assert clone.client_config == gen.client_config


def test_clients_reopen_after_close(openai_server: OpenAIServer) -> None:
    gen = chat_gen(openai_server)
    gen("q?", HITS)
    gen.close()
    gen.close()  # idempotent
    gen("q?", HITS)
    gen.close()
    assert len(openai_server.requests) == 2


def test_sharded_async_transport_spreads_requests_over_small_pools():
    import asyncio

    import httpx
    from openai_server import OpenAIServer

    from fastrag.models.client import ShardedAsyncTransport

    with OpenAIServer() as server:
        server.latency = 0.05

        async def run() -> tuple[list[int], list[int]]:
            transport = ShardedAsyncTransport(16, per_pool=4)
            async with httpx.AsyncClient(transport=transport, base_url=server.base_url) as client:
                body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
                responses = await asyncio.gather(
                    *(client.post("chat/completions", json=body) for _ in range(32))
                )
                pools = [len(p._pool._connections) for p in transport._pools]
            return [r.status_code for r in responses], pools

        statuses, pools = asyncio.run(run())
    assert statuses == [200] * 32
    assert len(pools) == 4 and all(1 <= n <= 4 for n in pools)  # every pool was used, none beyond 4
    assert server.max_in_flight <= 16
