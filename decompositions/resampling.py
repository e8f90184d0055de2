"""Resampling: upsampling (nearest, bilinear) and grid sampling, as ATen's CPU kernels compute them.

Each rule computes ATen's source indices and weights from `iota` with ATen's float arithmetic
(grid sampling in the input dtype, as ATen's vectorized kernel does), then gathers
(`prims.gather_nd`, one index vector per dim where it can) and blends in ATen's order.
docs/decompositions.md lists the deliberate differences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import is_symbolic, rounded, settled, to_float
from aten2prims.ir.values import Value
from aten2prims.promotion import convert, opmath_dtype

from .common import (
    FLOATS,
    check_dtype,
    full,
    index_ramp,
    iota,
    row_major,
    row_major_strides,
    row_major_window,
    scalar,
    sequential_sum,
)
from .registry import register

# -- shared pieces --------------------------------------------------------------------


def _scaled(size: Any, factor: float) -> Any:
    """The output size of a scale factor, as ATen computes it: the double product
    float(size) · factor truncated to an int. A symbolic size gives that expression (an integral
    factor multiplies the size, as torch's own shape function does, exact for every size)."""
    if not is_symbolic(size):
        return int(size * factor)
    if float(factor).is_integer():
        return size * int(factor)
    return rounded("trunc", to_float(size) * float(factor))


def _choose(condition: Any, if_true: Callable[[], Any], if_false: Callable[[], Any]) -> Any:
    """ATen's branch on sizes (`if (output_size == input_size)`): the branch itself when the
    sizes settle the condition, else both, selected at run time by the condition (a 0-dim bool
    tensor of it), so that one lowering is right at every size. Tensors or numbers of the same
    dtype; numbers are taken as `prims.where` takes them."""
    answer = settled(condition)
    if answer is not None:
        return if_true() if answer else if_false()
    return prims.where(scalar(condition, DType.bool), if_true(), if_false())


def _quotient(numerator: Any, denominator: Any, dtype: DType) -> Any:
    """ATen's ratio of two sizes in `dtype`: each converted to `dtype`, then divided in it. A
    constant for known sizes; a 0-dim tensor computed at run time for symbolic ones (the same
    conversions and division, so the same bits at every size)."""
    if not is_symbolic(numerator) and not is_symbolic(denominator):
        kind = dtype.numpy.type
        return float(kind(numerator) / kind(denominator))
    return prims.div(scalar(numerator, dtype), scalar(denominator, dtype))


def _separable_gather(x: Value, indices: Sequence[Value]) -> Value:
    """x[indices[0][i0], indices[1][i1], ...] over every combination: one int64 vector of
    positions per dim of x, each broadcast along its own dim (the executor runs such a gather as
    one take along each dim whose positions are not the identity, executor/gather.py)."""
    shape = [index.shape[0] for index in indices]
    return prims.gather_nd(
        x, [prims.broadcast_in_dim(index, shape, [d]) for d, index in enumerate(indices)]
    )


def _gather_along(x: Value, dim: int, index: Value) -> Value:
    """x = [B, H, W] resampled along `dim` (1: rows, 2: columns) at the int64 positions `index`."""
    return _separable_gather(x, [index if d == dim else iota(n) for d, n in enumerate(x.shape)])


# -- upsampling ------------------------------------------------------------------------------------


def _upsample_sizes(
    op: str, x: Value, output_size: Sequence[int] | None, scale_factors: Sequence[float] | None
) -> tuple[list[int], list[float | None]]:
    """ATen's compute_output_size for the two spatial dims of an NCHW input: exactly one of
    output_size and scale_factors; a scale factor gives floor(size · scale) (in double) and is
    passed on to the index computation, an output size is not."""
    if x.ndim != 4:
        raise ShapeError(f"{op}: expected a 4-D input [N, C, H, W], got shape {list(x.shape)}")
    if (output_size is None) == (scale_factors is None):
        raise ShapeError(f"{op}: must specify exactly one of output_size and scale_factors")
    scales: list[float | None]
    if output_size is not None:
        sizes, scales = list(output_size), [None, None]
        if len(sizes) != 2:
            raise ShapeError(f"{op}: output_size must have 2 entries, got {sizes}")
    else:
        assert scale_factors is not None  # exactly one of the two is given (checked above)
        factors = list(scale_factors)
        if len(factors) != 2:
            raise ShapeError(f"{op}: scale_factors must have 2 entries, got {factors}")
        sizes = [_scaled(n, s) for n, s in zip(x.shape[2:], factors)]
        scales = list(factors)
    if any(n <= 0 for n in x.shape[2:]) or any(n <= 0 for n in sizes):
        raise ShapeError(
            f"{op}: input and output sizes must be greater than 0, got input {list(x.shape[2:])} and output {sizes}"
        )
    return sizes, scales


def _float_scale(inputs: Any, outputs: Any, scale: float | None, dtype: DType) -> Any:
    """ATen's compute_scales_value in `dtype`: 1/scale if a positive scale factor was given, else
    inputs/outputs (each rounded to dtype, as the C++ computes it)."""
    kind = dtype.numpy.type
    if scale is not None and scale > 0:
        return float(kind(1.0 / scale))
    return _quotient(inputs, outputs, dtype)


def _nearest_source(inputs: Any, outputs: Any, scale: float | None) -> Value:
    """int64[outputs]: ATen's nearest_idx — the identity and halving shortcuts (which ATen takes
    whatever the scale factor, so they matter), else min(floor(o · scale), inputs - 1) in
    float32."""
    index = iota(outputs)

    def general() -> Value:
        scaled = prims.mul(
            convert(index, DType.float32), _float_scale(inputs, outputs, scale, DType.float32)
        )
        return prims.minimum(convert(prims.floor(scaled), DType.int64), inputs - 1)

    return _choose(
        outputs == inputs,
        lambda: index,
        lambda: _choose(
            outputs == 2 * inputs, lambda: prims.shift_right_arithmetic(index, 1), general
        ),
    )


@register("aten.upsample_nearest2d.vec")
def upsample_nearest2d(
    input: Value, output_size: Sequence[int] | None, scale_factors: Sequence[float] | None
) -> Value:
    op = "aten.upsample_nearest2d"
    check_dtype(op, input, FLOATS | {DType.uint8})
    sizes, scales = _upsample_sizes(op, input, output_size, scale_factors)
    if settled(input.numel == 0):  # a batch that may be 0 (data-dependent): the general path
        return full([*input.shape[:2], *sizes], 0, input.dtype)
    rows, columns = (_nearest_source(n, o, s) for n, o, s in zip(input.shape[2:], sizes, scales))
    images = prims.collapse_view(input, 0, 1)  # [N·C, H, W]
    picked = _separable_gather(images, [iota(images.shape[0]), rows, columns])
    return _unflattened(picked, input.shape[:2])


def _unflattened(images: Value, batch: Sequence[int]) -> Value:
    """[N·C, ...] images back as [N, C, ...]: split_dim, unless N may be 0 (a data-dependent
    batch; split_dim's outer length must be positive), then one reshape, right at every N."""
    if settled(batch[0] == 0) is False:
        return prims.split_dim(images, 0, batch[0])
    return prims.reshape(images, [*batch, *images.shape[1:]])


def _linear_ratio(
    inputs: Any, outputs: Any, align_corners: bool, scale: float | None, dtype: DType
) -> Any:
    """ATen's area_pixel_compute_scale in `dtype`."""
    if not align_corners:
        return _float_scale(inputs, outputs, scale, dtype)
    return _choose(
        outputs > 1,
        lambda: _quotient(inputs - 1, outputs - 1, dtype),
        lambda: 0.0 if not is_symbolic(outputs) else scalar(0.0, dtype),
    )


def _linear_source(
    inputs: Any, outputs: Any, align_corners: bool, scale: float | None, dtype: DType
) -> tuple[Value, Value, Value]:
    """ATen's compute_source_index_and_lambda along one dim, in `dtype`: the int64 indices of
    each output's two neighbours and the distance λ from the left one, in [0, 1]. Where the
    sizes are equal ATen copies (both neighbours the output's own index, λ = 0), whatever the
    scale factor; else area_pixel_compute_source_index and guard_index_and_lambda."""
    index = iota(outputs)

    def general() -> tuple[Value, Value, Value]:
        ratio = _linear_ratio(inputs, outputs, align_corners, scale, dtype)
        position = convert(index, dtype)
        if align_corners:
            source = prims.mul(position, ratio)
        else:
            source = prims.maximum(prims.sub(prims.mul(prims.add(position, 0.5), ratio), 0.5), 0.0)
        # ATen floors with floorf, i.e. after rounding a double source index to float.
        left = prims.minimum(
            convert(prims.floor(convert(source, DType.float32)), DType.int64), inputs - 1
        )
        distance = prims.minimum(prims.maximum(prims.sub(source, convert(left, dtype)), 0.0), 1.0)
        return left, prims.minimum(prims.add(left, 1), inputs - 1), distance

    copy = outputs == inputs
    if settled(copy) is not None:
        return _choose(copy, lambda: (index, index, full([outputs], 0.0, dtype)), general)
    left, right, distance = general()
    chosen = scalar(copy, DType.bool)
    return (
        prims.where(chosen, index, left),
        prims.where(chosen, index, right),
        prims.where(chosen, 0.0, distance),
    )


def _weighted(x: Value, weight: Value, dim: int) -> Value:
    return prims.mul(x, prims.broadcast_in_dim(weight, list(x.shape), [dim]))


def _bilinear_float(
    x: Value, sizes: Sequence[int], align_corners: bool, scales: Sequence[float | None]
) -> Value:
    """ATen's generic kernel Σ_h λ_h · (Σ_w λ_w · x[h, w]) in opmath, computed separably (the
    same operations): the width pass, then the height pass. A dim whose size does not change is
    ATen's identity x·1 + x·0 (which turns inf into NaN, as ATen does)."""
    compute = opmath_dtype(x.dtype)
    values = prims.collapse_view(convert(x, compute), 0, 1)  # [N·C, H, W]
    for dim in (2, 1):
        inputs, outputs, scale = values.shape[dim], sizes[dim - 1], scales[dim - 1]
        if settled(inputs == outputs):
            values = prims.add(values, prims.mul(values, 0.0))
            continue
        left, right, distance = _linear_source(inputs, outputs, align_corners, scale, compute)
        near = _weighted(_gather_along(values, dim, left), prims.sub(1.0, distance), dim)
        values = prims.add(near, _weighted(_gather_along(values, dim, right), distance, dim))
    return convert(_unflattened(values, x.shape[:2]), x.dtype)


def _uint8_weight_precision(
    inputs: int, outputs: int, align_corners: bool, scale: float | None
) -> int:
    """ATen's fixed-point precision for uint8 interpolation weights: the largest p < 22 such that
    the largest weight times 2^(p+1) stays below 2^15 (weights recomputed here in double, exactly as
    the graph computes them). It needs the sizes: symbolic ones are specialized to their examples
    under recorded checks."""
    inputs, outputs = int(inputs), int(outputs)
    ratio = _linear_ratio(inputs, outputs, align_corners, scale, DType.float64)
    largest = 0.0
    for o in range(outputs):
        source = ratio * o if align_corners else max(ratio * (o + 0.5) - 0.5, 0.0)
        left = min(math.floor(np.float32(source)), inputs - 1)
        distance = min(max(source - left, 0.0), 1.0)
        near, far = 1.0 - distance, 1.0 - (1.0 - distance)
        largest = max(largest, near + far if left == inputs - 1 else max(near, far))
    precision = 0
    while precision < 22 and int(0.5 + largest * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    return precision


def _bilinear_uint8_pass(
    x: Value, dim: int, outputs: int, align_corners: bool, scale: float | None
) -> Value:
    """One separable pass of ATen's uint8 kernel along `dim` of x = [B, H, W]: int16 fixed-point
    weights round(w · 2^p) of the two neighbours (1 - λ and 1 - (1 - λ), merged into one at the
    last index), summed with the rounding bias 2^(p-1), shifted right by p, clamped to [0, 255]."""
    inputs = x.shape[dim]
    if inputs == outputs:
        return x
    precision = _uint8_weight_precision(inputs, outputs, align_corners, scale)
    left, right, distance = _linear_source(inputs, outputs, align_corners, scale, DType.float64)
    near = prims.sub(1.0, distance)
    far = prims.sub(1.0, near)
    last = prims.eq(left, inputs - 1)
    near = prims.where(last, prims.add(near, far), near)
    far = prims.where(last, 0.0, far)

    def fixed(weight: Value) -> Value:
        return convert(
            prims.floor(prims.add(prims.mul(weight, float(1 << precision)), 0.5)), DType.int64
        )

    terms = [
        _weighted(convert(_gather_along(x, dim, index), DType.int64), fixed(weight), dim)
        for index, weight in ((left, near), (right, far))
    ]
    rounded = prims.shift_right_arithmetic(
        prims.add(sequential_sum(terms), 1 << (precision - 1)), precision
    )
    return convert(prims.minimum(prims.maximum(rounded, 0), 255), DType.uint8)


@register("aten.upsample_bilinear2d.vec")
def upsample_bilinear2d(
    input: Value,
    output_size: Sequence[int] | None,
    align_corners: bool,
    scale_factors: Sequence[float] | None,
) -> Value:
    op = "aten.upsample_bilinear2d"
    check_dtype(op, input, FLOATS | {DType.uint8})
    sizes, scales = _upsample_sizes(op, input, output_size, scale_factors)
    if settled(input.numel == 0):  # a batch that may be 0 (data-dependent): the general path
        return full([*input.shape[:2], *sizes], 0, input.dtype)
    if input.dtype is DType.uint8:
        # ATen resamples uint8 images separably in fixed point: the width first, then the height.
        images = prims.collapse_view(input, 0, 1)  # [N·C, H, W]
        wide = _bilinear_uint8_pass(images, 2, sizes[1], align_corners, scales[1])
        return _unflattened(
            _bilinear_uint8_pass(wide, 1, sizes[0], align_corners, scales[0]), input.shape[:2]
        )
    return _bilinear_float(input, sizes, align_corners, scales)


# -- grid sampling ---------------------------------------------------------------------------------

BILINEAR, NEAREST, BICUBIC = 0, 1, 2
ZEROS, BORDER, REFLECTION = 0, 1, 2
CUBIC_A = -0.75  # the cubic convolution constant ATen's grid sampler uses
# Grid sampling reads a channels-last copy of the input from this many channels on (measured on
# 8×C×56² bilinear sampling: channels-last 0.75x the time at 32 channels, 1.04-1.21x at 4-16;
# docs/design.md).
CHANNELS_LAST_MIN = 32


@attrs.frozen
class GridAxis:
    """One spatial axis of grid_sampler_2d: ATen's vectorized ComputeLocation (unnormalization
    and padding of source coordinates), in the input's dtype."""

    size: int
    padding_mode: int
    align_corners: bool
    dtype: DType

    def _constant(self, value: float) -> float:
        return float(self.dtype.numpy.type(value))

    def unnormalize(self, coordinate: Value) -> Value:
        """[-1, 1] → pixel coordinates: (c + 1)·(size-1)/2, or (c + 1)·size/2 - 0.5."""
        if self.align_corners:
            return prims.mul(prims.add(coordinate, 1.0), self._constant((self.size - 1) / 2))
        return prims.sub(prims.mul(prims.add(coordinate, 1.0), self._constant(self.size / 2)), 0.5)

    def clip(self, coordinate: Value) -> Value:
        """Clamp to [0, size - 1], NaN to 0."""
        positive = prims.where(prims.gt(coordinate, 0.0), coordinate, 0.0)
        return prims.minimum(positive, float(self.size - 1))

    def reflect(self, coordinate: Value) -> Value:
        """Fold into [low, low + span] by reflecting at both ends, as ATen's vectorized kernel:
        low = 0, span = size - 1 (align_corners) or low = -0.5, span = size."""
        if self.align_corners and self.size <= 1:
            return prims.mul(coordinate, 0.0)
        low = 0.0 if self.align_corners else -0.5
        twice_span = float(2 * (self.size - 1) if self.align_corners else 2 * self.size)
        distance = prims.abs(prims.sub(coordinate, low) if low else coordinate)
        flips = prims.trunc(prims.div(distance, twice_span))
        extra = prims.sub(distance, prims.mul(flips, twice_span))
        folded = prims.minimum(extra, prims.sub(twice_span, extra))
        return prims.add(folded, low) if low else folded

    def pad(self, coordinate: Value) -> Value:
        """ATen's compute_coordinates: the padding mode applied to pixel coordinates."""
        if self.padding_mode == BORDER:
            return self.clip(coordinate)
        if self.padding_mode == REFLECTION:
            return self.clip(self.reflect(coordinate))
        return coordinate

    def inside(self, coordinate: Value) -> Value:
        """Whether an integral coordinate indexes the input (out of range reads give 0)."""
        return prims.bitwise_and(prims.gt(coordinate, -1.0), prims.lt(coordinate, float(self.size)))


@attrs.frozen
class _Position:
    """Integral source coordinates along one axis as int64 indices, and (zeros padding) whether
    each lies inside the input; outside positions hold index 0."""

    index: Value
    inside: Value | None


class _Sampler:
    """Reads input[n, c, y, x] at integral float coordinates y, x of shape [N, H', W'], giving
    [N, C, H', W'] (`result`) with zeros where a coordinate lies outside the input.

    Under zeros padding the reads go to the input with one row of zeros appended, seen flat: an
    outside position reads a zero, as ATen's masked gather gives 0, so the gathered values need
    no select of their own (one copy of the input instead of a select per read). Coordinates
    that border or reflection padding clamped into the input need no test (`bounded`).

    `channels_last`: the reads go to a channels-last copy [N, H·W, C]
    (the zero row appended in the same copy): a read then copies C contiguous values per
    position, where the [N, C, H·W] planes copy one value per channel and position; the blend
    runs channels-last and its sum is copied back to [N, C, H', W'] (docs/design.md)."""

    def __init__(
        self,
        values: Value,
        rows: GridAxis,
        columns: GridAxis,
        positions: Sequence[int],
        outside: bool,
        channels_last: bool,
    ) -> None:
        batch, channels, height, width = values.shape
        self.rows, self.columns = rows, columns
        self.width, self.outside_index = width, height * width  # the appended zero row
        self.channels_last = channels_last
        if self.channels_last:
            image = prims.transpose(values, [0, 2, 3, 1])  # [N, H, W, C]
            zero = full([batch, 1, width, channels], 0, values.dtype)
            self.plane = prims.collapse_view(prims.cat([image, zero], 1), 1, 2)
            self.shape = [batch, *positions, channels]
            self.spread_dims, self.channel_dim = [0, 1, 2], 3
        else:
            if outside:
                values = prims.cat([values, full([batch, channels, 1, width], 0, values.dtype)], 2)
            self.plane = prims.collapse_view(values, 2, 3)
            self.shape = [batch, channels, *positions]
            self.spread_dims, self.channel_dim = [0, 2, 3], 1

    def _spread(self, x: Value) -> Value:
        return prims.broadcast_in_dim(x, self.shape, self.spread_dims)

    def result(self, blended: Value) -> Value:
        """The blend of reads (of `self.shape`) as the op's [N, C, H', W'] result."""
        if self.channels_last:
            return row_major(prims.transpose(blended, [0, 3, 1, 2]))
        return blended

    def position(self, axis: GridAxis, coordinate: Value, bounded: bool) -> _Position:
        """Converted once per coordinate, shared by every read at it (bilinear's corners share
        rows and columns two by two, bicubic's 16 taps four rows and four columns). `bounded`:
        the coordinate is known to lie in [0, size - 1] (clamped by the padding)."""
        if bounded:
            return _Position(convert(coordinate, DType.int64), None)
        inside = axis.inside(coordinate)
        return _Position(convert(prims.where(inside, coordinate, 0.0), DType.int64), inside)

    def row(self, y: Value, bounded: bool) -> _Position:
        return self.position(self.rows, y, bounded)

    def column(self, x: Value, bounded: bool) -> _Position:
        return self.position(self.columns, x, bounded)

    def read(self, row: _Position, column: _Position) -> Value:
        flat = prims.add(prims.mul(row.index, self.width), column.index)
        masks = [p.inside for p in (row, column) if p.inside is not None]
        if masks:
            inside = masks[0] if len(masks) == 1 else prims.bitwise_and(masks[0], masks[1])
            flat = prims.where(inside, flat, self.outside_index)
        # The plane's axes: batch, channels and the flat position, in the plane's order.
        batch, channel = index_ramp(self.shape, 0), index_ramp(self.shape, self.channel_dim)
        position = prims.broadcast_in_dim(flat, self.shape, self.spread_dims)
        if self.channels_last:
            return prims.gather_nd(self.plane, [batch, position, channel])
        return prims.gather_nd(self.plane, [batch, channel, position])

    def weighted(self, value: Value, weight: Value) -> Value:
        return prims.mul(value, self._spread(weight))


def _cubic_coefficients(t: Value) -> list[Value]:
    """The four cubic convolution weights of the taps at -1, 0, 1, 2 for a fractional offset t,
    evaluated as ATen's vectorized kernel evaluates its polynomials."""
    a = CUBIC_A

    def outer(x: Value) -> Value:  # 1 < |x| < 2
        return prims.sub(
            prims.mul(prims.add(prims.mul(prims.sub(prims.mul(x, a), 5 * a), x), 8 * a), x), 4 * a
        )

    def inner(x: Value) -> Value:  # |x| <= 1
        return prims.add(prims.mul(prims.mul(prims.sub(prims.mul(x, a + 2), a + 3), x), x), 1.0)

    return [outer(prims.add(t, 1.0)), inner(t), inner(prims.sub(1.0, t)), outer(prims.sub(2.0, t))]


@register("aten.grid_sampler_2d.default")
def grid_sampler_2d(
    input: Value, grid: Value, interpolation_mode: int, padding_mode: int, align_corners: bool
) -> Value:
    """ATen's vectorized CPU grid sampler: grid (x, y) in [-1, 1] unnormalized to pixel
    coordinates and padded (zeros: reads outside give 0; border: clamped; reflection: folded back,
    then clamped), then bilinear (four neighbours), nearest (rounded half to even) or bicubic (4×4
    taps, each tap coordinate padded), all computed in the input dtype."""
    op = "aten.grid_sampler_2d"
    check_dtype(op, input, FLOATS)
    if grid.dtype is not input.dtype:
        raise DTypeError(f"{op}: grid has dtype {grid.dtype.short}, input {input.dtype.short}")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[3] != 2 or grid.shape[0] != input.shape[0]:
        raise ShapeError(
            f"{op}: expected input [N, C, H, W] and grid [N, H', W', 2], got {list(input.shape)} and {list(grid.shape)}"
        )
    if 0 in input.shape[2:]:
        raise ShapeError(
            f"{op}: expected non-empty spatial dimensions, got input shape {list(input.shape)}"
        )
    if interpolation_mode not in (BILINEAR, NEAREST, BICUBIC) or padding_mode not in (
        ZEROS,
        BORDER,
        REFLECTION,
    ):
        raise ShapeError(
            f"{op}: unknown interpolation_mode {interpolation_mode} or padding_mode {padding_mode}"
        )
    batch, channels, height, width = input.shape
    positions = list(grid.shape[1:3])
    if batch * channels * math.prod(positions) == 0:
        return full([batch, channels, *positions], 0, input.dtype)
    # ATen's kernel runs in the input dtype itself, float16/bfloat16 included (each vector
    # operation rounds to it), which prims on float16/bfloat16 tensors reproduce exactly.
    rows, columns = (GridAxis(n, padding_mode, align_corners, input.dtype) for n in (height, width))
    strides = row_major_strides(grid.shape)[:3]
    gx, gy = (row_major_window(grid, [batch, *positions], list(strides), k) for k in (0, 1))
    # Padded coordinates lie in the input except under zeros padding; bilinear's east and south
    # neighbours (floor + 1) may lie one past its end under every padding.
    clamped = padding_mode != ZEROS
    outside = interpolation_mode == BILINEAR or not clamped
    # Several reads (bilinear 4, bicubic 16) of many channels pay for the channels-last copies;
    # nearest's one read does not (measured in docs/design.md).
    channels_last = channels >= CHANNELS_LAST_MIN and interpolation_mode != NEAREST
    sampler = _Sampler(input, rows, columns, positions, outside, channels_last)
    if interpolation_mode == BICUBIC:
        return sampler.result(
            _bicubic(sampler, columns.unnormalize(gx), rows.unnormalize(gy), clamped)
        )
    x, y = columns.pad(columns.unnormalize(gx)), rows.pad(rows.unnormalize(gy))
    if interpolation_mode == NEAREST:
        return sampler.result(
            sampler.read(
                sampler.row(prims.round(y), clamped), sampler.column(prims.round(x), clamped)
            )
        )
    return sampler.result(_bilinear(sampler, x, y, clamped))


def _bilinear(sampler: _Sampler, x: Value, y: Value, clamped: bool) -> Value:
    """The four neighbours weighted by the opposite rectangles: nw·v + ne·v + sw·v + se·v."""
    west, north = prims.floor(x), prims.floor(y)
    east, south = prims.add(west, 1.0), prims.add(north, 1.0)
    to_west, to_north = prims.sub(x, west), prims.sub(y, north)
    to_east, to_south = prims.sub(1.0, to_west), prims.sub(1.0, to_north)
    north, south = sampler.row(north, clamped), sampler.row(south, False)
    west, east = sampler.column(west, clamped), sampler.column(east, False)
    corners = [
        (north, west, prims.mul(to_south, to_east)),
        (north, east, prims.mul(to_south, to_west)),
        (south, west, prims.mul(to_north, to_east)),
        (south, east, prims.mul(to_north, to_west)),
    ]
    return sequential_sum([sampler.weighted(sampler.read(r, c), w) for r, c, w in corners])


def _bicubic(sampler: _Sampler, x: Value, y: Value, clamped: bool) -> Value:
    """Σ_i cy[i] · (Σ_j cx[j] · input[pad(y0 - 1 + i), pad(x0 - 1 + j)])."""
    x0, y0 = prims.floor(x), prims.floor(y)
    cx, cy = _cubic_coefficients(prims.sub(x, x0)), _cubic_coefficients(prims.sub(y, y0))
    columns = [
        sampler.column(sampler.columns.pad(prims.add(x0, float(j - 1))), clamped) for j in range(4)
    ]
    lines = []
    for i in range(4):
        row = sampler.row(sampler.rows.pad(prims.add(y0, float(i - 1))), clamped)
        lines.append(
            sequential_sum(
                [sampler.weighted(sampler.read(row, columns[j]), cx[j]) for j in range(4)]
            )
        )
    return sequential_sum([sampler.weighted(lines[i], cy[i]) for i in range(4)])
