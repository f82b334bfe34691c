"""Seeded data shared by the asv benchmarks.

Append only: changing an existing dataset makes old results incomparable.
Every kernel is warmed on a tiny input in ``setup`` so compile time is never
timed; compile time has its own benchmarks in ``bench_compile.py``.
"""

from __future__ import annotations

import functools

import numpy as np
from fastrag.datasets.synthetic import mixed_texts, random_unit_vectors


@functools.lru_cache(maxsize=8)
def texts(total_chars: int, seed: int = 0) -> tuple[str, ...]:
    """Mixed English/Chinese documents of about ``total_chars`` characters."""
    return tuple(mixed_texts(total_chars, seed=seed))


@functools.lru_cache(maxsize=8)
def unit_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Read-only L2-normalised float32 matrix, as a loaded store exposes it."""
    out = random_unit_vectors(n, dim, seed=seed)
    out.flags.writeable = False
    return out
