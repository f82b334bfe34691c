"""A corpus on disk: the manifest header, a save as a new snapshot, and opening one.

:class:`Settings` are what a knowledge base keeps besides its corpus: the
chunker, the vector index chosen (and the ``"auto"`` record), the HNSW
parameters and the retrieval configuration; all of it goes into the
manifest. The retrieval configuration belongs to the retrieval layer, above
this one: it is kept here as an opaque value with ``to_dict()`` and read
back by the caller's ``retrieval`` function.

:func:`save_corpus` writes the store, every index file and the embedder's
own files (a static table) as one snapshot
(:func:`fastrag.store.snapshots.write_snapshot`); :func:`open_corpus` opens
a held snapshot, checking every file against the manifest.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._fs import check_recorded
from .._version import __version__
from ..embed.base import (
    check_embedder,
    check_embedder_matches,
    embedder_files,
)
from ..embed.registry import embedder_from_config
from ..errors import OntologyError, StoreCorruptedError
from ..index.files import HNSW_FILE, load_indexes, writers
from ..index.hnsw import HnswConfig
from ..index.stores import ENGINES, store_from_record
from ..index.stores.base import store_errors
from ..store.chunks import ChunkStore
from ..store.snapshots import HeldSnapshot, manifest_field, write_snapshot
from ..text.chunking import Chunker
from .corpus import Corpus, make_corpus
from .ontology import Ontology

__all__ = ["ONTOLOGY_FILE", "Settings", "describe", "header", "open_corpus", "save_corpus"]

ONTOLOGY_FILE = "ontology.json"
"""A snapshot's ontology (:meth:`~fastrag.corpus.ontology.Ontology.to_dict` as JSON)."""


def _ontology_writer(ontology: Ontology) -> Any:
    def write(path: Path) -> dict[str, Any]:
        data = ontology.to_json()
        with open(path, "wb") as fh:
            fh.write(data)
        return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    return write


def _read_ontology(directory: Path, info: Any, verify: bool) -> Ontology:
    path = directory / ONTOLOGY_FILE
    check_recorded(path, info, verify)
    try:
        import orjson

        return Ontology.from_dict(orjson.loads(path.read_bytes()))
    except (OSError, ValueError, OntologyError) as exc:
        raise StoreCorruptedError(f"{path}: not a valid ontology: {exc}") from exc


@dataclass(frozen=True)
class Settings:
    """A knowledge base's settings besides its corpus (saved in the manifest).

    Attributes
    ----------
    chunker : Chunker
        How documents are cut.
    index : str
        The vector index in use: ``"exact"``, ``"hnsw"`` or an external
        store's engine (``"faiss"``, ``"lancedb"``, ``"qdrant"``, ``"qdrant-edge"``,
        ``"milvus"``).
    hnsw : HnswConfig
        Graph parameters (kept with an exact index too, for a later switch).
    auto : dict or None
        What ``index="auto"`` measured, when it chose.
    retrieval : RetrievalConfig
        Default mode, fusion and limits (:class:`~fastrag.RetrievalConfig`;
        any value with ``to_dict()`` here).
    fusion_tuning : dict or None
        What the fusion tuning chose, or why it did not run
        (:func:`fastrag.retrieve.tune.tune_at_build`); None: never asked.
    """

    chunker: Chunker
    index: str
    hnsw: HnswConfig
    auto: dict[str, Any] | None
    retrieval: Any
    fusion_tuning: dict[str, Any] | None = None

    def replace(self, **changes: Any) -> Settings:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


def header(corpus: Corpus, settings: Settings) -> dict[str, Any]:
    """The manifest fields describing a knowledge base (besides its snapshots)."""
    index: dict[str, Any] = {"type": settings.index, "hnsw": settings.hnsw.to_dict()}
    if settings.auto is not None:
        index["auto"] = settings.auto
    if corpus.external is not None:
        index["store"] = corpus.external.describe()  # where it is; never credentials
    return {
        "fastrag_version": __version__,
        "dim": corpus.store.dim,
        "embedder": corpus.embedder.config(),
        "chunking": settings.chunker.config(),
        "index": index,
        "keyword": None if corpus.keyword is None else corpus.keyword.config(),
        "retrieval": settings.retrieval.to_dict(),
        **({} if settings.fusion_tuning is None else {"fusion_tuning": settings.fusion_tuning}),
    }


def save_corpus(
    root: Path, corpus: Corpus, settings: Settings, *, keep: int | None, overwrite: bool,
    tag: str | None = None,
) -> str:  # fmt: skip
    """Write ``corpus`` as a new snapshot of the knowledge base at ``root``; return its id."""
    extras = writers(corpus.keyword, corpus.documents, corpus.graph)
    extras.update(embedder_files(corpus.embedder))  # e.g. a static embedder's table
    if corpus.ontology is not None:
        extras[ONTOLOGY_FILE] = _ontology_writer(corpus.ontology)
    if corpus.external is not None:
        extras.update(corpus.external.files())  # FAISS: its index, saved with the snapshot
    return write_snapshot(
        root, corpus.store, header(corpus, settings), keep=keep, overwrite=overwrite,
        extras=extras, tag=tag,
    )  # fmt: skip


def open_corpus(
    held: HeldSnapshot,
    *,
    retrieval: Callable[[dict[str, Any]], Any],
    embedder: Any = None,
    verify: bool = False,
) -> tuple[Corpus, Settings, bool]:
    """Open a held snapshot: its corpus, its settings, and whether a save should follow.

    Parameters
    ----------
    held : HeldSnapshot
        From :func:`fastrag.store.snapshots.hold_snapshot` (pruning waits
        while it is held).
    retrieval : callable
        Reads the manifest's ``retrieval`` field into the settings'
        retrieval configuration (``RetrievalConfig.from_dict``); what it
        raises is reported as a damaged manifest field.
    embedder : Embedder, optional
        Needed for embedders whose configuration holds no weights or
        secrets; must match the one the knowledge base was built with.
    verify : bool
        Check every file's SHA-256 and every vector.

    Returns
    -------
    tuple
        The corpus, the settings, and True when a save should follow: the
        snapshot is not the current one (saving it back makes it current
        again) or a keyword index was read from an older format (a save
        rewrites it in the current one).

    Raises
    ------
    StoreCorruptedError
        A file is missing, damaged, or disagrees with the manifest.
    EmbedderMismatchError
        ``embedder`` differs from the one the knowledge base was built with.
    """
    manifest, entry, directory = held.manifest, held.entry, held.directory
    if embedder is None:
        with manifest_field(manifest, "embedder"):
            embedder = embedder_from_config(
                dict(manifest.embedder), directory=directory, verify=verify
            )
    else:
        check_embedder(embedder)
        check_embedder_matches(dict(manifest.embedder), embedder)
    files = entry.files
    store = ChunkStore.read(
        directory, dim=manifest.dim, next_chunk_id=entry.next_chunk_id, files=files, verify=verify
    )
    index_info = manifest.index
    with manifest_field(manifest, "index.hnsw"):
        hnsw = HnswConfig.from_dict(index_info.get("hnsw", {}))
    graph_wanted = index_info["type"] == "hnsw"
    if graph_wanted and HNSW_FILE not in files:
        raise StoreCorruptedError(
            f"{manifest.path}: field 'index.type' is 'hnsw' but snapshot {entry.id} "
            f"records no {HNSW_FILE} in its 'files'"
        )
    keyword, documents, graph = load_indexes(
        directory, files, rows=store.n_rows, documents=store.doc_starts().size - 1,
        dim=manifest.dim, graph=graph_wanted, hnsw=hnsw, verify=verify,
    )  # fmt: skip
    with manifest_field(manifest, "retrieval"):
        retrieval_config = retrieval(dict(manifest.retrieval))
    chunking = manifest.chunking
    chunker = Chunker(
        window=chunking["window"], overlap=chunking["overlap"], mode=chunking.get("mode", "windows")
    )
    tuning = manifest.data.get("fusion_tuning")
    if tuning is not None and not isinstance(tuning, Mapping):
        raise StoreCorruptedError(
            f"{manifest.path}: field 'fusion_tuning' must be an object, got {type(tuning).__name__}"
        )
    settings = Settings(
        chunker, index_info["type"], hnsw, index_info.get("auto"), retrieval_config,
        None if tuning is None else dict(tuning),
    )  # fmt: skip
    ontology = _read_ontology(directory, files[ONTOLOGY_FILE], verify) if (
        ONTOLOGY_FILE in files
    ) else None  # fmt: skip
    external = None
    if index_info["type"] in ENGINES:
        with manifest_field(manifest, "index.store"):
            external = store_from_record(dict(index_info["store"]))
        with store_errors(external, "attach"):
            external.attach(manifest.dim, directory, files)
    corpus = make_corpus(
        store,
        embedder,
        graph=graph,
        keyword=keyword,
        documents=documents,
        ontology=ontology,
        external=external,
    )
    upgraded = any(x is not None and x.upgraded for x in (keyword, documents))
    return corpus, settings, entry.id != manifest.current or upgraded


def _store_count(store: Any) -> int | None:
    """Vectors in an external store, or None when it does not answer (stats never raise)."""
    try:
        return int(store.count())
    except Exception:
        return None


def describe(corpus: Corpus, settings: Settings) -> dict[str, Any]:
    """Sizes and settings of a corpus: chunks, documents, deletions, bytes, embedder, indexes."""
    store, graph = corpus.store, corpus.graph
    keyword = corpus.keyword
    return {
        "chunks": len(store),
        "documents": store.n_docs,
        "deleted_chunks": store.n_dead,
        "segments": len(store.segments),
        "dim": store.dim,
        "vector_bytes": int(sum(s.vectors.nbytes for s in store.segments)),
        "text_bytes": sum(
            int(s.batch.column("text").buffers()[2].size) for s in store.segments if len(s)
        ),
        "window": settings.chunker.window,
        "overlap": settings.chunker.overlap,
        "chunking": settings.chunker.mode,
        "embedder": {k: v for k, v in corpus.embedder.config().items() if k != "vocabulary"},
        "index": settings.index,
        "hnsw": None
        if graph is None
        else {**settings.hnsw.to_dict(), "elements": len(graph), "deleted": graph.n_deleted},
        "auto": settings.auto,
        "store": None
        if corpus.external is None
        else {
            **corpus.external.describe(),
            "vectors": _store_count(corpus.external),
            "plans": dict(corpus.external.plans),
        },
        "keyword": None if keyword is None else {**keyword.config(), "terms": keyword.n_terms},
        "ontology": None if corpus.ontology is None else len(corpus.ontology.entities),
        "retrieval": settings.retrieval.to_dict(),
        "fusion_tuning": settings.fusion_tuning,
    }
