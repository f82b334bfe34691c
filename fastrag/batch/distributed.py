"""Answer questions at scale on Ray Data (``pip install "fastrag-engine[distributed]"``).

:func:`answer_dataset` maps a :class:`ray.data.Dataset` of questions through a
pool of actors; each actor memory-maps the knowledge base once
(:meth:`~fastrag.KnowledgeBase.load` in its constructor) and answers Arrow
batches with :meth:`~fastrag.KnowledgeBase.answer_batch`.
:func:`answer_file_ray` does the same for a questions file and writes one
answers file exactly as :func:`fastrag.batch.files.answer_file` does (same columns,
rows in input order, ``resume``).

Matching answers to questions: every output row carries ``query_index``, the
row's global position in the input (0-based), and keeps the input's columns
(``id`` and any others). When the input already has a ``query_index`` column
it is kept as given; otherwise :func:`answer_dataset` numbers the rows in
dataset order with one ordered pass over the input (the questions are held in
the object store for that pass).

Every node that runs an actor must be able to read the knowledge base at the
same path (a shared filesystem such as NFS, or the same local copy on each
node) and must have ``fastrag`` installed. Ray is imported only when these
functions are called: ``import fastrag`` works without it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..answer.table import ANSWER_BATCH_SCHEMA
from ..errors import ConfigError, DocumentError, StoreError, StoreNotFoundError
from ..options import DEFAULT_K, AnswerOptions, RetrievalOptions
from ..store.sources import read_questions
from .files import BATCH_SCHEMA, BatchProgress, BatchSummary, batch_options, open_writer

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

__all__ = ["answer_dataset", "answer_file_ray"]

_INSTALL_HINT = (
    'fastrag.batch.distributed needs Ray Data: pip install "fastrag-engine[distributed]"'
)
_ANSWER_COLUMNS = ANSWER_BATCH_SCHEMA.names  # query_index, question, answer, ...
_KEPT = ("id", "query_index", "question")  # input columns the output shares


def _import_ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401 - the Data library is a separate extra of ray
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return ray


# -- the actor -------------------------------------------------------------------


def _answer_table(
    kb: Any, batch: pa.Table, *, k: int, generator: Any, threads: int | None,
    retrieval: RetrievalOptions, answer: AnswerOptions, rate: dict[str, Any],
) -> pa.Table:  # fmt: skip
    """Answer one Arrow batch: ``id`` (if any), the answer columns, the other input columns."""
    names = batch.column_names
    if "question" not in names:
        raise ConfigError(f"the questions need a 'question' column; got {names}")
    clash = [n for n in names if n in _ANSWER_COLUMNS and n not in _KEPT]
    if clash:
        raise ConfigError(f"input columns {clash} clash with answer columns; rename them")
    table = kb.answer_batch(
        batch.column("question").to_pylist(), k=k, generator=generator, retrieval=retrieval,
        answer=answer, threads=threads, **rate,
    )  # fmt: skip
    if "query_index" in names:
        positions = batch.column("query_index").cast(pa.int32()).combine_chunks()
    else:  # only when answer_dataset was bypassed: positions within the batch
        positions = table.column("query_index").combine_chunks()
    columns = {n: table.column(n) for n in _ANSWER_COLUMNS}
    columns["query_index"] = positions
    out: dict[str, Any] = {}
    if "id" in names:
        out["id"] = batch.column("id")
    out.update(columns)
    for n in names:
        if n not in _KEPT:
            out[n] = batch.column(n)
    return pa.table(out)


class _Answerer:
    """Ray Data actor: loads (memory-maps) the knowledge base once, answers Arrow batches."""

    def __init__(
        self, kb_path: str, k: int, generator: Any, threads: int | None,
        retrieval: RetrievalOptions, answer: AnswerOptions, rate: dict[str, Any],
    ) -> None:  # fmt: skip
        from .._threads import max_threads
        from ..kb import KnowledgeBase

        self._kb = KnowledgeBase.load(kb_path)
        self._k, self._generator = k, generator
        self._threads = None if threads is None else min(threads, max_threads())
        self._options = retrieval, answer, rate

    def __call__(self, batch: pa.Table) -> pa.Table:
        retrieval, answer, rate = self._options
        return _answer_table(
            self._kb, batch, k=self._k, generator=self._generator, threads=self._threads,
            retrieval=retrieval, answer=answer, rate=rate,
        )  # fmt: skip


# -- numbering -------------------------------------------------------------------


def _num_rows(table: pa.Table) -> int:
    return table.num_rows


def _number_block(table: pa.Table, start: int, rows: int) -> tuple[pa.Table, ...] | pa.Table:
    """Prepend ``query_index`` (``start``, ``start + 1``, ...); cut into pieces of ``rows`` rows."""
    table = table.add_column(
        0, "query_index", pa.array(range(start, start + table.num_rows), pa.int32())
    )
    pieces = tuple(table.slice(i, rows) for i in range(0, table.num_rows, rows))
    return pieces if len(pieces) > 1 else table


def _numbered(ray: Any, ds: ray.data.Dataset, rows: int) -> ray.data.Dataset:
    """``ds`` with a ``query_index`` column (each row's position in the dataset's order).

    Blocks of at most ``rows`` rows, so that every actor gets work even when
    the input is one big block (as a single Parquet file of questions is).
    """
    options = ds.context.execution_options
    before = options.preserve_order
    options.preserve_order = True  # only for this pass: blocks come back in dataset order
    try:
        refs = ds.to_arrow_refs()
    finally:
        options.preserve_order = before
    count, number = ray.remote(_num_rows), ray.remote(_number_block)
    sizes = ray.get([count.remote(r) for r in refs])
    out, start = [], 0
    for ref, size in zip(refs, sizes, strict=False):
        if size:
            pieces = number.options(num_returns=-(-size // rows)).remote(ref, start, rows)
            out.extend(pieces if isinstance(pieces, list) else [pieces])
        start += size
    if not out:
        return ds
    return ray.data.from_arrow_refs(out)


# -- public API ------------------------------------------------------------------


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_options(k: Any, batch_size: Any, concurrency: Any, num_cpus: Any, threads: Any) -> None:
    for name, value in (("k", k), ("batch_size", batch_size)):
        if not _positive_int(value):
            raise ConfigError(f"{name} must be a positive int, got {value!r}")
    ok = _positive_int(concurrency)
    if isinstance(concurrency, tuple) and len(concurrency) == 2:
        lo, hi = concurrency
        ok = _positive_int(lo) and _positive_int(hi) and lo <= hi
    if concurrency is not None and not ok:
        raise ConfigError(f"concurrency must be a positive int or (min, max), got {concurrency!r}")
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or not num_cpus > 0:
        raise ConfigError(f"num_cpus must be a positive number, got {num_cpus!r}")
    if threads is not None and not _positive_int(threads):
        raise ConfigError(f"threads must be a positive int or None, got {threads!r}")


def answer_dataset(
    ds: ray.data.Dataset,
    kb_path: str | os.PathLike[str],
    *,
    k: int = DEFAULT_K,
    mode: str | None = None,
    generator: Any = None,
    batch_size: int = 256,
    concurrency: int | tuple[int, int] | None = None,
    num_cpus: float = 1,
    threads: int | None = None,
    retrieval: RetrievalOptions | None = None,
    answer: AnswerOptions | None = None,
    max_concurrency: int | None = None,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    answer_options: dict[str, Any] | None = None,
) -> ray.data.Dataset:
    """Answer a Ray Dataset of questions with a pool of actors.

    The answering is lazy, like any transform; without a ``query_index``
    column, the numbering pass over ``ds`` runs here.

    Parameters
    ----------
    ds : ray.data.Dataset
        A ``question`` column (str); optional ``id``, ``query_index`` and other
        columns, which are kept.
    kb_path : str or PathLike
        A saved knowledge base, readable at this path on every node (a shared
        filesystem, or the same local copy on each node). A relative path is
        made absolute here.
    k, mode, generator, retrieval, answer
        As for :meth:`~fastrag.KnowledgeBase.answer_batch` (``mode`` is
        shorthand for ``RetrievalOptions.mode``); the options are resolved
        and checked here, once, and pickled to each actor; ``generator`` is
        pickled to each actor (e.g. :class:`~fastrag.answer.chat.OpenAIChatGenerator`;
        default the extractive generator).
    batch_size : int
        Questions per :meth:`~fastrag.KnowledgeBase.answer_batch` call.
    concurrency : int or (int, int), optional
        Actors: a fixed number, or (min, max) for an autoscaling pool;
        default Ray's (autoscaling from 1).
    num_cpus : float
        CPUs reserved per actor.
    threads : int, optional
        Numba threads per actor; default ``num_cpus`` rounded up (capped at
        the node's ``NUMBA_NUM_THREADS``).
    max_concurrency, requests_per_minute, tokens_per_minute : optional
        As for :meth:`~fastrag.KnowledgeBase.answer_batch`, per actor.
    answer_options : dict, optional
        Deprecated: shorthand and rate limits in one dict
        (:func:`fastrag.batch.files.batch_options`).

    Returns
    -------
    ray.data.Dataset
        Per question: ``id`` (when the input has one), the columns of
        :data:`~fastrag.answer.table.ANSWER_BATCH_SCHEMA` with ``query_index`` =
        the input's ``query_index`` if it has one, else the row's position in
        ``ds`` (numbered by one ordered pass over ``ds``), then the
        input's other columns. Error messages name questions by that position.
        Rows come out in input order only with
        ``ds.context.execution_options.preserve_order = True``; match them by
        ``query_index`` or ``id`` otherwise.
    """
    ray = _import_ray()
    _check_options(k, batch_size, concurrency, num_cpus, threads)
    ropts, aopts, rate = batch_options(
        retrieval, answer, answer_options, mode=mode, max_concurrency=max_concurrency,
        requests_per_minute=requests_per_minute, tokens_per_minute=tokens_per_minute,
    )  # fmt: skip
    path = Path(kb_path).absolute()
    if threads is None:
        threads = max(1, int(-(-num_cpus // 1)))
    schema = ds.schema()
    names = [] if schema is None else list(schema.names)
    if "question" not in names:
        raise ConfigError(f"the questions need a 'question' column; the dataset has {names}")
    clash = [n for n in names if n in _ANSWER_COLUMNS and n not in _KEPT]
    if clash:
        raise ConfigError(f"input columns {clash} clash with answer columns; rename them")
    if "query_index" not in names:
        ds = _numbered(ray, ds, batch_size)
    if concurrency is None:
        compute = ray.data.ActorPoolStrategy(min_size=1, max_size=None)
    elif isinstance(concurrency, tuple):
        compute = ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    else:
        compute = ray.data.ActorPoolStrategy(size=concurrency)
    return ds.map_batches(
        _Answerer,
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=compute,
        num_cpus=num_cpus,
        fn_constructor_args=(str(path), k, generator, threads, ropts, aopts, rate),
    )


@contextlib.contextmanager
def _ray_session(ray: Any, address: str | None, local_cpus: int | None) -> Iterator[None]:
    """Use the running Ray, else start one (local, or connect to ``address``) and stop it after."""
    if ray.is_initialized():
        yield
        return
    if address is None:
        ray.init(num_cpus=local_cpus or os.cpu_count() or 1, include_dashboard=False)
    else:
        ray.init(address=address)
    try:
        yield
    finally:
        ray.shutdown()


def _drop_done(table: pa.Table, done: pa.Array) -> pa.Table:
    return table.filter(pc.invert(pc.is_in(table.column("query_index"), done)))


def _questions_dataset(
    ray: Any, path: Path, block_rows: int, done: set[int]
) -> tuple[ray.data.Dataset | None, int, int]:
    """The questions not in ``done`` (with ``query_index``), the file's count, the count to do.

    The dataset is None only when there is nothing to do.
    """
    if path.suffix.lower() == ".parquet":
        if not path.is_file():
            raise StoreNotFoundError(f"{path}: no such file")
        pf = pq.ParquetFile(path)
        names, total = pf.schema_arrow.names, pf.metadata.num_rows
        column = "question" if "question" in names else "text" if "text" in names else None
        if column is None:
            raise DocumentError(f"{path}: needs a 'question' or 'text' column")
        ds = ray.data.read_parquet(str(path.absolute()))
        ds = ds.select_columns([column] + (["id"] if "id" in names else []))
        if column == "text":
            ds = ds.rename_columns({"text": "question"})
        todo = total - sum(1 for i in done if 0 <= i < total)
        if todo:
            ds = _numbered(ray, ds, block_rows)
            if done:
                # ray's stubs type the function as taking the batch alone (no fn_kwargs)
                ds = ds.map_batches(
                    _drop_done,  # type: ignore[arg-type]
                    batch_format="pyarrow", batch_size=None,
                    fn_kwargs={"done": pa.array(sorted(done), pa.int32())},
                )  # fmt: skip
        return ds, total, todo
    tables, batch, total = [], [], 0
    for q in itertools.chain(read_questions(path), [None]):
        if q is not None:
            total += 1
            if q.index not in done:
                batch.append(q)
        if batch and (q is None or len(batch) == block_rows):
            tables.append(
                pa.table(
                    {
                        "query_index": pa.array([b.index for b in batch], pa.int32()),
                        "id": pa.array([b.id for b in batch], pa.string()),
                        "question": [b.text if isinstance(b.text, str) else None for b in batch],
                    }
                )  # fmt: skip
            )
            batch = []
    todo = sum(t.num_rows for t in tables)
    return (ray.data.from_arrow(tables) if tables else None), total, todo


def _as_batch_schema(table: pa.Table) -> pa.Table:
    if "id" not in table.column_names:
        table = table.add_column(0, "id", pa.nulls(table.num_rows, pa.string()))
    return table.select(BATCH_SCHEMA.names).cast(BATCH_SCHEMA)


def answer_file_ray(
    kb_path: str | os.PathLike[str],
    questions_path: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    address: str | None = None,
    k: int = DEFAULT_K,
    mode: str | None = None,
    generator: Any = None,
    batch_size: int = 256,
    concurrency: int | tuple[int, int] | None = None,
    num_cpus: float = 1,
    threads: int | None = None,
    resume: bool = False,
    retrieval: RetrievalOptions | None = None,
    answer: AnswerOptions | None = None,
    max_concurrency: int | None = None,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    answer_options: dict[str, Any] | None = None,
    local_cpus: int | None = None,
    progress: Callable[[BatchProgress], None] | None = None,
) -> BatchSummary:
    """Answer a questions file on Ray into one answers file, like ``batch.files.answer_file``.

    The output is written by this process exactly as
    :func:`~fastrag.batch.files.answer_file` writes it (same columns; ``.jsonl``
    appended and flushed per batch, ``.parquet`` via ``<out>.partial``), rows
    in input order; ``resume=True`` keeps the rows already written and
    answers only the other questions.

    Parameters
    ----------
    kb_path : str or PathLike
        A saved knowledge base, readable at this path on every node.
    questions_path : str or PathLike
        ``.txt`` / ``.jsonl`` / ``.csv`` (read by this process) or
        ``.parquet`` (read by Ray: on a cluster, at this path on the nodes).
    out_path : str or PathLike
        ``.jsonl`` or ``.parquet`` answers.
    address : str, optional
        A Ray cluster to connect to (``"auto"``, ``"ray://head:10001"``, ...);
        default a local Ray with ``local_cpus`` CPUs (default all). If Ray is
        already initialised in this process, that session is used as is.
    k, mode, generator, batch_size, concurrency, num_cpus, threads, retrieval, answer
        As for :func:`answer_dataset`.
    max_concurrency, requests_per_minute, tokens_per_minute, answer_options
        As for :func:`answer_dataset` (``answer_options`` is deprecated).
    resume : bool
        Keep the rows ``out_path`` already holds and skip their questions.
    local_cpus : int, optional
        CPUs of the local Ray started when ``address`` is None.
    progress : callable, optional
        Called with a :class:`~fastrag.batch.files.BatchProgress` after each written
        batch (Ray's own progress bars are then turned off).

    Returns
    -------
    BatchSummary
        As from :func:`~fastrag.batch.files.answer_file`; ``seconds`` excludes
        starting and stopping Ray.
    """
    ray = _import_ray()
    _check_options(k, batch_size, concurrency, num_cpus, threads)
    ropts, aopts, rate = batch_options(
        retrieval, answer, answer_options, mode=mode, max_concurrency=max_concurrency,
        requests_per_minute=requests_per_minute, tokens_per_minute=tokens_per_minute,
    )  # fmt: skip
    out = Path(out_path)
    if out.suffix.lower() not in (".jsonl", ".parquet"):
        raise ConfigError(f"{out}: answers are written to .jsonl or .parquet")
    partial = out.with_name(out.name + ".partial")
    if not resume and ((out.exists() and out.stat().st_size) or partial.exists()):
        raise StoreError(f"{out}: exists; pass resume=True (--resume) or choose another file")
    if address is None and not Path(kb_path).is_dir():
        raise StoreNotFoundError(f"{kb_path}: no such knowledge base")
    with _ray_session(ray, address, local_cpus):
        writer = open_writer(out, resume)
        complete = False
        seen = answered = found = errors = cited = 0
        try:
            t0 = time.perf_counter()
            ds, total, todo = _questions_dataset(ray, Path(questions_path), batch_size, writer.done)
            skipped = total - todo
            batches: Any = ()
            if todo:
                assert ds is not None  # None only when nothing is left to do
                answers = answer_dataset(
                    ds, kb_path, k=k, generator=generator, batch_size=batch_size,
                    concurrency=concurrency, num_cpus=num_cpus, threads=threads,
                    retrieval=ropts, answer=aopts, **rate,
                )  # fmt: skip
                answers.context.execution_options.preserve_order = True  # rows in input order
                if progress is not None:
                    answers.context.enable_progress_bars = False
                batches = answers.iter_batches(batch_size=None, batch_format="pyarrow")
            last = -1
            for batch in batches:
                table = _as_batch_schema(batch)
                if not table.num_rows:
                    continue
                positions = table.column("query_index").to_numpy()
                if positions[0] <= last or (positions[1:] <= positions[:-1]).any():
                    raise StoreError("Ray returned answers out of input order")  # pragma: no cover
                last = int(positions[-1])
                writer.write(table)
                n_err = int(pc.sum(table.column("error").is_valid()).as_py() or 0)
                seen += table.num_rows
                errors += n_err
                answered += table.num_rows - n_err
                found += int(pc.sum(table.column("found")).as_py() or 0)
                lengths = pc.list_value_length(table.column("citations"))
                cited += int(pc.sum(pc.greater(lengths, 0)).as_py() or 0)
                if progress is not None:
                    progress(BatchProgress(skipped + seen, total, time.perf_counter() - t0))
            complete = True
        finally:
            with contextlib.suppress(Exception) if not complete else contextlib.nullcontext():
                writer.close(complete)
        seconds = time.perf_counter() - t0
    return BatchSummary(
        questions=total,
        answered=answered,
        found=found,
        errors=errors,
        skipped=skipped,
        seconds=seconds,
        cited=cited,
    )
