"""The retrieval options, re-exported from their one home, :mod:`fastrag.options`.

Kept so that ``from fastrag.retrieve.options import RetrievalOptions`` goes
on working; new code imports :mod:`fastrag.options`.
"""

from __future__ import annotations

from ..options import (
    ACL_STATISTICS,
    DEFAULT_K,
    MAX_HISTORY_TURNS,
    MAX_K,
    MAX_QUESTION_CHARS,
    MODES,
    RETRIEVAL_DEFAULTS,
    RETRIEVAL_FIELDS,
    RetrievalConfig,
    RetrievalOptions,
    check_history,
    check_k,
    check_mode,
    check_question,
    split_options,
)

__all__ = [
    "ACL_STATISTICS",
    "DEFAULT_K",
    "MAX_HISTORY_TURNS",
    "MAX_K",
    "MAX_QUESTION_CHARS",
    "MODES",
    "RETRIEVAL_DEFAULTS",
    "RETRIEVAL_FIELDS",
    "RetrievalConfig",
    "RetrievalOptions",
    "check_history",
    "check_k",
    "check_mode",
    "check_question",
    "split_options",
]
