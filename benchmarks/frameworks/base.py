"""The runner base class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import HashedBigramEmbedder


class Runner:
    name = "?"
    label = "?"
    chunker = "?"
    batch_api = "loop of query()"
    batch_is_loop = True
    persist_note = ""  # non-empty when persisting happens during ingestion

    def __init__(self, embedder: HashedBigramEmbedder, workdir: Path) -> None:
        self.emb = embedder
        self.workdir = Path(workdir)

    @classmethod
    def check(cls) -> None:
        """Import the framework (ImportError names what is missing)."""

    @classmethod
    def version(cls) -> str:
        return ""

    def prepare(self) -> None:
        """One-time start-up a service does before its first request (not timed in reload)."""

    def chunk(self, docs: list[dict[str, Any]]) -> int:
        raise NotImplementedError

    def ingest(self, docs: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def chunk_table(self) -> tuple[list[Any], Any, list[str]]:
        raise NotImplementedError

    def query(self, question: str) -> list[Any]:
        raise NotImplementedError

    def batch(self, questions: list[str]) -> Any:
        return [self.query(q) for q in questions]

    def batch_keys(self, native: Any) -> list[list[Any]]:
        return native

    def persist(self, path: Path) -> None:
        raise NotImplementedError

    def reload(self, path: Path) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
