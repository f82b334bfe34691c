"""Compile time of the kernels, measured apart from their run time.

Bounded to one small kernel module, ``fastrag._native.embedding`` (about 2
CPU-seconds cold; ``topk`` is about 10, ``fusion`` 8): the cold compile of
every module (about 2.5 CPU-minutes) is paid once per run by the first
``setup_cache`` (``common.compile_kernels``; asv records each
``setup_cache``'s duration with the results), and paying it here again made
this module a large share of a ``--quick`` run. ``track_compile_seconds``
runs a fresh interpreter with ``FASTRAG_NUMBA_CACHE=0`` (nothing cached,
nothing written) and reports the seconds its ``warmup()`` takes;
``track_cached_warmup_seconds`` measures the same warm-up from a warm on-disk
cache (filled by a first interpreter), which is what a service pays on every
start.
"""

from __future__ import annotations

import os
import subprocess
import sys

_SNIPPET = (
    "import time, importlib; m = importlib.import_module('fastrag._native.{mod}'); "
    "t = time.perf_counter(); m.warmup(); print(time.perf_counter() - t)"
)


def _run(mod: str, cache: bool) -> float:
    env = dict(os.environ, FASTRAG_NUMBA_CACHE="1" if cache else "0")
    out = subprocess.run(
        [sys.executable, "-c", _SNIPPET.format(mod=mod)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


class Compile:
    params = [["embedding"]]
    param_names = ["module"]
    timeout = 300
    number = 1
    repeat = 1

    def track_compile_seconds(self, module):
        return _run(module, cache=False)

    track_compile_seconds.unit = "seconds"

    def track_cached_warmup_seconds(self, module):
        _run(module, cache=True)  # fill the cache
        return _run(module, cache=True)

    track_cached_warmup_seconds.unit = "seconds"


class ColdImport:
    timeout = 120

    def time_import_fastrag(self):
        subprocess.run([sys.executable, "-c", "import fastrag"], check=True)
