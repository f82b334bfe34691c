"""The lightweight ontology: aliases expand the keyword legs, saved with the snapshot (issue 25)."""

from __future__ import annotations

import json

import pytest
from fastrag.datasets.ontology_set import generate

import fastrag
from fastrag.cli import main
from fastrag.corpus.ontology import Ontology
from fastrag.errors import (
    ConfigError,
    DuplicateAliasError,
    OntologyError,
    UnknownRelationTargetError,
)
from fastrag.store.snapshots import read_manifest

SEED_YAML = """\
entities:
  - name: fault_code
    aliases: [报警代码, 故障码, alarm number]
    relations:
      - {to: repair_action, via: caused_by}
      - {to: work_order, via: recorded_in}
  - name: repair_action
    aliases: [维修措施, remedy step]
  - name: work_order
    aliases: [工单]
"""
DOCS = [
    {"id": "codes", "text": "Fault code 432 means the spindle amplifier is overheating."},
    {"id": "actions", "text": "Repair action for an overheating amplifier: clean its fan."},
    {"id": "orders", "text": "Every work order lists the technician and the machine serial."},
    {"id": "pumps", "text": "Coolant pumps are greased once a month with lithium grease."},
]


@pytest.fixture
def yaml_path(tmp_path):
    path = tmp_path / "ontology.yaml"
    path.write_text(SEED_YAML, encoding="utf-8")
    return path


def test_the_seed_format_reads_and_round_trips(yaml_path):
    onto = Ontology.from_yaml(yaml_path)
    assert [e.name for e in onto.entities] == ["fault_code", "repair_action", "work_order"]
    assert onto.entities[0].aliases == ("报警代码", "故障码", "alarm number")
    assert [(r.to, r.via) for r in onto.entities[0].relations] == [
        ("repair_action", "caused_by"),
        ("work_order", "recorded_in"),
    ]
    assert Ontology.from_dict(json.loads(onto.to_json())) == onto


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        (
            {"entities": [{"name": "a", "relations": [{"to": "b", "via": "x"}]}]},
            UnknownRelationTargetError,
            "'b', which is not an entity",
        ),
        (
            {"entities": [{"name": "a", "aliases": ["x"]}, {"name": "b", "aliases": ["X"]}]},
            DuplicateAliasError,
            "alias 'x' names both 'a' and 'b'",
        ),
        ({"entities": [{"name": "a"}, {"name": "a"}]}, DuplicateAliasError, "defined twice"),
        ({"entities": [{"name": "a", "aliases": "x"}]}, OntologyError, "list of strings"),
        ({"entities": [{"name": ""}]}, OntologyError, "name must be"),
        ({"entities": [{"name": "a", "relations": [{"to": "a"}]}]}, OntologyError, "to: NAME"),
        ({"entities": [{"name": "a", "colour": 1}]}, OntologyError, "unknown key"),
        ({"things": []}, OntologyError, "'entities'"),
        ([], OntologyError, "'entities'"),
    ],
)
def test_validation_errors_are_named(data, error, match):
    with pytest.raises(error, match=match):
        Ontology.from_dict(data)
    assert issubclass(error, ConfigError)


def test_yaml_is_read_safely(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("entities: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(OntologyError, match="not valid YAML"):
        Ontology.from_yaml(evil)
    with pytest.raises(OntologyError, match="cannot read"):
        Ontology.from_yaml(tmp_path / "missing.yaml")


def test_expansion_adds_canonical_and_related_terms(yaml_path):
    onto = Ontology.from_yaml(yaml_path)
    assert onto.expand("What does alarm number 432 mean?") == ("fault code",)
    assert onto.expand("故障码 432 是什么意思") == ("fault code",)
    # Relation-aware: a cue word (fix, 怎么处理) or the relation's name adds the related terms.
    related = onto.expand("报警代码 432 怎么处理")
    assert related[0] == "fault code" and {"repair action", "work order", "工单"} <= set(related)
    assert "repair action" in onto.expand("what is alarm number 432 caused by")
    assert onto.expand("Coolant pumps") == ()
    assert onto.expand("alarm numbers") == ()  # whole words only for Latin terms


def test_answers_show_the_expansion_and_the_vector_leg_sees_the_question(yaml_path):
    kb = fastrag.KnowledgeBase.build(DOCS, ontology=yaml_path)
    question = "What does alarm number 432 mean?"
    ans = kb.answer(question)
    assert ans.hits[0].doc_id == "codes"
    assert ans.rewrites["ontology"] == ["fault code"]
    assert "fault code" in ans.rewrites["keywords"]
    assert ans.query.text == question  # what the vector leg embeds
    assert ans.to_dict()["rewrites"]["ontology"] == ["fault code"]
    plain = fastrag.KnowledgeBase.build(DOCS)
    assert plain.answer(question).rewrites["ontology"] == []
    # In vector mode nothing is rewritten: the legs' inputs are the question as asked.
    vec = kb.retrieve(question, 4, mode="vector")
    assert [h.doc_id for h in vec] == [h.doc_id for h in plain.retrieve(question, 4, mode="vector")]
    # The related documents come in for a relation-aware question.
    docs = {h.doc_id for h in kb.retrieve("报警代码怎么处理", 3, group_by="doc")}
    assert {"codes", "actions", "orders"} <= docs


def test_set_ontology_replaces_without_rebuild_and_is_saved_with_the_snapshot(yaml_path, tmp_path):
    kb = fastrag.KnowledgeBase.build(DOCS)
    store = kb._corpus.store
    kb.set_ontology(yaml_path)
    assert kb._corpus.store is store and kb.ontology is not None
    with pytest.raises(DuplicateAliasError):
        kb.set_ontology({"entities": [{"name": "a", "aliases": ["x"]}, {"name": "x"}]})
    assert kb.ontology == Ontology.from_yaml(yaml_path)  # unchanged by the failed replace
    path = tmp_path / "kb"
    first = kb.save(path, tag="with-ontology", keep=None)
    files = read_manifest(path).snapshot(first).files
    assert "ontology.json" in files
    saved = json.loads((path / "snapshots" / first / "ontology.json").read_text())
    assert saved["entities"][0]["name"] == "fault_code"
    loaded = fastrag.KnowledgeBase.load(path)
    assert loaded.ontology == kb.ontology
    assert loaded.answer("alarm number 432").rewrites["ontology"] == ["fault code"]
    loaded.set_ontology({"entities": [{"name": "pump", "aliases": ["泵"]}]})
    loaded.save(path, keep=None)
    again = fastrag.KnowledgeBase.load(path)
    assert [e.name for e in again.ontology.entities] == ["pump"]
    # An older snapshot answers with its own ontology.
    old = again.answer("alarm number 432", snapshot="with-ontology")
    assert old.rewrites["ontology"] == ["fault code"]
    assert again.answer("alarm number 432").rewrites["ontology"] == []
    again.set_ontology(None)
    again.save(path, keep=None)
    assert fastrag.KnowledgeBase.load(path).ontology is None


def test_cli_index_ontology(yaml_path, tmp_path, capsys):
    src = tmp_path / "docs"
    src.mkdir()
    for d in DOCS:
        (src / f"{d['id']}.txt").write_text(d["text"], encoding="utf-8")
    kb_dir = tmp_path / "kb"
    assert main(["index", str(src), "--kb", str(kb_dir), "--ontology", str(yaml_path)]) == 0
    kb = fastrag.KnowledgeBase.load(kb_dir)
    assert kb.ontology == Ontology.from_yaml(yaml_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("entities:\n  - {name: a, relations: [{to: nowhere, via: x}]}\n")
    capsys.readouterr()
    assert main(["index", str(src), "--kb", str(kb_dir), "--ontology", str(bad)]) != 0
    assert "'nowhere', which is not an entity" in capsys.readouterr().err
    assert fastrag.KnowledgeBase.load(kb_dir).ontology == Ontology.from_yaml(yaml_path)
    # A sync into the existing knowledge base replaces the ontology, without a rebuild.
    other = tmp_path / "other.yaml"
    other.write_text("entities:\n  - {name: coolant_pump, aliases: [冷却泵]}\n")
    assert main(["index", str(src), "--kb", str(kb_dir), "--ontology", str(other)]) == 0
    assert [e.name for e in fastrag.KnowledgeBase.load(kb_dir).ontology.entities] == [
        "coolant_pump"
    ]


def test_aliases_only_questions_find_canonical_documents():
    docs, ontology, questions = generate(30, seed=1)
    kb = fastrag.KnowledgeBase.build(docs)

    def rate() -> float:
        hits = [
            doc in {h.doc_id for h in kb.retrieve(q, 5, group_by="doc")} for q, doc, _ in questions
        ]
        return sum(hits) / len(hits)

    without = rate()
    kb.set_ontology(ontology)
    with_ = rate()
    assert with_ >= 0.9 and without <= 0.3, (with_, without)
