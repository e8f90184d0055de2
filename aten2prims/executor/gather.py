"""The orthogonal gather fusion: `gather_nd(a, [I_0, ..., I_{n-1}])` whose index I_k is a
broadcast of a smaller index S_k along its own consecutive block of result dims, the blocks in
order (I_0's first), runs as one `np.take` of S_k along each axis of `a` in turn:

    result[p] = a[S_0[p in block 0], S_1[p in block 1], ...]  ==  take(take(a, S_0, 0), S_1, ...)

Resampling rules (nearest and bilinear upsampling) index this way: a ramp over the batch and
channels, a table of source positions over the output's rows and columns. The generic kernel
materializes every index at the result's size and a flat position per element; here the indices
stay as small as they are written, and an index known at plan time to be the identity ramp
(`iota` from 0 by 1, or folded data equal to it) is not taken at all.

Bounds are checked on the small indices, with the generic kernel's error (`checked_index`).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from prims.indexing import checked_index

from ..ir.values import Value
from .fusion import FusedGroup, FusionContext, register_fusion


@attrs.frozen
class OrthogonalGather:
    """Takes each index along its axis of `a` in turn (skipping identity ramps)."""

    fresh_result = True  # returns one new array (inplace.py may then reuse it)

    sizes: tuple[int, ...]  # a's shape
    identity: tuple[bool, ...]  # index k is known to be arange(sizes[k])

    def __call__(self, a: np.ndarray, *indices: np.ndarray) -> np.ndarray:
        result = a
        axis = 0
        for dim, (index, size, identity) in enumerate(zip(indices, self.sizes, self.identity)):
            checked_index(index, size, dim)
            if not identity:
                result = np.take(result, index, axis=axis)
            axis += index.ndim
        return result.copy() if result is a else result


def _orthogonal_gather_rule(context: FusionContext, index: int) -> FusedGroup | None:
    node = context.node(index)
    if node.op != "prims.gather_nd" or len(node.args) != 2 or type(node.args[1]) is not tuple:
        return None
    a, indices = node.args
    if type(a) is not Value or not indices or len(indices) != a.ndim:
        return None
    shape = node.results[0].shape
    members = {index}
    sources: list[Any] = []
    identity: list[bool] = []
    next_dim = 0
    for dim, operand in enumerate(indices):
        found = context.defining_node(operand)
        if found is None or found[1].op != "prims.broadcast_in_dim" or type(found[1].args[0]) is not Value:
            return None
        broadcast_index, broadcast = found
        source: Value = broadcast.args[0]
        dims = tuple(broadcast.kwargs["broadcast_dimensions"])
        if dims != tuple(range(next_dim, next_dim + source.ndim)) or source.shape != shape[next_dim : next_dim + source.ndim]:
            return None
        next_dim += source.ndim
        if context.internal(broadcast_index, {index, broadcast_index}):
            members.add(broadcast_index)
        sources.append(source)
        identity.append(source.ndim == 1 and _is_ramp(context, source, a.shape[dim]))
    if next_dim != len(shape):
        return None
    kernel = OrthogonalGather(tuple(a.shape), tuple(identity))
    return FusedGroup(tuple(sorted(members)), (a, *sources), kernel)


def _is_ramp(context: FusionContext, value: Value, length: int) -> bool:
    """`value` is 0, 1, ..., length - 1, as a plan-time fact (an iota node or folded data)."""
    if value.shape != (length,):
        return False
    producer = context.producer.get(value)
    if producer is not None:
        node = context.node(producer)
        return node.op == "prims.iota" and node.kwargs.get("start") == 0 and node.kwargs.get("step") == 1
    for graph_input in context.graph.inputs:
        if graph_input.value is value and graph_input.data is not None:
            data = graph_input.data
            return data.dtype.kind in "iu" and bool(np.array_equal(data, np.arange(length)))
    return False


register_fusion(_orthogonal_gather_rule)
