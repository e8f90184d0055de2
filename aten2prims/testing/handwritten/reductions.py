"""Hand-written samples for the overloads of decompositions/reductions.py.

OpInfo's samples of these ops are small (mostly 0-dim and 5-element tensors) and never reach
`var.dim`; these add what they miss: ties and NaNs for argmax/argmin/max/min, long scans for
cumsum, wrap-around integer sums, `dtype=` conversions, empty reductions, large-magnitude and
-inf softmax inputs. Hand-written samples run before OpInfo's within the sample budget, so the
most telling sample of each op comes first and each dtype keeps room for OpInfo's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ...ir.dtypes import DType
from ..record import AtenCall
from .common import (
    ALL,
    COMPLEX,
    FLOATS,
    INF,
    INTS,
    NAN,
    ORDERED,
    random_tensor,
    spanning_magnitudes,
    torch_dtype,
)
from .registry import handwritten


def _with_nans_and_ties(dtype: DType) -> Any:
    """A [4, 6] tensor whose rows hold: a repeated maximum and minimum, NaNs (floats only) after
    and before the extremes, and all-equal values."""
    import torch

    rows: list[list[float]] = [
        [1, 3, 0, 3, 0, 2],
        [2, NAN, 1, NAN, 4, 0],
        [NAN, 0, 5, 1, 5, 0],
        [2, 2, 2, 2, 2, 2],
    ]
    if not dtype.is_floating:
        rows = [[0 if v != v else v for v in row] for row in rows]
    return torch.tensor(rows, dtype=torch.float64).to(torch_dtype(dtype))


def _call(op: str, *args: Any, **kwargs: Any) -> AtenCall:
    return AtenCall(op, args, kwargs, origin="handwritten")


# -- sum, prod, mean ------------------------------------------------------------------------------


@handwritten("aten.sum.dim_IntList", ALL)
def _sum_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    if dtype is DType.int8:
        wrapping = torch.full((3, 40), 100, dtype=torch.int8)
        yield _call("aten.sum.dim_IntList", wrapping, [1], False, dtype=torch.int8)  # wraps around
    if dtype is DType.float32:
        yield _call(
            "aten.sum.dim_IntList", random_tensor((3, 4), dtype), [0], dtype=torch.float16
        )  # rounds first
        yield _call(
            "aten.sum.dim_IntList", random_tensor((3, 4), dtype) * 3, None, dtype=torch.int32
        )  # truncates first
    yield _call(
        "aten.sum.dim_IntList", random_tensor((4, 0, 3), dtype), [1, 2], True
    )  # empty: zeros
    if dtype.is_floating:
        # Rows from 10 down to 1e-3 in magnitude: sums of every size, tiny ones included.
        yield _call("aten.sum.dim_IntList", spanning_magnitudes((6, 10), dtype, 7), [1])


@handwritten("aten.prod.dim_int", ALL)
def _prod_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    yield _call("aten.prod.dim_int", random_tensor((3, 0), dtype), 1)  # empty: ones
    if dtype is DType.int16:
        yield _call(
            "aten.prod.dim_int",
            torch.full((2, 5), 7, dtype=torch.int16),
            -1,
            True,
            dtype=torch.int16,
        )


@handwritten("aten.mean.dim", (*ALL,))
def _mean_dim_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    if dtype.is_integral:  # integers need dtype=
        yield _call("aten.mean.dim", random_tensor((3, 5), dtype), [1], True, dtype=torch.float32)
        yield _call("aten.mean.dim", random_tensor((3, 5), dtype), None, dtype=torch.float64)
        return
    yield _call("aten.mean.dim", random_tensor((4, 0), dtype), [1])  # empty: NaN
    if dtype.is_low_precision:
        yield _call("aten.mean.dim", random_tensor((3, 50), dtype), [1], dtype=torch.float32)
    if dtype is DType.float32:
        yield _call("aten.mean.dim", random_tensor((3, 50), dtype), [-1], dtype=torch.float16)


@handwritten("aten.mean.default", INTS)
def _mean_default_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    yield _call("aten.mean.default", random_tensor((4, 3), dtype), dtype=torch.float32)


# -- var ------------------------------------------------------------------------------------------


@handwritten("aten.var.dim", (*FLOATS, *COMPLEX))
def _var_dim_samples(dtype: DType) -> Iterator[AtenCall]:
    yield _call("aten.var.dim", random_tensor((4, 7), dtype), [1])
    yield _call("aten.var.dim", random_tensor((3, 4, 5), dtype, seed=1), [0, 2], False, True)
    yield _call("aten.var.dim", random_tensor((6,), dtype, seed=2), None)
    yield _call("aten.var.dim", random_tensor((2, 3), dtype, seed=3), [], True)
    yield _call("aten.var.dim", random_tensor((0, 3), dtype), [0])  # empty: NaN


@handwritten("aten.var.correction", (*FLOATS, *COMPLEX))
def _var_correction_samples(dtype: DType) -> Iterator[AtenCall]:
    # Values far from zero: a one-pass formula would lose them.
    yield _call(
        "aten.var.correction",
        random_tensor((5, 64), dtype) + 100,
        [1],
        correction=0.5,
        keepdim=True,
    )


# -- amax, amin, any ------------------------------------------------------------------------------


def _extreme_samples(op: str) -> None:
    @handwritten(op, ORDERED)
    def samples(dtype: DType) -> Iterator[AtenCall]:
        yield _call(op, _with_nans_and_ties(dtype), [1])  # NaN propagates
        yield _call(op, random_tensor((0, 3), dtype), [1], True)  # empty input, non-empty reduction

    samples.__name__ = f"_{op.split('.')[1]}_samples"


for _op in ("aten.amax.default", "aten.amin.default"):
    _extreme_samples(_op)


@handwritten("aten.any.dims", ALL)
def _any_dims_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    mostly_zero = torch.zeros((3, 4, 2), dtype=torch_dtype(dtype))
    mostly_zero[1, 2, 0] = NAN if dtype.is_floating else 1
    yield _call("aten.any.dims", mostly_zero, [0, 2], True)  # NaN counts as true
    yield _call("aten.any.dims", random_tensor((2, 0, 3), dtype), [1, 2])  # empty: False
    yield _call("aten.any.dims", random_tensor((3, 4), dtype), [], True)  # [] reduces nothing


@handwritten("aten.any.dim", ALL)
def _any_dim_samples(dtype: DType) -> Iterator[AtenCall]:
    yield _call("aten.any.dim", random_tensor((0, 4), dtype), 0, True)  # empty: False


# -- argmax, argmin, max.dim, min.dim ------------------------------------------------------------


def _arg_samples(op: str, dtypes: Sequence[DType]) -> None:
    @handwritten(op, dtypes)
    def samples(dtype: DType) -> Iterator[AtenCall]:
        yield _call(op, _with_nans_and_ties(dtype), 1)  # ties -> first index; NaN wins
        yield _call(op, _with_nans_and_ties(dtype), None, True)  # flattened

    samples.__name__ = f"_{op.split('.')[1]}_samples"


def _values_indices_samples(op: str) -> None:
    @handwritten(op, ORDERED)
    def samples(dtype: DType) -> Iterator[AtenCall]:
        yield _call(op, _with_nans_and_ties(dtype), 1)
        yield _call(op, _with_nans_and_ties(dtype).T.contiguous(), 0, True)
        yield _call(op, random_tensor((3, 0), dtype), 0)  # empty input, non-empty reduction

    samples.__name__ = f"_{op.split('.')[1]}_samples"


for _op in ("aten.argmax.default", "aten.argmin.default"):
    _arg_samples(_op, (*INTS, *FLOATS))
for _op in ("aten.max.dim", "aten.min.dim"):
    _values_indices_samples(_op)


# -- cumsum ------------------------------------------------------------------------------------------


@handwritten("aten.cumsum.default", ALL)
def _cumsum_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    if dtype in (
        DType.float16,
        DType.float32,
        DType.int32,
        DType.bfloat16,
        DType.float64,
        DType.complex64,
    ):
        yield _call(
            "aten.cumsum.default", random_tensor((5000,), dtype), 0
        )  # a long sequential sum
        yield _call("aten.cumsum.default", random_tensor((3, 1000), dtype, seed=1), -1)
    if dtype is DType.int8:
        yield _call(
            "aten.cumsum.default", torch.full((2, 9), 100, dtype=torch.int8), 1, dtype=torch.int8
        )  # wraps
    if dtype is DType.bool:
        yield _call("aten.cumsum.default", random_tensor((4, 7), dtype), 1)
    yield _call("aten.cumsum.default", random_tensor((0, 3), dtype), 0)  # empty


# -- softmax, log_softmax --------------------------------------------------------------------------


def _softmax_samples(op: str) -> None:
    @handwritten(op, FLOATS)
    def samples(dtype: DType) -> Iterator[AtenCall]:
        import torch

        # Large magnitudes (exp would overflow without subtracting the max) and -inf entries.
        wide = random_tensor((4, 33), dtype) * 30 + 200
        wide[0, 5] = -INF
        yield _call(op, wide, 1, False)
        yield _call(op, random_tensor((3, 4, 5), dtype, seed=1), 0, False)
        yield _call(op, torch.empty((2, 0), dtype=torch_dtype(dtype)), 1, False)

    samples.__name__ = f"_{op.split('.')[1]}_samples"


for _op in ("aten._softmax.default", "aten._log_softmax.default"):
    _softmax_samples(_op)


# -- var_mean, logcumsumexp, cummax, cummin (non-core overloads torch.export keeps) -----------------


@handwritten("aten.var_mean.correction", (*FLOATS, *COMPLEX))
def _var_mean_samples(dtype: DType) -> Iterator[AtenCall]:
    x = random_tensor((4, 5, 6), dtype)
    yield _call("aten.var_mean.correction", x, [0, 2], correction=0, keepdim=True)
    yield _call("aten.var_mean.correction", x, None, correction=2.5)
    yield _call("aten.var_mean.correction", x, [-1])


@handwritten("aten.logcumsumexp.default", (*FLOATS, *COMPLEX))
def _logcumsumexp_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    # Large magnitudes (exp would overflow), -inf (log 0) entries, +inf and NaN.
    wide = random_tensor((3, 40), dtype, seed=2) * 30 + 60
    yield _call("aten.logcumsumexp.default", wide, 1)
    if dtype.is_floating:
        special = torch.tensor(
            [[-INF, -INF, 0.0, -INF, 1.0], [1.0, INF, 2.0, -INF, 0.5], [0.0, NAN, 1.0, 2.0, -INF]],
            dtype=torch_dtype(dtype),
        )
        yield _call("aten.logcumsumexp.default", special, 1)
        yield _call("aten.logcumsumexp.default", special, 0)
    else:
        special = torch.tensor(
            [
                [complex(NAN, 1), 1 + 0j, 2 - 1j, complex(-INF, 2)],
                [complex(INF, 0), 1 + 1j, complex(INF, 1), 0.5j],
                [complex(-INF, 2), complex(-INF, 1), 1 + 1j, complex(1, NAN)],
            ],
            dtype=torch_dtype(dtype),
        )
        yield _call("aten.logcumsumexp.default", special, 1)
    yield _call("aten.logcumsumexp.default", random_tensor((0, 3), dtype), 0)  # empty


def _scan_extreme_samples(op: str) -> None:
    @handwritten(op, ORDERED)
    def samples(dtype: DType) -> Iterator[AtenCall]:
        # Ties (the last index wins) and NaNs (the last NaN wins) along both dims.
        ties = _with_nans_and_ties(dtype)
        yield _call(op, ties, 1)
        yield _call(op, ties, 0)
        yield _call(op, random_tensor((3, 70), dtype, seed=3), -1)  # several scan steps
        yield _call(op, random_tensor((), dtype, seed=4), 0)  # 0-dim

    samples.__name__ = f"_{op.split('.')[1]}_samples"


for _op in ("aten.cummax.default", "aten.cummin.default"):
    _scan_extreme_samples(_op)
