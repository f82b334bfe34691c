"""Keyword statistics of a caller with a principal count only the rows it may read.

With BM25 statistics over every row, a visible hit's keyword score moves when
a document the caller may not read holds a query word: a dictionary oracle on
hidden content. The default (``acl_statistics=None``) resolves to per-principal
statistics whenever a principal is given, in the library and over HTTP.
"""

from __future__ import annotations

import json

import httpx
import orjson
import pytest
from serve_harness import ThreadServer, save_kb

from fastrag import KnowledgeBase, Principal, RetrievalOptions, VocabularyEmbedder
from fastrag.errors import ConfigError
from fastrag.serve import ServeSettings

VISIBLE = [
    {"id": f"v{i}", "text": f"The travel policy covers trip {i} and hotels."} for i in range(6)
]
HIDDEN = {"id": "h", "text": "Project Falcon merger with Acme: falcon falcon.", "acl": ["board"]}
STAFF = Principal(user="s", groups=["staff"])
QUESTION = "falcon travel policy"
KEY = "staff-key-0123456789"


def _embedder() -> VocabularyEmbedder:
    """One fitted character vocabulary for both knowledge bases.

    The default embedder learns its characters from the whole corpus, so the
    vector leg of two knowledge bases built apart differs anyway; pinning it
    isolates the keyword statistics under test.
    """
    return VocabularyEmbedder().fit([d["text"] for d in [*VISIBLE, HIDDEN]])


def _pair() -> dict[str, KnowledgeBase]:
    """Two knowledge bases that differ only in one document the caller may not read."""
    return {
        "without": KnowledgeBase.build(VISIBLE, embedder=_embedder()),
        "with": KnowledgeBase.build([*VISIBLE, HIDDEN], embedder=_embedder()),
    }


@pytest.fixture(scope="module")
def pair() -> dict[str, KnowledgeBase]:
    return _pair()


def _seen(hits):
    return [(h.chunk_id, h.doc_id) for h in hits], [x for h in hits for x in (h.score, h.relevance)]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_hidden_document_does_not_move_visible_scores_by_default(pair, mode):
    seen = {}
    for label, kb in pair.items():
        hits = kb.retrieve(QUESTION, k=3, mode=mode, principal=STAFF)
        assert hits and all(h.doc_id != "h" for h in hits)
        batch = kb.retrieve_batch([QUESTION, "hotels falcon"], k=3, mode=mode, principal=STAFF)
        ans = kb.answer(QUESTION, k=3, mode=mode, principal=STAFF)
        seen[label] = (_seen(hits), batch.column("score").to_pylist(), ans.confidence)
    (ids0, scores0), batch0, conf0 = seen["without"]
    (ids1, scores1), batch1, conf1 = seen["with"]
    assert ids0 == ids1
    assert scores1 == pytest.approx(scores0, rel=1e-5)
    assert batch1 == pytest.approx(batch0, rel=1e-5)
    assert conf1 == pytest.approx(conf0, rel=1e-5)


def test_global_statistics_are_an_explicit_opt_out_and_leak(pair):
    rel = {
        label: [
            h.relevance
            for h in kb.retrieve(
                QUESTION, k=3, mode="keyword", principal=STAFF, acl_statistics="global"
            )
        ]
        for label, kb in pair.items()
    }
    assert rel["with"] != pytest.approx(rel["without"], abs=1e-4)  # the documented leak


def test_default_resolves_by_principal():
    assert RetrievalOptions().acl_statistics is None
    assert RetrievalOptions().keyword_statistics == "global"
    assert RetrievalOptions(where={"doc_id": "x"}).keyword_statistics == "global"
    assert RetrievalOptions(principal=STAFF).keyword_statistics == "per_principal"
    explicit = RetrievalOptions(principal=STAFF, acl_statistics="global")
    assert explicit.keyword_statistics == "global"
    assert RetrievalOptions(acl_statistics="per_principal").keyword_statistics == "per_principal"
    with pytest.raises(ConfigError, match="acl_statistics"):
        RetrievalOptions(acl_statistics="private")


def test_trusted_caller_keeps_global_scores(pair):
    kb = pair["with"]
    trusted = kb.retrieve(QUESTION, k=3, mode="keyword")
    explicit = kb.retrieve(QUESTION, k=3, mode="keyword", acl_statistics="global")
    assert [(h.chunk_id, h.score) for h in trusted] == [(h.chunk_id, h.score) for h in explicit]


# -- over HTTP ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = tmp_path_factory.mktemp("aclstats")
    kbs = (
        ("without", str(save_kb(VISIBLE, root / "without", embedder=_embedder()))),
        ("with", str(save_kb([*VISIBLE, HIDDEN], root / "with", embedder=_embedder()))),
    )
    keys = root / "keys.json"
    keys.write_text(json.dumps({"keys": [{"key": KEY, "user": "s", "groups": ["staff"]}]}))
    with (
        ThreadServer(ServeSettings(kbs=kbs, keys=str(keys), reload_interval=0)) as keyed,
        ThreadServer(ServeSettings(kbs=kbs, reload_interval=0)) as trusted,
    ):
        yield keyed, trusted


def _post(server, path, body, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(server.url + path, content=orjson.dumps(body), headers=headers, timeout=30)


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_http_tenant_gets_per_principal_statistics(servers, mode):
    keyed, _ = servers
    scores = {}
    for kb in ("without", "with"):
        r = _post(keyed, "/v1/retrieve", {"question": QUESTION, "kb": kb, "mode": mode}, KEY)
        assert r.status_code == 200, r.text
        hits = r.json()["hits"]
        assert hits and all(h["doc_id"] != "h" for h in hits)
        scores[kb] = [(h["chunk_id"], h["score"]) for h in hits]
        r = _post(keyed, "/v1/answer", {"question": QUESTION, "kb": kb, "mode": mode}, KEY)
        assert r.status_code == 200, r.text
        scores[kb + " confidence"] = r.json()["confidence"]
    assert [c for c, _ in scores["with"]] == [c for c, _ in scores["without"]]
    assert [s for _, s in scores["with"]] == pytest.approx(
        [s for _, s in scores["without"]], rel=1e-5
    )
    assert scores["with confidence"] == pytest.approx(scores["without confidence"], rel=1e-5)


def test_http_accepts_the_field_and_refuses_global_to_keyed_callers(servers):
    keyed, trusted = servers
    body = {"question": QUESTION, "kb": "with", "mode": "keyword"}
    for value in ("per_principal", None):
        r = _post(keyed, "/v1/retrieve", {**body, "acl_statistics": value}, KEY)
        assert r.status_code == 200, r.text
    chat = {"model": "with", "messages": [{"role": "user", "content": QUESTION}]}
    for path, req in (
        ("/v1/retrieve", body),
        ("/v1/retrieve/batch", {"questions": [QUESTION], "kb": "with"}),
        ("/v1/answer", body),
        ("/v1/chat/completions", chat),
    ):
        r = _post(keyed, path, {**req, "acl_statistics": "global"}, KEY)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["error"]["type"] == "not_allowed"
        assert "acl_statistics" in r.json()["error"]["message"]
        assert _post(trusted, path, {**req, "acl_statistics": "global"}).status_code == 200
    r = _post(keyed, "/v1/retrieve", {**body, "acl_statistics": "everyone"}, KEY)
    assert r.status_code == 400 and "acl_statistics" in r.json()["error"]["message"]


@pytest.mark.parametrize(("n", "k"), [(400, 3), (400, 50), (60, 10)])
def test_per_principal_top_k_equals_an_index_of_the_admitted_rows(n, k):
    """Also where only the k best of many matching rows are sorted (ties kept by row)."""
    import numpy as np

    from fastrag.index.keyword import BM25Index
    from fastrag.index.masked_bm25 import search_masked
    from fastrag.text.tokenize import Tokenizer

    rng = np.random.default_rng(n + k)
    words = ["alpha", "beta", "gamma", "delta"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 4)))) for _ in range(n)]
    mask = rng.random(n) < 0.5
    tok = Tokenizer()
    full = BM25Index.from_texts(texts, tok)
    sub_rows = np.flatnonzero(mask)
    sub = BM25Index.from_texts([texts[i] for i in sub_rows], tok)
    tokens = tok.tokenize(["alpha", "alpha beta", "gamma delta delta"])
    rows, scores, _ = search_masked(full, tokens, k, mask)
    ref_rows, ref_scores = sub.search_tokens(tokens, k)
    np.testing.assert_allclose(
        np.where(rows >= 0, scores, 0), np.where(ref_rows >= 0, ref_scores, 0), rtol=1e-5
    )
    assert (np.where(ref_rows >= 0, sub_rows[np.maximum(ref_rows, 0)], -1) == rows).all()
