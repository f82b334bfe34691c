from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest
from hypothesis import settings

import fastrag

JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")

# Hypothesis profiles. ``ci`` (the default) runs a third of each property test's examples;
# ``thorough`` runs the full counts written in the tests. Choose one with
# ``FASTRAG_HYPOTHESIS_PROFILE=thorough pytest`` (or ``pytest --hypothesis-profile=thorough``).
# Neither has a deadline: the first example of a kernel test may load compiled code.
settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("thorough", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("FASTRAG_HYPOTHESIS_PROFILE", "ci"))


def examples(n: int) -> int:
    """``max_examples`` of a property test whose thorough count is ``n``, for the active profile.

    ``thorough``: ``n``; ``ci``: a third of it, never fewer than ``min(n, 5)``. Read when the
    test module is imported, after the profile is loaded (the env var here, or the option).
    """
    if settings.get_current_profile_name() == "thorough":
        return n
    return max(min(n, 5), n // 3)


DOCS = [
    {
        "id": "leave",
        "title": "Annual leave",
        "source": "hr/leave.md",
        "updated_at": "2026-09-01",
        "acl": ["staff"],
        "text": "Annual leave requests must be submitted at least 3 working days in advance. "
        "Employees receive 15 days of paid annual leave per year.",
    },
    {
        "id": "expense",
        "title": "Expenses",
        "text": "Expense reports must be submitted within 15 days with the original receipts attached.",
        "team": "finance",
    },
    {
        "id": "leave-zh",
        "title": "年假制度",
        "text": "年假申请需提前3天提交。工作未满五年的员工每年享有15天带薪年假。",
    },
    {
        "id": "security",
        "text": "Passwords must be at least 12 characters long and are changed every 180 days. "
        "Multi-factor authentication is mandatory for e-mail and VPN.",
    },
]


# The demo on a cold cache, reporting for its question kernels (cache hits, cache misses):
# tests/test_warmup.py checks that they come from the demo's helper process's cache.
DEMO_PROBE = textwrap.dedent(
    """
    import contextlib, io, json

    from fastrag._native import bm25, fusion, topk
    from fastrag.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        main(["demo"])
    kernels = {"scan_topk": topk.scan_topk, "convex_fuse": fusion.convex_fuse,
               "exhaustive": bm25._exhaustive_serial, "pruned": bm25._search_serial}
    print(json.dumps({name: [sum(d.stats.cache_hits.values()), sum(d.stats.cache_misses.values())]
                      for name, d in kernels.items()}))
    """
)


def _question_kernels_cached() -> bool:
    """Whether the shared cache holds any of the four kernels :data:`DEMO_PROBE` reports on."""
    from fastrag._native import bm25, fusion, topk
    from fastrag._native._jit import CACHE
    from fastrag._native.warmup import _cached

    probes = (topk.scan_topk, fusion.convex_fuse, bm25._exhaustive_serial, bm25._search_serial)
    return not CACHE or any(_cached(d) for d in probes)


# The session's warm-up runs once, in the process pytest was started in (with pytest-xdist,
# the controller, before and while its workers start and collect), in a thread that holds an
# exclusive lock on a file of this folder until the result is written beside it; every
# process that runs tests takes a shared lock on it first (``compiled_kernels``).
_WARMUP_DIR = pytest.StashKey[Path]()


def _run_warm_up(folder: Path, lock: IO[str]) -> None:
    """The demo on a cold cache (when it is cold), then ``fastrag.warmup()``; writes result.json."""
    result: dict[str, object] = {"demo": None, "error": None}
    try:
        where = Path(fastrag.__file__).resolve().parent.parent
        if not _question_kernels_cached():
            demo = subprocess.run(
                [sys.executable, "-c", DEMO_PROBE], cwd=where, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=1800,
            )  # fmt: skip
            result["demo"] = [demo.returncode, demo.stdout, demo.stderr]
        warm = subprocess.run(
            [sys.executable, "-c", "import fastrag; fastrag.warmup()"],
            cwd=where, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        if warm.returncode != 0:
            result["error"] = f"fastrag.warmup() exited {warm.returncode}: {warm.stderr[-3000:]}"
    except Exception as exc:  # reported by every test's fixture, as the old check=True did
        result["error"] = f"the warm-up failed: {exc!r}"
    finally:
        (folder / "result.tmp").write_text(json.dumps(result))
        (folder / "result.tmp").replace(folder / "result.json")
        lock.close()  # releases the exclusive lock: the waiting test processes go on


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Start the session's warm-up (see ``compiled_kernels``) in the process pytest started in."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return  # an xdist worker: its controller warms up; nothing runs when only collecting
    if JIT_DISABLED or os.environ.get("FASTRAG_TEST_WARMUP", "1") == "0":
        return
    folder = Path(tempfile.mkdtemp(prefix="fastrag-warmup-"))
    lock = open(folder / "lock", "w")  # noqa: SIM115 - closed by the thread when done
    fcntl.flock(lock, fcntl.LOCK_EX)
    config.stash[_WARMUP_DIR] = folder
    threading.Thread(target=_run_warm_up, args=(folder, lock), daemon=True).start()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist: tell each worker where the controller's warm-up writes its result."""
    folder = node.config.stash.get(_WARMUP_DIR, None)
    if folder is not None:
        node.workerinput["fastrag_warmup_dir"] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_WARMUP_DIR, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels(request: pytest.FixtureRequest) -> subprocess.CompletedProcess[str] | None:
    """Every kernel signature the engine uses, compiled once per run into the shared cache.

    ``fastrag.warmup()`` runs in a child process of the process pytest was
    started in (with pytest-xdist, ``-n``, the controller: once, not once per
    worker), started with the session: on an empty cache it compiles in two
    processes at once (both cores; compiling holds the GIL), on a warm one it
    only loads. Each process that runs tests waits here, before its first
    test, until it is done. The test processes, the servers, the CLI and Ray
    children of the tests then load the kernels from Numba's on-disk cache
    instead of each compiling its own: they inherit this environment, so they
    use the same cache (``NUMBA_CACHE_DIR`` or, unset, the ``__pycache__``
    beside the installed kernels). The child runs where the installed package
    is imported first (a source checkout's fastrag/ lacks the kernels). A
    failure here is the cold-cache warm-up failing. ``FASTRAG_TEST_WARMUP=0``
    skips it (a run of a few tests on an empty cache then compiles only what
    they call).

    When the shared cache holds none of the demo's question kernels (CI: an
    empty cache), :data:`DEMO_PROBE` runs first, on it: that is the cold-cache
    demo ``test_warmup`` checks, and its run is returned for that test, which
    otherwise runs it on a private empty cache. What the demo compiled, the
    warm-up then loads instead of compiling a second time.
    """
    config = request.config
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        where = workerinput.get("fastrag_warmup_dir")
        folder = Path(where) if where else None
    else:
        folder = config.stash.get(_WARMUP_DIR, None)
    if folder is None:
        return None
    with open(folder / "lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # waits for the warm-up thread to let go
    result = json.loads((folder / "result.json").read_text())
    if result["error"]:
        raise RuntimeError(result["error"])
    if result["demo"] is None:
        return None
    code, out, err = result["demo"]
    return subprocess.CompletedProcess([sys.executable, "-c", DEMO_PROBE], code, out, err)


# The test files that take longest, longest first, put first in the collection:
# pytest-xdist (``--dist loadfile --no-loadscope-reorder``) hands each worker the next file
# when it runs out, so the short files go last and no worker is left alone with a long file
# at the end while the other waits. Only the order changes; every test still runs. Measured
# by the sum of each file's tests among the run's 60 slowest (``pytest -p no:cacheprovider
# --durations=60`` from an empty Numba cache, 2026-12-03, load 3.6-7.4; not counting the
# warm-up wait of each worker's first test): Ray 120 s, the vector stores' processes 67, the
# stress and snapshot-lease process tests 47 and 29, the servers 26 and 23, pacing 16, then
# 9-14 s each; no other file's share of the 60 reached 6 s.
HEAVY_FIRST = (
    "test_distributed.py",
    "test_stores.py",
    "test_stress.py",
    "test_snapshot_leases.py",
    "test_serve.py",
    "test_stores_cli.py",
    "test_pacing.py",
    "test_warmup.py",
    "test_snapshot_requests.py",
    "test_kb_hnsw.py",
    "test_hnsw.py",
    "test_tokenize.py",
    "test_hits.py",
    "test_serve_mcp.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture
def docs() -> list[dict]:
    return [dict(d) for d in DOCS]


@pytest.fixture
def kb(docs) -> fastrag.KnowledgeBase:
    return fastrag.KnowledgeBase.build(docs, window=60, overlap=10)
