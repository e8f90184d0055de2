"""Small helpers shared by the decomposition rules of every family: dtype checks, aten's dimension
conventions, keepdim and broadcasting back, slicing, index ramps and constants, all built from
prims. Rules import these from here rather than keeping their own copies.

A value carries torch's layout (strides, storage offset) in its meta and `prims.as_strided`
reads storage through it (see prims/shape.py): a slice of any value is one `prims.as_strided`
with the value's own strides, as torch slices. Rules that address a value's elements in
row-major order (pooling, convolution and padding windows) go through `row_major_window` /
`row_major_window_scatter`, which copy a value whose layout is not contiguous into row-major order first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.layout import is_contiguous
from aten2prims.ir.symbolic import SymBool, SymExpr, data_dependent, settled, sym_max, sym_min
from aten2prims.ir.values import CPU, MemoryFormat, ScalarMeta, Value
from aten2prims.promotion import convert

# One definition shared with the prims: dtype sets, the dim wrap, what counts as a tensor or a number.
from prims.common import FLOATS, INTS, canonical_dim, is_number, is_tensor

__all__ = [
    "FLOATS",
    "INDEX_DTYPES",
    "INTS",
    "along",
    "canonical_dim",
    "check_dtype",
    "full",
    "index_ramp",
    "iota",
    "is_number",
    "is_tensor",
    "keep_dims",
    "per_spatial_dim",
    "reduction_dims",
    "row_major_strides",
    "row_major_window",
    "row_major_window_scatter",
    "scalar",
    "scalar_kind",
    "sequential_sum",
    "slice_bounds",
    "slice_in_dim",
    "spread",
]

INDEX_DTYPES = (DType.int32, DType.int64)  # what aten's indexing ops accept as indices


def scalar_kind(x: Any) -> type | None:
    """bool/int/float/complex for a Python number or a runtime scalar; None for a tensor."""
    if type(x) is SymExpr:  # a symbolic size stands for an int, a condition on sizes for a bool
        return int
    if type(x) is SymBool:
        return bool
    if is_number(x):
        return type(x)
    if type(x) is Value and type(x.meta) is ScalarMeta:
        return x.meta.kind
    return None


def check_dtype(op: str, x: Value, allowed: frozenset[DType], what: str = "input") -> None:
    if x.dtype not in allowed:
        names = " ".join(d.short for d in DType if d in allowed)
        raise DTypeError(
            f"{op}: {what} of dtype {x.dtype.short} is not supported (expected one of {names})"
        )


def reduction_dims(dim: Sequence[int] | int | None, ndim: int) -> tuple[int, ...]:
    """aten's `int[1]? dim` of reductions: None or [] means every dimension; duplicates are errors."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, int):
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


def row_major(x: Value) -> Value:
    """x with a contiguous layout: x itself when it has one, else a contiguous copy."""
    if is_contiguous(x.shape, x.strides):
        return x
    return prims.clone(x, memory_format=MemoryFormat.contiguous_format)


def row_major_window(x: Value, size: Sequence[int], stride: Sequence[int], offset: int) -> Value:
    """as_strided into x's elements in row-major order: `stride` and `offset` count x's
    elements as if x were contiguous, whatever its layout."""
    x = row_major(x)
    return prims.as_strided(x, list(size), list(stride), x.storage_offset + offset)


def row_major_window_scatter(
    x: Value, src: Value, size: Sequence[int], stride: Sequence[int], offset: int
) -> Value:
    """as_strided_scatter into x's elements in row-major order (see `window`)."""
    x = row_major(x)
    return prims.as_strided_scatter(x, src, list(size), list(stride), x.storage_offset + offset)


def per_spatial_dim(op: str, name: str, values: Sequence[int], rank: int) -> list[int]:
    """aten's `int[rank]` argument of pooling and convolution (kernel size, stride, padding, ...):
    one value per spatial dim, a single value standing for all of them."""
    values = list(values)
    if len(values) == 1:
        values = values * rank
    if len(values) != rank:
        raise ShapeError(f"{op}: {name} must be a single int or {rank} ints, got {values}")
    return values


def spread(reduced: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
    """A reduction over `dims` broadcast back to `shape` (to combine it with the reduced tensor
    elementwise)."""
    if not dims:
        return reduced
    kept = [d for d in range(len(shape)) if d not in dims]
    return prims.broadcast_in_dim(reduced, list(shape), kept)


def along(x: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
    """x broadcast to `shape`, its dims landing on `dims` (a per-channel vector along dim 1, an
    index vector along the rows, ...)."""
    return prims.broadcast_in_dim(x, list(shape), list(dims))


def keep_dims(x: Value, dims: Sequence[int], ndim: int) -> Value:
    """Re-insert the reduced `dims` (of an `ndim`-rank input) as size-1 dims: keepdim=True."""
    if not dims:
        return x
    kept = [d for d in range(ndim) if d not in set(dims)]
    shape = [1 if d in set(dims) else None for d in range(ndim)]
    for position, d in enumerate(kept):
        shape[d] = x.shape[position]
    return prims.broadcast_in_dim(x, shape, kept)


def slice_bounds(
    op: str, start: int | None, end: int | None, step: int, size: int
) -> tuple[int, int]:
    """aten.slice's start/end: None means the whole dim, negatives count from the end, both clamp
    to [0, size] and end never precedes start; the step must be positive. Bounds read from data
    (`.item()` values) are computed exactly, as min/max expressions, for every value: no example
    stands for them, so no decision is taken on their sign or their order."""
    if step <= 0:
        raise ShapeError(f"{op}: step must be positive, got {step}")
    start = 0 if start is None else start
    end = size if end is None else end
    if data_dependent((start, end)):
        first: Any = sym_min(sym_max(_from_end(start, size), 0), size)
        last: Any = sym_min(sym_max(_from_end(end, size), first), size)
        return first, last
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, end


def _from_end(index: int, size: int) -> Any:
    """index + size when index is negative, exactly: min(max(-index, 0), 1) is 1 for a negative
    index and 0 otherwise."""
    if settled(index < 0) is not None:
        return index + size if index < 0 else index
    return index + size * sym_min(sym_max(-index, 0), 1)


def slice_in_dim(x: Value, start: int, stop: int, step: int, dim: int) -> Value:
    """x[..., start:stop:step, ...] along `dim` for already-clamped 0 <= start <= stop <= size and
    step >= 1, as one as_strided in x's own layout, as torch slices (x itself when the slice is
    the whole dim)."""
    size = x.shape[dim]
    # ceil((stop - start) / step), at least 0; sym_max keeps an undecided symbolic one exact
    length = sym_max(0, -((start - stop) // step))
    # Whole-dim shortcut only when certain: an undecided size (data-dependent) takes the window.
    if settled(start == 0) and step == 1 and settled(length == size):
        return x
    strides = x.strides
    shape: list[Any] = list(x.shape)
    shape[dim] = length
    new_strides = list(strides)
    new_strides[dim] = strides[dim] * step
    offset = x.storage_offset + (0 if settled(length == 0) else start * strides[dim])
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


def sequential_sum(terms: Iterable[Value]) -> Value:
    """((t0 + t1) + t2) + …: ATen's sequential accumulation order."""
    total = None
    for term in terms:
        total = term if total is None else prims.add(total, term)
    assert total is not None
    return total


def requested(op: str, output_mask: Sequence[bool]) -> tuple[bool, bool, bool]:
    """A backward op's `output_mask`: which of its three results to compute. torch returns None
    (an undefined result) for the others, and the rule returns None there."""
    if len(output_mask) != 3:
        raise ShapeError(f"{op}: output_mask must hold 3 bools, got {list(output_mask)}")
    first, second, third = output_mask
    return first, second, third


def convert_requested(value: Value | None, dtype: DType) -> Value | None:
    """`value` converted to `dtype`; None (a result output_mask did not request) stays None."""
    return None if value is None else convert(value, dtype)
