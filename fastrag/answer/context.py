"""Context assembly: merge neighbouring windows, then pack them into a token budget.

:func:`assemble_context` turns retrieved hits (best first) into the blocks a
generator is shown as ``[1]``, ``[2]``, ...:

1. **merge** — hits of one document whose character windows overlap or touch
   (``later.start <= earlier.end``) become one block of continuous text, so
   the model never reads the same sentence twice or a sentence cut in two.
   A merged block ranks where its best hit ranked.
2. **pack** — blocks are taken in rank order while they fit in the token
   budget; a block that does not fit is dropped whole (its hits are listed in
   :attr:`Context.dropped`) and smaller blocks after it are still tried. Text
   is never cut.

Tokens are estimated by :func:`estimate_tokens` (or any ``estimator(text) ->
int`` the caller passes). Pass ``[b.hit for b in context.blocks]`` (or
:attr:`Context.hits`) to a generator, so that its ``[n]`` is block ``n``.

Redact PII (:mod:`fastrag.text.pii`) *after* assembly: merging relies on the
character offsets, which redaction invalidates.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from ..errors import ConfigError
from ..text.tokens import estimate_tokens
from ..types import Hit
from .stages import register_cache

__all__ = [
    "Context",
    "ContextBlock",
    "assemble_context",
    "merge_hits",
]


@dataclass(frozen=True, slots=True, init=False)
class ContextBlock:
    """One passage of the context, shown to the generator as ``[marker]``.

    Attributes
    ----------
    marker : int
        The block's number in the prompt (``1``, ``2``, ...).
    hit : Hit
        The block as one hit: its ``text`` is the merged, continuous text;
        ``chunk_id``, ``ord`` and ``metadata`` are those of its first chunk
        in document order; ``start`` / ``end`` span all its chunks;
        ``score`` and ``relevance`` are the best of its hits.
    hits : tuple of Hit
        The retrieved hits merged into it, in document order.
    tokens : int
        Estimated tokens of the block as the prompt shows it (``"[n] "``
        and its text).
    """

    marker: int
    hit: Hit
    hits: tuple[Hit, ...]
    tokens: int

    def __init__(self, marker: int, hit: Hit, hits: tuple[Hit, ...], tokens: int) -> None:
        # The slots' setters (as Hit's __init__): several blocks per answer.
        _set_marker(self, marker)
        _set_hit(self, hit)
        _set_hits(self, hits)
        _set_tokens(self, tokens)


_set_marker, _set_hit, _set_hits, _set_tokens = (
    getattr(ContextBlock, f.name).__set__ for f in fields(ContextBlock)
)


@dataclass(frozen=True, slots=True)
class Context:
    """What the generator is shown: packed blocks, and what did not fit.

    Attributes
    ----------
    blocks : tuple of ContextBlock
        The packed blocks, in rank order; ``blocks[i].marker == i + 1``.
    dropped : tuple of Hit
        The retrieved hits of the blocks that did not fit in the budget, in
        rank order of their blocks.
    tokens : int
        Estimated tokens of all blocks together.
    """

    blocks: tuple[ContextBlock, ...]
    dropped: tuple[Hit, ...]
    tokens: int

    @property
    def hits(self) -> list[Hit]:
        """The blocks' hits, in marker order: what to hand to a generator."""
        return [b.hit for b in self.blocks]


def _mergeable(hit: Hit) -> bool:
    """Whether a hit's offsets describe its text (needed to splice windows)."""
    return 0 <= hit.start <= hit.end and hit.end - hit.start == len(hit.text)


def merge_hits(hits: Sequence[Hit]) -> list[tuple[Hit, tuple[Hit, ...]]]:
    """Merge overlapping or touching windows of the same document.

    Parameters
    ----------
    hits : sequence of Hit
        Retrieved hits, best first. A chunk id seen twice is used once.

    Returns
    -------
    list of (Hit, tuple of Hit)
        One ``(block_hit, merged_hits)`` pair per block, ordered by the rank
        of each block's best hit. Two windows ``a`` then ``b`` (by start) of
        one document merge when ``b.start <= a.end``: the text is
        ``a.text + b.text[a.end - b.start:]``, start the smaller, end the
        larger. Hits whose offsets do not match their text length (so their
        text cannot be spliced safely) are never merged.
    """
    by_doc: dict[str, list[tuple[int, Hit]]] = {}
    seen: set[int] = set()
    for rank, hit in enumerate(hits):
        if hit.chunk_id in seen:
            continue
        seen.add(hit.chunk_id)
        members = by_doc.get(hit.doc_id)
        if members is None:
            by_doc[hit.doc_id] = [(rank, hit)]
        else:
            members.append((rank, hit))
    if len(by_doc) == len(seen):  # one hit per document: nothing merges, ranks as given
        return [(hit, (hit,)) for ((_, hit),) in by_doc.values()]
    ranked: list[tuple[int, Hit, tuple[Hit, ...]]] = []
    for members in by_doc.values():
        if len(members) == 1:
            rank, hit = members[0]
            ranked.append((rank, hit, (hit,)))
            continue
        members.sort(key=_window_order)
        group: list[tuple[int, Hit]] = []
        text = ""
        end = 0
        for rank, hit in members:
            if group and hit.start <= end and _mergeable(hit) and _mergeable(group[-1][1]):
                if hit.end > end:
                    text += hit.text[end - hit.start :]
                    end = hit.end
                group.append((rank, hit))
                continue
            if group:
                ranked.append(_block(group, text, end))
            group, text, end = [(rank, hit)], hit.text, hit.end
        ranked.append(_block(group, text, end))
    ranked.sort(key=_first)
    return [(hit, members_) for _, hit, members_ in ranked]


def _window_order(rank_hit: tuple[int, Hit]) -> tuple[int, int, int]:
    """Windows of one document by start, then end, then rank."""
    rank, hit = rank_hit
    return hit.start, hit.end, rank


_first = operator.itemgetter(0)


def _block(group: list[tuple[int, Hit]], text: str, end: int) -> tuple[int, Hit, tuple[Hit, ...]]:
    """``(best rank, block hit, hits)`` of a group of windows, first window first."""
    first = group[0][1]
    if len(group) == 1:
        return group[0][0], first, (first,)
    hits = tuple([h for _, h in group])
    relevances = [h.relevance for h in hits if h.relevance is not None]
    merged = Hit(
        first.chunk_id, first.doc_id, first.ord, first.start, max(end, first.end), text,
        max([h.score for h in hits]), first.metadata, max(relevances) if relevances else None,
    )  # fmt: skip
    return min([r for r, _ in group]), merged, hits


@functools.lru_cache(maxsize=8192)
def _default_tokens(marker: int, text: str) -> int:
    """:func:`estimate_tokens` of a passage as the prompt shows it (blocks recur: remembered)."""
    return estimate_tokens(f"[{marker}] {text}")


register_cache(_default_tokens.cache_clear)


def assemble_context(
    hits: Sequence[Hit],
    *,
    budget: int | None = 3000,
    estimator: Callable[[str], int] = estimate_tokens,
) -> Context:
    """Merge neighbouring windows and pack the blocks into a token budget.

    Parameters
    ----------
    hits : sequence of Hit
        Retrieved (and reranked) hits, best first.
    budget : int or None, default 3000
        Most estimated tokens of all blocks together; ``None`` for no limit.
    estimator : callable, default :func:`estimate_tokens`
        ``estimator(text) -> int``.

    Returns
    -------
    Context
        The packed blocks (markers ``1..n`` in rank order), the hits of the
        blocks that did not fit, and the total estimated tokens. When even
        the best block does not fit, ``blocks`` is empty.

    Raises
    ------
    ConfigError
        When ``budget`` is negative or not an int.

    Notes
    -----
    See the module docstring for the merge and packing rules. A block's
    tokens are ``estimator(f"[{marker}] {text}")``: the passage as the
    prompt shows it; the ``---`` separators between passages (about one
    token each) are not counted.
    """
    if budget is not None and (
        type(budget) is not int  # the common case first: an int, checked at once
        and (isinstance(budget, bool) or not isinstance(budget, int))
        or budget < 0
    ):
        raise ConfigError(f"budget must be a non-negative int or None, got {budget!r}")
    blocks: list[ContextBlock] = []
    dropped: list[Hit] = []
    total = 0
    default = estimator is estimate_tokens
    for hit, members in merge_hits(hits):
        marker = len(blocks) + 1
        tokens = (
            _default_tokens(marker, hit.text) if default else estimator(f"[{marker}] {hit.text}")
        )
        if budget is not None and total + tokens > budget:
            dropped.extend(members)
            continue
        blocks.append(ContextBlock(marker, hit, members, tokens))
        total += tokens
    return Context(tuple(blocks), tuple(dropped), total)
