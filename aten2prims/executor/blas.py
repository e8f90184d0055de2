"""The executor's matrix products: `matmul(x, y, out)`, np.matmul's result written into `out`,
made by a BLAS gemm called through ctypes on the arrays' memory where the library in use
(`library()`) takes it, else by np.matmul; `matmul(..., accumulate=True)` adds the product to
out, and `matmul_sum` sums products over leading axes into out (a convolution's shifted
products, contraction.py).

The library: Intel oneMKL when it is in use (prims/mkl.py: installed, Intel CPU), which makes
every product it takes — its float32 gemm measured 1.1-1.35x faster than NumPy's matmul on the
shapes convolutions and linear layers make here (docs/executor.md#matrix-products-mkl-or-numpy);
else NumPy's own OpenBLAS (prims/openblas.py), which makes the accumulating products only
(gemm's beta = 1 adds the product into out as it is made, where np.matmul makes a temporary
and adds it: what the shifted-product convolutions need); a product np.matmul can make in place
stays np.matmul's, the same kernels at the same speed without ctypes' overhead. One call plan
serves both libraries (their cblas interfaces differ only in the integers' size: MKL's LP64
32-bit, NumPy's ILP64 OpenBLAS 64-bit).

A product is the library's when its operands are float32 or float64 (all three of one dtype),
each operand's matrix dims have a unit stride on one of them (row-major, or column-major:
passed as transposed) and a leading dimension from the other, and `out` is one of those too (a
column-major `out` is made as the transposed product); batch dims may be broadcast (size 1 or
stride 0) in either operand. The batch dims are merged where the three arrays' strides allow;
the innermost merged batch dim is one strided batch call, any outer ones a loop. Everything
else — other dtypes, other strides, `out` read-only or overlapping an operand, products too
small for the call's overhead to pay — is np.matmul's.

The library is asked for at every call, so `mkl.disabled()` and `openblas.disabled()` switch
products back. MKL runs sequentially (one thread per call) and, with its reproducibility
setting, gives the same bits for a product whatever the arrays' addresses; OpenBLAS runs on the
calling thread while the executor holds BLAS at one thread (threadpoolctl: the library loaded is
the one NumPy runs). MKL's bits differ from OpenBLAS's in the last places, and a sum accumulated
by gemm from np.matmul's product-then-add.
"""

from __future__ import annotations

import ctypes
import itertools
import math
from collections.abc import Callable

import attrs
import numpy as np

from prims import mkl, openblas
from prims.mkl import NO_TRANSPOSE, ROW_MAJOR, TRANSPOSE  # cblas.h's, OpenBLAS's too

# Products gemm makes through ctypes: matrices of at least GEMM_MIN_MATRIX_MACS multiply-adds
# each, in a call of at least GEMM_MIN_CALL_MACS. MKL: on smaller ones OpenBLAS's kernels were
# faster (64x64 @ 64x64 in 3.3 µs against MKL's 4.6), and MKL's call through ctypes costs about
# 7 µs more than NumPy's (a single 128x64 @ 64x128 took 27 µs against NumPy's 19-22, four of
# them at once 75 against 84). OpenBLAS (its accumulating products): planning the call and
# passing it through ctypes costs about 8 µs, so a 128x64 @ 64x128 added into out took 22 µs
# against np.matmul's product and add's 15 (AMD EPYC).
GEMM_MIN_MATRIX_MACS = 1 << 20
GEMM_MIN_CALL_MACS = 1 << 22

# A float32 product with x of SMALL_BLOCK_ROWS rows (an RNN's recurrent step: the batch) that
# NumPy's OpenBLAS would pack is made in column blocks its small-matrix kernels take, when these
# are at least SMALL_BLOCK_MIN_COLUMNS wide (`_in_small_blocks`). AMD EPYC (SkylakeX kernels),
# x row-major, y a transposed weight, against np.matmul's product of the long side first: 8x256 @
# 256x1024 in blocks of 147 columns 36 us against 60-70; 4 rows 0.3-0.5x the time; 16 rows (64
# columns) 0.9-1.5x, 32 and more rows 1.2-1.9x; one row (a matrix-vector product) 1.05-1.14x.
SMALL_BLOCK_ROWS = (2, 8)
SMALL_BLOCK_MIN_COLUMNS = 128

_FLOAT_TYPES = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}

Library = mkl.Mkl | openblas.OpenBlas


@attrs.frozen
class _Functions:
    """One library's gemm and strided batch gemm (None: the library lacks it, a loop of gemm
    calls instead) for one dtype (prototyped once)."""

    gemm: Callable[..., None]
    gemm_batch: Callable[..., None] | None


# Each library's functions per dtype, keyed by the library object's id: `mkl.library()` and
# `openblas.library()` each return one object for the process, so this is filled once.
_functions: dict[tuple[int, np.dtype], _Functions] = {}


def library() -> Library | None:
    """The library making products through ctypes now: MKL when in use, else NumPy's OpenBLAS
    when found, else None (np.matmul only). Asked at every call: `mkl.disabled()` and
    `openblas.disabled()` switch it."""
    return mkl.library() or openblas.library()


def gemm_in_use() -> bool:
    """Whether a gemm through ctypes (MKL's, or NumPy's OpenBLAS) makes the accumulating
    products now: the shifted-product convolutions run only then (contraction.py)."""
    return library() is not None


def matmul(
    x: np.ndarray,
    y: np.ndarray,
    out: np.ndarray,
    *,
    swap_for_numpy: bool = False,
    accumulate: bool = False,
) -> None:
    """out[...] = x @ y, as `np.matmul(x, y, out=out)` computes it (x and y of at least 2 dims,
    batch dims broadcast); by a library's gemm through ctypes (`library()`) when its sizes and
    layouts allow it — MKL any product, NumPy's OpenBLAS only accumulating ones (a plain one
    through ctypes measured no faster than np.matmul, the same kernels). With `swap_for_numpy`, NumPy makes it as (y^T @ x^T)^T: OpenBLAS is faster
    with the long side first on some shapes (the contraction engine's `swap_rows`), so such a
    product is np.matmul's unless MKL (which takes either order alike) makes it. With
    `accumulate`, out += x @ y instead: gemm adds the product to out as it makes it (beta = 1),
    np.matmul makes it in a temporary array and adds that."""
    provider = library()
    if provider is not None and (accumulate or provider.plain_products):
        if gemm_matmul(provider, x, y, out, accumulate=accumulate):
            return
    if not accumulate and _in_small_blocks(x, y, out):
        return
    if accumulate:
        np.add(out, np.matmul(x, y), out=out)
    elif swap_for_numpy:
        np.copyto(out, np.matmul(y.swapaxes(-1, -2), x.swapaxes(-1, -2)).swapaxes(-1, -2))
    else:
        np.matmul(x, y, out=out)


def _in_small_blocks(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> bool:
    """out[...] = x @ y made by np.matmul in column blocks that NumPy's OpenBLAS makes with its
    small-matrix kernels (`OpenBlas.small_columns`), or False (nothing written): a float32
    product of a row-major x of `SMALL_BLOCK_ROWS` rows, too large for those kernels as a whole,
    whose blocks of even width are at least `SMALL_BLOCK_MIN_COLUMNS` wide. Each block's
    elements are dot products of x's rows and y's columns as the whole product's are, in
    another kernel: its bits may differ in the last places (the plan's parts are fixed at plan
    time, so every thread count makes the same blocks)."""
    if x.ndim != 2 or y.ndim != 2 or out.ndim != 2 or out.dtype != np.float32:
        return False
    rows, depth = x.shape
    columns = y.shape[1]
    if not SMALL_BLOCK_ROWS[0] <= rows <= SMALL_BLOCK_ROWS[1] or columns < 2 * (
        SMALL_BLOCK_MIN_COLUMNS
    ):
        return False
    itemsize = out.itemsize
    if x.dtype != out.dtype or y.dtype != out.dtype or x.strides[1] != itemsize:
        return False
    if y.strides[0] == itemsize and y.strides[1] >= depth * itemsize:
        y_transposed = True
    elif y.strides[1] == itemsize:
        y_transposed = False
    else:
        return False
    provider = openblas.library()
    widest = 0 if provider is None else provider.small_columns(rows, depth, y_transposed)
    if widest >= columns or widest < SMALL_BLOCK_MIN_COLUMNS:
        return False
    count = -(-columns // widest)
    width = -(-columns // count)
    for start in range(0, columns, width):
        np.matmul(x, y[:, start : start + width], out=out[:, start : start + width])
    return True


def gemm_matmul(
    library: Library,
    x: np.ndarray,
    y: np.ndarray,
    out: np.ndarray,
    *,
    accumulate: bool = False,
) -> bool:
    """The product by the library's gemm (added to out's values with `accumulate`), or False
    (nothing written) when its size or layout is not the library's."""
    call = _gemm_call(library, x, y, out)
    if call is None:
        return False
    call(x.ctypes.data, y.ctypes.data, out.ctypes.data, 1.0 if accumulate else 0.0)
    return True


def matmul_sum(x: np.ndarray, y: np.ndarray, out: np.ndarray, axes: int) -> None:
    """out[...] = the sum over the `axes` leading axes S of x [*S, ..., M, K] and y
    [*S, ..., K, N] (both of one S) of x[s] @ y[s], the products added in S's row-major order:
    each an accumulating `matmul`, made by gemm at addresses computed from the strides (one
    layout check for all of them; a convolution's shifted products are nine such calls)."""
    shape = x.shape[:axes]
    if math.prod(shape) == 0:
        out.fill(0)
        return
    provider = library()
    call = None
    if provider is not None and not (np.may_share_memory(out, x) or np.may_share_memory(out, y)):
        first = (0,) * axes
        call = _gemm_call(provider, x[first], y[first], out)
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


def _gemm_call(
    library: Library, x: np.ndarray, y: np.ndarray, out: np.ndarray
) -> Callable[[int, int, int, float], None] | None:
    """The library's product of arrays of x's, y's and out's layout, as a function of their
    addresses and beta (out = x @ y + beta·out), or None when their size or layout is not the
    library's."""
    if x.ndim < 2 or y.ndim < 2:
        return None
    m, k = x.shape[-2:]
    n = y.shape[-1]
    matrix_macs = m * n * k
    if (
        matrix_macs < GEMM_MIN_MATRIX_MACS
        or matrix_macs * (out.size // (m * n)) < GEMM_MIN_CALL_MACS
    ):
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
    # MKL's LP64 interface takes sizes, leading dimensions and strides as 32-bit ints, ILP64
    # OpenBLAS's as 64-bit ones
    largest = max(m, n, k, x_layout[1], y_layout[1], out_layout[1], *(d[0] for d in dims))
    if dims:
        largest = max(largest, *(abs(step) // itemsize for step in dims[-1][1:]))
    if largest > library.max_int:
        return None
    if not out.flags.writeable:  # np.matmul refuses it
        return None
    if np.may_share_memory(out, x) or np.may_share_memory(out, y):
        return None
    functions = _functions_for(library, dtype)
    swapped = out_layout[0] == TRANSPOSE
    if swapped:
        # out^T (n x m, row-major) = y^T @ x^T
        m, n = n, m
        x_layout, y_layout = _flipped(y_layout), _flipped(x_layout)
        dims = [(size, y_step, x_step, out_step) for size, x_step, y_step, out_step in dims]
    (x_transpose, x_leading), (y_transpose, y_leading) = x_layout, y_layout
    out_leading = out_layout[1]
    gemm, gemm_batch = functions.gemm, functions.gemm_batch

    def one(x_at: int, y_at: int, out_at: int, beta: float) -> None:
        gemm(
            ROW_MAJOR,
            x_transpose,
            y_transpose,
            m,
            n,
            k,
            1.0,
            x_at,
            x_leading,
            y_at,
            y_leading,
            beta,
            out_at,
            out_leading,
        )

    def call(x_address: int, y_address: int, out_address: int, beta: float) -> None:
        if swapped:
            x_address, y_address = y_address, x_address
        if not dims:
            one(x_address, y_address, out_address, beta)
            return
        count, x_step, y_step, out_step = dims[-1]
        outer = dims[:-1]
        for position in itertools.product(*(range(size) for size, *_ in outer)):
            x_at, y_at, out_at = x_address, y_address, out_address
            for index, (_, x_outer, y_outer, out_outer) in zip(position, outer):
                x_at += index * x_outer
                y_at += index * y_outer
                out_at += index * out_outer
            if gemm_batch is None:
                for i in range(count):
                    one(x_at + i * x_step, y_at + i * y_step, out_at + i * out_step, beta)
                continue
            gemm_batch(
                ROW_MAJOR,
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


def _functions_for(library: Library, dtype: np.dtype) -> _Functions:
    key = (id(library), dtype)
    functions = _functions.get(key)
    if functions is None:
        float_type = _FLOAT_TYPES[dtype]
        functions = _functions[key] = _Functions(
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
            return NO_TRANSPOSE, step // itemsize
    if row_stride == itemsize or rows == 1:
        step = column_stride if columns > 1 else max(1, rows) * itemsize
        if step % itemsize == 0 and step >= max(1, rows) * itemsize:
            return TRANSPOSE, step // itemsize
    return None


def _flipped(layout: tuple[int, int]) -> tuple[int, int]:
    """The layout of the transposed matrix (same memory)."""
    transpose, leading = layout
    return (TRANSPOSE if transpose == NO_TRANSPOSE else NO_TRANSPOSE), leading


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
