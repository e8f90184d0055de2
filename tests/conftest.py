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
        help="run the conformance harness with its full sample budget",
    )


@pytest.fixture(scope="session")
def opinfo_cache_dir(request: pytest.FixtureRequest) -> str:
    """Where the OpInfo -> overload map is cached between runs (keyed by torch version)."""
    return str(request.config.cache.mkdir("aten2prims-opinfo"))
