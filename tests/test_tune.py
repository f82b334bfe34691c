"""Fusion tuned per corpus from pseudo-questions (no labels)."""

from __future__ import annotations

import pytest

from fastrag import KnowledgeBase, RetrievalConfig
from fastrag.errors import ConfigError
from fastrag.retrieve.tune import GRID, pseudo_queries, tune_fusion

TOPICS = [
    (
        "volcano",
        "Volcanic eruptions release magma ash and sulphur gases into the upper atmosphere.",
    ),
    ("reef", "Coral reefs grow slowly in warm shallow seas where sunlight reaches the polyps."),
    (
        "glacier",
        "Glaciers carve deep valleys as compacted snow flows downhill under its own weight.",
    ),
    ("desert", "Desert plants store water in thick stems and open their pores only at night."),
    ("tide", "Ocean tides rise and fall twice daily because the moon pulls on the rotating earth."),
    (
        "rain",
        "Tropical rainforests recycle moisture through leaves that transpire enormous volumes.",
    ),
    ("年假", "员工每年享有十五天带薪年假，申请需要提前三个工作日提交给直属主管审批。"),
]
DOCS = [
    {
        "id": f"{name}-{i}",
        "text": f"{text} Section {i} notes that {name} studies continue each year.",
    }
    for name, text in TOPICS
    for i in range(3)
]


def test_pseudo_queries_are_deterministic_thinned_and_one_per_document():
    ids = [d["id"] for d in DOCS]
    texts = [d["text"] for d in DOCS]
    a = pseudo_queries(ids, texts, n=10, seed=3)
    assert a == pseudo_queries(ids, texts, n=10, seed=3)
    assert a != pseudo_queries(ids, texts, n=10, seed=4)
    assert len(a) == 10 and len({d for _, d in a}) == 10
    for question, doc in a:
        source = next(d["text"] for d in DOCS if d["id"] == doc)
        assert question not in source or len(question) < 8  # thinned, not the sentence itself
        assert all(t in source if t.isascii() else set(t) <= set(source) for t in question.split())
    chinese = [q for q, d in a if d.startswith("年假")]
    assert all(" " not in q for q in chinese)  # CJK characters joined as text
    with pytest.raises(ConfigError):
        pseudo_queries(ids, texts[:-1])


def test_the_default_is_kept_unless_a_setting_beats_it():
    queries = [("q1", "a"), ("q2", "b")]
    default = RetrievalConfig(fusion="rrf", vector_weight=0.05, keyword_weight=1.0,
                              document_weight=3.0)  # fmt: skip

    def flat(questions, cfg):
        return [["a", "b"] for _ in questions]

    assert tune_fusion(flat, queries, default).config() == RetrievalConfig.from_dict(
        {**RetrievalConfig().to_dict(), **{k: getattr(default, k) for k in
         ("fusion", "vector_weight", "keyword_weight", "document_weight")}}
    )  # fmt: skip

    def convex_wins(questions, cfg):
        good = cfg.fusion == "convex" and cfg.vector_weight == 0.5 and cfg.document_weight == 0.2
        return [[d, "x"] if good else ["x", "y"] for (_, d) in queries]

    choice = tune_fusion(convex_wins, queries, default)
    assert (choice.fusion, choice.vector_weight, choice.document_weight) == ("convex", 0.5, 0.2)
    assert choice.score == 1.0 and choice.default_score == 0.0
    n_grid = sum(
        len(g["vector_weight"]) * len(g["keyword_weight"]) * len(g["document_weight"])
        for g in GRID.values()
    )
    assert len(choice.scores) == n_grid  # the default (rrf 0.05/1/3) is also a grid point
    with pytest.raises(ConfigError, match="pseudo-question"):
        tune_fusion(flat, [], default)


def test_knowledge_base_tunes_keeps_and_saves_its_fusion(tmp_path):
    kb = KnowledgeBase.build(DOCS, window=80, overlap=10)
    before = kb.retrieve("coral polyps sunlight", k=3)
    choice = kb.tune_fusion(queries=12, seed=1)
    assert choice.queries >= 5 and 0.0 <= choice.default_score <= 1.0
    assert choice.score >= choice.default_score
    cfg = kb._retriever.config  # noqa: SLF001
    assert (cfg.fusion, cfg.vector_weight) == (choice.fusion, choice.vector_weight)
    assert choice.to_dict()["method"] == "pseudo-questions"
    kb.save(tmp_path / "kb")
    again = KnowledgeBase.load(tmp_path / "kb")
    assert again._retriever.config == cfg  # noqa: SLF001  (the manifest keeps the choice)
    assert before[0].doc_id.startswith("reef")
    assert again.retrieve("coral polyps sunlight", k=3)[0].doc_id.startswith("reef")
    # Deterministic for a seed; apply=False leaves the settings alone.
    kb2 = KnowledgeBase.build(DOCS, window=80, overlap=10)
    assert kb2.tune_fusion(queries=12, seed=1, apply=False).scores == choice.scores
    assert kb2._retriever.config == RetrievalConfig()  # noqa: SLF001
