"""After warmup(), no operation of the engine compiles anything (a fresh process); the demo on an empty cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import DEMO_PROBE, JIT_DISABLED

SCRIPT = textwrap.dedent(
    """
    import json, sys, tempfile
    from pathlib import Path

    import numba

    import fastrag
    from fastrag import KnowledgeBase, Principal
    from fastrag.datasets import demo_documents


    def signatures():
        out = {}
        for name, module in list(sys.modules.items()):
            if not name.startswith("fastrag._native"):
                continue
            for attr, obj in vars(module).items():
                if isinstance(obj, numba.core.registry.CPUDispatcher):
                    out[f"{name}.{attr}"] = sorted(str(s) for s in obj.signatures)
        return out


    fastrag.warmup()
    before = signatures()
    docs = demo_documents()
    for i, d in enumerate(docs):
        d["acl"] = ["hr"] if i % 2 else []
    with tempfile.TemporaryDirectory() as tmp:
        for index in ("exact", "hnsw"):
            kb = KnowledgeBase.build(docs, index=index)
            kb.add([{"id": "x", "text": "Badges are returned on the last day. 工牌离职当天归还。"}])
            kb.delete(["x"])
            kb.save(Path(tmp) / index)
            kb = KnowledgeBase.load(Path(tmp) / index)
            kb.compact()
            who = Principal(user="a", groups=["hr"])
            questions = ["年假怎么申请？", "How many days of annual leave?", "报销几天内提交？"] * 30
            for mode in ("hybrid", "vector", "keyword"):
                for exact in (False, True):
                    kb.retrieve(questions[0], k=5, mode=mode, exact=exact)
                    kb.retrieve(questions[1], k=7, mode=mode, exact=exact, principal=who)
                    kb.retrieve(questions[2], k=4, mode=mode, exact=exact, where={"ord": {">=": 1}})
                kb.retrieve_batch(questions, k=5, mode=mode)
                kb.retrieve_batch(questions[:7], k=5, mode=mode, principal=who)
                kb.retrieve(questions[0], k=5, mode=mode, group_by="doc")
                kb.answer(questions[1], k=5, mode=mode, principal=who)
            kb.answer_batch(questions, k=5)
            list(kb.answer_stream(questions[0]))
            kb.verify(questions[:3], k=3)
    after = signatures()
    print(json.dumps({k: v for k, v in after.items() if before.get(k) != v}))
    """
)


@pytest.mark.skipif(JIT_DISABLED, reason="nothing is compiled with the JIT disabled")
def test_nothing_compiles_after_warmup(tmp_path, compiled_kernels):
    # A fresh process on the session's shared cache: warmup() compiled every signature into it
    # at the start of the session (conftest: from an empty cache, its two-process compile),
    # here it loads them; either way the operations below must find every signature they call
    # already there. (A private empty cache would compile all of it a second time.)
    # Run from a neutral directory: the installed package, not the source checkout.
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    new = json.loads(out.stdout.strip().splitlines()[-1])
    assert new == {}, f"compiled after warmup(): {new}"


@pytest.mark.skipif(JIT_DISABLED, reason="nothing is compiled with the JIT disabled")
def test_demo_compiles_its_question_kernels_once_in_a_second_process(tmp_path, compiled_kernels):
    """On a cold cache, the demo's question kernels come from its helper process's cache.

    If the helper compiled other signatures than the engine then calls, the
    demo would compile them again itself (a miss here); a small knowledge
    base never needs the pruned BM25 kernel. The session's first process ran
    the demo on the shared cache if that was cold for these kernels
    (conftest); otherwise it runs here on a private empty cache.
    """
    out = compiled_kernels
    if out is None:
        env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
        out = subprocess.run(
            [sys.executable, "-c", DEMO_PROBE], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=900,
        )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    stats = json.loads(out.stdout.strip().splitlines()[-1])
    for name in ("scan_topk", "convex_fuse", "exhaustive"):  # the demo fuses by convex
        hits, misses = stats[name]
        assert hits >= 1 and misses == 0, (name, stats)
    assert stats["pruned"] == [0, 0]
