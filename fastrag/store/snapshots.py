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
to processes that have it mapped. A reader that is still opening a snapshot
holds a lease on it (:func:`hold_snapshot`), which pruning respects.

Everything read from a manifest is checked before use (:func:`read_manifest`):
snapshot ids must match the pattern fastrag writes and file names must be
plain names, so no manifest can make a load read, or a prune delete,
anything outside the knowledge base.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import os
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import orjson

from .._fs import atomic_write_bytes, file_lock, fsync_dir
from .._native import KERNEL_ABI
from ..config import fault
from ..errors import (
    ConfigError,
    FastragError,
    SnapshotNotFoundError,
    StoreCorruptedError,
    StoreError,
    StoreNotFoundError,
    StoreVersionError,
)
from .chunks import ChunkStore

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "HeldSnapshot",
    "MANIFEST",
    "Manifest",
    "SnapshotInfo",
    "SnapshotRecord",
    "check_tag",
    "hold_snapshot",
    "list_snapshots",
    "manifest_field",
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
    tag: str | None = None


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    """A snapshot's entry in the manifest, checked (see :func:`read_manifest`).

    ``files`` maps a file name (a plain name, no directory part) to
    ``{"bytes": int, "sha256": hex}``.
    """

    id: str
    created_at: _dt.datetime
    chunks: int
    rows: int
    documents: int
    deleted_chunks: int
    next_chunk_id: int
    files: Mapping[str, Mapping[str, Any]]
    tag: str | None = None
    """The name given at save (``kb.save(path, tag=...)``), unique among the kept snapshots."""

    def to_dict(self) -> dict[str, Any]:
        """The entry as written to ``manifest.json``."""
        tag = {} if self.tag is None else {"tag": self.tag}
        return {
            "id": self.id,
            **tag,
            "created_at": self.created_at.isoformat(),
            "chunks": self.chunks,
            "rows": self.rows,
            "documents": self.documents,
            "deleted_chunks": self.deleted_chunks,
            "next_chunk_id": self.next_chunk_id,
            "files": {name: dict(info) for name, info in self.files.items()},
        }


@dataclass(frozen=True, slots=True)
class Manifest:
    """A knowledge base's ``manifest.json``, every field type- and range-checked.

    Snapshot ids match the pattern fastrag writes and file names are plain
    names, so no path built from a manifest leaves the knowledge base.
    ``embedder``, ``index["hnsw"]`` and ``retrieval`` are checked to be
    mappings here; their layers parse them (wrap that in
    :func:`manifest_field` so a bad value is a :class:`StoreCorruptedError`).
    """

    root: Path
    format_version: int
    kernel_abi: int
    dim: int
    embedder: Mapping[str, Any]
    chunking: Mapping[str, Any]
    index: Mapping[str, Any]
    keyword: Mapping[str, Any] | None
    retrieval: Mapping[str, Any]
    current: str
    snapshots: tuple[SnapshotRecord, ...]
    data: Mapping[str, Any] = field(repr=False, compare=False)
    """The manifest as read (for rewriting it)."""

    @property
    def path(self) -> Path:
        """The manifest file."""
        return self.root / MANIFEST

    def snapshot(self, snapshot: str | None = None) -> SnapshotRecord:
        """The entry of ``snapshot``, an id or a tag (default: the current one).

        Raises
        ------
        SnapshotNotFoundError
            No kept snapshot has that id or tag.
        """
        wanted = self.current if snapshot is None else snapshot
        for entry in self.snapshots:
            if entry.id == wanted or (entry.tag is not None and entry.tag == wanted):
                return entry
        known = ", ".join(e.id + (f" ({e.tag})" if e.tag else "") for e in self.snapshots)
        shown = repr(wanted) if isinstance(wanted, str) else type(wanted).__name__
        raise SnapshotNotFoundError(
            f"{self.root}: no snapshot {shown[:80]} (known: {known or 'none'})"
        )

    def snapshot_dir(self, snapshot_id: str) -> Path:
        """``root/snapshots/<id>`` for a listed id (never a path outside ``snapshots/``)."""
        if not _ID.fullmatch(snapshot_id):
            raise StoreNotFoundError(f"no snapshot {snapshot_id!r}: not a snapshot id")
        return self.root / SNAPSHOTS / snapshot_id


_ID = re.compile(r"[0-9]{6,}-[0-9]{8}T[0-9]{12}Z")
"""The ids :func:`_new_id` writes: a sequence number and a UTC time stamp."""
_ID_WHAT = "a snapshot id (NNNNNN-YYYYMMDDTHHMMSSffffffZ)"
_TAG = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,99}")
"""Snapshot tags: a letter, then letters, digits, ``.``, ``_`` or ``-`` (at most 100)."""
_TAG_WHAT = "a snapshot tag (a letter, then letters, digits, '.', '_' or '-'; at most 100)"
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*")
_SHA256 = re.compile(r"[0-9a-f]{64}")
INDEX_TYPES = ("exact", "hnsw", "faiss", "lancedb", "qdrant", "qdrant-edge", "milvus")
"""``index.type`` values: fastrag's own indexes, then the external stores (``index.store`` set)."""


class _Fields:
    """Type checks of manifest fields; each failure names the field."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, field: str, problem: str, value: Any) -> NoReturn:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise StoreCorruptedError(f"{self.path}: field {field!r} {problem}, got {shown}")

    def get(self, obj: Mapping[str, Any], key: str, field: str) -> Any:
        if key not in obj:
            raise StoreCorruptedError(f"{self.path}: missing field {field!r}")
        return obj[key]

    def integer(self, value: Any, field: str, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(field, f"must be an integer >= {minimum}", value)
        return value

    def mapping(self, value: Any, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(field, "must be a JSON object", value)
        return value

    def text(
        self, value: Any, field: str, pattern: re.Pattern[str] | None = None, what: str = ""
    ) -> str:
        if not isinstance(value, str):
            self.fail(field, "must be a string", value)
        if pattern is not None and not pattern.fullmatch(value):
            self.fail(field, f"is not {what}", value)
        return value


def read_manifest(root: Path) -> Manifest:
    """Read ``root/manifest.json`` and check every field.

    Returns
    -------
    Manifest
        Checked values: integers are integers in range, snapshot ids match
        the pattern fastrag writes, file names are plain names.

    Raises
    ------
    StoreNotFoundError
        ``root`` is missing or holds no manifest.
    StoreCorruptedError
        The manifest is not JSON, or a field is missing or malformed (the
        message names the field).
    StoreVersionError
        Written by a newer format or another kernel ABI.
    """
    root = Path(root)
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
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise StoreCorruptedError(f"{path}: not valid JSON: {exc}") from exc
    return _check_manifest(root, data)


def _check_manifest(root: Path, data: Any) -> Manifest:
    path = root / MANIFEST
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise StoreCorruptedError(f"{path}: not a fastrag knowledge base manifest")
    f = _Fields(path)
    version = f.integer(f.get(data, "format_version", "format_version"), "format_version", 1)
    if version > FORMAT_VERSION:
        raise StoreVersionError(
            f"{path}: format version {version!r}; this fastrag reads up to {FORMAT_VERSION}. "
            "Upgrade fastrag."
        )
    if data.get("kernel_abi") != KERNEL_ABI:
        raise StoreVersionError(
            f"{path}: built with kernel ABI {data.get('kernel_abi')!r}, this fastrag has "
            f"{KERNEL_ABI}: its vectors are not comparable; rebuild the knowledge base"
        )
    for key in ("dim", "embedder", "chunking", "index", "current", "snapshots"):
        f.get(data, key, key)
    dim = f.integer(data["dim"], "dim", 1)
    embedder = f.mapping(data["embedder"], "embedder")
    chunking = f.mapping(data["chunking"], "chunking")
    window = f.integer(f.get(chunking, "window", "chunking.window"), "chunking.window", 1)
    overlap = f.integer(f.get(chunking, "overlap", "chunking.overlap"), "chunking.overlap", 0)
    if overlap >= window:
        f.fail("chunking.overlap", f"must be below chunking.window ({window})", overlap)
    mode = chunking.get("mode", "windows")
    if mode not in ("windows", "structure", "auto"):
        f.fail("chunking.mode", "must be 'windows', 'structure' or 'auto'", mode)
    index = f.mapping(data["index"], "index")
    kind = f.get(index, "type", "index.type")
    if kind not in INDEX_TYPES:
        f.fail("index.type", f"must be one of {', '.join(INDEX_TYPES)}", kind)
    f.mapping(index.get("hnsw", {}), "index.hnsw")
    if kind not in ("exact", "hnsw"):
        f.mapping(f.get(index, "store", "index.store"), "index.store")
    if index.get("auto") is not None:
        f.mapping(index["auto"], "index.auto")
    keyword = data.get("keyword")
    if keyword is not None:
        f.mapping(keyword, "keyword")
    retrieval = data.get("retrieval")
    retrieval = {} if retrieval is None else f.mapping(retrieval, "retrieval")
    current = f.text(data["current"], "current", _ID, _ID_WHAT)
    entries = data["snapshots"]
    if not isinstance(entries, list):
        f.fail("snapshots", "must be a list", entries)
    snapshots = tuple(_snapshot_record(f, e, i) for i, e in enumerate(entries))
    ids = [s.id for s in snapshots]
    tags = [s.tag for s in snapshots if s.tag is not None]
    if len(set(tags)) != len(tags):
        dup = next(t for t in tags if tags.count(t) > 1)
        f.fail("snapshots", "lists a snapshot tag twice", dup)
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        f.fail("snapshots", "lists a snapshot id twice", dup)
    if current not in ids:
        f.fail("current", "names no snapshot in 'snapshots'", current)
    return Manifest(
        root=root,
        format_version=version,
        kernel_abi=KERNEL_ABI,
        dim=dim,
        embedder=embedder,
        chunking={"window": window, "overlap": overlap, "mode": mode},
        index=index,
        keyword=keyword,
        retrieval=retrieval,
        current=current,
        snapshots=snapshots,
        data=data,
    )


def _snapshot_record(f: _Fields, entry: Any, i: int) -> SnapshotRecord:
    at = f"snapshots[{i}]"
    entry = f.mapping(entry, at)
    sid = f.text(f.get(entry, "id", f"{at}.id"), f"{at}.id", _ID, _ID_WHAT)
    tag = entry.get("tag")
    if tag is not None:
        f.text(tag, f"{at}.tag", _TAG, _TAG_WHAT)
    created = f.text(f.get(entry, "created_at", f"{at}.created_at"), f"{at}.created_at")
    try:
        created_at = _dt.datetime.fromisoformat(created)
    except ValueError:
        f.fail(f"{at}.created_at", "is not an ISO-8601 time", created)
    counts = {
        key: f.integer(f.get(entry, key, f"{at}.{key}"), f"{at}.{key}")
        for key in ("chunks", "rows", "documents", "deleted_chunks", "next_chunk_id")
    }
    files_raw = f.mapping(f.get(entry, "files", f"{at}.files"), f"{at}.files")
    files: dict[str, dict[str, Any]] = {}
    for name, info in files_raw.items():
        where = f"{at}.files[{name!r}]"
        f.text(name, f"{at}.files", _FILE_NAME, "a plain file name")
        info = f.mapping(info, where)
        size = f.get(info, "bytes", f"{where}.bytes")
        digest = f.get(info, "sha256", f"{where}.sha256")
        files[name] = {
            "bytes": f.integer(size, f"{where}.bytes"),
            "sha256": f.text(digest, f"{where}.sha256", _SHA256, "a hex SHA-256"),
        }
    return SnapshotRecord(id=sid, created_at=created_at, files=files, tag=tag, **counts)


def check_tag(tag: object) -> str:
    """Validate a snapshot tag (see :data:`_TAG`): a ``ConfigError`` naming the problem."""
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        shown = repr(tag) if isinstance(tag, str) else type(tag).__name__
        raise ConfigError(f"tag must be {_TAG_WHAT}, got {shown[:80]}")
    return tag


@contextlib.contextmanager
def manifest_field(manifest: Manifest, field: str) -> Iterator[None]:
    """Report a bad manifest value that another layer parses as a :class:`StoreCorruptedError`.

    ``with manifest_field(m, "index.hnsw"): HnswConfig.from_dict(m.index["hnsw"])``:
    a ``ConfigError``, ``KeyError``, ``TypeError`` or ``ValueError`` raised in
    the block becomes a ``StoreCorruptedError`` naming the manifest and the field.
    """
    try:
        yield
    except StoreError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, FastragError) and not isinstance(exc, ConfigError):
            raise  # e.g. an embedder mismatch is the caller's problem, not a corrupt file
        raise StoreCorruptedError(f"{manifest.path}: field {field!r} is invalid: {exc}") from exc


def _new_id(manifest: Manifest | None) -> str:
    seq = 1
    if manifest:
        seq = 1 + max((int(e.id.split("-", 1)[0]) for e in manifest.snapshots), default=0)
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
    tag: str | None = None,
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
    tag : str, optional
        A name for the new snapshot (:func:`check_tag`); no kept snapshot
        may have it already (a ``ConfigError``). Requests name a snapshot by
        its id or its tag.

    Returns
    -------
    str
        The new snapshot's id.
    """
    if tag is not None:
        check_tag(tag)
    try:
        return _write_snapshot(
            root, store, header, keep=keep, overwrite=overwrite, extras=extras or {}, tag=tag
        )
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
    tag: str | None,
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
            if manifest.dim != header["dim"] or _lineage(dict(manifest.embedder)) != _lineage(
                header["embedder"]
            ):
                key = "dim" if manifest.dim != header["dim"] else "embedder"
                raise StoreError(
                    f"{root}: holds a knowledge base with a different {key}; pass "
                    "overwrite=True to replace it, or save elsewhere"
                )
        if tag is not None and manifest is not None and not overwrite:
            if any(e.tag == tag for e in manifest.snapshots):
                raise ConfigError(
                    f"{root}: a kept snapshot is already tagged {tag!r}; tags are unique"
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
            **({} if tag is None else {"tag": tag}),
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "chunks": len(store),
            "rows": store.n_rows,
            "documents": store.n_docs,
            "deleted_chunks": store.n_dead,
            "next_chunk_id": store.next_chunk_id,
            "files": files,
        }
        previous = []
        if manifest is not None and not overwrite:
            previous = [e.to_dict() for e in manifest.snapshots]
        new_manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kernel_abi": KERNEL_ABI,
            **header,
            "current": sid,
            "snapshots": [*previous, entry],
        }
        checked = _check_manifest(root, new_manifest)
        atomic_write_bytes(root / MANIFEST, orjson.dumps(new_manifest, option=orjson.OPT_INDENT_2))
        fault("manifest-written")
        _prune_locked(root, checked, keep)
        fault("pruned")
        return sid


def list_snapshots(root: Path) -> list[SnapshotInfo]:
    """The snapshots of the knowledge base at ``root``, oldest first."""
    manifest = read_manifest(Path(root))
    return [
        SnapshotInfo(
            id=e.id,
            created_at=e.created_at,
            chunks=e.chunks,
            documents=e.documents,
            deleted_chunks=e.deleted_chunks,
            current=e.id == manifest.current,
            tag=e.tag,
        )
        for e in manifest.snapshots
    ]


def prune_snapshots(root: Path, keep: int) -> list[str]:
    """Remove all but the ``keep`` newest snapshots (never the current one); return removed ids.

    The ids leave the manifest at once; the directory of a snapshot that a
    reader is opening (see :func:`hold_snapshot`) is removed by a later save
    or prune, once the reader is done.
    """
    root = Path(root)
    with file_lock(root / _LOCK):
        return _prune_locked(root, read_manifest(root), keep)


def _prune_locked(root: Path, manifest: Manifest, keep: int | None) -> list[str]:
    snapshots_dir = root / SNAPSHOTS
    # Leftovers of saves that crashed before their rename.
    for p in snapshots_dir.glob(".tmp-*"):
        shutil.rmtree(p, ignore_errors=True)
    entries = manifest.snapshots
    doomed: list[str] = []
    if keep is not None:
        doomed = [e.id for e in entries[: max(0, len(entries) - keep)] if e.id != manifest.current]
    if doomed:
        kept = [e.to_dict() for e in entries if e.id not in doomed]
        data = {**manifest.data, "snapshots": kept}
        atomic_write_bytes(root / MANIFEST, orjson.dumps(data, option=orjson.OPT_INDENT_2))
    listed = {e.id for e in entries} - set(doomed)
    # Pruned snapshots, directories the manifest does not know (a crash between
    # rename and manifest, a save with overwrite=True) and stale leases.
    for p in snapshots_dir.iterdir():
        name = p.name
        if name.startswith(_LEASE):
            sid = name[len(_LEASE) :]
            if sid not in listed and not (snapshots_dir / sid).exists():
                _remove_unheld(snapshots_dir, sid)
        elif not name.startswith(".") and name not in listed and p.is_dir():
            _remove_unheld(snapshots_dir, name)
    return doomed


# -- readers' leases -----------------------------------------------------------------
#
# A reader opening a snapshot holds a shared flock on snapshots/.lease-<id> while
# it maps the files; pruning takes the exclusive lock without waiting, and
# leaves a held directory for a later prune. Once opened, a reader needs no
# lease: its files are mapped (or read), and an unlinked file stays readable.
#
# Pruner: lock EX -> rmtree(<id>) -> unlink lease -> unlock. Reader: open lease
# (created if missing) -> lock SH -> check that <id> still exists. Whatever the
# interleaving, a reader that holds SH with <id> present keeps it until it
# unlocks, and a reader that finds <id> gone reads the manifest again.

_LEASE = ".lease-"
_OPEN_ATTEMPTS = 16


@dataclass(frozen=True, slots=True)
class HeldSnapshot:
    """A snapshot kept from pruning while a reader opens it (see :func:`hold_snapshot`)."""

    manifest: Manifest
    entry: SnapshotRecord
    directory: Path


def _remove_unheld(snapshots_dir: Path, sid: str) -> bool:
    """Remove ``snapshots/<sid>`` and its lease unless a reader holds it; True if removed."""
    lease = snapshots_dir / f"{_LEASE}{sid}"
    fd = os.open(lease, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            return False
        shutil.rmtree(snapshots_dir / sid, ignore_errors=True)
        lease.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def _shared_lease(path: Path) -> tuple[bool, int | None]:
    """Lock ``path`` shared; ``(False, None)`` while a pruner holds it exclusively.

    A knowledge base the reader may not write to gives ``(True, None)``: it is
    opened without a lease (a writer's pruning can then race the reader).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return True, None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise StoreError(f"{path}: cannot lock: {exc}") from exc
        return False, None
    return True, fd


@contextlib.contextmanager
def hold_snapshot(root: Path, snapshot: str | None = None) -> Iterator[HeldSnapshot]:
    """Read the manifest and keep ``snapshot`` (default: the current one) for the block.

    While the block runs, no save or prune (of any process) removes the
    snapshot's directory, so a reader can open every file of it. When the
    snapshot read as current was already being pruned by a save that
    replaced it, the manifest is read again and the new current snapshot is
    held instead.

    Parameters
    ----------
    root : Path
        Knowledge-base directory.
    snapshot : str, optional
        A listed snapshot id or tag; default the current one.

    Yields
    ------
    HeldSnapshot
        The checked manifest, the snapshot's entry and its directory.

    Raises
    ------
    StoreNotFoundError
        No such knowledge base or snapshot, or ``snapshot`` was pruned
        while it was being opened.
    StoreCorruptedError
        The manifest is malformed, or a snapshot path resolves outside the
        knowledge base.
    StoreError
        The current snapshot was replaced and pruned on every one of many
        attempts (a writer saving without pause).
    """
    root = Path(root)
    for _ in range(_OPEN_ATTEMPTS):
        manifest = read_manifest(root)
        entry = manifest.snapshot(snapshot)
        directory = manifest.snapshot_dir(entry.id)
        held, fd = _shared_lease(root / SNAPSHOTS / f"{_LEASE}{entry.id}")
        try:
            if held and directory.is_dir():
                _check_inside(manifest, entry, directory)
                yield HeldSnapshot(manifest, entry, directory)
                return
        finally:
            if fd is not None:
                os.close(fd)
        # Pruning removes an id from the manifest before its directory: a directory
        # missing while its id is still listed (and nobody prunes it) was lost.
        if held and entry.id in {e.id for e in read_manifest(root).snapshots}:
            raise StoreCorruptedError(f"{directory}: the snapshot's directory is missing")
        if snapshot is not None:
            raise StoreNotFoundError(f"{root}: snapshot {snapshot!r} was pruned while being opened")
    raise StoreError(
        f"{root}: the current snapshot was replaced and pruned {_OPEN_ATTEMPTS} times while "
        "being opened (a writer saving without pause); try again"
    )


def _check_inside(manifest: Manifest, entry: SnapshotRecord, directory: Path) -> None:
    """Refuse a snapshot directory or file that a symbolic link sends outside ``snapshots/``."""
    base = (manifest.root / SNAPSHOTS).resolve()
    real = directory.resolve()
    if real.parent != base:
        raise StoreCorruptedError(
            f"{directory}: resolves to {real}, outside the knowledge base's snapshots folder"
        )
    for name in entry.files:
        path = directory / name
        if path.is_symlink() and path.resolve().parent != real:
            raise StoreCorruptedError(f"{path}: a symbolic link out of its snapshot folder")
