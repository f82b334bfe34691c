"""Reference twins of ``fastrag._native.static`` and ``StaticEmbedder`` (plain Python)."""

from __future__ import annotations

import math

from .tokenize import tokens


def item_tokens(text: str) -> list[str]:
    """The items of a text: lower-cased words, CJK characters and bigrams, no stop words."""
    return tokens(text, lowercase=True, stopwords=frozenset(), cjk="unigram+bigram")


def embed(
    text: str, rows: dict[str, int], coef: list[float], table: list[list[float]]
) -> list[float]:
    """Weighted sum of the rows of the text's known items, L2-normalised (zero if none)."""
    dim = len(table[0]) if table else 0
    out = [0.0] * dim
    for t in item_tokens(text):
        r = rows.get(t)
        if r is None:
            continue
        for j in range(dim):
            out[j] += coef[r] * table[r][j]
    norm = math.sqrt(sum(v * v for v in out))
    return [v / norm for v in out] if norm > 0 else out


def embed_ids(
    ids: list[int], row_of_id: list[int], coef: list[float], table: list[list[float]]
) -> list[float]:
    """Weighted sum over token ids (unknown ids and rows -1 skipped), L2-normalised."""
    dim = len(table[0])
    out = [0.0] * dim
    for i in ids:
        if not 0 <= i < len(row_of_id) or row_of_id[i] < 0:
            continue
        for j in range(dim):
            out[j] += coef[i] * table[row_of_id[i]][j]
    norm = math.sqrt(sum(v * v for v in out))
    return [v / norm for v in out] if norm > 0 else out


def csr_matmul(indptr, cols, vals, dense):
    """``A @ dense`` row by row."""
    out = []
    for i in range(len(indptr) - 1):
        row = [0.0] * len(dense[0])
        for t in range(indptr[i], indptr[i + 1]):
            for j in range(len(row)):
                row[j] += vals[t] * dense[cols[t]][j]
        out.append(row)
    return out


def sif(counts: list[int], total: int, a: float) -> list[float]:
    return [a / (a + c / total) for c in counts]
