"""Symbolic sizes (`aten2prims.ir.symbolic`): normalization, the grammar (our infix form and the
sympy srepr strings torch.export writes, checked against torch's own expressions), ranges, the
shape environment's checks, the text form of dynamic graphs and the verifier's symbol checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy
import torch
from sympy.printing.repr import srepr
from torch.utils._sympy.functions import (
    CeilToInt,
    FloatPow,
    FloatTrueDiv,
    FloorDiv,
    FloorToInt,
    IntTrueDiv,
    PythonMod,
    RoundToInt,
    ToFloat,
    TruncToFloat,
    TruncToInt,
)

import aten2prims
from aten2prims.errors import ParseError, ShapeError, VerificationError
from aten2prims.ir import graph_difference, parse
from aten2prims.ir.symbolic import (
    ExprSyntaxError,
    ShapeEnv,
    Symbol,
    SymBool,
    SymExpr,
    evaluate,
    format_expr,
    interval,
    parse_expr,
    shape_env,
    symbol,
)
from aten2prims.passes.verify import verify

s0, s1 = symbol("s0"), symbol("s1")


def test_equal_polynomials_are_equal_and_cancelled_ones_are_ints() -> None:
    assert (s0 + s0).same(2 * s0)
    assert (s0 * s1).same(s1 * s0)
    assert s0 - s0 == 0 and type(s0 - s0) is int
    assert (2 * s0 + 4) // 2 == s0 + 2
    assert (8 * s0) // (4 * s0) == 2
    assert (6 * s0 + 3) % 3 == 0
    assert hash(s0 + 1) == hash(1 + s0)


@pytest.mark.parametrize(
    ("text", "python"),
    [
        ("2*s0 + 1", lambda a, b: 2 * a + 1),
        ("(s0 - 1)//2 + 1", lambda a, b: (a - 1) // 2 + 1),
        ("-((-s0)//2)", lambda a, b: -((-a) // 2)),
        ("s0 % 3", lambda a, b: a % 3),
        ("min(s0, 4)", lambda a, b: min(a, 4)),
        ("max(s0, s1)", lambda a, b: max(a, b)),
        ("s0*s1 - 3", lambda a, b: a * b - 3),
        ("s0 != 1", lambda a, b: a != 1),
        ("2 <= s0", lambda a, b: 2 <= a),
        ("s0 < s1", lambda a, b: a < b),
        ("(s0 % 2) == 0", lambda a, b: a % 2 == 0),
    ],
)
def test_infix_form_round_trips_and_evaluates_as_python(text: str, python) -> None:
    value = parse_expr(text)
    again = parse_expr(format_expr(value))
    assert format_expr(again) == format_expr(value)
    for b0, b1 in [(2, 3), (7, 5), (64, 1)]:
        assert evaluate(value, {"s0": b0, "s1": b1}) == python(b0, b1)
        assert evaluate(again, {"s0": b0, "s1": b1}) == python(b0, b1)


@pytest.mark.parametrize(
    "build",
    [
        lambda a, b: a * 2 + b,
        lambda a, b: FloorDiv(a - 1, 2) + 1,
        lambda a, b: a * b - 3,
        lambda a, b: PythonMod(a, 4),
        lambda a, b: sympy.Max(a, b),
        lambda a, b: sympy.Min(a, 7),
        lambda a, b: sympy.Eq(PythonMod(a, 2), 0),
        lambda a, b: a <= b,
        lambda a, b: sympy.Ne(a, 1),
    ],
)
def test_torch_srepr_strings_parse_to_the_same_value(build) -> None:
    """The expressions torch's symbolic shapes build (its FloorDiv, PythonMod, Max, relations),
    printed with srepr as torch.export.save does, read back and evaluated like torch."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv as TorchShapeEnv

    env = TorchShapeEnv()
    a = env.create_unbacked_symint().node.expr
    b = env.create_unbacked_symint().node.expr
    expression = build(a, b)
    ours = parse_expr(srepr(expression))
    for va, vb in [(2, 3), (9, 4), (31, 31)]:
        theirs = expression.subs({a: va, b: vb})
        expected = bool(theirs) if isinstance(ours, (bool, SymBool)) else int(theirs)
        assert evaluate(ours, {str(a): va, str(b): vb}) == expected


@pytest.mark.parametrize(
    "text",
    ["s0 +", "eval(s0)", "Symbol(s0)", "s0 // 0", "Integer(s0)", "__import__('os')", "s0 ; 1"],
)
def test_malformed_expressions_are_refused_without_evaluating_anything(text: str) -> None:
    with pytest.raises(ExprSyntaxError):
        parse_expr(text)


def test_ranges_settle_conditions_and_undecided_ones_become_checks() -> None:
    env = ShapeEnv({"s0": Symbol("s0", 2, 64, 8), "s1": Symbol("s1", 1, 16, 4)})
    assert interval(2 * (s0 // 2) - s0, env.symbols) == (-1, 0)
    with shape_env(env):
        assert bool(s0 == 1) is False and bool(s0 >= 2) is True
        assert not env.checks
        assert bool(s1 == 1) is False  # undecided: the example's answer, recorded
        assert [format_expr(c) for c in env.checks] == ["s1 != 1"]
        assert list(range(s1)) == [0, 1, 2, 3]  # a concrete int: specialized under a check
        assert format_expr(env.checks[-1]) == "s1 == 4"
    with pytest.raises(ShapeError, match="outside a shape environment"):
        bool(s1 == 2)


DYNAMIC = """\
symbol s0 in [2, 64] example 8
symbol u0 in [0, inf] unbacked
check s0 != 3
graph g(%x: f32[s0, 2*s0 + 1]) -> (f32[s0, 2*s0 + 1]):
  %0: f32[s0, 2*s0 + 1] = prims.broadcast_in_dim(%x, shape=[sym(s0), sym(2*s0 + 1)], broadcast_dimensions=[0, 1])
  %1: f32[s0, 2*s0 + 1] = prims.add(%0, %x)
  return (%1)
"""


def test_dynamic_text_form_round_trips_exactly_and_verifies() -> None:
    graph = parse(DYNAMIC)
    assert str(graph) == DYNAMIC
    assert graph_difference(parse(str(graph)), graph) is None
    assert graph.symbols["u0"] == Symbol("u0", 0, math.inf, None, backed=False)
    verify(graph)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("check s0 != 3", "check s9 != 3"), "uses undeclared symbol"),
        (("f32[s0, 2*s0 + 1]) ->", "f32[s7, 2*s0 + 1]) ->"), "uses undeclared symbol"),
    ],
)
def test_verifier_refuses_undeclared_symbols(edit: tuple[str, str], message: str) -> None:
    with pytest.raises(VerificationError, match=message):
        verify(parse(DYNAMIC.replace(*edit)))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("example 8", "example 99"), "example 99 of s0 is outside"),
        (("[2, 64]", "[64, 2]"), "empty range"),
        (("check s0 != 3", "check s0 + 3"), "expected a condition"),
        (("f32[s0, 2*s0 + 1]) ->", "f32[s0, 2*s0 +]) ->"), "malformed symbolic expression"),
        (("sym(s0)", "sym(s0 <)"), "malformed symbolic expression"),
    ],
)
def test_parse_errors_name_line_and_column(edit: tuple[str, str], message: str) -> None:
    with pytest.raises(ParseError, match=message) as caught:
        parse(DYNAMIC.replace(*edit))
    assert caught.value.line >= 1 and caught.value.column >= 1


def test_execute_binds_checks_and_refuses_with_the_symbol_range_and_input() -> None:
    graph = parse(DYNAMIC)
    x = np.arange(5 * 11, dtype=np.float32).reshape(5, 11)
    (out,) = aten2prims.execute(graph, [x])
    np.testing.assert_array_equal(out, (torch.from_numpy(x) * 2).numpy())
    with pytest.raises(ShapeError, match=r"s0 = 70 is outside its range \[2, 64\].*%x"):
        aten2prims.execute(graph, [np.zeros((70, 141), np.float32)])
    with pytest.raises(ShapeError, match=r"size 2\*s0 \+ 1 = 11 at dimension 1.*got 12"):
        aten2prims.execute(graph, [np.zeros((5, 12), np.float32)])
    with pytest.raises(ShapeError, match=r"lowered assuming s0 != 3, which fails for s0 = 3"):
        aten2prims.execute(graph, [np.zeros((3, 7), np.float32)])
    assert isinstance(graph.user_inputs[0].value.shape[0], SymExpr)  # the graph is unchanged


# -- float expressions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "python"),
    [
        ("trunc(2.3*float(s0))", lambda a, b: math.trunc(a * 2.3)),
        ("floor(float(s0)*0.7) + 1", lambda a, b: math.floor(a * 0.7) + 1),
        ("ceil(s0/s1) - s1", lambda a, b: math.ceil(a / b) - b),
        ("round(0.5*float(s0))", lambda a, b: round(a * 0.5)),
        ("s0/(2*s1 + 1)", lambda a, b: a / (2 * b + 1)),
        ("(float(s0) - 0.5)*1.5/float(s1) + -2.0", lambda a, b: (a - 0.5) * 1.5 / b + -2.0),
        ("-(1.5*float(s0)) + 1e+16", lambda a, b: -(1.5 * a) + 1e16),
        ("float(s0)**0.5 - float(s1)**2.0", lambda a, b: a**0.5 - b**2.0),
        ("max(float(s0), 2.5) - min(s1/2, 1.5)", lambda a, b: max(a, 2.5) - min(b / 2, 1.5)),
        ("(-0.0)*float(s0) - s1/s0/3.0", lambda a, b: -0.0 * a - b / a / 3.0),
        ("floor(float(s0)/3.0) < s1", lambda a, b: math.floor(a / 3.0) < b),
        ("s0**3 - 1", lambda a, b: a**3 - 1),
    ],
)
def test_float_expressions_round_trip_and_evaluate_as_python(text: str, python) -> None:
    """The float forms print and read back to the same structure, and evaluate as Python's
    float arithmetic does, to the bit (repr compares every bit and -0.0's sign)."""
    value = parse_expr(text)
    again = parse_expr(format_expr(value))
    assert format_expr(again) == format_expr(value)
    assert again.same(value) if hasattr(value, "same") else again == value
    for b0, b1 in [(2, 3), (7, 5), (64, 1), (1000003, 999983)]:
        expected = python(b0, b1)
        assert repr(evaluate(value, {"s0": b0, "s1": b1})) == repr(expected)
        assert repr(evaluate(again, {"s0": b0, "s1": b1})) == repr(expected)


@pytest.mark.parametrize(
    "build",
    [
        lambda a, b: TruncToInt(2.3 * ToFloat(a)),
        lambda a, b: FloorToInt(ToFloat(a) * sympy.Float(1 / 3)) + b,
        lambda a, b: CeilToInt(IntTrueDiv(a, b)),
        lambda a, b: RoundToInt(FloatTrueDiv(ToFloat(a), ToFloat(b))),
        lambda a, b: IntTrueDiv(a, 2 * b + 1),
        lambda a, b: FloatPow(ToFloat(a), sympy.Float(0.5)) + ToFloat(b) * 0.7,
        lambda a, b: TruncToFloat(ToFloat(a) * 1.5) - 0.25,
        lambda a, b: sympy.Max(ToFloat(a), ToFloat(b) * 0.5),
    ],
)
def test_torch_float_srepr_strings_parse_to_the_same_value(build) -> None:
    """torch's float functions (ToFloat, IntTrueDiv, TruncToInt, ...) as torch.export.save
    prints them, read back and evaluated as torch evaluates them."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv as TorchShapeEnv

    env = TorchShapeEnv()
    a = env.create_unbacked_symint().node.expr
    b = env.create_unbacked_symint().node.expr
    expression = build(a, b)
    ours = parse_expr(srepr(expression))
    for va, vb in [(2, 3), (9, 4), (31, 31), (1000, 7)]:
        theirs = expression.subs({a: va, b: vb})
        got = evaluate(ours, {str(a): va, str(b): vb})
        if theirs.is_integer:
            assert got == int(theirs)
        else:
            assert got == float(theirs)


@pytest.mark.parametrize(
    "text",
    [
        "float(s0) == 1.5",
        "float(s0) // 2",
        "s0 % 1.5",
        "1.0/0.0",
        "float(s0)/0.0",
        "s0/0",
        "trunc(inf)",
        "Float('x')",
        "Float(s0)",
        "s0**s1",
        "2**-1",
        "floor(s0, s1)",
    ],
)
def test_malformed_float_expressions_are_refused(text: str) -> None:
    with pytest.raises(ExprSyntaxError):
        parse_expr(text)


def test_float_atoms_are_bounded_by_their_operands_ranges() -> None:
    size = parse_expr("trunc(1.7*float(s0))")
    env = ShapeEnv({"s0": Symbol("s0", 2, 64, 8)})
    assert interval(size, env.symbols) == (3, 108)
    with shape_env(env):
        assert bool(size >= 3) is True and bool(size == 0) is False
        assert bool(size <= 108) is True
    assert not env.checks


def test_decisions_on_floats_are_refused() -> None:
    ratio = parse_expr("s0/s1")
    with pytest.raises(ShapeError, match="a decision on the float expression s0/s1"):
        bool(ratio > 1.0)
    with pytest.raises(ShapeError, match="not supported"):
        float(ratio)


def test_min_max_atoms_the_ranges_order_settle_conditions() -> None:
    """torch writes strides as max(1, size), read without ranges; where the ranges order the
    operands, a condition comparing it with the size is settled without a check."""
    size = parse_expr("trunc(1.5*float(s0))")
    stride, plain, low, loose = (
        parse_expr(text)
        for text in ("max(1, trunc(1.5*float(s0)))", "max(1, s0)", "min(s0, 1)", "max(1, s1)")
    )
    env = ShapeEnv({"s0": Symbol("s0", 2, 64, 8), "s1": Symbol("s1", 0, 64, 8)})
    with shape_env(env):
        assert bool(stride == size) is True
        assert bool(plain - s0 == 0) is True
        assert bool(low < 2) is True
        assert not env.checks
        assert bool(loose == s1) is True  # s1 may be 0: the example's answer, checked
    assert [format_expr(c) for c in env.checks] == ["s1 == max(1, s1)"]
