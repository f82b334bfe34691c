"""Compile every kernel signature the engine uses, before the first request.

On a cold cache the kernels are compiled in two processes at once: a child
process compiles the largest module (chunking) and writes it to Numba's
on-disk cache while this process compiles the others; this process then
loads the child's work from the cache. Compilation holds the GIL, so a
second process is the only way to use a second core for it. With the cache
disabled (``FASTRAG_NUMBA_CACHE=0``), already warm, or the JIT off, all of it
happens here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numba

from . import bm25, chunking, embedding, fusion, tokenize, topk
from ._jit import CACHE

__all__ = ["compile_all"]

# Kernel modules compiled by the helper process on a cold cache, and the
# dispatcher whose cache index tells whether they are cached already.
_CHILD_MODULES = ("chunking",)


def _cached(dispatcher: object) -> bool:
    """Whether a kernel has an on-disk cache index (Numba internals: guarded)."""
    try:
        index = dispatcher._cache._cache_file._index_path  # type: ignore[attr-defined]
    except AttributeError:
        return False
    return os.path.exists(index)


def _start_child() -> subprocess.Popen[bytes] | None:
    if not CACHE or numba.config.DISABLE_JIT or _cached(chunking._copy_pass):
        return None
    code = "; ".join(
        f"from fastrag._native import {m}; {m}.warmup()" for m in _CHILD_MODULES
    )
    try:
        return subprocess.Popen(
            [sys.executable, "-c", code],
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
    tokenize.warmup()
    bm25.warmup()
    fusion.warmup()
    if child is not None:
        child.wait()  # success or not, the call below compiles what is missing
    chunking.warmup()
