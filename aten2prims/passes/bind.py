"""Binding a dynamic graph's symbols to sizes: `bind_symbols(graph, shapes)` reads each backed
symbol's value from the input shapes, checks every range and run-time check, and
`specialize(graph, binding)` substitutes the binding into a static graph (the executor plans
that one, once per binding).

A violation is a ShapeError naming the symbol, its range (or the failed check) and the input
the value came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ShapeError
from ..ir.graph import Graph, GraphInput, GraphOutput, Node
from ..ir.layout import is_contiguous
from ..ir.symbolic import (
    SymExpr,
    bare_symbol,
    evaluate,
    free_symbols,
    linear_unknown,
    solve_linear,
    substitute,
    symbol,
)
from ..ir.values import TensorMeta, Value, map_values


def _bound_text(bound: int | float) -> str:
    return str(bound) if type(bound) is int else "inf"


def bind_symbols(
    graph: Graph, shapes: Mapping[str, tuple[int, ...]], scalars: Mapping[str, int] | None = None
) -> dict[str, int]:
    """The value of every backed symbol, read from the shapes of the inputs given (by input
    name) and from the int user inputs that are symbols (`scalars`, by input name), with every
    range, every size expression and every run-time check of the graph checked. Unbacked
    symbols are not bound here."""
    binding: dict[str, int] = {}
    origin: dict[str, str] = {}
    given = scalars or {}
    for symbol_name, symbol_declared in graph.symbols.items():
        source = symbol_declared.value
        if symbol_declared.backed and source is not None and source in given:
            binding[symbol_name] = int(given[source])
            origin[symbol_name] = f"int input %{source} of graph {graph.name}"
    pending: list[tuple[str, int, Any, int]] = []
    for graph_input in graph.inputs:
        meta = graph_input.value.meta
        shape = shapes.get(graph_input.name)
        if type(meta) is not TensorMeta or shape is None:
            continue
        what = f"input %{graph_input.name} of graph {graph.name}"
        if len(shape) != len(meta.shape):
            raise ShapeError(
                f"{what} must have {len(meta.shape)} dimension(s) ({meta}), got shape {list(shape)}"
            )
        for dim, (size, actual) in enumerate(zip(meta.shape, shape)):
            if type(size) is int:
                if size != actual:
                    raise ShapeError(
                        f"{what} must have size {size} at dimension {dim} ({meta}), got shape "
                        f"{list(shape)}"
                    )
                continue
            name = bare_symbol(size)
            if name is not None and name not in binding:
                binding[name] = int(actual)
                origin[name] = f"{what}, dimension {dim} (shape {list(shape)})"
            else:
                pending.append((graph_input.name, dim, size, int(actual)))
    _solve_linear_sizes(pending, binding, origin, graph)
    for name, value in binding.items():
        declared = graph.symbols.get(name)
        if declared is None:
            continue
        if not declared.lower <= value <= declared.upper:
            raise ShapeError(
                f"symbol {name} = {value} is outside its range [{_bound_text(declared.lower)}, "
                f"{_bound_text(declared.upper)}]: from {origin[name]}"
            )
    for input_name, dim, size, actual in pending:
        missing = free_symbols(size) - binding.keys()
        if missing:
            raise ShapeError(
                f"input %{input_name} of graph {graph.name}: size {size} at dimension {dim} uses "
                f"symbol(s) {', '.join(sorted(missing))} that no input dimension binds alone"
            )
        expected = evaluate(size, binding)
        if expected != actual:
            raise ShapeError(
                f"input %{input_name} of graph {graph.name} must have size {size} = {expected} at "
                f"dimension {dim} ({_describe(binding)}), got {actual}"
            )
    unbound = {name for name, declared in graph.symbols.items() if declared.backed} - binding.keys()
    if unbound:
        raise ShapeError(
            f"graph {graph.name}: no input binds symbol(s) {', '.join(sorted(unbound))}"
        )
    for check in graph.checks:
        if free_symbols(check) <= binding.keys() and not evaluate(check, binding):
            raise ShapeError(
                f"graph {graph.name} was lowered assuming {check}, which fails for "
                f"{_describe(binding, free_symbols(check))}: lower it again for these sizes"
            )
    return binding


def _solve_linear_sizes(
    pending: list[tuple[str, int, Any, int]],
    binding: dict[str, int],
    origin: dict[str, str],
    graph: Graph,
) -> None:
    """Bind the symbols that only appear in input sizes of the form a·s + b (torch.export's
    derived dims, `2 * Dim("h")`), repeated while one solution lets another size be solved."""
    progress = True
    while progress:
        progress = False
        for input_name, dim, size, actual in pending:
            name = linear_unknown(size, binding)
            if name is None:
                continue
            value = solve_linear(size, name, actual, binding)
            what = f"input %{input_name} of graph {graph.name}"
            if value is None:
                raise ShapeError(
                    f"{what} must have size {size} at dimension {dim} for a whole {name} "
                    f"({_describe(binding)}), got {actual}"
                )
            binding[name] = value
            origin[name] = f"{what}, dimension {dim} = {size} (size {actual})"
            progress = True


def _describe(binding: Mapping[str, int | SymExpr], names: Any = None) -> str:
    shown = sorted(binding if names is None else names)
    return ", ".join(f"{name} = {binding[name]}" for name in shown)


def specialize(graph: Graph, binding: Mapping[str, int | SymExpr]) -> Graph:
    """A static copy of the graph with every bound symbol replaced by its value (symbols left
    unbound that the graph still uses stay, with their declarations). A value may also be an
    expression of other symbols (the lowering's identification of a fresh unbacked size with
    its rule's expression). Input data is shared, never copied."""
    lookup = binding.__getitem__

    def resolve(name: str) -> Any:
        return lookup(name) if name in binding else symbol(name)

    values: dict[Value, Value] = {}

    def new_value(value: Value) -> Value:
        meta = value.meta
        if type(meta) is TensorMeta:
            shape = substitute(meta.shape, resolve)
            if meta.is_contiguous_layout:
                meta = TensorMeta(shape, meta.dtype)
            else:
                strides = substitute(meta.strides, resolve)
                offset = substitute(meta.storage_offset, resolve)
                # A dim that became 1 makes its stride meaningless: contiguous on every other
                # dim is contiguous, as the frontends record it.
                meta = (
                    TensorMeta(shape, meta.dtype, storage_offset=offset)
                    if all(type(x) is int for x in (*shape, *strides))
                    and is_contiguous(shape, strides)
                    else TensorMeta(shape, meta.dtype, strides, offset)
                )
        values[value] = Value(value.name, meta)
        return values[value]

    def operand(x: Any) -> Any:
        if type(x) is Graph:  # a nested graph: its sizes use this graph's symbols
            return specialize(x, binding)
        return substitute(map_values(x, values.__getitem__), resolve)

    inputs = [GraphInput(new_value(i.value), i.kind, i.target, i.data) for i in graph.inputs]
    nodes = []
    for node in graph.nodes:
        args = tuple(operand(a) for a in node.args)
        kwargs = {name: operand(a) for name, a in node.kwargs.items()}
        results = tuple(new_value(r) for r in node.results)
        nodes.append(Node(node.op, args, kwargs, results, node.provenance))
    outputs = [GraphOutput(values[o.value], o.kind, o.target) for o in graph.outputs]
    checks = []
    for check in graph.checks:  # a check that fails for this binding is never dropped
        value = substitute(check, resolve)
        if value is False:
            raise ShapeError(
                f"graph {graph.name} was lowered assuming {check}, which fails for "
                f"{_describe(binding, free_symbols(check) & binding.keys())}"
            )
        if value is not True:
            checks.append(value)
    used = free_symbols(
        (
            [getattr(i.value.meta, "shape", ()) for i in inputs],
            [(n.args, tuple(n.kwargs.values())) for n in nodes],
        )
    ) | free_symbols(checks)
    used |= {
        name
        for node in nodes
        for result in node.results
        for name in free_symbols(getattr(result.meta, "shape", ()))
    }
    # A symbol read from a scalar a node computes stays even if nothing uses it: binding it
    # checks its range (`torch._check(k <= 5)` on `k = n.item()` alone).
    computed = {result.name for node in nodes for result in node.results}
    symbols = {
        n: s
        for n, s in graph.symbols.items()
        if n not in binding and (n in used or s.value in computed)
    }
    return Graph(graph.name, inputs, nodes, outputs, symbols, checks)


def first_unbound(graph: Graph) -> int | None:
    """The index of the first node whose operands or results use a symbol the graph still
    declares (a data-dependent size not yet bound), or None."""
    for index, node in enumerate(graph.nodes):
        shapes = tuple(getattr(r.meta, "shape", ()) for r in node.results)
        if free_symbols((node.args, tuple(node.kwargs.values()), shapes)) & graph.symbols.keys():
            return index
    return None


def split_before(graph: Graph, index: int) -> tuple[Graph, Graph]:
    """(prefix, rest): the prefix runs nodes[:index] and returns, as user outputs, every value
    it defines that the rest reads (in definition order); the rest takes those as user inputs
    after the graph's own inputs and runs nodes[index:] to the graph's outputs."""
    later = {v for node in graph.nodes[index:] for v in node.operand_values()}
    later |= {o.value for o in graph.outputs}
    sources = {s.value for s in graph.symbols.values() if s.value is not None}
    later |= {r for node in graph.nodes[:index] for r in node.results if r.name in sources}
    carried = [r for node in graph.nodes[:index] for r in node.results if r in later]
    prefix = graph.with_body(
        list(graph.inputs), graph.nodes[:index], [GraphOutput(v) for v in carried]
    )
    # The prefix uses none of the symbols still declared: its sizes are all bound.
    prefix.symbols = {}
    prefix.checks = [c for c in graph.checks if not free_symbols(c) & graph.symbols.keys()]
    rest = graph.with_body(
        [*graph.inputs, *(GraphInput(v) for v in carried)],
        graph.nodes[index:],
        list(graph.outputs),
    )
    return prefix, rest
