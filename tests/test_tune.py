"""Fusion tuned per corpus from pseudo-questions (no labels)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fastrag import KnowledgeBase, RetrievalConfig
from fastrag.errors import ConfigError
from fastrag.retrieve.fusion import fusion_plan
from fastrag.retrieve.tune import (
    MIN_QUERIES,
    VECTOR_STEPS,
    Legs,
    candidates,
    collect_legs,
    fuse_docs,
    pseudo_queries,
    tune_corpus,
    tune_fusion,
)

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


def _legs(vector_rows, keyword_rows, n_docs):
    """Legs over ``n_docs`` one-chunk documents (row i is document i), scores by rank."""

    def scores(rows):
        return np.where(rows >= 0, 1.0 - 0.01 * np.arange(rows.shape[1]), 0).astype(np.float32)

    v = np.array(vector_rows, dtype=np.int64)
    k = np.array(keyword_rows, dtype=np.int64)
    return Legs(v, scores(v), k, scores(k), None, None, np.arange(n_docs, dtype=np.int64))


def test_legs_without_takes_the_source_row_out_and_keeps_the_order():
    legs = _legs([[3, 1, 2, -1], [0, 2, 1, 3]], [[1, 3, -1, -1], [2, 0, 3, 1]], 4)
    out = legs.without(np.array([1, 2]))
    assert out.vector_rows.tolist() == [[3, 2, -1, -1], [0, 1, 3, -1]]
    assert out.keyword_rows.tolist() == [[3, -1, -1, -1], [0, 3, 1, -1]]
    # the scores travel with their rows
    assert out.vector_scores[0].tolist()[:2] == pytest.approx([1.0, 0.98])
    assert out.keyword_scores[1].tolist()[:3] == pytest.approx([0.99, 0.98, 0.97])


def test_fuse_docs_ranks_as_the_weights_say():
    # question 0: the vector leg puts doc 2 first, the keyword leg doc 0.
    legs = _legs([[2, 1, 0]], [[0, 1, 2]], 3)
    assert fuse_docs(legs, "convex", 1.0, 0.1, 0.0)[0, 0] == 2
    assert fuse_docs(legs, "convex", 0.1, 1.0, 0.0)[0, 0] == 0
    assert fuse_docs(legs, "rrf", 0.0, 1.0, 0.0)[0].tolist()[:3] == [0, 1, 2]  # vector left out


def test_candidates_move_only_the_vector_weight_and_the_method():
    default = ("convex", 0.05, 0.3, 0.65)
    c = candidates("vocabulary", default)
    assert c[0] == default and len(c) == len(set(c)) == 2 * len(VECTOR_STEPS)
    assert {x[0] for x in c} == {"convex", "rrf"}
    assert {(x[2], x[3]) for x in c if x[0] == "convex"} == {(0.3, 0.65)}
    assert sorted(x[1] for x in c if x[0] == "convex") == [0.0, 0.025, 0.05, 0.1, 0.2]


def test_the_default_is_kept_unless_a_candidate_wins_on_both_halves():
    n = 8
    targets = np.arange(4)
    wrong = [[(t + 1) % n, (t + 2) % n, (t + 3) % n] for t in targets]
    # keyword leg: the target third; vector leg: the target first.
    keyword = [[(t + 1) % n, (t + 2) % n, t] for t in targets]
    vector = [[t, (t + 1) % n, (t + 2) % n] for t in targets]
    settings = [("convex", 0.0, 1.0, 0.0), ("convex", 3.0, 1.0, 0.0)]
    both = tune_fusion(_legs(vector, keyword, n), targets, settings)
    assert not both.kept_default and (both.fusion, both.vector_weight) == ("convex", 3.0)
    assert both.score == 1.0 and both.default_score == pytest.approx(0.5)
    assert set(both.scores) == {"convex 0/1/0", "convex 3/1/0"}
    # The vector leg right on even questions only (one half): the default stays.
    half = [vector[i] if i % 2 == 0 else wrong[i] for i in range(4)]
    kept = tune_fusion(_legs(half, keyword, n), targets, settings)
    assert kept.kept_default and kept.vector_weight == 0.0
    assert kept.config().fusion == "convex"
    with pytest.raises(ConfigError, match="pseudo-question"):
        tune_fusion(_legs(vector[:1], keyword[:1], n), targets[:1], settings)
    with pytest.raises(ConfigError, match="setting"):
        tune_fusion(_legs(vector, keyword, n), targets, [])


def test_fused_legs_rank_as_retrieve_does():
    kb = KnowledgeBase.build(DOCS, window=80, overlap=10)
    questions = ["coral polyps sunlight", "glaciers carve valleys", "带薪年假 审批", "moon tides"]
    legs = collect_legs(kb._corpus, kb._retriever, questions)  # noqa: SLF001
    store = kb._corpus.store  # noqa: SLF001
    groups = store.row_docs()
    ids = store.rows(np.arange(store.n_rows), columns=("doc_id",)).column("doc_id").to_pylist()
    doc_of = dict(zip(groups.tolist(), ids, strict=True))
    for cfg in [RetrievalConfig(), RetrievalConfig(fusion="rrf", vector_weight=1.0),
                RetrievalConfig(fusion="convex", vector_weight=0.5, document_weight=0.0)]:  # fmt: skip
        kb._retriever.config = cfg  # noqa: SLF001
        plan = fusion_plan(cfg, kb._corpus.embedder)  # noqa: SLF001
        fused = fuse_docs(legs, plan.method, plan.vector, plan.keyword, plan.document, k=5)
        table = kb.retrieve_batch(questions, k=5, mode="hybrid", group_by="doc")
        want: list[list[str]] = [[] for _ in questions]
        for qi, doc in zip(table.column("query_index").to_pylist(),
                           table.column("doc_id").to_pylist(), strict=True):  # fmt: skip
            want[qi].append(doc)
        assert [[doc_of[int(d)] for d in row if d >= 0] for row in fused] == want


def test_knowledge_base_tunes_keeps_and_saves_its_fusion(tmp_path):
    kb = KnowledgeBase.build(DOCS, window=80, overlap=10)
    before = kb.retrieve("coral polyps sunlight", k=3)
    choice = kb.tune_fusion(queries=12, seed=1)
    assert choice.queries >= 5 and 0.0 <= choice.default_score <= 1.0
    assert choice.score >= choice.default_score
    cfg = kb._retriever.config  # noqa: SLF001
    # This seed keeps the default: the settings stay unset (the kind's defaults), and
    # the report says so.
    assert choice.kept_default and cfg == RetrievalConfig()
    assert kb.stats()["fusion_tuning"]["applied"] is False
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


def test_build_tunes_when_asked_says_why_not_otherwise_and_saves_the_report(tmp_path):
    small = KnowledgeBase.build(DOCS, window=80, overlap=10)  # tune="auto": too few documents
    assert "fewer than 200" in small.stats()["fusion_tuning"]["skipped"]
    assert small._retriever.config == RetrievalConfig()  # noqa: SLF001
    fixed = KnowledgeBase.build(DOCS, window=80, overlap=10, tune=False)
    assert fixed.stats()["fusion_tuning"] == {"skipped": "fixed weights (tune=False)"}
    mine = KnowledgeBase.build(DOCS, window=80, overlap=10, retrieval=RetrievalConfig(fusion="rrf"))
    assert mine.stats()["fusion_tuning"]["skipped"] == "the retrieval settings fix fusion"
    # tune=True tunes a corpus of any size; on this one the default convex fusion moves.
    kb = KnowledgeBase.build(DOCS, window=80, overlap=10, tune=True)
    report = kb.stats()["fusion_tuning"]
    assert report["applied"] is True and not report["kept_default"]
    assert (
        report["queries"] == len(DOCS) and report["pseudo_ndcg10"] > report["default_pseudo_ndcg10"]
    )
    cfg = kb._retriever.config  # noqa: SLF001
    assert (cfg.fusion, cfg.vector_weight, cfg.keyword_weight, cfg.document_weight) == (
        report["fusion"], report["vector_weight"], report["keyword_weight"], report["document_weight"]
    )  # fmt: skip
    kb.save(tmp_path / "kb")
    again = KnowledgeBase.load(tmp_path / "kb")
    assert again.stats()["fusion_tuning"] == report and again._retriever.config == cfg  # noqa: SLF001
    # Deterministic: the same build chooses the same.
    twin = KnowledgeBase.build(DOCS, window=80, overlap=10, tune=True)
    assert twin.stats()["fusion_tuning"] == {
        **report,
        "seconds": twin.stats()["fusion_tuning"]["seconds"],
    }


def test_build_refuses_a_bad_tune_and_an_impossible_one():
    with pytest.raises(ConfigError, match="tune must be"):
        KnowledgeBase.build(DOCS, tune="yes")
    with pytest.raises(ConfigError, match="no keyword index"):
        KnowledgeBase.build(DOCS, keyword=False, tune=True)
    assert "no keyword index" in KnowledgeBase.build(DOCS, keyword=False).stats()[
        "fusion_tuning"]["skipped"]  # fmt: skip


def test_an_ample_time_budget_tunes_as_no_budget_and_none_refuses():
    kb = KnowledgeBase.build(DOCS, window=80, overlap=10, tune=False)
    corpus, retriever = kb._corpus, kb._retriever  # noqa: SLF001
    free = tune_corpus(corpus, retriever, queries=30, seed=2)
    ample = tune_corpus(corpus, retriever, queries=30, seed=2, budget=1e6)
    assert ample.scores == free.scores and ample.queries == free.queries
    assert free.queries == len(DOCS) < MIN_QUERIES  # the corpus, not a budget, limits it
    with pytest.raises(ConfigError, match=r"0\.00 s affords \d+ of \d+ pseudo-questions"):
        tune_corpus(corpus, retriever, queries=30, seed=2, budget=0.0)


def test_a_budget_runs_every_question_or_none_so_a_tuning_does_not_depend_on_speed():
    docs = [
        {"id": f"d{i}", "text": f"Report {i} on topic {i % 7}. It covers item {i * 13 % 101} "
                                f"and cost {i % 11}. Another sentence names part {i % 5}."}
        for i in range(80)
    ]  # fmt: skip
    kb = KnowledgeBase.build(docs, window=80, overlap=10, tune=False)
    corpus, retriever = kb._corpus, kb._retriever  # noqa: SLF001
    free = tune_corpus(corpus, retriever, queries=40, seed=3)
    assert free.queries == 40
    # Budgets from ample down to none: each tuning that runs is the unbounded one.
    ran = []
    for budget in (1e6, 10.0, 1.0, 0.1, 0.01, 0.001, 0.0):
        try:
            bounded = tune_corpus(corpus, retriever, queries=40, seed=3, budget=budget)
        except ConfigError as exc:
            assert re.search(r"affords \d+ of 40 pseudo-questions", str(exc))
            ran.append(False)
            continue
        ran.append(True)
        assert bounded.queries == free.queries and bounded.scores == free.scores
        assert bounded.report(applied=False) == {
            **free.report(applied=False),
            "seconds": bounded.report(applied=False)["seconds"],
        }
    assert ran[0] and not ran[-1]  # the ample budget ran, none did not
