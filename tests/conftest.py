from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fastrag

JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")

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


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Every kernel signature the engine uses, compiled once per session into the shared cache.

    ``fastrag.warmup()`` runs in a child process before the first test: on an
    empty cache it compiles in two processes at once (both cores; compiling
    holds the GIL), on a warm one it only loads. This process, the servers,
    the CLI and Ray children of the tests then load the kernels from Numba's
    on-disk cache instead of each compiling its own: they inherit this
    environment, so they use the same cache (``NUMBA_CACHE_DIR`` or, unset,
    the ``__pycache__`` beside the installed kernels). The child runs where
    the installed package is imported first (a source checkout's fastrag/
    lacks the kernels). A failure here is the cold-cache warm-up failing.
    ``FASTRAG_TEST_WARMUP=0`` skips it (a run of a few tests on an empty
    cache then compiles only what they call).
    """
    if JIT_DISABLED or os.environ.get("FASTRAG_TEST_WARMUP", "1") == "0":
        return
    where = Path(fastrag.__file__).resolve().parent.parent
    subprocess.run(
        [sys.executable, "-c", "import fastrag; fastrag.warmup()"],
        cwd=where, stdin=subprocess.DEVNULL, check=True, timeout=1800,
    )  # fmt: skip


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture
def docs() -> list[dict]:
    return [dict(d) for d in DOCS]


@pytest.fixture
def kb(docs) -> fastrag.KnowledgeBase:
    return fastrag.KnowledgeBase.build(docs, window=60, overlap=10)
