"""prims/vector_math.py: each kernel with MKL's vector math (VML) against float64 and NumPy/SciPy
references and torch 2.13, special values and subnormals included; the NumPy path within
`mkl.disabled()`; results independent of where an element sits (blocks, parts, offsets,
layouts), as elementwise chains and threads need."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import mpmath
import numpy as np
import pytest
import scipy.special as special
import torch
from _model_checks import assert_like_torch

import aten2prims
import prims
from aten2prims.frontends.fx import from_fx
from aten2prims.testing.compare import compare
from prims import mkl, vector_math
from prims.vector_math import KERNELS, VectorFunction

# The torch function of each kernel's prim.
TORCH: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "erf": torch.erf,
    "erfc": torch.erfc,
    "erf_inv": torch.erfinv,
    "ndtri": torch.special.ndtri,
    "sin": torch.sin,
    "cos": torch.cos,
    "asinh": torch.asinh,
}

# Where each function's values are interesting: (low, high) of the uniform draws, besides the
# draws over every binade.
DOMAIN: dict[str, tuple[float, float]] = {
    "erf": (-6, 6),
    "erfc": (-6, 30),
    "erf_inv": (-1, 1),
    "ndtri": (0, 1),
    "sin": (-100, 100),
    "cos": (-100, 100),
    "asinh": (-100, 100),
}

CASES = [
    pytest.param(name, np.dtype(dtype), id=f"{name}-{np.dtype(dtype).name}")
    for name, kernel in KERNELS.items()
    for dtype in (np.float32, np.float64)
    if np.dtype(dtype) in kernel.dtypes
]


def needs_mkl() -> mkl.Mkl:
    library = mkl.library()
    if library is None:
        pytest.skip(f"MKL is not available here: {mkl.unavailable_reason}")
    return library


def values(name: str, dtype: np.dtype) -> np.ndarray:
    """Special values, subnormals, draws over every binade of both signs, and uniform draws
    over the function's interesting interval."""
    rng = np.random.default_rng(len(name))
    info = np.finfo(dtype)
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0]
    specials += [float(info.max), -float(info.max), float(info.tiny), -float(info.tiny)]
    subnormals = np.concatenate(
        [
            np.array([info.smallest_subnormal, info.tiny / 3, info.tiny / 1024], dtype),
            rng.uniform(0, float(info.tiny), 300).astype(dtype),
        ]
    )
    exponents = rng.uniform(np.log2(float(info.tiny)), np.log2(float(info.max)), 20_000)
    binades = (2.0**exponents).astype(dtype)
    low, high = DOMAIN[name]
    uniform = rng.uniform(low, high, 20_000).astype(dtype)
    positive = np.concatenate([subnormals, binades, uniform])
    return np.concatenate([np.array(specials, dtype), positive, -positive])


def ordered(x: np.ndarray) -> np.ndarray:
    """Float bit patterns as unsigned integers in the floats' order (adjacent floats differ by
    1, -0.0 and +0.0 by 1)."""
    unsigned = np.uint32 if x.dtype == np.float32 else np.uint64
    bits = x.view(unsigned)
    sign = unsigned(1) << unsigned(8 * x.dtype.itemsize - 1)
    return np.where(bits & sign, ~bits, bits | sign)


def assert_within_ulp(ours: np.ndarray, expected: np.ndarray, x: np.ndarray, ulp: int) -> None:
    """Same NaNs, infinities and signs of zero; finite values within `ulp` units in the last
    place, or both in the subnormal range within the smallest normal of each other."""
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(ours), nan), f"NaN at {x[np.isnan(ours) != nan][:5]}"
    zero = expected == 0
    assert np.array_equal(np.signbit(ours[zero]), np.signbit(expected[zero])), "sign of zero"
    a, b = ordered(ours[~nan]), ordered(expected[~nan])
    distance = np.where(a > b, a - b, b - a).astype(np.float64)
    tiny = np.finfo(x.dtype).tiny
    with np.errstate(invalid="ignore"):
        subnormal = np.abs(ours[~nan] - expected[~nan]) < tiny
    distance[subnormal & (np.abs(expected[~nan]) < tiny)] = 0
    worst = int(np.argmax(distance)) if distance.size else 0
    assert distance.size == 0 or distance[worst] <= ulp, (
        f"at {x[~nan][worst]!r}: {ours[~nan][worst]!r}, expected {expected[~nan][worst]!r} "
        f"({distance[worst]} ulp)"
    )


# Each function in mpmath (its float64 reference: computed to 40 digits, correctly rounded).
MPMATH: dict[str, Callable[[Any], Any]] = {
    "erf": mpmath.erf,
    "erfc": mpmath.erfc,
    "erf_inv": mpmath.erfinv,
    "ndtri": lambda p: mpmath.sqrt(2) * mpmath.erfinv(2 * p - 1),
    "sin": mpmath.sin,
    "cos": mpmath.cos,
    "asinh": mpmath.asinh,
}


def exact(name: str, x: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """The correctly rounded float64 values of the function at finite x of its real domain
    (mpmath); NumPy's/SciPy's values elsewhere (NaN, infinities)."""
    result = fallback.copy()
    for index, value in enumerate(x):
        if not np.isfinite(value) or (name == "ndtri" and not 0 < value < 1):
            continue
        # ndtri of a tiny p computes 2p - 1 to as many digits as p's exponent has.
        digits = 40 + (int(-np.log10(value)) if name == "ndtri" else 0)
        with mpmath.workdps(digits):
            try:
                exact_value = MPMATH[name](mpmath.mpf(float(value)))
            except (ValueError, ZeroDivisionError, OverflowError):
                # Outside the domain (NaN or an infinity, as the fallback has it), or beyond
                # what mpmath's erfc evaluates (erfc(1e300) is 0).
                continue
        if isinstance(exact_value, mpmath.mpf):
            # (float() rounds to nearest; beyond the largest float it raises)
            overflows = abs(exact_value) > np.finfo(np.float64).max
            result[index] = mpmath.sign(exact_value) * np.inf if overflows else float(exact_value)
    return result


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_vml_within_one_ulp(name: str, dtype: np.dtype) -> None:
    """Within 1 ulp of the correctly rounded value (VML's high accuracy is within 1 ulp of the
    exact value): float32 against the float64 kernel's value rounded, float64 against mpmath's
    (on every 16th value, 64th for ndtri). NaN, infinities, signed zeros and subnormals as the reference has
    them (VML keeps subnormals: flush-to-zero off)."""
    needs_mkl()
    kernel = KERNELS[name]
    x = values(name, dtype)
    ours = kernel(x)
    assert ours.dtype == dtype and ours.shape == x.shape
    with np.errstate(all="ignore"):
        if dtype == np.float32:
            expected = kernel.fallback(x.astype(np.float64)).astype(np.float32)
        else:
            step = 64 if name == "ndtri" else 16  # (mpmath's ndtri of tiny p is slow)
            x, ours = x[::step], ours[::step]
            expected = exact(name, x, kernel.fallback(x))
    assert_within_ulp(ours, expected, x, 1)


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_against_torch(name: str, dtype: np.dtype, kernels: str) -> None:
    """Within torch's tolerance of torch's CPU kernel (or closer to its float64 value), special
    values, signed zeros and subnormals included, with MKL and with NumPy."""
    x = values(name, dtype)
    ours = KERNELS[name](x)
    theirs = TORCH[name](torch.from_numpy(x)).numpy()
    reference = TORCH[name](torch.from_numpy(x.astype(np.float64))).numpy()
    result = compare(ours, theirs, reference=reference, what=f"{name} {dtype} ({kernels})")
    assert result, result.message


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_numpy_path_within_disabled(name: str, dtype: np.dtype) -> None:
    """Within `mkl.disabled()` a kernel computes exactly what its NumPy/SciPy fallback does,
    also into `out=`."""
    kernel = KERNELS[name]
    x = values(name, dtype)
    with np.errstate(all="ignore"):
        expected = kernel.fallback(x)
    with mkl.disabled():
        assert mkl.library() is None
        assert np.array_equal(kernel(x), expected, equal_nan=True)
        out = np.empty_like(x)
        assert kernel(x, out=out) is out
        assert np.array_equal(out, expected, equal_nan=True)


@pytest.mark.parametrize(("name", "dtype"), CASES)
def test_results_do_not_depend_on_position_length_or_layout(
    name: str, dtype: np.dtype, kernels: str
) -> None:
    """A block, a part or a view of an array gets exactly the bits the whole array gets, at any
    offset and length (VML's vector body and its tail agree), whatever the layouts of the
    operand and of `out`: elementwise chains run kernels block by block, threads in parts."""
    kernel = KERNELS[name]
    x = values(name, dtype)[:50_021]
    whole = kernel(x)
    for start in (*range(33), 1000, 4097):
        for length in (1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 1025):
            piece = kernel(x[start : start + length])
            assert np.array_equal(piece, whole[start : start + length], equal_nan=True)
    blocks = np.concatenate([kernel(x[i : i + 4096]) for i in range(0, x.size, 4096)])
    assert np.array_equal(blocks, whole, equal_nan=True)
    # Into `out`, in place, from a transposed or strided operand, into a strided `out`,
    # broadcast to `out`'s shape, and from an operand overlapping `out` by a shift.
    out = np.full_like(x, np.nan)
    assert kernel(x, out=out) is out and np.array_equal(out, whole, equal_nan=True)
    same = x.copy()
    assert kernel(same, out=same) is same and np.array_equal(same, whole, equal_nan=True)
    matrix = x[: 100 * 300].reshape(100, 300)
    assert np.array_equal(kernel(matrix.T), whole[: 100 * 300].reshape(100, 300).T, equal_nan=True)
    assert np.array_equal(kernel(x[::3]), whole[::3], equal_nan=True)
    strided = np.empty((x.size, 2), dtype)[:, 0]
    assert kernel(x, out=strided) is strided and np.array_equal(strided, whole, equal_nan=True)
    row = x[:300]
    spread = kernel(row, out=np.empty((4, 300), dtype))
    assert np.array_equal(spread, np.broadcast_to(whole[:300], (4, 300)), equal_nan=True)
    if kernels == "mkl":  # (NumPy runs overlapping operands through other, buffered loops)
        shifted = x.copy()
        result = kernel(shifted[1:], out=shifted[:-1])
        assert np.array_equal(result, whole[1:], equal_nan=True)
    scalar = kernel(x[5:6].reshape(()))
    assert scalar.shape == () and np.array_equal(scalar, whole[5], equal_nan=True)
    assert kernel(np.empty((0, 3), dtype)).shape == (0, 3)


def test_vml_only_for_its_dtypes_and_fallback_elsewhere() -> None:
    """float16, complex and integer operands, and a float32 operand of a float64-only kernel,
    take the fallback with MKL loaded."""
    needs_mkl()
    rng = np.random.default_rng(3)
    z = (rng.standard_normal(64) + 1j * rng.standard_normal(64)).astype(np.complex128)
    assert np.array_equal(vector_math.sin(z), np.sin(z))
    half = rng.standard_normal(64).astype(np.float16)
    assert np.array_equal(vector_math.erf(half), special.erf(half))
    single = rng.standard_normal(64).astype(np.float32)
    assert vector_math.sin.dtypes == frozenset({np.dtype(np.float64)})
    assert np.array_equal(vector_math.sin(single), np.sin(single))


def test_vml_counts_are_64_bit() -> None:
    """The element count goes to VML as a 64-bit integer: arrays of 2**31 elements and more."""
    needs_mkl()
    for kernel in KERNELS.values():
        function = kernel._function(needs_mkl(), next(iter(kernel.dtypes)))
        assert function.argtypes[0] is ctypes.c_longlong


def test_a_kernel_asks_at_each_call() -> None:
    """The choice is made at each call, so a kernel held by a plan switches with the library."""
    library = needs_mkl()
    x = values("erf", np.dtype(np.float32))
    with mkl.disabled():
        numpy_bits = vector_math.erf(x)
    vml_bits = vector_math.erf(x)
    assert not np.array_equal(numpy_bits, vml_bits, equal_nan=True)
    out = np.empty_like(x)
    library.vector_function("vmsErf")(x.size, x.ctypes.data, out.ctypes.data, mkl.VML_HIGH_ACCURACY)
    assert np.array_equal(vml_bits, out, equal_nan=True)
    with mkl.disabled():
        assert np.array_equal(vector_math.erf(x), numpy_bits, equal_nan=True)


def test_every_kernel_is_a_vector_function_named_after_its_prim() -> None:
    for name, kernel in KERNELS.items():
        assert isinstance(kernel, VectorFunction) and kernel.__name__ == name
        assert hasattr(prims, name), name


class _GeluMlp(torch.nn.Module):
    """A transformer's MLP block: layer norm, a linear layer, GELU, a linear layer, residual."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(96)
        self.up = torch.nn.Linear(96, 384)
        self.down = torch.nn.Linear(384, 96)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_a_gelu_model_against_torch(dtype: torch.dtype, kernels: str) -> None:
    """An exported GELU MLP (its erf MKL's vector erf or NumPy's kernels) judged against torch
    eager and the module's float64 run as tests/test_models.py judges models, at one and two
    threads with the same bits."""
    torch.manual_seed(0)
    model = _GeluMlp().to(dtype).eval()
    x = torch.randn(4, 56, 56, 96, dtype=dtype) * 2
    program = torch.export.export(model, (x,)).run_decompositions()
    graph = aten2prims.lower(from_fx(program))
    ours = aten2prims.execute(graph, [x.numpy()], threads=1)
    again = aten2prims.execute(graph, [x.numpy()], threads=2)
    assert all(np.array_equal(a, b) for a, b in zip(ours, again, strict=True))
    assert_like_torch(ours, model, (x,))
