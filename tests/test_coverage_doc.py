"""docs/coverage.md against the registries: the committed file must state the current overloads,
rules, known failures and prims (the sample counts it states are checked by running the samples:
tests/test_conformance.py). And the check itself must notice each kind of change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from aten2prims.ir.dtypes import DType
from aten2prims.testing.budgets import FAST_BUDGET, FULL_BUDGET
from aten2prims.testing.conformance import OpReport
from aten2prims.testing.coverage_report import (
    Registries,
    documented_overloads,
    out_of_date,
    regenerate_command,
    render,
    sections,
)
from aten2prims.testing.known_failures import KnownFailure
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import Outcome, Status
from aten2prims.testing.samples import GENERATION_ERROR, Dropped

COVERAGE = Path(__file__).resolve().parents[1] / "docs" / "coverage.md"


def test_committed_coverage_doc_matches_the_registries() -> None:
    assert COVERAGE.exists(), (
        f"docs/coverage.md is missing; generate it with: {regenerate_command(FULL_BUDGET)}"
    )
    problems = out_of_date(COVERAGE.read_text(), Registries.current())
    assert not problems, (
        "docs/coverage.md is out of date:\n"
        + "\n".join(f"- {p}" for p in problems)
        + f"\nRegenerate it (one full harness run) with:\n    {regenerate_command(FULL_BUDGET)}"
    )


# -- the check on a small synthetic registry ---------------------------------------------------------


def _outcome(op: str, status: Status, shape: list[int]) -> Outcome:
    return Outcome(
        AtenCall(op, (tuple(shape),), {}, origin="handwritten"),
        status,
        "" if status is Status.PASS else "off",
    )


REGISTRIES = Registries(
    families={
        "aten.abs.default": "E",
        "aten.add.Tensor": "E",
        "aten.view.default": "S",
        "aten.mm.default": "N",
    },
    rules=frozenset({"aten.abs.default", "aten.add.Tensor", "aten.view.default"}),
    known_failures=(
        KnownFailure("aten.add.Tensor", "why | it fails", frozenset({DType.float16}), r"\(\[7\]\)"),
    ),
    torch_prims={"abs": "implemented", "add": "implemented", "copy_to": "omitted: writes in place"},
    extension_prims={"sort": "a stable sort"},
    torch_version="2.13.0+cpu",
)


def _reports() -> list[OpReport]:
    pass_ = Status.PASS
    return [
        OpReport(
            "aten.abs.default",
            {DType.float32: [_outcome("aten.abs.default", pass_, [2])] * 2},
            known=(),
        ),
        OpReport(
            "aten.add.Tensor",
            {
                DType.float16: [
                    _outcome("aten.add.Tensor", pass_, [3]),
                    _outcome("aten.add.Tensor", Status.WRONG_VALUE, [7]),
                ],
                DType.int64: [_outcome("aten.add.Tensor", pass_, [3])],
                DType.bool: [_outcome("aten.add.Tensor", Status.TORCH_UNSUPPORTED, [3])],
            },
            {DType.float16: [Dropped("opinfo:add f16", GENERATION_ERROR, "ValueError: no")]},
            known=(),
        ),
        OpReport(
            "aten.view.default",
            {
                DType.float32: [
                    _outcome("aten.view.default", Status.WRONG_SHAPE, [4]),
                    _outcome("aten.view.default", Status.UNREPRESENTABLE, [6]),
                ]
            },
            known=(),
        ),
        OpReport(
            "aten.mm.default",
            {DType.float32: [_outcome("aten.mm.default", Status.NOT_LOWERED, [5])]},
            known=(),
        ),
    ]


DOCUMENT = render(_reports(), REGISTRIES, budget=FULL_BUDGET)


def test_a_freshly_rendered_document_is_up_to_date() -> None:
    assert out_of_date(DOCUMENT, REGISTRIES) == []


def test_the_document_states_statuses_counts_and_totals() -> None:
    assert documented_overloads(DOCUMENT) == {
        "aten.abs.default": ("E", "pass"),
        "aten.add.Tensor": ("E", "known failures"),  # judged by the registries' known failures
        "aten.view.default": ("S", "failing"),
        "aten.mm.default": ("N", "no rule"),
    }
    table = sections(DOCUMENT)["## Overloads"]
    row = next(line for line in table.splitlines() if line.startswith("| `aten.add.Tensor`"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    by_dtype = dict(zip([d.short for d in DType], cells[2:14]))
    # Samples torch rejects do not count as run: the bool column is blank.
    assert by_dtype == {**{d.short: "" for d in DType}, "i64": "1/1", "f16": "**1/2**"}
    totals = sections(DOCUMENT)["## Totals"]
    assert "| **all** | 4 | 1 | 1 | 1 | 1 | 4 / 7 |" in totals
    assert "**1 / 4 overloads fully passing; 4 / 7 samples passing.**" in totals
    failing = sections(DOCUMENT)["## Failing overloads"]
    assert (
        "### `aten.view.default`" in failing
        and "wrong shape" in failing
        and "aten.add" not in failing
    )
    assert "- torch: `2.13.0+cpu`" in DOCUMENT and f"- budget: {FULL_BUDGET} samples" in DOCUMENT
    assert regenerate_command(FULL_BUDGET) in DOCUMENT


def test_dropped_samples_are_reported_per_overload_and_reason() -> None:
    """Samples that never reached the comparison count nowhere else: listed by reason."""
    dropped = sections(DOCUMENT)["## Dropped samples"].splitlines()
    header = "| overload | unsupported by torch | unrepresentable | generation error | total |"
    assert header in dropped
    assert "| `aten.add.Tensor` | 1 |  | 1 | 2 |" in dropped
    assert "| `aten.view.default` |  | 1 |  | 1 |" in dropped
    assert "| **all** | 1 | 1 | 1 | 3 |" in dropped
    assert not any(line.startswith(("| `aten.abs", "| `aten.mm")) for line in dropped)
    assert "3 more were generated but never compared" in sections(DOCUMENT)["## Totals"]


def test_rendering_is_deterministic() -> None:
    assert render(list(reversed(_reports())), REGISTRIES, budget=FULL_BUDGET) == DOCUMENT
    assert render(_reports(), REGISTRIES, budget=FULL_BUDGET) == DOCUMENT


def test_a_known_failure_covering_nothing_is_reported() -> None:
    unused = KnownFailure("aten.abs.default", "stale", frozenset({DType.int8}))
    registries = attrs.evolve(REGISTRIES, known_failures=(*REGISTRIES.known_failures, unused))
    totals = sections(render(_reports(), registries, budget=FULL_BUDGET))["## Totals"]
    assert (
        "covered no failing sample" in totals and "- `aten.abs.default`, i8, every call" in totals
    )


def _changed(**changes: object) -> Registries:
    return attrs.evolve(REGISTRIES, **changes)


CHANGES: dict[str, tuple[Callable[[], Registries], str]] = {
    "overload added": (
        lambda: _changed(families={**REGISTRIES.families, "aten.neg.default": "E"}),
        "aten.neg.default: a Core ATen overload missing",
    ),
    "overload removed": (
        lambda: _changed(
            families={k: v for k, v in REGISTRIES.families.items() if k != "aten.view.default"}
        ),
        "aten.view.default: in the overloads table but not a Core ATen overload",
    ),
    "family changed": (
        lambda: _changed(families={**REGISTRIES.families, "aten.mm.default": "S"}),
        "aten.mm.default: documented in family N, is in family S",
    ),
    "rule added": (
        lambda: _changed(rules=REGISTRIES.rules | {"aten.mm.default"}),
        "aten.mm.default: documented as 'no rule', but a rule is registered",
    ),
    "rule removed": (
        lambda: _changed(rules=REGISTRIES.rules - {"aten.abs.default"}),
        "aten.abs.default: documented as 'pass', but no rule is registered",
    ),
    "known failure added": (
        lambda: _changed(
            known_failures=(*REGISTRIES.known_failures, KnownFailure("aten.abs.default", "new"))
        ),
        "section '## Known failures' differs",
    ),
    "known failure removed": (
        lambda: _changed(known_failures=()),
        "aten.add.Tensor: documented with known failures, but none is recorded",
    ),
    "known failure narrowed": (
        lambda: _changed(known_failures=(attrs.evolve(REGISTRIES.known_failures[0], dtypes=None),)),
        "section '## Known failures' differs",
    ),
    "prim implemented": (
        lambda: _changed(torch_prims={**REGISTRIES.torch_prims, "copy_to": "implemented"}),
        "section '## Prims' differs",
    ),
    "prim added": (
        lambda: _changed(torch_prims={**REGISTRIES.torch_prims, "neg": "not implemented"}),
        "section '## Prims' differs",
    ),
    "extension prim added": (
        lambda: _changed(extension_prims={**REGISTRIES.extension_prims, "nonzero": "coordinates"}),
        "section '## Prims' differs",
    ),
    "extension prim removed": (lambda: _changed(extension_prims={}), "section '## Prims' differs"),
    "torch upgraded": (
        lambda: _changed(torch_version="2.14.0"),
        "generated with torch 2.13.0+cpu, running torch 2.14.0",
    ),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_each_kind_of_change_makes_the_document_out_of_date(change: str) -> None:
    registries, expected = CHANGES[change]
    problems = out_of_date(DOCUMENT, registries())
    assert any(expected in problem for problem in problems), problems


def test_hand_edits_of_the_header_are_noticed() -> None:
    assert any(
        "budget 7" in p
        for p in out_of_date(DOCUMENT.replace(f"budget: {FULL_BUDGET} ", "budget: 7 "), REGISTRIES)
    )
    fast = render(_reports(), REGISTRIES, budget=FAST_BUDGET)
    assert out_of_date(fast, REGISTRIES) == [] and "(fast budget)" in fast
