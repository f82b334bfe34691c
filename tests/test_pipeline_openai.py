"""The whole pipeline against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest
from fastrag.datasets import demo_documents
from openai_server import CHAT, EMBED, OpenAIServer

from fastrag import KnowledgeBase, OpenAIChatGenerator, OpenAIEmbedder
from fastrag.answer.prompt import SYSTEM_PROMPT
from fastrag.config import ClientConfig
from fastrag.errors import EmbedderMismatchError

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def server():
    with OpenAIServer(embed_dim=16, api_key=KEY) as srv:
        yield srv


def _config(server: OpenAIServer, model: str) -> ClientConfig:
    return ClientConfig(
        base_url=server.base_url,
        model=model,
        api_key=KEY,
        read_timeout=5.0,
        max_retries=2,
        backoff_base=0.001,
        backoff_cap=0.01,
    )


def test_answer_with_chat_model(server):
    kb = KnowledgeBase.build(demo_documents())
    with OpenAIChatGenerator(config=_config(server, "chat-model")) as gen:
        ans = kb.answer("年假怎么申请？", k=3, generator=gen)
    (request,) = server.requests_to(CHAT)
    body = request.body
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert body["model"] == "chat-model"
    system, user = body["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user["content"].startswith("【知识库】\n[1] ")
    assert user["content"].endswith("\n\n【问题】\n年假怎么申请？")
    for i, hit in enumerate(ans.hits, 1):
        assert f"[{i}] {hit.text}" in user["content"]
    assert ans.found and 1 in ans.citations and ans.citations[1] == ans.hits[0]
    assert ans.prompt == user["content"] and ans.model


def test_answer_batch_with_chat_model_reports_failures_per_question(server):
    kb = KnowledgeBase.build(demo_documents())
    server.fail(500, times=3, path=CHAT)  # all 3 attempts (max_retries=2) of the first question
    with OpenAIChatGenerator(config=_config(server, "chat-model")) as gen:
        # One call at a time, so the scripted failures all hit the first question.
        table = kb.answer_batch(
            ["年假怎么申请？", "设备丢失后多久内要报告？"], k=2, generator=gen, max_concurrency=1
        )
    rows = table.to_pylist()
    assert rows[0]["error"] and "500" in rows[0]["error"] and not rows[0]["found"]
    assert rows[1]["error"] is None and rows[1]["found"]


def test_build_save_load_with_http_embedder(server, tmp_path, monkeypatch):
    emb = OpenAIEmbedder(config=_config(server, "embed-model"), batch_size=4)
    kb = KnowledgeBase.build(demo_documents(), embedder=emb)
    request_close = [kb]
    assert kb.embedder.dim == 16
    n_embed_requests = len(server.requests_to(EMBED))
    assert n_embed_requests == -(-len(kb) // 4)
    hits = kb.retrieve("年假申请需提前3天", k=2)
    assert hits and all(np.isfinite(h.score) for h in hits)
    kb.save(tmp_path / "kb")
    manifest = (tmp_path / "kb" / "manifest.json").read_text()
    assert KEY not in manifest and "embed-model" in manifest
    # Reload with the same embedder (the key is never saved) ...
    with KnowledgeBase.load(
        tmp_path / "kb", embedder=OpenAIEmbedder(config=_config(server, "embed-model"))
    ) as again:
        assert [h.chunk_id for h in again.retrieve("年假申请需提前3天", k=2)] == [
            h.chunk_id for h in hits
        ]
    # ... or from the environment.
    monkeypatch.setenv("FASTRAG_API_KEY", KEY)
    with KnowledgeBase.load(tmp_path / "kb") as from_env:
        assert [h.chunk_id for h in from_env.retrieve("年假申请需提前3天", k=2)] == [
            h.chunk_id for h in hits
        ]
    with OpenAIEmbedder(config=_config(server, "other-model"), dim=16) as other:
        with pytest.raises(EmbedderMismatchError, match="model"):
            KnowledgeBase.load(tmp_path / "kb", embedder=other)
    for kb_ in request_close:
        kb_.close()


def test_answer_batch_runs_model_calls_concurrently_in_order(server):
    import threading

    kb = KnowledgeBase.build(demo_documents())
    server.latency = 0.05
    questions = [f"年假怎么申请？ {i}" for i in range(40)]
    with OpenAIChatGenerator(
        config=_config(server, "chat-model").replace(max_concurrency=16)
    ) as gen:
        table = kb.answer_batch(questions, k=2, generator=gen)
    rows = table.to_pylist()
    assert [r["question"] for r in rows] == questions  # input order kept
    assert all(r["error"] is None and r["found"] for r in rows)
    assert server.max_in_flight > 4  # calls overlapped (the server saw them at once)
    assert len(server.requests_to(CHAT)) == 40
    assert threading.active_count() < 50


def test_answer_batch_rate_limit_spaces_requests(server):
    kb = KnowledgeBase.build(demo_documents())
    questions = [f"设备丢失后多久内要报告？ {i}" for i in range(12)]
    with OpenAIChatGenerator(
        config=_config(server, "chat-model").replace(max_concurrency=8)
    ) as gen:
        kb.answer_batch(questions, k=2, generator=gen, requests_per_minute=600)  # one per 0.1 s
    times = sorted(r.time for r in server.requests_to(CHAT))
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # The server's clock: the 12 requests spread over about 1.1 s (10 a second),
    # evenly (the first may arrive late: it opens the connection).
    assert times[-1] - times[0] >= 1.0
    assert sorted(gaps)[len(gaps) // 2] >= 0.09  # lower bounds on a deliberate wait only
