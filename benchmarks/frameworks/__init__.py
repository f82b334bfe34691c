"""Per-system runners of ``benchmarks/compare_frameworks.py``.

Each module holds one system (or two variants) and imports its framework only
when the runner is built, so a missing framework skips that system alone.
A runner has:

- ``chunk(docs) -> int``: the system's own splitter over the raw documents
  (chunking throughput), nothing else;
- ``ingest(docs)``: from ``[{"id", "title", "text"}]`` to a searchable store,
  the way the system's documentation shows (chunk + embed + index);
- ``chunk_table() -> (keys, vectors, doc_ids)``: the system's own chunks as
  it stored them, for the exact reference of agree@10;
- ``query(q) -> keys`` (top 10) and ``batch(qs) -> native`` /
  ``batch_keys(native) -> [keys]`` (``batch_api`` says which API);
- ``persist(path)``, and ``reload(path)`` in a fresh process.
"""

from __future__ import annotations

import importlib

# name -> (module, class, description)
SYSTEMS: dict[str, tuple[str, str]] = {
    "fastrag": ("fastrag_runner", "FastragExact"),
    "fastrag-hnsw": ("fastrag_runner", "FastragHnsw"),
    "numpy": ("numpy_runner", "PlainNumpy"),
    "langchain": ("langchain_runner", "LangChain"),
    "llamaindex": ("llamaindex_runner", "LlamaIndex"),
    "haystack": ("haystack_runner", "Haystack"),
    "chroma": ("chroma_runner", "Chroma"),
    "lancedb": ("lancedb_runner", "LanceDB"),
}

BM25_SYSTEMS: dict[str, tuple[str, str]] = {
    "fastrag": ("bm25_runners", "FastragBM25"),
    "llamaindex": ("bm25_runners", "LlamaIndexBM25"),
    "haystack": ("bm25_runners", "HaystackBM25"),
}


def load(name: str, table: dict[str, tuple[str, str]] | None = None) -> type:
    """The runner class of ``name`` (ImportError when its framework is missing)."""
    module, cls = (table or SYSTEMS)[name]
    mod = importlib.import_module(f"{__name__}.{module}")
    runner = getattr(mod, cls)
    runner.check()  # imports the framework: raises ImportError with the reason
    return runner
