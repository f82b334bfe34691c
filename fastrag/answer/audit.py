"""Audit digests: one SHA-256 that pins down what an answer stood on.

:func:`audit_digest` hashes a canonical serialisation of

- the question,
- the knowledge-base snapshot id,
- the cited chunks, each as its chunk id and the SHA-256 of its text (so the
  digest proves which text was cited without storing it twice),
- the prompt,
- the answer,

so that anyone holding the same inputs can recompute it
(:func:`verify_digest`, or :func:`verify_answer` from an
:class:`~fastrag.Answer` itself) and any change of any input changes it. The
serialisation is orjson with ``OPT_SORT_KEYS`` of::

    {"answer": ..., "cited": [[chunk_id, sha256(text)], ...], "format": "fastrag-audit-1",
     "prompt": ..., "question": ..., "snapshot_id": ...}

— UTF-8, no insignificant white space, keys sorted, cited chunks in the
order given (citation order), strings hashed exactly as given (no Unicode
normalisation). It depends on nothing but the inputs: stable across runs,
processes, machines and Python versions.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

import orjson

from ..errors import ConfigError
from .stages import register_cache

__all__ = ["AUDIT_FORMAT", "audit_digest", "audit_record", "verify_answer", "verify_digest"]

AUDIT_FORMAT = "fastrag-audit-1"
"""Tag of the serialisation; a new format gets a new tag."""


@functools.lru_cache(maxsize=8192)
def _text_digest(text: str) -> str:
    """SHA-256 hex of a cited text (cited chunks recur across answers: remembered)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


register_cache(_text_digest.cache_clear)


def audit_record(
    question: str,
    snapshot_id: str | None,
    cited: Sequence[tuple[int, str]],
    prompt: str,
    answer: str,
) -> bytes:
    """The canonical bytes :func:`audit_digest` hashes (see the module docstring).

    Parameters
    ----------
    question, snapshot_id, cited, prompt, answer
        As for :func:`audit_digest`.

    Returns
    -------
    bytes
        UTF-8 JSON.

    Raises
    ------
    ConfigError
        When an input has the wrong type or a string cannot be encoded.
    """
    for name, value in (("question", question), ("prompt", prompt), ("answer", answer)):
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a str, got {type(value).__name__}")
    if snapshot_id is not None and not isinstance(snapshot_id, str):
        raise ConfigError(f"snapshot_id must be a str or None, got {type(snapshot_id).__name__}")
    pairs = []
    try:
        for chunk_id, text in cited:
            if isinstance(chunk_id, bool) or not isinstance(text, str):
                raise TypeError
            pairs.append([int(chunk_id), _text_digest(text)])
        return orjson.dumps(
            {
                "answer": answer,
                "cited": pairs,
                "format": AUDIT_FORMAT,
                "prompt": prompt,
                "question": question,
                "snapshot_id": snapshot_id,
            },
            option=orjson.OPT_SORT_KEYS,
        )
    except (TypeError, ValueError, UnicodeEncodeError, orjson.JSONEncodeError) as exc:
        raise ConfigError(
            f"cannot serialise the audit record ({type(exc).__name__}: {exc}); cited must be "
            "(chunk_id: int, text: str) pairs and every text valid Unicode"
        ) from exc


def audit_digest(
    question: str,
    snapshot_id: str | None,
    cited: Sequence[tuple[int, str]],
    prompt: str,
    answer: str,
) -> str:
    """SHA-256 hex digest of what an answer stood on.

    Parameters
    ----------
    question : str
        The question asked.
    snapshot_id : str or None
        The knowledge-base snapshot the answer was drawn from.
    cited : sequence of (int, str)
        ``(chunk_id, text)`` of each cited chunk, in citation order.
    prompt : str
        What the generator was (or would have been) sent.
    answer : str
        The answer text.

    Returns
    -------
    str
        64 lower-case hex characters.

    Raises
    ------
    ConfigError
        When an input has the wrong type.

    Examples
    --------
    >>> d = audit_digest("q", "snap-1", [(7, "text")], "prompt", "answer [1]")
    >>> len(d), verify_digest(d, "q", "snap-1", [(7, "text")], "prompt", "answer [1]")
    (64, True)
    """
    return hashlib.sha256(audit_record(question, snapshot_id, cited, prompt, answer)).hexdigest()


def verify_digest(
    digest: str,
    question: str,
    snapshot_id: str | None,
    cited: Sequence[tuple[int, str]],
    prompt: str,
    answer: str,
) -> bool:
    """Whether ``digest`` is the :func:`audit_digest` of the inputs (constant-time compare).

    Parameters
    ----------
    digest : str
        The digest to check (hex; case-insensitive).
    question, snapshot_id, cited, prompt, answer
        As for :func:`audit_digest`.

    Returns
    -------
    bool
    """
    if not isinstance(digest, str) or not digest.isascii():
        return False
    expected = audit_digest(question, snapshot_id, cited, prompt, answer)
    return hmac.compare_digest(expected, digest.strip().lower())


def verify_answer(answer: Any) -> bool:
    """Whether an :class:`~fastrag.Answer`'s ``audit_digest`` matches its own contents.

    Recomputes the digest from ``answer.question``, ``answer.snapshot``, the
    cited hits (chunk id and text, in citation order), ``answer.prompt`` and
    ``answer.text``. An answer stored and reloaded (for example from its
    ``to_dict`` form rebuilt into an ``Answer``) verifies as long as none of
    these changed.

    Parameters
    ----------
    answer : Answer
        An answer made by ``KnowledgeBase.answer`` or ``answer_batch``.

    Returns
    -------
    bool
    """
    try:
        cited = [(hit.chunk_id, hit.text) for hit in answer.citations.values()]
        return verify_digest(
            answer.audit_digest, answer.question, answer.snapshot, cited, answer.prompt, answer.text
        )
    except (AttributeError, TypeError, ConfigError):
        return False
