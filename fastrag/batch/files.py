"""Answer a file of questions into a file of answers, incrementally and resumably.

Questions stream from the input (see :func:`fastrag.store.sources.read_questions`)
in batches; each batch is answered with one vectorised
:meth:`~fastrag.KnowledgeBase.answer_batch` call and its rows are written at
once, so an interrupted run keeps every finished row:

- ``.jsonl`` output: one line per question, appended and flushed per batch.
- ``.parquet`` output: rows go to ``<out>.partial`` (an Arrow IPC stream,
  flushed per batch; readable up to its last whole batch after a crash) and
  become ``<out>`` (Parquet, written atomically) when the run completes.

With ``resume=True`` the rows already written are kept and their questions
(by ``query_index``, the position in the input) are skipped, so an
interrupted run plus a resumed one equals an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from .._fs import READ_ERRORS, fsync_dir
from ..answer.table import ANSWER_BATCH_SCHEMA
from ..errors import ConfigError, StoreError
from ..kb import KnowledgeBase
from ..options import DEFAULT_K, AnswerOptions, RetrievalOptions, parse_options, shorthand_of
from ..store.sources import Question, count_questions, read_questions

__all__ = [
    "BATCH_SCHEMA",
    "BatchProgress",
    "BatchSummary",
    "answer_file",
    "open_writer",
    "batch_options",
]

BATCH_SCHEMA = pa.schema([pa.field("id", pa.string()), *ANSWER_BATCH_SCHEMA])
"""Columns of a batch output file: the question's id (when the input has one), then
:data:`~fastrag.answer.table.ANSWER_BATCH_SCHEMA` (``query_index`` is the position in the input)."""


@dataclass(frozen=True, slots=True)
class BatchProgress:
    """Progress of :func:`answer_file` (passed to ``progress=`` callbacks)."""

    done: int
    total: int | None
    seconds: float


@dataclass(frozen=True, slots=True)
class BatchSummary:
    """What a batch run did (``cited``: answers that cite a retrieved chunk)."""

    questions: int
    answered: int
    found: int
    errors: int
    skipped: int
    seconds: float
    cited: int

    @property
    def not_found(self) -> int:
        """Answers saying the knowledge base does not hold the answer."""
        return self.answered - self.found

    @property
    def cited_share(self) -> float:
        """The operational hit rate: the share of answers that cite a retrieved chunk."""
        return self.cited / self.answered if self.answered else 0.0

    @property
    def questions_per_second(self) -> float:
        """Questions answered (errors included) per second of this run."""
        done = self.questions - self.skipped
        return done / self.seconds if self.seconds > 0 else 0.0


class _JsonlWriter:
    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.done: set[int] = set()
        if resume and path.exists():
            self.done = self._recover()
        elif path.exists() and path.stat().st_size:
            raise StoreError(f"{path}: exists; pass resume=True (--resume) or choose another file")
        self._fh = open(path, "ab")  # noqa: SIM115 - closed in close()

    def _recover(self) -> set[int]:
        done: set[int] = set()
        good = 0
        with open(self.path, "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break  # a line cut short by the crash: dropped and redone
                try:
                    done.add(int(orjson.loads(line)["query_index"]))
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    break
                good += len(line)
        with open(self.path, "r+b") as fh:
            fh.truncate(good)
        return done

    def write(self, table: pa.Table) -> None:
        rows = table.to_pylist()
        for row in rows:  # Arrow maps come back as lists of pairs: JSON objects instead
            if isinstance(row.get("pii"), list):
                row["pii"] = dict(row["pii"])
        lines = b"".join(orjson.dumps(row) + b"\n" for row in rows)
        self._fh.write(lines)
        self._fh.flush()

    def close(self, complete: bool) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()


class _ParquetWriter:
    def __init__(self, path: Path, resume: bool) -> None:
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.done: set[int] = set()
        kept: list[pa.RecordBatch] = []
        if resume and self.partial.exists():
            kept = _read_stream_prefix(self.partial)
        elif resume and path.exists():
            kept = pq.read_table(path).cast(BATCH_SCHEMA).to_batches()
        elif path.exists() or self.partial.exists():
            raise StoreError(
                f"{path}: exists (or an interrupted run left {self.partial.name}); pass "
                "resume=True (--resume) or choose another file"
            )
        for b in kept:
            self.done.update(b.column("query_index").to_pylist())
        tmp = self.partial.with_name(self.partial.name + ".tmp")
        sink = pa.OSFile(str(tmp), "wb")
        writer = pa.ipc.new_stream(sink, BATCH_SCHEMA)
        for b in kept:
            writer.write_batch(b)
        sink.flush()
        os.replace(tmp, self.partial)
        self._sink, self._writer = sink, writer

    def write(self, table: pa.Table) -> None:
        for b in table.to_batches():
            self._writer.write_batch(b)
        self._sink.flush()

    def close(self, complete: bool) -> None:
        self._writer.close()
        self._sink.close()
        if not complete:
            return
        table = pa.Table.from_batches(_read_stream_prefix(self.partial), schema=BATCH_SCHEMA)
        table = table.sort_by("query_index")
        tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        pq.write_table(table, tmp)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)
        self.partial.unlink()


def _read_stream_prefix(path: Path) -> list[pa.RecordBatch]:
    """Every whole record batch of an Arrow IPC stream, even one cut short by a crash."""
    batches: list[pa.RecordBatch] = []
    try:
        with pa.OSFile(str(path), "rb") as source:
            reader = pa.ipc.open_stream(source)
            while True:
                try:
                    batches.append(reader.read_next_batch())
                except StopIteration:
                    break
    except READ_ERRORS:
        pass  # a truncated message (or a damaged one) ends the readable prefix
    return [b.cast(BATCH_SCHEMA) if not b.schema.equals(BATCH_SCHEMA) else b for b in batches]


def open_writer(path: Path, resume: bool) -> _JsonlWriter | _ParquetWriter:
    """The answer file writer for ``path`` by its suffix (``resume``: append to what is there)."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _JsonlWriter(path, resume)
    if suffix == ".parquet":
        return _ParquetWriter(path, resume)
    raise ConfigError(f"{path}: answers are written to .jsonl or .parquet")


RATE_LIMITS = ("max_concurrency", "requests_per_minute", "tokens_per_minute")
"""Keyword arguments of :meth:`~fastrag.KnowledgeBase.answer_batch` that are no options."""


def batch_options(
    retrieval: RetrievalOptions | None,
    answer: AnswerOptions | None,
    answer_options: dict[str, Any] | None = None,
    **given: Any,
) -> tuple[RetrievalOptions, AnswerOptions, dict[str, Any]]:
    """The options of a batch run, resolved and checked once, before any question is read.

    Parameters
    ----------
    retrieval, answer : RetrievalOptions, AnswerOptions, optional
        The ``retrieval=`` and ``answer=`` objects (defaults from :mod:`fastrag.options`).
    answer_options : dict, optional
        Deprecated (a :class:`DeprecationWarning`): keyword shorthand and
        rate limits in one dict; pass the objects and the rate limits instead.
    **given
        Shorthand set by the way in (``mode``, ``threads``) and the rate
        limits (:data:`RATE_LIMITS`); ``None`` means not given.

    Returns
    -------
    tuple
        The retrieval options, the answer options and the rate limits set.
    """
    shorthand = shorthand_of(**given)
    if answer_options:
        warnings.warn(
            "answer_options= is deprecated: pass retrieval=RetrievalOptions(...), "
            "answer=AnswerOptions(...) and the rate limits (max_concurrency, "
            "requests_per_minute, tokens_per_minute) as keywords",
            DeprecationWarning,
            stacklevel=3,
        )
        shorthand = {**dict(answer_options), **shorthand}
    rate = {k: shorthand.pop(k) for k in RATE_LIMITS if k in shorthand}
    ropts, aopts = parse_options(shorthand, retrieval, answer)
    return ropts, aopts, rate


def _batches(questions: Iterator[Question], size: int) -> Iterator[list[Question]]:
    batch: list[Question] = []
    for q in questions:
        batch.append(q)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def answer_file(
    kb: KnowledgeBase,
    questions: str | Path,
    out: str | Path,
    *,
    k: int = DEFAULT_K,
    generator: Any = None,
    batch_size: int = 1024,
    resume: bool = False,
    threads: int | None = None,
    progress: Callable[[BatchProgress], None] | None = None,
    retrieval: RetrievalOptions | None = None,
    answer: AnswerOptions | None = None,
    mode: str | None = None,
    max_concurrency: int | None = None,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    answer_options: dict[str, Any] | None = None,
) -> BatchSummary:
    """Answer every question of a file into an output file (see the module docstring).

    Parameters
    ----------
    kb : KnowledgeBase
        The knowledge base.
    questions : str or Path
        ``.txt`` / ``.jsonl`` / ``.csv`` / ``.parquet`` questions.
    out : str or Path
        ``.jsonl`` or ``.parquet`` answers.
    k : int
        Chunks per question.
    generator : callable, optional
        As for :meth:`KnowledgeBase.answer`.
    batch_size : int
        Questions per vectorised batch (and per write).
    resume : bool
        Keep the rows ``out`` already holds and skip their questions.
    threads : int, optional
        Numba threads (shorthand for ``RetrievalOptions.threads``).
    progress : callable, optional
        Called with a :class:`BatchProgress` after each batch.
    retrieval, answer : RetrievalOptions, AnswerOptions, optional
        As for :meth:`KnowledgeBase.answer_batch` (resolved once, before the
        first question is read; an invalid one fails the run at once).
    mode : str, optional
        Shorthand for ``RetrievalOptions.mode``.
    max_concurrency, requests_per_minute, tokens_per_minute : optional
        As for :meth:`KnowledgeBase.answer_batch`.
    answer_options : dict, optional
        Deprecated: shorthand and rate limits in one dict (see :func:`batch_options`).

    Returns
    -------
    BatchSummary
        Counts, seconds and the share of questions whose answer cites a hit.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ConfigError(f"batch_size must be a positive int, got {batch_size!r}")
    ropts, aopts, rate = batch_options(
        retrieval, answer, answer_options, mode=mode, threads=threads,
        max_concurrency=max_concurrency, requests_per_minute=requests_per_minute,
        tokens_per_minute=tokens_per_minute,
    )  # fmt: skip
    out_path = Path(out)
    total = count_questions(questions)
    writer = open_writer(out_path, resume)
    skipped = len(writer.done)
    t0 = time.perf_counter()
    seen = answered = found = errors = cited = 0
    complete = False
    try:
        for batch in _batches(read_questions(questions), batch_size):
            seen += len(batch)
            todo = [q for q in batch if q.index not in writer.done]
            if todo:
                table = kb.answer_batch(
                    [q.text for q in todo], k=k, generator=generator, retrieval=ropts,
                    answer=aopts, **rate,
                )  # fmt: skip
                table = table.set_column(
                    0, "query_index", pa.array([q.index for q in todo], pa.int32())
                )
                table = table.add_column(0, "id", pa.array([q.id for q in todo], pa.string()))
                table = pa.Table.from_arrays(table.columns, schema=BATCH_SCHEMA)
                writer.write(table)
                err = table.column("error").is_valid()
                n_err = int(pa.compute.sum(err).as_py() or 0)
                n_found = int(pa.compute.sum(table.column("found")).as_py() or 0)
                n_cited = int(
                    pa.compute.sum(
                        pa.compute.greater(
                            pa.compute.list_value_length(table.column("citations")), 0
                        )
                    ).as_py()
                    or 0
                )
                errors += n_err
                answered += len(todo) - n_err
                found += n_found
                cited += n_cited
            if progress is not None:
                progress(BatchProgress(seen, total, time.perf_counter() - t0))
        complete = True
    finally:
        with contextlib.suppress(Exception) if not complete else contextlib.nullcontext():
            writer.close(complete)
    seconds = time.perf_counter() - t0
    return BatchSummary(
        questions=seen,
        answered=answered,
        found=found,
        errors=errors,
        skipped=min(skipped, seen),
        seconds=seconds,
        cited=cited,
    )
