"""`aten2prims check --ops`: the summary table, failing samples' messages, the JSON details, exit
codes and usage errors, on a couple of fast overloads."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import prims
from aten2prims.cli import main
from aten2prims.testing.cli import HarnessUsageError, check_ops
from decompositions import RuleRegistry

SAMPLE_FIELDS = {
    "op",
    "dtype",
    "index",
    "status",
    "counts_as_run",
    "call",
    "origin",
    "message",
    "extension_prims",
    "known_failure",
}


def test_passing_overloads_print_a_table_per_dtype_and_write_every_sample(
    tmp_path: Path, capsys
) -> None:
    details = tmp_path / "details.json"
    code = main(
        [
            "check",
            "--ops",
            r"^aten\.(neg\.default|rand\.default)$",
            "--dtype",
            "f32",
            "--dtype",
            "i64",
            "--json",
            str(details),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].split() == ["overload", "f32", "i64", "total", "status"]
    neg = next(line.split() for line in lines if line.startswith("aten.neg.default"))
    assert neg == ["aten.neg.default", "4/4", "4/4", "8/8", "pass"]
    rand = next(line.split() for line in lines if line.startswith("aten.rand.default"))
    assert rand == ["aten.rand.default", "4/4", "4/4", "pass"]  # rand makes no int64 tensors
    assert (
        "2 overload(s): 2 pass, 0 with known failures only, 0 failing, 0 without a rule; 12 / 12 samples pass"
        in out
    )
    assert "failing samples" not in out

    data = json.loads(details.read_text())
    assert data["budget"] == 4 and data["torch"].startswith("2.13")
    assert [o["op"] for o in data["overloads"]] == ["aten.neg.default", "aten.rand.default"]
    assert data["overloads"][0]["dtypes"] == {
        "i64": {"passed": 4, "run": 4},
        "f32": {"passed": 4, "run": 4},
    }
    assert len(data["samples"]) == 12
    for sample in data["samples"]:
        assert set(sample) == SAMPLE_FIELDS
        assert sample["status"] == "pass" and sample["known_failure"] is None
        assert sample["call"].startswith(sample["op"] + "(")
        assert sample["origin"] == "handwritten" or sample["origin"].startswith("opinfo:")
    assert [
        s["index"] for s in data["samples"] if s["op"] == "aten.neg.default" and s["dtype"] == "f32"
    ] == [0, 1, 2, 3]


def _abs_as_negation() -> RuleRegistry:
    wrong = RuleRegistry()

    @wrong.register("aten.abs.default")
    def abs_(self: Any) -> Any:
        return prims.neg(self)

    return wrong


def test_a_failing_overload_exits_1_and_shows_its_failing_samples(tmp_path: Path) -> None:
    out = io.StringIO()
    details = tmp_path / "details.json"
    code = check_ops(
        r"^aten\.abs\.default$",
        dtypes=["f64"],
        json_path=str(details),
        full_budget=False,
        registry=_abs_as_negation(),
        out=out,
    )
    text = out.getvalue()
    assert code == 1
    row = next(line for line in text.splitlines() if line.startswith("aten.abs.default"))
    passed = int(row.split()[1].split("/")[0])
    assert passed < 4 and row.split()[1:3] == [f"{passed}/4"] * 2  # negation is right on zeros only
    assert row.endswith(f"FAIL ({4 - passed} unexpected)")
    assert "failing samples (the first 3 of each overload):" in text
    assert "aten.abs.default [f64] wrong value: aten.abs.default(float64[" in text
    assert "element(s) outside rtol=1e-07" in text
    assert "1 failing" in text
    data = json.loads(details.read_text())
    assert data["overloads"][0]["status"] == "failing"
    assert {s["status"] for s in data["samples"]} >= {"wrong value"}
    wrong = [s for s in data["samples"] if s["status"] == "wrong value"]
    assert all(s["message"].startswith("output 0:") and s["known_failure"] is None for s in wrong)


def test_an_overload_without_a_rule_exits_1() -> None:
    out = io.StringIO()
    code = check_ops(
        r"^aten\.neg\.default$",
        dtypes=["f32"],
        json_path=None,
        full_budget=False,
        registry=_abs_as_negation(),
        out=out,
    )
    assert code == 1
    assert "aten.neg.default: no decomposition rule" in out.getvalue()
    assert next(
        line for line in out.getvalue().splitlines() if line.startswith("aten.neg")
    ).endswith("no rule")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "--ops", "nothing-matches-this"], "no Core ATen overload matches"),
        (["check", "--ops", "("], "bad --ops pattern"),
        (["check", "--ops", "neg", "--dtype", "f99"], "unknown dtype 'f99'"),
        (
            ["check", "--ops", "neg", "--coverage", "x.md"],
            "--coverage needs every overload and every dtype",
        ),
        (
            ["check", "--ops", "--dtype", "f32", "--coverage", "x.md"],
            "--coverage needs every overload",
        ),
        (["check", "--json", "x.json"], "go with --ops"),
        (["check", "model.pt2", "--workers", "2"], "go with --ops"),
        (["check", "--ops", "neg", "--workers", "0"], "--workers must be at least 1"),
    ],
)
def test_bad_usage_exits_2_with_one_line(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_harness_usage_errors_are_value_errors() -> None:
    with pytest.raises(HarnessUsageError, match="--coverage"):
        check_ops("abs", dtypes=None, json_path=None, full_budget=False, coverage_path="x.md")


def test_opinfo_samples_are_the_same_in_every_run() -> None:
    """OpInfo samples come from torch's generator in a state seeded per OpInfo and dtype: whatever
    the global generator did before or does between two samples, the same calls come out, and
    the caller's generator sees only its own draws."""
    import torch

    from aten2prims.ir.dtypes import DType
    from aten2prims.testing.samples import samples

    def keys() -> list[str]:
        found = []
        for call in samples("aten.mul.Tensor", DType.float32, budget=12):
            torch.rand(7)  # the consumer's own use of the generator, between samples
            found.append(call.key())
        return found

    torch.manual_seed(1)
    first = keys()
    torch.manual_seed(2)
    second = keys()
    after = torch.random.get_rng_state()
    assert len(first) == 12 and first == second
    torch.manual_seed(2)
    for _ in range(12):
        torch.rand(7)
    assert torch.equal(after, torch.random.get_rng_state())


def test_recorded_calls_never_read_uninitialized_memory() -> None:
    """A tensor from `empty` is zero-filled while recording, so a call reading it records the same
    arguments every time (its contents are unspecified; torch leaves whatever the memory held)."""
    import torch

    from aten2prims.testing.record import record_core_calls

    def read_empty() -> None:
        torch.add(torch.empty(4096, dtype=torch.uint8), 1)

    first, second = record_core_calls(read_empty), record_core_calls(read_empty)
    adds = [call for call in first if call.op == "aten.add.Tensor"]
    assert adds and not adds[0].args[0].any()
    assert [call.key() for call in first] == [call.key() for call in second]


def test_a_sample_counts_once_under_the_dtype_it_runs_in(opinfo_cache_dir: str) -> None:
    """`full([3, 1], value)` without a dtype runs in the dtype torch gives the value: it counts
    under that dtype only (OpInfo's per-dtype loop used to count such calls under every dtype),
    and no sample counts twice."""
    from aten2prims.testing.conformance import check_op

    report = check_op("aten.full.default", cache_dir=opinfo_cache_dir)
    described = {
        dtype.short: [o.call.describe() for o in outcomes]
        for dtype, outcomes in report.outcomes.items()
    }
    for value, dtype in (("True", "b8"), ("-3", "i64"), ("2.75", "f32"), ("(1.5-2j)", "c64")):
        call = f"aten.full.default([3, 1], {value})"
        assert [d for d, calls in described.items() if call in calls] == [dtype], call
    keys = [o.call.key() for outcomes in report.outcomes.values() for o in outcomes]
    assert len(keys) == len(set(keys))


def test_recorded_calls_are_told_apart_by_lineage_not_computed_bits() -> None:
    """A recorded call's key stands for what computed its tensors, from the sample's inputs'
    contents, not for the computed bits (which depend on the CPU's kernels): the same
    computation has the same key in every recording, and equal bits computed two ways do not
    make two calls duplicates."""
    import torch

    from aten2prims.testing.record import record_core_calls

    x = torch.randn(3, 1, 4, generator=torch.Generator().manual_seed(0), dtype=torch.complex64)

    def squeeze_key(compute: Any, start: Any = x) -> str:
        calls = record_core_calls(lambda: torch.squeeze(compute(start), 1))
        (call,) = [c for c in calls if c.op == "aten.squeeze.dim"]
        return call.key()

    doubled = squeeze_key(lambda t: t * 2)
    assert squeeze_key(lambda t: t * 2) == doubled
    assert torch.equal(x * 2, x + x) and squeeze_key(lambda t: t + t) != doubled
    assert squeeze_key(lambda t: t * 2, x + 1) != doubled  # other inputs, by their contents


def test_workers_give_the_same_results(opinfo_cache_dir: str, tmp_path: Path) -> None:
    """`--workers 2` checks the overloads in two processes: the same table, the same samples."""
    outputs = []
    for workers in (1, 2):
        out = io.StringIO()
        details = tmp_path / f"details{workers}.json"
        code = check_ops(
            r"^aten\.(neg\.default|full\.default)$",
            dtypes=None,
            json_path=str(details),
            full_budget=False,
            cache_dir=opinfo_cache_dir,
            out=out,
            workers=workers,
        )
        assert code == 0, out.getvalue()
        samples = json.loads(details.read_text())["samples"]
        outputs.append((out.getvalue().rsplit(";", 1)[0], samples))
    assert outputs[0] == outputs[1]
    with pytest.raises(HarnessUsageError, match="workers"):
        check_ops("abs", dtypes=None, json_path=None, full_budget=False, workers=0)
