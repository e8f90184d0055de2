"""What the hand-written sample modules share: the dtype groups they register samples for, and
reproducible random tensors (torch imported lazily, inside the functions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...frontends.torch_interop import torch_dtype
from ...ir.dtypes import DType

# Dtype groups, each in DType's order (sample modules rotate variants by a dtype's position).
FLOATS = (DType.float16, DType.bfloat16, DType.float32, DType.float64)
COMPLEX = (DType.complex64, DType.complex128)
INTS = (DType.uint8, DType.int8, DType.int16, DType.int32, DType.int64)
ORDERED = (DType.bool, *INTS, *FLOATS)
ALL = (*ORDERED, *COMPLEX)
NAN = float("nan")
INF = float("inf")


def random_tensor(
    shape: Sequence[int],
    dtype: DType,
    seed: int = 0,
    *,
    low: int = -4,
    high: int = 5,
    positive: bool = False,
) -> Any:
    """Reproducible values of `dtype`: small integers in [low, high) for integral dtypes (so ties
    and duplicates occur; uint8 from 0), half True for bool, normal values otherwise (|normal| + 0.5
    with `positive`, e.g. for variances; complex ones with an independent normal imaginary part)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    shape = tuple(shape)
    if dtype is DType.bool:
        return torch.rand(shape, generator=generator) < 0.5
    if dtype.is_integral:
        low = max(low, 0) if dtype is DType.uint8 else low
        return torch.randint(low, high, shape, generator=generator).to(torch_dtype(dtype))
    values = torch.randn(shape, generator=generator, dtype=torch.float64)
    if positive:
        values = values.abs() + 0.5
    if dtype.is_complex:
        values = torch.complex(values, torch.randn(shape, generator=generator, dtype=torch.float64))
    return values.to(torch_dtype(dtype))


def spanning_magnitudes(shape: Sequence[int], dtype: DType, seed: int = 0) -> Any:
    """Normal values of a floating `dtype` whose slices along the first dim are scaled from 10
    down to 1e-3 (log-spaced): the results of a product or sum over them span magnitudes, so a
    rule wrong only on small values (flushing them to zero) shows, beside large ones whose
    rounding errors are far larger than the small values themselves."""
    import torch

    values = random_tensor(shape, DType.float64, seed)
    scales = torch.logspace(1, -3, shape[0], dtype=torch.float64)
    return (values * scales.reshape(-1, *[1] * (len(shape) - 1))).to(torch_dtype(dtype))


__all__ = [
    "ALL",
    "COMPLEX",
    "FLOATS",
    "INF",
    "INTS",
    "NAN",
    "ORDERED",
    "random_tensor",
    "spanning_magnitudes",
    "torch_dtype",
]
