"""Checking overloads: run every sample of an overload (per dtype, within a budget) and tally
the outcomes; compare them with the known failures we record on purpose."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable

import attrs

from ..ir.dtypes import DType
from .runner import Outcome, Status, run_call
from .samples import sample_dtypes, samples

# Default sample budgets per (overload, dtype).
FAST_BUDGET = 4
FULL_BUDGET = 64


@attrs.frozen
class KnownFailure:
    """A failure we record deliberately (shown in docs/coverage.md): `dtypes` (None = all) and
    `pattern` (a regex searched in the call's description, None = every call)."""

    op: str
    reason: str
    dtypes: frozenset[DType] | None = None
    pattern: str | None = None

    def covers(self, outcome: Outcome, dtype: DType) -> bool:
        if self.dtypes is not None and dtype not in self.dtypes:
            return False
        return self.pattern is None or re.search(self.pattern, outcome.call.describe()) is not None


@attrs.define
class OpReport:
    op: str
    outcomes: dict[DType, list[Outcome]] = attrs.Factory(dict)

    def counts(self, dtype: DType) -> tuple[int, int]:
        """(passed, run) for one dtype; samples torch rejects or we cannot represent don't count."""
        run = [o for o in self.outcomes.get(dtype, []) if o.status.counts_as_run]
        return sum(o.passed for o in run), len(run)

    @property
    def totals(self) -> tuple[int, int]:
        passed = run = 0
        for dtype in self.outcomes:
            p, r = self.counts(dtype)
            passed, run = passed + p, run + r
        return passed, run

    def failures(self) -> list[tuple[DType, Outcome]]:
        return [(d, o) for d, items in self.outcomes.items() for o in items if o.status.counts_as_run and not o.passed]

    def status_counts(self) -> Counter[Status]:
        return Counter(o.status for items in self.outcomes.values() for o in items)

    @property
    def extension_prims(self) -> frozenset[str]:
        return frozenset().union(*(o.extension_prims for items in self.outcomes.values() for o in items))


def check_op(
    op: str,
    *,
    dtypes: Iterable[DType] | None = None,
    budget: int = FAST_BUDGET,
    cache_dir: str | os.PathLike[str] | None = None,
) -> OpReport:
    report = OpReport(op)
    for dtype in dtypes if dtypes is not None else sample_dtypes(op, cache_dir):
        report.outcomes[dtype] = [run_call(call) for call in samples(op, dtype, budget=budget, cache_dir=cache_dir)]
    return report


def known_failures(op: str) -> list[KnownFailure]:
    from .known_failures import KNOWN_FAILURES

    return [k for k in KNOWN_FAILURES if k.op == op]


def unexpected_failures(report: OpReport) -> list[tuple[DType, Outcome]]:
    """Failures not covered by a recorded known failure."""
    known = known_failures(report.op)
    return [(d, o) for d, o in report.failures() if not any(k.covers(o, d) for k in known)]
