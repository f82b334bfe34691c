"""The parameters of an HNSW graph: :class:`HnswConfig` (saved in the manifest)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .hnsw_checks import check_int

__all__ = ["HnswConfig"]


@dataclass(frozen=True, slots=True)
class HnswConfig:
    """Parameters of an HNSW graph (saved in the manifest).

    Parameters
    ----------
    M : int, default 16
        Links per node in the upper layers (``2 * M`` in the base layer).
        Memory per vector grows by ``8 * M`` bytes; recall and build time grow
        with it.
    ef_construction : int, default 200
        Candidate list size while inserting: graph quality against build time.
    ef_search : int, default 64
        Candidate list size while searching (raised to ``k`` when smaller):
        recall against latency. Measured recall@10 on clustered 384-d data
        (``compare_hnsw.py``): at n=100k with 1000 clusters (100 rows a
        cluster) 0.998 at ef=32 and 1.000 at 64. What makes this data hard
        is the rows per cluster, not n: with 1000 rows a cluster, as 1M rows
        in 1000 clusters have, recall at ef=32 / 64 / 96 / 128 was 0.892 /
        0.975 / 0.993 / - at n=25k, 0.894 / 0.971 / 0.991 / 0.997 at 50k,
        0.894 / 0.972 / 0.991 / 0.996 at 100k and 0.886 / 0.973 / 0.992 /
        0.998 at 200k: flat over an 8x range of n, so about 0.97 is
        expected at 1M with ef=64, above the 0.95 target, while ef=32 falls
        below it. Latency at n=100k, batch 1: 0.12 ms at ef=32, 0.18 ms at
        64, 0.34 ms at 128.
    random_seed : int, default 100
        Seed of hnswlib's level generator. With one build thread, the same
        seed and the same insertion order give the same graph.

    Raises
    ------
    ConfigError
        On a parameter that is not an int or is out of range.
    """

    M: int = 16  # noqa: N815 - hnswlib's name
    ef_construction: int = 200
    ef_search: int = 64
    random_seed: int = 100

    def __post_init__(self) -> None:
        # hnswlib stores a level-0 neighbour count in 16 bits (2 * M).
        check_int("M", self.M, 2, 4096)
        check_int("ef_construction", self.ef_construction, 1)
        check_int("ef_search", self.ef_search, 1)
        check_int("random_seed", self.random_seed, 0, 2**63 - 1)
        for f in dataclasses.fields(self):  # numpy ints -> int, for JSON and ==
            object.__setattr__(self, f.name, int(getattr(self, f.name)))

    def to_dict(self) -> dict[str, int]:
        """Return the parameters as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HnswConfig:
        """Rebuild a config from :meth:`to_dict` output (missing keys take defaults).

        Raises
        ------
        ConfigError
            On an unknown key or a bad value.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f"HNSW config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown HNSW config keys {unknown}; known: {sorted(known)}")
        return cls(**data)
