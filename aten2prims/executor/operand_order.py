"""Elementwise steps iterated in their operand's memory order: a ufunc step that reads a permuted
view (a transposed attention key, a permuted image) and writes a row-major buffer runs over both
seen in the operand's order.

Given `out=`, NumPy iterates in the result's order, so the innermost loop reads the operand at
its largest stride: the zoo transformer's key, a (8, 8, 32, 64) view of its in-projection whose
innermost dim steps 24576 bytes, scaled by a number into a row-major buffer took 429 us; the same
call on both arrays transposed so that the operand's contiguous dim is innermost (the result
then written at a stride of 256 bytes) took 83 us, and the query, read row-major, 39 us. Each
element is computed by the same ufunc from the same operand element whatever the order: the
same bits.

The step is chosen when the plan is made (in the graph's layout its operand's innermost dim is
not its contiguous one, so a view of another order is expected); the order is taken from the
array's strides at each call, outermost (largest stride) first, and a call whose operand is
row-major after all runs as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir.values import TensorMeta
from .steps import SlotRef, Step

# The smallest result worth the reordering (computing the order costs about 2 us).
MIN_BYTES = 1 << 16


class InOperandOrder:
    """A ufunc whose one array operand has the result's shape, called on that operand and
    `out` with their dims in the operand's memory order (outermost first); called without
    `out=` (as `execute(check=True)` calls each step's kernel), the ufunc's own call."""

    __slots__ = ("kernel",)

    def __init__(self, kernel: Callable[..., Any]) -> None:
        self.kernel = kernel

    @property
    def __name__(self) -> str:  # named in plan_profile's reports as the ufunc itself
        return str(getattr(self.kernel, "__name__", type(self.kernel).__name__))

    def __call__(self, *operands: Any, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            return self.kernel(*operands)
        source = _the_array(operands, out)
        if source is None:
            return self.kernel(*operands, out=out)
        strides = source.strides
        order = sorted(range(out.ndim), key=lambda dim: -abs(strides[dim]))
        if order == list(range(out.ndim)):
            return self.kernel(*operands, out=out)
        self.kernel(
            *(o.transpose(order) if o is source else o for o in operands), out=out.transpose(order)
        )
        return out


def _the_array(operands: Sequence[Any], out: np.ndarray) -> np.ndarray | None:
    """The one operand that is an array of out's shape when every other is a number or a 0-dim
    array, else None."""
    found = None
    for operand in operands:
        if type(operand) is np.ndarray and operand.ndim:
            if found is not None or operand.shape != out.shape:
                return None
            found = operand
    return found


def iterate_in_operand_order(steps: Sequence[Step], meta_of: dict[int, Any]) -> None:
    """Give the ufunc steps that read one array, of the result's shape, whose innermost dim is
    not its contiguous one in the graph's layout, into a result of at least MIN_BYTES (a
    row-major arena buffer, whatever layout the graph gives the result) an `InOperandOrder`
    kernel."""
    for step in steps:
        if not (step.elementwise and step.takes_out) or len(step.out_slots) != 1:
            continue
        if not isinstance(step.kernel, np.ufunc) or step.kernel.nout != 1:
            continue
        meta = meta_of.get(step.out_slots[0])
        if type(meta) is not TensorMeta or len(meta.shape) < 2:
            continue
        if not all(type(n) is int for n in meta.shape):
            continue
        if math.prod(meta.shape) * meta.dtype.itemsize < MIN_BYTES:
            continue
        arrays: list[TensorMeta] = []
        for argument in step.arguments:
            operand = meta_of.get(int(argument)) if type(argument) is SlotRef else None
            if type(operand) is TensorMeta and len(operand.shape) > 0:
                arrays.append(operand)
        if len(arrays) != 1 or tuple(arrays[0].shape) != tuple(meta.shape):
            continue
        strides = arrays[0].strides
        if all(type(s) is int for s in strides) and _innermost_moves(arrays[0].shape, strides):
            step.kernel = InOperandOrder(step.kernel)


def _innermost_moves(shape: Sequence[Any], strides: Sequence[int]) -> bool:
    """The operand's innermost dim (of more than one element) is not its contiguous one: only
    then does NumPy's loop over the result's order read it at a large stride."""
    dims = [dim for dim, size in enumerate(shape) if size != 1]
    if not dims:
        return False
    return strides[dims[-1]] != min(strides[dim] for dim in dims)
