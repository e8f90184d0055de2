"""The orthogonal gather fusion: `gather_nd(a, [I_0, ..., I_{n-1}])` whose index I_k is a
broadcast of a smaller index S_k along its own consecutive block of result dims, the blocks in
order (I_0's first), runs as one `np.take` of S_k along each axis of `a` in turn:

    result[p] = a[S_0[p in block 0], S_1[p in block 1], ...]  ==  take(take(a, S_0, 0), S_1, ...)

Resampling rules index this way: upsampling takes a ramp over the batch and channels and a
vector of source positions along each of the rows and columns; grid sampling takes ramps over
the batch and channels and a table of flat positions that also varies along the batch. So an
index may also span *batch dims*: the result dim of an identity ramp (`iota` from 0 by 1, or
folded data equal to it; such a ramp is never taken). The kernel then loops over the batch
dims' positions and takes, in each slice, the indices' slices (what NumPy's multi-index fancy
indexing computes, measured 3-4x faster). The generic kernel would materialize every index at
the result's size and a flat position per element; here the indices stay as small as they are
written.

Takes of several indices run in the order of least estimated cost: a take copies one run of
the array's trailing axes per index entry, and short runs cost per element (nearest upsampling,
taking its columns first and its rows second, measured 1.4x faster than rows first).

An index source may also hold size-1 dims its broadcast stretches (BERT's token-type ids: one
row of a buffer for the whole batch): the kernel takes a broadcast view of it at its block's
shape, an index the generic kernel would materialize element by element (BERT's token-type
embedding, 4×128×256 values, 1.58 ms as the generic gather).

Bounds are checked on the small indices, with the generic kernel's error (`checked_index`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from prims.indexing import checked_index

from ..ir.values import Value
from .fusion import FusedGroup, FusionContext

# A take copies one run of the trailing axes per index entry; a run costs about this many
# elements' worth of copying on top of its length (measured on float32 takes along the last axis
# against takes of 56-element rows).
RUN_COST = 8
# Batch dims are looped over in Python only while each slice holds this many result elements on
# average (or there are at most MIN_BATCH_LOOP slices); otherwise the generic kernel runs.
SLICE_ELEMENTS = 4096
MIN_BATCH_LOOP = 16
# Orders of takes are compared when at most this many axes are taken.
MAX_ORDERED = 4


@attrs.frozen
class _Take:
    """Take index operand number `index` along axis `axis` of the array at that point."""

    index: int
    axis: int


@attrs.frozen
class OrthogonalGather:
    """For each position of the batch dims (none: one slice): the slice of `a` at the batch
    axes, taken by the indices' slices at that position, in the order of `takes`, into the
    result's slice at that position."""

    sizes: tuple[int, ...]  # a's shape
    identity: tuple[bool, ...]  # index k is known to be arange(sizes[k]) (never taken)
    takes: tuple[_Take, ...]
    result_shape: tuple[int, ...]
    batch_sizes: tuple[int, ...] = ()  # the batch dims' sizes, in the result's order
    # Which entry of a batch position indexes each axis of a / each dim of an index's source /
    # each dim of the result (None: all of it).
    a_batch: tuple[int | None, ...] = ()
    index_batch: tuple[tuple[int | None, ...], ...] = ()
    result_batch: tuple[int | None, ...] = ()
    # Per index: the shape of its block of result dims where its source stretches size-1 dims
    # (the source is taken as a broadcast view of that shape), else None.
    stretched: tuple[tuple[int, ...] | None, ...] = ()

    def __call__(
        self, a: np.ndarray, *indices: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        for dim, (index, size, identity) in enumerate(zip(indices, self.sizes, self.identity)):
            if not identity:
                checked_index(index, size, dim)
        if self.stretched:
            indices = tuple(
                index if shape is None else np.broadcast_to(index, shape)
                for index, shape in zip(indices, self.stretched)
            )
        if not self.batch_sizes:
            result = self._chain(a, indices, out)
            return result.copy() if result is a else result
        if out is None:
            out = np.empty(self.result_shape, a.dtype)
        taken = {take.index for take in self.takes}
        for position in itertools.product(*map(range, self.batch_sizes)):
            sliced = [
                index[_at(position, self.index_batch[k])] if k in taken else index
                for k, index in enumerate(indices)
            ]
            self._chain(
                a[_at(position, self.a_batch)], sliced, out[_at(position, self.result_batch)]
            )
        return out

    def _chain(
        self, a: np.ndarray, indices: Sequence[np.ndarray], out: np.ndarray | None
    ) -> np.ndarray:
        result = a
        for number, take in enumerate(self.takes):
            if out is not None and number == len(self.takes) - 1:
                # The indices are checked: "clip" changes nothing and lets NumPy write into
                # `out` directly ("raise" buffers the whole result first).
                return np.take(result, indices[take.index], axis=take.axis, out=out, mode="clip")
            result = np.take(result, indices[take.index], axis=take.axis)
        if out is not None:
            np.copyto(out, result)
            return out
        return result


def _at(position: tuple[int, ...], entries: tuple[int | None, ...]) -> tuple[Any, ...]:
    """The subscript of one batch position. The trailing Ellipsis keeps a slice that every
    entry fixes a 0-dim array view (writable as `out=`) rather than a NumPy scalar."""
    return (*(slice(None) if entry is None else position[entry] for entry in entries), Ellipsis)


def orthogonal_gather_rule(context: FusionContext, index: int) -> FusedGroup | None:
    node = context.node(index)
    if node.op != "prims.gather_nd" or len(node.args) != 2 or type(node.args[1]) is not tuple:
        return None
    a, indices = node.args
    if type(a) is not Value or not indices or len(indices) != a.ndim:
        return None
    shape = node.results[0].shape
    members = {index}
    sources: list[Value] = []
    spans: list[tuple[int, ...]] = []
    for operand in indices:
        found = context.defining_node(operand)
        if (
            found is None
            or found[1].op != "prims.broadcast_in_dim"
            or type(found[1].args[0]) is not Value
        ):
            if type(operand) is not Value or operand.shape != shape:
                return None
            sources.append(operand)  # an index of the result's shape spans every dim
            spans.append(tuple(range(len(shape))))
            continue
        broadcast_index, broadcast = found
        source: Value = broadcast.args[0]
        dims = tuple(broadcast.kwargs["broadcast_dimensions"])
        if list(dims) != sorted(set(dims)) or any(
            n not in (1, shape[d]) for n, d in zip(source.shape, dims)
        ):
            return None  # a transposing broadcast
        if context.internal(broadcast_index, {index, broadcast_index}):
            members.add(broadcast_index)
        sources.append(source)
        spans.append(dims)
    identity = tuple(
        len(dims) == 1 and _is_ramp(context, source, n)
        for source, dims, n in zip(sources, spans, a.shape)
    )
    kernel = _kernel(tuple(a.shape), tuple(shape), spans, identity)
    if kernel is None:
        return None
    blocks = [tuple(shape[d] for d in dims) for dims in spans]
    if any(source.shape != block for source, block in zip(sources, blocks)):
        kernel = attrs.evolve(
            kernel,
            stretched=tuple(
                None if source.shape == block else block for source, block in zip(sources, blocks)
            ),
        )
    return FusedGroup(
        tuple(sorted(members)), (a, *sources), kernel, fresh_result=True, takes_out=True
    )


def _kernel(
    sizes: tuple[int, ...],
    shape: tuple[int, ...],
    spans: list[tuple[int, ...]],
    identity: tuple[bool, ...],
) -> OrthogonalGather | None:
    """The kernel of a gather whose index k spans result dims spans[k], or None when it is not
    of the form this module runs.

    Batch dims are result dims of an identity ramp that another index spans too. The other
    indices, seen without the batch dims, must each span their own block of the remaining
    result dims, the blocks consecutive and in the order of a's axes."""
    axes = range(len(sizes))
    batch_axes = sorted(
        (k for k in axes if identity[k] and any(spans[k][0] in spans[j] for j in axes if j != k)),
        key=lambda k: spans[k][0],
    )
    batch_dims = [spans[k][0] for k in batch_axes]
    if len(set(batch_dims)) != len(batch_dims):
        return None  # two ramps over one dim
    batch_sizes = tuple(shape[d] for d in batch_dims)
    if math.prod(batch_sizes) > max(MIN_BATCH_LOOP, math.prod(shape) // SLICE_ELEMENTS):
        return None
    kept = [k for k in axes if k not in batch_axes]
    rest = [d for d in range(len(shape)) if d not in batch_dims]
    ranks: list[int] = []
    for k in kept:
        own = [d for d in spans[k] if d not in batch_dims]
        start = sum(ranks)
        if own != rest[start : start + len(own)]:
            return None
        ranks.append(len(own))
    if sum(ranks) != len(rest):
        return None
    takes = _cheapest_takes(
        [sizes[k] for k in kept], ranks, [shape[d] for d in rest], [identity[k] for k in kept], kept
    )
    entry = {d: i for i, d in enumerate(batch_dims)}
    return OrthogonalGather(
        sizes,
        identity,
        takes,
        shape,
        batch_sizes,
        tuple(entry[spans[k][0]] if k in batch_axes else None for k in axes),
        tuple(tuple(entry.get(d) for d in spans[k]) for k in axes),
        tuple(entry.get(d) for d in range(len(shape))),
    )


def _cheapest_takes(
    sizes: list[int],
    ranks: list[int],
    out_shape: list[int],
    identity: list[bool],
    numbers: list[int],
) -> tuple[_Take, ...]:
    """The takes of one slice (of shape `sizes`; axis i is taken by index operand numbers[i], of
    ranks[i] dims, becoming its block of `out_shape`), identities skipped, in the order of least
    estimated cost (the natural order when more than MAX_ORDERED axes are taken)."""
    block = [sum(ranks[:i]) for i in range(len(ranks))]
    todo = [i for i in range(len(sizes)) if not identity[i]]
    orders = itertools.permutations(todo) if len(todo) <= MAX_ORDERED else [tuple(todo)]
    best: tuple[int, tuple[_Take, ...]] | None = None
    for order in orders:
        dims: list[list[int]] = [[n] for n in sizes]  # per axis: its current dims
        cost = 0
        takes: list[_Take] = []
        for i in order:
            takes.append(_Take(numbers[i], sum(len(d) for d in dims[:i])))
            dims[i] = out_shape[block[i] : block[i] + ranks[i]]
            run = math.prod(n for d in dims[i + 1 :] for n in d)
            elements = math.prod(n for d in dims for n in d)
            cost += elements + (elements // run if run else 0) * RUN_COST
        if best is None or cost < best[0]:
            best = (cost, tuple(takes))
    return best[1] if best is not None else ()


def _is_ramp(context: FusionContext, value: Value, length: int) -> bool:
    """`value` is 0, 1, ..., length - 1, as a plan-time fact (an iota node or folded data)."""
    if value.shape != (length,):
        return False
    producer = context.producer.get(value)
    if producer is not None:
        node = context.node(producer)
        return (
            node.op == "prims.iota"
            and node.kwargs.get("start") == 0
            and node.kwargs.get("step") == 1
        )
    for graph_input in context.graph.inputs:
        if graph_input.value is value and graph_input.data is not None:
            data = graph_input.data
            return data.dtype.kind in "iu" and bool(np.array_equal(data, np.arange(length)))
    return False
