"""FFTs: `_fft_r2c`, `_fft_c2c` (not Core ATen: torch.export keeps it,
aten2prims.schema.EXTRA_ATEN_SCHEMAS) and `_fft_c2r` are the unnormalized `fft_r2c`/`fft_c2c`/
`fft_c2r` prims times the scale of ATen's fft_norm_mode."""

from __future__ import annotations

import math
from collections.abc import Sequence

import prims
from aten2prims.errors import ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import SymExpr, is_symbolic
from aten2prims.ir.values import Value
from aten2prims.promotion import convert

from .common import canonical_dim, scalar, slice_in_dim
from .registry import register


def _fft_normalized(x: Value, normalization: int, signal: int | SymExpr, op: str) -> Value:
    """ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n (n: the signal's element count),
    the scale computed in double as ATen computes it and rounded to x's dtype by the product."""
    if normalization == 0:
        return x
    if normalization == 1:
        if not is_symbolic(signal):
            return prims.mul(x, 1.0 / math.sqrt(signal))
        # A float expression has no sqrt: a symbolic n's 1/sqrt(n) is computed when the graph
        # runs, in float64 (sqrt and division correctly rounded, as C++'s double ones).
        scale = prims.reciprocal(prims.sqrt(scalar(signal, DType.float64)))
        return prims.mul(x, prims.broadcast_in_dim(convert(scale, x.dtype), list(x.shape), []))
    if normalization == 2:
        return prims.mul(x, 1.0 / signal)  # (a symbolic n: Python's correctly rounded 1 / n)
    raise ShapeError(
        f"{op}: normalization must be 0 (none), 1 (by 1/sqrt(n)) or 2 (by 1/n), got {normalization}"
    )


@register("aten._fft_r2c.default")
def _fft_r2c(self: Value, dim: Sequence[int], normalization: int, onesided: bool) -> Value:
    op = "aten._fft_r2c"
    transformed = prims.fft_r2c(self, dim=list(dim), onesided=onesided)
    signal = math.prod(self.shape[canonical_dim(d, self.ndim)] for d in dim)
    return _fft_normalized(transformed, normalization, signal, op)


@register("aten._fft_c2c.default")
def _fft_c2c(self: Value, dim: Sequence[int], normalization: int, forward: bool) -> Value:
    """The scale is the normalization's whichever the direction: torch.fft's norm modes pick
    the normalization (ifft's default "backward" asks 2, by 1/n) and `forward` the sign."""
    op = "aten._fft_c2c"
    transformed = prims.fft_c2c(self, dim=list(dim), forward=forward)
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
        # (asked in this order, a symbolic dim of the half's size decides nothing)
        if self.shape[last] != half and self.shape[last] == last_dim_size:
            self = slice_in_dim(self, 0, half, 1, last)
    transformed = prims.fft_c2r(self, dim=list(dim), last_dim_size=last_dim_size)
    signal = math.prod(transformed.shape[canonical_dim(d, self.ndim)] for d in dim)
    return _fft_normalized(transformed, normalization, signal, op)
