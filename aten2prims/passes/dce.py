"""Dead code elimination: drop nodes none of whose results is used or returned. Prims are pure
in a functional graph (random prims included: an unused draw changes nothing observable).

A node a symbol is declared read from (`Symbol.value`: the scalar of `x.item()`, the
`prims.nonzero` whose count it is) is live however its results are read: the sizes and
operands that hold the symbol read it (`torch.zeros(torch.nonzero(m).shape[0])` reads the
nonzero through its count alone), and binding the symbol checks its range and the graph's
checks on it, which torch's program asserts too (`torch._check(k <= 5)` on `k = n.item()` is
u0's range [0, 5] even when nothing else reads k)."""

from __future__ import annotations

from ..ir.graph import Graph
from ..ir.values import Value


def eliminate_dead_code(graph: Graph) -> Graph:
    """A graph without dead nodes (the same graph object when nothing is dead)."""
    live: set[Value] = {graph_output.value for graph_output in graph.outputs}
    sources = {s.value for s in graph.symbols.values() if s.value is not None}
    if sources:
        live |= {r for node in graph.nodes for r in node.results if r.name in sources}
    keep: list[bool] = [False] * len(graph.nodes)
    for index in range(len(graph.nodes) - 1, -1, -1):
        node = graph.nodes[index]
        if not node.results or any(result in live for result in node.results):
            keep[index] = True
            live.update(node.operand_values())
    if all(keep):
        return graph
    nodes = [node for node, kept in zip(graph.nodes, keep) if kept]
    return graph.with_body(list(graph.inputs), nodes, list(graph.outputs))
