"""Canonicalization: a table of small rules, each `rule(node, graph_so_far)` returning
a replacement or None. A replacement is either an existing value (the node's only result is
replaced by it everywhere and the node disappears) or a new node computing the same results
(same Value objects, same metas) from other operands.

Every rule keeps results bit-identical (tests/test_passes.py checks each on real graphs):
- `convert_element_type` to the operand's own dtype is the operand;
- `convert(convert(x, b), c)` is `convert(x, c)` when every value of x's dtype is exactly
  representable in b (LOSSLESS), since then the second conversion sees x's own values;
- a `broadcast_in_dim` to the operand's own shape that keeps every dim in place is the operand,
  and a broadcast of a broadcast is one broadcast;
- an identity `transpose` is the operand, a transpose of a transpose is one transpose;
- `squeeze` of no dims and `collapse_view` of one dim are their operand;
- a chain of reshaping views (`squeeze`, `split_dim`, `collapse_view`, `broadcast_in_dim` that
  only inserts size-1 dims) that ends in the shape it started from is its first operand;
- a `where` branch that is a `full`/`full_like` of the result's dtype holding its fill value
  exactly is that value, as a number operand;
- whether a row holds anything but -inf (`any(x != -inf)`) is its maximum `!= -inf` where the
  graph already takes that maximum (a safe softmax's).

Copies that change no value (`clone`, `reshape` to the same shape) are kept on purpose: the
graph asked for a row-major layout there (torch's `.contiguous()`), and the windows and reshapes
after it would otherwise each copy the strided operand again. (Removing the clones of the
2-layer transformer made its three `select` windows copy three times: measured slower.) The
executor never needs them for aliasing: it copies any output that is, or views, an input or
another output.

A rule never looks at data, only at ops, metas and attributes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from prims.common import number_as
from prims.registry import lookup

from ..ir.dtypes import DType
from ..ir.graph import Graph, GraphOutput, Node
from ..ir.values import Value, map_values

Replacement = Value | Node
# rule(node, producers) -> replacement or None; producers maps values to the (already
# canonical) nodes defining them.
Rule = Callable[[Node, dict[Value, Node]], "Replacement | None"]

_INTEGER_RANGES: dict[DType, tuple[int, int]] = {
    DType.bool: (0, 1),
    DType.uint8: (0, 255),
    DType.int8: (-128, 127),
    DType.int16: (-(2**15), 2**15 - 1),
    DType.int32: (-(2**31), 2**31 - 1),
    DType.int64: (-(2**63), 2**63 - 1),
}
# Integers of magnitude up to 2**p are exact in a float with p significand bits.
_SIGNIFICAND_BITS: dict[DType, int] = {
    DType.bfloat16: 8,
    DType.float16: 11,
    DType.float32: 24,
    DType.float64: 53,
}
_FLOAT_WIDENING = {
    DType.float16: (DType.float32, DType.float64, DType.complex64, DType.complex128),
    DType.bfloat16: (DType.float32, DType.float64, DType.complex64, DType.complex128),
    DType.float32: (DType.float64, DType.complex64, DType.complex128),
    DType.float64: (DType.complex128,),
    DType.complex64: (DType.complex128,),
}


def lossless(source: DType, target: DType) -> bool:
    """Every value of `source` is exactly a value of `target` (so converting it on from target
    gives what converting it from source would)."""
    if source is target:
        return True
    if source in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[source]
        if target in _INTEGER_RANGES:
            target_low, target_high = _INTEGER_RANGES[target]
            return target is not DType.bool and target_low <= low and high <= target_high
        bits = _SIGNIFICAND_BITS.get(target.real if target.is_complex else target)
        return bits is not None and max(-low, high) <= 2**bits
    return target in _FLOAT_WIDENING.get(source, ())


def _single_result(node: Node) -> Value | None:
    return node.results[0] if len(node.results) == 1 else None


def identity_convert(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    if node.op == "prims.convert_element_type":
        operand = node.args[0]
        if type(operand) is Value and operand.is_tensor and operand.dtype is node.kwargs["dtype"]:
            return operand
    return None


def convert_chain(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    if node.op != "prims.convert_element_type":
        return None
    inner = producers.get(node.args[0])
    if inner is None or inner.op != "prims.convert_element_type":
        return None
    source = inner.args[0]
    if (
        type(source) is not Value
        or not source.is_tensor
        or not lossless(source.dtype, inner.kwargs["dtype"])
    ):
        return None
    return Node(node.op, (source,), dict(node.kwargs), node.results, node.provenance)


def identity_broadcast(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    if node.op == "prims.broadcast_in_dim":
        operand = node.args[0]
        shape, dims = tuple(node.kwargs["shape"]), tuple(node.kwargs["broadcast_dimensions"])
        if type(operand) is Value and operand.shape == shape and dims == tuple(range(len(shape))):
            return operand
    return None


def broadcast_chain(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    if node.op != "prims.broadcast_in_dim":
        return None
    inner = producers.get(node.args[0])
    if inner is None or inner.op != "prims.broadcast_in_dim":
        return None
    outer_dims = node.kwargs["broadcast_dimensions"]
    dims = [outer_dims[d] for d in inner.kwargs["broadcast_dimensions"]]
    kwargs = {"shape": node.kwargs["shape"], "broadcast_dimensions": type(outer_dims)(dims)}
    return Node(node.op, (inner.args[0],), kwargs, node.results, node.provenance)


def identity_transpose(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    if node.op == "prims.transpose" and tuple(node.kwargs["permutation"]) == tuple(
        range(len(node.kwargs["permutation"]))
    ):
        return node.args[0]
    return None


def transpose_chain(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    if node.op != "prims.transpose":
        return None
    inner = producers.get(node.args[0])
    if inner is None or inner.op != "prims.transpose":
        return None
    outer, first = node.kwargs["permutation"], inner.kwargs["permutation"]
    composed = type(outer)(first[d] for d in outer)
    return Node(node.op, (inner.args[0],), {"permutation": composed}, node.results, node.provenance)


def identity_view(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    """Views of all of their operand, unchanged. (Copies that change nothing, such as `clone`,
    stay: they give the executor a row-major layout that later windows and reshapes read
    without copying again.)"""
    result = _single_result(node)
    if result is None or not node.args or type(node.args[0]) is not Value:
        return None
    operand: Value = node.args[0]
    if node.op == "prims.squeeze" and len(node.kwargs["dimensions"]) == 0:
        return operand
    if (
        node.op == "prims.collapse_view"
        and node.kwargs["start"] == node.kwargs["end"]
        and operand.ndim > 0
    ):
        return operand
    return None


def _is_reshape(node: Node) -> bool:
    """A view whose result is its operand's elements, in row-major order, in another shape."""
    definition = lookup(node.op)
    if definition is not None and definition.reshape and definition.view:
        return True
    if node.op == "prims.broadcast_in_dim":
        return node.results[0].numel == node.args[0].numel
    return False


def reshape_round_trip(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    if not _is_reshape(node) or type(node.args[0]) is not Value:
        return None
    target = node.results[0].meta
    current: Value = node.args[0]
    for _ in range(16):  # reshape chains are short; bound the walk
        inner = producers.get(current)
        if inner is None or not _is_reshape(inner) or type(inner.args[0]) is not Value:
            return None
        current = inner.args[0]
        if current.meta == target:
            return current
    return None


def constant_where_branch(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    """A `where` branch that is a `full` or `full_like` of the result's dtype, whose fill value
    that dtype holds exactly: the fill value as a number operand. The selection is the same
    element for element (`where` converts a number as the fill does), the fill is no longer
    needed, and a zero branch lets the executor select by a product of bit patterns
    (`executor/select.py`): the safe softmax of scaled_dot_product_attention zeroes its rows of
    -inf with `where(p, full_like(s, 0), s)`."""
    if node.op != "prims.where":
        return None
    args = list(node.args)
    dtype = node.results[0].dtype
    for position in (1, 2):
        other = args[3 - position]
        producer = producers.get(args[position]) if type(args[position]) is Value else None
        if producer is None or producer.op not in ("prims.full", "prims.full_like"):
            continue
        if type(other) is not Value or not other.is_tensor:  # where needs a tensor operand
            continue
        value = producer.kwargs["fill_value"]
        if producer.results[0].dtype is not dtype or not _held_exactly(value, dtype):
            continue
        args[position] = value
    if args == list(node.args):
        return None
    definition = lookup(node.op)
    if definition is None or definition.meta is None:
        return None
    if definition.meta(*args) != node.results[0].meta:  # the strides follow the tensor operands
        return None
    return Node(node.op, tuple(args), dict(node.kwargs), node.results, node.provenance)


def rows_not_all_negative_infinity(node: Node, producers: dict[Value, Node]) -> Replacement | None:
    """`any(x != -inf)` over some dims of a floating x — as torch's `logical_not(eq(x, -inf))`
    lowers and reduces it, `amax(eq(eq(x, -inf), False), dims)` — where the graph already computes
    `amax(x, dims)`: that maximum `!= -inf`. A row holds an element other than -inf exactly when
    its maximum is not -inf (a NaN makes both true: the maximum of a row with a NaN is NaN), and
    the reduction has elements (amax needs them). The safe softmax of scaled_dot_product_attention
    asks which rows are all -inf right after its softmax took their maxima: two comparisons and a
    reduction over the scores become one comparison per row."""
    if node.op != "prims.amax" or node.results[0].dtype is not DType.bool:
        return None
    negation = _producer(node.args[0], producers)
    if negation is None or negation.op != "prims.eq" or negation.args[1] is not False:
        return None
    comparison = _producer(negation.args[0], producers)
    if comparison is None or comparison.op != "prims.eq":
        return None
    x, bound = comparison.args
    if (
        type(x) is not Value
        or not x.is_tensor
        or not x.dtype.is_floating
        or type(bound) is not float
        or bound != -math.inf
    ):
        return None
    maximum = next(
        (
            other.results[0]
            for other in producers.values()
            if other.op == "prims.amax"
            and other.args == (x,)
            and other.kwargs == node.kwargs
            and other.results[0].shape == node.results[0].shape
        ),
        None,
    )
    if maximum is None:
        return None
    return Node("prims.ne", (maximum, bound), {}, node.results, node.provenance)


def _producer(value: Any, producers: dict[Value, Node]) -> Node | None:
    return producers.get(value) if type(value) is Value else None


def _held_exactly(value: Any, dtype: DType) -> bool:
    """`value` is a real Python number (of a kind `dtype` takes as a number operand) that
    `dtype` holds exactly, signed zeros included."""
    if type(value) not in (bool, int, float) or dtype.is_complex:
        return False
    kind = DType.from_python_type(type(value))
    if kind.category > dtype.category:
        return False
    with np.errstate(all="ignore"):
        converted = number_as(value, dtype).item()
    if converted != value:  # rounded, wrapped, or NaN
        return False
    return type(value) is not float or math.copysign(1.0, converted) == math.copysign(1.0, value)


RULES: list[Rule] = [
    identity_convert,
    convert_chain,
    identity_broadcast,
    broadcast_chain,
    identity_transpose,
    transpose_chain,
    identity_view,
    reshape_round_trip,
    constant_where_branch,
    rows_not_all_negative_infinity,
]

# A node rewritten this many times in a row is left as it is (a guard; rules only shrink chains).
_MAX_REWRITES = 32


def canonicalize(graph: Graph, rules: list[Rule] | None = None) -> Graph:
    """A graph with every rule applied until none matches (the same graph object when nothing
    changed). Nodes that do not change are kept as they are (the same objects)."""
    rules = RULES if rules is None else rules
    replaced: dict[Value, Value] = {}
    producers: dict[Value, Node] = {}
    nodes: list[Node] = []
    changed = False
    for node in graph.nodes:
        current: Node | None = _remapped(node, replaced)
        for _ in range(_MAX_REWRITES):
            assert current is not None
            replacement = _first_match(current, rules, producers)
            if replacement is None:
                break
            if isinstance(replacement, Value):
                result = current.results[0]
                if replacement.meta != result.meta:
                    raise AssertionError(
                        f"canonicalization replaced {result!r} by {replacement!r} of another meta"
                    )
                replaced[result] = replacement
                current = None
                break
            current = replacement
        if current is not node:
            changed = True
        if current is not None:
            nodes.append(current)
            for result in current.results:
                producers[result] = current
    if not changed:
        return graph
    outputs = [GraphOutput(replaced.get(o.value, o.value), o.kind, o.target) for o in graph.outputs]
    return graph.with_body(list(graph.inputs), nodes, outputs, replaced)


def _first_match(node: Node, rules: list[Rule], producers: dict[Value, Node]) -> Replacement | None:
    if node.namespace != "prims":
        return None
    for rule in rules:
        replacement = rule(node, producers)
        if replacement is not None:
            return replacement
    return None


def _remapped(node: Node, replaced: dict[Value, Value]) -> Node:
    """The node reading replacement values (the same node when none of its operands changed)."""
    if not replaced or not any(value in replaced for value in node.operand_values()):
        return node

    def remap(operand: Any) -> Any:
        return map_values(operand, lambda v: replaced.get(v, v))

    args = tuple(remap(a) for a in node.args)
    kwargs = {name: remap(a) for name, a in node.kwargs.items()}
    return Node(node.op, args, kwargs, node.results, node.provenance)


__all__ = ["RULES", "Rule", "canonicalize", "lossless"]
