"""The corpus layer: one version of a knowledge base's data, how the next is made, and its files.

A :class:`Corpus` is the chunk store, its indexes and its embedder
together, immutable (:mod:`.corpus`); :mod:`.build` makes the first one
and each next one (add, delete, compact, another vector index);
:mod:`.persist` saves one as a snapshot and opens it again;
:mod:`.ontology` is the entity table a corpus carries for the keyword legs.
"""

from .corpus import Corpus
from .ontology import Ontology
from .persist import Settings

__all__ = ["Corpus", "Ontology", "Settings"]
