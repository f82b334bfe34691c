"""Chunker and the chunking kernel against the pure-Python reference (tests/naive/chunking.py)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from conftest import examples
from fastrag._native import chunking as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive.chunking import WHITESPACE, chunk_text

from fastrag._threads import max_threads, threads
from fastrag.errors import ConfigError, DocumentError, FastragError
from fastrag.text.chunking import Chunker, Chunks

ROOT = Path(__file__).resolve().parents[1]
JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")


def expected(texts: list[str], window: int, overlap: int) -> list[tuple[int, int, int, int, str]]:
    """``(doc, ord, start, end, text)`` of every chunk, from the reference."""
    out = []
    for i, text in enumerate(texts):
        for k, (start, end, chunk) in enumerate(chunk_text(text, window, overlap)):
            out.append((i, k, start, end, chunk))
    return out


def rows(chunks: Chunks) -> list[tuple[int, int, int, int, str]]:
    texts = chunks.texts()
    return [
        (int(d), int(o), int(s), int(e), t)
        for d, o, s, e, t in zip(
            chunks.chunk_doc,
            chunks.chunk_ord,
            chunks.chunk_start,
            chunks.chunk_end,
            texts,
            strict=True,
        )
    ]


def check(texts: list[str], window: int = 200, overlap: int = 40) -> Chunks:
    """Chunk ``texts`` and assert the result equals the reference, field by field."""
    chunks = Chunker(window=window, overlap=overlap).chunk(texts)
    assert chunks.n_docs == len(texts)
    assert rows(chunks) == expected(texts, window, overlap)
    assert_layout(chunks)
    # One thread or several: the same arrays.
    with threads(1):
        single = Chunker(window=window, overlap=overlap).chunk(texts)
    for name in ("chunk_doc", "chunk_ord", "chunk_start", "chunk_end", "text_offsets", "text_data"):
        assert np.array_equal(getattr(chunks, name), getattr(single, name))
    return chunks


def assert_layout(chunks: Chunks) -> None:
    n = len(chunks)
    for name, dtype, size in (
        ("chunk_doc", np.int64, n),
        ("chunk_ord", np.int32, n),
        ("chunk_start", np.int64, n),
        ("chunk_end", np.int64, n),
        ("text_offsets", np.int64, n + 1),
        ("text_data", np.uint8, int(chunks.text_offsets[-1])),
    ):
        array = getattr(chunks, name)
        assert array.dtype == dtype, name
        assert array.shape == (size,), name
        assert array.flags.c_contiguous, name
        assert not array.flags.writeable, name
    assert chunks.text_offsets[0] == 0
    assert np.all(np.diff(chunks.text_offsets) >= 0)


def utf8_layout(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    parts = [t.encode() for t in texts]
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets


# ---------------------------------------------------------------------------
# The reference itself (so that a wrong twin cannot make wrong tests pass)


def test_reference_whitespace_set_is_python_isspace() -> None:
    codes = [ord(c) for c in WHITESPACE]
    assert codes == [
        *range(0x09, 0x0E), *range(0x1C, 0x21), 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
        0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
    ]  # fmt: skip


def test_reference_small_example() -> None:
    assert chunk_text("  ab \t\n cd  ", 3, 1) == [(0, 3, "ab "), (2, 5, " cd")]


# ---------------------------------------------------------------------------
# Edge cases

EDGE = {
    "empty": [""],
    "only-space": [" "],
    "only-white-space": [" \t\n\r\x0b\x0c\u3000\u00a0\u2028 "],
    "one-char": ["x"],
    "exactly-window": ["a" * 10],
    "window-plus-one": ["a" * 11],
    "window-minus-one": ["a" * 9],
    "two-windows-exactly": ["b" * 18],
    "leading-trailing": ["   hello world   "],
    "crlf": ["line one\r\nline two\r\n\r\nline three\r\n"],
    "cjk": ["知识库问答系统。" * 5],
    "cjk-with-ideographic-space": ["知识库\u3000\u3000问答　系统" * 4],
    "emoji": ["😀🎉 👍🏽 " * 6 + "🇫🇷"],
    "combining": ["e\u0301 a\u0300 n\u0303" * 5],
    "mixed": ["Hello, 世界! 😀 café\u00a0naïve \u2003 end"],
    "nbsp-runs": ["a\u00a0\u00a0b \u00a0 c\u2000\u200a\u202f\u205fd"],
    "ascii-control-not-space": ["a\x00b\x01c\x1bd\x7fe \x08 f"],
    "fs-gs-rs-us": ["a\x1cb\x1dc\x1ed\x1ff"],
    "next-line-u85": ["a\u0085b \u0085 c"],
    "zero-width-space-is-not-space": ["a\u200bb \u200b c\ufeffd"],
    "lookalike-leads": ["“quoted” — dash… 、。「」 \u2010\u2030 \u3001\u3002 ¢£¥ \u1681"],
    "many-docs": ["", "a", " ", "a b", "\n\n", "x" * 25, "", "末尾 "],
}


@pytest.mark.parametrize("texts", list(EDGE.values()), ids=list(EDGE))
@pytest.mark.parametrize(("window", "overlap"), [(10, 3), (10, 0), (10, 9), (1, 0), (3, 2)])
def test_edge_cases(texts: list[str], window: int, overlap: int) -> None:
    check(texts, window, overlap)


@pytest.mark.parametrize("space", WHITESPACE, ids=[f"U+{ord(c):04X}" for c in WHITESPACE])
def test_every_white_space_character(space: str) -> None:
    texts = [
        space,
        space * 3,
        f"a{space}b",
        f"{space}a{space}{space}b{space}",
        f"知{space} {space}识",
        f"x {space}" * 30 + "y",  # long enough for the block path
        ("abcdefgh" * 5 + space) * 6,
    ]
    for window, overlap in ((7, 2), (200, 40)):
        check(texts, window, overlap)


def test_white_space_runs_of_all_kinds() -> None:
    rng = random.Random(7)
    texts = []
    for _ in range(50):
        parts = []
        for _ in range(rng.randint(1, 30)):
            parts.append(rng.choice(["word", "字词", "é", "😀", "x" * rng.randint(1, 70)]))
            parts.append("".join(rng.choice(WHITESPACE) for _ in range(rng.randint(0, 4))))
        texts.append("".join(parts))
    for window, overlap in ((5, 1), (37, 10), (200, 40)):
        check(texts, window, overlap)


def test_white_space_at_every_block_offset() -> None:
    # The kernel tests 32-byte blocks: put the white space at each offset.
    texts = []
    for pos in range(70):
        for space in (" ", "  ", "\n", "\u3000", "\u00a0", " \u2029"):
            texts.append("a" * pos + space + "b" * (70 - pos))
            texts.append("字" * (pos // 3) + "a" * (pos % 3) + space + "b" * 40)
    for window, overlap in ((8, 3), (33, 0), (64, 63)):
        check(texts, window, overlap)


def test_window_boundaries_at_every_byte_offset() -> None:
    base = "ab字😀cd é" * 30
    for window in range(1, 45):
        check([base, base[:window], base[: window + 1]], window, window // 3)


def test_many_documents_in_one_batch() -> None:
    rng = random.Random(3)
    alphabet = ["a", "b", " ", "  ", "\n", "字", "😀", "\u3000", "é", ""]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400))) for _ in range(600)]
    chunks = check(texts, 50, 10)
    assert np.all(np.diff(chunks.chunk_doc) >= 0)


def test_synthetic_corpus() -> None:
    from fastrag.datasets.synthetic import mixed_texts

    texts = mixed_texts(150_000, seed=5)
    check(texts, 200, 40)
    check(texts, 64, 0)


def test_single_long_document() -> None:
    text = ("Retrieval 检索 augmented\t\tgeneration  生成。\n" * 2000).strip()
    check([text], 200, 40)


# ---------------------------------------------------------------------------
# Inputs: pyarrow arrays, slices, read-only buffers, threads


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string()])
def test_arrow_input_equals_list_input(arrow_type: pa.DataType) -> None:
    texts = ["a b  c", "", "知识\u3000库 " * 40, "x" * 300]
    chunker = Chunker(window=20, overlap=5)
    from_list = chunker.chunk(texts)
    from_arrow = chunker.chunk(pa.array(texts, type=arrow_type))
    assert rows(from_arrow) == rows(from_list)


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string()])
def test_sliced_arrow_array(arrow_type: pa.DataType) -> None:
    texts = ["first doc, skipped", "  second  doc ", "第三 个\n文档" * 30, "", "last one here"]
    array = pa.array(texts, type=arrow_type)[1:4]
    assert array.offset == 1
    chunks = Chunker(window=12, overlap=4).chunk(array)
    assert chunks.n_docs == 3
    assert rows(chunks) == expected(texts[1:4], 12, 4)


def test_chunked_arrow_array() -> None:
    texts = ["alpha beta", "gamma  delta", "epsilon"]
    array = pa.chunked_array([pa.array(texts[:1]), pa.array(texts[1:])])
    assert rows(Chunker(window=6, overlap=2).chunk(array)) == expected(texts, 6, 2)


def test_kernel_offsets_not_starting_at_zero() -> None:
    data, offsets = utf8_layout(["JUNK  junk", "  real text here  ", "字 字", "more junk"])
    chunks = kernels.chunk_utf8(data, offsets[1:4].copy(), 5, 2)
    doc, _, start, end, text_offsets, text_data = chunks
    got = [
        (int(doc[i]), int(start[i]), int(end[i]), bytes(text_data[a:b]).decode())
        for i, (a, b) in enumerate(zip(text_offsets[:-1], text_offsets[1:], strict=True))
    ]
    texts = ["  real text here  ", "字 字"]
    want = [(i, s, e, c) for i, t in enumerate(texts) for s, e, c in chunk_text(t, 5, 2)]
    assert got == want


@pytest.mark.parametrize("data_writable", [True, False])
@pytest.mark.parametrize("offsets_writable", [True, False])
def test_kernel_read_only_inputs(data_writable: bool, offsets_writable: bool) -> None:
    texts = ["  read-only \u3000 buffers ", "", "知识库" * 20]
    data, offsets = utf8_layout(texts)
    data = data.copy()
    data.flags.writeable = data_writable
    offsets.flags.writeable = offsets_writable
    before = data.copy()
    out = kernels.chunk_utf8(data, offsets, 7, 3)
    assert np.array_equal(data, before)  # inputs are never written
    assert out[0].tolist() == [i for i, t in enumerate(texts) for _ in chunk_text(t, 7, 3)]
    texts_out = [bytes(out[5][out[4][i] : out[4][i + 1]]).decode() for i in range(out[0].size)]
    assert texts_out == [c for t in texts for _, _, c in chunk_text(t, 7, 3)]


def test_kernel_empty_batch() -> None:
    out = kernels.chunk_utf8(np.zeros(0, np.uint8), np.zeros(1, np.int64), 5, 1)
    assert [a.size for a in out] == [0, 0, 0, 0, 1, 0]
    assert out[4][0] == 0


def test_kernel_survives_malformed_utf8() -> None:
    # Never reached through the Chunker (Arrow strings are valid UTF-8); the
    # result is unspecified but the kernel must stay in bounds and consistent.
    rng = np.random.default_rng(0)
    for _ in range(50):
        data = rng.integers(0, 256, rng.integers(0, 300), dtype=np.uint8)
        cuts = np.sort(rng.integers(0, data.size + 1, 4))
        offsets = np.concatenate([[0], cuts, [data.size]]).astype(np.int64)
        doc, _, start, end, text_offsets, text_data = kernels.chunk_utf8(data, offsets, 9, 4)
        assert text_offsets[-1] == text_data.size
        assert np.all(start < end) and np.all(np.diff(text_offsets) >= 0)
        assert np.all((doc >= 0) & (doc < offsets.size - 1))


def test_threads_give_the_same_result() -> None:
    texts = ["word " * 100 + "字" * 77] * 40 + [""]
    one = Chunker(window=30, overlap=7).chunk(texts, threads=1)
    default = Chunker(window=30, overlap=7).chunk(texts)
    assert rows(one) == rows(default)


def test_bad_threads() -> None:
    with pytest.raises(ConfigError):
        Chunker().chunk(["a"], threads=0)


@pytest.mark.skipif(JIT_DISABLED, reason="no signatures without the JIT")
def test_warmup_covers_writable_and_read_only_inputs() -> None:
    kernels.warmup()
    before = (len(kernels._windows_pass.signatures), len(kernels._copy_pass.signatures))
    # Writable and read-only callers share the one compiled signature.
    texts = ["a b", "知识 库"]
    data, offsets = utf8_layout(texts)
    for d_writable in (True, False):
        for o_writable in (True, False):
            d, o = data.copy(), offsets.copy()
            d.flags.writeable, o.flags.writeable = d_writable, o_writable
            kernels.chunk_utf8(d, o, 2, 1)
    after = (len(kernels._windows_pass.signatures), len(kernels._copy_pass.signatures))
    assert after == before == (1, 1)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_kernel_thread_counts_agree(n_threads: int) -> None:
    texts = ["  a b\u3000c ", "", "知识 库\n" * 50, "x" * 70 + " \u2029 " + "y" * 40] * 20
    data, offsets = utf8_layout(texts)
    with threads(min(n_threads, max_threads())):
        out = kernels.chunk_utf8(data, offsets, 9, 4)
    got = [bytes(out[5][out[4][i] : out[4][i + 1]]).decode() for i in range(out[0].size)]
    assert got == [c for t in texts for _, _, c in chunk_text(t, 9, 4)]


@pytest.mark.skipif(JIT_DISABLED, reason="already running without the JIT")
def test_kernels_run_without_the_jit(tmp_path: Path) -> None:
    # Kernel bodies must stay valid Python (coverage runs use NUMBA_DISABLE_JIT=1).
    # Run outside the checkout: its fastrag/ folder lacks _native and would
    # shadow the installed package.
    code = textwrap.dedent(
        """
        from fastrag.text.chunking import Chunker
        from naive.chunking import chunk_text
        texts = ["  a  b\\u3000c ", "", "知识 库\\n" * 9, "x" * 70 + " \\u2029 " + "y" * 40]
        got = [c for c in Chunker(window=6, overlap=2).chunk(texts).texts()]
        want = [c for t in texts for _, _, c in chunk_text(t, 6, 2)]
        assert got == want, (got, want)
        """
    )
    env = dict(os.environ, NUMBA_DISABLE_JIT="1", PYTHONPATH=str(ROOT / "tests"))
    subprocess.run(
        [sys.executable, "-W", "error", "-c", code], cwd=tmp_path, env=env, check=True, timeout=120
    )


# ---------------------------------------------------------------------------
# Result object


def test_chunks_object() -> None:
    chunks = Chunker(window=4, overlap=1).chunk(["one  two\n three", "", "x"])
    assert len(chunks) == 5
    assert chunks.texts() == ["one ", " two", "o th", "hree", "x"]
    assert chunks.chunk_doc.tolist() == [0, 0, 0, 0, 2]
    assert chunks.chunk_ord.tolist() == [0, 1, 2, 3, 0]
    assert "5 chunks of 3 documents" in repr(chunks)
    array = chunks.text_array()
    assert isinstance(array, pa.LargeStringArray)
    assert array.to_pylist() == chunks.texts()
    # zero-copy: the Arrow array is backed by the numpy buffers
    assert array.buffers()[2].address == chunks.text_data.ctypes.data
    assert array.buffers()[1].address == chunks.text_offsets.ctypes.data
    with pytest.raises(ValueError):
        chunks.text_data[0] = 0


def test_split() -> None:
    chunker = Chunker(window=4, overlap=1)
    assert chunker.split("one  two\n three") == ["one ", " two", "o th", "hree"]
    assert Chunker().split(" \n ") == []


def test_iterable_of_texts() -> None:
    texts = ["a b", "", "知 识"]
    assert rows(Chunker(2, 1).chunk(iter(texts))) == expected(texts, 2, 1)
    assert rows(Chunker(2, 1).chunk(np.array(texts))) == expected(texts, 2, 1)


def test_empty_batch() -> None:
    chunks = Chunker().chunk([])
    assert len(chunks) == 0 and chunks.n_docs == 0
    assert chunks.texts() == []


# ---------------------------------------------------------------------------
# Configuration and errors


def test_chunker_value_semantics() -> None:
    assert Chunker() == Chunker(200, 40)
    assert Chunker(10, 2) != Chunker(10, 3)
    assert hash(Chunker(10, 2)) == hash(Chunker(10, 2))
    assert repr(Chunker(10, 2)) == "Chunker(window=10, overlap=2, mode='windows')"
    c = Chunker(np.int64(10), np.int32(2))
    assert c == Chunker(10, 2) and type(c.window) is int
    with pytest.raises(AttributeError):
        c.window = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("window", "overlap", "match"),
    [
        (10, 10, "window=10, overlap=10"),
        (5, 9, "window=5, overlap=9"),
        (0, 0, "window=0, overlap=0"),
        (10, -1, "overlap=-1"),
        (True, 0, "window must be an int"),
        (10, False, "overlap must be an int"),
        (10.0, 2, "window must be an int"),
        ("10", 2, "window must be an int"),
        (None, 2, "window must be an int"),
    ],
)
def test_bad_config(window: object, overlap: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Chunker(window=window, overlap=overlap)  # type: ignore[arg-type]


@pytest.mark.parametrize("n_before", [0, 3, 100])  # both encoding paths (small and pyarrow)
@pytest.mark.parametrize("bad", [None, b"bytes", 1, bytearray(b"x")])
def test_non_str_text(n_before: int, bad: object) -> None:
    texts = ["ok"] * n_before + [bad, "ok"]
    with pytest.raises(DocumentError, match=f"index {n_before}"):
        Chunker().chunk(texts)  # type: ignore[arg-type]


@pytest.mark.parametrize("n_before", [0, 100])
def test_lone_surrogate(n_before: int) -> None:
    with pytest.raises(DocumentError, match=f"index {n_before}"):
        Chunker().chunk(["ok"] * n_before + ["bad \ud800 text"])


def test_null_in_arrow_array() -> None:
    with pytest.raises(DocumentError, match="index 1"):
        Chunker().chunk(pa.array(["a", None, "c"]))


def test_non_string_arrow_array() -> None:
    with pytest.raises(DocumentError, match="int64"):
        Chunker().chunk(pa.array([1, 2]))


def test_single_string_is_refused() -> None:
    with pytest.raises(DocumentError, match="single str"):
        Chunker().chunk("a document")  # type: ignore[arg-type]


def test_errors_are_fastrag_errors() -> None:
    assert issubclass(ConfigError, FastragError) and issubclass(ConfigError, ValueError)
    assert issubclass(DocumentError, FastragError) and issubclass(DocumentError, ValueError)


# ---------------------------------------------------------------------------
# Properties

_PIECES = st.sampled_from(
    [*WHITESPACE, "a", "Z", "7", ".", "é", "ß", "字", "知识", "。", "、", "“", "—", "😀", "👍🏽",
     "e\u0301", "\u200b", "\x00", "\x7f", "\u1681", "\u2030", "\u3001"]
)  # fmt: skip
_TEXT = st.one_of(
    st.lists(_PIECES, max_size=60).map("".join),
    st.lists(st.one_of(_PIECES, st.text(min_size=1, max_size=40)), max_size=30).map("".join),
    st.text(max_size=200),
    st.text(st.characters(codec="utf-8", categories=["Zs", "Zl", "Zp", "Cc", "Lo"]), max_size=100),
)


@st.composite
def _window_overlap(draw: st.DrawFn) -> tuple[int, int]:
    window = draw(st.integers(1, 80))
    return window, draw(st.integers(0, window - 1))


@settings(max_examples=examples(200), deadline=None, derandomize=True)
@given(texts=st.lists(_TEXT, max_size=8), wo=_window_overlap())
def test_matches_reference(texts: list[str], wo: tuple[int, int]) -> None:
    check(texts, *wo)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(texts=st.lists(_TEXT, min_size=1, max_size=6), wo=_window_overlap())
def test_chunks_cover_the_normalised_text(texts: list[str], wo: tuple[int, int]) -> None:
    window, overlap = wo
    chunks = Chunker(window, overlap).chunk(texts)
    for i, text in enumerate(texts):
        mine = [c for c, d in zip(chunks.texts(), chunks.chunk_doc, strict=True) if d == i]
        clean = " ".join(text.split())
        if not mine:
            assert clean == ""
            continue
        step = window - overlap
        rebuilt = "".join(c[:step] for c in mine[:-1]) + mine[-1]
        assert rebuilt == clean
        assert all(len(c) == window for c in mine[:-1]) and 0 < len(mine[-1]) <= window
