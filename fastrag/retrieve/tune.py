"""Fusion weights chosen for one corpus without labelled questions (pseudo-questions).

A user's corpus has no labelled questions, so :func:`tune_corpus` makes its
own from the corpus (:func:`pseudo_queries`):

1. a seeded sample of chunks, at most one per document;
2. from each, one sentence of 6 or more terms (the longest of the chunk's
   sentences up to 40 terms); its terms (words, or CJK characters) are
   thinned at random to ``keep`` (default 0.6) in their order, so the
   question shares only part of its source's wording, as a real question
   does;
3. the pseudo-question's positive is its source document, and its source
   chunk is taken out of the chunk legs' candidates (:meth:`Legs.without`):
   only the document's other chunks (and the document BM25 leg) can find
   it, so the chunk keyword leg cannot win on the verbatim sentence.

The legs run once for all pseudo-questions (:func:`collect_legs`), and each
candidate setting only re-fuses them (:func:`fuse_docs`). The candidates
(:func:`candidates`) are few and near the embedder kind's default: RRF and
convex at the kind's weights, each with the vector leg's weight scaled by
:data:`VECTOR_STEPS`; the keyword and document weights stay the kind's,
because the document BM25 leg still holds the source sentence and so would
always look better than it is.

Regularised toward the default: the pseudo-questions are split in two
halves, and a candidate replaces the default only when it beats it by more
than :data:`MARGIN` pseudo-nDCG@10 on **both** halves (the one with the
largest smaller gain wins). Deterministic for a seed.

Measured (BENCHMARKS.md, "Fusion tuned without labels"): on SciFact and
CMRC 2018 with character counts it keeps the default (four seeds of four;
no loss and no gain on either half of the real questions); started from
RRF at equal weight it moves to within 0.004 nDCG@10 of the best fixed
fusion chosen on labels. Not run at build, since it does not beat the
character counts' default.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from ..options import RetrievalConfig
from ..text.cjk import CJK_CHAR
from ..text.sentences import split_sentences

__all__ = [
    "BUILD_SHARE", "MARGIN", "MIN_DOCUMENTS", "MIN_QUERIES", "VECTOR_STEPS", "FusionChoice",
    "Legs", "candidates", "check_tune", "collect_legs", "fuse_docs", "pseudo_queries",
    "tune_at_build", "tune_corpus", "tune_fusion",
]  # fmt: skip

VECTOR_STEPS: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0)
"""Multiples of the kind's vector weight tried, per fusion method (10 candidates in all)."""

MARGIN = 0.005
"""A candidate replaces the default only when it beats it by more than this on both halves."""

MIN_DOCUMENTS = 200
"""``tune="auto"`` tunes a corpus of at least this many documents (one pseudo-question each)."""

MIN_QUERIES = 24
"""Fewer pseudo-questions than this (too few sentences, or the time bound): no tuning."""

BUILD_SHARE = 0.10
"""``tune="auto"`` spends at most this share of the build's time on tuning."""

_PROBE = 8
"""Pseudo-questions of the larger of the two batches that price the legs under a time bound."""

FUSION_FIELDS = ("fusion", "vector_weight", "keyword_weight", "document_weight")
"""The retrieval settings a tuning chooses; one set by the user turns ``tune="auto"`` off."""

_TERM = re.compile(r"[^\W\d_]{2,}|\d+", re.UNICODE)


@dataclass(frozen=True)
class FusionChoice:
    """The fusion a tuning chose, with what it measured.

    Attributes
    ----------
    fusion : str
        ``"rrf"`` or ``"convex"``.
    vector_weight, keyword_weight, document_weight : float
        The legs' weights.
    score : float
        Mean pseudo-nDCG@10 of the chosen setting.
    default_score : float
        The same for the embedder kind's default fusion.
    queries : int
        Pseudo-questions used.
    seconds : float
        Time the tuning took.
    scores : dict
        Pseudo-nDCG@10 of every setting tried (``"rrf 0.05/1/3"``: score).
    kept_default : bool
        No candidate beat the default on both halves by the margin.
    """

    fusion: str
    vector_weight: float
    keyword_weight: float
    document_weight: float
    score: float
    default_score: float
    queries: int
    seconds: float
    scores: dict[str, float] = field(default_factory=dict, compare=False, repr=False)
    kept_default: bool = False

    def config(self, base: RetrievalConfig | None = None) -> RetrievalConfig:
        """``base`` (default settings) with this fusion and these weights."""
        data = (base or RetrievalConfig()).to_dict()
        data.update(
            fusion=self.fusion, vector_weight=self.vector_weight,
            keyword_weight=self.keyword_weight, document_weight=self.document_weight,
        )  # fmt: skip
        return RetrievalConfig.from_dict(data)

    def report(self, *, applied: bool) -> dict[str, Any]:
        """:meth:`to_dict` with ``applied``: whether the choice replaced the fusion in force."""
        return {**self.to_dict(), "applied": applied}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (without the per-setting scores)."""
        return {
            "fusion": self.fusion, "vector_weight": self.vector_weight,
            "keyword_weight": self.keyword_weight, "document_weight": self.document_weight,
            "pseudo_ndcg10": round(self.score, 4),
            "default_pseudo_ndcg10": round(self.default_score, 4), "queries": self.queries,
            "seconds": round(self.seconds, 2), "method": "pseudo-questions",
            "kept_default": self.kept_default,
        }  # fmt: skip


def _terms(sentence: str) -> list[tuple[str, bool]]:
    """(term, is_cjk) in order: Latin words and numbers, and single CJK characters."""
    out: list[tuple[str, bool]] = []
    for m in _TERM.finditer(sentence):
        word = m.group(0)
        if CJK_CHAR.search(word):
            out.extend((c, True) for c in word if CJK_CHAR.match(c))
        else:
            out.append((word, False))
    return out


def pseudo_queries(
    doc_ids: Sequence[str],
    texts: Sequence[str],
    *,
    n: int = 200,
    seed: int = 0,
    keep: float = 0.6,
) -> list[tuple[str, str]]:
    """Pseudo-questions and their source documents, from chunks (module docstring).

    Parameters
    ----------
    doc_ids, texts : sequence of str
        Each chunk's document and text.
    n : int, default 200
        Pseudo-questions wanted, at most (one per document).
    seed : int, default 0
        Seed of the sample and of the thinning.
    keep : float, default 0.6
        Share of a sentence's terms kept.

    Returns
    -------
    list of (str, str)
        ``(question, doc_id)``.
    """
    return [(q, d) for q, d, _ in _pseudo(doc_ids, texts, n=n, seed=seed, keep=keep)]


def _pseudo(
    doc_ids: Sequence[str], texts: Sequence[str], *, n: int, seed: int, keep: float
) -> list[tuple[str, str, int]]:
    """:func:`pseudo_queries` with each question's source position in ``texts``."""
    if len(doc_ids) != len(texts):
        raise ConfigError("doc_ids and texts must have the same length")
    if not 0 < keep <= 1:
        raise ConfigError(f"keep must be in (0, 1], got {keep!r}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    out: list[tuple[str, str, int]] = []
    used: set[str] = set()
    for i in order.tolist():
        if len(out) >= n:
            break
        doc = doc_ids[i]
        if doc in used:
            continue
        best: list[tuple[str, bool]] = []
        for sentence in split_sentences(texts[i]):
            terms = _terms(sentence)
            if 6 <= len(terms) <= 40 and len(terms) > len(best):
                best = terms
        if not best:
            continue
        mask = rng.random(len(best)) < keep
        kept = [t for t, m in zip(best, mask.tolist(), strict=True) if m]
        if len(kept) < 3:
            continue
        question = ""
        for term, cjk in kept:
            question += (
                term
                if cjk and (not question or CJK_CHAR.match(question[-1]))
                else ((" " if question else "") + term)
            )
        used.add(doc)
        out.append((question, doc, i))
    return out


@dataclass(frozen=True)
class Legs:
    """One pass of hybrid retrieval's three legs over some questions, to fuse under any weights.

    Attributes
    ----------
    vector_rows, vector_scores : ndarray or None
        ``(m, c)`` the vector leg's ranked rows (``-1`` padding) and scores.
    keyword_rows, keyword_scores : ndarray
        The same for chunk BM25.
    doc_rows, doc_scores : ndarray or None
        The same for document BM25 (document numbers).
    groups : ndarray
        Document number of every row (``ChunkStore.row_docs``).
    """

    vector_rows: np.ndarray | None
    vector_scores: np.ndarray | None
    keyword_rows: np.ndarray
    keyword_scores: np.ndarray
    doc_rows: np.ndarray | None
    doc_scores: np.ndarray | None
    groups: np.ndarray

    def without(self, rows: np.ndarray) -> Legs:
        """These legs with row ``rows[q]`` taken out of question ``q``'s chunk lists."""

        def drop(r: np.ndarray | None, s: np.ndarray | None) -> tuple[Any, Any]:
            if r is None or s is None:
                return r, s
            keep = r != rows[:, None]
            order = np.argsort(~keep, axis=1, kind="stable")  # kept first, in their order
            r2 = np.take_along_axis(np.where(keep, r, -1), order, axis=1)
            s2 = np.take_along_axis(np.where(keep, s, 0), order, axis=1)
            return np.ascontiguousarray(r2), np.ascontiguousarray(s2)

        vr, vs = drop(self.vector_rows, self.vector_scores)
        kr, ks = drop(self.keyword_rows, self.keyword_scores)
        return Legs(vr, vs, kr, ks, self.doc_rows, self.doc_scores, self.groups)

    @staticmethod
    def concat(parts: Sequence[Legs]) -> Legs:
        """The legs of several passes, their questions in order (same corpus, same width)."""
        if len(parts) == 1:
            return parts[0]

        def cat(name: str) -> Any:
            arrays = [getattr(p, name) for p in parts]
            if any(a is None for a in arrays):
                return None
            return np.ascontiguousarray(np.concatenate(arrays, axis=0))

        return Legs(
            cat("vector_rows"), cat("vector_scores"), cat("keyword_rows"),
            cat("keyword_scores"), cat("doc_rows"), cat("doc_scores"), parts[0].groups,
        )  # fmt: skip


def collect_legs(
    corpus: Any, retriever: Any, questions: Sequence[str], *, width: int = 100,
    threads: int | None = None,
) -> Legs:  # fmt: skip
    """Run the vector, chunk BM25 and document BM25 legs once for ``questions``.

    The rewrite is ``retriever``'s (as hybrid retrieval does it); no filter.
    """
    from ..embed.base import query_vectors
    from ..options import RetrievalOptions

    store = corpus.store
    width = max(1, min(width, store.n_rows))
    opts = RetrievalOptions(mode="hybrid", group_by="doc")
    rewritten = retriever.rewrite(list(questions), opts, ontology=corpus.ontology)
    alive = store.alive_mask()
    vec_rows = vec_scores = None
    if store.dim > 0:
        vectors = query_vectors(corpus.embedder, [q.text for q in rewritten], threads=threads)
        vec_rows, vec_scores = corpus.vectors.search(
            vectors, width, mask=alive, exact=False, threads=threads
        )
    keyword = corpus.keyword
    if keyword is None:
        raise ConfigError("fusion tuning needs the keyword index (build with keyword=True)")
    tokens = keyword.tokenizer.tokenize([q.keywords for q in rewritten])
    key_rows, key_scores = keyword.search_tokens(tokens, width, mask=alive, threads=threads)
    doc_rows = doc_scores = None
    documents = corpus.documents
    if documents is not None:
        doc_mask = None
        if alive is not None:
            doc_mask = np.zeros(documents.n_rows, dtype=np.bool_)
            doc_mask[store.row_docs()[alive]] = True
        doc_rows, doc_scores = documents.search_tokens(
            tokens, min(width, documents.n_rows), mask=doc_mask, threads=threads
        )
    return Legs(
        vec_rows, vec_scores, key_rows, key_scores, doc_rows, doc_scores,
        np.ascontiguousarray(store.row_docs(), dtype=np.int64),
    )  # fmt: skip


def fuse_docs(
    legs: Legs, method: str, vector: float, keyword: float, document: float, *,
    rrf_k: float = 60.0, k: int = 10,
) -> np.ndarray:  # fmt: skip
    """``(m, k)`` document numbers, best first (``-1`` padding), as hybrid retrieval fuses them.

    A leg of weight 0 is left out, as :class:`~fastrag.retrieve.retriever.Retriever` does.
    """
    from .._native import fusion as kernels

    m = legs.keyword_rows.shape[0]
    lists: list[np.ndarray] = []
    scores: list[np.ndarray] = []
    weights: list[float] = []
    if legs.vector_rows is not None and legs.vector_scores is not None and vector > 0:
        lists.append(legs.vector_rows)
        scores.append(legs.vector_scores)
        weights.append(vector)
    lists.append(legs.keyword_rows)
    scores.append(legs.keyword_scores)
    weights.append(keyword)
    c = max(1, max(x.shape[1] for x in lists))
    stacked = np.full((len(lists), m, c), -1, dtype=np.int64)
    stacked_scores = np.zeros((len(lists), m, c), dtype=np.float32)
    for i, (x, s) in enumerate(zip(lists, scores, strict=True)):
        stacked[i, :, : x.shape[1]] = x
        stacked_scores[i, :, : x.shape[1]] = s
    if legs.doc_rows is not None and legs.doc_scores is not None and document > 0:
        group_lists = np.ascontiguousarray(legs.doc_rows[None, :, :], dtype=np.int64)
        group_scores = np.ascontiguousarray(legs.doc_scores[None, :, :], dtype=np.float32)
        group_weights = np.array([document], dtype=np.float64)
    else:
        group_lists = np.zeros((0, m, 1), dtype=np.int64)
        group_scores = np.zeros((0, m, 1), dtype=np.float32)
        group_weights = np.zeros(0, dtype=np.float64)
    groups = legs.groups.view()  # read-only, as the retriever passes it (one compiled signature)
    groups.flags.writeable = False
    w = np.array(weights, dtype=np.float64)
    if method == "convex":
        rows, _ = kernels.convex_fuse(
            stacked, stacked_scores, w, group_lists, group_scores, group_weights, groups, k, True
        )
    else:
        rows, _ = kernels.rrf_fuse(
            stacked, w, group_lists, group_weights, groups, float(rrf_k), k, True
        )
    return np.where(rows >= 0, legs.groups[np.maximum(rows, 0)], -1)


def _pseudo_ndcg(ranked: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per question, nDCG@10 of its one positive document in ``ranked`` (``(m, k)`` numbers)."""
    hit = ranked[:, :10] == targets[:, None]
    pos = hit.argmax(axis=1)
    return np.where(hit.any(axis=1), 1.0 / np.log2(pos + 2.0), 0.0)


def _label(method: str, vector: float, keyword: float, document: float) -> str:
    return f"{method} {vector:g}/{keyword:g}/{document:g}"


def candidates(
    kind: str, default: tuple[str, float, float, float]
) -> list[tuple[str, float, float, float]]:
    """The settings tried for an embedder kind: ``default`` first (module docstring).

    Parameters
    ----------
    kind : str
        ``"vocabulary"``, ``"static"`` or ``"model"`` (:data:`~fastrag.retrieve.fusion.DEFAULTS`).
    default : (method, vector, keyword, document)
        The fusion in force (the kind's default, or the knowledge base's settings).

    Returns
    -------
    list of (method, vector, keyword, document)
    """
    from .fusion import DEFAULTS

    out = [default]
    _, weights = DEFAULTS[kind]
    for method in (default[0], *[m for m in weights if m != default[0]]):
        v, k, d = weights[method] if method != default[0] else default[1:]
        for step in VECTOR_STEPS:
            c = (method, round(v * step, 6), k, d)
            if c not in out:
                out.append(c)
    return out


def tune_fusion(
    legs: Legs,
    targets: np.ndarray,
    settings: Sequence[tuple[str, float, float, float]],
    *,
    rrf_k: float = 60.0,
    margin: float = MARGIN,
) -> FusionChoice:
    """The setting that best finds the pseudo-questions' documents, regularised to ``settings[0]``.

    Parameters
    ----------
    legs : Legs
        The pseudo-questions' legs (source chunks already taken out).
    targets : ndarray
        Each pseudo-question's document number.
    settings : sequence of (method, vector, keyword, document)
        The candidates, the default first (:func:`candidates`).
    rrf_k : float, default 60
        RRF's constant.
    margin : float, default :data:`MARGIN`
        Gain over the default needed on both halves of the pseudo-questions.

    Returns
    -------
    FusionChoice
    """
    m = len(targets)
    if m < 2:
        raise ConfigError("no pseudo-question could be made from this corpus (too few sentences)")
    if not settings:
        raise ConfigError("no fusion setting to choose from")
    t0 = time.perf_counter()
    targets = np.asarray(targets, dtype=np.int64)
    per = [_pseudo_ndcg(fuse_docs(legs, *c, rrf_k=rrf_k), targets) for c in settings]
    halves = [(float(x[0::2].mean()), float(x[1::2].mean())) for x in per]
    base = halves[0]
    best, best_gain = 0, margin
    for i, (a, b) in enumerate(halves[1:], start=1):
        gain = min(a - base[0], b - base[1])
        if gain > best_gain:
            best, best_gain = i, gain
    method, vector, keyword, document = settings[best]
    return FusionChoice(
        fusion=method, vector_weight=float(vector), keyword_weight=float(keyword),
        document_weight=float(document), score=float(per[best].mean()),
        default_score=float(per[0].mean()), queries=m, seconds=time.perf_counter() - t0,
        scores={_label(*c): float(x.mean()) for c, x in zip(settings, per, strict=True)},
        kept_default=best == 0,
    )  # fmt: skip


def tune_corpus(
    corpus: Any,
    retriever: Any,
    *,
    queries: int = 60,
    seed: int = 0,
    keep: float = 0.6,
    margin: float = MARGIN,
    budget: float | None = None,
) -> FusionChoice:
    """:func:`tune_fusion` over a corpus's own chunks, with ``retriever``'s settings as the default.

    Parameters
    ----------
    corpus : Corpus
        What is searched.
    retriever : Retriever
        Its settings (the fusion in force is the default candidate) and
        rewriter are used; it is not changed.
    queries, seed, keep
        As for :func:`pseudo_queries`.
    margin : float, default :data:`MARGIN`
        As for :func:`tune_fusion`.
    budget : float, optional
        Seconds the legs may take (after a first question, whose one-time
        kernel loading is not counted): priced on two small batches, then
        all the questions run, or none when the budget does not afford them
        all (so a tuning that runs is the same for a seed on any machine).

    Returns
    -------
    FusionChoice

    Raises
    ------
    ConfigError
        Fewer than 2 pseudo-questions could be made, or (with ``budget``)
        the budget does not afford them all.
    """
    from .fusion import embedder_kind, fusion_plan

    t0 = time.perf_counter()
    store = corpus.store
    alive = store.alive_mask()
    rows = np.flatnonzero(alive) if alive is not None else np.arange(store.n_rows)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.permutation(rows)[: queries * 4])
    table = store.rows(rows, columns=("text",))
    groups = store.row_docs()
    picked = _pseudo(
        [str(g) for g in groups[rows].tolist()], table.column("text").to_pylist(),
        n=queries, seed=seed, keep=keep,
    )  # fmt: skip
    if len(picked) < 2:
        raise ConfigError("no pseudo-question could be made from this corpus (too few sentences)")
    questions = [q for q, _, _ in picked]
    if budget is None:
        legs = collect_legs(corpus, retriever, questions)
    else:
        legs, questions = _within(corpus, retriever, questions, budget)
        picked = picked[: len(questions)]
    sources = rows[np.array([i for _, _, i in picked], dtype=np.int64)]
    legs = legs.without(sources)
    targets = groups[sources]
    plan = fusion_plan(retriever.config, corpus.embedder)
    settings = candidates(
        embedder_kind(corpus.embedder), (plan.method, plan.vector, plan.keyword, plan.document)
    )
    choice = tune_fusion(
        legs, targets, settings, rrf_k=float(retriever.config.rrf_k), margin=margin
    )
    return dataclasses.replace(choice, seconds=time.perf_counter() - t0)


def _within(
    corpus: Any, retriever: Any, questions: list[str], budget: float
) -> tuple[Legs, list[str]]:
    """The legs of all of ``questions`` when they fit in ``budget`` seconds, else none.

    One question first, outside the budget: it pays what a first call in
    this process costs (loading the search kernels, as a first question
    would), which says nothing of the price of the others. Then two priced
    batches (:data:`_PROBE` / 2 and :data:`_PROBE` questions) fit a call's
    time as ``fixed + each x questions`` (a call streams the whole store's
    vectors once, whatever its questions); when that predicts the rest fit
    in 0.8 of the budget (the rest goes to the fusions), one last call takes
    them all. All or none, so that a tuning that runs is the same for a
    seed however fast the machine was: the time decides only whether it
    runs (a choice made from however many questions fitted would change
    with the machine's load).

    Raises
    ------
    ConfigError
        The budget does not afford every question.
    """
    parts = [collect_legs(corpus, retriever, questions[:1])]
    t0 = time.perf_counter()
    done, times = 1, []
    for size in (_PROBE // 2, _PROBE):
        size = min(size, len(questions) - done)
        if size <= 0 or time.perf_counter() - t0 >= 0.8 * budget:
            break
        t1 = time.perf_counter()
        parts.append(collect_legs(corpus, retriever, questions[done : done + size]))
        times.append((size, time.perf_counter() - t1))
        done += size
    fixed, each = 0.0, 0.0
    if len(times) == 2:
        (m1, s1), (m2, s2) = times
        each = max((s2 - s1) / (m2 - m1), 0.1 * s2 / m2)  # noise: never below a tenth
        fixed = max(0.0, s1 - each * m1)
    elif times:
        each = times[0][1] / times[0][0]
    left = 0.8 * budget - (time.perf_counter() - t0)
    rest = len(questions) - done
    if rest > 0 and (not times or fixed + each * rest > left):
        afford = int(max(0.0, left - fixed) / each) if each > 0 else 0
        raise ConfigError(
            f"fusion tuning skipped: {budget:.2f} s affords {done + min(afford, rest)} of "
            f"{len(questions)} pseudo-questions ({fixed * 1000:.1f} ms a call + "
            f"{each * 1000:.1f} ms each)"
        )
    if rest > 0:
        parts.append(collect_legs(corpus, retriever, questions[done:]))
    return Legs.concat(parts), questions


def check_tune(tune: object) -> None:
    """Raise :class:`ConfigError` unless ``tune`` is True, False or ``"auto"``."""
    if tune not in (True, False, "auto"):
        raise ConfigError(f"tune must be True, False or 'auto', got {tune!r}")


def tune_at_build(
    corpus: Any, retriever: Any, *, tune: bool | str, build_seconds: float, seed: int = 0
) -> tuple[FusionChoice | None, dict[str, Any]]:
    """Tune the fusion of a new knowledge base as ``KnowledgeBase.build(tune=...)`` asks.

    Parameters
    ----------
    corpus, retriever
        The new knowledge base's.
    tune : bool or "auto"
        ``False``: fixed weights. ``True``: tune whatever the corpus's size,
        with no time bound (a corpus that cannot be tuned raises).
        ``"auto"``: tune when the fusion is unset (the embedder kind's
        defaults), the corpus has vectors, a keyword index and at least
        :data:`MIN_DOCUMENTS` documents, within :data:`BUILD_SHARE` of
        ``build_seconds``.
    build_seconds : float
        How long the build took.
    seed : int, default 0
        Seed of the pseudo-questions.

    Returns
    -------
    (FusionChoice or None, dict)
        The choice (None when not tuned) and a JSON-ready report: the
        choice's summary with ``applied`` (whether it replaced the
        fusion in force), or ``{"skipped": reason}``.

    Raises
    ------
    ConfigError
        ``tune`` is not True, False or "auto"; or ``tune=True`` and the
        corpus cannot be tuned.
    """
    check_tune(tune)
    if tune is False:
        return None, {"skipped": "fixed weights (tune=False)"}
    reason = None
    config = retriever.config
    fixed = [name for name in FUSION_FIELDS if getattr(config, name) is not None]
    if corpus.keyword is None:
        reason = "no keyword index (keyword=False)"
    elif corpus.store.dim == 0:
        reason = "no vectors"
    elif tune == "auto" and fixed:
        reason = f"the retrieval settings fix {', '.join(fixed)}"
    elif tune == "auto" and corpus.store.n_docs < MIN_DOCUMENTS:
        reason = (
            f"{corpus.store.n_docs:,} documents, fewer than {MIN_DOCUMENTS} "
            "(tune=True tunes anyway)"
        )
    if reason is not None:
        if tune is True:
            raise ConfigError(f"fusion tuning is not possible here: {reason}")
        return None, {"skipped": reason}
    try:
        choice = tune_corpus(
            corpus, retriever, seed=seed,
            budget=BUILD_SHARE * build_seconds if tune == "auto" else None,
        )  # fmt: skip
    except ConfigError as exc:
        if tune is True:
            raise
        return None, {"skipped": str(exc)}
    if tune == "auto" and choice.queries < MIN_QUERIES:
        return None, {
            "skipped": f"only {choice.queries} pseudo-questions could be made "
            f"(fewer than {MIN_QUERIES}; tune=True tunes anyway)"
        }
    return choice, choice.report(applied=not choice.kept_default)
