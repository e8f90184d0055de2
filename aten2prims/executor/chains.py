"""Elementwise chains: runs of elementwise steps, each reading the one before it, computed block
by block so that the intermediates stay in cache.

NumPy makes one pass over memory per ufunc. A SiLU (`x · sigmoid(x)`: neg, exp, add, and the
division its reciprocal and product make, fewer_passes.py) or a hardswish (add, clamp, mul, div)
is a chain of such steps in which every result but
the last is read only by the next step. Run whole, each step reads and writes the whole
tensor, from L3 or memory once it exceeds a core's L2. Run block by block, every step of the
chain is applied to one block of elements (1 MiB of the widest dtype) before the next block
is touched: the intermediates live in that block of the result or in a per-thread scratch
block, and only the external operands are read and only the last result is written in full.
Measured at one thread (process CPU time, medians of 9, the exported modules) on an earlier
machine: SiLU of 4.8M float32 elements 15.8 ms as steps, 10.6 / 9.7 / 8.6 / 8.7 ms in blocks of
64 / 128 / 256 / 512 KiB; hardswish of 1.2M 2.35 ms, 0.97 ms in 256 KiB blocks. On the AMD
EPYC (Zen 4: 1 MiB of L2 per core, 32 MiB of L3; NumPy's kernels) 1 MiB blocks beat 256 KiB
ones: GELU of 0.5M / 0.6M / 1.2M / 2.4M / 4.8M elements 0.99 / 1.30 / 2.97 / 5.41 / 11.3 ms in
256 KiB blocks, 0.86 / 1.05 / 2.62 / 4.79 / 11.0 ms in 1 MiB blocks with results up to 4 MiB
as one block (its erf still runs its passes in blocks of 64K elements, erf_float32.py), SiLU
of 4.8M 11.3 → 10.5 ms: NumPy's cost per call now outweighs streaming from L3.

Each element is computed by the same kernels from the same operand elements as when the steps
run whole (elementwise kernels; blocks are slices along leading dims, the innermost dims whole,
so every kernel sees the same inner loop), so results are bit for bit those of the steps, at
any thread count.

A chain is a run of steps found in the plan's step list (after specialization and fusion):
- a link is a step whose kernel is an elementwise function taking `out=` (`Step.elementwise`
  and `Step.takes_out`: ufuncs, `where`, clamps, direct kernels), with one tensor result, and
  whose tensor operands have that result's shape or none, or are broadcast along runs of at
  least `unbuffered.MIN_RUN` result elements by a ufunc that reads them in place (a norm's
  per-row statistic over rows of 768, a per-channel scale: see `_linkable`);
- every link after the first reads the previous link's result, which nothing else reads (nor
  is it a graph output), and has the same result shape;
- a chain has at least two links and a result of more than 1 MiB (a smaller one stays in L2
  as whole steps; in DeiT-tiny's attention, comparisons of 470 KB chained ran slower);
- a step whose result a link reads besides the previous link's, read by nothing else, of the
  result's shape and computed from values that exist before the chain (GELU's `x == inf`,
  read by its selection) is a side link: it runs first in each block, into a scratch block of
  its own, instead of writing a full buffer the chain reads again (GELU over 0.6M elements:
  the comparison's pass of 0.035 ms and its booleans' buffer).
A result of at most 4 MiB given to the kernel (a part of a segment or of a split step, or a
whole result) is one block. When every link but the side links has the result's dtype and may
write over the previous link's result, those links work in the target block itself, as the
steps did in their buffer, and touch no scratch (unless an operand shares the target's
memory).
A chain whose links read broadcast operands runs with NumPy's ufunc buffer set to their
shortest run (unbuffered.py: NumPy reads them in place); written over an operand only its first
link reads (a dying intermediate, inplace.py), it runs as whole passes instead of blocks (see
`ChainKernel.__call__`).
The chain becomes one elementwise step at its last link (`ChainKernel`), whose operands are the
links' other operands: it takes `out=`, may write into an operand that dies there
(`Step.out_operands`, inplace.py), and is split into parts (threads.py) or rows of a segment
(segments.py) as any elementwise step, unless a link makes many short NumPy calls (float32
erf, `direct_kernels.SHORT_CALLS`): such a chain is no segment's member, and it is split into
parts only from `threads.SHORT_CALLS_PART_BYTES` on (its erf then makes longer calls while
several threads share the parts); a smaller one runs whole on the calling thread. A chain
reading only a product's result joins the product's epilogue, short calls or not
(contraction_fusion.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from ..ir.values import TensorMeta
from .direct_kernels import makes_short_calls
from .kept_buffers import kept_buffer
from .steps import SlotRef, Step
from .threads import operand_part
from .unbuffered import (
    DEFAULT_BUFFER,
    MIN_RUN,
    broadcast_run,
    buffer_size,
    in_place_broadcasts,
    ufunc_buffer,
)

# Bytes of the widest dtype of a chain per block (see the module doc: on the AMD EPYC, NumPy's
# cost per call outweighs streaming from L3 below 1 MiB).
BLOCK_BYTES = 1 << 20
# A result of at most this many bytes (of the widest dtype) is one block: a kernel blocked itself
# (erf) pays its own per-call cost once (GELU of 0.6M elements, 2.4 MB, 1.05-1.1x faster as one
# block than in 1 MiB blocks).
WHOLE_BYTES = 1 << 22
# A chain's result holds more than this many bytes: a smaller one stays in L2 as whole steps (in
# DeiT-tiny's attention, comparisons of 470 KB chained ran slower).
CHAIN_BYTES = 1 << 20

# How a link's argument is found in a block: an operand of the chain, the previous link's result,
# a literal or a side link's result (payload: that link's number).
_OPERAND, _PREVIOUS, _LITERAL, _SIDE = 0, 1, 2, 3


@attrs.frozen
class _Link:
    """One step of a chain: `kernel(*arguments, out=...)`, each argument (kind, payload): kind
    _OPERAND (payload: the chain operand's number), _PREVIOUS (the previous link's result),
    _LITERAL (payload: the value) or _SIDE (payload: a side link's number). `buffer`: the scratch
    block (dtype, number) it writes into (the last link writes the chain's result). A side link
    (`side`) reads only the chain's operands and literals; its result, in a scratch block of its
    own, is read by one later link."""

    kernel: Callable[..., Any]
    arguments: tuple[tuple[int, Any], ...]
    buffer: tuple[np.dtype, int]
    side: bool = False


_NONE = np.empty(0, np.uint8)  # the scratch entry of a link working in the target


class ChainKernel:
    """The kernel of a chain's step: its links applied block by block, the last one's result
    written into `out` (a new array when not given). An elementwise function of its operands
    (broadcast against one another as NumPy does)."""

    def __init__(
        self, links: tuple[_Link, ...], dtype: np.dtype, block: int, buffer: int | None = None
    ) -> None:
        self.links = links
        self.dtype = dtype
        self.block = block  # elements per block
        # NumPy's ufunc buffer (elements) while the links run, when one reads a broadcast
        # operand (unbuffered.py: NumPy then reads it in place); None: NumPy's own.
        self.buffer = buffer
        self.whole = max(block, block * WHOLE_BYTES // BLOCK_BYTES)  # elements run as one block
        self._block = _block_function(links, in_target=False)
        # (name in kept_buffers, dtype, side) of each link's scratch buffer but the last's, named
        # once: formatting a dtype takes 6 us, and EfficientNet-B0's chains ask for 600 buffers
        # a call.
        self._scratch_names = tuple(
            (f"chain block {dtype} {number}", dtype, link.side)
            for link in links[:-1]
            for dtype, number in (link.buffer,)
        )
        # A chain whose every link has the result's dtype and may write over the previous
        # result may instead work in the target block itself, as the steps did in their
        # buffer: no scratch is touched (when no operand shares the target's memory).
        in_target = all(link.buffer == (dtype, 0) for link in links if not link.side)
        self._in_target = _block_function(links, in_target=True) if in_target else None
        # A link making many short calls (erf) makes the chain's parts GIL-bound: not shared.
        self.short_calls = any(makes_short_calls(link.kernel) for link in links)
        # The operands only the first link reads (a chain without side links): written over
        # by that link, they are read no more.
        main = [link for link in links if not link.side]
        read_later = {p for link in main[1:] for kind, p in link.arguments if kind == _OPERAND}
        self._first_only = (
            frozenset(
                p for kind, p in main[0].arguments if kind == _OPERAND and p not in read_later
            )
            if len(main) == len(links)
            else frozenset()
        )

    @property
    def __name__(self) -> str:  # named in plan_profile's reports, as fused kernels are
        return "ChainKernel"

    def __call__(self, *operands: Any, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            shape = np.broadcast_shapes(*(np.shape(o) for o in operands))
            out = np.empty(shape, self.dtype)
        if out.size == 0:
            return out
        if self.buffer is None:
            return self._blocks(operands, out)
        with ufunc_buffer(self.buffer):
            if self._in_target is not None and self._over_first_operand(operands, out):
                # Written over an operand of the first link: NumPy's whole passes over memory,
                # the broadcast operands read in place, measured faster than blocks (a layer
                # norm's scale and shift, 8x196x768: 0.37 against 0.45-0.91 ms in blocks of
                # 1 MiB to 64 KiB), which gain where the chain writes other memory (batch norm
                # eval over 8x64x56x56 into a new result: 0.75 -> 0.59 ms).
                self._in_target(operands, out, ())
                return out
            return self._blocks(operands, out)

    def _over_first_operand(self, operands: Sequence[Any], out: np.ndarray) -> bool:
        """`out` is an operand only the first link reads, element for element, and shares no
        memory with another operand."""
        over = False
        for number, o in enumerate(operands):
            if type(o) is not np.ndarray or not np.may_share_memory(o, out):
                continue
            if (
                over
                or number not in self._first_only
                or o.shape != out.shape
                or o.strides != out.strides
                or o.ctypes.data != out.ctypes.data
            ):
                return False
            over = True
        return over

    def _blocks(self, operands: Sequence[Any], out: np.ndarray) -> np.ndarray:
        shape = out.shape
        block = self.block if out.size > self.whole else out.size
        run = self._block
        if self._in_target is not None and not any(
            type(o) is np.ndarray and np.may_share_memory(o, out) for o in operands
        ):
            run = self._in_target
        scratch = self._scratch(block, in_target=run is not self._block)
        if out.flags.c_contiguous and all(
            type(o) is not np.ndarray or o.ndim == 0 or (o.shape == shape and o.flags.c_contiguous)
            for o in operands
        ):
            # Every array of the result's shape and row-major: blocks of the flat elements.
            flat = [o.reshape(-1) if type(o) is np.ndarray and o.ndim else o for o in operands]
            whole = [type(o) is np.ndarray and o.ndim > 0 for o in operands]
            target = out.reshape(-1)
            size = target.size
            views = [buffer[:block] for buffer in scratch]
            for start in range(0, size, block):
                stop = start + block
                if stop > size:
                    views = [buffer[: size - start] for buffer in scratch]
                run(
                    [o[start:stop] if w else o for o, w in zip(flat, whole)],
                    target[start:stop],
                    views,
                )
            return out
        ndim = len(shape)
        axis, inner = ndim - 1, 1
        while axis > 0 and inner * shape[axis] < block:
            inner *= shape[axis]
            axis -= 1
        rows = max(1, block // inner)
        for position in np.ndindex(*shape[:axis]):
            for start in range(0, shape[axis], rows):
                index = (*position, slice(start, start + rows))
                part = out[index]
                views = [
                    buffer[: part.size].reshape(part.shape) if buffer.size else buffer
                    for buffer in scratch
                ]
                run([operand_part(o, index, ndim) for o in operands], part, views)
        return out

    def _scratch(self, size: int, in_target: bool) -> list[np.ndarray]:
        """This thread's scratch block (flat, at least `size` elements) of every link but the
        last, by link number; working in the target, only side links write into one (the
        others' entries are an empty stand-in)."""
        found = []
        for name, dtype, side in self._scratch_names:  # the thread's kept buffer, by name
            found.append(_NONE if in_target and not side else kept_buffer(name, (size,), dtype))
        return found


def _block_function(links: Sequence[_Link], in_target: bool) -> Callable[..., None]:
    """`block(operands, target, views)`: every link on one block of the operands, each into its
    scratch view (`in_target`: into target), the last one's result into target; generated as
    straight-line code (a loop over the links cost 3 us more per block, a tenth of a SiLU
    block's time)."""
    namespace: dict[str, Any] = {}
    lines = ["def block(p, target, views):"]
    previous = ""
    for number, link in enumerate(links):
        namespace[f"k{number}"] = link.kernel
        arguments = []
        for position, (kind, payload) in enumerate(link.arguments):
            if kind == _OPERAND:
                arguments.append(f"p[{payload}]")
            elif kind == _PREVIOUS:
                arguments.append(previous)
            elif kind == _SIDE:
                arguments.append(f"views[{payload}]")
            else:
                namespace[f"c{number}_{position}"] = payload
                arguments.append(f"c{number}_{position}")
        last = number == len(links) - 1
        written = "target" if last or (in_target and not link.side) else f"views[{number}]"
        lines.append(f"    k{number}({', '.join(arguments)}, out={written})")
        if not link.side:
            previous = written
    exec(compile("\n".join(lines) + "\n", "<aten2prims chain>", "exec"), namespace)
    function: Callable[..., None] = namespace["block"]
    return function


# -- finding chains ----------------------------------------------------------------------------------


def _linkable(
    step: Step, meta_of: dict[int, Any], relaxed: dict[int, tuple[int, ...]]
) -> TensorMeta | None:
    """The result meta of a step that can be a link of a chain, or None. Its tensor operands
    have its result's shape or none (0-dim), or are broadcast (a per-row or per-channel
    statistic, relaxed to size-1 dims) along runs of at least `MIN_RUN` elements by a ufunc
    NumPy runs on them in place (`in_place_broadcasts`). Copied into NumPy's buffer, such
    operands made blocks slower (a layer norm's scale and shift: 1.12 ms whole, 1.23-2.5 ms in
    blocks of 64K-8K elements); read in place, a batch norm's scale and shift into a new result
    went 0.75 -> 0.59 ms in blocks."""
    if (
        not step.elementwise
        or not step.takes_out
        or step.random
        or len(step.out_slots) != 1
        or step.out_argument is not None
        or step.relaxed_shape is not None
        or any(type(a) is tuple for a in step.arguments)
    ):
        return None
    meta = meta_of.get(step.out_slots[0])
    if type(meta) is not TensorMeta or not meta.shape:
        return None
    shapes = _operand_shapes(step, meta_of, relaxed)
    if shapes is None:
        return None
    if any(shape != meta.shape and shape != () for shape in shapes):
        run = broadcast_run(meta.shape, shapes)
        if not in_place_broadcasts(step, meta_of) or run is None or run < MIN_RUN:
            return None
    return meta


def _operand_shapes(
    step: Step, meta_of: dict[int, Any], relaxed: dict[int, tuple[int, ...]]
) -> list[tuple[int, ...]] | None:
    """The shapes of the step's tensor operands as run (a relaxed broadcast's with its size-1
    dims), or None when one is unknown."""
    shapes = []
    for argument in step.arguments:
        if type(argument) is SlotRef:
            operand = meta_of.get(int(argument))
            shape = relaxed.get(int(argument), getattr(operand, "shape", None))
            if shape is None:
                return None
            shapes.append(tuple(shape))
    return shapes


def _broadcast_buffer(
    links: Sequence[Step], meta_of: dict[int, Any], relaxed: dict[int, tuple[int, ...]]
) -> int | None:
    """The ufunc buffer a chain runs with when a link reads a broadcast operand (unbuffered.py):
    its shortest run, so that NumPy reads every such operand in place; else None."""
    runs = []
    for link in links:
        shape = meta_of[link.out_slots[0]].shape
        shapes = _operand_shapes(link, meta_of, relaxed) or []
        if any(s != shape and s != () for s in shapes):
            run = broadcast_run(shape, shapes)
            if run is not None:
                runs.append(run)
    if not runs or min(runs) >= DEFAULT_BUFFER // 2:  # NumPy reads those in place anyway
        return None
    return buffer_size(min(runs))


def _in_place(step: Step, position: int) -> bool:
    """The step's kernel may write its result over its argument at `position`."""
    kernel = step.kernel
    return (isinstance(kernel, np.ufunc) and kernel.nout == 1) or position in step.out_operands


def fuse_chains(
    steps: list[Step], output_slots: tuple[int, ...], meta_of: dict[int, Any]
) -> list[Step]:
    """The steps with every chain (see the module doc) replaced by one step at its last link."""
    readers: dict[int, list[int]] = {}
    for index, step in enumerate(steps):
        for slot in set(step.reads()):
            readers.setdefault(slot, []).append(index)
    outputs = set(output_slots)
    relaxed = {
        step.out_slots[0]: step.relaxed_shape for step in steps if step.relaxed_shape is not None
    }
    producer = {slot: index for index, step in enumerate(steps) for slot in step.out_slots}
    chains: dict[int, tuple[list[int], list[int]]] = {}  # by the index of the last link
    in_chain: set[int] = set()
    for index, step in enumerate(steps):
        if index in in_chain:
            continue
        meta = _linkable(step, meta_of, relaxed)
        if meta is None:
            continue
        members = [index]
        while True:
            value = steps[members[-1]].out_slots[0]
            following = readers.get(value, [])
            if value in outputs or len(following) != 1 or following[0] in in_chain:
                break  # (a link reading two results joins the chain of the first one)
            candidate = steps[following[0]]
            next_meta = _linkable(candidate, meta_of, relaxed)
            if next_meta is None or next_meta.shape != meta.shape:
                break
            members.append(following[0])
        sides = _side_links(steps, members, meta.shape, producer, readers, outputs, in_chain)
        sides = [i for i in sides if _linkable(steps[i], meta_of, relaxed) is not None]
        linked = members + sides
        itemsize = max(meta_of[steps[i].out_slots[0]].dtype.itemsize for i in linked)
        if len(members) >= 2 and math.prod(meta.shape) * itemsize > CHAIN_BYTES:
            chains[members[-1]] = (members, sides)
            in_chain.update(linked)
    if not chains:
        return steps
    result: list[Step] = []
    for index, step in enumerate(steps):
        if index in chains:
            members, sides = chains[index]
            result.append(
                _chain_step(
                    [steps[i] for i in members], [steps[i] for i in sides], meta_of, relaxed
                )
            )
        elif index not in in_chain:
            result.append(step)
    return result


def _side_links(
    steps: list[Step],
    members: list[int],
    shape: tuple[int, ...],
    producer: dict[int, int],
    readers: dict[int, list[int]],
    outputs: set[int],
    taken: set[int],
) -> list[int]:
    """Steps a chain's link reads besides the previous link's result that can run inside the
    chain, block by block (GELU's `x == inf` read by its selection): each of the result's shape,
    read by that link alone and not a graph output, reading no result of the chain's links or
    of another side link (only values computed before the chain). Their results then stay in a
    scratch block instead of a full buffer written and read again (`_linkable` is checked by the
    caller)."""
    inside = {steps[i].out_slots[0] for i in members}
    sides: list[int] = []
    for number, index in enumerate(members):
        previous = steps[members[number - 1]].out_slots[0] if number else None
        for argument in steps[index].arguments:
            if type(argument) is not SlotRef or int(argument) in (previous, None):
                continue
            slot = int(argument)
            found = producer.get(slot)
            if (
                found is None
                or found in taken
                or found in members
                or found in sides
                or slot in outputs
                or readers.get(slot) != [index]
            ):
                continue
            side = steps[found]
            if len(side.out_slots) != 1 or any(
                type(a) is SlotRef and (int(a) in inside or producer.get(int(a)) in sides)
                for a in side.arguments
            ):
                continue
            if getattr(side.out_metas[0], "shape", None) != shape:
                continue
            sides.append(found)
    return sides


def _chain_step(
    links: Sequence[Step],
    sides: Sequence[Step],
    meta_of: dict[int, Any],
    relaxed: dict[int, tuple[int, ...]],
) -> Step:
    """One step running `links` (a chain) block by block, `sides` (side links) first in each
    block."""
    operands: list[int] = []  # slots of the chain's operands, in order of first use
    built: list[_Link] = []
    side_number: dict[int, int] = {}  # a side link's result slot -> its link number
    previous_slot: int | None = None
    previous_buffer: tuple[np.dtype, int] | None = None
    # Per operand: the positions at which the last link reads it (for Step.out_operands).
    last = links[-1]
    itemsize = 1
    for number, link in enumerate([*sides, *links]):
        side = number < len(sides)
        arguments: list[tuple[int, Any]] = []
        reads_previous: list[int] = []
        for position, argument in enumerate(link.arguments):
            if type(argument) is SlotRef and int(argument) == previous_slot:
                arguments.append((_PREVIOUS, None))
                reads_previous.append(position)
            elif type(argument) is SlotRef and int(argument) in side_number:
                arguments.append((_SIDE, side_number[int(argument)]))
            elif type(argument) is SlotRef:
                slot = int(argument)
                if slot not in operands:
                    operands.append(slot)
                arguments.append((_OPERAND, operands.index(slot)))
            else:
                arguments.append((_LITERAL, argument))
        meta = meta_of[link.out_slots[0]]
        dtype = np.dtype(meta.dtype.numpy)
        itemsize = max(itemsize, dtype.itemsize)
        if side:  # a block of its own, apart from the main links' two per dtype
            side_number[link.out_slots[0]] = number
            built.append(_Link(link.kernel, tuple(arguments), (dtype, 2 + number), side=True))
            continue
        # Over the previous result's block when the kernel may write over every position it
        # reads it at (a ufunc, or the positions it names); else into the other block.
        if (
            previous_buffer is not None
            and previous_buffer[0] == dtype
            and all(_in_place(link, p) for p in reads_previous)
        ):
            buffer = previous_buffer
        elif previous_buffer is not None and previous_buffer[0] == dtype:
            buffer = (dtype, 1 - previous_buffer[1])
        else:
            buffer = (dtype, 0)
        built.append(_Link(link.kernel, tuple(arguments), buffer))
        previous_slot, previous_buffer = link.out_slots[0], buffer
    result_meta = meta_of[last.out_slots[0]]
    # The chain may write into an operand only where its last link reads it, if at all, at
    # positions it may write over (earlier links read a block before the last link writes it).
    writable = tuple(
        number
        for number, slot in enumerate(operands)
        if meta_of.get(slot) == result_meta
        and all(
            _in_place(last, position)
            for position, argument in enumerate(last.arguments)
            if type(argument) is SlotRef and int(argument) == slot
        )
    )
    kernel = ChainKernel(
        tuple(built),
        np.dtype(result_meta.dtype.numpy),
        max(1, BLOCK_BYTES // itemsize),
        _broadcast_buffer([*sides, *links], meta_of, relaxed),
    )
    return Step(
        tuple(node for link in [*sides, *links] for node in link.nodes),
        kernel,
        tuple(SlotRef(slot) for slot in operands),
        (last.out_slots[0],),
        (result_meta,),
        result_kind="fresh",
        elementwise=True,
        takes_out=True,
        out_operands=writable,
    )
