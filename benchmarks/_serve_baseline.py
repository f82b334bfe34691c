"""The peer of ``bench_serve.py``: a plain FastAPI + numpy retrieval service over the same knowledge base.

What a developer would write without fastrag: the chunk vectors read from the
knowledge base's Arrow file into one numpy matrix, a matrix-vector product and
``argpartition`` per question, the hits returned as JSON by a FastAPI route.
The question is embedded with the knowledge base's own embedder (fastrag's
``VocabularyEmbedder``: a few microseconds), so both services rank in the same
vector space and differ only in search and serving.

Run by ``bench_serve.py`` as ``uvicorn _serve_baseline:app`` with
``FASTRAG_BASELINE_KB`` naming the knowledge-base folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
from fastapi import FastAPI
from fastapi.responses import Response
from pydantic import BaseModel

import fastrag

ROOT = Path(os.environ["FASTRAG_BASELINE_KB"])
manifest = json.loads((ROOT / "manifest.json").read_text())
snapshot = ROOT / "snapshots" / manifest["current"]
with pa.memory_map(str(snapshot / "chunks.arrow")) as source:
    table = pa.ipc.open_file(source).read_all()
dim = int(manifest["dim"])
VECTORS = np.ascontiguousarray(
    table.column("vector").combine_chunks().values.to_numpy().reshape(-1, dim), dtype=np.float32
)
IDS = table.column("chunk_id").to_numpy()
DOC_IDS = table.column("doc_id").cast(pa.string()).to_pylist()
TEXTS = table.column("text").to_pylist()
TITLES = table.column("title").to_pylist()
SOURCES = table.column("source").to_pylist()
del table
EMBEDDER = fastrag.KnowledgeBase.load(ROOT).embedder

app = FastAPI()


class Question(BaseModel):
    question: str
    k: int = 5


@app.get("/healthz")
def healthz() -> dict:
    return {"status": "ok", "pid": os.getpid()}


@app.post("/v1/retrieve")
def retrieve(req: Question) -> Response:
    q = EMBEDDER.embed([req.question])[0]
    scores = VECTORS @ q
    k = min(req.k, scores.size)
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    hits = [
        {
            "rank": i,
            "chunk_id": int(IDS[r]),
            "doc_id": DOC_IDS[r],
            "score": float(scores[r]),
            "text": TEXTS[r],
            "metadata": {"title": TITLES[r], "source": SOURCES[r]},
        }
        for i, r in enumerate(top.tolist(), 1)
    ]
    return Response(orjson.dumps({"hits": hits}), media_type="application/json")
