"""Row masks of filters and access control over a chunk store.

:func:`eligible_rows` turns ``where`` and a :class:`~fastrag.Principal`
into one boolean mask over the store's global rows, deletions included.
Masks are cached per segment (a segment's rows never change, so a mask
stays valid for the segment's whole life, across versions of the store)
under the filter's canonical key; the cache is bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..store.chunks import ChunkStore, Segment
from .filters import Principal, acl_mask, canonical_key, where_mask

__all__ = ["FILTER_CACHE_SIZE", "eligible_rows", "segment_mask"]

FILTER_CACHE_SIZE = 32
"""Masks remembered per segment (one per distinct filter and principal)."""

_cache_lock = threading.Lock()


def segment_mask(
    seg: Segment, key: bytes, where: Mapping[str, Any] | None, principal: Principal | None
) -> np.ndarray:
    """The filter mask of one segment's rows (deletions not applied), cached."""
    mask = seg.filter_cache.get(key)
    if mask is not None:
        return mask
    mask = np.ones(len(seg), dtype=np.bool_)
    if where is not None:
        mask &= where_mask(seg.batch, where)
    if principal is not None:
        mask &= acl_mask(seg.batch, principal)
    mask.flags.writeable = False
    with _cache_lock:
        cache = seg.filter_cache
        if len(cache) >= FILTER_CACHE_SIZE:
            cache.pop(next(iter(cache)))
        cache[key] = mask
    return mask


def eligible_rows(
    store: ChunkStore, where: Mapping[str, Any] | None, principal: Principal | None
) -> np.ndarray | None:
    """The rows a search may return: alive, and admitted by ``where`` and ``principal``.

    Parameters
    ----------
    store : ChunkStore
        One version of the store.
    where : mapping, optional
        Metadata filter (see :mod:`fastrag.retrieve.filters`).
    principal : Principal, optional
        The caller; ``None`` is a trusted caller.

    Returns
    -------
    numpy.ndarray or None
        bool over the global rows; with no filter and no principal, the
        store's own alive mask (the same object every call, so indexes can
        tell liveness from a filter), or ``None`` when nothing is deleted.
    """
    if where is None and principal is None:
        return store.alive_mask()
    if principal is not None and not isinstance(principal, Principal):
        raise ConfigError(f"principal must be a fastrag.Principal, got {type(principal).__name__}")
    key = canonical_key(where, principal)
    parts = []
    for seg in store.segments:
        mask = segment_mask(seg, key, where, principal)
        parts.append(mask if seg.alive is None else mask & seg.alive)
    if not parts:
        return np.zeros(0, dtype=np.bool_)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
