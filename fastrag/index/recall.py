"""Recall of approximate top-k results against exact ones."""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError

__all__ = ["recall_at_k"]


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean share of the true top-k each row of ``found`` recovers.

    Parameters
    ----------
    found : numpy.ndarray
        Integers ``(m, a)``: approximate results (negative ids are padding).
    truth : numpy.ndarray
        Integers ``(m, k)``: exact results (negative ids are padding).

    Returns
    -------
    float
        ``mean_i |found_i ∩ truth_i| / |truth_i|`` over rows with a truth;
        1.0 when no row has one.
    """
    found = np.asarray(found)
    truth = np.asarray(truth)
    if found.ndim != 2 or truth.ndim != 2 or found.shape[0] != truth.shape[0]:
        raise ConfigError(f"found {found.shape} and truth {truth.shape} must be (m, *) arrays")
    total = 0.0
    rows = 0
    for f, t in zip(found, truth, strict=True):
        t = t[t >= 0]
        if t.size == 0:
            continue
        total += np.intersect1d(f[f >= 0], t).size / t.size
        rows += 1
    return total / rows if rows else 1.0
