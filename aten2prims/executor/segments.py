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
  its activation's rows and its weight whole, a layer norm's `sum(x * x)`, a constant padding
  of the inner dims, and row-major copies of windows (of a C-contiguous array: a reshape, a
  view). Each part calls the kernel made for its row count, which runs whole on the part's
  thread (threads.run_parts in a part opens no region).

A value's dim 0 may be the segment's rows times a fixed factor: a transformer layer's
[8, 64, 256] steps and the [512, 256] reshape its linear layers read are one segment of 8
rows, part p covering rows [r0, r1) of the first and [64*r0, 64*r1) of the second. That holds
for C-contiguous arrays reshaped (any whole fraction of dim 0 is that fraction of the
elements); a step whose result's dim 0 is not a whole multiple of the rows ends the segment.
Whether a segment pays is decided from its whole work (`_Growing.work`: its results' bytes and
its products' multiply-adds), so a run of small steps with products among them is one region.

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
# A kernel of a row count (a product, a padding) joins a segment when a part of its work (its
# result's and row operands' bytes, its multiply-adds) among MAX_SEGMENT_PARTS reaches this:
# a smaller one's calls are short, and in parts they cost more Python than they save (the
# CNN's head, 8x64 @ 64x10: 0.07 ms whole, 0.2 ms in four parts) and wait on each other for
# the GIL. A layer norm's sum(x * x) over 512 KiB rows joins.
ROW_KERNEL_PART_BYTES = 1 << 18
# A product in a segment reads at least this many bytes of its row operands per part, which
# caps the segment's part count: BLAS is slower on short products (BERT-mini at one thread,
# its linear layers on 128 rows of 256 a part: 15% slower than whole; on 256 rows, 4% faster).
PRODUCT_PART_BYTES = 1 << 18
# A product's multiply-adds (`multiply_adds` of a kernel of a row count) weigh as much in a
# segment's work as a byte of an elementwise result per this many: measured on one thread, a
# [512, 1024] @ [1024, 256] product made 54-108 multiply-adds per ns, a 512 KiB add 28 bytes.
MULTIPLY_ADDS_PER_BYTE = 4

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
    `rows_of[i]`: operand i's rows per row of the segment (its dim 0 is the segment's rows
    times that: a [512, 256] reshape of an [8, 64, 256] segment's value has 64), 0 when it is
    passed whole; `out_rows` likewise for the result. `out` says where the result goes:
    ("buffer",) the step's arena buffer, ("operand", i) operand i, ("new", shape, dtype) an
    array allocated at each call."""

    step: Step
    kind: str
    kernel: Callable[..., Any]
    rows_of: tuple[int, ...]
    out: tuple[Any, ...] = ()
    out_rows: int = 1
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
        start, stop = self.start, self.stop
        for member, kernel, arguments, out in self.work:
            sliced = [
                a[start * factor : stop * factor] if factor else a
                for a, factor in zip(arguments, member.rows_of)
            ]
            factor = member.out_rows
            target = out[start * factor : stop * factor]
            try:
                if member.kind == "map":
                    kernel(*sliced, out=target)
                elif member.kind == "rows":
                    member.row_kernels[len(target)](*sliced, out=target)
                else:  # "reduce", "copy": the kernel's own result, copied
                    np.copyto(target, kernel(*sliced))
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
        elif view == "reshape" and reads[0] in exact:
            # a C-contiguous array reshaped: any whole fraction of its dim 0 covers the same
            # fraction of its memory's elements, whatever the two dim 0 lengths
            rowwise.add(out)
            exact.add(out)
        elif view in ("transpose", "broadcast") and reads[0] in rowwise:
            rowwise.add(out)
        elif view == "reshape" and reads[0] in rowwise and _same_rows(step, actual):
            rowwise.add(out)
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
    if not operand_shape or (shape[0] != operand_shape[0] and name != "reshape"):
        # a reshape changing dim 0's length keeps rows when its operand is C-contiguous
        # (`_shapes`, `_Growing.admits` check that)
        return None
    if name == "transpose" and tuple(step.node.kwargs["permutation"])[:1] != (0,):
        return None
    return name


def _same_rows(step: Step, actual: dict[int, tuple[int, ...]]) -> bool:
    """The view step's result has its operand's dim 0 length."""
    shape = actual.get(step.out_slots[0])
    operand_shape = actual.get(int(step.arguments[0]))
    if not shape or not operand_shape:
        return False
    return shape[0] == operand_shape[0]


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
    """The step as a segment member along `rows` rows (its result's dim 0 a whole multiple of
    them), or None (it cannot be one)."""
    if len(step.out_slots) != 1 or step.random:
        return None
    out_slot = step.out_slots[0]
    shape = shapes.actual.get(out_slot)
    if not shape:
        return None
    if shape[0] % rows:
        # only a view whose rows are not the segment's (a weight seen in the rows' shape);
        # `_Growing.admits` takes it where its operand is memory the segment does not write
        if _row_view(step, shapes.actual, shapes.meta_of) is None:
            return None
        return _Member(step, "view", step.kernel, (0,), out_rows=0)
    out_rows = shape[0] // rows
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
            shapes.actual.get(int(operand)), len(shapes.actual.get(int(operand), ())), shape[0]
        ):
            return None
        return _Member(step, "map", _copy_rows, (out_rows,), _out(step, shape), out_rows)
    definition = lookup(step.node.op)
    if step.elementwise:
        rows_of = tuple(
            out_rows
            if type(a) is SlotRef and _by_rows(shapes.actual.get(int(a)), ndim, shape[0])
            else 0
            for a in step.arguments
        )
        if step.takes_out:
            return _Member(step, "map", kernel, rows_of, _out(step, shape), out_rows)
        # An elementwise kernel without out= (a direct kernel's result has the result's dtype):
        # each part's result copied into the rows of an array the segment allocates.
        return _Member(step, "copy", kernel, rows_of, _out(step, shape), out_rows)
    if definition is not None and definition.reduces and step.relaxed_shape is None:
        operand = step.arguments[0] if step.arguments else None
        if type(operand) is not SlotRef:
            return None
        operand_shape = shapes.actual.get(int(operand))
        dims = step.arguments[1] if len(step.arguments) > 1 else None
        if not operand_shape or operand_shape[0] != shape[0] or dims is None or 0 in dims:
            return None
        rows_of = (out_rows,) + (0,) * (len(step.arguments) - 1)
        return _Member(step, "reduce", kernel, rows_of, _out(step, shape), out_rows)
    if _row_view(step, shapes.actual, shapes.meta_of) is not None:
        return _Member(step, "view", kernel, (0,), out_rows=out_rows)
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
    `for_rows` gives for its result's row count. An operand read by rows may have its rows
    merged with inner dims (a linear layer's [512, 256] activation for a [8, 64, 1024] result)."""
    if row_operands is None or type(step.out_metas[0]) is not TensorMeta:
        return None
    rows_of: list[int] = []
    for argument, by_rows in zip(step.arguments, row_operands):
        shape = shapes.actual.get(int(argument)) if type(argument) is SlotRef else None
        if by_rows and shape:  # a 0-dim array or a number is read whole
            if shape[0] % rows:
                return None
            rows_of.append(shape[0] // rows)
        else:
            rows_of.append(0)
    if not any(rows_of):
        return None
    shape = shapes.actual[step.out_slots[0]]
    touched = _bytes(step.out_metas[0]) + _kernel_work(kernel)
    for argument, factor in zip(step.arguments, rows_of):
        meta = shapes.meta_of.get(int(argument)) if factor else None
        touched += _bytes(meta) if type(meta) is TensorMeta else 0
    if touched // MAX_SEGMENT_PARTS < ROW_KERNEL_PART_BYTES:
        return None
    return _Member(
        step,
        "rows",
        kernel,
        tuple(rows_of),
        _out(step, shape),
        shape[0] // rows,
        for_rows=kernel.for_rows,
    )


def _product_parts(member: _Member, shapes: _Shapes) -> int:
    """The parts a "rows" member's product allows: its activation (its multiplied operands
    read by rows, not its epilogue's) at PRODUCT_PART_BYTES a part."""
    read = 0
    for argument, factor in zip(member.step.arguments[:2], member.rows_of[:2]):
        meta = shapes.meta_of.get(int(argument)) if factor else None
        read = max(read, _bytes(meta) if type(meta) is TensorMeta else 0)
    return max(1, read // PRODUCT_PART_BYTES)


def _bytes(meta: TensorMeta) -> int:
    return math.prod(meta.shape) * np.dtype(meta.dtype.numpy).itemsize


def _kernel_work(kernel: Any) -> int:
    """A kernel's multiply-adds (`multiply_adds`, a product's) in bytes of elementwise work."""
    return getattr(kernel, "multiply_adds", 0) // MULTIPLY_ADDS_PER_BYTE


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
        # slots whose memory is a buffer a member copies into (its negative number)
        self.own: dict[int, int] = {}
        # what the members cost, in bytes of an elementwise result taking as long
        self.work = 0
        self.max_parts = MAX_SEGMENT_PARTS  # as products' row operands allow

    def admits(self, index: int, member: _Member, shapes: _Shapes) -> bool:
        step = member.step
        root = shapes.memory.find
        out = step.out_slots[0]
        written = set(self.written)
        reads = list(self.reads)
        row_slots = set(self.row_slots)
        own = dict(self.own)

        def where(slot: int) -> int:
            """The memory of a slot: a buffer a member copies into is its own (the plan's
            memory joins a row-major copy with its operand: outside a segment it may be a view)."""
            return own.get(slot, root(slot))

        if member.kernel is _copy_rows and self._contiguous(int(step.arguments[0]), shapes):
            # a row-major copy of a C-contiguous array is that array reshaped (its kernel's
            # own shortcut): a view, made whole before the parts
            member = attrs.evolve(member, kind="view", kernel=step.kernel, rows_of=(0,))
        if member.kind == "view":
            operand = int(step.arguments[0])
            exact = operand in row_slots or operand in shapes.rowwise
            view = _row_view(step, shapes.actual, shapes.meta_of)
            if member.kernel is step.kernel and view is None:  # the row-major copy above
                view = "reshape"
            keeps_rows = (
                exact
                and member.out_rows > 0
                and view != "broadcast across"
                and (view not in ("reshape", "window") or self._contiguous(operand, shapes))
            )
            if keeps_rows:
                row_slots.add(out)
                if operand in own:
                    own[out] = own[operand]
            elif where(operand) in written:
                return False
        else:
            if member.out[0] == "operand":
                target = int(step.arguments[member.out[1]])
                if target not in row_slots and target not in shapes.rowwise:
                    return False
                if target in own:
                    own[out] = own[target]
            elif member.kernel is _copy_rows:
                own[out] = -1 - out  # no slot's memory root: slots are >= 0
            written.add(where(out))
            row_slots.add(out)
            for argument, by_rows in zip(step.arguments, member.rows_of):
                if type(argument) is SlotRef:
                    slot = int(argument)
                    exact = bool(by_rows) and (slot in row_slots or slot in shapes.rowwise)
                    reads.append((slot, exact))
        if any(not exact and where(slot) in written for slot, exact in reads):
            return False
        self.members.append((index, member))
        self.written, self.reads, self.row_slots, self.own = written, reads, row_slots, own
        if member.kind != "view":
            meta = step.out_metas[0]
            self.work += _bytes(meta) + _kernel_work(member.kernel)
            if hasattr(member.kernel, "multiply_adds"):  # a product (not a padding)
                self.max_parts = min(self.max_parts, _product_parts(member, shapes))
        return True

    def _contiguous(self, slot: int, shapes: _Shapes) -> bool:
        """The slot's array is C-contiguous: a result written by a member or an exact slot
        (views of them made by reshapes only)."""
        if slot in shapes.exact:
            return True
        for _, member in self.members:
            if member.step.out_slots[0] == slot:
                if member.kind == "view":
                    return getattr(member.kernel, "__name__", "") in (
                        "reshape",
                        "row_major",
                    ) and self._contiguous(int(member.step.arguments[0]), shapes)
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
    """The segment's step, when its members' work is enough to share and it has two parts."""
    while growing.members and growing.members[-1][1].kind == "view":
        growing.members.pop()  # trailing views: left to run as steps of their own
    count = even_parts(min(growing.max_parts, growing.rows, growing.work // SEGMENT_PART_BYTES))
    computing = sum(member.kind != "view" for _, member in growing.members)
    if growing.work < SEGMENT_BYTES or count < 2 or computing < 2:
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
                count = (stop - start) * member.out_rows
                if count not in member.row_kernels:
                    member.row_kernels[count] = member.for_rows(count)
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
