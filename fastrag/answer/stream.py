"""Streaming answers: the events of :meth:`fastrag.KnowledgeBase.answer_stream`.

An answer streams in three kinds of event, in this order:

1. ``hits`` — once, after retrieval, reranking and context packing: the
   blocks the generator reads (``[1]`` is ``hits[0]``);
2. ``delta`` — pieces of the answer text as the generator writes them (a
   generator that cannot stream, such as the extractive one, sends its whole
   text as one piece);
3. ``answer`` — once, the final :class:`~fastrag.Answer` with citations,
   confidence, faithfulness, warnings and the audit digest. Its ``text`` is
   authoritative: with ``replace_unfaithful=True`` it can differ from the
   pieces streamed before.

A generator streams when it has a ``stream(question, hits)`` method that
yields text pieces and then one :class:`~fastrag.Generation` (as
:meth:`fastrag.OpenAIChatGenerator.stream` does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import GenerationError
from ..types import Answer, Generation, Hit

__all__ = ["AnswerEvent", "stream_generation"]


@dataclass(frozen=True, slots=True)
class AnswerEvent:
    """One event of a streamed answer (see the module docstring).

    Attributes
    ----------
    kind : {"hits", "delta", "answer"}
        What the event carries.
    hits : tuple of Hit
        ``hits`` events: the context blocks.
    text : str
        ``delta`` events: a piece of the answer text.
    answer : Answer or None
        ``answer`` events: the final answer.
    """

    kind: str
    hits: tuple[Hit, ...] = ()
    text: str = ""
    answer: Answer | None = None


def stream_generation(
    generator: Any,
    call: Callable[[str, Sequence[Hit]], Generation],
    question: str,
    blocks: Sequence[Hit],
) -> Iterator[str | Generation]:
    """Text pieces of one generation, then the :class:`~fastrag.Generation` itself.

    Parameters
    ----------
    generator : object
        The caller's generator (``None`` for the extractive default); used
        for its ``stream`` method when it has one.
    call : callable
        The generator as :func:`fastrag.answer.generate.as_generator` wraps
        it: used when ``generator`` cannot stream.
    question, blocks
        What the generator answers from.
    """
    stream = getattr(generator, "stream", None)
    if not callable(stream):
        generation = call(question, blocks)
        if generation.text:
            yield generation.text
        yield generation
        return
    pieces = stream(question, blocks)
    try:
        final: Generation | None = None
        for item in pieces:
            if isinstance(item, Generation):
                final = item
            elif isinstance(item, str):
                if item:
                    yield item
            else:
                raise GenerationError(
                    f"{type(generator).__name__}.stream yielded {type(item).__name__}; "
                    "expected str pieces and a final fastrag.Generation"
                )
        if final is None:
            raise GenerationError(
                f"{type(generator).__name__}.stream ended without a final fastrag.Generation"
            )
        yield final
    finally:
        close = getattr(pieces, "close", None)
        if callable(close):
            close()  # an abandoned stream closes the model call
