"""The text layer: one definition of what a term, a sentence and a token are.

Normalisation and chunking (:mod:`.chunking`), the BM25 tokenizer
(:mod:`.tokenize`), the stop words (:mod:`.stopwords`), the CJK ranges
(:mod:`.cjk`), content terms (:mod:`.terms`), sentences (:mod:`.sentences`),
token estimates (:mod:`.tokens`), PII redaction (:mod:`.pii`) and UTF-8
buffers (:mod:`.utf8`). Every stage above uses these, never its own copy.
"""

from .chunking import Chunker
from .pii import Redactor
from .tokenize import Tokenizer
from .tokens import estimate_tokens

__all__ = ["Chunker", "Redactor", "Tokenizer", "estimate_tokens"]
