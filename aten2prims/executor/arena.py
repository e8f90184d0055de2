"""Static memory planning: every step result the plan can place (its kernel takes `out=`,
`Step.takes_out`) gets a buffer in one arena, a block of bytes the plan keeps between calls,
so a steady-state call allocates no large temporaries and takes no page faults for them.

A buffer lives from the step writing it to the last read of any value sharing its memory (views
of it, later results written into it in place by inplace.py); buffers whose lifetimes overlap
get disjoint bytes, the others may share them (placed greedily, largest first, at the lowest
offset free for the buffer's whole lifetime). A result is never placed when its memory may be
handed to the caller (a graph output, or a view of one): outputs are allocated fresh by their
kernels, so no later call can overwrite what an earlier one returned. An output written in
place into a dying operand makes that operand's memory the caller's: the whole chain of
in-place results it ends is then kept out of the arena, its first step making the new array
(or, where the output would be a view of that chain, the output is written into a new array
instead; `_own_output_memory`).

An arena is used by one call at a time: a plan keeps a pool of arenas (`ArenaPool`), and a call
takes one (a new one only when every other is in use by a concurrent call) and gives it back.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from ..ir.values import TensorMeta
from ..limits import nbytes
from .inplace import Memory
from .steps import SlotRef, Step

# Buffers start at multiples of this many bytes (a cache line; what NumPy's SIMD loops like).
ALIGNMENT = 64


@attrs.frozen
class Buffer:
    """One placed result: `shape` and `dtype` at byte `offset` of the arena, written by step
    `first` and dead after step `last`."""

    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype
    first: int
    last: int

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@attrs.frozen
class ArenaLayout:
    buffers: tuple[Buffer, ...] = ()
    nbytes: int = 0

    def views(self) -> tuple[np.ndarray, ...]:
        """A new arena: one allocation, seen as every buffer's array."""
        block = np.empty(self.nbytes + ALIGNMENT, np.uint8)
        start = -block.ctypes.data % ALIGNMENT
        return tuple(
            block[start + b.offset : start + b.offset + b.size].view(b.dtype).reshape(b.shape)
            for b in self.buffers
        )


class ArenaPool:
    """The arenas of one plan; `take()` one for a call, `give()` it back afterwards."""

    def __init__(self, layout: ArenaLayout) -> None:
        self.layout = layout
        self._free: list[tuple[np.ndarray, ...]] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[np.ndarray, ...]:
        if not self.layout.buffers:
            return ()
        with self._lock:
            if self._free:
                return self._free.pop()
        return self.layout.views()

    def give(self, arena: tuple[np.ndarray, ...]) -> None:
        if arena:
            with self._lock:
                self._free.append(arena)


def plan_arena(
    steps: list[Step],
    output_slots: tuple[int, ...],
    meta_of: dict[int, Any],
    input_slots: set[int],
    spans: Sequence[tuple[int, int]] = (),
) -> ArenaLayout:
    """Places the results of the steps that take `out=` (setting their `out_buffer`) and returns
    the arena's layout. Runs after buffer reuse (inplace.py): a step writing into an operand
    needs no buffer of its own, and its result extends that operand's buffer's life. `spans`
    are runs of steps (first, last) whose parts run at once (segments.py): a buffer written or
    read by one of them lives through the whole run."""
    _own_output_memory(steps, output_slots)
    span_of: dict[int, tuple[int, int]] = {}
    for first, last in spans:
        for index in range(first, last + 1):
            span_of[index] = (first, last)
    memory = Memory()
    for step in steps:
        reads = step.reads()
        if step.out_argument is not None:
            argument = step.arguments[step.out_argument]
            assert type(argument) is SlotRef
            memory.join(step.out_slots[0], int(argument))
        elif step.result_kind != "fresh":
            for out in step.out_slots:
                for slot in reads:
                    memory.join(out, slot)
    end: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.reads():
            end[memory.find(slot)] = span_of.get(index, (index, index))[1]
    returned = {memory.find(slot) for slot in output_slots}
    wanted: list[tuple[int, Step, TensorMeta, int]] = []
    for index, step in enumerate(steps):
        if not step.takes_out or step.out_argument is not None or len(step.out_slots) != 1:
            continue
        slot = step.out_slots[0]
        meta = meta_of.get(slot)
        root = memory.find(slot)
        if (
            type(meta) is not TensorMeta
            or meta.shape == ()
            or nbytes(meta) == 0
            or root in returned
            or slot in input_slots
        ):
            continue
        first, last = span_of.get(index, (index, index))
        wanted.append((first, step, meta, max(last, end.get(root, index))))
    placed: list[Buffer] = []
    by_step: dict[int, int] = {}
    total = 0
    for index, step, meta, last in sorted(wanted, key=lambda w: (-nbytes(w[2]), w[0])):
        size = -(-nbytes(meta) // ALIGNMENT) * ALIGNMENT
        offset = 0
        for other in sorted(
            (b for b in placed if b.first <= last and index <= b.last), key=lambda b: b.offset
        ):
            if offset + size <= other.offset:
                break
            offset = max(offset, other.offset + -(-other.size // ALIGNMENT) * ALIGNMENT)
        buffer = Buffer(offset, meta.shape, np.dtype(meta.dtype.numpy), index, last)
        by_step[id(step)] = len(placed)
        placed.append(buffer)
        total = max(total, offset + size)
    for step in steps:
        if id(step) in by_step:
            step.out_buffer = by_step[id(step)]
    return ArenaLayout(tuple(placed), total)


def _own_output_memory(steps: list[Step], output_slots: tuple[int, ...]) -> None:
    """An output written in place into a dying operand (inplace.py) makes that operand's whole
    chain of in-place results the caller's memory, kept out of the arena: the chain's first step
    allocates a new array and every later step writes into it, the output last. That is kept
    when the chain is made of whole arrays only (each step writing into its operand's array, the
    first one's result a new array): the output is then that array, as new as an output must be,
    and its step writes in place instead of reading one buffer and writing another (measured: an
    elementwise pass writing another 5 MB buffer costs about twice one writing in place). Where
    a view is involved (an output that is a reshape of the chain, a chain through a transpose),
    the chain stays in the arena: such an output (or the result an output views) is written into
    a new array instead."""
    producer = {slot: step for step in steps for slot in step.out_slots}
    for slot in output_slots:
        step = producer.get(slot)
        seen_through_a_view = False
        while (
            step is not None
            and step.out_argument is None
            and step.result_kind != "fresh"
            and len(set(step.reads())) == 1
        ):
            step = producer.get(step.reads()[0])
            seen_through_a_view = True
        if (
            step is not None
            and step.out_argument is not None
            and (seen_through_a_view or not _whole_chain(step, producer))
        ):
            step.out_argument = None


def _whole_chain(step: Step, producer: dict[int, Step]) -> bool:
    """The step writes, in place, into an array that a fresh step made and only in-place steps
    wrote since (no view in between)."""
    while step.out_argument is not None:
        argument = step.arguments[step.out_argument]
        assert type(argument) is SlotRef
        earlier = producer.get(int(argument))
        if earlier is None:
            return False
        step = earlier
    return step.result_kind == "fresh" and step.elementwise and step.takes_out
