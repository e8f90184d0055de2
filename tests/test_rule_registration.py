"""Every decomposition rule is written one way: `@register("aten.<op>.<overload>", …)` on a named
`def`, so searching the sources for an overload's exact name finds its rule."""

from __future__ import annotations

import ast
import inspect
from collections import Counter
from pathlib import Path

import attrs

import decompositions
from decompositions import RULES

PACKAGE = Path(decompositions.__file__).parent


@attrs.frozen
class Registration:
    op: str
    path: Path
    function: str
    line: int


def _is_register(call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return name == "register"


def _source_registrations() -> tuple[list[Registration], list[str]]:
    """The overloads named by `@register(...)` decorators in the package's sources, and every
    other use of `register(...)` (which must not exist)."""
    registrations: list[Registration] = []
    stray: list[str] = []
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        decorators: set[int] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                if not _is_register(decorator):
                    continue
                decorators.add(id(decorator))
                assert isinstance(decorator, ast.Call)
                for arg in decorator.args:
                    if not (isinstance(arg, ast.Constant) and type(arg.value) is str):
                        stray.append(f"{path.name}:{arg.lineno}: a non-literal overload name")
                        continue
                    registrations.append(Registration(arg.value, path, node.name, decorator.lineno))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _is_register(node) and id(node) not in decorators:
                stray.append(f"{path.name}:{node.lineno}: register(...) outside a decorator")
            if isinstance(node, ast.Attribute) and node.attr in ("add", "_add", "_rules"):
                if isinstance(node.value, ast.Name) and node.value.id == "RULES":
                    stray.append(f"{path.name}:{node.lineno}: RULES.{node.attr}")
    return registrations, stray


def test_rules_are_registered_only_by_decorators_with_literal_names() -> None:
    _, stray = _source_registrations()
    assert stray == []


def test_every_rule_is_named_literally_next_to_its_function() -> None:
    registrations, _ = _source_registrations()
    by_op = {r.op: r for r in registrations}
    assert sorted(by_op) == sorted(RULES), "the decorators name exactly the registered overloads"
    for op in RULES:
        rule = RULES.get(op)
        assert rule is not None
        function = inspect.unwrap(rule.function)
        written = by_op[op]
        assert Path(inspect.getsourcefile(function) or "") == written.path, op
        assert function.__name__ == written.function, op
        # The decorator sits on the def: the function's source starts at its decorators.
        lines, first = inspect.getsourcelines(function)
        assert first <= written.line < first + len(lines), op
        assert f'"{op}"' in "".join(lines), op


def test_no_overload_is_registered_twice() -> None:
    registrations, _ = _source_registrations()
    counts = Counter(r.op for r in registrations)
    assert [op for op, count in counts.items() if count > 1] == []


def test_the_non_core_extras_are_registered_too() -> None:
    from aten2prims.schema.registry import CORE_ATEN_OPS

    extras = [op for op in RULES if op not in CORE_ATEN_OPS]
    assert "aten.hypot.default" in extras and "aten.round.decimals" in extras
    registrations, _ = _source_registrations()
    assert set(extras) <= {r.op for r in registrations}


def test_an_argument_named_by_a_python_keyword_is_its_name_with_an_underscore() -> None:
    """uniform's `from` cannot be a parameter name: the rule spells it `from_`; any other name
    is refused, as for every argument."""
    import pytest

    def spelled(self: object, from_: float, to: float, generator: object) -> object:
        return self

    def misspelled(self: object, start: float, to: float, generator: object) -> object:
        return self

    assert "aten.uniform.default" in RULES.with_rule("aten.uniform.default", spelled)
    with pytest.raises(TypeError, match=r"\['self', 'start', 'to', 'generator'\]"):
        RULES.with_rule("aten.uniform.default", misspelled)
