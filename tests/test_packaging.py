"""The wheel holds every package of the source tree (an editable install hides a missing one)."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _listed() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(config["packages"]) | set(config.get("package-dir", {}))


def _on_disk() -> set[str]:
    found = set()
    for init in (ROOT / "fastrag").rglob("__init__.py"):
        if "__pycache__" in init.parts:
            continue
        found.add(".".join(init.parent.relative_to(ROOT).parts))
    return found


def test_every_package_is_in_the_wheel():
    missing = sorted(_on_disk() - _listed())
    assert not missing, f"pyproject.toml [tool.setuptools] packages lacks {missing}"


def test_the_check_sees_a_missing_package():
    listed = _listed() - {"fastrag.corpus"}
    assert "fastrag.corpus" in _on_disk() - listed
