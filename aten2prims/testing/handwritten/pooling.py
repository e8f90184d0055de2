"""Hand-written samples for the overloads of decompositions/pooling.py.

OpInfo never reaches avg_pool1d, adaptive_avg_pool1d, the avg/adaptive backward ops or the `.vec`
upsampling overloads (its samples dispatch elsewhere), and reaches the others with small, regular
inputs. These add what it misses: NaNs, ties and all-lowest windows in max pooling (ATen's index
rules), ceil_mode windows hanging over the edge, dilation, padding with count_include_pad=False,
divisor_override, unbatched inputs, non-divisible adaptive sizes (7→3, 10→4, 3→7), fractional and
identity-sized scale factors, uint8 images, and grid points outside [-1, 1] for every
interpolation and padding mode; for adaptive max pooling (not Core ATen), NaNs, ties and -inf
corners over shrinking and growing sizes. Hand-written samples run first within the sample budget; ops that
OpInfo reaches get at most three per dtype so that OpInfo's samples still run at the fast budget,
and where a dtype can only show a few, the dtypes take turns through the list (so together they
cover it; the full budget runs everything).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ...ir.dtypes import DType
from ..record import AtenCall
from .common import FLOATS, INF, INTS, NAN, random_tensor, torch_dtype
from .registry import handwritten


def _tensor(shape: Sequence[int], dtype: DType, *, seed: int = 0) -> Any:
    """Deterministic values: small integers for integral dtypes (ties occur; uint8 covers its whole
    range), normal ones otherwise."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    if dtype is DType.uint8:
        return torch.randint(0, 256, tuple(shape), generator=generator).to(torch.uint8)
    if dtype.is_integral:
        return torch.randint(-9, 10, tuple(shape), generator=generator).to(torch_dtype(dtype))
    return torch.randn(tuple(shape), generator=generator, dtype=torch.float64).to(
        torch_dtype(dtype)
    )


def _call(op: str, *args: Any) -> AtenCall:
    return AtenCall(op, args, {}, origin="handwritten")


def _turn(items: Sequence[Any], dtype: DType, dtypes: Sequence[DType], count: int) -> list[Any]:
    """`items` starting at this dtype's turn (position · count), so that the first `count` items
    of each dtype differ and together cover the list."""
    start = (dtypes.index(dtype) * count) % len(items) if dtype in dtypes else 0
    return [*items[start:], *items[:start]]


def _lowest(dtype: DType) -> float | int:
    import torch

    return -INF if dtype.is_floating else int(torch.iinfo(torch_dtype(dtype)).min)


def _with_nans_ties_and_lowest(shape: Sequence[int], dtype: DType) -> Any:
    """Values in [-3, 3] (many ties) with, for floats, NaNs at a few positions, and one corner
    block holding only the dtype's lowest value (-inf for floats): its windows keep their first
    valid position."""
    import torch

    x = torch.randint(-3, 4, tuple(shape), generator=torch.Generator().manual_seed(7)).to(
        torch.float64
    )
    flat = x.view(-1)
    if dtype.is_floating:
        flat[3::11] = NAN
    x[..., :2, :2] = _lowest(dtype)
    if not dtype.is_floating:
        x = x.to(torch.int64).clamp_min(_lowest(dtype))  # uint8: -3..-1 become 0
    return x.to(torch_dtype(dtype))


# -- max pooling ------------------------------------------------------------------------------------


@handwritten("aten.max_pool2d_with_indices.default", (*INTS, *FLOATS))
def _max_pool2d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.max_pool2d_with_indices.default"
    x = _with_nans_ties_and_lowest((2, 3, 7, 8), dtype)
    # padding, dilation and ceil_mode together: windows hang over the bottom and right edges
    yield _call(op, x, [3, 2], [2, 3], [1, 1], [2, 1], True)
    # unbatched, overlapping windows (stride 1): ties resolve to the first maximum
    yield _call(op, x[0], [3, 3], [1, 1], [1, 1], [1, 1], False)
    yield _call(op, _tensor((1, 2, 6, 5), dtype, seed=1), [2, 2], [], [0, 0], [1, 1], True)


@handwritten("aten.max_pool3d_with_indices.default", (*INTS, *FLOATS))
def _max_pool3d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.max_pool3d_with_indices.default"
    x = _with_nans_ties_and_lowest((1, 2, 5, 6, 5), dtype)
    yield _call(op, x, [2, 3, 2], [2, 2, 2], [1, 1, 1], [1, 1, 2], True)
    yield _call(op, x[0], [3, 2, 2], [1, 2, 1], [1, 0, 1], [2, 1, 1], False)


@handwritten("aten.max_pool2d_with_indices_backward.default", FLOATS)
def _max_pool2d_backward_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.max_pool2d_with_indices_backward.default"
    # Overlapping windows share maxima (ties and a constant block), so gradients add up.
    x = _with_nans_ties_and_lowest((2, 2, 7, 6), dtype)
    for self, args in (
        (x, ([3, 3], [1, 1], [1, 1], [1, 1], False)),
        (x[1], ([2, 3], [2, 1], [1, 1], [2, 1], True)),
    ):
        _, indices = torch.ops.aten.max_pool2d_with_indices(self, *args)
        grad = _tensor(indices.shape, dtype, seed=3)
        yield _call(op, grad, self, *args[:4], args[4], indices)


# -- average pooling --------------------------------------------------------------------------------

AVG_DTYPES = (DType.int64, *FLOATS)


@handwritten("aten.avg_pool1d.default", AVG_DTYPES)
def _avg_pool1d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.avg_pool1d.default"
    x = _tensor((2, 3, 11), dtype)
    yield _call(op, x, [4], [3], [2], True, False)  # last window hangs over the end; pads excluded
    yield _call(op, x[0], [3], [2], [1], True, True)  # unbatched
    yield _call(op, x, [5], [], [0], False, True)
    yield _call(op, x, [2], [1], [1], False, False)


@handwritten("aten.avg_pool2d.default", AVG_DTYPES)
def _avg_pool2d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.avg_pool2d.default"
    x = _tensor((2, 3, 7, 9), dtype)
    calls = [
        (x, [3, 4], [2, 3], [1, 2], True, False, None),  # clipped border windows, pads not counted
        (x[0], [3, 2], [2, 2], [1, 1], True, True, 5),  # unbatched, divisor_override
        (x, [2, 3], [3, 2], [1, 0], True, True, None),  # ceil_mode window partly past the padding
        (x, [3, 3], [1, 1], [1, 1], False, False, -2),
    ]
    for args in _turn(calls, dtype, AVG_DTYPES, 2)[:2]:
        yield _call(op, *args)


@handwritten("aten.avg_pool3d.default", (DType.int64, DType.float32, DType.float64))
def _avg_pool3d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.avg_pool3d.default"
    x = _tensor((1, 2, 5, 6, 7), dtype)
    yield _call(op, x, [2, 3, 3], [2, 2, 3], [1, 1, 1], True, False, None)
    yield _call(op, x[0], [3, 2, 4], [1, 2, 2], [1, 1, 2], False, True, 7)


@handwritten("aten.avg_pool2d_backward.default", AVG_DTYPES)
def _avg_pool2d_backward_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.avg_pool2d_backward.default"
    x = _tensor((2, 3, 7, 9), dtype)
    for self, args in (
        (x, ([3, 4], [2, 3], [1, 2], True, False, None)),
        (x[0], ([3, 2], [2, 2], [1, 1], True, True, 5)),
        (x, ([2, 3], [3, 2], [1, 0], True, True, None)),
        (x, ([3, 3], [1, 1], [1, 1], False, False, None)),
    ):
        out = torch.ops.aten.avg_pool2d(self, *args)
        yield _call(op, _tensor(out.shape, dtype, seed=5), self, *args)


# -- adaptive average pooling -----------------------------------------------------------------------


@handwritten("aten.adaptive_avg_pool1d.default", FLOATS)
def _adaptive_avg_pool1d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.adaptive_avg_pool1d.default"
    yield _call(op, _tensor((2, 3, 7), dtype), [3])
    yield _call(op, _tensor((3, 10), dtype), [4])  # unbatched
    yield _call(op, _tensor((2, 2, 3), dtype), [7])  # more outputs than inputs: overlapping windows
    yield _call(op, _tensor((1, 2, 12), dtype), [4])


@handwritten("aten._adaptive_avg_pool2d.default", FLOATS)
def _adaptive_avg_pool2d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten._adaptive_avg_pool2d.default"
    yield _call(op, _tensor((2, 3, 7, 10), dtype), [3, 4])
    yield _call(
        op, _tensor((3, 3, 5), dtype), [7, 5]
    )  # unbatched; one dim grows, one keeps its size


@handwritten("aten._adaptive_avg_pool3d.default", FLOATS)
def _adaptive_avg_pool3d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten._adaptive_avg_pool3d.default"
    yield _call(op, _tensor((1, 2, 7, 10, 6), dtype), [3, 4, 4])
    yield _call(op, _tensor((2, 3, 4, 5), dtype), [5, 2, 5])  # unbatched


@handwritten("aten._adaptive_avg_pool2d_backward.default", FLOATS)
def _adaptive_avg_pool2d_backward_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten._adaptive_avg_pool2d_backward.default"
    for shape, output in (
        ((2, 3, 7, 10), (3, 4)),
        ((3, 3, 5), (7, 5)),
        ((1, 2, 9, 4), (9, 1)),
        ((2, 1, 6, 6), (4, 4)),
    ):
        yield _call(op, _tensor((*shape[:-2], *output), dtype, seed=2), _tensor(shape, dtype))


# -- upsampling -------------------------------------------------------------------------------------

UPSAMPLE_DTYPES = (DType.uint8, *FLOATS)


@handwritten("aten.upsample_nearest2d.vec", UPSAMPLE_DTYPES)
def _upsample_nearest2d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.upsample_nearest2d.vec"
    x = _tensor((2, 3, 5, 7), dtype)
    calls = [
        (x, None, [1.7, 0.6]),
        (x, [9, 14], None),  # 2x along W, an odd ratio along H
        (x, None, [2.0, 1.01]),  # W keeps its size: the identity, whatever the scale
        (x, [3, 2], None),  # downsampling
        (x, None, [0.6, 3.3]),
        (x, [1, 1], None),
    ]
    for args in _turn(calls, dtype, UPSAMPLE_DTYPES, 2):
        yield AtenCall(op, args, {}, origin="handwritten")


@handwritten("aten.upsample_bilinear2d.vec", UPSAMPLE_DTYPES)
def _upsample_bilinear2d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.upsample_bilinear2d.vec"
    # Three channels: uint8 images of up to four channels take ATen's AVX path, more the generic one.
    x = _tensor((2, 3, 5, 7), dtype)
    wide = _tensor((1, 6, 4, 6), dtype, seed=4)
    calls = [
        (x, None, False, [1.7, 0.6]),
        (x, [9, 4], True, None),
        (wide, None, True, [0.6, 1.7]),
        (x, [3, 7], False, None),  # W keeps its size
        (wide, [11, 13], False, None),
        (x, None, False, [2.0, 1.01]),
        (x, None, True, [1.7, 0.6]),
        (wide, [1, 2], True, None),  # a single output row: align_corners gives it source row 0
    ]
    for args in _turn(calls, dtype, UPSAMPLE_DTYPES, 2):
        yield AtenCall(op, args, {}, origin="handwritten")


# -- grid sampling ----------------------------------------------------------------------------------


def _grid(shape: Sequence[int], dtype: DType, seed: int) -> Any:
    """Grid points spread over [-1.6, 1.6]²: many fall outside the input, plus exact corners."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    grid = torch.rand(tuple(shape), generator=generator, dtype=torch.float64) * 3.2 - 1.6
    flat = grid.view(-1, 2)
    flat[:4] = torch.tensor(
        [[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0], [-1.0, 1.0]], dtype=torch.float64
    )
    return grid.to(torch_dtype(dtype))


@handwritten("aten.grid_sampler_2d.default", FLOATS)
def _grid_sampler_2d_samples(dtype: DType) -> Iterator[AtenCall]:
    op = "aten.grid_sampler_2d.default"
    x = _tensor((2, 3, 5, 6), dtype)
    grid = _grid((2, 4, 7, 2), dtype, seed=dtype.itemsize)
    # (interpolation, padding, align_corners): every combination, bicubic and reflection first
    # (OpInfo's first samples are bilinear).
    modes = [(i, p, a) for i in (2, 1, 0) for p in (2, 1, 0) for a in (False, True)]
    for interpolation, padding, align in _turn(modes, dtype, FLOATS, 3)[:3]:
        yield _call(op, x, grid, interpolation, padding, align)
    # 32 channels: bilinear and bicubic read a channels-last copy of the input from 32 channels
    # on (decompositions/resampling.py), nearest the planes.
    wide = _tensor((2, 32, 5, 6), dtype)
    blends = [(i, p, a) for i in (0, 2) for p in (0, 1, 2) for a in (False, True)]
    for interpolation, padding, align in _turn(blends, dtype, FLOATS, 3)[:3]:
        yield _call(op, wide, grid, interpolation, padding, align)


# -- adaptive max pooling (non-core overloads torch.export keeps) ----------------------------------------


@handwritten("aten.adaptive_max_pool2d.default", FLOATS)
def _adaptive_max_pool2d(dtype: DType) -> Iterator[AtenCall]:
    """NaNs, ties and an all -inf corner (first position kept) over non-divisible sizes, shrinking
    and growing, unbatched, down to one output, and an empty output."""
    x = _with_nans_ties_and_lowest((2, 3, 7, 10), dtype)
    for size in ([3, 4], [2, 2], [1, 1], [7, 13], [5, 3]):
        yield _call("aten.adaptive_max_pool2d.default", x, size)
    yield _call("aten.adaptive_max_pool2d.default", x[0], [4, 3])
    yield _call("aten.adaptive_max_pool2d.default", x, [0, 3])


@handwritten("aten.adaptive_max_pool3d.default", FLOATS)
def _adaptive_max_pool3d(dtype: DType) -> Iterator[AtenCall]:
    x = _with_nans_ties_and_lowest((2, 2, 5, 6, 7), dtype)
    for size in ([2, 3, 4], [1, 1, 1], [5, 4, 9]):
        yield _call("aten.adaptive_max_pool3d.default", x, size)
    yield _call("aten.adaptive_max_pool3d.default", x[1], [3, 2, 2])


@handwritten("aten.fractional_max_pool2d.default", FLOATS)
def _fractional_max_pool2d_samples(dtype: DType) -> Iterator[AtenCall]:
    import torch

    op = "aten.fractional_max_pool2d.default"
    x = random_tensor((2, 3, 9, 8), dtype)
    x[0, 0, :4, :4] = -torch.inf  # a window of -inf only: its first position
    x[0, 1, 2, 3] = torch.nan
    x[1, 2] = 1.0  # ties: the first maximum
    samples = torch.rand((2, 3, 2), generator=torch.Generator().manual_seed(0))
    samples = samples.to(torch_dtype(dtype))
    yield AtenCall(op, (x, [2, 3], [4, 5], samples), {}, origin="handwritten")
    yield AtenCall(op, (x[0], [3, 2], [1, 7], samples), {}, origin="handwritten")  # unbatched
