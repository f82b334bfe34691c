"""The native JSON routes of ``fastrag serve``: ``/v1/retrieve``, ``/v1/answer`` (+ batch), SQL.

``/v1/retrieve`` and ``/v1/answer`` also take a ``multimodal`` object
(captions, OCR text, labels, base64 images: :mod:`~fastrag.serve.multimodal`),
fused with the question before the one question path.

``/v1/answer`` and ``/v1/answer/batch`` take an ``sql`` field (the body of
``/v1/sql``): the server runs it with its SQL tool and the answer cites the
rows (``sql:<table>#<key>``) beside the chunks.

Also ``/v1/kbs``, ``/healthz``, ``/metrics`` and the page at ``/``. Each
route parses its body (:mod:`~fastrag.serve.schemas`), resolves the
request's options once (:func:`~fastrag.serve.shared.request_options`),
calls the :class:`~fastrag.KnowledgeBase` with ``retrieval=`` and
``answer=`` and writes hits with :func:`~fastrag.serve.shared.hits_json`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .. import __version__
from ..errors import RequestError
from ..options import AnswerOptions, RetrievalOptions
from ..types import Answer
from .keys import TRUSTED, Caller
from .metrics import CONTENT_TYPE
from .multimodal import context_of, fuse
from .registry import Served
from .schemas import (
    AnswerBatchRequest,
    AnswerRequest,
    RetrieveBatchRequest,
    RetrieveRequest,
    SqlRequest,
    check_acl_statistics,
    check_batch,
    check_k,
    parse,
)
from .service import (
    Service,
    endpoint,
    error_body,
    guarded,
    json_response,
    snapshot_of,
    sse,
    stream,
)
from .shared import distill_option, hits_json, request_options

__all__ = ["answer_json", "native_options", "native_routes", "static_dir"]


def answer_json(served: Served, snapshot: str | None, ans: Answer) -> dict[str, Any]:
    """An answer as JSON-ready data, with the knowledge base and snapshot it came from."""
    return {"kb": served.name, "snapshot": snapshot, **ans.to_dict()}


def _retrieval_fields(req: Any, caller: Caller) -> dict[str, Any]:
    """The retrieval fields of a native request (``acl_statistics`` checked for the caller)."""
    fields = {
        "mode": req.mode,
        "where": req.where,
        "exact": req.exact,
        "rewrite": req.rewrite,
        "acl_statistics": check_acl_statistics(req.acl_statistics, caller.principal is not None),
    }
    if hasattr(req, "group_by"):
        fields["group_by"] = req.group_by
    return fields


def native_options(
    req: Any, caller: Caller, threads: int | None, *, answers: bool, generator: Any = None
) -> tuple[RetrievalOptions, AnswerOptions]:
    """The options of a native request: its fields, the caller's principal, the server's threads.

    ``generator`` is the server's ``--llm`` model, which ``"distill": "llm"`` names.
    """
    answer = req.answer_options() if answers else None
    if answer is not None and "distill" in answer:
        answer["distill"] = distill_option(answer["distill"], generator)
    return request_options(
        _retrieval_fields(req, caller), principal=caller.principal, threads=threads,
        answer=answer,
    )  # fmt: skip


def _calls(svc: Service, req: Any, caller: Caller, *, answers: bool) -> dict[str, Any]:
    """Keyword arguments of the engine call: the options objects, the snapshot, the generator."""
    ropts, aopts = native_options(
        req, caller, svc.settings.threads, answers=answers, generator=svc.generator
    )
    args: dict[str, Any] = {"retrieval": ropts}
    if answers:
        args.update(answer=aopts, generator=svc.generator)
    if req.snapshot is not None:
        args["snapshot"] = req.snapshot
    return args


async def _question(svc: Service, req: Any) -> str:
    """The question a request asks: its ``question``, fused with its ``multimodal`` object if any.

    Images are read with Tesseract in a worker thread (waiting on it, as on a
    model), under the server's timeout (:mod:`fastrag.serve.multimodal`).
    """
    if getattr(req, "multimodal", None) is None:
        return str(req.question)
    context = context_of(req.question, req.multimodal, ocr_seconds=svc.settings.timeout)
    return str(await svc.call(fuse, context, model_bound=bool(context.images)))


@endpoint("retrieve")
async def retrieve(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(RetrieveRequest, await svc.body(request))
    k = check_k(req.k, svc.settings.max_k)
    served = svc.served(req.kb, caller)
    kb, snapshot = served.current
    snapshot = await snapshot_of(svc, kb, snapshot, req)
    args = _calls(svc, req, caller, answers=False)
    question = await _question(svc, req)
    hits = await svc.call(kb.retrieve, question, k, **args)
    svc.retrieved(served.name, 1)
    return json_response(
        {
            "kb": served.name,
            "snapshot": snapshot,
            "question": question,
            "hits": hits_json(hits),
        }
    )


def _batch_results(
    kb: Any, questions: list[str], k: int, args: dict[str, Any]
) -> list[dict[str, Any]]:
    """Per question its hits, each as :func:`hits_json` writes it (the same as ``/v1/retrieve``)."""
    found = kb.retrieve_batch(questions, k, output="hits", **args)
    return [{"question": q, "hits": hits_json(h)} for q, h in zip(questions, found, strict=True)]


@endpoint("retrieve_batch")
async def retrieve_batch(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(RetrieveBatchRequest, await svc.body(request))
    k = check_k(req.k, svc.settings.max_k)
    questions = check_batch(req.questions, svc.settings.max_batch)
    served = svc.served(req.kb, caller)
    kb, snapshot = served.current
    snapshot = await snapshot_of(svc, kb, snapshot, req)
    args = _calls(svc, req, caller, answers=False)
    results = await svc.call(_batch_results, kb, questions, k, args)
    svc.retrieved(served.name, len(questions))
    return json_response({"kb": served.name, "snapshot": snapshot, "results": results})


async def _answer_events(
    svc: Service,
    served: Served,
    question: str,
    k: int,
    args: dict[str, Any],
    deadline: float,
    index: int | None = None,
) -> AsyncIterator[bytes]:
    """SSE events of one streamed answer: ``hits``, ``delta``..., ``answer``."""
    kb, snapshot = served.current
    if args.get("snapshot") is not None:
        snapshot = await svc.call(kb.snapshot_id, args["snapshot"])
    tag = {} if index is None else {"index": index}
    it = kb.answer_stream(question, k, **args)
    async for ev in svc.events(it, model_bound=svc.model_bound, deadline=deadline):
        if ev.kind == "hits":
            yield sse(
                "hits",
                {**tag, "kb": served.name, "snapshot": snapshot, "hits": hits_json(ev.hits)},
            )
        elif ev.kind == "delta":
            yield sse("delta", {**tag, "text": ev.text})
        else:
            ans = ev.answer
            svc.answered(served.name, ans.found, bool(ans.citations))
            yield sse("answer", {**tag, **answer_json(served, ans.snapshot or snapshot, ans)})


def _sql_tool(svc: Service) -> Any:
    """The server's SQL tool, or a 404 naming the flags that configure one."""
    if svc.sql_tool is None:
        raise RequestError(
            "this server has no SQL source (start it with --sql URL --sql-tables ...)",
            status=404,
            type="not_found",
        )
    return svc.sql_tool


def _run_sql(tool: Any, spec: Any) -> Any:
    """The rows of one ``sql`` field (a :class:`SqlRequest`, a list of them or None), run."""
    if spec is None:
        return None
    if isinstance(spec, list):
        return [_run_sql(tool, one) for one in spec]
    return tool.query(spec.sql, spec.params, limit=spec.limit)


async def _sql_rows(svc: Service, spec: Any, args: dict[str, Any]) -> None:
    """Run a request's ``sql`` field with the server's tool; its rows go to the engine call."""
    if spec is not None:
        args["rows"] = await svc.call(_run_sql, _sql_tool(svc), spec)


@endpoint("answer")
async def answer(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(AnswerRequest, await svc.body(request))
    k = check_k(req.k, svc.settings.max_k)
    served = svc.served(req.kb, caller)
    args = _calls(svc, req, caller, answers=True)
    question = await _question(svc, req)
    await _sql_rows(svc, req.sql, args)
    if req.stream:
        events = _answer_events(svc, served, question, k, args, request.state.deadline)
        return stream(guarded(svc, "answer", events))
    kb, snapshot = served.current
    ans = await svc.call(kb.answer, question, k, model_bound=svc.model_bound, **args)
    svc.answered(served.name, ans.found, bool(ans.citations))
    return json_response(answer_json(served, ans.snapshot or snapshot, ans))


@endpoint("answer_batch")
async def answer_batch(svc: Service, request: Request, caller: Caller) -> Response:
    req = parse(AnswerBatchRequest, await svc.body(request))
    k = check_k(req.k, svc.settings.max_k)
    questions = check_batch(req.questions, svc.settings.max_batch)
    served = svc.served(req.kb, caller)
    args = _calls(svc, req, caller, answers=True)
    if isinstance(req.sql, list) and len(req.sql) != len(questions):
        raise RequestError(
            f"sql: {len(req.sql)} queries for {len(questions)} questions (give one per "
            "question, null for none, or one object for all)",
            type="invalid_value",
        )
    await _sql_rows(svc, req.sql, args)
    deadline = request.state.deadline
    if req.stream:
        each = args.pop("rows", None)

        async def events() -> AsyncIterator[bytes]:
            for i, q in enumerate(questions):
                own = {**args, "rows": each[i] if isinstance(each, list) else each}
                async for chunk in _answer_events(svc, served, q, k, own, deadline, index=i):
                    yield chunk
            yield sse("done", {"questions": len(questions)})

        return stream(guarded(svc, "answer_batch", events()))
    kb, snapshot = served.current
    snapshot = await snapshot_of(svc, kb, snapshot, req)
    results = await svc.call(
        kb.answer_batch, questions, k, model_bound=svc.model_bound, output="results", **args
    )
    rows: list[dict[str, Any]] = []
    for i, (question, (ans, why)) in enumerate(zip(questions, results, strict=True)):
        if ans is None:  # the question's own failure: the others are answered
            rows.append({"index": i, "question": question, **error_body(
                "answer_failed", why or "this question could not be answered"
            )})  # fmt: skip
            continue
        svc.answered(served.name, ans.found, bool(ans.citations))
        rows.append({"index": i, **ans.to_dict()})
    return json_response({"kb": served.name, "snapshot": snapshot, "results": rows})


@endpoint("sql")
async def sql_query(svc: Service, request: Request, caller: Caller) -> Response:
    tool = _sql_tool(svc)
    req = parse(SqlRequest, await svc.body(request))
    result = await svc.call(tool.query, req.sql, req.params, limit=req.limit)
    return json_response(result.to_dict())


@endpoint("kbs")
async def list_kbs(svc: Service, request: Request, caller: Caller) -> Response:
    kbs = [svc.registry.get(n, caller).describe() for n in svc.registry.names(caller)]
    return json_response({"kbs": kbs, "user": caller.user})


@endpoint("healthz", admit=False, auth=False)
async def healthz(svc: Service, request: Request, caller: Caller) -> Response:
    return json_response({"status": "ok", "version": __version__, "pid": os.getpid()})


@endpoint("metrics", admit=False)
async def metrics(svc: Service, request: Request, caller: Caller) -> Response:
    # The metrics are labelled by knowledge base: only a key that may use every one reads them.
    if svc.registry.names(caller) != svc.registry.names(TRUSTED):
        raise RequestError(
            "/metrics needs a key that may use every knowledge base",
            status=403,
            type="forbidden",
        )
    return Response(svc.metrics.render(), media_type=CONTENT_TYPE)


# -- page --------------------------------------------------------------------------


def static_dir() -> str:
    """The folder of the page's HTML, CSS and JavaScript."""
    return str(resources.files("fastrag.serve") / "static")


async def page(request: Request) -> Response:
    return FileResponse(f"{static_dir()}/index.html", media_type="text/html; charset=utf-8")


def native_routes() -> list[BaseRoute]:
    """The routes of this module, with the page and its static files."""
    return [
        Route("/", page, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=static_dir()), name="static"),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/kbs", list_kbs, methods=["GET"]),
        Route("/v1/retrieve", retrieve, methods=["POST"]),
        Route("/v1/retrieve/batch", retrieve_batch, methods=["POST"]),
        Route("/v1/answer", answer, methods=["POST"]),
        Route("/v1/answer/batch", answer_batch, methods=["POST"]),
        Route("/v1/sql", sql_query, methods=["POST"]),
    ]
