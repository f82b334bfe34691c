from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrag.answer.context import (
    Context,
    ContextBlock,
    assemble_context,
    estimate_tokens,
    merge_hits,
)
from fastrag.answer.prompt import build_user_message
from fastrag.errors import ConfigError
from fastrag.types import Hit

DOC = (
    "Annual leave requests must be submitted at least 3 working days in advance. "
    "Employees receive 15 days of paid annual leave per year. "
    "Unused leave may be carried over until March 31 of the following year. "
    "Leave longer than 10 consecutive working days needs approval."
)


def window(
    chunk_id: int, doc: str, start: int, end: int, score: float, text: str = DOC, **kw
) -> Hit:
    return Hit(
        chunk_id, doc, chunk_id, start, end, text[start:end], score, kw.pop("metadata", {}), **kw
    )


def naive_tokens(text: str) -> float:
    """Reference: per-character class costs summed, then rounded up."""
    cost = 0.0
    for ch in text:
        cost += 0.25 if ord(ch) < 128 else 0.5
    return -(-cost // 1)


# -- estimate_tokens -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),
        ("年假", 1),
        ("年假申请", 2),
        ("年假3天", 2),  # 1 + 1/4 -> 2
        ("Annual leave 年假", 5),  # 13/4 + 2/2 = 4.25 -> 5
        ("naïve café", 3),  # 8 ascii + 2 other (counted like CJK)
        ("한국어", 2),
        ("emoji 🙂", 2),
    ],
)
def test_estimate_tokens(text, expected):
    assert estimate_tokens(text) == naive_tokens(text) == expected


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=80))
def test_estimate_tokens_matches_reference(text):
    assert estimate_tokens(text) == naive_tokens(text)


# -- merging ---------------------------------------------------------------------------------------


def test_overlapping_windows_of_one_document_merge():
    a = window(1, "leave", 0, 90, 0.9, relevance=0.8)
    b = window(2, "leave", 70, 160, 0.5, relevance=0.9)
    other = window(3, "expense", 0, 40, 0.7, text="Expense reports are due within 15 days.")
    ctx = assemble_context([b, other, a])
    assert [blk.marker for blk in ctx.blocks] == [1, 2]
    merged = ctx.blocks[0]
    assert merged.hit.text == DOC[0:160]
    assert (merged.hit.start, merged.hit.end) == (0, 160)
    assert merged.hit.chunk_id == 1 and merged.hit.ord == 1  # its first chunk
    assert merged.hit.score == 0.9 and merged.hit.relevance == 0.9  # the best of its hits
    assert merged.hits == (a, b)  # document order
    assert ctx.blocks[1].hit is other
    assert ctx.dropped == ()
    assert ctx.hits == [merged.hit, other]


def test_touching_windows_merge_and_distant_ones_do_not():
    a = window(1, "leave", 0, 50, 0.9)
    b = window(2, "leave", 50, 100, 0.8)  # touches a
    c = window(3, "leave", 120, 160, 0.7)  # gap
    blocks = merge_hits([c, a, b])
    assert [h.text for h, _ in blocks] == [DOC[120:160], DOC[0:100]]  # rank of the best hit
    assert blocks[1][1] == (a, b)


def test_contained_window_and_duplicates():
    a = window(1, "leave", 0, 120, 0.9)
    inner = window(2, "leave", 30, 60, 0.95)
    blocks = merge_hits([a, inner, a])
    assert len(blocks) == 1
    hit, members = blocks[0]
    assert hit.text == DOC[0:120] and members == (a, inner) and hit.score == 0.95


def test_chain_of_three_windows():
    hits = [window(i, "leave", s, s + 60, 1.0 - i / 10) for i, s in enumerate([100, 0, 50])]
    ((hit, members),) = merge_hits(hits)
    assert hit.text == DOC[0:160] and [m.start for m in members] == [0, 50, 100]


def test_same_offsets_in_different_documents_do_not_merge():
    a = window(1, "a", 0, 50, 0.9)
    b = window(2, "b", 0, 50, 0.8)
    assert len(merge_hits([a, b])) == 2


def test_hits_whose_offsets_do_not_describe_their_text_are_not_spliced():
    a = Hit(1, "d", 0, 0, 50, "short text", 0.9)  # 10 characters for a 50-character window
    b = window(2, "d", 40, 90, 0.8)
    assert len(merge_hits([a, b])) == 2


def test_merged_relevance_none_when_no_hit_has_one():
    a, b = window(1, "d", 0, 50, 0.9), window(2, "d", 40, 90, 0.8)
    ((hit, _),) = merge_hits([a, b])
    assert hit.relevance is None


# -- packing ---------------------------------------------------------------------------------------


def test_greedy_packing_drops_whole_blocks_and_tries_smaller_ones():
    long_text = "x" * 400  # 100 tokens
    hits = [
        Hit(1, "a", 0, 0, 40, "a" * 40, 0.9),  # ~11 tokens with its marker
        Hit(2, "b", 0, 0, 400, long_text, 0.8),
        Hit(3, "c", 0, 0, 40, "c" * 40, 0.7),
    ]
    ctx = assemble_context(hits, budget=30)
    assert [b.hit.chunk_id for b in ctx.blocks] == [1, 3]
    assert [b.marker for b in ctx.blocks] == [1, 2]
    assert ctx.dropped == (hits[1],)
    assert ctx.tokens == sum(b.tokens for b in ctx.blocks) <= 30
    assert ctx.blocks[1].tokens == estimate_tokens("[2] " + "c" * 40)
    # never cut: every block's text is a hit's full text
    assert all(b.hit.text in (h.text for h in hits) for b in ctx.blocks)


def test_budget_too_small_for_anything():
    hits = [window(1, "leave", 0, 100, 0.9)]
    ctx = assemble_context(hits, budget=3)
    assert ctx.blocks == () and ctx.dropped == (hits[0],) and ctx.tokens == 0


def test_no_budget_and_custom_estimator():
    hits = [window(i, f"d{i}", 0, 100, 1.0) for i in range(5)]
    assert len(assemble_context(hits, budget=None).blocks) == 5
    ctx = assemble_context(hits, budget=2, estimator=lambda text: 1)
    assert len(ctx.blocks) == 2 and ctx.tokens == 2 and len(ctx.dropped) == 3


def test_empty():
    assert assemble_context([]) == Context((), (), 0)


@pytest.mark.parametrize("budget", [-1, 1.5, True, "10"])
def test_bad_budget(budget):
    with pytest.raises(ConfigError):
        assemble_context([], budget=budget)


def test_markers_resolve_to_blocks_in_the_prompt():
    a = window(1, "leave", 0, 90, 0.9)
    b = window(2, "leave", 70, 160, 0.8)
    c = window(3, "x", 0, 20, 0.7, text="Expense reports due.")
    ctx = assemble_context([a, c, b])
    prompt = build_user_message("q", ctx.hits)
    assert f"[1] {DOC[0:160]}" in prompt and "[2] Expense reports due." in prompt
    assert "[3]" not in prompt
    assert isinstance(ctx.blocks[0], ContextBlock)


def test_on_the_demo_knowledge_base():
    from fastrag.datasets import demo_documents

    import fastrag

    kb = fastrag.KnowledgeBase.build(demo_documents(), window=120, overlap=30)
    hits = kb.retrieve("How many days of annual leave do employees receive?", k=8)
    ctx = assemble_context(hits, budget=3000)
    assert ctx.blocks and not ctx.dropped
    texts = {b.hit.doc_id: b.hit.text for b in ctx.blocks}
    docs = {d["id"]: d["text"] for d in demo_documents()}
    for doc_id, text in texts.items():
        assert text in " ".join(docs[doc_id].split())  # continuous text of the document
    assert sum(len(b.hits) for b in ctx.blocks) == len(hits)
