"""Read a model2vec folder (safetensors embeddings and a ``tokenizer.json``) as a subword table."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import EmbedderError
from .subword import MODEL2VEC_MAX_TOKENS, import_subword
from .table import StaticTable

__all__ = ["read_model2vec"]


def read_model2vec(folder: str | os.PathLike[str]) -> StaticTable:
    """Read a model2vec folder into a subword :class:`StaticTable` (see ``from_model2vec``)."""
    tokenizers, load_file = import_subword()
    folder = Path(folder)
    paths = {name: folder / name for name in ("model.safetensors", "tokenizer.json", "config.json")}
    for name, p in paths.items():
        if not p.is_file():
            raise EmbedderError(f"{folder}: not a model2vec folder (no {name})")
    try:
        tensors = load_file(str(paths["model.safetensors"]))
        tok_json = paths["tokenizer.json"].read_text(encoding="utf-8")
        config = json.loads(paths["config.json"].read_text(encoding="utf-8"))
        tokenizer = tokenizers.Tokenizer.from_str(tok_json)
    except Exception as exc:  # noqa: BLE001 - safetensors/tokenizers raise their own types
        raise EmbedderError(f"{folder}: cannot read the model2vec model: {exc}") from exc
    if "embeddings" not in tensors:
        raise EmbedderError(f"{folder}/model.safetensors has no 'embeddings' tensor")
    emb = np.asarray(tensors["embeddings"])
    if emb.ndim != 2 or emb.shape[0] < 1 or emb.shape[1] < 1:
        raise EmbedderError(f"{folder}: embeddings must be a (tokens, dim) matrix, got {emb.shape}")
    vectors = np.ascontiguousarray(emb, dtype=np.float32)
    if not np.isfinite(vectors).all():
        raise EmbedderError(f"{folder}: the embeddings hold NaN or infinity")
    vocab = tokenizer.get_vocab()
    n_ids = max(vocab.values()) + 1 if vocab else 0
    items = [""] * n_ids
    for token, i in vocab.items():
        items[i] = token
    mapping = np.asarray(tensors["mapping"], dtype=np.int64) if "mapping" in tensors else None
    if mapping is not None and (
        mapping.shape != (n_ids,) or mapping.min() < 0 or mapping.max() >= len(vectors)
    ):
        raise EmbedderError(f"{folder}: 'mapping' must map each of {n_ids} token ids to a row")
    if mapping is None and len(vectors) != n_ids:
        raise EmbedderError(
            f"{folder}: {len(vectors)} embeddings for {n_ids} tokens and no 'mapping'"
        )
    rows = vectors[mapping] if mapping is not None else vectors
    weights = (
        np.asarray(tensors["weights"], dtype=np.float32).reshape(-1)
        if "weights" in tensors
        else np.ones(n_ids, dtype=np.float32)
    )
    if weights.shape != (n_ids,):
        raise EmbedderError(f"{folder}: 'weights' must have one entry per token ({n_ids})")
    unk = None
    model = json.loads(tok_json).get("model", {})
    if model.get("unk_token") is not None and model["unk_token"] in vocab:
        unk = int(vocab[model["unk_token"]])
    return StaticTable(
        items=tuple(items),
        hashes=np.zeros(n_ids, dtype=np.uint64),
        counts=np.zeros(n_ids, dtype=np.int64),
        weights=weights,
        vectors=np.ascontiguousarray(rows),
        scales=np.ones(n_ids, dtype=np.float32),
        meta={
            "mode": "subword",
            "tokenizer_json": tok_json,
            "subword": {"unk_id": unk, "max_tokens": MODEL2VEC_MAX_TOKENS},
            "teacher": {"type": "model2vec", "config": config},
            "sif_a": None,
        },
    )
