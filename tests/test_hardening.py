"""Hostile and careless use: concurrent writers, PII through rerankers, huge k, long questions.

Each test here failed before its fix (issue 13).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from openai_server import CHAT, OpenAIServer

import fastrag
from fastrag import KnowledgeBase, LLMReranker, LLMRewriter, OpenAIChatGenerator
from fastrag.config import ClientConfig
from fastrag.errors import ConfigError
from fastrag.options import MAX_K


def _docs(n: int, start: int = 0, tag: str = "doc") -> list[dict]:
    topics = ["leave policy", "expense report", "remote work", "security badge", "travel class"]
    return [
        {
            "id": f"{tag}-{i}",
            "text": f"Document {i} about the {topics[i % 5]}: rule {i} applies to team {i % 7}.",
        }
        for i in range(start, start + n)
    ]


def test_readers_never_break_or_see_deleted_documents_while_a_writer_writes(tmp_path):
    kb = KnowledgeBase.build(_docs(500))
    deleted: set[str] = set()
    deleted_lock = threading.Lock()
    errors: list[BaseException] = []
    leaks: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        try:
            for step in range(40):
                kb.add(_docs(5, start=1000 + 5 * step, tag="new"))
                victims = [f"doc-{i}" for i in range(step * 6, step * 6 + 6)]
                kb.delete(victims, missing_ok=True)
                with deleted_lock:
                    deleted.update(victims)
                if step % 10 == 9:
                    kb.compact()
                if step % 13 == 12:
                    kb.save(tmp_path / "kb", keep=2)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            stop.set()

    def reader(mode: str) -> None:
        try:
            for _ in range(150):  # a bounded number of operations, not a bounded time
                with deleted_lock:
                    gone = set(deleted)
                for h in kb.retrieve("leave policy", k=5, mode=mode):
                    if h.doc_id in gone:
                        leaks.append(h.doc_id)
                kb.answer("What is the expense report rule?", k=3, mode=mode)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=reader, args=(m,)) for m in ("hybrid", "keyword", "vector")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert not leaks
    assert len(kb) == 500 + 200 - 240


def test_hnsw_readers_drop_labels_added_after_their_version():
    kb = KnowledgeBase.build(_docs(300), index="hnsw")
    old = kb._corpus
    kb.add(_docs(50, start=900, tag="late"))
    q = kb.embed_questions(["leave policy rule 901"])
    rows, _ = old.vectors.search(q, 20)
    assert (rows < old.store.n_rows).all()
    ids = old.store.chunk_ids()[rows[rows >= 0]]
    assert (ids < old.store.next_chunk_id).all()


@pytest.fixture
def server():
    with OpenAIServer() as s:
        yield s


def _config(server: OpenAIServer) -> ClientConfig:
    return ClientConfig(base_url=server.base_url, model="m", api_key=None, max_retries=0)


PII_DOCS = [
    {"id": "a", "text": "Contact alice@example.com or 13812345678 about the leave policy."},
    {"id": "b", "text": "The leave policy allows 15 days a year."},
]


def test_retrieve_with_an_llm_reranker_never_sends_pii(server):
    server.chat_answer = '{"rankings": [{"chunk_id": 1, "relevance_score": 0.9}]}'
    kb = KnowledgeBase.build(PII_DOCS)
    with OpenAIChatGenerator(config=_config(server)) as gen:
        reranker = LLMReranker(gen)  # the generator itself, as the docstring shows
        hits = kb.retrieve("leave policy for bob@example.org", k=2, reranker=reranker)
        kb.retrieve_batch(["leave policy, call 13912345678"], k=2, reranker=reranker)
    assert {h.doc_id for h in hits} == {"a", "b"}
    sent = " ".join(str(r.body) for r in server.requests_to(CHAT))
    assert len(server.requests_to(CHAT)) == 2
    for secret in ("alice@example.com", "13812345678", "bob@example.org", "13912345678"):
        assert secret not in sent
    assert "[EMAIL]" in sent and "[PHONE]" in sent


def test_llm_rewriter_and_reranker_accept_a_generator_and_report_fallbacks(server, caplog):
    kb = KnowledgeBase.build(PII_DOCS)
    server.chat_answer = '{"query": "annual leave policy", "intent": "factual"}'
    with OpenAIChatGenerator(config=_config(server)) as gen:
        kb.rewriter = LLMRewriter(gen)
        ans = kb.answer("How many days of leave?", k=2)
        assert ans.query.source == "llm" and ans.query.text == "annual leave policy"
        assert len(server.requests_to(CHAT)) == 1
        server.chat_answer = "no JSON here"
        seen: list[tuple[str, dict]] = []
        with caplog.at_level("WARNING"):
            ans = kb.answer(
                "How many days of leave?", k=2, reranker=LLMReranker(gen),
                on_stage=lambda name, s, info: seen.append((name, dict(info))),
            )  # fmt: skip
        assert ans.query.source == "rules" and "ModelResponseError" in ans.query.fallback
        assert any(n == "rerank" and "ModelResponseError" in i.get("fallback", "") for n, i in seen)
        assert "LLM rewriter failed" in caplog.text and "reranker failed" in caplog.text
    with pytest.raises(ConfigError):
        LLMRewriter(object())


def test_k_is_capped_by_the_rows_and_absurd_values_are_refused(kb):
    hits = kb.retrieve("leave", k=MAX_K)
    assert 0 < len(hits) <= len(kb)
    table = kb.retrieve_batch(["leave", "expense"], k=MAX_K, mode="vector")
    assert table.num_rows <= 2 * len(kb)
    assert len(kb.answer("leave", k=MAX_K).hits) <= len(kb)
    for bad in (MAX_K + 1, 10**9, 2**63, 0, -1, 2.0, True, "5"):
        with pytest.raises(ConfigError):
            kb.retrieve("leave", k=bad)
        with pytest.raises(ConfigError):
            kb.answer_batch(["leave"], k=bad)


def test_long_questions_are_refused_with_a_clear_error(kb):
    limit = kb._retriever.config.max_question_chars
    kb.retrieve("leave " * (limit // 6), k=2, mode="keyword")  # just under the limit: fine
    with pytest.raises(ConfigError, match="characters"):
        kb.retrieve("x" * (limit + 1))
    table = kb.answer_batch(["leave", "y" * (limit + 1)])
    assert table["error"][1].as_py() and "characters" in table["error"][1].as_py()
    strict = KnowledgeBase.build(
        [{"id": "a", "text": "leave"}], retrieval=fastrag.RetrievalConfig(max_question_chars=10)
    )
    with pytest.raises(ConfigError):
        strict.retrieve("leave leave leave")


class _Embedder:
    """A plugged-in embedder: hashed words, so case and stop words change the vector."""

    dim = 64

    def embed(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                out[i, hash(w) % self.dim] += 1.0
        return out

    def config(self):
        return {"type": "test-hashed-words", "dim": self.dim}


def test_vector_leg_embeds_the_question_as_asked():
    docs = _docs(200)
    kb = KnowledgeBase.build(docs, embedder=_Embedder())
    questions = ["What is The Leave policy?", "How do I file an Expense report", "rule 17 applies"]
    for q in questions:
        hits = kb.retrieve(q, k=10, mode="vector")
        truth_rows, truth_scores = kb.search(kb.embed_questions([q]), 10, exact=True)
        assert [h.chunk_id for h in hits] == kb._corpus.store.chunk_ids()[truth_rows[0]].tolist()
        assert [h.score for h in hits] == pytest.approx(truth_scores[0].tolist(), rel=1e-5)


def _luhn_card(prefix: str, length: int) -> str:
    digits = [int(c) for c in prefix]
    while len(digits) < length - 1:
        digits.append(len(digits) % 10)
    for check in range(10):
        cand = digits + [check]
        total = 0
        for i, d in enumerate(reversed(cand)):
            if i % 2 == 1:
                d = d * 2 - 9 if d * 2 > 9 else d * 2
            total += d
        if total % 10 == 0:
            return "".join(map(str, cand))
    raise AssertionError


def test_pii_cut_by_a_window_boundary_never_reaches_the_model(server):
    card = _luhn_card("6222", 19)
    head = "Refund policy: refunds are paid to the card on file within ten days. " * 3
    text = (
        head[:182] + " card " + card + " is the company card. " + "Other rules follow here. " * 12
    )
    assert text.index(card) < 200 < text.index(card) + len(card)  # the first window cuts it
    kb = KnowledgeBase.build([{"id": "r", "text": text}], window=200, overlap=40)
    with OpenAIChatGenerator(config=_config(server)) as gen:
        first = kb.answer(
            "refunds are paid to the card on file within ten days", k=1, generator=gen
        )
        both = kb.answer("refunds card on file company card", k=3, generator=gen)
    assert card[:12] in first.hits[0].text and card not in first.hits[0].text  # a cut window
    sent = " ".join(str(r.body) for r in server.requests_to(CHAT))
    runs = [card[i : i + 5] for i in range(len(card) - 4)]
    assert not any(run in sent for run in runs)
    assert "[NUMBER]" in sent and first.pii.get("PARTIAL_NUMBER", 0) >= 1
    assert any("[BANK_CARD]" in str(r.body) for r in server.requests_to(CHAT)) or both.pii


def test_per_principal_keyword_statistics_close_the_side_channel():
    from fastrag import Principal

    visible = [
        {"id": f"v{i}", "text": f"The travel policy covers trip {i} and hotels."} for i in range(6)
    ]
    hidden = {
        "id": "h",
        "text": "Project Falcon merger with Acme: falcon falcon.",
        "acl": ["board"],
    }
    staff = Principal(user="s", groups=["staff"])
    q = "falcon travel policy"
    seen = {}
    for label, docs in (("without", visible), ("with", [*visible, hidden])):
        kb = KnowledgeBase.build(docs)
        plain = kb.retrieve(q, k=3, mode="keyword", principal=staff, acl_statistics="global")
        private = kb.retrieve(
            q, k=3, mode="keyword", principal=staff, acl_statistics="per_principal"
        )
        assert all(h.doc_id != "h" for h in plain + private)
        seen[label] = (
            [(h.chunk_id, h.relevance) for h in plain],
            [(h.chunk_id, h.relevance) for h in private],
        )
        ans = kb.answer(q, k=3, mode="keyword", principal=staff, acl_statistics="per_principal")
        seen[label + " confidence"] = ans.confidence
    # Global statistics (an explicit opt-out) leak: a hidden document holding "falcon" changes what the caller sees.
    assert [r for _, r in seen["without"][0]] != pytest.approx(
        [r for _, r in seen["with"][0]], abs=1e-4
    )
    # Per-principal statistics do not: the caller's results are the same with or without it.
    assert [c for c, _ in seen["without"][1]] == [c for c, _ in seen["with"][1]]
    assert [r for _, r in seen["without"][1]] == pytest.approx(
        [r for _, r in seen["with"][1]], rel=1e-5
    )
    assert seen["without confidence"] == pytest.approx(seen["with confidence"], rel=1e-5)


def test_per_principal_scores_equal_an_index_of_the_admitted_rows():
    from fastrag.index.keyword import BM25Index
    from fastrag.index.masked_bm25 import search_masked
    from fastrag.text.tokenize import Tokenizer

    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 9)))) for _ in range(60)]
    mask = rng.random(60) < 0.5
    tok = Tokenizer()
    full = BM25Index.from_texts(texts, tok)
    sub_rows = np.flatnonzero(mask)
    sub = BM25Index.from_texts([texts[i] for i in sub_rows], tok)
    tokens = tok.tokenize(["alpha beta", "gamma gamma zeta", "nothing"])
    rows, scores, weights = search_masked(full, tokens, 10, mask)
    ref_rows, ref_scores = sub.search_tokens(tokens, 10)
    np.testing.assert_allclose(
        np.where(rows >= 0, scores, 0), np.where(ref_rows >= 0, ref_scores, 0), rtol=1e-5
    )
    assert (np.where(ref_rows >= 0, sub_rows[np.maximum(ref_rows, 0)], -1) == rows).all()
    np.testing.assert_allclose(weights, sub.query_weights(tokens), rtol=1e-5)


def test_full_width_digits_and_cut_values_reach_no_model_stage(server):
    """The reported leak: a full-width phone (and an IP cut by a window) sent raw to models."""
    from fastrag.answer.conflicts import LLMConflictCheck
    from fastrag.answer.verify import LLMJudge

    phone = "１３８１２３４５６７８"
    ip = "192.168.10.77"
    text = f"The leave policy gives 15 days a year; ask HR at {phone}. " + "x" * 150 + f" {ip} is "
    cut = text.index(ip) + 5  # a window edge inside the address
    docs = [{"id": "a", "text": text}, {"id": "b", "text": "The leave policy gives 20 days."}]
    kb = KnowledgeBase.build(docs, window=cut, overlap=0)
    assert any(h.text.rstrip().endswith(ip[:5]) for h in kb.retrieve("leave policy", k=5))
    server.chat_answer = '{"rankings": [{"chunk_id": 0, "relevance_score": 0.9}]}'
    with OpenAIChatGenerator(config=_config(server)) as gen:
        kb.rewriter = LLMRewriter(gen)
        kb.answer(
            f"leave policy days? call {phone} or 192.168.10.77", k=4, generator=gen,
            reranker=LLMReranker(gen), judge=LLMJudge(gen), detect_conflicts=LLMConflictCheck(gen),
        )  # fmt: skip
    sent = " ".join(str(r.body) for r in server.requests_to(CHAT))
    assert len(server.requests_to(CHAT)) >= 4  # rewriter, reranker, generator, judge (+ conflicts)
    for secret in (phone, "13812345678", "1381234", "１３８１２３４", ip, ".10.77", "168.10"):
        assert secret not in sent, secret
