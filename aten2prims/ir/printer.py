"""The printed text form of a graph (grammar in docs/ir.md). `parse(format_graph(g))` rebuilds g
exactly: literal kinds (1, 1.0, True), names, metas, roles and provenance all survive."""

from __future__ import annotations

import json
import math
from typing import Any

from .dtypes import DType
from .graph import (
    Graph,
    GraphInput,
    GraphOutput,
    InputKind,
    Node,
    OutputKind,
    Provenance,
    install_text_form,
)
from .symbolic import Symbol, SymBool, SymExpr, SymFloat, format_expr
from .values import Device, Layout, MemoryFormat, Meta, Value

# Headers longer than this put one input per line.
_HEADER_WIDTH = 100


def format_meta(meta: Meta) -> str:
    return str(meta)


def format_float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(x)


def format_operand(x: Any) -> str:
    kind = type(x)
    if kind is Value:
        return f"%{x.name}"
    if x is None or kind is bool or kind is int:
        return repr(x)
    if kind is float:
        return format_float(x)
    if kind is complex:
        return f"complex({format_float(x.real)}, {format_float(x.imag)})"
    if kind is str:
        return json.dumps(x)
    if kind is DType:
        return x.short
    if kind is Layout or kind is MemoryFormat:
        return x.value
    if kind is Device:
        return f"device({json.dumps(x.name)})"
    if kind is tuple:
        return "[" + ", ".join(format_operand(item) for item in x) + "]"
    if kind is SymExpr or kind is SymBool or kind is SymFloat:
        return f"sym({format_expr(x)})"
    if kind is Graph:  # a nested graph, printed whole beneath its node
        return f"@{x.name}"
    raise TypeError(f"cannot print operand {x!r} of type {kind.__name__}")


def format_provenance(provenance: Provenance) -> str:
    parts = []
    if provenance.origin_op is not None:
        parts.append(provenance.origin_op)
    if provenance.origin is not None:
        parts.append(f"%{provenance.origin}")
    if provenance.source is not None:
        parts.append(f"at {json.dumps(provenance.source)}")
    return "# " + " ".join(parts) if parts else ""


def format_node(node: Node) -> str:
    operands = [format_operand(a) for a in node.args]
    operands += [f"{name}={format_operand(a)}" for name, a in node.kwargs.items()]
    call = f"{node.op}({', '.join(operands)})"
    if node.results:
        results = ", ".join(f"%{r.name}: {format_meta(r.meta)}" for r in node.results)
        call = f"{results} = {call}"
    comment = format_provenance(node.provenance)
    return f"{call}  {comment}" if comment else call


def _format_role(
    kind: InputKind | OutputKind, target: str | None, default: InputKind | OutputKind
) -> str:
    """` parameter "fc.weight"`; nothing for a user input/output without a target."""
    if kind is default and target is None:
        return ""
    return f" {kind.value}" + (f" {json.dumps(target)}" if target is not None else "")


def _format_input(graph_input: GraphInput) -> str:
    role = _format_role(graph_input.kind, graph_input.target, InputKind.USER_INPUT)
    return f"%{graph_input.name}: {format_meta(graph_input.value.meta)}{role}"


def _format_output(graph_output: GraphOutput) -> str:
    return f"%{graph_output.value.name}{_format_role(graph_output.kind, graph_output.target, OutputKind.USER_OUTPUT)}"


def format_header(graph: Graph) -> str:
    inputs = [_format_input(i) for i in graph.inputs]
    result_types = ", ".join(format_meta(o.value.meta) for o in graph.outputs)
    one_line = f"graph {graph.name}({', '.join(inputs)}) -> ({result_types}):"
    if len(one_line) <= _HEADER_WIDTH:
        return one_line
    body = "".join(f"    {text},\n" for text in inputs)
    return f"graph {graph.name}(\n{body}) -> ({result_types}):"


def format_return(graph: Graph) -> str:
    return f"return ({', '.join(_format_output(o) for o in graph.outputs)})"


def _format_bound(bound: int | float) -> str:
    return str(bound) if type(bound) is int else ("inf" if bound > 0 else "-inf")


def format_symbol(declared: Symbol) -> str:
    """`symbol s0 in [2, 64] example 8`; `unbacked` for a symbol a data-dependent node binds;
    `from %v` names the scalar it is (an int user input's, or a data-dependent one's)."""
    text = f"symbol {declared.name} in [{_format_bound(declared.lower)}, {_format_bound(declared.upper)}]"
    if declared.example is not None:
        text += f" example {declared.example}"
    if not declared.backed:
        text += " unbacked"
    return text + (f" from %{declared.value}" if declared.value else "")


def format_graph(graph: Graph, *, nested: bool = False) -> str:
    lines = [format_symbol(declared) for declared in graph.symbols.values()]
    lines += [f"check {format_expr(check)}" for check in graph.checks]
    lines.append(format_header(graph))
    if nested:
        lines += _nested_body(graph)
    else:
        for node in graph.nodes:
            lines.append(f"  {format_node(node)}")
            lines += _subgraph_lines(node, "    ")
    lines.append(f"  {format_return(graph)}")
    return "\n".join(lines) + "\n"


def _subgraph_lines(node: Node, indent: str) -> list[str]:
    """The nested graphs of a node (a higher-order op's branches or bodies), each printed whole
    beneath it, indented: header, nodes (with their own nested graphs), return. A nested graph
    declares no symbols: its sizes use the enclosing graph's."""
    lines: list[str] = []
    for subgraph in node.subgraphs():
        lines += [indent + line for line in format_header(subgraph).split("\n")]
        for inner in subgraph.nodes:
            lines.append(f"{indent}  {format_node(inner)}")
            lines += _subgraph_lines(inner, indent + "    ")
        lines.append(f"{indent}  {format_return(subgraph)}")
    return lines


def _nested_body(graph: Graph) -> list[str]:
    """Display-only view: every run of nodes lowered from the same aten node is indented beneath
    a line naming it (as Thunder prints traces)."""
    lines: list[str] = []
    current: tuple[str | None, str | None] | None = None
    for node in graph.nodes:
        origin = (node.provenance.origin_op, node.provenance.origin)
        if origin == (None, None):
            current = None
            lines.append(f"  {format_node(node)}")
            lines += _subgraph_lines(node, "    ")
            continue
        if origin != current:
            current = origin
            source = node.provenance.source
            where = f"  # at {json.dumps(source)}" if source is not None else ""
            origin_op, origin_name = origin
            parts = [origin_op] if origin_op is not None else []
            if origin_name is not None:
                parts.append(f"%{origin_name}")
            lines.append(f"  {' -> '.join(parts)}{where}")
        bare = Node(node.op, node.args, node.kwargs, node.results)
        lines.append(f"    {format_node(bare)}")
        lines += _subgraph_lines(node, "      ")
    return lines


def format_nested(aten_graph: Graph, lowered: Graph) -> str:
    """Display-only view of a lowering: every node of the input graph (its full printed line),
    with the nodes of `lowered` that came from it indented beneath it.

    A lowered node belongs to the input node whose first result its provenance names (`origin`);
    a node the lowering kept as it was (a prim of the input graph, or an op left unlowered)
    belongs to the input node with the same op and first result name."""
    owner_of: dict[str, Node] = {
        node.results[0].name: node for node in aten_graph.nodes if node.results
    }
    children: dict[int, list[Node]] = {id(node): [] for node in aten_graph.nodes}
    strays: list[Node] = []
    for node in lowered.nodes:
        owner: Node | None
        same = owner_of.get(node.results[0].name) if node.results else None
        if same is not None and same.op == node.op:
            owner = same
        elif node.provenance.origin_op is not None and node.provenance.origin is not None:
            owner = owner_of.get(node.provenance.origin)
        else:
            owner = None
        if owner is None:
            strays.append(node)
        else:
            children[id(owner)].append(node)

    # Values the outputs depend on: a node with none of them among its results was dropped as dead.
    live = {graph_output.value for graph_output in aten_graph.outputs}
    for node in reversed(aten_graph.nodes):
        if any(result in live for result in node.results):
            live.update(node.operand_values())
    lines = [format_header(lowered)]
    for node in aten_graph.nodes:
        lines.append(f"  {format_node(node)}")
        beneath = children[id(node)]
        if len(beneath) == 1 and beneath[0].op == node.op and any(beneath[0].subgraphs()):
            lines += _subgraph_lines(beneath[0], "    ")  # control flow: its lowered graphs
            continue
        if len(beneath) == 1 and beneath[0].op == node.op:
            if (
                node.namespace != "prims"
            ):  # a prim of the input graph kept as it was: nothing to say
                lines.append("    # kept as it is")
            continue
        for child in beneath:
            lines.append(f"    {_format_bare(child)}")
        if not beneath:
            dead = not any(result in live for result in node.results)
            why = "its results are unused" if dead else "its results are existing values, unchanged"
            lines.append(f"    # no prims: {why}")
    if strays:
        lines.append("  # not from a node of the input graph:")
        lines += [f"    {format_node(node)}" for node in strays]
    lines.append(f"  {format_return(lowered)}")
    return "\n".join(lines) + "\n"


def _format_bare(node: Node) -> str:
    """A node's line without its provenance: beneath its aten node, the provenance is the parent."""
    return format_node(Node(node.op, node.args, node.kwargs, node.results))


install_text_form(format_node, format_graph)
