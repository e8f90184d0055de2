"""Shared test configuration."""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from prims import mkl

# MKL's kernels on every x86-64 CPU, not only Intel's (where `prims.mkl` uses them by default),
# so both kernel paths are tested wherever the suite runs. Set before MKL's first load.
os.environ.setdefault("ATEN2PRIMS_MKL", "1")

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=25, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--full-budget",
        action="store_true",
        default=False,
        help="run the conformance harness with its full sample budget, and the tests marked slow",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` (long sweeps) run only with --full-budget; otherwise deselected."""
    if config.getoption("--full-budget"):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]


@pytest.fixture(scope="session")
def opinfo_cache_dir(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """Where the OpInfo -> overload map is cached between runs (keyed by torch version); a
    temporary directory when pytest's cache is disabled (-p no:cacheprovider)."""
    cache = getattr(request.config, "cache", None)
    if cache is None:
        return str(tmp_path_factory.mktemp("aten2prims-opinfo"))
    return str(cache.mkdir("aten2prims-opinfo"))


@pytest.fixture(params=["mkl", "numpy"])
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs a test twice: with MKL's kernels (prims/mkl.py; the test environment installs MKL
    on x86-64) and within `mkl.disabled()`, with NumPy's (its OpenBLAS through ctypes making
    the accumulating products, prims/openblas.py; tests/test_blas.py and the shifted-product
    tests of tests/test_contraction.py also run np.matmul alone)."""
    if request.param == "numpy":
        with mkl.disabled():
            yield "numpy"
        return
    if mkl.library() is None:
        if platform.machine() == "x86_64":
            pytest.fail(f"MKL is not available: {mkl.unavailable_reason}")
        pytest.skip("the mkl package exists for x86-64 only")
    yield "mkl"
