"""Arithmetic on sizes (`x.shape[0] * 2`, `x.shape[2] * 1.5`, `h / w` in a graph exported with
dynamic shapes), and the checks torch.export records: on sizes (`_assert_scalar`) and on data
(`_assert_async`, lowered to `prims.check`).

The operands are ints, floats, symbolic sizes and float expressions over them
(`aten2prims.ir.symbolic`); each rule computes the result with Python's own operators, so a
symbolic operand gives a symbolic result and the lowered graph holds no node for it.
Comparisons give a bool, or a condition on the symbols when their ranges do not settle it.
"""

from __future__ import annotations

from typing import Any

import prims
from aten2prims.errors import ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.symbolic import assume, is_symbolic, rounded, to_float
from aten2prims.promotion import convert_number

from .registry import register


@register("aten.add.int")
def add_int(a: Any, b: Any) -> Any:
    return a + b


@register("aten.sub.int")
def sub_int(a: Any, b: Any) -> Any:
    return a - b


@register("aten.mul.int")
def mul_int(a: Any, b: Any) -> Any:
    return a * b


@register("aten.floordiv.int")
def floordiv_int(a: Any, b: Any) -> Any:
    return a // b


@register("aten.remainder.int")
def remainder_int(a: Any, b: Any) -> Any:
    return a % b


@register("aten.neg.int")
def neg_int(a: Any) -> Any:
    return -a


@register("aten.eq.int")
def eq_int(a: Any, b: Any) -> Any:
    return a == b


@register("aten.ne.int")
def ne_int(a: Any, b: Any) -> Any:
    return a != b


@register("aten.lt.int")
def lt_int(a: Any, b: Any) -> Any:
    return a < b


@register("aten.le.int")
def le_int(a: Any, b: Any) -> Any:
    return a <= b


@register("aten.gt.int")
def gt_int(a: Any, b: Any) -> Any:
    return a > b


@register("aten.ge.int")
def ge_int(a: Any, b: Any) -> Any:
    return a >= b


# -- on floats: Python's float arithmetic, as torch evaluates these nodes --------------------------


@register("aten.add.float", "aten.add.int_float", "aten.add.float_int")
def add_float(a: Any, b: Any) -> Any:
    return a + b


@register("aten.sub.float", "aten.sub.int_float", "aten.sub.float_int")
def sub_float(a: Any, b: Any) -> Any:
    return a - b


@register("aten.mul.float", "aten.mul.int_float", "aten.mul.float_int")
def mul_float(a: Any, b: Any) -> Any:
    return a * b


@register("aten.div.int", "aten.div.float")
def div_float(a: Any, b: Any) -> Any:
    """Python's true division (of two ints: the correctly rounded quotient)."""
    return a / b


@register("aten.pow.float", "aten.pow.int_float", "aten.pow.float_int")
def pow_float(a: Any, b: Any) -> Any:
    return to_float(a) ** b


@register("aten.neg.float")
def neg_float(a: Any) -> Any:
    return -a


@register("aten.Float.int")
def float_int(a: Any) -> Any:
    return to_float(a)


@register("aten.Int.float")
def int_float(a: Any) -> Any:
    """int() of a float: truncated toward zero."""
    return rounded("trunc", a)


@register("aten.floor.float")
def floor_float(a: Any) -> Any:
    return rounded("floor", a)


@register("aten.ceil.float")
def ceil_float(a: Any) -> Any:
    return rounded("ceil", a)


@register("aten._assert_async.msg")
def assert_async_msg(self: Any, assert_msg: str) -> tuple[()]:
    """A condition on the data (one_hot's class range): checked when the graph runs, raising
    `assert_msg` when the one element of `self` is zero (false)."""
    condition = self if self.dtype is DType.bool else prims.ne(self, convert_number(0, self.dtype))
    prims.check(condition, assert_msg)
    return ()


@register("aten._assert_async.default")
def assert_async(self: Any) -> tuple[()]:
    return assert_async_msg(self, "Expected Tensor with single nonzero value, but got zero")


@register("aten._assert_scalar.default")
def assert_scalar(self: Any, assert_msg: str) -> tuple[()]:
    """torch._check on sizes: a condition the ranges do not settle is assumed from here on and
    becomes a run-time check of the graph; a false one is refused now."""
    if is_symbolic(self):
        assume(self, assert_msg)
    elif not self:
        raise ShapeError(assert_msg)
    return ()
