"""Execution plans: a prims graph compiled once into a flat list of steps (DESIGN §7).

Each step calls one kernel with its arguments in schema order: literal attributes are folded into
a template at plan time, values are fetched from numbered slots at run time. The plan records
the last use of every slot so intermediates are released as soon as possible. Fusion rules
(`fusion.py`) may replace a group of nodes by one step that computes the group's live results
without materializing its internal values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

import prims as prims_package  # noqa: F401 - registers every prim
from prims.registry import PRIMS

from ..errors import ExecutionError
from ..ir.graph import Graph, Node
from ..ir.values import Value


@attrs.define(slots=True)
class Step:
    """One kernel call. `template` holds every argument in schema order, literals in place;
    `fetch` lists (position, slot) pairs to fill from the slots; `fetch_nested` lists
    (position, structure) for tuple operands holding values (e.g. the tensors of prims.cat)."""

    nodes: tuple[Node, ...]
    kernel: Callable[..., Any]
    template: list[Any]
    fetch: tuple[tuple[int, int], ...]
    fetch_nested: tuple[tuple[int, Any], ...]
    out_slots: tuple[int, ...]
    free_after: tuple[int, ...] = ()
    random: bool = False
    # The metas the step's outputs must have (checked when execute(check=True)).
    out_metas: tuple[Any, ...] = ()

    @property
    def node(self) -> Node:
        """The node that names this step in errors (the last one of a fused group)."""
        return self.nodes[-1]


@attrs.define(slots=True)
class Plan:
    graph_fingerprint: tuple[int, ...]
    slot_of: dict[Value, int]
    input_slots: dict[str, int]
    steps: list[Step]
    output_slots: tuple[int, ...]
    slot_count: int


class _Slots:
    def __init__(self) -> None:
        self.slot_of: dict[Value, int] = {}

    def assign(self, value: Value) -> int:
        slot = len(self.slot_of)
        self.slot_of[value] = slot
        return slot

    def __getitem__(self, value: Value) -> int:
        return self.slot_of[value]


def fingerprint(graph: Graph) -> tuple[int, ...]:
    return (id(graph.nodes), len(graph.nodes), *map(id, graph.nodes), len(graph.inputs), len(graph.outputs))


def node_step(node: Node, slots: _Slots) -> Step:
    """A step that runs one prim node's kernel."""
    if node.namespace != "prims":
        raise ExecutionError(f"{node.op} is not a prim; lower the graph before executing it")
    definition = PRIMS.get(node.op[len("prims.") :])
    if definition is None or definition.kernel is None:
        reason = definition.omitted_reason if definition is not None else "unknown prim"
        raise ExecutionError(f"{node.op} cannot be executed: {reason}")
    arguments = definition.schema.arguments
    template: list[Any] = [None] * len(arguments)
    operand_iter = iter(node.args)
    fetch: list[tuple[int, int]] = []
    nested: list[tuple[int, Any]] = []
    for position, argument in enumerate(arguments):
        if argument.type.is_tensor_like:
            operand = next(operand_iter)
        else:
            operand = node.kwargs[argument.name]
        if type(operand) is Value:
            fetch.append((position, slots[operand]))
        elif type(operand) is tuple and any(True for _ in _values_in(operand)):
            nested.append((position, _slot_structure(operand, slots)))
        else:
            template[position] = operand
    out_slots = tuple(slots.assign(result) for result in node.results)
    return Step(
        (node,),
        definition.kernel,
        template,
        tuple(fetch),
        tuple(nested),
        out_slots,
        random=definition.random,
        out_metas=tuple(r.meta for r in node.results),
    )


def _values_in(operand: Any):
    if type(operand) is Value:
        yield operand
    elif type(operand) is tuple:
        for item in operand:
            yield from _values_in(item)


class SlotRef(int):
    """A slot number inside a nested operand structure (tells slots from literal ints)."""


def _slot_structure(operand: Any, slots: _Slots) -> Any:
    if type(operand) is Value:
        return SlotRef(slots[operand])
    if type(operand) is tuple:
        return tuple(_slot_structure(item, slots) for item in operand)
    return operand


def resolve_structure(structure: Any, values: Sequence[Any]) -> Any:
    if type(structure) is SlotRef:
        return values[structure]
    if type(structure) is tuple:
        return tuple(resolve_structure(item, values) for item in structure)
    return structure


def build_plan(graph: Graph) -> Plan:
    from .fusion import fuse

    slots = _Slots()
    input_slots = {graph_input.name: slots.assign(graph_input.value) for graph_input in graph.inputs}
    steps = fuse(graph, slots)
    output_slots = tuple(slots[o.value] for o in graph.outputs)
    _assign_last_uses(steps, output_slots, len(slots.slot_of))
    return Plan(fingerprint(graph), slots.slot_of, input_slots, steps, output_slots, len(slots.slot_of))


def _step_reads(step: Step) -> list[int]:
    reads = [slot for _, slot in step.fetch]
    for _, structure in step.fetch_nested:
        reads.extend(int(s) for s in _slot_refs(structure))
    return reads


def _slot_refs(structure: Any):
    if type(structure) is SlotRef:
        yield structure
    elif type(structure) is tuple:
        for item in structure:
            yield from _slot_refs(item)


def _assign_last_uses(steps: list[Step], output_slots: tuple[int, ...], slot_count: int) -> None:
    """Release every slot right after the step that reads it last (never graph outputs). Results
    nobody reads are released right after the step that makes them."""
    last_use: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in _step_reads(step):
            last_use[slot] = index
        for slot in step.out_slots:
            last_use.setdefault(slot, index)
    keep = set(output_slots)
    frees: list[list[int]] = [[] for _ in steps]
    for slot, index in last_use.items():
        if slot not in keep:
            frees[index].append(slot)
    for step, free in zip(steps, frees):
        step.free_after = tuple(free)
