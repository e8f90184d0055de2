"""Checking overloads: run every sample of an overload (per dtype, within a budget) and tally
the outcomes; compare them with the known failures we record on purpose."""

from __future__ import annotations

import enum
import os
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

import attrs

from decompositions import RULES

from ..ir.dtypes import DType
from .budgets import FAST_BUDGET
from .known_failures import KNOWN_FAILURES, KnownFailure
from .runner import Outcome, Status, run_call
from .samples import GENERATION_ERROR, Dropped, sample_dtypes, samples


class Verdict(enum.Enum):
    """An overload's standing over all its samples (the status column of docs/coverage.md)."""

    PASS = "pass"  # every sample that ran passed (and at least one ran)
    KNOWN_FAILURES = "known failures"  # every failure is covered by a recorded known failure
    FAILING = "failing"  # a failure no known failure covers, or no sample ran
    NO_RULE = "no rule"  # no decomposition rule is registered


@attrs.define
class OpReport:
    """The outcomes of an overload's samples, and what they are judged by: whether a rule exists
    and the known failures recorded for the overload (by default, those of known_failures.py)."""

    op: str
    outcomes: dict[DType, list[Outcome]] = attrs.Factory(dict)
    # samples that failed to generate, per dtype (those that ran but do not count are outcomes)
    generation_errors: dict[DType, list[Dropped]] = attrs.Factory(dict)
    has_rule: bool = True
    known: tuple[KnownFailure, ...] = attrs.field(
        default=attrs.Factory(lambda self: tuple(known_failures(self.op)), takes_self=True)
    )
    seconds: float = 0.0

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

    def dropped(self) -> Counter[str]:
        """How many samples never reached the comparison, by reason: GENERATION_ERROR, and the
        statuses that do not count as run (unsupported by torch, unrepresentable)."""
        reasons: Counter[str] = Counter()
        for items in self.generation_errors.values():
            reasons.update(GENERATION_ERROR for _ in items)
        for outcomes in self.outcomes.values():
            reasons.update(o.status.value for o in outcomes if not o.status.counts_as_run)
        return reasons

    def failures(self) -> list[tuple[DType, Outcome]]:
        return [
            (d, o)
            for d, items in self.outcomes.items()
            for o in items
            if o.status.counts_as_run and not o.passed
        ]

    def known_failure(self, dtype: DType, outcome: Outcome) -> KnownFailure | None:
        """The recorded known failure covering a failed sample, if any."""
        return next((k for k in self.known if k.covers(outcome, dtype)), None)

    @property
    def verdict(self) -> Verdict:
        if not self.has_rule:
            return Verdict.NO_RULE
        if self.totals[1] == 0 or unexpected_failures(self):
            return Verdict.FAILING
        return Verdict.KNOWN_FAILURES if self.failures() else Verdict.PASS

    def status_counts(self) -> Counter[Status]:
        return Counter(o.status for items in self.outcomes.values() for o in items)

    @property
    def extension_prims(self) -> frozenset[str]:
        return frozenset().union(
            *(o.extension_prims for items in self.outcomes.values() for o in items)
        )


def check_op(
    op: str,
    *,
    dtypes: Iterable[DType] | None = None,
    budget: int = FAST_BUDGET,
    cache_dir: str | os.PathLike[str] | None = None,
    registry: Any = None,
) -> OpReport:
    """Run the samples of `op` (every dtype that has some, or `dtypes`) through torch and through
    lower → execute with the rules of `registry` (default: all of ours)."""
    start = time.perf_counter()
    report = OpReport(op, has_rule=op in (RULES if registry is None else registry))
    seen: set[str] = set()  # each sample once, under the dtype it runs in
    for dtype in dtypes if dtypes is not None else sample_dtypes(op, cache_dir):
        errors: list[Dropped] = []
        calls = samples(op, dtype, budget=budget, cache_dir=cache_dir, seen=seen, dropped=errors)
        report.outcomes[dtype] = [run_call(call, registry=registry) for call in calls]
        if errors:
            report.generation_errors[dtype] = errors
    report.seconds = time.perf_counter() - start
    return report


def known_failures(op: str) -> list[KnownFailure]:
    return [k for k in KNOWN_FAILURES if k.op == op]


def unexpected_failures(report: OpReport) -> list[tuple[DType, Outcome]]:
    """Failures not covered by a recorded known failure."""
    return [(d, o) for d, o in report.failures() if report.known_failure(d, o) is None]
