"""prims/erf_float32.py: erf of float32 values as tanh of an odd polynomial (prims' erf without
MKL), against the correctly rounded erf (SciPy's in float64, rounded) and against torch 2.13's
float32 erf, over the whole real line: subnormals, the core, the tails, ±inf, NaN, signed zeros;
and its blocks, `out=` and broadcasting. The prims' erf kernel with MKL and without."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as special
import torch

from aten2prims.testing.compare import compare
from prims import mkl
from prims.elementwise import erf_of
from prims.erf_float32 import _SCRATCH, BLOCK, LONG_BLOCK, erf_float32, long_blocks


def _tanh_target() -> str:
    """The SIMD target NumPy's float32 tanh runs on this machine."""
    from numpy.lib.introspect import opt_func_info

    return opt_func_info(func_name="^tanh$", signature="float32")["tanh"]["ff"]["current"]


# The largest error allowed, in units in the last place of the correctly rounded result: 4 with
# NumPy's FMA kernels of tanh (X86_V3 and X86_V4, bit-identical: every x86-64 CPU with AVX2),
# 5 on its pre-AVX2 baseline kernel (measured 4.95 with NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4").
MAX_ULP = 5.0 if _tanh_target().startswith("baseline") else 4.0


def _float32_line() -> np.ndarray:
    """Float32 values covering the real line: every 1021st bit pattern of the positive floats up
    to 5 (subnormals and all binades), random values in the core, both signs, the tails."""
    rng = np.random.default_rng(0)
    patterns = np.arange(0, np.float32(5.0).view(np.int32), 1021, dtype=np.int32).view(np.float32)
    core = rng.uniform(-5, 5, 1_000_000).astype(np.float32)
    tails = np.float32(10.0) ** rng.uniform(0, 38, 1000).astype(np.float32)
    boundary = np.linspace(3.5, 4.6, 20001, dtype=np.float32)
    positive = np.concatenate([patterns, np.abs(core), tails, boundary])
    return np.concatenate([positive, -positive])


def _ulp_errors(ours: np.ndarray, x: np.ndarray) -> np.ndarray:
    exact = special.erf(x.astype(np.float64))
    unit = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(ours.astype(np.float64) - exact) / unit


def test_within_four_ulp_of_the_correctly_rounded_erf() -> None:
    x = _float32_line()
    ours = erf_float32(x)
    assert ours.dtype == np.float32 and ours.shape == x.shape
    errors = _ulp_errors(ours, x)
    worst = int(np.argmax(errors))
    assert errors[worst] <= MAX_ULP, f"erf({x[worst]!r}) = {ours[worst]!r}: {errors[worst]} ulp"
    # Odd: erf(-x) is -erf(x) bit for bit, signed zeros included.
    half = x.size // 2
    assert np.array_equal(ours[half:].view(np.int32), (-ours[:half]).view(np.int32))


def test_tails_and_special_values() -> None:
    x = np.array(
        [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38, 4.3, 5.0, 3.95],
        np.float32,
    )
    with np.errstate(all="raise"):  # x² under- and overflowing is expected, silently
        ours = erf_float32(x)
    assert np.isnan(ours[0])
    assert ours[1:3].tolist() == [1.0, -1.0]
    assert ours[3] == 0 and not np.signbit(ours[3]) and np.signbit(ours[4])
    assert ours[5:7].tolist() == [np.float32(1e-45), np.float32(-1e-45)]
    assert ours[7:11].tolist() == [1.0, -1.0, 1.0, 1.0]
    assert abs(float(ours[11]) - 1.0) <= 2**-24


def test_against_torch_float32_erf() -> None:
    """Within torch's float32 tolerance of torch.erf, or closer to the float64 erf than it."""
    x = _float32_line()
    theirs = torch.erf(torch.from_numpy(x)).numpy()
    reference = torch.erf(torch.from_numpy(x).double()).numpy()
    result = compare(erf_float32(x), theirs, reference=reference, what="erf float32")
    assert result, result.message


def test_blocks_out_and_broadcasting() -> None:
    """Results do not depend on how the array splits into blocks or where they are written."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(3 * BLOCK + 17) * 2).astype(np.float32)
    whole = erf_float32(x)
    pieces = np.concatenate([erf_float32(x[i : i + 1000]) for i in range(0, x.size, 1000)])
    assert np.array_equal(whole, pieces)
    out = np.full_like(x, np.nan)
    assert erf_float32(x, out=out) is out and np.array_equal(out, whole)
    same = x.copy()
    erf_float32(same, out=same)  # in place
    assert np.array_equal(same, whole)
    strided = np.empty((x.size, 2), np.float32)[:, 0]  # a non-contiguous out
    erf_float32(x, out=strided)
    assert np.array_equal(strided, whole)
    row = x[:7].reshape(1, 7)
    broadcast = erf_float32(row, out=np.empty((3, 7), np.float32))
    assert np.array_equal(broadcast, np.broadcast_to(whole[:7], (3, 7)))
    matrix = x[: 40 * 50].reshape(40, 50)
    assert np.array_equal(erf_float32(matrix.T), whole[: 40 * 50].reshape(40, 50).T)
    assert erf_float32(np.float32(0.5)).shape == ()
    with pytest.raises(ValueError):
        erf_float32(x[:5], out=np.empty(6, np.float32))


def test_long_blocks_give_the_same_bits() -> None:
    """Under `long_blocks` (a thread running one of several threads' parts of an erf) the
    passes run over blocks of LONG_BLOCK elements, on this thread only, until the `with` ends:
    the same bits as over BLOCK elements."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(2 * LONG_BLOCK + 5) * 3).astype(np.float32)
    x[:4] = [np.nan, -0.0, np.inf, -np.inf]
    short = erf_float32(x)
    with long_blocks():
        assert _SCRATCH.block == LONG_BLOCK
        long = erf_float32(x)
        scratch_size = _SCRATCH.squares.size  # type: ignore[union-attr]  # made by the call
    assert _SCRATCH.block == BLOCK
    assert scratch_size == LONG_BLOCK
    assert long.tobytes() == short.tobytes()
    assert erf_float32(x).tobytes() == short.tobytes()  # back to BLOCK, larger scratch kept


def test_without_mkl_the_prims_erf_is_these_passes_and_scipys_float64_erf() -> None:
    x = _float32_line()[::97]
    with mkl.disabled():
        assert np.array_equal(erf_of(x), erf_float32(x))
        wide = x.astype(np.float64)
        assert np.array_equal(erf_of(wide), special.erf(wide), equal_nan=True)


def test_the_prims_erf_against_torch(kernels: str) -> None:
    """prims' erf kernel, MKL's vector erf (within 1 ulp) or these passes (within 4): within
    torch's tolerance of torch.erf, or closer to the float64 erf than it."""
    x = _float32_line()
    ours = erf_of(x)
    errors = _ulp_errors(ours, x)
    assert errors.max() <= (1.0 if kernels == "mkl" else MAX_ULP)
    theirs = torch.erf(torch.from_numpy(x)).numpy()
    reference = torch.erf(torch.from_numpy(x).double()).numpy()
    result = compare(ours, theirs, reference=reference, what=f"erf float32 ({kernels})")
    assert result, result.message
