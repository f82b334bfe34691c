"""Options travel one way: two objects, two keywords, defaults from one place (issue 21 item 3).

Every way in (the library, batch files, Ray, the framework retrievers, the
CLI, HTTP and MCP) resolves a call that sets nothing to the very default
objects of :mod:`fastrag.options`; the old ``options=`` spelling works with
a DeprecationWarning or fails naming the new one; and a hit has one JSON
shape over HTTP (single and batch), MCP and ``fastrag query --json``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import anyio
import httpx
import httpx2
import pytest
from conftest import DOCS
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from serve_harness import ThreadServer, save_kb

import fastrag
from fastrag import AnswerOptions, KnowledgeBase, RetrievalOptions, cli
from fastrag.batch.files import answer_file, batch_options
from fastrag.errors import ConfigError
from fastrag.integrations import retrieval_of
from fastrag.options import (
    ANSWER_DEFAULTS,
    DEFAULT_K,
    RETRIEVAL_DEFAULTS,
    parse_options,
)
from fastrag.serve import ServeSettings
from fastrag.serve.keys import TRUSTED
from fastrag.serve.routes_native import native_options
from fastrag.serve.schemas import AnswerBatchRequest, AnswerRequest, ChatRequest, parse
from fastrag.serve.shared import request_options

Q = "How many days in advance must annual leave requests be submitted?"


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return save_kb([dict(d) for d in DOCS], tmp_path_factory.mktemp("oneway") / "policies")


@pytest.fixture(scope="module")
def kb(kb_path):
    return KnowledgeBase.load(kb_path)


# -- 1. defaults from one place ----------------------------------------------------------------


def test_the_defaults_are_the_field_defaults_of_the_two_classes():
    assert RETRIEVAL_DEFAULTS == RetrievalOptions() and ANSWER_DEFAULTS == AnswerOptions()
    assert fastrag.RetrievalOptions is RetrievalOptions and fastrag.AnswerOptions is AnswerOptions
    # the old homes re-export the same objects
    from fastrag.answer.options import AnswerOptions as A
    from fastrag.retrieve.options import RetrievalOptions as R

    assert A is AnswerOptions and R is RetrievalOptions


SHIMS = {"fastrag.retrieve.options", "fastrag.answer.options"}


def _shim_imports(source: str, module: str) -> list[int]:
    """Lines where ``module`` (inside fastrag) imports one of the re-export shims."""
    import ast

    package = module.rsplit(".", 1)[0]
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - max(node.level - 1, 0)]
            tail = [node.module] if node.module else []
            target = ".".join(base + tail) if node.level else node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        else:
            continue
        if SHIMS & set(names):
            lines.append(node.lineno)
    return lines


def test_nothing_inside_fastrag_imports_the_option_shims():
    from pathlib import Path

    root = Path(fastrag.__file__).resolve().parent
    bad = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if module in SHIMS:
            continue
        if path.name == "__init__.py":
            module += ".__init__"  # its relative imports start from the package itself
        bad += [f"{path}:{n}" for n in _shim_imports(path.read_text(), module)]
    assert not bad, "import fastrag.options instead: " + ", ".join(bad)
    # the checker sees all three spellings
    assert _shim_imports("from .options import RetrievalOptions", "fastrag.retrieve.x") == [1]
    assert _shim_imports("from ..answer import options", "fastrag.serve.x") == [1]
    assert _shim_imports("from . import options", "fastrag.answer.__init__") == [1]
    assert _shim_imports("import fastrag.answer.options", "fastrag.kb") == [1]
    assert _shim_imports("from ..options import AnswerOptions", "fastrag.answer.x") == []


def test_every_way_in_resolves_an_empty_call_to_the_default_objects():
    defaults = (RETRIEVAL_DEFAULTS, ANSWER_DEFAULTS)
    # the library's parser (KnowledgeBase.retrieve / answer / *_batch / answer_stream)
    assert parse_options({}) == defaults and parse_options({})[0] is RETRIEVAL_DEFAULTS
    assert parse_options({}, None, None)[1] is ANSWER_DEFAULTS
    # batch files and Ray (answer_file, answer_dataset and answer_file_ray resolve with it)
    ropts, aopts, rate = batch_options(None, None, None, mode=None, threads=None)
    assert (ropts, aopts, rate) == (*defaults, {}) and ropts is RETRIEVAL_DEFAULTS
    # the LangChain and LlamaIndex retrievers
    assert retrieval_of(None, None, None, None) is RETRIEVAL_DEFAULTS
    # the CLI's commands with no option flags
    parser = cli.build_parser()
    for argv in (["ask", "q", "--kb", "x"], ["batch", "q.txt", "--kb", "x", "--out", "a.jsonl"],
                 ["query", "x", "q"]):  # fmt: skip
        args = parser.parse_args(argv)
        assert cli.cli_options(args) == defaults, argv
        assert cli.cli_options(args)[0] is RETRIEVAL_DEFAULTS
        assert args.k == DEFAULT_K
    # HTTP: a request naming only its question (the trusted caller, no server threads)
    for model, body in ((AnswerRequest, b'{"question": "q"}'),
                        (AnswerBatchRequest, b'{"questions": ["q"]}')):  # fmt: skip
        req = parse(model, body)
        assert req.k == DEFAULT_K
        assert native_options(req, TRUSTED, None, answers=True) == defaults
        assert native_options(req, TRUSTED, None, answers=False)[0] == RETRIEVAL_DEFAULTS
    chat = parse(ChatRequest, b'{"model": "m", "messages": [{"role": "user", "content": "q"}]}')
    assert chat.k == DEFAULT_K
    # MCP's tools resolve their arguments with the same function
    assert request_options({"mode": None}, principal=None, threads=None) == defaults
    assert request_options({}, principal=None, threads=None, answer={}) == defaults


def test_no_entry_copies_a_default():
    # HTTP request fields that name an option default to that option's default
    for model in (AnswerRequest, AnswerBatchRequest):
        for name, field in model.model_fields.items():
            for defaults in (RETRIEVAL_DEFAULTS, ANSWER_DEFAULTS):
                if name in {f.name for f in dataclasses.fields(defaults)}:
                    assert field.default == getattr(defaults, name), (model.__name__, name)
    # the serve flags show and keep ServeSettings' own defaults
    args = cli.build_parser().parse_args(["serve", "--kb", "x"])
    settings = ServeSettings(kbs=(("x", "/x"),))
    for name in cli._SERVE_FLAGS:
        assert getattr(args, name) == getattr(settings, name), name
    assert cli._serve_settings(args).timeout == settings.timeout


def test_a_call_that_sets_nothing_equals_one_that_passes_the_defaults(kb, tmp_path):
    assert kb.retrieve(Q) == kb.retrieve(Q, DEFAULT_K, retrieval=RETRIEVAL_DEFAULTS)
    plain = kb.answer(Q)
    given = kb.answer(Q, retrieval=RETRIEVAL_DEFAULTS, answer=ANSWER_DEFAULTS)
    assert (plain.text, plain.citations) == (given.text, given.citations)
    questions = tmp_path / "q.txt"
    questions.write_text(Q + "\n")
    answer_file(kb, questions, tmp_path / "a.jsonl")
    row = json.loads((tmp_path / "a.jsonl").read_text())
    assert row["answer"] == plain.text


def test_shorthand_and_objects_meet_at_the_same_keywords(kb, tmp_path):
    ropts = RetrievalOptions(mode="keyword")
    assert kb.retrieve(Q, 3, retrieval=ropts) == kb.retrieve(Q, 3, mode="keyword")
    a = kb.answer(Q, 3, retrieval=ropts, answer=AnswerOptions(budget=200))
    b = kb.answer(Q, 3, mode="keyword", budget=200)
    assert (a.text, a.citations) == (b.text, b.citations)
    table = kb.retrieve_batch([Q], 3, retrieval=ropts)
    assert table.column("chunk_id").to_pylist() == [
        h.chunk_id for h in kb.retrieve(Q, 3, mode="keyword")
    ]
    hits = kb.retrieve_batch([Q, "expense report"], 3, retrieval=ropts, output="hits")
    assert hits == [kb.retrieve(q, 3, retrieval=ropts) for q in (Q, "expense report")]
    with pytest.raises(ConfigError, match="output must be 'table' or 'hits'"):
        kb.retrieve_batch([Q], 3, output="rows")  # type: ignore[call-overload]
    # shorthand applies on top of the object; an object of the wrong class is named
    assert kb.retrieve(Q, 3, retrieval=ropts, mode="vector") == kb.retrieve(Q, 3, mode="vector")
    with pytest.raises(ConfigError, match="answer= must be a fastrag.AnswerOptions"):
        kb.answer(Q, answer=ropts)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="retrieval= must be a fastrag.RetrievalOptions"):
        kb.retrieve(Q, retrieval=AnswerOptions())  # type: ignore[arg-type]
    # a batch run resolves its options before reading a question
    with pytest.raises(ConfigError, match="mode must be one of"):
        answer_file(kb, tmp_path / "missing.txt", tmp_path / "a.jsonl", mode="nope")


# -- 2. the old spelling -----------------------------------------------------------------------


def test_the_old_options_keyword_warns_and_still_works(kb):
    with pytest.warns(DeprecationWarning, match=r"pass retrieval=RetrievalOptions"):
        old = kb.retrieve(Q, 3, options=RetrievalOptions(mode="keyword"))
    assert old == kb.retrieve(Q, 3, retrieval=RetrievalOptions(mode="keyword"))
    with pytest.warns(DeprecationWarning, match=r"pass answer=AnswerOptions"):
        ans = kb.answer(Q, 3, options=AnswerOptions(budget=200))
    assert ans.text == kb.answer(Q, 3, answer=AnswerOptions(budget=200)).text
    with pytest.warns(DeprecationWarning, match=r"pass retrieval="):
        kb.retrieve_batch([Q], 3, options=RetrievalOptions(mode="keyword"))


def test_the_old_keyword_errors_clearly_when_it_cannot_be_moved(kb):
    with pytest.raises(ConfigError, match=r"old spelling of retrieval= and answer="):
        kb.retrieve(Q, options=AnswerOptions())  # an answer object where none is taken
    with pytest.raises(ConfigError, match=r"old spelling"):
        kb.answer(Q, answer=AnswerOptions(), options=AnswerOptions())  # given twice
    with pytest.raises(ConfigError, match=r"old spelling"):
        kb.answer(Q, options={"mode": "keyword"})


def test_the_old_dicts_of_batch_files_and_retrievers_warn(kb, tmp_path):
    questions = tmp_path / "q.txt"
    questions.write_text(Q + "\n")
    with pytest.warns(DeprecationWarning, match="answer_options= is deprecated"):
        answer_file(kb, questions, tmp_path / "a.jsonl", answer_options={"mode": "keyword"})
    with pytest.warns(DeprecationWarning, match="answer_options= is deprecated"):
        ropts, _, rate = batch_options(None, None, {"mode": "keyword", "max_concurrency": 2})
    assert ropts.mode == "keyword" and rate == {"max_concurrency": 2}
    with pytest.warns(DeprecationWarning, match="FastragRetriever is deprecated"):
        assert retrieval_of(None, None, None, None, {"exact": True}).exact is True
    assert retrieval_of(RetrievalOptions(mode="vector"), None, None, None).mode == "vector"
    assert retrieval_of(RetrievalOptions(mode="vector"), "keyword", None, None).mode == "keyword"


def test_the_framework_retrievers_take_retrieval(kb):
    pytest.importorskip("langchain_core")
    from fastrag.integrations.langchain import FastragRetriever

    docs = FastragRetriever(kb=kb, k=3, retrieval=RetrievalOptions(mode="keyword")).invoke(Q)
    assert [d.id for d in docs] == [str(h.chunk_id) for h in kb.retrieve(Q, 3, mode="keyword")]
    with pytest.warns(DeprecationWarning):
        FastragRetriever(kb=kb, k=3, options={"mode": "keyword"}).invoke(Q)


# -- 3. one hit serialiser ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(kb_path):
    with ThreadServer(ServeSettings(kbs=(("policies", str(kb_path)),), reload_interval=0)) as s:
        yield s


def _mcp(server, arguments):
    async def run():
        async with httpx2.AsyncClient(timeout=30) as http:
            async with Client(streamable_http_client(server.url + "/mcp", http_client=http)) as c:
                return await c.call_tool("search", arguments)

    return anyio.run(run)


def test_one_hit_shape_over_http_single_and_batch_mcp_and_the_cli(server, kb_path):
    single = httpx.post(server.url + "/v1/retrieve", json={"question": Q, "k": 3}, timeout=30)
    batch = httpx.post(
        server.url + "/v1/retrieve/batch", json={"questions": [Q, Q], "k": 3}, timeout=30
    )
    result = _mcp(server, {"query": Q, "k": 3})
    assert not result.is_error, result.content
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["query", str(kb_path), Q, "-k", "3", "--json"]) == 0
    http_hits = single.json()["hits"]
    assert len(http_hits) == 3 and [h["rank"] for h in http_hits] == [1, 2, 3]
    assert http_hits[0]["marker"] == "[1]" and "metadata" in http_hits[0]
    assert {"chunk_id", "doc_id", "text", "score", "relevance", "title", "source"} <= set(
        http_hits[0]
    )
    for result_of_batch in batch.json()["results"]:  # one batched search: floats to 1e-5
        got = result_of_batch["hits"]
        assert [list(h) for h in got] == [list(h) for h in http_hits]
        for h, want in zip(got, http_hits, strict=True):
            assert {n: v for n, v in h.items() if n not in ("score", "relevance")} == {
                n: v for n, v in want.items() if n not in ("score", "relevance")
            }
            assert h["score"] == pytest.approx(want["score"], rel=1e-5)
            assert h["relevance"] == pytest.approx(want["relevance"], rel=1e-5)
    assert json.loads(result.content[0].text)["hits"] == http_hits
    assert json.loads(out.getvalue())["hits"] == http_hits


def test_mcp_refuses_k_that_is_not_an_int_as_http_does(server):
    r = httpx.post(server.url + "/v1/retrieve", json={"question": Q, "k": "5"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["type"] == "wrong_type"
    for bad in ("5", True, 5.0):
        result = _mcp(server, {"query": Q, "k": bad})
        assert result.is_error, bad
        assert "k" in result.content[0].text, result.content[0].text
    result = _mcp(server, {"query": Q, "k": 101})  # beyond the server's max_k
    assert result.is_error and "between 1 and 100" in result.content[0].text
