"""Reference twins of ``fastrag._native.embedding`` and ``VocabularyEmbedder``."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable


def fold(ch: str, lowercase: bool) -> str:
    if not lowercase:
        return ch
    low = ch.lower()
    return low if len(low) == 1 else ch


def fit_vocabulary(texts: Iterable[str], max_features: int | None, lowercase: bool) -> str:
    """Distinct non-space characters, most frequent first, ties by code point."""
    counts: Counter[str] = Counter()
    for text in texts:
        for ch in text:
            if ch.isspace():
                continue
            counts[fold(ch, lowercase)] += 1
    order = sorted(counts.items(), key=lambda kv: (-kv[1], ord(kv[0])))
    if max_features is not None:
        order = order[:max_features]
    return "".join(ch for ch, _ in order)


def _normalise(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec] if norm > 0 else vec


def embed_index_of(text: str, vocabulary: str, lowercase: bool = True) -> list[float]:
    """The seed's algorithm: ``vocab.indexOf(ch)`` for every character."""
    vocab = list(vocabulary)
    vec = [0.0] * len(vocab)
    for ch in text:
        c = fold(ch, lowercase)
        if c in vocab:
            vec[vocab.index(c)] += 1.0
    return _normalise(vec)


def embed_dict(text: str, column: dict[str, int], dim: int, lowercase: bool = True) -> list[float]:
    """The dict-lookup version of the same algorithm."""
    vec = [0.0] * dim
    for ch in text:
        j = column.get(fold(ch, lowercase))
        if j is not None:
            vec[j] += 1.0
    return _normalise(vec)


def count_codepoints(text: str) -> Counter[int]:
    return Counter(ord(c) for c in text)
