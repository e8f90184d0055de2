"""FFT prims: fft_r2c, fft_c2c, fft_c2r — unnormalized transforms over the listed dims, as torch's
`_fft_r2c/_fft_c2c/_fft_c2r` with normalization 0 (no scaling in either direction).

Dims may be negative (torch's metas canonicalize them) and may not repeat. torch's CPU backend
(MKL/pocketfft) takes float32/float64 and their complex counterparts only; so do we. Every
transformed dim must be non-empty, and for c2r the halved dim must hold last_dim_size // 2 + 1
entries, as torch's kernels require (its metas do not check).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.symbolic import is_size
from aten2prims.ir.values import TensorMeta, Value

from .common import COMPLEX, F32_F64, canonical_dims, check_dtype, check_tensor
from .registry import register


def _fft_dims(x: Value, dim: Sequence[int], *, allow_empty: bool) -> tuple[int, ...]:
    if not isinstance(dim, tuple | list):
        raise ShapeError(f"dim must be a list of ints, got {dim!r}")
    if not dim and not allow_empty:
        raise ShapeError("dim must name at least one dimension")
    if dim and x.ndim == 0:
        raise ShapeError("a 0-dim tensor has no dimension to transform")
    dims = canonical_dims(dim, x.ndim)
    for d in dims:
        if x.shape[d] == 0:
            raise ShapeError(f"cannot transform dimension {d} of size 0")
    return dims


def _r2c_meta(self: Value, dim: Sequence[int], onesided: bool) -> TensorMeta:
    check_tensor(self, "self")
    check_dtype(self.dtype, F32_F64)
    dims = _fft_dims(self, dim, allow_empty=False)
    shape = list(self.shape)
    if onesided:
        shape[dims[-1]] = shape[dims[-1]] // 2 + 1
    return TensorMeta(tuple(shape), self.dtype.to_complex)


def _r2c_kernel(self: np.ndarray, dim: Sequence[int], onesided: bool) -> np.ndarray:
    axes = tuple(d % self.ndim for d in dim)
    result = np.fft.rfftn(self, axes=axes) if onesided else np.fft.fftn(self, axes=axes)
    return result.astype(np.result_type(self.dtype, np.complex64), copy=False)


register(
    "fft_r2c(Tensor self, *, int[] dim, bool onesided) -> Tensor",
    meta=_r2c_meta,
    kernel=_r2c_kernel,
    doc="forward real-to-complex FFT over dim; onesided keeps the last transformed dim's n // 2 + 1 "
    "non-redundant entries",
)


def _c2c_meta(self: Value, dim: Sequence[int], forward: bool) -> TensorMeta:
    check_tensor(self, "self")
    check_dtype(self.dtype, COMPLEX)
    _fft_dims(self, dim, allow_empty=True)
    if type(forward) is not bool:
        raise DTypeError(f"forward must be a bool, got {forward!r}")
    return TensorMeta(self.shape, self.dtype)


def _c2c_kernel(self: np.ndarray, dim: Sequence[int], forward: bool) -> np.ndarray:
    if not dim:
        return self.copy()
    axes = tuple(d % self.ndim for d in dim)
    # norm="forward" puts the 1/n on the forward transform, leaving the inverse unscaled.
    result = (
        np.fft.fftn(self, axes=axes) if forward else np.fft.ifftn(self, axes=axes, norm="forward")
    )
    return result.astype(self.dtype, copy=False)


register(
    "fft_c2c(Tensor self, *, int[] dim, bool forward) -> Tensor",
    meta=_c2c_meta,
    kernel=_c2c_kernel,
    doc="complex FFT over dim, forward or (unscaled) inverse",
)


def _c2r_meta(self: Value, dim: Sequence[int], last_dim_size: int) -> TensorMeta:
    check_tensor(self, "self")
    check_dtype(self.dtype, COMPLEX)
    dims = _fft_dims(self, dim, allow_empty=False)
    if not is_size(last_dim_size) or last_dim_size < 1:
        raise ShapeError(f"last_dim_size must be a positive int, got {last_dim_size!r}")
    halved = self.shape[dims[-1]]
    if halved != last_dim_size // 2 + 1:
        raise ShapeError(
            f"dimension {dims[-1]} has {halved} entries; a real signal of length {last_dim_size} needs "
            f"{last_dim_size // 2 + 1}"
        )
    shape = list(self.shape)
    shape[dims[-1]] = last_dim_size
    return TensorMeta(tuple(shape), self.dtype.real)


def _c2r_kernel(self: np.ndarray, dim: Sequence[int], last_dim_size: int) -> np.ndarray:
    axes = tuple(d % self.ndim for d in dim)
    sizes = [self.shape[d] for d in axes[:-1]] + [last_dim_size]
    result = np.fft.irfftn(self, s=sizes, axes=axes, norm="forward")
    return result.astype(self.real.dtype, copy=False)


register(
    "fft_c2r(Tensor self, *, int[] dim, SymInt last_dim_size) -> Tensor",
    meta=_c2r_meta,
    kernel=_c2r_kernel,
    doc="unscaled inverse complex-to-real FFT over dim; the last transformed dim (n // 2 + 1 "
    "entries) becomes last_dim_size",
)
