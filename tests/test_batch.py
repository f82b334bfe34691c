from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from conftest import DOCS
from fastrag.datasets import demo_documents

from fastrag import KnowledgeBase
from fastrag.batch.files import answer_file
from fastrag.errors import StoreError

QUESTIONS = [
    "年假怎么申请？",
    "公司食堂几点开门？",
    "设备丢失后多久内要报告？",
    "",
    "密码多久更换一次？",
    "报销需要在多少天内提交？",
    "试用期多长时间？",
    "年假怎么申请？",
    "员工生日有什么福利？",
    "远程办公每周几天？",
] * 3


@pytest.fixture(scope="module")
def demo_kb() -> KnowledgeBase:
    return KnowledgeBase.build(demo_documents())


@pytest.fixture
def qfile(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text(
        "\n".join(json.dumps({"id": f"q{i}", "question": q}) for i, q in enumerate(QUESTIONS))
    )
    return path


def _rows(path):
    if path.suffix == ".jsonl":
        return sorted(
            (json.loads(line) for line in path.read_text().splitlines()),
            key=lambda r: r["query_index"],
        )
    return pq.read_table(path).to_pylist()


class Crash(BaseException):
    """Stands for a kill: not an Exception, so answer_batch does not catch it per question."""


def _crashing_after(n_questions):
    from fastrag.answer.generate import ExtractiveGenerator

    inner = ExtractiveGenerator()
    seen = []

    def gen(question, hits):
        seen.append(question)
        if len(seen) > n_questions:
            raise Crash
        return inner(question, hits)

    return gen


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_resume_after_crash_equals_uninterrupted_run(demo_kb, qfile, tmp_path, suffix):
    reference = tmp_path / f"reference.{suffix}"
    full = answer_file(demo_kb, qfile, reference, batch_size=4)
    assert full.questions == len(QUESTIONS) and full.errors == 3

    out = tmp_path / f"answers.{suffix}"
    with pytest.raises(Crash):
        answer_file(demo_kb, qfile, out, batch_size=4, generator=_crashing_after(9))
    # A hard kill may also cut the last write short.
    partial = out if suffix == "jsonl" else out.with_name(out.name + ".partial")
    data = partial.read_bytes()
    partial.write_bytes(data[: len(data) - 7])
    with pytest.raises(StoreError, match="resume"):
        answer_file(demo_kb, qfile, out, batch_size=4)
    resumed = answer_file(demo_kb, qfile, out, batch_size=4, resume=True)
    assert 0 < resumed.skipped < len(QUESTIONS)
    got, want = _rows(out), _rows(reference)
    assert [r["query_index"] for r in got] == list(range(len(QUESTIONS)))  # none lost, none twice
    assert got == want


def test_summary_counts(demo_kb, qfile, tmp_path):
    s = answer_file(demo_kb, qfile, tmp_path / "a.jsonl", batch_size=7)
    assert s.questions == 30 and s.errors == 3 and s.answered == 27
    assert s.found + s.not_found == s.answered and s.found > 0 and s.not_found > 0
    assert 0 < s.cited_share <= 1 and s.skipped == 0


@pytest.fixture(scope="module")
def policies_kb() -> KnowledgeBase:
    return KnowledgeBase.build(DOCS)


@pytest.mark.parametrize("bad", ["leave \ud800 days", "", "   ", "x" * 20_000, 42, None])
@pytest.mark.parametrize("output", ["table", "answers", "results"])
def test_a_bad_question_fills_its_error_and_the_others_are_answered(policies_kb, bad, output):
    kb = policies_kb
    good = "How many days in advance must annual leave requests be submitted?"
    out = kb.answer_batch([bad, good, bad], k=3, output=output)
    if output == "table":
        rows = out.to_pylist()
        assert [r["query_index"] for r in rows] == [0, 1, 2]
        assert rows[0]["error"] and not rows[0]["found"] and rows[2]["error"]
        assert rows[1]["error"] is None and rows[1]["found"] and rows[1]["question"] == good
        if isinstance(bad, str) and "\ud800" in bad:
            assert "lone surrogate" in rows[0]["error"] and "\ufffd" in rows[0]["question"]
    elif output == "answers":
        assert out[0] is None and out[2] is None and out[1] is not None and out[1].found
    else:
        (a0, e0), (a1, e1), (a2, e2) = out
        assert a0 is None and e0 and a2 is None and e2
        assert a1 is not None and a1.found and e1 is None
