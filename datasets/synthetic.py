"""Seeded synthetic corpora for benchmarks and large tests.

Everything here is deterministic for a given seed, and append-only: change an
existing generator and every recorded benchmark figure stops being comparable.
Text mixes English and Chinese sentences drawn from Zipfian vocabularies, with
the irregular white space real documents have (tabs, blank lines, ideographic
and no-break spaces) so that normalisation is exercised.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

__all__ = ["mixed_documents", "mixed_texts", "random_unit_vectors", "zipf_documents"]

_SYLLABLES = (
    "ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo fu ga ge gi go gu "
    "ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu "
    "ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo vu za ze zi zo zu "
    "tion ment ing ed er est ly al ous ive ance ence ship"
).split()
_WHITESPACE = [" "] * 40 + ["  ", "\n", "\t", "\n\n", "\u3000", "\u00a0", " \r\n"]
_ZH_PUNCT = "，，，，、。"


def _english_vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    words = set()
    while len(words) < size:
        n = int(rng.integers(1, 4))
        words.add("".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), n)))
    return sorted(words)


def _chinese_vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    # 3,500 code points of the CJK Unified Ideographs block (about the size of
    # the common-character list); words of one to three characters.
    words = set()
    while len(words) < size:
        n = int(rng.integers(1, 4))
        words.add("".join(chr(0x4E00 + int(c)) for c in rng.integers(0, 3500, n)))
    return sorted(words)


def _zipf_choice(rng: np.random.Generator, vocab: list[str], n: int) -> list[str]:
    idx = (rng.zipf(1.15, n) - 1) % len(vocab)
    return [vocab[int(i)] for i in idx]


def mixed_documents(
    n_docs: int,
    *,
    seed: int = 0,
    mean_chars: int = 2000,
    zh_share: float = 0.5,
) -> Iterator[dict[str, str]]:
    """Yield ``n_docs`` documents mixing English and Chinese sentences.

    Parameters
    ----------
    n_docs : int
        Number of documents.
    seed : int, default 0
        Seed of the generator; the same seed gives the same documents.
    mean_chars : int, default 2000
        Mean document length in characters (lengths vary from 0.25x to 1.75x).
    zh_share : float, default 0.5
        Probability that a sentence is Chinese.

    Yields
    ------
    dict
        ``{"id": "doc-000000", "title": ..., "text": ...}``.
    """
    rng = np.random.default_rng(seed)
    en = _english_vocabulary(rng, 5000)
    zh = _chinese_vocabulary(rng, 5000)
    for i in range(n_docs):
        target = int(mean_chars * (0.25 + 1.5 * rng.random()))
        parts: list[str] = []
        size = 0
        while size < target:
            if rng.random() < zh_share:
                words = _zipf_choice(rng, zh, int(rng.integers(4, 16)))
                sentence = (
                    "".join(
                        w
                        + (
                            _ZH_PUNCT[int(rng.integers(0, len(_ZH_PUNCT)))]
                            if rng.random() < 0.15
                            else ""
                        )
                        for w in words
                    )
                    + "。"
                )
            else:
                words = _zipf_choice(rng, en, int(rng.integers(5, 20)))
                sentence = " ".join(words).capitalize() + "."
            ws = _WHITESPACE[int(rng.integers(0, len(_WHITESPACE)))]
            parts.append(sentence)
            parts.append(ws)
            size += len(sentence) + len(ws)
        yield {"id": f"doc-{i:06d}", "title": f"Document {i}", "text": "".join(parts)}


def mixed_texts(total_chars: int, *, seed: int = 0, mean_chars: int = 2000) -> list[str]:
    """Return documents of mixed text adding up to at least ``total_chars`` characters.

    Parameters
    ----------
    total_chars : int
        Total size wanted, in characters.
    seed : int, default 0
        Generator seed.
    mean_chars : int, default 2000
        Mean document length.

    Returns
    -------
    list of str
        The document texts.
    """
    texts: list[str] = []
    size = 0
    # Generate in rounds: the generator is cheap per document, sizes vary.
    batch = max(1, total_chars // mean_chars + 1)
    round_seed = seed
    while size < total_chars:
        for doc in mixed_documents(batch, seed=round_seed, mean_chars=mean_chars):
            texts.append(doc["text"])
            size += len(doc["text"])
            if size >= total_chars:
                break
        round_seed += 1_000_003
    return texts


def random_unit_vectors(n: int, dim: int, *, seed: int = 0, clusters: int = 0) -> np.ndarray:
    """Return ``n`` L2-normalised float32 vectors of dimension ``dim``.

    Parameters
    ----------
    n, dim : int
        Shape of the result.
    seed : int, default 0
        Generator seed.
    clusters : int, default 0
        When positive, vectors are drawn around that many random centres
        (data with structure, as real embeddings have); 0 gives uniform
        directions.

    Returns
    -------
    numpy.ndarray
        float32, shape ``(n, dim)``, C-contiguous, rows of unit norm.
    """
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    step = 65536
    centres = None
    if clusters > 0:
        centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        block = rng.standard_normal((hi - lo, dim), dtype=np.float32)
        if centres is not None:
            block = block * 0.35 + centres[rng.integers(0, clusters, hi - lo)]
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[lo:hi] = block
    return out


def zipf_documents(
    n_docs: int,
    *,
    seed: int = 0,
    vocab_size: int = 100_000,
    exponent: float = 1.1,
    mean_words: int = 16,
) -> Iterator[dict[str, str]]:
    """Yield ``n_docs`` short English-like documents whose word frequencies follow Zipf's law.

    Word ``r`` of a ``vocab_size``-word vocabulary (syllable words, as in
    :func:`mixed_documents`) is drawn with probability proportional to
    ``r ** -exponent``: a few words occur in a large share of the documents
    and most words in a handful, as in real text.

    Parameters
    ----------
    n_docs : int
        Number of documents.
    seed : int, default 0
        Generator seed.
    vocab_size : int, default 100,000
        Distinct words.
    exponent : float, default 1.1
        Zipf exponent (``> 0``).
    mean_words : int, default 16
        Mean words per document (lengths vary from 0.25x to 1.75x).

    Yields
    ------
    dict
        ``{"id": "zipf-0000000", "text": ...}``.
    """
    rng = np.random.default_rng(seed)
    vocab = np.array(_english_vocabulary(rng, vocab_size))
    rng.shuffle(vocab)  # frequency rank independent of spelling
    p = 1.0 / np.arange(1, vocab_size + 1) ** exponent
    cdf = np.cumsum(p / p.sum())
    block = 4096
    for start in range(0, n_docs, block):
        m = min(block, n_docs - start)
        lengths = (mean_words * (0.25 + 1.5 * rng.random(m))).astype(np.int64) + 1
        ranks = np.minimum(np.searchsorted(cdf, rng.random(int(lengths.sum()))), vocab_size - 1)
        words = vocab[ranks]
        ends = np.cumsum(lengths)
        for i in range(m):
            text = " ".join(words[ends[i] - lengths[i] : ends[i]].tolist())
            yield {"id": f"zipf-{start + i:07d}", "text": text.capitalize() + "."}
