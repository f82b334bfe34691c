"""Hits read straight from the Arrow buffers equal the rows pyarrow itself decodes.

``RowReader`` reads hit fields from memoryviews of a segment's buffers (no
numpy, no pyarrow per row); these tests hold it to ``Table.to_pylist`` plus
``metadata_of`` over stores with every kind of null, ACL lists, extra
metadata, several segments and deletions, and check the ``Hits`` list type
that retrieval returns.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastrag import Hit, Hits, KnowledgeBase
from fastrag.store.rows import metadata_of

WORDS = ["alpha", "beta", "gamma", "delta", "注意", "冷却液", "épée", "omega"]

_meta_values = st.fixed_dictionaries(
    {},
    optional={
        "title": st.sampled_from(["T1", "标题", "a title"]),
        "source": st.sampled_from(["s.md", "https://x.example/y"]),
        "updated_at": st.sampled_from(["2024-03-15", "2001-01-01T12:30:00Z", 1_700_000_000]),
        "acl": st.lists(st.sampled_from(["alice", "bob", "组"]), min_size=0, max_size=3),
        "team": st.sampled_from(["red", "蓝"]),
        "n": st.integers(-5, 5),
    },
)


def _docs(draw_meta: list[dict], prefix: str) -> list[dict]:
    rng = np.random.default_rng(len(draw_meta))
    out = []
    for i, meta in enumerate(draw_meta):
        words = rng.choice(WORDS, size=int(rng.integers(1, 90)))
        out.append({"id": f"{prefix}{i}", "text": " ".join(words), "metadata": meta})
    return out


def _reference(kb: KnowledgeBase, rows: np.ndarray) -> list[Hit]:
    store = kb._corpus.store
    records = store.rows(rows).to_pylist()
    return [
        Hit(
            r["chunk_id"],
            r["doc_id"],
            r["ord"],
            r["start"],
            r["end"],
            r["text"],
            0.5,
            metadata_of(r),
            0.25,
        )  # fmt: skip
        for r in records
    ]


@settings(max_examples=25, deadline=None)
@given(
    first=st.lists(_meta_values, min_size=1, max_size=6),
    second=st.lists(_meta_values, min_size=0, max_size=4),
    delete=st.integers(0, 3),
    data=st.data(),
)
def test_hits_equal_pyarrow_rows(first, second, delete, data):
    kb = KnowledgeBase.build(_docs(first, "a"), window=60, overlap=10)
    if second:
        kb.add(_docs(second, "b"))  # a second segment
    if delete and len(first) > 1:
        kb.delete([f"a{j}" for j in range(min(delete, len(first) - 1))])
    store = kb._corpus.store
    rows = np.array(
        data.draw(st.lists(st.integers(0, store.n_rows - 1), min_size=1, max_size=12)),
        dtype=np.int64,
    )
    n = rows.size
    got = store.hits(rows, np.full(n, 0.5, np.float32), np.full(n, 0.25, np.float32))
    assert got == _reference(kb, rows)
    for h in got:  # the types a caller sees, not numpy scalars
        assert type(h.chunk_id) is int and type(h.ord) is int and type(h.start) is int
        if "updated_at" in h.metadata:
            assert h.metadata["updated_at"].tzinfo is not None


def test_hits_list_and_arrays():
    docs = [
        {"id": "d1", "text": "coolant pump alpha", "metadata": {"title": "Pumps"}},
        {"id": "d2", "text": "coolant tank beta", "metadata": {"acl": ["ops"]}},
        {"id": "d3", "text": "spindle gamma"},
    ]
    kb = KnowledgeBase.build(docs)
    hits = kb.retrieve("coolant", k=5, mode="keyword")
    assert isinstance(hits, Hits) and isinstance(hits, list)
    assert [h.doc_id for h in hits] == ["d1", "d2"] or [h.doc_id for h in hits] == ["d2", "d1"]
    assert hits == list(hits)  # compares like the list it holds
    assert hits.ids.tolist() == [h.chunk_id for h in hits]
    assert hits.scores.tolist() == pytest.approx([h.score for h in hits])
    assert hits.relevance.tolist() == pytest.approx([h.relevance for h in hits])
    assert (hits.rows >= 0).all()
    table = hits.to_arrow()
    assert table.column_names == ["rank", "chunk_id", "doc_id", "score", "relevance", "text"]
    assert table.column("rank").to_pylist() == [1, 2]
    assert table.column("text").to_pylist() == [h.text for h in hits]
    assert table.column("chunk_id").type == pa.int64()
    empty = kb.retrieve("nothing-matches-this", k=5, mode="keyword")
    assert isinstance(empty, Hits) and empty == [] and empty.ids.size == 0


def test_hits_from_plain_hits():
    h = Hit(7, "d", 0, 0, 3, "abc", 1.5, {}, None)
    hits = Hits([h])
    assert hits.ids.tolist() == [7] and hits.scores.tolist() == [1.5]
    assert np.isnan(hits.relevance[0]) and hits.rows.tolist() == [-1]
    assert hits.to_arrow().num_rows == 1


def test_updated_at_is_the_stored_instant():
    when = dt.datetime(2024, 3, 15, 8, 30, tzinfo=dt.timezone.utc)
    kb = KnowledgeBase.build([{"id": "x", "text": "alpha beta", "metadata": {"updated_at": when}}])
    (hit,) = kb.retrieve("alpha", k=1, mode="keyword")
    assert hit.metadata["updated_at"] == when
