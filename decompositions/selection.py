"""Order statistics and searches in sorted data (not Core ATen: torch.export keeps them):
kthvalue, median, nanmedian, mode, searchsorted, bucketize.

The order statistics sort along the dim (`prims.sort`: stable, NaN largest) and pick positions
of the sorted values and their indices. Where equal values make the choice of index free — torch
picks it by quickselect (kthvalue, median) or by an unstable sort (mode) — ours is the stable
sort's; the harness checks such indices by what they point at (aten2prims/testing/statistics.py).
The searches are torch's binary search, step by step on all values at once: a fixed number of
halving steps, each one `gather_nd` of the probed elements and a comparison, so even an
unsorted sequence gives torch's answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import Value
from aten2prims.promotion import convert, result_type

from .common import canonical_dim, full, index_ramp, keep_dims, slice_in_dim
from .registry import aten, register

# -- order statistics: kthvalue, median, nanmedian, mode --------------------------------------------


def _check_orderable(op: str, x: Value) -> None:
    if x.dtype.is_complex:
        raise DTypeError(f"{op}: complex tensors have no order")


def _along(op: str, x: Value, dim: int) -> tuple[Value, int]:
    """x with at least one dim, the canonical dim, and torch's check that it is not empty."""
    _check_orderable(op, x)
    d = canonical_dim(dim, x.ndim)
    if x.ndim == 0:
        return prims.reshape(x, [1]), 0
    if x.shape[d] == 0:
        raise ShapeError(
            f"{op}: expected reduction dim {d} to have non-zero size (input shape {list(x.shape)})"
        )
    return x, d


def _at(x: Value, position: int, d: int) -> Value:
    """x's slice at `position` along d, the dim dropped."""
    return prims.squeeze(slice_in_dim(x, position, position + 1, 1, d), [d])


def _gather_along(x: Value, positions: Value, d: int) -> Value:
    """x[..., positions[...], ...] along d, positions holding one index per row (d dropped)."""
    shape = list(positions.shape)
    coordinates = []
    for k in range(x.ndim):
        if k == d:
            coordinates.append(positions)
        else:
            coordinates.append(index_ramp(shape, k if k < d else k - 1))
    return prims.gather_nd(x, coordinates)


def _finish(values: Value, indices: Value, d: int, ndim: int, keepdim: bool) -> tuple[Value, Value]:
    if ndim == 0:
        return prims.reshape(values, []), prims.reshape(indices, [])
    if keepdim:
        return keep_dims(values, [d], ndim), keep_dims(indices, [d], ndim)
    return values, indices


@register("aten.kthvalue.default")
def kthvalue(self: Value, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Value, Value]:
    """The k-th smallest value along dim (NaN largest) and where it is: the (k-1)-th entry of
    the stable sort."""
    x, d = _along("kthvalue", self, dim)
    if not 1 <= k <= x.shape[d]:
        raise ShapeError(f"kthvalue: k={k} is out of range for dimension {d} of size {x.shape[d]}")
    values, indices = prims.sort(x, d, False)
    return _finish(_at(values, k - 1, d), _at(indices, k - 1, d), d, self.ndim, keepdim)


def _lower_median(x: Value, d: int, skip_nan: bool) -> tuple[Value, Value]:
    """The lower median along d of x (at least one element per row) and its index. With NaN in a
    row: median gives NaN (the last sorted entry is one); nanmedian the lower median of the
    others (NaN when all are)."""
    values, indices = prims.sort(x, d, False)
    n = x.shape[d]
    if not x.dtype.is_floating:
        middle = (n - 1) // 2
        return _at(values, middle, d), _at(indices, middle, d)
    if skip_nan:
        numbers = prims.sum(convert(prims.eq(x, x), DType.int64), [d])
        # (numbers - 1) // 2, and 0 for a row of NaNs only
        position = prims.maximum(
            prims.shift_right_arithmetic(prims.sub(numbers, 1), 1), full([], 0, DType.int64)
        )
        return _gather_along(values, position, d), _gather_along(indices, position, d)
    middle = (n - 1) // 2
    last_value, last_index = _at(values, n - 1, d), _at(indices, n - 1, d)
    has_nan = prims.ne(last_value, last_value)
    return (
        prims.where(has_nan, last_value, _at(values, middle, d)),
        prims.where(has_nan, last_index, _at(indices, middle, d)),
    )


@register("aten.median.dim")
def median_dim(self: Value, dim: int, keepdim: bool = False) -> tuple[Value, Value]:
    x, d = _along("median", self, dim)
    values, indices = _lower_median(x, d, skip_nan=False)
    return _finish(values, indices, d, self.ndim, keepdim)


@register("aten.nanmedian.dim")
def nanmedian_dim(self: Value, dim: int, keepdim: bool = False) -> tuple[Value, Value]:
    x, d = _along("nanmedian", self, dim)
    values, indices = _lower_median(x, d, skip_nan=True)
    return _finish(values, indices, d, self.ndim, keepdim)


def _median_of_all(op: str, x: Value, skip_nan: bool) -> Value:
    _check_orderable(op, x)
    if x.numel == 0:
        if not x.dtype.is_floating:
            raise ShapeError(f"{op}: the median of an empty {x.dtype.short} tensor is undefined")
        return full([], math.nan, x.dtype)
    flat = prims.reshape(x, [x.numel])
    return prims.reshape(_lower_median(flat, 0, skip_nan)[0], [])


@register("aten.median.default")
def median_default(self: Value) -> Value:
    return _median_of_all("median", self, skip_nan=False)


@register("aten.nanmedian.default")
def nanmedian_default(self: Value) -> Value:
    return _median_of_all("nanmedian", self, skip_nan=True)


@register("aten.mode.default")
def mode(self: Value, dim: int = -1, keepdim: bool = False) -> tuple[Value, Value]:
    """The most frequent value along dim, the smallest of those equally frequent, as torch's
    kernel finds it: sort, then walk the runs of equal values keeping the first longest. A run
    ends where the next sorted value differs (`!=`, so each NaN is a run of its own); the
    count at position i of the sorted row is i - (its run's start) + 1, and the first
    position where it reaches the row's largest count ends the mode's run."""
    x, d = _along("mode", self, dim)
    if x.numel == 0:  # rows of one or more elements, but no rows
        shape = [size for k, size in enumerate(x.shape) if k != d]
        return _finish(
            full(shape, False if x.dtype.is_bool else 0, x.dtype),
            full(shape, 0, DType.int64),
            d,
            self.ndim,
            keepdim,
        )
    values, indices = prims.sort(convert(x, DType.uint8) if x.dtype.is_bool else x, d, False)
    n = x.shape[d]
    ramp = index_ramp(x.shape, d)
    if n > 1:
        changed = prims.ne(slice_in_dim(values, 1, n, 1, d), slice_in_dim(values, 0, n - 1, 1, d))
        first_shape = list(x.shape)
        first_shape[d] = 1
        starts = prims.cat([full(first_shape, True, DType.bool), changed], d)
    else:
        starts = full(x.shape, True, DType.bool)
    # Each position's run start: the largest start position at or before it.
    run_start = _running_max(prims.where(starts, ramp, 0), d)
    count = prims.add(prims.sub(ramp, run_start), 1)
    longest = prims.amax(count, [d])
    spread_longest = prims.broadcast_in_dim(
        longest, list(x.shape), [k for k in range(x.ndim) if k != d]
    )
    end = prims.amin(prims.where(prims.eq(count, spread_longest), ramp, n), [d])
    picked = _gather_along(values, end, d)
    return _finish(
        convert(picked, self.dtype), _gather_along(indices, end, d), d, self.ndim, keepdim
    )


def _running_max(x: Value, d: int) -> Value:
    """The running maximum of an integer tensor along d (cummax's values)."""
    return aten.cummax.default(x, d)[0]


# -- searchsorted, bucketize -------------------------------------------------------------------------

Compare = Callable[[Value, Value], Value]


def _binary_search(
    op: str,
    sorted_sequence: Value,
    values: Value,
    *,
    right: bool,
    sorter: Value | None,
    out_int32: bool,
) -> Value:
    """For each value, the index where it would be inserted into its row of sorted_sequence
    (the last dim; a 1-D sequence serves every value): torch's binary search over
    [start, end) — probe mid = start + (end - start) / 2, go right when `!(probe >= value)`
    (`!(probe > value)` for right=True), else left — run for as many steps as the longest
    search needs. Both are compared in their promoted dtype."""
    if sorted_sequence.ndim == 0:
        raise ShapeError(f"{op}: the sorted sequence must have at least one dimension")
    if sorted_sequence.ndim > 1 and (
        values.ndim != sorted_sequence.ndim or values.shape[:-1] != sorted_sequence.shape[:-1]
    ):
        raise ShapeError(
            f"{op}: the sorted sequence of shape {list(sorted_sequence.shape)} and the values of "
            f"shape {list(values.shape)} must agree in every dim but the last"
        )
    if sorter is not None and (
        sorter.shape != sorted_sequence.shape or sorter.dtype is not DType.int64
    ):
        raise ShapeError(
            f"{op}: sorter must be int64 of the sorted sequence's shape "
            f"{list(sorted_sequence.shape)}, got {sorter.dtype.short}{list(sorter.shape)}"
        )
    common = result_type(sorted_sequence, values)
    if common.is_complex or common.is_bool:
        raise DTypeError(f"{op}: {common.short} values cannot be searched")
    boundaries, values = convert(sorted_sequence, common), convert(values, common)
    out = DType.int32 if out_int32 else DType.int64
    n = boundaries.shape[-1]
    start = full(values.shape, 0, DType.int64)
    if n == 0 or values.numel == 0:
        return convert(start, out)
    end = full(values.shape, n, DType.int64)
    lead = [index_ramp(values.shape, k) for k in range(boundaries.ndim - 1)]
    goes_right: Compare = prims.gt if right else prims.ge
    for _ in range(n.bit_length()):
        active = prims.lt(start, end)
        mid = prims.add(start, prims.shift_right_arithmetic(prims.sub(end, start), 1))
        probe_at = prims.minimum(mid, full([], n - 1, DType.int64))  # finished searches
        if sorter is not None:
            probe_at = prims.gather_nd(sorter, [*lead, probe_at])
        probe = prims.gather_nd(boundaries, [*lead, probe_at])
        left = goes_right(probe, values)
        start = prims.where(
            prims.bitwise_and(active, prims.bitwise_not(left)), prims.add(mid, 1), start
        )
        end = prims.where(prims.bitwise_and(active, left), mid, end)
    return convert(start, out)


def _side(op: str, right: bool, side: str | None) -> bool:
    if side is None:
        return right
    if side not in ("left", "right"):
        raise ShapeError(f"{op}: side must be 'left' or 'right', got {side!r}")
    if right and side == "left":
        raise ShapeError(
            f"{op}: side and right can't be set to opposites (side='left', right=True)"
        )
    return side == "right"


def _number(value: Any) -> Value:
    """A Python number as a 0-dim tensor of its own kind (torch wraps it so, and promotes it as
    a number)."""
    dtype = {bool: DType.bool, int: DType.int64, float: DType.float64, complex: DType.complex128}
    return full([], value, dtype[type(value)])


def _number_dtype(sorted_sequence: Value, value: Any) -> DType:
    return result_type(sorted_sequence, value)


@register("aten.searchsorted.Tensor")
def searchsorted_tensor(
    sorted_sequence: Value,
    self: Value,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Value | None = None,
) -> Value:
    op = "searchsorted"
    return _binary_search(
        op,
        sorted_sequence,
        self,
        right=_side(op, right, side),
        sorter=sorter,
        out_int32=out_int32,
    )


@register("aten.searchsorted.Scalar")
def searchsorted_scalar(
    sorted_sequence: Value,
    self: Any,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Value | None = None,
) -> Value:
    op = "searchsorted"
    if sorted_sequence.ndim != 1:
        raise ShapeError(
            f"{op}: a scalar value needs a 1-D sorted sequence, got shape {list(sorted_sequence.shape)}"
        )
    value = convert(_number(self), _number_dtype(sorted_sequence, self))
    return _binary_search(
        op, sorted_sequence, value, right=_side(op, right, side), sorter=sorter, out_int32=out_int32
    )


@register("aten.bucketize.Tensor")
def bucketize_tensor(
    self: Value, boundaries: Value, out_int32: bool = False, right: bool = False
) -> Value:
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got shape {list(boundaries.shape)}")
    return _binary_search(
        "bucketize", boundaries, self, right=right, sorter=None, out_int32=out_int32
    )


@register("aten.bucketize.Scalar")
def bucketize_scalar(
    self: Any, boundaries: Value, out_int32: bool = False, right: bool = False
) -> Value:
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-D, got shape {list(boundaries.shape)}")
    value = convert(_number(self), _number_dtype(boundaries, self))
    return _binary_search(
        "bucketize", boundaries, value, right=right, sorter=None, out_int32=out_int32
    )
