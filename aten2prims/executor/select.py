"""Selections without `np.where`: `where(p, a, b)` costs NumPy a branch per element (about 15
times a multiply on random predicates), and `relu` and `clamp` lower to it. Two exact
replacements:

- **A zero branch** (`where(p, 0, b)`, `where(p, a, 0)`; relu's `x < 0 ? 0 : x`): the other
  branch's bit pattern times the predicate (or its negation) in the integers of its width. A
  product by 1 keeps every bit (NaN payloads, -0.0) and a product by 0 gives the bits of +0,
  exactly what the selection gives. A specialization of the `where` node (`zero_select`).
- **A bound selected against itself** (`where(x < c, c, x)`, `where(x > c, c, x)`, and `<=`,
  `>=`; a clamp's bounds): `maximum(x, c)` / `minimum(x, c)`, one pass instead of a comparison
  and a selection, and a clamp's two bounds one `np.clip`: where x equals the bound both give
  its bits, and a NaN x gives NaN either way. A floating zero bound only where x cannot be -0.0
  (x + 3 in hardswish; a batch norm's or a bias's `+ beta` whose stored values hold no -0.0,
  and a sum with such a value, as a residual connection's):
  `maximum(-0.0, 0.0)` may give either zero, while the selection keeps -0.0. A fusion rule
  (`bound_select_rule`): the comparisons and `where`s as one step.
"""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np

from prims.common import is_number, number_as

from ..ir.dtypes import DType
from ..ir.graph import Node
from ..ir.values import Value
from .direct_kernels import direct_kernel
from .fusion import FusedGroup, FusionContext

# The elements of a block whose negated predicate one selection makes at a time (ZeroSelect):
# 64 KiB of bools, in L2 while the block's product reads them.
NEGATION_BLOCK = 1 << 16

# Integer dtypes of the floats' widths (bit patterns multiplied by 0 or 1).
_BITS: dict[int, np.dtype[Any]] = {
    2: np.dtype(np.int16),
    4: np.dtype(np.int32),
    8: np.dtype(np.int64),
}


def _is_zero(value: Any, dtype: DType) -> bool:
    """`value` is a Python number that converts to the all-zero bit pattern of `dtype`."""
    if not is_number(value) or type(value) is complex or value != 0:
        return False
    return not (dtype.is_floating and math.copysign(1.0, value) < 0)


@attrs.frozen
class ZeroSelect:
    """where(p, 0, value) (`keep_when` False) or where(p, value, 0) (`keep_when` True) for a
    tensor `value` of a real dtype: its bits times the predicate, seen as that dtype again."""

    keep_when: bool
    bits: np.dtype[Any] | None  # the integer dtype of a float's width; None for integers
    dtype: np.dtype[Any]

    def __call__(
        self, predicate: np.ndarray, value: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        if self.bits is not None and not self.keep_when:
            return self._dropping(predicate, value, out)
        keep = predicate if self.keep_when else np.logical_not(predicate)
        if self.bits is None:
            return np.multiply(value, keep, dtype=self.dtype, out=out)
        # A fresh array of the float dtype unless the plan gives one (an arena buffer).
        if out is None:
            out = np.empty(np.broadcast_shapes(keep.shape, value.shape), self.dtype)
        np.multiply(value.view(self.bits), keep, out=out.view(self.bits), dtype=self.bits)
        return out

    def _dropping(
        self, predicate: np.ndarray, value: np.ndarray, out: np.ndarray | None
    ) -> np.ndarray:
        """A float value's bits times the predicate's negation. Where the operands and the
        result are whole arrays of one shape, block by block (`NEGATION_BLOCK` elements): the
        negation of a block is a small scratch array rather than a temporary of the result's
        size (a quarter of a float32 result's bytes) made at every call."""
        bits = self.bits
        assert bits is not None  # only called for floats
        if out is None:
            out = np.empty(np.broadcast_shapes(predicate.shape, value.shape), self.dtype)
        size = out.size
        if (
            size <= NEGATION_BLOCK
            or predicate.shape != out.shape
            or value.shape != out.shape
            or not (
                predicate.flags.c_contiguous and value.flags.c_contiguous and out.flags.c_contiguous
            )
        ):
            keep = np.logical_not(predicate)
            np.multiply(value.view(bits), keep, out=out.view(bits), dtype=bits)
            return out
        flat_predicate = predicate.reshape(-1)
        flat_value = value.reshape(-1).view(bits)
        flat_out = out.reshape(-1).view(bits)
        scratch = np.empty(NEGATION_BLOCK, np.bool_)
        for start in range(0, size, NEGATION_BLOCK):
            stop = min(start + NEGATION_BLOCK, size)
            keep = np.logical_not(flat_predicate[start:stop], out=scratch[: stop - start])
            np.multiply(flat_value[start:stop], keep, out=flat_out[start:stop], dtype=bits)
        return out


def zero_select(node: Node) -> tuple[ZeroSelect, tuple[Value, Value]] | None:
    """The ZeroSelect computing a `where` node exactly, with its operands, or None."""
    predicate, a, b = node.args
    if type(predicate) is not Value:
        return None
    dtype = node.results[0].dtype
    if dtype.is_complex or dtype.is_bool:
        return None
    if type(b) is Value and _is_zero(a, dtype):
        keep_when, value = False, b
    elif type(a) is Value and _is_zero(b, dtype):
        keep_when, value = True, a
    else:
        return None
    if not value.is_tensor or value.dtype is not dtype:
        return None
    numpy_dtype = np.dtype(dtype.numpy)
    bits = _BITS.get(numpy_dtype.itemsize) if dtype.is_floating else None
    if dtype.is_floating and bits is None:
        return None
    return ZeroSelect(keep_when, bits, numpy_dtype), (predicate, value)


# The comparison of x with c selecting c, and the function giving the same selection.
_BOUNDED: dict[str, np.ufunc] = {
    "prims.lt": np.maximum,
    "prims.le": np.maximum,
    "prims.gt": np.minimum,
    "prims.ge": np.minimum,
}
# c < x is x > c, and so on.
_MIRRORED = {
    "prims.lt": "prims.gt",
    "prims.le": "prims.ge",
    "prims.gt": "prims.lt",
    "prims.ge": "prims.le",
}


def bound_select_rule(context: FusionContext, index: int) -> FusedGroup | None:
    """where(cmp(x, c), c, x) with cmp one of <, <=, >, >= (either operand order), c a number, x
    a real tensor of the result's dtype and the comparison read by nothing else: maximum(x, c)
    or minimum(x, c); followed by the selection bounding it from the other side (a clamp's two
    bounds), both as one np.clip. A floating zero bound only where x is never -0.0
    (`_never_negative_zero`)."""
    inner = _bound_select(context, index)
    if inner is None:
        return None
    compare_index, x, ufunc, bound = inner
    result = context.node(index).results[0]
    readers = context.users.get(result, [])
    if result not in context.outputs and len(readers) == 2:
        outer = _bound_select(context, readers[1])
        if outer is not None and outer[0] == readers[0] and outer[1] is result:
            _, _, outer_ufunc, outer_bound = outer
            low, high = (bound, outer_bound) if ufunc is np.maximum else (outer_bound, bound)
            in_order = ufunc is np.maximum or bool(low <= high)
            if outer_ufunc is not ufunc and in_order and _exact(context, x, low, high):
                return FusedGroup(
                    (compare_index, index, *readers),
                    (x, low, high),
                    np.clip,
                    fresh_result=True,
                    takes_out=True,
                    elementwise=True,
                    out_operands=(0,),  # np.clip(x, low, high, out=x): element for element
                )
    if not _exact(context, x, bound):
        return None
    return FusedGroup(
        (compare_index, index),
        (x, bound),
        ufunc,
        fresh_result=True,
        takes_out=True,
        elementwise=True,
    )


def _bound_select(context: FusionContext, index: int) -> tuple[int, Value, np.ufunc, Any] | None:
    """(the comparison's node index, x, maximum or minimum, c converted to the dtype) of a
    where(cmp(x, c), c, x) node whose comparison only it reads, or None."""
    node = context.node(index)
    if node.op != "prims.where" or index in context.claimed:
        return None
    predicate, bound, x = node.args
    if type(x) is not Value or not is_number(bound) or type(bound) is complex:
        return None
    dtype = node.results[0].dtype
    if dtype.is_complex or dtype.is_bool or x.dtype is not dtype or not x.is_tensor:
        return None
    if direct_kernel("maximum", dtype) is None or bound != bound:  # NaN bounds select nothing
        return None
    if not dtype.is_floating and type(bound) is float:
        return None
    found = context.defining_node(predicate)
    if found is None:
        return None
    compare_index, compare = found
    op = compare.op
    if len(compare.args) != 2 or op not in _BOUNDED:
        return None
    left, right = compare.args
    if right is x and left is not x:
        left, right, op = right, left, _MIRRORED[op]
    if left is not x or not is_number(right) or type(right) is not type(bound):
        return None
    if not context.internal(compare_index, {compare_index, index}):
        return None
    with np.errstate(all="ignore"):  # the number as both nodes convert it
        converted, selected = number_as(right, dtype), number_as(bound, dtype)
    if np.asarray(converted).tobytes() != np.asarray(selected).tobytes():
        return None
    return compare_index, x, _BOUNDED[op], selected


def _exact(context: FusionContext, x: Value, *bounds: Any) -> bool:
    """maximum/minimum with these bounds select as the comparisons do: no bound is a floating
    zero, or x is never -0.0."""
    if not x.dtype.is_floating or all(bound != 0 for bound in bounds):
        return True
    return _never_negative_zero(context, x)


# How many sums deep `_never_negative_zero` follows a term that is itself a sum.
_SUM_DEPTH = 4


def _never_negative_zero(context: FusionContext, value: Value, depth: int = _SUM_DEPTH) -> bool:
    """`value` is a sum or difference one of whose terms is never -0.0: a nonzero number (x + 3,
    hardswish's shift), stored data the plan starts from (a batch norm's shift, a bias; possibly
    broadcast) whose term in the sum holds no -0.0, or a value that is itself such a sum (a
    residual connection added to a batch norm's output). In IEEE arithmetic a sum is -0.0 only
    when both terms are -0.0 (an exact zero of opposite terms is +0.0), so such a result never
    is."""
    index = context.producer.get(value)
    if index is None:
        return False
    node = context.node(index)
    if node.op not in ("prims.add", "prims.sub") or len(node.args) != 2:
        return False
    numbers = [a for a in node.args if is_number(a)]
    if len(numbers) == 1 and type(numbers[0]) is not complex:
        with np.errstate(all="ignore"):
            return bool(number_as(numbers[0], value.dtype) != 0)
    for position, operand in enumerate(node.args):
        data = _stored(context, operand)
        if data is None or data.dtype.kind != "f":
            continue
        # The term the sum adds: the data, or its negation when it is subtracted.
        negated = node.op == "prims.sub" and position == 1
        zeros = data == 0
        if not np.any(zeros & (np.signbit(data) != negated)):
            return True
    # A term that is such a sum (subtracted, its negation could be -0.0: only the first term).
    terms = node.args if node.op == "prims.add" else node.args[:1]
    return depth > 0 and any(
        type(term) is Value
        and term.dtype is value.dtype
        and _never_negative_zero(context, term, depth - 1)
        for term in terms
    )


def _stored(context: FusionContext, operand: Any) -> np.ndarray | None:
    """The stored data the plan starts from that `operand` is, or broadcasts (None otherwise)."""
    if type(operand) is not Value:
        return None
    index = context.producer.get(operand)
    if index is not None and context.node(index).op == "prims.broadcast_in_dim":
        operand = context.node(index).args[0]
    data = context.constants.get(operand) if type(operand) is Value else None
    return None if data is None else np.asarray(data)
