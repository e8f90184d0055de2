"""Hand-written samples for the overloads of decompositions/selection.py (order statistics and
binary searches; not Core ATen, torch.export keeps them).

OpInfo reaches them with small random tensors: these add ties and NaNs in every position for
the order statistics, values equal to boundaries, outside them and NaN for the searches, the
`sorter` and `side` arguments, the Scalar overloads (OpInfo never reaches searchsorted.Scalar)
and mixed dtypes that promote.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...ir.dtypes import DType
from ..record import AtenCall
from .common import FLOATS, INTS, NAN, random_tensor, torch_dtype
from .registry import handwritten

NUMBERS = (*INTS, *FLOATS)


def _call(op: str, *args: Any, **kwargs: Any) -> AtenCall:
    return AtenCall(op, args, kwargs, origin="handwritten")


def _ties(dtype: DType) -> Any:
    """Rows with repeated values, NaNs (floats only) and a constant row."""
    import torch

    rows: list[list[float]] = [
        [3, 1, 3, 1, 2, 2, 0],
        [NAN, 1, NAN, 2, 0, 1, 1],
        [4, 4, 4, 4, 4, 4, 4],
        [2, NAN, NAN, NAN, NAN, NAN, 1],
        [NAN, NAN, NAN, NAN, NAN, NAN, NAN],
    ]
    if not dtype.is_floating:
        rows = [[0 if v != v else v for v in row] for row in rows]
    return torch.tensor(rows, dtype=torch.float64).to(torch_dtype(dtype))


@handwritten("aten.kthvalue.default", NUMBERS)
def _kthvalue_samples(dtype: DType) -> Iterator[AtenCall]:
    x = _ties(dtype)
    for k in (1, 4, 7):
        yield _call("aten.kthvalue.default", x, k, 1)
    yield _call("aten.kthvalue.default", x, 2, 0, True)
    yield _call("aten.kthvalue.default", random_tensor((), dtype), 1)


def _median_samples(op: str) -> None:
    @handwritten(op, NUMBERS)
    def samples(dtype: DType) -> Iterator[AtenCall]:
        x = _ties(dtype)
        yield _call(op, x, 1)
        yield _call(op, x, 0, True)
        yield _call(op, random_tensor((4, 6), dtype, seed=1), -1)  # even counts: the lower median
        yield _call(op, random_tensor((), dtype), 0)

    samples.__name__ = f"_{op.split('.')[1]}_samples"


def _median_of_all_samples(op: str) -> None:
    @handwritten(op, NUMBERS)
    def samples(dtype: DType) -> Iterator[AtenCall]:
        yield _call(op, _ties(dtype))
        yield _call(op, random_tensor((4, 6), dtype, seed=1))
        if dtype.is_floating:
            yield _call(op, random_tensor((0, 3), dtype))  # empty: NaN

    samples.__name__ = f"_{op.split('.')[1]}_all_samples"


for _op in ("aten.median.dim", "aten.nanmedian.dim"):
    _median_samples(_op)
for _op in ("aten.median.default", "aten.nanmedian.default"):
    _median_of_all_samples(_op)


@handwritten("aten.mode.default", (DType.bool, *NUMBERS))
def _mode_samples(dtype: DType) -> Iterator[AtenCall]:
    # Equally frequent values (the smallest wins) without NaN: torch's sort orders NaN
    # arbitrarily, so its mode of a row holding NaN is unspecified.
    x = _ties(dtype)[:3].nan_to_num(5) if dtype.is_floating else _ties(dtype)
    yield _call("aten.mode.default", x, 1)
    yield _call("aten.mode.default", x, 0, True)
    yield _call("aten.mode.default", random_tensor((3, 40), dtype, seed=2, low=0, high=6), -1)
    yield _call("aten.mode.default", random_tensor((), dtype), 0)


def _boundaries(dtype: DType) -> Any:
    import torch

    return torch.tensor([-3, -1, -1, 0, 2, 2, 2, 4], dtype=torch_dtype(dtype))


def _probes(dtype: DType) -> Any:
    """Values equal to each boundary, between them, outside them, and NaN."""
    import torch

    values: list[float] = [-4, -3, -2, -1, 0, 1, 2, 3, 4, 5]
    if dtype.is_floating:
        values += [-1.5, 2.25, NAN]
    return torch.tensor(values, dtype=torch.float64).to(torch_dtype(dtype)).reshape(-1)


@handwritten("aten.searchsorted.Tensor", NUMBERS)
def _searchsorted_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    boundaries, probes = _boundaries(dtype), _probes(dtype)
    yield _call("aten.searchsorted.Tensor", boundaries, probes)
    yield _call("aten.searchsorted.Tensor", boundaries, probes, right=True, out_int32=True)
    yield _call("aten.searchsorted.Tensor", boundaries, probes, side="right")
    # A shuffled sequence with the sorter that orders it.
    order = torch.randperm(8, generator=torch.Generator().manual_seed(0))
    shuffled = boundaries[order]
    yield _call("aten.searchsorted.Tensor", shuffled, probes, sorter=torch.argsort(shuffled))
    # Rows of their own; values of another dtype (promoted together).
    rows = torch.sort(random_tensor((3, 9), dtype, seed=1), dim=1).values
    yield _call("aten.searchsorted.Tensor", rows, random_tensor((3, 5), dtype, seed=2))
    yield _call("aten.searchsorted.Tensor", boundaries, probes.to(torch.float64) + 0.5)
    yield _call("aten.searchsorted.Tensor", boundaries[:0], probes)  # empty sequence


@handwritten("aten.searchsorted.Scalar", NUMBERS)
def _searchsorted_scalar_samples(dtype: DType) -> Iterator[AtenCall]:
    boundaries = _boundaries(dtype)
    for value in (2, -1.5, 300, 4.0):
        yield _call("aten.searchsorted.Scalar", boundaries, value)
    yield _call("aten.searchsorted.Scalar", boundaries, 2, right=True, out_int32=True)


@handwritten("aten.bucketize.Tensor", NUMBERS)
def _bucketize_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    probes = _probes(dtype).reshape(-1)
    yield _call("aten.bucketize.Tensor", probes, _boundaries(dtype))
    yield _call("aten.bucketize.Tensor", probes.reshape(-1, 1), _boundaries(dtype), right=True)
    yield _call("aten.bucketize.Tensor", probes, _boundaries(DType.float64) + 0.5, out_int32=True)
    yield _call("aten.bucketize.Tensor", random_tensor((), dtype), torch.tensor([0, 1]))


@handwritten("aten.bucketize.Scalar", NUMBERS)
def _bucketize_scalar_samples(dtype: DType) -> Iterator[AtenCall]:
    boundaries = _boundaries(dtype)
    for value in (2, -1.5, 300):
        yield _call("aten.bucketize.Scalar", value, boundaries)
    yield _call("aten.bucketize.Scalar", 2, boundaries, right=True, out_int32=True)
