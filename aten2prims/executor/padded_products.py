"""Depthwise products of a zero-padded input read from the unpadded input: a convolution's
padding (`filled_scatter.py`: a zero-filled array with the input written into its window), the
kernel's windows of it (`as_strided`) and the contraction summing them (`contraction_fusion.py`)
run as one step when nothing else reads the padded array or the windows.

When the contraction is a sum of products over shifted copies (`multiply_accumulate.py`, a 2-d
kernel whose copies lie in the padded images' merged rows), its chunks copy the unpadded
input's images themselves, setting the positions the padding holds to zero, and lay the copies
out without padding columns, so the sum is written into the output directly: the padded array
(a copy of the whole input) and the copy of the sums into the output without their padding
columns are never made. A strided 3x3 kernel's gathered windows, and a strided kernel's phase
images (gathered runs over them), are copied from the unpadded images likewise, the positions
in the padding set to zero. The products and their order are those of the padded array's, so
are the bits. Any other layout or recipe (a dilated kernel's phase images, MKL's batched axpys,
gathered runs, one output row) makes the padded array and its windows and calls the
contraction on them, as the three steps did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from prims import mkl

from .contraction_fusion import ContractionKernel, PlannedCall
from .filled_scatter import FilledScatter
from .kept_buffers import kept_buffer
from .multiply_accumulate import MultiplyAccumulateRecipe, ZeroPadded
from .steps import SlotRef, Step, slot_refs


@attrs.frozen
class PaddedContraction:
    """The contraction (`contraction`) of its operands, operand `position` being the windows
    (as_strided `size`, `stride`, `offset`, in elements) of the zero-padded array `scatter`
    makes of its source: called with the source in that operand's place."""

    scatter: FilledScatter
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    contraction: ContractionKernel
    position: int
    # Per layout of the source and the other operand: the planned call reading the source
    # itself and its padding, or None (the padded array is made); filled by the calls.
    _fast: dict[tuple[Any, ...], tuple[PlannedCall, ZeroPadded] | None] = attrs.field(
        factory=dict, eq=False, repr=False
    )

    def __call__(self, *operands: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        source = operands[self.position]
        other = operands[1 - self.position]
        key = (source.shape, source.strides, other.strides, source.dtype)
        fast = self._fast.get(key)
        if fast is not None:
            call, padded = fast
            recipe = call.recipe
            assert isinstance(recipe, MultiplyAccumulateRecipe)
            if recipe.axpy is None or mkl.library() is None:  # asked at each call, as run_into
                return call.run_zero_padded(source, padded, other, operands[2:], out)
        # The padded array in a buffer the thread keeps (no fresh pages at each call); its
        # windows are read by this call only.
        scatter = self.scatter
        padded_array = scatter(source, out=kept_buffer("padded", scatter.shape, scatter.dtype))
        windows = np.lib.stride_tricks.as_strided(
            padded_array.reshape(-1)[self.offset :],
            self.size,
            tuple(step * padded_array.itemsize for step in self.stride),
            writeable=False,
        )
        arguments = list(operands)
        arguments[self.position] = windows
        result = self.contraction(*arguments, out=out)
        if key not in self._fast:
            self._fast[key] = self._plan(source, windows, other)
        return result

    def reads_source(self) -> bool:
        """Whether a call so far read the source itself (not a padded array made of it)."""
        return any(fast is not None for fast in self._fast.values())

    def recipes(self) -> list[Any]:
        """The contraction's recipes planned so far (`ContractionKernel.recipes`)."""
        return self.contraction.recipes()

    def _plan(
        self, source: np.ndarray, windows: np.ndarray, other: np.ndarray
    ) -> tuple[PlannedCall, ZeroPadded] | None:
        """The planned call and padding when the contraction's recipe reads the source itself:
        a C-contiguous source written into the padded array's last two dims (the others whole),
        zeros around it, and a recipe of shifted copies over the padded images' merged rows."""
        scatter = self.scatter
        shape = scatter.shape
        if not scatter.zeros or not source.flags.c_contiguous or len(shape) < 3:
            return None
        padded_rows, padded_columns = shape[-2:]
        image = padded_rows * padded_columns
        # The source's images, in order, at (top, left) of the padded images, whole.
        leading = [(n, step) for n, step in zip(scatter.size[:-2], scatter.stride[:-2]) if n != 1]
        expected = image
        for n, step in reversed(leading):
            if step != expected:
                return None
            expected *= n
        top, left = divmod(scatter.storage_offset, padded_columns)
        if (
            expected != math.prod(shape)
            or tuple(scatter.stride[-2:]) != (padded_columns, 1)
            or tuple(scatter.size[-2:]) != source.shape[-2:]
            or source.size != math.prod(scatter.size)
            or top >= padded_rows
        ):
            return None
        a, b = (windows, other) if self.position == 0 else (other, windows)
        call = self.contraction.planned_call(a, b)
        recipe = call.recipe
        if not isinstance(recipe, MultiplyAccumulateRecipe) or recipe.full_is_a != (
            self.position == 0
        ):
            return None
        padded = ZeroPadded(
            (shape[-2], shape[-1]), (source.shape[-2], source.shape[-1]), top, left, self.offset
        )
        if not recipe.reads_zero_padded(padded, source.itemsize):
            return None
        return call, padded


def fuse_zero_paddings(steps: list[Step], output_slots: Sequence[int]) -> list[Step]:
    """Each padding step (a zero-filling `FilledScatter`), the `as_strided` step reading its
    result and the contraction step reading that, when nothing else reads either result, as one
    step of a `PaddedContraction` taking the padding's source."""
    readers: dict[int, list[int]] = {}
    for number, step in enumerate(steps):
        for slot in step.reads():
            readers.setdefault(slot, []).append(number)
    outputs = set(output_slots)

    def only_reader(slot: int) -> int | None:
        found = readers.get(slot, [])
        if slot in outputs or len(found) != 1:
            return None
        return found[0]

    fused: dict[int, Step] = {}
    removed: set[int] = set()
    for number, step in enumerate(steps):
        scatter = step.kernel
        if type(scatter) is not FilledScatter or not scatter.zeros or len(step.out_slots) != 1:
            continue
        window_number = only_reader(step.out_slots[0])
        if window_number is None:
            continue
        window_step = steps[window_number]
        (node,) = window_step.nodes[-1:]
        if len(window_step.nodes) != 1 or node.op != "prims.as_strided":
            continue
        if len(window_step.out_slots) != 1 or window_step.reads() != [step.out_slots[0]]:
            continue
        product_number = only_reader(window_step.out_slots[0])
        if product_number is None:
            continue
        product = steps[product_number]
        if type(product.kernel) is not ContractionKernel:
            continue
        window_slot = window_step.out_slots[0]
        places = [i for i, argument in enumerate(product.arguments[:2]) if argument == window_slot]
        if len(places) != 1 or type(product.arguments[places[0]]) is not SlotRef:
            continue
        if any(slot == window_slot for slot in slot_refs(product.arguments[2:])):
            continue
        # A product whose other operand has no labels of its own (a depthwise convolution's,
        # `multiply_accumulate.py`); the matrix engine's (dense convolutions) keep the padding.
        full, other = product.kernel.operands[places[0]], product.kernel.operands[1 - places[0]]
        if not set(other.labels) <= set(full.labels):
            continue
        (source,) = step.arguments
        kernel = PaddedContraction(
            scatter,
            tuple(node.kwargs["size"]),
            tuple(node.kwargs["stride"]),
            node.kwargs["storage_offset"],
            product.kernel,
            places[0],
        )
        arguments = list(product.arguments)
        arguments[places[0]] = source
        fused[product_number] = attrs.evolve(
            product,
            nodes=step.nodes + window_step.nodes + product.nodes,
            kernel=kernel,
            arguments=tuple(arguments),
        )
        removed.update((number, window_number))
    if not fused:
        return steps
    return [fused.get(number, step) for number, step in enumerate(steps) if number not in removed]


__all__ = ["PaddedContraction", "fuse_zero_paddings"]
