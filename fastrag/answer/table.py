"""Answers as an Arrow table: one row per question, a column for every field a user acts on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..text.utf8 import replace_surrogates
from ..types import Answer

__all__ = ["ANSWER_BATCH_SCHEMA", "answers_table"]

ANSWER_BATCH_SCHEMA = pa.schema(
    [
        pa.field("query_index", pa.int32(), nullable=False),
        pa.field("question", pa.string()),
        pa.field("answer", pa.string()),
        pa.field("found", pa.bool_(), nullable=False),
        pa.field("chunk_ids", pa.list_(pa.int64())),
        pa.field("scores", pa.list_(pa.float32())),
        pa.field("citations", pa.list_(pa.int64())),
        pa.field("confidence", pa.float32()),
        pa.field("faithfulness", pa.float32()),
        pa.field("flagged", pa.bool_(), nullable=False),
        pa.field("unsupported", pa.list_(pa.string())),
        pa.field("warnings", pa.list_(pa.string())),
        pa.field("conflicts", pa.list_(pa.string())),
        pa.field("high_risk", pa.bool_(), nullable=False),
        pa.field("pii", pa.map_(pa.string(), pa.int64())),
        pa.field("audit_digest", pa.string()),
        pa.field("snapshot", pa.string()),
        pa.field("error", pa.string()),
    ]
)
"""Columns of ``KnowledgeBase.answer_batch``.

``chunk_ids`` / ``scores``: the context blocks the answer was drawn from
(``[1]`` first); ``citations``: the chunk ids the answer cites; ``pii``:
redactions by type (never values); ``conflicts``: one description per
conflict; ``audit_digest`` / ``snapshot``: the answer's audit record
(:func:`fastrag.answer.audit.verify_answer` recomputes it from an
:class:`~fastrag.Answer`); ``error``: why a question got no answer.
"""


def answers_table(
    questions: Sequence[object], answers: Sequence[Answer | None], errors: Sequence[str | None]
) -> pa.Table:
    """One row per question, in order (see :data:`ANSWER_BATCH_SCHEMA`).

    Parameters
    ----------
    questions : sequence
        The questions as given (anything that is not a str is shown by ``repr``,
        a lone surrogate as U+FFFD: Arrow strings are UTF-8).
    answers : sequence of Answer or None
        The answer of each question, None where it failed.
    errors : sequence of str or None
        Why each failed question failed.

    Returns
    -------
    pyarrow.Table
        The answers.
    """
    hits = [list(a.hits) if a is not None else [] for a in answers]

    def col(fn, kind):  # type: ignore[no-untyped-def]
        return pa.array([fn(a) if a is not None else None for a in answers], kind)

    return pa.table(
        [
            pa.array(np.arange(len(questions), dtype=np.int32)),
            pa.array(
                [replace_surrogates(q) if isinstance(q, str) else repr(q) for q in questions],
                pa.string(),
            ),
            col(lambda a: a.text, pa.string()),
            pa.array([bool(a and a.found) for a in answers], pa.bool_()),
            pa.array([[h.chunk_id for h in hs] for hs in hits], pa.list_(pa.int64())),
            pa.array([[h.score for h in hs] for hs in hits], pa.list_(pa.float32())),
            pa.array(
                [[h.chunk_id for h in a.citations.values()] if a else [] for a in answers],
                pa.list_(pa.int64()),
            ),
            col(lambda a: a.confidence, pa.float32()),
            col(lambda a: a.faithfulness, pa.float32()),
            pa.array([bool(a and a.flagged) for a in answers], pa.bool_()),
            col(lambda a: list(a.unsupported), pa.list_(pa.string())),
            col(lambda a: list(a.warnings), pa.list_(pa.string())),
            col(lambda a: [c.description for c in a.conflicts], pa.list_(pa.string())),
            pa.array([bool(a and a.high_risk) for a in answers], pa.bool_()),
            col(lambda a: sorted(a.pii.items()), pa.map_(pa.string(), pa.int64())),
            col(lambda a: a.audit_digest, pa.string()),
            col(lambda a: a.snapshot, pa.string()),
            pa.array(list(errors), pa.string()),
        ],
        schema=ANSWER_BATCH_SCHEMA,
    )
