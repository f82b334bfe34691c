from __future__ import annotations

import dataclasses
import datetime as dt
import json

import numpy as np
import pytest
from conftest import examples
from fastrag.datasets import demo_documents
from hypothesis import given, settings
from hypothesis import strategies as st
from naive.fusion import fuse

from fastrag import (
    KnowledgeBase,
    LLMReranker,
    LLMRewriter,
    Principal,
    QueryRewriter,
    RetrievalConfig,
    RetrievalOptions,
)
from fastrag.errors import ConfigError
from fastrag.retrieve.rerank import apply_reranker

MODES = ("vector", "keyword", "hybrid")


@pytest.fixture(scope="module")
def demo_kb() -> KnowledgeBase:
    return KnowledgeBase.build(demo_documents())


# -- modes ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_finds_the_policy(demo_kb, mode):
    q = (
        "expense reports submitted within 15 days"
        if mode != "vector"
        else "费用报销须在费用发生后15天内提交"
    )
    hits = demo_kb.retrieve(q, k=3, mode=mode)
    assert hits and hits[0].doc_id in ("expense-en", "expense-zh")
    assert all(0.0 <= h.relevance <= 1.0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_keyword_scores_are_bm25_and_relevance_is_weight_share(demo_kb):
    hits = demo_kb.retrieve("expense reports", k=5, mode="keyword")
    assert hits[0].doc_id == "expense-en" and hits[0].score > 0
    assert 0 < hits[0].relevance < 1
    assert demo_kb.retrieve("zzzz qqqq", k=5, mode="keyword") == []  # no known token: no hit


def test_hybrid_is_reciprocal_rank_fusion():
    a = np.array([[5, 3, 9, -1]])
    b = np.array([[3, 7, -1, -1]])
    rows, scores = fuse([(a, 1.0), (b, 1.0)], k=3, rrf_k=60)
    # 3: 1/62 + 1/61; 5: 1/61; 7: 1/62 -> 3, 5, 7
    assert rows.tolist() == [[3, 5, 7]]
    np.testing.assert_allclose(scores[0], [1 / 62 + 1 / 61, 1 / 61, 1 / 62], rtol=1e-6)


def test_fusion_kernel_equals_reference_fuse(demo_kb):
    from fastrag._native import fusion

    rng = np.random.default_rng(3)
    for _ in range(20):
        lists = [rng.permutation(50)[:10] for _ in range(2)]
        for lst in lists:
            lst[rng.integers(5, 10) :] = -1
        stacked = np.stack([lst[None, :] for lst in lists]).astype(np.int64)
        w = np.array([1.0, 0.5])
        k_rows, k_scores = fusion.rrf_fuse(
            stacked,
            w,
            np.zeros((0, 1, 1), np.int64),
            np.zeros(0),
            np.zeros(0, np.int64),
            60.0,
            5,
            False,
        )
        r_rows, r_scores = fuse([(lists[0][None], 1.0), (lists[1][None], 0.5)], 5, 60)
        assert k_rows.tolist() == r_rows.tolist()
        np.testing.assert_allclose(k_scores, r_scores, rtol=1e-6)


def test_group_by_doc_returns_one_chunk_per_document():
    docs = [
        {"id": f"d{i}", "text": ("annual leave policy text " * 30) + f" unique{i}"}
        for i in range(4)
    ]
    kb = KnowledgeBase.build(docs, window=60, overlap=10)
    for mode in MODES:
        hits = kb.retrieve("annual leave policy", k=4, mode=mode, group_by="doc")
        assert len({h.doc_id for h in hits}) == len(hits) == 4
    table = kb.retrieve_batch(["annual leave", "policy text"], k=3, group_by="doc")
    for q in (0, 1):
        docs_q = [
            d
            for qi, d in zip(
                table.column("query_index").to_pylist(),
                table.column("doc_id").to_pylist(),
                strict=False,
            )
            if qi == q
        ]
        assert len(docs_q) == len(set(docs_q)) == 3
    with pytest.raises(ConfigError):
        kb.retrieve("x", group_by="chunk")


def test_document_leg_lifts_chunks_of_the_best_document():
    # The question's words are spread over two chunks of one document; each
    # chunk alone matches half, the document all of it.
    a = "alpha beta " * 12 + "filler text " * 10 + "gamma delta " * 12
    b = "alpha beta gamma " * 3 + "other words " * 30
    kb = KnowledgeBase.build(
        [{"id": "a", "text": a}, {"id": "b", "text": b}], window=100, overlap=20
    )
    hits = kb.retrieve("alpha beta gamma delta", k=2, mode="hybrid", group_by="doc")
    assert hits[0].doc_id == "a"


def test_keyword_index_survives_add_delete_save_load(demo_kb, tmp_path):
    kb = KnowledgeBase.build(demo_documents())
    kb.add([{"id": "canteen", "text": "The canteen opens at 11:30 and closes at 13:30."}])
    assert kb.retrieve("canteen opens", k=1, mode="keyword")[0].doc_id == "canteen"
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.retrieve("canteen opens", k=1, mode="keyword")[0].doc_id == "canteen"
    loaded.delete("canteen")
    for mode in MODES:
        assert all(h.doc_id != "canteen" for h in loaded.retrieve("canteen opens", k=50, mode=mode))
    assert loaded.compact() > 0
    for mode in MODES:
        assert all(h.doc_id != "canteen" for h in loaded.retrieve("canteen opens", k=50, mode=mode))
    assert loaded.retrieve("annual leave requests", k=1, mode="keyword")[0].doc_id == "leave-en"
    loaded.save(tmp_path / "kb")
    again = KnowledgeBase.load(tmp_path / "kb")
    assert again.stats()["deleted_chunks"] == 0
    assert again.retrieve("expense reports", k=1, mode="hybrid")[0].doc_id == "expense-en"


def test_compaction_results_equal_a_fresh_build():
    docs = demo_documents()
    kb = KnowledgeBase.build(docs)
    kb.delete(["leave-en", "security-zh", "travel-en"])
    kb.compact()
    fresh = KnowledgeBase.build(
        [d for d in docs if d["id"] not in ("leave-en", "security-zh", "travel-en")],
        embedder=kb.embedder,
    )
    for q in ["annual leave", "expense reports", "年假", "密码", "remote work core hours"]:
        for mode in MODES:
            a = [(h.doc_id, h.ord, round(h.score, 5)) for h in kb.retrieve(q, k=5, mode=mode)]
            b = [(h.doc_id, h.ord, round(h.score, 5)) for h in fresh.retrieve(q, k=5, mode=mode)]
            assert a == b, (q, mode)


def test_retrieval_config_validation_and_saved(tmp_path):
    with pytest.raises(ConfigError):
        RetrievalConfig(mode="semantic")
    with pytest.raises(ConfigError):
        RetrievalConfig(rrf_k=0)
    with pytest.raises(ConfigError):
        RetrievalConfig(document_weight=-1)
    kb = KnowledgeBase.build(demo_documents(), retrieval=RetrievalConfig(mode="keyword", rrf_k=10))
    kb.save(tmp_path / "kb")
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    assert manifest["retrieval"]["mode"] == "keyword" and manifest["retrieval"]["rrf_k"] == 10
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.stats()["retrieval"]["mode"] == "keyword"
    with pytest.raises(ConfigError):
        loaded.retrieve("x", mode="semantic")


def test_vector_only_knowledge_base():
    kb = KnowledgeBase.build(demo_documents(), keyword=False)
    assert kb.retrieve("年假申请需提前几天", k=1, mode="vector")[0].doc_id == "leave-zh"
    with pytest.raises(ConfigError, match="keyword index"):
        kb.retrieve("annual leave", mode="hybrid")


# -- filters ----------------------------------------------------------------------


def _filter_docs():
    return [
        {
            "id": "a",
            "text": "leave policy for staff alpha",
            "source": "hr",
            "team": "hr",
            "level": 1,
            "updated_at": "2024-01-01",
            "acl": ["hr"],
        },
        {
            "id": "b",
            "text": "leave policy for finance beta",
            "source": "fin",
            "team": "finance",
            "level": 2,
            "updated_at": "2025-06-01",
            "acl": ["finance", "alice"],
        },
        {
            "id": "c",
            "text": "leave policy public gamma",
            "source": "hr",
            "level": 3,
            "updated_at": "2026-03-01",
        },
        {
            "id": "d",
            "text": "leave policy secret delta",
            "source": "legal",
            "team": "legal",
            "level": 4,
            "updated_at": dt.datetime(2026, 9, 1, tzinfo=dt.timezone.utc),
            "acl": ["legal"],
        },
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "where, expected",
    [
        ({"source": "hr"}, {"a", "c"}),
        ({"source": ["fin", "legal"]}, {"b", "d"}),
        ({"team": "finance"}, {"b"}),
        ({"level": {">=": 2, "<": 4}}, {"b", "c"}),
        ({"updated_at": {">=": "2025-01-01"}}, {"b", "c", "d"}),
        ({"updated_at": {"lt": dt.date(2025, 1, 1)}}, {"a"}),
        ({"doc_id": {"not_in": ["a", "b"]}}, {"c", "d"}),
        ({"team": {"ne": "hr"}}, {"b", "d"}),  # c has no team: never matches
        ({"source": "hr", "level": 3}, {"c"}),
        ({"source": "nowhere"}, set()),
    ],
)
def test_where_filters(mode, where, expected):
    kb = KnowledgeBase.build(_filter_docs(), window=50, overlap=5)
    hits = kb.retrieve("leave policy", k=10, mode=mode, where=where)
    assert {h.doc_id for h in hits} == expected


def test_bad_filters_are_named():
    kb = KnowledgeBase.build(_filter_docs())
    with pytest.raises(ConfigError, match="unknown operator"):
        kb.retrieve("leave", where={"level": {"~": 1}})
    with pytest.raises(ConfigError, match="principal"):
        kb.retrieve("leave", where={"acl": "hr"})
    with pytest.raises(ConfigError, match="number"):
        kb.retrieve("leave", where={"ord": {">": "two"}})
    with pytest.raises(ConfigError, match="Principal"):
        kb.retrieve("leave", principal="alice")


@pytest.mark.parametrize("mode", MODES)
def test_access_control(mode):
    kb = KnowledgeBase.build(_filter_docs(), window=50, overlap=5)

    def seen(principal):
        return {h.doc_id for h in kb.retrieve("leave policy", k=10, mode=mode, principal=principal)}

    assert seen(Principal()) == {"c"}  # public only
    assert seen(Principal(user="alice")) == {"b", "c"}
    assert seen(Principal(user="bob", groups=["hr", "legal"])) == {"a", "c", "d"}
    assert seen(None) == {"a", "b", "c", "d"}  # no principal: trusted caller, no ACL check


def test_access_control_in_answers_and_batches():
    kb = KnowledgeBase.build(_filter_docs(), window=50, overlap=5)
    alice = Principal(user="alice")
    ans = kb.answer("leave policy", k=5, principal=alice)
    assert all(h.doc_id in ("b", "c") for h in ans.hits)
    assert "secret" not in ans.prompt and "alpha" not in ans.prompt and "secret" not in ans.text
    table = kb.answer_batch(["leave policy secret", "legal delta"], k=5, principal=alice)
    seen = {cid for ids in table.column("chunk_ids").to_pylist() for cid in ids}
    allowed = {h.chunk_id for h in kb.retrieve("leave policy", k=50, principal=alice)}
    assert seen <= allowed
    batch = kb.retrieve_batch(["leave", "delta secret"], k=10, principal=alice)
    assert set(batch.column("doc_id").to_pylist()) <= {"b", "c"}


@settings(max_examples=25, deadline=None)
@given(
    acls=st.lists(
        st.one_of(st.none(), st.lists(st.sampled_from(["u1", "u2", "g1", "g2", "g3"]), max_size=3)),
        min_size=30,
        max_size=60,
    ),
    user=st.sampled_from([None, "u1", "u2", "u9"]),
    groups=st.lists(st.sampled_from(["g1", "g2", "g3", "g9"]), max_size=2),
    mode=st.sampled_from(MODES),
    deleted=st.integers(0, 5),
)
def test_no_acl_leaks_property(acls, user, groups, mode, deleted):
    words = ["alpha", "beta", "gamma", "年假", "报销", "policy"]
    docs = [
        {
            "id": f"d{i}",
            "text": f"{words[i % 6]} {words[(i * 7) % 6]} document {i} policy " * 3,
            "acl": acl,
        }
        for i, acl in enumerate(acls)
    ]
    kb = KnowledgeBase.build(docs, window=40, overlap=8)
    if deleted:
        kb.delete([f"d{i}" for i in range(deleted)])
    principal = Principal(user=user, groups=tuple(groups))
    names = principal.names()
    admitted = {f"d{i}" for i, acl in enumerate(acls) if not acl or set(acl) & names} - {
        f"d{i}" for i in range(deleted)
    }
    for q in ["alpha policy", "年假 报销", "document 3"]:
        hits = kb.retrieve(q, k=100, mode=mode, principal=principal)
        assert {h.doc_id for h in hits} <= admitted
        table = kb.retrieve_batch([q, "policy"], k=100, mode=mode, principal=principal)
        assert set(table.column("doc_id").to_pylist()) <= admitted
        ans = kb.answer(q, k=10, mode=mode, principal=principal)
        assert {h.doc_id for h in ans.hits} <= admitted
        assert {h.doc_id for h in ans.citations.values()} <= admitted


# -- rewriting --------------------------------------------------------------------


def test_rule_based_rewriter():
    rw = QueryRewriter(synonyms={"退款": ["退钱", "退费"]})
    out = rw("  请问ＡＢＣ公司的退款怎么申请？ ")
    assert (
        out.text == "  请问ＡＢＣ公司的退款怎么申请？ "
    )  # the vector leg embeds the question as asked
    assert "abc公司的退款" in out.keywords  # folded, question phrases dropped
    assert out.expansions == ("退钱", "退费")
    assert "怎么" not in out.keywords and "请问" not in out.keywords and "退费" in out.keywords
    assert out.intent == "procedural"
    assert rw("Why do expense reports differ from travel claims?").intent == "analytical"
    assert rw("How many days of annual leave do I get?").intent == "factual"
    assert rw("How do I apply for leave?").intent == "procedural"
    en = rw("What is the policy for THE Remote work?")
    assert "the" not in en.keywords.split() and "remote" in en.keywords.split()
    with pytest.raises(ConfigError):
        QueryRewriter(synonyms={"退款": "退钱"})


def _intent_by_rules(lowered: str) -> str:
    """The intent rules alone (the regular expressions, no word check first): the reference."""
    from fastrag.retrieve.rewrite import _ANALYTICAL, _PROCEDURAL

    if _ANALYTICAL.search(lowered):
        return "analytical"
    if _PROCEDURAL.search(lowered):
        return "procedural"
    return "factual"


_INTENT_PIECES = [
    "why", "compare", "comparison", "difference", "differ", "impact", "analyse", "analyze",
    "versus", "vs", "vs.", "pros", "cons", "how do", "how can", "how should", "how to", "how",
    "step", "steps", "process", "procedure", "apply", "request", "submit", "为什么", "为何",
    "比较", "区别", "差异", "影响", "分析", "优缺点", "原因", "怎么", "如何", "怎样", "流程",
    "步骤", "申请", "办理", "手续", "leave", "days", "annual", "x", "1", "é", "请问", " ", ".",
    "-", "_", "?",
]  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(_INTENT_PIECES), max_size=8), st.lists(st.booleans(), max_size=8))
def test_intent_word_check_gives_the_rules_intent(pieces, glue):
    """The intent's quick word check never changes what the rules alone decide."""
    from fastrag.retrieve.rewrite import _intent

    text = "".join(p + (" " if i < len(glue) and glue[i] else "") for i, p in enumerate(pieces))
    assert _intent(text) == _intent_by_rules(text)


def test_synonyms_reach_documents_that_use_another_word():
    kb = KnowledgeBase.build(
        [
            {"id": "r", "text": "退费须在购买后七日内申请。"},
            {"id": "x", "text": "年假申请需提前3天提交。"},
        ],
        rewriter=QueryRewriter(synonyms={"退款": ["退钱", "退费"]}),
    )
    assert kb.retrieve("退款怎么办理？", k=1, mode="keyword")[0].doc_id == "r"
    ans = kb.answer("退款怎么办理？", k=2)
    assert ans.query.expansions == ("退钱", "退费") and ans.query.intent == "procedural"


def test_llm_rewriter_falls_back_on_any_failure():
    def broken(messages):
        raise TimeoutError("model down")

    def garbage(messages):
        return "not json at all", {}

    def good(messages):
        return '{"query": "annual leave request days", "intent": "factual"}', {}

    for chat in (broken, garbage):
        out = LLMRewriter(chat)("How do I request leave?")
        assert out.source == "rules" and out.intent == "procedural"
    out = LLMRewriter(good)("How do I request leave?")
    assert out.source == "llm" and out.keywords.startswith("annual leave request days")


def test_history_reaches_a_model_rewriter_redacted_and_is_checked(demo_kb):
    sent = []

    def chat(messages, **kw):
        sent.append(messages)
        return '{"query": "annual leave request days", "intent": "factual"}', {}

    history = [("user", "Tell me about leave; mail me at ann@example.com"),
               {"role": "assistant", "content": "There are 15 days a year."}]  # fmt: skip
    kb = demo_kb
    old = kb.rewriter
    kb.rewriter = LLMRewriter(chat)
    try:
        kb.retrieve("And how early?", k=3, history=history)
        kb.retrieve("And how early?", k=3, rewrite=False, history=history)  # no rewrite: no call
    finally:
        kb.rewriter = old
    assert len(sent) == 1
    roles = [m["role"] for m in sent[0]]
    assert roles == ["system", "user", "assistant", "user"]
    assert "ann@example.com" not in sent[0][1]["content"] and "leave" in sent[0][1]["content"]
    assert sent[0][-1]["content"] == "And how early?"
    sent.clear()
    assert LLMRewriter(chat, follow_ups_only=True)("How do I request leave?").source == "rules"
    assert not sent  # alone: no model call
    assert LLMRewriter(chat, follow_ups_only=True)("And?", history=history).source == "llm"
    for bad, match in [
        ([("system", "x")], "role"),
        ([("user", 3)], "content"),
        ("user: hi", "sequence"),
        ([("user", "x")] * 21, "at most 20"),
        ([("user", "x" * 10_001)], "10,001"),
        ([("user",)], "pair"),
    ]:
        with pytest.raises(ConfigError, match=match):
            RetrievalOptions(history=bad)


# -- reranking --------------------------------------------------------------------


def test_reranker_reorders_never_adds_and_survives_failure(demo_kb):
    hits = demo_kb.retrieve("annual leave", k=4)
    reversed_hits = demo_kb.retrieve("annual leave", k=4, reranker=lambda q, hs: list(reversed(hs)))
    assert [h.chunk_id for h in reversed_hits] == [h.chunk_id for h in reversed(hits)]

    def boom(q, hs):
        raise RuntimeError("reranker down")

    assert [h.chunk_id for h in demo_kb.retrieve("annual leave", k=4, reranker=boom)] == [
        h.chunk_id for h in hits
    ]
    foreign = dataclasses.replace(hits[0], chunk_id=99_999, text="not in the results")
    out = apply_reranker(lambda q, hs: [foreign, *hs[1:2]], "q", hits)
    assert 99_999 not in {h.chunk_id for h in out}  # never added
    # The one kept comes first, the dropped ones follow in retrieval order.
    assert [h.chunk_id for h in out] == [hits[1].chunk_id, hits[0].chunk_id] + [
        h.chunk_id for h in hits[2:]
    ]


def test_llm_reranker_orders_by_relevance_and_falls_back(demo_kb):
    hits = demo_kb.retrieve("annual leave", k=4)
    ids = [h.chunk_id for h in hits]

    def chat(messages):
        rankings = [{"chunk_id": cid, "relevance_score": i / 10} for i, cid in enumerate(ids)]
        return json.dumps({"rankings": rankings}), {}

    ranked = demo_kb.retrieve("annual leave", k=4, reranker=LLMReranker(chat))
    assert [h.chunk_id for h in ranked] == list(reversed(ids))

    def bad(messages):
        return '{"rankings": [{"chunk_id": 1, "relevance_score": 7}]}', {}

    assert [
        h.chunk_id for h in demo_kb.retrieve("annual leave", k=4, reranker=LLMReranker(bad))
    ] == ids
    seen = []

    def capture(messages):
        seen.append(messages[1]["content"].count("chunk_id:"))
        return json.dumps({"rankings": []}), {}

    demo_kb.retrieve("annual leave", k=30, reranker=LLMReranker(capture, max_candidates=20))
    assert seen == [20]


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_vector_relevance_is_the_clipped_cosine(index):
    from fastrag.datasets import demo_documents

    kb = KnowledgeBase.build(demo_documents(), index=index)
    q = "How many days of annual leave do employees receive?"
    qv = kb.embed_questions([kb.rewriter(q).text])[0]
    for hit in kb.retrieve(q, k=8, mode="vector"):
        (row,) = kb._corpus.store.rows_of(np.array([hit.chunk_id]))
        seg, local = kb._corpus.store.locate(np.array([row]))
        v = kb._corpus.store.segments[int(seg[0])].vectors[int(local[0])]
        assert hit.relevance == pytest.approx(min(1.0, max(0.0, float(v @ qv))), abs=1e-5)


@settings(max_examples=examples(150), deadline=None)
@given(data=st.data(), n_rows=st.integers(1, 40), width=st.integers(1, 12), by_group=st.booleans())
def test_rrf_kernel_equals_the_reference_with_groups(data, n_rows, width, by_group):
    from fastrag._native import fusion
    from naive import fusion as naive_fusion

    groups = np.array(
        data.draw(st.lists(st.integers(0, 5), min_size=n_rows, max_size=n_rows)), np.int64
    )
    lists = []
    for _ in range(2):
        rows = data.draw(st.lists(st.integers(0, n_rows - 1), unique=True, max_size=width))
        lists.append(rows + [-1] * (width - len(rows)))
    # repeats allowed: first rank counts
    glist = data.draw(st.lists(st.integers(0, 5), max_size=width))
    g_arr = np.array([glist + [-1] * (width - len(glist))], np.int64)[:, None, :]
    k = data.draw(st.integers(1, 8))
    rows, scores = fusion.rrf_fuse(
        np.array(lists, np.int64)[:, None, :], np.array([1.0, 0.5]), g_arr, np.array([3.0]),
        groups, 60.0, k, by_group,
    )  # fmt: skip
    want = naive_fusion.rrf(
        lists, [1.0, 0.5], [g_arr[0, 0].tolist()], [3.0], groups.tolist(), 60.0, k, by_group
    )
    got = [(int(r), float(s)) for r, s in zip(rows[0], scores[0]) if r >= 0]
    assert [r for r, _ in got] == [r for r, _ in want]  # exact ties break by the lower row
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-6)
