"""Seeded data shared by the asv benchmarks.

Append only: changing an existing dataset makes old results incomparable.
Every kernel is warmed on a tiny input in ``setup`` so compile time is never
timed; compile time has its own benchmarks in ``bench_compile.py``.
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pyarrow as pa
from fastrag.datasets.synthetic import mixed_texts, random_unit_vectors

TEXT_SIZES = (3_000, 1_400_000, 2_000_000, 6_802_721)
"""Every ``texts(total_chars)`` the :class:`Compiled` classes use (seed 0): written once per run.

A size not listed (an older parameter) is generated where it is asked for."""


def _texts_file(total_chars: int, seed: int) -> str:
    return os.path.abspath(f"texts-{total_chars}-{seed}.arrow")


@functools.lru_cache(maxsize=8)
def texts(total_chars: int, seed: int = 0) -> tuple[str, ...]:
    """Mixed English/Chinese documents of about ``total_chars`` characters.

    Read from the file :meth:`Compiled.setup_cache` wrote into the working
    directory (asv runs a class's benchmarks in its ``setup_cache``
    directory) when it is there: generating 20 M characters takes about
    20 CPU-seconds, which every benchmark process would pay again. The
    file holds exactly what ``mixed_texts`` generates.
    """
    path = _texts_file(total_chars, seed)
    if os.path.exists(path):
        with pa.memory_map(path) as source:
            return tuple(pa.ipc.open_file(source).read_all().column(0).to_pylist())
    return tuple(mixed_texts(total_chars, seed=seed))


def write_texts(total_chars: int, seed: int = 0) -> str:
    """Write ``mixed_texts(total_chars, seed)`` where :func:`texts` reads it; return the path."""
    path = _texts_file(total_chars, seed)
    table = pa.table({"text": pa.array(mixed_texts(total_chars, seed=seed), pa.large_string())})
    tmp = path + ".tmp"
    with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    os.replace(tmp, path)
    return path


VECTOR_SIZES = ((100_000, 384, 0),)
"""The ``unit_vectors(n, dim, seed)`` of ``bench_topk``'s corpus: written once per run."""


def _vectors_file(n: int, dim: int, seed: int) -> str:
    return os.path.abspath(f"vectors-{n}-{dim}-{seed}.npy")


@functools.lru_cache(maxsize=8)
def unit_vectors(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Read-only L2-normalised float32 matrix, as a loaded store exposes it.

    Read (into memory, not mapped: a timed scan must not page it in) from
    the file :meth:`Compiled.setup_cache` wrote when it is there, else
    generated; both hold what ``random_unit_vectors`` generates.
    """
    path = _vectors_file(n, dim, seed)
    out = np.load(path) if os.path.exists(path) else random_unit_vectors(n, dim, seed=seed)
    out.flags.writeable = False
    return out


def write_vectors(n: int, dim: int, seed: int = 0) -> str:
    """Write ``random_unit_vectors(n, dim, seed)`` where :func:`unit_vectors` reads it."""
    path = _vectors_file(n, dim, seed)
    tmp = path + ".tmp.npy"
    np.save(tmp, random_unit_vectors(n, dim, seed=seed))
    os.replace(tmp, path)
    return path


# -- compile once per run, before any benchmark ----------------------------------------------

COLD_COMPILE_TIMEOUT = 3600
"""Seconds a ``setup_cache`` that may compile every kernel is given.

A cold Numba cache costs about 3 CPU-minutes of compilation (two processes
at once, see ``fastrag._native.warmup``): 2 minutes on a quiet 2-core
machine, 11 at a load average of 12, more than 20 at 25 (measured on the
shared 2-core VM). The timeout only guards against a hang. The benchmarks
themselves only load the compiled code.
"""


def compile_kernels() -> float:
    """``fastrag.warmup()``: compile every kernel into the on-disk cache (or load it); seconds."""
    from fastrag import warmup

    return warmup()


class Compiled:
    """Base of the benchmark classes without a ``setup_cache`` of their own.

    asv keys a ``setup_cache`` by the module and line of its function, so
    every subclass shares this one: it runs once per ``asv run``, in its own
    process with its own timeout, before the first of these classes, and
    fills Numba's on-disk cache. The benchmark processes then load compiled
    code in ``setup`` (a cold compile never lands in ``setup``, let alone in
    a timed or peakmem region; peakmem counts the whole process, so
    compiling in ``setup`` would also add LLVM's memory to the figure).
    It also writes the :data:`TEXT_SIZES` corpora of :func:`texts` and the
    :data:`VECTOR_SIZES` matrices of :func:`unit_vectors` into its
    directory, so the benchmark processes read them instead of generating
    them. Returning None passes nothing to the benchmarks.
    """

    timeout = 180.0  # setup generates data and loads kernels: slow on a loaded machine

    def setup_cache(self) -> None:
        compile_kernels()
        for chars in TEXT_SIZES:
            write_texts(chars)
        for n, dim, seed in VECTOR_SIZES:
            write_vectors(n, dim, seed)

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]


# -- a knowledge base as users build one: metadata, ACLs, questions --------------------------

TEAMS = ("hr", "eng", "ops", "legal")


def user_documents(n_docs: int, seed: int = 11) -> list[dict]:
    """``mixed_documents`` with the metadata filters and principals use.

    Each document gets a ``team`` (one of :data:`TEAMS`, round robin), an
    ``updated_at`` date in 2025-2026 and an ``acl``: empty (everyone) for
    half of them, else its team's group.
    """
    from fastrag.datasets.synthetic import mixed_documents

    out = []
    for i, doc in enumerate(mixed_documents(n_docs, seed=seed)):
        team = TEAMS[i % len(TEAMS)]
        doc["team"] = team
        doc["updated_at"] = f"{2025 + i % 2}-{1 + i % 12:02d}-{1 + i % 28:02d}"
        doc["acl"] = [] if i % 2 == 0 else [team]
        out.append(doc)
    return out


def user_questions(docs: list[dict], m: int, seed: int = 99) -> list[str]:
    """``m`` questions: passages of 20-59 characters quoted from the documents (seeded)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < m:
        text = docs[int(rng.integers(0, len(docs)))]["text"]
        start = int(rng.integers(0, max(1, len(text) - 60)))
        piece = text[start : start + int(rng.integers(20, 60))].strip()
        if piece:
            out.append(piece)
    return out


def build_user_kb(path: str, n_docs: int, *, index: str = "exact") -> str:
    """Build and save a knowledge base of :func:`user_documents` at ``path``; return it."""
    from fastrag import KnowledgeBase, VocabularyEmbedder

    kb = KnowledgeBase.build(
        user_documents(n_docs), embedder=VocabularyEmbedder(max_features=384), index=index
    )
    kb.save(path)
    kb.close()
    return path


class UserKB(Compiled):
    """Base of the classes over one saved 1,000-document (about 12,000-chunk) knowledge base.

    Its ``setup_cache`` (shared by every subclass: built once per run, in
    asv's cache directory, removed with it) compiles the kernels, builds
    the knowledge base and draws the questions; the benchmarks get both.
    """

    N_DOCS = 1000
    N_QUESTIONS = 256
    timeout = 300.0

    def setup_cache(self) -> dict:  # type: ignore[override]
        """``{"path": the saved knowledge base, "questions": 256 user_questions of it}``."""
        compile_kernels()
        path = build_user_kb(os.path.abspath("user-kb"), self.N_DOCS)
        return {
            "path": path,
            "questions": user_questions(user_documents(self.N_DOCS), self.N_QUESTIONS),
        }

    setup_cache.timeout = COLD_COMPILE_TIMEOUT  # type: ignore[attr-defined]
