"""Hand-written samples for the overloads of decompositions/normalization.py.

OpInfo never reaches `_native_batch_norm_legit.no_stats`, `_native_batch_norm_legit_no_training`,
the functional batch norm, the two normalization backward ops, `_embedding_bag` or
`embedding_dense_backward`, and reaches the others with default arguments only. These add
float16/bfloat16 inputs with float32 parameters (torch's "mixed" kernels), training with a
single value per channel, empty normalized dims, every embedding-bag mode with offsets holding
empty bags, include_last_offset, per_sample_weights, padding_idx, int32 indices, NaN/-inf/ties in
max bags; the embedding gradient with repeated indices, scale_grad_by_freq and padding_idx, in
every dtype; cdist with p in {0, 1, 2, 3.5, inf} on both of torch's p = 2 paths; pdist's edges;
the three FFT normalization modes (complex FFTs in both directions); sample frequencies of every
floating dtype, a spacing of 0 among them.

Ops OpInfo reaches take a few cases per dtype, rotating through their list, so OpInfo's samples
keep room in the fast budget; the others take every case, rotated so that the fast budget's
first samples differ from dtype to dtype. Either way every case runs on some dtype.

Not here, on purpose:
- backward calls with an `output_mask` entry False (tests/test_normalization.py runs every mask
  through the runner, whose graphs hold torch's None results as undefined ones);
- `_native_batch_norm_legit.no_stats` with training=False: torch 2.13's CPU kernel crashes the
  process (segmentation fault) on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ...ir.dtypes import DType
from ..budgets import FAST_BUDGET
from ..record import AtenCall
from .common import FLOATS, random_tensor, torch_dtype
from .registry import handwritten

LOW = (DType.float16, DType.bfloat16)
WIDE = (DType.float32, DType.float64)  # torch's CPU cdist, pdist and FFTs
# A bool grad_output followed by int indices is filed under the indices' dtype (as a mask would
# be), so bool gradients are tested in tests/test_normalization.py instead.
NOT_BOOL = tuple(d for d in DType if d is not DType.bool)


def _rotating(dtype: DType, cases: Sequence[Any], count: int | None = None) -> list[Any]:
    """`count` of `cases` (all of them when None), starting at a position that moves with the
    dtype. Ops OpInfo does not reach take all cases: the fast budget runs the first few."""
    step = FAST_BUDGET if count is None else count
    start = list(DType).index(dtype) * step
    return [
        cases[(start + k) % len(cases)]
        for k in range(len(cases) if count is None else min(count, len(cases)))
    ]


def _params(dtype: DType, mixed: bool) -> DType:
    """The parameters' dtype: float32 for a mixed case of a float16/bfloat16 input."""
    return DType.float32 if mixed and dtype.is_low_precision else dtype


def _indices(values: Sequence[int], dtype: DType = DType.int64) -> Any:
    import torch

    return torch.tensor(list(values), dtype=torch_dtype(dtype))


# -- batch norm ------------------------------------------------------------------------------------------

# (input shape, weight?, bias?, mixed?, momentum, eps)
_BATCH_NORMS: list[tuple[Any, ...]] = [
    ((2, 3, 4, 5), True, True, False, 0.1, 1e-5),
    ((4, 3), False, True, True, 0.3, 1e-3),
    ((1, 2, 6), True, False, True, 0.1, 1e-5),
    ((1, 4), True, True, False, 0.5, 1e-5),  # one value per channel: the unbiased variance is NaN
    ((3, 2, 2, 2, 3), False, False, False, 0.0, 0.1),
    ((5, 4, 3), True, True, True, 1.0, 1e-5),
]


def _batch_norm_arguments(dtype: DType, case: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
    shape, has_weight, has_bias, mixed, momentum, eps = case
    params = _params(dtype, mixed)
    x = random_tensor(shape, dtype, seed)
    weight = random_tensor((shape[1],), params, seed + 1) if has_weight else None
    bias = random_tensor((shape[1],), params, seed + 2) if has_bias else None
    running_mean = random_tensor((shape[1],), params, seed + 3)
    running_var = random_tensor((shape[1],), params, seed + 4, positive=True)
    return x, weight, bias, running_mean, running_var, momentum, eps


@handwritten("aten.native_batch_norm.default", FLOATS)
def _native_batch_norm(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate(_rotating(dtype, _BATCH_NORMS, 2)):
        x, weight, bias, mean, var, momentum, eps = _batch_norm_arguments(dtype, case, 10 + index)
        if index == 0:  # training without running stats
            args = (x, weight, bias, None, None, True, momentum, eps)
        else:
            args = (x, weight, bias, mean, var, False, momentum, eps)
        yield AtenCall("aten.native_batch_norm.default", args, {}, origin="handwritten")


@handwritten("aten._native_batch_norm_legit.default", FLOATS)
def _batch_norm_legit(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate(_rotating(dtype, _BATCH_NORMS, 2)):
        x, weight, bias, mean, var, momentum, eps = _batch_norm_arguments(dtype, case, 20 + index)
        args = (x, weight, bias, mean, var, index == 0, momentum, eps)
        yield AtenCall("aten._native_batch_norm_legit.default", args, {}, origin="handwritten")


@handwritten("aten._native_batch_norm_legit.no_stats", FLOATS)
def _batch_norm_legit_no_stats(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate(_rotating(dtype, _BATCH_NORMS)):
        x, weight, bias, _, _, momentum, eps = _batch_norm_arguments(dtype, case, 30 + index)
        args = (x, weight, bias, True, momentum, eps)  # training=False crashes torch (see above)
        yield AtenCall("aten._native_batch_norm_legit.no_stats", args, {}, origin="handwritten")


@handwritten("aten._native_batch_norm_legit_no_training.default", FLOATS)
def _batch_norm_legit_no_training(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate(_rotating(dtype, _BATCH_NORMS)):
        x, weight, bias, mean, var, momentum, eps = _batch_norm_arguments(dtype, case, 40 + index)
        args = (x, weight, bias, mean, var, momentum, eps)
        yield AtenCall(
            "aten._native_batch_norm_legit_no_training.default", args, {}, origin="handwritten"
        )


@handwritten("aten._native_batch_norm_legit_functional.default", FLOATS)
def _batch_norm_legit_functional(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate(_rotating(dtype, _BATCH_NORMS)):
        x, weight, bias, mean, var, momentum, eps = _batch_norm_arguments(dtype, case, 50 + index)
        args = (x, weight, bias, mean, var, index % 3 != 2, momentum, eps)
        yield AtenCall(
            "aten._native_batch_norm_legit_functional.default", args, {}, origin="handwritten"
        )


# -- layer norm ------------------------------------------------------------------------------------------

# (input shape, number of normalized trailing dims, weight?, bias?, mixed?, eps)
_LAYER_NORMS: list[tuple[Any, ...]] = [
    ((3, 4, 5), 2, True, True, True, 1e-5),
    ((2, 7), 1, False, True, True, 1e-3),
    ((6,), 1, True, True, False, 1e-5),  # every dim normalized
    ((2, 3, 0), 1, False, False, False, 1e-5),  # empty normalized dim: mean 0, rstd NaN
    ((0, 4), 1, True, False, False, 1e-5),  # no rows
    ((2, 2, 3, 4), 3, True, True, False, 0.5),
]


def _layer_norm_arguments(dtype: DType, case: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
    shape, count, has_weight, has_bias, mixed, eps = case
    normalized = list(shape[len(shape) - count :])
    params = _params(dtype, mixed)
    x = random_tensor(shape, dtype, seed)
    weight = random_tensor(normalized, params, seed + 1) if has_weight else None
    bias = random_tensor(normalized, params, seed + 2) if has_bias else None
    return x, normalized, weight, bias, eps


@handwritten("aten.native_layer_norm.default", FLOATS)
def _native_layer_norm(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate(_rotating(dtype, _LAYER_NORMS, 2)):
        args = _layer_norm_arguments(dtype, case, 60 + index)
        yield AtenCall("aten.native_layer_norm.default", args, {}, origin="handwritten")


@handwritten("aten.native_layer_norm_backward.default", FLOATS)
def _native_layer_norm_backward(dtype: DType) -> Iterator[AtenCall]:
    import torch

    for index, case in enumerate(_rotating(dtype, _LAYER_NORMS)):
        x, normalized, weight, bias, eps = _layer_norm_arguments(dtype, case, 70 + index)
        if weight is None or bias is None:
            # Every gradient is requested (see above), and torch needs both parameters for that.
            params = _params(dtype, case[4])
            weight, bias = (
                random_tensor(normalized, params, 80 + index),
                random_tensor(normalized, params, 90 + index),
            )
        _, mean, rstd = torch.ops.aten.native_layer_norm.default(x, normalized, weight, bias, eps)
        grad = random_tensor(tuple(x.shape), dtype, 100 + index)
        args = (grad, x, normalized, mean, rstd, weight, bias, [True, True, True])
        yield AtenCall("aten.native_layer_norm_backward.default", args, {}, origin="handwritten")


# -- group norm ------------------------------------------------------------------------------------------

# (input shape, group, weight?, bias?, mixed?, eps)
_GROUP_NORMS: list[tuple[Any, ...]] = [
    ((2, 6, 5), 3, True, True, True, 1e-5),
    ((3, 4), 2, True, False, False, 1e-5),  # HxW = 1
    ((2, 4, 3, 2), 4, False, True, True, 1e-3),
    ((0, 4, 3), 2, True, True, False, 1e-5),  # no batch
    ((2, 4, 0), 1, True, True, False, 1e-5),  # empty HxW: mean 0, rstd NaN
    ((1, 8, 2, 2, 2), 2, True, True, False, 0.25),
]


def _group_norm_arguments(dtype: DType, case: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
    shape, group, has_weight, has_bias, mixed, eps = case
    params = _params(dtype, mixed)
    x = random_tensor(shape, dtype, seed)
    weight = random_tensor((shape[1],), params, seed + 1) if has_weight else None
    bias = random_tensor((shape[1],), params, seed + 2) if has_bias else None
    hxw = 1
    for size in shape[2:]:
        hxw *= size
    return x, weight, bias, shape[0], shape[1], hxw, group, eps


@handwritten("aten.native_group_norm.default", FLOATS)
def _native_group_norm(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate(_rotating(dtype, _GROUP_NORMS, 2)):
        args = _group_norm_arguments(dtype, case, 110 + index)
        yield AtenCall("aten.native_group_norm.default", args, {}, origin="handwritten")


@handwritten("aten.native_group_norm_backward.default", FLOATS)
def _native_group_norm_backward(dtype: DType) -> Iterator[AtenCall]:
    import torch

    for index, case in enumerate(_rotating(dtype, _GROUP_NORMS)):
        x, weight, bias, n, c, hxw, group, eps = _group_norm_arguments(dtype, case, 120 + index)
        if weight is None:  # torch shapes both parameter gradients by the weight
            weight = random_tensor((c,), _params(dtype, case[4]), 130 + index)
        _, mean, rstd = torch.ops.aten.native_group_norm.default(
            x, weight, bias, n, c, hxw, group, eps
        )
        grad = random_tensor(tuple(x.shape), dtype, 140 + index)
        args = (grad, x, mean, rstd, weight, n, c, hxw, group, [True, True, True])
        yield AtenCall("aten.native_group_norm_backward.default", args, {}, origin="handwritten")


# -- embedding bags ---------------------------------------------------------------------------------------

# (indices, offsets, mode, include_last_offset, per_sample_weights?, padding_idx, indices dtype, offsets dtype)
_I32, _I64 = DType.int32, DType.int64
_EMBEDDING_BAGS: list[tuple[Any, ...]] = [
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 3, 5], 0, False, False, -1, _I64, _I64),  # an empty bag
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 4, 4, 8], 0, True, True, -1, _I64, _I64),
    ([0, 2, 2, 5, 2, 7], [0, 2, 6], 0, False, False, 2, _I32, _I32),  # a trailing empty bag
    ([1, 2, 4, 5, 4, 3, 2, 9], [0, 3, 3, 5], 1, False, False, -1, _I64, _I64),
    ([4, 4, 1, 4, 3, 0, 2, 4], [0, 3, 4, 8], 1, True, False, 4, _I64, _I64),  # an all-padding bag
    ([3, 6, 2, 0, 4, 3, 5, 6, 1], [0, 4, 4, 7], 2, False, False, -1, _I64, _I64),  # NaN, -inf, ties
    ([3, 6, 0, 2, 4, 3, 5, 6, 1], [0, 2, 5], 2, False, False, 6, _I32, _I64),  # a leading NaN
    ([6, 3, 2, 5, 5, 1, 0], [0, 1, 4, 7], 2, True, False, -1, _I64, _I32),
    ([], [0, 0], 2, False, False, -1, _I64, _I64),  # no indices at all
    ([1, 3, 3, 0, 7, 3], [0, 2, 3], 0, False, True, 3, _I64, _I64),  # weights and padding
    ([5, 1, 1, 8, 2], [0, 1, 1], 1, False, False, -1, _I32, _I32),
    ([], [0, 0, 0], 0, True, False, -1, _I64, _I64),
]


def _embedding_weight(dtype: DType, seed: int) -> Any:
    """A 10-row weight with duplicates (ties), a NaN and -inf rows for max bags."""
    weight = random_tensor((10, 3), dtype, seed)
    weight[6] = weight[3]
    weight[0, 1] = float("nan")
    weight[5, 0] = float("-inf")
    weight[2, 2] = float("-inf")
    return weight


@handwritten("aten._embedding_bag.default", FLOATS)
def _embedding_bag(dtype: DType) -> Iterator[AtenCall]:
    for index, case in enumerate(_rotating(dtype, _EMBEDDING_BAGS)):
        indices, offsets, mode, include_last, weighted, padding_idx, index_dtype, offset_dtype = (
            case
        )
        weights = random_tensor((len(indices),), dtype, 160 + index) if weighted else None
        args = (
            _embedding_weight(dtype, 150 + index),
            _indices(indices, index_dtype),
            _indices(offsets, offset_dtype),
            False,
            mode,
            False,
            weights,
            include_last,
            padding_idx,
        )
        yield AtenCall("aten._embedding_bag.default", args, {}, origin="handwritten")


# (indices, num_weights, padding_idx, scale_grad_by_freq, indices dtype)
_EMBEDDING_GRADS: list[tuple[Any, ...]] = [
    ([0, 1, 1, 3], 5, -1, False, _I64),
    ([[2, 4, 2], [0, 2, 4]], 6, 2, False, _I64),
    ([1, 3, 3, 3, 0, 1], 4, -1, True, _I32),
    ([[0, 5], [5, 5], [2, 0]], 7, 0, True, _I64),
    ([], 3, -1, True, _I64),
]


@handwritten("aten.embedding_dense_backward.default", NOT_BOOL)
def _embedding_dense_backward(dtype: DType) -> Iterator[AtenCall]:
    import torch

    for index, (indices, num_weights, padding_idx, scale, index_dtype) in enumerate(
        _rotating(dtype, _EMBEDDING_GRADS)
    ):
        idx = torch.tensor(indices, dtype=torch_dtype(index_dtype))
        grad = random_tensor((*idx.shape, 3), dtype, 170 + index)
        args = (grad, idx, num_weights, padding_idx, scale)
        yield AtenCall("aten.embedding_dense_backward.default", args, {}, origin="handwritten")


# -- distances -------------------------------------------------------------------------------------------

# (x1 shape, x2 shape, p, compute_mode, values: "normal", "integers" (some differences are
# exactly 0), "nan" (NaN propagates, except through cdist's inf-norm, which skips it) or
# "duplicates" (x2 repeats rows of x1, on the matrix-product path: its ‖a‖² − 2a·b + ‖b‖² cancels
# to 0 there. The values are small integers, so every product and sum is exact in any order:
# with real values the cancellation leaves rounding noise whose square root, ~1e-7 in float64,
# depends on the BLAS kernel's summation order, i.e. on the CPU, in torch and in NumPy alike))
_CDISTS: list[tuple[Any, ...]] = [
    ((4, 3), (5, 3), 0.0, None, "integers"),
    ((30, 4), (6, 4), 2.0, None, "normal"),  # more than 25 rows: torch's matrix-product path
    ((2, 1, 3, 4), (3, 5, 4), float("inf"), None, "nan"),  # broadcast batch dims
    ((3, 2, 5), (3, 4, 5), 1.0, 2, "normal"),
    ((6, 5), (4, 5), 2.0, 1, "duplicates"),  # matrix-product path forced; x2's rows are rows of x1
    ((30, 3), (28, 3), 2.0, 2, "nan"),  # direct path forced
    ((2, 5, 3), (2, 4, 3), 3.5, None, "normal"),
    ((4, 3), (2, 3), 0.0, 0, "nan"),
]


def _distance_operand(shape: Sequence[int], dtype: DType, seed: int, values: str) -> Any:
    x = random_tensor(shape, dtype, seed)
    if values == "integers":
        x = x.round()
    elif values == "nan" and x.numel():
        x.view(-1)[1] = float("nan")
    return x


@handwritten("aten._cdist_forward.default", WIDE)
def _cdist_forward(dtype: DType) -> Iterator[AtenCall]:
    for index, (shape1, shape2, p, mode, values) in enumerate(_rotating(dtype, _CDISTS, 4)):
        x1 = _distance_operand(
            shape1, dtype, 180 + index, "integers" if values == "duplicates" else values
        )
        if values == "duplicates":
            x2 = x1[[0, 2, 3, 5]] * 3
            x1 = x1 * 3
        else:
            x2 = _distance_operand(
                shape2, dtype, 190 + index, "integers" if values == "integers" else "normal"
            )
        yield AtenCall("aten._cdist_forward.default", (x1, x2, p, mode), {}, origin="handwritten")


# (shape, p, values)
_PDISTS: list[tuple[Any, ...]] = [
    ((5, 3), 0.0, "integers"),
    ((6, 2), float("inf"), "nan"),
    ((4, 5), 3.5, "normal"),
    ((1, 3), 2.0, "normal"),  # no pairs
    ((3, 0), 1.0, "normal"),  # no coordinates
    ((7, 4), 0.0, "nan"),
]


@handwritten("aten._pdist_forward.default", WIDE)
def _pdist_forward(dtype: DType) -> Iterator[AtenCall]:
    for index, (shape, p, values) in enumerate(_rotating(dtype, _PDISTS, 3)):
        yield AtenCall(
            "aten._pdist_forward.default",
            (_distance_operand(shape, dtype, 200 + index, values), p),
            {},
            origin="handwritten",
        )


# -- FFTs ------------------------------------------------------------------------------------------------

# (shape, dim, normalization, onesided)
_R2C: list[tuple[Any, ...]] = [
    ((4, 6), [0, 1], 1, True),
    ((3, 5), [1], 2, False),
    ((2, 3, 4), [2, 0], 0, True),  # dims out of order
    ((5, 7), [0], 1, False),
]


@handwritten("aten._fft_r2c.default", WIDE)
def _fft_r2c(dtype: DType) -> Iterator[AtenCall]:
    for index, (shape, dim, normalization, onesided) in enumerate(_rotating(dtype, _R2C, 2)):
        args = (random_tensor(shape, dtype, 210 + index), dim, normalization, onesided)
        yield AtenCall("aten._fft_r2c.default", args, {}, origin="handwritten")


# (shape, dim, normalization, forward): every normalization, both directions (torch.fft's
# default ifft asks 2 with forward False, norm="forward" fft 2 with forward True)
_C2C: list[tuple[Any, ...]] = [
    ((4, 6), [0, 1], 1, True),
    ((3, 5), [1], 2, False),
    ((2, 3, 4), [2, 0], 0, False),  # dims out of order
    ((5, 7), [0], 2, True),
]


@handwritten("aten._fft_c2c.default", (DType.complex64, DType.complex128))
def _fft_c2c(dtype: DType) -> Iterator[AtenCall]:
    for index, (shape, dim, normalization, forward) in enumerate(_rotating(dtype, _C2C, 2)):
        args = (random_tensor(shape, dtype, 230 + index), dim, normalization, forward)
        yield AtenCall("aten._fft_c2c.default", args, {}, origin="handwritten")
    transposed = random_tensor((6, 4), dtype, 236).t()  # not contiguous
    yield AtenCall("aten._fft_c2c.default", (transposed, [1], 1, False), {}, origin="handwritten")


# (shape, dim, normalization, last_dim_size)
_C2R: list[tuple[Any, ...]] = [
    ((4, 4), [0, 1], 1, 6),
    ((3, 4), [1], 2, 7),
    ((4, 5), [1], 2, 5),  # the whole signal given: torch reads its first half
    ((3, 2, 3), [2, 0], 0, 4),  # dims out of order: dim 0 is the halved one
]


@handwritten("aten._fft_c2r.default", (DType.complex64, DType.complex128))
def _fft_c2r(dtype: DType) -> Iterator[AtenCall]:
    for index, (shape, dim, normalization, last_dim_size) in enumerate(_rotating(dtype, _C2R, 2)):
        args = (random_tensor(shape, dtype, 220 + index), dim, normalization, last_dim_size)
        yield AtenCall("aten._fft_c2r.default", args, {}, origin="handwritten")


# (n, d): even and odd n, n of 1 (only frequency 0), a negative spacing, a spacing of 0
# (1/0: inf, and NaN at frequency 0), frequencies past the integers bfloat16 holds exactly
_FREQUENCIES: list[tuple[int, float]] = [
    (8, 1.0),
    (7, 0.1),
    (1, 0.3),
    (13, -0.7),
    (5, 0.0),
    (1001, 2.5e-3),
]


@handwritten("aten.fft_fftfreq.default", FLOATS)
def _fft_fftfreq(dtype: DType) -> Iterator[AtenCall]:
    for n, d in _FREQUENCIES:
        yield AtenCall(
            "aten.fft_fftfreq.default", (n, d), {"dtype": torch_dtype(dtype)}, origin="handwritten"
        )
    if dtype is DType.float32:  # no dtype: the default, float32
        yield AtenCall("aten.fft_fftfreq.default", (6, 0.5), {}, origin="handwritten")


@handwritten("aten.fft_rfftfreq.default", FLOATS)
def _fft_rfftfreq(dtype: DType) -> Iterator[AtenCall]:
    for n, d in _FREQUENCIES:
        yield AtenCall(
            "aten.fft_rfftfreq.default", (n, d), {"dtype": torch_dtype(dtype)}, origin="handwritten"
        )
    if dtype is DType.float32:
        yield AtenCall("aten.fft_rfftfreq.default", (6, 0.5), {}, origin="handwritten")
