"""Lexical tokenisation for BM25: words, CJK unigrams and bigrams, as 64-bit hashes.

Rules (the reference twin is ``tests/naive/tokenize.py``):

- **Words.** A word is a maximal run of letters and numbers (Unicode
  categories ``L*`` and ``N*``) outside the CJK scripts; combining marks
  (``M*``) belong to the word they follow. Everything else separates words:
  white space, punctuation (ASCII and CJK: ``。，、！？「」`` ...), symbols,
  the underscore. Apostrophes and hyphens are separators too: ``don't`` gives
  ``don`` and ``t``, ``COVID-19`` gives ``covid`` and ``19``, ``cell's`` gives
  ``cell`` and ``s`` (this reproduces the published BM25 reference figures
  on SciFact, see ``benchmarks/eval_bm25.py``). Single letters and digits are
  tokens.
- **CJK.** In runs of Han, Kana and Hangul characters every character is a
  token and so is every pair of neighbours: ``年假制度`` gives ``年``,
  ``假``, ``年假``, ``制``, ``假制``, ``度``, ``制度`` (``cjk="unigram+bigram"``,
  the default; each character, then the bigram it ends); ``"unigram"``
  keeps the characters only, ``"bigram"`` the pairs only (a lone character
  is kept). Chinese never collapses into one token per run. A CJK character
  ends a word and a letter ends a CJK run:
  ``iPhone手机`` gives ``iphone``, ``手``, ``机``, ``手机``.
- **Folding.** Full-width ASCII (U+FF01-U+FF5E) folds to ASCII (``ＡＢＣ１２３``
  gives ``abc123``), the ideographic space U+3000 is white space, and with
  ``lowercase=True`` every code point is lower-cased (``str.lower``, where it
  gives one code point; U+0130 is kept).
- **Stop words** are dropped after folding (compared with the folded text of
  every token, words and CJK alike); then words (never CJK tokens) are
  stemmed when ``stem="porter"``; words of one or two characters are left
  alone, as in the original Porter algorithm and Lucene (the Snowball
  version would turn ``s`` into an empty token).

A token is identified by the 64-bit FNV-1a hash of the UTF-8 bytes of its
final text (after folding, and stemming for stemmed words). Hashing happens
in the kernel, so no Python dictionary is touched per token; the BM25 index
maps hashes to dense term ids with a sorted vocabulary. Two different tokens
collide with probability about ``2**-64`` per pair: with ``V`` distinct terms
the expected number of colliding pairs is ``V**2 / 2**65`` (``3e-8`` for a
million terms); a collision merges two terms' postings, nothing worse. None
was found among 8.8 million distinct tokens (the 172,553 distinct tokens of
SciFact and CMRC 2018, documents and queries, plus 8.6 million random
alphanumeric words); ``tests/test_tokenize.py`` checks about 300,000.

Stemming uses PyStemmer's Porter stemmer (the original Porter algorithm, as
Lucene's ``PorterStemFilter``), an optional dependency. It runs in Python
once per *distinct* word: the kernel returns every word's source span, the
distinct word hashes of a batch are looked up in a cache (raw hash -> stem
hash) and only new words are decoded, stemmed and hashed. A large batch is
tokenised in one parallel pass by blocks of texts that also collect their
distinct words, and a last parallel pass writes every token with its stem
(``fastrag._native.tokenize.tokenize_words`` and ``pack_words``).
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import pyarrow as pa

from .. import _native  # noqa: F401  (the package must import before its submodules)
from .._native import tokenize as _kernels
from .._threads import threads as _threads
from ..errors import ConfigError, DocumentError
from .cjk import CJK_RANGES
from .stopwords import ENGLISH_STOPWORDS, STOPWORDS
from .utf8 import encode_utf8, utf8_buffers

__all__ = ["KernelTables", "LUCENE_STOPWORDS", "Tokenizer", "Tokens"]

LUCENE_STOPWORDS: tuple[str, ...] = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
)  # fmt: skip
"""Lucene's (and Anserini's) default English stop words, 33 of them (``stopwords="lucene"``)."""

_STOP_LISTS = {
    "default": STOPWORDS,
    "english": tuple(sorted(ENGLISH_STOPWORDS)),
    "lucene": LUCENE_STOPWORDS,
}

CJK_MODES = {
    "unigram+bigram": _kernels.CJK_BOTH,
    "unigram": _kernels.CJK_UNIGRAM,
    "bigram": _kernels.CJK_BIGRAM,
}
STEMMERS = ("porter",)

_CLASS_LIMIT = 0xE01F0  # past the variation selectors supplement; later code points separate
_FOLD_LIMIT = 0x20000  # every cased letter is below this
_CJK_RANGES = CJK_RANGES

TextsLike: TypeAlias = Sequence[str] | pa.Array | pa.ChunkedArray


@lru_cache(maxsize=1)
def _classes() -> np.ndarray:
    """Class of every code point below ``_CLASS_LIMIT`` (see ``fastrag._native.tokenize``)."""
    table = np.zeros(_CLASS_LIMIT, dtype=np.uint8)
    word, cjk, mark = _kernels.WORD, _kernels.CJK, _kernels.MARK
    kinds = {"L": word, "N": word, "M": mark}
    for lo, hi in ((0, 0x32400), (0xE0000, _CLASS_LIMIT)):
        table[lo:hi] = [kinds.get(unicodedata.category(chr(c))[0], 0) for c in range(lo, hi)]
    for lo, hi in _CJK_RANGES:
        part = table[lo:hi]
        part[part == word] = cjk
    table.flags.writeable = False
    return table


@lru_cache(maxsize=2)
def _fold(lowercase: bool) -> np.ndarray:
    """Folded code point of every code point below ``_FOLD_LIMIT``."""
    table = np.arange(_FOLD_LIMIT, dtype=np.int32)
    table[0xFF01:0xFF5F] -= 0xFEE0  # full-width ASCII
    if lowercase:
        lowered = [chr(c).lower() for c in range(_FOLD_LIMIT)]
        low = np.array([ord(s) if len(s) == 1 else c for c, s in enumerate(lowered)], np.int32)
        table = low[table]
    table.flags.writeable = False
    return table


@lru_cache(maxsize=2)
def _translation(lowercase: bool) -> dict[int, int]:
    """``str.translate`` table doing what the fold table does."""
    fold = _fold(lowercase)
    changed = np.flatnonzero(fold != np.arange(fold.size))
    return dict(zip(changed.tolist(), fold[changed].tolist(), strict=False))


def _token_text(text: str, kind: int, table: dict[int, int], classes: np.ndarray) -> str:
    """The folded text of one token (a word, or a CJK character or bigram) from its source text."""
    if kind != 1:  # drop any combining marks between the characters of a bigram
        cjk = _kernels.CJK
        text = "".join(c for c in text if ord(c) < classes.size and classes[ord(c)] == cjk)
    return text.translate(table)


class KernelTables(NamedTuple):
    """What the tokenize kernel needs of a :class:`Tokenizer`, for kernels built on it.

    The static embedder's and the distiller's kernels tokenise inside
    themselves (``fastrag._native.static``, ``fastrag._native.tokenize``);
    passing these makes their tokens the tokenizer's own.

    Attributes
    ----------
    classes : numpy.ndarray
        uint8, read-only: the class of every code point (word, CJK, mark, other).
    fold : numpy.ndarray
        int32, read-only: the folded code point of every code point.
    stop_hashes : numpy.ndarray
        uint64, read-only, sorted: hashes of the stop words.
    cjk_mode : int
        The kernel's code of the CJK mode.
    """

    classes: np.ndarray
    fold: np.ndarray
    stop_hashes: np.ndarray
    cjk_mode: int


def _hash_strings(strings: Sequence[str]) -> np.ndarray:
    """FNV-1a 64 of the UTF-8 bytes of each string."""
    data, offsets = encode_utf8(list(strings))
    return _kernels.hash_strings(data, offsets)


def _stemmer(name: str) -> Any:
    try:
        import Stemmer  # PyStemmer
    except ImportError as exc:
        raise ImportError(
            f"stem={name!r} needs PyStemmer: pip install PyStemmer "
            "(or pip install 'fastrag-engine[stem]')"
        ) from exc
    return Stemmer.Stemmer(name)


@dataclass(frozen=True, eq=False)
class Tokens:
    """Token hashes of a batch of texts, in CSR form.

    Attributes
    ----------
    hashes : numpy.ndarray
        uint64, every token's hash, text after text (read-only).
    offsets : numpy.ndarray
        int64, ``len(self) + 1`` offsets: text ``i`` has tokens
        ``hashes[offsets[i]:offsets[i + 1]]``; ``offsets[0] == 0``.
    """

    hashes: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.hashes[self.offsets[i] : self.offsets[i + 1]]

    def __repr__(self) -> str:
        return f"Tokens({len(self)} texts, {self.hashes.size} tokens)"

    def lengths(self) -> np.ndarray:
        """Return the number of tokens of every text (int64)."""
        return np.diff(self.offsets)


@dataclass(frozen=True)
class Tokenizer:
    """Turns texts into token hashes for BM25 (rules in the module docstring).

    Parameters
    ----------
    lowercase : bool, default True
        Lower-case every code point.
    stopwords : str, sequence of str or None, default "default"
        Tokens to drop, compared after folding: ``"default"`` is
        :data:`fastrag.text.stopwords.STOPWORDS` (the one list every stage
        uses: English function and question words, Chinese function
        characters and bigrams), ``"english"`` its English part,
        ``"lucene"`` Lucene's 33 words (:data:`LUCENE_STOPWORDS`, to
        reproduce published BM25 figures); ``None`` or an empty sequence
        keeps all. Kept as a sorted tuple of distinct folded words.
    stem : {None, "porter"}, default None
        Stem words (not CJK tokens) with the Porter stemmer (needs PyStemmer).
    cjk : {"unigram+bigram", "unigram", "bigram"}, default "unigram+bigram"
        Tokens of CJK runs.

    Raises
    ------
    ConfigError
        On an invalid parameter.
    ImportError
        If ``stem="porter"`` and PyStemmer is not installed.

    Examples
    --------
    >>> Tokenizer().tokens("Ｔｈｅ年假, don't!")
    ['年', '假', '年假', 'don', 't']
    """

    lowercase: bool = True
    stopwords: Any = "default"
    stem: str | None = None
    cjk: str = "unigram+bigram"
    _stop_hashes: np.ndarray = field(init=False, repr=False, compare=False)
    _stem_cache: dict[int, int] = field(init=False, repr=False, compare=False)
    _stem_lock: Any = field(init=False, repr=False, compare=False)
    _stemmer: Any = field(init=False, repr=False, compare=False)
    _cjk_mode: int = field(init=False, repr=False, compare=False)
    _tables: KernelTables = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.lowercase, bool):
            raise ConfigError(f"lowercase must be a bool, got {self.lowercase!r}")
        stop = self.stopwords
        if stop is None:
            words: tuple[str, ...] = ()
        elif isinstance(stop, str):
            if stop not in _STOP_LISTS:
                raise ConfigError(
                    f"stopwords must be one of {sorted(_STOP_LISTS)}, a sequence of str or None, "
                    f"got {stop!r}"
                )
            words = _STOP_LISTS[stop]
        else:
            if not isinstance(stop, Iterable) or not all(isinstance(w, str) for w in stop):
                raise ConfigError(
                    f"stopwords must be one of {sorted(_STOP_LISTS)}, a sequence of str or None"
                )
            words = tuple(stop)
        table = _translation(self.lowercase)
        words = tuple(sorted({w.translate(table) for w in words} - {""}))
        object.__setattr__(self, "stopwords", words)
        if self.stem is not None and self.stem not in STEMMERS:
            raise ConfigError(f"stem must be None or one of {STEMMERS}, got {self.stem!r}")
        if self.cjk not in CJK_MODES:
            raise ConfigError(f"cjk must be one of {tuple(CJK_MODES)}, got {self.cjk!r}")
        stemmer = _stemmer(self.stem) if self.stem is not None else None
        stop_hashes = np.unique(_hash_strings(words)) if words else np.zeros(0, np.uint64)
        stop_hashes.flags.writeable = False
        object.__setattr__(self, "_stop_hashes", stop_hashes)
        object.__setattr__(self, "_stemmer", stemmer)
        object.__setattr__(self, "_cjk_mode", CJK_MODES[self.cjk])
        object.__setattr__(
            self,
            "_tables",
            KernelTables(_classes(), _fold(self.lowercase), stop_hashes, CJK_MODES[self.cjk]),
        )
        object.__setattr__(self, "_stem_cache", {})
        object.__setattr__(self, "_stem_lock", threading.Lock())

    # -- configuration -------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """Return the settings as a JSON-ready dict (see :meth:`from_config`).

        Returns
        -------
        dict
            ``lowercase``, ``stopwords`` (list), ``stem``, ``cjk`` and the
            hash function's name.
        """
        return {
            "lowercase": self.lowercase,
            "stopwords": list(self.stopwords),
            "stem": self.stem,
            "cjk": self.cjk,
            "hash": "fnv1a64-utf8",
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Tokenizer:
        """Rebuild a tokenizer from :meth:`config`.

        Parameters
        ----------
        config : dict
            As returned by :meth:`config`.

        Returns
        -------
        Tokenizer
            An equal tokenizer.

        Raises
        ------
        ConfigError
            If the dict is malformed or names another hash function.
        """
        try:
            if config.get("hash", "fnv1a64-utf8") != "fnv1a64-utf8":
                raise ConfigError(f"unknown token hash {config['hash']!r}")
            return cls(
                lowercase=config["lowercase"],
                stopwords=config["stopwords"],
                stem=config["stem"],
                cjk=config["cjk"],
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"malformed tokenizer config {config!r}") from exc

    # -- tokenisation --------------------------------------------------------
    def tokenize(self, texts: TextsLike, *, threads: int | None = None) -> Tokens:
        """Tokenise a batch of texts.

        Parameters
        ----------
        texts : sequence of str, or pyarrow string / large_string array
            The texts (a pyarrow array is read without copying).
        threads : int, optional
            Numba threads for this call; default: the current setting.

        Returns
        -------
        Tokens
            The token hashes of every text.

        Raises
        ------
        DocumentError
            If a text is not a string (or is null).
        """
        if threads is None and type(texts) is list and len(texts) == 1 and type(texts[0]) is str:
            tokens = self._tokenize_one(texts[0])  # a question: the short path
            if tokens is not None:
                return tokens
        data, offsets = as_utf8(texts)
        if threads is None and offsets[-1] - offsets[0] < _kernels.PARALLEL_MIN_BYTES:
            return self.tokenize_buffers(data, offsets)  # serial kernels: no thread switch
        with _threads(threads, work=int(offsets[-1] - offsets[0]) * 8):
            return self.tokenize_buffers(data, offsets)

    def _tokenize_one(self, text: str) -> Tokens | None:
        """:meth:`tokenize` of ``[text]`` with less Python (None: a long text, the usual path).

        What the usual path gives: one encode, the serial tokenize kernel,
        and the stems of a few words looked up in Python (cached per word
        hash as before) instead of two kernel calls.
        """
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DocumentError(f"text at index 0 is not valid Unicode: {exc}") from exc
        if len(raw) >= _kernels.PARALLEL_MIN_BYTES:
            return None
        data = np.frombuffer(raw, dtype=np.uint8)
        offsets = np.array((0, len(raw)), dtype=np.int64)
        return self._run(data, offsets, spans=self._stemmer is not None, few=True)[0]

    def _stem_few(
        self,
        data: np.ndarray,
        hashes: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        kinds: np.ndarray,
    ) -> np.ndarray:
        """:meth:`_stem_words` of a question's few tokens, in Python (no kernel calls)."""
        out = hashes.tolist()
        cache = self._stem_cache
        missing: dict[int, list[int]] = {}  # word hash -> its tokens, first-seen order
        for j, kind in enumerate(kinds.tolist()):
            if kind == 1:  # a word (CJK tokens are not stemmed)
                h = out[j]
                stem = cache.get(h)
                if stem is None:
                    missing.setdefault(h, []).append(j)
                else:
                    out[j] = stem
        if missing:
            table = _translation(self.lowercase)
            firsts = [tokens[0] for tokens in missing.values()]
            texts = [
                data[s:e].tobytes().decode("utf-8", "replace").translate(table)
                for s, e in zip(starts[firsts].tolist(), ends[firsts].tolist(), strict=True)
            ]
            stem_hashes = _hash_strings(self._stem(texts)).tolist()
            if len(cache) > 2_000_000:  # bound the memory of a long-running service
                cache.clear()
            for (h, tokens), stem in zip(missing.items(), stem_hashes, strict=True):
                cache[h] = stem
                for j in tokens:
                    out[j] = stem
        return np.array(out, dtype=np.uint64)

    def tokenize_utf8(
        self, data: np.ndarray, offsets: np.ndarray, *, threads: int | None = None
    ) -> Tokens:
        """Tokenise texts in the Arrow layout (UTF-8 bytes plus int64 offsets).

        Parameters
        ----------
        data : numpy.ndarray
            uint8, the UTF-8 bytes (read-only is fine).
        offsets : numpy.ndarray
            int64, ``n + 1`` non-decreasing offsets within ``data``.
        threads : int, optional
            Numba threads for this call.

        Returns
        -------
        Tokens
            The token hashes of every text.
        """
        data, offsets = check_utf8(data, offsets)
        with _threads(threads, work=int(offsets[-1] - offsets[0]) * 8):
            return self.tokenize_buffers(data, offsets)

    def tokenize_buffers(self, data: np.ndarray, offsets: np.ndarray) -> Tokens:
        """Tokenise buffers already checked, with the caller's thread setting.

        The fast path of callers that hold checked Arrow buffers and set
        the threads themselves (the keyword index's search); anything else
        calls :meth:`tokenize_utf8`, which checks.

        Parameters
        ----------
        data : numpy.ndarray
            uint8 UTF-8 bytes, as :func:`check_utf8` returns them.
        offsets : numpy.ndarray
            int64 ``n + 1`` offsets, as :func:`check_utf8` returns them.

        Returns
        -------
        Tokens
            The token hashes of every text.
        """
        if self._stemmer is not None:
            return self._run_stemmed(data, offsets, starts=False)[0]
        return self._run(data, offsets, spans=False)[0]

    def tokenize_starts(self, data: np.ndarray, offsets: np.ndarray) -> tuple[Tokens, np.ndarray]:
        """:meth:`tokenize_buffers`, with the start byte in ``data`` of every token.

        Parameters
        ----------
        data : numpy.ndarray
            uint8 UTF-8 bytes, as :func:`check_utf8` returns them.
        offsets : numpy.ndarray
            int64 ``n + 1`` offsets, as :func:`check_utf8` returns them.

        Returns
        -------
        tuple
            The tokens, and an int64 array of their start bytes.
        """
        if self._stemmer is not None:
            return self._run_stemmed(data, offsets, starts=True)
        return self._run(data, offsets, spans=True)

    def _run_stemmed(
        self, data: np.ndarray, offsets: np.ndarray, *, starts: bool
    ) -> tuple[Tokens, np.ndarray]:
        """:meth:`_run` of a stemming tokenizer over a batch: one pass, then the stems.

        The texts are tokenised in parallel blocks that also collect their
        distinct words; only the words the cache has not seen are stemmed
        (in Python, once each), and a last parallel pass writes the dense
        tokens with every word's stem. Small batches take :meth:`_run`.
        """
        n = offsets.size - 1
        if n < 2 or offsets[-1] - offsets[0] < _kernels.PARALLEL_MIN_BYTES:
            return self._run(data, offsets, spans=True)
        t = self._tables
        found = _kernels.tokenize_words(data, offsets, t.classes, t.fold, t.stop_hashes, t.cjk_mode)
        if found is None:  # not with this tokenizer's tables; kept for safety
            return self._run(data, offsets, spans=True)
        distinct, word_starts, word_ends, state = found
        values = self._stem_values(data, distinct, word_starts, word_ends)
        hashes, tok_offsets, tok_starts = _kernels.pack_words(state, values, starts=starts)
        hashes.flags.writeable = False
        tok_offsets.flags.writeable = False
        return Tokens(hashes, tok_offsets), tok_starts

    def _stem_values(
        self, data: np.ndarray, distinct: np.ndarray, starts: np.ndarray, ends: np.ndarray
    ) -> np.ndarray:
        """The stem hash of every distinct word hash (``starts``/``ends``: a token of each)."""
        cache = self._stem_cache
        keys = distinct.tolist()
        mapped = [cache.get(h) for h in keys]
        missing = [j for j, m in enumerate(mapped) if m is None]
        if missing:
            table = _translation(self.lowercase)
            texts = [
                data[s:e].tobytes().decode("utf-8", "replace").translate(table)
                for s, e in zip(starts[missing].tolist(), ends[missing].tolist(), strict=True)
            ]
            stem_hashes = _hash_strings(self._stem(texts)).tolist()
            if len(cache) > 2_000_000:  # bound the memory of a long-running service
                cache.clear()
            for j, h in zip(missing, stem_hashes, strict=True):
                cache[keys[j]] = h
                mapped[j] = h
        return np.array(mapped, dtype=np.uint64)

    def _run(
        self, data: np.ndarray, offsets: np.ndarray, *, spans: bool, few: bool = False
    ) -> tuple[Tokens, np.ndarray]:
        """The tokenize kernel, then stemming; the tokens and (with ``spans``) their start bytes.

        Spans are what stemming reads, so a stemming tokenizer asks for them either way.
        ``few``: a question's tokens, by the serial kernel, stemmed in Python
        (:meth:`_stem_few`) instead of by the stemming kernels.
        """
        classes, fold = self._tables.classes, self._tables.fold
        hashes, tok_offsets, starts, ends, kinds = _kernels.tokenize_utf8(
            data, offsets, classes, fold, self._stop_hashes, self._cjk_mode, spans=spans,
            parallel=False if few else None,
        )  # fmt: skip
        if self._stemmer is not None and hashes.size:
            stem = self._stem_few if few else self._stem_words
            hashes = stem(data, hashes, starts, ends, kinds)
        hashes.flags.writeable = False
        tok_offsets.flags.writeable = False
        return Tokens(hashes, tok_offsets), starts

    def kernel_tables(self) -> KernelTables:
        """The tables the tokenize kernel reads (see :class:`KernelTables`)."""
        return self._tables

    def token_text(self, raw: bytes, kind: int) -> str:
        """The folded text of one token from its UTF-8 source bytes and kind (no stemming).

        ``raw`` and ``kind`` are what the tokenize kernel reports with
        ``spans=True`` (kind 1: a word; else a CJK character or bigram).
        """
        return _token_text(
            raw.decode("utf-8", "replace"), kind, _translation(self.lowercase), _classes()
        )

    def _stem_words(
        self,
        data: np.ndarray,
        hashes: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        kinds: np.ndarray,
    ) -> np.ndarray:
        """Replace the hash of every word by the hash of its stem (cached per word)."""
        distinct, first, inverse = _kernels.distinct_words(hashes, kinds)
        if distinct.size == 0:
            return hashes
        values = self._stem_values(data, distinct, starts[first], ends[first])
        return _kernels.replace_words(hashes, inverse, values)

    def _stem(self, words: list[str]) -> list[str]:
        """Stem words longer than two characters (shorter ones are kept)."""
        with self._stem_lock:
            stems = self._stemmer.stemWords(words)
        return [s if len(w) > 2 and s else w for w, s in zip(words, stems, strict=False)]

    def tokens(self, text: str) -> list[str]:
        """Return the tokens of one text as strings (slow; for inspection and comparisons).

        Parameters
        ----------
        text : str
            The text.

        Returns
        -------
        list of str
            Its tokens, folded (and stemmed), in the order the kernel emits
            them: for CJK, each character, then the bigram it ends.
        """
        return self.token_strings([text])[0]

    def token_strings(self, texts: TextsLike) -> list[list[str]]:
        """Return the tokens of every text as strings (slow; for comparisons).

        Parameters
        ----------
        texts : sequence of str, or pyarrow string array
            The texts.

        Returns
        -------
        list of list of str
            For every text, its token strings; ``hash(token_strings)`` equals
            :meth:`tokenize` token by token.
        """
        data, offsets = as_utf8(texts)
        data, offsets = check_utf8(data, offsets)
        _, tok_offsets, starts, ends, kinds = _kernels.tokenize_utf8(
            data,
            offsets,
            _classes(),
            _fold(self.lowercase),
            self._stop_hashes,
            CJK_MODES[self.cjk],
            spans=True,
        )
        table = _translation(self.lowercase)
        classes = _classes()
        strings = [
            _token_text(data[s:e].tobytes().decode("utf-8", "replace"), kind, table, classes)
            for s, e, kind in zip(starts.tolist(), ends.tolist(), kinds.tolist(), strict=False)
        ]
        if self._stemmer is not None:
            words = [i for i, k in enumerate(kinds.tolist()) if k == 1]
            stems = self._stem([strings[i] for i in words])
            for i, s in zip(words, stems, strict=False):
                strings[i] = s
        bounds = tok_offsets.tolist()
        return [strings[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]

    def hash(self, tokens: Sequence[str]) -> np.ndarray:
        """Return the hashes of token strings, taken as they are (no folding, no stemming).

        Parameters
        ----------
        tokens : sequence of str
            Final token texts (as :meth:`token_strings` gives them).

        Returns
        -------
        numpy.ndarray
            uint64, one hash per token.
        """
        if isinstance(tokens, str):
            raise DocumentError("tokens must be a sequence of str, not a single str")
        return _hash_strings(tokens)


def as_utf8(texts: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(data uint8, offsets int64)`` for a sequence of str or a pyarrow array.

    Parameters
    ----------
    texts : sequence of str, or pyarrow string / large_string array
        The texts.

    Returns
    -------
    tuple of numpy.ndarray
        The UTF-8 bytes and ``len(texts) + 1`` offsets.

    Raises
    ------
    DocumentError
        If ``texts`` is a single string, or holds something that is not a str.
    """
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            raise DocumentError(f"expected an array of strings, got an array of {texts.type}")
        return utf8_buffers(texts)
    if isinstance(texts, (str, bytes)):
        raise DocumentError(
            f"texts must be a sequence of str, got a single {type(texts).__name__}; "
            "wrap it in a list"
        )
    if not isinstance(texts, Sequence):
        texts = list(texts)
    return encode_utf8(texts)


def check_utf8(data: Any, offsets: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate the Arrow string layout: uint8 data, int64 non-decreasing offsets in range.

    Parameters
    ----------
    data : numpy.ndarray
        uint8, one-dimensional.
    offsets : numpy.ndarray
        int64 (or another integer type), one-dimensional, at least one entry.

    Returns
    -------
    tuple of numpy.ndarray
        C-contiguous ``data`` (uint8) and ``offsets`` (int64).

    Raises
    ------
    DocumentError
        If the arrays are malformed.
    """
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
        raise DocumentError("data must be a one-dimensional uint8 array")
    if (
        not isinstance(offsets, np.ndarray)
        or offsets.ndim != 1
        or offsets.size < 1
        or offsets.dtype.kind not in "iu"
    ):
        raise DocumentError("offsets must be a one-dimensional integer array of n + 1 entries")
    data = np.ascontiguousarray(data)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if offsets[0] < 0 or offsets[-1] > data.size or np.any(np.diff(offsets) < 0):
        raise DocumentError(
            f"offsets must be non-decreasing within [0, {data.size}] (the size of data)"
        )
    return data, offsets
