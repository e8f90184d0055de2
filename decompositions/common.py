"""Small helpers shared by the decomposition rules of every family: aten's dimension
conventions, keepdim, slicing, index ramps and constants, all built from prims.

Tensors are functional values: `as_strided` windows into a tensor's row-major element sequence
(see prims/shape.py), so a slice of any value is one `prims.as_strided` with the value's
row-major strides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import prims
from aten2prims.errors import ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import CPU, Value


def canonical_dim(dim: int, ndim: int) -> int:
    """aten's wrap of a possibly negative dim (a 0-dim tensor accepts -1 and 0)."""
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise ShapeError(
            f"dimension {dim} is out of range for a tensor of rank {ndim} (expected [{-bound}, {bound - 1}])"
        )
    return dim % bound


def reduction_dims(dim: Sequence[int] | int | None, ndim: int) -> tuple[int, ...]:
    """aten's `int[1]? dim` of reductions: None or [] means every dimension; duplicates are errors."""
    if dim is None:
        return tuple(range(ndim))
    if type(dim) is int:
        dim = (dim,)
    if len(dim) == 0:
        return tuple(range(ndim))
    dims = tuple(canonical_dim(d, ndim) for d in dim)
    if len(set(dims)) != len(dims):
        raise ShapeError(f"dimension list {list(dim)} repeats a dimension")
    if ndim == 0:
        return ()
    return tuple(sorted(dims))


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return tuple(strides)


def keep_dims(x: Value, dims: Sequence[int], ndim: int) -> Value:
    """Re-insert the reduced `dims` (of an `ndim`-rank input) as size-1 dims: keepdim=True."""
    if not dims:
        return x
    kept = [d for d in range(ndim) if d not in set(dims)]
    shape = [1 if d in set(dims) else None for d in range(ndim)]
    for position, d in enumerate(kept):
        shape[d] = x.shape[position]
    return prims.broadcast_in_dim(x, shape, kept)


def slice_in_dim(x: Value, start: int, stop: int, step: int, dim: int) -> Value:
    """x[..., start:stop:step, ...] along `dim` for already-clamped 0 <= start <= stop <= size and
    step >= 1, as one as_strided (x itself when the slice is the whole dim)."""
    size = x.shape[dim]
    length = max(0, math.ceil((stop - start) / step))
    if start == 0 and step == 1 and length == size:
        return x
    strides = row_major_strides(x.shape)
    shape = list(x.shape)
    shape[dim] = length
    new_strides = list(strides)
    new_strides[dim] = strides[dim] * step
    offset = start * strides[dim] if length else 0
    return prims.as_strided(x, shape, new_strides, offset)


def iota(length: int, dtype: DType = DType.int64, *, start: int = 0, step: int = 1) -> Value:
    """[start, start+step, …] of `length` elements."""
    return prims.iota(length, start=start, step=step, dtype=dtype, device=CPU, requires_grad=False)


def index_ramp(shape: Sequence[int], dim: int, dtype: DType = DType.int64) -> Value:
    """A tensor of `shape` whose value at each position is its index along `dim`."""
    ramp = iota(shape[dim], dtype)
    if len(shape) == 1:
        return ramp
    return prims.broadcast_in_dim(ramp, list(shape), [dim])


def full(shape: Sequence[int], value: Any, dtype: DType) -> Value:
    return prims.full(list(shape), value, dtype=dtype, device=CPU, requires_grad=False)


def scalar(value: Any, dtype: DType) -> Value:
    """A 0-dim tensor holding a Python number."""
    return prims.full([], value, dtype=dtype, device=CPU, requires_grad=False)
