"""fastrag.batch.distributed on a local 2-CPU Ray: the same answers as the single-process path."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastrag.datasets import demo_documents
from openai_server import CHAT, OpenAIServer

from fastrag import KnowledgeBase, OpenAIChatGenerator
from fastrag.answer.table import ANSWER_BATCH_SCHEMA
from fastrag.batch.files import answer_file
from fastrag.config import ClientConfig
from fastrag.errors import ConfigError, StoreError

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

from fastrag.batch.distributed import answer_dataset, answer_file_ray  # noqa: E402

# Ray Data's own DataContext() sets three fields it deprecates (ray 2.60); nothing we pass.
pytestmark = [
    pytest.mark.filterwarnings(f"ignore:`{field}` is deprecated:DeprecationWarning")
    for field in ("use_push_based_shuffle", "use_polars", "use_arrow_tensor_v2")
]

BASE = [
    "年假怎么申请？", "公司食堂几点开门？", "设备丢失后多久内要报告？", "密码多久更换一次？",
    "报销需要在多少天内提交？", "试用期多长时间？", "员工生日有什么福利？", "远程办公每周几天？",
    "How many days do I have to submit an expense report?", "annual leave policy",
    "what is the password policy", "lost laptop", "cafeteria opening hours", "remote work",
]  # fmt: skip
SUFFIXES = [
    "", " please", "？", " 谢谢", " details", " quickly", " 规定", " now", " asap", " today",
    " rules", " 多少", " exactly", " help", " policy", " 吗", " for staff", " in 2026", " again", " ok",
]  # fmt: skip
# 310 questions: mostly distinct, with exact duplicates and empty / blank ones.
BLANKS = ["", "   ", "\t"] * 5
QUESTIONS = [b + s for s in SUFFIXES for b in BASE] + BASE[:10] + BLANKS + [BASE[0]] * 5
BATCH = 16  # several batches per actor
ACTORS = 2
IDLE_WORKERS_KEPT_MS = 30 * 60 * 1000  # longer than the module runs


@pytest.fixture(scope="module")
def ray_local(tmp_path_factory):
    # Ray puts the driver's working directory first on its workers' sys.path; from a
    # source checkout that would shadow the installed fastrag (whose kernels the
    # checkout's fastrag/ lacks), so start it elsewhere.
    # One Ray for the module, whose idle workers live as long as it does: by default Ray kills
    # an idle worker above its soft limit (num_cpus) after a second, so each test's Ray Data
    # tasks started new worker processes that imported fastrag again. Kept, the next test's
    # tasks reuse them (actors still get processes of their own). Each test asserts the same.
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("ray-cwd"))
    try:
        ray.init(
            num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
            _system_config={"idle_worker_killing_time_threshold_ms": IDLE_WORKERS_KEPT_MS},
        )  # fmt: skip
        yield
    finally:
        ray.shutdown()
        os.chdir(cwd)


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("kb") / "kb"
    KnowledgeBase.build(demo_documents()).save(path)
    return path


@pytest.fixture(scope="module")
def reference(kb_path) -> list[dict]:
    """The single-process answers of QUESTIONS, all in one answer_batch call."""
    return KnowledgeBase.load(kb_path).answer_batch(QUESTIONS).to_pylist()


def _assert_same_rows(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=False):
        assert g["query_index"] == w["query_index"]
        for key in ("question", "answer", "found", "chunk_ids", "citations", "error"):
            assert g[key] == w[key], (w["query_index"], key)
        np.testing.assert_allclose(g["scores"], w["scores"], rtol=1e-5, atol=1e-6)


def _file_rows(path):
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return pq.read_table(path).to_pylist()


def test_questions_cover_the_cases():
    assert len(QUESTIONS) == 310 and len(set(QUESTIONS)) < len(QUESTIONS)
    assert sum(not q.strip() for q in QUESTIONS) == 15


def test_answer_dataset_matches_answer_batch(ray_local, kb_path, reference):
    rows = [{"id": f"q{i}", "question": q} for i, q in enumerate(QUESTIONS)]
    ds = ray.data.from_items(rows, override_num_blocks=7)
    out = answer_dataset(ds, kb_path, batch_size=BATCH, concurrency=ACTORS)
    got = sorted(out.take_all(), key=lambda r: r["query_index"])
    assert list(got[0]) == ["id", *ANSWER_BATCH_SCHEMA.names]
    assert [r["id"] for r in got] == [f"q{i}" for i in range(len(QUESTIONS))]  # position = id
    _assert_same_rows(got, reference)
    assert sum(r["error"] is not None for r in got) == 15
    blank = len(QUESTIONS) - 6  # "\t"
    assert got[blank]["error"] == "question is empty"


def test_input_query_index_extra_columns_and_a_chat_model(ray_local, kb_path):
    n = 40
    table = pa.table({
        "query_index": pa.array(range(1000, 1000 + n), pa.int64()),
        "question": QUESTIONS[:n],
        "gold": [f"g{i}" for i in range(n)],
    })  # fmt: skip
    with OpenAIServer() as server:
        gen = OpenAIChatGenerator(
            config=ClientConfig(base_url=server.base_url, model="m", api_key="k")
        )
        ds = ray.data.from_arrow([table[:20], table[20:]])  # a block per actor
        out = answer_dataset(ds, kb_path, k=3, generator=gen, batch_size=BATCH, concurrency=ACTORS)
        got = sorted(out.take_all(), key=lambda r: r["query_index"])
        assert len(server.requests_to(CHAT)) == len(set(QUESTIONS[:n]))  # the actors' requests
        want = KnowledgeBase.load(kb_path).answer_batch(QUESTIONS[:n], k=3, generator=gen)
    assert [r["query_index"] for r in got] == list(range(1000, 1000 + n))
    assert [r["gold"] for r in got] == [f"g{i}" for i in range(n)]
    assert "id" not in got[0] and list(got[0])[-1] == "gold"
    want = want.to_pylist()
    for r in want:
        r["query_index"] += 1000
    _assert_same_rows(got, want)
    assert all(r["found"] and r["citations"] for r in got)


def test_answer_file_ray_matches_answer_file(ray_local, kb_path, tmp_path):
    qfile = tmp_path / "questions.jsonl"
    lines = [
        json.dumps({"id": f"q{i}", "question": q}) if i % 3 else json.dumps(q)
        for i, q in enumerate(QUESTIONS)
    ]
    qfile.write_text("\n".join(lines), encoding="utf-8")
    want_path = tmp_path / "want.jsonl"
    # One batch, so that answer_file's error messages name questions by file position too.
    want = answer_file(KnowledgeBase.load(kb_path), qfile, want_path, batch_size=len(QUESTIONS))
    got_path = tmp_path / "got.jsonl"
    seen = []
    got = answer_file_ray(
        kb_path, qfile, got_path, batch_size=BATCH, concurrency=ACTORS, progress=seen.append
    )
    assert (got.questions, got.answered, got.found, got.errors, got.skipped) == (
        want.questions,
        want.answered,
        want.found,
        want.errors,
        0,
    )
    assert got.cited_share == pytest.approx(want.cited_share)
    assert len(seen) > 1 and seen[-1].done == seen[-1].total == len(QUESTIONS)
    got_rows, want_rows = _file_rows(got_path), _file_rows(want_path)
    assert [r["query_index"] for r in got_rows] == list(range(len(QUESTIONS)))  # input order
    assert [list(r) for r in got_rows] == [list(r) for r in want_rows]  # same keys, same order
    assert [r["id"] for r in got_rows] == [r["id"] for r in want_rows]
    _assert_same_rows(got_rows, want_rows)
    with pytest.raises(StoreError, match="exists"):
        answer_file_ray(kb_path, qfile, got_path)


def test_parquet_questions_to_parquet_answers_resumed(ray_local, kb_path, tmp_path, reference):
    qfile = tmp_path / "questions.parquet"
    # One row group: Ray reads it as one block, which must still be spread over both actors.
    pq.write_table(pa.table({"id": list(range(len(QUESTIONS))), "text": QUESTIONS}), qfile)
    want_path = tmp_path / "want.parquet"
    answer_file(KnowledgeBase.load(kb_path), qfile, want_path, batch_size=len(QUESTIONS))
    want = pq.read_table(want_path)
    out = tmp_path / "answers.parquet"
    pq.write_table(want.slice(0, 100), out)  # an earlier run's rows, kept by resume
    summary = answer_file_ray(
        kb_path, qfile, out, batch_size=BATCH, concurrency=ACTORS, resume=True
    )
    assert (summary.questions, summary.skipped, summary.errors) == (len(QUESTIONS), 100, 15)
    assert summary.answered + summary.errors == len(QUESTIONS) - 100
    assert pq.read_schema(out).equals(want.schema)
    rows = pq.read_table(out).to_pylist()
    assert [r["id"] for r in rows] == [str(i) for i in range(len(QUESTIONS))]
    _assert_same_rows(rows, reference)
    _assert_same_rows(rows, want.to_pylist())


def test_empty_questions_file(ray_local, kb_path, tmp_path):
    qfile = tmp_path / "empty.txt"
    qfile.write_text("")
    out = tmp_path / "answers.jsonl"
    summary = answer_file_ray(kb_path, qfile, out, concurrency=1)
    assert summary.questions == 0 and out.read_bytes() == b""


def test_bad_columns_are_refused_before_any_work(ray_local, kb_path):
    with pytest.raises(ConfigError, match="'question' column"):
        answer_dataset(ray.data.from_items([{"text": "q"}]), kb_path)
    with pytest.raises(ConfigError, match=r"\['answer'\] clash"):
        answer_dataset(ray.data.from_items([{"question": "q", "answer": "a"}]), kb_path)


def test_options_are_checked_before_any_work(kb_path, tmp_path):
    with pytest.raises(ConfigError, match="batch_size"):
        answer_file_ray(kb_path, tmp_path / "q.txt", tmp_path / "a.jsonl", batch_size=0)
    with pytest.raises(ConfigError, match="concurrency"):
        answer_file_ray(kb_path, tmp_path / "q.txt", tmp_path / "a.jsonl", concurrency=(3, 1))
    with pytest.raises(ConfigError, match="mode"):
        answer_file_ray(kb_path, tmp_path / "q.txt", tmp_path / "a.jsonl", mode="nope")
    with pytest.raises(ConfigError, match=".jsonl or .parquet"):
        answer_file_ray(kb_path, tmp_path / "q.txt", tmp_path / "a.csv")


def test_missing_ray_names_the_extra(monkeypatch, kb_path, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"fastrag-engine\[distributed\]"):
        answer_file_ray(kb_path, tmp_path / "q.txt", tmp_path / "a.jsonl")
