"""Creation prims (prims/creation.py) against torch.ops.prims: shapes and dtypes of the empty
family, fill values converted (and overflow-checked) as torch converts them, iota, the random
prims' distributions, meta rules and rejections."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from prims_testing import (
    DTYPES,
    TP,
    assert_bitwise,
    ours_meta,
    random_array,
    rng_for,
    run_prim,
    symbolic,
    torch_meta,
    torch_prim,
)

import prims
from aten2prims.errors import DTypeError, ExecutionError, ShapeError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy, to_torch, torch_dtype
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import CPU, Device, TensorMeta
from prims import Builder
from prims.common import COMPLEX, FLOATS, INTS
from prims.registry import PRIMS

T = symbolic
CREATION = dict(device=CPU, requires_grad=False)
SHAPES = [(2, 3), (), (0, 4), (1,), (3, 1, 2)]


# -- empty, empty_permuted, empty_strided ---------------------------------------------------------------

EMPTY_CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("empty", ([2, 3],), CREATION),
    ("empty", ([],), CREATION),
    ("empty", ([0, 5],), CREATION),
    ("empty_permuted", ([2, 3, 4], [2, 0, 1]), CREATION),
    ("empty_permuted", ([], []), CREATION),
    ("empty_strided", ([2, 3], [1, 2]), CREATION),
    ("empty_strided", ([4], [0]), CREATION),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("name", "args", "kwargs"), EMPTY_CASES, ids=lambda x: str(x)[:40])
def test_empty_family(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], dtype: DType
) -> None:
    (ours,) = run_prim(name, *args, dtype=dtype, **kwargs)
    theirs = getattr(TP, name)(
        *args, dtype=torch_dtype(dtype), device=torch.device("cpu"), requires_grad=False
    )
    assert ours.shape == tuple(theirs.shape) and ours.dtype == dtype.numpy  # values are unspecified
    assert ours_meta(name, *args, dtype=dtype, **kwargs) == torch_meta(
        name, *args, dtype=dtype, **kwargs
    )


# -- fill values ------------------------------------------------------------------------------------------

FILL_VALUES: list[Any] = [
    True,
    False,
    0,
    1,
    -1,
    127,
    128,
    -128,
    -129,
    255,
    256,
    -255,
    -256,
    2**31,
    -(2**63),
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    0.5,
    -0.5,
    2.7,
    -2.7,
    127.5,
    255.9,
    65504.0,
    65519.0,
    65520.0,
    1e6,
    3.4e38,
    3.5e38,
    1e300,
    math.inf,
    -math.inf,
    math.nan,
    -0.0,
    1j,
    2 + 0j,
    1.5 - 2.5j,
    1e39 + 0j,
    10**6,
]


def _torch_outcome(fn: Any) -> tuple[str, Any]:
    try:
        return "value", to_numpy(fn())
    except (RuntimeError, TypeError, OverflowError) as error:
        return "error", str(error)


def _our_outcome(name: str, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        (result,) = run_prim(name, *args, **kwargs)
    except DTypeError as error:
        return "error", str(error)
    return "value", result


def _check_outcomes(ours: tuple[str, Any], theirs: tuple[str, Any], what: str) -> None:
    assert ours[0] == theirs[0], f"{what}: ours gives {ours}, torch gives {theirs}"
    if ours[0] == "value":
        assert_bitwise(ours[1], theirs[1], what=what)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_full_converts_like_torch(dtype: DType) -> None:
    for value in FILL_VALUES:
        for shape in ([3], [1], [0], [1, 1], []):
            theirs = _torch_outcome(
                lambda: TP.full(
                    shape,
                    value,
                    dtype=torch_dtype(dtype),
                    device=torch.device("cpu"),
                    requires_grad=False,
                )
            )
            ours = _our_outcome("full", shape, value, dtype=dtype, **CREATION)
            _check_outcomes(ours, theirs, f"full({shape}, {value!r}, {dtype.short})")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fill_full_like_scalar_tensor_convert_like_torch(dtype: DType) -> None:
    for value in FILL_VALUES:
        for shape in ((2, 2), (1,), ()):
            like = np.zeros(shape, dtype.numpy)
            _check_outcomes(
                _our_outcome("fill", like, value),
                _torch_outcome(lambda: TP.fill(to_torch(like), value)),
                f"fill({list(shape)}, {value!r}, {dtype.short})",
            )
            source = np.zeros(shape, np.int16)
            _check_outcomes(
                _our_outcome("full_like", source, value, dtype=dtype, **CREATION),
                _torch_outcome(
                    lambda: TP.full_like(
                        to_torch(source),
                        value,
                        dtype=torch_dtype(dtype),
                        device=torch.device("cpu"),
                        requires_grad=False,
                    )
                ),
                f"full_like({list(shape)}, {value!r}, {dtype.short})",
            )
        # torch's prims.scalar_tensor must be given a dtype and a device (its meta has no defaults)
        _check_outcomes(
            _our_outcome("scalar_tensor", value, dtype=dtype, device=CPU),
            _torch_outcome(
                lambda: TP.scalar_tensor(
                    value, dtype=torch_dtype(dtype), device=torch.device("cpu")
                )
            ),
            f"scalar_tensor({value!r}, {dtype.short})",
        )


def test_fill_keeps_the_operand_unchanged_and_non_contiguous_operands_work() -> None:
    x = random_array((3, 4), DType.float32, rng_for("fill")).T
    (ours,) = run_prim("fill", x, 2.5)
    assert ours.shape == (4, 3) and (ours == 2.5).all()


def test_scalar_tensor_without_dtype_uses_the_python_type() -> None:
    # torch's meta infers bool/int64/float32/complex64 from the scalar (its prim cannot be called without a dtype).
    for value, dtype in [
        (True, DType.bool),
        (3, DType.int64),
        (2.5, DType.float32),
        (1j, DType.complex64),
    ]:
        (ours,) = run_prim("scalar_tensor", value)
        assert ours.dtype == dtype.numpy and ours.shape == () and ours == value


def test_fill_value_known_only_at_run_time() -> None:
    # A run-time scalar (here from prims.item) is checked by the kernel: an overflow fails the run.
    with Builder() as b:
        x = b.add_input("x", TensorMeta((2,), DType.int64))
        filled = prims.full([3], prims.item(prims.sum(x, [0])), dtype=DType.uint8, **CREATION)
        graph = b.finish([filled])
    (ours,) = execute(graph, {"x": np.array([200, 55])}, check=True)
    assert_bitwise(ours, np.full(3, 255, np.uint8))
    with pytest.raises(ExecutionError, match="overflow"):
        execute(graph, {"x": np.array([200, 56])}, check=True)


# -- iota --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", sorted(INTS, key=DTYPES.index), ids=str)
def test_iota(dtype: DType) -> None:
    for length, start, step in [(5, 3, -2), (0, 1, 1), (7, 120, 3), (1, -5, 100), (300, 0, 1)]:
        kwargs = dict(start=start, step=step, dtype=dtype, **CREATION)
        (ours,) = run_prim("iota", length, **kwargs)
        assert_bitwise(
            ours, torch_prim("iota", length, **kwargs), what=f"iota({length}, {start}, {step})"
        )
        assert ours_meta("iota", length, **kwargs) == torch_meta("iota", length, **kwargs)


# -- random ------------------------------------------------------------------------------------------------

RANDOM_DTYPES = sorted(FLOATS | COMPLEX, key=DTYPES.index)


def _moments(sample: np.ndarray) -> list[tuple[float, float]]:
    parts = [sample.real, sample.imag] if np.iscomplexobj(sample) else [sample]
    return [
        (float(np.mean(p.astype(np.float64))), float(np.std(p.astype(np.float64)))) for p in parts
    ]


@pytest.mark.parametrize("dtype", RANDOM_DTYPES, ids=str)
def test_normal(dtype: DType) -> None:
    kwargs = dict(mean=3.0, std=2.0, dtype=dtype, **CREATION)
    (ours,) = run_prim("normal", [200, 100], seed=1, **kwargs)
    theirs = torch_prim("normal", [200, 100], **kwargs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    part_std = 2.0 / math.sqrt(2) if dtype.is_complex else 2.0
    for (mean, std), (torch_mean, torch_std) in zip(_moments(ours), _moments(theirs), strict=True):
        for m, s in ((mean, std), (torch_mean, torch_std)):  # the same distribution as torch's
            assert abs(m - 3.0) < 0.05 and abs(s - part_std) < 0.05
    assert ours_meta("normal", [2, 3], **kwargs) == torch_meta("normal", [2, 3], **kwargs)


@pytest.mark.parametrize("dtype", RANDOM_DTYPES, ids=str)
def test_uniform(dtype: DType) -> None:
    kwargs = dict(low=-2.0, high=5.0, dtype=dtype, device=CPU, stride=[100, 1])
    (ours,) = run_prim("uniform", [200, 100], seed=1, **kwargs)
    theirs = torch_prim("uniform", [200, 100], **kwargs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    parts = [ours.real, ours.imag] if dtype.is_complex else [ours]
    for part in parts:
        wide = part.astype(np.float64)
        assert wide.min() >= -2.0 and wide.max() <= 5.0
        assert abs(wide.mean() - 1.5) < 0.05 and abs(wide.std() - 7 / math.sqrt(12)) < 0.05
    for (mean, std), (torch_mean, torch_std) in zip(_moments(ours), _moments(theirs), strict=True):
        assert abs(mean - torch_mean) < 0.1 and abs(std - torch_std) < 0.1
    assert ours_meta("uniform", [2, 3], **{**kwargs, "stride": [3, 1]}) == torch_meta(
        "uniform", [2, 3], **{**kwargs, "stride": [3, 1]}
    )


def test_random_prims_follow_the_seed() -> None:
    kwargs = dict(mean=0.0, std=1.0, dtype=DType.float32, **CREATION)
    first = run_prim("normal", [50], seed=7, **kwargs)[0]
    assert_bitwise(run_prim("normal", [50], seed=7, **kwargs)[0], first)
    assert not np.array_equal(run_prim("normal", [50], seed=8, **kwargs)[0], first)
    assert PRIMS["normal"].random and PRIMS["uniform"].random


def test_zero_std_normal_is_the_mean() -> None:
    (ours,) = run_prim("normal", [4], mean=1.5, std=0.0, dtype=DType.bfloat16, **CREATION)
    assert_bitwise(
        ours, torch_prim("normal", [4], mean=1.5, std=0.0, dtype=DType.bfloat16, **CREATION)
    )


# -- meta rules and rejections -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_full_meta_matches_torch(dtype: DType) -> None:
    for shape in SHAPES:
        assert ours_meta("full", list(shape), 1, dtype=dtype, **CREATION) == torch_meta(
            "full", list(shape), 1, dtype=dtype, **CREATION
        )
        like = T(shape, DType.float64)
        assert ours_meta("full_like", like, 0, dtype=dtype, **CREATION) == torch_meta(
            "full_like", like, 0, dtype=dtype, **CREATION
        )
        assert ours_meta("fill", T(shape, dtype), 1) == torch_meta("fill", T(shape, dtype), 1)
    assert ours_meta("scalar_tensor", 1, dtype=dtype, device=CPU) == torch_meta(
        "scalar_tensor", 1, dtype=dtype, device=CPU
    )


f32 = DType.float32
REJECTED: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("empty", ([-1],), dict(dtype=f32, **CREATION)),
    ("empty_strided", ([2, 3], [1]), dict(dtype=f32, **CREATION)),
    ("empty_strided", ([2, 3], [-1, 1]), dict(dtype=f32, **CREATION)),
    ("empty_permuted", ([2, 3, 4], [2, 0, 0]), dict(dtype=f32, **CREATION)),
    ("empty_permuted", ([2, 3, 4], [-1, 0, 1]), dict(dtype=f32, **CREATION)),
    ("empty_permuted", ([2, 3, 4], [0, 1]), dict(dtype=f32, **CREATION)),
    ("full", ([-2], 1), dict(dtype=f32, **CREATION)),
    ("iota", (5,), dict(start=0, step=1, dtype=DType.bool, **CREATION)),
    ("iota", (5,), dict(start=0, step=1, dtype=f32, **CREATION)),
    ("iota", (5,), dict(start=0, step=0, dtype=DType.int64, **CREATION)),
    ("iota", (-1,), dict(start=0, step=1, dtype=DType.int64, **CREATION)),
    ("normal", ([3],), dict(mean=0.0, std=-1.0, dtype=f32, **CREATION)),
    ("normal", ([3],), dict(mean=0.0, std=1.0, dtype=DType.int32, **CREATION)),
    ("normal", ([3],), dict(mean=0.0, std=1.0, dtype=DType.bool, **CREATION)),
    ("normal", ([3],), dict(mean=1 + 1j, std=1.0, dtype=DType.complex64, **CREATION)),
    ("uniform", ([3],), dict(low=0.0, high=1.0, dtype=DType.int32, device=CPU, stride=[1])),
    ("uniform", ([3],), dict(low=2.0, high=1.0, dtype=f32, device=CPU, stride=[1])),
    ("uniform", ([3, 2],), dict(low=0.0, high=1.0, dtype=f32, device=CPU, stride=[1])),
    ("scalar_tensor", (1j,), dict(dtype=f32, device=CPU)),
    ("scalar_tensor", (300,), dict(dtype=DType.uint8, device=CPU)),
    ("fill", (np.zeros(3, np.int8), 300), {}),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), REJECTED, ids=lambda x: str(x)[:50])
def test_rejected_like_torch(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises((RuntimeError, TypeError, NotImplementedError)):
        torch_prim(name, *args, **kwargs)
    with pytest.raises((ShapeError, DTypeError)):
        run_prim(name, *args, **kwargs)


def test_torch_schemas() -> None:
    for name in [
        "empty",
        "empty_permuted",
        "empty_strided",
        "full",
        "full_like",
        "fill",
        "scalar_tensor",
        "iota",
        "normal",
        "uniform",
    ]:
        schema = str(getattr(torch.ops.prims, name).default._schema).removeprefix("prims::")
        assert PRIMS[name].schema.text == schema


def test_device_is_kept() -> None:
    meta = ours_meta("full", [2], 0.0, dtype=f32, device=Device("cpu"), requires_grad=False)
    assert meta == T((2,), f32)
