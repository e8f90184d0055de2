"""Family S: gather/scatter, index/index_put, embeddings (embedding, embedding bags, the embedding
gradient), select/slice/masked scatters, sorting, topk, nonzero and random ops.

Every op that reads or writes elements at computed positions becomes one `prims.gather_nd` or
`prims.scatter_nd` (prims/indexing.py): the rule builds one int index tensor per dimension of the
source — the op's own index where it has one, an iota "ramp" elsewhere — all broadcast to the
result's shape (broadcasts are views, so ramps cost nothing). Sorting is `prims.sort`, the data-
dependent shapes of `nonzero` and boolean-mask indexing take the size the graph declares
(`prims.nonzero` checks it when run), and random ops draw from `prims.uniform`/`prims.normal`.
docs/decompositions.md ("Family S: indexing, scatter, random, sorting") lists the choices.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import same_size, settled
from aten2prims.ir.values import CPU, Layout, TensorMeta, Value
from aten2prims.promotion import (
    DEFAULT_FLOAT,
    broadcast_shapes,
    broadcast_to,
    convert,
    convert_number,
    elementwise,
    opmath_dtype,
)
from prims.misc import dtype_limits

from .common import (
    FLOATS,
    INDEX_DTYPES,
    along,
    canonical_dim,
    check_dtype,
    full,
    index_ramp,
    iota,
    row_major_strides,
    row_major_window,
    row_major_window_scatter,
    slice_bounds,
    slice_in_dim,
)
from .registry import aten, declared_result_metas, register

MASK_DTYPES = (DType.bool, DType.uint8)


# -- index tensors ------------------------------------------------------------------------------------


def _place(index: Value, shape: Sequence[int], first: int) -> Value:
    """`index` broadcast to `shape`, its dims landing on shape[first:first + index.ndim]."""
    shape = tuple(shape)
    if len(index.shape) == len(shape) and all(map(same_size, index.shape, shape)):
        return index  # (compared by structure: a broadcast is right whatever the sizes)
    return prims.broadcast_in_dim(index, list(shape), list(range(first, first + index.ndim)))


def _index_operand(op: str, index: Value) -> Value:
    """An integer index as int32/int64 (others are converted: torch accepts them only when empty)."""
    if not index.dtype.is_integer:
        raise DTypeError(f"{op}: index tensors must have an integer dtype, got {index.dtype.short}")
    return index if index.dtype in INDEX_DTYPES else convert(index, DType.int64)


def _wrap_negative(index: Value, size: int) -> Value:
    """index + size where index < 0 (aten's indexing ops count negative indices from the end)."""
    return prims.where(prims.lt(index, 0), prims.add(index, size), index)


def _gather(source: Value, coordinates: Sequence[Value]) -> Value:
    """gather_nd, also from a 0-dim source (read as its one element, at coordinate 0)."""
    if source.ndim == 0:
        source = prims.reshape(source, [1])
    return prims.gather_nd(source, list(coordinates))


def _scatter(
    target: Value, coordinates: Sequence[Value], values: Value, reduce: str | None
) -> Value:
    """scatter_nd, also into a 0-dim target (written as its one element, at coordinate 0)."""
    if target.ndim == 0:
        return prims.reshape(
            prims.scatter_nd(prims.reshape(target, [1]), list(coordinates), values, reduce), []
        )
    return prims.scatter_nd(target, list(coordinates), values, reduce)


# -- gather, index_select, embedding ----------------------------------------------------------------------


def _check_dim_sizes(op: str, index: Value, other: Value, what: str, skip: int | None) -> None:
    """torch's rule for gather/scatter: index.size(d) <= other.size(d) (except along `skip`)."""
    index_shape = index.shape or (1,)
    other_shape = other.shape or (1,)
    if len(index_shape) != len(other_shape):
        raise ShapeError(
            f"{op}: index has {index.ndim} dimension(s), {what} has {other.ndim}; they must match"
        )
    for d, (n, m) in enumerate(zip(index_shape, other_shape)):
        if d != skip and n > m:
            raise ShapeError(
                f"{op}: index has shape {list(index.shape)}, larger than {what}'s {list(other.shape)} in dimension {d}"
            )


def _along_dim_coordinates(index: Value, dim: int, ndim: int) -> list[Value]:
    """The coordinates of gather/scatter: index along `dim`, each position's own coordinate elsewhere."""
    return [index if d == dim else index_ramp(index.shape, d) for d in range(ndim)]


@register("aten.gather.default")
def gather(self: Value, dim: int, index: Value, sparse_grad: bool = False) -> Value:
    d = canonical_dim(dim, self.ndim)
    if settled(index.numel == 0):  # torch checks nothing else then
        return full(index.shape, convert_number(0, self.dtype), self.dtype)
    index = _index_operand("gather", index)
    _check_dim_sizes("gather", index, self, "self", d)
    if self.ndim == 0:
        return _gather(self, [index])
    return prims.gather_nd(self, _along_dim_coordinates(index, d, self.ndim))


@register("aten.index_select.default")
def index_select(self: Value, dim: int, index: Value) -> Value:
    d = canonical_dim(dim, self.ndim)
    index = _index_operand("index_select", index)
    if index.ndim > 1:
        raise ShapeError(
            f"index_select: index must be 0- or 1-dimensional, got shape {list(index.shape)}"
        )
    if self.ndim == 0:  # a 0-dim self gives a 0-dim result
        return _gather(self, [prims.reshape(index, [])])
    shape = list(self.shape)
    shape[d] = index.numel
    flat = index if index.ndim == 1 else prims.reshape(index, [1])
    coordinates = [
        prims.broadcast_in_dim(flat, shape, [d]) if k == d else index_ramp(shape, k)
        for k in range(self.ndim)
    ]
    return prims.gather_nd(self, coordinates)


@register("aten.embedding.default")
def embedding(
    weight: Value,
    indices: Value,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Value:
    # padding_idx, scale_grad_by_freq and sparse only shape the gradient: the forward is a row lookup.
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-dimensional, got shape {list(weight.shape)}")
    indices = _index_operand("embedding", indices)
    shape = (*indices.shape, weight.shape[1])
    return prims.gather_nd(weight, [_place(indices, shape, 0), index_ramp(shape, len(shape) - 1)])


# -- embedding bags, embedding gradient ------------------------------------------------------------

_SUM, _MEAN, _MAX = 0, 1, 2


def _bag_of_each_index(offsets: Value, bags: int, count: int) -> Value:
    """offset2bag: the bag each of `count` indices belongs to (int64). Bag b starts at
    offsets[b] and runs to the next start; the last one runs to the end of the indices (also
    with include_last_offset, whose last offset torch's offset2bag ignores). A 1 at each later
    bag's start, summed from the left, counts the starts at or before each position."""
    if bags <= 1 or count == 0:
        return full([count], 0, DType.int64)
    starts = convert(slice_in_dim(offsets, 1, bags, 1, 0), DType.int64)
    marks = prims.scatter_nd(
        full([count + 1], 0, DType.int64), [starts], full([bags - 1], 1, DType.int64), "sum"
    )
    return slice_in_dim(aten.cumsum.default(marks, 0), 0, count, 1, 0)


@register("aten._embedding_bag.default")
def _embedding_bag(
    weight: Value,
    indices: Value,
    offsets: Value,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: Value | None = None,
    include_last_offset: bool = False,
    padding_idx: int = -1,
) -> tuple[Value, Value, Value, Value]:
    """(output, offset2bag, bag_size, max_indices) with the contents torch's CPU kernel gives
    them. Bags reduce the weight rows their indices select, skipping padding_idx (< 0: none):
    sum (times per_sample_weights), mean (empty bags 0), max (empty bags 0). The auxiliary results:

    - offset2bag: each index's bag, but empty ([0]) where torch's fast sum path skips it (a
      float32/float16/bfloat16 weight, mode sum, no padding_idx);
    - bag_size: the non-padding count of each bag for mean and max, zeros for sum;
    - max_indices: zeros[bags] for sum, bag_size for mean, for max the weight row each maximum
      came from (0 in empty bags).

    They are int32 when indices and offsets both are, else int64. scale_grad_by_freq and sparse
    only shape the gradient."""
    op = "aten._embedding_bag"
    check_dtype(op, weight, FLOATS, "weight")
    if weight.ndim != 2:
        raise ShapeError(f"{op}: expected a 2-D weight, got shape {list(weight.shape)}")
    for name, x in (("indices", indices), ("offsets", offsets)):
        if x.ndim != 1 or x.dtype not in INDEX_DTYPES:
            raise ShapeError(
                f"{op}: expected 1-D int32/int64 {name}, got {x.dtype.short}{list(x.shape)}"
            )
    if mode not in (_SUM, _MEAN, _MAX):
        raise ShapeError(f"{op}: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}")
    if per_sample_weights is not None:
        if mode != _SUM:
            raise ShapeError(
                f"{op}: per_sample_weights are only supported with mode 0 (sum), got mode {mode}"
            )
        if (
            per_sample_weights.shape != indices.shape
            or per_sample_weights.dtype is not weight.dtype
        ):
            raise ShapeError(
                f"{op}: expected per_sample_weights {weight.dtype.short}{list(indices.shape)}, got "
                f"{per_sample_weights.dtype.short}{list(per_sample_weights.shape)}"
            )
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    if bags < 0:
        raise ShapeError(f"{op}: include_last_offset needs at least one offset")
    aux = DType.int32 if indices.dtype is offsets.dtype is DType.int32 else DType.int64
    count, width = indices.shape[0], weight.shape[1]
    bag = _bag_of_each_index(offsets, bags, count)
    kept = prims.ne(indices, padding_idx) if padding_idx >= 0 else None
    shape = [count, width]
    columns = index_ramp(shape, 1)
    rows = prims.gather_nd(weight, [along(indices, shape, [0]), columns])
    slots = [along(bag, shape, [0]), columns]  # where each element of rows lands
    if mode == _MAX:
        output, max_indices = _bag_max(rows, indices, bag, kept, slots, bags)
        sizes = _bag_sizes(bag, kept, bags)
    else:
        compute = opmath_dtype(weight.dtype)
        values = convert(rows, compute)
        if per_sample_weights is not None:
            values = prims.mul(values, along(convert(per_sample_weights, compute), shape, [0]))
        if kept is not None:
            values = prims.where(along(kept, shape, [0]), values, 0.0)
        total = prims.scatter_nd(full([bags, width], 0.0, compute), slots, values, "sum")
        if mode == _MEAN:
            sizes = _bag_sizes(bag, kept, bags)
            divisor = prims.maximum(
                convert(sizes, compute), full([], 1.0, compute)
            )  # empty bags stay 0
            output = convert(prims.div(total, along(divisor, total.shape, [0])), weight.dtype)
            max_indices = sizes
        else:
            output = convert(total, weight.dtype)
            sizes = max_indices = full([bags], 0, DType.int64)
    fast_sum = mode == _SUM and padding_idx < 0 and weight.dtype is not DType.float64
    offset2bag = full([0], 0, aux) if fast_sum else convert(bag, aux)
    return output, offset2bag, convert(sizes, aux), convert(max_indices, aux)


@register("aten._embedding_bag_forward_only.default")
def _embedding_bag_forward_only(
    weight: Value,
    indices: Value,
    offsets: Value,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: Value | None = None,
    include_last_offset: bool = False,
    padding_idx: int = -1,
) -> tuple[Value, Value, Value, Value]:
    """Not Core ATen: what embedding_bag runs when the weight needs no gradient. The results of
    `_embedding_bag`, except for the lengths of bag_size and max_indices with
    include_last_offset, where torch's meta function and CPU kernel disagree: in mode sum the
    kernel returns zeros of the offsets' length for both (the meta function declares
    max_indices one per bag); in modes mean and max the meta function declares a bag_size of
    the offsets' length where the kernel returns one count per bag. We give the kernel's
    values, cut or padded with zeros to the length the graph declares."""
    output, offset2bag, sizes, max_indices = _embedding_bag(
        weight,
        indices,
        offsets,
        scale_grad_by_freq,
        mode,
        sparse,
        per_sample_weights,
        include_last_offset,
        padding_idx,
    )
    if mode == _SUM:
        sizes = max_indices = full([offsets.shape[0]], 0, sizes.dtype)
    declared = declared_result_metas()
    return (
        output,
        offset2bag,
        _to_declared_length(sizes, declared[2]),
        _to_declared_length(max_indices, declared[3]),
    )


def _to_declared_length(x: Value, declared: Any) -> Value:
    """A 1-D x cut to, or padded with zeros to, the length of a declared 1-D tensor."""
    if type(declared) is not TensorMeta or x.ndim != 1 or len(declared.shape) != 1:
        return x
    length = declared.shape[0]
    if length <= x.shape[0]:
        return slice_in_dim(x, 0, length, 1, 0)
    return prims.cat([x, full([length - x.shape[0]], 0, x.dtype)], 0)


def _bag_sizes(bag: Value, kept: Value | None, bags: int) -> Value:
    """The number of non-padding indices in each bag (int64)."""
    ones = full(bag.shape, 1, DType.int64) if kept is None else convert(kept, DType.int64)
    return prims.scatter_nd(full([bags], 0, DType.int64), [bag], ones, "sum")


def _bag_max(
    rows: Value, indices: Value, bag: Value, kept: Value | None, slots: list[Value], bags: int
) -> tuple[Value, Value]:
    """The max of each bag and the weight row it came from, as torch's sequential scan: the first
    element starts the bag, a later one replaces it only when strictly greater, so a leading NaN
    wins, later NaNs are ignored and ties keep the first. Positions past the data (count) mark
    "no element"."""
    count, width = rows.shape
    shape = [bags, width]
    if count == 0:
        return full(shape, 0.0, rows.dtype), full(shape, 0, DType.int64)
    valid = full(rows.shape, True, DType.bool) if kept is None else along(kept, rows.shape, [0])
    position = index_ramp(rows.shape, 0)
    first = prims.scatter_nd(
        full([bags], count, DType.int64), [bag], _first_candidates(kept, count), "amin"
    )
    present = prims.lt(first, count)
    leading = prims.gather_nd(
        rows, [along(prims.where(present, first, 0), shape, [0]), index_ramp(shape, 1)]
    )
    not_nan = prims.eq(rows, rows)
    finite_best = prims.scatter_nd(
        full(shape, -math.inf, rows.dtype),
        slots,
        prims.where(prims.bitwise_and(valid, not_nan), rows, -math.inf),
        "amax",
    )
    best = prims.where(prims.ne(leading, leading), leading, finite_best)
    at_bag = prims.gather_nd(best, slots)
    hit = prims.bitwise_or(
        prims.eq(rows, at_bag), prims.bitwise_and(prims.ne(rows, rows), prims.ne(at_bag, at_bag))
    )
    where_best = prims.scatter_nd(
        full(shape, count, DType.int64),
        slots,
        prims.where(prims.bitwise_and(valid, hit), position, count),
        "amin",
    )
    has = along(present, shape, [0])
    source = prims.gather_nd(indices, [prims.where(has, where_best, 0)])
    output = prims.where(has, best, 0.0)
    return output, prims.where(has, convert(source, DType.int64), 0)


def _first_candidates(kept: Value | None, count: int) -> Value:
    """Each index's position, or `count` (no element) where it is padding."""
    ramp = iota(count)
    return ramp if kept is None else prims.where(kept, ramp, count)


@register("aten.embedding_dense_backward.default")
def embedding_dense_backward(
    grad_output: Value, indices: Value, num_weights: int, padding_idx: int, scale_grad_by_freq: bool
) -> Value:
    """The weight gradient of embedding: each row of grad_output added into the row its index
    names (in opmath), except for padding_idx (< 0: none). scale_grad_by_freq multiplies each row
    by 1/count of its index rounded to grad_output's dtype, as torch's kernel does, so integer
    gradients keep the rows of indices that occur once and zero the others."""
    op = "aten.embedding_dense_backward"
    if indices.dtype not in INDEX_DTYPES:
        raise DTypeError(f"{op}: expected int32/int64 indices, got {indices.dtype.short}")
    if grad_output.ndim != indices.ndim + 1 or grad_output.shape[:-1] != indices.shape:
        raise ShapeError(
            f"{op}: expected grad_output of shape {[*indices.shape, '*']} for indices of shape {list(indices.shape)}, "
            f"got {list(grad_output.shape)}"
        )
    count, width = indices.numel, grad_output.shape[-1]
    compute = opmath_dtype(grad_output.dtype)
    shape = [count, width]
    grads = convert(prims.reshape(grad_output, shape), compute)
    flat = prims.reshape(indices, [count])
    if scale_grad_by_freq:
        frequency = prims.scatter_nd(
            full([num_weights], 0, DType.int64), [flat], full([count], 1, DType.int64), "sum"
        )
        reciprocal = prims.reciprocal(convert(prims.gather_nd(frequency, [flat]), DType.float64))
        scale = convert(convert(reciprocal, grad_output.dtype), compute)
        grads = prims.mul(grads, along(scale, shape, [0]))
    if padding_idx >= 0:
        grads = prims.where(
            along(prims.ne(flat, padding_idx), shape, [0]), grads, full([], 0, compute)
        )
    slots = [along(flat, shape, [0]), index_ramp(shape, 1)]
    total = prims.scatter_nd(full([num_weights, width], 0, compute), slots, grads, "sum")
    return convert(total, grad_output.dtype)


# -- index, index_put: advanced indexing --------------------------------------------------------------------


@attrs.frozen
class _Layout:
    """Where advanced indexing puts things: the result's shape, where the broadcast shape of the
    index tensors lands in it, and where each sliced (None) dimension of self lands."""

    shape: tuple[int, ...]
    broadcast_start: int
    broadcast_shape: tuple[int, ...]
    sliced_positions: dict[int, int]


def _layout(self_shape: Sequence[int], index_shapes: Sequence[tuple[int, ...] | None]) -> _Layout:
    """torch's (and NumPy's) rule: the broadcast index dims replace the indexed dims in place when
    the indexed dims are adjacent, and go first otherwise."""
    advanced = [d for d, s in enumerate(index_shapes) if s is not None]
    broadcast = (
        tuple(broadcast_shapes(*(s for s in index_shapes if s is not None))) if advanced else ()
    )
    sliced = [d for d, s in enumerate(index_shapes) if s is None]
    adjacent = bool(advanced) and advanced == list(range(advanced[0], advanced[-1] + 1))
    start = advanced[0] if adjacent else 0
    positions: dict[int, int] = {}
    for d in sliced:
        if adjacent and d < start:
            positions[d] = d
        elif adjacent:
            positions[d] = d - len(advanced) + len(broadcast)
        else:
            positions[d] = len(broadcast) + sliced.index(d)
    shape = [0] * (len(sliced) + len(broadcast))
    for d, position in positions.items():
        shape[position] = self_shape[d]
    shape[start : start + len(broadcast)] = broadcast
    return _Layout(tuple(shape), start, broadcast, positions)


@attrs.frozen
class _Entry:
    """One entry of an index list: an integer index for one dim, or a mask over `mask.ndim` dims."""

    dim: int
    index: Value | None = None
    mask: Value | None = None


def _entries(op: str, self: Value, indices: Sequence[Value | None]) -> list[_Entry]:
    if all(entry is None for entry in indices):
        raise ShapeError(f"{op}: at least one index tensor must be given")
    entries: list[_Entry] = []
    dim = 0
    for entry in indices:
        if entry is None:
            dim += 1
            continue
        if entry.dtype in MASK_DTYPES:
            if entry.ndim == 0:
                raise ShapeError(f"{op}: a 0-dimensional boolean index is not supported")
            covered = self.shape[dim : dim + entry.ndim]
            if tuple(covered) != entry.shape:
                raise ShapeError(
                    f"{op}: the mask of shape {list(entry.shape)} does not match the indexed shape {list(covered)} "
                    f"of self (shape {list(self.shape)}) at dimension {dim}"
                )
            entries.append(_Entry(dim, mask=entry))
            dim += entry.ndim
        else:
            entries.append(_Entry(dim, index=_index_operand(op, entry)))
            dim += 1
    if dim > self.ndim:
        raise ShapeError(f"{op}: too many indices for a tensor of shape {list(self.shape)}")
    return entries


def _index_shapes(
    self: Value, entries: Sequence[_Entry], count: int
) -> list[tuple[int, ...] | None]:
    """Per dim of self: the shape of its index tensor (a mask's coordinates have shape (count,))."""
    shapes: list[tuple[int, ...] | None] = [None] * self.ndim
    for entry in entries:
        if entry.mask is not None:
            for k in range(entry.mask.ndim):
                shapes[entry.dim + k] = (count,)
        else:
            assert entry.index is not None
            shapes[entry.dim] = entry.index.shape
    return shapes


def _mask_count_position(self: Value, entries: Sequence[_Entry]) -> int | None:
    """Where a mask's element count lands in the result shape (None without masks). It does not
    depend on the count itself, so a layout with count 1 finds it."""
    if not any(e.mask is not None for e in entries):
        return None
    layout = _layout(self.shape, _index_shapes(self, entries, 1))
    return layout.broadcast_start + len(layout.broadcast_shape) - 1


def _coordinates(self: Value, entries: Sequence[_Entry], count: int) -> tuple[_Layout, list[Value]]:
    """The layout of self[indices] and one index tensor of its shape per dim of self."""
    layout = _layout(self.shape, _index_shapes(self, entries, count))
    end = layout.broadcast_start + len(layout.broadcast_shape)
    per_dim: dict[int, Value] = {}
    for entry in entries:
        if entry.mask is not None:
            found = prims.nonzero(entry.mask, count)  # int64[count, mask.ndim], checked when run
            for k in range(entry.mask.ndim):
                column = found if entry.mask.ndim == 1 else slice_in_dim(found, k, k + 1, 1, 1)
                per_dim[entry.dim + k] = prims.reshape(column, [count])
        else:
            assert entry.index is not None
            per_dim[entry.dim] = _wrap_negative(entry.index, self.shape[entry.dim])
    coordinates = []
    for d in range(self.ndim):
        if d in per_dim:
            index = per_dim[d]
            coordinates.append(_place(index, layout.shape, end - index.ndim))
        else:
            coordinates.append(index_ramp(layout.shape, layout.sliced_positions[d]))
    return layout, coordinates


@register("aten.index.Tensor")
def index(self: Value, indices: Sequence[Value | None]) -> Value:
    entries = _entries("index", self, indices)
    count = 1
    position = _mask_count_position(self, entries)
    if position is not None:
        # A boolean mask selects a data-dependent number of elements: the graph records it.
        declared = declared_result_metas()[0]
        expected_rank = len(_layout(self.shape, _index_shapes(self, entries, 1)).shape)
        if type(declared) is not TensorMeta or len(declared.shape) != expected_rank:
            raise ShapeError(
                f"index: a boolean mask index needs the result shape the graph declares, got {declared}"
            )
        count = declared.shape[position]
    _unused_layout, coordinates = _coordinates(self, entries, count)
    return prims.gather_nd(self, coordinates)


def _check_values(op: str, values: Value, shape: Sequence[int]) -> None:
    """index_put's values must broadcast to the indexed shape. (Python's x[i] = v also drops
    leading size-1 dims of v; aten.index_put does not.)"""
    aligned = tuple(shape)[len(shape) - values.ndim :] if values.ndim <= len(shape) else None
    if aligned is None or any(v not in (1, n) for v, n in zip(values.shape, aligned)):
        raise ShapeError(
            f"{op}: values of shape {list(values.shape)} cannot be broadcast to the indexed shape {list(shape)}"
        )


@register("aten.index_put.default")
def index_put(
    self: Value, indices: Sequence[Value | None], values: Value, accumulate: bool = False
) -> Value:
    if values.dtype is not self.dtype:
        raise DTypeError(
            f"index_put: values have dtype {values.dtype.short}, self has {self.dtype.short}; torch requires them to match"
        )
    entries = _entries("index_put", self, indices)
    reduce = "sum" if accumulate else None
    count = 1
    position = _mask_count_position(self, entries)
    if position is not None:
        rank = len(_layout(self.shape, _index_shapes(self, entries, 1)).shape)
        offset = position - (rank - values.ndim)
        if 0 <= offset < values.ndim and values.shape[offset] != 1:
            count = values.shape[offset]  # values name one element per selected position
        elif len(entries) == 1:
            return _put_through_mask(self, entries[0], values, accumulate)
        else:
            raise ShapeError(
                "index_put: a boolean mask among other index tensors, with values that do not fix how many "
                "elements it selects, is not supported"
            )
    layout, coordinates = _coordinates(self, entries, count)
    _check_values("index_put", values, layout.shape)
    return _scatter(
        self, coordinates, _place(values, layout.shape, len(layout.shape) - values.ndim), reduce
    )


def _put_through_mask(self: Value, entry: _Entry, values: Value, accumulate: bool) -> Value:
    """self[mask] = values (or +=) for values that are the same for every selected element: a
    `where` over the mask, with no data-dependent shape."""
    assert entry.mask is not None
    mask, first = entry.mask, entry.dim
    # The indexed shape has one dim (the count) where self has the mask's dims; values broadcast
    # to it with that dim of size 1 (or absent), so they broadcast to self's shape without it.
    _check_values("index_put", values, (*self.shape[:first], 1, *self.shape[first + mask.ndim :]))
    lead = self.ndim - mask.ndim + 1 - values.ndim
    dims = [lead + i for i in range(values.ndim)]
    if first in dims:
        values = prims.squeeze(values, [first - lead])
        dims.remove(first)
    values = prims.broadcast_in_dim(
        values, list(self.shape), [d if d < first else d - 1 + mask.ndim for d in dims]
    )
    chosen = prims.broadcast_in_dim(
        _as_bool(mask), list(self.shape), list(range(first, first + mask.ndim))
    )
    if accumulate:
        zeros = full(self.shape, convert_number(0, self.dtype), self.dtype)
        return _add_same_dtype(self, prims.where(chosen, values, zeros))
    return prims.where(chosen, values, self)


def _as_bool(mask: Value) -> Value:
    return mask if mask.dtype is DType.bool else prims.ne(mask, 0)


def _add_same_dtype(a: Value, b: Value) -> Value:
    """a + b in a's dtype, as torch's in-place accumulation computes it (bool: logical or)."""
    if a.dtype is DType.bool:
        return prims.bitwise_or(a, b)
    return elementwise(prims.add, a, b)


# -- scatter, scatter_add, scatter_reduce ---------------------------------------------------------------------


def _scatter_along_dim(
    op: str, self: Value, dim: int, index: Value, src: Value | None
) -> tuple[Value, list[Value], Value | None]:
    """The int index, the coordinates and the part of src that is used (src[:index.shape]).
    (Callers return self for an empty index, which torch accepts whatever its shape.)"""
    d = canonical_dim(dim, self.ndim)
    index = _index_operand(op, index)
    _check_dim_sizes(op, index, self, "self", d)
    if src is not None:
        if src.dtype is not self.dtype:
            raise DTypeError(
                f"{op}: src has dtype {src.dtype.short}, self has {self.dtype.short}; torch requires them to match"
            )
        _check_dim_sizes(op, index, src, "src", None)
        # compared size by size without deciding: src larger than index (symbolic or not)
        # takes its leading window
        if len(src.shape) != len(index.shape) or not all(
            same_size(a, b) for a, b in zip(src.shape, index.shape)
        ):
            src = row_major_window(src, list(index.shape), list(row_major_strides(src.shape)), 0)
    coordinates = _along_dim_coordinates(index, d, self.ndim) if self.ndim else [index]
    return index, coordinates, src


@register("aten.scatter.src")
def scatter_src(self: Value, dim: int, index: Value, src: Value) -> Value:
    if settled(index.numel == 0):  # a size that may be 0 takes the general path, right at 0
        return self
    index, coordinates, source = _scatter_along_dim("scatter", self, dim, index, src)
    assert source is not None
    return _scatter(self, coordinates, source, None)


@register("aten.scatter.value")
def scatter_value(self: Value, dim: int, index: Value, value: Any) -> Value:
    if settled(index.numel == 0):  # a size that may be 0 takes the general path, right at 0
        return self
    index, coordinates, _ = _scatter_along_dim("scatter", self, dim, index, None)
    return _scatter(
        self, coordinates, full(index.shape, convert_number(value, self.dtype), self.dtype), None
    )


@register("aten.scatter_add.default")
def scatter_add(self: Value, dim: int, index: Value, src: Value) -> Value:
    if settled(index.numel == 0):  # a size that may be 0 takes the general path, right at 0
        return self
    index, coordinates, source = _scatter_along_dim("scatter_add", self, dim, index, src)
    assert source is not None
    return _scatter(self, coordinates, source, "sum")


def _identity(reduce: str, dtype: DType) -> bool | int | float | complex:
    """The value a reduction starts from when self does not take part (include_self=False)."""
    if reduce in ("sum", "mean"):
        return convert_number(0, dtype)
    if reduce == "prod":
        return convert_number(1, dtype)
    if dtype.is_floating:
        return -math.inf if reduce == "amax" else math.inf
    low, high = dtype_limits(dtype)
    return low if reduce == "amax" else high


SCATTER_REDUCE_MODES = ("sum", "prod", "mean", "amax", "amin")


@register("aten.scatter_reduce.two")
def scatter_reduce(
    self: Value, dim: int, index: Value, src: Value, reduce: str, include_self: bool = True
) -> Value:
    if reduce not in SCATTER_REDUCE_MODES:
        raise ShapeError(
            f"scatter_reduce: reduce must be one of {', '.join(SCATTER_REDUCE_MODES)}, got {reduce!r}"
        )
    if reduce == "mean" and self.dtype.is_bool:
        raise DTypeError(
            "scatter_reduce: reduce='mean' is not defined for bool (torch has no kernel for it)"
        )
    if reduce in ("amax", "amin") and self.dtype.is_complex:
        raise DTypeError(f"scatter_reduce: reduce={reduce!r} is not defined for {self.dtype.short}")
    if settled(index.numel == 0):  # a size that may be 0 takes the general path, right at 0
        return self
    index, coordinates, source = _scatter_along_dim("scatter_reduce", self, dim, index, src)
    assert source is not None
    base = self
    if not include_self:
        # Positions that receive values start from the reduction's identity instead of self.
        base = _scatter(
            self, coordinates, full(index.shape, _identity(reduce, self.dtype), self.dtype), None
        )
    if reduce != "mean":
        return _scatter(base, coordinates, source, reduce)
    total = _scatter(base, coordinates, source, "sum")
    # torch counts in self's dtype: 1 for self (if included) plus one per value received.
    one = convert_number(1, self.dtype)
    start = full(self.shape, one if include_self else convert_number(0, self.dtype), self.dtype)
    counts = _scatter(start, coordinates, full(index.shape, one, self.dtype), "sum")
    counts = prims.where(
        prims.eq(counts, convert_number(0, self.dtype)), full(self.shape, one, self.dtype), counts
    )
    if self.dtype.is_floating or self.dtype.is_complex:
        return elementwise(prims.div, total, counts)
    return aten.div.Tensor_mode(total, counts, rounding_mode="floor")


# -- select_scatter, slice_scatter, masked_scatter --------------------------------------------------------------


def _embed(
    op: str, self: Value, src: Value, size: Sequence[int], stride: Sequence[int], offset: int
) -> Value:
    """A copy of self whose window (size, stride, offset over its row-major elements) holds src."""
    if src.shape != tuple(size):
        raise ShapeError(f"{op}: src has shape {list(src.shape)}, expected {list(size)}")
    return row_major_window_scatter(
        self, convert(src, self.dtype), list(size), list(stride), offset
    )


@register("aten.select_scatter.default")
def select_scatter(self: Value, src: Value, dim: int, index: int) -> Value:
    if self.ndim == 0:
        raise ShapeError("select_scatter: self must have at least one dimension")
    d = canonical_dim(dim, self.ndim)
    size = self.shape[d]
    if not -size <= index < size:
        raise ShapeError(
            f"select_scatter: index {index} is out of range for dimension {d} of size {size}"
        )
    strides = row_major_strides(self.shape)
    window = [n for k, n in enumerate(self.shape) if k != d]
    window_strides = [s for k, s in enumerate(strides) if k != d]
    return _embed("select_scatter", self, src, window, window_strides, (index % size) * strides[d])


@register("aten.slice_scatter.default")
def slice_scatter(
    self: Value,
    src: Value,
    dim: int = 0,
    start: int | None = None,
    end: int | None = None,
    step: int = 1,
) -> Value:
    d = canonical_dim(dim, self.ndim)
    if self.ndim == 0:
        raise ShapeError("slice_scatter: self must have at least one dimension")
    first, last = slice_bounds("aten.slice_scatter", start, end, step, self.shape[d])
    strides = row_major_strides(self.shape)
    window = list(self.shape)
    window[d] = -((first - last) // step)  # ceil((last - first) / step), sizes may be symbolic
    window_strides = list(strides)
    window_strides[d] = strides[d] * step
    return _embed(
        "slice_scatter", self, src, window, window_strides, first * strides[d] if window[d] else 0
    )


@register("aten.masked_scatter.default")
def masked_scatter(self: Value, mask: Value, source: Value) -> Value:
    if mask.dtype is not DType.bool:
        raise DTypeError(f"masked_scatter: mask must be bool, got {mask.dtype.short}")
    if source.dtype is not self.dtype:
        raise DTypeError(
            f"masked_scatter: source has dtype {source.dtype.short}, self has {self.dtype.short}"
        )
    shape = tuple(broadcast_shapes(self.shape, mask.shape))
    target = _place(self, shape, len(shape) - self.ndim)
    chosen = _place(mask, shape, len(shape) - mask.ndim)
    numel = math.prod(shape)
    if settled(numel == 0):
        return target
    # The k-th selected position (row-major) takes source's k-th element: its running count of
    # selected positions is k + 1, an index into source behind one padding element that the
    # unselected positions read. A count beyond source's size fails the gather's bounds check.
    flat_mask = prims.reshape(chosen, [numel])
    running = aten.cumsum.default(convert(flat_mask, DType.int64), 0)
    positions = prims.where(flat_mask, running, full([numel], 0, DType.int64))
    padded = prims.cat(
        [
            full([1], convert_number(0, self.dtype), self.dtype),
            prims.reshape(source, [source.numel]),
        ],
        0,
    )
    taken = prims.reshape(prims.gather_nd(padded, [positions]), list(shape))
    return prims.where(chosen, taken, target)


# -- nonzero, sort, topk -------------------------------------------------------------------------------------------


@register("aten.masked_select.default")
def masked_select(self: Value, mask: Value) -> Value:
    """self's elements where mask (broadcast with self) is true, in row-major order: the boolean
    mask index of both broadcast to their common shape (the graph declares the count)."""
    if mask.dtype is not DType.bool:
        raise DTypeError(f"masked_select: mask must be bool, got {mask.dtype.short}")
    shape = broadcast_shapes(self.shape, mask.shape)
    if not shape:  # 0-dim: the one element, selected or not, as a 1-D tensor
        self, mask = prims.broadcast_in_dim(self, [1], []), prims.broadcast_in_dim(mask, [1], [])
        shape = (1,)
    return aten.index.Tensor(broadcast_to(self, shape), (broadcast_to(mask, shape),))


@register("aten.nonzero.default")
def nonzero(self: Value) -> Value:
    # The number of nonzero elements depends on the data: use the one the graph records.
    declared = declared_result_metas()[0]
    if (
        type(declared) is not TensorMeta
        or len(declared.shape) != 2
        or declared.shape[1] != self.ndim
    ):
        raise ShapeError(
            f"nonzero: the graph must declare an int64[count, {self.ndim}] result, got {declared}"
        )
    return prims.nonzero(self, declared.shape[0])


def _unique_runs(
    values: Value, order: Value | None, runs: int, return_inverse: bool, return_counts: bool
) -> tuple[Value, Value, Value]:
    """The runs of equal neighbours in the 1-D `values` (sorted ones for unique, the input for
    unique_consecutive): where each run starts in `values`, the run each element of the input
    belongs to (through `order`, the permutation that sorted it, if any) and the runs' lengths.
    `runs` is the number of runs the graph declares (torch's unbacked symbol): two
    `prims.nonzero`s of the run-start and run-end marks compute it from the data when run, and
    check each other."""
    n = values.shape[0]
    ramp = iota(n)
    # A run starts where an element differs from the one before it (NaN differs from every
    # value, NaN included, as in torch) and ends where it differs from the one after it.
    before = prims.gather_nd(values, [prims.maximum(prims.sub(ramp, 1), full([n], 0, DType.int64))])
    after = prims.gather_nd(
        values, [prims.minimum(prims.add(ramp, 1), full([n], n - 1, DType.int64))]
    )
    starts = prims.bitwise_or(prims.ne(values, before), prims.eq(ramp, full([n], 0, DType.int64)))
    ends = prims.bitwise_or(prims.ne(values, after), prims.eq(ramp, full([n], n - 1, DType.int64)))
    first = prims.reshape(prims.nonzero(starts, runs), [runs])
    empty = full([0], 0, DType.int64)
    inverse = counts = empty
    if return_inverse:
        run_of = prims.sub(aten.cumsum.default(convert(starts, DType.int64), 0), 1)
        if order is not None:
            run_of = prims.scatter_nd(full([n], 0, DType.int64), [order], run_of, None)
        inverse = run_of
    if return_counts:
        last = prims.reshape(prims.nonzero(ends, runs), [runs])
        counts = prims.add(prims.sub(last, first), 1)
    return first, inverse, counts


def _declared_count(op: str, dim: int | None) -> int:
    """The number of distinct values (slices) the graph declares for the first result: 1-D
    without a dim, the slices' dim with one."""
    declared = declared_result_metas()[0]
    if type(declared) is not TensorMeta or (dim is None and len(declared.shape) != 1):
        raise ShapeError(f"{op}: the graph must declare a 1-D first result, got {declared}")
    if dim is not None and len(declared.shape) <= dim:
        raise ShapeError(f"{op}: the graph declares a first result of rank below {dim + 1}")
    return declared.shape[0 if dim is None else dim]


def _unique_values(
    op: str, self: Value, sort: bool, return_inverse: bool, return_counts: bool
) -> tuple[Value, Value, Value]:
    """The distinct values of the flattened input (sorted stably, or its runs)."""
    values = prims.reshape(self, [self.numel]) if self.ndim != 1 else self
    order = None
    if sort:
        values, order = prims.sort(values, 0, False)
    first, inverse, counts = _unique_runs(
        values, order, _declared_count(op, None), return_inverse, return_counts
    )
    if return_inverse:
        inverse = prims.reshape(inverse, list(self.shape))
    return prims.gather_nd(values, [first]), inverse, counts


def _dense_ranks(columns: Value) -> Value:
    """int64[n, m]: each entry's rank among the distinct values of its column (0 for the least;
    equal values share one, and NaN differs from every value, as for the runs)."""
    shape = list(columns.shape)
    values, order = prims.sort(columns, 0, False)
    rows, cols = index_ramp(shape, 0), index_ramp(shape, 1)
    previous = prims.gather_nd(values, [prims.maximum(prims.sub(rows, 1), 0), cols])
    starts = prims.bitwise_or(prims.ne(values, previous), prims.eq(rows, 0))
    ranks = prims.sub(aten.cumsum.default(convert(starts, DType.int64), 0), 1)
    return prims.scatter_nd(full(shape, 0, DType.int64), [order, cols], ranks, None)


def _row_keys(rows: Value) -> Value:
    """[n]: one key per row of the [n, m] `rows`, ordered and equal as the rows compare
    lexicographically: the column itself when m is 1; else each round replaces the columns by
    their dense ranks and combines neighbouring pairs as rank·n + rank (below n², so int64
    holds it), halving the columns until one is left."""
    n = rows.shape[0]
    # A Python loop over the columns: a symbolic slice length is taken at its example value,
    # under a recorded check.
    width = operator.index(rows.shape[1])
    keys = rows
    while width > 1:
        ranks = _dense_ranks(keys)
        if width % 2:
            ranks = prims.cat([ranks, full([n, 1], 0, DType.int64)], 1)
            width += 1
        width //= 2
        pairs = prims.split_dim(ranks, 1, width)
        high, low = (prims.squeeze(slice_in_dim(pairs, k, k + 1, 1, 2), [2]) for k in (0, 1))
        keys = prims.add(prims.mul(high, n), low)
    return prims.reshape(keys, [n])


def _unique_slices(
    op: str, self: Value, dim: int, sort: bool, return_inverse: bool, return_counts: bool
) -> tuple[Value, Value, Value]:
    """The distinct slices of self along dim (sorted lexicographically, or its runs): the
    slices flattened into rows, one key per row (`_row_keys`), the runs of the (sorted) keys,
    and the first row of each run gathered. Inverse and counts are computed where the graph
    declares them (torch's CPU kernel returns both, asked for or not)."""
    if self.ndim == 0:
        raise ShapeError(f"{op}: dim={dim} needs a tensor of at least one dimension")
    d = canonical_dim(dim, self.ndim)
    runs = _declared_count(op, d)
    n = self.shape[d]
    rest = [size for k, size in enumerate(self.shape) if k != d]
    declared = declared_result_metas()
    if settled(n == 0) is True:  # no slices: every result empty, shaped as declared
        unique, inverse, counts = (full(meta.shape, 0, meta.dtype) for meta in declared)
        return unique, inverse, counts
    if any(settled(size == 0) is True for size in rest):
        raise ShapeError(
            f"{op}: the slices along dim {d} of a tensor of shape {list(self.shape)} are empty; "
            "torch refuses a zero-sized dimension that is not the one selected"
        )
    moved = prims.transpose(self, [d, *(k for k in range(self.ndim) if k != d)])
    keys = _row_keys(prims.reshape(moved, [n, math.prod(rest)]))
    order = None
    if sort:
        keys, order = prims.sort(keys, 0, False)
    wants = [
        asked or (type(meta) is TensorMeta and settled(meta.numel == 0) is not True)
        for asked, meta in zip((return_inverse, return_counts), declared[1:])
    ]
    first, inverse, counts = _unique_runs(keys, order, runs, *wants)
    rows = first if order is None else prims.gather_nd(order, [first])
    shape = [runs, *rest]
    indices = [prims.broadcast_in_dim(rows, shape, [0])]
    indices += [index_ramp(shape, k) for k in range(1, len(shape))]
    unique = prims.gather_nd(moved, indices)
    back = [*range(1, d + 1), 0, *range(d + 1, self.ndim)]
    return prims.transpose(unique, back), inverse, counts


@register("aten._unique2.default")
def unique2(
    self: Value, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False
) -> tuple[Value, Value, Value]:
    """torch.unique without dim: the flattened input sorted (stably), then its runs. The values
    come out sorted also for sorted=False, as torch's CPU kernel returns them (the order is
    unspecified then)."""
    return _unique_values("aten._unique2", self, True, return_inverse, return_counts)


@register("aten.unique_dim.default")
def unique_dim(
    self: Value,
    dim: int,
    sorted: bool = True,
    return_inverse: bool = False,
    return_counts: bool = False,
) -> tuple[Value, Value, Value]:
    """torch.unique with dim: the distinct slices, sorted lexicographically (also for
    sorted=False, as torch's CPU kernel returns them)."""
    return _unique_slices("aten.unique_dim", self, dim, True, return_inverse, return_counts)


@register("aten.unique_consecutive.default")
def unique_consecutive(
    self: Value, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
) -> tuple[Value, Value, Value]:
    """torch.unique_consecutive: the runs of the flattened input, or of its slices along dim."""
    op = "aten.unique_consecutive"
    if dim is None:
        return _unique_values(op, self, False, return_inverse, return_counts)
    return _unique_slices(op, self, dim, False, return_inverse, return_counts)


@register("aten.sort.default")
def sort(self: Value, dim: int = -1, descending: bool = False) -> tuple[Value, Value]:
    return prims.sort(self, canonical_dim(dim, self.ndim), descending)


@register("aten.sort.stable")
def sort_stable(
    self: Value, stable: bool | None = None, dim: int = -1, descending: bool = False
) -> tuple[Value, Value]:
    """torch.sort(stable=...): prims.sort is stable whatever `stable` asks."""
    return prims.sort(self, canonical_dim(dim, self.ndim), descending)


@register("aten.topk.default")
def topk(
    self: Value, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> tuple[Value, Value]:
    # Always sorted (sorted=False leaves the order to the implementation).
    d = canonical_dim(dim, self.ndim)
    size = self.shape[d] if self.ndim else 1
    if not 0 <= k <= size:
        raise ShapeError(f"topk: k={k} is out of range for dimension {d} of size {size}")
    values, indices = prims.sort(self, d, largest)
    if self.ndim == 0:
        return values, indices
    return slice_in_dim(values, 0, k, 1, d), slice_in_dim(indices, 0, k, 1, d)


# -- random: rand, randn, randperm, native_dropout ------------------------------------------------------------


def _check_layout(op: str, layout: Layout | None) -> None:
    if layout not in (None, Layout.strided):
        raise DTypeError(f"{op}: only the strided layout is supported, got {layout}")


def _random_dtype(op: str, dtype: DType | None) -> DType:
    dtype = DEFAULT_FLOAT if dtype is None else dtype
    if not (dtype.is_floating or dtype.is_complex):
        raise DTypeError(f"{op}: random values need a floating or complex dtype, got {dtype.short}")
    return dtype


@register("aten.rand.default")
def rand(
    size: Sequence[int],
    dtype: DType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    _check_layout("rand", layout)
    dtype = _random_dtype("rand", dtype)
    return prims.uniform(
        list(size), low=0.0, high=1.0, dtype=dtype, device=CPU, stride=list(row_major_strides(size))
    )


@register("aten.randn.default")
def randn(
    size: Sequence[int],
    dtype: DType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    _check_layout("randn", layout)
    dtype = _random_dtype("randn", dtype)
    return prims.normal(list(size), mean=0.0, std=1.0, dtype=dtype, device=CPU, requires_grad=False)


def _largest_exact(dtype: DType) -> int:
    """The largest n such that every integer in [0, n] is exactly representable in dtype."""
    if dtype.is_integer:
        return int(dtype_limits(dtype)[1])
    digits = {DType.float16: 11, DType.bfloat16: 8, DType.float32: 24, DType.float64: 53}[dtype]
    return 2**digits


@register("aten.randperm.default")
def randperm(
    n: int,
    dtype: DType | None = DType.int64,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    _check_layout("randperm", layout)
    dtype = DType.int64 if dtype is None else dtype
    if dtype.is_bool or dtype.is_complex:
        raise DTypeError(f"randperm: dtype {dtype.short} is not supported")
    if n < 0:
        raise ShapeError(f"randperm: n must be non-negative, got {n}")
    if n - 1 > _largest_exact(dtype):
        raise DTypeError(f"randperm: n={n} is too large for dtype {dtype.short}")
    # The stable sort of n independent uniform float64 keys orders positions uniformly at random
    # (ties, of probability ~n²/2^54, only prefer the lower position).
    keys = prims.uniform([n], low=0.0, high=1.0, dtype=DType.float64, device=CPU, stride=[1])
    _, order = prims.sort(keys, 0, False)
    return convert(order, dtype)


@register("aten.native_dropout.default")
def native_dropout(input: Value, p: float, train: bool | None) -> tuple[Value, Value]:
    if not (input.dtype.is_floating or input.dtype.is_complex):
        raise DTypeError(
            f"native_dropout: input must be floating or complex, got {input.dtype.short}"
        )
    if input.numel == 0:
        # torch returns the input and an uninitialized mask of the input's dtype.
        return input, full(input.shape, convert_number(0, input.dtype), input.dtype)
    if train is False:  # None means training, as in torch's kernel
        return input, full(input.shape, True, DType.bool)
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"native_dropout: p must lie in [0, 1], got {p}")
    # An element is kept with probability 1 - p; kept elements are scaled by 1 / (1 - p). As in
    # torch, output = input * mask * scale, so a dropped inf or NaN still gives NaN.
    draws = prims.uniform(
        list(input.shape),
        low=0.0,
        high=1.0,
        dtype=DType.float64,
        device=CPU,
        stride=list(row_major_strides(input.shape)),
    )
    keep = prims.lt(draws, 1.0 - p)
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    masked = elementwise(prims.mul, input, convert(keep, input.dtype))
    return elementwise(prims.mul, masked, scale), keep


@register("aten.bernoulli.p")
def bernoulli_p(self: Value, p: float, generator: Any = None) -> Value:
    """Not Core ATen (training-mode channel dropout): ones with probability p, zeros otherwise,
    of self's shape and dtype (self's values are not read)."""
    if self.dtype.is_complex:
        raise DTypeError(f"bernoulli: {self.dtype.short} is not supported (torch has no kernel)")
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"bernoulli: p must lie in [0, 1], got {p}")
    draws = prims.uniform(
        list(self.shape),
        low=0.0,
        high=1.0,
        dtype=DType.float64,
        device=CPU,
        stride=list(row_major_strides(self.shape)),
    )
    return convert(prims.lt(draws, p), self.dtype)


@register("aten.exponential.default")
def exponential(self: Value, lambd: float = 1.0, generator: Any = None) -> Value:
    """Not Core ATen (F.gumbel_softmax): draws of the exponential distribution of rate lambd,
    -log(1 - u) / lambd for u uniform on [0, 1) in float64, of self's shape and dtype (self's
    values are not read)."""
    check_dtype("aten.exponential", self, FLOATS, "self")
    if not lambd > 0:
        raise ShapeError(f"aten.exponential: lambd must be positive, got {lambd}")
    draws = prims.uniform(
        list(self.shape),
        low=0.0,
        high=1.0,
        dtype=DType.float64,
        device=CPU,
        stride=list(row_major_strides(self.shape)),
    )
    values = prims.div(prims.neg(prims.log1p(prims.neg(draws))), float(lambd))
    return convert(values, self.dtype)


@register("aten.rrelu_with_noise_functional.default")
def rrelu_with_noise_functional(
    self: Value,
    noise: Value,
    lower: Any = 0.125,
    upper: Any = 1.0 / 3.0,
    training: bool = False,
    generator: Any = None,
) -> tuple[Value, Value]:
    """Not Core ATen: nn.RReLU / F.rrelu as exported, returning the noise it used. Training: each
    element x <= 0 is multiplied by its own slope drawn uniformly from [lower, upper] (in float64,
    rounded to self's dtype), and the noise holds that slope (1 elsewhere, NaN included);
    evaluation: leaky_relu with the slope (lower + upper) / 2 and the noise unchanged."""
    op = "rrelu_with_noise_functional"
    check_dtype(op, self, FLOATS, "self")
    if noise.numel != self.numel or noise.dtype is not self.dtype:
        raise ShapeError(
            f"{op}: noise must be {self.dtype.short} with {self.numel} elements, got "
            f"{noise.dtype.short}{list(noise.shape)}"
        )
    low, high = float(lower), float(upper)
    if not training:
        return aten.leaky_relu.default(self, (low + high) / 2), noise
    if self.numel == 0:
        return self, noise
    slopes = convert(
        prims.uniform(
            list(self.shape),
            low=low,
            high=high,
            dtype=DType.float64,
            device=CPU,
            stride=list(row_major_strides(self.shape)),
        ),
        self.dtype,
    )
    negative = prims.le(self, convert_number(0, self.dtype))
    output = prims.where(negative, elementwise(prims.mul, self, slopes), self)
    slope_of_each = prims.where(negative, slopes, full(self.shape, 1.0, self.dtype))
    return output, prims.reshape(slope_of_each, list(noise.shape))


# -- random, not Core ATen: the *_like draws, randint, normal's overloads, uniform -------------------
# torch.export keeps these (torch.rand_like, torch.randint, torch.normal, tensor.uniform_()).


def _like_dtype(op: str, self: Value, dtype: DType | None, layout: Layout | None) -> DType:
    """A *_like op's dtype: the input's unless given."""
    _check_layout(op, layout)
    return self.dtype if dtype is None else dtype


def _floating(op: str, dtype: DType) -> DType:
    """torch's kernels of continuous draws exist for floating and complex dtypes only."""
    if not (dtype.is_floating or dtype.is_complex):
        raise DTypeError(f"{op}: random values need a floating or complex dtype, got {dtype.short}")
    return dtype


def _uniform_draws(shape: Sequence[Any], low: float, high: float, dtype: DType) -> Value:
    return prims.uniform(
        list(shape),
        low=low,
        high=high,
        dtype=dtype,
        device=CPU,
        stride=list(row_major_strides(shape)),
    )


def _standard_normal(shape: Sequence[Any], dtype: DType) -> Value:
    return prims.normal(
        list(shape), mean=0.0, std=1.0, dtype=dtype, device=CPU, requires_grad=False
    )


@register("aten.rand_like.default")
def rand_like(
    self: Value,
    dtype: DType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
    memory_format: Any = None,
) -> Value:
    """Not Core ATen: `rand` of self's shape (the lowering lays it out as the graph declares)."""
    dtype = _floating("aten.rand_like", _like_dtype("aten.rand_like", self, dtype, layout))
    return _uniform_draws(self.shape, 0.0, 1.0, dtype)


@register("aten.randn_like.default")
def randn_like(
    self: Value,
    dtype: DType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
    memory_format: Any = None,
) -> Value:
    """Not Core ATen: `randn` of self's shape."""
    dtype = _floating("aten.randn_like", _like_dtype("aten.randn_like", self, dtype, layout))
    return _standard_normal(self.shape, dtype)


# Integer draws are floor(u · (high − low)) + low for u uniform in float64: every integer of a
# range of at most 2⁵³ is reachable, as likely as the others up to (high − low) / 2⁵³.
_WIDEST_INTEGER_RANGE = 2**53


def _bound_for(value: int, dtype: DType, towards: int) -> int:
    """torch's `update_from` (towards +1) / `update_to` (towards -1) for a floating dtype: a
    bound next to which the dtype cannot hold the neighbouring integer is moved inwards to one it
    holds (an integer bound within ±2^digits is unchanged)."""
    neighbour = value + towards
    rounded = int(np.asarray(float(neighbour)).astype(dtype.numpy).astype(np.float64))
    if (towards > 0 and rounded < value) or (towards < 0 and rounded >= value):
        digits = {DType.float16: 11, DType.bfloat16: 8, DType.float32: 24, DType.float64: 53}[dtype]
        step = 1 << (abs(neighbour).bit_length() - 1 - digits + 1)
        return rounded + step if towards > 0 else rounded - step
    return value


def _checked_integer_range(op: str, low: Any, high: Any, dtype: DType) -> tuple[int, int]:
    """torch's checks of `random_(low, high)` on a tensor of dtype: low < high, both ends in the
    dtype's range."""
    if type(low) is not int or type(high) is not int:
        raise DTypeError(
            f"{op}: low and high must be integers known when lowering, got {low!r} and {high!r}"
        )
    if dtype.is_complex:
        raise DTypeError(f"{op}: random integers of dtype {dtype.short} are not supported")
    smallest, largest = dtype_limits(dtype)
    if dtype.is_floating and smallest <= low and high - 1 <= largest:
        low, high = _bound_for(low, dtype, 1), _bound_for(high, dtype, -1)
    if not low < high:
        raise ShapeError(f"{op}: low must be less than high, got low={low} >= high={high}")
    for name, value in (("low", low), ("high - 1", high - 1)):
        if not smallest <= value <= largest:
            raise ShapeError(f"{op}: {name} = {value} is out of bounds for {dtype.short}")
    if high - low > _WIDEST_INTEGER_RANGE:
        raise ShapeError(
            f"{op}: the range [{low}, {high}) holds more than 2^53 integers, wider than the "
            "float64 draws it is computed from can reach"
        )
    return low, high


def _random_integers(op: str, shape: Sequence[Any], low: Any, high: Any, dtype: DType) -> Value:
    """Integers drawn uniformly from [low, high), converted to dtype."""
    low, high = _checked_integer_range(op, low, high, dtype)
    offsets = prims.floor(_uniform_draws(shape, 0.0, float(high - low), DType.float64))
    values = convert(offsets, DType.int64)
    if low != 0:
        values = elementwise(prims.add, values, low)
    return convert(values, dtype)


@register("aten.randint_like.default")
def randint_like(
    self: Value,
    high: Any,
    dtype: DType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
    memory_format: Any = None,
) -> Value:
    """Not Core ATen: integers uniform on [0, high) of self's shape, in self's dtype unless
    given (a floating dtype holds integer values)."""
    dtype = _like_dtype("aten.randint_like", self, dtype, layout)
    return _random_integers("aten.randint_like", self.shape, 0, high, dtype)


@register("aten.randint_like.low_dtype")
def randint_like_low_dtype(
    self: Value,
    low: Any,
    high: Any,
    dtype: DType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
    memory_format: Any = None,
) -> Value:
    """Not Core ATen: integers uniform on [low, high) of self's shape and dtype."""
    dtype = _like_dtype("aten.randint_like", self, dtype, layout)
    return _random_integers("aten.randint_like", self.shape, low, high, dtype)


@register("aten.randint.default")
def randint(
    high: Any,
    size: Sequence[Any],
    dtype: DType | None = DType.int64,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    """Not Core ATen: integers uniform on [0, high); dtype int64 by default, the default float
    when given as None (as torch)."""
    _check_layout("aten.randint", layout)
    dtype = DEFAULT_FLOAT if dtype is None else dtype
    return _random_integers("aten.randint", size, 0, high, dtype)


@register("aten.randint.low")
def randint_low(
    low: Any,
    high: Any,
    size: Sequence[Any],
    dtype: DType | None = DType.int64,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    """Not Core ATen: integers uniform on [low, high)."""
    _check_layout("aten.randint", layout)
    dtype = DEFAULT_FLOAT if dtype is None else dtype
    return _random_integers("aten.randint", size, low, high, dtype)


def _literal_std(op: str, std: Any) -> float:
    if type(std) not in (int, float):
        raise DTypeError(f"{op}: std must be a number known when lowering, got {std!r}")
    if not std >= 0.0:
        raise ShapeError(f"{op}: std must be non-negative, got {std}")
    return float(std)


def _scaled_by_tensor(op: str, draws: Value, std: Value, mean: Any, dtype: DType) -> Value:
    """draws · std + mean in dtype (torch's `normal_(0, 1).mul_(std).add_(mean)`). torch raises
    when an element of std is negative; no prim raises on data, so that element is NaN."""
    check_dtype(op, std, FLOATS, "std")
    values = convert(elementwise(prims.add, elementwise(prims.mul, draws, std), mean), dtype)
    negative = broadcast_to(prims.lt(std, convert_number(0, std.dtype)), values.shape)
    nan = full(values.shape, math.nan, dtype)
    return prims.where(negative, nan, values)


@register("aten.normal.Tensor_float")
def normal_tensor_float(mean: Value, std: float = 1.0, generator: Any = None) -> Value:
    """Not Core ATen: N(mean, std²) elementwise, of mean's shape and dtype."""
    op = "aten.normal.Tensor_float"
    dtype = _floating(op, mean.dtype)
    std = _literal_std(op, std)
    draws = prims.normal(
        list(mean.shape), mean=0.0, std=std, dtype=dtype, device=CPU, requires_grad=False
    )
    return prims.add(draws, mean)


@register("aten.normal.float_Tensor")
def normal_float_tensor(mean: float, std: Value, generator: Any = None) -> Value:
    """Not Core ATen: N(mean, std²) elementwise, of std's shape and dtype."""
    op = "aten.normal.float_Tensor"
    check_dtype(op, std, FLOATS, "std")
    return _scaled_by_tensor(op, _standard_normal(std.shape, std.dtype), std, mean, std.dtype)


@register("aten.normal.Tensor_Tensor")
def normal_tensor_tensor(mean: Value, std: Value, generator: Any = None) -> Value:
    """Not Core ATen: N(mean, std²) elementwise, of the broadcast shape and mean's dtype."""
    op = "aten.normal.Tensor_Tensor"
    dtype = _floating(op, mean.dtype)
    shape = broadcast_shapes(mean.shape, std.shape)
    return _scaled_by_tensor(op, _standard_normal(shape, dtype), std, mean, dtype)


@register("aten.normal.float_float")
def normal_float_float(
    mean: float,
    std: float,
    size: Sequence[Any],
    generator: Any = None,
    dtype: DType | None = None,
    layout: Layout | None = None,
    device: Any = None,
    pin_memory: bool | None = None,
) -> Value:
    """Not Core ATen: N(mean, std²) draws of the given size (the default float dtype)."""
    op = "aten.normal.float_float"
    _check_layout(op, layout)
    dtype = _floating(op, DEFAULT_FLOAT if dtype is None else dtype)
    std = _literal_std(op, std)
    return prims.normal(
        list(size), mean=float(mean), std=std, dtype=dtype, device=CPU, requires_grad=False
    )


@register("aten.normal_functional.default")
def normal_functional(
    self: Value, mean: float = 0.0, std: float = 1.0, generator: Any = None
) -> Value:
    """Not Core ATen (`tensor.normal_()`): N(mean, std²) draws of self's shape and dtype."""
    op = "aten.normal_functional"
    dtype = _floating(op, self.dtype)
    std = _literal_std(op, std)
    return prims.normal(
        list(self.shape), mean=float(mean), std=std, dtype=dtype, device=CPU, requires_grad=False
    )


@register("aten.uniform.default")
def uniform(self: Value, from_: float = 0.0, to: float = 1.0, generator: Any = None) -> Value:
    """Not Core ATen (`tensor.uniform_(from, to)`): draws uniform on [from, to) of self's shape
    and dtype (complex: each part), with torch's checks of the bounds."""
    op = "aten.uniform"
    dtype = _floating(op, self.dtype)
    for name, value in (("from", from_), ("to", to)):
        if type(value) not in (int, float):
            raise DTypeError(f"{op}: {name} must be a number known when lowering, got {value!r}")
    smallest, largest = dtype_limits(dtype.real)
    for name, value in (("from", from_), ("to", to)):
        if not smallest <= value <= largest:
            raise ShapeError(f"{op}: {name} = {value} is out of bounds for {dtype.short}")
    if not from_ <= to:
        raise ShapeError(f"{op}: from must not exceed to, got from={from_} > to={to}")
    if to - from_ > largest:
        raise ShapeError(
            f"{op}: to - from = {to - from_} exceeds the largest {dtype.short} ({largest})"
        )
    return _uniform_draws(self.shape, float(from_), float(to), dtype)


@register("aten.multinomial.default")
def multinomial(
    self: Value, num_samples: int, replacement: bool = False, generator: Any = None
) -> Value:
    """Not Core ATen: `num_samples` category indices per row of the weights `self` (1 or 2
    dims, unnormalized). With replacement: u uniform in float64 located in the row's
    cumulative weights divided by their total (the last is exactly 1, so every index is in
    range and a zero weight is never drawn). Without: the `num_samples` largest keys
    weight / E, E exponential (a weighted draw without replacement, in the order drawn; zero
    weights key below every positive one, drawn only when the positive ones run out). torch
    raises on a row with a negative, infinite or NaN weight or a zero total; no prim raises on
    data, so such a row's indices are the category count, out of range for any indexing."""
    op = "aten.multinomial"
    check_dtype(op, self, FLOATS, "self")
    if self.ndim not in (1, 2):
        raise ShapeError(f"{op}: self must have 1 or 2 dims, got {self.ndim}")
    categories = self.shape[-1]
    rows = self.shape[0] if self.ndim == 2 else 1
    if type(categories) is not int or type(num_samples) is not int:
        raise ShapeError(
            f"{op}: the number of categories and num_samples must be known when lowering, got "
            f"{categories} and {num_samples}"
        )
    if num_samples <= 0:
        raise ShapeError(f"{op}: num_samples must be positive, got {num_samples}")
    if not replacement and num_samples > categories:
        raise ShapeError(
            f"{op}: cannot draw {num_samples} samples without replacement from "
            f"{categories} categories"
        )
    shape = [rows, num_samples]
    if type(rows) is int and rows == 0:
        return full(shape if self.ndim == 2 else [num_samples], 0, DType.int64)
    weights = prims.reshape(convert(self, DType.float64), [rows, categories])
    if replacement:
        running = aten.cumsum.default(weights, 1)
        total = slice_in_dim(running, categories - 1, categories, 1, 1)
        cumulative = prims.div(running, broadcast_to(total, [rows, categories]))
        draws = _uniform_draws(shape, 0.0, 1.0, DType.float64)
        indices = aten.searchsorted.Tensor(cumulative, draws, right=True)
    else:
        exponential = prims.neg(
            prims.log1p(prims.neg(_uniform_draws([rows, categories], 0.0, 1.0, DType.float64)))
        )
        positive = prims.gt(weights, 0.0)
        keys = prims.where(
            positive, prims.div(weights, exponential), full([rows, categories], -1.0, DType.float64)
        )
        _, indices = aten.topk.default(keys, num_samples, 1, True, True)
    # A row torch refuses: a weight that is not in [0, inf) (NaN included), or a zero total.
    valid = prims.bitwise_and(prims.ge(weights, 0.0), prims.lt(weights, math.inf))
    invalid_count = prims.sum(convert(prims.bitwise_not(valid), DType.int64), [1])
    refused = prims.bitwise_or(
        prims.gt(invalid_count, 0),
        prims.le(prims.sum(weights, [1]), 0.0),
    )
    refused = prims.broadcast_in_dim(refused, shape, [0])
    result = prims.where(refused, full(shape, categories, DType.int64), indices)
    return result if self.ndim == 2 else prims.reshape(result, [num_samples])


@register("aten.log_normal.default")
def log_normal(self: Value, mean: float = 1.0, std: float = 2.0, generator: Any = None) -> Value:
    """Not Core ATen (`tensor.log_normal_()`): exp of N(mean, std²) draws in float64, converted
    to self's dtype (floating)."""
    op = "aten.log_normal"
    check_dtype(op, self, FLOATS, "self")
    if not std > 0.0:
        raise ShapeError(f"{op}: std must be positive, got {std}")
    draws = prims.normal(
        list(self.shape),
        mean=float(mean),
        std=float(std),
        dtype=DType.float64,
        device=CPU,
        requires_grad=False,
    )
    return convert(prims.exp(draws), self.dtype)


@register("aten.cauchy.default")
def cauchy(self: Value, median: float = 0.0, sigma: float = 1.0, generator: Any = None) -> Value:
    """Not Core ATen (`tensor.cauchy_()`): median + sigma · tan(π (u − 1/2)) for u uniform on
    [0, 1) in float64, converted to self's dtype (floating)."""
    op = "aten.cauchy"
    check_dtype(op, self, FLOATS, "self")
    if not sigma > 0.0:
        raise ShapeError(f"{op}: sigma must be positive, got {sigma}")
    draws = _uniform_draws(self.shape, -0.5, 0.5, DType.float64)
    values = prims.add(prims.mul(prims.tan(prims.mul(draws, math.pi)), float(sigma)), float(median))
    return convert(values, self.dtype)


@register("aten.geometric.default")
def geometric(self: Value, p: float, generator: Any = None) -> Value:
    """Not Core ATen (`tensor.geometric_(p)`): the number of Bernoulli(p) trials up to the first
    success, ceil(log1p(−u) / log1p(−p)) for u uniform on [0, 1) in float64 (at least 1),
    converted to self's dtype (floating or integer)."""
    op = "aten.geometric"
    if self.dtype.is_bool or self.dtype.is_complex:
        raise DTypeError(f"{op}: self of dtype {self.dtype.short} is not supported")
    if not 0.0 < p < 1.0:
        raise ShapeError(f"{op}: p must lie in (0, 1), got {p}")
    draws = _uniform_draws(self.shape, 0.0, 1.0, DType.float64)
    trials = prims.ceil(prims.div(prims.log1p(prims.neg(draws)), math.log1p(-p)))
    return convert(prims.maximum(trials, full(self.shape, 1.0, DType.float64)), self.dtype)


def _largest_random(dtype: DType) -> int:
    """The largest value `random_` draws into a tensor of dtype when no bound is given: the
    dtype's largest integer, or for floating dtypes the last integer of its exact run (2^digits)."""
    if dtype.is_floating:
        return _largest_exact(dtype)
    return int(dtype_limits(dtype)[1])


@register("aten.random.to")
def random_to(self: Value, to: int, generator: Any = None) -> Value:
    """Not Core ATen (`tensor.random_(to)`): integers uniform on [0, to) in self's dtype."""
    return _random_integers("aten.random", self.shape, 0, to, self.dtype)


@register("aten.random.from")
def random_from(self: Value, from_: int, to: int | None, generator: Any = None) -> Value:
    """Not Core ATen (`tensor.random_(from, to)`): integers uniform on [from, to) in self's
    dtype; to None: up to the dtype's largest value (2^digits for floating dtypes) inclusive."""
    high = _largest_random(self.dtype) + 1 if to is None else to
    return _random_integers("aten.random", self.shape, from_, high, self.dtype)


@register("aten.random.default")
def random_default(self: Value, generator: Any = None) -> Value:
    """Not Core ATen (`tensor.random_()`): integers uniform on [0, largest] in self's dtype (the
    dtype's largest value; 2^digits for floating dtypes; bool: [0, 1])."""
    return _random_integers(
        "aten.random", self.shape, 0, _largest_random(self.dtype) + 1, self.dtype
    )
