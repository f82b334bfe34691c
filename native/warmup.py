"""Compile every kernel signature the engine uses, before the first request."""

from __future__ import annotations

from . import chunking, embedding, topk

__all__ = ["compile_all"]


def compile_all() -> None:
    """Compile (or load from the on-disk cache) every kernel, writable and read-only inputs."""
    chunking.warmup()
    embedding.warmup()
    topk.warmup()
