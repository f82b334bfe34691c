"""Hostile input gets a named error and bounded work: lone surrogates, deep or huge filters."""

from __future__ import annotations

import orjson
import pytest

import fastrag.retrieve.filters as filters
from fastrag import KnowledgeBase, Principal
from fastrag.errors import ConfigError, DocumentError
from fastrag.retrieve.filters import MAX_WHERE_CONDITIONS, MAX_WHERE_DEPTH


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        ({"id": "a\ud800", "text": "some text"}, r"position 0: id 'a\\ud800'"),
        ({"id": "a", "text": "some text", "title": "\udc00"}, "document 'a': title"),
        ({"id": "a", "text": "some text", "source": "é\ud800"}, "document 'a': source"),
        ({"id": "a", "text": "some text", "acl": ["hr", "\ud800"]}, "document 'a': acl entry"),
        ({"id": "a", "text": "some text", "team": "\ud800"}, "document 'a': metadata"),
    ],
)
def test_a_lone_surrogate_is_a_document_error_naming_the_document(kb, doc, named):
    before = len(kb)
    with pytest.raises(DocumentError, match=named):
        KnowledgeBase.build([doc])
    with pytest.raises(DocumentError, match=named):
        kb.add([doc])
    assert len(kb) == before  # nothing half-added


def _nested_dict(depth: int) -> dict:
    cond: dict = {}
    inner = cond
    for _ in range(depth - 1):
        inner["eq"] = {}
        inner = inner["eq"]
    return cond


def _nested_list(depth: int) -> list:
    out: list = []
    inner = out
    for _ in range(depth - 1):
        inner.append([])
        inner = inner[0]
    return out


@pytest.mark.parametrize("make", [_nested_dict, _nested_list])
def test_a_ten_thousand_deep_where_is_a_config_error(kb, make):
    with pytest.raises(ConfigError, match="nests deeper"):
        kb.retrieve("leave", where={"team": make(10_000)})
    with pytest.raises(ConfigError, match="nests deeper"):
        kb.retrieve_batch(["leave"], where={"team": make(MAX_WHERE_DEPTH)})
    kb.retrieve("leave", where={"team": {"in": ["finance", "x"]}})  # ordinary nesting


def test_the_number_of_conditions_is_capped(kb):
    with pytest.raises(ConfigError, match="at most 1,024 conditions"):
        kb.retrieve("leave", where={f"k{i}": i for i in range(100_000)})
    with pytest.raises(ConfigError, match="more than 1,024 conditions"):
        kb.retrieve("leave", where={f"k{i}": {"gte": 0, "lte": 9} for i in range(600)})
    at_cap = {f"k{i}": i for i in range(MAX_WHERE_CONDITIONS - 1)} | {"team": "finance"}
    assert kb.retrieve("expense reports", where=at_cap) == []  # nobody has k0..: no match


def test_metadata_is_parsed_once_per_distinct_object_not_per_condition(monkeypatch):
    docs = [
        {"id": f"d{i}", "text": f"text number {i}", "team": f"t{i % 50}", "n": i}
        for i in range(200)
    ]
    kb = KnowledgeBase.build(docs)
    calls = []
    real = orjson.loads

    class Counting:
        JSONEncodeError = orjson.JSONEncodeError
        OPT_SORT_KEYS, OPT_NON_STR_KEYS = orjson.OPT_SORT_KEYS, orjson.OPT_NON_STR_KEYS
        dumps = staticmethod(orjson.dumps)

        @staticmethod
        def loads(raw):
            calls.append(raw)
            return real(raw)

    monkeypatch.setattr(filters, "orjson", Counting)
    where = {f"k{i}": i for i in range(500)} | {"team": "t3"}
    assert kb.retrieve("text number", k=5, where=where) == []
    assert 0 < len(calls) <= 200  # one parse per distinct metadata object, whatever the keys
    calls.clear()
    where = {"team": "t3", "n": {"in": list(range(0, 200, 3))}}
    hits = kb.retrieve("text number", k=10, where=where)
    assert hits and all(h.metadata["team"] == "t3" and h.metadata["n"] % 3 == 0 for h in hits)
    assert len(calls) <= 200
    calls.clear()
    # Rows already excluded by a column condition are not parsed at all.
    assert kb.retrieve("text number", where={"doc_id": "d7", "team": "t7"})[0].doc_id == "d7"
    assert len(calls) == 1


def test_membership_keeps_equality_semantics_for_unhashable_values():
    kb = KnowledgeBase.build(
        [
            {"id": "a", "text": "alpha document", "tags": ["x", "y"], "n": 1},
            {"id": "b", "text": "beta document", "tags": ["z"], "n": 2.0},
        ]
    )
    tags = {"tags": {"in": [["x", "y"]]}}
    assert [h.doc_id for h in kb.retrieve("document", where=tags)] == ["a"]
    assert [h.doc_id for h in kb.retrieve("document", where={"n": [2, "q"]})] == ["b"]
    assert [h.doc_id for h in kb.retrieve("document", where={"n": {"not_in": [2]}})] == ["a"]


def test_a_lone_surrogate_in_a_filter_or_principal_is_a_config_error(kb):
    with pytest.raises(ConfigError, match="not valid text"):
        kb.retrieve("leave", where={"team": "\ud800"})
    with pytest.raises(ConfigError, match="not valid text"):
        kb.retrieve("leave", principal=Principal(user="\ud800"))


# -- lone surrogates in sync ids, document text and questions ----------------------------


@pytest.mark.parametrize(
    ("doc", "named"),
    [
        (
            {"id": "b\ud800", "text": "some text"},
            r"id 'b\\ud800' is not valid Unicode .*character 1",
        ),
        ({"id": "b", "text": "some \udc00 text"}, r"document 'b'.*text is not valid Unicode.*5"),
        ({"id": "b", "text": "some text", "team": "\ud800"}, "document 'b'.*metadata"),
    ],
)
def test_sync_names_a_lone_surrogate_instead_of_a_type_error(kb, doc, named):
    before = len(kb)
    with pytest.raises(DocumentError, match=named):
        kb.sync([doc])
    with pytest.raises(DocumentError, match=named):
        kb.sync([{"id": "ok", "text": "fine"}, doc])
    assert len(kb) == before


def test_a_lone_surrogate_in_document_text_names_the_document(kb):
    with pytest.raises(DocumentError, match=r"document 'b'.*text .*lone surrogate.*character 3"):
        kb.add([{"id": "b", "text": "abc\ud800"}])


@pytest.mark.parametrize("method", ["retrieve", "answer", "retrieve_batch"])
def test_a_lone_surrogate_in_a_question_is_named(kb, method):
    question = "leave \ud800 days"
    arg = [question] if method == "retrieve_batch" else question
    with pytest.raises(ConfigError, match=r"question.*lone surrogate '\\ud800' at character 6"):
        getattr(kb, method)(arg)
