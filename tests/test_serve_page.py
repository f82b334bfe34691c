"""The page at ``/``, in a real headless Chromium driven over the DevTools protocol.

It types a question, waits for the answer, reads the rendered chunks and
answer from the DOM and saves screenshots (``$FASTRAG_ARTIFACTS``, default
``test-artifacts/`` at the repository root). Needs Debian's ``chromium``
(``.ci/run`` installs it); without it the tests skip, except under CI.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from fastrag.datasets import demo_documents
from serve_harness import ThreadServer

import fastrag
from fastrag.serve import ServeSettings

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    if os.environ.get("CI"):
        raise RuntimeError(
            "CI must install chromium (apt-get install -y chromium) for the page tests"
        )
    pytest.skip("chromium is not installed", allow_module_level=True)

websockets_sync = pytest.importorskip("websockets.sync.client")
ARTIFACTS = Path(
    os.environ.get("FASTRAG_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts")
)


class Browser:
    """Headless Chromium and one page, spoken to over the DevTools protocol."""

    def __init__(self, profile: Path) -> None:
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--window-size=1200,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # Debian's chromium is a shell wrapper: stop its whole group
        )  # fmt: skip
        try:
            self._connect(profile)
        except BaseException:
            self._stop()
            raise

    def _connect(self, profile: Path) -> None:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start")
            time.sleep(0.05)
        port = int(port_file.read_text().split("\n")[0])
        pages = [
            t for t in httpx.get(f"http://127.0.0.1:{port}/json/list").json() if t["type"] == "page"
        ]
        self._conn = websockets_sync.connect(
            pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30
        )
        self.ws = self._conn.__enter__()
        self.ids = itertools.count(1)
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method: str, **params):
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def js(self, expression: str):
        out = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def wait(self, expression: str, timeout: float = 30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {expression}")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait(
            "document.readyState === 'complete' && document.getElementById('kb').options.length > 0"
        )

    def ask(self, question: str) -> None:
        # Record when chunks and answer text first appear, to check the order on screen.
        self.js("""(() => { window.__seen = {};
            const mark = (k) => { if (!window.__seen[k]) window.__seen[k] = performance.now(); };
            new MutationObserver(() => { if (document.querySelectorAll('#chunks li').length) mark('chunks');
                                         if (document.getElementById('answer').textContent) mark('answer'); })
              .observe(document.body, {subtree: true, childList: true, characterData: true}); })()""")
        self.js(
            "document.getElementById('question').value = ''; document.getElementById('question').focus()"
        )
        self.call("Input.insertText", text=question)
        self.js("document.getElementById('submit').click()")
        self.wait("['done', 'error'].includes(document.getElementById('status').dataset.state)")

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        path.write_bytes(
            base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        )
        return path

    def close(self) -> None:
        self._conn.__exit__(None, None, None)
        self._stop()

    def _stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(10)
                time.sleep(0.2)  # the wrapper exits first; let the browser follow
            except subprocess.TimeoutExpired:
                pass


READ_PAGE = """(() => ({
  state: document.getElementById('status').dataset.state,
  status: document.getElementById('status').textContent,
  chunks: [...document.querySelectorAll('#chunks li.chunk')].map(li => ({
    id: li.id, marker: li.dataset.marker, chunk_id: Number(li.dataset.chunkId),
    title: li.querySelector('.title')?.textContent, source: li.querySelector('.source')?.textContent,
    score: li.querySelector('.score')?.textContent, preview: li.querySelector('.preview')?.textContent })),
  answer: document.getElementById('answer').textContent,
  cites: [...document.querySelectorAll('#answer a.cite')].map(a => ({href: a.getAttribute('href'), text: a.textContent})),
  notfound: document.getElementById('notfound').hidden ? null : document.getElementById('notfound').textContent,
  heading: document.querySelector('#sources h2').textContent,
  seen: window.__seen,
}))()"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    path = tmp_path_factory.mktemp("page") / "demo"
    fastrag.KnowledgeBase.build(demo_documents()).save(path)
    with ThreadServer(ServeSettings(kbs=(("demo", str(path)),), reload_interval=0)) as server:
        browser = Browser(tmp_path_factory.mktemp("chromium"))
        try:
            yield server, browser, fastrag.KnowledgeBase.load(path)
        finally:
            browser.close()


def test_page_shows_the_chunks_then_the_cited_answer(site):
    server, browser, kb = site
    question = "How many days do I have to submit an expense report?"
    browser.open(server.url + "/?lang=en")
    browser.ask(question)
    page = browser.js(READ_PAGE)
    shot = browser.screenshot("serve-page-en.png")
    assert shot.stat().st_size > 10_000
    expected = kb.answer(question)
    assert page["state"] == "done", page["status"]
    assert page["heading"] == "Retrieved chunks"
    assert [c["chunk_id"] for c in page["chunks"]] == [h.chunk_id for h in expected.hits]
    first, hit = page["chunks"][0], expected.hits[0]
    assert first["marker"] == "1" and first["title"] == hit.metadata["title"]
    assert first["source"] == hit.metadata["source"] and first["score"] == f"score {hit.score:.3f}"
    assert hit.text.split()[0] in first["preview"]
    assert page["answer"] == expected.text and page["notfound"] is None
    assert page["cites"] and all(c["href"] == f"#chunk-{c['text'][1:-1]}" for c in page["cites"])
    ids = {c["id"] for c in page["chunks"]}
    assert all(c["href"][1:] in ids for c in page["cites"])  # each [n] links to a shown chunk
    assert page["seen"]["chunks"] <= page["seen"]["answer"]  # the sources are on screen first


def test_page_in_chinese_and_not_found(site):
    server, browser, kb = site
    browser.open(server.url + "/?lang=zh")
    browser.ask("年假怎么申请？")
    page = browser.js(READ_PAGE)
    browser.screenshot("serve-page-zh.png")
    assert page["heading"] == "检索到的片段" and page["state"] == "done"
    assert page["answer"] == kb.answer("年假怎么申请？").text and "[1]" in page["answer"]
    browser.ask("公司食堂几点开门？")
    page = browser.js(READ_PAGE)
    browser.screenshot("serve-page-not-found.png")
    expected = kb.answer("公司食堂几点开门？")
    assert expected.found is False and page["answer"] == expected.text
    assert page["chunks"]  # what was retrieved is still shown
    assert page["notfound"] == "未找到：知识库中没有该问题的答案。" and page["cites"] == []


def test_page_assets_are_served_locally(site):
    server, _, _ = site
    html = httpx.get(server.url + "/").text
    assert "http://" not in html and "https://" not in html  # no CDN
    for asset in ("/static/app.js", "/static/app.css"):
        r = httpx.get(server.url + asset)
        assert r.status_code == 200 and len(r.content) > 1000
        assert "https://" not in r.text


def test_page_works_under_its_content_security_policy(site):
    server, browser, kb = site
    r = httpx.get(server.url + "/")
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe" not in csp
    assert r.headers["x-content-type-options"] == "nosniff"
    # Record every violation of the policy from the first line the page runs.
    browser.call(
        "Page.addScriptToEvaluateOnNewDocument",
        source="window.__csp = []; document.addEventListener('securitypolicyviolation', "
        "(e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));",
    )
    browser.open(server.url + "/?lang=en")
    question = "How many days do I have to submit an expense report?"
    browser.ask(question)
    page = browser.js(READ_PAGE)
    assert page["state"] == "done" and page["answer"] == kb.answer(question).text
    assert browser.js("window.__csp") == []  # the page needs nothing the policy forbids
    # ... and the policy is enforced: an injected inline script does not run.
    browser.js(
        "(() => { const s = document.createElement('script'); s.textContent = 'window.__ran = 1';"
        " document.body.appendChild(s); })()"
    )
    browser.wait("window.__csp.length > 0")
    assert browser.js("window.__ran === undefined") is True


def test_page_with_an_unknown_or_prototype_language_shows_the_default_labels(site):
    server, browser, _ = site
    for lang in ("__proto__", "constructor", "toString", "xx"):
        browser.open(server.url + f"/?lang={lang}")
        labels = browser.js(
            "(() => ({ tagline: document.getElementById('tagline').textContent,"
            " ask: document.getElementById('submit').textContent,"
            " placeholder: document.getElementById('question').placeholder,"
            " heading: document.querySelector('#sources h2').textContent,"
            " lang: document.getElementById('lang').textContent }))()"
        )
        assert labels == {
            "tagline": "Answers from your knowledge base, with their sources",
            "ask": "Ask",
            "placeholder": "Ask a question…",
            "heading": "Retrieved chunks",
            "lang": "中文",
        }, lang
