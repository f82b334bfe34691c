"""The OpenAI-compatible routes of ``fastrag serve``: chat completions, models, embeddings.

``/v1/chat/completions`` answers the last user message from the knowledge
base named by ``model`` (the earlier turns are the rewriter's history),
streamed or not, with fastrag's hits and answer under ``fastrag``;
``/v1/models`` lists the knowledge bases; ``/v1/embeddings`` embeds with a
knowledge base's embedder.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..embed.base import document_vectors
from ..errors import RequestError
from ..options import MAX_HISTORY_TURNS
from ..types import Answer
from .keys import Caller
from .routes_native import answer_json
from .schemas import ChatRequest, EmbeddingsRequest, check_acl_statistics, check_k, parse
from .service import Service, endpoint, guarded, json_response, sse, stream
from .shared import hits_json, request_options

__all__ = ["openai_routes"]


def _usage(ans: Answer) -> dict[str, int]:
    from ..answer.context import estimate_tokens

    prompt = estimate_tokens(ans.prompt or "")
    completion = estimate_tokens(ans.text)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chat_question(req: ChatRequest) -> tuple[str, list[tuple[str, str]]]:
    """The last user message, and the user and assistant turns before it.

    The turns are the rewriter's history.
    """
    last = max((i for i, m in enumerate(req.messages) if m.role == "user"), default=None)
    if last is None:
        raise RequestError("messages: no 'user' message holds a question", type="invalid_value")
    question = req.messages[last].text()
    if not question.strip():
        raise RequestError("messages: the last user message is empty", type="invalid_value")
    turns: list[tuple[str, str]] = [
        (m.role, m.text()) for m in req.messages[:last] if m.role in ("user", "assistant")
    ]
    return question, turns[-MAX_HISTORY_TURNS:]


@endpoint("chat_completions")
async def chat_completions(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(ChatRequest, await svc.body(request))
    if req.n != 1:
        raise RequestError("field 'n': only n=1 is supported", type="invalid_value")
    k = check_k(req.k, svc.settings.max_k)
    question, history = _chat_question(req)
    served = svc.served(req.model, caller)
    fields = {
        "history": history,
        "mode": req.mode,
        "where": req.where,
        "acl_statistics": check_acl_statistics(req.acl_statistics, caller.principal is not None),
    }
    ropts, aopts = request_options(
        fields, principal=caller.principal, threads=svc.settings.threads, answer={}
    )
    args = {"generator": svc.generator, "retrieval": ropts, "answer": aopts}
    ident = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if req.stream:
        include_usage = bool((req.stream_options or {}).get("include_usage"))
        kb, snapshot = served.current

        def chunk(delta: dict[str, Any], finish: str | None, **extra: Any) -> bytes:
            body = {
                "id": ident, "object": "chat.completion.chunk", "created": created,
                "model": served.name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }  # fmt: skip
            return sse(None, body)

        async def events() -> AsyncIterator[bytes]:
            it = kb.answer_stream(question, k, **args)
            async for ev in svc.events(
                it, model_bound=svc.model_bound, deadline=request.state.deadline
            ):
                if ev.kind == "hits":
                    yield chunk(
                        {"role": "assistant", "content": ""}, None,
                        fastrag={
                            "kb": served.name, "snapshot": snapshot, "hits": hits_json(ev.hits),
                        },
                    )  # fmt: skip
                elif ev.kind == "delta":
                    yield chunk({"content": ev.text}, None)
                else:
                    ans = ev.answer
                    svc.answered(served.name, ans.found, bool(ans.citations))
                    yield chunk({}, "stop", fastrag=answer_json(served, snapshot, ans))
                    if include_usage:
                        yield sse(None, {
                            "id": ident, "object": "chat.completion.chunk", "created": created,
                            "model": served.name, "choices": [], "usage": _usage(ans),
                        })  # fmt: skip
            yield sse(None, "[DONE]")

        return stream(guarded(svc, "chat_completions", events()))
    kb, snapshot = served.current
    ans = await svc.call(kb.answer, question, k, model_bound=svc.model_bound, **args)
    svc.answered(served.name, ans.found, bool(ans.citations))
    return json_response(
        {
            "id": ident,
            "object": "chat.completion",
            "created": created,
            "model": served.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": ans.text},
                    "finish_reason": "stop",
                }
            ],
            "usage": _usage(ans),
            "fastrag": answer_json(served, snapshot, ans),
        }
    )


@endpoint("models")
async def list_models(svc: Service, request: Request, caller: Caller) -> Response:
    data = [
        {"id": name, "object": "model", "created": 0, "owned_by": "fastrag"}
        for name in svc.registry.names(caller)
    ]
    return json_response({"object": "list", "data": data})


def _embed(kb: Any, texts: list[str], input_type: str) -> np.ndarray:
    if input_type == "document":
        return document_vectors(kb.embedder, texts)
    return kb.embed_questions(texts)


@endpoint("embeddings")
async def embeddings(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(EmbeddingsRequest, await svc.body(request))
    texts = [req.input] if isinstance(req.input, str) else list(req.input)
    if not texts:
        raise RequestError("field 'input' must hold at least one text", type="invalid_value")
    if len(texts) > svc.settings.max_batch * 8:
        raise RequestError(
            f"field 'input' holds {len(texts)} texts; at most {svc.settings.max_batch * 8}",
            type="out_of_range",
        )
    for i, t in enumerate(texts):
        if not t.strip():
            raise RequestError(f"field 'input[{i}]' is empty", type="invalid_value")
    served = svc.served(req.model, caller)
    kb, _ = served.current
    dim = kb.embedder.dim
    if req.dimensions is not None and req.dimensions != dim:
        raise RequestError(
            f"field 'dimensions': the embedder of {served.name!r} makes {dim} dimensions, "
            f"not {req.dimensions}",
            type="invalid_value",
        )
    vectors = np.ascontiguousarray(await svc.call(_embed, kb, texts, req.input_type), dtype="<f4")
    if req.encoding_format == "base64":
        items: list[Any] = [base64.b64encode(v.tobytes()).decode() for v in vectors]
    else:
        items = vectors.tolist()
    tokens = sum(len(t) for t in texts) // 4 or 1
    return json_response(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(items)
            ],
            "model": served.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def openai_routes() -> list[BaseRoute]:
    """The routes of this module."""
    return [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
    ]
