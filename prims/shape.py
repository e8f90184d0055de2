"""Shape and view prims: as_strided(_scatter), collapse(_view), split_dim, squeeze, transpose,
view_of(_dtype), reshape, rev, cat, clone, copy_strided.

Every meta computes the result's strides and storage offset as torch's prims metas do (a view
keeps its operand's offset and derives its strides from the operand's). A value holds its elements,
not its storage, so `as_strided(a, ...)` reads the storage positions its window names from `a`'s
own elements: each element of `a` sits at `a.storage_offset + sum(index * a.strides)`, and a
window may read only positions some element of `a` occupies (its kernel gets `a`'s layout, as
`layouts=`). View prims return NumPy views when the array allows it and otherwise a copy; the
NumPy array's own strides never matter.

Like torch's prims, these take dimensions already canonical (0 <= dim < rank; torch's
`validate_idx` also accepts 0 for a 0-dim tensor): negative dims are the business of the
decompositions, not of the prims.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.layout import (
    channels_last_strides,
    contiguous_strides,
    is_contiguous,
    is_non_overlapping_and_dense,
    preserved_strides,
    required_length,
)
from aten2prims.ir.symbolic import is_size, lenient, remembered
from aten2prims.ir.values import MemoryFormat, TensorMeta, Value

from .common import check_tensor
from .registry import register

# -- argument checks shared by the prims of this package -----------------------------------------


def _is_index(index: Any, rank: int) -> bool:
    """torch's `validate_idx`: 0 <= index < rank, and 0 is also valid for a 0-dim tensor."""
    return type(index) is int and (0 <= index < rank or index == 0)


def check_index(index: Any, rank: int, what: str = "dimension") -> int:
    if not _is_index(index, rank):
        raise ShapeError(
            f"{what} {index!r} is out of range for a tensor of rank {rank} (expected 0 <= {what} < {rank})"
        )
    return index


def check_indices(
    indices: Any, rank: int, what: str = "dims", *, unique: bool = True
) -> tuple[int, ...]:
    """A list of canonical dims (see check_index); repeats are rejected unless `unique=False`."""
    if not isinstance(indices, tuple | list):
        raise ShapeError(f"{what} must be a list of ints, got {indices!r}")
    for index in indices:
        if not _is_index(index, rank):
            raise ShapeError(
                f"{what} {list(indices)}: {index!r} is out of range for a tensor of rank {rank}"
            )
    if unique and len(set(indices)) != len(indices):
        raise ShapeError(f"{what} {list(indices)} repeat a dimension")
    return tuple(indices)


def check_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """A static shape: a list of non-negative ints (torch's `validate_shape`)."""
    if not isinstance(shape, tuple | list) or not all(is_size(s) for s in shape):
        raise ShapeError(f"{what} must be a list of non-negative ints, got {shape!r}")
    return tuple(shape)


def check_strides(strides: Any, rank: int, what: str = "stride") -> tuple[int, ...]:
    """Strides in elements: one non-negative int per dimension (torch's `validate_strides`)."""
    if not isinstance(strides, tuple | list) or not all(is_size(s) for s in strides):
        raise ShapeError(f"{what} must be a list of non-negative ints, got {strides!r}")
    if len(strides) != rank:
        raise ShapeError(
            f"{what} {list(strides)} has {len(strides)} entries for {rank} dimension(s)"
        )
    return tuple(strides)


def check_dtype_argument(dtype: Any, what: str = "dtype") -> DType:
    if type(dtype) is not DType:
        raise DTypeError(f"{what} must be a dtype, got {dtype!r}")
    return dtype


def contiguous_copy(a: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """`a`'s elements in row-major order, reshaped, in memory `a` does not share."""
    result = np.reshape(a, tuple(shape))
    return result.copy() if np.may_share_memory(result, a) else result


@lenient
def _check_window(
    size: Any, stride: Any, storage_offset: Any, a: Value
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The window's size and stride, checked to read only storage positions within the span of
    `a`'s elements (from its storage offset to its last element)."""
    size = check_shape(size, "size")
    stride = check_strides(stride, len(size))
    if not is_size(storage_offset):
        raise ShapeError(f"storage_offset must be a non-negative int, got {storage_offset!r}")
    end = required_length(size, stride, storage_offset)
    if end == 0:
        return size, stride
    start = a.storage_offset
    held = required_length(a.shape, a.strides, start)
    if storage_offset < start or end > held:
        raise ShapeError(
            f"a window of size {list(size)}, stride {list(stride)} and storage offset {storage_offset} reads "
            f"storage positions {storage_offset}..{end - 1}, but the operand (shape {list(a.shape)}, "
            f"strides {list(a.strides)}, storage offset {start}) holds only positions "
            f"{start}..{held - 1}"
        )
    return size, stride


def _strided_window(
    flat: np.ndarray, size: Sequence[int], stride: Sequence[int], offset: int, *, writeable: bool
):
    # A window is checked against its operand when the graph is built; with symbolic sizes that
    # check may take the example sizes' answer, so the bounds are checked again here: NumPy's
    # as_strided reads whatever memory the strides reach.
    if math.prod(size) > 0:
        end = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride))
        if offset < 0 or end > flat.size:
            raise ShapeError(
                f"as_strided: a window of size {list(size)}, stride {list(stride)} and offset "
                f"{offset} reads storage positions up to {end - 1}, past the {flat.size} held"
            )
    return np.lib.stride_tricks.as_strided(
        flat[offset:],
        shape=tuple(size),
        strides=tuple(s * flat.itemsize for s in stride),
        writeable=writeable,
    )


Layout = tuple[tuple[int, ...], int]  # an operand's (strides, storage offset)


def _layout(a: np.ndarray, layouts: Sequence[Layout] | None) -> Layout:
    """The first operand's layout; without `layouts`, a fresh contiguous tensor's."""
    return layouts[0] if layouts is not None else (contiguous_strides(a.shape), 0)


def _positions(shape: Sequence[int], strides: Sequence[int], offset: int) -> np.ndarray:
    """The storage position of every element of a tensor of this layout, in an array of its
    shape."""
    positions = np.full((), offset, dtype=np.int64)
    for dim, (size, stride) in enumerate(zip(shape, strides)):
        ramp = np.arange(size, dtype=np.int64) * stride
        positions = positions[..., None] + ramp if dim else positions + ramp
    return np.broadcast_to(positions, tuple(shape))


def _storage(a: np.ndarray, layout: Layout) -> tuple[np.ndarray, int, np.ndarray | None]:
    """The part of the storage `a`'s elements occupy: (a 1-D array, the storage position of its
    first entry, a mask of the entries some element occupies or None when all are). Elements
    sharing a position (stride 0) must agree, as they do in torch, where they are one element."""
    strides, offset = layout
    if is_contiguous(a.shape, strides):
        return np.ascontiguousarray(a).reshape(-1), offset, None
    positions = _positions(a.shape, strides, offset)
    length = required_length(a.shape, strides, offset) - offset
    storage = np.zeros(length, a.dtype)
    held = np.zeros(length, bool)
    storage[positions - offset] = a
    held[positions - offset] = True
    if not is_non_overlapping_and_dense(a.shape, strides):
        # overlapping layouts: every element must equal the one its position holds
        if not np.array_equal(storage[positions - offset], a, equal_nan=a.dtype.kind in "fc"):
            raise ShapeError(
                "the operand's elements that share a storage position (strides "
                f"{list(strides)}) differ; its values do not fit its layout"
            )
    return storage, offset, None if held.all() else held


# -- as_strided ----------------------------------------------------------------------------------


def _as_strided_meta(
    a: Value, size: Sequence[int], stride: Sequence[int], storage_offset: int
) -> TensorMeta:
    check_tensor(a, "a")
    size, stride = _check_window(size, stride, storage_offset, a)
    return TensorMeta(size, a.dtype, stride, storage_offset)


def _as_strided_kernel(
    a: np.ndarray,
    size: Sequence[int],
    stride: Sequence[int],
    storage_offset: int,
    *,
    layouts: Sequence[Layout] | None = None,
) -> np.ndarray:
    if math.prod(size) == 0:
        return np.zeros(tuple(size), a.dtype)
    storage, start, held = _storage(a, _layout(a, layouts))
    if held is not None:
        read = _positions(size, stride, storage_offset) - start
        if not held[read].all():
            raise ShapeError(
                f"the window of size {list(size)}, stride {list(stride)} and storage offset "
                f"{storage_offset} reads storage positions no element of the operand occupies"
            )
    # Read-only: windows may overlap (stride 0), and a view of the caller's array must stay unwritten.
    return _strided_window(storage, size, stride, storage_offset - start, writeable=False)


register(
    "as_strided(Tensor(a!) a, SymInt[] size, SymInt[] stride, SymInt storage_offset) -> Tensor(a!)",
    meta=_as_strided_meta,
    kernel=_as_strided_kernel,
    view=True,
    reads_layout=True,
    doc="a window of size/stride/storage_offset (in elements) into the storage a views, read from "
    "a's elements by their layout; windows reading positions none of a's elements occupies are "
    "rejected",
)


def _as_strided_scatter_meta(
    self: Value, src: Value, size: Sequence[int], stride: Sequence[int], storage_offset: int
) -> TensorMeta:
    check_tensor(self, "self")
    check_tensor(src, "src")
    size, stride = _check_window(size, stride, storage_offset, self)
    if src.shape != size:
        raise ShapeError(f"src has shape {list(src.shape)}, the window has size {list(size)}")
    if src.dtype is not self.dtype:
        raise DTypeError(
            f"src has dtype {src.dtype.short}, self has {self.dtype.short}; convert src first"
        )
    # torch refuses to write through a window where several elements share one location.
    if any(s == 0 and n > 1 for n, s in zip(size, stride)):
        raise ShapeError(
            f"the window of size {list(size)} and stride {list(stride)} writes one location twice"
        )
    # torch's meta: clone_preserve_strides(self), self's strides and offset
    return TensorMeta(self.shape, self.dtype, self.strides, self.storage_offset)


def _as_strided_scatter_kernel(
    self: np.ndarray,
    src: np.ndarray,
    size: Sequence[int],
    stride: Sequence[int],
    storage_offset: int,
    *,
    out: np.ndarray | None = None,
    layouts: Sequence[Layout] | None = None,
) -> np.ndarray:
    strides, offset = _layout(self, layouts)
    if is_contiguous(self.shape, strides):
        if out is None:
            out = np.array(self, order="C", copy=True)
        else:
            np.copyto(out, self)
        if math.prod(size) > 0:
            flat = out.reshape(-1)
            _strided_window(flat, size, stride, storage_offset - offset, writeable=True)[...] = src
        return out
    if math.prod(size) == 0:
        result = np.array(self, copy=True)
    else:
        storage, start, _ = _storage(self, (strides, offset))
        storage = storage.copy()
        _strided_window(storage, size, stride, storage_offset - start, writeable=True)[...] = src
        result = storage[_positions(self.shape, strides, offset) - start]
    if out is None:
        return result
    np.copyto(out, result)
    return out


register(
    "as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt storage_offset) -> Tensor",
    meta=_as_strided_scatter_meta,
    kernel=_as_strided_scatter_kernel,
    out=True,
    reads_layout=True,
    doc="a copy of self (same layout) whose as_strided(size, stride, storage_offset) window holds src",
)


# -- collapse, split_dim, squeeze, transpose ------------------------------------------------------


def _collapsed_shape(a: Value, start: int, end: int) -> tuple[int, ...]:
    """Dims start..end (inclusive) merged into one; a 0-dim tensor counts as shape [1]."""
    check_tensor(a, "a")
    shape = a.shape if a.ndim > 0 else (1,)
    check_index(start, len(shape), "start")
    check_index(end, len(shape), "end")
    if end < start:
        raise ShapeError(f"end {end} is less than start {start}")
    return shape[:start] + (math.prod(shape[start : end + 1]),) + shape[end + 1 :]


def _collapse_meta(a: Value, start: int, end: int) -> TensorMeta:
    return TensorMeta(_collapsed_shape(a, start, end), a.dtype)


def _collapse_view_meta(a: Value, start: int, end: int) -> TensorMeta:
    """torch's `_collapse_view_helper`: the merged dim's stride is the smallest of theirs (dims
    of length 1 aside). Where the strides do not nest, torch refuses the view; ours is a copy,
    with contiguous strides."""
    shape = _collapsed_shape(a, start, end)
    sizes, strides = (a.shape, a.strides) if a.ndim > 0 else ((1,), (1,))
    new = _collapsed_strides(sizes, strides, start, end)
    if new is None:
        return TensorMeta(shape, a.dtype)
    return TensorMeta(shape, a.dtype, new, a.storage_offset)


@remembered
def _collapsed_strides(
    sizes: tuple[int, ...], strides: tuple[int, ...], start: int, end: int
) -> tuple[int, ...] | None:
    """The strides of dims start..end of this layout merged into one, None where they do not
    nest."""
    nested = math.prod(sizes) == 0 or all(
        sizes[i] == 1 or sizes[i + 1] == 1 or strides[i] == strides[i + 1] * sizes[i + 1]
        for i in range(start, end)
    )
    if not nested:
        return None
    stride = strides[end]
    for i in range(end - 1, start - 1, -1):
        if sizes[i] != 1:
            stride = min(stride, strides[i])
    if math.prod(sizes[start : end + 1]) == 0:
        stride = 0
    return tuple(strides[:start]) + (stride,) + tuple(strides[end + 1 :])


def _collapse_kernel(a: np.ndarray, start: int, end: int) -> np.ndarray:
    shape = a.shape if a.ndim > 0 else (1,)
    return contiguous_copy(
        a, shape[:start] + (math.prod(shape[start : end + 1]),) + shape[end + 1 :]
    )


def _collapse_view_kernel(a: np.ndarray, start: int, end: int) -> np.ndarray:
    shape = a.shape if a.ndim > 0 else (1,)
    return a.reshape(shape[:start] + (math.prod(shape[start : end + 1]),) + shape[end + 1 :])


register(
    "collapse(Tensor a, int start, int end) -> Tensor",
    meta=_collapse_meta,
    kernel=_collapse_kernel,
    reshape=True,
    doc="a copy of a with dims start..end (end inclusive) merged into one",
)
register(
    "collapse_view(Tensor(a) a, int start, int end) -> Tensor(a)",
    meta=_collapse_view_meta,
    kernel=_collapse_view_kernel,
    reshape=True,
    element_view=True,
    view=True,
    doc="collapse as a view; where the strides do not nest (torch refuses) the result is a "
    "contiguous copy",
)


def _split_dim_meta(a: Value, dim: int, outer_length: int) -> TensorMeta:
    check_tensor(a, "a")
    if a.ndim == 0:
        raise ShapeError("cannot split a dimension of a 0-dim tensor")
    check_index(dim, a.ndim, "dim")
    if not is_size(outer_length) or outer_length <= 0:
        raise ShapeError(f"outer_length must be a positive int, got {outer_length!r}")
    length = a.shape[dim]
    if length % outer_length != 0:
        raise ShapeError(
            f"outer_length {outer_length} does not divide dimension {dim} of length {length}"
        )
    inner = length // outer_length
    stride = a.strides[dim]
    return TensorMeta(
        a.shape[:dim] + (outer_length, inner) + a.shape[dim + 1 :],
        a.dtype,
        a.strides[:dim] + (stride * inner, stride) + a.strides[dim + 1 :],
        a.storage_offset,
    )


def _split_dim_kernel(a: np.ndarray, dim: int, outer_length: int) -> np.ndarray:
    return a.reshape(
        a.shape[:dim] + (outer_length, a.shape[dim] // outer_length) + a.shape[dim + 1 :]
    )


register(
    "split_dim(Tensor(a) a, int dim, SymInt outer_length) -> Tensor(a)",
    meta=_split_dim_meta,
    kernel=_split_dim_kernel,
    reshape=True,
    element_view=True,
    view=True,
    doc="dim (length l) becomes two dims (outer_length, l // outer_length)",
)


def _squeeze_meta(a: Value, dimensions: Sequence[int]) -> TensorMeta:
    check_tensor(a, "a")
    if a.ndim == 0 and len(dimensions) > 0:
        raise ShapeError("a 0-dim tensor has no dimension to squeeze")
    # torch's meta allows a dimension to be named more than once.
    dims = set(check_indices(dimensions, a.ndim, "dimensions", unique=False))
    for d in sorted(dims):
        if a.shape[d] != 1:
            raise ShapeError(f"cannot squeeze dimension {d} of length {a.shape[d]} (must be 1)")
    kept = [i for i in range(a.ndim) if i not in dims]
    return TensorMeta(
        tuple(a.shape[i] for i in kept),
        a.dtype,
        tuple(a.strides[i] for i in kept),
        a.storage_offset,
    )


def _squeeze_kernel(a: np.ndarray, dimensions: Sequence[int]) -> np.ndarray:
    return np.squeeze(a, axis=tuple(sorted(set(dimensions))))


register(
    "squeeze(Tensor(a) a, int[] dimensions) -> Tensor(a)",
    meta=_squeeze_meta,
    kernel=_squeeze_kernel,
    reshape=True,
    element_view=True,
    view=True,
    doc="removes the listed dimensions, each of length 1 (a dimension may be listed twice)",
)


def _transpose_meta(a: Value, permutation: Sequence[int]) -> TensorMeta:
    check_tensor(a, "a")
    if not isinstance(permutation, tuple | list) or sorted(permutation) != list(range(a.ndim)):
        raise ShapeError(
            f"permutation {permutation!r} is not a permutation of the {a.ndim} dimension(s)"
        )
    return TensorMeta(
        tuple(a.shape[d] for d in permutation),
        a.dtype,
        tuple(a.strides[d] for d in permutation),
        a.storage_offset,
    )


def _transpose_kernel(a: np.ndarray, permutation: Sequence[int]) -> np.ndarray:
    return np.transpose(a, tuple(permutation))


register(
    "transpose(Tensor(a) a, int[] permutation) -> Tensor(a)",
    meta=_transpose_meta,
    kernel=_transpose_kernel,
    element_view=True,
    view=True,
    doc="output dim i is input dim permutation[i]",
)


# -- view_of, view_of_dtype -----------------------------------------------------------------------


def _view_of_meta(a: Value) -> TensorMeta:
    check_tensor(a, "a")
    return TensorMeta(a.shape, a.dtype, a.strides, a.storage_offset)


def _view_of_kernel(a: np.ndarray) -> np.ndarray:
    return a.view()


register(
    "view_of(Tensor(a) a) -> Tensor(a)",
    meta=_view_of_meta,
    kernel=_view_of_kernel,
    element_view=True,
    view=True,
    doc="a view of a",
)


def _view_of_dtype_meta(a: Value, dtype: DType) -> TensorMeta:
    check_tensor(a, "a")
    check_dtype_argument(dtype)
    old, new = a.dtype.itemsize, dtype.itemsize
    if old == new:
        return TensorMeta(a.shape, dtype, a.strides, a.storage_offset)
    # As torch's Tensor.view(dtype): a different element size rescales the last dimension.
    if a.ndim == 0:
        raise ShapeError(
            f"cannot view a 0-dim {a.dtype.short} tensor as {dtype.short} (different element sizes)"
        )
    last = a.shape[-1] * old
    if last % new != 0:
        raise ShapeError(
            f"the last dimension ({a.shape[-1]} x {old} bytes) is not a multiple of {dtype.short}'s {new} bytes"
        )
    shape = a.shape[:-1] + (last // new,)
    # As torch's view(dtype): strides and offset rescaled to the new element size, the last dim
    # unit-strided. Where that is impossible (torch refuses), the result is a contiguous copy.
    scaled = [s * old for s in a.strides[:-1]] + [a.storage_offset * old]
    if (a.shape[-1] == 1 or a.strides[-1] == 1) and all(b % new == 0 for b in scaled):
        return TensorMeta(
            shape, dtype, tuple(b // new for b in scaled[:-1]) + (1,), scaled[-1] // new
        )
    return TensorMeta(shape, dtype)


def _view_of_dtype_kernel(a: np.ndarray, dtype: DType) -> np.ndarray:
    if (
        a.itemsize != dtype.itemsize
        and a.ndim > 0
        and a.shape[-1] > 1
        and a.strides[-1] != a.itemsize
    ):
        a = np.ascontiguousarray(
            a
        )  # NumPy (like torch) reinterprets only a contiguous last dimension
    return a.view(dtype.numpy)


register(
    "view_of_dtype(Tensor(a) a, ScalarType dtype) -> Tensor(a)",
    meta=_view_of_dtype_meta,
    kernel=_view_of_dtype_kernel,
    view=True,
    doc="a's bytes reinterpreted as dtype; a different element size rescales the last dimension",
)


# -- reshape, rev, cat, clone, copy_strided -----------------------------------------------------------


def _reshape_meta(a: Value, shape: Sequence[int]) -> TensorMeta:
    check_tensor(a, "a")
    shape = check_shape(shape)
    if math.prod(shape) != a.numel:
        raise ShapeError(
            f"cannot reshape {a.numel} element(s) of shape {list(a.shape)} to {list(shape)}"
        )
    return TensorMeta(shape, a.dtype)


def _reshape_kernel(a: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    return contiguous_copy(a, shape)


register(
    "reshape(Tensor a, SymInt[] shape) -> Tensor",
    meta=_reshape_meta,
    kernel=_reshape_kernel,
    reshape=True,
    doc="a copy of a's elements (row-major) with the given shape",
)


def _rev_meta(a: Value, dims: Sequence[int]) -> TensorMeta:
    check_tensor(a, "a")
    check_indices(dims, a.ndim)
    return TensorMeta(a.shape, a.dtype, preserved_strides(a.shape, a.strides))


def _rev_kernel(a: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    if a.ndim == 0:
        return a.copy()
    return np.flip(a, axis=tuple(dims)).copy()


register(
    "rev(Tensor a, int[] dims) -> Tensor",
    meta=_rev_meta,
    kernel=_rev_kernel,
    doc="reverses the order of elements along each of dims",
)


def _cat_meta(tensors: Sequence[Value], dim: int) -> TensorMeta:
    if not isinstance(tensors, tuple | list) or len(tensors) == 0:
        raise ShapeError(f"tensors must be a non-empty list of tensors, got {tensors!r}")
    for i, t in enumerate(tensors):
        check_tensor(t, f"tensors[{i}]")
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("0-dim tensors cannot be concatenated")
    if type(dim) is not int or not 0 <= dim < first.ndim:
        raise ShapeError(
            f"dim {dim!r} is out of range for tensors of rank {first.ndim} (expected 0 <= dim < {first.ndim})"
        )
    for i, t in enumerate(tensors[1:], start=1):
        if t.dtype is not first.dtype:
            raise DTypeError(
                f"tensors[{i}] has dtype {t.dtype.short}, tensors[0] has {first.dtype.short}"
            )
        if t.ndim != first.ndim:
            raise ShapeError(f"tensors[{i}] has rank {t.ndim}, tensors[0] has rank {first.ndim}")
        for d, (n, m) in enumerate(zip(first.shape, t.shape)):
            if d != dim and n != m:
                raise ShapeError(
                    f"tensors[{i}] has shape {list(t.shape)}, tensors[0] has {list(first.shape)}: "
                    f"sizes may differ only in dimension {dim}"
                )
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    return TensorMeta(tuple(shape), first.dtype)


def _cat_kernel(
    tensors: Sequence[np.ndarray], dim: int, *, out: np.ndarray | None = None
) -> np.ndarray:
    return np.concatenate(tensors, axis=dim, out=out)


register(
    "cat(Tensor[] tensors, int dim) -> Tensor",
    meta=_cat_meta,
    kernel=_cat_kernel,
    out=True,
    doc="concatenation along dim of tensors of one dtype and rank (never 0-dim)",
)

_FORMAT_RANK = {MemoryFormat.channels_last: 4, MemoryFormat.channels_last_3d: 5}


def _clone_meta(self: Value, memory_format: MemoryFormat | None) -> TensorMeta:
    check_tensor(self, "self")
    return TensorMeta(
        self.shape, self.dtype, format_strides(self.shape, self.strides, memory_format)
    )


def format_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], memory_format: MemoryFormat | None
) -> tuple[int, ...]:
    """The strides of a copy of a tensor of this shape and strides in `memory_format` (None:
    preserve_format, which keeps dense strides, as torch's clone)."""
    if memory_format is None or memory_format is MemoryFormat.preserve_format:
        if len(shape) == 0:
            return ()
        return preserved_strides(shape, strides)
    if type(memory_format) is not MemoryFormat:
        raise ShapeError(f"memory_format must be a memory format or None, got {memory_format!r}")
    rank = _FORMAT_RANK.get(memory_format)
    if rank is None:
        return contiguous_strides(shape)
    if len(shape) != rank:
        raise ShapeError(
            f"memory_format {memory_format.value} needs a rank-{rank} tensor, got rank {len(shape)}"
        )
    return channels_last_strides(shape)


def _clone_kernel(self: np.ndarray, memory_format: MemoryFormat | None) -> np.ndarray:
    return self.copy()


register(
    "clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor",
    meta=_clone_meta,
    kernel=_clone_kernel,
    doc="a copy of self in memory_format (None: preserve_format, which keeps dense strides)",
)


def _copy_strided_meta(a: Value, stride: Sequence[int]) -> TensorMeta:
    check_tensor(a, "a")
    return TensorMeta(a.shape, a.dtype, check_strides(stride, a.ndim))


def _copy_strided_kernel(a: np.ndarray, stride: Sequence[int]) -> np.ndarray:
    return a.copy()


register(
    "copy_strided(Tensor a, SymInt[] stride) -> Tensor",
    meta=_copy_strided_meta,
    kernel=_copy_strided_kernel,
    doc="a copy of a with the given strides",
)
