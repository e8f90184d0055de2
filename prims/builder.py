"""Building graphs by calling prims: `prims.add(a, b)` appends a node to the current builder and
returns a symbolic tensor (a `Value`) whose meta comes from the prim's meta rule.

    with Builder() as b:
        x = b.add_input("x", TensorMeta((2, 3), f32))
        y = prims.exp(x)
        graph = b.finish([y])
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from aten2prims.errors import DTypeError, SchemaError, ShapeError
from aten2prims.ir.graph import (
    NO_PROVENANCE,
    Graph,
    GraphInput,
    GraphOutput,
    InputKind,
    Node,
    OutputKind,
    Provenance,
)
from aten2prims.ir.values import Meta, ScalarMeta, TensorMeta, Value

from .registry import PrimDef

_current: contextvars.ContextVar[Builder | None] = contextvars.ContextVar(
    "aten2prims_builder", default=None
)


class Builder:
    """Collects nodes in order, hands out fresh value names, and stamps every node with the
    current provenance."""

    def __init__(self, name: str = "graph", *, reserved_names: Iterable[str] = ()) -> None:
        self.name = name
        self.inputs: list[GraphInput] = []
        self.nodes: list[Node] = []
        self.provenance: Provenance = NO_PROVENANCE
        self._used: set[str] = set(reserved_names)
        self._counter = itertools.count()
        self._tokens: list[contextvars.Token] = []

    # -- context -----------------------------------------------------------------------------
    def __enter__(self) -> Builder:
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _current.reset(self._tokens.pop())

    # -- names -----------------------------------------------------------------------------
    def fresh_name(self, hint: str | None = None) -> str:
        if hint is not None and hint not in self._used:
            self._used.add(hint)
            return hint
        while True:
            name = str(next(self._counter)) if hint is None else f"{hint}_{next(self._counter)}"
            if name not in self._used:
                self._used.add(name)
                return name

    def reserve(self, name: str) -> None:
        self._used.add(name)

    # -- building ----------------------------------------------------------------------------
    def add_input(
        self,
        name: str,
        meta: Meta,
        kind: InputKind = InputKind.USER_INPUT,
        target: str | None = None,
        data: Any = None,
    ) -> Value:
        if name in self._used:
            raise ValueError(f"value name %{name} is already used")
        self._used.add(name)
        value = Value(name, meta)
        self.inputs.append(GraphInput(value, kind, target, data))
        return value

    def append(self, node: Node) -> None:
        self.nodes.append(node)

    def new_value(self, meta: Meta, hint: str | None = None) -> Value:
        return Value(self.fresh_name(hint), meta)

    def finish(
        self,
        outputs: Sequence[Value | GraphOutput],
        *,
        name: str | None = None,
    ) -> Graph:
        graph_outputs = [
            o if isinstance(o, GraphOutput) else GraphOutput(o, OutputKind.USER_OUTPUT)
            for o in outputs
        ]
        return Graph(name or self.name, list(self.inputs), list(self.nodes), graph_outputs)


def current_builder() -> Builder:
    builder = _current.get()
    if builder is None:
        raise RuntimeError(
            "prims builders must be called inside a `with Builder():` block (or a lowering rule)"
        )
    return builder


def emit(prim: PrimDef, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """Bind arguments to the prim's schema, run its meta rule, append the node, and return the
    result value (or tuple of values for multi-result prims)."""
    builder = current_builder()
    bound = prim.schema.bind(args, kwargs, op=prim.qualified_name)
    if prim.meta is None:
        raise SchemaError(f"{prim.qualified_name} is not supported: {prim.omitted_reason}")
    try:
        metas = prim.meta(*bound)
    except (ShapeError, DTypeError) as error:
        raise type(error)(f"{prim.qualified_name}: {error}") from None
    operands = tuple([bound[i] for i in prim.operand_indices])
    attributes = {name: bound[i] for name, i in prim.attribute_positions}
    if type(metas) is tuple:
        results = tuple(builder.new_value(m) for m in metas)
    else:
        results = (builder.new_value(metas),)
    builder.append(Node(prim.qualified_name, operands, attributes, results, builder.provenance))
    return results if type(metas) is tuple else results[0]


def make_builder(prim: PrimDef):
    """The user-facing function `prims.<name>(...)` for one prim."""

    def build(*args: Any, **kwargs: Any) -> Any:
        return emit(prim, args, kwargs)

    build.__name__ = prim.name
    build.__qualname__ = prim.name
    build.__doc__ = f"prims.{prim.schema.text}\n\n{prim.doc}".rstrip()
    return build


__all__ = ["Builder", "ScalarMeta", "TensorMeta", "current_builder", "emit", "make_builder"]
