"""The random ops of decompositions/indexing.py, lowered and executed: rand and randn have the
right moments (within a few standard errors), native_dropout keeps 1 - p of the elements and
scales them by 1 / (1 - p), randperm is a permutation, and the executor's seed decides the
stream. Also: the harness's checks of random and unstable-order ops reject wrong results."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
import pytest
import torch

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir.dtypes import DType
from aten2prims.passes.lower import lower
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import STATISTICAL_CHECKS, build_graph, torch_outputs

SIGMAS = 5.0
FLOATS = (DType.float16, DType.bfloat16, DType.float32, DType.float64)


def _lowered(op: str, *args: object, **kwargs: object):
    call = AtenCall(op, args, kwargs)
    graph, arrays = build_graph(call, torch_outputs(call))
    return lower(graph), arrays, call


def _run(op: str, *args: object, seed: int = 0, **kwargs: object) -> list[np.ndarray]:
    graph, arrays, _ = _lowered(op, *args, **kwargs)
    return execute(graph, arrays, seed=seed, check=True)


def _assert_moments(
    samples: np.ndarray, mean: float, variance: float, fourth_central: float
) -> None:
    samples = samples.astype(np.float64).reshape(-1)
    n = samples.size
    assert abs(samples.mean() - mean) <= SIGMAS * math.sqrt(variance / n)
    assert abs(samples.var(ddof=1) - variance) <= SIGMAS * math.sqrt(
        (fourth_central - variance**2) / n
    )


@pytest.mark.parametrize("dtype", [*FLOATS, DType.complex64], ids=str)
def test_rand_is_uniform_on_the_unit_interval(dtype: DType) -> None:
    (result,) = _run("aten.rand.default", [200, 100], dtype=getattr(torch, dtype.torch_name))
    assert result.dtype == dtype.numpy and result.shape == (200, 100)
    for part in [result.real, result.imag] if dtype.is_complex else [result]:
        wide = part.astype(np.float64)
        assert wide.min() >= 0.0 and wide.max() < 1.0
        _assert_moments(wide, 0.5, 1 / 12, 1 / 80)


@pytest.mark.parametrize("dtype", [*FLOATS, DType.complex128], ids=str)
def test_randn_is_standard_normal(dtype: DType) -> None:
    (result,) = _run("aten.randn.default", [200, 100], dtype=getattr(torch, dtype.torch_name))
    assert result.dtype == dtype.numpy and result.shape == (200, 100)
    variance = 0.5 if dtype.is_complex else 1.0  # a complex standard normal: parts of variance 1/2
    for part in [result.real, result.imag] if dtype.is_complex else [result]:
        _assert_moments(part, 0.0, variance, 3 * variance**2)


def test_rand_defaults_to_float32() -> None:
    (result,) = _run("aten.rand.default", [5])
    assert result.dtype == np.float32


@pytest.mark.parametrize(
    "dtype", [DType.int64, DType.int32, DType.uint8, DType.float16, DType.float64], ids=str
)
def test_randperm_is_a_permutation(dtype: DType) -> None:
    n = {DType.uint8: 256, DType.float16: 2049}.get(dtype, 3000)
    (result,) = _run("aten.randperm.default", n, dtype=getattr(torch, dtype.torch_name))
    assert result.dtype == dtype.numpy and result.shape == (n,)
    np.testing.assert_array_equal(np.sort(result.astype(np.int64)), np.arange(n))
    assert not np.array_equal(result.astype(np.int64), np.arange(n))


def test_randperm_defaults_to_int64_and_handles_tiny_n() -> None:
    assert _run("aten.randperm.default", 5)[0].dtype == np.int64
    assert _run("aten.randperm.default", 0)[0].shape == (0,)
    assert _run("aten.randperm.default", 1)[0].tolist() == [0]


def test_randperm_positions_are_uniform() -> None:
    # Each value lands in each position with probability 1/n: over 2000 draws of randperm(4), the
    # count of value 0 in position 0 is Binomial(2000, 1/4).
    graph, arrays, _ = _lowered("aten.randperm.default", 4)
    first = np.array([execute(graph, arrays, seed=seed)[0][0] for seed in range(2000)])
    for value in range(4):
        count = int((first == value).sum())
        assert abs(count - 500) <= SIGMAS * math.sqrt(2000 * 0.25 * 0.75)


@pytest.mark.parametrize("dtype", [*FLOATS, DType.complex64], ids=str)
@pytest.mark.parametrize("p", [0.2, 0.5, 0.9])
def test_native_dropout_keeps_one_minus_p_and_scales(dtype: DType, p: float) -> None:
    x = torch.randn(100, 100, dtype=torch.float64).to(getattr(torch, dtype.torch_name))
    output, mask = _run("aten.native_dropout.default", x, p, True)
    assert mask.dtype == np.bool_ and mask.shape == (100, 100) and output.dtype == dtype.numpy
    kept = int(mask.sum())
    assert abs(kept - 10000 * (1 - p)) <= SIGMAS * math.sqrt(10000 * p * (1 - p))
    expected = to_numpy(x.mul(torch.from_numpy(mask)).mul_(1 / (1 - p)))
    np.testing.assert_array_equal(output, expected)  # the same roundings as torch's kernel


def test_native_dropout_edge_cases() -> None:
    x = torch.tensor([1.0, -2.0, float("nan"), float("inf")])
    output, mask = _run("aten.native_dropout.default", x, 0.0, True)
    assert mask.all() and np.array_equal(output, x.numpy(), equal_nan=True)
    output, mask = _run("aten.native_dropout.default", x, 1.0, True)
    # torch computes input * mask * 0: dropped NaN and inf give NaN, everything else 0
    assert not mask.any()
    np.testing.assert_array_equal(output, np.array([0.0, -0.0, np.nan, np.nan], np.float32))
    output, mask = _run("aten.native_dropout.default", x, 0.5, False)
    assert mask.all() and np.array_equal(output, x.numpy(), equal_nan=True)
    output, mask = _run("aten.native_dropout.default", torch.ones(0, 3), 0.5, True)
    assert (
        output.shape == mask.shape == (0, 3) and mask.dtype == np.float32
    )  # torch's mask of an empty input


def test_native_dropout_train_none_means_training() -> None:
    output, mask = _run("aten.native_dropout.default", torch.ones(1000), 0.5, None)
    assert 0 < mask.sum() < 1000 and set(np.unique(output)) <= {0.0, 2.0}


@pytest.mark.parametrize(
    "op, args, kwargs",
    [
        ("aten.rand.default", ([50],), {}),
        ("aten.randn.default", ([50],), {"dtype": torch.float64}),
        ("aten.randperm.default", (50,), {}),
        ("aten.native_dropout.default", (torch.ones(50), 0.5, True), {}),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_seed_decides_the_stream(op: str, args: tuple, kwargs: dict) -> None:
    graph, arrays, _ = _lowered(op, *args, **kwargs)
    first = execute(graph, arrays, seed=11)
    again = execute(graph, arrays, seed=11)
    other = execute(graph, arrays, seed=12)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


# -- the harness's checks reject wrong results ------------------------------------------------------------------


def test_random_op_checks_reject_wrong_results() -> None:
    call = AtenCall("aten.rand.default", ([1000],), {})
    theirs = [to_numpy(t) for t in torch_outputs(call)]
    good = np.random.default_rng(0).random(1000, dtype=np.float32)
    assert STATISTICAL_CHECKS[call.op](call, [good], theirs)
    assert not STATISTICAL_CHECKS[call.op](
        call, [np.full(1000, 0.5, np.float32)], theirs
    )  # variance 0
    assert not STATISTICAL_CHECKS[call.op](call, [good + np.float32(0.1)], theirs)  # beyond [0, 1)
    assert not STATISTICAL_CHECKS[call.op](call, [good.astype(np.float64)], theirs)  # dtype

    call = AtenCall("aten.randperm.default", (10,), {})
    theirs = [to_numpy(t) for t in torch_outputs(call)]
    shuffled = np.random.default_rng(0).permutation(10)
    assert STATISTICAL_CHECKS[call.op](call, [shuffled], theirs)
    assert not STATISTICAL_CHECKS[call.op](call, [np.zeros(10, np.int64)], theirs)
    assert not STATISTICAL_CHECKS[call.op](call, [np.arange(10)[::-1].copy()], theirs)  # sorted

    x = torch.ones(1000)
    call = AtenCall("aten.native_dropout.default", (x, 0.5, True), {})
    theirs = [to_numpy(t) for t in torch_outputs(call)]
    mask = np.random.default_rng(0).random(1000) < 0.5
    assert STATISTICAL_CHECKS[call.op](
        call, [np.where(mask, 2.0, 0.0).astype(np.float32), mask], theirs
    )
    assert not STATISTICAL_CHECKS[call.op](
        call, [np.where(mask, 1.0, 0.0).astype(np.float32), mask], theirs
    )
    assert not STATISTICAL_CHECKS[call.op](
        call, [np.full(1000, 2.0, np.float32), np.ones(1000, bool)], theirs
    )


def test_the_randint_check_knows_how_a_coarse_dtype_rounds() -> None:
    """Integers of [0, 1000) in bfloat16 are rounded to its values (every 4th integer from 512):
    correctly rounded draws pass, whatever the seed; draws truncated instead of rounded, or
    spread evenly over bfloat16's values, fail."""
    call = AtenCall("aten.randint.default", (1000, [20000]), {"dtype": torch.bfloat16})
    theirs = [to_numpy(t) for t in torch_outputs(call)]
    check = STATISTICAL_CHECKS[call.op]
    for seed in range(10):
        integers = np.random.default_rng(seed).integers(0, 1000, 20000)
        verdict = check(call, [integers.astype(ml_dtypes.bfloat16)], theirs)
        assert verdict, (seed, verdict.message)
    integers = np.random.default_rng(0).integers(0, 1000, 20000)
    truncated = np.where(integers < 256, integers, integers & ~np.where(integers < 512, 1, 3))
    assert not check(call, [truncated.astype(ml_dtypes.bfloat16)], theirs)
    values = np.unique(np.arange(1000).astype(ml_dtypes.bfloat16))
    even = np.random.default_rng(0).choice(values, 20000)
    assert not check(call, [even], theirs)
    assert not check(call, [np.full(20000, 1004.0, ml_dtypes.bfloat16)], theirs)  # out of range


def test_the_randint_check_counts_in_exact_integers_near_2_to_62() -> None:
    """Far from zero, float64 cannot tell neighbouring int64 values apart: the range and the
    bins are reckoned in Python's integers, so a draw one past the end fails and correct draws
    pass."""
    low, high = 2**62 - 1000, 2**62
    call = AtenCall("aten.randint.low", (low, high, [5000]), {})
    theirs = [to_numpy(t) for t in torch_outputs(call)]
    check = STATISTICAL_CHECKS[call.op]
    draws = np.random.default_rng(0).integers(low, high, 5000)
    assert check(call, [draws], theirs)
    draws[0] = high
    verdict = check(call, [draws], theirs)
    assert not verdict and "outside" in verdict.message


def test_sort_and_topk_checks_allow_only_the_order_of_ties() -> None:
    x = torch.tensor([3, 1, 3, 2, 1])
    call = AtenCall("aten.sort.default", (x,), {})
    theirs = [to_numpy(t) for t in torch_outputs(call)]
    values = np.array([1, 1, 2, 3, 3])
    assert STATISTICAL_CHECKS[call.op](call, [values, np.array([1, 4, 3, 0, 2])], theirs)
    assert STATISTICAL_CHECKS[call.op](
        call, [values, np.array([4, 1, 3, 2, 0])], theirs
    )  # ties swapped
    assert not STATISTICAL_CHECKS[call.op](
        call, [values, np.array([1, 1, 3, 0, 2])], theirs
    )  # repeated index
    assert not STATISTICAL_CHECKS[call.op](
        call, [values, np.array([1, 4, 0, 3, 2])], theirs
    )  # wrong element
    assert not STATISTICAL_CHECKS[call.op](
        call, [np.array([1, 2, 1, 3, 3]), np.array([1, 3, 4, 0, 2])], theirs
    )

    call = AtenCall("aten.topk.default", (x, 2), {"sorted": False})
    theirs = [to_numpy(t) for t in torch_outputs(call)]
    assert STATISTICAL_CHECKS[call.op](call, [np.array([3, 3]), np.array([2, 0])], theirs)
    assert not STATISTICAL_CHECKS[call.op](call, [np.array([3, 2]), np.array([0, 3])], theirs)


@pytest.mark.parametrize(
    "op, args, kwargs",
    [
        ("aten.rand.default", ([40, 50],), {"dtype": torch.bfloat16}),
        ("aten.rand.default", ([40, 50],), {"dtype": torch.float16}),
        ("aten.rand.default", ([3000],), {"dtype": torch.complex64}),
        ("aten.randn.default", ([40, 50],), {"dtype": torch.bfloat16}),
        ("aten.randn.default", ([3000],), {"dtype": torch.complex128}),
        ("aten.randperm.default", (1000,), {}),
        ("aten.randperm.default", (10,), {}),
        ("aten.native_dropout.default", (torch.ones(40, 50), 0.3, True), {}),
        ("aten.native_dropout.default", (torch.ones(1000), 0.9, True), {}),
        ("aten.rand_like.default", (torch.zeros(40, 50, dtype=torch.float16),), {}),
        ("aten.randn_like.default", (torch.zeros(40, 50, dtype=torch.bfloat16),), {}),
        ("aten.uniform.default", (torch.zeros(40, 50, dtype=torch.float16), -2.0, 3.0), {}),
        ("aten.randint_like.low_dtype", (torch.zeros(40, 50, dtype=torch.int8), -128, 128), {}),
        ("aten.randint.low", (-(2**40), 2**40, [2000]), {}),
        # bfloat16 holds only every 4th integer of [512, 1000): 998 and 999 round to 1000
        ("aten.randint.default", (1000, [40, 50]), {"dtype": torch.bfloat16}),
        ("aten.randint.low", (-3000, 3000, [20000]), {"dtype": torch.float16}),
        (
            "aten.normal.Tensor_Tensor",
            (torch.linspace(-50, 50, 2000, dtype=torch.float16), torch.linspace(0.1, 3, 2000)),
            {},
        ),
        ("aten.normal.float_float", (1.0, 2.0, [3000]), {"dtype": torch.complex64}),
        ("aten.multinomial.default", (torch.tensor([0.1, 0.0, 0.5, 2.0, 1e-3]), 2000, True), {}),
        ("aten.log_normal.default", (torch.zeros(40, 50, dtype=torch.bfloat16), 1.0, 2.0), {}),
        ("aten.cauchy.default", (torch.zeros(40, 50), 3.0, 0.5), {}),
        ("aten.geometric.default", (torch.zeros(40, 50, dtype=torch.int16), 0.05), {}),
        ("aten.random.default", (torch.zeros(40, 50, dtype=torch.float16),), {}),
        (
            "aten.multinomial.default",
            (torch.rand(400, 7, generator=torch.Generator().manual_seed(0)) + 0.01, 4),
            {},
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_real_random_rules_pass_their_checks_at_many_seeds(
    op: str, args: tuple, kwargs: dict
) -> None:
    """The significance level (statistics.ALPHA = 1e-6) leaves correct rules passing, whatever
    the seed: 25 seeds of each, on the coarse dtypes too."""
    graph, arrays, call = _lowered(op, *args, **kwargs)
    theirs = [to_numpy(t) for t in torch_outputs(call)]
    for seed in range(25):
        verdict = STATISTICAL_CHECKS[op](call, execute(graph, arrays, seed=seed), theirs)
        assert verdict, (seed, verdict.message)


# -- the random ops that are not Core ATen: what torch refuses, refused when lowering --------------


def _lowered_with_metas_of(op: str, args: tuple, kwargs: dict, valid: tuple) -> Any:
    """The call (which torch refuses) as a graph whose result metas are those of the valid
    arguments `valid` (same shapes and dtypes), lowered."""
    outputs = torch_outputs(AtenCall(op, valid, kwargs))
    graph, arrays = build_graph(AtenCall(op, args, kwargs), outputs)
    return lower(graph), arrays


U8 = torch.zeros(3, dtype=torch.uint8)
F32 = torch.zeros(3)


@pytest.mark.parametrize(
    ("op", "args", "valid", "error", "message"),
    [
        (
            "aten.randint.low",
            (5, 5, [3]),
            (5, 6, [3]),
            ShapeError,
            "low must be less than high, got low=5 >= high=5",
        ),
        ("aten.randint.default", (0, [3]), (1, [3]), ShapeError, "low must be less than high"),
        (
            "aten.randint_like.default",
            (U8, 257),
            (U8, 256),
            ShapeError,
            "high - 1 = 256 is out of bounds for u8",
        ),
        (
            "aten.randint_like.low_dtype",
            (U8, -1, 3),
            (U8, 0, 3),
            ShapeError,
            "low = -1 is out of bounds for u8",
        ),
        (
            "aten.randint_like.default",
            (torch.zeros(3, dtype=torch.bool), 3),
            (torch.zeros(3, dtype=torch.bool), 2),
            ShapeError,
            "out of bounds for b8",
        ),
        (
            "aten.rand_like.default",
            (torch.zeros(3, dtype=torch.int64),),
            (F32,),
            DTypeError,
            "floating or complex dtype, got i64",
        ),
        (
            "aten.randn_like.default",
            (torch.zeros(3, dtype=torch.int64),),
            (F32,),
            DTypeError,
            "floating or complex dtype, got i64",
        ),
        (
            "aten.normal.Tensor_float",
            (F32, -1.0),
            (F32, 1.0),
            ShapeError,
            "std must be non-negative, got -1.0",
        ),
        (
            "aten.normal.float_float",
            (0.0, -2.0, [3]),
            (0.0, 2.0, [3]),
            ShapeError,
            "std must be non-negative",
        ),
        (
            "aten.normal_functional.default",
            (F32, 0.0, -1.0),
            (F32, 0.0, 1.0),
            ShapeError,
            "std must be non-negative",
        ),
        (
            "aten.uniform.default",
            (F32, 3.0, 2.0),
            (F32, 2.0, 3.0),
            ShapeError,
            "from must not exceed to",
        ),
        (
            "aten.uniform.default",
            (torch.zeros(3, dtype=torch.float16), -6e4, 6e4),
            (torch.zeros(3, dtype=torch.float16), 0.0, 6e4),
            ShapeError,
            "exceeds the largest f16",
        ),
        (
            "aten.uniform.default",
            (torch.zeros(3, dtype=torch.float16), 0.0, 7e4),
            (torch.zeros(3, dtype=torch.float16), 0.0, 6e4),
            ShapeError,
            "to = 70000.0 is out of bounds for f16",
        ),
        (
            "aten.multinomial.default",
            (torch.ones(3), 0),
            (torch.ones(3), 1),
            ShapeError,
            "num_samples must be positive",
        ),
        (
            "aten.multinomial.default",
            (torch.ones(3), 4),
            (torch.ones(3), 3),
            ShapeError,
            "cannot draw 4 samples without replacement from 3",
        ),
        (
            "aten.multinomial.default",
            (torch.ones(2, 2, 3), 1),
            (torch.ones(2, 3), 1),
            ShapeError,
            "1 or 2 dims, got 3",
        ),
        (
            "aten.multinomial.default",
            (torch.ones(3, dtype=torch.int64), 1),
            (torch.ones(3), 1),
            DTypeError,
            "self of dtype i64 is not supported",
        ),
        (
            "aten.normal.float_Tensor",
            (0.0, torch.ones(3, dtype=torch.int64)),
            (0.0, F32),
            DTypeError,
            "std of dtype i64 is not supported",
        ),
        (
            "aten.normal.Tensor_Tensor",
            (F32, torch.ones(3, dtype=torch.complex64)),
            (F32, F32),
            DTypeError,
            "std of dtype c64 is not supported",
        ),
        (
            "aten.randint_like.default",
            (torch.zeros(3, dtype=torch.complex64), 3),
            (F32, 3),
            DTypeError,
            "random integers of dtype c64 are not supported",
        ),
        (
            "aten.log_normal.default",
            (F32, 1.0, 0.0),
            (F32, 1.0, 1.0),
            ShapeError,
            "std must be positive",
        ),
        (
            "aten.log_normal.default",
            (torch.zeros(3, dtype=torch.int64),),
            (F32,),
            DTypeError,
            "self of dtype i64 is not supported",
        ),
        (
            "aten.cauchy.default",
            (F32, 0.0, 0.0),
            (F32, 0.0, 1.0),
            ShapeError,
            "sigma must be positive",
        ),
        (
            "aten.cauchy.default",
            (torch.zeros(3, dtype=torch.complex64),),
            (F32,),
            DTypeError,
            "self of dtype c64 is not supported",
        ),
        (
            "aten.geometric.default",
            (F32, 1.0),
            (F32, 0.5),
            ShapeError,
            "p must lie in \\(0, 1\\), got 1.0",
        ),
        (
            "aten.geometric.default",
            (torch.zeros(3, dtype=torch.bool), 0.5),
            (U8, 0.5),
            DTypeError,
            "self of dtype b8 is not supported",
        ),
        ("aten.random.to", (U8, 0), (U8, 1), ShapeError, "low must be less than high"),
        (
            "aten.random.from",
            (U8, 3, 300),
            (U8, 3, 256),
            ShapeError,
            "high - 1 = 299 is out of bounds",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("aten.") else "",
)
def test_random_ops_refuse_what_torch_refuses(
    op: str, args: tuple, valid: tuple, error: type, message: str
) -> None:
    with pytest.raises(Exception) as torch_error:
        torch_outputs(AtenCall(op, args, {}))
    assert isinstance(torch_error.value, RuntimeError | NotImplementedError)
    with pytest.raises(error, match=message) as ours:
        _lowered_with_metas_of(op, args, {}, valid)
    assert op.removeprefix("aten.").split(".")[0] in str(ours.value)


def test_a_negative_std_element_draws_nan_where_torch_raises() -> None:
    """No prim raises on data: the element of a negative deviation is NaN (torch raises), the
    others are drawn."""
    std = torch.tensor([1.0, -1.0, 2.0, 0.0])
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        torch_outputs(AtenCall("aten.normal.float_Tensor", (5.0, std), {}))
    graph, arrays = _lowered_with_metas_of(
        "aten.normal.float_Tensor", (5.0, std), {}, (5.0, std.abs())
    )
    (result,) = execute(graph, arrays, seed=0)
    assert np.isnan(result[1]) and np.isfinite(result[[0, 2]]).all() and result[3] == 5.0


def test_a_multinomial_row_torch_refuses_gives_the_category_count() -> None:
    """Rows with a negative, infinite or NaN weight or a zero total: indices out of range for
    any indexing (torch raises); the valid row is drawn."""
    weights = torch.tensor(
        [
            [1.0, -0.5, 1.0],
            [1.0, math.inf, 0.0],
            [math.nan, 1.0, 1.0],
            [0.0, 0.0, 0.0],
            [0.0, 1.0, 3.0],
        ]
    )
    for replacement in (True, False):
        with pytest.raises(RuntimeError):
            torch_outputs(AtenCall("aten.multinomial.default", (weights, 2, replacement), {}))
        graph, arrays = _lowered_with_metas_of(
            "aten.multinomial.default",
            (weights, 2, replacement),
            {},
            (torch.ones(5, 3), 2, replacement),
        )
        (result,) = execute(graph, arrays, seed=0)
        assert (result[:4] == 3).all()
        assert result[4].min() >= 1 and result[4].max() <= 2
        if not replacement:
            assert sorted(result[4]) == [1, 2]


def test_an_integer_range_wider_than_float64_draws_reach_is_refused() -> None:
    """Integers are drawn from float64 uniforms: a range of more than 2^53 integers, which torch
    draws from 64 random bits, is refused rather than drawn with gaps."""
    op, valid = "aten.randint.low", (0, 2, [3])
    graph, arrays = _lowered_with_metas_of(op, (-(2**52), 2**52, [3]), {}, valid)
    (result,) = execute(graph, arrays, seed=0)
    assert result.dtype == np.int64 and (np.abs(result) <= 2**52).all()
    with pytest.raises(ShapeError, match="randint: the range .* holds more than 2\\^53 integers"):
        _lowered_with_metas_of(op, (-(2**52), 2**52 + 1, [3]), {}, valid)


def test_the_multinomial_check_rejects_wrong_draws() -> None:
    weights = torch.tensor([[0.5, 0.0, 0.5, 1.0]] * 300)
    with_replacement = AtenCall("aten.multinomial.default", (weights, 4, True), {})
    theirs = [to_numpy(t) for t in torch_outputs(with_replacement)]
    rng = np.random.default_rng(0)
    good = rng.choice(4, size=(300, 4), p=[0.25, 0.0, 0.25, 0.5])
    check = STATISTICAL_CHECKS["aten.multinomial.default"]
    assert check(with_replacement, [good], theirs)
    drawn_zero = good.copy()
    drawn_zero[7, 2] = 1
    assert "weight 0" in check(with_replacement, [drawn_zero], theirs).message
    uniform_over_positive = rng.choice([0, 2, 3], size=(300, 4))
    assert "frequencies" in check(with_replacement, [uniform_over_positive], theirs).message
    out_of_range = good.copy()
    out_of_range[0, 0] = 4
    assert "outside" in check(with_replacement, [out_of_range], theirs).message

    without = AtenCall("aten.multinomial.default", (weights, 3), {})
    theirs = [to_numpy(t) for t in torch_outputs(without)]
    good = np.array(
        [rng.choice(4, size=3, replace=False, p=[0.25, 0.0, 0.25, 0.5]) for _ in range(300)]
    )
    assert check(without, [good], theirs)
    repeated = good.copy()
    repeated[5, 1] = repeated[5, 0]
    assert "twice" in check(without, [repeated], theirs).message
    # every row must draw its three positive weights before the zero one
    four = AtenCall("aten.multinomial.default", (weights[:2], 4), {})
    theirs = [to_numpy(t) for t in torch_outputs(four)]
    assert check(four, [np.array([[3, 0, 2, 1], [0, 3, 2, 1]])], theirs)
    assert (
        "positive one was left"
        in check(four, [np.array([[3, 1, 2, 0], [0, 3, 2, 1]])], theirs).message
    )


def test_random_of_an_int64_or_float64_tensor_is_refused() -> None:
    """`random_()` draws from 2^63 integers into int64 and from 2^53 + 1 into float64: more than
    float64 draws reach, refused (torch draws them from 64 bits)."""
    for dtype in (torch.int64, torch.float64):
        x = torch.zeros(3, dtype=dtype)
        with pytest.raises(ShapeError, match="random: the range .* holds more than 2\\^53"):
            _lowered_with_metas_of("aten.random.default", (x,), {}, (x,))
