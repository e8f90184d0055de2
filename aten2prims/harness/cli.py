"""`aten2prims check --ops`: the conformance harness from the command line."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

from ..ir.dtypes import DType
from ..schema.core_aten import CORE_ATEN_OPS
from .conformance import FAST_BUDGET, FULL_BUDGET, OpReport, check_op, unexpected_failures


def check_ops(pattern: str, *, dtypes: list[str] | None, json_path: str | None, full_budget: bool) -> int:
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise ValueError(f"bad --ops pattern {pattern!r}: {error}") from None
    ops = [op for op in sorted(CORE_ATEN_OPS) if regex.search(op)]
    if not ops:
        print(f"no Core ATen overload matches {pattern!r}", file=sys.stderr)
        return 2
    wanted = [DType.from_short(d) for d in dtypes] if dtypes else None
    budget = FULL_BUDGET if full_budget else FAST_BUDGET
    reports: list[OpReport] = []
    start = time.perf_counter()
    for index, op in enumerate(ops, 1):
        _progress(index, len(ops), op)
        reports.append(check_op(op, dtypes=wanted, budget=budget))
    _progress_done()
    elapsed = time.perf_counter() - start
    failing = 0
    print(f"{'overload':52s} {'passed/run':>11s}  status")
    for report in reports:
        passed, run = report.totals
        unexpected = unexpected_failures(report)
        failing += bool(unexpected)
        counts = report.status_counts()
        detail = ", ".join(f"{status.value} {count}" for status, count in counts.most_common() if status.value != "pass")
        verdict = "pass" if not report.failures() else ("known failures" if not unexpected else "FAIL")
        print(f"{report.op:52s} {passed:5d}/{run:<5d}  {verdict}{'  (' + detail + ')' if detail else ''}")
    total_passed = sum(r.totals[0] for r in reports)
    total_run = sum(r.totals[1] for r in reports)
    print(f"{len(reports) - failing} / {len(reports)} overloads without unexpected failures; "
          f"{total_passed} / {total_run} samples pass; {elapsed:.1f} s")
    if json_path:
        with open(json_path, "w") as handle:
            json.dump([_report_json(r) for r in reports], handle, indent=1)
    return 1 if failing else 0


def _report_json(report: OpReport) -> dict[str, Any]:
    return {
        "op": report.op,
        "dtypes": {
            dtype.short: [
                {"status": o.status.value, "call": o.call.describe(), "origin": o.call.origin, "message": o.message}
                for o in outcomes
            ]
            for dtype, outcomes in report.outcomes.items()
        },
        "extension_prims": sorted(report.extension_prims),
    }


def _progress(index: int, total: int, op: str) -> None:
    if sys.stderr.isatty():
        width = 30
        filled = width * index // total
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {index}/{total} {op[:50]:50s}")
        sys.stderr.flush()


def _progress_done() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 100 + "\r")
        sys.stderr.flush()
