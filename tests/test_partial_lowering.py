"""Partial lowering (`keep=`) and custom rule tables (`default_rules().with_rule(...)`), on the
bundled exported models (no torch needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aten2prims
import prims
from aten2prims.errors import ResultDTypeError, UnsupportedOpError
from aten2prims.ir import parse
from aten2prims.ir.dtypes import DType
from aten2prims.testing.compare import compare
from decompositions import RULES

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name: str) -> tuple[aten2prims.Graph, dict[str, np.ndarray], list[np.ndarray]]:
    graph = aten2prims.load(EXAMPLES / f"{name}.pt2")
    with (
        np.load(EXAMPLES / f"{name}.inputs.npz") as inputs,
        np.load(EXAMPLES / f"{name}.expected.npz") as expected,
    ):
        return graph, dict(inputs), [expected[f"output_{i}"] for i in range(len(expected.files))]


def _ops(graph: aten2prims.Graph) -> set[str]:
    return {node.op for node in graph.nodes}


def _assert_matches(outputs: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(outputs) == len(expected)
    for ours, theirs in zip(outputs, expected):
        verdict = compare(ours, theirs)
        assert verdict, verdict.message


@pytest.mark.parametrize(
    "keep",
    [
        {"aten.convolution.default", "aten.addmm.default"},
        "aten.convolution.*",
        ["aten.conv*", "aten.addmm.default"],
        lambda node: node.op == "aten.convolution.default",
    ],
    ids=["names", "pattern", "patterns", "predicate"],
)
def test_kept_ops_stay_and_everything_else_becomes_prims(keep: object) -> None:
    graph, inputs, expected = _example("cnn")
    lowered = aten2prims.lower(graph, keep=keep)
    aten_left = {op for op in _ops(lowered) if not op.startswith("prims.")}
    assert "aten.convolution.default" in aten_left
    assert aten_left <= {"aten.convolution.default", "aten.addmm.default"}
    kept_count = sum(node.op == "aten.convolution.default" for node in lowered.nodes)
    assert kept_count == sum(node.op == "aten.convolution.default" for node in graph.nodes)
    # The executor still runs a partially lowered graph (it lowers what is left).
    _assert_matches(aten2prims.execute(lowered, inputs), expected)


def test_keeping_nothing_is_full_lowering() -> None:
    graph, _, _ = _example("mlp")
    assert str(aten2prims.lower(graph, keep=())) == str(aten2prims.lower(graph))


def test_an_op_neither_kept_nor_ruled_is_refused_by_name() -> None:
    graph, _, _ = _example("mlp")
    rules = aten2prims.default_rules().without("aten.relu.default")
    with pytest.raises(UnsupportedOpError, match=r"aten\.relu\.default"):
        aten2prims.lower(graph, rules=rules)
    lowered = aten2prims.lower(graph, rules=rules, keep={"aten.relu.default"})
    assert {op for op in _ops(lowered) if op.startswith("aten.")} == {"aten.relu.default"}


def test_a_replacement_rule_is_used_and_the_default_table_is_unchanged() -> None:
    graph, inputs, expected = _example("mlp")
    calls: list[str] = []

    def relu(self: aten2prims.Value) -> aten2prims.Value:
        calls.append(self.name)
        return prims.maximum(self, 0.0)

    rules = aten2prims.default_rules().with_rule("aten.relu.default", relu)
    lowered = aten2prims.lower(graph, rules=rules)
    assert calls == ["addmm"]
    _assert_matches(aten2prims.execute(lowered, inputs), expected)
    # The default table still holds its own rule: lowering with it never calls ours.
    assert RULES.get("aten.relu.default").function is not relu
    aten2prims.lower(graph)
    assert calls == ["addmm"]


def test_a_replacement_rule_is_checked_against_the_node() -> None:
    graph, _, _ = _example("mlp")

    def wrong_relu(self: aten2prims.Value) -> aten2prims.Value:
        return prims.convert_element_type(self, DType.float64)

    rules = aten2prims.default_rules().with_rule("aten.relu.default", wrong_relu)
    with pytest.raises(ResultDTypeError, match=r"aten\.relu\.default.*%relu"):
        aten2prims.lower(graph, rules=rules)


def test_a_rule_whose_parameters_do_not_match_the_schema_is_refused() -> None:
    def relu(x: aten2prims.Value) -> aten2prims.Value:
        return x

    with pytest.raises(TypeError, match="do not match the schema"):
        aten2prims.default_rules().with_rule("aten.relu.default", relu)


CUSTOM = """\
graph custom(%x: f32[2, 3]) -> (f32[2, 3]):
  %y: f32[2, 3] = mylib.fused_gelu.default(%x)
  return (%y)
"""


def _tanh_gelu(x: aten2prims.Value) -> aten2prims.Value:
    # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    cube = prims.mul(prims.mul(x, x), x)
    inner = prims.mul(prims.add(x, prims.mul(cube, 0.044715)), 0.7978845608028654)
    return prims.mul(prims.mul(x, 0.5), prims.add(prims.tanh(inner), 1.0))


@pytest.mark.parametrize("schema", [None, "mylib::fused_gelu(Tensor x) -> Tensor"])
def test_a_custom_namespace_op_lowers_with_a_user_rule(schema: str | None) -> None:
    graph = parse(CUSTOM)
    with pytest.raises(UnsupportedOpError, match=r"mylib\.fused_gelu\.default"):
        aten2prims.lower(graph)
    rules = aten2prims.default_rules().with_rule(
        "mylib.fused_gelu.default", _tanh_gelu, schema=schema
    )
    lowered = aten2prims.lower(graph, rules=rules)
    assert all(op.startswith("prims.") for op in _ops(lowered))
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    (result,) = aten2prims.execute(lowered, {"x": x})
    x64 = x.astype(np.float64)
    reference = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64**3)))
    np.testing.assert_allclose(result, reference, rtol=1e-6, atol=1e-6)
