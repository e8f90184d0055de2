"""Products of a zero-padded input read from the unpadded input: a convolution's padding
(`filled_scatter.py`: a zero-filled array with the input written into its window), the kernel's
windows of it (`as_strided`) and the contraction summing them (`contraction_fusion.py`) run as
one step when nothing else reads the padded array or the windows: a depthwise product's
(below), and a dense one's where the matrix engine's shifted products of a 2-d kernel would
run, which then read the unpadded input by stacked copies (`stacked_copies.py`; a dense product
that would not is left as its three steps, decided when the plan is made).

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
contraction on them, as the three steps did. A step plans its products before its first call
runs, so every call makes the same ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from prims import mkl

from .blas import gemm_in_use
from .contraction import ContractionRecipe
from .contraction_fusion import ContractionKernel, PlannedCall
from .filled_scatter import FilledScatter
from .kept_buffers import KEPT_BYTES, kept_buffer
from .multiply_accumulate import MultiplyAccumulateRecipe, ZeroPadded
from .stacked_copies import StackedCopies, plan_stacked_copies
from .steps import SlotRef, Step, slot_refs
from .strided import strided_view


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
    # itself, its padding and (a dense product's) its stacked copies, or None (the padded array
    # is made); filled before a layout's first call runs.
    _fast: dict[tuple[Any, ...], tuple[PlannedCall, ZeroPadded, StackedCopies | None] | None] = (
        attrs.field(factory=dict, eq=False, repr=False)
    )

    def __call__(self, *operands: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        source = operands[self.position]
        other = operands[1 - self.position]
        key = (source.shape, source.strides, other.strides, source.dtype)
        if key not in self._fast:
            # Planned before the first call runs (so that every call makes the same products),
            # on an array of the padded layout never read or written.
            blank = np.empty(self.scatter.shape, self.scatter.dtype)
            self._fast[key] = self._plan(source, self._windows(blank), other)
        fast = self._fast[key]
        if fast is not None:
            call, padded, stacked = fast
            recipe = call.recipe
            if stacked is not None:
                if gemm_in_use():  # asked at each call, as the shifted products ask
                    return call.run_stacked(
                        stacked, source, other, self.position == 0, operands[2:], out
                    )
            else:
                assert isinstance(recipe, MultiplyAccumulateRecipe)
                if recipe.axpy is None or mkl.library() is None:  # asked at each call
                    return call.run_zero_padded(source, padded, other, operands[2:], out)
        # The padded array in a buffer the thread keeps (no fresh pages at each call); its
        # windows are read by this call only.
        scatter = self.scatter
        padded_array = scatter(source, out=kept_buffer("padded", scatter.shape, scatter.dtype))
        arguments = list(operands)
        arguments[self.position] = self._windows(padded_array)
        return self.contraction(*arguments, out=out)

    def _windows(self, padded: np.ndarray) -> np.ndarray:
        """The windows of a padded array (the product's operand)."""
        return strided_view(
            padded.reshape(-1)[self.offset :],
            self.size,
            tuple(step * padded.itemsize for step in self.stride),
            writeable=False,
        )

    def reads_source(self) -> bool:
        """Whether a layout planned so far reads the source itself (not a padded array made of
        it) while its library allows (MKL's axpys, a gemm through ctypes: asked at each call)."""
        return any(fast is not None for fast in self._fast.values())

    def recipes(self) -> list[Any]:
        """The contraction's recipes planned so far (`ContractionKernel.recipes`)."""
        return self.contraction.recipes()

    def stacks_copies(self) -> bool:
        """Whether a dense product (the matrix engine's) reads C-contiguous operands of its
        shapes by stacked copies of the source: planned now, on arrays never read or written
        (and not kept: the other operand's own layout is the calls' to plan for)."""
        scatter = self.scatter
        source = np.empty(scatter.size, scatter.dtype)  # these pages are never touched
        windows = self._windows(np.empty(scatter.shape, scatter.dtype))
        other = np.empty(self.contraction.operands[1 - self.position].shape, scatter.dtype)
        fast = self._plan(source, windows, other, keep=False)
        return fast is not None and fast[2] is not None

    def _plan(
        self, source: np.ndarray, windows: np.ndarray, other: np.ndarray, keep: bool = True
    ) -> tuple[PlannedCall, ZeroPadded, StackedCopies | None] | None:
        """The planned call and padding when the contraction's recipe reads the source itself:
        a C-contiguous source written into the padded array's last two dims (the others whole),
        zeros around it, and a recipe of shifted copies over the padded images' merged rows (a
        depthwise product's), or of shifted products of a 2-d kernel (a dense convolution's:
        with the stacked copies that replace them)."""
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
        # (`keep`: the contraction's call for this layout, kept for the calls that follow)
        call = self.contraction.planned_call(a, b) if keep else PlannedCall(self.contraction, a, b)
        recipe = call.recipe
        padded = ZeroPadded(
            (shape[-2], shape[-1]), (source.shape[-2], source.shape[-1]), top, left, self.offset
        )
        if isinstance(recipe, ContractionRecipe):
            stacked = plan_stacked_copies(
                recipe, a.reshape(call.a_shape), b.reshape(call.b_shape), self.position == 0, padded
            )
            return None if stacked is None else (call, padded, stacked)
        if recipe.full_is_a != (self.position == 0):
            return None
        if not recipe.reads_zero_padded(padded, source.itemsize):
            return None
        return call, padded, None


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
        (source,) = step.arguments
        kernel = PaddedContraction(
            scatter,
            tuple(node.kwargs["size"]),
            tuple(node.kwargs["stride"]),
            node.kwargs["storage_offset"],
            product.kernel,
            places[0],
        )
        # A dense convolution's (the matrix engine's: its other operand has labels of its own)
        # joins where it reads the source by stacked copies (stacked_copies.py) and its padded
        # input fits a kept buffer (made in one at a call whose operands are laid out otherwise).
        full, other = product.kernel.operands[places[0]], product.kernel.operands[1 - places[0]]
        if not set(other.labels) <= set(full.labels) and (
            math.prod(scatter.shape) * scatter.dtype.itemsize > KEPT_BYTES
            or not kernel.stacks_copies()
        ):
            continue
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
