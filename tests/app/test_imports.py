"""Layering: the app imports only graphcmp.core (never readers or the CLI); the CLI loads the app lazily."""

from __future__ import annotations

import ast
from pathlib import Path

import graphcmp.app

APP = Path(graphcmp.app.__file__).parent


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_app_imports_only_core():
    for path in APP.glob("*.py"):
        for name in _imports(path):
            if name.startswith("graphcmp"):
                assert name.startswith(("graphcmp.app", "graphcmp.core")), f"{path.name} imports {name}"
                assert not name.startswith("graphcmp.core.readers"), f"{path.name} imports a reader: {name}"


def test_cli_imports_app_only_inside_serve():
    cli = APP.parent / "cli"
    for path in cli.glob("*.py"):
        tree = ast.parse(path.read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in top:
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            assert not (module or "").startswith(("graphcmp.app", "dash")), f"{path.name} imports {module} at the top"
