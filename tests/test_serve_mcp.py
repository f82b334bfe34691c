"""MCP tools and resources of fastrag, driven by the official ``mcp`` SDK's client (HTTP and stdio)."""

from __future__ import annotations

import contextlib
import json
import sys

import anyio
import httpx2
import pytest
from conftest import DOCS
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from serve_harness import ThreadServer, save_kb

from fastrag.serve import ServeSettings

Q = "How many days in advance must annual leave requests be submitted?"
STAFF, GUEST = "staff-key-0123456789", "guest-key-0123456789"
OTHER_ONLY, NONE = "other-key-0123456789", "none-key-0123456789"


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return save_kb([dict(d) for d in DOCS], tmp_path_factory.mktemp("mcp") / "policies")


@pytest.fixture(scope="module")
def server(kb_path, tmp_path_factory):
    keys = tmp_path_factory.mktemp("mcpkeys") / "keys.json"
    keys.write_text(json.dumps({"keys": [
        {"key": STAFF, "user": "s", "groups": ["staff"]},
        {"key": GUEST, "user": "g", "kbs": ["policies"]},
        {"key": OTHER_ONLY, "user": "o", "kbs": ["other"]},
        {"key": NONE, "user": "n", "kbs": []},
    ]}))  # fmt: skip
    other = save_kb([{"id": "x", "text": "Other knowledge base."}], kb_path.parent / "other")
    settings = ServeSettings(
        kbs=(("policies", str(kb_path)), ("other", str(other))), keys=str(keys), reload_interval=0
    )
    with ThreadServer(settings) as s:
        yield s


@contextlib.asynccontextmanager
async def http_client(server, key):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        async with Client(streamable_http_client(server.url + "/mcp", http_client=http)) as c:
            yield c


def payload(result):
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_tools_over_streamable_http(server):
    async def run():
        async with http_client(server, STAFF) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            found = payload(await c.call_tool("search", {"query": Q, "k": 3}))
            answer = payload(await c.call_tool("answer", {"question": Q}))
            resources = [str(r.uri) for r in (await c.list_resources()).resources]
            read = await c.read_resource("fastrag://kb/policies")
            return names, found, answer, resources, read

    names, found, answer, resources, read = anyio.run(run)
    assert {"search", "answer"} <= names
    assert found["kb"] == "policies" and [h["marker"] for h in found["hits"]] == [
        "[1]",
        "[2]",
        "[3]",
    ]
    assert any(h["doc_id"] == "leave" for h in found["hits"])
    assert answer["found"] is True and answer["citations"] and "[1]" in answer["answer"]
    assert resources == ["fastrag://kb/policies", "fastrag://kb/other"]
    assert json.loads(read.contents[0].text)["documents"] == len(DOCS)


def test_acl_and_allowed_kbs_hold_for_tools_and_resources(server):
    async def run():
        async with http_client(server, GUEST) as c:
            found = payload(await c.call_tool("search", {"query": Q, "k": 10}))
            answer = payload(await c.call_tool("answer", {"question": Q}))
            denied = await c.call_tool("search", {"query": Q, "kb": "other"})
            resources = [str(r.uri) for r in (await c.list_resources()).resources]
            try:
                await c.read_resource("fastrag://kb/other")
                read_other = True
            except Exception:  # noqa: BLE001 - the SDK raises its MCPError
                read_other = False
            return found, answer, denied, resources, read_other

    found, answer, denied, resources, read_other = anyio.run(run)
    assert found["hits"] and all(h["doc_id"] != "leave" for h in found["hits"])
    assert all(h["doc_id"] != "leave" for h in answer["hits"])
    assert denied.is_error and "unknown knowledge base 'other'" in denied.content[0].text
    assert resources == ["fastrag://kb/policies"] and read_other is False


def test_bad_arguments_are_tool_errors(server):
    async def run():
        async with http_client(server, STAFF) as c:
            return [
                await c.call_tool(tool, {arg: Q, "k": k})
                for tool, arg in (("search", "query"), ("answer", "question"))
                for k in (0, 101, True, 2.5)
            ]

    results = anyio.run(run)
    assert all(r.is_error for r in results)  # k: true is refused, as the HTTP API refuses it
    for r in results[0:2] + results[4:6]:
        assert "k must be between 1 and 100" in r.content[0].text
    for r in results[2:4] + results[6:8]:
        assert "valid integer" in r.content[0].text


def test_a_restricted_key_meets_only_the_names_it_may_use(server):
    async def run():
        async with http_client(server, OTHER_ONLY) as c:
            default = payload(await c.call_tool("search", {"query": "knowledge", "k": 1}))
            answer = payload(await c.call_tool("answer", {"question": "knowledge"}))
            unknown = await c.call_tool("search", {"query": Q, "kb": "nope"})
            resources = [str(r.uri) for r in (await c.list_resources()).resources]
        async with http_client(server, NONE) as c:
            nothing = await c.call_tool("search", {"query": Q})
        return default, answer, unknown, resources, nothing

    default, answer, unknown, resources, nothing = anyio.run(run)
    # Without a kb, the first one the key may use: never the server's default it may not.
    assert default["kb"] == "other" and answer["kb"] == "other"
    assert unknown.is_error and "'policies'" not in unknown.content[0].text
    assert "unknown knowledge base 'nope' (available: 'other')" in unknown.content[0].text
    assert resources == ["fastrag://kb/other"]
    assert nothing.is_error and "policies" not in nothing.content[0].text
    assert "no knowledge base is available" in nothing.content[0].text


def test_http_without_a_key_is_401(server):
    async def run():
        async with httpx2.AsyncClient() as http:
            return await http.post(
                server.url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            )

    r = anyio.run(run)
    assert r.status_code == 401 and r.json()["error"]["type"] == "unauthorized"


def test_tools_over_stdio(kb_path):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fastrag", "mcp", "--kb", f"policies={kb_path}"],
        cwd=kb_path.parent,  # not the checkout, whose fastrag/ folder would shadow the install
    )

    async def run():
        async with Client(params, read_timeout_seconds=120) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            found = payload(await c.call_tool("search", {"query": Q, "k": 2}))
            answer = payload(
                await c.call_tool("answer", {"question": "What is the capital of Mongolia?"})
            )
            return names, found, answer

    names, found, answer = anyio.run(run)
    assert {"search", "answer"} <= names
    assert len(found["hits"]) == 2
    assert answer["found"] is False and "does not contain" in answer["answer"]
