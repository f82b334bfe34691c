"""fastrag serve: the native JSON API over real sockets (httpx against uvicorn on 127.0.0.1)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import orjson
import pytest
from conftest import DOCS
from serve_harness import ProcessServer, ThreadServer, save_kb, sse_events

import fastrag
from fastrag import cli
from fastrag.errors import ConfigError
from fastrag.serve import ServeSettings
from fastrag.serve.keys import KeyRing
from fastrag.serve.registry import Current

OTHER = [
    {
        "id": "canteen",
        "title": "Canteen",
        "text": "The canteen opens at 7:30 and closes at 19:00 on working days.",
    },
    {"id": "parking", "text": "Visitors park on level B2; staff park on levels B3 and B4."},
]
LEAVE_Q = "How many days in advance must annual leave requests be submitted?"
LEAVE_SECRET = "working days in advance"  # only in the "leave" document, whose acl is ["staff"]
ALICE, BOB, CAROL = "alice-key-0123456789", "bob-key-0123456789", "carol-key-0123456789"


@pytest.fixture(scope="module")
def kb_paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    return {
        "policies": save_kb([dict(d) for d in DOCS], root / "policies"),
        "other": save_kb(OTHER, root / "other"),
    }


@pytest.fixture(scope="module")
def keys_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.json"
    path.write_text(json.dumps({"keys": [
        {"key": ALICE, "user": "alice", "groups": ["staff"]},
        {"key": BOB, "user": "bob", "groups": []},
        {"sha256": __import__("hashlib").sha256(CAROL.encode()).hexdigest(), "user": "carol",
         "kbs": ["other"]},
    ]}))  # fmt: skip
    return path


def settings(kb_paths, **kw):
    return ServeSettings(
        kbs=tuple((n, str(p)) for n, p in kb_paths.items()), reload_interval=0, **kw
    )


@pytest.fixture(scope="module")
def server(kb_paths):
    with ThreadServer(settings(kb_paths)) as s:
        yield s


@pytest.fixture(scope="module")
def keyed(kb_paths, keys_file):
    with ThreadServer(settings(kb_paths, keys=str(keys_file))) as s:
        yield s


@pytest.fixture(scope="module")
def local_kb(kb_paths):
    return fastrag.KnowledgeBase.load(kb_paths["policies"])


def post(server, path, body, key=None, **kw):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return httpx.post(server.url + path, content=content, headers=headers, timeout=30, **kw)


# -- native endpoints -------------------------------------------------------------------


def test_retrieve_is_the_library_result(server, local_kb):
    r = post(server, "/v1/retrieve", {"question": LEAVE_Q, "k": 3})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    expected = local_kb.retrieve(LEAVE_Q, k=3)
    assert body["kb"] == "policies" and body["snapshot"] == local_kb.stats()["snapshot"]
    assert [h["chunk_id"] for h in body["hits"]] == [h.chunk_id for h in expected]
    assert [h["rank"] for h in body["hits"]] == [1, 2, 3]
    assert body["hits"][0]["score"] == pytest.approx(expected[0].score)
    assert body["hits"][0]["metadata"]["source"] == expected[0].metadata.get("source")


def test_retrieve_options_and_other_kb(server):
    r = post(
        server,
        "/v1/retrieve",
        {
            "question": "canteen opening",
            "kb": "other",
            "k": 1,
            "mode": "keyword",
            "where": {"doc_id": "canteen"},
        },
    )
    assert r.status_code == 200
    assert [h["doc_id"] for h in r.json()["hits"]] == ["canteen"]


def test_retrieve_batch_groups_by_question(server, local_kb):
    qs = [LEAVE_Q, "expense report deadline", "密码多长"]
    r = post(server, "/v1/retrieve/batch", {"questions": qs, "k": 2})
    assert r.status_code == 200
    results = r.json()["results"]
    assert [x["question"] for x in results] == qs
    table = local_kb.retrieve_batch(qs, k=2).to_pydict()
    for i, res in enumerate(results):
        want = [c for qi, c in zip(table["query_index"], table["chunk_id"]) if qi == i]
        assert [h["chunk_id"] for h in res["hits"]] == want


def test_answer_is_the_library_answer(server, local_kb):
    r = post(server, "/v1/answer", {"question": LEAVE_Q, "k": 3})
    assert r.status_code == 200
    body = r.json()
    expected = local_kb.answer(LEAVE_Q, k=3)
    assert body["answer"] == expected.text and body["found"] is True
    assert body["citations"] == {str(m): h.chunk_id for m, h in expected.citations.items()}
    assert body["audit_digest"] == expected.audit_digest
    for field in ("hits", "confidence", "faithfulness", "warnings", "high_risk", "timings"):
        assert field in body


def test_answer_stream_sends_hits_then_text_then_answer(server, local_kb):
    r = post(server, "/v1/answer", {"question": LEAVE_Q, "k": 3, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    kinds = [e for e, _ in events]
    assert kinds[0] == "hits" and kinds[-1] == "answer" and set(kinds[1:-1]) == {"delta"}
    final = events[-1][1]
    assert "".join(d["text"] for e, d in events if e == "delta") == final["answer"]
    assert final["answer"] == local_kb.answer(LEAVE_Q, k=3).text
    assert [h["chunk_id"] for h in events[0][1]["hits"]] == [h["chunk_id"] for h in final["hits"]]


def test_not_found_answer(server):
    body = post(server, "/v1/answer", {"question": "What is the capital of Mongolia?"}).json()
    assert body["found"] is False and body["citations"] == {}
    assert "does not contain" in body["answer"]


def test_answer_batch_plain_and_streamed(server):
    qs = [LEAVE_Q, "What is the capital of Mongolia?"]
    rows = post(server, "/v1/answer/batch", {"questions": qs}).json()["results"]
    assert [r["found"] for r in rows] == [True, False] and rows[0]["citations"]
    assert rows[0]["hits"] and rows[0]["audit_digest"] and [r["index"] for r in rows] == [0, 1]
    events = sse_events(post(server, "/v1/answer/batch", {"questions": qs, "stream": True}).text)
    answers = [d for e, d in events if e == "answer"]
    assert [a["index"] for a in answers] == [0, 1]
    assert [a["answer"] for a in answers] == [r["answer"] for r in rows]
    assert events[-1] == ("done", {"questions": 2})


def test_answer_batch_names_why_one_question_failed(server):
    qs = [LEAVE_Q, "leave " * 2_000]  # the second is over the 10,000-character limit
    rows = post(server, "/v1/answer/batch", {"questions": qs}).json()["results"]
    assert rows[0]["found"] is True and rows[1]["index"] == 1 and rows[1]["question"] == qs[1]
    assert rows[1]["error"]["type"] == "answer_failed"
    assert "12,000 characters" in rows[1]["error"]["message"]


def test_kbs_models_health(server):
    kbs = httpx.get(server.url + "/v1/kbs").json()["kbs"]
    assert [k["name"] for k in kbs] == ["policies", "other"]
    assert kbs[1]["documents"] == 2 and kbs[0]["snapshot"]
    assert httpx.get(server.url + "/healthz").json()["status"] == "ok"


def test_metrics_are_prometheus_text(server):
    post(server, "/v1/retrieve", {"question": LEAVE_Q})
    post(server, "/v1/answer", {"question": LEAVE_Q})
    post(server, "/v1/retrieve", {"question": LEAVE_Q, "k": 0})
    text = httpx.get(server.url + "/metrics").text
    assert 'fastrag_requests_total{endpoint="retrieve",status="200"}' in text
    assert 'fastrag_errors_total{endpoint="retrieve",type="out_of_range"}' in text
    assert 'fastrag_request_seconds_bucket{endpoint="retrieve",le="0.01"}' in text
    assert 'fastrag_answers_total{found="true",kb="policies"}' in text
    assert 'fastrag_hit_rate{kb="policies"}' in text


# -- bad input ------------------------------------------------------------------------------

BAD = [
    (b"{not json", 400, "invalid_json"),
    (b"", 400, "invalid_json"),
    (b"[1, 2]", 400, "invalid_json"),
    (b'{"question": 42}', 400, "wrong_type"),
    (b'{"k": 3}', 400, "missing_field"),
    (b'{"question": "q", "colour": "red"}', 400, "unknown_option"),
    (b'{"question": "q", "k": 0}', 400, "out_of_range"),
    (b'{"question": "q", "k": 5000}', 400, "out_of_range"),
    (b'{"question": "q", "k": "5"}', 400, "wrong_type"),
    (b'{"question": "q", "mode": "psychic"}', 400, "invalid_value"),
    (b'{"question": "q", "kb": "nope"}', 404, "unknown_kb"),
    (b'{"question": "q", "where": {"ord": {"~": 1}}}', 400, "invalid_request"),
]


@pytest.mark.parametrize("body,status,kind", BAD)
@pytest.mark.parametrize("path", ["/v1/retrieve", "/v1/answer"])
def test_bad_requests_get_a_json_error(server, path, body, status, kind):
    r = post(server, path, body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"type", "message"} and err["type"] == kind and err["message"]


def test_error_messages_name_the_problem(server):
    assert (
        "'colour'"
        in post(server, "/v1/retrieve", {"question": "q", "colour": 1}).json()["error"]["message"]
    )
    assert (
        "'nope'"
        in post(server, "/v1/retrieve", {"question": "q", "kb": "nope"}).json()["error"]["message"]
    )
    msg = post(server, "/v1/retrieve/batch", {"questions": ["a", 7]}).json()["error"]["message"]
    assert "questions[1]" in msg


def test_body_over_the_limit_is_413(kb_paths):
    with ThreadServer(settings(kb_paths, max_body=1000)) as s:
        r = post(s, "/v1/retrieve", {"question": "x" * 2000})
        assert r.status_code == 413 and r.json()["error"]["type"] == "body_too_large"

        def chunks():  # no Content-Length: the limit holds while reading
            for _ in range(5):
                yield b" " * 400

        r = httpx.post(s.url + "/v1/retrieve", content=chunks(), timeout=10)
        assert r.status_code == 413


def test_routes_and_methods(server):
    r = httpx.get(server.url + "/v1/retrieve")
    assert r.status_code == 405 and r.json()["error"]["type"] == "method_not_allowed"
    r = httpx.get(server.url + "/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found"


class _Gate:
    """A stand-in knowledge base whose retrieve waits for a signal (or raises)."""

    def __init__(self, kb, *, fail=False):
        self.kb, self.fail = kb, fail
        self.entered, self.release = threading.Event(), threading.Event()

    def retrieve(self, *args, **kwargs):
        if self.fail:
            raise RuntimeError("secret internals /etc/passwd")
        self.entered.set()
        self.release.wait(10)
        return self.kb.retrieve(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.kb, name)


def _swap(server, gate):
    served = server.service.registry.get("policies", fastrag.serve.keys.TRUSTED)
    old = served.current
    served.current = Current(gate, old.snapshot)
    return served, old


def test_engine_failure_is_500_without_traceback(kb_paths):
    with ThreadServer(settings(kb_paths)) as s:
        served, old = _swap(s, _Gate(fastrag.KnowledgeBase.load(kb_paths["policies"]), fail=True))
        r = post(s, "/v1/retrieve", {"question": LEAVE_Q})
        assert r.status_code == 500
        err = r.json()["error"]
        assert err["type"] == "internal_error"
        assert "secret" not in r.text and "Traceback" not in r.text and "passwd" not in r.text


def test_full_queue_is_503_with_retry_after(kb_paths):
    with ThreadServer(settings(kb_paths, max_queue=1)) as s:
        gate = _Gate(fastrag.KnowledgeBase.load(kb_paths["policies"]))
        _swap(s, gate)
        first = {}
        t = threading.Thread(
            target=lambda: first.update(r=post(s, "/v1/retrieve", {"question": LEAVE_Q}))
        )
        t.start()
        assert gate.entered.wait(10)
        r = post(s, "/v1/retrieve", {"question": LEAVE_Q})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["type"] == "overloaded"
        gate.release.set()
        t.join(10)
        assert first["r"].status_code == 200
        assert post(s, "/v1/retrieve", {"question": LEAVE_Q}).status_code == 200


def test_slow_request_is_504(kb_paths):
    with ThreadServer(settings(kb_paths, timeout=0.3)) as s:
        gate = _Gate(fastrag.KnowledgeBase.load(kb_paths["policies"]))
        _swap(s, gate)
        r = post(s, "/v1/retrieve", {"question": LEAVE_Q})
        gate.release.set()
        assert r.status_code == 504 and r.json()["error"]["type"] == "timeout"


def test_new_snapshot_is_served_and_in_flight_requests_finish(tmp_path):
    path = save_kb([dict(d) for d in DOCS], tmp_path / "kb")
    with ThreadServer(ServeSettings(kbs=(("kb", str(path)),), reload_interval=0)) as s:
        old_snapshot = httpx.get(s.url + "/v1/kbs").json()["kbs"][0]["snapshot"]
        served = s.service.registry.get("kb", fastrag.serve.keys.TRUSTED)
        gate = _Gate(served.current.kb)
        served.current = Current(gate, served.current.snapshot)
        result = {}
        t = threading.Thread(
            target=lambda: result.update(r=post(s, "/v1/retrieve", {"question": "canteen"}))
        )
        t.start()
        assert gate.entered.wait(10)
        kb = fastrag.KnowledgeBase.load(path)
        kb.add([dict(OTHER[0])])
        new_snapshot = kb.save(path)
        assert s.service.registry.refresh() == ["kb"]
        gate.release.set()
        t.join(10)
        assert result["r"].status_code == 200 and result["r"].json()["snapshot"] == old_snapshot
        r = post(s, "/v1/retrieve", {"question": "When does the canteen open?", "k": 1})
        assert r.json()["snapshot"] == new_snapshot != old_snapshot
        assert r.json()["hits"][0]["doc_id"] == "canteen"


# -- keys and ACL ------------------------------------------------------------------------


def test_key_ring():
    ring = KeyRing(
        [
            {"key": ALICE, "user": "alice", "groups": ["staff"]},
            {"sha256": __import__("hashlib").sha256(BOB.encode()).hexdigest(), "user": "bob"},
        ]
    )
    assert ring.authenticate(ALICE).principal == fastrag.Principal("alice", ("staff",))
    assert ring.authenticate(BOB).user == "bob"
    assert ring.authenticate("wrong-key-123") is None and ring.authenticate(None) is None
    assert ALICE not in repr(ring)
    with pytest.raises(ConfigError, match=r"keys\[1\]") as exc:
        KeyRing([{"key": ALICE, "user": "a"}, {"key": "secret-key-xyz", "user": ""}])
    assert "secret-key-xyz" not in str(exc.value)
    with pytest.raises(ConfigError, match="exactly one"):
        KeyRing([{"user": "a"}])
    with pytest.raises(ConfigError, match="twice"):
        KeyRing([{"key": ALICE, "user": "a"}, {"key": ALICE, "user": "b"}])


@pytest.mark.parametrize("method,path", [
    ("POST", "/v1/retrieve"), ("POST", "/v1/answer"), ("POST", "/v1/retrieve/batch"),
    ("POST", "/v1/answer/batch"), ("GET", "/v1/kbs"), ("GET", "/metrics"), ("GET", "/v1/models"),
    ("POST", "/v1/chat/completions"), ("POST", "/v1/embeddings"), ("POST", "/mcp"),
])  # fmt: skip
@pytest.mark.parametrize("key", [None, "not-a-key-000000"])
def test_without_a_valid_key_401(keyed, method, path, key):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    r = httpx.request(method, keyed.url + path, content=b'{"question": "q"}', headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["type"] == "unauthorized" and r.headers["www-authenticate"] == "Bearer"


def test_health_and_page_need_no_key(keyed):
    assert httpx.get(keyed.url + "/healthz").status_code == 200
    assert httpx.get(keyed.url + "/").status_code == 200


def test_acl_holds_on_every_endpoint(keyed, local_kb):
    hidden = [h.text for h in local_kb.retrieve(LEAVE_Q, k=50, where={"doc_id": "leave"})]
    assert hidden

    def bodies(key):
        q = {"question": LEAVE_Q, "k": 5}
        yield post(keyed, "/v1/retrieve", q, key).text
        yield post(keyed, "/v1/retrieve/batch", {"questions": [LEAVE_Q], "k": 5}, key).text
        yield post(keyed, "/v1/answer", q, key).text
        yield post(keyed, "/v1/answer", {**q, "stream": True}, key).text
        yield post(
            keyed, "/v1/answer/batch", {"questions": [LEAVE_Q], "k": 5, "stream": True}, key
        ).text
        chat = {"model": "policies", "messages": [{"role": "user", "content": LEAVE_Q}]}
        yield post(keyed, "/v1/chat/completions", chat, key).text
        yield post(keyed, "/v1/chat/completions", {**chat, "stream": True}, key).text

    alice, bob = list(bodies(ALICE)), list(bodies(BOB))
    assert all('"doc_id":"leave"' in b for b in alice)  # the staff-only chunks reach alice
    assert LEAVE_SECRET in alice[2]  # ... and her answer quotes them
    for body in bob:
        assert '"doc_id":"leave"' not in body and LEAVE_SECRET not in body
        assert not any(text in body for text in hidden)


def test_allowed_kbs(keyed):
    r = post(keyed, "/v1/retrieve", {"question": "canteen", "kb": "policies"}, CAROL)
    assert r.status_code == 404 and r.json()["error"]["type"] == "unknown_kb"
    assert r.json()["error"]["message"].endswith(
        "(available: 'other')"
    )  # names only what carol may use
    assert (
        post(keyed, "/v1/retrieve", {"question": "canteen", "kb": "other"}, CAROL).status_code
        == 200
    )
    h = {"Authorization": f"Bearer {CAROL}"}
    assert [k["name"] for k in httpx.get(keyed.url + "/v1/kbs", headers=h).json()["kbs"]] == [
        "other"
    ]
    assert [m["id"] for m in httpx.get(keyed.url + "/v1/models", headers=h).json()["data"]] == [
        "other"
    ]


def test_a_restricted_key_meets_only_the_names_it_may_use(keyed):
    # carol may use "other" only; "policies" is the server's first (default) knowledge base.
    h = {"Authorization": f"Bearer {CAROL}"}
    bodies = [
        post(keyed, "/v1/retrieve", {"question": "canteen"}, CAROL),
        post(keyed, "/v1/answer", {"question": "canteen"}, CAROL),
        post(keyed, "/v1/retrieve/batch", {"questions": ["canteen"]}, CAROL),
    ]
    for r in bodies:  # no kb named: the first carol may use, not the server's default
        assert r.status_code == 200 and r.json()["kb"] == "other"
    refused = [
        post(keyed, "/v1/retrieve", {"question": "canteen", "kb": "nope"}, CAROL),
        post(keyed, "/v1/retrieve", {"question": "canteen", "kb": "policies"}, CAROL),
    ]
    unknown, forbidden = (r.json()["error"] for r in refused)
    assert unknown["type"] == forbidden["type"] == "unknown_kb"
    assert unknown["message"] == forbidden["message"].replace("'policies'", "'nope'")
    metrics = httpx.get(keyed.url + "/metrics", headers=h)
    assert metrics.status_code == 403 and metrics.json()["error"]["type"] == "forbidden"
    for r in [*bodies, *refused[:1], metrics]:
        assert "policies" not in r.text
    assert httpx.get(keyed.url + "/metrics", headers={"X-API-Key": ALICE}).status_code == 200


def test_refuses_to_bind_beyond_loopback_without_keys(kb_paths, capsys):
    code = cli.main(["serve", "--kb", str(kb_paths["policies"]), "--host", "0.0.0.0"])
    assert code == 1
    assert "refusing to serve on 0.0.0.0 without API keys" in capsys.readouterr().err


# -- processes: keys never logged, workers share the knowledge base and switch snapshots --


def test_keys_are_never_logged(kb_paths, keys_file, tmp_path):
    with ProcessServer(["--kb", f"policies={kb_paths['policies']}", "--keys", str(keys_file),
                        "--access-log"], tmp_path / "log") as s:  # fmt: skip
        for key in (ALICE, "wrong-key-0123456789"):
            post(s, "/v1/retrieve", {"question": LEAVE_Q}, key)
            httpx.get(s.url + "/v1/kbs", headers={"X-API-Key": key})
        post(s, "/v1/retrieve", {"question": LEAVE_Q, "k": "bad"}, ALICE)
    # Read once the server has exited (the with block waits for it): every request it
    # answered has been logged and flushed by then, with no sleep to guess how long it takes.
    assert s.proc is not None and s.proc.returncode is not None
    log = s.log()
    assert log.count('"POST /v1/retrieve HTTP/1.1"') == 3  # the access log is on: all requests
    assert log.count('"GET /v1/kbs HTTP/1.1"') == 2
    assert ALICE not in log and "wrong-key-0123456789" not in log


def test_two_workers_switch_to_a_new_snapshot_without_failing_a_request(tmp_path):
    path = save_kb([dict(d) for d in DOCS], tmp_path / "kb")
    with ProcessServer(["--kb", f"kb={path}", "--workers", "2", "--reload-interval", "0.1"],
                       tmp_path / "log") as s:  # fmt: skip
        statuses, snapshots, pids = [], set(), set()
        stop = threading.Event()

        answered = [threading.Event() for _ in range(3)]

        def hammer(i):
            with httpx.Client(base_url=s.url, timeout=30) as c:
                while not stop.is_set():
                    r = c.post(
                        "/v1/answer", json={"question": LEAVE_Q}, headers={"Connection": "close"}
                    )
                    statuses.append(r.status_code)
                    answered[i].set()
                    if r.status_code == 200:
                        snapshots.add(r.json()["snapshot"])
                    pids.add(c.get("/healthz", headers={"Connection": "close"}).json()["pid"])

        threads = [threading.Thread(target=hammer, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        # The snapshot switches under load: every client has had an answer before the save.
        assert all(e.wait(timeout=60) for e in answered)
        kb = fastrag.KnowledgeBase.load(path)
        kb.add([dict(OTHER[0])])
        new = kb.save(path, keep=1)  # the old snapshot is deleted while workers still map it
        deadline = time.monotonic() + 30
        seen_new = 0
        while time.monotonic() < deadline and seen_new < 10:
            r = httpx.post(s.url + "/v1/retrieve", json={"question": "canteen opening", "k": 1},
                           headers={"Connection": "close"})  # fmt: skip
            seen_new = seen_new + 1 if r.json()["snapshot"] == new else 0
        stop.set()
        for t in threads:
            t.join(30)
        for _ in range(300):  # the kernel may hand most connections to one worker: ask on
            if len(pids) == 2:
                break
            pids.add(httpx.get(s.url + "/healthz", headers={"Connection": "close"}).json()["pid"])
        metrics = httpx.get(s.url + "/metrics").text
    assert seen_new == 10  # ten answers in a row from the new snapshot, whichever worker
    assert statuses and set(statuses) == {200}
    assert new in snapshots
    assert len(pids) == 2  # two worker processes answered
    count = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith('fastrag_requests_total{endpoint="answer",status="200"}')
    )
    assert count >= len(statuses)  # /metrics sums over both workers


def test_engine_calls_on_the_event_loop(kb_paths, local_kb):
    with ThreadServer(settings(kb_paths, engine_threads=0)) as s:
        r = post(s, "/v1/retrieve", {"question": LEAVE_Q, "k": 3})
        assert [h["chunk_id"] for h in r.json()["hits"]] == [
            h.chunk_id for h in local_kb.retrieve(LEAVE_Q, k=3)
        ]
        events = sse_events(post(s, "/v1/answer", {"question": LEAVE_Q, "stream": True}).text)
        assert [e for e, _ in events][0] == "hits" and events[-1][0] == "answer"
        assert events[-1][1]["answer"] == local_kb.answer(LEAVE_Q).text
        assert post(s, "/v1/retrieve", {"question": LEAVE_Q, "k": 0}).status_code == 400
