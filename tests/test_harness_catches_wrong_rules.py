"""The harness is tested against wrong implementations: each case replaces a real rule by one
that is wrong in a known, often subtle way (a few elements off, a lost sign of zero, a random
op drawing from the wrong distribution or in the wrong order) through a custom rule table, and
`check_op` must report the overload as failing. The real rule, checked on the same samples,
passes — so each failure is the wrong rule's doing, not the samples'."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest

import prims
from aten2prims import default_rules
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import Value
from aten2prims.promotion import broadcast
from aten2prims.testing.conformance import Verdict, check_op
from decompositions.common import full, index_ramp, iota, scalar, slice_in_dim
from decompositions.fft import _fft_c2c
from decompositions.reductions import _running_extreme

# Enough samples that each wrong rule meets an input it gets wrong (hand-written samples, which
# hold the special values and the large random draws, come first).
BUDGET = 12


def _first_element(shape: tuple[int, ...]) -> Value:
    """A bool tensor of `shape`, true at index [0, 0, …] only."""
    if not shape:
        return scalar(True, DType.bool)
    mask = None
    for dim in range(len(shape)):
        at_zero = prims.eq(index_ramp(shape, dim), scalar(0, DType.int64))
        mask = at_zero if mask is None else prims.bitwise_and(mask, at_zero)
    return mask


def _altered(op: str, alter: Callable[..., Any]) -> Callable[..., Any]:
    """A rule for `op` that runs the real rule and passes its result, with the arguments, to
    `alter`; it has the real rule's signature, as the rule table requires."""
    real = default_rules().get(op)
    assert real is not None, op

    def wrong(*args: Any) -> Any:
        return alter(real.function(*args), *args)

    wrong.__signature__ = inspect.signature(real.function)  # type: ignore[attr-defined]  # why: the table reads the parameter names from it
    return wrong


def _zero_small(result: Value, *_: Any) -> Value:
    """Flushes every |v| < 0.03 to zero: right wherever results are large."""
    small = prims.lt(prims.abs(result), scalar(0.03, result.dtype))
    return prims.where(small, scalar(0.0, result.dtype), result)


def _one_more_at_first(result: Value, *_: Any) -> Value:
    return prims.add(result, prims.convert_element_type(_first_element(result.shape), result.dtype))


def _flipped_at_first(result: Value, *_: Any) -> Value:
    return prims.bitwise_xor(result, _first_element(result.shape))


def _widened(result: Value, *_: Any) -> Value:
    return prims.convert_element_type(result, DType.float64)


def _nan_at_first(result: Value, *_: Any) -> Value:
    return prims.where(_first_element(result.shape), scalar(math.nan, result.dtype), result)


def _nan_as_zero(result: Value, *_: Any) -> Value:
    return prims.where(prims.ne(result, result), scalar(0.0, result.dtype), result)


def _neg_as_subtraction(self: Value) -> Value:
    """0 - x: the negation everywhere except that -(+0.0) comes out +0.0."""
    return prims.sub(scalar(0.0, self.dtype), self)


def _arange_perm(n: int, dtype: Any, layout: Any, device: Any, pin_memory: Any) -> Value:
    return prims.convert_element_type(iota(n), DType.int64 if dtype is None else dtype)


def _quantile_grid(size: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any) -> Value:
    """The normal quantiles of an even grid of probabilities, in ascending order: a perfect
    histogram, no randomness."""
    count = math.prod(size)
    positions = prims.convert_element_type(iota(count), DType.float64)
    probabilities = prims.div(
        prims.add(positions, scalar(0.5, DType.float64)),
        scalar(float(count), DType.float64),
    )
    grid = prims.convert_element_type(prims.ndtri(probabilities), dtype or DType.float32)
    return prims.reshape(grid, list(size))


def _constant_rand(size: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any) -> Value:
    return full(size, 0.5, dtype or DType.float32)


def _dropout_first_block(input: Value, p: float, train: bool | None) -> tuple[Value, Value]:
    """Keeps the first 1 - p of the elements (in row-major order) and drops the rest: the right
    count, scaled right, but the same positions every time."""
    if train is False or input.numel == 0 or p in (0.0, 1.0):
        real = default_rules().get("aten.native_dropout.default")
        assert real is not None
        return real.function(input, p, train)
    kept = prims.lt(iota(input.numel), scalar(round(input.numel * (1 - p)), DType.int64))
    mask = prims.reshape(kept, list(input.shape))
    return _dropped(input, mask, p), mask


def _dropped(input: Value, mask: Value, p: float) -> Value:
    """torch's output given a mask: input * mask * (1 / (1 - p))."""
    masked = prims.mul(input, prims.convert_element_type(mask, input.dtype))
    return prims.mul(masked, scalar(1 / (1 - p), input.dtype))


def _dropout_wrong_p(input: Value, p: float, train: bool | None) -> tuple[Value, Value]:
    """Bernoulli draws of the wrong probability: drops with p + 0.1 (and scales for p)."""
    real = default_rules().get("aten.native_dropout.default")
    assert real is not None
    if train is False or input.numel == 0 or p in (0.0, 1.0):
        return real.function(input, p, train)
    _, mask = real.function(input, min(p + 0.1, 1.0), train)
    return _dropped(input, mask, p), mask


def _rrelu_one_slope(
    self: Value, noise: Value, lower: Any, upper: Any, training: bool, generator: Any
) -> tuple[Value, Value]:
    """Every slope `lower`: the right shape of noise and an output consistent with it, but no
    randomness."""
    real = default_rules().get("aten.rrelu_with_noise_functional.default")
    assert real is not None
    if not training or self.numel == 0:
        return real.function(self, noise, lower, upper, training, generator)
    return real.function(self, noise, lower, lower, training, generator)


def _rrelu_output_without_noise(
    self: Value, noise: Value, lower: Any, upper: Any, training: bool, generator: Any
) -> tuple[Value, Value]:
    """Random noise, but the output of evaluation mode (the mean slope), not of that noise."""
    real = default_rules().get("aten.rrelu_with_noise_functional.default")
    assert real is not None
    _, drawn = real.function(self, noise, lower, upper, training, generator)
    output, _ = real.function(self, noise, lower, upper, False, generator)
    return output, drawn


def _first_index(result: tuple[Value, Value], *_: Any) -> tuple[Value, Value]:
    """The right values with index 0: right only where the median sits first."""
    values, indices = result
    return values, full(indices.shape, 0, DType.int64)


def _first_of_ties(self: Value, dim: int) -> tuple[Value, Value]:
    """cummax replacing the running maximum only by a strictly greater element: the first index
    among equal maxima, where torch reports the last."""
    return _running_extreme("cummax", self, dim, prims.gt, -math.inf)


def _bernoulli_wrong_p(self: Value, p: float, generator: Any) -> Value:
    """Bernoulli draws of probability p + 0.1."""
    real = default_rules().get("aten.bernoulli.p")
    assert real is not None
    return real.function(self, min(p + 0.1, 1.0) if 0.0 < p < 1.0 else p, generator)


def _exponential_wrong_rate(self: Value, lambd: float, generator: Any) -> Value:
    """Exponential draws of twice the rate."""
    real = default_rules().get("aten.exponential.default")
    assert real is not None
    return real.function(self, 2 * lambd, generator)


def _doubled(result: Value, *_: Any) -> Value:
    return prims.mul(result, scalar(2.0, result.dtype))


def _randint_like_including_high(
    self: Value,
    high: int,
    dtype: Any,
    layout: Any,
    device: Any,
    pin_memory: Any,
    memory_format: Any,
) -> Value:
    """Integers of [0, high]: high itself drawn too."""
    real = default_rules().get("aten.randint_like.default")
    assert real is not None
    return real.function(self, high + 1, dtype, layout, device, pin_memory, memory_format)


def _uniform_shifted(self: Value, from_: float, to: float, generator: Any) -> Value:
    """Draws on [from, to) shifted up by a hundredth of the range."""
    real = default_rules().get("aten.uniform.default")
    assert real is not None
    shift = (to - from_) / 100
    return real.function(self, from_ + shift, to + shift, generator)


def _normal_scaled_by_variance(mean: Value, std: Value, generator: Any) -> Value:
    """N(mean, std⁴): the draws scaled by the variance instead of the deviation."""
    real = default_rules().get("aten.normal.Tensor_Tensor")
    assert real is not None
    return real.function(mean, prims.mul(std, std), generator)


def _multinomial_ignoring_weights(
    self: Value, num_samples: int, replacement: bool, generator: Any
) -> Value:
    """Every category equally likely, whatever its weight (zero weights drawn too)."""
    real = default_rules().get("aten.multinomial.default")
    assert real is not None
    return real.function(full(self.shape, 1.0, self.dtype), num_samples, replacement, generator)


def _geometric_of_half_the_p(self: Value, p: float, generator: Any) -> Value:
    """Trials up to a first success of probability p / 2."""
    real = default_rules().get("aten.geometric.default")
    assert real is not None
    return real.function(self, p / 2, generator)


def _fft_c2c_backwards(self: Value, dim: Any, normalization: int, forward: bool) -> Value:
    """A complex FFT in the other direction (the exponent's sign flipped), scaled as asked."""
    return _fft_c2c(self, dim, normalization, not forward)


def _fft_c2c_swapped_scales(self: Value, dim: Any, normalization: int, forward: bool) -> Value:
    """A complex FFT scaled by 1/n where 1/sqrt(n) is asked, and by 1/sqrt(n) for 1/n."""
    return _fft_c2c(self, dim, {0: 0, 1: 2, 2: 1}[normalization], forward)


def _view_as_complex_swapped(self: Value) -> Value:
    """The pair's first element as the imaginary part and its second as the real part."""
    last = self.ndim - 1
    first, second = (
        prims.squeeze(slice_in_dim(self, start, start + 1, 1, last), [last]) for start in (0, 1)
    )
    return prims.complex(second, first)


def _complex_by_arithmetic(real: Value, imag: Value) -> Value:
    """real + imag·1j in complex arithmetic: an infinite part makes the other one NaN."""
    real, imag = broadcast(real, imag)
    as_complex = real.dtype.to_complex
    return prims.add(
        prims.convert_element_type(real, as_complex),
        prims.mul(prims.convert_element_type(imag, as_complex), 1j),
    )


def _polar_of_swapped_functions(abs: Value, angle: Value) -> Value:
    """abs·sin(angle) + abs·cos(angle)·i: the angle measured from the imaginary axis."""
    magnitude, phase = broadcast(abs, angle)
    return prims.complex(
        prims.mul(magnitude, prims.sin(phase)), prims.mul(magnitude, prims.cos(phase))
    )


@attrs.frozen
class WrongRule:
    name: str
    op: str
    rule: Callable[..., Any]
    dtypes: tuple[DType, ...]
    # A regex searched in the failures' messages: the rule must be rejected for its own fault.
    because: str


F16 = (DType.float16,)
F32 = (DType.float32,)
WRONG_RULES = [
    *(
        WrongRule(
            f"{op} flushes small float16 results",
            op,
            _altered(op, _zero_small),
            F16,
            "outside rtol=.* farther than 4x torch's own error",
        )
        for op in (
            "aten.mm.default",
            "aten.convolution.default",
            "aten.sum.dim_IntList",
            "aten.mul.Tensor",
        )
    ),
    WrongRule(
        "add of int64 one more at one element",
        "aten.add.Tensor",
        _altered("aten.add.Tensor", _one_more_at_first),
        (DType.int64,),
        "1 of .* element.* differ",
    ),
    WrongRule(
        "eq flipped at one element",
        "aten.eq.Tensor",
        _altered("aten.eq.Tensor", _flipped_at_first),
        F32,
        "1 of .* element.* differ",
    ),
    WrongRule(
        "add in the wrong dtype",
        "aten.add.Tensor",
        _altered("aten.add.Tensor", _widened),
        F32,
        "produced f64",
    ),
    WrongRule(
        "exp NaN where torch has a number",
        "aten.exp.default",
        _altered("aten.exp.default", _nan_at_first),
        F32,
        r"float32\(nan\) vs torch np\.float32\(\d",
    ),
    WrongRule(
        "exp a number where torch has NaN",
        "aten.exp.default",
        _altered("aten.exp.default", _nan_as_zero),
        F32,
        r"float32\(0\.0\) vs torch np\.float32\(nan\)",
    ),
    WrongRule(
        "neg of +0.0 is +0.0",
        "aten.neg.default",
        _neg_as_subtraction,
        F32,
        r"float32\(0\.0\) vs torch np\.float32\(-0\.0\)",
    ),
    WrongRule(
        "randperm is arange",
        "aten.randperm.default",
        _arange_perm,
        (DType.int64,),
        "is sorted",
    ),
    WrongRule(
        "randn is a sorted fixed grid",
        "aten.randn.default",
        _quantile_grid,
        F32,
        "the draws are ordered",
    ),
    WrongRule("rand is a constant", "aten.rand.default", _constant_rand, F32, "Kolmogorov–Smirnov"),
    WrongRule(
        "native_dropout keeps a fixed block",
        "aten.native_dropout.default",
        _dropout_first_block,
        F32,
        "the kept fraction depends on the position",
    ),
    WrongRule(
        "native_dropout's bernoulli draws the wrong p",
        "aten.native_dropout.default",
        _dropout_wrong_p,
        F32,
        "binomial",
    ),
    WrongRule(
        "rrelu draws one slope",
        "aten.rrelu_with_noise_functional.default",
        _rrelu_one_slope,
        F32,
        "Kolmogorov–Smirnov",
    ),
    WrongRule(
        "rrelu's output ignores its noise",
        "aten.rrelu_with_noise_functional.default",
        _rrelu_output_without_noise,
        F32,
        "given our noise",
    ),
    WrongRule(
        "median's index is always 0",
        "aten.median.dim",
        _altered("aten.median.dim", _first_index),
        F32,
        "the index points at",
    ),
    WrongRule(
        "bernoulli draws the wrong p", "aten.bernoulli.p", _bernoulli_wrong_p, F32, "binomial"
    ),
    WrongRule(
        "exponential draws at twice the rate",
        "aten.exponential.default",
        _exponential_wrong_rate,
        F32,
        "Kolmogorov–Smirnov",
    ),
    WrongRule(
        "randn_like draws with deviation 2",
        "aten.randn_like.default",
        _altered("aten.randn_like.default", _doubled),
        F32,
        "Kolmogorov–Smirnov",
    ),
    WrongRule(
        "randint_like draws high too",
        "aten.randint_like.default",
        _randint_like_including_high,
        F32,
        r"outside \[0, ",
    ),
    WrongRule(
        "uniform shifted by a hundredth of its range",
        "aten.uniform.default",
        _uniform_shifted,
        F32,
        "outside",
    ),
    WrongRule(
        "normal scales by the variance",
        "aten.normal.Tensor_Tensor",
        _normal_scaled_by_variance,
        F32,
        "Kolmogorov–Smirnov",
    ),
    WrongRule(
        "multinomial ignores the weights",
        "aten.multinomial.default",
        _multinomial_ignoring_weights,
        F32,
        "weight 0",
    ),
    WrongRule(
        "cauchy of twice the scale",
        "aten.cauchy.default",
        _altered("aten.cauchy.default", _doubled),
        F32,
        "Kolmogorov–Smirnov",
    ),
    WrongRule(
        "geometric of half the p",
        "aten.geometric.default",
        _geometric_of_half_the_p,
        F32,
        "frequencies do not follow",
    ),
    WrongRule(
        "_fft_c2c transforms in the other direction",
        "aten._fft_c2c.default",
        _fft_c2c_backwards,
        (DType.complex64,),
        "element.* outside rtol",
    ),
    WrongRule(
        "_fft_c2c swaps the 1/n and 1/sqrt(n) scales",
        "aten._fft_c2c.default",
        _fft_c2c_swapped_scales,
        (DType.complex64,),
        "element.* outside rtol",
    ),
    WrongRule(
        "view_as_complex swaps the real and imaginary parts",
        "aten.view_as_complex.default",
        _view_as_complex_swapped,
        F32,
        "element.* (differ|outside rtol)",
    ),
    WrongRule(
        "complex built as real + imag * 1j (NaN beside an infinite part)",
        "aten.complex.default",
        _complex_by_arithmetic,
        F32,
        "element.* (differ|outside rtol)",
    ),
    WrongRule(
        "polar with cos and sin swapped",
        "aten.polar.default",
        _polar_of_swapped_functions,
        F32,
        "element.* (differ|outside rtol)",
    ),
    WrongRule(
        "cummax reports the first of equal maxima",
        "aten.cummax.default",
        _first_of_ties,
        F32,
        "element.* differ",
    ),
]


@pytest.mark.parametrize("case", WRONG_RULES, ids=lambda case: case.name)
def test_the_harness_rejects_a_wrong_rule(case: WrongRule, opinfo_cache_dir: str) -> None:
    wrong = default_rules().with_rule(case.op, case.rule)
    report = check_op(
        case.op, dtypes=case.dtypes, budget=BUDGET, cache_dir=opinfo_cache_dir, registry=wrong
    )
    assert report.verdict is Verdict.FAILING, (
        f"{case.name}: the harness passed it on {report.totals[1]} samples"
    )
    messages = [outcome.message for _, outcome in report.failures()]
    assert any(re.search(case.because, message) for message in messages), messages
    real = check_op(case.op, dtypes=case.dtypes, budget=BUDGET, cache_dir=opinfo_cache_dir)
    assert real.totals[1] > 0 and not real.failures(), [o.message for _, o in real.failures()]
