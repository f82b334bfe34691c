"""fastrag serve's OpenAI-compatible endpoints, driven by the official ``openai`` client."""

from __future__ import annotations

import time

import httpx
import numpy as np
import openai
import pytest
from conftest import DOCS
from openai_server import OpenAIServer
from serve_harness import ThreadServer, save_kb, sse_events

import fastrag
from fastrag.serve import ServeSettings

Q = "How many days in advance must annual leave requests be submitted?"


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return save_kb([dict(d) for d in DOCS], tmp_path_factory.mktemp("oa") / "policies")


@pytest.fixture(scope="module")
def server(kb_path):
    with ThreadServer(ServeSettings(kbs=(("policies", str(kb_path)),), reload_interval=0)) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0) as c:
        yield c


def test_chat_completion(client, kb_path):
    out = client.chat.completions.create(
        model="policies",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                  {"role": "assistant", "content": "hello"}, {"role": "user", "content": Q}],
    )  # fmt: skip
    expected = fastrag.KnowledgeBase.load(kb_path).answer(Q)
    assert out.object == "chat.completion" and out.model == "policies"
    assert out.choices[0].message.content == expected.text
    assert out.choices[0].finish_reason == "stop"
    extra = out.model_extra["fastrag"]
    assert extra["found"] is True and extra["citations"]
    assert [h["chunk_id"] for h in extra["hits"]] == [h.chunk_id for h in expected.hits]
    assert out.usage.total_tokens > 0


def test_chat_options_pass_through(client):
    out = client.chat.completions.create(
        model="policies", messages=[{"role": "user", "content": Q}], temperature=0.2,
        extra_body={"k": 1, "mode": "keyword"},
    )  # fmt: skip
    assert len(out.model_extra["fastrag"]["hits"]) == 1


def test_chat_stream(client, server):
    chunks = list(client.chat.completions.create(
        model="policies", messages=[{"role": "user", "content": Q}], stream=True,
        stream_options={"include_usage": True},
    ))  # fmt: skip
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].model_extra["fastrag"]["hits"]  # the hits come first
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    final = [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(final) == 1 and final[0].model_extra["fastrag"]["answer"] == text
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    raw = httpx.post(
        server.url + "/v1/chat/completions",
        json={"model": "policies", "messages": [{"role": "user", "content": Q}], "stream": True},
    ).text
    assert raw.rstrip().endswith("data: [DONE]")


def test_models_and_embeddings(client, kb_path):
    assert [m.id for m in client.models.list()] == ["policies"]
    kb = fastrag.KnowledgeBase.load(kb_path)
    texts = ["annual leave", "年假"]
    want = kb.embed_questions(texts)
    got = client.embeddings.create(model="policies", input=texts)  # the client asks for base64
    assert np.allclose([d.embedding for d in got.data], want, atol=1e-6)
    floats = client.embeddings.create(
        model="policies", input="annual leave", encoding_format="float"
    )
    assert np.allclose(floats.data[0].embedding, want[0], atol=1e-6)
    assert len(floats.data[0].embedding) == kb.embedder.dim


def test_errors_reach_the_client_as_openai_errors(client):
    with pytest.raises(openai.NotFoundError) as exc:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": Q}])
    assert "unknown knowledge base 'nope'" in str(exc.value)
    with pytest.raises(openai.BadRequestError, match="only n=1"):
        client.chat.completions.create(
            model="policies", messages=[{"role": "user", "content": Q}], n=2
        )
    with pytest.raises(openai.BadRequestError, match="user"):
        client.chat.completions.create(
            model="policies", messages=[{"role": "system", "content": "x"}]
        )
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        client.embeddings.create(model="policies", input="x", dimensions=3)


def test_keys_with_the_openai_client(kb_path, tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text('{"keys": [{"key": "sk-test-0123456789", "user": "u"}]}')
    with ThreadServer(
        ServeSettings(kbs=(("policies", str(kb_path)),), keys=str(keys), reload_interval=0)
    ) as s:
        with openai.OpenAI(base_url=s.url + "/v1", api_key="sk-wrong-000000", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError):
                bad.models.list()
        with openai.OpenAI(
            base_url=s.url + "/v1", api_key="sk-test-0123456789", max_retries=0
        ) as good:
            assert [m.id for m in good.models.list()] == ["policies"]


# -- a chat model behind the server: streamed deltas, and a disconnect cancels the call --


@pytest.fixture
def llm_server(kb_path, monkeypatch):
    with OpenAIServer() as model:
        monkeypatch.setenv("FASTRAG_BASE_URL", model.base_url)
        monkeypatch.setenv("FASTRAG_API_KEY", "model-key")
        monkeypatch.setenv("FASTRAG_CHAT_MODEL", "test-model")
        settings = ServeSettings(kbs=(("policies", str(kb_path)),), llm=True, reload_interval=0)
        with ThreadServer(settings) as s:
            yield s, model


def test_model_answer_streams_piece_by_piece(llm_server):
    s, model = llm_server
    with openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0) as c:
        chunks = list(
            c.chat.completions.create(
                model="policies", messages=[{"role": "user", "content": Q}], stream=True
            )
        )
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) > 3  # the model's own stream, not one block
    final = chunks[-1].model_extra["fastrag"]
    assert "".join(pieces) == final["answer"] and final["model"] == "test-model"
    assert final["found"] and final["citations"] == {"1": final["hits"][0]["chunk_id"]}
    assert model.requests_to("/v1/chat/completions")[-1].body["stream"] is True
    assert model.streams_finished == 1


def test_client_disconnect_cancels_the_model_call(llm_server):
    s, model = llm_server
    model.chat_answer = " ".join(f"word{i}" for i in range(200)) + " [1]"
    model.stream_delay = 0.05  # 200 pieces: 10 s if nobody hung up
    with (
        httpx.Client(timeout=30) as c,
        c.stream("POST", s.url + "/v1/answer", json={"question": Q, "stream": True}) as r,
    ):
        seen = []
        for line in r.iter_lines():
            if line.startswith("event: delta"):
                seen.append(line)
            if len(seen) >= 2:
                break  # hang up mid-answer
    deadline = time.monotonic() + 8
    while model.streams_broken == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert model.streams_broken == 1 and model.streams_finished == 0
    assert s.service.held == 0  # the stream gave its place back


def test_model_failure_is_a_502_json_error(llm_server):
    s, model = llm_server
    model.fail(400, message="the model refused")
    r = httpx.post(s.url + "/v1/answer", json={"question": Q})
    assert r.status_code == 502 and r.json()["error"]["type"] == "model_error"
    model.fail(400, message="the model refused again")
    events = sse_events(httpx.post(s.url + "/v1/answer", json={"question": Q, "stream": True}).text)
    assert events[0][0] == "hits" and events[-1][0] == "error"
    assert events[-1][1]["error"]["type"] == "model_error" and "model-key" not in str(events)


def test_earlier_turns_reach_the_rewriter_as_history(llm_server):
    s, model = llm_server

    def reply(body):
        if body["messages"][0]["content"].startswith("Rewrite the user's question"):
            return '{"query": "annual leave requests days in advance", "intent": "factual"}'
        return "Requests are due 3 days ahead [1]"

    model.chat_answer = reply
    turns = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Tell me about annual leave. My phone is 13812345678."},
        {"role": "assistant", "content": "Annual leave is 15 days a year."},
        {"role": "user", "content": "And how early must I ask for it?"},
    ]
    with openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0) as c:
        c.chat.completions.create(model="policies", messages=turns[-1:])
        alone = [r.body for r in model.requests_to("/v1/chat/completions")]
        model.clear()
        out = c.chat.completions.create(model="policies", messages=turns)
    # A question asked alone is rewritten by the rules: only the answer reaches the model.
    assert [b["messages"][0]["content"].startswith("Rewrite") for b in alone] == [False]
    rewrite, answer = [r.body for r in model.requests_to("/v1/chat/completions")]
    sent = rewrite["messages"]
    assert sent[0]["role"] == "system" and sent[0]["content"].startswith("Rewrite")
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]  # no system turn
    assert "annual leave" in sent[1]["content"] and "13812345678" not in sent[1]["content"]
    assert sent[-1]["content"] == turns[-1]["content"]
    assert out.choices[0].message.content.startswith("Requests are due")
    hits = out.model_extra["fastrag"]["hits"]
    assert any("advance" in h["text"] for h in hits)  # found through the rewritten query
