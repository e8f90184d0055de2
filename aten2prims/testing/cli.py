"""`aten2prims check --ops`: the conformance harness from the command line.

Prints a progress bar (on a terminal), a table of samples passing / run per dtype for every
overload checked, the first messages of failing samples, and the totals; `--json FILE` writes
every sample's outcome and `--coverage FILE` writes docs/coverage.md."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TextIO

import attrs

from ..ir.dtypes import DType
from ..schema.core_aten import CORE_ATEN_OPS
from .budgets import FAST_BUDGET, FULL_BUDGET
from .conformance import OpReport, Verdict, check_op, unexpected_failures
from .coverage_report import write as write_coverage
from .samples import discover

# Failing samples shown per overload in the summary.
FAILURES_SHOWN = 3
_MESSAGE_LENGTH = 300


class HarnessUsageError(ValueError):
    """Options that do not go together (the CLI reports them as bad usage)."""


class HarnessWorkerError(RuntimeError):
    """A worker process of `check --ops --workers N` died."""


def check_ops(
    pattern: str,
    *,
    dtypes: Sequence[str] | None,
    json_path: str | None,
    full_budget: bool,
    coverage_path: str | None = None,
    registry: Any = None,
    cache_dir: str | os.PathLike[str] | None = None,
    out: TextIO | None = None,
    workers: int = 1,
) -> int:
    """Check the Core ATen overloads matching `pattern`; 0 when every failure is a known one,
    1 otherwise, 2 when nothing matches. With `workers` > 1 the overloads are checked in that
    many processes (the results are the same: no overload's samples or verdict depend on what
    ran before it)."""
    out = sys.stdout if out is None else out
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise HarnessUsageError(f"bad --ops pattern {pattern!r}: {error}") from None
    ops = [op for op in sorted(CORE_ATEN_OPS) if regex.search(op)]
    if not ops:
        print(f"no Core ATen overload matches {pattern!r}", file=sys.stderr)
        return 2
    try:
        wanted = [DType.from_short(d) for d in dtypes] if dtypes else None
    except ValueError as error:
        raise HarnessUsageError(str(error)) from None
    if coverage_path is not None and (len(ops) != len(CORE_ATEN_OPS) or wanted is not None):
        raise HarnessUsageError(
            "--coverage needs every overload and every dtype: drop the REGEX and --dtype"
        )
    if workers < 1:
        raise HarnessUsageError(f"--workers must be at least 1, got {workers}")
    if workers > 1 and registry is not None:
        raise HarnessUsageError("checking with other rules runs in one process (workers=1)")
    budget = FULL_BUDGET if full_budget else FAST_BUDGET
    reports: list[OpReport] = []
    start = time.perf_counter()
    progress = _Progress(len(ops), start)
    not_passing = 0
    progress.show(ops[0], not_passing=not_passing)
    for report in _reports(ops, wanted, budget, cache_dir, registry, workers):
        reports.append(report)
        not_passing += report.verdict is not Verdict.PASS
        if len(reports) < len(ops):
            progress.show(ops[len(reports)], not_passing=not_passing)
    progress.clear()
    elapsed = time.perf_counter() - start
    print_summary(reports, wanted, elapsed, out)
    if json_path:
        with open(json_path, "w") as handle:
            json.dump(details_json(reports, budget=budget, elapsed=elapsed), handle, indent=1)
            handle.write("\n")
    if coverage_path:
        write_coverage(coverage_path, reports, budget=budget)
        print(f"wrote {coverage_path}", file=out)
    return 1 if any(r.verdict in (Verdict.FAILING, Verdict.NO_RULE) for r in reports) else 0


def _reports(
    ops: Sequence[str],
    dtypes: Sequence[DType] | None,
    budget: int,
    cache_dir: str | os.PathLike[str] | None,
    registry: Any,
    workers: int,
) -> Iterator[OpReport]:
    """The overloads' reports, in the order of `ops`."""
    if workers == 1:
        for op in ops:
            yield check_op(op, dtypes=dtypes, budget=budget, cache_dir=cache_dir, registry=registry)
        return
    with tempfile.TemporaryDirectory() as scratch:
        # Discover once, here; the workers read the map from disk.
        shared = cache_dir if cache_dir is not None else scratch
        discover(shared)
        # Fresh interpreters: forking a process whose torch has started its thread pools can hang.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            jobs = [pool.submit(_check_portably, op, dtypes, budget, shared) for op in ops]
            for op, job in zip(ops, jobs):
                try:
                    yield job.result()
                except BrokenProcessPool:
                    raise HarnessWorkerError(
                        f"a worker process died while checking {op} or an overload after it "
                        f"(a crash in torch or NumPy, or a kill); rerun with --ops '^{re.escape(op)}$' "
                        "--workers 1 to see it"
                    ) from None


def _check_portably(
    op: str, dtypes: Sequence[DType] | None, budget: int, cache_dir: str | os.PathLike[str]
) -> OpReport:
    """check_op in a worker process, its report without the lowered graphs (only the summary,
    the JSON and docs/coverage.md use the report, and none of them needs a graph)."""
    report = check_op(op, dtypes=dtypes, budget=budget, cache_dir=cache_dir)
    report.outcomes = {
        dtype: [attrs.evolve(o, lowered=None) for o in outcomes]
        for dtype, outcomes in report.outcomes.items()
    }
    return report


def print_summary(
    reports: Sequence[OpReport], dtypes: Sequence[DType] | None, elapsed: float, out: TextIO
) -> None:
    """One line per overload with a column per dtype, then failing samples, then totals."""
    shown = list(dtypes) if dtypes else [d for d in DType if any(r.counts(d)[1] for r in reports)]
    cells = [[_cell(r.counts(d)) for d in shown] for r in reports]
    widths = [max([len(d.short)] + [len(row[i]) for row in cells]) for i, d in enumerate(shown)]
    name_width = max(len("overload"), *(len(r.op) for r in reports))
    totals = [_cell(r.totals) or "0/0" for r in reports]
    total_width = max(len("total"), *(len(t) for t in totals))

    def line(name: str, columns: Sequence[str], total: str, status: str) -> str:
        body = " ".join(c.rjust(w) for c, w in zip(columns, widths))
        return f"{name.ljust(name_width)}  {body}  {total.rjust(total_width)}  {status}".rstrip()

    print(line("overload", [d.short for d in shown], "total", "status"), file=out)
    for report, row, total in zip(reports, cells, totals):
        print(line(report.op, row, total, _status(report)), file=out)
    failing = [r for r in reports if r.verdict in (Verdict.FAILING, Verdict.NO_RULE)]
    if failing:
        print(f"\nfailing samples (the first {FAILURES_SHOWN} of each overload):", file=out)
    for report in failing:
        unexpected = unexpected_failures(report)
        if report.verdict is Verdict.NO_RULE:
            print(f"  {report.op}: no decomposition rule", file=out)
            continue
        if not unexpected:
            print(f"  {report.op}: no sample ran", file=out)
        for dtype, outcome in unexpected[:FAILURES_SHOWN]:
            print(
                f"  {report.op} [{dtype.short}] {outcome.status.value}: {outcome.call.describe()}"
                f"  ({outcome.call.origin or 'no origin'})",
                file=out,
            )
            print(f"      {_one_line(outcome.message)}", file=out)
        if len(unexpected) > FAILURES_SHOWN:
            print(f"  {report.op}: … and {len(unexpected) - FAILURES_SHOWN} more", file=out)
    verdicts = [r.verdict for r in reports]
    passed = sum(r.totals[0] for r in reports)
    run = sum(r.totals[1] for r in reports)
    print(
        f"\n{len(reports)} overload(s): {verdicts.count(Verdict.PASS)} pass, "
        f"{verdicts.count(Verdict.KNOWN_FAILURES)} with known failures only, {verdicts.count(Verdict.FAILING)} failing, "
        f"{verdicts.count(Verdict.NO_RULE)} without a rule; {passed} / {run} samples pass; {elapsed:.1f} s",
        file=out,
    )


def _cell(count: tuple[int, int]) -> str:
    passed, run = count
    return f"{passed}/{run}" if run else ""


def _status(report: OpReport) -> str:
    verdict = report.verdict
    if verdict is Verdict.PASS or verdict is Verdict.NO_RULE:
        return verdict.value
    if verdict is Verdict.KNOWN_FAILURES:
        return f"known failures ({len(report.failures())})"
    unexpected = len(unexpected_failures(report))
    return f"FAIL ({unexpected} unexpected)" if unexpected else "FAIL (no sample ran)"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MESSAGE_LENGTH else line[: _MESSAGE_LENGTH - 1] + "…"


def details_json(reports: Sequence[OpReport], *, budget: int, elapsed: float) -> dict[str, Any]:
    """Every overload's summary and every sample's outcome."""
    import torch

    overloads = []
    samples = []
    generation_errors: list[dict[str, str]] = []
    for report in reports:
        overloads.append(
            {
                "op": report.op,
                "family": CORE_ATEN_OPS[report.op][0],
                "status": report.verdict.value,
                "passed": report.totals[0],
                "run": report.totals[1],
                "dtypes": {
                    d.short: dict(zip(("passed", "run"), report.counts(d))) for d in report.outcomes
                },
                "extension_prims": sorted(report.extension_prims),
                "dropped": dict(sorted(report.dropped().items())),
                "seconds": round(report.seconds, 3),
            }
        )
        for dtype, errors in report.generation_errors.items():
            generation_errors.extend(
                {"op": report.op, "dtype": dtype.short, "origin": e.origin, "message": e.message}
                for e in errors
            )
        for dtype, outcomes in report.outcomes.items():
            for index, outcome in enumerate(outcomes):
                known = (
                    report.known_failure(dtype, outcome)
                    if outcome.status.counts_as_run and not outcome.passed
                    else None
                )
                samples.append(
                    {
                        "op": report.op,
                        "dtype": dtype.short,
                        "index": index,
                        "status": outcome.status.value,
                        "counts_as_run": outcome.status.counts_as_run,
                        "call": outcome.call.describe(),
                        "origin": outcome.call.origin,
                        "message": outcome.message,
                        "extension_prims": sorted(outcome.extension_prims),
                        "known_failure": known.reason if known is not None else None,
                    }
                )
    return {
        "torch": torch.__version__,
        "budget": budget,
        "seconds": round(elapsed, 3),
        "overloads": overloads,
        "samples": samples,
        "generation_errors": generation_errors,
    }


class _Progress:
    """A one-line progress bar on stderr, drawn only on a terminal."""

    def __init__(self, total: int, start: float) -> None:
        self.total = total
        self.start = start
        self.index = 0
        self.enabled = sys.stderr.isatty()

    def show(self, op: str, *, not_passing: int) -> None:
        self.index += 1
        if not self.enabled:
            return
        width = 30
        filled = width * (self.index - 1) // self.total
        elapsed = time.perf_counter() - self.start
        flag = f" {not_passing} not passing" if not_passing else ""
        text = f"[{'#' * filled}{'.' * (width - filled)}] {self.index}/{self.total} {elapsed:5.0f}s{flag} {op}"
        sys.stderr.write("\r\x1b[K" + text[: _terminal_width() - 1])
        sys.stderr.flush()

    def clear(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _terminal_width() -> int:
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        columns = 0
    return columns or 100  # a pseudo-terminal may report 0 columns
