"""The answer options, re-exported from their one home, :mod:`fastrag.options`.

Kept so that ``from fastrag.answer.options import AnswerOptions`` goes on
working; new code imports :mod:`fastrag.options`.
"""

from __future__ import annotations

from ..options import ANSWER_DEFAULTS, ANSWER_FIELDS, AnswerOptions, parse_options

__all__ = ["ANSWER_DEFAULTS", "ANSWER_FIELDS", "AnswerOptions", "parse_options"]
