"""The lowering engine: rule registry, strictness, provenance, naming, meta checks, purity.

These tests use a private RuleRegistry with a few small rules so that they exercise the engine
itself; the real rules are tested against torch by the op-family tests and the harness."""

from __future__ import annotations

import numpy as np
import pytest

import prims
from aten2prims.errors import DTypeError, LoweringError, ShapeError, UnsupportedOpError
from aten2prims.executor import execute
from aten2prims.ir import (
    Graph,
    GraphInput,
    GraphOutput,
    Node,
    Provenance,
    ScalarMeta,
    TensorMeta,
    Value,
    parse,
)
from aten2prims.ir.dtypes import f32
from aten2prims.passes.lower import lower
from aten2prims.passes.verify import verify
from decompositions.registry import RuleRegistry, aten


def _registry() -> RuleRegistry:
    rules = RuleRegistry()

    @rules.register("aten.neg.default")
    def neg(self):
        return prims.neg(self)

    @rules.register("aten.alias.default")
    def alias(self):
        return self

    @rules.register("aten.sub.Tensor")
    def sub(self, other, alpha):
        # other * alpha through another rule, to exercise rule-to-rule calls
        scaled = prims.mul(other, float(alpha)) if alpha != 1 else other
        return prims.add(self, aten.neg.default(scaled))

    @rules.register("aten.sym_numel.default")
    def numel(self):
        return self.numel  # folds to a Python int

    return rules


TEXT = """\
graph g(%x: f32[2, 3], %y: f32[2, 3]) -> (f32[2, 3], f32[2, 3]):
  %a: f32[2, 3] = aten.neg.default(%x)  # at "model.py:3 in forward"
  %b: f32[2, 3] = aten.sub.Tensor(%a, %y, alpha=2)
  %c: f32[2, 3] = aten.alias.default(%b)
  return (%c, %a)
"""


def test_lowering_expands_to_prims_with_provenance_and_names() -> None:
    graph = parse(TEXT)
    lowered = lower(graph, registry=_registry())
    verify(lowered)
    assert all(node.namespace == "prims" for node in lowered.nodes)
    assert [node.op for node in lowered.nodes] == [
        "prims.neg",
        "prims.mul",
        "prims.neg",
        "prims.add",
    ]
    first = lowered.nodes[0]
    assert first.results[0].name == "a"  # the aten result's name carries over
    assert first.provenance == Provenance("aten.neg.default", "a", "model.py:3 in forward")
    assert {node.provenance.origin for node in lowered.nodes[1:]} == {"b"}
    # alias returns its operand: the output now is %b itself
    assert [o.value.name for o in lowered.outputs] == ["b", "a"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.ones((2, 3), np.float32)
    c, a = execute(lowered, {"x": x, "y": y}, check=True)
    np.testing.assert_array_equal(a, -x)
    np.testing.assert_array_equal(c, -x - 2 * y)


def test_lowering_never_mutates_its_input() -> None:
    graph = parse(TEXT)
    before = str(graph)
    lower(graph, registry=_registry())
    assert str(graph) == before


def test_unsupported_ops_are_all_named_with_counts() -> None:
    text = """\
graph g(%x: f32[3]) -> (f32[3]):
  %a: f32[3] = aten.exp.default(%x)
  %b: f32[3] = aten.neg.default(%a)
  %c: f32[3] = aten.exp.default(%b)
  %d: f32[3] = aten.sin.default(%c)
  return (%d)
"""
    graph = parse(text)
    with pytest.raises(UnsupportedOpError) as caught:
        lower(graph, registry=_registry())
    assert caught.value.counts == {"aten.exp.default": 2, "aten.sin.default": 1}
    assert "aten.exp.default (x2)" in str(caught.value)
    partial = lower(graph, strict=False, registry=_registry())
    assert [node.op for node in partial.nodes] == [
        "aten.exp.default",
        "prims.neg",
        "aten.exp.default",
        "aten.sin.default",
    ]
    verify(partial)


def test_rule_results_must_match_the_declared_meta() -> None:
    wrong_dtype = parse(
        "graph g(%x: f32[3]) -> (f16[3]):\n  %a: f16[3] = aten.neg.default(%x)\n  return (%a)\n"
    )
    with pytest.raises(DTypeError, match=r"aten\.neg\.default -> %a.*f32\[3\].*f16\[3\]"):
        lower(wrong_dtype, registry=_registry())
    wrong_shape = parse(
        "graph g(%x: f32[3]) -> (f32[4]):\n  %a: f32[4] = aten.neg.default(%x)\n  return (%a)\n"
    )
    with pytest.raises(ShapeError, match=r"aten\.neg\.default -> %a"):
        lower(wrong_shape, registry=_registry())


def test_prim_errors_inside_rules_name_the_aten_node() -> None:
    # neg is not defined on bool: the prim's meta rejects it, the error names the aten node
    graph = parse(
        'graph g(%x: b8[3]) -> (b8[3]):\n  %a: b8[3] = aten.neg.default(%x)  # at "m.py:9"\n  return (%a)\n'
    )
    with pytest.raises(
        DTypeError, match=r"lowering aten\.neg\.default -> %a at m\.py:9: prims\.neg"
    ):
        lower(graph, registry=_registry())


def test_scalar_results_fold_to_literals() -> None:
    x = Value("x", TensorMeta((2, 5), f32))
    n = Value("n", ScalarMeta(int))
    y = Value("y", TensorMeta((2, 5), f32))
    graph = Graph(
        "g",
        [GraphInput(x)],
        [
            Node("aten.sym_numel.default", (x,), {}, (n,)),
            Node("prims.mul", (x, 2.0), {}, (y,)),
        ],
        [GraphOutput(y)],
    )
    lowered = lower(graph, registry=_registry())
    assert [node.op for node in lowered.nodes] == ["prims.mul"]


def test_registry_rejects_duplicates_unknown_ops_and_wrong_parameters() -> None:
    rules = RuleRegistry()
    rules.register("aten.neg.default")(lambda self: self)
    with pytest.raises(ValueError, match="already registered"):
        rules.register("aten.neg.default")(lambda self: self)
    with pytest.raises(ValueError, match="no schema"):
        rules.register("aten.not_an_op.default")(lambda self: self)
    with pytest.raises(TypeError, match="do not match"):
        rules.register("aten.abs.default")(lambda x: x)


def test_rule_bugs_become_lowering_errors() -> None:
    rules = RuleRegistry()

    @rules.register("aten.neg.default")
    def broken(self):
        raise ZeroDivisionError("oops")

    graph = parse(
        "graph g(%x: f32[3]) -> (f32[3]):\n  %a: f32[3] = aten.neg.default(%x)\n  return (%a)\n"
    )
    with pytest.raises(
        LoweringError, match=r"aten\.neg\.default -> %a: the rule failed: ZeroDivisionError"
    ):
        lower(graph, registry=rules)


def test_dead_nodes_are_removed() -> None:
    text = """\
graph g(%x: f32[3]) -> (f32[3]):
  %a: f32[3] = aten.neg.default(%x)
  %b: f32[3] = aten.neg.default(%a)
  return (%a)
"""
    lowered = lower(parse(text), registry=_registry())
    assert [node.results[0].name for node in lowered.nodes] == ["a"]


def test_execute_lowers_aten_graphs_on_the_fly() -> None:
    graph = parse("graph g(%x: i64[3]) -> (i64[3]):\n  %a: i64[3] = prims.neg(%x)\n  return (%a)\n")
    (result,) = execute(graph, {"x": np.array([1, -2, 3])})
    np.testing.assert_array_equal(result, [-1, 2, -3])
