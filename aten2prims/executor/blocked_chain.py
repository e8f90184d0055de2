"""Chains of elementwise steps around a kernel that already works in cache-sized blocks, run in
those blocks together.

float32 `erf` (`prims/erf_float32.py`) makes sixteen passes over its operand, block by block in
pieces that stay in a core's L2 cache. The steps around it in GELU (`x * 0.5 * (1 + erf(x /
sqrt 2))`, and oneDNN's `x == inf` check) are five or six more passes, each over the whole
tensor: on ConvNeXt's activations (4x56x56x384, 19 MB) each of them streams its operands from
memory. Here the chain is one step that runs every member on one block of the flat arrays (its
external operands' and the result's) before the next, every intermediate in a scratch block of
the calling thread: each element is read from memory once and written once, and the value a
`where` selects from is computed straight into the result, which spares the selection's copy
(4x56x56x384: 20.8 -> 16.6 ms, torch 3.8 ms; the erf alone is 12.8 ms).

A chain is found from its seed, a node whose kernel is in `BLOCKED_KERNELS`: forward through
its one reader while that reader is an elementwise step of the same shape (taking, besides the
chain's value, numbers, tensors of the chain's shape computed outside it, or a tensor computed
from those alone, as GELU's `x == inf`), then backward through the seed's operand. Every member
but the last is read only inside the chain, so only the last one's result is ever materialized.

Each block is computed by the members' own kernels (the specialized ones of `specialize.py`, the
same calls the unfused steps make) on slices: elementwise, so every element's bits are the
unfused steps', whatever the blocks (and the threads' parts) are. Operands that are not
C-contiguous arrays of the result's shape (broadcast views, strided windows) or overlap the
result other than element for element run the chain whole, member by member.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from prims.elementwise import erf_of

from ..ir.graph import Node
from ..ir.symbolic import SymExpr
from ..ir.values import Value
from .fusion import FusedGroup, FusionContext
from .specialize import Specialized, specialized

# Kernels that make many passes over their operand in cache-sized blocks: a chain around one of
# them runs in its blocks.
BLOCKED_KERNELS: frozenset[Callable[..., Any]] = frozenset({erf_of})
# Elements per block (erf's own block): the block's external operands, the chain's scratch
# blocks, the result's block and erf's two scratch blocks (256 KiB each in float32, about
# 1.3 MiB in all for GELU) stay in a core's L2 cache (measured on GELU over 4.8M float32: 32K
# elements 20.2 ms, 64K 19.2, 128K 19.9, 256K 19.7).
BLOCK = 1 << 16

# An operand of a member: ("external", i) the chain's i-th external operand, ("scratch", i) the
# i-th scratch block, ("result", None) the result's block, ("number", value) a literal.
Operand = tuple[str, Any]


@attrs.frozen
class _Member:
    """One step of the chain: `kernel(*operands, out=...)` writing scratch block `out` (None:
    the result's block: the last member, and the one whose value the last reads where it may
    write over it, as a `where`'s second branch)."""

    kernel: Callable[..., Any]
    operands: tuple[Operand, ...]
    out: int | None


class _Scratch(threading.local):
    """Each thread's scratch blocks, by chain (a call's threads may run parts of one chain)."""

    def __init__(self) -> None:
        self.blocks: dict[int, list[np.ndarray]] = {}


_SCRATCH = _Scratch()


@attrs.frozen(eq=False)
class BlockedChain:
    """The chain's kernel: called with its external operands (and `out=`), it returns the last
    member's result."""

    members: tuple[_Member, ...]
    scratch_dtypes: tuple[np.dtype[Any], ...]
    dtype: np.dtype[Any]

    def __call__(self, *externals: Any, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            return self._whole(externals, None)
        # An operand overlapping the result (never from the plan, whose result buffers hold no
        # live value) is copied first: the result's blocks must not change what later ones read.
        externals = tuple(
            e.copy() if isinstance(e, np.ndarray) and np.may_share_memory(e, out) else e
            for e in externals
        )
        if not self._blockable(externals, out):
            return self._whole(externals, out)
        flat_externals = [e.reshape(-1) for e in externals]
        flat_out = out.reshape(-1)
        blocks = _SCRATCH.blocks.get(id(self))
        if blocks is None:
            blocks = _SCRATCH.blocks[id(self)] = [
                np.empty(BLOCK, dtype) for dtype in self.scratch_dtypes
            ]
        for start in range(0, flat_out.size, BLOCK):
            stop = min(start + BLOCK, flat_out.size)
            size = stop - start
            scratch = [block[:size] for block in blocks]
            result = flat_out[start:stop]
            for member in self.members:
                operands = [
                    flat_externals[where][start:stop]
                    if kind == "external"
                    else scratch[where]
                    if kind == "scratch"
                    else result
                    if kind == "result"
                    else where
                    for kind, where in member.operands
                ]
                member.kernel(*operands, out=result if member.out is None else scratch[member.out])
        return out

    def _blockable(self, externals: Sequence[Any], out: np.ndarray) -> bool:
        """`out` and every external operand are C-contiguous arrays of one shape (no operand
        that NumPy would broadcast: a relaxed broadcast, specialize.py)."""
        if not out.flags.c_contiguous:
            return False
        return all(
            type(e) is np.ndarray and e.shape == out.shape and e.flags.c_contiguous
            for e in externals
        )

    def _whole(self, externals: Sequence[Any], out: np.ndarray | None) -> np.ndarray:
        """The chain member by member over whole arrays (operands NumPy broadcasts), as its
        unfused steps would run: the last one into `out`, or its own new array."""
        scratch: dict[int | None, np.ndarray] = {}
        last = len(self.members) - 1
        for number, member in enumerate(self.members):
            operands = [
                externals[where]
                if kind == "external"
                else scratch[where]
                if kind in ("scratch", "result")
                else where
                for kind, where in member.operands
            ]
            if number < last:  # the result's block is a scratch array of its own here
                scratch[member.out] = member.kernel(*operands)
            elif out is None:
                return np.asarray(member.kernel(*operands))
            else:
                member.kernel(*operands, out=out)
        assert out is not None  # the last member returned otherwise
        return out


def blocked_chain_rule(context: FusionContext, index: int) -> FusedGroup | None:
    """The chain around node `index` when its kernel is one of BLOCKED_KERNELS (at least one
    other member), else None."""
    seed = _blockable_kernel(context.node(index))
    if seed is None or seed.kernel not in BLOCKED_KERNELS:
        return None
    shape = _shape_key(context.node(index).results[0])
    chain = {index: seed}
    last = index
    while True:  # forward: the last member's one reader, with its side inputs
        found = _next_member(context, last, chain, shape)
        if found is None:
            break
        last = found
    head = index
    while True:  # backward: the first member's tensor operand, when only the chain reads it
        tensors = [a for a in chain[head].operands if type(a) is Value]
        if len(tensors) != 1:
            break
        producer = context.defining_node(tensors[0])
        if producer is None:
            break
        before, node = producer
        member = _blockable_kernel(node)
        if member is None or not _fits(member, node, shape) or before in chain:
            break
        if not context.internal(before, set(chain) | {before}):
            break
        chain[before] = member
        head = before
    if len(chain) < 2:
        return None
    order = sorted(chain)
    return _group(context, order, chain)


def _blockable_kernel(node: Node) -> Specialized | None:
    """The node's specialized kernel when it is elementwise and takes out= (single result)."""
    if not node.op.startswith("prims.") or len(node.results) != 1:
        return None
    found = specialized(node)
    if found is None or not found.elementwise or not found.takes_out:
        return None
    return found


def _shape_key(value: Value) -> tuple[Any, ...] | None:
    """A tensor value's shape, its symbolic sizes by structure (`==` on two expressions builds
    a condition); None for other values."""
    if not value.is_tensor:
        return None
    return tuple(size.terms if type(size) is SymExpr else size for size in value.shape)


def _fits(member: Specialized, node: Node, shape: tuple[Any, ...] | None) -> bool:
    """The node's result and every tensor operand have the chain's shape."""
    if shape is None or _shape_key(node.results[0]) != shape:
        return False
    return all(type(a) is not Value or _shape_key(a) == shape for a in member.operands)


def _next_member(
    context: FusionContext,
    last: int,
    chain: dict[int, Specialized],
    shape: tuple[Any, ...] | None,
) -> int | None:
    """Adds the one reader of member `last`'s result to the chain (with the nodes computing its
    other operands from outside values alone, each read by it only) and returns its index, or
    None when there is no such reader."""
    result = context.node(last).results[0]
    if result in context.outputs:
        return None
    readers = context.users.get(result, [])
    if len(readers) != 1 or readers[0] in context.claimed or readers[0] in chain:
        return None
    reader = readers[0]
    node = context.node(reader)
    member = _blockable_kernel(node)
    if member is None or not _fits(member, node, shape):
        return None
    sides: dict[int, Specialized] = {}
    for operand in member.operands:
        if type(operand) is not Value or operand is result:
            continue
        producer = context.defining_node(operand)
        if producer is None or producer[0] in chain or producer[0] in sides:
            continue
        side_index, side_node = producer
        side = _blockable_kernel(side_node)
        if side is None or not _fits(side, side_node, shape):
            continue  # computed outside the chain: an external operand
        if any(
            type(a) is Value and (p := context.defining_node(a)) is not None and p[0] in chain
            for a in side.operands
        ):
            continue
        if context.internal(side_index, {side_index, reader}):
            sides[side_index] = side
    chain.update(sides)
    chain[reader] = member
    return reader


def _group(
    context: FusionContext, order: Sequence[int], chain: dict[int, Specialized]
) -> FusedGroup | None:
    """The fused group of the chain's nodes (in graph order, the last one the anchor)."""
    produced: dict[Value, int] = {}  # a member's result -> its scratch block
    externals: list[Value] = []
    members: list[_Member] = []
    scratch_dtypes: list[np.dtype[Any]] = []
    free: dict[np.dtype[Any], list[int]] = {}
    last_read: dict[Value, int] = {}
    for position, index in enumerate(order):
        for operand in chain[index].operands:
            if type(operand) is Value:
                last_read[operand] = position
    into_result = _written_into_result(context, order, chain, last_read)
    for position, index in enumerate(order):
        node = context.node(index)
        spec = chain[index]
        operands: list[Operand] = []
        for operand in spec.operands:
            if type(operand) is Value and operand is into_result:
                operands.append(("result", None))
            elif type(operand) is Value and operand in produced:
                operands.append(("scratch", produced[operand]))
            elif type(operand) is Value:
                if operand not in externals:
                    externals.append(operand)
                operands.append(("external", externals.index(operand)))
            else:
                operands.append(("number", operand))
        # Scratch blocks whose value is read for the last time here are free again, and this
        # member may write over one of them where its kernel allows (a ufunc, any operand;
        # else its out_operands: `select` copies b before reading a).
        allowed = range(len(operands)) if isinstance(spec.kernel, np.ufunc) else spec.out_operands
        dying: dict[int, bool] = {}  # block -> the member may write over it
        for place, operand in enumerate(spec.operands):
            if type(operand) is Value and operand in produced and last_read[operand] == position:
                block = produced[operand]
                dying[block] = dying.get(block, True) and place in allowed
        result = node.results[0]
        if position == len(order) - 1 or result is into_result:
            for block in dying:
                free.setdefault(scratch_dtypes[block], []).append(block)
            members.append(_Member(spec.kernel, tuple(operands), None))
            continue
        dtype = np.dtype(result.dtype.numpy)
        available = free.setdefault(dtype, [])
        writable = [b for b, ok in dying.items() if ok and scratch_dtypes[b] == dtype]
        if available:
            block = available.pop()
        elif writable:
            block = writable[0]
        else:
            block = len(scratch_dtypes)
            scratch_dtypes.append(dtype)
        for other in dying:
            if other != block:
                free.setdefault(scratch_dtypes[other], []).append(other)
        produced[result] = block
        members.append(_Member(spec.kernel, tuple(operands), block))
    anchor = context.node(order[-1]).results[0]
    kernel = BlockedChain(tuple(members), tuple(scratch_dtypes), np.dtype(anchor.dtype.numpy))
    return FusedGroup(
        tuple(order),
        tuple(externals),
        kernel,
        fresh_result=True,
        takes_out=True,
        elementwise=True,
    )


def _written_into_result(
    context: FusionContext,
    order: Sequence[int],
    chain: dict[int, Specialized],
    last_read: dict[Value, int],
) -> Value | None:
    """A member's value that the last member reads (only there, of the result's dtype) at
    operands it may write its result over: computed straight into the result's block, the last
    member then finds it in place (a `where` skips its copy of b)."""
    last = chain[order[-1]]
    allowed = range(len(last.operands)) if isinstance(last.kernel, np.ufunc) else last.out_operands
    dtype = context.node(order[-1]).results[0].dtype
    members = {context.node(index).results[0] for index in order[:-1]}
    for place in allowed:
        operand = last.operands[place]
        if type(operand) is not Value or operand not in members or operand.dtype is not dtype:
            continue
        if last_read[operand] != len(order) - 1:
            continue
        places = [p for p, other in enumerate(last.operands) if other is operand]
        if all(p in allowed for p in places):
            return operand
    return None


__all__ = ["BLOCK", "BLOCKED_KERNELS", "BlockedChain", "blocked_chain_rule"]
