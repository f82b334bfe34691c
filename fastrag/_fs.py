"""Durable, atomic file-system operations (write temp, fsync, rename)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from .errors import FastragError, StoreCorruptedError, StoreError

__all__ = [
    "HashingFile",
    "arrow_errors",
    "arrow_read_errors",
    "check_recorded",
    "atomic_write_bytes",
    "file_lock",
    "fsync_dir",
    "fsync_file",
    "sha256_file",
    "write_arrow",
]


def fsync_dir(path: Path) -> None:
    """Flush a directory's entries (renames, creations) to disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Flush a file's data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: readers see the old or the new file, whole."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def sha256_file(path: Path, *, block: int = 1 << 22) -> str:
    """Hex SHA-256 of a file's content."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


_HASH_AHEAD = 1 << 28
"""Bytes a :class:`HashingFile`'s hashing thread may lag behind its writes (held, not copied)."""

_HASH_THREAD_MIN = 1 << 20
"""A write at least this large starts a :class:`HashingFile`'s hashing thread."""


class HashingFile:
    """A write-only file that computes the SHA-256 of what passes through it.

    Closing it fsyncs the data, so a writer needs no second pass over the
    file to checksum or flush it. Wrap it in ``pyarrow.PythonFile`` to write
    Arrow IPC through it.

    Large files are hashed on a second thread while the first writes
    (``hashlib`` and the file write both release the GIL): the buffers
    written are held, never copied, until hashed, at most
    :data:`_HASH_AHEAD` bytes of them, and hashed in the order written, so
    the digest is the one of the file's bytes. A caller must not change a
    buffer after writing it (pyarrow's buffers are immutable).
    """

    def __init__(self, path: Path) -> None:
        self._fh = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._hash = hashlib.sha256()
        self._size = 0
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[tuple[Future[None], int]] = deque()
        self._lag = 0

    def write(self, data: bytes | memoryview) -> int:
        """Write ``data`` and add it to the checksum."""
        view = memoryview(data)
        n = view.nbytes
        if self._pool is None and n >= _HASH_THREAD_MIN:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="fastrag-sha256")
        if self._pool is None:
            self._hash.update(view)
        else:  # one worker: updates run in the order submitted
            self._pending.append((self._pool.submit(self._hash.update, view), n))
            self._lag += n
        self._size += n
        written = self._fh.write(view)
        while self._lag > _HASH_AHEAD:
            self._settle_one()
        return written

    def _settle_one(self) -> None:
        future, n = self._pending.popleft()
        self._lag -= n
        future.result()

    def _settle(self) -> None:
        """Wait until everything written is hashed; stop the hashing thread."""
        try:
            while self._pending:
                self._settle_one()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None
            self._pending.clear()
            self._lag = 0

    def tell(self) -> int:
        """Bytes written so far."""
        return self._size

    def flush(self) -> None:
        """Flush Python's buffer to the operating system."""
        self._fh.flush()

    @property
    def closed(self) -> bool:
        """Whether the file is closed."""
        return self._fh.closed

    def close(self) -> None:
        """Flush, fsync and close (idempotent); the checksum is complete after it."""
        if not self._fh.closed:
            try:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            finally:
                self._fh.close()
                self._settle()

    @property
    def size(self) -> int:
        """Bytes written."""
        return self._size

    def hexdigest(self) -> str:
        """SHA-256 of everything written (waits for the hashing thread)."""
        self._settle()
        return self._hash.hexdigest()


def write_arrow(
    path: Path, schema: Any, batches: Iterable[Any], *, what: str, atomic: bool = True
) -> dict[str, Any]:
    """Write record batches as one Arrow IPC file, fsynced, hashed while written.

    With ``atomic`` the file is written beside ``path`` and renamed over it
    (then its directory is fsynced), so a reader sees the old file or the
    new one, whole; without, ``path`` is written directly (a snapshot
    directory being staged). Returns ``{"bytes": size, "sha256": hex}``.

    Raises
    ------
    StoreError
        The file cannot be written (``what`` names it in the message).
    """
    tmp = f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}"
    target = path.with_name(tmp) if atomic else path
    try:
        sink = HashingFile(target)
        try:
            with pa.PythonFile(sink, mode="w") as stream:
                with pa.ipc.new_file(stream, schema) as writer:
                    for batch in batches:
                        writer.write_batch(batch)
        finally:
            sink.close()  # fsyncs
        if atomic:
            os.replace(target, path)
            fsync_dir(path.parent)
    except OSError as exc:
        if atomic:
            with contextlib.suppress(OSError):
                target.unlink()
        raise StoreError(f"{path}: cannot write the {what}: {exc}") from exc
    return {"bytes": sink.size, "sha256": sink.hexdigest()}


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``path`` (created if missing) for the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise StoreError(
                f"{path.parent}: another process is saving this knowledge base; try again"
            ) from exc
        yield
    finally:
        os.close(fd)


READ_ERRORS = (pa.ArrowException, OSError, ValueError, KeyError, TypeError)
"""What reading a damaged file raises: pyarrow's errors, the OS's, and malformed values."""


@contextlib.contextmanager
def arrow_errors(raise_as: Callable[[Exception], Exception]) -> Iterator[None]:
    """The one mapping of pyarrow's exceptions: :data:`READ_ERRORS` become ``raise_as(exc)``.

    The exception ``raise_as`` returns is raised ``from`` the original; a
    :class:`~fastrag.errors.FastragError` raised in the block passes through,
    and so does anything else (a bug is not bad data). :func:`arrow_read_errors`
    is this for a file; :func:`fastrag.text.utf8.encode_utf8` maps texts pyarrow
    cannot encode with it.
    """
    try:
        yield
    except FastragError:
        raise
    except READ_ERRORS as exc:
        raise raise_as(exc) from exc


@contextlib.contextmanager
def arrow_read_errors(path: Path, failed: str, missing: str | None = None) -> Iterator[None]:
    """Report what reading the file ``path`` raises as a :class:`StoreCorruptedError`.

    The one mapping of pyarrow's exceptions (as :func:`fastrag.index.hnsw_checks.hnswlib_errors`
    is hnswlib's): a :class:`StoreCorruptedError` raised in the block passes
    through; a missing file becomes ``"{path}: {missing}"`` (when ``missing``
    is given); :data:`READ_ERRORS` become ``"{path}: {failed}: {exc}"``, raised
    ``from`` the original.

    Parameters
    ----------
    path : Path
        The file being read (named in every message).
    failed : str
        What failed, e.g. ``"cannot be read as a BM25 index"``.
    missing : str, optional
        The message of a missing file; default: reported as ``failed``.

    Raises
    ------
    StoreCorruptedError
        Naming the file.
    """

    def mapped(exc: Exception) -> StoreCorruptedError:
        if isinstance(exc, FileNotFoundError) and missing is not None:
            return StoreCorruptedError(f"{path}: {missing}")
        return StoreCorruptedError(f"{path}: {failed}: {exc}")

    with arrow_errors(mapped):
        yield


def check_recorded(path: Path, info: Mapping[str, object], verify: bool) -> None:
    """Check a file against what a manifest recorded of it: its size, and with ``verify`` its hash.

    Parameters
    ----------
    path : Path
        The file.
    info : mapping
        ``{"bytes": size, "sha256": hex}`` as written.
    verify : bool
        Also compare the SHA-256 (reads the whole file).

    Raises
    ------
    StoreCorruptedError
        Naming the file: missing, of another size, or of another content.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise StoreCorruptedError(f"{path}: file is missing") from exc
    except OSError as exc:
        raise StoreCorruptedError(f"{path}: cannot be read: {exc}") from exc
    if size != info.get("bytes"):
        raise StoreCorruptedError(
            f"{path}: {size} bytes on disk, {info.get('bytes')} recorded: truncated or overwritten"
        )
    if verify and sha256_file(path) != info.get("sha256"):
        raise StoreCorruptedError(f"{path}: SHA-256 checksum mismatch: the file is corrupt")
