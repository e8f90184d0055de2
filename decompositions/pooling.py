"""Family N: pooling (max, average, adaptive; forward and backward).

Pooling windows are zero-copy views: the input is padded once (only where a window reaches past
it), and for each kernel offset, in row-major order, `as_strided` gives the element at that
offset of every window as one view `[*batch, *positions]`. Window reductions run over this
sequence of views, in ATen's own accumulation order: average pooling adds them up; max pooling
runs ATen's scan (an offset is taken where its value is greater than the running maximum or
NaN), which also yields ATen's indices; the backward passes spread the gradient and sum windows
again (or scatter to the saved indices). Adaptive windows vary in size, but outputs whose index
differs by out/gcd(in, out) have windows shifted by in/gcd(in, out): each such residue class is
one strided view, summed exactly.
Every rule mirrors ATen's CPU kernel (aten/src/ATen/native/cpu); docs/decompositions.md lists
the deliberate differences.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import attrs
import numpy as np

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import settled
from aten2prims.ir.values import Value
from aten2prims.promotion import convert, opmath_dtype

from .common import (
    FLOATS,
    INTS,
    check_dtype,
    full,
    index_ramp,
    iota,
    per_spatial_dim,
    row_major_strides,
    row_major_window,
    row_major_window_scatter,
    sequential_sum,
    slice_in_dim,
)
from .registry import aten, register

# -- arguments ------------------------------------------------------------------------------------


def _check_rank(op: str, x: Value, rank: int) -> None:
    """A [C, *spatial] or [N, C, *spatial] input whose non-batch dims are non-empty."""
    if x.ndim not in (rank + 1, rank + 2):
        raise ShapeError(
            f"{op}: expected a {rank + 1}-D or {rank + 2}-D input, got shape {list(x.shape)}"
        )
    if any(n == 0 for n in x.shape[x.ndim - rank - 1 :]):
        raise ShapeError(
            f"{op}: expected non-empty non-batch dimensions, got shape {list(x.shape)}"
        )


# -- pooling geometry -----------------------------------------------------------------------------


@attrs.frozen
class Window:
    """One spatial dim of a sliding-window pooling: the input size, the window's parameters and the
    number of window positions."""

    size: int
    kernel: int
    stride: int
    padding: int
    dilation: int
    positions: int

    @property
    def reach(self) -> int:
        """How many input positions a window spans (kernel and dilation)."""
        return self.dilation * (self.kernel - 1) + 1

    @property
    def after(self) -> int:
        """Padding after the input enough for every window to lie inside the padded input: the
        exact amount when the sizes settle it, else the most any size in range needs (the last
        window starts at most stride - 1 past a floor-mode one, which ends within the padding).
        Padding no window reads costs a few elements; deciding the exact amount on a symbolic
        size would restrict the sizes the graph runs at."""
        needed = (self.positions - 1) * self.stride + self.reach - self.padding - self.size
        if settled(needed <= 0):
            return 0
        if type(needed) is int:
            return needed
        return self.padding + self.stride - 1

    def starts(self) -> Value:
        """int64[positions]: where each window starts, in input coordinates (may be negative)."""
        return iota(self.positions, start=-self.padding, step=self.stride)


def _positions(
    size: int, kernel: int, padding: int, stride: int, dilation: int, ceil_mode: bool
) -> int:
    """ATen's pooling_output_shape, as one floor division of the size: floor((size + 2·padding -
    reach) / stride) + 1 windows, or with ceil_mode the ceiling, less a last window that would
    start in the right padding. Window j starts in the input or its left padding while
    j·stride <= size + padding - 1, so the last one kept is the lesser of the two quotients
    (ATen's "drop the last window", since padding <= reach / 2). Both divide the size plus a
    constant by the stride, and floor division is monotonic: the lesser quotient is that of the
    lesser constant, so no decision on the size is taken."""
    reach = dilation * (kernel - 1) + 1
    if not ceil_mode:
        return (size + 2 * padding - reach) // stride + 1
    return (size + min(2 * padding - reach + stride - 1, padding - 1)) // stride + 1


def _windows(
    op: str,
    x: Value,
    rank: int,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> list[Window]:
    """The per-dim geometry of a pooling over the last `rank` dims of x, checked as ATen checks it."""
    kernel = per_spatial_dim(op, "kernel_size", kernel_size, rank)
    stride = kernel if len(stride) == 0 else per_spatial_dim(op, "stride", stride, rank)
    padding = per_spatial_dim(op, "padding", padding, rank)
    dilation = per_spatial_dim(op, "dilation", dilation, rank)
    if any(k <= 0 for k in kernel) or any(s <= 0 for s in stride) or any(d <= 0 for d in dilation):
        raise ShapeError(
            f"{op}: kernel_size, stride and dilation must be positive, got {kernel}, {stride} and {dilation}"
        )
    if any(p < 0 or p > k // 2 for p, k in zip(padding, kernel)):
        raise ShapeError(
            f"{op}: padding {padding} must be non-negative and at most half of kernel_size {kernel}"
        )
    sizes = x.shape[-rank:]
    windows = [
        Window(n, k, s, p, d, _positions(n, k, p, s, d, ceil_mode))
        for n, k, s, p, d in zip(sizes, kernel, stride, padding, dilation)
    ]
    if any(w.positions < 1 for w in windows):
        raise ShapeError(
            f"{op}: input of spatial size {list(sizes)} is too small for kernel {kernel} "
            f"(output size {[w.positions for w in windows]})"
        )
    return windows


def _padded(x: Value, windows: Sequence[Window], value: float | int) -> Value:
    """x with its last len(windows) dims padded by `value` wherever a window reaches outside it."""
    pad: list[int] = []
    for w in reversed(windows):  # constant_pad_nd lists the last dim first
        pad += [w.padding, w.after]
    if not any(pad):
        return x
    return aten.constant_pad_nd.default(x, pad, value)


def _offset_views(
    x: Value, windows: Sequence[Window], first: Sequence[int] | None = None
) -> Iterator[Value]:
    """The windows of a padded x, one kernel offset at a time in row-major order: for each offset,
    the element at that offset of every window as one zero-copy view [*batch, *positions]
    (windows start at `first` + position · stride along each dim)."""
    rank = len(windows)
    strides = row_major_strides(x.shape)
    spatial = strides[-rank:]
    shape = [*x.shape[:-rank], *(w.positions for w in windows)]
    view_strides = [*strides[:-rank], *(w.stride * s for w, s in zip(windows, spatial))]
    origin = sum(f * s for f, s in zip(first or [0] * rank, spatial))
    for offsets in itertools.product(*(range(w.kernel) for w in windows)):
        if settled(math.prod(shape) == 0):  # a batch that may be 0: an empty window is right
            yield full(shape, 0, x.dtype)
            continue
        start = origin + sum(k * w.dilation * s for k, w, s in zip(offsets, windows, spatial))
        yield row_major_window(x, shape, view_strides, start)


def _outer(vectors: Sequence[Value], combine: Callable[[Value, Value], Value]) -> Value:
    """vectors[0] ⊗ vectors[1] ⊗ …: a tensor of their lengths combining one entry of each."""
    shape = [v.shape[0] for v in vectors]
    result = prims.broadcast_in_dim(vectors[0], shape, [0]) if len(vectors) > 1 else vectors[0]
    for d, v in enumerate(vectors[1:], start=1):
        result = combine(result, prims.broadcast_in_dim(v, shape, [d]))
    return result


def _to_batch_shape(x: Value, shape: Sequence[int]) -> Value:
    """x (shaped like the trailing dims of `shape`) broadcast to `shape`."""
    if x.ndim == len(shape) and tuple(x.shape) == tuple(
        shape
    ):  # ranks first: sizes may be symbolic
        return x
    return prims.broadcast_in_dim(x, list(shape), list(range(len(shape) - x.ndim, len(shape))))


# -- max pooling ----------------------------------------------------------------------------------


def _lowest(dtype: DType) -> float | int:
    return -math.inf if dtype.is_floating else int(np.iinfo(dtype.numpy).min)


def _first_valid_offset(w: Window) -> Value:
    """int32[positions]: the first kernel offset of each window that lies inside the input (ATen
    starts its scan there)."""
    if w.padding == 0:
        return full([w.positions], 0, DType.int32)
    deficit = prims.maximum(prims.neg(w.starts()), 0)
    return convert(prims.div(prims.add(deficit, w.dilation - 1), w.dilation), DType.int32)  # ceil


def _offset_shifts(windows: Sequence[Window], plane: Sequence[int]) -> Value:
    """int64[K]: for each kernel offset k (row-major), how far its element lies from the window's
    start in the flat input plane: Σ_d offset_d · dilation_d · plane_d."""
    kernel = [w.kernel for w in windows]
    shifts = [prims.mul(iota(w.kernel), w.dilation * p) for w, p in zip(windows, plane)]
    return prims.reshape(_outer(shifts, prims.add), [math.prod(kernel)])


def _max_pool(
    op: str,
    x: Value,
    rank: int,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> tuple[Value, Value]:
    """ATen's scan over the kernel offsets in row-major order: an offset is taken where its value
    is greater than the running maximum or NaN, starting from (lowest value, each window's first
    valid offset). So the first of tied maxima wins, the last NaN wins, and padding (the lowest
    value) never does. The running value is the NaN-propagating `maximum`; offsets being scanned
    in increasing order, the offset taken last is the `maximum` of k·taken_k. Each offset's
    elements are copied out of the strided view once (`clone`), since they are read three times."""
    check_dtype(op, x, FLOATS | INTS)
    _check_rank(op, x, rank)
    windows = _windows(op, x, rank, kernel_size, stride, padding, dilation, ceil_mode)
    shape = [*x.shape[:-rank], *(w.positions for w in windows)]
    if settled(math.prod(shape) == 0):  # a batch that may be 0: the general path
        return full(shape, 0, x.dtype), full(shape, 0, DType.int64)
    padded = _padded(x, windows, _lowest(x.dtype))
    kernel = [w.kernel for w in windows]
    radix = row_major_strides(kernel)  # offset k = Σ_d offset_d · radix_d
    first = _outer(
        [prims.mul(_first_valid_offset(w), r) for w, r in zip(windows, radix)], prims.add
    )
    taken = _to_batch_shape(first, shape)
    best: Value | None = None
    for k, view in enumerate(_offset_views(padded, windows)):
        value = prims.clone(view)
        if best is None:  # the padding's lowest value never beats the first offset's
            best = value
            continue
        take = prims.gt(value, best)
        if x.dtype.is_floating:
            take = prims.bitwise_or(take, prims.ne(value, value))
        best = prims.maximum(best, value)
        taken = prims.maximum(taken, prims.mul(convert(take, DType.int32), k))
    # Indices number the input's spatial elements: the window's start plus the taken offset's shift.
    plane = row_major_strides(x.shape[-rank:])
    start = _outer([prims.mul(w.starts(), p) for w, p in zip(windows, plane)], prims.add)
    shift = prims.gather_nd(_offset_shifts(windows, plane), [taken])
    assert best is not None  # every window has at least one offset
    return best, prims.add(_to_batch_shape(start, shape), shift)


@register("aten.max_pool2d_with_indices.default")
def max_pool2d_with_indices(
    self: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> tuple[Value, Value]:
    return _max_pool(
        "aten.max_pool2d_with_indices", self, 2, kernel_size, stride, padding, dilation, ceil_mode
    )


@register("aten.max_pool3d_with_indices.default")
def max_pool3d_with_indices(
    self: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> tuple[Value, Value]:
    return _max_pool(
        "aten.max_pool3d_with_indices", self, 3, kernel_size, stride, padding, dilation, ceil_mode
    )


@register("aten.max_pool2d_with_indices_backward.default")
def max_pool2d_with_indices_backward(
    grad_output: Value,
    self: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
    indices: Value,
) -> Value:
    """Each gradient is added at its saved index (a flat position in its input plane); windows
    sharing a maximum sum their gradients there."""
    op = "aten.max_pool2d_with_indices_backward"
    check_dtype(op, self, FLOATS, "self")
    _check_rank(op, self, 2)
    if grad_output.dtype is not self.dtype:
        raise DTypeError(
            f"{op}: grad_output has dtype {grad_output.dtype.short}, self {self.dtype.short}"
        )
    check_dtype(op, indices, frozenset({DType.int64}), "indices")
    windows = _windows(op, self, 2, kernel_size, stride, padding, dilation, ceil_mode)
    shape = (*self.shape[:-2], *(w.positions for w in windows))
    for name, t in (("grad_output", grad_output), ("indices", indices)):
        if t.shape != shape:
            raise ShapeError(f"{op}: {name} has shape {list(t.shape)}, expected {list(shape)}")
    batch = self.shape[:-2]
    plane, count = math.prod(self.shape[-2:]), math.prod(shape[-2:])
    if math.prod(shape) == 0:
        return full(self.shape, 0, self.dtype)
    values = prims.reshape(grad_output, [*batch, count])
    where = [
        *(index_ramp(values.shape, d) for d in range(len(batch))),
        prims.reshape(indices, [*batch, count]),
    ]
    grad = prims.scatter_nd(full([*batch, plane], 0, self.dtype), where, values, "sum")
    return prims.reshape(grad, list(self.shape))


# -- average pooling ------------------------------------------------------------------------------


def _window_counts(w: Window, count_include_pad: bool) -> Value:
    """int64[positions]: ATen's divisor factor of each window along one dim: the window clipped to
    the input plus its padding, or (count_include_pad=False) to the input alone."""
    start = w.starts()
    end = prims.minimum(prims.add(start, w.kernel), w.size + w.padding)
    if count_include_pad:
        return prims.sub(end, start)
    return prims.sub(prims.minimum(end, w.size), prims.maximum(start, 0))


def _divisors(
    windows: Sequence[Window], count_include_pad: bool, divisor_override: int | None
) -> Value | int:
    if divisor_override is not None:
        return divisor_override
    return _outer([_window_counts(w, count_include_pad) for w in windows], prims.mul)


def _divide(total: Value, divisor: Value | int) -> Value:
    """total / divisor in total's dtype (truncating for integers, as ATen's kernels divide)."""
    if isinstance(divisor, int):
        return prims.div(total, convert(divisor, total.dtype))
    return prims.div(total, _to_batch_shape(convert(divisor, total.dtype), total.shape))


def _avg_pool_arguments(
    op: str,
    x: Value,
    rank: int,
    dtypes: frozenset[DType],
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool,
    divisor_override: int | None,
) -> list[Window]:
    check_dtype(op, x, dtypes)
    _check_rank(op, x, rank)
    if divisor_override is not None and divisor_override == 0:
        raise ShapeError(f"{op}: divisor_override must not be zero")
    return _windows(op, x, rank, kernel_size, stride, padding, [1], ceil_mode)


def _avg_pool(
    x: Value, windows: Sequence[Window], count_include_pad: bool, divisor_override: int | None
) -> Value:
    """The sum of each window divided by ATen's divisor for that window. The sum runs over the
    kernel offsets' views of the zero-padded input (in opmath), in ATen's order."""
    rank = len(windows)
    shape = [*x.shape[:-rank], *(w.positions for w in windows)]
    if settled(math.prod(shape) == 0):  # a batch that may be 0: the general path
        return full(shape, 0, x.dtype)
    total = sequential_sum(
        _offset_views(_padded(convert(x, opmath_dtype(x.dtype)), windows, 0), windows)
    )
    return convert(_divide(total, _divisors(windows, count_include_pad, divisor_override)), x.dtype)


AVG_POOL_DTYPES = FLOATS | {DType.int64}


@register("aten.avg_pool1d.default")
def avg_pool1d(
    self: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
) -> Value:
    op = "aten.avg_pool1d"
    windows = _avg_pool_arguments(
        op, self, 1, AVG_POOL_DTYPES, kernel_size, stride, padding, ceil_mode, None
    )
    return _avg_pool(self, windows, count_include_pad, None)


@register("aten.avg_pool2d.default")
def avg_pool2d(
    self: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Value:
    op = "aten.avg_pool2d"
    windows = _avg_pool_arguments(
        op, self, 2, AVG_POOL_DTYPES, kernel_size, stride, padding, ceil_mode, divisor_override
    )
    return _avg_pool(self, windows, count_include_pad, divisor_override)


@register("aten.avg_pool3d.default")
def avg_pool3d(
    self: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Value:
    op = "aten.avg_pool3d"
    # ATen's CPU kernel has no float16/bfloat16 variant here, and refuses inputs smaller than the kernel.
    dtypes = frozenset({DType.float32, DType.float64, DType.int64})
    windows = _avg_pool_arguments(
        op, self, 3, dtypes, kernel_size, stride, padding, ceil_mode, divisor_override
    )
    if any(w.size < w.kernel for w in windows):
        raise ShapeError(
            f"{op}: input of spatial size {list(self.shape[-3:])} is smaller than the kernel "
            f"{[w.kernel for w in windows]}"
        )
    return _avg_pool(self, windows, count_include_pad, divisor_override)


@register("aten.avg_pool2d_backward.default")
def avg_pool2d_backward(
    grad_output: Value,
    self: Value,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: int | None,
) -> Value:
    """Each window adds grad / divisor to the input positions it covers. The shares are spread
    into a zero canvas (stride apart, after kernel-1 zeros), whose kernel-sized windows then sum
    exactly the shares of the windows covering each input position."""
    op = "aten.avg_pool2d_backward"
    windows = _avg_pool_arguments(
        op, self, 2, AVG_POOL_DTYPES, kernel_size, stride, padding, ceil_mode, divisor_override
    )
    if grad_output.dtype is not self.dtype:
        raise DTypeError(
            f"{op}: grad_output has dtype {grad_output.dtype.short}, self {self.dtype.short}"
        )
    shape = (*self.shape[:-2], *(w.positions for w in windows))
    if grad_output.shape != shape:
        raise ShapeError(
            f"{op}: grad_output has shape {list(grad_output.shape)}, expected {list(shape)}"
        )
    if self.numel == 0:
        return full(self.shape, 0, self.dtype)
    compute = opmath_dtype(self.dtype)
    shares = _divide(
        convert(grad_output, compute), _divisors(windows, count_include_pad, divisor_override)
    )
    return convert(_spread_sum(shares, windows), self.dtype)


def _spread_sum(shares: Value, windows: Sequence[Window]) -> Value:
    """grad[i] = Σ over windows o covering input position i of shares[o], for every spatial dim."""
    rank = len(windows)
    batch = shares.shape[:-rank]
    # Long enough for the spread shares (the last lands at kernel - 1 + (positions - 1)·stride,
    # within size + padding + after) and for the kernel-sized stretch of the last input position.
    lengths = [w.size + w.padding + max(w.kernel - 1, w.after) for w in windows]
    canvas_shape = [*batch, *lengths]
    strides = row_major_strides(canvas_shape)
    spread_strides = [*strides[:-rank], *(w.stride * s for w, s in zip(windows, strides[-rank:]))]
    first = sum((w.kernel - 1) * s for w, s in zip(windows, strides[-rank:]))
    canvas = row_major_window_scatter(
        full(canvas_shape, 0, shares.dtype), shares, list(shares.shape), spread_strides, first
    )
    # Input position i sits at i + padding of the canvas; its covering windows' shares lie in
    # the kernel-sized stretch that starts there (in increasing window order, as ATen adds them).
    stretches = [Window(n, w.kernel, 1, 0, 1, w.size) for n, w in zip(lengths, windows)]
    return sequential_sum(_offset_views(canvas, stretches, first=[w.padding for w in windows]))


# -- adaptive average pooling ---------------------------------------------------------------------


# Adaptive windows of at most this many elements are summed as a sequence of offset views.
SHORT_WINDOW = 4


def _adaptive_bounds(index: int, inputs: int, outputs: int) -> tuple[int, int]:
    """ATen's adaptive window of output `index`: [floor(index·in/out), ceil((index+1)·in/out))."""
    return index * inputs // outputs, -(-(index + 1) * inputs // outputs)


def _adaptive_sum(x: Value, dim: int, outputs: int) -> Value:
    """Along `dim`, the sum of each adaptive window. Outputs i and i + q (q = out/gcd) have
    windows of one length, the second shifted by p = in/gcd: each of the q residue classes is one
    strided view (no copy), summed exactly; the classes are then interleaved. With a symbolic
    size the period is not known while lowering: the windows are gathered instead."""
    inputs = x.shape[dim]
    if settled(inputs == outputs):
        return x
    if type(inputs) is not int or type(outputs) is not int:
        return _gathered_window_sum(x, dim, outputs)
    common = math.gcd(inputs, outputs)
    period, classes = inputs // common, outputs // common
    strides = row_major_strides(x.shape)
    parts = []
    for r in range(classes):
        start, stop = _adaptive_bounds(r, inputs, outputs)
        if stop - start <= SHORT_WINDOW:
            # Short windows (the backward's, of 1 or 2 elements) add their offset views: a NumPy
            # sum over a short strided axis pays its loop overhead per output element.
            shape = [*x.shape[:dim], common, *x.shape[dim + 1 :]]
            view_strides = [*strides[:dim], period * strides[dim], *strides[dim + 1 :]]
            offsets = [k * strides[dim] for k in range(start, stop)]  # strides may be symbolic
            parts.append(
                sequential_sum(
                    row_major_window(x, shape, view_strides, offset) for offset in offsets
                )
            )
            continue
        shape = [*x.shape[:dim], common, stop - start, *x.shape[dim + 1 :]]
        view_strides = [*strides[:dim], period * strides[dim], strides[dim], *strides[dim + 1 :]]
        parts.append(
            prims.sum(row_major_window(x, shape, view_strides, start * strides[dim]), [dim + 1])
        )
    if classes == 1:
        return parts[0]
    stacked_shape = [*x.shape[:dim], common, 1, *x.shape[dim + 1 :]]
    kept = [d for d in range(x.ndim + 1) if d != dim + 1]
    stacked = prims.cat([prims.broadcast_in_dim(p, stacked_shape, kept) for p in parts], dim + 1)
    return prims.collapse_view(stacked, dim, dim + 1)


def _adaptive_lengths(inputs: int, outputs: int) -> Value:
    """int64[outputs]: the length of each adaptive window, from iota as ATen's index formulas."""
    index = iota(outputs)
    start = prims.div(prims.mul(index, inputs), outputs)
    stop = prims.div(prims.add(prims.mul(index, inputs), inputs + outputs - 1), outputs)
    return prims.sub(stop, start)


def _divide_by_lengths(x: Value, sizes: Sequence[tuple[int, int]]) -> Value:
    """x divided by the adaptive window lengths of each of its last len(sizes) dims in turn (ATen
    divides the window sum by each dim's length separately)."""
    rank = len(sizes)
    for d, (inputs, outputs) in enumerate(sizes):
        lengths = convert(_adaptive_lengths(inputs, outputs), x.dtype)
        dim = x.ndim - rank + d
        x = prims.div(x, prims.broadcast_in_dim(lengths, list(x.shape), [dim]))
    return x


def _adaptive_avg_pool(op: str, x: Value, output_size: Sequence[int], rank: int) -> Value:
    check_dtype(op, x, FLOATS)
    _check_rank(op, x, rank)
    outputs = list(output_size)
    if len(outputs) != rank or any(o < 0 for o in outputs):
        raise ShapeError(f"{op}: output_size must be {rank} non-negative ints, got {outputs}")
    shape = [*x.shape[:-rank], *outputs]
    if settled(math.prod(shape) == 0):  # a batch that may be 0: the general path
        return full(shape, 0, x.dtype)
    total = convert(x, opmath_dtype(x.dtype))
    for d, o in enumerate(outputs):
        total = _adaptive_sum(total, x.ndim - rank + d, o)
    mean = _divide_by_lengths(total, list(zip(x.shape[-rank:], outputs)))
    return convert(mean, x.dtype)


@register("aten.adaptive_avg_pool1d.default")
def adaptive_avg_pool1d(self: Value, output_size: Sequence[int]) -> Value:
    return _adaptive_avg_pool("aten.adaptive_avg_pool1d", self, output_size, 1)


@register("aten._adaptive_avg_pool2d.default")
def _adaptive_avg_pool2d(self: Value, output_size: Sequence[int]) -> Value:
    return _adaptive_avg_pool("aten._adaptive_avg_pool2d", self, output_size, 2)


@register("aten._adaptive_avg_pool3d.default")
def _adaptive_avg_pool3d(self: Value, output_size: Sequence[int]) -> Value:
    return _adaptive_avg_pool("aten._adaptive_avg_pool3d", self, output_size, 3)


@register("aten._adaptive_avg_pool2d_backward.default")
def _adaptive_avg_pool2d_backward(grad_output: Value, self: Value) -> Value:
    """grad / window lengths, summed back over the windows covering each input position. Input i
    is covered by outputs [floor(i·out/in), ceil((i+1)·out/in)): the adaptive windows with the
    roles of input and output swapped, so the same residue-class sums apply."""
    op = "aten._adaptive_avg_pool2d_backward"
    check_dtype(op, self, FLOATS, "self")
    _check_rank(op, self, 2)
    if grad_output.dtype is not self.dtype:
        raise DTypeError(
            f"{op}: grad_output has dtype {grad_output.dtype.short}, self {self.dtype.short}"
        )
    if (
        grad_output.ndim != self.ndim
        or grad_output.shape[:-2] != self.shape[:-2]
        or 0 in grad_output.shape[1:]
    ):
        raise ShapeError(
            f"{op}: grad_output of shape {list(grad_output.shape)} does not match self of shape {list(self.shape)}"
        )
    if self.numel == 0:
        return full(self.shape, 0, self.dtype)
    sizes = list(zip(self.shape[-2:], grad_output.shape[-2:]))
    grad = _divide_by_lengths(convert(grad_output, opmath_dtype(self.dtype)), sizes)
    # The width first: each pass grows the gradient, and the last one interleaves its residue
    # classes along the rows (runs of a whole row) rather than the columns (single elements).
    for d, (inputs, _) in reversed(list(enumerate(sizes))):
        grad = _adaptive_sum(grad, self.ndim - 2 + d, inputs)
    return convert(grad, self.dtype)


# -- adaptive max pooling (not Core ATen: torch.export keeps it, aten2prims.schema.EXTRA_ATEN_SCHEMAS) --


def _longest_window(inputs: int, outputs: int) -> int:
    """The longest adaptive window's length; with a symbolic size, a bound on it for every size
    (ceil((i+1)·in/out) - floor(i·in/out) <= ceil(in/out) + 1)."""
    if type(inputs) is int and type(outputs) is int:
        return max(
            _adaptive_bounds(i, inputs, outputs)[1] - _adaptive_bounds(i, inputs, outputs)[0]
            for i in range(outputs)
        )
    return -(-inputs // outputs) + 1


def _adaptive_sources(inputs: int, outputs: int) -> tuple[Value, Value, int]:
    """(int64[outputs, K], bool[outputs, K], K): the input positions of each adaptive window
    and which of them lie in it, K the longest window's length (or a bound on it); a shorter
    window repeats its last position (harmless to a maximum, and its first maximum and last NaN
    keep their positions)."""
    longest = _longest_window(inputs, outputs)
    index = iota(outputs)
    start = prims.div(prims.mul(index, inputs), outputs)
    last = prims.sub(
        prims.div(prims.add(prims.mul(index, inputs), inputs + outputs - 1), outputs), 1
    )
    shape = [outputs, longest]
    stepped = prims.add(
        prims.broadcast_in_dim(start, shape, [0]), prims.broadcast_in_dim(iota(longest), shape, [1])
    )
    last = prims.broadcast_in_dim(last, shape, [0])
    return prims.minimum(stepped, last), prims.le(stepped, last), longest


def _gathered_window_sum(x: Value, dim: int, outputs: int) -> Value:
    """Along `dim`, the sum of each adaptive window, gathered as [..., outputs, K, ...] (K the
    longest window, positions past a window's end read as zero) and summed over K."""
    table, inside, longest = _adaptive_sources(x.shape[dim], outputs)
    shape = [*x.shape[:dim], outputs, longest, *x.shape[dim + 1 :]]
    indices = [index_ramp(shape, d) for d in range(dim)]
    indices.append(prims.broadcast_in_dim(table, shape, [dim, dim + 1]))
    indices += [index_ramp(shape, d + 1) for d in range(dim + 1, x.ndim)]
    windows = prims.gather_nd(x, indices)
    kept = prims.where(prims.broadcast_in_dim(inside, shape, [dim, dim + 1]), windows, 0)
    return prims.sum(kept, [dim + 1])


def _adaptive_max_pool(
    op: str, x: Value, output_size: Sequence[int], rank: int
) -> tuple[Value, Value]:
    """ATen's CPU kernel: per output, the scan over its window in row-major order taking a value
    greater than the running maximum (from -inf) or NaN; so the first maximum's index, the last
    NaN's, and the window's first position when every value is -inf. Computed on all windows at
    once: one gather [*lead, O1, K1, O2, K2, ...] (each dim's positions a small table), `amax`
    over the K dims, and the flat input positions of the slots reduced to the first maximum
    (`amin` where equal) and the last NaN (`amax` where NaN): the positions increase along the
    scan, duplicates included."""
    check_dtype(op, x, FLOATS)
    _check_rank(op, x, rank)
    outputs = list(output_size)
    if len(outputs) != rank or any(o < 0 for o in outputs):
        raise ShapeError(f"{op}: output_size must be {rank} non-negative ints, got {outputs}")
    lead = x.ndim - rank
    spatial = list(x.shape[lead:])
    shape = [*x.shape[:lead], *outputs]
    if settled(math.prod(shape) == 0):  # a batch that may be 0: the general path
        return full(shape, 0, x.dtype), full(shape, 0, DType.int64)
    tables = [(table, longest) for table, _, longest in map(_adaptive_sources, spatial, outputs)]
    blocks = [size for o, (_, longest) in zip(outputs, tables) for size in (o, longest)]
    window_shape = [*x.shape[:lead], *blocks]
    indices = [index_ramp(window_shape, d) for d in range(lead)]
    indices += [
        prims.broadcast_in_dim(table, window_shape, [lead + 2 * d, lead + 2 * d + 1])
        for d, (table, _) in enumerate(tables)
    ]
    windows = prims.gather_nd(x, indices)
    slots = [lead + 2 * d + 1 for d in range(rank)]
    kept = [d for d in range(len(window_shape)) if d not in slots]
    values = prims.amax(windows, slots)
    plane = row_major_strides(spatial)
    flat = sequential_sum(
        prims.broadcast_in_dim(
            prims.mul(table, stride) if stride != 1 else table, blocks, [2 * d, 2 * d + 1]
        )
        for d, ((table, _), stride) in enumerate(zip(tables, plane))
    )
    flat = prims.broadcast_in_dim(flat, window_shape, list(range(lead, len(window_shape))))
    is_max = prims.eq(windows, prims.broadcast_in_dim(values, window_shape, kept))
    first_max = prims.amin(prims.where(is_max, flat, math.prod(spatial)), slots)
    last_nan = prims.amax(prims.where(prims.ne(windows, windows), flat, -1), slots)
    return values, prims.where(prims.ne(values, values), last_nan, first_max)


@register("aten.adaptive_max_pool2d.default")
def adaptive_max_pool2d(self: Value, output_size: Sequence[int]) -> tuple[Value, Value]:
    return _adaptive_max_pool("aten.adaptive_max_pool2d", self, output_size, 2)


@register("aten.adaptive_max_pool3d.default")
def adaptive_max_pool3d(self: Value, output_size: Sequence[int]) -> tuple[Value, Value]:
    return _adaptive_max_pool("aten.adaptive_max_pool3d", self, output_size, 3)


# -- fractional max pooling (not Core ATen: torch.export keeps it) ----------------------------------


def _fractional_max_pool(
    op: str,
    x: Value,
    kernel_size: Sequence[int],
    output_size: Sequence[int],
    random_samples: Value,
    rank: int,
) -> tuple[Value, Value]:
    """ATen's CPU kernel, all windows at once. Per plane and dim d, window i starts at
    `int((i + u)·α) − int(u·α)` with α = (in − k)/(out − 1) computed in the input's dtype
    (u the plane's sample for that dim), the last at in − k. The kernel's offsets are scanned in
    row-major order from (−inf, the window's first position): an element is taken when it is
    greater than the running max or NaN; the index is flat in the input plane."""
    check_dtype(op, x, FLOATS)
    if x.ndim not in (rank + 1, rank + 2):
        raise ShapeError(
            f"{op}: expected a {rank + 1}-D or {rank + 2}-D input, got {list(x.shape)}"
        )
    kernel = per_spatial_dim(op, "kernel_size", kernel_size, rank)
    out = per_spatial_dim(op, "output_size", output_size, rank)
    batched = x.ndim == rank + 2
    x4 = x if batched else prims.reshape(x, [1, *x.shape])
    batch, channels, spatial = x4.shape[0], x4.shape[1], list(x4.shape[2:])
    if random_samples.dtype is not x.dtype or random_samples.ndim != 3:
        raise ShapeError(f"{op}: expected random_samples of {x.dtype.short} and 3 dims")
    if random_samples.shape[0] < batch or random_samples.shape[1:] != (channels, rank):
        raise ShapeError(
            f"{op}: random_samples of shape {list(random_samples.shape)} do not fit "
            f"{batch} samples of {channels} channels and {rank} dims"
        )
    for d in range(rank):
        if spatial[d] == 0 or out[d] + kernel[d] - 1 > spatial[d]:
            raise ShapeError(
                f"{op}: kernel {kernel[d]} and output {out[d]} do not fit input size {spatial[d]}"
            )
    shape = [batch, channels, *out]
    starts = []
    for d in range(rank):
        # ATen's 2-d kernel reads a plane's samples width first, its 3-d kernel time first.
        j = rank - 1 - d if rank == 2 else d
        sample = prims.squeeze(
            slice_in_dim(slice_in_dim(random_samples, 0, batch, 1, 0), j, j + 1, 1, 2), [2]
        )
        starts.append(
            prims.broadcast_in_dim(
                _fractional_starts(sample, spatial[d], out[d], kernel[d]), shape, [0, 1, 2 + d]
            )
        )
    planes = [index_ramp(shape, 0), index_ramp(shape, 1)]
    strides = [math.prod(spatial[d + 1 :]) for d in range(rank)]

    def flat(positions: Sequence[Value]) -> Value:
        return sequential_sum(prims.mul(p, stride) for p, stride in zip(positions, strides))

    best = full(shape, -math.inf, x.dtype)
    where_best = flat(starts)
    for offsets in itertools.product(*(range(k) for k in kernel)):
        positions = [prims.add(s, o) if o else s for s, o in zip(starts, offsets)]
        value = prims.gather_nd(x4, [*planes, *positions])
        take = prims.bitwise_or(prims.gt(value, best), prims.ne(value, value))
        best = prims.where(take, value, best)
        where_best = prims.where(take, flat(positions), where_best)
    if not batched:
        best, where_best = prims.reshape(best, shape[1:]), prims.reshape(where_best, shape[1:])
    return best, where_best


def _fractional_starts(sample: Value, size: int, out: int, kernel: int) -> Value:
    """int64[N, C, out]: each window's start along one dim, from the planes' samples [N, C]."""
    batch, channels = sample.shape
    shape = [batch, channels, out]
    last = full(shape, size - kernel, DType.int64)
    if out == 1:
        return last
    dtype = sample.dtype
    alpha = prims.div(full([], size - kernel, dtype), full([], out - 1, dtype))
    u = prims.broadcast_in_dim(sample, shape, [0, 1])
    steps = prims.mul(prims.add(convert(index_ramp(shape, 2), dtype), u), alpha)
    first = convert(prims.mul(u, alpha), DType.int64)
    starts = prims.sub(convert(steps, DType.int64), first)
    return prims.where(prims.eq(index_ramp(shape, 2), out - 1), last, starts)


@register("aten.fractional_max_pool2d.default")
def fractional_max_pool2d(
    self: Value, kernel_size: Sequence[int], output_size: Sequence[int], random_samples: Value
) -> tuple[Value, Value]:
    return _fractional_max_pool(
        "aten.fractional_max_pool2d", self, kernel_size, output_size, random_samples, 2
    )


@register("aten.fractional_max_pool3d.default")
def fractional_max_pool3d(
    self: Value, kernel_size: Sequence[int], output_size: Sequence[int], random_samples: Value
) -> tuple[Value, Value]:
    return _fractional_max_pool(
        "aten.fractional_max_pool3d", self, kernel_size, output_size, random_samples, 3
    )
