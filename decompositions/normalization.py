"""Family N: batch/layer/group normalization (forward and backward), embedding bags, distances and FFTs.

Normalizations compute in the input's opmath dtype (float16/bfloat16 in float32) and round the
output once. torch's CPU kernels take parameters (weight, bias, running stats) of the input's
dtype, or float32 parameters with a float16/bfloat16 input ("mixed"); the saved statistics have
the parameters' dtype. Moments are two-pass: mean = Σx/n, then Σ(x − mean)²; the input gradients
use torch's CPU form dx = rstd·dy' + b·x + c (dy' = dy·weight).

Backward ops: our IR has no undefined tensors, so a node declares all three results. Each is
computed whatever `output_mask` says (dead-code elimination drops the ones nobody reads); a grad
requested for a parameter that is None is refused, as torch refuses it.

Embedding bags and the embedding gradient read and write rows with the `gather_nd`/`scatter_nd`
extension prims; `_pdist_forward` lists its pairs with `nonzero` of the static upper-triangle mask.
FFTs are the unnormalized `fft_*` prims times the scale of ATen's fft_norm_mode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import Value
from aten2prims.promotion import broadcast_shapes, broadcast_to, convert, opmath_dtype

from .common import canonical_dim, full, index_ramp, iota, keep_dims, slice_in_dim
from .linear import einsum
from .registry import aten, register

FLOATING = (DType.float16, DType.bfloat16, DType.float32, DType.float64)
INDEX_DTYPES = (DType.int32, DType.int64)

# -- shared pieces -----------------------------------------------------------------------------------


def _spread(reduced: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
    """A reduction over `dims` broadcast back to `shape`."""
    kept = [d for d in range(len(shape)) if d not in dims]
    return prims.broadcast_in_dim(reduced, list(shape), kept)


def _along(vector: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
    """A parameter laid along `dims` of `shape` (a per-channel or per-feature tensor)."""
    return prims.broadcast_in_dim(vector, list(shape), list(dims))


def _require_floating(op: str, name: str, x: Value) -> None:
    if x.dtype not in FLOATING:
        raise DTypeError(
            f"{op}: expected {name} of a floating dtype (f16, bf16, f32, f64), got {x.dtype.short}"
        )


def _statistics_dtype(op: str, input: Value, **params: Value | None) -> DType:
    """The dtype of the saved statistics: the input's, or float32 when float32 parameters
    accompany a float16/bfloat16 input (torch's CPU "mixed dtype" kernels)."""
    _require_floating(op, "input", input)
    given = {name: p.dtype for name, p in params.items() if p is not None}
    if all(d is input.dtype for d in given.values()):
        return input.dtype
    if input.dtype.is_low_precision and all(d is DType.float32 for d in given.values()):
        return DType.float32
    listing = ", ".join(f"{name} {d.short}" for name, d in given.items())
    raise DTypeError(
        f"{op}: expected parameters of the input's dtype {input.dtype.short} (or all float32 for a "
        f"float16/bfloat16 input), got {listing}"
    )


def _moments(x: Value, dims: Sequence[int]) -> tuple[Value, Value, Value, int]:
    """(mean, x − mean, Σ(x − mean)², count) over `dims`. An empty reduction has mean 0 (torch's
    kernels never divide by its zero count), so its variance 0/0 is NaN."""
    count = math.prod(x.shape[d] for d in dims)
    reduced = [n for d, n in enumerate(x.shape) if d not in dims]
    if count == 0:
        mean = full(reduced, 0.0, x.dtype)
    else:
        mean = prims.div(prims.sum(x, list(dims)), float(count))
    deviation = prims.sub(x, _spread(mean, x.shape, dims))
    return mean, deviation, prims.sum(prims.mul(deviation, deviation), list(dims)), count


def _rstd(squares: Value, count: int, eps: float) -> Value:
    """1/sqrt(biased variance + eps)."""
    return prims.rsqrt(prims.add(prims.div(squares, float(count)), float(eps)))


def _affine(y: Value, weight: Value | None, bias: Value | None, dims: Sequence[int]) -> Value:
    """y·weight + bias, the parameters laid along `dims` of y and converted to y's dtype."""
    if weight is not None:
        y = prims.mul(y, _along(convert(weight, y.dtype), y.shape, dims))
    if bias is not None:
        y = prims.add(y, _along(convert(bias, y.dtype), y.shape, dims))
    return y


def _require_params(
    op: str, output_mask: Sequence[bool], needs: dict[int, tuple[str, Value | None]]
) -> None:
    """Refuse a requested result whose parameter is None (`needs`: result position -> the
    parameter shaping it), as torch refuses it: there is nothing to shape the gradient by."""
    if len(output_mask) != 3:
        raise ShapeError(f"{op}: output_mask must hold 3 bools, got {list(output_mask)}")
    for position, (name, param) in needs.items():
        if output_mask[position] and param is None:
            raise ShapeError(
                f"{op}: output_mask requests result {position}, which needs {name}, but {name} is None"
            )


def _input_grad(
    dy: Value,
    x: Value,
    mean: Value,
    rstd: Value,
    ds: Value,
    db: Value,
    count: int,
    dims: Sequence[int],
) -> Value:
    """The input gradient of a normalization over `dims` of `count` elements each, in torch's CPU
    form: rstd·dy + b·x + c with b = (db·mean − ds)·rstd³/count and c = −b·mean − db·rstd/count.
    dy is already multiplied by the weight; ds = Σ dy·x and db = Σ dy over dims."""
    if count == 0:
        return full(x.shape, 0.0, x.dtype)  # x itself is empty
    scale = 1.0 / count
    cubed = prims.mul(prims.mul(rstd, rstd), rstd)
    b = prims.mul(prims.mul(prims.sub(prims.mul(db, mean), ds), cubed), scale)
    c = prims.sub(prims.mul(prims.neg(b), mean), prims.mul(prims.mul(db, rstd), scale))
    shape = x.shape
    result = prims.mul(dy, _spread(rstd, shape, dims))
    result = prims.add(result, prims.mul(_spread(b, shape, dims), x))
    return prims.add(result, _spread(c, shape, dims))


# -- batch norm -------------------------------------------------------------------------------------------


def _batch_norm(
    op: str,
    input: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value | None,
    running_var: Value | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[Value, Value, Value, Value | None, Value | None]:
    """(output, save_mean, save_invstd, new running_mean, new running_var) as torch's CPU kernel.

    Training normalizes by the batch statistics (biased variance) and moves the running stats
    towards them: momentum·batch + (1 − momentum)·running, with the unbiased variance Σ/(n − 1).
    Evaluation normalizes by the running stats, saves empty statistics and keeps the running
    stats. The channel dim is 1; statistics reduce every other dim."""
    if input.ndim < 2:
        raise ShapeError(
            f"{op}: expected an input with at least 2 dims (N, C, ...), got shape {list(input.shape)}"
        )
    channels = input.shape[1]
    params = {
        "weight": weight,
        "bias": bias,
        "running_mean": running_mean,
        "running_var": running_var,
    }
    for name, param in params.items():
        if param is not None and param.shape != (channels,):
            raise ShapeError(
                f"{op}: expected {name} of shape [{channels}], got {list(param.shape)}"
            )
    statistics = _statistics_dtype(op, input, **params)
    compute = opmath_dtype(input.dtype)
    x = convert(input, compute)
    dims = [0, *range(2, input.ndim)]
    if training:
        if input.numel == 0:
            raise ShapeError(
                f"{op}: expected an input with at least one element in training, got shape {list(input.shape)}"
            )
        mean, _, squares, count = _moments(x, dims)
        invstd = _rstd(squares, count, eps)
        new_mean = new_var = None
        update = opmath_dtype(statistics)
        if running_mean is not None:
            new_mean = convert(
                _momentum_step(mean, convert(running_mean, update), momentum), statistics
            )
        if running_var is not None:
            unbiased = prims.div(
                squares, float(count - 1)
            )  # 0/0 = NaN for a single value, as torch
            new_var = convert(
                _momentum_step(unbiased, convert(running_var, update), momentum), statistics
            )
        save_mean, save_invstd = convert(mean, statistics), convert(invstd, statistics)
        # The kernel normalizes by the statistics as saved (rounded to float16/bfloat16 when
        # the parameters are).
        mean, invstd = convert(save_mean, compute), convert(save_invstd, compute)
    else:
        if running_mean is None or running_var is None:
            raise ShapeError(
                f"{op}: running_mean and running_var are required when training is False"
            )
        mean = convert(running_mean, compute)
        invstd = prims.rsqrt(prims.add(convert(running_var, compute), float(eps)))
        save_mean = save_invstd = full([0], 0.0, statistics)
        new_mean, new_var = running_mean, running_var
    # torch's CPU kernel folds the normalization into one linear map per channel,
    # x·alpha + beta with alpha = invstd·weight and beta = bias − mean·alpha: the input is
    # passed over once (and with stored parameters alpha and beta fold into constants).
    alpha = invstd if weight is None else prims.mul(invstd, convert(weight, compute))
    shift = prims.mul(mean, alpha)
    beta = prims.neg(shift) if bias is None else prims.sub(convert(bias, compute), shift)
    output = prims.add(prims.mul(x, _along(alpha, x.shape, [1])), _along(beta, x.shape, [1]))
    return convert(output, input.dtype), save_mean, save_invstd, new_mean, new_var


def _momentum_step(batch: Value, running: Value, momentum: float) -> Value:
    return prims.add(
        prims.mul(convert(batch, running.dtype), float(momentum)),
        prims.mul(running, 1.0 - momentum),
    )


@register("aten.native_batch_norm.default")
def native_batch_norm(
    input: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value | None,
    running_var: Value | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[Value, Value, Value]:
    # torch writes the new running stats into its inputs; a functional graph cannot (see the
    # _functional overload, which returns them).
    results = _batch_norm(
        "aten.native_batch_norm",
        input,
        weight,
        bias,
        running_mean,
        running_var,
        training,
        momentum,
        eps,
    )
    return results[:3]


@register("aten._native_batch_norm_legit.default")
def _native_batch_norm_legit(
    input: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value,
    running_var: Value,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[Value, Value, Value]:
    op = "aten._native_batch_norm_legit"
    return _batch_norm(op, input, weight, bias, running_mean, running_var, training, momentum, eps)[
        :3
    ]


@register("aten._native_batch_norm_legit.no_stats")
def _native_batch_norm_legit_no_stats(
    input: Value,
    weight: Value | None,
    bias: Value | None,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[Value, Value, Value]:
    op = "aten._native_batch_norm_legit.no_stats"
    return _batch_norm(op, input, weight, bias, None, None, training, momentum, eps)[:3]


@register("aten._native_batch_norm_legit_no_training.default")
def _native_batch_norm_legit_no_training(
    input: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value,
    running_var: Value,
    momentum: float,
    eps: float,
) -> tuple[Value, Value, Value]:
    op = "aten._native_batch_norm_legit_no_training"
    return _batch_norm(op, input, weight, bias, running_mean, running_var, False, momentum, eps)[:3]


@register("aten._native_batch_norm_legit_functional.default")
def _native_batch_norm_legit_functional(
    input: Value,
    weight: Value | None,
    bias: Value | None,
    running_mean: Value,
    running_var: Value,
    training: bool,
    momentum: float,
    eps: float,
) -> tuple[Value, Value, Value, Value, Value]:
    op = "aten._native_batch_norm_legit_functional"
    output, mean, invstd, new_mean, new_var = _batch_norm(
        op, input, weight, bias, running_mean, running_var, training, momentum, eps
    )
    assert new_mean is not None and new_var is not None
    return output, mean, invstd, new_mean, new_var


# -- layer norm -------------------------------------------------------------------------------------------


def _normalized_dims(op: str, input: Value, normalized_shape: Sequence[int]) -> list[int]:
    """The trailing dims normalized_shape names (it must match them exactly)."""
    count = len(normalized_shape)
    if count == 0:
        raise ShapeError(f"{op}: normalized_shape must name at least one dim")
    if count > input.ndim or tuple(input.shape[input.ndim - count :]) != tuple(normalized_shape):
        raise ShapeError(
            f"{op}: normalized_shape {list(normalized_shape)} must equal the trailing dims of the input "
            f"shape {list(input.shape)}"
        )
    return list(range(input.ndim - count, input.ndim))


def _check_shape(op: str, name: str, x: Value | None, shape: Sequence[int]) -> None:
    if x is not None and tuple(x.shape) != tuple(shape):
        raise ShapeError(f"{op}: expected {name} of shape {list(shape)}, got {list(x.shape)}")


@register("aten.native_layer_norm.default")
def native_layer_norm(
    input: Value,
    normalized_shape: Sequence[int],
    weight: Value | None,
    bias: Value | None,
    eps: float,
) -> tuple[Value, Value, Value]:
    """(output, mean, rstd); mean and rstd keep the normalized dims as size 1."""
    op = "aten.native_layer_norm"
    dims = _normalized_dims(op, input, normalized_shape)
    _check_shape(op, "weight", weight, normalized_shape)
    _check_shape(op, "bias", bias, normalized_shape)
    statistics = _statistics_dtype(op, input, weight=weight, bias=bias)
    x = convert(input, opmath_dtype(input.dtype))
    mean, centered, squares, count = _moments(x, dims)
    rstd = _rstd(squares, count, eps)
    output = _affine(prims.mul(centered, _spread(rstd, x.shape, dims)), weight, bias, dims)

    def saved(statistic: Value) -> Value:
        return convert(keep_dims(statistic, dims, input.ndim), statistics)

    return convert(output, input.dtype), saved(mean), saved(rstd)


@register("aten.native_layer_norm_backward.default")
def native_layer_norm_backward(
    grad_out: Value,
    input: Value,
    normalized_shape: Sequence[int],
    mean: Value,
    rstd: Value,
    weight: Value | None,
    bias: Value | None,
    output_mask: Sequence[bool],
) -> tuple[Value, Value, Value]:
    """(grad_input, grad_weight, grad_bias); grad_weight/grad_bias take the weight's/bias's dtype
    (the input's when that parameter is None and its gradient is not requested)."""
    op = "aten.native_layer_norm_backward"
    dims = _normalized_dims(op, input, normalized_shape)
    _require_params(op, output_mask, {1: ("weight", weight), 2: ("bias", bias)})
    _check_shape(op, "grad_out", grad_out, input.shape)
    _check_shape(op, "weight", weight, normalized_shape)
    _check_shape(op, "bias", bias, normalized_shape)
    outer = [d for d in range(input.ndim) if d not in dims]
    compute = opmath_dtype(input.dtype)
    dy, x = convert(grad_out, compute), convert(input, compute)
    mean = convert(prims.reshape(mean, [input.shape[d] for d in outer]), compute)
    rstd = convert(prims.reshape(rstd, [input.shape[d] for d in outer]), compute)
    scaled = (
        dy if weight is None else prims.mul(dy, _along(convert(weight, compute), x.shape, dims))
    )
    ds = prims.sum(prims.mul(scaled, x), dims)
    db = prims.sum(scaled, dims)
    count = math.prod(input.shape[d] for d in dims)
    grad_input = _input_grad(scaled, x, mean, rstd, ds, db, count, dims)
    normalized = prims.mul(prims.sub(x, _spread(mean, x.shape, dims)), _spread(rstd, x.shape, dims))
    grad_weight = prims.sum(prims.mul(dy, normalized), outer)
    grad_bias = prims.sum(dy, outer)
    return (
        convert(grad_input, input.dtype),
        convert(grad_weight, input.dtype if weight is None else weight.dtype),
        convert(grad_bias, input.dtype if bias is None else bias.dtype),
    )


# -- group norm -------------------------------------------------------------------------------------------


def _group_layout(op: str, input: Value, N: int, C: int, HxW: int, group: int) -> list[int]:
    """The [N, group, C/group, HxW] view the group statistics reduce over its last two dims."""
    if group <= 0 or C % group != 0:
        raise ShapeError(
            f"{op}: the number of channels {C} must be divisible by the number of groups {group}"
        )
    if input.numel != N * C * HxW or input.ndim < 2 or input.shape[:2] != (N, C):
        raise ShapeError(
            f"{op}: expected an input of shape [{N}, {C}, ...] with {N * C * HxW} elements, got {list(input.shape)}"
        )
    return [N, group, C // group, HxW]


@register("aten.native_group_norm.default")
def native_group_norm(
    input: Value,
    weight: Value | None,
    bias: Value | None,
    N: int,
    C: int,
    HxW: int,
    group: int,
    eps: float,
) -> tuple[Value, Value, Value]:
    """(output, mean, rstd); mean and rstd have shape [N, group]."""
    op = "aten.native_group_norm"
    layout = _group_layout(op, input, N, C, HxW, group)
    _check_shape(op, "weight", weight, [C])
    _check_shape(op, "bias", bias, [C])
    statistics = _statistics_dtype(op, input, weight=weight, bias=bias)
    x = prims.reshape(convert(input, opmath_dtype(input.dtype)), layout)
    dims = [2, 3]
    mean, centered, squares, count = _moments(x, dims)
    rstd = _rstd(squares, count, eps)
    # (x − mean)·(rstd·weight) + bias with the factor made per (sample, channel) first: two
    # passes over the input instead of three.
    compute = x.dtype
    scale = prims.broadcast_in_dim(rstd, layout[:3], [0, 1])
    if weight is not None:
        scale = prims.mul(
            scale, _along(prims.reshape(convert(weight, compute), layout[1:3]), layout[:3], [1, 2])
        )
    output = prims.mul(centered, prims.broadcast_in_dim(scale, layout, [0, 1, 2]))
    if bias is not None:
        output = prims.add(
            output, _along(prims.reshape(convert(bias, compute), layout[1:3]), layout, [1, 2])
        )
    output = prims.reshape(output, list(input.shape))
    return convert(output, input.dtype), convert(mean, statistics), convert(rstd, statistics)


@register("aten.native_group_norm_backward.default")
def native_group_norm_backward(
    grad_out: Value,
    input: Value,
    mean: Value,
    rstd: Value,
    weight: Value | None,
    N: int,
    C: int,
    HxW: int,
    group: int,
    output_mask: Sequence[bool],
) -> tuple[Value, Value, Value]:
    """(grad_input, grad_weight, grad_bias). Per channel, ds = Σ dy·x and db = Σ dy over HxW (as
    torch's kernel); the group sums weigh them by the weight. torch shapes grad_bias by the weight
    too, so both parameter gradients need it and take its dtype."""
    op = "aten.native_group_norm_backward"
    layout = _group_layout(op, input, N, C, HxW, group)
    _require_params(op, output_mask, {1: ("weight", weight), 2: ("weight", weight)})
    _check_shape(op, "grad_out", grad_out, input.shape)
    _check_shape(op, "weight", weight, [C])
    _check_shape(op, "mean", mean, [N, group])
    _check_shape(op, "rstd", rstd, [N, group])
    compute = opmath_dtype(input.dtype)
    dy = prims.reshape(convert(grad_out, compute), layout)
    x = prims.reshape(convert(input, compute), layout)
    mean, rstd = convert(mean, compute), convert(rstd, compute)
    ds = prims.sum(prims.mul(dy, x), [3])  # [N, group, C/group]
    db = prims.sum(dy, [3])
    if weight is None:
        scaled, ds_group, db_group = dy, prims.sum(ds, [2]), prims.sum(db, [2])
    else:
        gamma = prims.reshape(convert(weight, compute), layout[1:3])
        scaled = prims.mul(dy, _along(gamma, layout, [1, 2]))
        gamma = _along(gamma, layout[:3], [1, 2])
        ds_group, db_group = (
            prims.sum(prims.mul(ds, gamma), [2]),
            prims.sum(prims.mul(db, gamma), [2]),
        )
    grad_input = _input_grad(scaled, x, mean, rstd, ds_group, db_group, layout[2] * HxW, [2, 3])
    per_channel = prims.mul(
        prims.sub(ds, prims.mul(db, _spread(mean, layout[:3], [2]))), _spread(rstd, layout[:3], [2])
    )
    grad_weight = prims.reshape(prims.sum(per_channel, [0]), [C])
    grad_bias = prims.reshape(prims.sum(db, [0]), [C])
    parameter_dtype = input.dtype if weight is None else weight.dtype
    return (
        convert(prims.reshape(grad_input, list(input.shape)), input.dtype),
        convert(grad_weight, parameter_dtype),
        convert(grad_bias, parameter_dtype),
    )


# -- embedding bags -----------------------------------------------------------------------------------------

_SUM, _MEAN, _MAX = 0, 1, 2


def _bag_of_each_index(offsets: Value, bags: int, count: int) -> Value:
    """offset2bag: the bag each of `count` indices belongs to (int64). Bag b starts at
    offsets[b] and runs to the next start; the last one runs to the end of the indices (also
    with include_last_offset, whose last offset torch's offset2bag ignores). A 1 at each later
    bag's start, summed from the left, counts the starts at or before each position."""
    if bags <= 1 or count == 0:
        return full([count], 0, DType.int64)
    starts = convert(slice_in_dim(offsets, 1, bags, 1, 0), DType.int64)
    marks = prims.scatter_nd(
        full([count + 1], 0, DType.int64), [starts], full([bags - 1], 1, DType.int64), "sum"
    )
    return slice_in_dim(aten.cumsum.default(marks, 0), 0, count, 1, 0)


@register("aten._embedding_bag.default")
def _embedding_bag(
    weight: Value,
    indices: Value,
    offsets: Value,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: Value | None = None,
    include_last_offset: bool = False,
    padding_idx: int = -1,
) -> tuple[Value, Value, Value, Value]:
    """(output, offset2bag, bag_size, max_indices) with the contents torch's CPU kernel gives
    them. Bags reduce the weight rows their indices select, skipping padding_idx (< 0: none):
    sum (times per_sample_weights), mean (empty bags 0), max (empty bags 0). The auxiliary results:

    - offset2bag: each index's bag, but empty ([0]) where torch's fast sum path skips it (a
      float32/float16/bfloat16 weight, mode sum, no padding_idx);
    - bag_size: the non-padding count of each bag for mean and max, zeros for sum;
    - max_indices: zeros[bags] for sum, bag_size for mean, for max the weight row each maximum
      came from (0 in empty bags).

    They are int32 when indices and offsets both are, else int64. scale_grad_by_freq and sparse
    only shape the gradient."""
    op = "aten._embedding_bag"
    _require_floating(op, "weight", weight)
    if weight.ndim != 2:
        raise ShapeError(f"{op}: expected a 2-D weight, got shape {list(weight.shape)}")
    for name, x in (("indices", indices), ("offsets", offsets)):
        if x.ndim != 1 or x.dtype not in INDEX_DTYPES:
            raise ShapeError(
                f"{op}: expected 1-D int32/int64 {name}, got {x.dtype.short}{list(x.shape)}"
            )
    if mode not in (_SUM, _MEAN, _MAX):
        raise ShapeError(f"{op}: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}")
    if per_sample_weights is not None:
        if mode != _SUM:
            raise ShapeError(
                f"{op}: per_sample_weights are only supported with mode 0 (sum), got mode {mode}"
            )
        if (
            per_sample_weights.shape != indices.shape
            or per_sample_weights.dtype is not weight.dtype
        ):
            raise ShapeError(
                f"{op}: expected per_sample_weights {weight.dtype.short}{list(indices.shape)}, got "
                f"{per_sample_weights.dtype.short}{list(per_sample_weights.shape)}"
            )
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    if bags < 0:
        raise ShapeError(f"{op}: include_last_offset needs at least one offset")
    aux = DType.int32 if indices.dtype is offsets.dtype is DType.int32 else DType.int64
    count, width = indices.shape[0], weight.shape[1]
    bag = _bag_of_each_index(offsets, bags, count)
    kept = prims.ne(indices, padding_idx) if padding_idx >= 0 else None
    shape = [count, width]
    columns = index_ramp(shape, 1)
    rows = prims.gather_nd(weight, [_along(indices, shape, [0]), columns])
    slots = [_along(bag, shape, [0]), columns]  # where each element of rows lands
    if mode == _MAX:
        output, max_indices = _bag_max(rows, indices, bag, kept, slots, bags)
        sizes = _bag_sizes(bag, kept, bags)
    else:
        compute = opmath_dtype(weight.dtype)
        values = convert(rows, compute)
        if per_sample_weights is not None:
            values = prims.mul(values, _along(convert(per_sample_weights, compute), shape, [0]))
        if kept is not None:
            values = prims.where(_along(kept, shape, [0]), values, 0.0)
        total = prims.scatter_nd(full([bags, width], 0.0, compute), slots, values, "sum")
        if mode == _MEAN:
            sizes = _bag_sizes(bag, kept, bags)
            divisor = prims.maximum(
                convert(sizes, compute), full([], 1.0, compute)
            )  # empty bags stay 0
            output = convert(prims.div(total, _along(divisor, total.shape, [0])), weight.dtype)
            max_indices = sizes
        else:
            output = convert(total, weight.dtype)
            sizes = max_indices = full([bags], 0, DType.int64)
    fast_sum = mode == _SUM and padding_idx < 0 and weight.dtype is not DType.float64
    offset2bag = full([0], 0, aux) if fast_sum else convert(bag, aux)
    return output, offset2bag, convert(sizes, aux), convert(max_indices, aux)


def _bag_sizes(bag: Value, kept: Value | None, bags: int) -> Value:
    """The number of non-padding indices in each bag (int64)."""
    ones = full(bag.shape, 1, DType.int64) if kept is None else convert(kept, DType.int64)
    return prims.scatter_nd(full([bags], 0, DType.int64), [bag], ones, "sum")


def _bag_max(
    rows: Value, indices: Value, bag: Value, kept: Value | None, slots: list[Value], bags: int
) -> tuple[Value, Value]:
    """The max of each bag and the weight row it came from, as torch's sequential scan: the first
    element starts the bag, a later one replaces it only when strictly greater, so a leading NaN
    wins, later NaNs are ignored and ties keep the first. Positions past the data (count) mark
    "no element"."""
    count, width = rows.shape
    shape = [bags, width]
    if count == 0:
        return full(shape, 0.0, rows.dtype), full(shape, 0, DType.int64)
    valid = full(rows.shape, True, DType.bool) if kept is None else _along(kept, rows.shape, [0])
    position = index_ramp(rows.shape, 0)
    first = prims.scatter_nd(
        full([bags], count, DType.int64), [bag], _first_candidates(kept, count), "amin"
    )
    present = prims.lt(first, count)
    leading = prims.gather_nd(
        rows, [_along(prims.where(present, first, 0), shape, [0]), index_ramp(shape, 1)]
    )
    not_nan = prims.eq(rows, rows)
    finite_best = prims.scatter_nd(
        full(shape, -math.inf, rows.dtype),
        slots,
        prims.where(prims.bitwise_and(valid, not_nan), rows, -math.inf),
        "amax",
    )
    best = prims.where(prims.ne(leading, leading), leading, finite_best)
    at_bag = prims.gather_nd(best, slots)
    hit = prims.bitwise_or(
        prims.eq(rows, at_bag), prims.bitwise_and(prims.ne(rows, rows), prims.ne(at_bag, at_bag))
    )
    where_best = prims.scatter_nd(
        full(shape, count, DType.int64),
        slots,
        prims.where(prims.bitwise_and(valid, hit), position, count),
        "amin",
    )
    has = _along(present, shape, [0])
    source = prims.gather_nd(indices, [prims.where(has, where_best, 0)])
    output = prims.where(has, best, 0.0)
    return output, prims.where(has, convert(source, DType.int64), 0)


def _first_candidates(kept: Value | None, count: int) -> Value:
    """Each index's position, or `count` (no element) where it is padding."""
    ramp = iota(count)
    return ramp if kept is None else prims.where(kept, ramp, count)


@register("aten.embedding_dense_backward.default")
def embedding_dense_backward(
    grad_output: Value, indices: Value, num_weights: int, padding_idx: int, scale_grad_by_freq: bool
) -> Value:
    """The weight gradient of embedding: each row of grad_output added into the row its index
    names (in opmath), except for padding_idx (< 0: none). scale_grad_by_freq multiplies each row
    by 1/count of its index rounded to grad_output's dtype, as torch's kernel does, so integer
    gradients keep the rows of indices that occur once and zero the others."""
    op = "aten.embedding_dense_backward"
    if indices.dtype not in INDEX_DTYPES:
        raise DTypeError(f"{op}: expected int32/int64 indices, got {indices.dtype.short}")
    if grad_output.ndim != indices.ndim + 1 or grad_output.shape[:-1] != indices.shape:
        raise ShapeError(
            f"{op}: expected grad_output of shape {[*indices.shape, '*']} for indices of shape {list(indices.shape)}, "
            f"got {list(grad_output.shape)}"
        )
    count, width = indices.numel, grad_output.shape[-1]
    compute = opmath_dtype(grad_output.dtype)
    shape = [count, width]
    grads = convert(prims.reshape(grad_output, shape), compute)
    flat = prims.reshape(indices, [count])
    if scale_grad_by_freq:
        frequency = prims.scatter_nd(
            full([num_weights], 0, DType.int64), [flat], full([count], 1, DType.int64), "sum"
        )
        reciprocal = prims.reciprocal(convert(prims.gather_nd(frequency, [flat]), DType.float64))
        scale = convert(convert(reciprocal, grad_output.dtype), compute)
        grads = prims.mul(grads, _along(scale, shape, [0]))
    if padding_idx >= 0:
        grads = prims.where(
            _along(prims.ne(flat, padding_idx), shape, [0]), grads, full([], 0, compute)
        )
    slots = [_along(flat, shape, [0]), index_ramp(shape, 1)]
    total = prims.scatter_nd(full([num_weights, width], 0, compute), slots, grads, "sum")
    return convert(total, grad_output.dtype)


# -- distances --------------------------------------------------------------------------------------------


def _p_norm(difference: Value, p: float, dim: int, *, max_skips_nan: bool = False) -> Value:
    """‖difference‖_p along dim as torch's distance kernels compute it: p = 0 sums min(ceil|d|, 1)
    (the count of nonzero entries; NaN propagates), 1, 2 and inf are the usual norms, other p are
    (Σ|d|^p)^(1/p). cdist's inf-norm keeps a running max from 0 that a NaN never replaces
    (`max_skips_nan`); pdist's propagates NaN."""
    if p == 2:
        return prims.sqrt(prims.sum(prims.mul(difference, difference), [dim]))
    magnitude = prims.abs(difference)
    if p == 0:
        return prims.sum(
            prims.minimum(prims.ceil(magnitude), full([], 1.0, magnitude.dtype)), [dim]
        )
    if p == 1:
        return prims.sum(magnitude, [dim])
    if math.isinf(p):
        if max_skips_nan:
            magnitude = prims.where(prims.eq(magnitude, magnitude), magnitude, 0.0)
        return prims.amax(magnitude, [dim])
    return prims.pow(prims.sum(prims.pow(magnitude, float(p)), [dim]), 1.0 / p)


def _check_distance_operand(op: str, name: str, x: Value) -> None:
    if x.dtype not in (DType.float32, DType.float64):
        raise DTypeError(
            f"{op}: expected {name} of dtype f32 or f64 (torch's CPU kernels), got {x.dtype.short}"
        )


def _check_p(op: str, p: float) -> None:
    if not p >= 0:
        raise ShapeError(f"{op}: expected a non-negative p, got {p}")


# Above this many rows on either side, compute_mode None/0 takes the matrix-product path for p = 2.
_MM_THRESHOLD = 25


@register("aten._cdist_forward.default")
def _cdist_forward(x1: Value, x2: Value, p: float, compute_mode: int | None) -> Value:
    """Distances between the rows of x1 [..., P, M] and x2 [..., R, M] (batch dims broadcast).
    For p = 2 torch uses ‖a‖² − 2a·b + ‖b‖² as one matrix product when compute_mode is 1, or
    None/0 with more than 25 rows on a side; so do we, with its clamp at 0 before the sqrt.
    Otherwise every difference is formed (a [..., P, R, M] intermediate)."""
    op = "aten._cdist_forward"
    for name, x in (("x1", x1), ("x2", x2)):
        _check_distance_operand(op, name, x)
        if x.ndim < 2:
            raise ShapeError(
                f"{op}: expected {name} with at least 2 dims, got shape {list(x.shape)}"
            )
    if x1.dtype is not x2.dtype or x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            f"{op}: x1 {x1.dtype.short}{list(x1.shape)} and x2 {x2.dtype.short}{list(x2.shape)} must share dtype and row size"
        )
    _check_p(op, p)
    if compute_mode not in (None, 0, 1, 2):
        raise ShapeError(f"{op}: compute_mode must be None, 0, 1 or 2, got {compute_mode}")
    batch = tuple(broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    (rows1, width), rows2 = x1.shape[-2:], x2.shape[-2]
    a, b = broadcast_to(x1, (*batch, rows1, width)), broadcast_to(x2, (*batch, rows2, width))
    shape = [*batch, rows1, rows2]
    if rows1 == 0 or rows2 == 0 or width == 0:
        return full(shape, 0.0, x1.dtype)
    if p == 2 and (
        compute_mode == 1 or (compute_mode in (None, 0) and max(rows1, rows2) > _MM_THRESHOLD)
    ):
        return _euclidean_by_product(a, b)
    k = len(batch)
    spread = [*batch, rows1, rows2, width]
    difference = prims.sub(
        prims.broadcast_in_dim(a, spread, [*range(k), k, k + 2]),
        prims.broadcast_in_dim(b, spread, [*range(k), k + 1, k + 2]),
    )
    return _p_norm(difference, p, k + 2, max_skips_nan=True)


def _euclidean_by_product(a: Value, b: Value) -> Value:
    """torch's `_euclidean_dist`: [−2a, ‖a‖², 1] · [b, 1, ‖b‖²] over the row dim, clamped at 0,
    square-rooted."""
    last = a.ndim - 1

    def squared_norm(x: Value) -> Value:
        return keep_dims(prims.sum(prims.mul(x, x), [last]), [last], x.ndim)

    a_norm, b_norm = squared_norm(a), squared_norm(b)
    left = prims.cat([prims.mul(a, -2.0), a_norm, full(a_norm.shape, 1.0, a.dtype)], last)
    right = prims.cat([b, full(b_norm.shape, 1.0, b.dtype), b_norm], last)
    batch = "".join(chr(ord("a") + i) for i in range(last - 1))
    squared = einsum(f"{batch}PK,{batch}RK->{batch}PR", left, right)
    return prims.sqrt(prims.maximum(squared, full([], 0.0, squared.dtype)))


@register("aten._pdist_forward.default")
def _pdist_forward(self: Value, p: float = 2.0) -> Value:
    """The distances between rows i < j of self [N, M], in row-major order of (i, j): the pairs
    are the coordinates of the upper-triangle mask (`nonzero` with its static count)."""
    op = "aten._pdist_forward"
    _check_distance_operand(op, "self", self)
    if self.ndim != 2:
        raise ShapeError(f"{op}: expected a 2-D input, got shape {list(self.shape)}")
    _check_p(op, p)
    rows, width = self.shape
    pairs = rows * (rows - 1) // 2
    if pairs == 0 or width == 0:
        return full([pairs], 0.0, self.dtype)
    square = [rows, rows]
    upper = prims.gt(index_ramp(square, 1), index_ramp(square, 0))
    coordinates = prims.nonzero(upper, pairs)  # [pairs, 2]: (i, j)
    shape = [pairs, width]

    def rows_at(column: int) -> Value:
        index = prims.squeeze(slice_in_dim(coordinates, column, column + 1, 1, 1), [1])
        return prims.gather_nd(self, [_along(index, shape, [0]), index_ramp(shape, 1)])

    return _p_norm(prims.sub(rows_at(0), rows_at(1)), p, 1)


# -- FFT ------------------------------------------------------------------------------------------------


def _fft_normalized(x: Value, normalization: int, signal: int, op: str) -> Value:
    """ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n (n: the signal's element count)."""
    if normalization == 0:
        return x
    if normalization == 1:
        return prims.mul(x, 1.0 / math.sqrt(signal))
    if normalization == 2:
        return prims.mul(x, 1.0 / signal)
    raise ShapeError(
        f"{op}: normalization must be 0 (none), 1 (by 1/sqrt(n)) or 2 (by 1/n), got {normalization}"
    )


@register("aten._fft_r2c.default")
def _fft_r2c(self: Value, dim: Sequence[int], normalization: int, onesided: bool) -> Value:
    op = "aten._fft_r2c"
    transformed = prims.fft_r2c(self, dim=list(dim), onesided=onesided)
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
        if self.shape[last] == last_dim_size != half:
            self = slice_in_dim(self, 0, half, 1, last)
    transformed = prims.fft_c2r(self, dim=list(dim), last_dim_size=last_dim_size)
    signal = math.prod(transformed.shape[canonical_dim(d, self.ndim)] for d in dim)
    return _fft_normalized(transformed, normalization, signal, op)
