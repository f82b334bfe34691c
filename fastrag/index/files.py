"""The index files of a snapshot: which there are, how they are written and checked on load.

::

    snapshots/<id>/bm25.arrow        chunk BM25 (one row per store row)
    snapshots/<id>/bm25_docs.arrow   document BM25 (one row per document instance)
    snapshots/<id>/hnsw.bin          the HNSW graph (labels = chunk ids)

:func:`writers` gives the save callbacks for
:func:`fastrag.store.snapshots.write_snapshot`; :func:`load_indexes` opens
what a snapshot recorded, checks sizes (and hashes with ``verify``) and that
every index covers the store it is loaded beside.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._fs import check_recorded
from ..errors import SearchIndexError, StoreCorruptedError
from .hnsw import HnswConfig, HnswIndex
from .keyword import BM25_FILE, BM25Index

__all__ = ["BM25_DOCS_FILE", "BM25_FILE", "HNSW_FILE", "load_indexes", "writers"]

HNSW_FILE = "hnsw.bin"
BM25_DOCS_FILE = "bm25_docs.arrow"


def writers(
    keyword: BM25Index | None, documents: BM25Index | None, graph: HnswIndex | None
) -> dict[str, Callable[[Path], dict[str, Any]]]:
    """File name -> ``write(path) -> {"bytes", "sha256"}`` of each index there is."""
    out: dict[str, Callable[[Path], dict[str, Any]]] = {}
    if keyword is not None:
        out[BM25_FILE] = keyword.save
    if documents is not None:
        out[BM25_DOCS_FILE] = documents.save
    if graph is not None:
        out[HNSW_FILE] = graph.save
    return out


def load_indexes(
    directory: Path,
    files: Mapping[str, Any],
    *,
    rows: int,
    documents: int,
    dim: int,
    graph: bool,
    hnsw: HnswConfig,
    verify: bool = False,
) -> tuple[BM25Index | None, BM25Index | None, HnswIndex | None]:
    """Open the indexes a snapshot recorded.

    Parameters
    ----------
    directory : Path
        The snapshot directory.
    files : mapping
        The manifest's record of the snapshot's files.
    rows, documents : int
        Rows and document instances of the chunk store loaded beside them.
    dim : int
        Vector dimension.
    graph : bool
        Whether the knowledge base uses an HNSW graph (its file must exist).
    hnsw : HnswConfig
        The graph's parameters.
    verify : bool
        Check every file's SHA-256.

    Returns
    -------
    tuple
        Chunk BM25, document BM25 and the graph (each None when absent).

    Raises
    ------
    StoreCorruptedError
        A file is missing, of another size or content, or does not cover the store.
    """
    keyword = _bm25(directory, files, BM25_FILE, rows, "rows, the chunk store has", verify)
    docs = _bm25(directory, files, BM25_DOCS_FILE, documents, "rows, the store has", verify)
    found = None
    if graph:
        if HNSW_FILE not in files:
            raise StoreCorruptedError(f"{directory}: the manifest names no {HNSW_FILE}")
        info = files[HNSW_FILE]
        path = directory / HNSW_FILE
        check_recorded(path, info, False)
        try:
            # Mapped and checked in a background thread unless verifying: exact
            # search answers until the graph is in (KnowledgeBase.ready / wait_ready).
            found = HnswIndex.load(
                path, dim, hnsw, sha256=info["sha256"] if verify else None, background=not verify
            )
        except SearchIndexError as exc:  # a damaged file is a damaged store
            raise StoreCorruptedError(str(exc)) from exc
    return keyword, docs, found


def _bm25(
    directory: Path, files: Mapping[str, Any], name: str, expected: int, what: str, verify: bool
) -> BM25Index | None:
    if name not in files:
        return None
    path = directory / name
    check_recorded(path, files[name], verify)
    index = BM25Index.load(path)
    if index.n_rows != expected:
        unit = "documents" if name == BM25_DOCS_FILE else ""
        raise StoreCorruptedError(f"{path}: {index.n_rows} {what} {expected} {unit}".rstrip())
    return index
