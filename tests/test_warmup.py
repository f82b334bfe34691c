"""After warmup(), no operation of the engine compiles anything (a fresh process); the demo on an empty cache."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
import textwrap

import pytest
from conftest import DEMO_PROBE, JIT_DISABLED
from fastrag._native import embedding, warmup

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


def test_every_kernel_module_is_a_compile_job():
    # compile_all() runs the warm-ups of _JOBS only: a kernel module left out would compile on
    # its first use instead (and the nothing-compiles check above would name its kernels).
    with_warmup = {
        name
        for _, name, _ in pkgutil.iter_modules([os.path.dirname(warmup.__file__)])
        if name != "warmup"
        and hasattr(importlib.import_module(f"fastrag._native.{name}"), "warmup")
    }
    jobs = [m.__name__.rsplit(".", 1)[1] for modules, _ in warmup._JOBS for m in modules]
    assert sorted(jobs) == sorted(with_warmup)


@pytest.mark.skipif(JIT_DISABLED, reason="nothing is compiled with the JIT disabled")
def test_a_claimed_compile_job_is_left_to_the_other_process(tmp_path, compiled_kernels):
    # compile_all's two processes take its jobs from one list: a job whose folder exists (the
    # other process claimed it) is skipped, the first free one is claimed and compiled. In a
    # fresh process (the session's cache: it loads instead of compiling), every job but
    # embedding's is claimed already: only embedding's kernels gain signatures.
    claims = tmp_path / "claims"
    claims.mkdir()
    mine = [i for i, (modules, _) in enumerate(warmup._JOBS) if modules == (embedding,)]
    for i in range(len(warmup._JOBS)):
        if i not in mine:
            (claims / str(i)).mkdir()
    code = textwrap.dedent(
        f"""
        import json, numba
        from fastrag._native import bm25, embedding, tokenize, warmup

        warmup._run_jobs({str(claims)!r})
        print(json.dumps({{m.__name__: sum(len(d.signatures) for d in vars(m).values()
                                           if isinstance(d, numba.core.registry.CPUDispatcher))
                          for m in (bm25, embedding, tokenize)}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    compiled = json.loads(out.stdout.strip().splitlines()[-1])
    assert compiled["fastrag._native.embedding"] > 0
    assert compiled["fastrag._native.bm25"] == compiled["fastrag._native.tokenize"] == 0
    assert sorted(p.name for p in claims.iterdir()) == sorted(map(str, range(len(warmup._JOBS))))
