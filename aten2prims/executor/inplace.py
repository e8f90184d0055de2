"""Results written into dying operands: an elementwise ufunc step whose operand array dies at
that step writes its result into it (`ufunc(a, b, out=a)`) instead of allocating a new array;
so does an elementwise kernel that says which operands it may overwrite (`Step.out_operands`:
a `where` into its second branch, whose copy it then skips; a selection by a zero branch,
`select.ZeroSelect`, into its value).
Arrays of more than a few MB come from mmap and each fresh one pays its page faults (measured:
the bilinear upsampling and group norm muls of the medium U-Net ran in half the time); chains
such as a sigmoid (neg, exp, add, reciprocal) or a norm's scale and shift then work in one buffer.

The array written must belong to the plan alone, be dead afterwards, and hold each element once:
- its memory was made by a step whose results are new arrays (`Step.result_kind` "fresh": never
  an input, stored data or a folded constant), possibly seen through views that take each of
  its elements once ("review": reshapes, transposes, squeezes) — never a broadcast or a window,
  whose elements may repeat or which may be read-only;
- no value sharing that memory is read later or returned: every view joins its result to its
  operand's memory at plan time, and the last read of any of them is this step;
- it has the result's shape and dtype (the metas').
The elements computed are the same: a ufunc computes each output element from the same input
elements whatever the output buffer, and NumPy copies an input that overlaps `out` other than
exactly (its memory-overlap guarantee).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.values import TensorMeta
from .steps import SlotRef, Step


class Memory:
    """Union-find of slots sharing memory; each group knows whether it is the plan's own and
    which of its slots see each element once."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, slot: int) -> int:
        root = slot
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(slot, slot) != root:  # path compression
            self.parent[slot], slot = root, self.parent[slot]
        return root

    def join(self, slot: int, into: int) -> None:
        a, b = self.find(slot), self.find(into)
        if a != b:
            self.parent[a] = b


def reuse_dying_operands(
    steps: list[Step], output_slots: tuple[int, ...], meta_of: dict[int, Any], input_slots: set[int]
) -> None:
    memory = Memory()
    owned: set[int] = set()  # roots of memory the plan made
    once: set[int] = set()  # slots seeing each element of their memory exactly once
    for step in steps:
        reads = step.reads()
        if step.result_kind == "fresh":
            owned.update(step.out_slots)
            once.update(step.out_slots)
            continue
        for out in step.out_slots:
            for slot in reads:
                memory.join(out, slot)
            if step.result_kind == "review" and len(set(reads)) == 1 and reads[0] in once:
                once.add(out)
    # Memory is dead after the last read of any slot sharing it; returned memory never dies.
    end: dict[int, int] = {}
    for index, step in enumerate(steps):
        for slot in step.reads():
            end[memory.find(slot)] = index
    for slot in output_slots:
        end[memory.find(slot)] = len(steps)
    foreign = {memory.find(slot) for slot in input_slots}
    for index, step in enumerate(steps):
        ufunc = isinstance(step.kernel, np.ufunc) and step.kernel.nout == 1
        if not (step.elementwise and (ufunc or step.out_operands)):
            continue
        result = step.out_metas[0] if len(step.out_metas) == 1 else None
        if type(result) is not TensorMeta or result.shape == ():
            continue
        for position, argument in enumerate(step.arguments):
            if type(argument) is not SlotRef or meta_of.get(int(argument)) != result:
                continue
            if not ufunc and position not in step.out_operands:
                continue
            slot = int(argument)
            root = memory.find(slot)
            if not ufunc and any(  # only ufuncs copy an operand overlapping `out` first
                type(other) is SlotRef and memory.find(int(other)) == root
                for at, other in enumerate(step.arguments)
                if at != position
            ):
                continue
            if slot in once and root in owned and root not in foreign and end.get(root) == index:
                step.out_argument = position
                # The memory is the result's from here on (everything else sharing it is dead).
                out = step.out_slots[0]
                memory.parent[root] = out
                owned.add(out)
                once.add(out)
                end[out] = max(end.get(out, -1), index)
                break
