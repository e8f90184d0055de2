"""`aten2prims.bisect`: a wrong decomposition rule injected into a real model's lowering is pinned
on the node it lowers (op, node, source location, error, prims expansion); a correct lowering
reports no divergence; `aten2prims check FILE --bisect` prints the same report."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import aten2prims
import prims
from aten2prims.passes.lower import lower
from aten2prims.testing.bisect import BisectReport
from aten2prims.testing.compare import compare
from decompositions import RULES
from decompositions.registry import RuleRegistry

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
ROOT = EXAMPLES.parent


def _example(name: str) -> tuple[aten2prims.Graph, dict[str, Any]]:
    return aten2prims.load(EXAMPLES / f"{name}.pt2"), dict(np.load(EXAMPLES / f"{name}.inputs.npz"))


def _rules_with(op: str, function: Callable[..., Any]) -> RuleRegistry:
    """The default rules, except that `op`'s rule is `function`."""
    return aten2prims.default_rules().with_rule(op, function)


def leaky_relu(self: aten2prims.Value) -> aten2prims.Value:
    """Subtly wrong: negative inputs leak through at 1%."""
    return prims.maximum(self, prims.mul(self, 0.01))


def addmm_with_scaled_bias(self, mat1, mat2, beta, alpha):  # type: ignore[no-untyped-def]  # the schema names
    """Subtly wrong: the bias comes in 0.1% too large."""
    correct = RULES.get("aten.addmm.default")
    assert correct is not None
    return correct(prims.mul(self, 1.001), mat1, mat2, beta=beta, alpha=alpha)


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_correct_lowering_reports_no_divergence(name: str) -> None:
    graph, inputs = _example(name)
    report = aten2prims.bisect(graph, inputs)
    assert isinstance(report, BisectReport)
    assert report.ok and report.first_divergence is None
    assert len(report.checks) == sum(node.namespace == "aten" for node in graph.nodes)
    assert set(report.largest_errors()) == {node.op for node in graph.nodes}
    assert "no divergence" in str(report)


def test_wrong_relu_rule_is_named_with_its_node_and_source() -> None:
    graph, inputs = _example("cnn")
    report = aten2prims.bisect(graph, inputs, _rules_with("aten.relu.default", leaky_relu))
    first = report.first_divergence
    assert first is not None
    first_relu = next(node for node in graph.nodes if node.op == "aten.relu.default")
    assert (first.op, first.node) == ("aten.relu.default", first_relu.results[0].name)
    assert first.source == first_relu.provenance.source and first.source
    assert first.max_abs_error > 1e-3
    assert {check.op for check in report.checks if not check.ok} == {"aten.relu.default"}
    assert report.largest_errors()["aten.relu.default"] == first.max_abs_error
    text = str(report)
    assert f'first divergence: %{first.node} (aten.relu.default) at "{first.source}"' in text
    assert "prims.mul(" in text and "prims.maximum(" in text  # the printed expansion


def test_wrong_addmm_rule_is_named_at_the_first_addmm() -> None:
    graph, inputs = _example("mlp")
    rules = _rules_with("aten.addmm.default", addmm_with_scaled_bias)
    report = aten2prims.bisect(graph, inputs, rules)
    first = report.first_divergence
    assert first is not None
    first_addmm = next(node for node in graph.nodes if node.op == "aten.addmm.default")
    assert (first.op, first.node) == ("aten.addmm.default", first_addmm.results[0].name)
    assert 0 < first.max_abs_error < 1e-2
    # The whole-model lowering with that rule does disagree with torch's outputs.
    expected = np.load(EXAMPLES / "mlp.expected.npz")["output_0"]
    ours = aten2prims.execute(lower(graph, registry=rules), inputs)[0]
    assert not compare(ours, expected)


def test_cli_check_bisect() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "aten2prims.cli",
            "check",
            "examples/mlp.pt2",
            "--inputs",
            "examples/mlp.inputs.npz",
            "--bisect",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "bisect of graph mlp" in result.stdout and "no divergence" in result.stdout
