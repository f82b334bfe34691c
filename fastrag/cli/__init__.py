"""The ``fastrag`` command: parses arguments, calls the library, prints.

Exit status: 0 on success, 1 when fastrag reports an error (one line naming
the problem; ``--debug`` adds the traceback), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from .. import __version__
from ..batch.files import answer_file
from ..datasets import demo_documents
from ..errors import ConfigError, FastragError
from ..kb import KnowledgeBase
from ..options import DEFAULT_K, RetrievalConfig
from ..serve.settings import ServeSettings
from ..serve.shared import hits_json
from ..store.loaders import load_documents
from ..store.report import SourceReport
from ..store.sources import read_questions
from ..warmup import start_query_compile, warmup
from .args import (
    _add_embedder_args,
    _add_llm,
    _add_mode,
    _add_multimodal,
    _add_ocr,
    _add_sql,
    _ask_rows,
    _close_clients,
    _embedder,
    _generator,
    _load_limits,
    _multimodal,
    cli_options,
)
from .args import (
    parse_sql_params as parse_sql_params,  # tests and callers import it from here
)
from .output import (
    _batch_progress,
    _build_progress,
    _Failures,
    _print_answer,
    _print_hits,
)

DEMO_QUESTIONS = (
    "年假怎么申请？",
    "How many days do I have to submit an expense report?",
    "设备丢失后多久内要报告？",
    "公司食堂几点开门？",
)


def _opened(args: argparse.Namespace, kb: KnowledgeBase) -> KnowledgeBase:
    """``kb``, closed when the command ends, however it ends (:func:`main`'s exit stack).

    Closing releases what the knowledge base holds open: the embedder's
    HTTP clients, and a local store's directory (Qdrant's local mode, Milvus
    Lite lock it: a second ``main()`` in this process, or another process,
    opens it next).
    """
    closing = getattr(args, "closing", None)
    return closing.enter_context(kb) if closing is not None else kb


def _sync_index(args: argparse.Namespace, failures: _Failures) -> int:
    """``fastrag index`` into an existing knowledge base: add, replace, delete what changed."""
    from ..store.loaders import resolve_sources

    t0 = time.perf_counter()
    kb = _opened(args, KnowledgeBase.load(args.kb))
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
    kb = _opened(
        args,
        KnowledgeBase.build(
            docs,
            window=200 if args.window is None else args.window,
            overlap=40 if args.overlap is None else args.overlap,
            chunking=args.chunking or "auto",
            embedder=embedder,
            index=args.index or "exact",
            threads=args.threads,
            progress=_build_progress(sys.stderr),
            ontology=getattr(args, "ontology", None),
            tune=_TUNE[args.tune],
        ),
    )
    _print_tuning(kb.stats()["fusion_tuning"])
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


_TUNE: dict[str, bool | str] = {"auto": "auto", "on": True, "off": False}


def _print_tuning(report: dict[str, Any] | None) -> None:
    """One line on stderr: the fusion the tuning chose, or why it did not run."""
    if not report:
        return
    if "skipped" in report:
        print(f"fusion: not tuned ({report['skipped']})", file=sys.stderr)
        return
    weights = "/".join(
        f"{report[name]:g}" for name in ("vector_weight", "keyword_weight", "document_weight")
    )
    verdict = "chosen" if report.get("applied") else "kept (no candidate beat it on both halves)"
    print(
        f"fusion: {report['fusion']} {weights} (vector/keyword/document) {verdict}; "
        f"pseudo-nDCG@10 {report['pseudo_ndcg10']:.4f} against the default's "
        f"{report['default_pseudo_ndcg10']:.4f} on {report['queries']} pseudo-questions, "
        f"{report['seconds']:.2f} s",
        file=sys.stderr,
    )


def _add_tune(p: argparse.ArgumentParser) -> None:
    """``--tune auto|on|off``: ``KnowledgeBase.build(tune=...)`` (index and eval)."""
    p.add_argument(
        "--tune", choices=tuple(_TUNE), default="auto",
        help="choose the hybrid fusion from pseudo-questions of the corpus: auto (default: "
        "200 documents or more, within 10 %% of the build's time, when no fusion is set), "
        "on, or off (the embedder kind's fixed weights)",
    )  # fmt: skip


def cmd_tune(args: argparse.Namespace) -> int:
    """``fastrag tune``: choose the hybrid fusion from pseudo-questions and save it."""
    kb = _opened(args, KnowledgeBase.load(args.kb))
    choice = kb.tune_fusion(queries=args.queries, seed=args.seed, apply=not args.dry_run)
    report = choice.report(applied=not args.dry_run and not choice.kept_default)
    if args.json:
        sys.stdout.write(orjson.dumps(report).decode() + "\n")
    else:
        _print_tuning(report)
    if not args.dry_run:
        sid = kb.save(args.kb)
        print(f"saved snapshot {sid} of {args.kb}", file=sys.stderr)
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    """``fastrag ask``: answer one question, citing the chunks it stands on."""
    kb = _opened(args, KnowledgeBase.load(args.kb))
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


def cmd_batch(args: argparse.Namespace) -> int:
    """``fastrag batch``: answer a file of questions into a .jsonl or .parquet file."""
    rate = {
        "max_concurrency": args.max_concurrency,
        "requests_per_minute": args.rpm,
        "tokens_per_minute": args.tpm,
    }
    if args.engine == "ray":
        from ..batch.distributed import answer_file_ray

        retrieval, answer = cli_options(args, threads=None)  # Ray: threads per actor, its own
        summary = answer_file_ray(
            args.kb, args.questions, args.out, address=args.address, k=args.k,
            batch_size=args.batch_size, resume=args.resume, generator=_generator(args),
            retrieval=retrieval, answer=answer, **rate,
        )  # fmt: skip
    else:
        retrieval, answer = cli_options(args)
        kb = _opened(args, KnowledgeBase.load(args.kb))
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
    kb = _opened(args, KnowledgeBase.load(args.kb))
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
    kb = _opened(args, KnowledgeBase.load(args.kb))
    stats = kb.stats()
    stats["snapshots"] = [
        {"id": s.id, "created_at": s.created_at, "chunks": s.chunks, "current": s.current}
        for s in kb.snapshots()
    ]
    sys.stdout.write(orjson.dumps(stats, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """``fastrag eval``: score retrieval on a BEIR-layout folder."""
    from ..batch.evaluation import evaluate_beir

    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    print(
        f"indexing {args.dataset} ({args.window}/{args.overlap} {args.chunking}) ...",
        file=sys.stderr,
    )
    retrieval = RetrievalConfig(
        fusion=args.fusion, vector_weight=args.vector_weight, keyword_weight=args.keyword_weight,
        document_weight=args.document_weight,
    )  # fmt: skip
    build = {
        "chunking": args.chunking, "embedder": _embedder(args), "retrieval": retrieval,
        "tune": _TUNE[args.tune],
    }  # fmt: skip
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
    kb = _opened(args, KnowledgeBase.load(args.kb))
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
    kb = _opened(args, KnowledgeBase.build(demo_documents()))
    if child is not None:
        child.wait()  # success or not: whatever it did not cache compiles here
    warm = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="fastrag-demo-") as tmp:
        target = Path(args.kb) if args.kb else Path(tmp) / "kb"
        kb.save(target, overwrite=True)
        kb = _opened(args, KnowledgeBase.load(target))
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
    from ..serve.settings import parse_kb_args, parse_sql_tables

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
        from ..serve.run import serve
    except ModuleNotFoundError as exc:
        print(f"fastrag: error: {exc.name} is missing: pip install \"fastrag-engine[serve]\"",
              file=sys.stderr)  # fmt: skip
        return 1
    settings = _serve_settings(args)
    serve(
        settings, port=args.port, workers=args.workers, insecure=args.insecure,
        access_log=args.access_log,
    )  # fmt: skip
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """``fastrag mcp``: serve the MCP tools and knowledge-base resources over stdio."""
    try:
        from ..serve.mcp import run_stdio, sql_tool_of
        from ..serve.registry import Registry
    except ModuleNotFoundError as exc:
        print(f"fastrag: error: {exc.name} is missing: pip install \"fastrag-engine[serve]\"",
              file=sys.stderr)  # fmt: skip
        return 1
    settings = _serve_settings(args)
    warmup()
    generator = _generator(args)
    run_stdio(Registry(settings.kbs), generator=generator, sql_tool=sql_tool_of(settings))
    return 0


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
        "qdrant://host:6333, qdrant-edge:/dir, milvus:/file.db, milvus://host:19530",
    )
    _add_tune(p)
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
    _add_sql(p, query=True)
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
    _add_tune(p)
    p.set_defaults(func=cmd_eval)

    p = add("tune", "choose a knowledge base's hybrid fusion from pseudo-questions of its corpus")
    p.add_argument("kb", help="knowledge-base folder (a new snapshot keeps the choice)")
    p.add_argument("--queries", type=int, default=60, help="pseudo-questions (default 60)")
    p.add_argument("--seed", type=int, default=0, help="seed of the pseudo-questions (0)")
    p.add_argument("--dry-run", action="store_true", help="report the choice, save nothing")
    p.add_argument("--json", action="store_true", help="print the choice as JSON")
    p.set_defaults(func=cmd_tune)

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
        "the event loop (default: the usable cores divided among the workers)",
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
        with contextlib.ExitStack() as closing:  # the knowledge bases the command opened
            args.closing = closing
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
