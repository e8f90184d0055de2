"""Family E: reductions (sum, prod, mean, var, amax/amin, any, argmax/argmin, max/min.dim), scans
(cumsum, cumprod), softmax/log_softmax and the vector norm.

Every rule follows torch's CPU kernels: the input is first converted to the result dtype where
torch converts it (`sum(x, dtype=...)`), reduced in that dtype's opmath (float16/bfloat16 in
float32), and converted back — each step an explicit `convert_element_type`, emitted only where
the dtype changes. aten's `int[1]? dim` of None or [] means every dimension (except for
`any.dims`, where [] reduces nothing, as eager torch does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import assume, current_env, interval, is_symbolic, settled
from aten2prims.ir.values import TensorMeta, Value
from aten2prims.promotion import (
    ReductionKind,
    convert,
    convert_number,
    mean_dtypes,
    opmath_dtype,
    reduction_dtypes,
    result_type,
    sum_dtype,
)
from prims.misc import dtype_limits

from .common import (
    FLOATS,
    canonical_dim,
    check_dtype,
    full,
    index_ramp,
    keep_dims,
    reduction_dims,
    slice_in_dim,
    spread,
)
from .registry import register

Reducer = Callable[..., Value]  # a reduction prim: prims.sum, prims.amax, ...

# -- shared pieces ----------------------------------------------------------------------------------


def _kept(result: Value, dims: Sequence[int], x: Value, keepdim: bool) -> Value:
    return keep_dims(result, dims, x.ndim) if keepdim else result


def _reduced_shape(x: Value, dims: Sequence[int]) -> list[int]:
    return [n for d, n in enumerate(x.shape) if d not in dims]


def _require_elements(op: str, x: Value, dims: Sequence[int]) -> None:
    """max/min-like reductions have no identity: torch rejects reducing a dimension of size 0."""
    for d in dims:
        if x.shape[d] == 0:
            raise ShapeError(
                f"{op}: expected reduction dim {d} to have non-zero size (input shape {list(x.shape)})"
            )


# -- sum, prod ------------------------------------------------------------------------------------------


def _accumulate(reduce: Reducer, x: Value, dims: Sequence[int], dtype: DType | None) -> Value:
    """sum/prod: torch casts the input to the result dtype (so `sum(int8, dtype=int8)` wraps and
    `sum(f32, dtype=f16)` rounds each element first), then reduces in that dtype's opmath."""
    result = sum_dtype(x.dtype, dtype)
    operand = convert(convert(x, result), opmath_dtype(result))
    return convert(reduce(operand, list(dims)), result)


@register("aten.sum.dim_IntList")
def sum_dim_intlist(
    self: Value, dim: Sequence[int] | None, keepdim: bool = False, dtype: DType | None = None
) -> Value:
    dims = reduction_dims(dim, self.ndim)
    return _kept(_accumulate(prims.sum, self, dims, dtype), dims, self, keepdim)


@register("aten.prod.default")
def prod_default(self: Value, dtype: DType | None = None) -> Value:
    return _accumulate(prims.prod, self, reduction_dims(None, self.ndim), dtype)


@register("aten.prod.dim_int")
def prod_dim_int(self: Value, dim: int, keepdim: bool = False, dtype: DType | None = None) -> Value:
    dims = reduction_dims(dim, self.ndim)
    return _kept(_accumulate(prims.prod, self, dims, dtype), dims, self, keepdim)


# -- mean, var --------------------------------------------------------------------------------------------


def _mean(x: Value, dims: Sequence[int], dtype: DType | None) -> Value:
    """sum / count in opmath of the result dtype; the input goes straight to that dtype (torch's
    CPU mean sums float16/bfloat16 results in float32 without rounding the input first)."""
    computation, result = mean_dtypes(x.dtype, dtype)
    total = prims.sum(convert(x, computation), list(dims))
    count = math.prod(x.shape[d] for d in dims)  # 0 for an empty reduction: 0 / 0 = NaN, as torch
    return convert(prims.div(total, convert_number(count, computation)), result)


@register("aten.mean.default")
def mean_default(self: Value, dtype: DType | None = None) -> Value:
    return _mean(self, reduction_dims(None, self.ndim), dtype)


@register("aten.mean.dim")
def mean_dim(
    self: Value, dim: Sequence[int] | None, keepdim: bool = False, dtype: DType | None = None
) -> Value:
    dims = reduction_dims(dim, self.ndim)
    return _kept(_mean(self, dims, dtype), dims, self, keepdim)


@register("aten.var.correction")
def var_correction(
    self: Value,
    dim: Sequence[int] | None = None,
    correction: float | None = None,
    keepdim: bool = False,
) -> Value:
    if not (self.dtype.is_floating or self.dtype.is_complex):
        raise DTypeError(
            f"var: expected a floating-point or complex tensor, got {self.dtype.short}"
        )
    dims = reduction_dims(dim, self.ndim)
    computation, result = reduction_dtypes(self.dtype, ReductionKind.COMPLEX_TO_FLOAT)
    correction = 1.0 if correction is None else correction
    if type(correction) in (bool, int):
        correction = float(correction)
    variance = prims.var(convert(self, computation), list(dims), correction)
    return _kept(convert(variance, result), dims, self, keepdim)


@register("aten.var_mean.correction")
def var_mean_correction(
    self: Value,
    dim: Sequence[int] | None = None,
    correction: float | None = None,
    keepdim: bool = False,
) -> tuple[Value, Value]:
    """Not Core ATen (torch.export keeps it): var.correction and mean over the same dims."""
    variance = var_correction(self, dim, correction, keepdim)
    dims = reduction_dims(dim, self.ndim)
    return variance, _kept(_mean(self, dims, None), dims, self, keepdim)


@register("aten.var.dim")
def var_dim(
    self: Value, dim: Sequence[int] | None, unbiased: bool = True, keepdim: bool = False
) -> Value:
    return var_correction(self, dim, 1.0 if unbiased else 0.0, keepdim)


# -- amax, amin, any ------------------------------------------------------------------------------------


def _extreme(op: str, reduce: Reducer, x: Value, dim: Sequence[int], keepdim: bool) -> Value:
    dims = reduction_dims(dim, x.ndim)
    _require_elements(op, x, dims)
    return _kept(reduce(x, list(dims)), dims, x, keepdim)


@register("aten.amax.default")
def amax(self: Value, dim: Sequence[int] = (), keepdim: bool = False) -> Value:
    return _extreme("amax", prims.amax, self, dim, keepdim)


@register("aten.amin.default")
def amin(self: Value, dim: Sequence[int] = (), keepdim: bool = False) -> Value:
    return _extreme("amin", prims.amin, self, dim, keepdim)


def _extreme_of_maybe_empty(
    reduce: Reducer, x: Value, dims: Sequence[int], identity: bool | float
) -> Value:
    """amax/amin of x over `dims` (none of them settled empty). A reduced dim whose size may be
    0 (data-dependent) gets one `identity` element appended along it: the extreme of the rest
    is unchanged, and at size 0 the result is the identity where amax, which has none, fails."""
    for d in dims:
        if settled(x.shape[d] == 0) is None:
            slab = [1 if k == d else size for k, size in enumerate(x.shape)]
            x = prims.cat([x, full(slab, identity, x.dtype)], d)
    return reduce(x, list(dims))


def _any(x: Value, dims: Sequence[int], keepdim: bool) -> Value:
    """Whether any element over `dims` is nonzero (NaN is nonzero). Eager torch returns uint8 for
    a uint8 input and bool otherwise."""
    truth = x if x.dtype is DType.bool else prims.ne(x, convert_number(0, x.dtype))
    if not dims:
        reduced = truth
    elif any(settled(x.shape[d] == 0) for d in dims):
        reduced = full(_reduced_shape(x, dims), False, DType.bool)  # any of nothing
    else:  # the max of bools is their "or"
        reduced = _extreme_of_maybe_empty(prims.amax, truth, dims, False)
    result = _kept(reduced, dims, x, keepdim)
    return convert(result, DType.uint8) if x.dtype is DType.uint8 else result


@register("aten.any.default")
def any_default(self: Value) -> Value:
    return _any(self, reduction_dims(None, self.ndim), False)


@register("aten.any.dim")
def any_dim(self: Value, dim: int, keepdim: bool = False) -> Value:
    return _any(self, reduction_dims(dim, self.ndim), keepdim)


@register("aten.any.dims")
def any_dims(self: Value, dim: Sequence[int] | None = None, keepdim: bool = False) -> Value:
    dims = () if dim is not None and len(dim) == 0 else reduction_dims(dim, self.ndim)
    return _any(self, dims, keepdim)


# -- argmax, argmin, max.dim, min.dim -------------------------------------------------------------------


def _first_extreme(reduce: Reducer, x: Value, d: int) -> tuple[Value, Value]:
    """(the max/min along dim d, the first index holding it). NaN is the extreme wherever it
    occurs, so its first index wins; without a scan prim the index is the smallest position
    whose element equals the extreme (or is NaN)."""
    values = reduce(x, [d])
    hit = prims.eq(x, spread(values, x.shape, (d,)))
    if x.dtype.is_floating:
        hit = prims.bitwise_or(hit, prims.ne(x, x))  # x != x: NaN
    candidates = prims.where(hit, index_ramp(x.shape, d), x.shape[d])
    return values, prims.amin(candidates, [d])


def _along_dim(op: str, reduce: Reducer, x: Value, dim: int, keepdim: bool) -> tuple[Value, Value]:
    """(values, indices) of the max/min of x along `dim` (a 0-dim x is its own extreme, index 0)."""
    d = canonical_dim(dim, x.ndim)
    if x.ndim == 0:
        return _first_extreme(reduce, prims.reshape(x, [1]), 0)
    _require_elements(op, x, (d,))
    values, indices = _first_extreme(reduce, x, d)
    return _kept(values, (d,), x, keepdim), _kept(indices, (d,), x, keepdim)


def _arg_extreme(op: str, reduce: Reducer, x: Value, dim: int | None, keepdim: bool) -> Value:
    """argmax/argmin: the first index of the extreme along `dim`, or of the flattened x."""
    if x.dtype is DType.bool:
        raise DTypeError(f"{op}: does not support bool input")
    if dim is not None:
        return _along_dim(op, reduce, x, dim, keepdim)[1]
    if x.numel == 0:
        raise ShapeError(
            f"{op}: expected a non-empty tensor when dim is None (input shape {list(x.shape)})"
        )
    flat = x if x.ndim == 1 else prims.reshape(x, [x.numel])
    index = _first_extreme(reduce, flat, 0)[1]
    return keep_dims(index, range(x.ndim), x.ndim) if keepdim else index


@register("aten.argmax.default")
def argmax(self: Value, dim: int | None = None, keepdim: bool = False) -> Value:
    return _arg_extreme("argmax", prims.amax, self, dim, keepdim)


@register("aten.argmin.default")
def argmin(self: Value, dim: int | None = None, keepdim: bool = False) -> Value:
    return _arg_extreme("argmin", prims.amin, self, dim, keepdim)


@register("aten.max.dim")
def max_dim(self: Value, dim: int, keepdim: bool = False) -> tuple[Value, Value]:
    return _along_dim("max", prims.amax, self, dim, keepdim)


@register("aten.min.dim")
def min_dim(self: Value, dim: int, keepdim: bool = False) -> tuple[Value, Value]:
    return _along_dim("min", prims.amin, self, dim, keepdim)


# -- cumsum, cumprod -------------------------------------------------------------------------------------

# torch's CPU cumsum accumulates sequentially in acc_type: float32 in float64, float16/bfloat16 in
# float32, complex64 in complex128. Integers wrap the same whatever width they accumulate in.
_SCAN_ACCUMULATION = {
    DType.float16: DType.float32,
    DType.bfloat16: DType.float32,
    DType.float32: DType.float64,
    DType.complex64: DType.complex128,
}


def _inclusive_scan(x: Value, d: int, combine: Reducer = prims.add, identity: float = 0) -> Value:
    """Running sums (or products: `combine`, `identity`) along dim d (`_scan_tuples` of one
    tensor)."""
    (result,) = _scan_tuples(
        (x,), d, lambda earlier, later: (combine(later[0], earlier[0]),), (identity,)
    )
    return result


Combine = Callable[[tuple[Value, ...], tuple[Value, ...]], tuple[Value, ...]]


def _scan_tuples(
    xs: tuple[Value, ...], d: int, combine: Combine, identities: tuple[float, ...]
) -> tuple[Value, ...]:
    """An inclusive scan along dim d of an associative `combine(earlier, later)` over tuples of
    same-shaped tensors, by Hillis–Steele: after the step with shift s, each position holds the
    combination of the 2s positions ending at it; ceil(log2 n) steps, O(n log n) work and no n×n
    intermediate. The running values are kept behind n copies of the identities along d, so
    "shifted by s, identities shifted in" is one window of that padded tensor."""
    n = xs[0].shape[d]
    if is_symbolic(n):
        return _scan_symbolic(xs, d, combine, identities)
    if n <= 1:
        return xs
    pad_shape = list(xs[0].shape)
    pad_shape[d] = n
    pads = tuple(
        full(pad_shape, convert_number(identity, x.dtype), x.dtype)
        for x, identity in zip(xs, identities)
    )
    shift = 1
    while shift < n:
        earlier = tuple(
            slice_in_dim(prims.cat([pad, x], d), n - shift, 2 * n - shift, 1, d)
            for pad, x in zip(pads, xs)
        )
        xs = combine(earlier, xs)
        shift *= 2
    return xs


# The longest symbolic dimension a scan covers when the symbol's range does not bound it: 20
# steps. A longer one fails the check the lowering records (lower again, or bound the Dim).
SCAN_MAX_LENGTH = 1 << 20


def _scan_symbolic(
    xs: tuple[Value, ...], d: int, combine: Combine, identities: tuple[float, ...]
) -> tuple[Value, ...]:
    """`_scan_tuples` along a dimension of symbolic length n: as many Hillis–Steele steps as the
    longest n in its range needs (at most SCAN_MAX_LENGTH, else a recorded check n <= it), each
    reading position i - shift by a gather (identities where i < shift), so every step has the
    shape of the input whatever n is, and the steps with shift >= n change nothing."""
    n = xs[0].shape[d]
    _, longest = interval(n, current_env().symbols)
    if not isinstance(longest, int) or longest > SCAN_MAX_LENGTH:
        assume(n <= SCAN_MAX_LENGTH, f"a scan along dimension {d} of length {n}")
        longest = SCAN_MAX_LENGTH
    shape = list(xs[0].shape)
    coordinates = [index_ramp(shape, k) for k in range(len(shape))]
    position = coordinates[d]
    fills = tuple(
        full(shape, convert_number(identity, x.dtype), x.dtype)
        for x, identity in zip(xs, identities)
    )
    zeros = full(shape, 0, DType.int64)
    shift = 1
    while shift < longest:
        source = prims.sub(position, full(shape, shift, DType.int64))
        inside = prims.ge(source, zeros)
        at = [*coordinates[:d], prims.maximum(source, zeros), *coordinates[d + 1 :]]
        earlier = tuple(
            prims.where(inside, prims.gather_nd(x, at), fill) for x, fill in zip(xs, fills)
        )
        xs = combine(earlier, xs)
        shift *= 2
    return xs


def _scan(
    op: str, self: Value, dim: int, dtype: DType | None, combine: Reducer, identity: int
) -> Value:
    """cumsum/cumprod: the input converted to the result dtype (integers and bool: int64), scanned
    in a wider accumulation dtype, converted back."""
    result = sum_dtype(self.dtype, dtype)
    if result is DType.bool:
        raise DTypeError(f"{op}: bool results are not supported (torch's CPU kernel has none)")
    d = canonical_dim(dim, self.ndim)
    running = convert(convert(self, result), _SCAN_ACCUMULATION.get(result, result))
    if self.ndim > 0:
        running = _inclusive_scan(running, d, combine, identity)
    return convert(running, result)


@register("aten.cumsum.default")
def cumsum(self: Value, dim: int, dtype: DType | None = None) -> Value:
    return _scan("cumsum", self, dim, dtype, prims.add, 0)


@register("aten.cumprod.default")
def cumprod(self: Value, dim: int, dtype: DType | None = None) -> Value:
    """Not Core ATen (torch.export keeps it): cumsum's scan with products."""
    return _scan("cumprod", self, dim, dtype, prims.mul, 1)


# -- logcumsumexp, cummax, cummin (not Core ATen: torch.export keeps them) ----------------------------


def _has_nan(x: Value) -> Value:
    """x != x: NaN (either part of a complex number)."""
    if x.dtype.is_complex:
        return prims.bitwise_or(_has_nan(prims.real(x)), _has_nan(prims.imag(x)))
    return prims.ne(x, x)


def _log_add_exp(running: Value, x: Value) -> Value:
    """log(exp(running) + exp(x)) as torch's CPU scan computes it: max + log1p(exp(min - max)),
    NaN propagating; two equal infinities give themselves (-inf + -inf stays -inf)."""
    if x.dtype.is_complex:
        return _complex_log_add_exp(running, x)
    low, high = prims.minimum(x, running), prims.maximum(x, running)
    general = prims.add(prims.log1p(prims.exp(prims.sub(low, high))), high)
    return prims.where(prims.bitwise_or(prims.ne(low, high), prims.isfinite(low)), general, x)


def _complex_log_add_exp(running: Value, x: Value) -> Value:
    """The complex form: min and max by real part (x the max on equal real parts, a NaN part
    taking both), NaN when one has a NaN part, the running value when both real parts are -inf,
    log(exp(min) + exp(max)) when both are +inf, else max + log1p(exp(min - max))."""
    x_first = prims.ge(prims.real(x), prims.real(running))
    nan_x, nan_running = _has_nan(x), _has_nan(running)
    low = prims.where(nan_running, running, prims.where(nan_x, x, prims.where(x_first, running, x)))
    high = prims.where(
        nan_running, running, prims.where(nan_x, x, prims.where(x_first, x, running))
    )
    low_real, high_real = prims.real(low), prims.real(high)
    general = _by_parts(prims.add, prims.log1p(prims.exp(_by_parts(prims.sub, low, high))), high)
    both_infinite = prims.bitwise_and(
        prims.bitwise_not(prims.isfinite(low_real)), prims.eq(low_real, high_real)
    )
    infinite = prims.where(
        prims.lt(low_real, 0.0),
        low,
        prims.log(_by_parts(prims.add, prims.exp(low), prims.exp(high))),
    )
    nan = prims.mul(low, math.nan)  # NaN in both parts (a real NaN literal: to_fx prints it)
    return prims.where(_has_nan(low), nan, prims.where(both_infinite, infinite, general))


def _by_parts(combine: Reducer, a: Value, b: Value) -> Value:
    """Complex a + b or a - b part by part, as C++'s complex operators compute it (prims.add
    follows torch's add, `a + 1·b`, whose product turns the other part of an infinite one into
    NaN)."""
    real = a.dtype.real
    return prims.view_of_dtype(
        combine(prims.view_of_dtype(a, real), prims.view_of_dtype(b, real)), a.dtype
    )


@register("aten.logcumsumexp.default")
def logcumsumexp(self: Value, dim: int) -> Value:
    """The running log-sum-exp along dim from -inf, in torch's CPU accumulation dtype (float32 in
    float64, float16/bfloat16 in float32, complex64 in complex128). Real inputs scan by
    Hillis–Steele. A complex log is defined up to multiples of 2πi and each step's imaginary part
    builds on the previous one's, so complex inputs are scanned one element after the other, as
    torch does (a graph linear in the dim's size): another order gives another branch."""
    if not (self.dtype.is_floating or self.dtype.is_complex):
        raise DTypeError(
            f"logcumsumexp: expected a floating or complex tensor, got {self.dtype.short}"
        )
    d = canonical_dim(dim, self.ndim)
    x = convert(self, _SCAN_ACCUMULATION.get(self.dtype, self.dtype))
    if self.ndim == 0 or x.shape[d] == 0:
        running = x
    elif x.dtype.is_complex:
        shape = list(x.shape)
        shape[d] = 1
        total = full(shape, convert_number(-math.inf, x.dtype), x.dtype)
        steps = []
        for i in range(x.shape[d]):
            total = _log_add_exp(total, slice_in_dim(x, i, i + 1, 1, d))
            steps.append(total)
        running = prims.cat(steps, d) if len(steps) > 1 else steps[0]
    else:
        (running,) = _scan_tuples(
            (x,), d, lambda earlier, later: (_log_add_exp(earlier[0], later[0]),), (-math.inf,)
        )
    return convert(running, self.dtype)


def _running_extreme(
    op: str, x: Value, dim: int, better_or_equal: Reducer, identity: float
) -> tuple[Value, Value]:
    """cummax/cummin as torch's CPU scan: a later element replaces the running one when it is
    NaN, or when the running one is not NaN and the later one is `better_or_equal` — so ties
    and NaNs report their last index. That rule is associative over (value, index) pairs:
    the later segment's pair wins under the same test."""
    if x.dtype.is_complex:
        raise DTypeError(f"{op}: complex tensors are not supported (torch has no kernel for them)")
    d = canonical_dim(dim, x.ndim)
    if x.ndim == 0:
        return x, full([], 0, DType.int64)
    values = convert(x, DType.uint8) if x.dtype.is_bool else x

    def combine(earlier: tuple[Value, ...], later: tuple[Value, ...]) -> tuple[Value, ...]:
        take = better_or_equal(later[0], earlier[0])
        if values.dtype.is_floating:
            take = prims.bitwise_or(
                _has_nan(later[0]), prims.bitwise_and(prims.bitwise_not(_has_nan(earlier[0])), take)
            )
        return tuple(prims.where(take, b, a) for a, b in zip(earlier, later))

    scanned, indices = _scan_tuples((values, index_ramp(x.shape, d)), d, combine, (identity, 0))
    return convert(scanned, x.dtype), indices


def _lowest(dtype: DType) -> float:
    return -math.inf if dtype.is_floating else dtype_limits(dtype)[0]


def _highest(dtype: DType) -> float:
    return math.inf if dtype.is_floating else dtype_limits(dtype)[1]


@register("aten.cummax.default")
def cummax(self: Value, dim: int) -> tuple[Value, Value]:
    scan_dtype = DType.uint8 if self.dtype.is_bool else self.dtype
    return _running_extreme("cummax", self, dim, prims.ge, _lowest(scan_dtype))


@register("aten.cummin.default")
def cummin(self: Value, dim: int) -> tuple[Value, Value]:
    scan_dtype = DType.uint8 if self.dtype.is_bool else self.dtype
    return _running_extreme("cummin", self, dim, prims.le, _highest(scan_dtype))


# -- softmax, log_softmax -------------------------------------------------------------------------------


def _softmax_finish(shifted: Value, dims: Sequence[int]) -> Value:
    exponentials = prims.exp(shifted)
    return prims.div(exponentials, spread(prims.sum(exponentials, list(dims)), shifted.shape, dims))


def _log_softmax_finish(shifted: Value, dims: Sequence[int]) -> Value:
    log_total = prims.log(prims.sum(prims.exp(shifted), list(dims)))
    return prims.sub(shifted, spread(log_total, shifted.shape, dims))


def _softmax_like(
    op: str,
    finish: Callable[[Value, Sequence[int]], Value],
    x: Value,
    dim: int,
    half_to_float: bool,
) -> Value:
    """softmax-like ops over one dim, computed in opmath on x - max(x) so exp cannot overflow.
    `half_to_float` returns the float32 computation of a float16/bfloat16 input unrounded."""
    check_dtype(op, x, FLOATS)
    if half_to_float and not x.dtype.is_low_precision:
        raise DTypeError(
            f"{op}: half_to_float=True expects a float16 or bfloat16 input, got {x.dtype.short}"
        )
    computation = opmath_dtype(x.dtype)
    result = computation if half_to_float else x.dtype
    dims = reduction_dims(dim, x.ndim)
    x = convert(x, computation)
    if settled(x.numel == 0):
        return convert(x, result)
    # A size that may be 0 (data-dependent) takes this path too, right at 0: nothing is shifted.
    peak = _extreme_of_maybe_empty(prims.amax, x, dims, -math.inf)
    shifted = prims.sub(x, spread(peak, x.shape, dims))
    return convert(finish(shifted, dims), result)


@register("aten._softmax.default")
def _softmax(self: Value, dim: int, half_to_float: bool) -> Value:
    return _softmax_like("_softmax", _softmax_finish, self, dim, half_to_float)


@register("aten._log_softmax.default")
def _log_softmax(self: Value, dim: int, half_to_float: bool) -> Value:
    return _softmax_like("_log_softmax", _log_softmax_finish, self, dim, half_to_float)


# -- linalg_vector_norm (not Core ATen: torch.export keeps it, aten2prims.schema.EXTRA_ATEN_SCHEMAS) --


@register("aten.linalg_vector_norm.default")
def linalg_vector_norm(
    self: Value,
    ord: float = 2,
    dim: Sequence[int] | None = None,
    keepdim: bool = False,
    dtype: DType | None = None,
) -> Value:
    """‖x‖_ord over `dim` (None or []: every dim), as torch's CPU kernel: |x| in opmath, then
    max (inf), min (-inf), the count of nonzeros (0), the sum (1), sqrt of the sum of squares (2)
    or (Σ |x|^ord)^(1/ord); the result is real. `dtype` converts the input first (to a dtype it
    widens into, complex for complex input)."""
    op = "linalg_vector_norm"
    if not (self.dtype.is_floating or self.dtype.is_complex):
        raise DTypeError(
            f"{op}: expected a floating-point or complex tensor, got {self.dtype.short}"
        )
    if dtype is not None:
        if dtype.is_complex != self.dtype.is_complex or not (dtype.is_floating or dtype.is_complex):
            raise DTypeError(
                f"{op}: dtype {dtype.short} must be {'complex' if self.dtype.is_complex else 'real floating'} for a {self.dtype.short} input"
            )
        if result_type(_meta_of(self.dtype), _meta_of(dtype)) is not dtype:
            raise DTypeError(
                f"{op}: the input's dtype {self.dtype.short} does not widen into dtype {dtype.short}"
            )
    x = self if dtype is None else convert(self, dtype)
    dims = reduction_dims(dim, self.ndim)
    magnitude = prims.abs(x)  # real: complex64 -> float32
    result = magnitude.dtype
    a = convert(magnitude, opmath_dtype(result))
    order = float(ord)
    if math.isinf(order):
        if any(self.shape[d] == 0 for d in dims):
            raise ShapeError(
                f"{op}: cannot compute the {ord} norm over an empty dimension (no identity)"
            )
        norm = (prims.amax if order > 0 else prims.amin)(a, list(dims))
    elif order == 0:
        norm = prims.sum(convert(prims.ne(a, 0), a.dtype), list(dims))
    elif order == 1:
        norm = prims.sum(a, list(dims))
    elif order == 2:
        norm = prims.sqrt(prims.sum(prims.mul(a, a), list(dims)))
    else:
        norm = prims.pow(prims.sum(prims.pow(a, order), list(dims)), 1.0 / order)
    return _kept(convert(norm, result), dims, self, keepdim)


def _meta_of(dtype: DType) -> Value:
    """A stand-in tensor of `dtype` (one dim), to ask the promotion rules about dtypes alone."""
    return Value("dtype_probe", TensorMeta((1,), dtype))
