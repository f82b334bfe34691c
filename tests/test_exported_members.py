from __future__ import annotations

import importlib.metadata

import fastrag
import fastrag.errors


def test_all_is_sorted_and_complete():
    assert fastrag.__all__ == sorted(fastrag.__all__)
    for name in fastrag.__all__:
        assert hasattr(fastrag, name), name
    public = {
        n
        for n in dir(fastrag)
        if not n.startswith("_") and not hasattr(getattr(fastrag, n), "__path__")
    }
    public = {n for n in public if not type(getattr(fastrag, n)).__name__ == "module"}
    assert public <= set(fastrag.__all__) | {"annotations"}


def test_the_public_api_is_the_concepts_a_user_meets():
    # One entry point per concept; the other exceptions live in fastrag.errors, the
    # machinery in the layer subpackages.
    assert set(fastrag.__all__) == {
        "Answer", "AnswerEvent", "AnswerOptions", "BuildProgress", "Document", "Embedder",
        "ExtractiveGenerator", "FallbackChain", "FastragError", "Generation", "Generator", "Hit",
        "HnswConfig", "KnowledgeBase", "LLMReranker", "LLMRewriter", "Level",
        "OpenAIChatGenerator", "OpenAIEmbedder", "Principal", "QueryRewriter", "Redactor",
        "RetrievalConfig", "RetrievalOptions", "RewrittenQuery", "SqlResult", "SqlTool",
        "StaticEmbedder",
        "VocabularyEmbedder",
        "__version__", "load_documents", "warmup",
    }  # fmt: skip
    for name in fastrag.errors.__all__:
        assert issubclass(getattr(fastrag.errors, name), fastrag.FastragError), name


def test_every_error_is_a_fastrag_error():
    for name in fastrag.__all__:
        obj = getattr(fastrag, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, fastrag.FastragError)
    assert issubclass(fastrag.errors.ConfigError, ValueError)
    assert issubclass(fastrag.errors.DocumentError, ValueError)
    assert issubclass(fastrag.errors.DocumentNotFoundError, KeyError)


def test_version_matches_distribution():
    assert fastrag.__version__ == importlib.metadata.version("fastrag-engine")


def test_native_is_inside_the_package():
    import fastrag._native as native

    assert native.__name__ == "fastrag._native"
    assert isinstance(native.KERNEL_ABI, int)
