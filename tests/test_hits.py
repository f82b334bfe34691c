"""Hits read straight from the Arrow buffers equal the rows pyarrow itself decodes.

``RowReader`` reads hit fields from memoryviews of a segment's buffers (no
numpy, no pyarrow per row); these tests hold it to ``Table.to_pylist`` plus
``metadata_of`` over stores with every kind of null, ACL lists, extra
metadata, several segments and deletions, and check the ``Hits`` list type
that retrieval returns.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

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


def _reference(
    kb: KnowledgeBase, rows: np.ndarray, scores: np.ndarray, relevance: np.ndarray
) -> list[Hit]:
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
            float(score),
            metadata_of(r),
            float(rel),
        )  # fmt: skip
        for r, score, rel in zip(records, scores, relevance, strict=True)
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
    # each row its own score and relevance: a hit paired with another row's score fails
    scores = np.arange(rows.size, dtype=np.float32) + 0.5
    relevance = (np.arange(rows.size, dtype=np.float32) + 1) / (rows.size + 1)
    got = store.hits(rows, scores, relevance)
    assert got == _reference(kb, rows, scores, relevance)
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


def test_hit_is_a_frozen_dataclass():
    """``Hit``'s own ``__init__`` (faster than the dataclass's) keeps the dataclass's behaviour."""
    import dataclasses

    h = Hit(7, "d", 0, 1, 3, "abc", 1.5)
    assert h.metadata == {} and h.relevance is None
    assert Hit(7, "d", 0, 1, 3, "abc", 1.5).metadata is not h.metadata  # a new dict each time
    assert Hit(7, "d", 0, 1, 3, "abc", 1.5, metadata=None).metadata is None  # as given
    kw = Hit(chunk_id=7, doc_id="d", ord=0, start=1, end=3, text="abc", score=1.5, relevance=0.5)
    assert kw == dataclasses.replace(h, relevance=0.5) and kw != h
    assert repr(h) == (
        "Hit(chunk_id=7, doc_id='d', ord=0, start=1, end=3, text='abc', score=1.5, "
        "metadata={}, relevance=None)"
    )
    assert [f.name for f in dataclasses.fields(Hit)] == [
        "chunk_id", "doc_id", "ord", "start", "end", "text", "score", "metadata", "relevance",
    ]  # fmt: skip
    assert dataclasses.asdict(h) == h.to_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.score = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        Hit(7, "d", 0, 1, 3)  # type: ignore[call-arg]
    match h:
        case Hit(chunk_id, doc_id):
            assert (chunk_id, doc_id) == (7, "d")


@pytest.mark.parametrize("segments", [1, 2])
def test_one_question_equals_the_batch(segments):
    """One question's hits (its own short path) equal the batched path's, padding included."""
    docs = _docs([{}, {"title": "T"}, {"acl": ["a"]}, {"team": "red"}] * 3, "a")
    kb = KnowledgeBase.build(docs, window=60, overlap=10)
    if segments == 2:
        kb.add(_docs([{"source": "s.md"}] * 3, "b"))
    questions = ["alpha", "注意 beta", "épée omega gamma", "nothing here", "delta"]
    for mode in ("keyword", "vector", "hybrid"):
        batch = kb.retrieve_batch(questions + ["alpha"], k=40, mode=mode, output="hits")
        for q, want in zip(questions, batch, strict=False):
            got = kb.retrieve(q, k=40, mode=mode)
            assert isinstance(got, Hits)
            if mode == "keyword":
                assert got == want
            else:
                # The exact scan scores one question and a batch's tiles of four with dot
                # products LLVM vectorises each its own way: on AVX2 (not on AVX-512) a score
                # may differ in its last bit. The same chunks, in the same order, all else equal.
                assert [replace(h, score=0.0, relevance=0.0) for h in got] == [
                    replace(h, score=0.0, relevance=0.0) for h in want
                ]
            for field in ("ids", "rows", "scores", "relevance"):
                a, b = getattr(got, field), getattr(want, field)
                assert a.dtype == b.dtype
                if field in ("ids", "rows") or mode == "keyword":
                    assert np.array_equal(a, b, equal_nan=True)
                else:
                    assert np.allclose(a, b, rtol=1e-6, atol=0, equal_nan=True)
    store = kb._corpus.store
    rows = np.array([[3, 0, -1, 5, -1]], dtype=np.int64)
    got = store.hits_matrix(rows, np.ones((1, 5), np.float32))[0]
    assert got.rows.tolist() == [3, 0, 5] and np.isnan(got.relevance).all()
    assert got == store.hits(rows[0], np.ones(5, np.float32))


def test_lazy_metadata_decodes_once_to_the_eager_dict():
    """A hit's metadata read late is the dict read eagerly, one object for every reader."""
    import threading

    from fastrag.types import Hit, LazyMetadata

    calls = []

    def decode(i):
        calls.append(i)
        return {"title": f"t{i}", "acl": ["a"]}

    lazy = Hit(1, "d", 0, 0, 3, "abc", 0.5, LazyMetadata(decode, 7), 0.25)
    eager = Hit(1, "d", 0, 0, 3, "abc", 0.5, {"title": "t7", "acl": ["a"]}, 0.25)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(lazy.metadata)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [7]
    assert all(m is seen[0] for m in seen)
    assert lazy == eager and repr(lazy) == repr(eager) and lazy.title == "t7"
