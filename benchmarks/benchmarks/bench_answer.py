"""``KnowledgeBase.answer`` and ``answer_batch`` with the offline extractive answerer.

Over the shared :class:`~.common.UserKB` (1,000 mixed English/Chinese
documents, about 12,000 chunks, exact vectors and both BM25 legs), loaded
from disk as a service would. Questions are passages quoted from the
documents; every stage of ``answer()`` runs (rewrite, hybrid retrieval,
context, redaction, freshness, conflicts, generation, verification, audit).
"""

from __future__ import annotations

from fastrag import KnowledgeBase, Principal

from .common import UserKB


class Answer(UserKB):
    """One question: ``answer()`` in the default hybrid mode, plain and filtered with a principal.

    (The vector mode's retrieval is ``bench_retrieval``'s; here it was a process more per run.)
    """

    params = [["hybrid"]]
    param_names = ["mode"]

    def setup(self, kb: dict, mode: str) -> None:
        self.kb = KnowledgeBase.load(kb["path"])
        self.questions = kb["questions"][:16]
        self.principal = Principal(user="u", groups=("hr",))
        for q in self.questions:  # first calls build per-process tables: not timed
            self.kb.answer(q, mode=mode)
            self.kb.answer(q, mode=mode, where={"team": "hr"}, principal=self.principal)

    def teardown(self, kb: dict, mode: str) -> None:
        self.kb.close()

    def time_answer(self, kb: dict, mode: str) -> None:
        self.kb.answer(self.questions[0], mode=mode)

    def time_answer_filtered(self, kb: dict, mode: str) -> None:
        self.kb.answer(self.questions[1], mode=mode, where={"team": "hr"}, principal=self.principal)


class AnswerBatch(UserKB):
    """``answer_batch`` of 256 questions (an Arrow table out), and its peak memory."""

    params = [[256]]
    param_names = ["batch"]

    def setup(self, kb: dict, batch: int) -> None:
        self.kb = KnowledgeBase.load(kb["path"])
        self.questions = kb["questions"][:batch]
        self.kb.answer_batch(self.questions[:32])

    def teardown(self, kb: dict, batch: int) -> None:
        self.kb.close()

    def time_answer_batch(self, kb: dict, batch: int) -> None:
        self.kb.answer_batch(self.questions)

    def peakmem_answer_batch(self, kb: dict, batch: int) -> None:
        self.kb.answer_batch(self.questions)

    def track_found_share(self, kb: dict, batch: int) -> float:
        """Share of the quoted questions answered (found): falls when the pipeline breaks."""
        table = self.kb.answer_batch(self.questions)
        found = table.column("found").to_pylist()
        return sum(bool(f) for f in found) / len(found)

    track_found_share.unit = "share"  # type: ignore[attr-defined]
