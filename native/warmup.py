"""Compile every kernel signature the engine uses, before the first request.

On a cold cache the kernels are compiled in two processes at once: a child
process and this one take the compile jobs below from one list, each the
next one the other has not claimed yet (longest first, so that both finish
at about the same time whichever part of the cache is warm already), and
each writes its work to Numba's on-disk cache; this process then loads the
child's share from the cache. Compilation holds the GIL, so a second
process is the only way to use a second core for it. With the cache
disabled (``FASTRAG_NUMBA_CACHE=0``), already warm, or the JIT off, all of
it happens here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from types import ModuleType

import numba

from . import (
    bm25,
    chunking,
    embedding,
    fusion,
    hnsw,
    quantised,
    static,
    structure,
    tokenize,
    topk,
)
from ._jit import CACHE

__all__ = ["compile_all", "start_query_compile"]

# The compile jobs of a cold cache, longest first, with what each costs (cold, each in its
# own process on an empty cache, CPU-s under load, 2026-12-02: BENCHMARKS.md "Cold start,
# second step"). A job's modules compile in one process, in this order: structure calls
# chunking's helpers and static the tokenizer's kernel, which the later module then has
# compiled already instead of compiling it again. The second item of each job is a kernel
# only its whole warm-up compiles (not the demo, see start_query_compile), late: when every
# job's has a cache index, there is nothing for a child process to do.
_JOBS: tuple[tuple[tuple[ModuleType, ...], object], ...] = (
    ((chunking, structure), structure._write_pass),  # 12 + 19
    ((bm25,), bm25._search_parallel),  # 34
    ((tokenize, static), static._csr_matmul_pass),  # 15 + 11
    ((hnsw,), hnsw._search_parallel),  # 7
    ((topk, quantised), topk.merge_topk),  # 11 (+ the int8 pre-scan's three)
    ((fusion,), fusion.rrf_fuse),  # 6
    ((embedding,), embedding.embed_counts),  # 2.5
)


def _cached(dispatcher: object) -> bool:
    """Whether a kernel has an on-disk cache index (Numba internals: guarded)."""
    try:
        index = dispatcher._cache._cache_file._index_path  # type: ignore[attr-defined]
    except AttributeError:
        return False
    return os.path.exists(index)


def _start_child(code: str, probes: tuple[object, ...]) -> subprocess.Popen[bytes] | None:
    """Run ``code`` in a child Python process, unless there is nothing for it to compile."""
    if not CACHE or numba.config.DISABLE_JIT or all(_cached(d) for d in probes):
        return None
    # Run it where the installed package is found first: from a source checkout
    # (whose fastrag/ has no _native) the child could not import the kernels.
    top = sys.modules.get(__name__.split(".")[0])
    where = getattr(top, "__file__", None)
    cwd = os.path.dirname(os.path.dirname(os.path.abspath(where))) if where else None
    try:
        return subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None


def _run_jobs(claims: str | None) -> None:
    """Run the warm-ups of every job of :data:`_JOBS` this process claims first.

    A job is claimed by creating its folder in ``claims`` (atomic: the
    process that fails to create it leaves the job to the other). ``None``:
    every job, here.
    """
    for i, (modules, _) in enumerate(_JOBS):
        if claims is not None:
            try:
                os.mkdir(os.path.join(claims, str(i)))
            except FileExistsError:
                continue
        for module in modules:
            module.warmup()


def compile_all() -> None:
    """Compile (or load from the on-disk cache) every kernel's signatures."""
    claims = tempfile.mkdtemp(prefix="fastrag-compile-")
    try:
        code = f"from fastrag._native import warmup; warmup._run_jobs({claims!r})"
        child = _start_child(code, tuple(probe for _, probe in _JOBS))
        if child is not None:
            _run_jobs(claims)
            child.wait()  # success or not, the calls below compile what is missing
        _run_jobs(None)  # loads the child's share from the cache
    finally:
        shutil.rmtree(claims, ignore_errors=True)


_QUERY_CODE = (
    "from fastrag._native import bm25, fusion, topk; bm25.warmup_build(); "
    "topk.warmup(blocks=False); fusion.warmup(rrf=False); "
    "bm25.warmup_search(('exhaustive',), parallel=False)"
)
_QUERY_PROBES = (bm25._block_max_pass, topk.scan_topk, fusion.convex_fuse, bm25._exhaustive_serial)


def start_query_compile() -> subprocess.Popen[bytes] | None:
    """On a cold cache, compile a small knowledge base's question kernels in a child process.

    First the keyword legs' build kernels (:func:`~.bm25.warmup_build`: this
    process reaches them after chunking and tokenising, by when the child
    has cached them), then exact vector top-k (the scan), convex fusion (the
    default of the built-in embedders) and the exhaustive BM25 search
    (what the questions of a knowledge base under
    :data:`~.bm25.PRUNE_MIN_POSTINGS` postings run) are compiled into the
    on-disk cache by a second process while this one builds: on two cores
    the build and the question kernels compile at once. Wait for the child
    (``.wait()``) before the first question, so that this process loads them
    from the cache instead of compiling them again. None when there is
    nothing to compile (warm cache, caching off, JIT disabled).
    """
    return _start_child(_QUERY_CODE, _QUERY_PROBES)
