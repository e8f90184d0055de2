"""The registry of decomposition rules, keyed by exact overload name.

A rule is a named function registered by one decorator that spells out its overloads, so that
searching the sources for "aten.<op>.<overload>" finds the rule:

    @register("aten.add.Tensor", "aten.add.Scalar")
    def add(self, other, alpha):
        ...

It receives the node's arguments bound to the overload's schema — in schema order, under the
schema's names (checked at registration), defaults filled in — as symbolic tensors (`Value`s) and
plain Python values, and returns the result value(s) built with prims builders. Rules may call
other rules through `aten.<name>.<overload>(...)`. Duplicates and overloads without a known
schema are rejected.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import keyword
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from aten2prims.errors import UnsupportedOpError
from aten2prims.schema.parser import Schema, parse_schema
from aten2prims.schema.registry import aten_schema

RuleFunction = Callable[..., Any]


@attrs.frozen(slots=True)
class Rule:
    op: str
    # None for an op of a user's namespace whose schema we do not know: the function then
    # receives the node's operands as the node holds them.
    schema: Schema | None
    function: RuleFunction

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.schema is None:
            return self.function(*args, **kwargs)
        return self.function(*self.schema.bind(args, kwargs, op=self.op))


class RuleRegistry:
    """Rules by overload name. `RULES` is the registry lowering uses by default; `with_rule` and
    `without` build other tables from it without changing it."""

    def __init__(self, rules: dict[str, Rule] | None = None) -> None:
        self._rules: dict[str, Rule] = dict(rules or {})

    def with_rule(
        self, op: str, function: RuleFunction, *, schema: str | None = None
    ) -> RuleRegistry:
        """A new table: these rules, plus `function` as the rule of `op` (replacing this table's
        rule for `op`, if any). `op` is an exact overload name ("aten.gelu.default",
        "mylib.fused_gelu.default"). The function's parameters must be the argument names of
        the overload's schema — torch's for aten ops, or `schema` (a torch function schema,
        "mylib::fused_gelu(Tensor x) -> Tensor") for an op of another namespace; without a
        schema it receives the node's operands as they are."""
        table = RuleRegistry(self._rules)
        table._rules.pop(op, None)
        table._add(op, function, schema=schema)
        return table

    def without(self, *ops: str) -> RuleRegistry:
        """A new table: these rules less those of `ops` (lowering then refuses or keeps them)."""
        unknown = [op for op in ops if op not in self._rules]
        if unknown:
            raise KeyError(f"no rule to remove for {', '.join(unknown)}")
        return RuleRegistry({op: rule for op, rule in self._rules.items() if op not in ops})

    def register(self, *ops: str) -> Callable[[RuleFunction], RuleFunction]:
        """Decorate a rule function to register it for each of `ops` (exact overload names). Its
        parameters must be the overload schema's argument names, in schema order (a Python
        keyword with a trailing underscore: `from_`)."""

        def decorate(function: RuleFunction) -> RuleFunction:
            for op in ops:
                self._add(op, function)
            return function

        return decorate

    def _add(self, op: str, function: RuleFunction, *, schema: str | None = None) -> None:
        if op in self._rules:
            raise ValueError(f"a decomposition rule for {op} is already registered")
        known = parse_schema(schema) if schema is not None else aten_schema(op)
        if known is None:
            if op.startswith("aten."):
                raise ValueError(f"cannot register a rule for {op}: no schema is known for it")
            self._rules[op] = Rule(op, None, function)
            return
        self._check_parameters(op, function, known)
        self._rules[op] = Rule(op, known, function)

    @staticmethod
    def _check_parameters(op: str, function: RuleFunction, schema: Schema) -> None:
        parameters = [
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        # An argument named by a Python keyword (uniform's `from`) is the parameter `from_`.
        expected = [
            f"{name}_" if keyword.iskeyword(name) else name for name in schema.argument_names
        ]
        if parameters != expected:
            raise TypeError(
                f"rule {function.__qualname__} for {op}: parameters {parameters} do not match the schema's "
                f"{list(schema.argument_names)}"
            )

    def get(self, op: str) -> Rule | None:
        return self._rules.get(op)

    def __contains__(self, op: object) -> bool:
        return op in self._rules

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._rules))

    def __len__(self) -> int:
        return len(self._rules)


RULES = RuleRegistry()
register = RULES.register


def default_rules() -> RuleRegistry:
    """The table of every rule this package defines: the start of a custom table
    (`default_rules().with_rule(op, fn)`), which leaves this one unchanged."""
    return RULES


_active: contextvars.ContextVar[RuleRegistry] = contextvars.ContextVar(
    "aten2prims_rules", default=RULES
)


@contextlib.contextmanager
def active_registry(registry: RuleRegistry) -> Iterator[None]:
    """Make `aten.<op>` calls inside rules resolve through `registry` (lowering sets this)."""
    token = _active.set(registry)
    try:
        yield
    finally:
        _active.reset(token)


def call(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Apply the rule of `op` to arguments (bound to its schema): how rules call other rules."""
    rule = _active.get().get(op)
    if rule is None:
        raise UnsupportedOpError({op: 1})
    return rule(*args, **kwargs)


_node: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "aten2prims_lowering_node", default=None
)


@contextlib.contextmanager
def lowering_node(node: Any) -> Iterator[None]:
    """Record the aten node whose rule is running (lowering sets this)."""
    token = _node.set(node)
    try:
        yield
    finally:
        _node.reset(token)


def declared_result_metas() -> tuple[Any, ...]:
    """The metas the graph declares for the results of the aten node being lowered. Rules of ops
    whose output shape depends on data (nonzero) read the size torch recorded here; a rule called
    from another rule sees its caller's node, so only top-level rules should rely on it."""
    node = _node.get()
    if node is None:
        raise RuntimeError("declared_result_metas() is only available while lowering a node")
    return tuple(result.meta for result in node.results)


class _Overload:
    __slots__ = ("op",)

    def __init__(self, op: str) -> None:
        self.op = op

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return call(self.op, args, kwargs)

    def __repr__(self) -> str:
        return f"<aten rule call {self.op}>"


class _Packet:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, overload: str) -> _Overload:
        if overload.startswith("__"):
            raise AttributeError(overload)
        return _Overload(f"aten.{self.name}.{overload}")


class _AtenNamespace:
    """`aten.sum.dim_IntList(x, [1])` inside a rule applies that overload's rule (inline)."""

    def __getattr__(self, name: str) -> _Packet:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Packet(name)


aten = _AtenNamespace()
