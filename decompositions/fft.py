"""FFTs: `_fft_r2c`, `_fft_c2c` (not Core ATen: torch.export keeps it,
aten2prims.schema.EXTRA_ATEN_SCHEMAS) and `_fft_c2r` are the unnormalized `fft_r2c`/`fft_c2c`/
`fft_c2r` prims times the scale of ATen's fft_norm_mode; `fft_fftfreq` and `fft_rfftfreq` (not Core
ATen either) their sample frequencies."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import SymExpr, is_symbolic
from aten2prims.ir.values import Value
from aten2prims.promotion import DEFAULT_FLOAT, convert, opmath_dtype

from .common import canonical_dim, iota, scalar, slice_in_dim
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


def _sample_frequencies(op: str, n: int, d: float, dtype: DType | None, onesided: bool) -> Value:
    """ATen's: the integer frequencies (0, 1, …, then −(n // 2), …, −1; one-sided 0, …, n // 2)
    as an arange of the dtype, times 1/(n·d) computed in double — an in-place product with a
    number, which takes the number rounded to the dtype and multiplies in opmath."""
    dtype = DEFAULT_FLOAT if dtype is None else dtype
    if not dtype.is_floating:  # (torch refuses complex dtypes too: it has no complex arange)
        raise DTypeError(f"{op}: dtype {dtype.short} is not supported (floating dtypes only)")
    if n < 0:
        raise ShapeError(f"{op}: n must be non-negative, got {n}")
    lengths = [n // 2 + 1] if onesided else [(n + 1) // 2, n // 2]
    starts = [0, -(n // 2)]
    pieces = [iota(length, start=start) for length, start in zip(lengths, starts) if length]
    ramp = pieces[0] if len(pieces) == 1 else prims.cat(pieces, dim=0) if pieces else iota(0)
    spacing = n * d
    # 1/(n·d) as C++'s double division: ±inf for a zero spacing, where Python's raises
    reciprocal = 1.0 / spacing if spacing != 0 else math.copysign(math.inf, spacing)
    compute = opmath_dtype(dtype)
    scale = convert(convert(scalar(reciprocal, DType.float64), dtype), compute)
    product = prims.mul(
        convert(convert(ramp, dtype), compute),
        prims.broadcast_in_dim(scale, list(ramp.shape), []),
    )
    return convert(product, dtype)


@register("aten.fft_fftfreq.default")
def fft_fftfreq(
    n: int, d: float, dtype: DType | None, layout: Any, device: Any, pin_memory: bool | None
) -> Value:
    return _sample_frequencies("aten.fft_fftfreq", n, d, dtype, onesided=False)


@register("aten.fft_rfftfreq.default")
def fft_rfftfreq(
    n: int, d: float, dtype: DType | None, layout: Any, device: Any, pin_memory: bool | None
) -> Value:
    return _sample_frequencies("aten.fft_rfftfreq", n, d, dtype, onesided=True)
