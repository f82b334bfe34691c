from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil

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
        "ExtractiveGenerator", "FallbackChain", "FastragError", "Generation", "Generator", "Hit", "Hits",
        "HnswConfig", "KnowledgeBase", "LLMReranker", "LLMRewriter", "Level",
        "MultimodalContext",
        "OpenAIChatGenerator", "OpenAIEmbedder", "Principal", "QueryRewriter", "Redactor",
        "RetrievalConfig", "RetrievalOptions", "RewrittenQuery", "SqlResult", "SqlTool",
        "StaticEmbedder",
        "VocabularyEmbedder",
        "__version__", "load_documents", "warmup",
    }  # fmt: skip
    for name in fastrag.errors.__all__:
        assert issubclass(getattr(fastrag.errors, name), fastrag.FastragError), name


def _exception_classes() -> dict[str, type]:
    """Every exception class defined in a fastrag module: qualified name -> class."""
    found = {}
    for info in pkgutil.walk_packages(fastrag.__path__, "fastrag."):
        if info.name == "fastrag.__main__":  # runs the CLI
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_error_is_a_fastrag_error():
    # Every exception a caller can meet, wherever it is defined (not only the exported
    # names, of which FastragError is the one exception), derives from FastragError. A
    # private one (an internal signal that never leaves its module, as hnsw's _ShortResult)
    # is exempt.
    classes = _exception_classes()
    for name in fastrag.errors.__all__:  # the walk reaches the error tree itself
        assert f"fastrag.errors.{name}" in classes, name
    public = {n: c for n, c in classes.items() if not n.rsplit(".", 1)[1].startswith("_")}
    assert not {n for n, c in public.items() if not issubclass(c, fastrag.FastragError)}
    assert issubclass(fastrag.errors.ConfigError, ValueError)
    assert issubclass(fastrag.errors.DocumentError, ValueError)
    assert issubclass(fastrag.errors.DocumentNotFoundError, KeyError)


def test_version_matches_distribution():
    assert fastrag.__version__ == importlib.metadata.version("fastrag-engine")


def test_native_is_inside_the_package():
    import fastrag._native as native

    assert native.__name__ == "fastrag._native"
    assert isinstance(native.KERNEL_ABI, int)
