"""Plan-time fusion: rules that recognize a group of prims nodes and run it as one kernel call
(e.g. broadcast + mul + sum as one BLAS-backed contraction), so the group's internal values are
never materialized. The graph itself is untouched: fusion is an executor decision.

A rule is `rule(context, index) -> FusedGroup | None`, tried at every unclaimed node; the plan
(`plan.FUSION_RULES`) lists the rules in the order they are tried. A group may also claim nodes
after `index` (e.g. an epilogue following a contraction); its step runs at its last node, the
anchor. A group's only live result is its anchor node's results; every other
node of the group must have all its users inside the group and must not be a graph output
(`FusionContext.internal` checks this).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..ir.graph import Graph, Node
from ..ir.values import Value


@attrs.define(slots=True)
class FusionContext:
    graph: Graph
    producer: dict[Value, int]  # value -> index of the node defining it
    users: dict[Value, list[int]]  # value -> indices of nodes reading it
    outputs: frozenset[Value]
    claimed: set[int]
    # The data of the graph's inputs that every run of the plan starts from (stored data the
    # caller does not override, folded constants): rules may rely on its values.
    constants: dict[Value, Any] = attrs.Factory(dict)

    def node(self, index: int) -> Node:
        return self.graph.nodes[index]

    def defining_node(self, value: Any) -> tuple[int, Node] | None:
        """The unclaimed node defining `value`, if it is a node result."""
        if type(value) is not Value:
            return None
        index = self.producer.get(value)
        if index is None or index in self.claimed:
            return None
        return index, self.graph.nodes[index]

    def internal(self, index: int, group: set[int]) -> bool:
        """True when node `index`'s results are read only by nodes of `group`."""
        for result in self.graph.nodes[index].results:
            if result in self.outputs:
                return False
            if any(user not in group for user in self.users.get(result, ())):
                return False
        return True


@attrs.define(slots=True)
class FusedGroup:
    """Nodes (indices, the anchor last) and a kernel taking the group's external operands
    (`operands`, values or literals) in order and returning the anchor's results."""

    node_indices: tuple[int, ...]
    operands: tuple[Any, ...]
    kernel: Callable[..., Any]
    # The kernel returns one new array, never a view (buffer reuse, inplace.py, may write into it).
    fresh_result: bool = False
    # The kernel also takes `out=` (Step.takes_out).
    takes_out: bool = False
    # The kernel is a plain elementwise NumPy function of its operands (Step.elementwise): the
    # threads may run it in parts or in a segment of row-wise steps.
    elementwise: bool = False
    # The operands an elementwise kernel that is not a ufunc may be given as `out=`
    # (Step.out_operands).
    out_operands: tuple[int, ...] = ()


FusionRule = Callable[[FusionContext, int], "FusedGroup | None"]


def find_groups(
    graph: Graph, rules: Sequence[FusionRule], overridden: frozenset[str] = frozenset()
) -> dict[int, FusedGroup]:
    """The fused groups of `graph`, by the index of the node their step runs at (the group's last
    node). At every node not yet claimed, the rules are tried in order and the first group found
    claims its nodes. `overridden` names the inputs whose stored data the caller replaces."""
    producer: dict[Value, int] = {}
    users: dict[Value, list[int]] = {}
    for index, node in enumerate(graph.nodes):
        for value in node.operand_values():
            readers = users.setdefault(value, [])
            if not readers or readers[-1] != index:
                readers.append(index)
        for result in node.results:
            producer[result] = index
    context = FusionContext(
        graph,
        producer,
        users,
        frozenset(o.value for o in graph.outputs),
        set(),
        {
            gi.value: gi.data
            for gi in graph.inputs
            if gi.data is not None and gi.name not in overridden
        },
    )
    groups: dict[int, FusedGroup] = {}
    if not rules:
        return groups
    for index in range(len(graph.nodes)):
        if index in context.claimed:
            continue
        for rule in rules:
            group = rule(context, index)
            if group is not None:
                context.claimed.update(group.node_indices)
                groups[group.node_indices[-1]] = group
                break
    return groups
