"""The retriever: questions in, ranked rows (and hits) out.

A :class:`Corpus` is one immutable version of what retrieval searches: the
chunk store, its vector index and its keyword indexes. Writers never change
a published corpus; they build the next one and swap it in, so a reader
holding a corpus sees one consistent state from its first leg to its last
hit, whatever runs beside it.

:class:`Retriever` runs the steps of retrieval over a corpus:

1. **rewrite** -- the query rewriter turns each question into keywords for
   the keyword legs; the vector leg embeds the question as asked (or an
   LLM rewriter's query). A model-backed rewriter sees redacted text.
2. **masks** -- ``where`` and the principal become one row mask
   (:func:`~fastrag.retrieve.masks.eligible_rows`) that every leg applies
   before ranking.
3. **legs** -- the vector leg (:class:`~fastrag.index.base.VectorIndex`),
   chunk BM25 and document BM25, each asked for ``oversample * k``
   candidates when they are fused.
4. **fusion** -- weighted reciprocal rank fusion (a Numba kernel), or one
   leg alone; ``group_by="doc"`` keeps each document's best chunk.
5. **relevance** -- in ``[0, 1]`` whatever the mode (see
   :mod:`fastrag.options`).
6. **hits and rerank** -- rows become :class:`~fastrag.Hit` objects read
   straight from the Arrow buffers; an optional reranker reorders them (an
   LLM reranker sees redacted text) and can never add one.

Everything here works on a corpus built by hand, without a knowledge base.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._native import fusion as _fusion_kernels
from .._native import readonly
from .._native.bm25 import PARALLEL_MIN_QUERIES as _SERIAL_QUERIES
from .._threads import threads as _threads
from ..corpus import Corpus
from ..embed.base import query_vectors
from ..errors import ConfigError
from ..index.masked_bm25 import search_masked
from ..index.stores.base import StoreIndex
from ..options import RetrievalConfig, RetrievalOptions, check_mode
from ..text.pii import Redactor
from ..text.route import classify_question
from ..types import Hit, Hits
from .filters import pushdown
from .fusion import FusionPlan, fusion_plan
from .masks import eligible_rows
from .rerank import apply_reranker
from .rewrite import LLMRewriter, QueryRewriter, RewrittenQuery, chat_callable

__all__ = ["Ranked", "Retriever", "redacting_chat"]

log = logging.getLogger(__name__)

_NO_GROUPS = np.zeros(0, np.int64)


@dataclass(frozen=True, eq=False)
class Ranked:
    """Ranked rows of a batch of questions.

    Attributes
    ----------
    rows : numpy.ndarray
        int64 ``(m, k')``, best first, ``-1`` padding.
    scores : numpy.ndarray
        float32, the mode's ranking score of each row.
    relevance : numpy.ndarray
        float32 in ``[0, 1]`` (0 beside padding).
    queries : list of RewrittenQuery
        The questions as retrieval saw them.
    mode : str
        The mode used.
    """

    rows: np.ndarray
    scores: np.ndarray
    relevance: np.ndarray
    queries: list[RewrittenQuery]
    mode: str


class _Legs(NamedTuple):
    """What the legs returned for a batch, and their fusion (a tuple: built once per call)."""

    rows: np.ndarray  # fused (or the one leg's) rows
    scores: np.ndarray
    query_vectors: np.ndarray | None
    vector_rows: np.ndarray | None
    keyword_rows: np.ndarray | None
    keyword_scores: np.ndarray | None
    keyword_weight: np.ndarray | None  # per question: the sum of its tokens' idf


def _takes_history(rewriter: Any) -> bool:
    """Whether ``rewriter`` takes ``history=`` (fastrag's rewriters do; plain callables may not)."""
    if isinstance(rewriter, (LLMRewriter, QueryRewriter)):
        return True
    try:
        return "history" in inspect.signature(rewriter).parameters
    except (TypeError, ValueError):
        return False


def redacting_chat(chat: Any, redactor: Redactor) -> Callable[..., Any]:
    """A ``chat(messages, **kw)`` callable that redacts every message before it is sent.

    Parameters
    ----------
    chat : object
        A chat client (with ``chat(messages, **kw)``) or that callable.
    redactor : Redactor
        The PII rules.

    Returns
    -------
    callable
        ``chat(messages, **kw) -> (text, usage)`` of the redacted messages.
    """
    fn = chat_callable(chat)

    def redacted(messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> Any:
        clean = [
            {**msg, "content": redactor.redact(msg["content"]).text}
            if isinstance(msg.get("content"), str)
            else dict(msg)
            for msg in messages
        ]
        return fn(clean, **kwargs)

    return redacted


def _stack_scores(parts: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    """Leg scores as one ``(L, m, c)`` float32 array (padding 0) for ``convex_fuse``."""
    out = np.zeros(shape, dtype=np.float32)
    for i, x in enumerate(parts):
        out[i, :, : x.shape[1]] = x
    return out


def _lookup(rows: np.ndarray, keys: np.ndarray, values: np.ndarray, default: float) -> np.ndarray:
    """Per question, the value ``keys``/``values`` give each of ``rows`` (``default`` if absent)."""
    if rows.size == 0 or keys.size == 0:
        return np.full(rows.shape, default, dtype=np.float32)
    return _fusion_kernels.lookup(  # type: ignore[no-any-return]
        readonly(np.ascontiguousarray(rows, dtype=np.int64)),
        readonly(np.ascontiguousarray(keys, dtype=np.int64)),
        readonly(np.ascontiguousarray(values, dtype=np.float32)),
        float(default),
    )


class Retriever:
    """Rewrite, search, fuse, filter and rerank (see the module docstring).

    Parameters
    ----------
    config : RetrievalConfig, optional
        Default mode and fusion settings.
    rewriter : callable, optional
        ``rewriter(question) -> RewrittenQuery``; default
        :class:`~fastrag.QueryRewriter` (no synonyms).
    redactor : Redactor, optional
        PII rules for text a model-backed rewriter or reranker is sent.
    """

    def __init__(
        self,
        config: RetrievalConfig | None = None,
        rewriter: Any = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.config = config or RetrievalConfig()
        self.rewriter = rewriter if rewriter is not None else QueryRewriter()
        self.redactor = redactor or Redactor()
        self._plan: tuple[Any, Any, FusionPlan] | None = None  # (config, embedder, plan)

    def _fusion(self, embedder: Any) -> FusionPlan:
        """The fusion plan of ``embedder`` under the current config (resolved once, then reused)."""
        cached, cfg = self._plan, self.config
        if cached is not None and cached[0] is cfg and cached[1] is embedder:
            return cached[2]
        plan = fusion_plan(cfg, embedder)
        self._plan = (cfg, embedder, plan)  # one assignment: threads see the old or the new
        return plan

    # -- rewriting -------------------------------------------------------------
    def rewrite(
        self,
        questions: Sequence[str],
        options: RetrievalOptions,
        *,
        redact: bool = True,
        keep_intent: bool = False,
        ontology: Any = None,
    ) -> list[RewrittenQuery]:
        """The questions as the legs see them (see :class:`~fastrag.RewrittenQuery`).

        In vector mode the rule-based rewrite is skipped (it feeds only the
        keyword legs) unless ``keep_intent`` asks for its intent label.
        ``ontology`` (:class:`~fastrag.retrieve.ontology.Ontology`) adds the
        canonical and related terms of the entities a question names to its
        keyword query (never to the text the vector leg embeds).
        """
        out = self._rewrite(questions, options, redact=redact, keep_intent=keep_intent,
                            ontology=ontology)  # fmt: skip
        if options.route == "off":
            return out
        return [
            dataclasses.replace(
                r, route=classify_question(q) if options.route == "auto" else options.route
            )
            if isinstance(r, RewrittenQuery)
            else r
            for q, r in zip(questions, out, strict=True)
        ]

    def _rewrite(
        self, questions: Sequence[str], options: RetrievalOptions, *, redact: bool,
        keep_intent: bool, ontology: Any,
    ) -> list[RewrittenQuery]:  # fmt: skip
        rewriter = self.rewriter
        if not options.rewrite or rewriter is None:
            return [RewrittenQuery(original=q, text=q, keywords=q) for q in questions]
        mode = self.config.mode if options.mode is None else options.mode
        if mode == "vector" and type(rewriter) is QueryRewriter and not keep_intent:
            # The rule-based rewrite feeds the keyword legs only: nothing to do.
            return [RewrittenQuery(original=q, text=q, keywords=q) for q in questions]
        if redact and isinstance(rewriter, LLMRewriter):
            rewriter = dataclasses.replace(
                rewriter, chat=redacting_chat(rewriter.chat, self.redactor)
            )
        if options.history and _takes_history(rewriter):
            out = [rewriter(q, history=options.history) for q in questions]
        else:
            out = [rewriter(q) for q in questions]
        if ontology is not None and mode != "vector":
            out = [
                r.with_ontology(ontology.expand(q)) if isinstance(r, RewrittenQuery) else r
                for q, r in zip(questions, out, strict=True)
            ]
        return out

    def rerank(
        self, question: str, hits: list[Hit], reranker: Any, *, redact: bool, failures: list[str]
    ) -> list[Hit]:
        """Reorder ``hits`` with ``reranker``; with ``redact`` it reads redacted text only.

        A reranker may send what it is given to a model (an
        :class:`~fastrag.LLMReranker` does; a cross-encoder service would),
        so it is handed the redacted question and hits (cut digit runs at
        window edges included, see :meth:`fastrag.Redactor.redact_hits`) and
        its order is mapped back to the original hits by chunk id.
        """
        if not redact or len(hits) < 2:
            return apply_reranker(reranker, question, hits, failures)
        shown, _ = self.redactor.redact_hits(hits)
        ordered = apply_reranker(reranker, self.redactor.redact(question).text, shown, failures)
        original = {h.chunk_id: h for h in hits}
        return [original[h.chunk_id] for h in ordered]

    # -- ranking ---------------------------------------------------------------
    def rank(
        self,
        corpus: Corpus,
        queries: list[RewrittenQuery],
        k: int,
        options: RetrievalOptions,
    ) -> Ranked:
        """Ranked rows, scores and relevances of rewritten questions.

        Parameters
        ----------
        corpus : Corpus
            What to search.
        queries : list of RewrittenQuery
            From :meth:`rewrite`.
        k : int
            Results per question (capped by the rows of the store).
        options : RetrievalOptions
            Mode, filters, principal, exact, grouping, threads.

        Returns
        -------
        Ranked
            ``(m, k')`` arrays, ``k' = min(k, rows)``.
        """
        cfg = self.config
        mode = check_mode(cfg.mode if options.mode is None else options.mode)
        if mode != "vector" and corpus.keyword is None:
            raise ConfigError(
                f"mode {mode!r} needs the keyword index: build with keyword=True, "
                "or use mode='vector'"
            )
        store = corpus.store
        n_rows = store.n_rows
        m = len(queries)
        k = min(k, n_rows)
        if k == 0 or m == 0:
            empty = np.full((m, 0), -1, dtype=np.int64)
            return Ranked(
                empty, np.zeros((m, 0), np.float32), np.zeros((m, 0), np.float32), queries, mode
            )
        if mode == "keyword" and options.threads is None and m < _SERIAL_QUERIES:
            # A few keyword questions: every kernel inside runs serially whatever the
            # setting, so no scope (its two thread switches cost more than the search).
            return self._rank(corpus, queries, k, options, mode)
        # One thread scope for the whole call: the kernels inside then find the count
        # they need already set (small corpora: one thread, no switch per kernel).
        with _threads(options.threads, work=n_rows * store.dim * 4 * m):
            return self._rank(corpus, queries, k, options, mode)

    def _rank(
        self, corpus: Corpus, queries: list[RewrittenQuery], k: int, options: RetrievalOptions,
        mode: str,
    ) -> Ranked:  # fmt: skip
        cfg = self.config
        store = corpus.store
        n_rows = store.n_rows
        mask = eligible_rows(store, options.where, options.principal)
        group_by = options.group_by
        fused = mode == "hybrid" or group_by is not None
        width = min(n_rows, k * cfg.oversample if fused else k)
        if group_by:
            width = min(n_rows, max(width, 10 * k))  # documents have several chunks each
        while True:
            legs = self._legs(corpus, queries, k, width, mode, mask, options)
            if not group_by or width >= n_rows:
                break
            # Grouping can leave fewer than k documents when a few long
            # documents took every candidate: widen and search again, as long
            # as some leg had more candidates to give (a full list).
            full = any(
                x is not None and x.shape[1] >= width and bool((x[:, -1] >= 0).any())
                for x in (legs.vector_rows, legs.keyword_rows)
            )
            short = ((legs.rows >= 0).sum(axis=1) < k).any()
            if not short or not full:
                break
            width = min(n_rows, width * 4)
        rows = legs.rows[:, :k]
        scores = legs.scores[:, :k].astype(np.float32)
        relevance = self._relevance(corpus, legs, rows, scores, mode)
        return Ranked(rows, scores, relevance, queries, mode)

    def _legs(
        self,
        corpus: Corpus,
        queries: list[RewrittenQuery],
        k: int,
        width: int,
        mode: str,
        mask: np.ndarray | None,
        options: RetrievalOptions,
    ) -> _Legs:
        """Run the legs of ``mode`` with ``width`` candidates each, then fuse or pass through."""
        cfg = self.config
        threads = options.threads
        group_by = options.group_by
        fused = mode == "hybrid" or group_by is not None
        store = corpus.store
        m = len(queries)
        vectors = vec_rows = vec_scores = None
        plan = self._fusion(corpus.embedder)
        vector_weight = plan.vector
        if mode == "vector" or (mode == "hybrid" and vector_weight > 0):
            vectors = query_vectors(corpus.embedder, [q.text for q in queries], threads=threads)
            index = corpus.vectors
            if isinstance(index, StoreIndex):  # the filter goes down in the store's language
                vec_rows, vec_scores = index.search(
                    vectors, width, mask=mask, exact=options.exact, threads=threads,
                    pushdown=pushdown(options.where, options.principal),
                )  # fmt: skip
            else:
                vec_rows, vec_scores = index.search(
                    vectors, width, mask=mask, exact=options.exact, threads=threads
                )
        key_rows = key_scores = key_weight = doc_rows = doc_scores = None
        if mode in ("keyword", "hybrid"):
            keyword = corpus.keyword
            assert keyword is not None
            tokens = keyword.tokenizer.tokenize([q.keywords for q in queries])
            private = (
                options.keyword_statistics == "per_principal"
                and mask is not None
                and (options.principal is not None or options.where is not None)
            )
            if private:
                assert mask is not None
                key_rows, key_scores, key_weight = search_masked(keyword, tokens, width, mask)
            else:
                key_rows, key_scores, key_weight = keyword.search_weighted(
                    tokens, width, mask=mask, threads=threads
                )
            documents = corpus.documents
            if mode == "hybrid" and documents is not None and plan.document > 0:
                doc_mask = None
                if mask is not None:
                    doc_mask = np.zeros(documents.n_rows, dtype=np.bool_)
                    doc_mask[store.row_docs()[mask]] = True
                doc_width = min(width, documents.n_rows)
                if private:
                    assert doc_mask is not None
                    doc_rows, doc_scores, _ = search_masked(documents, tokens, doc_width, doc_mask)
                else:
                    doc_rows, doc_scores = documents.search_tokens(
                        tokens, doc_width, mask=doc_mask, threads=threads
                    )
        if not fused:
            rows, scores = (vec_rows, vec_scores) if mode == "vector" else (key_rows, key_scores)
            assert rows is not None and scores is not None
            return _Legs(rows, scores, vectors, vec_rows, key_rows, key_scores, key_weight)
        lists, weights, leg_scores = [], [], []
        if vec_rows is not None:
            lists.append(vec_rows)
            leg_scores.append(vec_scores)
            weights.append(vector_weight if mode == "hybrid" else 1.0)
        if key_rows is not None:
            lists.append(key_rows)
            leg_scores.append(key_scores)
            weights.append(plan.keyword if mode == "hybrid" else 1.0)
        c = max(1, max(x.shape[1] for x in lists))
        stacked = np.full((len(lists), m, c), -1, dtype=np.int64)
        for i, x in enumerate(lists):
            stacked[i, :, : x.shape[1]] = x
        if doc_rows is not None:
            group_lists = np.ascontiguousarray(doc_rows[None, :, :])
            group_weights = np.array([plan.document], dtype=np.float64)
        else:
            group_lists = np.zeros((0, m, 1), dtype=np.int64)
            group_weights = np.zeros(0, dtype=np.float64)
        needs_groups = doc_rows is not None or group_by is not None
        # read-only either way, so the kernels have one signature (see fastrag._native.readonly)
        groups = readonly(np.ascontiguousarray(store.row_docs() if needs_groups else _NO_GROUPS))
        with _threads(threads, work=stacked.size * 64):
            if plan.method == "convex" and mode == "hybrid":
                docs = [doc_scores] if doc_rows is not None else []
                rows, scores = _fusion_kernels.convex_fuse(
                    stacked, _stack_scores(leg_scores, stacked.shape),
                    np.array(weights, np.float64), group_lists,
                    _stack_scores(docs, group_lists.shape), group_weights,
                    groups, k, group_by == "doc",
                )  # fmt: skip
            else:
                rows, scores = _fusion_kernels.rrf_fuse(
                    stacked, np.array(weights, dtype=np.float64), group_lists, group_weights,
                    groups, float(cfg.rrf_k), k, group_by == "doc",
                )  # fmt: skip
        if mode != "hybrid":  # one leg, grouped: report that leg's own scores
            source = vec_scores if mode == "vector" else key_scores
            assert source is not None
            scores = _lookup(rows, lists[0], source, -np.inf)
        return _Legs(rows, scores, vectors, vec_rows, key_rows, key_scores, key_weight)

    def _relevance(
        self, corpus: Corpus, legs: _Legs, rows: np.ndarray, scores: np.ndarray, mode: str
    ) -> np.ndarray:
        weights = legs.keyword_weight
        if legs.rows is legs.keyword_rows and weights is not None and legs.query_vectors is None:
            # keyword alone: the share of the question's weight each row scored (padding's
            # -inf and questions of no weight give 0), what the general path below gives
            if weights.size == 1:  # one question: its weight is a scalar
                weight = weights[0]
                if not weight > 0:
                    return np.zeros(scores.shape, dtype=np.float32)
                ratio = np.divide(scores, weight, dtype=np.float32)
            else:
                ratio = np.zeros(scores.shape, dtype=np.float32)
                np.divide(scores, weights[:, None], out=ratio, where=weights[:, None] > 0)
            # np.clip's ufunc without its Python wrapper (no NaN here: scores are finite or
            # -inf padding, weights positive)
            return np.minimum(np.maximum(ratio, 0.0, out=ratio), 1.0, out=ratio)
        if mode == "vector":  # the scores are the cosines already
            # np.clip's ufuncs without its Python wrapper (scores are float32: finite
            # cosines, or -inf padding, which becomes 0)
            relevance = np.maximum(scores, np.float32(0.0), dtype=np.float32)
            np.minimum(relevance, np.float32(1.0), out=relevance)
        elif legs.query_vectors is not None:
            relevance = np.clip(self._row_cosines(corpus, legs.query_vectors, rows), 0.0, 1.0)
        else:
            relevance = np.zeros(rows.shape, dtype=np.float32)
        if legs.keyword_rows is not None and legs.keyword_weight is not None:
            assert legs.keyword_scores is not None
            if legs.rows is legs.keyword_rows:  # keyword alone: the rows are the leg's own
                share = legs.keyword_scores[:, : rows.shape[1]]
            else:
                share = _lookup(rows, legs.keyword_rows, legs.keyword_scores, 0.0)
            # share / weight where the question has keyword weight, 0 elsewhere (padding's
            # -inf included, which the clip below maps to 0 as before)
            weight = legs.keyword_weight[:, None]
            ratio = np.zeros(share.shape, dtype=np.float32)
            np.divide(share, weight, out=ratio, where=weight > 0)
            np.maximum(relevance, np.clip(ratio, 0.0, 1.0).astype(np.float32), out=relevance)
        relevance[rows < 0] = 0.0
        return relevance

    @staticmethod
    def _row_cosines(corpus: Corpus, vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Cosine of each query vector with the vectors of its result rows (0 for padding)."""
        out = np.zeros(rows.shape, dtype=np.float32)
        valid = rows >= 0
        if not valid.any():
            return out
        q_index = np.nonzero(valid)[0]
        flat = rows[valid]
        store = corpus.store
        if len(store.segments) == 1:  # the usual store after a build or a load
            gathered = store.segments[0].vectors[flat]
            out[valid] = np.einsum("ij,ij->i", gathered, vectors[q_index])
            return out
        seg, local = store.locate(flat)
        values = np.empty(flat.size, dtype=np.float32)
        for s in np.unique(seg).tolist():
            pick = seg == s
            gathered = store.segments[s].vectors[local[pick]]
            values[pick] = np.einsum("ij,ij->i", gathered, vectors[q_index[pick]])
        out[valid] = values
        return out

    # -- hits ------------------------------------------------------------------
    def retrieve(
        self,
        corpus: Corpus,
        questions: Sequence[str],
        k: int,
        options: RetrievalOptions,
        *,
        redact: bool = True,
        timer: Any = None,
    ) -> tuple[list[Hits], Ranked]:
        """Hits of every question, best first, reranked when asked.

        Parameters
        ----------
        corpus : Corpus
            What to search.
        questions : sequence of str
            Validated questions.
        k : int
            Hits per question.
        options : RetrievalOptions
            The call's options.
        redact : bool, default True
            Redact text a model-backed rewriter or reranker is sent.
        timer : StageTimer, optional
            Times the ``rewrite``, ``retrieve`` and ``rerank`` stages.

        Returns
        -------
        tuple
            The hits per question, and the :class:`Ranked` arrays they came from.
        """
        if timer is None and options.reranker is None:  # a retrieval: no stages to time
            queries = self.rewrite(questions, options, redact=redact, ontology=corpus.ontology)
            ranked = self.rank(corpus, queries, k, options)
            return corpus.store.hits_matrix(ranked.rows, ranked.scores, ranked.relevance), ranked
        keep_intent = timer is not None  # an answer records the query's intent
        timer = timer or _no_timer
        with timer("rewrite"):
            queries = self.rewrite(
                questions, options, redact=redact, keep_intent=keep_intent,
                ontology=corpus.ontology,
            )  # fmt: skip
        with timer("retrieve") as info:
            ranked = self.rank(corpus, queries, k, options)
            hits = corpus.store.hits_matrix(ranked.rows, ranked.scores, ranked.relevance)
            if getattr(timer, "on_stage", None) is not None:  # only a hook reads the info
                info.update(hits=int((ranked.rows >= 0).sum()), mode=ranked.mode)
        reranker = options.reranker
        if reranker is not None:
            with timer("rerank") as info:
                failures: list[str] = []
                hits = [
                    Hits(self.rerank(q, h, reranker, redact=redact, failures=failures))
                    for q, h in zip(questions, hits, strict=True)
                ]
                if failures:
                    info.update(fallback=failures[0], failed=len(failures))
        return hits, ranked


class _NoStage:
    """A stage timer that times nothing (when the caller wants no timings)."""

    __slots__ = ()

    def __call__(self, name: str) -> _NoStage:
        return self

    def __enter__(self) -> dict[str, Any]:
        return {}

    def __exit__(self, *exc: object) -> None:
        return None


_no_timer = _NoStage()
