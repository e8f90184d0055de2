"""Family N: batch/layer/group normalization (forward and backward).

Normalizations compute in the input's opmath dtype (float16/bfloat16 in float32) and round the
output once. torch's CPU kernels take parameters (weight, bias, running stats) of the input's
dtype, or float32 parameters with a float16/bfloat16 input ("mixed"); the saved statistics have
the parameters' dtype. Moments are two-pass: mean = Σx/n, then Σ(x − mean)²; the input gradients
use torch's CPU form dx = rstd·dy' + b·x + c (dy' = dy·weight).

Backward ops compute only the results `output_mask` asks for and return None (an undefined
result, as torch's) for the others; a grad requested for a parameter that is None is refused, as
torch refuses it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import SymExpr, is_symbolic, settled, sym_max
from aten2prims.ir.values import Value
from aten2prims.promotion import convert, opmath_dtype

from .common import FLOATS, along, check_dtype, full, keep_dims, requested, spread
from .registry import register

# -- shared pieces -----------------------------------------------------------------------------------


def _statistics_dtype(op: str, input: Value, **params: Value | None) -> DType:
    """The dtype of the saved statistics: the input's, or float32 when float32 parameters
    accompany a float16/bfloat16 input (torch's CPU "mixed dtype" kernels)."""
    check_dtype(op, input, FLOATS, "input")
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
    if settled(count == 0):
        mean = full(reduced, 0.0, x.dtype)
    else:
        # a symbolic count that may be 0 divides by 1 there: the empty sum's mean 0, as torch's
        mean = prims.div(prims.sum(x, list(dims)), _divisor(sym_max(count, 1)))
    deviation = prims.sub(x, spread(mean, x.shape, dims))
    return mean, deviation, prims.sum(prims.mul(deviation, deviation), list(dims)), count


def _divisor(count: int | SymExpr) -> float | SymExpr:
    """A count of elements as the scalar divisor of a floating tensor: a float, or the symbolic
    size itself (bound to an int, the prim's kernel converts it as it converts the float)."""
    return count if is_symbolic(count) else float(count)


def _rstd(squares: Value, count: int | SymExpr, eps: float) -> Value:
    """1/sqrt(biased variance + eps)."""
    return prims.rsqrt(prims.add(prims.div(squares, _divisor(count)), float(eps)))


def _affine(y: Value, weight: Value | None, bias: Value | None, dims: Sequence[int]) -> Value:
    """y·weight + bias, the parameters laid along `dims` of y and converted to y's dtype."""
    if weight is not None:
        y = prims.mul(y, along(convert(weight, y.dtype), y.shape, dims))
    if bias is not None:
        y = prims.add(y, along(convert(bias, y.dtype), y.shape, dims))
    return y


def _require_params(
    op: str, wanted: Sequence[bool], needs: dict[int, tuple[str, Value | None]]
) -> None:
    """Refuse a requested result whose parameter is None (`needs`: result position -> the
    parameter shaping it), as torch refuses it: there is nothing to shape the gradient by."""
    for position, (name, param) in needs.items():
        if wanted[position] and param is None:
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
    result = prims.mul(dy, spread(rstd, shape, dims))
    result = prims.add(result, prims.mul(spread(b, shape, dims), x))
    return prims.add(result, spread(c, shape, dims))


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
                squares, _divisor(count - 1)
            )  # 0/0 = NaN for a single value, as torch
            new_var = convert(
                _momentum_step(unbiased, convert(running_var, update), momentum), statistics
            )
        save_mean, save_invstd = convert(mean, statistics), convert(invstd, statistics)
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
    output = prims.add(prims.mul(x, along(alpha, x.shape, [1])), along(beta, x.shape, [1]))
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


@register("aten.native_batch_norm_backward.default")
def native_batch_norm_backward(
    grad_out: Value,
    input: Value,
    weight: Value | None,
    running_mean: Value | None,
    running_var: Value | None,
    save_mean: Value | None,
    save_invstd: Value | None,
    train: bool,
    eps: float,
    output_mask: Sequence[bool],
) -> tuple[Value, Value | None, Value | None]:
    """(grad_input, grad_weight, grad_bias) of a batch norm (statistics over every dim but 1).
    grad_weight and grad_bias only where `output_mask` asks for them (None elsewhere);
    grad_input always, as torch's meta declares it (and so every exported graph does).

    With dot = Σ dy·(x − mean) and invstd·weight the scale: training normalized by the saved
    batch statistics, so dx = (dy − Σdy/n − (x − mean)·dot·invstd²/n)·invstd·weight; evaluation
    by the running ones (invstd = 1/sqrt(running_var + eps)), so dx = dy·invstd·weight.
    grad_weight = dot·invstd, grad_bias = Σ dy, in the weight's dtype (the statistics' without
    a weight)."""
    op = "aten.native_batch_norm_backward"
    _, want_weight, want_bias = requested(op, output_mask)
    if input.ndim < 2:
        raise ShapeError(
            f"{op}: expected an input with at least 2 dims (N, C, ...), got shape {list(input.shape)}"
        )
    channels = input.shape[1]
    _check_shape(op, "grad_out", grad_out, input.shape)
    for name, param in (
        ("weight", weight),
        ("running_mean", running_mean),
        ("running_var", running_var),
        ("save_mean", save_mean),
        ("save_invstd", save_invstd),
    ):
        _check_shape(op, name, param, [channels])
    compute = opmath_dtype(input.dtype)
    if train:
        if save_mean is None or save_invstd is None:
            raise ShapeError(f"{op}: training needs save_mean and save_invstd")
        statistics = save_mean
        mean, invstd = convert(save_mean, compute), convert(save_invstd, compute)
    else:
        if running_mean is None or running_var is None:
            raise ShapeError(f"{op}: evaluation needs running_mean and running_var")
        statistics = running_mean
        mean = convert(running_mean, compute)
        invstd = prims.rsqrt(prims.add(convert(running_var, compute), float(eps)))
    dy, x = convert(grad_out, compute), convert(input, compute)
    dims = [d for d in range(input.ndim) if d != 1]
    count = input.numel // channels if channels else 0
    centered = prims.sub(x, along(mean, x.shape, [1]))
    dy_sum = prims.sum(dy, dims)
    dot = prims.sum(prims.mul(dy, centered), dims)
    scale = invstd if weight is None else prims.mul(invstd, convert(weight, compute))
    unscaled = dy  # evaluation: the statistics are constants
    if train:  # training: they move with x, taking out the mean and the projection on x − mean
        norm = 1.0 / count if count else 0.0
        projection = prims.mul(prims.mul(dot, norm), prims.mul(invstd, invstd))
        unscaled = prims.sub(
            prims.sub(dy, prims.mul(centered, along(projection, x.shape, [1]))),
            along(prims.mul(dy_sum, norm), x.shape, [1]),
        )
    grad_input = convert(prims.mul(unscaled, along(scale, x.shape, [1])), input.dtype)
    # The weight's dtype; without a weight, the statistics' (float32 beside a bf16/f16 input).
    parameter_dtype = (weight if weight is not None else statistics).dtype
    grad_weight = convert(prims.mul(dot, invstd), parameter_dtype) if want_weight else None
    grad_bias = convert(dy_sum, parameter_dtype) if want_bias else None
    return grad_input, grad_weight, grad_bias


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
    output = _affine(prims.mul(centered, spread(rstd, x.shape, dims)), weight, bias, dims)
    if bias is None:
        # torch's kernel adds a zero bias: an element equal to its row's mean is +0.0 whatever
        # the weight's sign (ours would be -0.0 under a negative weight); x + 0.0 is exact.
        output = prims.add(output, 0.0)

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
) -> tuple[Value | None, Value | None, Value | None]:
    """(grad_input, grad_weight, grad_bias), each only where `output_mask` asks for it (None
    elsewhere); grad_weight/grad_bias take the weight's/bias's dtype."""
    op = "aten.native_layer_norm_backward"
    dims = _normalized_dims(op, input, normalized_shape)
    want_input, want_weight, want_bias = wanted = requested(op, output_mask)
    _require_params(op, wanted, {1: ("weight", weight), 2: ("bias", bias)})
    _check_shape(op, "grad_out", grad_out, input.shape)
    _check_shape(op, "weight", weight, normalized_shape)
    _check_shape(op, "bias", bias, normalized_shape)
    outer = [d for d in range(input.ndim) if d not in dims]
    compute = opmath_dtype(input.dtype)
    dy, x = convert(grad_out, compute), convert(input, compute)
    mean = convert(prims.reshape(mean, [input.shape[d] for d in outer]), compute)
    rstd = convert(prims.reshape(rstd, [input.shape[d] for d in outer]), compute)
    grad_input = grad_weight = grad_bias = None
    if want_input:
        scaled = (
            dy if weight is None else prims.mul(dy, along(convert(weight, compute), x.shape, dims))
        )
        ds = prims.sum(prims.mul(scaled, x), dims)
        db = prims.sum(scaled, dims)
        count = math.prod(input.shape[d] for d in dims)
        grad_input = convert(_input_grad(scaled, x, mean, rstd, ds, db, count, dims), input.dtype)
    if want_weight and weight is not None:
        normalized = prims.mul(
            prims.sub(x, spread(mean, x.shape, dims)), spread(rstd, x.shape, dims)
        )
        grad_weight = convert(prims.sum(prims.mul(dy, normalized), outer), weight.dtype)
    if want_bias and bias is not None:
        grad_bias = convert(prims.sum(dy, outer), bias.dtype)
    return grad_input, grad_weight, grad_bias


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
            scale, along(prims.reshape(convert(weight, compute), layout[1:3]), layout[:3], [1, 2])
        )
    output = prims.mul(centered, prims.broadcast_in_dim(scale, layout, [0, 1, 2]))
    if bias is not None:
        output = prims.add(
            output, along(prims.reshape(convert(bias, compute), layout[1:3]), layout, [1, 2])
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
) -> tuple[Value | None, Value | None, Value | None]:
    """(grad_input, grad_weight, grad_bias), each only where `output_mask` asks for it (None
    elsewhere). Per channel, ds = Σ dy·x and db = Σ dy over HxW (as torch's kernel); the group
    sums weigh them by the weight. torch shapes grad_bias by the weight too, so both parameter
    gradients need it and take its dtype."""
    op = "aten.native_group_norm_backward"
    layout = _group_layout(op, input, N, C, HxW, group)
    want_input, want_weight, want_bias = wanted = requested(op, output_mask)
    _require_params(op, wanted, {1: ("weight", weight), 2: ("weight", weight)})
    _check_shape(op, "grad_out", grad_out, input.shape)
    _check_shape(op, "weight", weight, [C])
    _check_shape(op, "mean", mean, [N, group])
    _check_shape(op, "rstd", rstd, [N, group])
    compute = opmath_dtype(input.dtype)
    dy = prims.reshape(convert(grad_out, compute), layout)
    x = prims.reshape(convert(input, compute), layout)
    mean, rstd = convert(mean, compute), convert(rstd, compute)
    db = prims.sum(dy, [3])  # [N, group, C/group]
    # ds is needed by grad_input and grad_weight only.
    ds = prims.sum(prims.mul(dy, x), [3]) if want_input or want_weight else None
    grad_input = grad_weight = grad_bias = None
    if want_input:
        assert ds is not None
        if weight is None:
            scaled, ds_group, db_group = dy, prims.sum(ds, [2]), prims.sum(db, [2])
        else:
            gamma = prims.reshape(convert(weight, compute), layout[1:3])
            scaled = prims.mul(dy, along(gamma, layout, [1, 2]))
            gamma = along(gamma, layout[:3], [1, 2])
            ds_group, db_group = (
                prims.sum(prims.mul(ds, gamma), [2]),
                prims.sum(prims.mul(db, gamma), [2]),
            )
        grad_input = _input_grad(scaled, x, mean, rstd, ds_group, db_group, layout[2] * HxW, [2, 3])
        grad_input = convert(prims.reshape(grad_input, list(input.shape)), input.dtype)
    if want_weight and weight is not None:
        assert ds is not None
        per_channel = prims.mul(
            prims.sub(ds, prims.mul(db, spread(mean, layout[:3], [2]))),
            spread(rstd, layout[:3], [2]),
        )
        grad_weight = convert(prims.reshape(prims.sum(per_channel, [0]), [C]), weight.dtype)
    if want_bias and weight is not None:
        grad_bias = convert(prims.reshape(prims.sum(db, [0]), [C]), weight.dtype)
    return grad_input, grad_weight, grad_bias
