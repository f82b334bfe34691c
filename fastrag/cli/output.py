"""What the ``fastrag`` command prints: hits, answers, progress and failures."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..batch.files import BatchProgress
from ..kb import BuildProgress
from ..types import Answer, Hit


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
