"""Compile time of the kernels, measured apart from their run time.

Each ``track_`` benchmark runs a fresh interpreter with ``FASTRAG_NUMBA_CACHE=0``
(nothing cached, nothing written) and reports the seconds ``warmup()`` of one
kernel module takes; ``time_cached_warmup`` measures start-up with a warm
on-disk cache, which is what a service pays on every start.
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
    params = [["chunking", "embedding", "topk"]]
    param_names = ["module"]
    timeout = 600
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
