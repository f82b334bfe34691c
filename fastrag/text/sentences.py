"""Sentences: one splitter for source chunks and for answers.

A sentence ends at Chinese or English sentence punctuation (。！？；!?;…),
at a ``.`` followed by white space, a ``[n]`` marker or the end of the text
(so ``3.5`` and ``e.g`` stay inside), or at a line break.

- :func:`split_sentences` gives the verbatim pieces of a text (stripped):
  what the extractive answerer quotes, so every sentence it returns is a
  substring of its source.
- :func:`split_cited` is for answers: ``[n]`` markers right after the
  punctuation belong to the sentence before them (``"... 15 days. [1]"``,
  ``"……十五日内提交。[1]"``) and are returned apart from it.
"""

from __future__ import annotations

import re

__all__ = ["split_cited", "split_sentences"]

_MARKER = re.compile(r"\[(\d{1,4})\]")
_BODY = r"(?:[^。！？!?；;…\n.]|\.(?=[^\s\[]))*(?:[。！？!?；;….]+|\n+|$)"
_SENTENCE = re.compile(_BODY)
_CITED = re.compile(_BODY + r"(?:[ \t]*\[\d{1,4}\])*")


def split_sentences(text: str) -> list[str]:
    """The sentences of a text, verbatim and stripped, empty ones left out.

    Parameters
    ----------
    text : str
        Any text (a chunk, a merged context block).

    Returns
    -------
    list of str
        Substrings of ``text``, in order.
    """
    out = []
    for match in _SENTENCE.finditer(text):
        piece = match.group().strip()
        if piece:
            out.append(piece)
    return out


def split_cited(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """Split an answer into sentences and the markers each one cites.

    Parameters
    ----------
    text : str
        The answer.

    Returns
    -------
    list of (str, tuple of int)
        Each sentence with its markers removed and white space stripped,
        and the markers it cites in order of first use. Empty sentences are
        left out.
    """
    out: list[tuple[str, tuple[int, ...]]] = []
    for match in _CITED.finditer(text):
        piece = match.group()
        if not piece or piece.isspace():
            continue
        markers = tuple(dict.fromkeys(int(m) for m in _MARKER.findall(piece)))
        sentence = _MARKER.sub("", piece).strip() if markers else piece.strip()
        if sentence:
            out.append((sentence, markers))
    return out
