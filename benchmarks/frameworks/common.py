"""What every runner shares: the corpus, the embedder, the plain chunker, the metrics.

Nothing here imports a framework; each runner module imports its own.
"""

from __future__ import annotations

import json
import os
import re
import resource
import statistics
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

WINDOW = 200
OVERLAP = 40
K = 10
DIM = 384
GENERATOR_VERSION = 1  # bump when the corpus generator changes (invalidates cached corpora)

# ---------------------------------------------------------------------------
# The embedder: hashed character bigrams, 384 dimensions, L2-normalised.
# ---------------------------------------------------------------------------

_H1 = np.uint64(0x9E3779B97F4A7C15)
_H2 = np.uint64(0xC2B2AE3D27D4EB4F)
_SHIFT = np.uint64(29)


class HashedBigramEmbedder:
    """Deterministic bag of hashed character bigrams; the same for every system.

    A text is lower-cased, framed by a boundary mark at each end (so a
    one-character text still has a bigram), and every pair of consecutive
    code points ``(a, b)`` adds 1 to column
    ``((a * H1 + b * H2) mod 2**64 >> 29) mod dim``; rows are L2-normalised
    (the empty text embeds to the zero vector). Pure numpy, vectorised over
    the whole batch.

    It satisfies fastrag's ``Embedder`` protocol (``embed``, ``dim``,
    ``config``) as it is; the framework adapters wrap :meth:`embed`.
    ``seconds`` / ``calls`` / ``texts`` accumulate the embedder's own time,
    reported apart from the engines' time.
    """

    def __init__(self, dim: int = DIM) -> None:
        self._dim = int(dim)
        self.reset()

    # -- the fastrag Embedder protocol -----------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    def config(self) -> dict[str, Any]:
        return {"type": "hashed-bigram", "dim": self._dim, "version": 1}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        texts = list(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        step = 8192
        for lo in range(0, len(texts), step):
            out[lo : lo + step] = self._embed_block(texts[lo : lo + step])
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.texts += len(texts)
        return out

    # -- helpers -----------------------------------------------------------------
    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def reset(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.texts = 0

    def _embed_block(self, texts: list[str]) -> np.ndarray:
        n = len(texts)
        if n == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        # "\0" separates the texts and frames each one; a NUL inside a text is dropped.
        joined = "\0" + "\0".join(t.replace("\0", "").lower() for t in texts) + "\0"
        cp = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
        a, b = cp[:-1], cp[1:]
        sep = cp == 0
        row = np.cumsum(sep[:-1]) - 1  # pair i belongs to the text its first element opens or is in
        keep = ~(sep[:-1] & sep[1:])  # (NUL, NUL): an empty text
        h = ((a * _H1 + b * _H2) >> _SHIFT) % np.uint64(self._dim)
        idx = row[keep].astype(np.int64) * self._dim + h[keep].astype(np.int64)
        counts = np.bincount(idx, minlength=n * self._dim).astype(np.float32).reshape(n, self._dim)
        norms = np.linalg.norm(counts, axis=1, keepdims=True)
        np.divide(counts, norms, out=counts, where=norms > 0)
        return counts


class TimedStatic:
    """A fastrag ``StaticEmbedder`` (loaded from a table file) with the harness's time accounting.

    ``embed`` serves the frameworks' custom-embedding interfaces;
    ``embed_utf8`` lets fastrag embed its chunks' Arrow buffers in the kernel.
    """

    def __init__(self, table: str) -> None:
        from fastrag import StaticEmbedder

        self.inner = StaticEmbedder.load(table)
        self.reset()

    @property
    def dim(self) -> int:
        return self.inner.dim

    def config(self) -> dict[str, Any]:
        return self.inner.config()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        out = self.inner.embed(list(texts))
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.texts += out.shape[0]
        return out

    def embed_utf8(self, data, offsets, *, out=None, threads=None) -> np.ndarray:
        t0 = time.perf_counter()
        res = self.inner.embed_utf8(data, offsets, out=out, threads=threads)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.texts += res.shape[0]
        return res

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def reset(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.texts = 0


def make_embedder(static_table: str | None = None) -> Any:
    """The harness's embedder: hashed bigrams, or a static table (``--static-table``)."""
    return TimedStatic(static_table) if static_table else HashedBigramEmbedder()


# ---------------------------------------------------------------------------
# Plain character windows (fastrag's chunking semantics, in Python).
# ---------------------------------------------------------------------------

_SPACES = re.compile(r"\s+")


def plain_chunks(text: str, window: int = WINDOW, overlap: int = OVERLAP) -> list[str]:
    """White space collapsed, then windows of ``window`` characters overlapping by ``overlap``.

    The same chunks fastrag's ``Chunker(window, overlap)`` cuts; used by the
    plain-numpy baseline and by the vector databases (Chroma, LanceDB),
    which have no splitter of their own.
    """
    clean = _SPACES.sub(" ", text).strip()
    n = len(clean)
    if n == 0:
        return []
    if n <= window:
        return [clean]
    out = []
    start = 0
    step = window - overlap
    while True:
        end = min(start + window, n)
        out.append(clean[start:end])
        if end == n:
            return out
        start += step


def plain_chunk_docs(docs: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Chunk texts and the document id of each chunk."""
    texts: list[str] = []
    doc_ids: list[str] = []
    for d in docs:
        c = plain_chunks(d["text"])
        texts.extend(c)
        doc_ids.extend([d["id"]] * len(c))
    return texts, doc_ids


# ---------------------------------------------------------------------------
# The bilingual synthetic knowledge base.
# ---------------------------------------------------------------------------

_TOPICS = [
    ("年假", "annual leave"), ("病假", "sick leave"), ("事假", "personal leave"),
    ("婚假", "marriage leave"), ("产假", "maternity leave"), ("陪产假", "paternity leave"),
    ("差旅", "business travel"), ("费用报销", "expense"), ("加班", "overtime"),
    ("采购", "purchase"), ("培训", "training"), ("远程办公", "remote work"),
    ("设备领用", "equipment"), ("会议室预订", "meeting room"), ("访客登记", "visitor"),
    ("合同审批", "contract"), ("招聘", "hiring"), ("离职", "resignation"),
    ("调岗", "transfer"), ("值班", "on-call"),
]  # fmt: skip
_DEPTS = [
    ("财务部", "Finance"), ("人力资源部", "HR"), ("研发部", "R&D"), ("市场部", "Marketing"),
    ("销售部", "Sales"), ("法务部", "Legal"), ("行政部", "Facilities"), ("客服部", "Support"),
]  # fmt: skip
# (statement, question) templates; {site} names the office, so a question points at few documents.
_ZH_POLICY = [
    ("{site}园区{dept}的{zt}申请需提前{n}天提交。", "{site}园区{dept}的{zt}申请需要提前几天提交？"),
    ("{site}园区{dept}的{zt}单据须在{n}天内提交。", "{site}园区{dept}的{zt}单据要在多少天内提交？"),
    ("{site}园区{dept}{zt}的审批时限为{n}个工作日。", "{site}园区{dept}{zt}审批需要几个工作日？"),
    ("{zt}申请需提前{n}天提交。", "{zt}申请需要提前几天提交？"),
]
_EN_POLICY = [
    ("{Et} requests at the {site} office ({dept}) must be submitted {n} days in advance.",
     "How many days in advance must {et} requests at the {site} office ({dept}) be submitted?"),
    ("{Et} reports at the {site} office ({dept}) must be submitted within {n} days.",
     "Within how many days must {et} reports at the {site} office ({dept}) be submitted?"),
    ("Approval of {et} at the {site} office ({dept}) takes up to {n} working days.",
     "How long does approval of {et} at the {site} office ({dept}) take?"),
    ("{Et} reports must be submitted within {n} days.",
     "Within how many days must {et} reports be submitted?"),
]  # fmt: skip
_WS = [" "] * 30 + ["  ", "\n", "\t", "\n\n", "\u3000", " \r\n"]
_ZH_PUNCT = "，，，，、。"


def _vocabularies(rng: np.random.Generator) -> tuple[list[str], list[str]]:
    # The Zipfian vocabularies of fastrag.datasets.synthetic (append-only module).
    from fastrag.datasets.synthetic import _chinese_vocabulary, _english_vocabulary

    return _english_vocabulary(rng, 5000), _chinese_vocabulary(rng, 5000)


def _zipf(rng: np.random.Generator, vocab: list[str], n: int) -> list[str]:
    idx = (rng.zipf(1.15, n) - 1) % len(vocab)
    return [vocab[int(i)] for i in idx]


def generate_kb(
    n_docs: int, n_questions: int, *, seed: int = 0, min_chars: int = 1000, max_chars: int = 2200
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Documents and questions of the bilingual synthetic knowledge base.

    Each document: Zipfian English and Chinese sentences (half each, as
    ``fastrag.datasets.synthetic.mixed_documents`` makes them, with irregular
    white space) up to a length drawn uniformly from ``min_chars`` to
    ``max_chars`` characters (mean 1,600: about 10 chunks of 200/40), with
    one to three policy sentences ("年假申请需提前3天提交。", "Expense reports
    must be submitted within 15 days.", most naming an office and a
    department) at random places. Questions: 60 % ask about one policy
    sentence of a random document (in its language), 40 % are a 15-40
    character excerpt of a random document. Each question keeps the id of
    the document it came from.
    """
    rng = np.random.default_rng(seed)
    en, zh = _vocabularies(rng)
    sites = [w.capitalize() for w in en[:: max(1, len(en) // 400)]][:400]
    docs: list[dict[str, str]] = []
    policies: list[list[str]] = []
    for i in range(n_docs):
        target = int(rng.integers(min_chars, max_chars + 1))
        parts: list[str] = []
        size = 0
        while size < target:
            if rng.random() < 0.5:
                words = _zipf(rng, zh, int(rng.integers(4, 16)))
                s = (
                    "".join(
                        w + (_ZH_PUNCT[int(rng.integers(0, 6))] if rng.random() < 0.15 else "")
                        for w in words
                    )
                    + "。"
                )
            else:
                s = " ".join(_zipf(rng, en, int(rng.integers(5, 20)))).capitalize() + "."
            parts.append(s)
            size += len(s) + 1
        qs = []
        for _ in range(int(rng.integers(1, 4))):
            zt, et = _TOPICS[int(rng.integers(0, len(_TOPICS)))]
            zd, ed = _DEPTS[int(rng.integers(0, len(_DEPTS)))]
            site = sites[int(rng.integers(0, len(sites)))]
            n = int(rng.choice([1, 2, 3, 5, 7, 10, 14, 15, 30]))
            if rng.random() < 0.5:
                st, q = _ZH_POLICY[int(rng.integers(0, len(_ZH_POLICY)))]
                fields = {"site": site, "dept": zd, "zt": zt, "n": n}
            else:
                st, q = _EN_POLICY[int(rng.integers(0, len(_EN_POLICY)))]
                fields = {"site": site, "dept": ed, "et": et, "Et": et.capitalize(), "n": n}
            parts.insert(int(rng.integers(0, len(parts) + 1)), st.format(**fields))
            qs.append(q.format(**fields))
        text = "".join(p + _WS[int(rng.integers(0, len(_WS)))] for p in parts)
        docs.append({"id": f"doc-{i:06d}", "title": f"Document {i}", "text": text})
        policies.append(qs)
    questions = []
    for j in range(n_questions):
        d = int(rng.integers(0, n_docs))
        if rng.random() < 0.6:
            q = policies[d][int(rng.integers(0, len(policies[d])))]
            kind = "policy"
        else:
            clean = _SPACES.sub(" ", docs[d]["text"]).strip()
            length = int(rng.integers(15, 41))
            start = int(rng.integers(0, max(1, len(clean) - length)))
            q = clean[start : start + length].strip() or clean[:length]
            kind = "excerpt"
        questions.append({"id": f"q-{j:06d}", "text": q, "doc": docs[d]["id"], "kind": kind})
    return docs, questions


def corpus_files(cache_dir: Path, n_docs: int, n_questions: int, seed: int) -> tuple[Path, Path]:
    """Generate (once) and cache the corpus and questions as JSON Lines; return their paths."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    stem = f"kb-v{GENERATOR_VERSION}-n{n_docs}-q{n_questions}-s{seed}"
    docs_path, q_path = cache_dir / f"{stem}.docs.jsonl", cache_dir / f"{stem}.questions.jsonl"
    if not (docs_path.exists() and q_path.exists()):
        docs, questions = generate_kb(n_docs, n_questions, seed=seed)
        for path, rows in ((docs_path, docs), (q_path, questions)):
            tmp = path.with_suffix(".tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                for r in rows:
                    fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            os.replace(tmp, path)
    return docs_path, q_path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# ---------------------------------------------------------------------------
# Metrics.
# ---------------------------------------------------------------------------


def exact_reference(
    query_vectors: np.ndarray, chunk_vectors: np.ndarray, k: int = K
) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k over a system's own chunk vectors: (rows, k-th best score per query).

    float64 scores, so that float32 rounding in an engine never decides.
    """
    q = query_vectors.astype(np.float64)
    rows_out = np.zeros((q.shape[0], min(k, len(chunk_vectors))), dtype=np.int64)
    kth = np.zeros(q.shape[0], dtype=np.float64)
    v = chunk_vectors.astype(np.float64)
    for lo in range(0, q.shape[0], 256):
        s = q[lo : lo + 256] @ v.T
        kk = min(k, s.shape[1])
        part = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
        order = np.argsort(-np.take_along_axis(s, part, 1), axis=1, kind="stable")
        rows_out[lo : lo + 256] = np.take_along_axis(part, order, 1)
        kth[lo : lo + 256] = np.take_along_axis(s, rows_out[lo : lo + 256, kk - 1 : kk], 1)[:, 0]
    return rows_out, kth


def agree_at_k(
    results: Sequence[Sequence[int]],
    query_vectors: np.ndarray,
    chunk_vectors: np.ndarray,
    kth: np.ndarray,
    k: int = K,
    eps: float = 1e-6,
) -> float:
    """Mean over queries of (returned chunks whose true cosine >= the exact k-th best) / k.

    Equal to |returned top-k ∩ exact top-k| / k when there are no ties; with
    ties at the k-th place (duplicate chunks, equal bigram counts) any of the
    tied chunks counts as right. ``results`` are row numbers into
    ``chunk_vectors`` (-1 for a result that names no known chunk).
    """
    if not len(results):
        return float("nan")
    total = 0.0
    q = query_vectors.astype(np.float64)
    for i, rows in enumerate(results):
        rows = [r for r in rows[:k] if r >= 0]
        if rows:
            s = chunk_vectors[np.asarray(rows)].astype(np.float64) @ q[i]
            total += int((s >= kth[i] - eps).sum()) / k
    return total / len(results)


def hit_at_k(result_docs: Sequence[Sequence[str]], gold: Sequence[str]) -> float:
    """Share of questions whose source document owns one of the returned chunks."""
    if not len(result_docs):
        return float("nan")
    return sum(g in set(r) for r, g in zip(result_docs, gold, strict=True)) / len(result_docs)


def percentile(values: Sequence[float], p: float) -> float:
    return (
        float(np.percentile(np.asarray(values, dtype=np.float64), p))
        if len(values)
        else float("nan")
    )


def median(values: Iterable[float]) -> float:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    return statistics.median(vals) if vals else float("nan")


def peak_rss_mb() -> float:
    """Peak resident memory of this process image, in MiB.

    ``VmHWM`` of /proc/self/status: ``ru_maxrss`` would not do, since Linux
    carries the parent's resident size at fork over the child's ``exec`` (a
    child of a driver holding a 20,000-document corpus would start "peaked").
    Falls back to ``ru_maxrss`` where /proc is missing.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def dir_size_mb(path: Path) -> float:
    total = 0
    if path.is_file():
        return path.stat().st_size / 2**20
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                pass
    return total / 2**20
