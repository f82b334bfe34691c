"""Structure-aware chunking (native/structure.py) against the reference (tests/naive/chunking.py)."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from conftest import examples
from fastrag._native import chunking as window_kernels
from fastrag._native import structure as kernels
from hypothesis import given, settings
from hypothesis import strategies as st
from naive.chunking import (
    WHITESPACE,
    normalise,
    structure_chunks,
    structure_records,
    structure_units,
)

from fastrag._threads import max_threads, threads
from fastrag.errors import ConfigError
from fastrag.text.chunking import Chunker, Chunks

JIT_DISABLED = os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")

GUIDE = """# Guide

Intro paragraph, line one
continues on line two.

## Install

- pip install fastrag-engine
- a second item
  with a lazy continuation line

| Fault code | Symptom | Fix |
|---|---|---|
| SV0432 | spindle overheats | check coolant level |

```
# a comment, not a heading

more code
```

### Deep
final words
"""


def expected(texts: list[str], window: int, overlap: int) -> list[tuple]:
    out = []
    for i, text in enumerate(texts):
        records = structure_records(text, window, overlap)
        for k, (s, e, chunk, section) in enumerate(structure_chunks(text, window, overlap)):
            out.append((i, k, s, e, chunk, section, *records[k]))
    return out


def rows(chunks: Chunks) -> list[tuple]:
    sections = chunks.section_array()
    assert sections is not None
    assert chunks.chunk_table is not None and chunks.chunk_row is not None
    return [
        (int(d), int(o), int(s), int(e), t, sec, int(tb), int(r))
        for d, o, s, e, t, sec, tb, r in zip(
            chunks.chunk_doc, chunks.chunk_ord, chunks.chunk_start, chunks.chunk_end,
            chunks.texts(), sections.to_pylist(), chunks.chunk_table, chunks.chunk_row,
            strict=True,
        )
    ]  # fmt: skip


def check(texts: list[str], window: int = 200, overlap: int = 40) -> Chunks:
    chunker = Chunker(window=window, overlap=overlap, mode="structure")
    chunks = chunker.chunk(texts)
    got = rows(chunks)
    assert got == expected(texts, window, overlap)
    for d, _, s, e, t, *_ in got:
        assert normalise(texts[d])[s:e] == t  # offsets are exact
        assert len(t) <= window
    with threads(1):
        single = chunker.chunk(texts)
    assert rows(single) == got
    return chunks


def test_guide_units_and_sections():
    kinds = [k for _, _, k, _ in structure_units(GUIDE)]
    assert kinds == [
        "heading", "para", "heading", "list", "list", "table", "table", "table", "fence",
        "heading", "para",
    ]  # fmt: skip
    chunks = check([GUIDE], window=80, overlap=10)
    by_text = dict(zip(chunks.texts(), chunks.section_array().to_pylist(), strict=True))
    assert by_text["### Deep final words"] == "Guide > Install > Deep"
    assert any(t.startswith("``` # a comment") for t in by_text)  # code stays code
    row = "| SV0432 | spindle overheats | check coolant level |"
    assert any(row in t for t in by_text)  # a table row is never split


def test_units_are_whole_when_they_fit():
    chunks = check([GUIDE], window=200, overlap=40)
    norm = normalise(GUIDE)
    units = [norm[s:e] for s, e, _, _ in structure_units(GUIDE)]
    for unit in units:
        assert any(unit in t for t in chunks.texts()), unit


def test_long_unit_is_cut_by_sliding_windows():
    para = " ".join(f"word{i}" for i in range(100))
    chunks = check([f"# Title\n\n{para}\n\nshort tail"], window=50, overlap=10)
    texts = chunks.texts()
    assert texts[0].startswith("# Title word0")  # the heading goes with the unit it heads
    assert texts[-1] == "short tail"
    starts, ends = chunks.chunk_start.tolist(), chunks.chunk_end.tolist()
    for k in range(len(texts) - 2):
        assert starts[k + 1] == ends[k] - 10


def test_no_heading_gives_null_section_and_plain_text_is_windows():
    text = "one sentence after another " * 30
    chunks = check([text], window=60, overlap=12)
    assert set(chunks.section_array().to_pylist()) == {None}
    plain = Chunker(window=60, overlap=12).chunk([text])
    assert chunks.texts() == plain.texts()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n \t ",
        "#",
        "# ",
        "##\nbody",
        "####### seven is not a heading",
        "#hashtag is not a heading",
        "1. one\n2) two\n1234567890. not a list\n-not a list\n+ plus",
        "```\nunclosed fence\n\n# still code",
        "~~~\n```\n~~~\nafter",
        "| a |\n| b |\n\n|c|",
        "text\r\n\r\n# crlf heading\r\nbody\r\n",
        "a\u2028b\u3000c\n\u3000# indented heading\n\u00a0- item",
        "# 标题\n\n中文段落，没有空格。" * 3,
        "# A\n## B\n### C\n## D\ntext\n# E\ntext",
    ],
)
def test_edge_cases(text):
    for window, overlap in ((200, 40), (5, 2), (1, 0)):
        check([text], window, overlap)


def test_batch_of_several_documents_and_empty_ones():
    texts = ["", GUIDE, "# only a heading", "plain", "  ", GUIDE.replace("#", "##")]
    chunks = check(texts, window=70, overlap=7)
    assert chunks.n_docs == len(texts)


_PIECES = st.sampled_from(
    [
        "# ",
        "## ",
        "###### ",
        "####### ",
        "- ",
        "* ",
        "+ ",
        "1. ",
        "12) ",
        "| ",
        "```",
        "~~~",
        "\n",
        "\n\n",
        " ",
        "\t",
        "\u3000",
        "\u2028",
        "\r\n",
        "word",
        "词语",
        "é",
        "#",
        "-",
        "|",
        "x" * 30,
        "Fault code: ",
        "a: ",
        " | ",
        " |\u3000",
        ":",
        "Fix: check the coolant | ",
    ]  # fmt: skip
)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.lists(_PIECES, max_size=40).map("".join), min_size=1, max_size=4),
    st.integers(1, 40),
    st.data(),
)
def test_matches_reference(texts, window, data):
    overlap = data.draw(st.integers(0, window - 1))
    check(texts, window, overlap)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab#|-1.`~: \n") + list(WHITESPACE[:8])), max_size=80))
def test_matches_reference_on_any_text(text):
    check([text], 9, 3)


def test_join_chunks_rebuilds_documents():
    texts = [GUIDE, "", "plain words " * 20, "# h\n\n" + "long " * 80]
    for mode in ("structure", "windows"):
        chunks = Chunker(window=50, overlap=10, mode=mode).chunk(texts)
        counts = np.bincount(chunks.chunk_doc, minlength=len(texts))
        doc_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        data, offsets = kernels.join_chunks(
            chunks.text_data, chunks.text_offsets, chunks.chunk_start, chunks.chunk_end, doc_starts
        )
        docs = pa.LargeStringArray.from_buffers(
            len(texts), pa.py_buffer(offsets), pa.py_buffer(data)
        ).to_pylist()
        assert docs == [normalise(t) for t in texts]
        if mode == "windows":
            old = window_kernels.join_windows(chunks.text_data, chunks.text_offsets, doc_starts, 10)
            assert np.array_equal(old[0], data) and np.array_equal(old[1], offsets)


def test_mode_is_validated_and_saved():
    with pytest.raises(ConfigError, match="chunking must be one of"):
        Chunker(mode="sentences")
    assert Chunker(mode="structure").config() == {"window": 200, "overlap": 40, "mode": "structure"}
    assert Chunker().config() == {"window": 200, "overlap": 40}
    assert Chunker().chunk(["a b"]).section_array() is None


@pytest.mark.skipif(JIT_DISABLED, reason="no signatures without the JIT")
def test_warmup_covers_what_the_chunker_calls():
    kernels.warmup()
    passes = (kernels._structure_pass, kernels._write_pass, kernels._joined_sizes)
    before = [len(p.signatures) for p in passes]
    Chunker(window=20, overlap=4, mode="structure").chunk(["# a\n\nb c", "知识 库"])
    data = np.frombuffer(b"# a\n\nb c", dtype=np.uint8).copy()  # writable input too
    kernels.structure_utf8(data, np.array([0, data.size], dtype=np.int64), 5, 1)
    assert [len(p.signatures) for p in passes] == before == [1, 1, 1]


@pytest.mark.parametrize("n_threads", [1, 2])
def test_thread_counts_agree(n_threads):
    texts = [GUIDE, "", "知识 库\n" * 50, "# x\n" + "y" * 70 + "\n\n- z"] * 20
    with threads(min(n_threads, max_threads())):
        chunks = Chunker(window=30, overlap=5, mode="structure").chunk(texts)
    assert rows(chunks) == expected(texts, 30, 5)
