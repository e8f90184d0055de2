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
  dim 0 first, as_strided windows each of whose rows lies in that row of a row-major
  operand: a convolution's or a pooling's windows), made before the parts run: a view reads
  no element; a broadcast across rows (a bias) is such a view where its operand is memory
  the segment does not write;
- kernels of a row count (`row_operands`, `for_rows`): a convolution or linear layer reading
  its activation's rows and its weight whole (a linear layer of enough rows only:
  `contraction_fusion.ROW_SPLIT_MIN_ROWS`), a constant padding of the inner dims, and
  row-major copies of windows. Each part calls the kernel made for its row count, which runs
  whole on the part's thread (threads.run_parts in a part opens no region); only kernels
  whose parts stay large (`ROW_KERNEL_PART_BYTES`) join.

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
# A segment's results live through its whole run (the arena cannot reuse their memory within
# it), so a segment ends before its results pass this many bytes. ResNet-50's products had
# joined segments spanning whole stages: its arena 45 -> 211 MB, its peak memory 152 -> 324 MiB
# (torch eager's 215); with this bound 58 MB (the zoo CNN 18.9 -> 27.8 MB, unbounded 28.2).
MAX_SEGMENT_BYTES = 1 << 24
# A kernel of a row count (a product, a padding) joins a segment when each of MAX_SEGMENT_PARTS
# parts of its result holds at least this many bytes: a smaller one's calls are short, and in
# parts they cost more Python than they save (the CNN's head, 8x64 @ 64x10: 0.07 ms whole,
# 0.2 ms in four parts) and wait on each other for the GIL.
ROW_KERNEL_PART_BYTES = 1 << 18

# Kernels of a row count (products, paddings: `row_operands`), windows within rows and their
# row-major copies join segments; tests and benchmarks switch it off to compare with the
# segments of elementwise steps, reductions and views alone (each product its own regions).
ROW_KERNELS_JOIN = True

# The view kernels of specialize.py a segment makes whole before its parts run (by the name of
# the closure: specialize's shape rules build them).
_VIEW_KERNELS = frozenset({"reshape", "transpose", "broadcast"})


@attrs.frozen
class _Member:
    """One step of a segment: `kind` "map" (an elementwise kernel called on operand rows with
    `out=`), "copy" (an elementwise kernel without `out=`, its result copied), "reduce" (a
    reduction kernel of its operand's rows), "rows" (a kernel of a given row count, from
    `row_kernels` by the part's length, called with `out=`: a product, a padding) or "view"
    (run whole first).
    `rows_of[i]`: operand i is sliced by rows (else passed whole). `out` says where the result
    goes: ("buffer",) the step's arena buffer, ("operand", i) operand i, ("new", shape, dtype)
    an array allocated at each call."""

    step: Step
    kind: str
    kernel: Callable[..., Any]
    rows_of: tuple[bool, ...]
    out: tuple[Any, ...] = ()
    # A "rows" member's kernel for a row count, and those made for its parts' row counts.
    for_rows: Callable[[int], Callable[..., Any]] | None = None
    row_kernels: dict[int, Callable[..., Any]] = attrs.field(factory=dict, eq=False)


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
                elif member.kind == "rows":
                    member.row_kernels[self.stop - self.start](*sliced, out=out[rows])
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
    meta_of: dict[int, Any]


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
        view = _row_view(step, actual, meta_of)
        if view == "window" and reads[0] in exact:
            rowwise.add(out)
        elif view in ("reshape", "transpose", "broadcast") and reads[0] in rowwise:
            rowwise.add(out)
            if view == "reshape" and reads[0] in exact:
                exact.add(out)
    return _Shapes(actual, exact, rowwise, memory, meta_of)


def _row_view(
    step: Step, actual: dict[int, tuple[int, ...]], meta_of: dict[int, Any]
) -> str | None:
    """The name of the view kernel (`_VIEW_KERNELS`) of a step whose result keeps its operand's
    dim 0 as its own dim 0 (row i of the result is in row i of the operand), "window" for an
    as_strided window of a row-major operand each of whose rows lies in that row of the
    operand (a convolution's or a pooling's windows of each image), or None."""
    kernel = step.kernel
    name = getattr(kernel, "__name__", "")
    if ROW_KERNELS_JOIN and step.node.op == "prims.as_strided" and _window_in_rows(step, meta_of):
        return "window"
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
    if not shape:
        return None
    if name == "broadcast" and (
        tuple(step.node.kwargs["broadcast_dimensions"])[:1] != (0,)
        or not operand_shape
        or shape[0] != operand_shape[0]
    ):
        # Each row of the result reads all of the operand: a member only where the segment
        # does not write the operand (a bias seen in a convolution's shape).
        return "broadcast across" if ROW_KERNELS_JOIN else None
    if not operand_shape or shape[0] != operand_shape[0]:
        return None
    if name == "transpose" and tuple(step.node.kwargs["permutation"])[:1] != (0,):
        return None
    return name


def _window_in_rows(step: Step, meta_of: dict[int, Any]) -> bool:
    """The step is an as_strided view, of a row-major operand of its own storage, whose
    row i (dim 0) reads only row i of the operand."""
    if (
        step.result_kind != "view"
        or step.takes_out
        or len(step.nodes) != 1
        or len(step.out_slots) != 1
        or not step.arguments
        or type(step.arguments[0]) is not SlotRef
    ):
        return False
    operand = meta_of.get(int(step.arguments[0]))
    meta = step.out_metas[0]
    if type(operand) is not TensorMeta or type(meta) is not TensorMeta:
        return False
    shape, strides = meta.shape, meta.strides
    if (
        not shape
        or not operand.shape
        or shape[0] != operand.shape[0]
        or operand.storage_offset != 0
        or tuple(operand.strides) != _row_major_strides(operand.shape)
        or not all(type(n) is int for n in (*shape, *strides, *operand.shape))
    ):
        return False
    row = math.prod(operand.shape[1:])
    if shape[0] > 1 and strides[0] != row:
        return False
    extent = meta.storage_offset + sum((n - 1) * s for n, s in zip(shape[1:], strides[1:]))
    return 0 <= meta.storage_offset and extent < row and 0 not in shape


def _row_major_strides(shape: Sequence[Any]) -> tuple[int, ...]:
    strides: list[int] = []
    step = 1
    for length in reversed(shape):
        strides.append(step)
        step *= max(int(length), 1)
    return tuple(reversed(strides))


def _member(step: Step, rows: int, shapes: _Shapes) -> _Member | None:
    """The step as a segment member along `rows` rows, or None (it cannot be one)."""
    if len(step.out_slots) != 1 or step.random:
        return None
    out_slot = step.out_slots[0]
    shape = shapes.actual.get(out_slot)
    if not shape or shape[0] != rows:
        return None
    kernel = step.kernel
    row_operands = getattr(kernel, "row_operands", None)
    if row_operands is not None and step.takes_out and step.relaxed_shape is None:
        if not ROW_KERNELS_JOIN:
            return None
        return _row_member(step, kernel, row_operands(len(step.arguments)), rows, shapes)
    # Other fused groups of several nodes join only as elementwise kernels (chains.py, clamps).
    if len(step.nodes) != 1 and not step.elementwise:
        return None
    if isinstance(kernel, Parted | ReducedParted):
        kernel = kernel.kernel
    if makes_short_calls(kernel):  # GIL-bound parts: not shared (direct_kernels.py)
        return None
    ndim = len(shape)
    if getattr(kernel, "__name__", "") == "row_major" and step.takes_out and ROW_KERNELS_JOIN:
        # a copy into row-major order (a pooling window's clone): row i from operand row i
        operand = step.arguments[0]
        if type(operand) is not SlotRef or not _by_rows(
            shapes.actual.get(int(operand)), len(shapes.actual.get(int(operand), ())), rows
        ):
            return None
        return _Member(step, "map", _copy_rows, (True,), _out(step, shape))
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
    view = _row_view(step, shapes.actual, shapes.meta_of)
    if view is not None and shapes.actual[step.out_slots[0]][0] == rows:
        return _Member(step, "view", kernel, (False,))
    return None


def _row_member(
    step: Step,
    kernel: Any,
    row_operands: tuple[bool, ...] | None,
    rows: int,
    shapes: _Shapes,
) -> _Member | None:
    """A kernel computing its result's rows from its operands' same rows (`row_operands`:
    which are read by rows, the others whole) as a "rows" member: each part calls the kernel
    `for_rows` gives for its row count."""
    meta = step.out_metas[0]
    if (
        row_operands is None
        or type(meta) is not TensorMeta
        or math.prod(meta.shape) // MAX_SEGMENT_PARTS * np.dtype(meta.dtype.numpy).itemsize
        < ROW_KERNEL_PART_BYTES
    ):
        return None
    rows_of: list[bool] = []
    for argument, by_rows in zip(step.arguments, row_operands):
        shape = shapes.actual.get(int(argument)) if type(argument) is SlotRef else None
        if by_rows and shape:  # a 0-dim array or a number is read whole
            if shape[0] != rows:
                return None
            rows_of.append(True)
        else:
            rows_of.append(False)
    if not any(rows_of):
        return None
    out = _out(step, shapes.actual[step.out_slots[0]])
    return _Member(step, "rows", kernel, tuple(rows_of), out, for_rows=kernel.for_rows)


def _copy_rows(operand: np.ndarray, out: np.ndarray) -> None:
    """A copy of operand's rows into out's rows in row-major order (its own shape)."""
    np.copyto(out.reshape(operand.shape), operand)


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
        if member.kind != "view" and self.bytes:
            meta = step.out_metas[0]
            size = math.prod(meta.shape) * np.dtype(meta.dtype.numpy).itemsize
            if self.bytes + size > MAX_SEGMENT_BYTES:
                return False
        root = shapes.memory.find
        out = step.out_slots[0]
        written = set(self.written)
        reads = list(self.reads)
        row_slots = set(self.row_slots)
        if member.kind == "view":
            operand = int(step.arguments[0])
            exact = operand in row_slots or operand in shapes.rowwise
            view = _row_view(step, shapes.actual, shapes.meta_of)
            keeps_rows = (
                exact
                and view != "broadcast across"
                and (view not in ("reshape", "window") or self._contiguous(operand, shapes))
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
                    return getattr(member.kernel, "__name__", "") == "reshape" and self._contiguous(
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
    for member in members:
        if member.for_rows is not None:  # made now, not by the parts at their first call
            for start, stop in bounds:
                if stop - start not in member.row_kernels:
                    member.row_kernels[stop - start] = member.for_rows(stop - start)
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


class _RowsInParts:
    """A "rows" member's kernel run alone, as `execute(check=True)` runs each step: its part
    kernels over the segment's bounds, in order, so a checked call computes what the segment
    computes (a product made on a part's rows need not have the whole product's bits: MKL's
    blocking follows the matrix's size)."""

    def __init__(self, member: _Member, bounds: tuple[tuple[int, int], ...]) -> None:
        self.member = member
        self.bounds = bounds

    def __call__(self, *arguments: Any, out: np.ndarray | None = None) -> np.ndarray:
        meta = self.member.step.out_metas[0]
        if out is None:
            out = np.empty(tuple(meta.shape), meta.dtype.numpy)
        for start, stop in self.bounds:
            rows = slice(start, stop)
            sliced = [a[rows] if by else a for a, by in zip(arguments, self.member.rows_of)]
            self.member.row_kernels[stop - start](*sliced, out=out[rows])
        return out


def checked_steps(steps: list[Step], segments: Sequence[Segment]) -> list[Step]:
    """The steps, each "rows" member of a segment running its parts' kernels over the segment's
    bounds (`_RowsInParts`): what `execute(check=True)` runs step by step."""
    result = list(steps)
    for segment in segments:
        kernel = segment.step.kernel
        assert isinstance(kernel, SegmentKernel)
        for member in kernel.members:
            if member.kind == "rows":
                index = next(
                    i for i in range(segment.first, segment.last + 1) if steps[i] is member.step
                )
                result[index] = attrs.evolve(
                    member.step, kernel=_RowsInParts(member, kernel.bounds)
                )
    return result


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
