"""Selections without `np.where`: `where(p, a, b)` costs NumPy a branch per element (about 15
times a multiply on random predicates), and `relu` and `clamp` lower to it. Two exact
replacements:

- **A zero branch** (`where(p, 0, b)`, `where(p, a, 0)`; a mask's zeros): the other
  branch's bit pattern times the predicate (or its negation) in the integers of its width. A
  product by 1 keeps every bit (NaN payloads, -0.0) and a product by 0 gives the bits of +0,
  exactly what the selection gives. A specialization of the `where` node (`zero_select`).
- **A bound selected against itself** (`where(x < c, c, x)`, `where(x > c, c, x)`, and `<=`,
  `>=`; a clamp's bounds, relu's zero): one `np.clip` (`Clamp`), one pass instead of a
  comparison and a selection, a clamp's two bounds in the same call, and a third of the time
  of np.maximum / np.minimum with a number: where x equals the bound both give its bits, and a
  NaN x gives x. Only a zero x of the other sign than a zero bound differs
  (`clip(-0.0, 0.0, ...)` may give either zero, while the selection keeps -0.0): where x can be
  -0.0, a call whose x holds one finds it by one reduction (-0.0's bit pattern is the smallest
  integer) and writes the selections' result there. Not needed where x cannot be -0.0 (x + 3 in
  hardswish; a batch norm's or a bias's `+ beta` whose stored values hold no -0.0, and a sum
  with such a value, as a residual connection's). A fusion rule (`bound_select_rule`): the
  comparisons and `where`s as one step.
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

# -0.0's bit pattern in those integers: the most negative one.
_NEGATIVE_ZERO = {bits: bits.type(np.iinfo(bits).min) for bits in _BITS.values()}


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


# The comparisons of x with c selecting c: True for those bounding x from below (maximum).
_FROM_BELOW: dict[str, bool] = {
    "prims.lt": True,
    "prims.le": True,
    "prims.gt": False,
    "prims.ge": False,
}
# c < x is x > c, and so on.
_MIRRORED = {
    "prims.lt": "prims.gt",
    "prims.le": "prims.ge",
    "prims.gt": "prims.lt",
    "prims.ge": "prims.le",
}


@attrs.frozen
class Clamp:
    """where(cmp(x, low), low, x), then where(cmp(that, high), high, that) (either may be
    absent: the dtype's extreme stands for it, beyond which nothing lies) as one `np.clip`,
    `low` <= `high` numbers of x's dtype. NumPy's clip takes a third of the time of np.maximum
    or np.minimum with a number (float32, 1.2M elements in L3: 0.19 against 0.43 ms; their
    loops for a number operand are not vectorized, clip's are), and gives their bits.

    Where x equals a bound both give its bits, and a NaN x gives x (its payload too). Only a zero
    of the other sign differs: np.clip(-0.0, 0.0, ...) may give either zero. So when a bound is
    +0.0 and x may hold -0.0, `bits` is the integer dtype of x's width, and a call whose x holds
    -0.0 (its bit pattern, the most negative integer, is the minimum: one reduction) writes at
    those elements the selections' result for -0.0 (`at_negative_zero`, computed at plan time).
    A -0.0 bound is never clamped (+0.0 in x would meet it)."""

    low: Any  # NumPy scalars of x's dtype
    high: Any
    bits: np.dtype[Any] | None = None
    at_negative_zero: Any = None  # the bits of the result for x = -0.0 (`bits` given)

    @property
    def __name__(self) -> str:  # named in plan_profile's reports, as ufuncs are
        return "clamp"

    def __call__(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        bits = self.bits
        if bits is None or x.size == 0:
            return np.clip(x, self.low, self.high, out=out)
        x_bits = x.view(bits)
        sign = _NEGATIVE_ZERO[bits]
        if x_bits.min() != sign:
            return np.clip(x, self.low, self.high, out=out)
        negative_zero = np.equal(x_bits, sign)  # before out (perhaps x itself) is written
        result = np.clip(x, self.low, self.high, out=out)
        result_bits = result.view(bits)
        # Those elements' bits cleared (a zero branch, as `ZeroSelect` makes it), then set to
        # the selections' (products of booleans: no pass branches on the data).
        ZeroSelect(False, bits, result.dtype)(negative_zero, result, out=result)
        if self.at_negative_zero:
            chosen = np.multiply(negative_zero, self.at_negative_zero, dtype=bits)
            np.bitwise_or(result_bits, chosen, out=result_bits)
        return result


def bound_select_rule(context: FusionContext, index: int) -> FusedGroup | None:
    """where(cmp(x, c), c, x) with cmp one of <, <=, >, >= (either operand order), c a number, x
    a real tensor of the result's dtype and the comparison read by nothing else; followed by
    the selection bounding it from the other side (a clamp's two bounds): one `Clamp`."""
    inner = _bound_select(context, index)
    if inner is None:
        return None
    compare_index, x, from_below, bound, op = inner
    selections = [(op, bound)]
    nodes: tuple[int, ...] = (compare_index, index)
    low, high = (bound, None) if from_below else (None, bound)
    result = context.node(index).results[0]
    readers = context.users.get(result, [])
    if result not in context.outputs and len(readers) == 2:
        outer = _bound_select(context, readers[1])
        if outer is not None and outer[0] == readers[0] and outer[1] is result:
            _, _, outer_from_below, outer_bound, outer_op = outer
            pair = (bound, outer_bound) if from_below else (outer_bound, bound)
            # np.clip is min(max(x, low), high): the maximum must come first, or low <= high.
            if outer_from_below is not from_below and (from_below or bool(pair[0] <= pair[1])):
                low, high = pair
                selections.append((outer_op, outer_bound))
                nodes = (*nodes, *readers)
    kernel = _clamp(context, x, low, high, selections)
    if kernel is None:
        return None
    return FusedGroup(
        nodes,
        (x,),
        kernel,
        fresh_result=True,
        takes_out=True,
        elementwise=True,
        out_operands=(0,),  # np.clip(x, low, high, out=x): element for element
    )


def _clamp(
    context: FusionContext, x: Value, low: Any, high: Any, selections: list[tuple[str, Any]]
) -> Clamp | None:
    """The Clamp of x between `low` and `high` (None: unbounded) giving the `selections`'
    (comparison, bound) results, or None when a bound is -0.0."""
    dtype = np.dtype(x.dtype.numpy)
    bounds = [b for b in (low, high) if b is not None]
    zeros = [b for b in bounds if x.dtype.is_floating and b == 0]
    if any(np.signbit(b) for b in zeros):
        return None
    if dtype.kind == "f":
        lowest, highest = dtype.type(-np.inf), dtype.type(np.inf)
    else:
        info = np.iinfo(dtype)
        lowest, highest = dtype.type(info.min), dtype.type(info.max)
    low = lowest if low is None else low
    high = highest if high is None else high
    if not zeros or _never_negative_zero(context, x):
        return Clamp(low, high)
    bits = _BITS[dtype.itemsize]
    value = dtype.type(-0.0)
    for op, bound in selections:  # the selections' result for x = -0.0, by their comparisons
        compare = direct_kernel(op.removeprefix("prims."), x.dtype)
        assert compare is not None  # comparisons of float32 and float64 (_bound_select)
        if compare(value, bound):
            value = bound
    return Clamp(low, high, bits, value.view(bits))


def _bound_select(context: FusionContext, index: int) -> tuple[int, Value, bool, Any, str] | None:
    """(the comparison's node index, x, whether c bounds x from below, c as a NumPy scalar of
    the dtype, the comparison with x first) of a where(cmp(x, c), c, x) node whose comparison
    only it reads, or None."""
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
    if len(compare.args) != 2 or op not in _FROM_BELOW:
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
    if converted.tobytes() != selected.tobytes():
        return None
    return compare_index, x, _FROM_BELOW[op], selected[()], op


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
