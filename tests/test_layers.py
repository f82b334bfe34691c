"""The package's layers: every import goes down (DESIGN.md, "Layers"), and none goes round.

Reads the source tree (imports at any depth, lazy ones inside functions
included) and checks each fastrag module imports only the layers its own
layer may use, and that no chain of imports leads back to where it started.
The checkers are fed synthetic sources too, so that each is seen to fail.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fastrag"
NATIVE = ROOT / "native"

BASE = {"errors", "config", "types", "_threads", "_fs", "_version"}
"""Modules every layer may import."""

LAYERS: dict[str, set[str]] = {
    "_native": set(),
    "datasets": set(),
    "base": {"_native"},
    "text": {"base", "_native"},
    "models": {"base", "text"},
    "store": {"base", "text", "_native"},
    "index": {"base", "text", "_native"},
    "embed": {"base", "text", "models", "_native"},
    "options": {"base", "text"},
    "corpus": {"base", "text", "models", "store", "index", "embed", "options", "_native"},
    "retrieve": {
        "base",
        "text",
        "models",
        "store",
        "index",
        "embed",
        "corpus",
        "options",
        "_native",
    },  # fmt: skip
    "answer": {"base", "text", "models", "options", "retrieve"},
    "kb": {
        "base",
        "text",
        "models",
        "store",
        "index",
        "embed",
        "corpus",
        "options",
        "retrieve",
        "answer",
        "_native",
    },  # fmt: skip
}
"""Layer -> the layers it may import (its own is always allowed)."""

ENTRY = {"batch", "serve", "integrations", "cli", "warmup", "__init__", "__main__"}
"""Ways in from outside: they may import anything."""


def _layer(module: str) -> str:
    """The layer of a dotted module name inside fastrag (``fastrag.x.y``)."""
    parts = module.split(".")
    assert parts[0] == "fastrag", module
    if len(parts) == 1:
        return "__init__"
    head = parts[1]
    if head in BASE:
        return "base"
    return head


def _module_name(path: Path) -> str:
    if path.is_relative_to(NATIVE):
        rel = ["fastrag", "_native", *path.relative_to(NATIVE).with_suffix("").parts]
    else:
        rel = ["fastrag", *path.relative_to(PACKAGE).with_suffix("").parts]
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return ".".join(rel)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every fastrag import in a file."""
    return _imports_of(path.read_text(), _module_name(path), path.name == "__init__.py", str(path))


def _imports_of(
    source: str, module: str, is_package: bool, filename: str = "<source>"
) -> list[tuple[int, str]]:
    """(line, absolute module) of every fastrag import in ``source``, the text of ``module``."""
    package = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "fastrag"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "fastrag":
                continue
            if node.module is None:  # from . import a, b: submodules (or names) of the package
                out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, target))
    return out


def _sources() -> list[Path]:
    return sorted(
        p for p in [*PACKAGE.rglob("*.py"), *NATIVE.rglob("*.py")] if "__pycache__" not in p.parts
    )


def _climbs(module: str, imports: list[tuple[int, str]], where: str) -> list[str]:
    """The imports of ``module`` that climb a layer (or reach an entry point), as messages."""
    layer = _layer(module)
    if layer in ENTRY:
        return []
    allowed = LAYERS[layer] | {layer}
    bad = []
    for line, target in imports:
        tlayer = _layer(target)
        if tlayer in ENTRY and target != "fastrag":
            bad.append(f"{where}:{line}: {layer} imports {target} (an entry point)")
        elif target == "fastrag" and layer != "__init__":
            bad.append(f"{where}:{line}: {layer} imports the top-level package")
        elif tlayer not in allowed and tlayer not in ENTRY:
            bad.append(f"{where}:{line}: {layer} imports {target} ({tlayer})")
    return bad


def test_imports_only_go_down():
    bad = []
    for path in _sources():
        bad += _climbs(_module_name(path), _imports(path), str(path.relative_to(ROOT)))
    assert not bad, "imports that climb a layer:\n" + "\n".join(bad)


def _graph(imports: dict[str, list[tuple[int, str]]]) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: first line}; ``from p import name`` is an edge to ``p``.

    A target is the longest prefix of the imported name that is a module of
    the tree (``fastrag.x.y.Name`` -> ``fastrag.x.y``); a module importing
    its own package's ``__init__`` is an edge like any other (the package's
    ``__init__`` imports its submodules: that is a circle).
    """
    graph: dict[str, dict[str, int]] = {}
    for module, found in imports.items():
        edges = graph.setdefault(module, {})
        for line, target in found:
            while target not in imports and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in imports and target != module:
                edges.setdefault(target, line)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    inside = set(component)
    edges = [
        f"  {a}:{line} -> {b}" for a in component for b, line in graph[a].items() if b in inside
    ]
    return "\n".join([" <-> ".join(component), *edges])


KNOWN_CYCLES: list[list[str]] = []
"""Import circles tolerated for now, each exactly as :func:`_cycles` reports it."""


def _tree_graph() -> dict[str, dict[str, int]]:
    return _graph({_module_name(p): _imports(p) for p in _sources()})


def test_no_import_cycles():
    graph = _tree_graph()
    found = [c for c in _cycles(graph) if c not in KNOWN_CYCLES]
    assert not found, "import cycles (module-level or inside functions):\n" + "\n".join(
        _describe(c, graph) for c in found
    )


def test_every_module_has_a_layer():
    known = set(LAYERS) | ENTRY
    for path in _sources():
        assert _layer(_module_name(path)) in known, path


def test_native_imports_nothing_of_fastrag_and_no_third_party_but_numpy_and_numba():
    for path in NATIVE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top not in ("fastrag", "pyarrow", "hnswlib", "httpx"), (path, name)


def _synthetic(sources: dict[str, str]) -> dict[str, list[tuple[int, str]]]:
    """The imports of synthetic modules: dotted name -> source (a package's name ends ``.__init__``)."""
    out = {}
    for name, source in sources.items():
        is_package = name.endswith(".__init__")
        module = name.removesuffix(".__init__")
        out[module] = _imports_of(textwrap.dedent(source), module, is_package, name)
    return out


def test_the_checker_rejects_a_climb():
    # A check that cannot fail is no check: an upward import, at module level or inside a
    # function, relative or absolute, must be reported; a downward one must not.
    climbing = {
        "fastrag.text.fake": """
            from ..retrieve.retriever import Retriever

            def later():
                from fastrag.kb import KnowledgeBase
                import fastrag.serve.app
            """,
    }
    found = _synthetic(climbing)["fastrag.text.fake"]
    assert [t for _, t in found] == [
        "fastrag.retrieve.retriever",
        "fastrag.kb",
        "fastrag.serve.app",
    ]
    bad = _climbs("fastrag.text.fake", found, "fake.py")
    assert len(bad) == 3, bad
    assert "fake.py:2: text imports fastrag.retrieve.retriever (retrieve)" in bad
    assert "fake.py:5: text imports fastrag.kb (kb)" in bad
    assert "fake.py:6: text imports fastrag.serve.app (an entry point)" in bad
    going_down = _synthetic({"fastrag.answer.fake": "from ..retrieve import options\n"})
    assert _climbs("fastrag.answer.fake", going_down["fastrag.answer.fake"], "fake.py") == []


def test_the_checker_rejects_a_cycle():
    # Three modules of one layer in a circle, one edge a lazy import inside a function, one a
    # package __init__ re-exporting a submodule; a fourth module off the circle.
    sources = {
        "fastrag.embed.__init__": "from .a import A\n",
        "fastrag.embed.a": "from .b import B\n",
        "fastrag.embed.b": "def f():\n    from fastrag.embed import A\n",
        "fastrag.embed.c": "from . import a\nfrom .b import B\n",
    }
    graph = _graph(_synthetic(sources))
    assert graph["fastrag.embed.b"] == {"fastrag.embed": 2}
    assert graph["fastrag.embed.c"] == {"fastrag.embed.a": 1, "fastrag.embed.b": 2}
    assert _cycles(graph) == [["fastrag.embed", "fastrag.embed.a", "fastrag.embed.b"]]
    # The same modules without the lazy import: no circle.
    sources["fastrag.embed.b"] = "def f():\n    return 1\n"
    assert _cycles(_graph(_synthetic(sources))) == []
    # Two modules importing each other's names at module level.
    pair = _synthetic(
        {"fastrag.answer.x": "from .y import f\n", "fastrag.answer.y": "from . import x\n"}
    )
    assert _cycles(_graph(pair)) == [["fastrag.answer.x", "fastrag.answer.y"]]


def test_the_tree_is_read_whole():
    # The real graph holds the edges the checkers rely on: lazy imports are seen, and a
    # module is found under its installed name (native/ is fastrag._native).
    graph = _tree_graph()
    assert "fastrag._native" in graph and "fastrag.embed.registry" in graph
    assert "fastrag.embed.static" in graph["fastrag.embed.registry"]  # a lazy import
    assert all(_layer(t) in LAYERS["text"] | {"text"} for t in graph["fastrag.text.tokenize"])


def _subpackage(module: str) -> str:
    """The subpackage of a dotted fastrag module (``fastrag.embed.static`` -> ``embed``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


PUBLIC_PRIVATE_NAMES = {"_native"} | BASE
"""Underscored names that are public: the kernels' installed package and the base modules."""

KNOWN_REACH_INS: set[tuple[str, str]] = set()
"""(module, what it imports) tolerated for now, each as :func:`_reach_ins` names them."""


def _reach_ins(
    source: str, module: str, is_package: bool, filename: str = "<source>"
) -> list[tuple[int, str]]:
    """(line, imported) of every private name ``module`` imports from another subpackage.

    A private name is one with a leading underscore, imported by name
    (``from fastrag.text.tokenize import _classes``) or on the module path
    (``from fastrag._native._jit import readonly``), at any depth; the
    same subpackage may share its private names.
    """
    package = module if is_package else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            found = [(a.name, a.name.split(".")) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found = [(f"{target}.{a.name}", [*target.split("."), a.name]) for a in node.names]
        else:
            continue
        for name, parts in found:
            if parts[0] != "fastrag" or _subpackage(name) == _subpackage(module):
                continue
            bad = [i for i, p in enumerate(parts[1:], 1) if _private(p)]
            bad = [i for i in bad if not (i == 1 and parts[1] in PUBLIC_PRIVATE_NAMES)]
            if bad:
                shown = ".".join(parts[: bad[-1] + 1]) if isinstance(node, ast.ImportFrom) else name
                out.append((node.lineno, shown))
    return out


def test_no_module_imports_a_private_name_of_another_subpackage():
    bad = []
    for path in _sources():
        module = _module_name(path)
        where = str(path.relative_to(ROOT))
        for line, name in _reach_ins(path.read_text(), module, path.name == "__init__.py", where):
            if (module, name) not in KNOWN_REACH_INS:
                bad.append(f"{where}:{line}: {module} imports {name}")
    assert not bad, "private names imported across subpackages:\n" + "\n".join(bad)


def test_the_reach_in_checker_rejects_private_imports():
    source = textwrap.dedent(
        """
        from .. import _native
        from .._native import tokenize as _kernels
        from .._threads import threads as _threads
        from ..text.tokenize import _classes, as_utf8
        from .table import _MODES
        from fastrag._native._jit import readonly

        def later():
            from fastrag.batch.files import _writer
            import fastrag.store.loaders._common
        """
    )
    found = _reach_ins(source, "fastrag.embed.fake", False, "fake.py")
    assert found == [
        (5, "fastrag.text.tokenize._classes"),
        (7, "fastrag._native._jit"),
        (10, "fastrag.batch.files._writer"),
        (11, "fastrag.store.loaders._common"),
    ], found
    # Inside one subpackage private names are shared: store.loaders may use its _common.
    inside = "from ._common import require\nfrom ..sources import _x\n"
    assert _reach_ins(inside, "fastrag.store.loaders.pdf", False) == []


BUILDS_OR_PERSISTS = {
    "fastrag.corpus.build",
    "fastrag.corpus.persist",
    "fastrag.index.files",
    "fastrag.store.ingest",
    "fastrag.store.snapshots",
}
"""Ingestion and persistence: the corpus layer's business, not retrieval's."""


def test_retrieve_turns_questions_into_rows_only():
    # DESIGN.md: building, editing, saving and opening a corpus live in fastrag/corpus/;
    # retrieve/ reads a Corpus it is handed.
    graph = _tree_graph()
    assert BUILDS_OR_PERSISTS <= set(graph)  # the names still exist: the check can bite
    bad = [
        f"{m}:{line} -> {t}"
        for m, edges in graph.items()
        if _layer(m) == "retrieve"
        for t, line in edges.items()
        if t in BUILDS_OR_PERSISTS
    ]
    assert not bad, "retrieve/ builds or persists:\n" + "\n".join(bad)
    assert "fastrag.corpus" in graph["fastrag.retrieve.retriever"]  # it reads a Corpus
