"""MCP tools for agents: ``search``, ``answer``, and the knowledge bases as resources.

Served through the official ``mcp`` SDK.

- ``search(query, kb=None, k=5, mode=None, snapshot=None, multimodal=None)``:
  the retrieved chunks, each as ``/v1/retrieve`` writes it
  (:func:`~fastrag.serve.shared.hit_json`: rank, citation marker, ids, text,
  score, relevance, metadata, title, source);
- ``answer(question, kb=None, k=5, snapshot=None, multimodal=None,
  distill=None, sql=None, sql_params=None, sql_limit=None)``: the cited answer
  with its hits, citations, confidence, faithfulness and warnings; with
  ``sql`` (the server's SQL tool, as for ``sql_query``) the rows it returns
  are cited beside the chunks;
- ``multimodal`` (captions, OCR text, labels, base64 images) is fused with
  the query as over HTTP (:mod:`~fastrag.serve.multimodal`); ``distill`` is
  ``"extractive"``, or ``"llm"`` with a server started with ``--llm``;
- ``snapshot`` (an id or a tag) answers from that kept snapshot of the
  knowledge base instead of the served one; the result names its id;
- ``sql_query(sql, params=None, limit=None)`` (when the server has a SQL
  source, ``--sql``): one read-only SELECT over the allow-listed tables,
  parameters bound; rows, columns and a citation per row (see
  :class:`~fastrag.SqlTool`);
- resources ``fastrag://kb/{name}``: name, sizes, snapshot and index of
  each knowledge base.

``fastrag mcp --kb PATH`` serves them over stdio (the local, trusted
caller); ``fastrag serve`` serves them over streamable HTTP at ``/mcp``
(stateless, so any worker answers), where the API key of the HTTP request
selects the principal whose ACL filters every result, and resources of
knowledge bases the key may not use are neither listed nor readable.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio.to_thread
import orjson
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import FunctionResource
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from .. import __version__
from ..errors import FastragError, RequestError
from ..options import DEFAULT_K
from .keys import TRUSTED, Caller
from .multimodal import context_of, fuse
from .registry import Registry
from .schemas import K, MultimodalBody, check_k
from .shared import distill_option, hits_json, request_options

__all__ = ["build_mcp", "caller_of", "sql_tool_of"]

_URI = "fastrag://kb/"


def caller_of(ctx: Any) -> Caller:
    """The caller of an MCP request: set by the HTTP route from its API key; stdio is trusted."""
    request = getattr(ctx, "request", None)
    if request is None:
        return TRUSTED
    state = request.scope.get("state") or {}
    caller = state.get("fastrag_caller")
    return caller if isinstance(caller, Caller) else TRUSTED


class _ResourceFilter:
    """Lists and reads only the knowledge-base resources the caller may use."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "resources/read":
            uri = str((ctx.params or {}).get("uri", ""))
            if uri.startswith(_URI) and not caller_of(ctx).may_use(uri.removeprefix(_URI)):
                raise MCPError(INVALID_PARAMS, f"unknown resource {uri!r}")
        result = await call_next(ctx)
        if ctx.method == "resources/list" and result is not None:
            caller = caller_of(ctx)

            def allowed(resource: Any) -> bool:
                uri = resource.get("uri") if isinstance(resource, dict) else resource.uri
                return caller.may_use(str(uri).removeprefix(_URI))

            if isinstance(result, dict):
                result = {
                    **result,
                    "resources": [r for r in result.get("resources", []) if allowed(r)],
                }
            else:
                result = result.model_copy(
                    update={"resources": [r for r in result.resources if allowed(r)]}
                )
        return result


def sql_tool_of(settings: Any) -> Any:
    """The :class:`~fastrag.SqlTool` a server's settings configure, or None."""
    if getattr(settings, "sql", None) is None:
        return None
    from ..store.sql_tool import SqlTool

    return SqlTool(settings.sql, settings.sql_tables)


def build_mcp(
    registry: Registry, *, generator: Any = None, max_k: int = 100, threads: int | None = None,
    sql_tool: Any = None, ocr_seconds: float = 120.0,
) -> MCPServer:  # fmt: skip
    """An MCP server over ``registry`` (see the module docstring).

    ``ocr_seconds`` bounds the OCR of one ``multimodal`` image (``/mcp``: the
    server's timeout).
    """
    server = MCPServer(
        name="fastrag",
        version=__version__,
        instructions=(
            "Search and answer from private knowledge bases. Use `search` for the passages "
            "(cite them as [n]) and `answer` for a cited answer that says when the knowledge "
            "base does not hold it."
        ),
        middleware=[_ResourceFilter()],
    )

    def check(k: object) -> int:  # the HTTP API's rule: K (strict int) and check_k
        try:
            return check_k(k, max_k)
        except RequestError as exc:
            raise ToolError(str(exc)) from None

    def fused(question: str, multimodal: MultimodalBody | None) -> str:
        """The question with what was seen (images read with Tesseract), as over HTTP."""
        if multimodal is None:
            return question
        return fuse(context_of(question, multimodal, ocr_seconds=ocr_seconds))

    def served_for(kb: str | None, ctx: Context) -> tuple[Caller, Any]:
        caller = caller_of(ctx.request_context)
        try:
            return caller, registry.get(kb, caller)
        except FastragError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(
        name="search",
        description="Retrieve the chunks of a knowledge base that best match a query, with "
        "citation markers, sources, titles and scores.",
    )
    async def search(
        query: str, ctx: Context, kb: str | None = None, k: K = DEFAULT_K,
        mode: str | None = None, snapshot: str | None = None,
        multimodal: MultimodalBody | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        caller, served = served_for(kb, ctx)
        current = served.current

        def run() -> tuple[Any, str | None]:
            sid = current.kb.snapshot_id(snapshot) if snapshot is not None else current.snapshot
            retrieval, _ = request_options(
                {"mode": mode}, principal=caller.principal, threads=threads
            )
            asked = fused(query, multimodal)
            found = current.kb.retrieve(asked, check(k), retrieval=retrieval, snapshot=snapshot)
            return found, sid

        try:
            hits, sid = await anyio.to_thread.run_sync(run)
        except FastragError as exc:
            raise ToolError(str(exc)) from None
        return {"kb": served.name, "snapshot": sid, "hits": hits_json(hits)}

    @server.tool(
        name="answer",
        description="Answer a question from a knowledge base, citing the chunks used as [n]; "
        "says plainly when the knowledge base does not hold the answer. With `sql` (one "
        "read-only SELECT, values in `sql_params`, as for sql_query) the answer also cites the "
        "rows it returns, as sql:<table>#<key>.",
    )
    async def answer(
        question: str, ctx: Context, kb: str | None = None, k: K = DEFAULT_K,
        snapshot: str | None = None, multimodal: MultimodalBody | None = None,
        distill: Literal["extractive", "llm"] | None = None, sql: str | None = None,
        sql_params: dict[str, Any] | None = None, sql_limit: int | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        caller, served = served_for(kb, ctx)
        current = served.current
        if sql is None and (sql_params is not None or sql_limit is not None):
            raise ToolError("sql_params and sql_limit need sql (the SELECT whose rows to cite)")
        if sql is not None and sql_tool is None:
            raise ToolError("this server has no SQL source (start it with --sql URL --sql-tables)")
        try:
            retrieval, options = request_options(
                {}, principal=caller.principal, threads=threads,
                answer={} if distill is None else {"distill": distill_option(distill, generator)},
            )  # fmt: skip

            def run() -> Any:
                rows = sql_tool.query(sql, sql_params, limit=sql_limit) if sql is not None else None
                return current.kb.answer(
                    fused(question, multimodal), check(k), generator=generator,
                    retrieval=retrieval, answer=options, snapshot=snapshot, rows=rows,
                )  # fmt: skip

            ans = await anyio.to_thread.run_sync(run)
        except FastragError as exc:
            raise ToolError(str(exc)) from None
        sid = ans.snapshot if snapshot is not None else current.snapshot
        return {"kb": served.name, "snapshot": sid, **ans.to_dict()}

    if sql_tool is not None:
        tables = "; ".join(f"{t}({', '.join(c)})" for t, c in sql_tool.tables.items())

        @server.tool(
            name="sql_query",
            description="Run one read-only SQL SELECT over the database's allowed tables and "
            f"columns: {tables}. Pass values as named parameters (:name) in `params`, never in "
            "the text. Returns columns, rows and a citation (source, table, primary key) per row.",
        )
        async def sql_query(
            sql: str, ctx: Context, params: dict[str, Any] | None = None, limit: int | None = None
        ) -> dict[str, Any]:
            try:
                result = await anyio.to_thread.run_sync(
                    lambda: sql_tool.query(sql, params, limit=limit)
                )
            except FastragError as exc:
                raise ToolError(str(exc)) from None
            return result.to_dict()  # type: ignore[no-any-return]

    for served in registry:
        name = served.name

        def describe(name: str = name) -> str:
            return orjson.dumps(registry.get(name, TRUSTED).describe()).decode()

        server.add_resource(
            FunctionResource(
                uri=f"{_URI}{name}",
                name=name,
                description=f"Knowledge base {name!r}: sizes, snapshot and index",
                mime_type="application/json",
                fn=describe,
            )
        )
    return server


def run_stdio(registry: Registry, *, generator: Any = None, sql_tool: Any = None) -> None:
    """Serve the MCP tools over stdin/stdout until the client closes them."""
    build_mcp(registry, generator=generator, sql_tool=sql_tool).run("stdio")
