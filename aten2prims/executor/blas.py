"""The executor's matrix products: `matmul(x, y, out)`, np.matmul's result written into `out`,
made by Intel oneMKL's gemm when MKL is in use (prims/mkl.py), else by np.matmul (NumPy's
OpenBLAS); `matmul(..., accumulate=True)` adds the product to out, and `matmul_sum` sums
products over leading axes into out (a convolution's shifted products, contraction.py).

Why: MKL's float32 gemm measured 1.1-1.35x faster than NumPy's matmul on the shapes
convolutions and linear layers make here (docs/executor.md#matrix-products-mkl-or-numpy).

A product goes to MKL when its operands are float32 or float64 (all three of one dtype), each
operand's matrix dims have a unit stride on one of them (row-major, or column-major: passed as
transposed) and a leading dimension from the other, and `out` is one of those too (a
column-major `out` is made as the transposed product); batch dims may be broadcast (size 1 or
stride 0) in either operand. The batch dims are merged where the three arrays' strides allow;
the innermost merged batch dim is one strided batch call, any outer ones a loop. Everything
else — other dtypes, other strides, `out` read-only or overlapping an operand, products too
small for the call's overhead to pay — is np.matmul's.

Whether MKL is in use is asked at every call (`mkl.library()`), so `mkl.disabled()` switches
every product back to NumPy. MKL runs sequentially (one thread per call) and, with its
reproducibility setting, gives the same bits for a product whatever the arrays' addresses; its
bits differ from OpenBLAS's in the last places.
"""

from __future__ import annotations

import ctypes
import itertools
import math
from collections.abc import Callable

import attrs
import numpy as np

from prims import mkl

# Products MKL makes: matrices of at least MKL_MIN_MATRIX_MACS multiply-adds each (on smaller
# ones OpenBLAS's kernels were faster: 64x64 @ 64x64 in 3.3 µs against MKL's 4.6), in a call of
# at least MKL_MIN_CALL_MACS (MKL's call through ctypes costs about 7 µs more than NumPy's: a
# single 128x64 @ 64x128 took 27 µs against NumPy's 19-22, four of them at once 75 against 84).
MKL_MIN_MATRIX_MACS = 1 << 20
MKL_MIN_CALL_MACS = 1 << 22

_INT_MAX = (1 << 31) - 1
_FLOAT_TYPES = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


@attrs.frozen
class _Functions:
    """One library's gemm and strided batch gemm for one dtype (prototyped once)."""

    gemm: Callable[..., None]
    gemm_batch: Callable[..., None]


# The functions of the library last used, per dtype: `mkl.library()` returns one object for
# the process, so this is filled once.
_functions: dict[np.dtype, _Functions] = {}
_functions_library: list[mkl.Mkl] = []


def matmul(
    x: np.ndarray,
    y: np.ndarray,
    out: np.ndarray,
    *,
    swap_for_numpy: bool = False,
    accumulate: bool = False,
) -> None:
    """out[...] = x @ y, as `np.matmul(x, y, out=out)` computes it (x and y of at least 2 dims,
    batch dims broadcast); by MKL's gemm when MKL is in use and the layouts allow it. With
    `swap_for_numpy`, NumPy makes it as (y^T @ x^T)^T: OpenBLAS is faster with the long side
    first on some shapes (the contraction engine's `swap_rows`); MKL takes either order alike.
    With `accumulate`, out += x @ y instead: MKL's gemm adds the product to out as it makes it
    (beta = 1), NumPy makes it in a temporary array and adds that."""
    library = mkl.library()
    if library is not None and mkl_matmul(library, x, y, out, accumulate=accumulate):
        return
    if accumulate:
        np.add(out, np.matmul(x, y), out=out)
    elif swap_for_numpy:
        np.copyto(out, np.matmul(y.swapaxes(-1, -2), x.swapaxes(-1, -2)).swapaxes(-1, -2))
    else:
        np.matmul(x, y, out=out)


def mkl_in_use() -> bool:
    """Whether products of MKL's dtypes, sizes and layouts are MKL's now (asked per call)."""
    return mkl.library() is not None


def mkl_matmul(
    library: mkl.Mkl, x: np.ndarray, y: np.ndarray, out: np.ndarray, *, accumulate: bool = False
) -> bool:
    """The product by MKL (added to out's values with `accumulate`), or False (nothing
    written) when its size or layout is not MKL's."""
    call = _mkl_call(library, x, y, out)
    if call is None:
        return False
    call(x.ctypes.data, y.ctypes.data, out.ctypes.data, 1.0 if accumulate else 0.0)
    return True


def matmul_sum(x: np.ndarray, y: np.ndarray, out: np.ndarray, axes: int) -> None:
    """out[...] = the sum over the `axes` leading axes S of x [*S, ..., M, K] and y
    [*S, ..., K, N] (both of one S) of x[s] @ y[s], the products added in S's row-major order:
    each an accumulating `matmul`, made by MKL at addresses computed from the strides (one
    layout check for all of them; a convolution's shifted products are nine such calls)."""
    shape = x.shape[:axes]
    if math.prod(shape) == 0:
        out.fill(0)
        return
    library = mkl.library()
    call = None
    if library is not None and not (np.may_share_memory(out, x) or np.may_share_memory(out, y)):
        first = (0,) * axes
        call = _mkl_call(library, x[first], y[first], out)
    if call is None:
        for number, position in enumerate(np.ndindex(*shape)):
            matmul(x[position], y[position], out, accumulate=number > 0)
        return
    x_address, y_address, out_address = x.ctypes.data, y.ctypes.data, out.ctypes.data
    for number, position in enumerate(np.ndindex(*shape)):
        call(
            x_address + sum(i * stride for i, stride in zip(position, x.strides)),
            y_address + sum(i * stride for i, stride in zip(position, y.strides)),
            out_address,
            1.0 if number else 0.0,
        )


def _mkl_call(
    library: mkl.Mkl, x: np.ndarray, y: np.ndarray, out: np.ndarray
) -> Callable[[int, int, int, float], None] | None:
    """MKL's product of arrays of x's, y's and out's layout, as a function of their addresses
    and beta (out = x @ y + beta·out), or None when their size or layout is not MKL's."""
    if x.ndim < 2 or y.ndim < 2:
        return None
    m, k = x.shape[-2:]
    n = y.shape[-1]
    matrix_macs = m * n * k
    if matrix_macs < MKL_MIN_MATRIX_MACS or matrix_macs * (out.size // (m * n)) < MKL_MIN_CALL_MACS:
        return None  # (an empty product, too)
    dtype = out.dtype
    if x.dtype != dtype or y.dtype != dtype or dtype not in _FLOAT_TYPES:
        return None
    if y.shape[-2] != k or out.ndim != max(x.ndim, y.ndim) or out.shape[-2:] != (m, n):
        return None
    batch = out.shape[:-2]
    if not _broadcasts_to(x, batch) or not _broadcasts_to(y, batch):
        return None
    itemsize = dtype.itemsize
    x_layout = _matrix_layout(m, k, x.strides[-2], x.strides[-1], itemsize)
    y_layout = _matrix_layout(k, n, y.strides[-2], y.strides[-1], itemsize)
    out_layout = _matrix_layout(m, n, out.strides[-2], out.strides[-1], itemsize)
    if x_layout is None or y_layout is None or out_layout is None:
        return None
    dims = _batch_dims(batch, x, y, out)
    if dims is None:
        return None
    # MKL's LP64 interface takes sizes and leading dimensions as 32-bit ints
    if max(m, n, k, x_layout[1], y_layout[1], out_layout[1], *(d[0] for d in dims)) > _INT_MAX:
        return None
    if not out.flags.writeable:  # np.matmul refuses it
        return None
    if np.may_share_memory(out, x) or np.may_share_memory(out, y):
        return None
    functions = _functions_for(library, dtype)
    swapped = out_layout[0] == mkl.TRANSPOSE
    if swapped:
        # out^T (n x m, row-major) = y^T @ x^T
        m, n = n, m
        x_layout, y_layout = _flipped(y_layout), _flipped(x_layout)
        dims = [(size, y_step, x_step, out_step) for size, x_step, y_step, out_step in dims]
    (x_transpose, x_leading), (y_transpose, y_leading) = x_layout, y_layout
    out_leading = out_layout[1]

    def call(x_address: int, y_address: int, out_address: int, beta: float) -> None:
        if swapped:
            x_address, y_address = y_address, x_address
        if not dims:
            functions.gemm(
                mkl.ROW_MAJOR,
                x_transpose,
                y_transpose,
                m,
                n,
                k,
                1.0,
                x_address,
                x_leading,
                y_address,
                y_leading,
                beta,
                out_address,
                out_leading,
            )
            return
        count, x_step, y_step, out_step = dims[-1]
        outer = dims[:-1]
        for position in itertools.product(*(range(size) for size, *_ in outer)):
            x_at, y_at, out_at = x_address, y_address, out_address
            for index, (_, x_outer, y_outer, out_outer) in zip(position, outer):
                x_at += index * x_outer
                y_at += index * y_outer
                out_at += index * out_outer
            functions.gemm_batch(
                mkl.ROW_MAJOR,
                x_transpose,
                y_transpose,
                m,
                n,
                k,
                1.0,
                x_at,
                x_leading,
                x_step // itemsize,
                y_at,
                y_leading,
                y_step // itemsize,
                beta,
                out_at,
                out_leading,
                out_step // itemsize,
                count,
            )

    return call


def _functions_for(library: mkl.Mkl, dtype: np.dtype) -> _Functions:
    if not _functions_library or _functions_library[0] is not library:
        _functions.clear()
        _functions_library[:] = [library]
    functions = _functions.get(dtype)
    if functions is None:
        float_type = _FLOAT_TYPES[dtype]
        functions = _functions[dtype] = _Functions(
            library.gemm(float_type), library.gemm_batch_strided(float_type)
        )
    return functions


def _broadcasts_to(a: np.ndarray, batch: tuple[int, ...]) -> bool:
    """Whether a's batch dims broadcast to `batch` (each equal, or size 1)."""
    own = a.shape[:-2]
    offset = len(batch) - len(own)
    return offset >= 0 and all(size in (1, batch[offset + i]) for i, size in enumerate(own))


def _matrix_layout(
    rows: int, columns: int, row_stride: int, column_stride: int, itemsize: int
) -> tuple[int, int] | None:
    """(NO_TRANSPOSE, leading dimension) for a row-major matrix, (TRANSPOSE, leading dimension)
    for a column-major one (it is its transpose's row-major layout), else None. A dim of size 1
    has no stride that matters."""
    if column_stride == itemsize or columns == 1:
        step = row_stride if rows > 1 else max(1, columns) * itemsize
        if step % itemsize == 0 and step >= max(1, columns) * itemsize:
            return mkl.NO_TRANSPOSE, step // itemsize
    if row_stride == itemsize or rows == 1:
        step = column_stride if columns > 1 else max(1, rows) * itemsize
        if step % itemsize == 0 and step >= max(1, rows) * itemsize:
            return mkl.TRANSPOSE, step // itemsize
    return None


def _flipped(layout: tuple[int, int]) -> tuple[int, int]:
    """The layout of the transposed matrix (same memory)."""
    transpose, leading = layout
    return (mkl.TRANSPOSE if transpose == mkl.NO_TRANSPOSE else mkl.NO_TRANSPOSE), leading


def _batch_dims(
    batch: tuple[int, ...], x: np.ndarray, y: np.ndarray, out: np.ndarray
) -> list[tuple[int, int, int, int]] | None:
    """The batch dims as (size, x's, y's and out's byte strides), broadcast dims at stride 0,
    dims of size 1 left out and neighbours merged where all three strides allow; None when a
    stride is not a whole number of elements, out's innermost one is not positive or an
    operand's is negative (MKL's strided batch takes them as they are)."""
    itemsize = out.itemsize
    dims: list[tuple[int, int, int, int]] = []
    for axis, size in enumerate(batch):
        if size == 1:
            continue
        x_step, y_step, out_step = (_batch_stride(a, axis - len(batch)) for a in (x, y, out))
        if x_step % itemsize or y_step % itemsize or out_step % itemsize:
            return None
        if dims:
            outer_size, x_outer, y_outer, out_outer = dims[-1]
            if (x_outer, y_outer, out_outer) == (x_step * size, y_step * size, out_step * size):
                dims[-1] = (outer_size * size, x_step, y_step, out_step)
                continue
        dims.append((size, x_step, y_step, out_step))
    if dims:
        _, x_step, y_step, out_step = dims[-1]
        if x_step < 0 or y_step < 0 or out_step <= 0:
            return None
    return dims


def _batch_stride(a: np.ndarray, axis: int) -> int:
    """a's byte stride along the batch axis `axis` (counted from the end of the batch dims);
    0 where a lacks the axis or broadcasts it."""
    position = a.ndim - 2 + axis
    if position < 0 or a.shape[position] == 1:
        return 0
    return int(a.strides[position])
