"""Subword tables' tokenizer (a model2vec ``tokenizer.json``): texts to token ids for the kernel.

A subword table (``mode="subword"``, read by
:func:`fastrag.embed.model2vec.read_model2vec`) is embedded through its own
Hugging Face ``tokenizers`` tokenizer instead of the item tokenizer: the
texts become token ids (flat ids plus offsets) and
``fastrag._native.static.embed_ids`` averages the rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .._native import static as _kernels
from .._threads import threads as _threads
from .table import StaticTable

__all__ = ["MODEL2VEC_MAX_TOKENS", "SubwordTokenizer", "import_subword"]


def import_subword() -> tuple[Any, Any]:
    """The ``tokenizers`` module and safetensors' ``load_file``, or an ImportError with a hint."""
    try:
        import tokenizers
        from safetensors.numpy import load_file
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "model2vec folders need the tokenizers and safetensors packages: "
            'pip install "fastrag-engine[static]"'
        ) from exc
    return tokenizers, load_file


MODEL2VEC_MAX_TOKENS = 512
"""Tokens per text that model2vec's ``StaticModel.encode`` keeps by default."""


class SubwordTokenizer:
    """A model2vec table's tokenizer: texts to token ids (CSR) for ``embed_ids``."""

    def __init__(self, table: StaticTable) -> None:
        tokenizers, _ = import_subword()
        self.tokenizer = tokenizers.Tokenizer.from_str(table.meta["tokenizer_json"])
        info = table.meta.get("subword", {})
        self.max_tokens = int(info.get("max_tokens", MODEL2VEC_MAX_TOKENS))
        n = len(table)
        row_of_id = np.arange(n, dtype=np.int64)
        unk = info.get("unk_id")
        if unk is not None and 0 <= int(unk) < n:
            row_of_id[int(unk)] = -1
        row_of_id.flags.writeable = False
        self.row_of_id = row_of_id
        lengths = [len(t) for t in table.items if t]
        self.max_chars = self.max_tokens * int(np.median(lengths)) if lengths else None

    def ids(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Token ids of ``texts`` (at most ``max_tokens`` each) as flat ids plus int64 offsets."""
        if self.max_chars is not None:
            texts = [t[: self.max_chars] for t in texts]
        encodings = self.tokenizer.encode_batch_fast(texts, add_special_tokens=False)
        lists = [e.ids[: self.max_tokens] for e in encodings]
        offsets = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum([len(x) for x in lists], out=offsets[1:])
        ids = np.fromiter((i for x in lists for i in x), dtype=np.int64, count=int(offsets[-1]))
        return ids, offsets

    def embed(
        self,
        coef: np.ndarray,
        vectors: np.ndarray,
        data: np.ndarray,
        offsets: np.ndarray,
        out: np.ndarray,
        threads: int | None,
    ) -> None:
        """Embed texts in the Arrow layout into ``out`` (rows: weighted mean of ``vectors``)."""
        texts = pa.LargeStringArray.from_buffers(
            offsets.size - 1,
            pa.py_buffer(np.ascontiguousarray(offsets - offsets[0])),
            pa.py_buffer(np.ascontiguousarray(data[offsets[0] : offsets[-1]])),
        ).to_pylist()
        ids, id_offsets = self.ids(texts)
        with _threads(threads, work=ids.size * vectors.shape[1] * 4):
            _kernels.embed_ids(id_offsets, ids, self.row_of_id, coef, vectors, out)
