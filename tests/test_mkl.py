"""prims/mkl.py: the optional MKL library as the test environment installs it (the `test` extra
includes `mkl` on x86-64), loaded with its sequential layer, and switched off on request."""

from __future__ import annotations

import ctypes
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from prims import mkl

needs_mkl = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the mkl package exists for x86-64 only"
)


@needs_mkl
def test_the_test_environment_loads_mkl_with_its_sequential_layer() -> None:
    library = mkl.library()
    assert library is not None, mkl.unavailable_reason
    get_layer = library.handle.MKL_Set_Threading_Layer
    # Asking again for the sequential layer returns the layer in effect.
    assert get_layer(1) == 1


@needs_mkl
def test_disabled_turns_it_off_within_the_block_only() -> None:
    assert mkl.library() is not None
    with mkl.disabled():
        assert mkl.library() is None
        with mkl.disabled():
            assert mkl.library() is None
        assert mkl.library() is None
    assert mkl.library() is not None


def test_the_environment_variable_turns_it_off_for_the_process() -> None:
    code = "from prims import mkl; print(mkl.library(), mkl.unavailable_reason)"
    environment = dict(os.environ, ATEN2PRIMS_MKL="0")
    output = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "None ATEN2PRIMS_MKL=0"


def test_the_cpu_vendor_is_read_from_cpuinfo() -> None:
    amd = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
    assert mkl.cpu_vendor(amd) == "AuthenticAMD"
    assert mkl.cpu_vendor("vendor_id : GenuineIntel\n") == mkl.INTEL
    assert mkl.cpu_vendor("processor : 0\n") == ""


@needs_mkl
@pytest.mark.parametrize("setting", [None, "1"])
def test_by_default_only_intel_cpus_use_it_and_the_variable_forces_it(setting: str | None) -> None:
    code = "from prims import mkl; print(mkl.library() is not None); print(mkl.unavailable_reason)"
    environment = {k: v for k, v in os.environ.items() if k != "ATEN2PRIMS_MKL"}
    if setting is not None:
        environment["ATEN2PRIMS_MKL"] = setting
    loaded, reason = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    ).stdout.split("\n")[:2]
    vendor = mkl.cpu_vendor()
    if setting == "1" or vendor == mkl.INTEL:
        assert loaded == "True"
    else:
        assert loaded == "False"
        assert f"vendor is {vendor or 'unknown'}" in reason


@needs_mkl
def test_gemm_and_a_vector_function_compute_what_numpy_does() -> None:
    library = mkl.library()
    assert library is not None
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 61), dtype=np.float32)
    b = rng.standard_normal((23, 61), dtype=np.float32)  # used transposed
    c = np.full((37, 23), np.nan, np.float32)
    library.gemm(ctypes.c_float)(
        mkl.ROW_MAJOR,
        mkl.NO_TRANSPOSE,
        mkl.TRANSPOSE,
        37,
        23,
        61,
        1.0,
        a.ctypes.data,
        61,
        b.ctypes.data,
        61,
        0.0,
        c.ctypes.data,
        23,
    )  # fmt: skip - one line per gemm argument group reads like its C prototype
    np.testing.assert_allclose(
        c, a.astype(np.float64) @ b.T.astype(np.float64), rtol=1e-5, atol=1e-4
    )

    x = np.array([-np.inf, -3.0, -0.5, -0.0, 0.0, 1e-40, 0.5, 3.0, np.inf, np.nan], np.float64)
    y = np.empty_like(x)
    library.vector_function("vmdErf")(x.size, x.ctypes.data, y.ctypes.data, mkl.VML_HIGH_ACCURACY)
    from scipy import special

    np.testing.assert_array_equal(np.signbit(y), np.signbit(special.erf(x)))
    np.testing.assert_allclose(y, special.erf(x), rtol=2.3e-16, atol=0)
