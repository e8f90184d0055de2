"""Shared test configuration."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

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
