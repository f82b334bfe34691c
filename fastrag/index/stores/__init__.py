"""External vector stores: FAISS, LanceDB, Qdrant (and Qdrant Edge) and Milvus behind one protocol.

Each engine is one module, imported only when a knowledge base uses it
(its client is an optional extra: ``pip install 'fastrag-engine[faiss]'``,
``[lancedb]``, ``[qdrant]`` (qdrant-client and qdrant-edge-py), ``[milvus]`` or
``[stores]`` for all).

:func:`parse_store` turns the ``index=`` strings into a store:

=====================================  ==========================================
``"faiss"``, ``"faiss:IVF1024,Flat"``   FAISS in process, saved with each snapshot
``"lancedb:/abs/dir"`` (any LanceDB URI) a LanceDB table
``"qdrant:/abs/dir"``                   Qdrant's local mode on a directory
``"qdrant://host:6333"``                a Qdrant server (``qdrants://`` for TLS)
``"qdrant-edge:/abs/dir"``              Qdrant Edge: Qdrant's engine (HNSW) in process
``"milvus:/abs/file.db"``               Milvus Lite on a local file
``"milvus://host:19530"``               a Milvus server (``milvuss://`` for TLS)
=====================================  ==========================================

Options follow a ``?``: ``collection`` (table or collection name, default
``fastrag``) and the engine's own (``nprobe``, ``ef_search``, ``index``,
``ef``, ...). Credentials come from arguments or the environment (see
:mod:`fastrag.config`), never from the string, and are never saved.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from ...errors import ConfigError, StoreCorruptedError
from .base import Condition, Pushdown, StoreIndex, VectorStore

__all__ = [
    "ENGINES",
    "Condition",
    "Pushdown",
    "StoreIndex",
    "VectorStore",
    "is_store_spec",
    "parse_store",
    "store_from_record",
]

ENGINES: dict[str, tuple[str, str]] = {
    "faiss": ("fastrag.index.stores.faiss", "FaissStore"),
    "lancedb": ("fastrag.index.stores.lancedb", "LanceStore"),
    "qdrant": ("fastrag.index.stores.qdrant", "QdrantStore"),
    "qdrant-edge": ("fastrag.index.stores.qdrant_edge", "QdrantEdgeStore"),
    "milvus": ("fastrag.index.stores.milvus", "MilvusStore"),
}
"""Engine name -> (module, class), imported on first use."""


def _engine(name: str) -> Any:
    module, cls = ENGINES[name]
    return getattr(importlib.import_module(module), cls)


def is_store_spec(index: object) -> bool:
    """Whether ``index`` names an external store (a string of :func:`parse_store` or a store)."""
    if isinstance(index, VectorStore):
        return True
    if not isinstance(index, str):
        return False
    return index.split(":", 1)[0].split("?", 1)[0] in ENGINES


def _options(text: str) -> tuple[str, dict[str, str]]:
    if "?" not in text:
        return text, {}
    head, _, query = text.partition("?")
    return head, dict(parse_qsl(query, keep_blank_values=True, strict_parsing=True))


def _int(options: dict[str, str], name: str, default: int) -> int:
    value = options.pop(name, None)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"store option {name} must be an integer, got {value!r}") from None


def _flag(options: dict[str, str], name: str) -> bool:
    value = options.pop(name, None)
    if value is None:
        return False
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"store option {name} must be 0 or 1, got {value!r}")


def parse_store(spec: str | VectorStore) -> VectorStore:
    """The store an ``index=`` string names (see the module docstring).

    Raises
    ------
    ConfigError
        An unknown engine, a malformed string or option, or the engine's
        client is not installed.
    """
    if isinstance(spec, VectorStore):
        return spec
    if not isinstance(spec, str):
        raise ConfigError(f"a store is a string or a VectorStore, got {type(spec).__name__}")
    engine, _, rest = spec.partition(":")
    engine, options = _options(engine)
    if engine not in ENGINES:
        raise ConfigError(f"unknown vector store {engine!r}; one of {', '.join(ENGINES)}")
    rest, more = _options(rest)
    options.update(more)
    collection = options.pop("collection", "fastrag")
    cls = _engine(engine)
    if engine == "faiss":
        from .faiss import EF_CONSTRUCTION, EF_SEARCH, NPROBE

        store = cls(
            rest or "Flat",
            nprobe=_int(options, "nprobe", NPROBE),
            ef_search=_int(options, "ef_search", EF_SEARCH),
            ef_construction=_int(options, "ef_construction", EF_CONSTRUCTION),
        )
    elif engine == "lancedb":
        if not rest:
            raise ConfigError("lancedb needs a directory or URI: 'lancedb:/abs/dir'")
        uri = rest if "://" in rest else str(Path(rest).expanduser().resolve())
        store = cls(
            uri, table=collection, index=options.pop("index", None),
            ann_rows=_int(options, "ann_rows", -1) if "ann_rows" in options else None,
            nprobes=_int(options, "nprobes", 32), refine=_int(options, "refine", 4),
            ef=_int(options, "ef", -1) if "ef" in options else None,
        )  # fmt: skip
    elif engine == "qdrant-edge":
        from .qdrant_edge import EF, EF_CONSTRUCT, FULL_SCAN_THRESHOLD, M

        if not rest or rest.startswith("//") or rest.startswith("s://"):
            raise ConfigError(
                "qdrant-edge needs a local directory: 'qdrant-edge:/abs/dir' (a Qdrant server "
                "is 'qdrant://host:6333')"
            )
        store = cls(
            str(Path(rest).expanduser().resolve()), collection=collection,
            ef=_int(options, "ef", EF), exact=_flag(options, "exact"), m=_int(options, "m", M),
            ef_construct=_int(options, "ef_construct", EF_CONSTRUCT),
            full_scan_threshold=_int(options, "full_scan_threshold", FULL_SCAN_THRESHOLD),
            indexing_threshold=(
                _int(options, "indexing_threshold", 0) if "indexing_threshold" in options else None
            ),
        )  # fmt: skip
    elif engine in ("qdrant", "milvus"):
        if rest.startswith("//") or rest.startswith("s://"):
            secure = rest.startswith("s://")
            host = rest[4:] if secure else rest[2:]
            if "@" in host.split("/", 1)[0]:  # never echo it: it holds a secret
                raise ConfigError(
                    f"a {engine} URL carries no credentials; pass them through "
                    f"{'QDRANT_API_KEY' if engine == 'qdrant' else 'MILVUS_TOKEN'} or the "
                    "store's api_key/token argument"
                )
            url = ("https://" if secure else "http://") + host
            store = cls(url=url, collection=collection)
        elif rest:
            store = cls(path=str(Path(rest).expanduser().resolve()), collection=collection)
        else:
            raise ConfigError(f"{engine} needs a path or a URL: '{engine}:/abs/path'")
    else:  # pragma: no cover - ENGINES is closed
        raise AssertionError(engine)
    if options:
        raise ConfigError(f"unknown {engine} store option(s): {', '.join(sorted(options))}")
    return store  # type: ignore[no-any-return]


def store_from_record(record: Mapping[str, Any]) -> VectorStore:
    """The store a manifest's ``index.store`` record describes (credentials: the environment)."""
    engine = record.get("engine")
    if engine not in ENGINES:
        raise StoreCorruptedError(f"the manifest names an unknown vector store {engine!r}")
    return _engine(str(engine)).from_record(record)  # type: ignore[no-any-return]
