"""FFTs: `_fft_r2c` and `_fft_c2r` are the unnormalized `fft_r2c`/`fft_c2r` prims times the scale
of ATen's fft_norm_mode."""

from __future__ import annotations

import math
from collections.abc import Sequence

import prims
from aten2prims.errors import ShapeError
from aten2prims.ir.values import Value

from .common import canonical_dim, slice_in_dim
from .registry import register


def _fft_normalized(x: Value, normalization: int, signal: int, op: str) -> Value:
    """ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n (n: the signal's element count)."""
    if normalization == 0:
        return x
    if normalization == 1:
        return prims.mul(x, 1.0 / math.sqrt(signal))
    if normalization == 2:
        return prims.mul(x, 1.0 / signal)
    raise ShapeError(
        f"{op}: normalization must be 0 (none), 1 (by 1/sqrt(n)) or 2 (by 1/n), got {normalization}"
    )


@register("aten._fft_r2c.default")
def _fft_r2c(self: Value, dim: Sequence[int], normalization: int, onesided: bool) -> Value:
    op = "aten._fft_r2c"
    transformed = prims.fft_r2c(self, dim=list(dim), onesided=onesided)
    signal = math.prod(self.shape[canonical_dim(d, self.ndim)] for d in dim)
    return _fft_normalized(transformed, normalization, signal, op)


@register("aten._fft_c2r.default")
def _fft_c2r(self: Value, dim: Sequence[int], normalization: int, last_dim_size: int) -> Value:
    """The halved dim (the last of `dim`) holds last_dim_size // 2 + 1 entries, or the whole
    last_dim_size of them, of which torch's kernel reads the first half."""
    op = "aten._fft_c2r"
    if dim:
        last = canonical_dim(dim[-1], self.ndim)
        half = last_dim_size // 2 + 1
        if self.shape[last] == last_dim_size != half:
            self = slice_in_dim(self, 0, half, 1, last)
    transformed = prims.fft_c2r(self, dim=list(dim), last_dim_size=last_dim_size)
    signal = math.prod(transformed.shape[canonical_dim(d, self.ndim)] for d in dim)
    return _fft_normalized(transformed, normalization, signal, op)
