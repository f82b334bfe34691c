"""Knowledge-base directories: the manifest and its snapshots.

::

    kb/
      manifest.json          format, embedder, dim, chunking, index, current snapshot, snapshots
      snapshots/<id>/        chunks.arrow, tombstones.arrow (later: hnsw.bin, bm25.arrow)

A save writes a complete new snapshot under a temporary name, fsyncs it,
renames it into place, and only then replaces ``manifest.json`` (itself
written to a temporary file, fsynced and renamed). A crash at any point
leaves the previous manifest pointing at the previous, intact snapshot.
Readers that mapped an older snapshot keep working while a writer saves: old
snapshots are only removed by pruning, and an unlinked file stays readable
to processes that have it mapped.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .._fs import atomic_write_bytes, file_lock, fsync_dir
from .._native import KERNEL_ABI
from ..config import fault
from ..errors import StoreCorruptedError, StoreError, StoreNotFoundError, StoreVersionError
from .chunks import ChunkStore

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MANIFEST",
    "SnapshotInfo",
    "list_snapshots",
    "prune_snapshots",
    "read_manifest",
    "write_snapshot",
]

FORMAT = "fastrag-kb"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SNAPSHOTS = "snapshots"
_LOCK = ".lock"


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """One saved state of a knowledge base."""

    id: str
    created_at: _dt.datetime
    chunks: int
    documents: int
    deleted_chunks: int
    current: bool


def read_manifest(root: Path) -> dict[str, Any]:
    """Read and check ``root/manifest.json``."""
    path = root / MANIFEST
    if not root.exists():
        raise StoreNotFoundError(f"{root}: no such knowledge base directory")
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise StoreNotFoundError(f"{root}: not a fastrag knowledge base (no {MANIFEST})") from exc
    except OSError as exc:
        raise StoreError(f"{path}: cannot be read: {exc}") from exc
    try:
        manifest = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise StoreCorruptedError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise StoreCorruptedError(f"{path}: not a fastrag knowledge base manifest")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise StoreVersionError(
            f"{path}: format version {version!r}; this fastrag reads up to {FORMAT_VERSION}. "
            "Upgrade fastrag."
        )
    if manifest.get("kernel_abi") != KERNEL_ABI:
        raise StoreVersionError(
            f"{path}: built with kernel ABI {manifest.get('kernel_abi')!r}, this fastrag has "
            f"{KERNEL_ABI}: its vectors are not comparable; rebuild the knowledge base"
        )
    for key in ("dim", "embedder", "chunking", "index", "current", "snapshots"):
        if key not in manifest:
            raise StoreCorruptedError(f"{path}: missing field {key!r}")
    return manifest


def snapshot_entry(manifest: dict[str, Any], snapshot: str | None) -> dict[str, Any]:
    """The manifest entry of ``snapshot`` (default: the current one)."""
    wanted = manifest["current"] if snapshot is None else snapshot
    for entry in manifest["snapshots"]:
        if entry["id"] == wanted:
            return entry
    known = ", ".join(e["id"] for e in manifest["snapshots"]) or "none"
    raise StoreNotFoundError(f"no snapshot {wanted!r} (known: {known})")


def _new_id(manifest: dict[str, Any] | None) -> str:
    seq = 1
    if manifest:
        seq = 1 + max((int(e["id"].split("-", 1)[0]) for e in manifest["snapshots"]), default=0)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{seq:06d}-{stamp}"


def _lineage(value: Any) -> Any:
    """An embedder config without what changes as it learns (a static table's revision, size)."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in ("revision", "items")}
    return value


def write_snapshot(
    root: Path,
    store: ChunkStore,
    header: dict[str, Any],
    *,
    keep: int | None,
    overwrite: bool = False,
    extras: Mapping[str, Callable[[Path], dict[str, Any]]] | None = None,
) -> str:
    """Save ``store`` as a new snapshot of the knowledge base at ``root`` and make it current.

    Parameters
    ----------
    root : Path
        Knowledge-base directory (created when missing).
    store : ChunkStore
        What to save.
    header : dict
        Manifest fields describing the knowledge base (dim, embedder, ...).
    keep : int or None
        Snapshots to keep after the save (the new one included); ``None`` keeps all.
    overwrite : bool
        Allow replacing a knowledge base built with another embedder or dim.
    extras : mapping, optional
        File name -> ``write(path) -> {"bytes", "sha256"}`` for the index
        files saved with the chunks (``hnsw.bin``, ``bm25.arrow``).

    Returns
    -------
    str
        The new snapshot's id.
    """
    try:
        return _write_snapshot(root, store, header, keep=keep, overwrite=overwrite, extras=extras or {})
    except StoreError:
        raise
    except OSError as exc:
        raise StoreError(f"{root}: cannot save the knowledge base: {exc}") from exc


def _write_snapshot(
    root: Path,
    store: ChunkStore,
    header: dict[str, Any],
    *,
    keep: int | None,
    overwrite: bool,
    extras: Mapping[str, Callable[[Path], dict[str, Any]]],
) -> str:
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise StoreError(f"{root}: exists and is not a directory")
    if root.exists() and not (root / MANIFEST).exists():
        stray = [p.name for p in root.iterdir() if p.name not in (_LOCK, SNAPSHOTS)]
        if stray:
            raise StoreError(
                f"{root}: exists and is not a fastrag knowledge base (holds {stray[0]!r}, ...); "
                "choose an empty or new directory"
            )
    snapshots_dir = root / SNAPSHOTS
    snapshots_dir.mkdir(parents=True, exist_ok=True)
    with file_lock(root / _LOCK):
        manifest = read_manifest(root) if (root / MANIFEST).exists() else None
        if manifest is not None and not overwrite:
            for key in ("dim", "embedder"):
                if _lineage(manifest[key]) != _lineage(header[key]):
                    raise StoreError(
                        f"{root}: holds a knowledge base with a different {key}; pass "
                        "overwrite=True to replace it, or save elsewhere"
                    )
        sid = _new_id(manifest)
        tmp = snapshots_dir / f".tmp-{sid}-{os.getpid()}"
        tmp.mkdir()
        try:
            files = store.write(tmp)
            for name, write in extras.items():
                files[name] = write(tmp / name)
            fsync_dir(tmp)
            fault("snapshot-files-written")
            os.rename(tmp, snapshots_dir / sid)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        fsync_dir(snapshots_dir)
        fault("snapshot-renamed")
        entry = {
            "id": sid,
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "chunks": len(store),
            "rows": store.n_rows,
            "documents": store.n_docs,
            "deleted_chunks": store.n_dead,
            "next_chunk_id": store.next_chunk_id,
            "files": files,
        }
        previous = [] if (manifest is None or overwrite) else list(manifest["snapshots"])
        new_manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kernel_abi": KERNEL_ABI,
            **header,
            "current": sid,
            "snapshots": [*previous, entry],
        }
        atomic_write_bytes(root / MANIFEST, orjson.dumps(new_manifest, option=orjson.OPT_INDENT_2))
        fault("manifest-written")
        _prune_locked(root, new_manifest, keep)
        fault("pruned")
        return sid


def list_snapshots(root: Path) -> list[SnapshotInfo]:
    """The snapshots of the knowledge base at ``root``, oldest first."""
    manifest = read_manifest(Path(root))
    return [
        SnapshotInfo(
            id=e["id"],
            created_at=_dt.datetime.fromisoformat(e["created_at"]),
            chunks=e["chunks"],
            documents=e["documents"],
            deleted_chunks=e["deleted_chunks"],
            current=e["id"] == manifest["current"],
        )
        for e in manifest["snapshots"]
    ]


def prune_snapshots(root: Path, keep: int) -> list[str]:
    """Remove all but the ``keep`` newest snapshots (never the current one); return removed ids."""
    root = Path(root)
    with file_lock(root / _LOCK):
        return _prune_locked(root, read_manifest(root), keep)


def _prune_locked(root: Path, manifest: dict[str, Any], keep: int | None) -> list[str]:
    snapshots_dir = root / SNAPSHOTS
    # Leftovers of saves that crashed before their rename.
    for p in snapshots_dir.glob(".tmp-*"):
        shutil.rmtree(p, ignore_errors=True)
    # Snapshot directories the manifest does not know (a crash between rename and manifest).
    known = {e["id"] for e in manifest["snapshots"]}
    for p in snapshots_dir.iterdir():
        if p.is_dir() and not p.name.startswith(".") and p.name not in known:
            shutil.rmtree(p, ignore_errors=True)
    if keep is None:
        return []
    entries = manifest["snapshots"]
    doomed = [e["id"] for e in entries[: max(0, len(entries) - keep)] if e["id"] != manifest["current"]]
    if not doomed:
        return []
    manifest = {**manifest, "snapshots": [e for e in entries if e["id"] not in doomed]}
    atomic_write_bytes(root / MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    for sid in doomed:
        shutil.rmtree(snapshots_dir / sid, ignore_errors=True)
    return doomed
