"""A plan's steps: the kernel calls an execution plan is made of, and the slot numbers their
arguments and results refer to. Every planning stage (fusion, specialization, buffer reuse, code
generation) reads or edits these; `plan.py` assembles them.

A step calls one kernel with positional `arguments`: `SlotRef`s (values fetched from numbered
slots at run time), tuples of them, or literals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs

from ..ir.graph import Node
from ..ir.printer import format_provenance
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
    # For an elementwise kernel that is not a ufunc: the positions of the arguments it may be
    # given as `out=` (its result then overwrites that operand element for element; inplace.py).
    # Ufuncs take any argument.
    out_operands: tuple[int, ...] = ()
    # The position of an argument whose array dies here and takes the result (`out=`,
    # inplace.py), or None.
    out_argument: int | None = None
    # The kernel also takes `out=`, a C-contiguous array of its one result's shape and dtype
    # sharing memory with no operand, and writes its result there (it may still return a view
    # of an operand when its result_kind is not "fresh").
    takes_out: bool = False
    # The number of the arena buffer the step writes its result into (arena.py), or None.
    out_buffer: int | None = None
    # The kernel also takes the call's arena (`arena=`, the tuple of its buffers): a segment's
    # step (segments.py), whose members write into buffers of their own.
    takes_arena: bool = False

    @property
    def node(self) -> Node:
        """The node that names this step in errors (the last one of a fused group)."""
        return self.nodes[-1]

    def reads(self) -> list[int]:
        """The slots this step reads, in argument order (with repeats)."""
        return [int(slot) for slot in slot_refs(self.arguments)]


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


def describe_failure(step: Step, error: Exception) -> str:
    """The message of a step's kernel failing: the node, its results and where it came from."""
    node = step.node
    names = ", ".join(f"%{r.name}" for r in node.results)
    computing = f" computing {names}" if names else ""  # a check computes nothing
    where = format_provenance(node.provenance).removeprefix("# ")
    fused = f" (fused with {len(step.nodes) - 1} other node(s))" if len(step.nodes) > 1 else ""
    text = f"{node.op}{computing}{fused} failed: {type(error).__name__}: {error}"
    return f"{text} [from {where}]" if where else text
