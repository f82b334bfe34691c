"""LanceDB: a local table of precomputed vectors, flat search (no ANN index), cosine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .base import Runner
from .common import plain_chunk_docs


class LanceDB(Runner):
    name = "lancedb"
    label = "LanceDB (local, flat)"
    chunker = "Python windows 200/40 (LanceDB has no splitter)"
    batch_api = "table.search([v1, v2, ...]) (multi-vector query)"
    batch_is_loop = False
    persist_note = "written during ingestion"

    @classmethod
    def check(cls) -> None:
        import lancedb  # noqa: F401

    @classmethod
    def version(cls) -> str:
        import lancedb

        return f"lancedb {lancedb.__version__}"

    def __init__(self, embedder: Any, workdir: Path) -> None:
        super().__init__(embedder, workdir)
        self.path = self.workdir / "store"

    def chunk(self, docs: list[dict[str, Any]]) -> int:
        return len(plain_chunk_docs(docs)[0])

    def ingest(self, docs: list[dict[str, Any]]) -> None:
        import lancedb
        import pyarrow as pa

        texts, doc_ids = plain_chunk_docs(docs)
        vectors = self.emb.embed(texts)
        self.n = len(texts)
        self.doc_ids = doc_ids
        self.texts = texts
        data = pa.table(
            {
                "id": pa.array(np.arange(len(texts), dtype=np.int64)),
                "doc_id": pa.array(doc_ids),
                "text": pa.array(texts),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(vectors.ravel()), vectors.shape[1]
                ),
            }
        )
        self.db = lancedb.connect(str(self.path))
        self.table = self.db.create_table("chunks", data=data)

    def chunk_table(self) -> tuple[list[Any], np.ndarray, list[str]]:
        t = self.table.to_arrow().sort_by("id")
        vectors = t.column("vector").combine_chunks().flatten().to_numpy().reshape(len(t), -1)
        return t.column("id").to_pylist(), vectors, t.column("doc_id").to_pylist()

    def query(self, question: str) -> list[Any]:
        v = self.emb.embed([question])[0]
        return [r["id"] for r in self.table.search(v).distance_type("cosine").limit(10).to_list()]

    def batch(self, questions: list[str]) -> Any:
        q = self.emb.embed(questions)
        return self.table.search(list(q)).distance_type("cosine").limit(10).to_arrow()

    def batch_keys(self, native: Any) -> list[list[Any]]:
        qi = native.column("query_index").to_pylist()
        ids = native.column("id").to_pylist()
        out: list[list[Any]] = [[] for _ in range(max(qi) + 1 if qi else 0)]
        dist = native.column("_distance").to_pylist()
        for q, _dist, d in sorted(zip(qi, dist, ids, strict=True), key=lambda x: (x[0], x[1])):
            out[q].append(d)
        return out

    def persist(self, path: Path) -> None:
        pass  # the table is written by create_table

    def reload(self, path: Path) -> None:
        import lancedb

        self.db = lancedb.connect(str(path))
        self.table = self.db.open_table("chunks")
