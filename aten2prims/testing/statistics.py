"""Checks for ops whose results torch specifies only in part, registered with
`@statistical_check(op)` and used by the runner instead of value equality:

- random ops (rand, randn, randperm, native_dropout): our random stream is NumPy's, not torch's,
  so results are judged by what the op promises — dtype, shape, range, a permutation, the
  deterministic part of dropout given our own mask — and by statistical tests at significance
  `ALPHA`: the distribution (Kolmogorov–Smirnov), independence from the position (ascents,
  position-by-value and block chi-squares, lag-1 correlation) and the keep rate of dropout's
  mask (binomial). The harness runs with a fixed seed, so a verdict is reproducible;
- sorting ops whose order of equal elements is unspecified (sort with stable=False, topk): the
  values must equal torch's exactly (for topk with sorted=False, as a multiset), and our indices
  must point at those values — each index in range, distinct along the dim, and
  self.gather(indices) == values. Ties are the only freedom this allows: where the values are
  distinct the indices are determined;
- order statistics (kthvalue, median, nanmedian, mode), whose index among equal elements torch
  leaves to quickselect or an unstable sort: values equal to torch's, each index naming an
  element equal to its value;
- the random ops that are not Core ATen: rand_like and uniform as rand (on [from, to)), randn_like
  and normal's forms standardized by their mean and std, the randint family as integers equally
  frequent over [low, high) as the dtype rounds them (chi-square; `random_` likewise),
  log_normal and cauchy by Kolmogorov–Smirnov, geometric's trials by chi-square, multinomial's
  indices by their weights (chi-square; never a zero weight while a positive one is left;
  distinct without replacement);
- rrelu_with_noise_functional (not Core ATen) in training: noise 1 where the input is not <= 0,
  uniform on [lower, upper] elsewhere, and the output computed by torch from our noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..frontends.torch_interop import to_numpy, to_torch
from ..ir.dtypes import DType
from ..schema.registry import aten_schema
from .compare import Comparison, compare
from .record import AtenCall

# Random and unstable-order ops: checked by a registered statistical check instead of value
# equality (the runner reads this table).
StatisticalCheck = Callable[[AtenCall, list[Any], list[Any]], Comparison]
STATISTICAL_CHECKS: dict[str, StatisticalCheck] = {}


def statistical_check(op: str) -> Callable[[StatisticalCheck], StatisticalCheck]:
    def decorate(check: StatisticalCheck) -> StatisticalCheck:
        STATISTICAL_CHECKS[op] = check
        return check

    return decorate


# The significance level of every statistical test: a correct implementation fails one test with
# probability 1e-6 (and, the executor's seed being fixed, the same way on every run), while the
# wrong ones tests/test_harness_catches_wrong_rules.py injects fail by many orders of magnitude.
ALPHA = 1e-6


def _arguments(call: AtenCall) -> dict[str, Any]:
    """The call's arguments by schema name, defaults filled in (tensors as NumPy arrays)."""
    import torch

    schema = aten_schema(call.op)
    assert schema is not None
    bound = schema.bind(call.args, call.kwargs, op=call.op)
    return {
        name: to_numpy(value) if isinstance(value, torch.Tensor) else value
        for name, value in zip(schema.argument_names, bound)
    }


def _ok(message: str) -> Comparison:
    return Comparison(True, "", message)


def _fail(message: str, reason: str = "value") -> Comparison:
    return Comparison(False, reason, message)


def _same_layout(ours: Any, theirs: Any, what: str) -> Comparison:
    if not isinstance(ours, np.ndarray) or ours.dtype != theirs.dtype:
        return _fail(
            f"{what}: dtype {getattr(ours, 'dtype', type(ours))} vs torch's {theirs.dtype}", "dtype"
        )
    if ours.shape != theirs.shape:
        return _fail(f"{what}: shape {list(ours.shape)} vs torch's {list(theirs.shape)}", "shape")
    return _ok(f"{what}: dtype and shape equal")


def _parts_of(array: np.ndarray) -> list[np.ndarray]:
    """The draws of each independent stream, flattened: a complex tensor's real and imaginary
    parts separately."""
    if np.iscomplexobj(array):
        return [array.real.reshape(-1), array.imag.reshape(-1)]
    return [array.reshape(-1)]


def _two_sided_z(z: float) -> float:
    from scipy import stats

    return float(2 * stats.norm.sf(abs(z)))


def _distributed_as(
    samples: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray], what: str
) -> Comparison:
    """Kolmogorov–Smirnov: could the samples be draws from the continuous `cdf`, rounded to
    their dtype? Each sample stands for the interval up to its neighbours in its dtype (so the
    coarse grids of float16 and bfloat16 are not mistaken for a wrong distribution)."""
    if samples.size == 0:
        return _ok(f"{what}: no samples")
    if not np.isfinite(samples.astype(np.float64)).all():
        return _fail(f"{what}: non-finite samples")
    order = np.sort(samples)
    below = np.nextafter(order, np.asarray(-np.inf, samples.dtype)).astype(np.float64)
    above = np.nextafter(order, np.asarray(np.inf, samples.dtype)).astype(np.float64)
    return _within_distributed_as(below, above, cdf, what)


def _within_distributed_as(
    below: np.ndarray, above: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray], what: str
) -> Comparison:
    """Kolmogorov–Smirnov for samples known to lie each in [below, above] (rounding): could
    some values in those intervals be draws from the continuous `cdf`? The distance never
    exceeds that of any such values: the empirical distribution of the upper ends is compared
    with `cdf` where it lies above it, that of the lower ends where it lies below."""
    from scipy import stats

    n = below.size
    below, above = np.sort(below), np.sort(above)
    rank = np.arange(1, n + 1, dtype=np.float64)
    statistic = float(max(np.max(rank / n - cdf(above)), np.max(cdf(below) - (rank - 1) / n), 0.0))
    p_value = float(stats.kstwo.sf(statistic, n))
    if p_value < ALPHA:
        return _fail(
            f"{what}: Kolmogorov–Smirnov distance {statistic:.4g} over {n} samples "
            f"(p = {p_value:.3g} < {ALPHA:g})"
        )
    return _ok(f"{what}: Kolmogorov–Smirnov p = {p_value:.3g}")


def _ascents_look_independent(sequence: np.ndarray, what: str) -> Comparison:
    """Of n independent draws from a continuous distribution (or a random permutation), the
    n - 1 neighbouring pairs ascend (n - 1)/2 times on average with variance (n + 1)/12: a sorted,
    reversed or otherwise ordered sequence is far off. Ties count half."""
    n = sequence.size
    if n < 3:
        return _ok(f"{what}: too short to test the order")
    wide = sequence.astype(np.float64)
    steps = np.diff(wide)
    ascents = float(np.count_nonzero(steps > 0) + 0.5 * np.count_nonzero(steps == 0))
    z = (ascents - (n - 1) / 2) / math.sqrt((n + 1) / 12)
    p_value = _two_sided_z(z)
    if p_value < ALPHA:
        return _fail(
            f"{what}: {ascents:g} of {n - 1} neighbouring pairs ascend, expected {(n - 1) / 2:g} "
            f"± {math.sqrt((n + 1) / 12):.3g} (p = {p_value:.3g}): the draws are ordered"
        )
    return _ok(f"{what}: ascents p = {p_value:.3g}")


def _all_ok(checks: list[Comparison], message: str) -> Comparison:
    return next((check for check in checks if not check), _ok(message))


# -- random ops -----------------------------------------------------------------------------------


@statistical_check("aten.rand.default")
def check_rand(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    layout = _same_layout(ours[0], theirs[0], "rand")
    if not layout:
        return layout
    checks = []
    for part in _parts_of(ours[0]):
        wide = part.astype(np.float64)
        if wide.size and not (wide.min() >= 0.0 and wide.max() < 1.0):
            return _fail(f"rand: samples span [{wide.min()}, {wide.max()}], outside [0, 1)")
        checks.append(_distributed_as(part, lambda x: np.clip(x, 0.0, 1.0), "rand"))
        checks.append(_ascents_look_independent(part, "rand"))
    return _all_ok(checks, "rand: uniform on [0, 1) (Kolmogorov–Smirnov) and unordered")


@statistical_check("aten.randn.default")
def check_randn(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    from scipy import stats

    layout = _same_layout(ours[0], theirs[0], "randn")
    if not layout:
        return layout
    # A complex standard normal has independent parts of variance 1/2.
    scale = math.sqrt(0.5) if np.iscomplexobj(ours[0]) else 1.0
    checks = []
    for part in _parts_of(ours[0]):
        checks.append(_distributed_as(part, lambda x: stats.norm.cdf(x, scale=scale), "randn"))
        checks.append(_ascents_look_independent(part, "randn"))
    return _all_ok(checks, "randn: standard normal (Kolmogorov–Smirnov) and unordered")


@statistical_check("aten.randperm.default")
def check_randperm(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    from scipy import stats

    layout = _same_layout(ours[0], theirs[0], "randperm")
    if not layout:
        return layout
    n = _arguments(call)["n"]
    values = ours[0].astype(np.int64)
    if not np.array_equal(np.sort(ours[0].astype(np.float64)), np.arange(n, dtype=np.float64)):
        return _fail(f"randperm: the result is not a permutation of 0..{n - 1}")
    if n >= 10 and (np.all(np.diff(values) > 0) or np.all(np.diff(values) < 0)):
        # A uniform permutation is sorted one way or the other with probability 2/n! < ALPHA.
        return _fail(f"randperm: the permutation of 0..{n - 1} is sorted")
    checks = [_ascents_look_independent(values, "randperm")]
    if n >= 10:
        # Position and value are independent: Spearman's correlation of a uniform permutation
        # with its positions is about normal with variance 1/(n - 1).
        rho = float(np.corrcoef(np.arange(n), values)[0, 1])
        p_value = _two_sided_z(rho * math.sqrt(n - 1))
        if p_value < ALPHA:
            checks.append(
                _fail(
                    f"randperm: values correlate with positions (rho = {rho:.3g}, p = {p_value:.3g})"
                )
            )
    blocks = min(10, math.isqrt(n // 5))
    if blocks >= 2:
        # Each value falls in each position equally often: the values of each block of positions
        # spread evenly over the blocks of values (chi-square of the blocks x blocks table).
        table = np.zeros((blocks, blocks))
        position_block = np.arange(n) * blocks // n
        value_block = values * blocks // n
        np.add.at(table, (position_block, value_block), 1)
        chi2 = stats.chi2_contingency(table, correction=False)
        if chi2.pvalue < ALPHA:
            checks.append(
                _fail(
                    f"randperm: values are not spread evenly over positions (chi-square "
                    f"{chi2.statistic:.4g} on {chi2.dof} degrees of freedom, p = {chi2.pvalue:.3g})"
                )
            )
    return _all_ok(checks, f"randperm: a permutation of 0..{n - 1}, positions uniform")


def _mask_is_bernoulli(mask: np.ndarray, keep: float, what: str) -> Comparison:
    """The mask's entries are independent draws that are true with probability `keep`: the
    count (exact binomial test), the counts of blocks of the flattened mask (chi-square: a kept
    fraction that depends on the position), and neighbouring entries (lag-1 correlation)."""
    from scipy import stats

    flat = mask.reshape(-1).astype(np.float64)
    n, kept = flat.size, int(flat.sum())
    p_value = float(stats.binomtest(kept, n, keep).pvalue)
    if p_value < ALPHA:
        return _fail(
            f"{what}: kept {kept} of {n} elements, expected {n * keep:.4g} (binomial p = {p_value:.3g})"
        )
    if keep in (0.0, 1.0) or n < 100 or kept in (0, n):
        return _ok(f"{what}: kept {kept} of {n}")
    blocks = min(20, n // 50)
    block_of = np.arange(n) * blocks // n
    kept_per_block = np.bincount(block_of, weights=flat, minlength=blocks)
    size_of_block = np.bincount(block_of, minlength=blocks)
    table = np.stack([kept_per_block, size_of_block - kept_per_block])
    chi2 = stats.chi2_contingency(table, correction=False)
    if chi2.pvalue < ALPHA:
        return _fail(
            f"{what}: the kept fraction depends on the position (chi-square of {blocks} blocks "
            f"{chi2.statistic:.4g}, p = {chi2.pvalue:.3g})"
        )
    centred = flat - keep
    lag1 = float(np.dot(centred[:-1], centred[1:]) / ((n - 1) * keep * (1 - keep)))
    p_value = _two_sided_z(lag1 * math.sqrt(n - 1))
    if p_value < ALPHA:
        return _fail(
            f"{what}: neighbouring mask entries correlate (lag-1 correlation {lag1:.3g}, p = {p_value:.3g})"
        )
    return _ok(f"{what}: kept {kept} of {n}, independently of the position")


@statistical_check("aten.native_dropout.default")
def check_native_dropout(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    for index, what in enumerate(("output", "mask")):
        layout = _same_layout(ours[index], theirs[index], f"native_dropout {what}")
        if not layout:
            return layout
    arguments = _arguments(call)
    x, p, train = arguments["input"], arguments["p"], arguments["train"]
    output, mask = ours
    if x.size == 0:
        return _ok("native_dropout: empty input")
    if train is False:  # deterministic: the input and an all-true mask
        verdict = compare(output, theirs[0], what="native_dropout output")
        return verdict if not verdict else compare(mask, theirs[1], what="native_dropout mask")
    # Given our mask, the output is determined: torch's own input.mul(mask).mul_(scale).
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    expected = to_numpy(to_torch(x).mul(to_torch(mask)).mul_(scale))
    verdict = compare(output, expected, what="native_dropout output (given our mask)")
    if not verdict:
        return verdict
    return _mask_is_bernoulli(mask, 1.0 - p, "native_dropout mask")


@statistical_check("aten.bernoulli.p")
def check_bernoulli_p(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    """Zeros and ones of self's dtype, the ones independent draws of probability p."""
    layout = _same_layout(ours[0], theirs[0], "bernoulli")
    if not layout:
        return layout
    values = ours[0].astype(np.float64)
    if not np.isin(values, (0.0, 1.0)).all():
        return _fail("bernoulli: values other than 0 and 1")
    if values.size == 0:
        return _ok("bernoulli: empty")
    return _mask_is_bernoulli(values.astype(bool), _arguments(call)["p"], "bernoulli")


@statistical_check("aten.exponential.default")
def check_exponential(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    """Exponential draws of rate lambd: non-negative, Kolmogorov–Smirnov, ascents."""
    layout = _same_layout(ours[0], theirs[0], "exponential")
    if not layout:
        return layout
    rate = float(_arguments(call)["lambd"])
    draws = ours[0].reshape(-1)
    if draws.size and draws.astype(np.float64).min() < 0:
        return _fail("exponential: negative draws")
    checks = [
        _distributed_as(draws, lambda x: -np.expm1(-rate * np.maximum(x, 0.0)), "exponential"),
        _ascents_look_independent(draws, "exponential"),
    ]
    return _all_ok(checks, "exponential: distributed as Exp(lambd) and unordered")


@statistical_check("aten.rrelu_with_noise_functional.default")
def check_rrelu_with_noise(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    """Evaluation mode is deterministic. In training, the noise is 1 where the input is not
    <= 0, and elsewhere uniform draws from [lower, upper] (Kolmogorov–Smirnov, rounded to the
    dtype; ascents); and the output is what torch computes from that noise: where(x <= 0,
    x * noise, x)."""
    for index, what in enumerate(("output", "noise")):
        layout = _same_layout(ours[index], theirs[index], f"rrelu_with_noise {what}")
        if not layout:
            return layout
    arguments = _arguments(call)
    x, training = arguments["self"], arguments["training"]
    lower, upper = float(arguments["lower"]), float(arguments["upper"])
    output, noise = ours
    if not training:
        verdict = compare(output, theirs[0], what="rrelu_with_noise output")
        return verdict if not verdict else compare(noise, theirs[1], what="rrelu_with_noise noise")
    # torch computes the expected output; the harness imports it lazily.
    import torch

    torch_x, torch_noise = to_torch(x), to_torch(noise).reshape(x.shape)
    expected = to_numpy(torch.where(torch_x <= 0, torch_x * torch_noise, torch_x))
    verdict = compare(output, expected, what="rrelu_with_noise output (given our noise)")
    if not verdict:
        return verdict
    negative = (x <= 0).reshape(-1)
    flat = noise.reshape(-1)
    if not (flat[~negative].astype(np.float64) == 1.0).all():
        return _fail("rrelu_with_noise: the noise is not 1 where the input is positive or NaN")
    slopes = flat[negative]
    wide = slopes.astype(np.float64)
    low = float(np.asarray(lower, slopes.dtype)) if slopes.size else lower
    high = float(np.asarray(upper, slopes.dtype)) if slopes.size else upper
    if wide.size and not (wide.min() >= low and wide.max() <= high):
        return _fail(
            f"rrelu_with_noise: slopes span [{wide.min()}, {wide.max()}], outside [{lower}, {upper}]"
        )
    if upper - lower <= 0:
        return _ok("rrelu_with_noise: one slope, lower = upper")
    checks = [
        _distributed_as(
            slopes, lambda v: np.clip((v - lower) / (upper - lower), 0.0, 1.0), "rrelu slopes"
        ),
        _ascents_look_independent(slopes, "rrelu slopes"),
    ]
    return _all_ok(checks, "rrelu_with_noise: slopes uniform on [lower, upper], output from them")


# -- random ops that are not Core ATen: *_like draws, randint, normal's forms, uniform -------------


def _uniform_on(ours: Any, theirs: Any, low: float, high: float, what: str) -> Comparison:
    """Draws uniform on [low, high) (each part of a complex tensor): in range, Kolmogorov–Smirnov
    (rounded to the dtype), unordered."""
    layout = _same_layout(ours, theirs, what)
    if not layout:
        return layout
    checks = []
    for part in _parts_of(ours):
        wide = part.astype(np.float64)
        if wide.size and not (wide.min() >= low and (wide.max() < high or low == high)):
            return _fail(
                f"{what}: samples span [{wide.min()}, {wide.max()}], outside [{low}, {high})"
            )
        if low == high:
            continue
        checks.append(
            _distributed_as(part, lambda x: np.clip((x - low) / (high - low), 0.0, 1.0), what)
        )
        checks.append(_ascents_look_independent(part, what))
    return _all_ok(checks, f"{what}: uniform on [{low}, {high}) (Kolmogorov–Smirnov) and unordered")


def _normal_around(ours: Any, theirs: Any, mean: Any, std: Any, what: str) -> Comparison:
    """Draws of N(mean, std²) elementwise (mean and std broadcast to the result; a complex
    result's parts each N(mean's part, std²/2)): standardized, Kolmogorov–Smirnov against the
    standard normal with each sample's rounding interval in its dtype, unordered; where std is
    0 the draw is the mean itself."""
    from scipy import stats

    layout = _same_layout(ours, theirs, what)
    if not layout:
        return layout
    if ours.size == 0:
        return _ok(f"{what}: empty")
    complex_result = np.iscomplexobj(ours)
    if complex_result and not isinstance(mean, np.ndarray):
        mean = complex(mean, mean)  # a number is the mean of each part (torch's normal_)
    means = np.broadcast_to(
        np.asarray(mean, np.complex128 if complex_result else np.float64), ours.shape
    )
    stds = np.broadcast_to(np.asarray(std, np.float64), ours.shape)
    if complex_result:
        parts = [(ours.real, means.real), (ours.imag, means.imag)]
        stds = stds / math.sqrt(2)
    else:
        parts = [(ours, means)]
    checks = []
    stds = stds.reshape(-1)
    for part, centre in parts:
        part, centre = part.reshape(-1), centre.reshape(-1)
        fixed = stds == 0
        if not np.array_equal(
            part[fixed].astype(np.float64), centre[fixed].astype(part.dtype).astype(np.float64)
        ):
            return _fail(f"{what}: a draw of standard deviation 0 differs from its mean")
        drawn, centre, scale = part[~fixed], centre[~fixed], stds[~fixed]
        if drawn.size == 0:
            continue
        if not np.isfinite(drawn.astype(np.float64)).all():
            return _fail(f"{what}: non-finite draws")
        below = np.nextafter(drawn, np.asarray(-np.inf, drawn.dtype)).astype(np.float64)
        above = np.nextafter(drawn, np.asarray(np.inf, drawn.dtype)).astype(np.float64)
        checks.append(
            _within_distributed_as(
                (below - centre) / scale, (above - centre) / scale, stats.norm.cdf, what
            )
        )
        checks.append(_ascents_look_independent((drawn.astype(np.float64) - centre) / scale, what))
    return _all_ok(checks, f"{what}: normal around the mean (Kolmogorov–Smirnov) and unordered")


@statistical_check("aten.rand_like.default")
def check_rand_like(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    return _uniform_on(ours[0], theirs[0], 0.0, 1.0, "rand_like")


@statistical_check("aten.uniform.default")
def check_uniform(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    arguments = _arguments(call)
    return _uniform_on(
        ours[0], theirs[0], float(arguments["from"]), float(arguments["to"]), "uniform"
    )


@statistical_check("aten.randn_like.default")
def check_randn_like(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    return _normal_around(ours[0], theirs[0], 0.0, 1.0, "randn_like")


@statistical_check("aten.normal.Tensor_float")
@statistical_check("aten.normal.float_Tensor")
@statistical_check("aten.normal.Tensor_Tensor")
@statistical_check("aten.normal.float_float")
@statistical_check("aten.normal_functional.default")
def check_normal(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    arguments = _arguments(call)
    return _normal_around(ours[0], theirs[0], arguments["mean"], arguments["std"], call.op)


def _rounded(integers: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Integers as the dtype holds them (a floating dtype rounds those beyond its exact run to
    the nearest of its values), back in float64."""
    return integers.astype(dtype).astype(np.float64)


def _first_rounding_to_at_least(value: float, low: int, high: int, dtype: np.dtype) -> int:
    """The least integer of [low, high] that the dtype rounds to value or more (rounding is
    monotone, so the integers that do are a run up to high)."""
    lo, hi = low, high
    while lo < hi:
        middle = (lo + hi) // 2
        if _rounded(np.array([middle], np.int64), dtype)[0] >= value:
            hi = middle
        else:
            lo = middle + 1
    return lo


def _integers_uniform(values: np.ndarray, low: int, high: int, what: str) -> Comparison:
    """Integers drawn uniformly from [low, high) and stored in values' dtype: integral, in range,
    every integer (or every bin of them) as frequent as its share (chi-square), and unordered
    where ties are rare. A floating dtype rounds the integers beyond its exact run (bfloat16's
    999 is 1000): a bin's share is then that of the integers rounding into it."""
    from scipy import stats

    n = values.size
    if n == 0:
        return _ok(f"{what}: empty")
    span = high - low
    if DType.from_numpy(values.dtype).is_floating:
        wide: np.ndarray = values.astype(np.float64).reshape(-1)
        if not (np.isfinite(wide).all() and (wide == np.floor(wide)).all()):
            return _fail(f"{what}: values that are not integers")
        first, last = _rounded(np.array([low, high - 1], np.int64), values.dtype).tolist()
        smallest, largest = float(wide.min()), float(wide.max())
        rounded_edges = True
    else:  # in Python's integers: exact far from zero too (int64 near 2^62)
        wide = values.astype(np.int64).reshape(-1)
        first, last = low, high - 1
        smallest, largest = int(wide.min()), int(wide.max())
        rounded_edges = False
    if smallest < first or largest > last:
        return _fail(
            f"{what}: values span [{smallest}, {largest}], outside [{low}, {high}) as "
            f"{values.dtype} holds it"
        )
    if span == 1 or n < 50:
        return _ok(f"{what}: {n} integers in [{low}, {high})")
    bins = min(span, n // 10, 100)
    # Bin b holds the integers low + [ceil(b·span/bins), ceil((b+1)·span/bins)); in a floating
    # dtype, the values those integers' first rounds to and on, and its share the integers
    # rounding there.
    edges = [-(-b * span // bins) for b in range(bins + 1)]  # offsets from low, exact
    if rounded_edges:
        value_edges = _rounded(np.array([low + e for e in edges[:-1]], np.int64), values.dtype)
        shares = [
            _first_rounding_to_at_least(e, low, high, values.dtype) - low for e in value_edges
        ]
        counts = np.diff(np.array([*shares, span], np.float64))
        positions = np.searchsorted(value_edges, wide, side="right") - 1
    else:
        offsets = (wide - low).astype(np.float64)
        positions = np.searchsorted(np.array(edges, np.float64), offsets, side="right") - 1
        counts = np.diff(np.array(edges, np.float64))
    observed = np.bincount(positions, minlength=bins)
    occupied = counts > 0  # bins a coarse dtype's rounding leaves empty hold no value either
    chi2 = stats.chisquare(observed[occupied], counts[occupied] / span * n)
    if chi2.pvalue < ALPHA:
        return _fail(
            f"{what}: the integers of [{low}, {high}) are not equally frequent (chi-square of "
            f"{int(occupied.sum())} bins {chi2.statistic:.4g}, p = {chi2.pvalue:.3g})"
        )
    if span >= 1000:  # ties, which count half, only make the ascents' spread narrower
        return _ascents_look_independent(wide, what)
    return _ok(f"{what}: integers uniform on [{low}, {high})")


@statistical_check("aten.randint_like.default")
@statistical_check("aten.randint_like.low_dtype")
@statistical_check("aten.randint.default")
@statistical_check("aten.randint.low")
def check_randint(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    layout = _same_layout(ours[0], theirs[0], call.op)
    if not layout:
        return layout
    arguments = _arguments(call)
    return _integers_uniform(ours[0], arguments.get("low", 0), arguments["high"], call.op)


def _largest_random(dtype: DType) -> int:
    """What `random_()` draws up to (inclusive) in dtype: its largest value, or for a floating
    dtype the end of its run of exact integers."""
    if dtype.is_floating:
        return (
            2 ** {DType.float16: 11, DType.bfloat16: 8, DType.float32: 24, DType.float64: 53}[dtype]
        )
    return int(1 if dtype.is_bool else np.iinfo(dtype.numpy).max)


@statistical_check("aten.random.to")
@statistical_check("aten.random.from")
@statistical_check("aten.random.default")
def check_random(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    """`random_`: integers equally frequent over [from, to) (to None or absent: up to the
    dtype's largest, inclusive)."""
    layout = _same_layout(ours[0], theirs[0], call.op)
    if not layout:
        return layout
    arguments = _arguments(call)
    to = arguments.get("to")
    high = _largest_random(DType.from_numpy(ours[0].dtype)) + 1 if to is None else to
    return _integers_uniform(ours[0], arguments.get("from", 0), high, call.op)


@statistical_check("aten.log_normal.default")
def check_log_normal(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    """exp of N(mean, std²): positive, Kolmogorov–Smirnov (rounded to the dtype), ascents."""
    from scipy import stats

    layout = _same_layout(ours[0], theirs[0], "log_normal")
    if not layout:
        return layout
    arguments = _arguments(call)
    mean, std = float(arguments["mean"]), float(arguments["std"])
    draws = ours[0].reshape(-1)
    if draws.size and draws.astype(np.float64).min() < 0:
        return _fail("log_normal: negative draws")

    def cdf(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return stats.norm.cdf((np.log(np.maximum(x, 0.0)) - mean) / std)

    checks = [
        _distributed_as(draws, cdf, "log_normal"),
        _ascents_look_independent(draws, "log_normal"),
    ]
    return _all_ok(checks, "log_normal: distributed as exp(N(mean, std²)) and unordered")


@statistical_check("aten.cauchy.default")
def check_cauchy(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    """Cauchy(median, sigma): Kolmogorov–Smirnov (rounded to the dtype), ascents."""
    layout = _same_layout(ours[0], theirs[0], "cauchy")
    if not layout:
        return layout
    arguments = _arguments(call)
    median, sigma = float(arguments["median"]), float(arguments["sigma"])
    draws = ours[0].reshape(-1)
    checks = [
        _distributed_as(draws, lambda x: 0.5 + np.arctan((x - median) / sigma) / np.pi, "cauchy"),
        _ascents_look_independent(draws, "cauchy"),
    ]
    return _all_ok(checks, "cauchy: distributed as Cauchy(median, sigma) and unordered")


@statistical_check("aten.geometric.default")
def check_geometric(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    """The trials up to a first success of probability p: integers from 1, each k as frequent
    as (1 − p)^(k − 1)·p (a chi-square over 1, 2, … with the tail merged)."""
    layout = _same_layout(ours[0], theirs[0], "geometric")
    if not layout:
        return layout
    p = float(_arguments(call)["p"])
    draws = ours[0].astype(np.float64).reshape(-1)
    if draws.size == 0:
        return _ok("geometric: empty")
    if not (np.isfinite(draws).all() and (draws == np.floor(draws)).all() and draws.min() >= 1):
        return _fail("geometric: draws that are not integers from 1")
    largest = int(draws.max())
    trials = np.arange(1, largest + 1)
    probabilities = (1 - p) ** (trials - 1) * p
    probabilities[-1] = (1 - p) ** (largest - 1)  # the last takes the tail: P(k >= largest)
    counts = np.bincount(draws.astype(np.int64) - 1, minlength=largest)
    return _frequencies_follow(
        np.repeat(trials - 1, counts)[None, :], probabilities[None, :], "geometric"
    )


def _frequencies_follow(draws: np.ndarray, weights: np.ndarray, what: str) -> Comparison:
    """Chi-square over the rows together: row i's draws (a row of category indices) are
    distributed as its weights. Categories are merged in order until each group expects at
    least 5 draws (the test's approximation needs it); zero weights were checked never drawn."""
    from scipy import stats

    statistic, freedom = 0.0, 0
    for row_draws, row_weights in zip(draws, weights, strict=True):
        n = row_draws.size
        probabilities = row_weights / row_weights.sum()
        observed = np.bincount(row_draws, minlength=probabilities.size).astype(np.float64)
        groups_observed: list[float] = []
        groups_expected: list[float] = []
        pending_observed = pending_expected = 0.0
        for seen, share in zip(observed, probabilities * n, strict=True):
            pending_observed += seen
            pending_expected += share
            if pending_expected >= 5:
                groups_observed.append(pending_observed)
                groups_expected.append(pending_expected)
                pending_observed = pending_expected = 0.0
        if groups_expected:  # the remainder joins the last group
            groups_observed[-1] += pending_observed
            groups_expected[-1] += pending_expected
        if len(groups_expected) < 2:
            continue
        expected = np.array(groups_expected)
        statistic += float(np.sum((np.array(groups_observed) - expected) ** 2 / expected))
        freedom += len(groups_expected) - 1
    if freedom == 0:
        return _ok(f"{what}: too few draws to test the frequencies")
    p_value = float(stats.chi2.sf(statistic, freedom))
    if p_value < ALPHA:
        return _fail(
            f"{what}: the draws' frequencies do not follow the weights (chi-square {statistic:.4g} "
            f"on {freedom} degrees of freedom, p = {p_value:.3g})"
        )
    return _ok(f"{what}: frequencies follow the weights (p = {p_value:.3g})")


@statistical_check("aten.multinomial.default")
def check_multinomial(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    """Each index names a category; a zero weight is drawn only without replacement, once every
    positive one is; without replacement a row's indices are distinct; the frequencies follow the
    weights (with replacement all draws, without it the first of each row, drawn as the
    weights say)."""
    what = "multinomial"
    layout = _same_layout(ours[0], theirs[0], what)
    if not layout:
        return layout
    arguments = _arguments(call)
    weights = np.atleast_2d(arguments["self"].astype(np.float64))
    replacement = arguments["replacement"]
    if ours[0].size == 0:
        return _ok(f"{what}: no draws")
    draws = ours[0].reshape(weights.shape[0], -1)
    categories = weights.shape[1]
    if draws.min() < 0 or draws.max() >= categories:
        return _fail(f"{what}: an index outside [0, {categories})")
    positive = weights > 0
    drawn_weights = np.take_along_axis(weights, draws, 1)
    if not replacement:
        ordered = np.sort(draws, axis=1)
        if (np.diff(ordered, axis=1) == 0).any():
            return _fail(f"{what}: a row without replacement draws an index twice")
    for row_draws, row_drawn, row_positive in zip(draws, drawn_weights, positive, strict=True):
        zero_drawn = row_drawn == 0
        if not zero_drawn.any():
            continue
        if replacement:
            return _fail(f"{what}: a category of weight 0 was drawn")
        if zero_drawn.argmax() < row_positive.sum() or not set(np.flatnonzero(row_positive)) <= set(
            row_draws
        ):
            return _fail(f"{what}: a category of weight 0 drawn while a positive one was left")
    return _frequencies_follow(draws if replacement else draws[:, :1], weights, what)


# -- sorting: the order of ties is unspecified -------------------------------------------------------


def _as_ordered(array: np.ndarray) -> np.ndarray:
    return array.astype(np.float32) if DType.from_numpy(array.dtype).is_low_precision else array


def _same_elements(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise a == b, NaN equal to NaN."""
    equal = a == b
    if DType.from_numpy(a.dtype).is_floating:
        equal |= np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return equal


def _indices_point_at_values(
    source: np.ndarray, values: np.ndarray, indices: np.ndarray, dim: int, what: str
) -> Comparison:
    """indices are in range and distinct along dim, and source.gather(dim, indices) == values."""
    if source.ndim == 0:
        if indices.size and indices.reshape(-1)[0] != 0:
            return _fail(f"{what}: index {indices} into a 0-dim tensor")
        return _ok(f"{what}: indices consistent")
    size = source.shape[dim]
    if indices.size and (indices.min() < 0 or indices.max() >= size):
        return _fail(f"{what}: an index lies outside [0, {size})")
    ordered = np.sort(indices, axis=dim)
    if indices.shape[dim] > 1 and (np.diff(ordered, axis=dim) == 0).any():
        return _fail(f"{what}: an index repeats along dimension {dim}")
    pointed = np.take_along_axis(source, indices, dim)
    wrong = ~_same_elements(pointed, values)
    if wrong.any():
        first = [int(i) for i in np.argwhere(wrong)[0]]
        return _fail(
            f"{what}: at {first} the index points at {pointed[tuple(first)]!r}, the value is {values[tuple(first)]!r}"
        )
    return _ok(f"{what}: indices point at the values (ties may be ordered differently from torch)")


@statistical_check("aten.sort.default")
def check_sort(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    verdict = compare(ours[0], theirs[0], what="sort values")
    if not verdict:
        return verdict
    layout = _same_layout(ours[1], theirs[1], "sort indices")
    if not layout:
        return layout
    arguments = _arguments(call)
    source = arguments["self"]
    dim = arguments["dim"] % max(source.ndim, 1)
    return _indices_point_at_values(source, ours[0], ours[1], dim, "sort indices")


@statistical_check("aten.topk.default")
def check_topk(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
    arguments = _arguments(call)
    source = arguments["self"]
    dim = arguments["dim"] % max(source.ndim, 1)
    our_values, their_values = ours[0], theirs[0]
    if not arguments["sorted"] and source.ndim:
        # Unsorted results: compare the selected values as multisets.
        their_values = np.take_along_axis(
            their_values, np.argsort(_as_ordered(their_values), axis=dim, kind="stable"), dim
        )
        our_values = np.take_along_axis(
            our_values, np.argsort(_as_ordered(our_values), axis=dim, kind="stable"), dim
        )
    verdict = compare(our_values, their_values, what="topk values")
    if not verdict:
        return verdict
    layout = _same_layout(ours[1], theirs[1], "topk indices")
    if not layout:
        return layout
    return _indices_point_at_values(source, ours[0], ours[1], dim, "topk indices")


# -- order statistics: which of equal elements the index names is unspecified ---------------------


def _index_points_at_value(
    source: np.ndarray, values: np.ndarray, indices: np.ndarray, dim: int, keepdim: bool, what: str
) -> Comparison:
    """One index per row along dim: in range, and source at it equals the value (NaN for NaN)."""
    if source.ndim == 0:
        if indices.reshape(-1)[0] != 0:
            return _fail(f"{what}: index {indices} into a 0-dim tensor")
        return _ok(f"{what}: index consistent")
    kept = indices if keepdim else np.expand_dims(indices, dim)
    return _indices_point_at_values(
        source, values if keepdim else np.expand_dims(values, dim), kept, dim, what
    )


def _selection_check(name: str) -> StatisticalCheck:
    def check(call: AtenCall, ours: list[Any], theirs: list[Any]) -> Comparison:
        verdict = compare(ours[0], theirs[0], what=f"{name} values")
        if not verdict:
            return verdict
        layout = _same_layout(ours[1], theirs[1], f"{name} indices")
        if not layout:
            return layout
        arguments = _arguments(call)
        source = arguments["self"]
        dim = arguments["dim"] % max(source.ndim, 1)
        return _index_points_at_value(
            source, ours[0], ours[1], dim, arguments["keepdim"], f"{name} indices"
        )

    return check


# torch picks the index among equal elements by quickselect (kthvalue, median, nanmedian) or by
# an unstable sort (mode): the values are compared, the index by the element it names.
for _op, _name in (
    ("aten.kthvalue.default", "kthvalue"),
    ("aten.median.dim", "median"),
    ("aten.nanmedian.dim", "nanmedian"),
    ("aten.mode.default", "mode"),
):
    statistical_check(_op)(_selection_check(_name))
