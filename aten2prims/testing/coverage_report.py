"""docs/coverage.md: what the conformance harness found for every Core ATen overload, and which
prims exist — generated, committed, and checked against the registries by the test suite.

The document has two kinds of content. What the registries alone determine (the overloads and
their families, which have a rule, the known failures, the prims) is rendered from a
`Registries` snapshot, so `out_of_date` can re-render it and compare without running a single
sample. What running the samples found (counts per dtype, statuses, failure messages) can only
be checked by running them: that is the conformance tests' job.

Regenerate (about the time of one full-budget harness run):

    aten2prims check --ops --full-budget --coverage docs/coverage.md
"""

from __future__ import annotations

import difflib
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from decompositions import RULES
from prims.registry import PRIMS
from prims.torch_prims import TORCH_PRIMS

from ..ir.dtypes import DType
from ..schema.core_aten import CORE_ATEN_OPS
from .budgets import FAST_BUDGET, FULL_BUDGET
from .conformance import OpReport, Verdict
from .known_failures import KNOWN_FAILURES, KnownFailure
from .runner import Status
from .samples import GENERATION_ERROR

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"

FAMILIES = {
    "E": "elementwise, comparison, reduction",
    "S": "shape, view, indexing, creation, random, sort, metadata",
    "N": "linear algebra, convolution, pooling, normalization, resampling, embedding, fft, backward",
}

# Failing samples listed per failing overload.
_FAILURES_SHOWN = 5
_MESSAGE_LENGTH = 400

_TITLE = "# Core ATen coverage"
# Why a sample never reached the comparison, in the order of the dropped samples' columns.
DROP_REASONS = (Status.TORCH_UNSUPPORTED.value, Status.UNREPRESENTABLE.value, GENERATION_ERROR)
_KNOWN_FAILURES = "## Known failures"
_PRIMS = "## Prims"


def regenerate_command(budget: int) -> str:
    return f"aten2prims check --ops{' --full-budget' if budget == FULL_BUDGET else ''} --coverage docs/coverage.md"


@attrs.frozen
class Registries:
    """Everything docs/coverage.md states that follows from the code without running samples."""

    families: Mapping[str, str]  # Core ATen overload -> family letter
    rules: frozenset[str]  # overloads with a decomposition rule
    known_failures: tuple[KnownFailure, ...]
    torch_prims: Mapping[
        str, str
    ]  # torch prim -> "implemented", "omitted: <reason>" or "not implemented"
    extension_prims: Mapping[str, str]  # extension prim -> what it computes
    torch_version: str

    @classmethod
    def current(cls) -> Registries:
        import torch

        def prim_status(name: str) -> str:
            definition = PRIMS.get(name)
            if definition is not None and definition.implemented:
                return "implemented"
            if definition is not None and definition.omitted_reason:
                return f"omitted: {definition.omitted_reason}"
            return "not implemented"

        return cls(
            families={op: family for op, (family, _) in CORE_ATEN_OPS.items()},
            rules=frozenset(op for op in CORE_ATEN_OPS if op in RULES),
            known_failures=tuple(KNOWN_FAILURES),
            torch_prims={name: prim_status(name) for name in TORCH_PRIMS},
            extension_prims={name: d.doc for name, d in PRIMS.items() if d.extension},
            torch_version=torch.__version__,
        )


# -- rendering -------------------------------------------------------------------------------------


def render(reports: Iterable[OpReport], registries: Registries, *, budget: int) -> str:
    """The whole document, from one report per Core ATen overload."""
    by_op = {report.op: report for report in reports}
    missing = sorted(set(registries.families) - set(by_op))
    if missing:
        raise ValueError(
            f"docs/coverage.md needs every Core ATen overload; no report for {', '.join(missing)}"
        )
    ops = sorted(registries.families, key=lambda op: ("ESN".index(registries.families[op]), op))
    rows = [_Row.of(by_op[op], registries) for op in ops]
    parts = [
        _header(registries, budget),
        _totals(rows, registries),
        _overloads(rows),
        _dropped(rows),
        render_known_failures(registries),
        _failing(rows),
        render_prims(registries),
    ]
    return "\n\n".join(part.rstrip("\n") for part in parts) + "\n"


@attrs.frozen
class _Row:
    op: str
    family: str
    verdict: Verdict
    counts: dict[DType, tuple[int, int]]  # dtypes where a sample ran
    extension_prims: tuple[str, ...]
    report: OpReport

    @classmethod
    def of(cls, report: OpReport, registries: Registries) -> _Row:
        # The registries judge the outcomes, whatever the report was run with.
        report = attrs.evolve(
            report,
            has_rule=report.op in registries.rules,
            known=tuple(k for k in registries.known_failures if k.op == report.op),
        )
        counts = {d: report.counts(d) for d in DType if report.counts(d)[1]}
        return cls(
            report.op,
            registries.families[report.op],
            report.verdict,
            counts,
            tuple(sorted(report.extension_prims)),
            report,
        )

    @property
    def totals(self) -> tuple[int, int]:
        return sum(p for p, _ in self.counts.values()), sum(r for _, r in self.counts.values())


def _header(registries: Registries, budget: int) -> str:
    kind = "full" if budget == FULL_BUDGET else "fast" if budget == FAST_BUDGET else "custom"
    return f"""{_TITLE}

<!-- Generated by the conformance harness; do not edit. Regenerate with: {regenerate_command(budget)} -->

Every Core ATen overload, run on its OpInfo and hand-written samples through torch and through
lower → execute, dtype by dtype, and judged by the harness's tolerance rule; how it works is in
[harness.md](harness.md). `tests/test_coverage_doc.py` fails when this file no longer matches
the registries (overloads, rules, known failures, prims).

- generated by: `{regenerate_command(budget)}`
- torch: `{registries.torch_version}`
- budget: {budget} samples per overload and dtype ({kind} budget); fixed seeds"""


def _totals(rows: Sequence[_Row], registries: Registries) -> str:
    lines = [
        "## Totals",
        "",
        "| family | overloads | fully passing | known failures | failing | no rule | samples passing / run |",
        "|---|---|---|---|---|---|---|",
    ]
    for family, description in FAMILIES.items():
        lines.append(
            _totals_row(f"{family}: {description}", [r for r in rows if r.family == family])
        )
    lines.append(_totals_row("**all**", rows))
    passing = sum(r.verdict is Verdict.PASS for r in rows)
    passed = sum(r.totals[0] for r in rows)
    run = sum(r.totals[1] for r in rows)
    dropped = sum(sum(r.report.dropped().values()) for r in rows)
    lines += [
        "",
        f"**{passing} / {len(rows)} overloads fully passing; {passed} / {run} samples passing.**",
        "",
        f"Each sample is counted once, under the dtype it runs in; {dropped} more were generated "
        "but never compared (see [dropped samples](#dropped-samples)).",
    ]
    unused = _unused_known_failures(rows, registries)
    if unused:
        lines += [
            "",
            "Known failures that covered no failing sample in this run (remove them if they no longer fail):",
            "",
        ]
        lines += [f"- `{k.op}`, {_scope(k)}" for k in unused]
    return "\n".join(lines)


def _totals_row(label: str, rows: Sequence[_Row]) -> str:
    verdicts = [r.verdict for r in rows]
    passed = sum(r.totals[0] for r in rows)
    run = sum(r.totals[1] for r in rows)
    cells = (
        [label, str(len(rows))] + [str(verdicts.count(v)) for v in Verdict] + [f"{passed} / {run}"]
    )
    return "| " + " | ".join(cells) + " |"


def _unused_known_failures(rows: Sequence[_Row], registries: Registries) -> list[KnownFailure]:
    used = {row.report.known_failure(d, o) for row in rows for d, o in row.report.failures()}
    return [k for k in registries.known_failures if k not in used]


def _overloads(rows: Sequence[_Row]) -> str:
    dtypes = list(DType)
    lines = [
        "## Overloads",
        "",
        "Cells: samples passing / samples run for that dtype, in bold where some fail; blank where no\n"
        "sample of the dtype ran (samples torch itself rejects do not count as run). Status: **pass**\n"
        "(every sample passes), **known failures** (every failure is a recorded known failure, below),\n"
        "**failing** (some failure is not, or no sample ran; listed below), **no rule**. Extension\n"
        "prims: the [extension prims](prims.md#extension-prims) the lowered samples use.",
        "",
        "| overload | family | "
        + " | ".join(d.short for d in dtypes)
        + " | status | extension prims |",
        "|---|---|" + "---|" * len(dtypes) + "---|---|",
    ]
    for row in rows:
        cells = [f"`{row.op}`", row.family] + [_count_cell(row.counts.get(d)) for d in dtypes]
        cells += [row.verdict.value, ", ".join(f"`{p}`" for p in row.extension_prims)]
        lines.append(_table_row(cells))
    per_dtype = []
    for dtype in dtypes:
        counted = [r.counts[dtype] for r in rows if dtype in r.counts]
        per_dtype.append(
            _count_cell((sum(p for p, _ in counted), sum(r for _, r in counted))) if counted else ""
        )
    lines.append(_table_row(["**all**", ""] + per_dtype + ["", ""]))
    return "\n".join(lines)


def _dropped(rows: Sequence[_Row]) -> str:
    lines = [
        "## Dropped samples",
        "",
        "Samples generated for an overload that never reached the comparison and count nowhere\n"
        "else, by reason. *Unsupported by torch*: torch raised on the call itself (OpInfo samples of\n"
        "argument kinds the kernel refuses, or a call recorded inside a function that torch refuses\n"
        "when replayed alone). *Unrepresentable*: the call holds something the IR does not model (a\n"
        "dtype outside the 12, a generator). *Generation error*: OpInfo's sample generator raised,\n"
        "or OpInfo's function raised on the sample, which so reached no overload. No hand-written\n"
        "sample is among them (`tests/test_handwritten_samples.py`).",
        "",
        "| overload | " + " | ".join(DROP_REASONS) + " | total |",
        "|---|" + "---|" * (len(DROP_REASONS) + 1),
    ]
    totals = [0] * len(DROP_REASONS)
    for row in rows:
        reasons = row.report.dropped()
        if not reasons:
            continue
        counts = [reasons.get(reason, 0) for reason in DROP_REASONS]
        totals = [t + c for t, c in zip(totals, counts)]
        lines.append(
            _table_row([f"`{row.op}`", *(str(c) if c else "" for c in counts), str(sum(counts))])
        )
    lines.append(_table_row(["**all**", *(str(t) for t in totals), str(sum(totals))]))
    return "\n".join(lines)


def _count_cell(count: tuple[int, int] | None) -> str:
    if count is None:
        return ""
    passed, run = count
    return f"{passed}/{run}" if passed == run else f"**{passed}/{run}**"


def _table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def render_known_failures(registries: Registries) -> str:
    """The known failures section: from the registry of known failures alone."""
    lines = [
        _KNOWN_FAILURES,
        "",
        "Failures recorded on purpose in `aten2prims/testing/known_failures.py`, each with its reason;\n"
        "the conformance tests accept these and nothing else.",
        "",
    ]
    if not registries.known_failures:
        lines.append("None recorded.")
    # In the registry's order: a reason may refer to the one before it.
    for known in registries.known_failures:
        lines.append(f"- `{known.op}`, {_scope(known)}: {_one_line(known.reason)}")
    return "\n".join(lines)


def _scope(known: KnownFailure) -> str:
    dtypes = (
        "every dtype"
        if known.dtypes is None
        else " ".join(d.short for d in DType if d in known.dtypes)
    )
    calls = "every call" if known.pattern is None else f"calls matching {_code(known.pattern)}"
    return f"{dtypes}, {calls}"


def _code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    fence = "`"
    while fence in text:
        fence += "`"
    padding = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{padding}{text}{padding}{fence}"


def _one_line(text: str, limit: int | None = None) -> str:
    line = " ".join(text.split())
    return line if limit is None or len(line) <= limit else line[: limit - 1] + "…"


def _failing(rows: Sequence[_Row]) -> str:
    lines = ["## Failing overloads", ""]
    failing = [r for r in rows if r.verdict is Verdict.FAILING]
    if not failing:
        lines.append("None.")
    for row in failing:
        unexpected = [
            (d, o) for d, o in row.report.failures() if row.report.known_failure(d, o) is None
        ]
        lines.append(f"### `{row.op}`")
        lines.append("")
        if not unexpected:
            lines.append("- no sample ran: it needs hand-written samples")
        for dtype, outcome in unexpected[:_FAILURES_SHOWN]:
            lines.append(
                f"- {dtype.short}, {outcome.status.value}: {_code(outcome.call.describe())} "
                f"({outcome.call.origin or 'no origin'}): {_one_line(outcome.message, _MESSAGE_LENGTH)}"
            )
        if len(unexpected) > _FAILURES_SHOWN:
            lines.append(f"- … and {len(unexpected) - _FAILURES_SHOWN} more")
        lines.append("")
    return "\n".join(lines)


def render_prims(registries: Registries) -> str:
    """The prims section: from the prims registry alone."""
    statuses = registries.torch_prims
    implemented = sorted(name for name, status in statuses.items() if status == "implemented")
    others = sorted(name for name in statuses if name not in implemented)
    lines = [
        _PRIMS,
        "",
        "Every prim's dtypes, semantics and differences from torch: [prims.md](prims.md).",
        "",
        f"**{len(implemented)} / {len(statuses)} torch prims implemented.**",
        "",
    ]
    if others:
        lines += ["| torch prim | status |", "|---|---|"]
        lines += [_table_row([f"`{name}`", _escape_cell(statuses[name])]) for name in others]
        lines.append("")
    lines += textwrap.wrap(
        "Implemented: " + ", ".join(f"`{name}`" for name in implemented) + ".", width=100
    )
    extensions = registries.extension_prims
    lines += [
        "",
        f"**Extension prims: {len(extensions)}** (ours, not torch's; why each exists: "
        "[prims.md](prims.md#extension-prims)).",
        "",
    ]
    if extensions:
        lines += ["| extension prim | computes |", "|---|---|"]
        lines += [
            _table_row([f"`{name}`", _escape_cell(_one_line(extensions[name]))])
            for name in sorted(extensions)
        ]
    return "\n".join(lines)


def _escape_cell(text: str) -> str:
    return text.replace("|", "\\|")


# -- checking the committed document ---------------------------------------------------------------


def sections(text: str) -> dict[str, str]:
    """The document's `## ` sections by heading line, each up to the next one (trailing blank
    lines dropped)."""
    found: dict[str, str] = {}
    heading = None
    body: list[str] = []
    for line in text.splitlines():
        if line.startswith("## "):
            if heading is not None:
                found[heading] = "\n".join(body).rstrip("\n")
            heading, body = line, [line]
        elif heading is not None:
            body.append(line)
    if heading is not None:
        found[heading] = "\n".join(body).rstrip("\n")
    return found


def documented_overloads(text: str) -> dict[str, tuple[str, str]]:
    """overload -> (family, status) as the document's overloads table states them."""
    table = sections(text).get("## Overloads", "")
    found = {}
    for line in table.splitlines():
        match = re.match(r"\| `(aten\.[^`]+)` \|", line)
        if match:
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            found[match.group(1)] = (cells[1], cells[-2])
    return found


def out_of_date(text: str, registries: Registries) -> list[str]:
    """How the document disagrees with the registries (empty when it is up to date as far as
    that can be told without running samples)."""
    problems: list[str] = []
    header = text.split("\n## ", 1)[0]
    version = re.search(r"^- torch: `([^`]+)`", header, re.M)
    if version is None or version.group(1) != registries.torch_version:
        problems.append(
            f"generated with torch {version.group(1) if version else '(unknown)'}, "
            f"running torch {registries.torch_version}"
        )
    budget = re.search(r"^- budget: (\d+) samples", header, re.M)
    if budget is None or int(budget.group(1)) not in (FAST_BUDGET, FULL_BUDGET):
        problems.append(
            f"generated with budget {budget.group(1) if budget else '(unknown)'}, "
            f"the harness's budgets are {FAST_BUDGET} (fast) and {FULL_BUDGET} (full)"
        )
    documented = documented_overloads(text)
    for op in sorted(set(registries.families) - set(documented)):
        problems.append(f"{op}: a Core ATen overload missing from the overloads table")
    for op in sorted(set(documented) - set(registries.families)):
        problems.append(f"{op}: in the overloads table but not a Core ATen overload")
    statuses = {v.value for v in Verdict}
    known_ops = {k.op for k in registries.known_failures}
    for op, (family, status) in sorted(documented.items()):
        if op not in registries.families:
            continue
        if family != registries.families[op]:
            problems.append(
                f"{op}: documented in family {family}, is in family {registries.families[op]}"
            )
        if status not in statuses:
            problems.append(f"{op}: unknown status {status!r}")
        elif (status == Verdict.NO_RULE.value) != (op not in registries.rules):
            problems.append(
                f"{op}: documented as {status!r}, but "
                f"{'a rule is registered' if op in registries.rules else 'no rule is registered'}"
            )
        elif status == Verdict.KNOWN_FAILURES.value and op not in known_ops:
            problems.append(f"{op}: documented with known failures, but none is recorded for it")
    present = sections(text)
    for expected in (render_known_failures(registries), render_prims(registries)):
        heading = expected.splitlines()[0]
        actual = present.get(heading)
        if actual != expected:
            diff = difflib.unified_diff(
                (actual or "").splitlines(),
                expected.splitlines(),
                "committed",
                "registries",
                lineterm="",
                n=0,
            )
            problems.append(
                f"section {heading!r} differs from the registries:\n" + "\n".join(list(diff)[:30])
            )
    return problems


# -- entry point -----------------------------------------------------------------------------------


def write(path: str | Path, reports: Iterable[OpReport], *, budget: int) -> None:
    Path(path).write_text(render(reports, Registries.current(), budget=budget))
