"""The layering rule: graphcmp.core never imports graphcmp.app or graphcmp.cli; app never imports readers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "graphcmp"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted((PACKAGE / "core").rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_imports_neither_app_nor_cli(path):
    bad = {name for name in _imports(path) if name.startswith(("graphcmp.app", "graphcmp.cli"))}
    assert not bad, f"{path} imports {bad}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "app").rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_app_imports_only_core(path):
    bad = {name for name in _imports(path) if name.startswith(("graphcmp.cli", "graphcmp.core.readers."))
           and name != "graphcmp.core.readers.detect"}
    assert not bad, f"{path} imports {bad}"
