"""Tokenizer and the tokenisation kernel against the reference (tests/naive/tokenize.py)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from fastrag._native import tokenize as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import tokenize as naive

from fastrag.errors import ConfigError, DocumentError
from fastrag.text.stopwords import ENGLISH_STOPWORDS, STOPWORDS
from fastrag.text.tokenize import LUCENE_STOPWORDS, Tokenizer, Tokens

JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")

try:
    import Stemmer
except ImportError:  # pragma: no cover - optional dependency
    Stemmer = None
needs_stemmer = pytest.mark.skipif(Stemmer is None, reason="PyStemmer is not installed")

# Characters that exercise every class: ASCII, Latin with accents, marks,
# CJK (Han, Kana, Hangul), full-width forms, CJK and ASCII punctuation.
ALPHABET = (
    "abcXYZ019 \t\n'-_.,!?;:()"
    "éÉßİıΣσДж"
    "\u0301\u0308\u0915\u093f\u094d"
    "中文年假制度々〇"
    "ひらカタナー・"
    "한국어"
    "ＡＢＣａｂｃ１２３！＿\u3000"
    "。，、！？「」《》：；（）"
    "\U00020000\U0001f600\ue000"
)
texts_strategy = st.lists(st.text(alphabet=ALPHABET, max_size=40), max_size=6)


def hashes_of(tokens: Tokens) -> list[list[int]]:
    return [tokens[i].tolist() for i in range(len(tokens))]


def naive_options(tok: Tokenizer) -> dict:
    return {
        "lowercase": tok.lowercase,
        "stopwords": frozenset(tok.stopwords),
        "cjk": tok.cjk,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        ("The cat is on the mat", ["cat", "mat"]),
        ("don't stop-words e-mail", ["don", "t", "stop", "words", "e", "mail"]),
        ("COVID-19 p53 IL-6", ["covid", "19", "p53", "il", "6"]),
        ("snake_case", ["snake", "case"]),
        ("ＡＢＣ１２３", ["abc123"]),
        ("年假制度", ["年", "假", "年假", "制", "假制", "度", "制度"]),
        ("中", ["中"]),
        ("iPhone手机", ["iphone", "手", "机", "手机"]),
        ("年假。制度，「好」", ["年", "假", "年假", "制", "度", "制度", "好"]),
        ("3天", ["3", "天"]),
        ("ひらがなカタカナ", None),
        ("한국어 텍스트", ["한", "국", "한국", "어", "국어", "텍", "스", "텍스", "트", "스트"]),
        ("résumé naïve Straße", ["résumé", "naïve", "straße"]),
        ("cafe\u0301", ["cafe\u0301"]),
        ("\u3000x\u3000y", ["x", "y"]),
        ("", []),
        ("!!! ... ", []),
    ],
)
def test_examples(text, expected):
    tok = Tokenizer()
    got = tok.tokens(text)
    assert got == naive.tokens(text)
    if expected is not None:
        assert got == expected
    assert hashes_of(tok.tokenize([text])) == [naive.token_hashes(text)]


def test_chinese_never_one_token_per_run():
    tok = Tokenizer(stopwords=None)
    text = "工作未满五年的员工每年享有15天带薪年假"
    strings = tok.tokens(text)
    assert "工作未满五年的员工每年享有" not in strings
    assert "工" in strings and "工作" in strings
    assert len(strings) == 13 + 12 + 1 + 5 + 4
    # the default stop list drops Chinese function characters (not the bigrams holding them)
    default = Tokenizer().tokens(text)
    assert "的" not in default and "年的" in default and len(default) == len(strings) - 1


@pytest.mark.parametrize("cjk", ["unigram+bigram", "unigram", "bigram"])
def test_cjk_modes(cjk):
    tok = Tokenizer(cjk=cjk)
    for text in ["中", "中文", "中文字 a 中", "年假。制度"]:
        assert tok.tokens(text) == naive.tokens(text, cjk=cjk)
        assert hashes_of(tok.tokenize([text])) == [naive.token_hashes(text, cjk=cjk)]
    assert Tokenizer(cjk="unigram").tokens("中文") == ["中", "文"]
    assert Tokenizer(cjk="bigram").tokens("中文 字") == ["中文", "字"]


def test_stopwords():
    assert Tokenizer().stopwords == STOPWORDS  # the one list every stage uses
    assert Tokenizer(stopwords="lucene").stopwords == tuple(sorted(LUCENE_STOPWORDS))
    assert Tokenizer(stopwords="english").stopwords == tuple(sorted(ENGLISH_STOPWORDS))
    assert Tokenizer(stopwords=None).tokens("the cat") == ["the", "cat"]
    assert Tokenizer(stopwords=[]).tokens("the cat") == ["the", "cat"]
    custom = Tokenizer(stopwords=["CAT", "的", "ＤＯＧ"])
    assert custom.stopwords == ("cat", "dog", "的")  # folded and sorted
    assert custom.tokens("the cat and dog 我的书") == ["the", "and", "我", "我的", "书", "的书"]
    assert Tokenizer().tokens("THE The tHe") == []


def test_lowercase_off():
    tok = Tokenizer(lowercase=False, stopwords=None)
    assert tok.tokens("Hello ＷＯＲＬＤ") == ["Hello", "WORLD"]
    assert hashes_of(tok.tokenize(["Hello ＷＯＲＬＤ"])) == [
        naive.token_hashes("Hello ＷＯＲＬＤ", lowercase=False, stopwords=frozenset())
    ]


@needs_stemmer
def test_stemming_examples():
    tok = Tokenizer(stem="porter")
    assert tok.tokens("running runs cells generalization the connection") == [
        "run",
        "run",
        "cell",
        "gener",
        "connect",
    ]
    # words of one or two characters are left alone (Snowball would empty "s")
    assert tok.tokens("cell's is as ox") == ["cell", "s", "ox"]
    # CJK tokens are never stemmed; stop words go before stemming
    assert tok.tokens("年假 was running") == ["年", "假", "年假", "run"]
    stem = Stemmer.Stemmer("porter").stemWord
    text = "Connections connected CONNECTING relational agreed ponies caresses"
    assert tok.tokens(text) == naive.tokens(text, stem=stem)
    assert hashes_of(tok.tokenize([text])) == [naive.token_hashes(text, stem=stem)]


@needs_stemmer
def test_stemming_large_batch_and_cache():
    tok = Tokenizer(stem="porter")
    stem = Stemmer.Stemmer("porter").stemWord
    words = [f"walk{s}" for s in ("", "s", "ed", "ing", "er")] * 100
    texts = [" ".join(words[i : i + 7]) + " 中文" for i in range(0, len(words), 7)]
    expected = [naive.token_hashes(t, stem=stem) for t in texts]
    assert hashes_of(tok.tokenize(texts)) == expected
    assert hashes_of(tok.tokenize(texts)) == expected  # from the cache
    assert tok.token_strings(texts[:1]) == [naive.tokens(texts[0], stem=stem)]


def test_stem_requires_pystemmer(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "Stemmer":
            raise ImportError("no")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match="pip install PyStemmer"):
        Tokenizer(stem="porter")


@settings(max_examples=150 if not JIT_DISABLED else 20, deadline=None)
@given(texts=texts_strategy, cjk=st.sampled_from(["unigram+bigram", "unigram", "bigram"]))
def test_against_reference(texts, cjk):
    tok = Tokenizer(cjk=cjk)
    tokens = tok.tokenize(texts)
    assert tokens.hashes.dtype == np.uint64 and tokens.offsets.dtype == np.int64
    assert tokens.offsets[0] == 0 and tokens.offsets[-1] == tokens.hashes.size
    assert hashes_of(tokens) == [naive.token_hashes(t, **naive_options(tok)) for t in texts]
    assert tok.token_strings(texts) == [naive.tokens(t, **naive_options(tok)) for t in texts]


@settings(max_examples=50 if not JIT_DISABLED else 10, deadline=None)
@given(texts=texts_strategy)
def test_parallel_equals_serial(texts):
    tok = Tokenizer()
    serial = tok.tokenize(texts)
    data = "".join(texts).encode()
    raw = np.frombuffer(data, dtype=np.uint8)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t.encode()) for t in texts], out=offsets[1:])
    from fastrag.text.tokenize import _classes, _fold

    h, o, *_ = kernels.tokenize_utf8(
        raw, offsets, _classes(), _fold(True), tok._stop_hashes, 0, parallel=True
    )
    assert h.tolist() == serial.hashes.tolist() and o.tolist() == serial.offsets.tolist()


def test_pyarrow_input_sliced_and_readonly():
    texts = ["zero", "one two", "三四", "five"]
    arr = pa.array(texts, type=pa.large_string()).slice(1, 2)
    tok = Tokenizer()
    got = tok.tokenize(arr)
    assert hashes_of(got) == [naive.token_hashes(t) for t in texts[1:3]]
    data = np.frombuffer("one two三四".encode(), dtype=np.uint8)  # read-only
    offsets = np.array([0, 7, 13], dtype=np.int64)
    offsets.flags.writeable = False
    assert hashes_of(tok.tokenize_utf8(data, offsets)) == hashes_of(got)
    assert not got.hashes.flags.writeable


def test_malformed_utf8_stays_in_bounds():
    tok = Tokenizer()
    for raw in [b"\xff\xfeab", b"ab\xe4\xb8", b"\xe4", b"\xf0\x9f", b"a\x80b", b"\xc3"]:
        data = np.frombuffer(raw, dtype=np.uint8)
        tokens = tok.tokenize_utf8(data, np.array([0, data.size], dtype=np.int64))
        assert tokens.offsets[-1] == tokens.hashes.size


def test_hash_is_fnv1a_of_folded_text():
    tok = Tokenizer(stopwords=None)
    assert tok.hash(["cat", "年假", ""]).tolist() == [
        naive.fnv1a64("cat"),
        naive.fnv1a64("年假"),
        0xCBF29CE484222325,
    ]
    assert tok.tokenize(["CAT"]).hashes.tolist() == tok.hash(["cat"]).tolist()


def test_no_collisions_on_a_large_vocabulary():
    rng = np.random.default_rng(7)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz0123"))
    lengths = rng.integers(1, 12, 200_000)
    words = {"".join(letters[rng.integers(0, 30, n)]) for n in lengths}
    words |= {chr(c) for c in range(0x4E00, 0xA000)}
    han = range(0x4E00, 0x4E00 + 300)
    words |= {chr(a) + chr(b) for a in han for b in han}
    h = Tokenizer().hash(sorted(words))
    assert np.unique(h).size == len(words)


def test_config_round_trip_and_validation():
    tok = Tokenizer(stopwords=["x"], cjk="unigram", lowercase=False)
    again = Tokenizer.from_config(tok.config())
    assert again == tok and again.config() == tok.config()
    assert Tokenizer() == Tokenizer(stopwords=list(STOPWORDS))
    for bad in [
        {"lowercase": 1},
        {"stopwords": "french"},
        {"stopwords": [1]},
        {"stem": "snowball"},
        {"cjk": "trigram"},
    ]:
        with pytest.raises(ConfigError):
            Tokenizer(**bad)
    with pytest.raises(ConfigError):
        Tokenizer.from_config({"lowercase": True})
    with pytest.raises(ConfigError):
        Tokenizer.from_config({**tok.config(), "hash": "md5"})


def test_bad_input():
    tok = Tokenizer()
    with pytest.raises(DocumentError):
        tok.tokenize("a single string")
    with pytest.raises(DocumentError):
        tok.tokenize(["ok", 3])
    with pytest.raises(DocumentError):
        tok.tokenize_utf8(np.zeros(3, np.uint8), np.array([0, 5], np.int64))
    with pytest.raises(DocumentError):
        tok.tokenize_utf8(np.zeros(3, np.uint8), np.array([2, 1], np.int64))
    with pytest.raises(DocumentError):
        tok.tokenize_utf8(np.zeros(3, np.int8), np.array([0, 1], np.int64))
    assert len(tok.tokenize([])) == 0


def test_warmup_runs():
    kernels.warmup()


@needs_stemmer
@settings(max_examples=100 if not JIT_DISABLED else 10, deadline=None)
@given(
    text=st.text(alphabet=ALPHABET, max_size=40)
    | st.lists(st.sampled_from(["runs", "running", "ran", "cell's", "中文", "the", "Connected"]),
               max_size=8).map(" ".join),
    stem=st.sampled_from([None, "porter"]),
    cjk=st.sampled_from(["unigram+bigram", "unigram", "bigram"]),
)  # fmt: skip
def test_one_text_equals_the_batch_path(text, stem, cjk):
    """``tokenize([text])``, a question's short path, gives what the general path gives."""
    tok = Tokenizer(stem=stem, cjk=cjk)
    data = np.frombuffer(text.encode(), dtype=np.uint8)
    general = Tokenizer(stem=stem, cjk=cjk).tokenize_utf8(data, np.array([0, data.size]))
    for _ in range(2):  # the second time from the stem cache
        one = tok.tokenize([text])
        assert hashes_of(one) == hashes_of(general)
        assert one.offsets.tolist() == general.offsets.tolist()
        assert one.hashes.dtype == np.uint64 and not one.hashes.flags.writeable
    options = {**naive_options(tok), "stem": Stemmer.Stemmer("porter").stemWord if stem else None}
    assert hashes_of(one) == [naive.token_hashes(text, **options)]


def test_one_text_bad_input():
    tok = Tokenizer()
    with pytest.raises(DocumentError, match="text at index 0 is not valid Unicode"):
        tok.tokenize(["lone \ud800 surrogate"])
    long = "word " * 20_000  # past the short path's size: the general path, same tokens
    assert len(tok.tokenize([long])[0]) == 20_000


# -- the one-pass block kernels (issue 21, item 5) ------------------------------


def _buffers(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer("".join(texts).encode(), dtype=np.uint8)
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t.encode()) for t in texts], out=offsets[1:])
    return raw, offsets


@settings(max_examples=80 if not JIT_DISABLED else 10, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=ALPHABET, max_size=30), min_size=1, max_size=12),
    block=st.sampled_from([1, 5, 17, 1 << 18]),
    cjk=st.sampled_from(["unigram+bigram", "unigram", "bigram"]),
)
def test_block_pass_equals_serial_and_reference(texts, block, cjk):
    # blocks of a few bytes: many blocks, texts spread over them, empty texts between
    tok = Tokenizer(cjk=cjk)
    classes, fold, stop, mode = tok.kernel_tables()
    raw, offsets = _buffers(texts)
    saved = kernels.BLOCK_BYTES
    kernels.BLOCK_BYTES = block
    try:
        for spans in (False, True):
            serial = kernels.tokenize_utf8(
                raw, offsets, classes, fold, stop, mode, spans=spans, parallel=False
            )
            blocked = kernels.tokenize_utf8(
                raw, offsets, classes, fold, stop, mode, spans=spans, parallel=True
            )
            for a, b in zip(serial, blocked, strict=True):
                assert a.dtype == b.dtype and a.tolist() == b.tolist()
        h, o = blocked[0], blocked[1]
        expected = [naive.token_hashes(t, **naive_options(tok)) for t in texts]
        assert [h[o[i] : o[i + 1]].tolist() for i in range(len(texts))] == expected
        # the stemming half: distinct words in first-seen order, their spans, the replacement
        _, _, starts, ends, kinds = serial
        distinct, first, inverse = kernels.distinct_words(serial[0], kinds)
        found = kernels.tokenize_words(raw, offsets, classes, fold, stop, mode)
        assert found is not None
        d, s, e, state = found
        assert d.tolist() == distinct.tolist()
        assert s.tolist() == starts[first].tolist() and e.tolist() == ends[first].tolist()
        values = np.arange(d.size, dtype=np.uint64) * np.uint64(3) + np.uint64(11)
        want = kernels.replace_words(serial[0], inverse, values)
        for with_starts in (False, True):
            got, got_offsets, got_starts = kernels.pack_words(state, values, starts=with_starts)
            assert got.tolist() == want.tolist() and got_offsets.tolist() == o.tolist()
            assert got_starts.tolist() == (starts.tolist() if with_starts else [])
    finally:
        kernels.BLOCK_BYTES = saved


def test_block_pass_falls_back_when_a_table_breaks_its_bound():
    # a custom class table with one-byte CJK characters: two tokens per byte overflow a region
    classes = np.zeros(128, dtype=np.uint8)
    classes[ord("a") : ord("z") + 1] = kernels.CJK
    fold = np.arange(128, dtype=np.int32)
    stop = np.zeros(0, dtype=np.uint64)
    raw, offsets = _buffers(["abcdef", "", "xyz uvw", "q"] * 50)
    serial = kernels.tokenize_utf8(raw, offsets, classes, fold, stop, 0, spans=True, parallel=False)
    blocked = kernels.tokenize_utf8(raw, offsets, classes, fold, stop, 0, spans=True, parallel=True)
    assert serial[0].size > raw.size  # more tokens than bytes
    for a, b in zip(serial, blocked, strict=True):
        assert a.tolist() == b.tolist()
    assert kernels.tokenize_words(raw, offsets, classes, fold, stop, 0) is None


@needs_stemmer
def test_stemming_one_pass_batch_against_reference():
    # past PARALLEL_MIN_BYTES: the blocks' path of a stemming tokenizer, and its token starts
    import random

    rng = random.Random(5)
    words = ["Running", "cells", "connection", "généralisations", "ÉTÉ", "the", "ponies", "年假"]
    texts = [
        " ".join(
            rng.choice(words) + rng.choice(["", "s", "ed", "ing", "中", "'s"]) for _ in range(9)
        )
        for _ in range(2500)
    ]
    assert sum(len(t.encode()) for t in texts) > kernels.PARALLEL_MIN_BYTES
    stem = Stemmer.Stemmer("porter").stemWord
    saved = kernels.BLOCK_BYTES
    kernels.BLOCK_BYTES = 4096  # many blocks
    try:
        tok = Tokenizer(stem="porter")
        expected = [naive.token_hashes(t, stem=stem) for t in texts]
        assert hashes_of(tok.tokenize(texts)) == expected
        raw, offsets = _buffers(texts)
        tokens, starts = tok.tokenize_starts(raw, offsets)
        assert hashes_of(tokens) == expected
        plain = Tokenizer()  # the starts are the unstemmed tokens' starts
        _, _, want, _, _ = kernels.tokenize_utf8(raw, offsets, *plain.kernel_tables(), spans=True)
        assert starts.tolist() == want.tolist()
    finally:
        kernels.BLOCK_BYTES = saved
