"""Compile every kernel signature the engine uses, before the first request.

On a cold cache the kernels are compiled in two processes at once: a child
process compiles the keyword modules (tokenize and bm25, about half of the
compile time) and writes them to Numba's on-disk cache while this process
compiles the others; this process then loads the child's work from the
cache. Compilation holds the GIL, so a
second process is the only way to use a second core for it. With the cache
disabled (``FASTRAG_NUMBA_CACHE=0``), already warm, or the JIT off, all of it
happens here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numba

from . import bm25, chunking, embedding, fusion, hnsw, static, structure, tokenize, topk
from ._jit import CACHE

__all__ = ["compile_all", "start_query_compile"]

# Kernel modules compiled by the helper process on a cold cache (measured
# cold, one process, loaded machine: tokenize 20 s, bm25 19 s; embedding 2,
# topk 10, fusion 13, chunking 15; structure 23 after chunking, with which
# it shares helpers), and kernels compiled last by each, whose cache indexes
# tell whether the child's share is cached already. The two shares are
# about equal: child tokenize + bm25 + fusion, parent the rest.
_CHILD_MODULES = ("tokenize", "bm25", "fusion")
_CHILD_PROBES = (
    tokenize._replace_words_pass, bm25._search_serial, bm25._search_parallel, fusion.rrf_fuse,
)  # fmt: skip


def _cached(dispatcher: object) -> bool:
    """Whether a kernel has an on-disk cache index (Numba internals: guarded)."""
    try:
        index = dispatcher._cache._cache_file._index_path  # type: ignore[attr-defined]
    except AttributeError:
        return False
    return os.path.exists(index)


def _start_child(
    code: str | None = None, probes: tuple[object, ...] = _CHILD_PROBES
) -> subprocess.Popen[bytes] | None:
    if not CACHE or numba.config.DISABLE_JIT or all(_cached(d) for d in probes):
        return None
    if code is None:
        code = "; ".join(f"from fastrag._native import {m}; {m}.warmup()" for m in _CHILD_MODULES)
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


def compile_all() -> None:
    """Compile (or load from the on-disk cache) every kernel's signatures."""
    child = _start_child()
    embedding.warmup()
    topk.warmup()
    chunking.warmup()
    structure.warmup()
    hnsw.warmup()
    if child is not None:
        child.wait()  # success or not, the calls below compile what is missing
    tokenize.warmup()
    bm25.warmup()
    fusion.warmup()
    static.warmup()  # after tokenize: it calls the tokenizer's kernel


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
