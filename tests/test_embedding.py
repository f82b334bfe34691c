from __future__ import annotations

import numpy as np
import pytest
from conftest import examples
from fastrag._native import embedding as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import embedding as naive

from fastrag import VocabularyEmbedder
from fastrag.embed.base import check_embedder_matches
from fastrag.embed.registry import embedder_from_config
from fastrag.errors import ConfigError, EmbedderError, EmbedderMismatchError, NotFittedError

ALPHABET = st.sampled_from(
    list("abcABCxyz 中文字年假😀🎉é\u212aKkİ\u3000\n\t.,!?")
    + ["\u00df", "\u0130", "\u01c5", "\U0001e900"]
)
TEXTS = st.lists(st.text(alphabet=ALPHABET, max_size=40), min_size=1, max_size=8)


def _reference_matrix(texts, vocab, lowercase=True):
    return np.array([naive.embed_index_of(t, vocab, lowercase) for t in texts], dtype=np.float64)


@settings(max_examples=examples(150), deadline=None)
@given(
    corpus=TEXTS, queries=TEXTS, max_features=st.sampled_from([None, 1, 3, 8]), lower=st.booleans()
)
def test_fit_and_embed_match_reference(corpus, queries, max_features, lower):
    expected_vocab = naive.fit_vocabulary(corpus, max_features, lower)
    if not expected_vocab:
        with pytest.raises(EmbedderError):
            VocabularyEmbedder(max_features, lowercase=lower).fit(corpus)
        return
    emb = VocabularyEmbedder(max_features, lowercase=lower).fit(corpus)
    assert emb.vocabulary == expected_vocab
    got = emb.embed(queries)
    assert got.dtype == np.float32 and got.shape == (len(queries), len(expected_vocab))
    np.testing.assert_allclose(
        got, _reference_matrix(queries, expected_vocab, lower), rtol=1e-6, atol=1e-7
    )
    column = {ch: j for j, ch in enumerate(expected_vocab)}
    dict_version = [naive.embed_dict(q, column, len(column), lower) for q in queries]
    np.testing.assert_allclose(got, np.array(dict_version), rtol=1e-6, atol=1e-7)


def test_same_text_same_vector_and_oov_ignored():
    emb = VocabularyEmbedder().fit(["hello world", "你好世界"])
    a, b, c = emb.embed(["hello 你好", "hello 你好", "hello 你好 QQQ ####"])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)  # q and # are outside the vocabulary


def test_no_vocabulary_character_gives_zero_vector_not_nan():
    emb = VocabularyEmbedder().fit(["abc"])
    out = emb.embed(["", "xyz", "   ", "😀"])
    assert not np.isnan(out).any()
    assert (out == 0).all()


def test_rows_are_unit_norm():
    emb = VocabularyEmbedder().fit(["the quick brown fox", "年假申请需提前3天提交"])
    out = emb.embed(["quick fox", "年假", "the the the"])
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)


def test_case_folding_shares_columns():
    emb = VocabularyEmbedder().fit(["abc"])
    np.testing.assert_array_equal(emb.embed(["ABC"]), emb.embed(["abc"]))
    # The Kelvin sign lower-cases to "k".
    emb = VocabularyEmbedder().fit(["k"])
    np.testing.assert_array_equal(emb.embed(["\u212a"]), emb.embed(["k"]))
    emb = VocabularyEmbedder(lowercase=False).fit(["abc"])
    assert (emb.embed(["ABC"]) == 0).all()


def test_max_features_keeps_most_frequent_ties_by_code_point():
    emb = VocabularyEmbedder(max_features=3).fit(["aaa bb cc d", "ee"])
    assert emb.vocabulary == "abc"  # b, c, e tie at 2: code-point order keeps b and c


def test_space_is_not_a_feature():
    emb = VocabularyEmbedder().fit(["a b\tc\u3000d"])
    assert emb.vocabulary == "abcd"


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_count_codepoints_matches_counter_at_any_split(parts):
    text = "aé中😀" * 50 + "z"
    data = np.frombuffer(text.encode(), dtype=np.uint8)  # read-only
    hists = np.zeros((parts, 0x110000), dtype=np.int64)
    kernels.count_codepoints(data, 0, data.size, hists)
    kernels.count_codepoints(data, 0, data.size, hists)  # accumulates
    hist = hists.sum(axis=0)
    expected = naive.count_codepoints(text)
    assert {int(i): int(hist[i]) for i in np.flatnonzero(hist)} == {
        c: 2 * n for c, n in expected.items()
    }


def test_embed_utf8_into_slice_of_matrix_and_readonly_inputs():
    emb = VocabularyEmbedder().fit(["abc", "中文"])
    texts = ["abc", "中", "zz"]
    encoded = [t.encode() for t in texts]
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    offsets = np.array([0, 3, 6, 8], dtype=np.int64)
    offsets.flags.writeable = False
    big = np.full((5, emb.dim), 7.0, dtype=np.float32)
    emb.embed_utf8(data, offsets, out=big[1:4])
    np.testing.assert_array_equal(big[1:4], emb.embed(texts))
    assert (big[0] == 7).all() and (big[4] == 7).all()
    with pytest.raises(ConfigError):
        emb.embed_utf8(data, offsets, out=np.empty((3, emb.dim), dtype=np.float64))


def test_config_round_trip_and_mismatch():
    emb = VocabularyEmbedder(max_features=10).fit(["hello world"])
    cfg = emb.config()
    again = embedder_from_config(cfg)
    assert again == emb
    check_embedder_matches(cfg, again)
    other = VocabularyEmbedder(max_features=10).fit(["something else"])
    with pytest.raises(EmbedderMismatchError, match="vocabulary_sha256"):
        check_embedder_matches(cfg, other)
    tampered = dict(cfg, vocabulary=cfg["vocabulary"][::-1])
    with pytest.raises(EmbedderError, match="sha256"):
        embedder_from_config(tampered)


def test_the_registry_rebuilds_by_type_and_names_what_it_cannot():
    from fastrag import OpenAIEmbedder

    saved = OpenAIEmbedder(base_url="http://127.0.0.1:9/v1", model="m", api_key="k").config()
    assert isinstance(embedder_from_config(saved), OpenAIEmbedder)
    for config in ({"type": "mine"}, {"type": "static"}, {}, {"type": ["static"]}):
        # a user's embedder, and a static table without the snapshot that holds it
        with pytest.raises(EmbedderError, match="pass embedder="):
            embedder_from_config(config)


def test_each_embedder_declares_its_kind():
    from fastrag import OpenAIEmbedder, StaticEmbedder
    from fastrag.embed.base import EMBEDDER_KINDS, embedder_kind

    assert (VocabularyEmbedder.kind, StaticEmbedder.kind, OpenAIEmbedder.kind) == EMBEDDER_KINDS
    assert embedder_kind(VocabularyEmbedder().fit(["abc"])) == "vocabulary"

    class Mine:
        dim = 2

    class Declared(Mine):
        kind = "static"

    class Odd(Mine):
        kind = "sparse"  # not a kind fusion knows: a model's defaults

    class Inherits(VocabularyEmbedder):
        pass

    assert embedder_kind(Mine()) == "model" and embedder_kind(Odd()) == "model"
    assert embedder_kind(Declared()) == "static" and embedder_kind(Inherits()) == "vocabulary"


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "10"])
def test_bad_max_features(bad):
    with pytest.raises(ConfigError):
        VocabularyEmbedder(bad)


def test_errors_name_the_problem():
    emb = VocabularyEmbedder()
    with pytest.raises(NotFittedError):
        emb.embed(["x"])
    with pytest.raises(NotFittedError):
        _ = emb.dim
    with pytest.raises(EmbedderError, match="no non-space character"):
        emb.fit(["", "   "])
    with pytest.raises(ConfigError):
        emb.fit("a string, not a list")
    emb.fit(["abc"])
    with pytest.raises(ConfigError):
        emb.embed("abc")
    with pytest.raises(ConfigError, match="twice"):
        VocabularyEmbedder(vocabulary="aa")
