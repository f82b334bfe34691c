from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

from fastrag.answer.audit import AUDIT_FORMAT, audit_digest, audit_record, verify_digest
from fastrag.errors import ConfigError

ARGS = (
    "费用报销须在多少天内提交？",
    "snap-0001",
    [
        (7, "费用报销须在费用发生后15天内提交，并附原始发票。"),
        (3, "Expense reports within 15 days."),
    ],
    "【知识库】\n[1] ...\n\n【问题】\n费用报销须在多少天内提交？",
    "费用报销须在费用发生后15天内提交，并附原始发票。[1]",
)

# Pinned: the digest of ARGS must never change (it is recomputed by auditors later).
PINNED = "22bae670a96b91c3d0f7fd59ca8855d201713bcc446daddb84c603c3077c9d47"


def test_digest_shape_and_verification():
    assert audit_digest(*ARGS) == PINNED
    d = audit_digest(*ARGS)
    assert len(d) == 64 and all(c in "0123456789abcdef" for c in d)
    assert verify_digest(d, *ARGS)
    assert verify_digest(d.upper(), *ARGS)
    assert not verify_digest("0" * 64, *ARGS)
    assert not verify_digest("é" * 64, *ARGS)
    assert not verify_digest(None, *ARGS)  # type: ignore[arg-type]


def test_record_is_canonical_json():
    record = audit_record(*ARGS)
    data = json.loads(record)
    assert list(data) == sorted(data)
    assert data["format"] == AUDIT_FORMAT
    assert data["cited"][0] == [7, hashlib.sha256(ARGS[2][0][1].encode()).hexdigest()]
    assert ARGS[2][1][1] not in record.decode()  # chunk texts only as hashes
    assert hashlib.sha256(record).hexdigest() == audit_digest(*ARGS)


@pytest.mark.parametrize("index", range(5))
def test_any_change_changes_the_digest(index):
    changed = list(ARGS)
    if index == 2:
        changed[2] = [(7, ARGS[2][0][1] + " "), ARGS[2][1]]
    elif index == 1:
        changed[1] = "snap-0002"
    else:
        changed[index] = ARGS[index] + "."
    assert audit_digest(*changed) != PINNED
    assert not verify_digest(PINNED, *changed)


def test_cited_ids_order_and_none_snapshot_matter():
    q, snap, cited, prompt, answer = ARGS
    assert audit_digest(q, snap, cited[::-1], prompt, answer) != PINNED
    assert audit_digest(q, snap, [(8, cited[0][1]), cited[1]], prompt, answer) != PINNED
    assert audit_digest(q, None, cited, prompt, answer) != PINNED
    assert audit_digest(q, snap, [], prompt, answer) != PINNED


def test_numpy_chunk_ids_and_tuples_are_accepted():
    q, snap, cited, prompt, answer = ARGS
    as_numpy = [(np.int64(c), t) for c, t in cited]
    assert audit_digest(q, snap, tuple(as_numpy), prompt, answer) == PINNED


def test_stable_across_processes(tmp_path):
    code = (
        "import sys, json; from fastrag.answer.audit import audit_digest;"
        "a = json.loads(sys.argv[1]); a[2] = [tuple(x) for x in a[2]];"
        "print(audit_digest(*a))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(ARGS)],
        capture_output=True, text=True, check=True, cwd=tmp_path,
        env={"PYTHONHASHSEED": "123", "PATH": ""},
    )  # fmt: skip
    assert out.stdout.strip() == PINNED


def test_known_value():
    # an independent computation of the documented serialisation
    record = {
        "answer": "a",
        "cited": [[1, hashlib.sha256(b"t").hexdigest()]],
        "format": "fastrag-audit-1",
        "prompt": "p",
        "question": "q",
        "snapshot_id": "s",
    }
    blob = json.dumps(record, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    assert audit_digest("q", "s", [(1, "t")], "p", "a") == hashlib.sha256(blob).hexdigest()


@pytest.mark.parametrize(
    "args",
    [
        (1, "s", [], "p", "a"),
        ("q", 5, [], "p", "a"),
        ("q", "s", [("x", "t")], "p", "a"),
        ("q", "s", [(1, b"bytes")], "p", "a"),
        ("q", "s", [(True, "t")], "p", "a"),
        ("q", "s", [(1,)], "p", "a"),
        ("q", "s", [], "p\ud800", "a"),
    ],
)
def test_bad_inputs(args):
    with pytest.raises(ConfigError):
        audit_digest(*args)
