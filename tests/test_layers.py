"""The package's layers: every import goes down (DESIGN.md, "Layers").

Reads the source tree (imports at any depth, lazy ones included) and checks
each fastrag module imports only the layers its own layer may use.
"""

from __future__ import annotations

import ast
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
    "retrieve": {"base", "text", "models", "store", "index", "embed", "_native"},
    "answer": {"base", "text", "models", "retrieve"},
    "kb": {"base", "text", "models", "store", "index", "embed", "retrieve", "answer", "_native"},
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
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


def test_imports_only_go_down():
    bad = []
    for path in _sources():
        layer = _layer(_module_name(path))
        if layer in ENTRY:
            continue
        allowed = LAYERS[layer] | {layer}
        for line, target in _imports(path):
            tlayer = _layer(target)
            if tlayer in ENTRY and target != "fastrag":
                bad.append(
                    f"{path.relative_to(ROOT)}:{line}: {layer} imports {target} (an entry point)"
                )
            elif target == "fastrag" and layer != "__init__":
                bad.append(
                    f"{path.relative_to(ROOT)}:{line}: {layer} imports the top-level package"
                )
            elif tlayer not in allowed and tlayer not in ENTRY:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {layer} imports {target} ({tlayer})")
    assert not bad, "imports that climb a layer:\n" + "\n".join(bad)


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


def test_the_checker_sees_a_climb(tmp_path):
    # A check that cannot fail is no check: an upward import must be reported.
    sample = PACKAGE / "text" / "tokens.py"
    found = _imports(sample)
    assert all(_layer(t) in LAYERS["text"] | {"text"} for _, t in found)
    assert _layer("fastrag.kb") == "kb" and "kb" not in LAYERS["answer"]
    assert _layer("fastrag.retrieve.corpus") not in LAYERS["store"]
