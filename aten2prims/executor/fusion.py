"""Plan-time fusion: rules that recognize a group of prims nodes and run it as one kernel call
(e.g. broadcast + mul + sum as one BLAS-backed contraction), so the group's internal values are
never materialized. The graph itself is untouched: fusion is an executor decision.

A rule is `rule(context, index) -> FusedGroup | None`, tried at every unclaimed node. A group
may also claim nodes after `index` (e.g. an epilogue following a contraction); its step runs at
its last node, the anchor. A group's only live result is its anchor node's results; every other
node of the group must have all its users inside the group and must not be a graph output
(`FusionContext.internal` checks this).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from ..ir.graph import Graph, Node
from ..ir.values import Value

if TYPE_CHECKING:
    from .plan import Slots, Step


@attrs.define(slots=True)
class FusionContext:
    graph: Graph
    producer: dict[Value, int]  # value -> index of the node defining it
    users: dict[Value, list[int]]  # value -> indices of nodes reading it
    outputs: frozenset[Value]
    claimed: set[int]

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


FusionRule = Callable[[FusionContext, int], "FusedGroup | None"]
FUSION_RULES: list[FusionRule] = []


def register_fusion(rule: FusionRule) -> FusionRule:
    FUSION_RULES.append(rule)
    return rule


def fuse(graph: Graph, slots: Slots) -> list[Step]:
    from .plan import Step, node_step

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
        graph, producer, users, frozenset(o.value for o in graph.outputs), set()
    )
    groups: dict[int, FusedGroup] = {}
    if FUSION_RULES:
        for index in range(len(graph.nodes)):
            if index in context.claimed:
                continue
            for rule in FUSION_RULES:
                group = rule(context, index)
                if group is not None:
                    context.claimed.update(group.node_indices)
                    groups[group.node_indices[-1]] = group  # the step runs at the group's last node
                    break
    steps: list[Step] = []
    for index, node in enumerate(graph.nodes):
        group = groups.get(index)
        if group is not None:
            arguments = slots.arguments(group.operands)
            out_slots = tuple(slots.assign(result) for result in node.results)
            members = tuple(graph.nodes[i] for i in group.node_indices)
            kind = "fresh" if getattr(group.kernel, "fresh_result", False) else "view"
            steps.append(
                Step(
                    members,
                    group.kernel,
                    arguments,
                    out_slots,
                    tuple(r.meta for r in node.results),
                    result_kind=kind,
                )
            )
        elif index not in context.claimed:
            steps.append(node_step(node, slots))
    return steps
