"""Hand-written samples for the overloads of decompositions/views.py.

OpInfo never reaches reflection_pad2d/3d, replication_pad3d or the sym_* ops, and reaches the
others with ordinary arguments only; these add the edges: the int64-max `end` sentinel of
`.pt2` slices, negative and out-of-range bounds, negative indices and dims, legacy empty and
mixed-dtype `cat` operands, negative pads, float-step `arange`, `expand` with -1, `repeat` adding
dims, overlapping `as_strided` windows, growing `resize_`. View-like ops take two cases per
dtype, rotating through a list, so every case runs on several dtypes and OpInfo's samples keep
room in the fast budget.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ...frontends.torch_interop import to_numpy
from ...ir.dtypes import DType
from ..compare import Comparison, compare
from ..record import AtenCall
from ..statistics import statistical_check
from .common import ALL, COMPLEX, FLOATS, INTS, torch_dtype
from .registry import handwritten

NUMERIC = (*INTS, *FLOATS, *COMPLEX)  # no bool: torch's reflection/replication kernels refuse it
INT64_MAX = 2**63 - 1  # the "to the end" sentinel exported slices carry


def _tensor(shape: Sequence[int], dtype: DType) -> Any:
    """Distinct, position-revealing values (0, 1, 2, … in row-major order, wrapped to fit small
    integer dtypes), so a wrong index shows up as a wrong value."""
    import torch

    ramp = torch.arange(math.prod(shape), dtype=torch.float64).reshape(tuple(shape))
    if dtype is DType.bool:
        return (ramp.remainder(3) == 0).to(torch.bool)
    if dtype.is_integral:
        return ramp.remainder(100).to(torch_dtype(dtype))
    values = ramp * 0.5 - 1
    if dtype.is_complex:
        values = torch.complex(values, 1 - values)
    return values.to(torch_dtype(dtype))


def _rotating(dtype: DType, cases: Sequence[Any], count: int = 2) -> list[Any]:
    """`count` of `cases`, starting at a position that moves with the dtype."""
    start = list(DType).index(dtype) * count
    return [cases[(start + k) % len(cases)] for k in range(min(count, len(cases)))]


def _call(op: str, *args: Any, **kwargs: Any) -> AtenCall:
    return AtenCall(op, args, kwargs, origin="handwritten")


Case = tuple[Sequence[int], tuple[Any, ...]]  # (shape of self, the other arguments)


def _calls(op: str, dtype: DType, cases: Sequence[Case], count: int = 2) -> Iterator[AtenCall]:
    """Calls of `op` on a `_tensor(shape, dtype)` followed by the case's other arguments."""
    for shape, rest in _rotating(dtype, cases, count):
        yield _call(op, _tensor(shape, dtype), *rest)


# -- views and shapes ------------------------------------------------------------------------------------


@handwritten("aten.view.default", ALL)
def _view(dtype: DType) -> Iterator[AtenCall]:
    cases = [
        ((2, 3, 4), ([4, -1, 2],)),  # regroups across dims
        ((6, 1, 4), ([1, 24, 1],)),
        ((), ([1, 1],)),
        ((1, 1), ([],)),
        ((0, 3), ([3, -1],)),
        ((2, 6), ([3, 2, 2],)),
    ]
    return _calls("aten.view.default", dtype, cases)


@handwritten("aten.permute.default", ALL)
def _permute(dtype: DType) -> Iterator[AtenCall]:
    cases = [((2, 3, 4), ([2, 0, -2],)), ((), ([],)), ((2, 1, 3, 2), ([-1, 0, 2, 1],))]
    return _calls("aten.permute.default", dtype, cases)


@handwritten("aten.expand.default", ALL)
def _expand(dtype: DType) -> Iterator[AtenCall]:
    cases = [
        ((2, 1), ([3, -1, 4],)),  # -1 keeps, a new leading dim
        ((), ([2, 3],)),
        ((3, 1), ([2, 3, 0],)),  # 1 -> 0
        ((1, 2), ([-1, -1],)),
    ]
    return _calls("aten.expand.default", dtype, cases)


@handwritten("aten.squeeze.dim", ALL)
def _squeeze_dim(dtype: DType) -> Iterator[AtenCall]:
    cases = [((1, 3, 1), (-1,)), ((2, 3), (0,)), ((), (-1,)), ((3, 1, 2), (1,))]
    return _calls("aten.squeeze.dim", dtype, cases)


@handwritten("aten.squeeze.dims", ALL)
def _squeeze_dims(dtype: DType) -> Iterator[AtenCall]:
    cases = [
        ((1, 3, 1, 1), ([0, -1],)),
        ((2, 1), ([0, 1],)),  # dims of size != 1 are left alone
        ((), ([],)),
        ((1, 2, 1), ([],)),
        ((), ([0],)),
    ]
    return _calls("aten.squeeze.dims", dtype, cases)


@handwritten("aten.unsqueeze.default", ALL)
def _unsqueeze(dtype: DType) -> Iterator[AtenCall]:
    cases = [((2, 3), (-1,)), ((), (0,)), ((2, 3), (1,)), ((2, 3), (-3,))]
    return _calls("aten.unsqueeze.default", dtype, cases)


@handwritten("aten.slice.Tensor", ALL)
def _slice(dtype: DType) -> Iterator[AtenCall]:
    cases = [
        ((4, 10), (1, 2, INT64_MAX, 1)),  # the .pt2 "to the end" sentinel
        ((10,), (0, -100, INT64_MAX, 3)),  # clamped start, step
        ((3, 10), (-1, -7, -2, 2)),
        ((10, 2), (0, 8, 2, 1)),  # end before start: empty
        ((3, 5), (1, None, None, 2)),
        ((4, 10), (-1, 12, 20, 1)),  # both past the end
        ((0, 4), (0, 1, 3, 1)),
    ]
    return _calls("aten.slice.Tensor", dtype, cases)


@handwritten("aten.select.int", ALL)
def _select(dtype: DType) -> Iterator[AtenCall]:
    cases = [((2, 3, 4), (1, -1)), ((5,), (0, -5)), ((2, 3, 4), (-1, 2)), ((3, 1), (-2, 2))]
    return _calls("aten.select.int", dtype, cases)


@handwritten("aten.diagonal.default", ALL)
def _diagonal(dtype: DType) -> Iterator[AtenCall]:
    cases = [
        ((3, 4), (1, 0, 1)),
        ((3, 4), (-2, -1, -2)),  # negative dims: the transposed matrix
        ((2, 3, 4), (0, 2, 0)),
        ((3, 4), (5, 0, 1)),  # off the matrix: empty
        ((2, 3, 4), (-1, -1, 1)),
    ]
    return _calls("aten.diagonal.default", dtype, cases)


@handwritten("aten.view_as_real.default", COMPLEX)
def _view_as_real(dtype: DType) -> Iterator[AtenCall]:
    """Non-core (`z.real`, `z.imag`); a transposed input and one at a storage offset, whose
    results torch lays out with the strides doubled."""
    op = "aten.view_as_real.default"
    yield _call(op, _tensor((2, 3), dtype))
    yield _call(op, _tensor((), dtype))
    yield _call(op, _tensor((3, 4), dtype).t())
    yield _call(op, _tensor((4, 3), dtype)[1:, 1])


@handwritten("aten.view_as_complex.default", (DType.float32, DType.float64))
def _view_as_complex(dtype: DType) -> Iterator[AtenCall]:
    """Non-core (complex weights stored as pairs of reals, rotary embeddings); every layout torch
    can view: sliced, stepped and transposed outer dims, a broadcast dim (stride 0), an even
    storage offset, one pair (a 0-dim result), no pairs; and infinite and NaN parts."""
    import torch

    op = "aten.view_as_complex.default"
    yield _call(op, _tensor((4, 3, 2), dtype))
    yield _call(op, _tensor((2,), dtype))
    yield _call(op, _tensor((3, 4, 2), dtype)[:, 1:])
    yield _call(op, _tensor((3, 5, 2), dtype)[:, ::2])
    yield _call(op, _tensor((2, 3, 2), dtype).transpose(0, 1))
    yield _call(op, _tensor((3, 1, 2), dtype).expand(3, 4, 2))
    yield _call(op, _tensor((3, 0, 2), dtype))
    parts = [0.0, -0.0, math.inf, -math.inf, math.nan, 2.5]
    pairs = torch.tensor([[re, im] for re in parts for im in parts], dtype=torch_dtype(dtype))
    yield _call(op, pairs)


@handwritten("aten.as_strided.default", ALL)
def _as_strided(dtype: DType) -> Iterator[AtenCall]:
    cases = [
        ((10,), ([4, 3], [2, 1], None)),  # overlapping windows
        ((3, 4), ([3, 2], [0, 1], 5)),  # stride 0: repeated rows
        ((2, 3, 2), ([2, 2, 2], [6, 1, 3], 1)),
        ((6,), ([0, 3], [1, 1], 6)),
    ]
    return _calls("aten.as_strided.default", dtype, cases)


@handwritten("aten.split_with_sizes.default", ALL)
def _split_with_sizes(dtype: DType) -> Iterator[AtenCall]:
    cases = [((5, 2), ([2, 0, 3], 0)), ((2, 6), ([1, 5], -1)), ((3,), ([3], 0))]
    return _calls("aten.split_with_sizes.default", dtype, cases)


@handwritten("aten.cat.default", ALL)
def _cat(dtype: DType) -> Iterator[AtenCall]:
    import torch

    others = list(DType)
    other = others[(others.index(dtype) + 5) % len(others)]  # a different dtype: cat promotes
    if dtype is DType.bool:
        other = dtype  # a bool first operand next to another dtype is filed under that dtype
    legacy_empty = torch.zeros(0, dtype=torch_dtype(other))
    yield _call(
        "aten.cat.default", [_tensor((2, 3), dtype), legacy_empty, _tensor((2, 1), dtype)], -1
    )
    yield _call("aten.cat.default", [_tensor((2, 3), dtype), _tensor((1, 3), other)])
    if (
        dtype is DType.float32
    ):  # legacy empty operands only: a [0] tensor of the promoted dtype (f64)
        yield _call("aten.cat.default", [torch.zeros(0), torch.zeros(0, dtype=torch.float64)], 0)


@handwritten("aten.flip.default", ALL)
def _flip(dtype: DType) -> Iterator[AtenCall]:
    cases = [((2, 3, 4), ([0, -1],)), ((3, 1), ([1],)), ((), ([0],)), ((2, 5), ([],))]
    return _calls("aten.flip.default", dtype, cases)


@handwritten("aten.repeat.default", ALL)
def _repeat(dtype: DType) -> Iterator[AtenCall]:
    cases = [((2, 3), ([2, 1, 3],)), ((3,), ([2, 0],)), ((), ([2, 2],)), ((2, 1), ([1, 1],))]
    return _calls("aten.repeat.default", dtype, cases)


# -- padding ---------------------------------------------------------------------------------------------


def _fill_for(dtype: DType) -> Any:
    """A pad value of another Python kind than the dtype's (converted as torch's fill converts)."""
    if dtype is DType.bool:
        return 2
    if dtype.is_integral:
        return 2.7 if dtype is not DType.uint8 else -1  # -1 wraps to 255, as torch's fill allows
    return -3  # an int for a floating tensor


@handwritten("aten.constant_pad_nd.default", ALL)
def _constant_pad_nd(dtype: DType) -> Iterator[AtenCall]:
    cases = [
        ((2, 3), ([1, -1, 2, 0], _fill_for(dtype))),  # a negative pad crops
        ((2, 3, 4), ([-2, -1], _fill_for(dtype))),  # crops only: nothing to fill
        ((3, 2), ([0, 2], _fill_for(dtype))),
        ((2, 2, 2), ([1, 1, -1, 0, 0, 1], _fill_for(dtype))),
    ]
    return _calls("aten.constant_pad_nd.default", dtype, cases)


_REFLECTION_CASES = {
    1: [((2, 5), ([2, 3],)), ((2, 3, 5), ([-1, 4],)), ((0, 2, 5), ([1, 1],)), ((1, 5), ([3, -6],))],
    2: [
        ((2, 3, 4), ([1, 3, 2, -1],)),
        ((2, 1, 3, 4), ([3, 0, 2, 2],)),
        ((0, 1, 3, 4), ([1, 1, 1, 1],)),
        ((4, 5, 5), ([-5, 0, 1, 1],)),  # one padded dim cropped to 0: allowed while another is >= 1
    ],
    3: [((1, 2, 3, 4), ([1, 2, 2, 0, -1, 1],)), ((2, 1, 2, 3, 3), ([2, 1, 1, 1, 1, 0],))],
}
_REPLICATION_CASES = {
    2: [
        ((2, 3, 4), ([2, 5, 1, -1],)),
        ((2, 1, 3, 2), ([-2, 3, 0, 2],)),
        ((0, 1, 2, 3), ([1, 1, 1, 1],)),
    ],
    3: [((1, 2, 3, 4), ([1, 2, 3, 0, -1, 2],)), ((2, 1, 2, 1, 3), ([0, 1, 2, 1, 1, 1],))],
}


def _padding_samples(op: str, cases: list[Any]) -> None:
    @handwritten(op, NUMERIC)
    def generate(dtype: DType) -> Iterator[AtenCall]:
        return _calls(op, dtype, cases)


for _count, _cases in _REFLECTION_CASES.items():
    _padding_samples(f"aten.reflection_pad{_count}d.default", _cases)
for _count, _cases in _REPLICATION_CASES.items():
    _padding_samples(f"aten.replication_pad{_count}d.default", _cases)


# -- creation --------------------------------------------------------------------------------------------


def _value_for(dtype: DType) -> Any:
    return {bool: True, int: -3, float: 2.75, complex: 1.5 - 2j}[dtype.python_type]


@handwritten("aten.full.default", ALL)
def _full(dtype: DType) -> Iterator[AtenCall]:
    yield _call("aten.full.default", [2, 3], _value_for(dtype), dtype=torch_dtype(dtype))
    if DType.from_python_type(dtype.python_type) is dtype:
        # dtype=None: the dtype torch gives the value's Python type (this sample runs in it)
        yield _call("aten.full.default", [3, 1], _value_for(dtype))
    if (
        dtype.is_integral and dtype is not DType.bool
    ):  # a float fill truncates into an integer dtype
        yield _call("aten.full.default", [4], 7.9, dtype=torch_dtype(dtype))


@handwritten("aten.full_like.default", ALL)
def _full_like(dtype: DType) -> Iterator[AtenCall]:
    yield _call("aten.full_like.default", _tensor((2, 3), dtype), _value_for(dtype))
    yield _call(
        "aten.full_like.default", _tensor((0, 2), dtype), 1, dtype=torch_dtype(DType.float64)
    )


_FLOAT_RANGES = [
    (0, 1, 0.1),
    (1, 2.5, 0.3),
    (-1, 1, 0.25),
    (2.5, -3.1, -0.7),
    (0, 5, 1),
    (-0.3, 7, 0.7),
    (-9.39, 92.44, 2.995),  # cancellation near 0: torch's float16 SIMD path is a few ulps off here
]
# Integer dtypes truncate start and step to int64 (0.4 -> 0: start repeated), but count in double
# (in int64 for int64 results, where a step truncated to 0 is an error).
_INT_RANGES = [
    (0, 10, 3),
    (10, -5, -4),
    (-3, 30, 7),
    (0.5, 10.7, 1.5),
    (5, 5, 1),
    (2, -9.5, -2.5),
    (1.5, 4, 0.4),
]


@handwritten("aten.arange.start_step", (*INTS, *FLOATS))
def _arange(dtype: DType) -> Iterator[AtenCall]:
    if dtype in (DType.float32, DType.float64):
        ranges = _FLOAT_RANGES[:3] + [_FLOAT_RANGES[3 + (dtype is DType.float64)]]
    else:
        ranges = _rotating(dtype, _FLOAT_RANGES if dtype.is_floating else _INT_RANGES, 3)
    for bounds in ranges:
        yield _call("aten.arange.start_step", *bounds, dtype=torch_dtype(dtype))
    if dtype is DType.uint8:  # values past 255 wrap
        yield _call("aten.arange.start_step", -5, 300, 1, dtype=torch_dtype(dtype))
    if dtype in (
        DType.float32,
        DType.int64,
    ):  # dtype=None: int64 for integer arguments, else float32 (the dtype the sample runs in)
        yield _call(
            "aten.arange.start_step", *((True, 7, 2) if dtype is DType.int64 else (1, 2.5, 0.3))
        )


@statistical_check("aten.arange.start_step")
def _check_arange(call: AtenCall, ours: list[Any], expected: list[Any]) -> Comparison:
    """arange has no tensor input for the runner's float64 reference to widen, so the reference
    is arange itself in float64. It matters: torch's SIMD kernel restarts from a base rounded to
    the result dtype every vector (so its float16 values can be several ulps off under
    cancellation), where the rule computes every element as start + i*step in the accumulation
    type; such elements must then be no worse than torch's against the float64 values."""
    import torch

    verdict = compare(ours[0], expected[0], what="output 0")
    if verdict or verdict.reason != "value":
        return verdict
    wide = torch.ops.aten.arange.start_step(*call.args, **{**call.kwargs, "dtype": torch.float64})
    return compare(ours[0], expected[0], reference=to_numpy(wide), what="output 0")


@handwritten("aten.empty.memory_format", ALL)
def _empty(dtype: DType) -> Iterator[AtenCall]:
    yield _call("aten.empty.memory_format", [2, 0, 3], dtype=torch_dtype(dtype))
    if dtype is DType.float32:
        yield _call("aten.empty.memory_format", [4, 1])


@handwritten("aten.empty_strided.default", ALL)
def _empty_strided(dtype: DType) -> Iterator[AtenCall]:
    yield _call("aten.empty_strided.default", [2, 3], [1, 2], dtype=torch_dtype(dtype))


@handwritten("aten.resize_.default", ALL)
def _resize(dtype: DType) -> Iterator[AtenCall]:
    cases = [((2, 5), ([3, 3],)), ((2, 3), ([4, 2],)), ((3,), ([2, 0],)), ((0,), ([2, 2],))]
    return _calls("aten.resize_.default", dtype, cases)


@statistical_check("aten.resize_.default")
def _check_resize(call: AtenCall, ours: list[Any], expected: list[Any]) -> Comparison:
    """resize_'s elements past the input's numel are uninitialised memory in torch: compare dtype
    and shape, and the leading elements (row-major) only."""
    our, their = ours[0], expected[0]
    if not isinstance(our, np.ndarray) or our.dtype != their.dtype or our.shape != their.shape:
        return compare(our, their, what="output 0")
    defined = min(call.args[0].numel(), their.size)
    return compare(
        our.reshape(-1)[:defined],
        their.reshape(-1)[:defined],
        what=f"output 0 (first {defined} elements)",
    )


# -- metadata --------------------------------------------------------------------------------------------

_SHAPES = [(2, 3, 4), (2, 0, 3), (5,), (1, 3, 1, 1), (2, 3, 4, 5), (3, 1, 1, 2), (2, 1, 4, 5, 6)]


def _metadata_samples(op: str, dims: bool) -> None:
    @handwritten(op, ALL)
    def generate(dtype: DType) -> Iterator[AtenCall]:
        for shape in _rotating(dtype, _SHAPES, 2):
            tensor = _tensor(shape, dtype)
            for dim in (-1, 0) if dims else ():
                yield _call(op, tensor, dim)
            if not dims:
                yield _call(op, tensor)


_metadata_samples("aten.sym_size.int", dims=True)
_metadata_samples("aten.sym_stride.int", dims=True)
_metadata_samples("aten.sym_numel.default", dims=False)
_metadata_samples("aten.sym_storage_offset.default", dims=False)


_CONTIGUITY_CASES = [
    ((2, 3), "contiguous_format"),
    ((2, 3, 4, 5), "channels_last"),
    ((1, 3, 1, 1), "channels_last"),
    ((3, 1, 1, 2), "channels_last"),
    ((2, 0, 4, 5), "channels_last"),
    ((2, 3, 4), "channels_last"),  # not 4-D: never channels-last
    ((2, 1, 4, 5, 6), "channels_last_3d"),
    ((2, 3, 4, 5, 6), "channels_last_3d"),
    ((2, 3, 1, 1, 1), "channels_last_3d"),
    ((2, 3, 4, 5), "channels_last_3d"),
]


@handwritten("aten.sym_is_contiguous.default", ALL)
def _sym_is_contiguous(dtype: DType) -> Iterator[AtenCall]:
    import torch

    for shape, memory_format in _rotating(dtype, _CONTIGUITY_CASES, 4):
        yield _call(
            "aten.sym_is_contiguous.default", _tensor(shape, dtype), getattr(torch, memory_format)
        )


def _triangle_samples(op: str) -> None:
    @handwritten(op, (DType.int32, DType.int64))
    def samples(dtype: DType) -> Iterator[AtenCall]:
        import torch

        # Offsets below, inside and past the matrix; empty matrices and triangles.
        for row, col, offset in (
            (5, 7, 0),
            (7, 4, -2),
            (4, 6, 3),
            (3, 3, 9),
            (3, 3, -9),
            (0, 4, 0),
        ):
            yield _call(op, row, col, offset, dtype=torch_dtype(dtype))
        yield _call(op, 4, 5, 1, dtype=torch_dtype(dtype), device=torch.device("cpu"))

    samples.__name__ = f"_{op.split('.')[1]}_samples"


for _op in ("aten.tril_indices.default", "aten.triu_indices.default"):
    _triangle_samples(_op)


@handwritten("aten.empty_permuted.default", ALL)
def _empty_permuted_samples(dtype: DType) -> Iterator[AtenCall]:
    # Values undefined: the harness compares dtype and shape (runner.UNDEFINED_VALUES).
    yield _call("aten.empty_permuted.default", [2, 3, 4], [0, 2, 1], dtype=torch_dtype(dtype))
    yield _call("aten.empty_permuted.default", [0, 3], [1, 0], dtype=torch_dtype(dtype))


@handwritten("aten.native_channel_shuffle.default", ALL)
def _native_channel_shuffle_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    x = torch.arange(2 * 6 * 3 * 2).reshape(2, 6, 3, 2).to(torch_dtype(dtype))
    for groups in (2, 3, 1, 6):
        yield _call("aten.native_channel_shuffle.default", x, groups)
    yield _call("aten.native_channel_shuffle.default", x[:, :, 0], 3)  # one spatial dim


# -- memory formats and layouts (layouts.py adds transposed, sliced, channels-last variants) --------


@handwritten("aten.as_strided.default", ALL)
def _as_strided_4d(dtype: DType) -> Iterator[AtenCall]:
    # a 4-D operand, so that a channels-last variant exists: the window then reads its storage
    yield _call("aten.as_strided.default", _tensor((2, 3, 2, 2), dtype), [2, 2, 3], [12, 1, 4], 1)


@handwritten("aten.clone.default", ALL)
def _clone(dtype: DType) -> Iterator[AtenCall]:
    import torch

    x = _tensor((2, 3, 4, 5), dtype)
    yield _call("aten.clone.default", x, memory_format=torch.channels_last)
    yield _call("aten.clone.default", x.permute(0, 2, 3, 1), memory_format=torch.preserve_format)


@handwritten("aten._to_copy.default", ALL)
def _to_copy_memory_format(dtype: DType) -> Iterator[AtenCall]:
    import torch

    x = _tensor((2, 3, 4, 5), dtype)
    yield _call("aten._to_copy.default", x, memory_format=torch.channels_last)
