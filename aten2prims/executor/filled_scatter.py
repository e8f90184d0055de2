"""The filled-scatter fusion: `as_strided_scatter(full(shape, value), src, ...)` whose filled
tensor nothing else reads (constant padding: a convolution's or a pooling's padded input) runs
as one kernel that makes the filled array and writes `src` into its window, instead of filling
one array and copying it into another before writing the window (three passes over the padded
size where one fill and one window write do). A zero fill takes NumPy's zeroed allocation.

The filled tensor may also be shared: one `full` read by several such scatters (common
subexpression elimination merges the equal fills of equal padded shapes), or a constant the
plan starts from whose elements are all one value (a small `full` folded at plan time). Each
scatter then makes its own filled array; the `full` node joins the first scatter's group.

A large window (a padded activation: 4x96x112x112 float32 into 4x96x113x113 is 2 ms of one
copy) is written in parts along its outer dims (`threads.chunks`, decided when the plan is
made), which the call's threads share: each part one copy call, so a part is long enough to
be worth the hand-off between threads.

A zero padding that only a depthwise product's windows read joins the product's step
(`padded_products.py`), which makes it only where the product cannot read its source instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np

from prims.registry import lookup

from ..ir.values import Value
from .fusion import FusedGroup, FusionContext
from .specialize import basic_index
from .strided import strided_view
from .threads import chunks, run_parts

# A buffer that holds other values (an arena's) has only the border around a box window filled
# when the border is at most this fraction of its elements; a wider border is filled with the
# rest, in one pass. The border's side columns are short runs (a padding's width, one run per
# image row), so their fill costs more per element than a whole fill streaming through memory.
# Measured at batch 4 (NumPy's kernels, AMD EPYC, one thread, fill plus window copy, border /
# whole): 96x112² padded by 1 (3% border) 1.85 / 2.03 ms, 144x56² by 1 (7%) 0.29 / 0.36;
# 96x56² by 3 (18%) 0.43 / 0.35, 192x28² by 3 (32%) 0.38 / 0.23, 768x7² by 3 (71%) 0.39 / 0.19,
# 240x28² by 2 (23%) 0.37 / 0.22.
BORDER_MAX_FRACTION = 0.125


@attrs.frozen
class FilledScatter:
    """A fresh array of `shape` made by `fill()` (the full prim's kernel), its window
    (`index`, a basic index of its row-major layout, or the as_strided window) set to src."""

    fill: Any  # (out=None) -> np.ndarray: the filled array, or `out` (any shape) filled
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
    # When the window is a box (`index` of unit steps): the basic indices of the parts of the
    # array outside it, which a given buffer's fill needs (the window is overwritten anyway).
    border: tuple[tuple[slice, ...], ...] | None = None
    # The window's parts (`threads.chunks` of its shape, when `index` is set): each copied by
    # one call, the parts shared by the call's threads; () copies it whole.
    window_parts: tuple[tuple[Any, ...], ...] = ()

    def row_operands(self, count: int) -> tuple[bool, ...] | None:
        """(True,) when row i of the result is the fill with row i of src in its window (a box
        window taking every row: a padding of the inner dims), else None; `for_rows` then gives
        the kernel of a slice of the rows (segments.py)."""
        if count != 1 or self.index is None or not self.shape or not self.index:
            return None
        first = self.index[0]
        if type(first) is not slice or first.indices(self.shape[0]) != (0, self.shape[0], 1):
            return None
        return (True,)

    def for_rows(self, count: int) -> FilledScatter:
        """This kernel for `count` rows (`row_operands` is not None), its window copied whole
        (a segment's part is the threads' share); called with `out=` (`fill` makes the whole
        array's shape)."""
        assert self.index is not None  # row_operands checked
        shape = (count, *self.shape[1:])
        index = (slice(0, count, 1), *self.index[1:])
        return attrs.evolve(
            self,
            shape=shape,
            index=index,
            size=(count, *self.size[1:]),
            border=_border(shape, index) if self.border is not None else None,
            window_parts=(),
        )

    def _fill_border(self, out: np.ndarray) -> None:
        assert self.border is not None  # the caller checked
        value = 0 if self.zeros else self._element()
        for part in self.border:
            out[part] = value

    def _element(self) -> np.ndarray:
        if not self._converted:  # one element filled, not the whole array (fresh pages)
            filled = self.fill(out=np.empty((1,), self.dtype))
            self._converted.append(filled.reshape(()))
        return self._converted[0]

    def __call__(self, src: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        border: Callable[[], None] | None = None
        if out is None:
            out = np.zeros(self.shape, self.dtype) if self.zeros else self.fill()
        elif self.border is not None:  # a padding: only the border needs the fill
            border = functools.partial(self._fill_border, out)
        elif self.zeros:
            out.fill(0)
        elif out.size:  # the full kernel's own conversion of the fill value, made once
            out[...] = self._element()
        if self.index is not None:
            window = out[self.index] if self.window_parts else None
            if type(window) is np.ndarray and type(src) is np.ndarray and src.shape == window.shape:
                # unsafe casting: what the whole assignment below does
                copy = functools.partial(np.copyto, casting="unsafe")
                parts = [
                    functools.partial(copy, window[part], src[part]) for part in self.window_parts
                ]
                # The border is outside the window (a box): filled as one more part, first.
                run_parts(parts if border is None else [border, *parts])
                return out
            if border is not None:
                border()
            out[self.index] = src
        elif math.prod(self.size) > 0:
            strided_view(
                out.reshape(-1)[self.storage_offset :],
                self.size,
                tuple(s * out.itemsize for s in self.stride),
                writeable=True,
            )[...] = src
        return out


def filled_scatter_rule(context: FusionContext, index: int) -> FusedGroup | None:
    node = context.node(index)
    if node.op != "prims.as_strided_scatter" or len(node.args) != 2:
        return None
    base, src = node.args
    if type(base) is not Value or type(src) is not Value or base is src:
        return None
    result = node.results[0]
    shape = tuple(result.shape)
    dtype = result.dtype.numpy
    members: tuple[int, ...] = (index,)
    filled = _filled_by_full(context, base)
    if filled is not None:
        full_index, fill, fill_value = filled
        if full_index not in context.claimed:
            members = (full_index, index)
        zeros = (
            type(fill_value) in (bool, int, float)
            and fill_value == 0
            and math.copysign(1.0, fill_value) > 0
            and dtype.kind in "biufc"
        )
    else:
        data = context.constants.get(base)
        if data is None or not _uniform(np.asarray(data)):
            return None
        stored = np.asarray(data)

        def fill(out: np.ndarray | None = None) -> np.ndarray:
            if out is None:
                return np.array(stored)
            out[...] = stored.reshape(-1)[0]  # every element has these bits
            return out

        zeros = dtype.kind in "biufc" and not stored.reshape(-1)[:1].view(np.uint8).any()
    size = tuple(node.kwargs["size"])
    stride = tuple(node.kwargs["stride"])
    offset: int = node.kwargs["storage_offset"]
    window = basic_index(shape, size, stride, offset) if math.prod(size) > 0 else None
    parts: tuple[tuple[Any, ...], ...] = ()
    if window is not None:  # the window's shape, from a zero-strided view (no memory)
        window_shape = np.broadcast_to(np.zeros((), dtype), shape)[window].shape
        parts = chunks(window_shape, np.dtype(dtype).itemsize)
    group = FilledScatter(
        fill,
        zeros,
        shape,
        dtype,
        window,
        size,
        stride,
        offset,
        border=_border(shape, window),
        window_parts=parts,
    )
    return FusedGroup(members, (src,), group, fresh_result=True, takes_out=True)


def _filled_by_full(
    context: FusionContext, base: Value
) -> tuple[int, Callable[..., np.ndarray], Any] | None:
    """(the `full` node's index, a function making its array, its fill value) when `base` is a
    `full` read only as the filled tensor of scatters (`as_strided_scatter` bases)."""
    full_index = context.producer.get(base)
    if full_index is None or base in context.outputs:
        return None
    full = context.node(full_index)
    if full.op != "prims.full":
        return None
    # Every reader fuses (so none needs the full's array): a scatter into it of another value.
    for reader in context.users.get(base, []):
        scatter = context.node(reader)
        if scatter.op != "prims.as_strided_scatter" or len(scatter.args) != 2:
            return None
        if scatter.args[0] is not base or type(scatter.args[1]) is not Value:
            return None
        if scatter.args[1] is base:
            return None
    definition = lookup(full.op)
    if definition is None or definition.kernel is None:
        return None
    kernel = definition.kernel
    arguments = definition.bind(full.args, full.kwargs)

    def fill(out: np.ndarray | None = None) -> np.ndarray:
        return np.asarray(kernel(*arguments, out=out))

    return full_index, fill, full.kwargs.get("fill_value")


def _uniform(data: np.ndarray) -> bool:
    """Every element of `data` has the bits of its first one."""
    if data.size == 0 or data.dtype.kind not in "biuf":
        return False
    flat = np.ascontiguousarray(data).reshape(-1)
    if flat.itemsize not in (1, 2, 4, 8):  # (float128) rows of bytes, compared with the first
        bits = flat.view(np.uint8).reshape(data.size, -1)
        return bool((bits == bits[:1]).all())
    # Equal least and greatest bits: two reductions, no array of comparisons (these are whole
    # padded inputs, read when the plan is made).
    words = flat.view(f"u{flat.itemsize}")
    return bool(words.min() == words.max())


def _border(shape: tuple[int, ...], window: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    """The parts of an array of `shape` outside the box `window` (a basic index whose slices
    step by one), as basic indices: per dim, the slabs before and after the box's range, the
    earlier dims restricted to the box. None for other windows."""
    if window is None:
        return None
    box: list[tuple[int, int]] = []
    for item in window:
        if item is None:  # a new axis of the window: it covers no array dim
            continue
        if type(item) is int:
            box.append((item, item + 1))
        elif type(item) is slice and item.step in (None, 1):
            start, stop, _ = item.indices(shape[len(box)])
            box.append((start, stop))
        else:
            return None
    box += [(0, length) for length in shape[len(box) :]]
    if math.prod(shape) - math.prod(b - a for a, b in box) > BORDER_MAX_FRACTION * math.prod(shape):
        return None  # a wide border: one fill of the whole array is faster
    parts: list[tuple[slice, ...]] = []
    for axis, ((start, stop), length) in enumerate(zip(box, shape)):
        inside = tuple(slice(a, b) for a, b in box[:axis])
        rest = (slice(None),) * (len(shape) - axis - 1)
        for low, high in ((0, start), (stop, length)):
            if high > low:
                parts.append((*inside, slice(low, high), *rest))
    return tuple(parts)
