"""The ``fastrag`` command: parses arguments, calls the library, prints.

Exit status: 0 on success, 1 when fastrag reports an error, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from . import __version__
from .datasets import demo_documents
from .embedding import DEFAULT_MAX_FEATURES, VocabularyEmbedder
from .errors import FastragError
from .pipeline import BuildProgress, KnowledgeBase
from .sources import read_documents
from .types import Hit
from .warmup import warmup

DEMO_QUESTIONS = (
    "How many days in advance must annual leave be requested?",
    "报销需要在多少天内提交？",
    "What are the core hours for remote work?",
    "设备丢失后多久内要报告？",
)


def _progress(stream: Any) -> Any:
    last = [0.0]

    def report(p: BuildProgress) -> None:
        now = time.perf_counter()
        if p.stage != "done" and now - last[0] < 0.5:
            return
        last[0] = now
        rate = p.text_bytes / 1e6 / p.seconds if p.seconds > 0 else 0.0
        end = "\n" if p.stage == "done" else "\r"
        stream.write(
            f"  {p.stage:5s} {p.documents:>10,} docs {p.chunks:>12,} chunks "
            f"{p.text_bytes / 1e6:>9.1f} MB  {rate:7.1f} MB/s  {p.seconds:6.1f} s{end}"
        )
        stream.flush()

    return report


def _snippet(text: str, width: int = 100) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _print_hits(hits: list[Hit]) -> None:
    for rank, h in enumerate(hits, 1):
        title = f" · {h.title}" if h.title else ""
        print(f"  [{rank}] {h.score:.3f}  {h.doc_id}#{h.ord}{title}")
        print(f"      {_snippet(h.text)}")


def _hit_json(h: Hit, rank: int) -> dict[str, Any]:
    return {
        "rank": rank,
        "chunk_id": h.chunk_id,
        "doc_id": h.doc_id,
        "ord": h.ord,
        "start": h.start,
        "end": h.end,
        "score": h.score,
        "text": h.text,
        "metadata": h.metadata,
    }


def cmd_build(args: argparse.Namespace) -> int:
    embedder = VocabularyEmbedder(None if args.max_features == 0 else args.max_features)
    print(f"building {args.output} from {args.source}", file=sys.stderr)
    kb = KnowledgeBase.build(
        read_documents(args.source),
        window=args.window,
        overlap=args.overlap,
        embedder=embedder,
        threads=args.threads,
        progress=_progress(sys.stderr),
    )
    sid = kb.save(args.output, overwrite=args.overwrite)
    s = kb.stats()
    print(
        f"saved {s['documents']:,} documents, {s['chunks']:,} chunks (dim {s['dim']}) "
        f"to {args.output} (snapshot {sid})"
    )
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    kb = KnowledgeBase.load(args.kb)
    for question in args.question:
        hits = kb.retrieve(question, k=args.k, threads=args.threads)
        if args.json:
            sys.stdout.write(
                orjson.dumps(
                    {"question": question, "hits": [_hit_json(h, i) for i, h in enumerate(hits, 1)]}
                ).decode()
                + "\n"
            )
        else:
            print(f"Q: {question}")
            _print_hits(hits)
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    kb = KnowledgeBase.load(args.kb)
    stats = kb.stats()
    stats["snapshots"] = [
        {"id": s.id, "created_at": s.created_at, "chunks": s.chunks, "current": s.current}
        for s in kb.snapshots()
    ]
    sys.stdout.write(orjson.dumps(stats, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def cmd_warmup(args: argparse.Namespace) -> int:
    seconds = warmup()
    print(f"kernels ready in {seconds:.2f} s")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    print(
        "fastrag: loading the kernels (the first run compiles them, about a minute; "
        "later runs load them from the cache)",
        file=sys.stderr,
        flush=True,
    )
    warm = warmup()
    docs = demo_documents()
    kb = KnowledgeBase.build(docs)
    with tempfile.TemporaryDirectory(prefix="fastrag-demo-") as tmp:
        target = Path(args.kb) if args.kb else Path(tmp) / "kb"
        sid = kb.save(target, overwrite=True)
        kb = KnowledgeBase.load(target)
        s = kb.stats()
        print(
            f"fastrag {__version__} demo: {s['documents']} documents, {s['chunks']} chunks, "
            f"dim {s['dim']}, saved to {target if args.kb else 'a temporary folder'} "
            f"(snapshot {sid}) and reloaded; kernels ready in {warm:.2f} s"
        )
        for question in args.question or DEMO_QUESTIONS:
            t = time.perf_counter()
            hits = kb.retrieve(question, k=args.k)
            ms = (time.perf_counter() - t) * 1e3
            print(f"\nQ: {question}   ({ms:.2f} ms)")
            _print_hits(hits)
    print(f"\ndone in {time.perf_counter() - t0:.2f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``fastrag`` command."""
    parser = argparse.ArgumentParser(
        prog="fastrag", description="Fast, honest retrieval-augmented question answering."
    )
    parser.add_argument("--version", action="version", version=f"fastrag {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="build, save, reload and query the bundled demo knowledge base")
    p.add_argument("--kb", help="keep the demo knowledge base in this folder")
    p.add_argument("-k", type=int, default=3, help="hits per question (default 3)")
    p.add_argument("question", nargs="*", help="questions to ask instead of the built-in ones")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("build", help="build a knowledge base from a .jsonl file or a text folder")
    p.add_argument("source", help="JSON Lines file ({id, text, ...} per line) or folder of .txt/.md")
    p.add_argument("-o", "--output", required=True, help="knowledge-base folder to write")
    p.add_argument("--window", type=int, default=200, help="chunk size in characters (200)")
    p.add_argument("--overlap", type=int, default=40, help="chunk overlap in characters (40)")
    p.add_argument(
        "--max-features",
        type=int,
        default=DEFAULT_MAX_FEATURES,
        help=f"vocabulary cap of the embedder, 0 = no cap ({DEFAULT_MAX_FEATURES})",
    )
    p.add_argument("--threads", type=int, default=None, help="Numba threads")
    p.add_argument("--overwrite", action="store_true", help="replace a different knowledge base")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("query", help="retrieve the chunks most similar to questions")
    p.add_argument("kb", help="knowledge-base folder")
    p.add_argument("question", nargs="+", help="one or more questions")
    p.add_argument("-k", type=int, default=5, help="hits per question (default 5)")
    p.add_argument("--threads", type=int, default=None, help="Numba threads")
    p.add_argument("--json", action="store_true", help="print one JSON object per question")
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("info", help="print a knowledge base's statistics and snapshots as JSON")
    p.add_argument("kb", help="knowledge-base folder")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("warmup", help="compile (or load cached) kernels and report the time")
    p.set_defaults(func=cmd_warmup)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except FastragError as exc:
        print(f"fastrag: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fastrag: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
