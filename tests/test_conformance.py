"""The conformance harness as part of the suite: every Core ATen overload, its OpInfo and
hand-written samples for every dtype, through torch and through lower → execute.

An overload without a rule is an expected failure (the coverage table shows it). An overload
with a rule must pass every sample except the failures recorded in
`aten2prims.harness.known_failures` with their reasons. `--full-budget` runs more samples."""

from __future__ import annotations

import pytest

from aten2prims.harness.conformance import FAST_BUDGET, FULL_BUDGET, check_op, unexpected_failures
from aten2prims.schema.core_aten import CORE_ATEN_OPS
from decompositions import RULES


@pytest.mark.parametrize("op", sorted(CORE_ATEN_OPS))
def test_overload_conforms(op: str, request: pytest.FixtureRequest, opinfo_cache_dir: str) -> None:
    if op not in RULES:
        pytest.xfail(f"{op} has no decomposition rule yet")
    budget = FULL_BUDGET if request.config.getoption("--full-budget") else FAST_BUDGET
    report = check_op(op, budget=budget, cache_dir=opinfo_cache_dir)
    passed, run = report.totals
    assert run > 0, f"{op}: no sample ran (add hand-written samples)"
    failures = unexpected_failures(report)
    assert not failures, f"{op}: {len(failures)} of {run} samples fail:\n" + "\n".join(
        f"  [{dtype.short}] {outcome.status.value}: {outcome.call.describe()}\n      {outcome.message}"
        for dtype, outcome in failures[:10]
    )
