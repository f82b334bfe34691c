"""The question path against its reference: the retriever as it was, kept in tests/naive.

``tests/naive/reference_retriever.py`` is the retriever before the
question path was made faster (option caching, the fusion plan resolved
once, relevance looked up by a kernel). Every mode, filter, principal and
grouping must rank the same rows with the same scores and relevances.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from naive.reference_retriever import Retriever as ReferenceRetriever

from fastrag import KnowledgeBase, Principal, VocabularyEmbedder
from fastrag.options import RetrievalOptions, parse_options
from fastrag.retrieve.retriever import Retriever

WORDS = "pump coolant spindle belt alarm servo chuck filter valve 主轴 报警 冷却 温度 压力".split()


@pytest.fixture(scope="module")
def kb():
    rng = random.Random(3)
    docs = []
    for i in range(60):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 60))]
        doc = {"id": f"d{i}", "text": " ".join(words), "team": rng.choice(["a", "b", "c"])}
        if i % 4 == 0:
            doc["acl"] = [rng.choice(["alice", "ops"])]
        docs.append(doc)
    return KnowledgeBase.build(
        docs, window=48, overlap=8, embedder=VocabularyEmbedder().fit([" ".join(WORDS)])
    )


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
    k=st.integers(1, 25),
    mode=st.sampled_from(["hybrid", "keyword", "vector"]),
    where=st.sampled_from([None, {"team": "a"}, {"team": {"in": ["b", "c"]}}]),
    principal=st.sampled_from([None, Principal("alice"), Principal(None, ("ops",))]),
    group_by=st.sampled_from([None, "doc"]),
    statistics=st.sampled_from(["global", "per_principal"]),
)
def test_ranking_equals_the_reference(kb, words, k, mode, where, principal, group_by, statistics):
    corpus, config = kb._corpus, kb._retriever.config
    options = RetrievalOptions(
        mode=mode, where=where, principal=principal, group_by=group_by, acl_statistics=statistics
    )
    new, old = Retriever(config), ReferenceRetriever(config)
    question = " ".join(words)
    got = new.rank(corpus, new.rewrite([question], options), k, options)
    want = old.rank(corpus, old.rewrite([question], options), k, options)
    np.testing.assert_array_equal(got.rows, want.rows)
    np.testing.assert_array_equal(got.scores, want.scores)
    np.testing.assert_array_equal(got.relevance, want.relevance)


def test_retrieve_hits_equal_the_reference(kb):
    corpus, config = kb._corpus, kb._retriever.config
    for mode in ("hybrid", "keyword", "vector"):
        options = RetrievalOptions(mode=mode)
        got, _ = Retriever(config).retrieve(corpus, ["pump alarm", "主轴 温度"], 7, options)
        want, _ = ReferenceRetriever(config).retrieve(
            corpus, ["pump alarm", "主轴 温度"], 7, options
        )
        assert got == want


def test_cached_options_are_validated_like_fresh_ones():
    """A cached parse must not let a value through that a fresh one refuses (True == 1)."""
    assert parse_options({"exact": True}, None, answers=False)[0].exact is True
    with pytest.raises(ValueError, match="exact must be a bool"):
        parse_options({"exact": 1}, None, answers=False)
    first = parse_options({"mode": "keyword"}, None)[0]
    assert first is parse_options({"mode": "keyword"}, None)[0]  # resolved once
    assert first == RetrievalOptions(mode="keyword")
    with pytest.raises(ValueError, match="unknown option"):
        parse_options({"nope": 1}, None)
    # unhashable values still work (not cached)
    opts = parse_options({"where": {"team": "a"}}, None)[0]
    assert opts.where == {"team": "a"}
