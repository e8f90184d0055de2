"""Extension prims (ours, not torch's): reading and writing elements at computed positions,
sorting, and the one data-dependent shape. torch's prims cannot express these without absurd
cost; four prims cover every Core ATen op that needs them (docs/prims.md, "Extension prims"):

- `gather_nd(a, indices)`: result[p] = a[indices[0][p], ..., indices[n-1][p]];
- `scatter_nd(a, indices, values, reduce)`: a copy of `a` in which each values[p] is written to
  (reduce=None) or combined into ("sum", "prod", "amax", "amin") a[indices[0][p], ..., indices[n-1][p]];
- `sort(a, dim, descending)`: a stable sort along dim, values and int64 indices; NaN is largest;
- `nonzero(a, count)`: the coordinates of a's nonzero elements; `count` is the number the graph
  declares (torch recorded it), and the kernel fails if the data disagree.

Index operands are int32/int64 tensors, exactly one per dimension of `a`, all of one shape (the
rules broadcast them explicitly). Every index must lie in [0, size): a negative index is an error
here (the rules of ops that wrap negative indices add the size first), and a kernel meeting an
out-of-range index raises a ValueError naming the index, the dimension and its size — it never
reads or writes outside `a`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import is_size
from aten2prims.ir.values import TensorMeta, Value

from .common import BOOL, COMPLEX, FLOATS, INTS, check_dtype, check_tensor
from .registry import register
from .shape import check_index

INDEX_DTYPES = frozenset({DType.int32, DType.int64})
ORDERED = BOOL | INTS | FLOATS
SCATTER_REDUCTIONS = (None, "sum", "prod", "amax", "amin")


# -- shared checks -----------------------------------------------------------------------------


def _check_indices(a: Value, indices: Any) -> tuple[int, ...]:
    """The common shape of a well-formed index list for `a`."""
    check_tensor(a, "a")
    if a.ndim == 0:
        raise ShapeError("a must have at least one dimension (reshape a 0-dim tensor to [1] first)")
    if not isinstance(indices, tuple | list) or len(indices) != a.ndim:
        raise ShapeError(
            f"indices must list one index tensor per dimension of a ({a.ndim}), got {indices!r}"
        )
    shape = None
    for position, index in enumerate(indices):
        check_tensor(index, f"indices[{position}]")
        check_dtype(index.dtype, INDEX_DTYPES, f"indices[{position}]")
        if shape is None:
            shape = index.shape
        elif index.shape != shape:
            raise ShapeError(
                f"index tensors must have one shape (broadcast them first): {list(shape)} and {list(index.shape)}"
            )
    assert shape is not None
    return shape


def _distinct_elements(index: np.ndarray) -> np.ndarray:
    """The elements of a (possibly broadcast) array without its stride-0 repeats, so checking a
    broadcast index costs what its source does."""
    if index.ndim == 0:
        return index
    return index[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in index.strides)]


def checked_index(index: np.ndarray, size: int, dim: int) -> np.ndarray:
    """`index` if every entry lies in [0, size); else a ValueError naming the first bad entry."""
    distinct = _distinct_elements(index)
    if distinct.size and (distinct.min() < 0 or distinct.max() >= size):
        bad = distinct[(distinct < 0) | (distinct >= size)].flat[0]
        raise ValueError(f"index {int(bad)} is out of bounds for dimension {dim} with size {size}")
    return index


def _checked_indices(a: np.ndarray, indices: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    return tuple(
        checked_index(index, size, dim) for dim, (index, size) in enumerate(zip(indices, a.shape))
    )


def _opmath(dtype: np.dtype) -> np.dtype:
    """float16/bfloat16 accumulate in float32 (torch's opmath); everything else in itself."""
    return np.dtype(np.float32) if DType.from_numpy(dtype).is_low_precision else dtype


# -- gather_nd -------------------------------------------------------------------------------------


def _gather_nd_meta(a: Value, indices: Sequence[Value]) -> TensorMeta:
    return TensorMeta(_check_indices(a, indices), a.dtype)


def _gather_nd_kernel(a: np.ndarray, indices: Sequence[np.ndarray]) -> np.ndarray:
    checked = _checked_indices(a, indices)
    if a.flags.c_contiguous and a.ndim > 0:
        # One flat index and np.take: several times faster than NumPy's n-dimensional fancy
        # indexing, which resampling and pooling rules lean on.
        return np.take(a.reshape(-1), _flat_positions(checked, a.shape))
    return np.asarray(a[checked])  # advanced indexing: always a fresh array


def _flat_positions(indices: Sequence[np.ndarray], shape: Sequence[int]) -> np.ndarray:
    """Row-major positions of already bounds-checked coordinates (int64, the indices' shape)."""
    position = np.zeros(np.broadcast_shapes(*(i.shape for i in indices)), dtype=np.int64)
    stride = 1
    for index, size in zip(reversed(indices), reversed(shape)):
        if stride == 1:
            position = position + index
        else:
            position = position + index.astype(np.int64) * stride
        stride *= size
    return position


register(
    "gather_nd(Tensor a, Tensor[] indices) -> Tensor",
    meta=_gather_nd_meta,
    kernel=_gather_nd_kernel,
    extension=True,
    doc="result[p] = a[indices[0][p], ..., indices[n-1][p]]: one int32/int64 index tensor per dim of a, "
    "all of one shape (the result's); indices outside [0, size) are an error",
)


# -- scatter_nd ------------------------------------------------------------------------------------


def _scatter_nd_meta(
    a: Value, indices: Sequence[Value], values: Value, reduce: str | None
) -> TensorMeta:
    shape = _check_indices(a, indices)
    check_tensor(values, "values")
    if values.shape != shape:
        raise ShapeError(f"values have shape {list(values.shape)}, the indices {list(shape)}")
    if values.dtype is not a.dtype:
        raise DTypeError(
            f"values have dtype {values.dtype.short}, a has {a.dtype.short}; convert values first"
        )
    if reduce not in SCATTER_REDUCTIONS:
        raise ShapeError(
            f"reduce must be one of {', '.join(map(repr, SCATTER_REDUCTIONS))}, got {reduce!r}"
        )
    if reduce in ("amax", "amin") and a.dtype in COMPLEX:
        raise DTypeError(f"reduce={reduce!r} needs an ordered dtype, got {a.dtype.short}")
    return TensorMeta(a.shape, a.dtype)


_UFUNCS = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}


def _last_occurrences(positions: np.ndarray) -> np.ndarray:
    """Indices into `positions` of the last occurrence of each distinct position."""
    _, first_from_end = np.unique(positions[::-1], return_index=True)
    return positions.size - 1 - first_from_end


def _scatter_nd_kernel(
    a: np.ndarray, indices: Sequence[np.ndarray], values: np.ndarray, reduce: str | None
) -> np.ndarray:
    checked = _checked_indices(a, indices)
    out = np.array(a, order="C", copy=True)
    if values.size == 0:
        return out
    positions = np.ravel_multi_index(checked, a.shape).reshape(-1)
    updates = values.reshape(-1)
    target = out.reshape(-1)  # a view: out is C-contiguous
    if reduce is None:
        # NumPy leaves the winner of repeated assignments unspecified; ours is the last write.
        last = _last_occurrences(positions)
        target[positions[last]] = updates[last]
        return out
    compute = _opmath(out.dtype)
    accumulator = target.astype(compute) if compute != out.dtype else target
    with np.errstate(all="ignore"):
        _UFUNCS[reduce].at(
            accumulator, positions, updates.astype(compute, copy=False)
        )  # in order, duplicates included
    if accumulator is not target:
        target[...] = accumulator.astype(out.dtype)
    return out


register(
    "scatter_nd(Tensor a, Tensor[] indices, Tensor values, str? reduce=None) -> Tensor",
    meta=_scatter_nd_meta,
    kernel=_scatter_nd_kernel,
    extension=True,
    doc="a copy of a with each values[p] written to (reduce=None: the last write to a position wins) or "
    "combined by 'sum', 'prod', 'amax' or 'amin' into a[indices[0][p], ..., indices[n-1][p]]; "
    "indices as for gather_nd, values of the indices' shape and a's dtype",
)


# -- sort ------------------------------------------------------------------------------------------


def _sort_meta(a: Value, dim: int, descending: bool) -> tuple[TensorMeta, TensorMeta]:
    check_tensor(a, "a")
    check_index(dim, a.ndim, "dim")
    check_dtype(a.dtype, ORDERED)
    if type(descending) is not bool:
        raise DTypeError(f"descending must be a bool, got {descending!r}")
    return TensorMeta(a.shape, a.dtype), TensorMeta(a.shape, DType.int64)


def _sort_kernel(a: np.ndarray, dim: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    if a.ndim == 0:
        return a.copy(), np.zeros((), np.int64)
    keys = a.astype(np.float32) if DType.from_numpy(a.dtype).is_low_precision else a
    if descending:
        # A stable descending sort: sort the reversed keys ascending and reverse the result, so
        # equal keys keep their original order and NaN (NumPy's largest) comes first.
        order = np.argsort(np.flip(keys, dim), axis=dim, kind="stable")
        order = (a.shape[dim] - 1) - np.flip(order, dim)
    else:
        order = np.argsort(keys, axis=dim, kind="stable")
    order = order.astype(np.int64, copy=False)
    return np.take_along_axis(a, order, dim), order


register(
    "sort(Tensor a, int dim, bool descending) -> (Tensor values, Tensor indices)",
    meta=_sort_meta,
    kernel=_sort_kernel,
    extension=True,
    doc="a stable sort along dim (equal elements keep their order, also when descending); NaN sorts "
    "as the largest value; indices are int64 positions along dim",
)


# -- nonzero ---------------------------------------------------------------------------------------


def _nonzero_meta(a: Value, count: int) -> TensorMeta:
    check_tensor(a, "a")
    if not is_size(count):
        raise ShapeError(f"count must be a non-negative int, got {count!r}")
    if count > a.numel:
        raise ShapeError(f"count {count} exceeds the {a.numel} element(s) of a")
    return TensorMeta((count, a.ndim), DType.int64)


def _nonzero_kernel(a: np.ndarray, count: int) -> np.ndarray:
    values = a.astype(np.float32) if DType.from_numpy(a.dtype).is_low_precision else a
    found = np.argwhere(values != 0).astype(np.int64, copy=False)
    if found.shape[0] != count:
        raise ValueError(
            f"the tensor has {found.shape[0]} nonzero element(s), but the graph declares {count} "
            "(the count recorded when the graph was traced)"
        )
    return found


register(
    "nonzero(Tensor a, SymInt count) -> Tensor",
    meta=_nonzero_meta,
    kernel=_nonzero_kernel,
    extension=True,
    sizes_from_data=lambda a: {"count": int(np.count_nonzero(a))},
    doc="the coordinates of a's nonzero elements in row-major order, as int64[count, a.ndim]; count is "
    "declared by the graph and checked against the data when run",
)
