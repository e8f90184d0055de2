"""The filled-scatter fusion: `as_strided_scatter(full(shape, value), src, ...)` whose filled
tensor nothing else reads (constant padding: a convolution's or a pooling's padded input) runs
as one kernel that makes the filled array and writes `src` into its window, instead of filling
one array and copying it into another before writing the window (three passes over the padded
size where one fill and one window write do). A zero fill takes NumPy's zeroed allocation.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from prims.registry import lookup

from ..ir.values import Value
from .fusion import FusedGroup, FusionContext
from .specialize import basic_index


@attrs.frozen
class FilledScatter:
    """A fresh array of `shape` made by `fill()` (the full prim's kernel), its window
    (`index`, a basic index of its row-major layout, or the as_strided window) set to src."""

    fill: Any  # () -> np.ndarray
    zeros: bool  # the fill is zero of a NumPy dtype: np.zeros makes it
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    index: tuple[Any, ...] | None
    size: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    # The fill value as the full kernel converts it (a 0-dim array), made at the first call
    # writing into a given buffer.
    _converted: list[np.ndarray] = attrs.field(factory=list, eq=False)

    def _element(self) -> np.ndarray:
        if not self._converted:
            filled = self.fill()
            self._converted.append(filled.reshape(-1)[:1].reshape(()).copy())
        return self._converted[0]

    def __call__(self, src: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.zeros(self.shape, self.dtype) if self.zeros else self.fill()
        elif self.zeros:
            out.fill(0)
        elif out.size:  # the full kernel's own conversion of the fill value, made once
            out[...] = self._element()
        if self.index is not None:
            out[self.index] = src
        elif math.prod(self.size) > 0:
            np.lib.stride_tricks.as_strided(
                out.reshape(-1)[self.storage_offset :],
                self.size,
                tuple(s * out.itemsize for s in self.stride),
            )[...] = src
        return out


def filled_scatter_rule(context: FusionContext, index: int) -> FusedGroup | None:
    node = context.node(index)
    if node.op != "prims.as_strided_scatter" or len(node.args) != 2:
        return None
    found = context.defining_node(node.args[0])
    src = node.args[1]
    if found is None or found[1].op != "prims.full" or type(src) is not Value:
        return None
    full_index, full = found
    if not context.internal(full_index, {full_index, index}):
        return None
    definition = lookup(full.op)
    if definition is None or definition.kernel is None:
        return None
    kernel = definition.kernel
    arguments = definition.bind(full.args, full.kwargs)
    result = node.results[0]
    shape = tuple(result.shape)
    size = tuple(node.kwargs["size"])
    stride = tuple(node.kwargs["stride"])
    offset: int = node.kwargs["storage_offset"]
    fill_value = full.kwargs.get("fill_value")
    dtype = result.dtype.numpy
    zeros = (
        type(fill_value) in (bool, int, float)
        and fill_value == 0
        and math.copysign(1.0, fill_value) > 0
        and dtype.kind in "biufc"
    )

    def fill() -> np.ndarray:
        return np.asarray(kernel(*arguments))

    window = basic_index(shape, size, stride, offset) if math.prod(size) > 0 else None
    group = FilledScatter(fill, zeros, shape, dtype, window, size, stride, offset)
    return FusedGroup((full_index, index), (src,), group, fresh_result=True, takes_out=True)
