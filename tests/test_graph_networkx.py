"""`Graph.to_networkx()`: a view whose topological order agrees with the node list and whose
edges are exactly the operand uses."""

from __future__ import annotations

from collections import Counter

import networkx as nx
from hypothesis import given
from test_ir_text import graphs  # the random graphs of the text round-trip test

import prims
from aten2prims.ir import DType, Graph, GraphOutput, Node, OutputKind, TensorMeta, Value
from prims import Builder


def order_of(graph: Graph) -> list[object]:
    return [*graph.inputs, *graph.nodes, "output"]


def expected_edges(graph: Graph) -> Counter[tuple[int, int, str]]:
    """(producer position, consumer position, value name) for every operand use and output."""
    position = {id(vertex): i for i, vertex in enumerate(order_of(graph))}
    definer = {id(i.value): position[id(i)] for i in graph.inputs}
    edges: Counter[tuple[int, int, str]] = Counter()
    for node in graph.nodes:
        for operand in node.operand_values():
            edges[(definer[id(operand)], position[id(node)], operand.name)] += 1
        for result in node.results:
            definer[id(result)] = position[id(node)]
    for output in graph.outputs:
        edges[(definer[id(output.value)], len(position) - 1, output.value.name)] += 1
    return edges


def check_view(graph: Graph) -> None:
    view = graph.to_networkx()
    order = order_of(graph)
    position = {id(vertex): i for i, vertex in enumerate(order)}
    assert view.number_of_nodes() == len(order)
    assert [view.nodes[v]["kind"] for v in order] == ["input"] * len(graph.inputs) + ["node"] * len(
        graph.nodes
    ) + ["output"]
    # Edges are operand uses: one per use, from the value's definer, carrying the value.
    edges = Counter(
        (position[id(u)], position[id(v)], data["value"].name)
        for u, v, data in view.edges(data=True)
    )
    assert edges == expected_edges(graph)
    for u, _, data in view.edges(data=True):
        carried = data["value"]
        assert carried is (
            u.value if u in graph.inputs else next(r for r in u.results if r is carried)
        )
    # The node list is a topological order of the view, and the view's own order can reproduce it.
    assert nx.is_directed_acyclic_graph(view)
    assert all(position[id(u)] < position[id(v)] for u, v in view.edges())
    assert list(nx.lexicographical_topological_sort(view, key=lambda v: position[id(v)])) == order


def test_view_of_a_built_graph() -> None:
    with Builder("g") as b:
        x = b.add_input("x", TensorMeta((2, 3), DType.float32))
        w = b.add_input("w", TensorMeta((3,), DType.float32))
        y = prims.add(x, x)  # two uses of %x: two edges
        z = prims.mul(y, prims.broadcast_in_dim(w, [2, 3], [1]))
        unused = prims.neg(x)
        graph = b.finish([z, GraphOutput(y, OutputKind.BUFFER_MUTATION, "buf")])
    graph.nodes.append(
        Node(
            "aten.cat.default",
            ((z, y, z),),
            {"dim": 0},
            (Value("c", TensorMeta((6, 3), DType.float32)),),
        )
    )
    check_view(graph)
    view = graph.to_networkx()
    add, broadcast, mul, neg, cat = graph.nodes
    assert view.number_of_edges(graph.inputs[0], add) == 2
    assert view.number_of_edges(mul, cat) == 2 and view.number_of_edges(add, cat) == 1
    assert set(view.predecessors("output")) == {mul, add}
    # Reachability answers questions such as "what does the output depend on".
    assert neg not in nx.ancestors(view, "output") and unused.name == neg.results[0].name
    assert nx.ancestors(view, "output") == {*graph.inputs, add, broadcast, mul}
    assert nx.immediate_dominators(view, graph.inputs[1])[mul] is broadcast


@given(graphs())
def test_view_of_random_graphs(graph: Graph) -> None:
    check_view(graph)
