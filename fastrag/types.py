"""Plain data types that cross fastrag's public API."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Document", "Generation", "Hit"]


@dataclass(frozen=True, slots=True)
class Document:
    """A document to index.

    Parameters
    ----------
    id : str
        Unique, non-empty identifier; used to delete or replace the document.
    text : str
        The document's text (any white space; it is normalised when chunked).
    metadata : mapping, optional
        ``title`` (str), ``source`` (str), ``updated_at`` (datetime, date,
        ISO-8601 string or epoch seconds), ``acl`` (list of principals that may
        read it; absent means everyone), and any other JSON-serialisable
        fields, which are kept and returned with each hit.
    """

    id: str
    text: str
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """One retrieved chunk.

    Attributes
    ----------
    chunk_id : int
        Stable id of the chunk in its knowledge base.
    doc_id : str
        Id of the document the chunk was cut from.
    ord : int
        Position of the chunk in its document (0, 1, ...).
    start, end : int
        Character offsets of the chunk in the normalised document text.
    text : str
        The chunk's text.
    score : float
        Cosine similarity to the question (higher is better).
    metadata : dict
        ``title``, ``source``, ``updated_at``, ``acl`` when set, and the
        document's other metadata fields.
    """

    chunk_id: int
    doc_id: str
    ord: int
    start: int
    end: int
    text: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str | None:
        """The document's title, if it has one."""
        return self.metadata.get("title")

    @property
    def updated_at(self) -> _dt.datetime | None:
        """When the document was last updated, if known."""
        return self.metadata.get("updated_at")


@dataclass(frozen=True, slots=True)
class Generation:
    """What a generator returns for one question.

    Attributes
    ----------
    text : str
        The answer, citing hits as ``[1]``, ``[2]``, ... (``[n]`` is the
        n-th hit the generator was given).
    found : bool
        False when the generator says the knowledge base does not hold the
        answer.
    citations : tuple of int
        The markers the text cites, in order of first use, each in
        ``1..len(hits)``.
    prompt : str or None
        What a model was (or would be) sent, for audit and debugging.
    model : str or None
        Name of the model that wrote the text, if any.
    usage : dict
        Token counts and similar accounting reported by the model server.
    """

    text: str
    found: bool
    citations: tuple[int, ...] = ()
    prompt: str | None = None
    model: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
