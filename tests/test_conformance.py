"""The conformance harness as part of the suite: every Core ATen overload, its OpInfo and
hand-written samples for every dtype, through torch and through lower → execute.

An overload without a rule is an expected failure (the coverage table shows it). An overload
with a rule must pass every sample except the failures recorded in
`aten2prims.testing.known_failures` with their reasons; one that docs/coverage.md shows as fully
passing must not fail even those. `--full-budget` runs more samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import prims
from aten2prims.ir.dtypes import DType
from aten2prims.schema.core_aten import CORE_ATEN_OPS
from aten2prims.schema.registry import EXTRA_COMPUTING_OPS
from aten2prims.testing.budgets import FAST_BUDGET, FULL_BUDGET
from aten2prims.testing.conformance import Verdict, check_op, unexpected_failures
from aten2prims.testing.coverage_report import documented_overloads
from aten2prims.testing.runner import STATISTICAL_CHECKS, Status
from aten2prims.testing.samples import samples
from decompositions import RULES, RuleRegistry

COVERAGE = Path(__file__).resolve().parents[1] / "docs" / "coverage.md"
DOCUMENTED = documented_overloads(COVERAGE.read_text()) if COVERAGE.exists() else {}


@pytest.mark.parametrize("op", sorted(CORE_ATEN_OPS))
def test_overload_conforms(op: str, request: pytest.FixtureRequest, opinfo_cache_dir: str) -> None:
    if op not in RULES:
        pytest.xfail(f"{op} has no decomposition rule yet")
    budget = FULL_BUDGET if request.config.getoption("--full-budget") else FAST_BUDGET
    report = check_op(op, budget=budget, cache_dir=opinfo_cache_dir)
    _passed, run = report.totals
    assert run > 0, f"{op}: no sample ran (add hand-written samples)"
    failures = unexpected_failures(report)
    assert not failures, f"{op}: {len(failures)} of {run} samples fail:\n" + _describe(failures)
    if DOCUMENTED.get(op, ("", ""))[1] == Verdict.PASS.value:
        assert not report.failures(), (
            f"{op}: docs/coverage.md shows it fully passing, but known failures now cover a regression:\n"
            + _describe(report.failures())
        )


def _describe(failures: list[tuple[DType, Any]]) -> str:
    return "\n".join(
        f"  [{dtype.short}] {outcome.status.value}: {outcome.call.describe()}  ({outcome.call.origin})\n"
        f"      {outcome.message}"
        for dtype, outcome in failures[:10]
    )


def _torch_overload(op: str) -> Any:
    import torch

    _, name, overload = op.split(".")
    return getattr(getattr(torch.ops.aten, name), overload)


def test_every_random_overload_has_a_statistical_check() -> None:
    """torch tags the overloads whose results depend on the random generator; their values can
    never equal torch's, so each needs a check of what it promises instead (the non-core ones we
    lower too)."""
    import torch

    random_ops = {
        op
        for op in CORE_ATEN_OPS.keys() | EXTRA_COMPUTING_OPS
        if torch.Tag.nondeterministic_seeded in _torch_overload(op).tags
    }
    assert {"aten.rand.default", "aten.randn.default", "aten.randperm.default"} <= random_ops
    assert {"aten.randn_like.default", "aten.multinomial.default"} <= random_ops  # not core
    assert sorted(random_ops - set(STATISTICAL_CHECKS)) == []


def test_a_random_op_with_the_wrong_distribution_fails(opinfo_cache_dir: str) -> None:
    """rand lowered to half of a uniform draw: values torch's rand could return, from the wrong
    distribution. The statistical check must reject it where the real rule passes."""
    wrong = RuleRegistry()

    @wrong.register("aten.rand.default")
    def rand(size: Any, dtype: Any, layout: Any, device: Any, pin_memory: Any) -> Any:
        real = RULES.get("aten.rand.default")
        assert real is not None
        return prims.mul(real.function(size, dtype, layout, device, pin_memory), 0.5)

    good = check_op("aten.rand.default", dtypes=[DType.float32], cache_dir=opinfo_cache_dir)
    bad = check_op(
        "aten.rand.default", dtypes=[DType.float32], cache_dir=opinfo_cache_dir, registry=wrong
    )
    assert good.verdict is Verdict.PASS and good.totals[1] >= 2
    assert bad.verdict is Verdict.FAILING
    assert {o.status for _, o in bad.failures()} == {Status.WRONG_VALUE}
    assert any("Kolmogorov" in o.message for _, o in bad.failures())


def test_samples_do_not_depend_on_the_generators_state(opinfo_cache_dir: str) -> None:
    """OpInfo seeds torch's, NumPy's and Python's generators before each sample and hand-written
    samples use their own generators: what ran before changes nothing (docs/coverage.md is
    reproducible, and so is a test's verdict under pytest-xdist)."""
    import torch

    def keys(seed: int) -> list[str]:
        torch.manual_seed(seed)
        return [
            call.key()
            for call in samples(
                "aten.exp.default", DType.float32, budget=6, cache_dir=opinfo_cache_dir
            )
        ]

    first = keys(1)
    assert any(
        call.origin.startswith("opinfo:")
        for call in samples("aten.exp.default", DType.float32, budget=6)
    )
    assert keys(2) == first


def test_known_failures_name_overloads_with_rules() -> None:
    import re

    from aten2prims.testing.known_failures import KNOWN_FAILURES

    for known in KNOWN_FAILURES:
        assert known.op in CORE_ATEN_OPS and known.op in RULES, known.op
        assert known.reason.strip(), f"{known.op}: a known failure needs its reason"
        if known.pattern is not None:
            re.compile(known.pattern)
