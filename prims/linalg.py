"""The linear-algebra prim: svd."""

from __future__ import annotations

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.layout import contiguous_strides
from aten2prims.ir.symbolic import lenient
from aten2prims.ir.values import TensorMeta, Value

from .common import COMPLEX, F32_F64, check_dtype, check_tensor
from .registry import register


def _svd_meta(A: Value, full_matrices: bool) -> tuple[TensorMeta, TensorMeta, TensorMeta]:
    check_tensor(A, "A")
    if A.ndim < 2:
        raise ShapeError(f"A must be a matrix or a batch of matrices, got shape {list(A.shape)}")
    check_dtype(A.dtype, F32_F64 | COMPLEX)
    if type(full_matrices) is not bool:
        raise DTypeError(f"full_matrices must be a bool, got {full_matrices!r}")
    *batch, m, n = A.shape
    k = min(m, n)
    u_shape = (*batch, m, m if full_matrices else k)
    vh_shape = (*batch, n if full_matrices else k, n)
    # torch's meta: U and Vh as batches of column-major matrices (LAPACK's layout on the CPU)
    return (
        TensorMeta(u_shape, A.dtype, _column_major(u_shape)),
        TensorMeta((*batch, k), A.dtype.real),
        TensorMeta(vh_shape, A.dtype, _column_major(vh_shape)),
    )


@lenient
def _column_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return contiguous_strides(shape)[:-2] + (1, shape[-2] if shape[-2] > 1 else 1)


def _svd_kernel(A: np.ndarray, full_matrices: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    u, s, vh = np.linalg.svd(A, full_matrices=full_matrices)
    return (
        u.astype(A.dtype, copy=False),
        s.astype(A.real.dtype, copy=False),
        vh.astype(A.dtype, copy=False),
    )


register(
    "svd(Tensor A, *, bool full_matrices) -> (Tensor U, Tensor S, Tensor Vh)",
    meta=_svd_meta,
    kernel=_svd_kernel,
    doc="A = U @ diag(S) @ Vh with S descending; the signs (phases) of singular vectors are the "
    "LAPACK driver's choice",
)
