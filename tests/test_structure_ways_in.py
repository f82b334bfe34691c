"""Issue 24 from outside the library: multimodal questions, OCR flags and distillation over
the CLI, HTTP and MCP (real servers on 127.0.0.1, real Tesseract, the official clients)."""

from __future__ import annotations

import base64
import contextlib
import io
import json

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from openai_server import CHAT, OpenAIServer
from serve_harness import ThreadServer, save_kb, sse_events
from test_ocr import SCREEN, _scan, _scanned_pdf

from fastrag.cli import main
from fastrag.serve import ServeSettings
from fastrag.serve.multimodal import MAX_IMAGES

DOCS = [
    {"id": "sv0432", "text": "Alarm SV0432 means the spindle overheats: check the coolant level."},
    {"id": "ot0500", "text": "Alarm OT0500 means an axis passed its overtravel limit."},
    {"id": "belt", "text": "The conveyor belt is cleaned every Friday."},
    {
        "id": "faults",
        "format": "markdown",
        "text": "# Fault codes\n\nFault code: SV0417 | Symptom: Servo parameter invalid | "
        "Fix: Re-enter the servo parameters",
    },
]
ALARM = "What should I do about this alarm?"
DISTILLER = "You condense numbered passages"  # how the model distiller's prompt starts


def _png(lines: list[str]) -> bytes:
    buffer = io.BytesIO()
    _scan(lines, (900, 240)).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def screen_b64() -> str:
    return base64.b64encode(_png(SCREEN)).decode()


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    return save_kb(
        [dict(d) for d in DOCS], tmp_path_factory.mktemp("ways") / "alarms", window=200, overlap=40
    )


@pytest.fixture(scope="module")
def server(kb_path):
    with ThreadServer(ServeSettings(kbs=(("alarms", str(kb_path)),), reload_interval=0)) as s:
        yield s


def test_http_multimodal_answer_retrieve_and_stream(server, screen_b64):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        r = c.post("/v1/answer", json={"question": ALARM, "multimodal": {"images": [screen_b64]}})
        assert r.status_code == 200, r.text
        ans = r.json()
        assert "SV0432" in ans["question"] and ans["question"].startswith(ALARM)
        assert ans["hits"][0]["doc_id"] == "sv0432" and ans["found"]
        # A data URL is accepted; captions and labels fuse like the library's.
        seen = {"captions": ["Control panel showing alarm OT0500"], "labels": ["alarm light"]}
        r = c.post("/v1/retrieve", json={"question": ALARM, "k": 2, "multimodal": seen})
        assert r.status_code == 200, r.text
        assert r.json()["hits"][0]["doc_id"] == "ot0500"
        assert r.json()["question"].endswith("labels: alarm light")
        url = "data:image/png;base64," + screen_b64
        r = c.post("/v1/retrieve", json={"question": ALARM, "multimodal": {"images": [url]}})
        assert r.json()["hits"][0]["doc_id"] == "sv0432"
        r = c.post("/v1/answer", json={"question": ALARM, "stream": True, "multimodal": seen})
        events = sse_events(r.text)
        assert events[0][0] == "hits" and events[0][1]["hits"][0]["doc_id"] == "ot0500"
        assert events[-1][0] == "answer" and "OT0500" in events[-1][1]["question"]


@pytest.mark.parametrize(
    ("multimodal", "status", "kind"),
    [
        ({"images": ["not base64!"]}, 400, "invalid_image"),
        ({"images": [base64.b64encode(b"plain text, not a picture").decode()]}, 400,
         "invalid_image"),
        ({"images": [""]}, 400, "invalid_image"),
        ({"images": ["aGk="] * (MAX_IMAGES + 1)}, 400, "out_of_range"),
        ({"images": 3}, 400, "wrong_type"),
        ({"pictures": []}, 400, "unknown_option"),
        ({"captions": ["x"], "ocr_languages": "eng; rm -rf /"}, 400, "invalid_value"),
        ({"images": ["{png}"], "ocr_languages": "klingon"}, 501, "ocr_unavailable"),
        ({"captions": ["x" * 10_001]}, 400, "invalid_request"),  # over the question limit
    ],
)  # fmt: skip
def test_http_multimodal_bad_input_is_a_json_error(server, screen_b64, multimodal, status, kind):
    if multimodal.get("images") == ["{png}"]:
        multimodal = {**multimodal, "images": [screen_b64]}
    r = httpx.post(
        server.url + "/v1/answer", json={"question": ALARM, "multimodal": multimodal}, timeout=60
    )
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["type"] == kind
    assert "multimodal" in error["message"] or "characters" in error["message"]


def test_http_distill_extractive_and_llm_refused_without_a_model(server):
    q = "What is the fix for fault code SV0417?"
    r = httpx.post(server.url + "/v1/answer", json={"question": q, "distill": "extractive"})
    assert r.status_code == 200, r.text
    ans = r.json()
    assert ans["distilled"]["distiller"] == "extractive" and ans["distilled"]["facts"]
    assert "Re-enter the servo parameters" in ans["answer"]
    r = httpx.post(server.url + "/v1/answer", json={"question": q, "distill": "llm"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "not_available"
    assert "--llm" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/answer", json={"question": q, "distill": "gpt-4o"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_value"


@contextlib.asynccontextmanager
async def _mcp(url: str):
    async with httpx2.AsyncClient(timeout=60) as http:
        async with Client(streamable_http_client(url + "/mcp", http_client=http)) as c:
            yield c


def test_mcp_multimodal_and_distill(server, screen_b64):
    async def run():
        async with _mcp(server.url) as c:
            found = await c.call_tool(
                "search", {"query": ALARM, "k": 1, "multimodal": {"images": [screen_b64]}}
            )
            answered = await c.call_tool("answer", {
                "question": "What is the fix for fault code SV0417?", "distill": "extractive",
                "multimodal": {"labels": ["servo drive"]},
            })  # fmt: skip
            bad = await c.call_tool("search", {"query": ALARM, "multimodal": {"images": ["!!"]}})
            no_llm = await c.call_tool("answer", {"question": ALARM, "distill": "llm"})
            return found, answered, bad, no_llm

    found, answered, bad, no_llm = anyio.run(run)
    assert not found.is_error, found.content
    assert json.loads(found.content[0].text)["hits"][0]["doc_id"] == "sv0432"
    ans = json.loads(answered.content[0].text)
    assert ans["question"].endswith("labels: servo drive")
    assert ans["distilled"]["distiller"] == "extractive"
    assert bad.is_error and "not base64" in bad.content[0].text
    assert no_llm.is_error and "--llm" in no_llm.content[0].text


def test_distill_llm_over_http_and_mcp_uses_the_servers_model(kb_path, monkeypatch):
    def reply(body):
        system = body["messages"][0]["content"]
        if system.startswith(DISTILLER):
            return json.dumps({"facts": [{"text": "Re-enter the servo parameters.", "id": 1}]})
        return "Re-enter the servo parameters [1]"

    with OpenAIServer() as model:
        model.chat_answer = reply
        monkeypatch.setenv("FASTRAG_BASE_URL", model.base_url)
        monkeypatch.setenv("FASTRAG_API_KEY", "model-key")
        monkeypatch.setenv("FASTRAG_CHAT_MODEL", "test-model")
        settings = ServeSettings(kbs=(("alarms", str(kb_path)),), llm=True, reload_interval=0)
        q = "What is the fix for fault code SV0417?"
        with ThreadServer(settings) as s:
            r = httpx.post(s.url + "/v1/answer", json={"question": q, "distill": "llm"}, timeout=30)

            async def run():
                async with _mcp(s.url) as c:
                    return await c.call_tool("answer", {"question": q, "distill": "llm"})

            via_mcp = anyio.run(run)
        prompts = [req.body["messages"][0]["content"] for req in model.requests_to(CHAT)]
    assert r.status_code == 200, r.text
    for ans in (r.json(), json.loads(via_mcp.content[0].text)):
        assert ans["distilled"]["distiller"] == "model"
        assert [f["text"] for f in ans["distilled"]["facts"]] == ["Re-enter the servo parameters."]
        assert ans["model"] == "test-model"
    assert sum(p.startswith(DISTILLER) for p in prompts) == 2  # one distillation per answer


def test_cli_multimodal_ask_and_query(kb_path, tmp_path, capsys):
    screen = tmp_path / "screen.png"
    screen.write_bytes(_png(SCREEN))
    kb = str(kb_path)
    assert main(["ask", ALARM, "--kb", kb, "--image", str(screen), "--json"]) == 0
    ans = json.loads(capsys.readouterr().out)
    assert "SV0432" in ans["question"] and ans["hits"][0]["doc_id"] == "sv0432"
    assert main(["query", kb, ALARM, "--caption", "alarm OT0500 on the panel", "--label",
                 "overtravel", "--json", "-k", "1"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["hits"][0]["doc_id"] == "ot0500" and "labels: overtravel" in out["question"]
    assert main(["query", kb, ALARM, "other question", "--caption", "x"]) == 2
    assert main(["ask", ALARM, "--kb", kb, "--image", str(tmp_path / "missing.png")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert main(["ask", ALARM, "--kb", kb, "--ocr-languages", "eng"]) == 1
    assert "give at least one --image" in capsys.readouterr().err


def test_cli_index_ocr_flags(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    _scanned_pdf(src / "scan.pdf")
    kb = str(tmp_path / "kb")
    assert main(["index", str(src), "--kb", kb, "--no-ocr"]) == 1
    assert "OCR is off" in capsys.readouterr().err
    assert main(["index", str(src), "--kb", kb, "--ocr-languages", "eng; rm", "--overwrite"]) == 1
    assert "ocr_languages" in capsys.readouterr().err
    assert main(["index", str(src), "--kb", kb, "--ocr", "--ocr-languages", "eng",
                 "--ocr-seconds", "60", "--overwrite"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["query", kb, "When was the relief valve replaced?", "--json", "-k", "1"]) == 0
    hit = json.loads(capsys.readouterr().out)["hits"][0]
    assert hit["doc_id"] == "scan.pdf#page=1" and hit["metadata"]["ocr"] is True
