"""Family S: views and shape changes, concatenation, flips, repeats, padding, creation and metadata ops.

Values are functional: a "view" here is a new value holding the viewed elements (the executor
keeps view prims zero-copy), and its meta carries torch's layout. Slices, selects and diagonals
are `as_strided` windows in the operand's own strides and storage offset, as torch computes
them; `as_strided` reads storage through the operand's layout, and `sym_stride`,
`sym_storage_offset` and `sym_is_contiguous` read the layout from the meta.
See docs/decompositions.md, "Family S".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.layout import contiguous_strides, is_contiguous
from aten2prims.ir.symbolic import (
    data_dependent,
    is_literal_one,
    is_symbolic,
    same_size,
    settled,
    sym_max,
)
from aten2prims.ir.values import CPU, MemoryFormat, Value
from aten2prims.promotion import DEFAULT_FLOAT, convert, result_type
from prims.shape import format_strides

from .common import (
    canonical_dim,
    full,
    index_ramp,
    iota,
    row_major_strides,
    row_major_window,
    row_major_window_scatter,
    scalar_kind,
    slice_bounds,
    slice_in_dim,
)
from .registry import register

# -- shared helpers ------------------------------------------------------------------------------------


def _dims(op: str, dims: Sequence[int], ndim: int) -> tuple[int, ...]:
    """A list of dims made canonical; aten rejects a dim named twice."""
    canonical = tuple(canonical_dim(d, ndim) for d in dims)
    if len(set(canonical)) != len(canonical):
        raise ShapeError(f"{op}: dims {list(dims)} name a dimension more than once")
    return canonical


def _strict_dim(op: str, dim: int, ndim: int) -> int:
    """aten's dim wrap without the 0-dim allowance (sym_size, sym_stride: a 0-dim tensor has no dims)."""
    if not -ndim <= dim < ndim:
        raise ShapeError(f"{op}: dimension {dim} is out of range for a tensor of rank {ndim}")
    return dim % ndim


def _window(x: Value, shape: Sequence[int], strides: Sequence[int], offset: int) -> Value:
    """One as_strided window in x's own layout: `strides` are storage strides and `offset`
    counts from x's storage offset."""
    return prims.as_strided(x, list(shape), list(strides), x.storage_offset + offset)


def _box(x: Value, starts: Sequence[int], stops: Sequence[int]) -> Value:
    """x[start0:stop0, start1:stop1, ...] (bounds already within each dim) as one window."""
    if tuple(starts) == (0,) * x.ndim and tuple(stops) == x.shape:
        return x
    strides = x.strides
    shape = [stop - start for start, stop in zip(starts, stops)]
    return _window(x, shape, strides, sum(start * stride for start, stride in zip(starts, strides)))


def _reshaped(x: Value, shape: Sequence[int]) -> Value:
    """x's row-major elements in `shape` (same numel), from view prims only: squeeze the size-1
    dims, merge/split each group of dims whose products match (collapse_view, split_dim), then
    insert the size-1 dims of `shape` (broadcast_in_dim)."""
    shape = tuple(shape)
    if len(x.shape) == len(shape) and all(map(same_size, x.shape, shape)):
        return x
    if any(map(is_symbolic, (*x.shape, *shape))):
        # The shapes differ in one place only: views right for every value of the symbols.
        between = _reshaped_between_common_dims(x, shape)
        if between is not None:
            return between
        if not _settles_grouping(x.shape, shape):
            # Which dims group together depends on the symbols' values: one reshape, right
            # for all.
            return prims.reshape(x, list(shape))
    if x.numel == 0:
        return prims.reshape(x, list(shape))  # nothing to view; split_dim cannot split a 0
    ones = [d for d, n in enumerate(x.shape) if n == 1]
    if ones:
        x = prims.squeeze(x, ones)
    sizes, target = x.shape, [n for n in shape if n != 1]
    position = i = j = 0
    while i < len(sizes):
        first_in, first_out = i, j
        have, want = sizes[i], target[j]
        while have != want:  # every size is >= 2 and the products agree, so this ends
            if have < want:
                i += 1
                have *= sizes[i]
            else:
                j += 1
                want *= target[j]
        if i > first_in:
            x = prims.collapse_view(x, position, position + i - first_in)
        for k in range(first_out, j):
            x = prims.split_dim(x, position, target[k])
            position += 1
        position, i, j = position + 1, i + 1, j + 1
    if x.shape != shape:
        x = prims.broadcast_in_dim(x, list(shape), [d for d, n in enumerate(shape) if n != 1])
    return x


def _reshaped_between_common_dims(x: Value, shape: tuple[Any, ...]) -> Value | None:
    """x viewed as `shape` by structure alone, right whatever the symbols' values (a size
    that may be 1 included): the dims both shapes have at either end (structurally the same
    size: the same dim, whatever its value) stay, and the dims between them are one dim split
    into several or several collapsed into one, each exact by structure, or size-1 dims
    removed or inserted (no decision on a size is taken); None for other shapes."""
    common = min(len(x.shape), len(shape))
    lead = 0
    while lead < common and same_size(x.shape[lead], shape[lead]):
        lead += 1
    trail = 0
    while trail < common - lead and same_size(x.shape[-1 - trail], shape[-1 - trail]):
        trail += 1
    have = x.shape[lead : len(x.shape) - trail]
    want = shape[lead : len(shape) - trail]
    if len(have) == 1 and len(want) > 1 and _splits_exactly(have[0], want):
        for position, outer in enumerate(want[:-1], start=lead):
            x = prims.split_dim(x, position, outer)
        return x
    if len(want) == 1 and len(have) > 1 and same_size(math.prod(have), want[0]):
        return prims.collapse_view(x, lead, lead + len(have) - 1)
    if not want and have and all(map(is_literal_one, have)):
        return prims.squeeze(x, list(range(lead, lead + len(have))))
    if not have and want and all(map(is_literal_one, want)):
        kept = [*range(lead), *range(lead + len(want), len(shape))]
        return prims.broadcast_in_dim(x, list(shape), kept)
    return None


def _splits_exactly(length: Any, sizes: Sequence[Any]) -> bool:
    """`length` is the product of `sizes` by structure, each split positive for every value in
    range: split_dim takes the outer sizes one by one, the last is what remains."""
    for outer in sizes[:-1]:
        if settled(outer <= 0) is not False:
            return False
        remainder = length % outer
        if type(remainder) is not int or remainder != 0:
            return False
        length = length // outer
    return same_size(length, sizes[-1])


def _settles_grouping(sizes: Sequence[Any], shape: Sequence[Any]) -> bool:
    """The ranges decide every comparison `_reshaped`'s grouping of dims makes (no check
    needed): no size may be 1 undecidedly, and the running products compare definitely."""
    if settled(math.prod(sizes) == 0) is not False:
        return False
    kept = []
    for dims in (sizes, shape):
        ones = [settled(n == 1) for n in dims]
        if None in ones:
            return False
        kept.append([n for n, one in zip(dims, ones) if not one])
    (have_sizes, want_sizes), i, j = kept, 0, 0
    while i < len(have_sizes):
        have, want = have_sizes[i], want_sizes[j]
        while True:
            equal = settled(have == want)
            if equal is None:
                return False
            if equal:
                break
            less = settled(have < want)
            if less is None:
                return False
            if less:
                i += 1
                have *= have_sizes[i]
            else:
                j += 1
                want *= want_sizes[j]
        i, j = i + 1, j + 1
    return True


def _inferred_size(op: str, size: Sequence[int], numel: int) -> tuple[int, ...]:
    """A view size with at most one -1, which takes whatever numel leaves."""
    unknown = [d for d, n in enumerate(size) if n == -1]
    if len(unknown) > 1 or any(n < -1 for n in size):
        raise ShapeError(
            f"{op}: invalid size {list(size)} (only one dimension may be -1, the rest >= 0)"
        )
    known = math.prod(n for n in size if n != -1)
    if not unknown:
        if known != numel:
            raise ShapeError(
                f"{op}: size {list(size)} does not hold the input's {numel} element(s)"
            )
        return tuple(size)
    if known == 0 or numel % known != 0:
        raise ShapeError(f"{op}: cannot infer the -1 of size {list(size)} for {numel} element(s)")
    return tuple(numel // known if n == -1 else n for n in size)


def _static(op: str, *values: Any) -> None:
    for value in values:
        if type(value) is Value:
            raise ShapeError(f"{op}: needs static values, got the run-time scalar {value!r}")


# -- views and shapes ----------------------------------------------------------------------------------


@register("aten.view.default")
def view(self: Value, size: Sequence[int]) -> Value:
    return _reshaped(self, _inferred_size("aten.view", size, self.numel))


@register("aten.permute.default")
def permute(self: Value, dims: Sequence[int]) -> Value:
    if len(dims) != self.ndim:
        raise ShapeError(f"aten.permute: {len(dims)} dims given for a tensor of rank {self.ndim}")
    order = _dims("aten.permute", dims, self.ndim)
    return self if order == tuple(range(self.ndim)) else prims.transpose(self, list(order))


@register("aten.expand.default")
def expand(self: Value, size: Sequence[int], implicit: bool) -> Value:
    new = len(size) - self.ndim
    if new < 0:
        raise ShapeError(f"aten.expand: {len(size)} sizes given for a tensor of rank {self.ndim}")
    shape = list(size)
    for d, n in enumerate(size):
        if d < new:
            if n < 0:
                raise ShapeError(
                    f"aten.expand: size {n} is not allowed for the new leading dimension {d}"
                )
            continue
        old = self.shape[d - new]
        if n == -1:
            shape[d] = old
        elif same_size(old, n) or (is_literal_one(old) and not n < 0):
            continue
        elif old != n and (old != 1 or n < 0):
            raise ShapeError(
                f"aten.expand: dimension {d - new} of size {old} cannot expand to {n} (size {list(size)})"
            )
    if new == 0 and all(map(same_size, shape, self.shape)):
        return self
    return prims.broadcast_in_dim(self, shape, list(range(new, len(shape))))


def _squeezed(x: Value, dims: Sequence[int]) -> Value:
    ones = sorted({d for d in dims if x.ndim > 0 and x.shape[d] == 1})
    return prims.squeeze(x, ones) if ones else x


@register("aten.squeeze.dim")
def squeeze_dim(self: Value, dim: int) -> Value:
    return _squeezed(self, [canonical_dim(dim, self.ndim)])


@register("aten.squeeze.dims")
def squeeze_dims(self: Value, dim: Sequence[int]) -> Value:
    return _squeezed(self, _dims("aten.squeeze.dims", dim, self.ndim))


@register("aten.unsqueeze.default")
def unsqueeze(self: Value, dim: int) -> Value:
    dim = canonical_dim(dim, self.ndim + 1)
    shape = list(self.shape)
    shape.insert(dim, 1)
    return prims.broadcast_in_dim(self, shape, [d for d in range(len(shape)) if d != dim])


@register("aten.slice.Tensor")
def slice_tensor(self: Value, dim: int, start: int | None, end: int | None, step: int) -> Value:
    if self.ndim == 0:
        raise ShapeError("aten.slice: cannot slice a 0-dim tensor")
    dim = canonical_dim(dim, self.ndim)
    first, last = slice_bounds("aten.slice", start, end, step, self.shape[dim])
    return slice_in_dim(self, first, last, step, dim)


@register("aten.select.int")
def select_int(self: Value, dim: int, index: int) -> Value:
    if self.ndim == 0:
        raise ShapeError("aten.select: cannot select from a 0-dim tensor")
    dim = canonical_dim(dim, self.ndim)
    size = self.shape[dim]
    if not -size <= index < size:
        raise ShapeError(
            f"aten.select: index {index} is out of range for dimension {dim} of size {size}"
        )
    strides = self.strides
    rest = [d for d in range(self.ndim) if d != dim]
    return _window(
        self,
        [self.shape[d] for d in rest],
        [strides[d] for d in rest],
        (index % size) * strides[dim],
    )


@register("aten.diagonal.default")
def diagonal(self: Value, offset: int, dim1: int, dim2: int) -> Value:
    first, second = canonical_dim(dim1, self.ndim), canonical_dim(dim2, self.ndim)
    if first == second:
        raise ShapeError(f"aten.diagonal: dim1 and dim2 are both dimension {first}")
    rows, columns = self.shape[first], self.shape[second]
    length = max(min(rows, columns - offset) if offset >= 0 else min(rows + offset, columns), 0)
    strides = self.strides
    rest = [d for d in range(self.ndim) if d not in (first, second)]
    start = offset * strides[second] if offset >= 0 else -offset * strides[first]
    return _window(
        self,
        [self.shape[d] for d in rest] + [length],
        [strides[d] for d in rest] + [strides[first] + strides[second]],
        start,
    )


@register("aten.view_as_real.default")
def view_as_real(self: Value) -> Value:
    """Not Core ATen (torch.export keeps it: `z.real`, `z.imag` select from it). The real and
    imaginary parts side by side in a new last dim of 2; the lowering gives the result the
    layout the graph declares (torch's view: every stride doubled, then 1)."""
    if not self.dtype.is_complex:
        raise DTypeError(f"aten.view_as_real: expected a complex tensor, got {self.dtype.name}")
    shape = [*self.shape, 1]
    kept = list(range(self.ndim))
    parts = [
        prims.broadcast_in_dim(part, shape, kept) for part in (prims.real(self), prims.imag(self))
    ]
    return prims.cat(parts, dim=self.ndim)


@register("aten.as_strided.default")
def as_strided(
    self: Value, size: Sequence[int], stride: Sequence[int], storage_offset: int | None
) -> Value:
    """A window into the storage self views, read through self's layout (its meta's strides
    and storage offset); no storage_offset keeps self's."""
    offset = self.storage_offset if storage_offset is None else storage_offset
    return prims.as_strided(self, list(size), list(stride), offset)


@register("aten.split_with_sizes.default")
def split_with_sizes(self: Value, split_sizes: Sequence[int], dim: int) -> tuple[Value, ...]:
    dim = canonical_dim(dim, self.ndim)
    if self.ndim == 0:
        raise ShapeError("aten.split_with_sizes: cannot split a 0-dim tensor")
    if any(n < 0 for n in split_sizes) or sum(split_sizes) != self.shape[dim]:
        raise ShapeError(
            f"aten.split_with_sizes: sizes {list(split_sizes)} must be non-negative and sum to dimension {dim}'s "
            f"size {self.shape[dim]}"
        )
    bounds = [0, *itertools.accumulate(split_sizes)]
    return tuple(
        slice_in_dim(self, start, stop, 1, dim) for start, stop in itertools.pairwise(bounds)
    )


def _legacy_empty(x: Value, rank: int) -> bool:
    """torch.cat skips 1-D tensors of size 0 whatever the other operands' shapes. Among
    operands of rank 1 (`rank`: the largest) keeping an empty one changes nothing, so a size
    that may be 0 (data-dependent) is kept without a decision."""
    if x.ndim != 1:
        return False
    if rank == 1:
        return bool(settled(x.shape[0] == 0))
    return bool(x.shape[0] == 0)


@register("aten.cat.default")
def cat(tensors: Sequence[Value], dim: int) -> Value:
    if not tensors:
        raise ShapeError("aten.cat: expected a non-empty list of tensors")
    if any(t.ndim == 0 for t in tensors):
        raise ShapeError("aten.cat: zero-dimensional tensors cannot be concatenated")
    dtype = result_type(*tensors)  # skipped operands still take part in promotion, as in torch
    rank = max(t.ndim for t in tensors)
    kept = [t for t in tensors if not _legacy_empty(t, rank)]
    if not kept:
        return convert(tensors[0], dtype)
    dim = canonical_dim(dim, kept[0].ndim)
    operands = [convert(t, dtype) for t in kept]
    return operands[0] if len(operands) == 1 else prims.cat(operands, dim)


@register("aten.flip.default")
def flip(self: Value, dims: Sequence[int]) -> Value:
    dims = _dims("aten.flip", dims, self.ndim)
    # Reversing a dim of length 0 or 1 changes nothing: skipped when the sizes settle that,
    # reversed otherwise (right at every size; a data-dependent length takes no check).
    flipped = [d for d in dims if self.ndim > 0 and not settled(self.shape[d] <= 1)]
    return prims.rev(self, flipped) if flipped else self


@register("aten.repeat.default")
def repeat(self: Value, repeats: Sequence[int]) -> Value:
    """Broadcast self into [r0, s0, r1, s1, ...] (a new dim before each one) and merge the pairs."""
    new = len(repeats) - self.ndim
    if new < 0 or any(r < 0 for r in repeats):
        raise ShapeError(
            f"aten.repeat: repeats {list(repeats)} must be non-negative, one per dimension at least (rank {self.ndim})"
        )
    sizes = (1,) * new + self.shape
    result = [r * s for r, s in zip(repeats, sizes)]
    # a shortcut only when the sizes settle it: the tiling is right for a count that may be 1
    if all(settled(r == 1) for r in repeats):
        return _reshaped(self, result)
    interleaved = [n for pair in zip(repeats, sizes) for n in pair]
    tiled = prims.broadcast_in_dim(self, interleaved, [2 * (new + d) + 1 for d in range(self.ndim)])
    return prims.reshape(tiled, result)


# -- padding -------------------------------------------------------------------------------------------


def _pad_widths(op: str, pad: Sequence[int], ndim: int) -> dict[int, tuple[int, int]]:
    """aten's pad list, last dimension first: {dim: (before, after)}."""
    if len(pad) % 2 != 0 or len(pad) > 2 * ndim:
        raise ShapeError(
            f"{op}: pad {list(pad)} must have an even length of at most {2 * ndim} (twice the rank)"
        )
    return {ndim - 1 - k: (pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)}


@register("aten.constant_pad_nd.default")
def constant_pad_nd(self: Value, pad: Sequence[int], value: Any) -> Value:
    """Crop the negative pads (one window), then write the result into a tensor of the fill
    value (one as_strided_scatter) if any pad is positive; torch fills nothing otherwise."""
    widths = _pad_widths("aten.constant_pad_nd", pad, self.ndim)
    starts, stops, before, out = [], [], [], []
    for d, size in enumerate(self.shape):
        low, high = widths.get(d, (0, 0))
        start, stop = max(-low, 0), size - max(-high, 0)
        if stop < start:
            raise ShapeError(
                f"aten.constant_pad_nd: pad {list(pad)} crops dimension {d} of size {size} below 0"
            )
        starts.append(start)
        stops.append(stop)
        before.append(max(low, 0))
        out.append(stop - start + max(low, 0) + max(high, 0))
    cropped = _box(self, starts, stops)
    if tuple(out) == cropped.shape:
        return cropped
    canvas = full(out, value, self.dtype)
    strides = row_major_strides(out)
    offset = sum(b * s for b, s in zip(before, strides))
    return row_major_window_scatter(
        canvas,
        cropped,
        list(cropped.shape),
        list(strides),
        0 if settled(cropped.numel == 0) else offset,  # the offset addresses nothing then
    )


def _reflected(x: Value, dim: int, before: int, after: int) -> tuple[Value | None, Value | None]:
    """x's elements mirrored about its first and last element (which are not repeated)."""
    size = x.shape[dim]
    left = prims.rev(slice_in_dim(x, 1, before + 1, 1, dim), [dim]) if before else None
    right = prims.rev(slice_in_dim(x, size - 1 - after, size - 1, 1, dim), [dim]) if after else None
    return left, right


def _replicated(x: Value, dim: int, before: int, after: int) -> tuple[Value | None, Value | None]:
    """x's first and last element repeated."""
    size = x.shape[dim]

    def edge(index: int, count: int) -> Value | None:
        if not count:
            return None
        shape = list(x.shape)
        shape[dim] = count
        return prims.broadcast_in_dim(
            slice_in_dim(x, index, index + 1, 1, dim), shape, list(range(x.ndim))
        )

    return edge(0, before), edge(size - 1, after)


def _edge_pad(op: str, x: Value, padding: Sequence[int], count: int, reflect: bool) -> Value:
    """Pad the last `count` dims of a rank count+1 or count+2 (batched) tensor by reflection or
    replication. Each dim is padded on its positive sides, then cropped on its negative ones:
    exactly torch's index map `out[j] = padded[j - before]`, and separable across dims."""
    non_batch = x.shape[1:] if x.ndim == count + 2 else x.shape  # a batch of 0 is allowed
    if x.ndim not in (count + 1, count + 2) or 0 in non_batch:
        raise ShapeError(
            f"{op}: expected a {count + 1}-D or {count + 2}-D (batched) tensor whose non-batch dimensions are "
            f"non-zero, got shape {list(x.shape)}"
        )
    if len(padding) != 2 * count:
        raise ShapeError(f"{op}: padding {list(padding)} must have {2 * count} entries")
    if x.dtype is DType.bool:
        raise DTypeError(f"{op}: bool tensors are not supported (as in torch)")
    widths = _pad_widths(op, padding, x.ndim)
    sizes = {dim: x.shape[dim] + before + after for dim, (before, after) in widths.items()}
    if any(n < 0 for n in sizes.values()) or not any(
        sizes.values()
    ):  # torch: some padded dim must stay >= 1
        raise ShapeError(
            f"{op}: padding {list(padding)} leaves the padded dimensions of {list(x.shape)} sized {sizes}"
        )
    for dim, (before, after) in widths.items():
        if reflect and (before >= x.shape[dim] or after >= x.shape[dim]):
            size = x.shape[dim]
            raise ShapeError(
                f"{op}: padding ({before}, {after}) must be less than dimension {dim}'s size {size}"
            )
    blocks = _reflected if reflect else _replicated
    for dim, (before, after) in widths.items():
        left, right = blocks(x, dim, max(before, 0), max(after, 0))
        pieces = [p for p in (left, x, right) if p is not None]
        padded = prims.cat(pieces, dim) if len(pieces) > 1 else x
        x = slice_in_dim(padded, max(-before, 0), padded.shape[dim] - max(-after, 0), 1, dim)
    return x


@register("aten.reflection_pad1d.default")
def reflection_pad1d(self: Value, padding: Sequence[int]) -> Value:
    return _edge_pad("aten.reflection_pad1d.default", self, padding, 1, reflect=True)


@register("aten.reflection_pad2d.default")
def reflection_pad2d(self: Value, padding: Sequence[int]) -> Value:
    return _edge_pad("aten.reflection_pad2d.default", self, padding, 2, reflect=True)


@register("aten.reflection_pad3d.default")
def reflection_pad3d(self: Value, padding: Sequence[int]) -> Value:
    return _edge_pad("aten.reflection_pad3d.default", self, padding, 3, reflect=True)


@register("aten.replication_pad2d.default")
def replication_pad2d(self: Value, padding: Sequence[int]) -> Value:
    return _edge_pad("aten.replication_pad2d.default", self, padding, 2, reflect=False)


@register("aten.replication_pad3d.default")
def replication_pad3d(self: Value, padding: Sequence[int]) -> Value:
    return _edge_pad("aten.replication_pad3d.default", self, padding, 3, reflect=False)


# -- creation ------------------------------------------------------------------------------------------


def _dtype_of_scalar(value: Any) -> DType:
    """torch's dtype for a fill value when none is given: bool, int64, default float, its complex."""
    kind = scalar_kind(value)
    if kind is None:
        raise DTypeError(f"expected a number as the fill value, got {value!r}")
    return {
        bool: DType.bool,
        int: DType.int64,
        float: DEFAULT_FLOAT,
        complex: DEFAULT_FLOAT.to_complex,
    }[kind]


@register("aten.full.default")
def full_default(
    size: Sequence[int],
    fill_value: Any,
    dtype: DType | None,
    layout: Any,
    device: Any,
    pin_memory: bool | None,
) -> Value:
    return full(size, fill_value, _dtype_of_scalar(fill_value) if dtype is None else dtype)


@register("aten.full_like.default")
def full_like(
    self: Value,
    fill_value: Any,
    dtype: DType | None,
    layout: Any,
    device: Any,
    pin_memory: bool | None,
    memory_format: MemoryFormat | None,
) -> Value:
    dtype = self.dtype if dtype is None else dtype
    return prims.full_like(self, fill_value, dtype=dtype, device=CPU, requires_grad=False)


@register("aten.empty.memory_format")
def empty_memory_format(
    size: Sequence[int],
    dtype: DType | None,
    layout: Any,
    device: Any,
    pin_memory: bool | None,
    memory_format: MemoryFormat | None,
) -> Value:
    dtype = DEFAULT_FLOAT if dtype is None else dtype
    if memory_format in (MemoryFormat.channels_last, MemoryFormat.channels_last_3d):
        shape = tuple(size)
        strides = list(format_strides(shape, contiguous_strides(shape), memory_format))
        return prims.empty_strided(
            list(size), strides, dtype=dtype, device=CPU, requires_grad=False
        )
    return prims.empty(list(size), dtype=dtype, device=CPU, requires_grad=False)


@register("aten.empty_permuted.default")
def empty_permuted(
    size: Sequence[int],
    physical_layout: Sequence[int],
    dtype: DType | None = None,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    """Not Core ATen: `empty` (the physical order of dims changes no value of a functional
    tensor)."""
    if sorted(physical_layout) != list(range(len(size))):
        raise ShapeError(
            f"aten.empty_permuted: physical_layout {list(physical_layout)} is not a permutation "
            f"of the {len(size)} dims"
        )
    return prims.empty(
        list(size), dtype=DEFAULT_FLOAT if dtype is None else dtype, device=CPU, requires_grad=False
    )


@register("aten.empty_strided.default")
def empty_strided(
    size: Sequence[int],
    stride: Sequence[int],
    dtype: DType | None,
    layout: Any,
    device: Any,
    pin_memory: bool | None,
) -> Value:
    dtype = DEFAULT_FLOAT if dtype is None else dtype
    return prims.empty_strided(
        list(size), list(stride), dtype=dtype, device=CPU, requires_grad=False
    )


_ARANGE_DTYPES = frozenset(d for d in DType if d.is_integer or d.is_floating)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _as_int64(op: str, value: bool | int | float) -> int:
    """c10's Scalar.to<int64_t>(): truncation toward zero, with an overflow check."""
    whole = math.trunc(value)
    if not _INT64_MIN <= whole <= _INT64_MAX:
        raise DTypeError(f"{op}: {value!r} cannot be converted to int64 without overflow")
    return whole


def _truncating_division(a: int, b: int) -> int:
    """C++'s integer division (rounds toward zero)."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _arange_length(
    start: bool | int | float, end: bool | int | float, step: bool | int | float, dtype: DType
) -> int:
    """ATen's compute_arange_size: checked in double; counted in double, except for int64 results,
    counted in int64 with start/end/step truncated to int64."""
    op = "aten.arange"
    if float(step) == 0:
        raise ShapeError(f"{op}: step must be nonzero")
    if not (math.isfinite(float(start)) and math.isfinite(float(end))):
        raise ShapeError(f"{op}: unsupported range {start} -> {end}")
    if (float(step) > 0 and float(end) < float(start)) or (
        float(step) < 0 and float(end) > float(start)
    ):
        raise ShapeError(
            f"{op}: the bounds {start} -> {end} are inconsistent with the sign of step {step}"
        )
    if dtype is DType.int64:
        first, last, stride = (_as_int64(op, v) for v in (start, end, step))
        if stride == 0:
            raise ShapeError(f"{op}: step {step} truncates to 0 in int64")
        sign = 1 if stride > 0 else -1
        return _truncating_division(last - first + stride - sign, stride)
    length = math.ceil((float(end) - float(start)) / float(step))
    if not 0 <= length <= _INT64_MAX:
        raise ShapeError(f"{op}: invalid size {length}")
    return length


@register("aten.arange.start_step")
def arange_start_step(
    start: Any,
    end: Any,
    step: Any,
    dtype: DType | None,
    layout: Any,
    device: Any,
    pin_memory: bool | None,
) -> Value:
    """Values start + i*step computed in the accumulation type (int64 for integers, double for
    float32/float64, float32 for float16/bfloat16), then cast, as ATen's CPU kernel does."""
    _static("aten.arange", start, end, step)
    if any(is_symbolic(v) for v in (start, end, step)):
        return _symbolic_arange(start, end, step, dtype)
    if any(type(v) is complex for v in (start, end, step)):
        raise DTypeError("aten.arange: complex start, end or step are not supported")
    if dtype is None:
        dtype = (
            DType.int64
            if all(type(v) in (bool, int) for v in (start, end, step))
            else DEFAULT_FLOAT
        )
    if dtype not in _ARANGE_DTYPES:
        raise DTypeError(
            f"aten.arange: dtype {dtype.short} is not supported (integer and floating dtypes only)"
        )
    length = _arange_length(start, end, step, dtype)
    if dtype.is_integer:
        first, stride = _as_int64("aten.arange", start), _as_int64("aten.arange", step)
        if (
            stride == 0
        ):  # a fractional step truncates to 0: torch repeats start (the count used the real step)
            return convert(full([length], first, DType.int64), dtype)
        return prims.iota(
            length, start=first, step=stride, dtype=dtype, device=CPU, requires_grad=False
        )
    accumulate = DType.float32 if dtype.is_low_precision else DType.float64
    ramp = convert(iota(length), accumulate)
    return convert(prims.add(prims.mul(ramp, float(step)), float(start)), dtype)


def _triangle_indices(
    op: str, row: int, col: int, offset: int, dtype: DType | None, lower: bool
) -> Value:
    """The [2, count] coordinates of a row × col matrix's lower (j - i <= offset) or upper
    (j - i >= offset) triangle, in row-major order: `nonzero` of that mask, whose element count
    is known from the arguments alone."""
    dtype = DType.int64 if dtype is None else dtype
    if dtype not in (DType.int32, DType.int64):
        raise DTypeError(f"{op}: dtype {dtype.short} is not supported (int32 or int64)")
    if row < 0 or col < 0:
        raise ShapeError(f"{op}: row and col must be non-negative, got {row} and {col}")

    def in_row(i: int) -> int:  # the number of columns j of row i inside the triangle
        if lower:
            return min(max(i + offset + 1, 0), col)
        return col - min(max(i + offset, 0), col)

    count = sum(in_row(i) for i in range(row))
    if count == 0:
        return full([2, 0], 0, dtype)
    shape = [row, col]
    difference = prims.sub(index_ramp(shape, 1), index_ramp(shape, 0))
    mask = prims.le(difference, offset) if lower else prims.ge(difference, offset)
    coordinates = prims.nonzero(mask, count)  # int64[count, 2]
    return convert(prims.transpose(coordinates, [1, 0]), dtype)


@register("aten.native_channel_shuffle.default")
def native_channel_shuffle(self: Value, groups: int) -> Value:
    """Not Core ATen (F.channel_shuffle): [N, C, *] seen as [N, groups, C/groups, *], the two
    group dims swapped, seen as [N, C, *] again."""
    op = "aten.native_channel_shuffle"
    if self.ndim < 3:
        raise ShapeError(f"{op}: expected at least 3 dims, got shape {list(self.shape)}")
    channels = self.shape[1]
    if groups <= 0 or channels % groups:
        raise ShapeError(f"{op}: {channels} channels cannot be split into {groups} groups")
    if groups == 1 or self.numel == 0:
        return self
    split = prims.split_dim(self, 1, groups)  # [N, groups, C/groups, *]
    order = [0, 2, 1, *range(3, split.ndim)]
    return prims.reshape(prims.transpose(split, order), list(self.shape))


@register("aten.tril_indices.default")
def tril_indices(
    row: int,
    col: int,
    offset: int = 0,
    dtype: DType | None = DType.int64,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    """Not Core ATen (torch.export keeps it)."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, lower=True)


@register("aten.triu_indices.default")
def triu_indices(
    row: int,
    col: int,
    offset: int = 0,
    dtype: DType | None = DType.int64,
    layout: Any = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    """Not Core ATen (torch.export keeps it)."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, lower=False)


def _symbolic_arange(start: Any, end: Any, step: Any, dtype: DType | None) -> Value:
    """arange over integer bounds some of which are symbolic sizes (`arange(x.shape[1])`)."""
    if any(type(v) not in (bool, int) and not is_symbolic(v) for v in (start, end, step)):
        raise ShapeError(
            f"aten.arange: symbolic bounds with non-integer ones ({start}, {end}, {step}) are "
            "not supported"
        )
    if type(step) is not int or step == 0:
        raise ShapeError(
            f"aten.arange: with symbolic bounds the step must be a nonzero int, got {step}"
        )
    dtype = DType.int64 if dtype is None else dtype
    if dtype not in _ARANGE_DTYPES:
        raise DTypeError(f"aten.arange: dtype {dtype.short} is not supported")
    span = end - start if step > 0 else start - end
    count = (span + abs(step) - 1) // abs(step)
    # A bound read from data has no example to decide the sign by: exact, as a max.
    length: Any = sym_max(0, count) if data_dependent(count) else max(0, count)
    if dtype.is_integer:
        ramp = prims.iota(
            length, start=start, step=step, dtype=DType.int64, device=CPU, requires_grad=False
        )
        return convert(ramp, dtype)
    accumulate = DType.float32 if dtype.is_low_precision else DType.float64
    ramp = convert(iota(length), accumulate)
    return convert(prims.add(prims.mul(ramp, step), start), dtype)


@register("aten.resize_.default")
def resize_(self: Value, size: Sequence[int], memory_format: MemoryFormat | None) -> Value:
    """Functional resize_: a tensor of `size` whose leading elements (row-major) are self's; the
    elements past self's numel are undefined in torch and come out of prims.empty here."""
    if any(n < 0 for n in size):
        raise ShapeError(f"aten.resize_: size {list(size)} must be non-negative")
    numel = math.prod(size)
    if tuple(size) == self.shape:
        return self
    if numel <= self.numel:
        return row_major_window(self, size, row_major_strides(size), 0)
    flat = _reshaped(self, [self.numel])
    tail = prims.empty([numel - self.numel], dtype=self.dtype, device=CPU, requires_grad=False)
    return _reshaped(prims.cat([flat, tail], 0), size)


# -- metadata (folded to constants for static shapes) ----------------------------------------------------


@register("aten.sym_size.int")
def sym_size_int(self: Value, dim: int) -> int:
    return self.shape[_strict_dim("aten.sym_size", dim, self.ndim)]


@register("aten.sym_stride.int")
def sym_stride_int(self: Value, dim: int) -> int:
    """The stride torch's tensor has: the value's meta carries its layout."""
    return self.strides[_strict_dim("aten.sym_stride", dim, self.ndim)]


@register("aten.sym_numel.default")
def sym_numel(self: Value) -> int:
    return self.numel


@register("aten.sym_storage_offset.default")
def sym_storage_offset(self: Value) -> int:
    return self.storage_offset


# torch's channels-last checks walk the dims innermost-first in this order.
_CHANNELS_LAST_ORDER = {
    MemoryFormat.channels_last: (4, (1, 3, 2, 0)),
    MemoryFormat.channels_last_3d: (5, (1, 4, 3, 2, 0)),
}


@register("aten.sym_is_contiguous.default")
def sym_is_contiguous(self: Value, memory_format: MemoryFormat) -> bool:
    """Whether the value's strides are contiguous in `memory_format`."""
    if memory_format is MemoryFormat.contiguous_format:
        return is_contiguous(self.shape, self.strides)
    if memory_format not in _CHANNELS_LAST_ORDER:
        raise ShapeError(
            f"aten.sym_is_contiguous: memory format {memory_format} is not supported (as in torch)"
        )
    rank, order = _CHANNELS_LAST_ORDER[memory_format]
    if self.ndim != rank:
        return False
    strides = self.strides
    expected = 1
    for d in order:
        if self.shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= self.shape[d]
    return True
