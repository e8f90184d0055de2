"""Common subexpression elimination: a node with the same op, the same operands (the same values,
literals equal as `literal_equal` says: 1, 1.0 and True differ, -0.0 differs from 0.0) and the
same attributes as an earlier node is replaced by that node's results. Random prims are never
merged: two draws are two draws."""

from __future__ import annotations

from typing import Any

from prims.registry import lookup

from ..ir.graph import Graph, GraphOutput, Node
from ..ir.values import Value, map_values


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """A graph without repeated computations (the same graph object when there are none)."""
    seen: dict[Any, Node] = {}
    replaced: dict[Value, Value] = {}
    nodes: list[Node] = []
    for node in graph.nodes:
        if replaced and any(value in replaced for value in node.operand_values()):
            node = _remapped(node, replaced)
        key = _key(node)
        if key is not None:
            earlier = seen.get(key)
            if earlier is not None:
                replaced.update(zip(node.results, earlier.results))
                continue
            seen[key] = node
        nodes.append(node)
    if not replaced:
        return graph
    outputs = [GraphOutput(replaced.get(o.value, o.value), o.kind, o.target) for o in graph.outputs]
    return graph.with_body(list(graph.inputs), nodes, outputs, replaced)


def _key(node: Node) -> Any:
    """What makes two nodes compute the same results, or None for nodes never merged."""
    if not node.results:
        return None
    definition = lookup(node.op)
    if definition is None or definition.random:
        return None  # aten ops may be random or impure; only prims are known to be pure
    metas = tuple(result.meta for result in node.results)
    return (
        node.op,
        tuple(_operand_key(a) for a in node.args),
        tuple((k, _operand_key(v)) for k, v in node.kwargs.items()),
        metas,
    )


def _operand_key(operand: Any) -> Any:
    if type(operand) is Value:
        return ("value", id(operand))
    if type(operand) is tuple:
        return ("tuple", tuple(_operand_key(item) for item in operand))
    if type(operand) is list:
        return ("list", tuple(_operand_key(item) for item in operand))
    # repr tells 1 from 1.0 from True (with the type), -0.0 from 0.0, and makes nan equal nan.
    return (type(operand).__name__, repr(operand))


def _remapped(node: Node, replaced: dict[Value, Value]) -> Node:
    def remap(operand: Any) -> Any:
        return map_values(operand, lambda v: replaced.get(v, v))

    args = tuple(remap(a) for a in node.args)
    kwargs = {name: remap(a) for name, a in node.kwargs.items()}
    return Node(node.op, args, kwargs, node.results, node.provenance)
