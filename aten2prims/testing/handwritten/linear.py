"""Hand-written samples for the overloads of decompositions/linear.py.

OpInfo reaches `convolution` through conv1d first (the fast budget sees nothing else) and never
reaches `convolution_backward` or `col2im`. These add transposed convolutions with
output_padding, groups, dilation, 3-d and 1-d cases, padding that crops a transposed
convolution, an empty batch, integer dtypes; the backward pass in every configuration; col2im
with overlapping and strided blocks; addmm's BLAS edges (beta = 0 ignores NaN in self, alpha = 0
ignores inf in the matrices, integer tensors truncate float beta/alpha).

Each op takes a few cases per dtype, rotating through its list, so every case runs on several
dtypes and OpInfo's samples keep room in the fast budget.

convolution_backward's `output_mask` entries that are False leave results undefined (None);
every mask is tested in tests/test_contraction.py, against torch's meta, which (unlike its CPU
kernel, which also returns grad_weight when only grad_bias is requested) follows the mask.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ...ir.dtypes import DType
from ..record import AtenCall
from .common import COMPLEX, FLOATS, INTS, random_tensor, spanning_magnitudes
from .registry import handwritten


def _rotating(dtype: DType, cases: Sequence[Any], count: int) -> list[Any]:
    """`count` of `cases`, starting at a position that moves with the dtype."""
    start = list(DType).index(dtype) * count
    return [cases[(start + k) % len(cases)] for k in range(min(count, len(cases)))]


# -- mm ----------------------------------------------------------------------------------------------


@handwritten("aten.mm.default", FLOATS)
def _mm(dtype: DType) -> Iterator[AtenCall]:
    # Rows from 10 down to 1e-3 in magnitude: products of every size, tiny ones included.
    yield AtenCall(
        "aten.mm.default",
        (spanning_magnitudes((6, 8), dtype, 5), random_tensor((8, 5), dtype, 6)),
        {},
        origin="handwritten",
    )


# -- addmm -------------------------------------------------------------------------------------------


@handwritten("aten.addmm.default", (*INTS, *FLOATS, *COMPLEX))
def _addmm(dtype: DType) -> Iterator[AtenCall]:
    nan_self = random_tensor((3,), dtype, 1)
    if dtype.is_floating or dtype.is_complex:
        nan_self[1] = float("nan")
        nan_self[2] = float("inf")
    inf_mat = random_tensor((2, 4), dtype, 2)
    if dtype.is_floating or dtype.is_complex:
        inf_mat[0, 1] = float("inf")
    cases = [
        (
            nan_self,
            random_tensor((2, 4), dtype, 3),
            random_tensor((4, 3), dtype, 4),
            {"beta": 0, "alpha": 2},
        ),
        (
            random_tensor((1, 3), dtype, 5),
            inf_mat,
            random_tensor((4, 3), dtype, 6),
            {"beta": 3, "alpha": 0},
        ),
        (
            random_tensor((2, 1), dtype, 7),
            random_tensor((2, 5), dtype, 8),
            random_tensor((5, 3), dtype, 9),
            {"beta": 0.5, "alpha": 1.5},
        ),
        (
            random_tensor((), dtype, 10),
            random_tensor((3, 0), dtype, 11),
            random_tensor((0, 2), dtype, 12),
            {"beta": 1, "alpha": 1},
        ),
        (
            random_tensor((2, 3), dtype, 13),
            random_tensor((2, 300), dtype, 14),
            random_tensor((300, 3), dtype, 15),
            {"beta": True, "alpha": -1},
        ),
    ]
    for self, mat1, mat2, scalars in _rotating(dtype, cases, 2):
        yield AtenCall(
            "aten.addmm.default", (self, mat1, mat2), dict(scalars), origin="handwritten"
        )


# -- convolution -------------------------------------------------------------------------------------

# (input shape, weight shape, bias?, stride, padding, dilation, transposed, output_padding, groups)
_CONVOLUTIONS: list[tuple[Any, ...]] = [
    ((2, 4, 7, 6), (6, 4, 3, 3), True, [2, 2], [1, 1], [1, 1], False, [0, 0], 1),
    ((2, 4, 5, 4), (4, 3, 3, 2), True, [2, 3], [1, 0], [1, 1], True, [1, 2], 1),  # output_padding
    ((1, 4, 5, 6, 5), (4, 2, 2, 3, 2), False, [1, 2, 1], [1, 0, 1], [2, 1, 1], False, [0, 0, 0], 2),
    ((2, 4, 9), (4, 1, 3), True, [3], [2], [2], True, [1], 2),  # 1-d transposed, groups, dilation
    ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), True, [2, 1, 2], [0, 1, 1], [1, 1, 1], True, [1, 0, 0], 1),
    (
        (2, 6, 8, 7),
        (6, 2, 3, 3),
        False,
        [1, 2],
        [2, 3],
        [1, 1],
        False,
        [0, 0],
        3,
    ),  # padding > kernel
    ((1, 3, 6, 5), (3, 2, 3, 3), True, [1, 1], [3, 2], [1, 1], True, [0, 0], 1),  # transposed crop
    ((0, 4, 6, 6), (4, 4, 3, 3), True, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),  # empty batch
    ((1, 16, 5, 7), (16, 4, 1, 1), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 4),  # 1x1, grouped
]
# Sums of 576 products (64 channels x 3x3), run on every floating dtype: float16/bfloat16 must
# accumulate in float32 and round once, as torch does.
_LONG_SUMS = ((2, 64, 6, 6), (8, 64, 3, 3), True, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)


def _convolution_call(
    op: str, dtype: DType, case: tuple[Any, ...], seed: int, *extra: Any
) -> AtenCall:
    (
        input_shape,
        weight_shape,
        has_bias,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
    ) = case
    x = random_tensor(input_shape, dtype, seed)
    w = random_tensor(weight_shape, dtype, seed + 1)
    bias_channels = weight_shape[1] * groups if transposed else weight_shape[0]
    if op == "aten.convolution.default":
        bias = random_tensor((bias_channels,), dtype, seed + 2) if has_bias else None
        args = (x, w, bias, stride, padding, dilation, transposed, output_padding, groups)
    else:
        import torch

        forward = torch.ops.aten.convolution.default(
            x, w, None, stride, padding, dilation, transposed, output_padding, groups
        )
        grad = random_tensor(tuple(forward.shape), dtype, seed + 2)
        bias_sizes = [bias_channels] if has_bias else None
        args = (
            grad,
            x,
            w,
            bias_sizes,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
            *extra,
        )
    return AtenCall(op, args, {}, origin="handwritten")


# torch's CPU kernels for uint8/int8/int16 have neither transposed nor dilated convolutions.
_PLAIN_CONVOLUTIONS = [case for case in _CONVOLUTIONS if not case[6] and max(case[5]) == 1]


@handwritten("aten.convolution.default", (*INTS, *FLOATS))
def _convolution(dtype: DType) -> Iterator[AtenCall]:
    narrow = dtype in (DType.uint8, DType.int8, DType.int16)
    cases = _rotating(dtype, _PLAIN_CONVOLUTIONS if narrow else _CONVOLUTIONS, 2)
    if dtype.is_floating:
        cases = [_LONG_SUMS, cases[0]]
    for index, case in enumerate(cases):
        yield _convolution_call("aten.convolution.default", dtype, case, 20 + index)
    if dtype.is_floating:
        # Batches from 10 down to 1e-3 in magnitude: results of every size, tiny ones included.
        x = spanning_magnitudes((4, 3, 5, 5), dtype, 30)
        w = random_tensor((2, 3, 3, 3), dtype, 31)
        yield AtenCall(
            "aten.convolution.default",
            (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
            {},
            origin="handwritten",
        )


@handwritten("aten.convolution_backward.default", FLOATS)
def _convolution_backward(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate([_LONG_SUMS, *_rotating(dtype, _CONVOLUTIONS, 3)]):
        yield _convolution_call(
            "aten.convolution_backward.default", dtype, case, 40 + index, [True, True, True]
        )


# -- col2im ------------------------------------------------------------------------------------------

# (input shape, output_size, kernel_size, dilation, padding, stride)
_COL2IM: list[tuple[Any, ...]] = [
    ((2, 3 * 2 * 2, 6), [3, 4], [2, 2], [1, 1], [0, 0], [1, 1]),  # overlapping blocks
    ((1, 2 * 3 * 2, 15), [6, 5], [3, 2], [1, 2], [1, 1], [2, 1]),  # padding, dilation, stride
    ((4 * 2 * 2, 9), [5, 5], [2, 2], [2, 2], [1, 0], [2, 1]),  # unbatched
    ((2, 1 * 3 * 3, 16), [4, 4], [3, 3], [1, 1], [1, 1], [1, 1]),  # 9 blocks overlap each pixel
    ((1, 2 * 2 * 2, 4), [4, 4], [2, 2], [1, 1], [0, 0], [2, 2]),  # no overlap
]


@handwritten("aten.col2im.default", (DType.bool, *FLOATS, *COMPLEX))
def _col2im(dtype: DType) -> Iterator[AtenCall]:
    for index, (shape, *rest) in enumerate(_rotating(dtype, _COL2IM, 3)):
        yield AtenCall(
            "aten.col2im.default",
            (random_tensor(shape, dtype, 60 + index), *rest),
            {},
            origin="handwritten",
        )


@handwritten("aten.conv_tbc.default", (DType.float32, DType.float64))
def _conv_tbc_samples(dtype: DType) -> Iterator[AtenCall]:
    x = random_tensor((9, 2, 4), dtype)
    weight, bias = random_tensor((3, 4, 5), dtype, seed=1), random_tensor((5,), dtype, seed=2)
    for pad in (0, 1, 2):
        yield AtenCall("aten.conv_tbc.default", (x, weight, bias, pad), {}, origin="handwritten")
