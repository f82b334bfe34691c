"""Plain numpy: Python windows, one matrix, matmul + argpartition; np.save + JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .base import Runner
from .common import plain_chunk_docs

K = 10


def _top_k(scores: np.ndarray, k: int = K) -> np.ndarray:
    """Row-wise top-k indices, best first (scores: (m, n))."""
    kk = min(k, scores.shape[1])
    part = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
    order = np.argsort(-np.take_along_axis(scores, part, 1), axis=1)
    return np.take_along_axis(part, order, 1)


class PlainNumpy(Runner):
    name = "numpy"
    label = "plain numpy"
    chunker = "Python windows 200/40 (fastrag's semantics)"
    batch_api = "Q @ V.T in blocks of 256 + argpartition"
    batch_is_loop = False

    @classmethod
    def version(cls) -> str:
        return np.__version__

    def chunk(self, docs: list[dict[str, Any]]) -> int:
        return len(plain_chunk_docs(docs)[0])

    def ingest(self, docs: list[dict[str, Any]]) -> None:
        self.texts, self.doc_ids = plain_chunk_docs(docs)
        self.vectors = np.ascontiguousarray(self.emb.embed(self.texts), dtype=np.float32)

    def chunk_table(self) -> tuple[list[Any], np.ndarray, list[str]]:
        return list(range(len(self.texts))), self.vectors, self.doc_ids

    def query(self, question: str) -> list[Any]:
        s = self.vectors @ self.emb.embed([question])[0]
        return _top_k(s[None, :])[0].tolist()

    def batch(self, questions: list[str]) -> Any:
        q = self.emb.embed(questions)
        return np.concatenate(
            [_top_k(q[lo : lo + 256] @ self.vectors.T) for lo in range(0, len(q), 256)]
        )

    def batch_keys(self, native: Any) -> list[list[Any]]:
        return native.tolist()

    def persist(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        np.save(path / "vectors.npy", self.vectors)
        with open(path / "chunks.json", "w", encoding="utf-8") as fh:
            json.dump({"texts": self.texts, "doc_ids": self.doc_ids}, fh, ensure_ascii=False)

    def persist_durable(self, path: Path) -> None:
        """The same files, each fsynced, and the directory too (as fastrag's save does)."""
        import os

        self.persist(path)
        for name in ("vectors.npy", "chunks.json"):
            fd = os.open(path / name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def reload(self, path: Path) -> None:
        self.vectors = np.load(path / "vectors.npy")
        with open(path / "chunks.json", encoding="utf-8") as fh:
            data = json.load(fh)
        self.texts, self.doc_ids = data["texts"], data["doc_ids"]
