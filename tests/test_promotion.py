"""aten2prims.promotion against torch 2.13: result_type, elementwise_dtypes, broadcast_shapes and the
reduction dtypes against eager torch (and torch's own reference functions), the emitted node lists,
and emitted graphs run on the executor against eager torch's values."""

from __future__ import annotations

import itertools
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._prims_common import (
    ELEMENTWISE_TYPE_PROMOTION_KIND,
    REDUCTION_OUTPUT_TYPE_KIND,
)
from torch._prims_common import elementwise_dtypes as torch_elementwise_dtypes
from torch._prims_common import reduction_dtypes as torch_reduction_dtypes

import prims
from aten2prims.errors import DTypeError, ShapeError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import from_torch_dtype, to_numpy, to_torch, torch_dtype
from aten2prims.ir.dtypes import DType, b8, bf16, c64, f16, f32, f64, i8, i32, i64, u8
from aten2prims.ir.values import ScalarMeta, TensorMeta, Value
from aten2prims.promotion import (
    COMPLEX32,
    PromotionKind,
    ReductionKind,
    broadcast,
    broadcast_shapes,
    broadcast_to,
    convert,
    elementwise,
    elementwise_dtypes,
    mean_dtypes,
    opmath_dtype,
    promote,
    promoted_dtype,
    reduction_dtypes,
    result_type,
    sum_dtype,
)
from aten2prims.testing.compare import compare
from prims import Builder

pytestmark = [
    pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental"),
    pytest.mark.filterwarnings("ignore:Casting complex values to real"),
]

DTYPES = list(DType)
SCALARS: list[Any] = [True, False, 0, -3, 7, 2.5, -0.0, 1j, 2.5 - 1j]
SHAPE = (2, 3)


@attrs.frozen
class Operand:
    """One operand of a promotion test: an n-dim tensor, a 0-dim tensor or a Python scalar."""

    form: str  # "tensor", "zero_dim", "scalar"
    dtype: DType | None = None
    value: Any = None

    def symbolic(self, name: str, shape: tuple[int, ...] = SHAPE) -> Any:
        if self.form == "scalar":
            return self.value
        return Value(name, TensorMeta(shape if self.form == "tensor" else (), self.dtype))

    def runtime_scalar(self, name: str) -> Any:
        """The scalar as a run-time scalar value (ScalarMeta); tensors unchanged."""
        return (
            Value(name, ScalarMeta(type(self.value)))
            if self.form == "scalar"
            else self.symbolic(name)
        )

    def meta_tensor(self) -> Any:
        if self.form == "scalar":
            return self.value
        return torch.empty(
            SHAPE if self.form == "tensor" else (), dtype=torch_dtype(self.dtype), device="meta"
        )

    def ones(self) -> Any:
        if self.form == "scalar":
            return self.value
        return torch.ones(SHAPE if self.form == "tensor" else (), dtype=torch_dtype(self.dtype))

    def __str__(self) -> str:
        return (
            repr(self.value)
            if self.form == "scalar"
            else f"{self.dtype.short}[{'2,3' if self.form == 'tensor' else ''}]"
        )


OPERANDS = (
    [Operand("tensor", d) for d in DTYPES]
    + [Operand("zero_dim", d) for d in DTYPES]
    + [Operand("scalar", value=v) for v in SCALARS]
)
TENSOR_OPERANDS = [o for o in OPERANDS if o.form != "scalar"]
operands = st.sampled_from(OPERANDS)

KINDS = {
    PromotionKind.DEFAULT: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
    PromotionKind.NO_OPMATH: ELEMENTWISE_TYPE_PROMOTION_KIND.NO_OPMATH,
    PromotionKind.INT_TO_FLOAT: ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT,
    PromotionKind.ALWAYS_BOOL: ELEMENTWISE_TYPE_PROMOTION_KIND.ALWAYS_BOOL,
    PromotionKind.COMPLEX_TO_FLOAT: ELEMENTWISE_TYPE_PROMOTION_KIND.COMPLEX_TO_FLOAT,
    PromotionKind.BOOL_TO_LONG: ELEMENTWISE_TYPE_PROMOTION_KIND.BOOL_TO_LONG,
}


def _symbolic(ops: tuple[Operand, ...]) -> list[Any]:
    return [o.symbolic(f"x{i}") for i, o in enumerate(ops)]


def _eager(fn: Any) -> Any:
    """fn()'s result, or None when eager torch rejects the call."""
    try:
        return fn()
    except (RuntimeError, TypeError, NotImplementedError, ValueError):
        return None


# -- result_type ------------------------------------------------------------------------------------


def test_result_type_all_pairs_against_torch() -> None:
    for a, b in itertools.product(OPERANDS, repeat=2):
        expected = torch.result_type(a.ones(), b.ones())
        ours = (a.symbolic("a"), b.symbolic("b"))
        if expected == torch.complex32:
            with pytest.raises(DTypeError, match="complex32"):
                result_type(*ours)
        else:
            assert result_type(*ours) is from_torch_dtype(expected), f"{a} + {b}"


@settings(max_examples=400)
@given(st.lists(operands, min_size=1, max_size=4), st.sampled_from(list(KINDS)), st.booleans())
def test_elementwise_dtypes_against_torch_reference(
    ops: list[Operand], kind: PromotionKind, runtime: bool
) -> None:
    """Any number of operands, every kind, against torch's own elementwise_dtypes; a run-time
    scalar value promotes exactly like the Python scalar of its kind."""
    computation, result = torch_elementwise_dtypes(
        *(o.meta_tensor() for o in ops), type_promotion_kind=KINDS[kind]
    )
    ours = [
        o.runtime_scalar(f"x{i}") if runtime else o.symbolic(f"x{i}") for i, o in enumerate(ops)
    ]
    if torch.complex32 in (computation, result):
        with pytest.raises(DTypeError, match="complex32"):
            elementwise_dtypes(*ours, kind=kind)
        return
    assert elementwise_dtypes(*ours, kind=kind) == (
        from_torch_dtype(computation),
        from_torch_dtype(result),
    )


@settings(max_examples=300)
@given(st.lists(operands, min_size=3, max_size=3))
def test_result_type_triples_against_torch_reference(ops: list[Operand]) -> None:
    _, expected = torch_elementwise_dtypes(
        *(o.meta_tensor() for o in ops),
        type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.NO_OPMATH,
    )
    if expected == torch.complex32:
        with pytest.raises(DTypeError, match="complex32"):
            result_type(*_symbolic(tuple(ops)))
    else:
        assert result_type(*_symbolic(tuple(ops))) is from_torch_dtype(expected)


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ((Operand("tensor", i32), Operand("scalar", value=7)), i32),
        ((Operand("tensor", u8), Operand("zero_dim", i64)), u8),
        ((Operand("tensor", f16), Operand("zero_dim", f64)), f16),
        ((Operand("zero_dim", f16), Operand("tensor", i64)), f16),
        ((Operand("tensor", i64), Operand("scalar", value=2.5)), f32),
        ((Operand("tensor", i32), Operand("zero_dim", f64)), f64),
        ((Operand("tensor", b8), Operand("scalar", value=True)), b8),
        ((Operand("tensor", b8), Operand("scalar", value=1)), i64),
        ((Operand("tensor", u8), Operand("tensor", i8)), DType.int16),
        ((Operand("tensor", f16), Operand("tensor", bf16)), f32),
        ((Operand("tensor", bf16), Operand("scalar", value=1j)), c64),
        ((Operand("tensor", f64), Operand("zero_dim", c64)), DType.complex128),
    ],
    ids=str,
)
def test_promotion_md_examples(ops: tuple[Operand, ...], expected: DType) -> None:
    assert result_type(*_symbolic(ops)) is expected


def test_complex32_is_refused_with_a_clear_error() -> None:
    with pytest.raises(DTypeError, match=r"\(f16\[2, 3\], 1j\) gives complex32"):
        result_type(Value("x", TensorMeta(SHAPE, f16)), 1j)


def test_none_operands_are_ignored_and_bad_operands_refused() -> None:
    assert result_type(None, Value("x", TensorMeta((3,), i8)), None, 2) is i8
    with pytest.raises(DTypeError, match="not a tensor value"):
        result_type(Value("x", TensorMeta((3,), i8)), "2")


def test_opmath_dtype() -> None:
    assert {d: opmath_dtype(d) for d in DTYPES} == {
        d: f32 if d in (f16, bf16) else d for d in DTYPES
    }


# -- elementwise kinds against eager ops --------------------------------------------------------------

BINARY_OPS = {
    "add": (torch.add, PromotionKind.DEFAULT),
    "sub": (torch.sub, PromotionKind.DEFAULT),
    "mul": (torch.mul, PromotionKind.DEFAULT),
    "true_divide": (torch.true_divide, PromotionKind.INT_TO_FLOAT),
    "atan2": (torch.atan2, PromotionKind.INT_TO_FLOAT),
    "eq": (torch.eq, PromotionKind.ALWAYS_BOOL),
    "lt": (torch.lt, PromotionKind.ALWAYS_BOOL),
    "logical_and": (torch.logical_and, PromotionKind.ALWAYS_BOOL),
    "pow": (torch.pow, PromotionKind.BOOL_TO_LONG),
}
UNARY_OPS = {
    "sin": (torch.sin, PromotionKind.INT_TO_FLOAT),
    "isnan": (torch.isnan, PromotionKind.ALWAYS_BOOL),
    "abs": (torch.abs, PromotionKind.COMPLEX_TO_FLOAT),
}


def _check_kind(eager_dtype: Any, ops: list[Any], kind: PromotionKind, what: str) -> None:
    if eager_dtype == torch.complex32:
        with pytest.raises(DTypeError, match="complex32"):
            elementwise_dtypes(*ops, kind=kind)
    else:
        assert elementwise_dtypes(*ops, kind=kind)[1] is from_torch_dtype(eager_dtype), what


def _pow_of_bool_by_bool_scalar(a: Operand, b: Operand) -> bool:
    return a.form != "scalar" and a.dtype is b8 and b.form == "scalar" and type(b.value) is bool


@pytest.mark.parametrize("name", list(BINARY_OPS))
def test_binary_result_dtypes_against_eager(name: str) -> None:
    fn, kind = BINARY_OPS[name]
    checked = 0
    for a, b in itertools.product(OPERANDS, repeat=2):
        if name == "pow" and _pow_of_bool_by_bool_scalar(a, b):
            continue  # eager keeps bool there: test_eager_pow_of_bool_tensor_by_bool_scalar_keeps_bool
        result = _eager(lambda: fn(a.ones(), b.ones()))
        if result is None:
            continue
        _check_kind(result.dtype, [a.symbolic("a"), b.symbolic("b")], kind, f"{name}({a}, {b})")
        checked += 1
    assert checked > 200


@pytest.mark.parametrize("name", list(UNARY_OPS))
def test_unary_result_dtypes_against_eager(name: str) -> None:
    fn, kind = UNARY_OPS[name]
    for a in TENSOR_OPERANDS:
        result = _eager(lambda: fn(a.ones()))
        if result is not None:
            _check_kind(result.dtype, [a.symbolic("a")], kind, f"{name}({a})")


def test_where_result_dtypes_against_eager() -> None:
    """where promotes only its two values (NO_OPMATH); the condition does not count."""
    condition = torch.ones(SHAPE, dtype=torch.bool)
    for a, b in itertools.product(OPERANDS, repeat=2):
        result = _eager(lambda: torch.where(condition, a.ones(), b.ones()))
        if result is not None:
            _check_kind(
                result.dtype,
                [a.symbolic("a"), b.symbolic("b")],
                PromotionKind.NO_OPMATH,
                f"where({a}, {b})",
            )


@pytest.mark.xfail(
    strict=True,
    reason="eager pow.Tensor_Scalar uses result_type (bool ** True is a bool copy), while torch's "
    "BOOL_TO_LONG kind (refs.pow) gives int64; pow's decomposition must special-case it",
)
def test_eager_pow_of_bool_tensor_by_bool_scalar_keeps_bool() -> None:
    eager = torch.pow(torch.ones(3, dtype=torch.bool), True).dtype
    assert elementwise_dtypes(
        Value("a", TensorMeta((3,), b8)), True, kind=PromotionKind.BOOL_TO_LONG
    )[1] is (from_torch_dtype(eager))


# -- reductions -------------------------------------------------------------------------------------

REDUCTION_KINDS = {
    ReductionKind.SAME: REDUCTION_OUTPUT_TYPE_KIND.SAME,
    ReductionKind.COMPLEX_TO_FLOAT: REDUCTION_OUTPUT_TYPE_KIND.COMPLEX_TO_FLOAT,
    ReductionKind.KEEP_PROMOTED_TYPE: REDUCTION_OUTPUT_TYPE_KIND.KEEP_PROMOTED_TYPE,
    ReductionKind.ALWAYS_BOOL: REDUCTION_OUTPUT_TYPE_KIND.ALWAYS_BOOL,
}


def test_reduction_dtypes_against_torch_reference() -> None:
    for dtype, override, kind in itertools.product(DTYPES, [None, *DTYPES], REDUCTION_KINDS):
        arg = torch.empty(3, dtype=torch_dtype(dtype), device="meta")
        computation, result = torch_reduction_dtypes(
            arg, REDUCTION_KINDS[kind], None if override is None else torch_dtype(override)
        )
        ours = reduction_dtypes(dtype, kind, override)
        # torch's "no result dtype" for KEEP_PROMOTED_TYPE means: stay in the computation dtype.
        expected_result = computation if result is None else result
        assert ours == (from_torch_dtype(computation), from_torch_dtype(expected_result)), (
            dtype,
            override,
            kind,
        )


@pytest.mark.parametrize("op", ["sum", "prod", "mean"])
def test_sum_prod_mean_dtypes_against_eager(op: str) -> None:
    for dtype, override in itertools.product(DTYPES, [None, *DTYPES]):
        x = torch.ones(3, dtype=torch_dtype(dtype))
        kwargs = {} if override is None else {"dtype": torch_dtype(override)}
        eager = _eager(lambda: getattr(torch, op)(x, **kwargs))
        if op == "mean":
            if eager is None:
                with pytest.raises(DTypeError, match="mean"):
                    mean_dtypes(dtype, override)
                continue
            computation, result = mean_dtypes(dtype, override)
        elif eager is None:
            continue
        else:
            result_dtype = sum_dtype(dtype, override)
            computation, result = reduction_dtypes(dtype, ReductionKind.SAME, result_dtype)
        assert result is from_torch_dtype(eager.dtype), (op, dtype, override)
        assert computation is opmath_dtype(result)


@pytest.mark.parametrize(
    ("op", "kind"),
    [
        ("amax", ReductionKind.SAME),
        ("var", ReductionKind.COMPLEX_TO_FLOAT),
        ("any", ReductionKind.ALWAYS_BOOL),
    ],
)
def test_amax_var_any_dtypes_against_eager(op: str, kind: ReductionKind) -> None:
    for dtype in DTYPES:
        eager = _eager(lambda: getattr(torch, op)(torch.ones(3, dtype=torch_dtype(dtype))))
        if eager is None:
            continue
        expected = from_torch_dtype(eager.dtype)
        if op == "any" and dtype is u8:
            # any/all keep uint8 (a legacy mask rule torch applies after the reduction, in refs.any).
            assert (expected, reduction_dtypes(dtype, kind)[1]) == (u8, b8)
            continue
        assert reduction_dtypes(dtype, kind)[1] is expected, (op, dtype)


# -- broadcasting -----------------------------------------------------------------------------------

shapes = st.lists(st.integers(0, 3), max_size=4).map(tuple)


@settings(max_examples=400)
@given(st.lists(shapes, min_size=1, max_size=4))
def test_broadcast_shapes_against_torch(given_shapes: list[tuple[int, ...]]) -> None:
    try:
        expected = tuple(torch.broadcast_shapes(*given_shapes))
    except RuntimeError:
        with pytest.raises(ShapeError, match="cannot be broadcast together"):
            broadcast_shapes(*given_shapes)
        return
    assert broadcast_shapes(*given_shapes) == expected


def test_broadcast_shapes_names_the_shapes_and_accepts_ints() -> None:
    with pytest.raises(ShapeError, match=r"\[2, 3\], \[4\]"):
        broadcast_shapes((2, 3), (4,))
    assert broadcast_shapes(2, (3, 1)) == tuple(torch.broadcast_shapes(2, (3, 1)))
    assert broadcast_shapes() == ()


# -- emission ---------------------------------------------------------------------------------------


def _nodes(builder: Builder) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Each node as (op, operands with values by name, attributes)."""
    return [
        (
            node.op,
            tuple(f"%{a.name}" if type(a) is Value else a for a in node.args),
            dict(node.kwargs),
        )
        for node in builder.nodes
    ]


def test_emits_convert_then_broadcast_then_prim() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((3,), i64))
        y = b.add_input("y", TensorMeta((4, 3), f32))
        z = elementwise(prims.add, x, y)
    assert _nodes(b) == [
        ("prims.convert_element_type", ("%x",), {"dtype": f32}),
        ("prims.broadcast_in_dim", ("%0",), {"shape": (4, 3), "broadcast_dimensions": (1,)}),
        ("prims.add", ("%1", "%y"), {}),
    ]
    assert z.meta == TensorMeta((4, 3), f32)


def test_low_precision_computes_in_float32_with_a_literal_scalar() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((3,), f16))
        z = elementwise(prims.add, x, 2.5)
    assert _nodes(b) == [
        ("prims.convert_element_type", ("%x",), {"dtype": f32}),
        ("prims.add", ("%0", 2.5), {}),
        ("prims.convert_element_type", ("%1",), {"dtype": f16}),
    ]
    assert z.meta == TensorMeta((3,), f16)


def test_nothing_to_promote_emits_only_the_prim() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((2, 3), f32))
        y = b.add_input("y", TensorMeta((2, 3), f32))
        elementwise(prims.add, x, y)
    assert _nodes(b) == [("prims.add", ("%x", "%y"), {})]


def test_zero_dim_tensors_are_broadcast_with_no_dimensions() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((2, 3), f32))
        s = b.add_input("s", TensorMeta((), f64))
        elementwise(prims.mul, s, x)
    assert _nodes(b) == [
        ("prims.convert_element_type", ("%s",), {"dtype": f32}),
        ("prims.broadcast_in_dim", ("%0",), {"shape": (2, 3), "broadcast_dimensions": ()}),
        ("prims.mul", ("%1", "%x"), {}),
    ]


def test_python_numbers_become_the_computation_kind() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((3,), i32))
        elementwise(prims.mul, x, True)
        y = b.add_input("y", TensorMeta((3,), f32))
        elementwise(prims.add, y, 2)
    assert _nodes(b) == [("prims.mul", ("%x", 1), {}), ("prims.add", ("%y", 2.0), {})]
    assert type(b.nodes[0].args[1]) is int and type(b.nodes[1].args[1]) is float


def test_where_promotes_its_values_and_broadcasts_its_condition() -> None:
    with Builder() as b:
        pred = b.add_input("pred", TensorMeta((4, 1), b8))
        x = b.add_input("x", TensorMeta((3,), f16))
        z = elementwise(prims.where, pred, x, 1, kind=PromotionKind.NO_OPMATH, promoting=[1, 2])
    assert _nodes(b) == [
        ("prims.broadcast_in_dim", ("%pred",), {"shape": (4, 3), "broadcast_dimensions": (0, 1)}),
        ("prims.broadcast_in_dim", ("%x",), {"shape": (4, 3), "broadcast_dimensions": (1,)}),
        ("prims.where", ("%0", "%1", 1.0), {}),
    ]
    assert z.meta == TensorMeta((4, 3), f16)


def test_promote_returns_operands_and_both_dtypes() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((3,), bf16))
        (converted, number), computation, result = promote(x, 3, kind=PromotionKind.INT_TO_FLOAT)
    assert (converted.meta, number, computation, result) == (TensorMeta((3,), f32), 3.0, f32, bf16)
    assert len(b.nodes) == 1


def test_convert_of_numbers() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((3,), f32))
        assert convert(x, f32) is x
        assert [
            convert(2, f32),
            convert(True, i8),
            convert(2.5, c64),
            convert(2.9, i64),
            convert(0, b8),
        ] == [2.0, 1, 2.5 + 0j, 2, False]
        assert [type(convert(2, f32)), type(convert(True, i8)), type(convert(2.5, c64))] == [
            float,
            int,
            complex,
        ]
        with pytest.raises(DTypeError, match="complex"):
            convert(1j, f32)
        with pytest.raises(DTypeError):
            convert(float("nan"), i64)
    assert b.nodes == []


def test_broadcast_helpers() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((3, 1), i8))
        y = b.add_input("y", TensorMeta((2, 3, 4), i8))
        assert broadcast_to(y, (2, 3, 4)) is y
        with pytest.raises(ShapeError, match=r"\[3, 1\] cannot be broadcast to \[2, 4\]"):
            broadcast_to(x, (2, 4))
        assert b.nodes == []
        _bx, by, number = broadcast(x, y, 2.5)
    assert (by, number) == (y, 2.5)
    assert _nodes(b) == [
        ("prims.broadcast_in_dim", ("%x",), {"shape": (2, 3, 4), "broadcast_dimensions": (1, 2)})
    ]


def test_errors_leave_no_nodes_behind() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((3,), i64))
        y = b.add_input("y", TensorMeta((4,), f32))
        with pytest.raises(ShapeError, match="cannot be broadcast together"):
            elementwise(prims.add, x, y)
        h = b.add_input("h", TensorMeta((3,), f16))
        with pytest.raises(DTypeError, match="complex32"):
            elementwise(prims.add, h, 1j)
        with pytest.raises(DTypeError, match="complex32"):
            elementwise(prims.eq, h, 1j, kind=PromotionKind.ALWAYS_BOOL)
    assert b.nodes == []


def test_comparisons_compute_in_the_promoted_dtype_as_eager_does() -> None:
    """torch's elementwise_dtypes says ALWAYS_BOOL computes in opmath (f32), but eager casts both
    sides to the promoted f16: f16(0.1) == 0.1 is True in eager, False in f32."""
    assert elementwise_dtypes(
        Value("x", TensorMeta((1,), f16)), 0.1, kind=PromotionKind.ALWAYS_BOOL
    ) == (f32, b8)
    with Builder() as b:
        x = b.add_input("x", TensorMeta((1,), f16))
        d = b.add_input("d", TensorMeta((), f64))
        graph = b.finish(
            [
                elementwise(prims.eq, x, 0.1, kind=PromotionKind.ALWAYS_BOOL),
                elementwise(prims.lt, x, d, kind=PromotionKind.ALWAYS_BOOL),
            ]
        )
    assert [n.op for n in graph.nodes] == [
        "prims.eq",
        "prims.convert_element_type",
        "prims.broadcast_in_dim",
        "prims.lt",
    ]
    tx = torch.tensor([0.1], dtype=torch.float16)
    td = torch.tensor(0.1, dtype=torch.float64)
    ours = execute(graph, {"x": to_numpy(tx), "d": to_numpy(td)}, check=True)
    for mine, theirs in zip(ours, [tx == 0.1, tx < td]):
        assert compare(mine, to_numpy(theirs))


@pytest.mark.parametrize(
    ("prim", "fn", "kind", "dtype", "scalar"),
    [
        (prims.add, torch.add, PromotionKind.DEFAULT, u8, 300),
        (prims.add, torch.add, PromotionKind.DEFAULT, u8, -1),
        (prims.mul, torch.mul, PromotionKind.DEFAULT, i8, 1000),
        (prims.add, torch.add, PromotionKind.DEFAULT, f16, 1e6),
        (prims.eq, torch.eq, PromotionKind.ALWAYS_BOOL, u8, 300),
        (prims.lt, torch.lt, PromotionKind.ALWAYS_BOOL, bf16, 0.1),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_literal_scalars_wrap_and_round_as_eager(
    prim: Any, fn: Any, kind: PromotionKind, dtype: DType, scalar: Any
) -> None:
    """A literal scalar reaches the prim unrounded; its kernel wraps or rounds it as eager does."""
    values = np.array([1, 44, 45, 0.0999], dtype=np.float64)
    x_value = to_numpy(torch.from_numpy(values).to(torch_dtype(dtype)))
    with Builder() as b:
        x = b.add_input("x", TensorMeta((4,), dtype))
        graph = b.finish([elementwise(prim, x, scalar, kind=kind)])
    (ours,) = execute(graph, {"x": x_value}, check=True)
    assert compare(ours, to_numpy(fn(to_torch(x_value), scalar)))


def test_runtime_scalars_become_zero_dim_tensors() -> None:
    with Builder() as b:
        x = b.add_input("x", TensorMeta((2, 3), f16))
        s = b.add_input("s", ScalarMeta(float))
        z = elementwise(prims.add, x, s)
        graph = b.finish([z])
    assert [n.op for n in graph.nodes] == [
        "prims.convert_element_type",
        "prims.scalar_tensor",
        "prims.broadcast_in_dim",
        "prims.add",
        "prims.convert_element_type",
    ]
    assert (
        graph.nodes[1].kwargs["dtype"] is f32
        and graph.nodes[2].kwargs["broadcast_dimensions"] == ()
    )
    x_value = np.arange(6, dtype=np.float16).reshape(2, 3)
    (ours,) = execute(graph, {"x": x_value, "s": 2.5}, check=True)
    assert compare(ours, to_numpy(torch.from_numpy(x_value) + 2.5))


# -- emitted graphs on the executor against eager torch -----------------------------------------------

EXECUTED_OPS = {
    "add": (prims.add, torch.add, PromotionKind.DEFAULT),
    "sub": (prims.sub, torch.sub, PromotionKind.DEFAULT),
    "mul": (prims.mul, torch.mul, PromotionKind.DEFAULT),
    "maximum": (prims.maximum, torch.maximum, PromotionKind.DEFAULT),
    "true_divide": (prims.div, torch.true_divide, PromotionKind.INT_TO_FLOAT),
    "atan2": (prims.atan2, torch.atan2, PromotionKind.INT_TO_FLOAT),
    "eq": (prims.eq, torch.eq, PromotionKind.ALWAYS_BOOL),
    "lt": (prims.lt, torch.lt, PromotionKind.ALWAYS_BOOL),
}
OPERAND_SHAPES = [(2, 3), (3,), (2, 1), (1, 3), ()]


def _random_array(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    # np.asarray: a 0-dim draw is a NumPy scalar, which torch would take for a Python number.
    return np.asarray(_random_values(rng, dtype, shape))


def _random_values(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> Any:
    if dtype.is_bool:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.is_integer:
        return rng.integers(0 if dtype is u8 else -4, 5, shape).astype(dtype.numpy)
    if dtype.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype.numpy)
    # Small integers and halves collide often enough to exercise equality.
    return (
        rng.integers(-4, 5, shape) / 2 + (rng.random(shape) < 0.3) * rng.standard_normal(shape)
    ).astype(dtype.numpy)


@settings(max_examples=300)
@given(
    st.sampled_from(list(EXECUTED_OPS) + ["where"]),
    st.lists(st.tuples(operands, st.sampled_from(OPERAND_SHAPES)), min_size=2, max_size=2),
    st.integers(0, 2**32 - 1),
)
def test_emitted_graphs_match_eager(
    name: str, spec: list[tuple[Operand, tuple[int, ...]]], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    with Builder() as b:
        symbolic: list[Any] = []
        eager_args: list[Any] = []
        for i, (operand, shape) in enumerate(spec):
            if operand.form == "scalar":
                symbolic.append(operand.value)
                eager_args.append(operand.value)
                continue
            shape = shape if operand.form == "tensor" else ()
            arrays[f"x{i}"] = _random_array(rng, operand.dtype, shape)
            symbolic.append(b.add_input(f"x{i}", TensorMeta(shape, operand.dtype)))
            eager_args.append(to_torch(arrays[f"x{i}"]))
        if not arrays:
            return  # two Python numbers: no aten op takes that
        if name == "where":
            arrays["pred"] = rng.integers(0, 2, (2, 3)).astype(bool)
            pred = b.add_input("pred", TensorMeta((2, 3), b8))
            eager = _eager(lambda: torch.where(to_torch(arrays["pred"]), *eager_args))

            def build():
                return elementwise(
                    prims.where, pred, *symbolic, kind=PromotionKind.NO_OPMATH, promoting=[1, 2]
                )
        else:
            prim, fn, kind = EXECUTED_OPS[name]
            eager = _eager(lambda: fn(*eager_args))
            build = lambda: elementwise(prim, *symbolic, kind=kind)  # noqa: E731 - one of two one-line builders
        if eager is None:
            return  # eager torch rejects this combination
        # Comparisons run in the promoted dtype (eager's precision): complex32 there is refused too.
        if eager.dtype == torch.complex32 or promoted_dtype(*symbolic) is COMPLEX32:
            with pytest.raises(DTypeError, match="complex32"):
                build()
            return
        graph = b.finish([build()])
    (ours,) = execute(graph, arrays, check=True)
    result = compare(ours, to_numpy(eager))
    assert result, f"{name}{tuple(str(o) for o, _ in spec)}: {result.message}\n{graph}"
