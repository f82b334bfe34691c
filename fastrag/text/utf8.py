"""Text to UTF-8 buffers in the Arrow string layout (bytes + int64 offsets)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from .._fs import arrow_errors
from ..errors import DocumentError

__all__ = ["encode_utf8", "replace_surrogates", "unicode_problem", "utf8_buffers"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_problem(value: str) -> str | None:
    r"""Why ``value`` cannot be encoded as UTF-8 (a lone surrogate, and where), or ``None``.

    Parameters
    ----------
    value : str
        Any string (an ASCII one is answered without a scan).

    Returns
    -------
    str or None
        ``"is not valid Unicode (a lone surrogate '\ud800' at character 3)"``,
        to follow the name of what was checked; ``None`` when it encodes.
    """
    if value.isascii():
        return None
    bad = _SURROGATE.search(value)
    if bad is None:
        return None
    return f"is not valid Unicode (a lone surrogate {bad.group()!r} at character {bad.start()})"


_SMALL = 64  # below this many texts, plain Python beats building an Arrow array


def utf8_buffers(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """View a pyarrow (large_)string array as ``(data uint8, offsets int64)`` without a copy.

    Parameters
    ----------
    array : pyarrow.Array
        A ``string`` or ``large_string`` array with no nulls. ``string`` arrays
        are cast to ``large_string`` (a copy of the offsets only).

    Returns
    -------
    tuple of numpy.ndarray
        The data buffer (read-only view) and ``len(array) + 1`` offsets, which
        need not start at 0 when the array is a slice.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_string(array.type):
        array = array.cast(pa.large_string())
    if not pa.types.is_large_string(array.type):
        raise DocumentError(f"expected an array of strings, got {array.type}")
    if array.null_count:
        first = array.is_null().to_numpy(zero_copy_only=False).argmax()
        raise DocumentError(f"text at index {first} is null; every text must be a string")
    _, offsets_buf, data_buf = array.buffers()
    n = len(array)
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=n + 1, offset=array.offset * 8)
    if data_buf is None or data_buf.size == 0:
        data = np.zeros(0, dtype=np.uint8)
    else:
        data = np.frombuffer(data_buf, dtype=np.uint8)
    return data, offsets


def replace_surrogates(value: str) -> str:
    """``value`` with each lone surrogate replaced by U+FFFD, so that it encodes as UTF-8."""
    return value if value.isascii() else _SURROGATE.sub("\ufffd", value)


def encode_utf8(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Encode Python strings to ``(data uint8, offsets int64)``.

    Parameters
    ----------
    texts : sequence of str
        The texts; anything that is not a ``str`` raises.

    Returns
    -------
    tuple of numpy.ndarray
        UTF-8 bytes of all texts and ``len(texts) + 1`` offsets.
    """
    if len(texts) <= _SMALL:
        parts = []
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise DocumentError(f"text at index {i} is {type(t).__name__}, not str")
            try:
                parts.append(t.encode("utf-8"))
            except UnicodeEncodeError as exc:
                raise DocumentError(f"text at index {i} is not valid Unicode: {exc}") from exc
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets
    with arrow_errors(lambda exc: _culprit(texts, exc)):
        array = pa.array(texts, type=pa.large_string())
    return utf8_buffers(array)


def _culprit(texts: Sequence[str], exc: Exception) -> DocumentError:
    """The error naming the first text pyarrow could not encode (``exc`` is what it raised)."""
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            return DocumentError(f"text at index {i} is {type(t).__name__}, not str")
        try:
            t.encode("utf-8")
        except UnicodeEncodeError as exc2:
            return DocumentError(f"text at index {i} is not valid Unicode: {exc2}")
    return DocumentError(f"texts could not be encoded: {exc}")
