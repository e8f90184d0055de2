"""The architecture as a checked contract: the layer order and acyclicity (import-linter, with
the contracts in pyproject.toml), no torch import at module level, and function-local imports of
project modules only where a one-line comment says why."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("aten2prims", "prims", "decompositions")


def _modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _imported_roots(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return ["." if node.level else (node.module or "").split(".")[0]]
    return [alias.name.split(".")[0] for alias in node.names]


def _function_local_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    yield node


def test_import_linter_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if lint_imports is None:
        pytest.fail("lint-imports (import-linter) is not installed: pip install -e '.[test]'")
    result = subprocess.run([lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_torch_is_never_imported_at_module_level() -> None:
    offenders = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        local = {id(node) for node in _function_local_imports(tree)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in local:
                if "torch" in _imported_roots(node) and not _under_type_checking(tree, node):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def _under_type_checking(tree: ast.Module, target: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            if any(child is target for child in ast.walk(node)):
                return True
    return False


def test_function_local_project_imports_say_why() -> None:
    """A project module imported inside a function must say why on the line above or at the end
    of the line (keeping torch or a heavy optional import lazy): anything else is a cycle being
    dodged, which the layer contract forbids."""
    unexplained = []
    for path in _modules():
        source = path.read_text()
        lines = source.splitlines()
        for node in _function_local_imports(ast.parse(source)):
            roots = _imported_roots(node)
            if not any(root == "." or root in PACKAGES for root in roots):
                continue
            line = lines[node.lineno - 1]
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            if "#" not in line and not above.startswith("#"):
                unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno}: {line.strip()}")
    assert unexplained == [], "function-local imports without a reason:\n" + "\n".join(unexplained)
