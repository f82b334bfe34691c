"""The LangChain and LlamaIndex retrievers, with the real packages and their own fake LLMs."""

from __future__ import annotations

import sys

import pytest
from conftest import DOCS

import fastrag
from fastrag import Principal
from fastrag.errors import MissingDependencyError

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")


@pytest.fixture(scope="module")
def kb():
    return fastrag.KnowledgeBase.build(DOCS)


def test_langchain_retriever_returns_documents_with_metadata_ids_and_scores(kb):
    from langchain_core.retrievers import BaseRetriever

    from fastrag.integrations.langchain import FastragRetriever

    retriever = FastragRetriever(kb=kb, k=3)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke("How many days of annual leave?")
    hits = kb.retrieve("How many days of annual leave?", k=3)
    assert [d.page_content for d in docs] == [h.text for h in hits]
    assert [d.id for d in docs] == [str(h.chunk_id) for h in hits]
    first = docs[0].metadata
    assert first["doc_id"] == hits[0].doc_id and first["chunk_id"] == hits[0].chunk_id
    assert first["score"] == pytest.approx(hits[0].score)
    assert first["title"] == hits[0].title and (first["start"], first["end"]) == (
        hits[0].start,
        hits[0].end,
    )


def test_langchain_filters_and_principal(kb):
    from fastrag.integrations.langchain import FastragRetriever

    finance = FastragRetriever(kb=kb, k=5, where={"team": "finance"}).invoke(
        "submitted within days"
    )
    assert {d.metadata["doc_id"] for d in finance} == {"expense"}
    # "leave" is readable by staff only: an outsider never sees it.
    outsider = FastragRetriever(kb=kb, k=10, principal=Principal("guest")).invoke("annual leave")
    staff = FastragRetriever(kb=kb, k=10, principal=Principal("ana", ("staff",))).invoke(
        "annual leave"
    )
    assert "leave" not in {d.metadata["doc_id"] for d in outsider}
    assert "leave" in {d.metadata["doc_id"] for d in staff}


def test_langchain_retrieval_chain_with_a_fake_chat_model(kb):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnableLambda, RunnablePassthrough

    from fastrag.integrations.langchain import FastragRetriever

    prompts = []

    def seen(prompt):
        prompts.append(prompt.to_string())
        return prompt

    retriever = FastragRetriever(kb=kb, k=2, principal=Principal("ana", ("staff",)))
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer only from the context.\n{context}"), ("human", "{question}")]
    )
    chain = (
        {"context": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
         "question": RunnablePassthrough()}
        | prompt | RunnableLambda(seen)
        | FakeListChatModel(responses=["15 days of paid annual leave [1]"])
        | StrOutputParser()
    )  # fmt: skip
    assert chain.invoke("How many days of annual leave?") == "15 days of paid annual leave [1]"
    assert (
        "15 days of paid annual leave per year" in prompts[0]
    )  # the retrieved chunk reached the model


def test_llama_index_retriever_returns_nodes_with_scores(kb):
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship

    from fastrag.integrations.llama_index import FastragRetriever

    retriever = FastragRetriever(kb, k=3)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve("How many days of annual leave?")
    hits = kb.retrieve("How many days of annual leave?", k=3)
    assert [n.node.get_content() for n in nodes] == [h.text for h in hits]
    assert [n.node.node_id for n in nodes] == [str(h.chunk_id) for h in hits]
    assert [n.score for n in nodes] == pytest.approx([h.score for h in hits])
    node = nodes[0].node
    assert node.metadata["doc_id"] == hits[0].doc_id
    assert (node.start_char_idx, node.end_char_idx) == (hits[0].start, hits[0].end)
    assert node.relationships[NodeRelationship.SOURCE].node_id == hits[0].doc_id
    shown = node.get_content(metadata_mode="llm")
    assert "chunk_id" not in shown and "Annual leave" in shown  # identity stays out of prompts


def test_llama_index_filters_and_principal(kb):
    from fastrag.integrations.llama_index import FastragRetriever

    nodes = FastragRetriever(kb, k=5, where={"team": "finance"}).retrieve("submitted within days")
    assert {n.node.metadata["doc_id"] for n in nodes} == {"expense"}
    outsider = FastragRetriever(kb, k=10, principal=Principal("guest")).retrieve("annual leave")
    assert "leave" not in {n.node.metadata["doc_id"] for n in outsider}


def test_llama_index_query_engine_with_the_mock_llm(kb):
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from fastrag.integrations.llama_index import FastragRetriever

    retriever = FastragRetriever(kb, k=2, principal=Principal("ana", ("staff",)))
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    response = engine.query("How many days of annual leave?")
    assert response.source_nodes and response.source_nodes[0].node.metadata["doc_id"] in {
        "leave",
        "leave-zh",
    }
    # MockLLM answers with its prompt: the retrieved chunks were in it.
    assert "15 days of paid annual leave per year" in str(response)


def test_missing_framework_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_core", None)
    monkeypatch.setitem(sys.modules, "langchain_core.callbacks", None)
    monkeypatch.delitem(sys.modules, "fastrag.integrations.langchain", raising=False)
    with pytest.raises(MissingDependencyError, match=r"fastrag-engine\[langchain\]"):
        import fastrag.integrations.langchain  # noqa: F401
    monkeypatch.setitem(sys.modules, "llama_index.core.base.base_retriever", None)
    monkeypatch.delitem(sys.modules, "fastrag.integrations.llama_index", raising=False)
    with pytest.raises(MissingDependencyError, match=r"fastrag-engine\[llama-index\]"):
        import fastrag.integrations.llama_index  # noqa: F401
