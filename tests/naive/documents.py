"""Reference for the document keyword index: documents joined from their chunks, in Python.

``join`` rebuilds a document from its chunk strings and character offsets
the way ``fastrag._native.structure.join_chunks`` does (a chunk that starts
after the text written so far follows one space; one that starts inside it
loses the characters already written), one Python string at a time. The
document BM25 index of a build is ``BM25Index.from_texts`` of these strings:
the path that tokenised every document again, kept here as the reference
for the index built from the chunks' tokens.
"""

from __future__ import annotations

from collections.abc import Sequence


def join(texts: Sequence[str], starts: Sequence[int], ends: Sequence[int]) -> str:
    """One document from its chunks (in order of ``starts``)."""
    out = texts[0]
    reach = ends[0]
    for text, start, end in zip(texts[1:], starts[1:], ends[1:], strict=True):
        out += " " + text if start > reach else text[reach - start :]
        reach = max(reach, end)
    return out


def documents(
    texts: Sequence[str], starts: Sequence[int], ends: Sequence[int], doc_starts: Sequence[int]
) -> list[str]:
    """Every document (chunks ``doc_starts[d]:doc_starts[d + 1]``) joined."""
    return [
        join(texts[a:b], starts[a:b], ends[a:b])
        for a, b in zip(doc_starts[:-1], doc_starts[1:], strict=True)
    ]
