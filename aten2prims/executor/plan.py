"""Execution plans: a prims graph compiled once into a flat list of steps (DESIGN §7).

Planning, in order:
1. the graph passes (`aten2prims.passes.optimize`: canonicalization, CSE, DCE) on a copy;
2. constant folding (`folding.py`): nodes computed from stored parameters, buffers and constants
   alone are run once, at plan time (a plan is therefore specific to the set of data-carrying
   inputs the caller overrides);
3. fusion (`fusion.py`): groups of nodes run as one kernel call (contractions,
   `contraction.py`; gathers along independent axes, `gather.py`);
4. specialization (`specialize.py`): a kernel chosen for the node's static types where the
   generic one would re-derive at every call what the plan already knows, and broadcasts read
   only by elementwise steps left to NumPy's broadcasting;
5. the last use of every slot, so intermediates are released as soon as possible;
6. buffer reuse (`inplace.py`): elementwise results written into operands that die there;
7. code generation (`codegen.py`): the steps as one straight-line Python function.

`reference.py` runs a graph node by node with none of this: the oracle the tests compare with.

A step calls one kernel with positional `arguments`: `SlotRef`s (values fetched from numbered
slots at run time), tuples of them, or literals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

import prims as prims_package  # noqa: F401 - registers every prim
from prims.registry import lookup

from ..errors import ExecutionError
from ..ir.building import collector_paused
from ..ir.graph import Graph, GraphInput, GraphOutput, Node
from ..ir.values import Value


class SlotRef(int):
    """A slot number inside a step's arguments (tells slots from literal ints)."""


@attrs.define(slots=True)
class Step:
    """One kernel call: `kernel(*arguments)` with every SlotRef replaced by its slot's value
    (plus `rng=` for random prims); its results go to `out_slots`."""

    nodes: tuple[Node, ...]
    kernel: Callable[..., Any]
    arguments: tuple[Any, ...]
    out_slots: tuple[int, ...]
    # The metas the step's outputs must have (checked when execute(check=True)).
    out_metas: tuple[Any, ...] = ()
    free_after: tuple[int, ...] = ()
    random: bool = False
    # A broadcast left to NumPy's broadcasting (specialize.py) holds its operand with size-1
    # dims inserted rather than the full shape: that shape, checked instead of the meta's.
    relaxed_shape: tuple[int, ...] | None = None
    # What the results are memory-wise: specialize.Result's value ("fresh", "review", "view").
    result_kind: str = "view"
    # The kernel is a plain elementwise NumPy function of its arguments (specialize.py).
    elementwise: bool = False
    # The position of an argument whose array dies here and takes the result (`out=`,
    # inplace.py), or None.
    out_argument: int | None = None

    @property
    def node(self) -> Node:
        """The node that names this step in errors (the last one of a fused group)."""
        return self.nodes[-1]

    def reads(self) -> list[int]:
        """The slots this step reads, in argument order (with repeats)."""
        return [int(slot) for slot in slot_refs(self.arguments)]


@attrs.define(slots=True)
class Plan:
    # The inputs and outputs of the graph the steps run (optimized and folded: its inputs include
    # the folded constants). The plan keeps no Graph object: plans are cached per graph, weakly.
    inputs: tuple[GraphInput, ...]
    outputs: tuple[GraphOutput, ...]
    slot_of: dict[Value, int]
    input_slots: dict[str, int]
    steps: list[Step]
    output_slots: tuple[int, ...]
    # Per output: whether it is an input's slot (given or stored data: returned as a copy).
    output_is_input: tuple[bool, ...]
    slot_count: int
    # Slot values every run starts from: folded constants and stored input data (not
    # overridden); None elsewhere.
    initial_values: list[Any]
    # The straight-line function running the steps (codegen.py); run(values, rng).
    run: Callable[[list[Any], Any], None]
    random: bool = False
    # Bytes the plan keeps alive for its folded constants (not views of stored data).
    resident_bytes: int = 0
    # ids of the stored arrays (input data and folded constants) the plan starts from.
    stored_ids: frozenset[int] = frozenset()


class Slots:
    """Slot numbers of values."""

    def __init__(self) -> None:
        self.slot_of: dict[Value, int] = {}

    def assign(self, value: Value) -> int:
        slot = len(self.slot_of)
        self.slot_of[value] = slot
        return slot

    def __getitem__(self, value: Value) -> int:
        return self.slot_of[value]

    def arguments(self, operands: Sequence[Any]) -> tuple[Any, ...]:
        """Operands (values, tuples of them, literals) with every value replaced by its SlotRef."""
        return tuple(_slot_structure(operand, self) for operand in operands)


def node_step(node: Node, slots: Slots) -> Step:
    """A step that runs one prim node's kernel (specialized where specialize.py knows how)."""
    from .specialize import specialized

    if node.namespace != "prims":
        raise ExecutionError(f"{node.op} is not a prim; lower the graph before executing it")
    definition = lookup(node.op)
    if definition is None or definition.kernel is None:
        reason = definition.omitted_reason if definition is not None else "unknown prim"
        raise ExecutionError(f"{node.op} cannot be executed: {reason}")
    out_metas = tuple(r.meta for r in node.results)
    special = None if definition.random else specialized(node)
    result_kind = "view" if definition.view else "fresh"
    elementwise = False
    if special is not None:
        kernel, operands = special.kernel, special.operands
        result_kind, elementwise = special.result.value, special.elementwise
    else:
        kernel, operands = definition.kernel, definition.bind(node.args, node.kwargs)
    arguments = slots.arguments(operands)
    out_slots = tuple(slots.assign(result) for result in node.results)
    return Step((node,), kernel, arguments, out_slots, out_metas, random=definition.random, result_kind=result_kind,
                elementwise=elementwise)  # fmt: skip


def _slot_structure(operand: Any, slots: Slots) -> Any:
    if type(operand) is Value:
        return SlotRef(slots[operand])
    if type(operand) is tuple:
        return tuple(_slot_structure(item, slots) for item in operand)
    return operand


def slot_refs(structure: Any) -> Iterator[SlotRef]:
    """The SlotRefs inside a step argument (nested tuples included), in order."""
    if type(structure) is SlotRef:
        yield structure
    elif type(structure) is tuple:
        for item in structure:
            yield from slot_refs(item)


def resolve(structure: Any, values: Sequence[Any]) -> Any:
    """An argument structure with its SlotRefs replaced by the slots' values."""
    if type(structure) is SlotRef:
        return values[structure]
    if type(structure) is tuple:
        return tuple(resolve(item, values) for item in structure)
    return structure


def build_plan(graph: Graph, overridden: frozenset[str] = frozenset()) -> Plan:
    """The plan of a prims graph for callers overriding the stored data of the inputs named in
    `overridden` (every other input with data is read from the graph)."""
    with collector_paused():
        return _build_plan(graph, overridden)


def _build_plan(graph: Graph, overridden: frozenset[str]) -> Plan:
    from ..passes import optimize
    from .codegen import compile_steps
    from .folding import fold_constants
    from .fusion import fuse
    from .inplace import reuse_dying_operands
    from .specialize import relax_broadcasts

    optimized = optimize(graph)
    folded, constants = fold_constants(optimized, overridden)
    slots = Slots()
    input_slots = {
        graph_input.name: slots.assign(graph_input.value) for graph_input in folded.inputs
    }
    steps = fuse(folded, slots)
    output_slots = tuple(slots[o.value] for o in folded.outputs)
    meta_of = {slot: value.meta for value, slot in slots.slot_of.items()}
    relax_broadcasts(steps, output_slots, meta_of)
    _assign_last_uses(steps, output_slots)
    reuse_dying_operands(steps, output_slots, meta_of, set(input_slots.values()))
    initial: list[Any] = [None] * len(slots.slot_of)
    for graph_input in folded.inputs:
        if graph_input.data is not None and graph_input.name not in overridden:
            initial[input_slots[graph_input.name]] = graph_input.data
    return Plan(
        tuple(folded.inputs),
        tuple(folded.outputs),
        slots.slot_of,
        input_slots,
        steps,
        output_slots,
        tuple(slot in set(input_slots.values()) for slot in output_slots),
        len(slots.slot_of),
        initial,
        compile_steps(steps),
        random=any(step.random for step in steps),
        resident_bytes=constants.resident_bytes,
        stored_ids=frozenset(id(value) for value in initial if value is not None),
    )


def _assign_last_uses(steps: list[Step], output_slots: tuple[int, ...]) -> None:
    """Release every slot right after the step that reads it last (never graph outputs). Results
    nobody reads are released right after the step that makes them."""
    last_use: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.reads():
            last_use[slot] = index
        for slot in step.out_slots:
            last_use.setdefault(slot, index)
    keep = set(output_slots)
    frees: list[list[int]] = [[] for _ in steps]
    for slot, index in last_use.items():
        if slot not in keep:
            frees[index].append(slot)
    for step, free in zip(steps, frees):
        step.free_after = tuple(sorted(free))
