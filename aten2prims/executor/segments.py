"""Row segments: runs of consecutive steps that a call's threads share as one parallel region.

Splitting each step into parts of its own costs a hand-off between threads per step, and a
hand-off costs tens of microseconds (waking a sleeping thread), as much as a step of a few
hundred KiB takes: a layer norm or a softmax, eight or so such steps in a row, ran slower on two
threads than on one. A segment splits a whole run of steps at once: its results' rows (their
dim 0, the same length `rows` for every step of the run) into a few parts, and each part runs
every step of the run on its rows, in order. One hand-off per segment, and a part's data stays
in its thread's cache from one step to the next.

A step joins a segment when it computes its result's rows from its operands' same rows:
- elementwise steps (ufuncs, `where`, direct kernels), written into their arena buffer, a dying
  operand (inplace.py) or an array the segment allocates (a kernel without `out=` returns
  each part's rows, copied there);
- reductions keeping dim 0 (prims whose definition says `reduces`), each part the reduction of
  its rows, copied into the result's rows;
- views keeping dim 0 in place (reshapes of row-major arrays, broadcasts, transposes leaving
  dim 0 first), made before the parts run: a view reads no element.

Every element a part reads that another part writes would be a race; so an operand whose memory
the segment writes is read row for row only, through an array whose rows are that memory's rows
(a result written by the segment, a C-contiguous arena buffer, or a view above of one of them),
and a step that would read such memory otherwise starts a new segment. Operands the segment
does not write (weights, earlier results) are read as they are, broadcasting included.

Results are bit for bit the same at every thread count: the parts are decided when the plan is
made, and each element is computed by the same kernel on the same slices whoever runs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from prims.registry import lookup

from ..errors import ExecutionError
from ..ir.values import TensorMeta
from .direct_kernels import makes_short_calls
from .inplace import Memory
from .steps import SlotRef, Step, describe_failure
from .threads import Parted, ReducedParted, even_parts, run_parts

# A segment writes at least this many bytes (less is not worth a hand-off between threads:
# measured, a 512 KiB elementwise step took 52 us on one thread, 95 us in two parts; the sizes
# are those benchmarks/threads.py --estimate liked best, docs/executor.md#threads).
SEGMENT_BYTES = 1 << 21
# Each part writes at least this many bytes, and a segment has at most MAX_SEGMENT_PARTS parts
# (more parts balance threads that start late; each costs a kernel call per step).
SEGMENT_PART_BYTES = 1 << 19
MAX_SEGMENT_PARTS = 4

# The view kernels of specialize.py a segment makes whole before its parts run (by the name of
# the closure: specialize's shape rules build them).
_VIEW_KERNELS = frozenset({"reshape", "transpose", "broadcast"})


@attrs.frozen
class _Member:
    """One step of a segment: `kind` "map" (an elementwise kernel called on operand rows with
    `out=`), "copy" (an elementwise kernel without `out=`, its result copied), "reduce" (a
    reduction kernel of its operand's rows) or "view" (run whole first).
    `rows_of[i]`: operand i is sliced by rows (else passed whole). `out` says where the result
    goes: ("buffer",) the step's arena buffer, ("operand", i) operand i, ("new", shape, dtype)
    an array allocated at each call."""

    step: Step
    kind: str
    kernel: Callable[..., Any]
    rows_of: tuple[bool, ...]
    out: tuple[Any, ...] = ()


class SegmentKernel:
    """The kernel of a segment's step: called with the operands the segment reads from outside
    (`inputs`, slot numbers in order) and the call's arena, it returns every member's result."""

    def __init__(
        self,
        members: tuple[_Member, ...],
        inputs: tuple[int, ...],
        bounds: tuple[tuple[int, int], ...],
    ) -> None:
        self.members = members
        self.inputs = inputs
        self.bounds = bounds

    def __call__(self, *operands: Any, arena: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        values: dict[int, Any] = dict(zip(self.inputs, operands))
        work: list[tuple[_Member, Any, list[Any], Any]] = []
        for member in self.members:
            step = member.step
            arguments = [_resolve(argument, values) for argument in step.arguments]
            if member.kind == "view":
                try:
                    values[step.out_slots[0]] = member.kernel(*arguments)
                except Exception as error:  # name the step that failed
                    raise ExecutionError(describe_failure(step, error)) from error
                continue
            where = member.out
            if where[0] == "buffer":
                assert step.out_buffer is not None  # placed by the arena: ("buffer",) says so
                out = arena[step.out_buffer]
            elif where[0] == "operand":
                out = arguments[where[1]]
            else:
                out = np.empty(where[1], where[2])
            values[step.out_slots[0]] = out
            work.append((member, member.kernel, arguments, out))
        run_parts([_Part(work, start, stop) for start, stop in self.bounds])
        return tuple(values[member.step.out_slots[0]] for member in self.members)


class _Part:
    """The rows [start, stop) of every step of a segment, in order."""

    __slots__ = ("start", "stop", "work")

    def __init__(self, work: list[tuple[_Member, Any, list[Any], Any]], start: int, stop: int):
        self.work = work
        self.start = start
        self.stop = stop

    def __call__(self) -> None:
        rows = slice(self.start, self.stop)
        for member, kernel, arguments, out in self.work:
            sliced = [a[rows] if by_rows else a for a, by_rows in zip(arguments, member.rows_of)]
            try:
                if member.kind == "map":
                    kernel(*sliced, out=out[rows])
                else:  # "reduce", "copy": the kernel's own result, copied
                    np.copyto(out[rows], kernel(*sliced))
            except Exception as error:  # name the step that failed
                raise ExecutionError(describe_failure(member.step, error)) from error


def _resolve(argument: Any, values: dict[int, Any]) -> Any:
    if type(argument) is SlotRef:
        return values[int(argument)]
    if type(argument) is tuple:
        return tuple(_resolve(item, values) for item in argument)
    return argument


# -- finding segments --------------------------------------------------------------------------------


@attrs.define
class _Shapes:
    """What the plan knows of each slot's array: its shape as run (a relaxed broadcast's),
    whether it is C-contiguous and its rows are its memory's rows (`exact`), whether its rows
    are rows of its memory, in order (`rowwise`: exact slots and views of them keeping dim 0),
    and which memory it shares (`memory`)."""

    actual: dict[int, tuple[int, ...]]
    exact: set[int]
    rowwise: set[int]
    memory: Memory


def _shapes(steps: Sequence[Step], meta_of: dict[int, Any]) -> _Shapes:
    actual = {slot: meta.shape for slot, meta in meta_of.items() if type(meta) is TensorMeta}
    for step in steps:
        if step.relaxed_shape is not None and len(step.out_slots) == 1:
            actual[step.out_slots[0]] = step.relaxed_shape
    memory = Memory()
    exact: set[int] = set()
    rowwise: set[int] = set()
    for step in steps:
        reads = step.reads()
        out = step.out_slots[0] if len(step.out_slots) == 1 else None
        if step.out_argument is not None:
            argument = int(step.arguments[step.out_argument])
            memory.join(step.out_slots[0], argument)
            if out is not None and argument in exact:
                exact.add(out)
            if out is not None and argument in rowwise:
                rowwise.add(out)
            continue
        if step.result_kind == "fresh":
            if step.out_buffer is not None and out is not None:
                exact.add(out)
                rowwise.add(out)
            continue
        for slot in step.out_slots:
            for read in reads:
                memory.join(slot, read)
        if out is None or not reads:
            continue
        if step.takes_out and step.out_buffer is not None and reads[0] in exact:
            # A row-major copy of an exact array is that array reshaped, or a copy into its
            # own buffer: exact either way.
            exact.add(out)
            rowwise.add(out)
        view = _row_view(step, actual)
        if view is not None and reads[0] in rowwise:
            rowwise.add(out)
            if view == "reshape" and reads[0] in exact:
                exact.add(out)
    return _Shapes(actual, exact, rowwise, memory)


def _row_view(step: Step, actual: dict[int, tuple[int, ...]]) -> str | None:
    """The name of the view kernel (`_VIEW_KERNELS`) of a step whose result keeps its operand's
    dim 0 as its own dim 0 (row i of the result is in row i of the operand), or None."""
    kernel = step.kernel
    name = getattr(kernel, "__name__", "")
    if (
        step.result_kind not in ("review", "view")
        or step.takes_out
        or name not in _VIEW_KERNELS
        or len(step.nodes) != 1
        or len(step.out_slots) != 1
        or len(step.arguments) != 1
        or type(step.arguments[0]) is not SlotRef
    ):
        return None
    shape = actual.get(step.out_slots[0])
    operand_shape = actual.get(int(step.arguments[0]))
    if not shape or not operand_shape or shape[0] != operand_shape[0]:
        return None
    if name == "transpose" and tuple(step.node.kwargs["permutation"])[:1] != (0,):
        return None
    if name == "broadcast" and tuple(step.node.kwargs["broadcast_dimensions"])[:1] != (0,):
        return None
    return name


def _member(step: Step, rows: int, shapes: _Shapes) -> _Member | None:
    """The step as a segment member along `rows` rows, or None (it cannot be one)."""
    # Fused groups of several nodes join only as elementwise kernels (chains.py, clamps).
    if len(step.out_slots) != 1 or step.random or (len(step.nodes) != 1 and not step.elementwise):
        return None
    out_slot = step.out_slots[0]
    shape = shapes.actual.get(out_slot)
    if not shape or shape[0] != rows:
        return None
    kernel = step.kernel
    if isinstance(kernel, Parted | ReducedParted):
        kernel = kernel.kernel
    if makes_short_calls(kernel):  # GIL-bound parts: not shared (direct_kernels.py)
        return None
    ndim = len(shape)
    definition = lookup(step.node.op)
    if step.elementwise:
        rows_of = tuple(
            type(a) is SlotRef and _by_rows(shapes.actual.get(int(a)), ndim, rows)
            for a in step.arguments
        )
        if step.takes_out:
            return _Member(step, "map", kernel, rows_of, _out(step, shape))
        # An elementwise kernel without out= (a direct kernel's result has the result's dtype):
        # each part's result copied into the rows of an array the segment allocates.
        return _Member(step, "copy", kernel, rows_of, _out(step, shape))
    if definition is not None and definition.reduces and step.relaxed_shape is None:
        operand = step.arguments[0] if step.arguments else None
        if type(operand) is not SlotRef:
            return None
        operand_shape = shapes.actual.get(int(operand))
        dims = step.arguments[1] if len(step.arguments) > 1 else None
        if not operand_shape or operand_shape[0] != rows or dims is None or 0 in dims:
            return None
        rows_of = (True,) + (False,) * (len(step.arguments) - 1)
        return _Member(step, "reduce", kernel, rows_of, _out(step, shape))
    view = _row_view(step, shapes.actual)
    if view is not None and shapes.actual[step.out_slots[0]][0] == rows:
        return _Member(step, "view", kernel, (False,))
    return None


def _by_rows(shape: tuple[int, ...] | None, ndim: int, rows: int) -> bool:
    """An operand of this shape (as run) is read row for row by a result of `ndim` dims."""
    return shape is not None and len(shape) == ndim and shape[0] == rows


def _out(step: Step, shape: tuple[int, ...]) -> tuple[Any, ...]:
    if step.out_argument is not None:
        return ("operand", step.out_argument)
    if step.out_buffer is not None:
        return ("buffer",)
    meta = step.out_metas[0]
    return ("new", shape, np.dtype(meta.dtype.numpy))


class _Growing:
    """A segment being grown step by step, with what its members read and write."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.members: list[tuple[int, _Member]] = []
        self.written: set[int] = set()  # memory (roots) the members write
        # slots whose rows are rows of memory the members write, seen row for row
        self.row_slots: set[int] = set()
        self.reads: list[tuple[int, bool]] = []  # (slot, read row for row by exact rows)
        self.bytes = 0

    def admits(self, index: int, member: _Member, shapes: _Shapes) -> bool:
        step = member.step
        root = shapes.memory.find
        out = step.out_slots[0]
        written = set(self.written)
        reads = list(self.reads)
        row_slots = set(self.row_slots)
        if member.kind == "view":
            operand = int(step.arguments[0])
            exact = operand in row_slots or operand in shapes.rowwise
            keeps_rows = exact and (
                member.kernel.__name__ != "reshape" or self._contiguous(operand, shapes)
            )
            if keeps_rows:
                row_slots.add(out)
            elif root(operand) in written:
                return False
        else:
            if member.out[0] == "operand":
                target = int(step.arguments[member.out[1]])
                if target not in row_slots and target not in shapes.rowwise:
                    return False
            written.add(root(out))
            row_slots.add(out)
            for argument, by_rows in zip(step.arguments, member.rows_of):
                if type(argument) is SlotRef:
                    slot = int(argument)
                    reads.append((slot, by_rows and (slot in row_slots or slot in shapes.rowwise)))
        if any(not exact and root(slot) in written for slot, exact in reads):
            return False
        self.members.append((index, member))
        self.written, self.reads, self.row_slots = written, reads, row_slots
        if member.kind != "view":
            meta = step.out_metas[0]
            self.bytes += math.prod(meta.shape) * np.dtype(meta.dtype.numpy).itemsize
        return True

    def _contiguous(self, slot: int, shapes: _Shapes) -> bool:
        """The slot's array is C-contiguous: a result written by a member or an exact slot
        (views of them made by reshapes only)."""
        if slot in shapes.exact:
            return True
        for _, member in self.members:
            if member.step.out_slots[0] == slot:
                if member.kind == "view":
                    return member.kernel.__name__ == "reshape" and self._contiguous(
                        int(member.step.arguments[0]), shapes
                    )
                if member.out[0] == "operand":  # written into that operand's array
                    return self._contiguous(int(member.step.arguments[member.out[1]]), shapes)
                return True
        return False


@attrs.frozen
class Segment:
    """Steps `first` to `last` (inclusive) of a plan, run as one step in `parts` row ranges."""

    first: int
    last: int
    step: Step


def find_segments(steps: Sequence[Step], meta_of: dict[int, Any]) -> list[Segment]:
    """The segments of a plan's steps (after the arena placed its buffers): maximal runs of
    consecutive members along one row count whose results are large enough to split."""
    shapes = _shapes(steps, meta_of)
    segments: list[Segment] = []
    index = 0
    while index < len(steps):
        growing = _start(steps, index, shapes)
        if growing is None:
            index += 1
            continue
        end = index + 1
        while end < len(steps):
            member = _member(steps[end], growing.rows, shapes)
            if member is None or not growing.admits(end, member, shapes):
                break
            end += 1
        segment = _finish(growing, steps)
        if segment is not None:
            segments.append(segment)
            index = end
        else:
            index += 1
    return segments


def _start(steps: Sequence[Step], index: int, shapes: _Shapes) -> _Growing | None:
    """A segment starting with step `index` (a computing member), or None."""
    step = steps[index]
    if len(step.out_slots) != 1:
        return None
    shape = shapes.actual.get(step.out_slots[0])
    if not shape or shape[0] < 2:
        return None
    member = _member(step, shape[0], shapes)
    if member is None or member.kind == "view":
        return None
    growing = _Growing(shape[0])
    return growing if growing.admits(index, member, shapes) else None


def _finish(growing: _Growing, steps: Sequence[Step]) -> Segment | None:
    """The segment's step, when its members write enough bytes and it has two parts."""
    while growing.members and growing.members[-1][1].kind == "view":
        growing.members.pop()  # trailing views: left to run as steps of their own
    count = even_parts(min(MAX_SEGMENT_PARTS, growing.rows, growing.bytes // SEGMENT_PART_BYTES))
    computing = sum(member.kind != "view" for _, member in growing.members)
    if growing.bytes < SEGMENT_BYTES or count < 2 or computing < 2:
        return None
    first, last = growing.members[0][0], growing.members[-1][0]
    produced = {slot for i in range(first, last + 1) for slot in steps[i].out_slots}
    inputs: list[int] = []
    for i in range(first, last + 1):
        for slot in steps[i].reads():
            if slot not in produced and slot not in inputs:
                inputs.append(slot)
    rows = growing.rows
    bounds = tuple((i * rows // count, (i + 1) * rows // count) for i in range(count))
    members = tuple(member for _, member in growing.members)
    kernel = SegmentKernel(members, tuple(inputs), bounds)
    inner = steps[first : last + 1]
    step = Step(
        tuple(node for s in inner for node in s.nodes),
        kernel,
        tuple(SlotRef(slot) for slot in inputs),
        tuple(slot for s in inner for slot in s.out_slots),
        tuple(meta for s in inner for meta in s.out_metas),
        free_after=tuple(sorted({slot for s in inner for slot in s.free_after})),
        result_kind="fresh",
        takes_arena=True,
    )
    return Segment(first, last, step)


def segmented(steps: list[Step], segments: Sequence[Segment]) -> list[Step]:
    """The steps with each segment's run replaced by the segment's one step."""
    if not segments:
        return steps
    result: list[Step] = []
    index = 0
    for segment in segments:
        result.extend(steps[index : segment.first])
        result.append(segment.step)
        index = segment.last + 1
    result.extend(steps[index:])
    return result
