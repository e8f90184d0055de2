"""Attention as one blocked step: a batched product, the row-wise steps reading its result, and a
second batched product of their result, run block by block so that each block's scores stay in
cache, on the call's threads.

The chain every attention lowers to (scaled_dot_product_attention's decomposition, or a model's
own matmul / softmax / matmul), as planned steps:

    S = q @ k  (+ its epilogue: a scale, an additive mask)      a batched ContractionKernel
    ... steps computing rows of S's shape from rows of S:        a softmax's amax, sub, exp, sum,
        elementwise steps, reductions over the last dim,         div; a causal `where`; the
        reshapes, copies and row broadcasts between them         fully-masked rows set to 0
    O = P @ v                                                    a batched ContractionKernel

The unfused steps make every pass over the whole [batch, heads, rows, columns] scores, and each
product is one BLAS call over all heads. Here the scores are cut, when the plan is made, into
blocks of at most `BLOCK_BYTES` (batch indices with all their heads, or heads, or a head's
rows); each block makes its product into a buffer of its thread, runs every row-wise step on
it in place (or in a second such buffer), and multiplies the result by v straight into the
block's rows of the output. The blocks are the parts of one parallel region (threads.py).

Every element is computed as the unfused steps compute it: the row-wise steps are the same
kernels on slices along dims nothing is reduced over (a reduction over the last dim reduces each
row alone), and each block's product is BLAS over whole rows of both operands. Only BLAS may
round differently from one call over all heads: a larger product may be blocked differently,
and a row sum (a product with ones, row_sums.py) may take a row in another group of rows. The
blocks are decided when the plan is made, never by the thread count, so the results are bit for
bit the same on any number of threads.

Values are seen in one canonical layout: every value of the chain holds its elements in the
row-major order of [g, row, column] (g the flattened batch and head index) or, for per-row
values (a softmax's max and sum), of [g, row]; a row-major reshape or a copy does not change
that order, so it is no step at all here. Per-row values are kept with a trailing dim of 1 and
NumPy's broadcasting stands for the broadcasts to the scores' shape. The batch dims are the
finest split of g that every value's leading dims merge into (e.g. [batch, heads] when a mask is
broadcast over heads), so that an operand broadcast along some of them is sliced without a copy.

An operand made by row-major copies and reshapes (each read by nothing else) of a value that
already has the operand's canonical shape is read from that value, the copies dropped
(`_read_through_copies`): q, k and v cloned contiguous for the batched products.

Anything else falls back to the unfused steps: a chain value read by a step that is not one of
these (or after the second product, or returned), products without a batch dim, a reduction over
another dim, a transpose inside the chain.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from prims.common import number_as
from prims.registry import lookup

from ..errors import ExecutionError
from ..ir.dtypes import DType
from ..ir.values import TensorMeta
from .blas import matmul
from .contraction_fusion import ContractionKernel
from .kept_buffers import kept_buffer
from .select import ZeroSelect
from .steps import SlotRef, Step, describe_failure
from .threads import run_parts

# The bytes of one block's scores at most (unless a block is one row): a block and the second
# buffer a softmax needs stay in a core's L2 cache (2 MiB on the machine measured). Measured at
# one thread, DeiT-tiny and Llama of the suite ran 3-4% faster with blocks of 512 KiB or 1 MiB
# than with 256 KiB (more blocks, more Python per call) and 5-8% faster than with 64-128 KiB.
BLOCK_BYTES = 1 << 19
# A chain whose products make fewer multiply-adds runs its blocks on the calling thread alone:
# handing blocks to another thread costs tens of microseconds (docs/executor.md#threads).
PARALLEL_MULTIPLY_ADDS = 1 << 22
# How many steps after the first product the second one is looked for.
MAX_CHAIN_STEPS = 64

FULL, ROW = "full", "row"


# -- the kernel ------------------------------------------------------------------------------------


@attrs.frozen
class _Canonical:
    """How an operand array becomes its canonical view: reshaped to `spec` (the product's operand
    spec, size-1 dims dropped), transposed by `permutation`, reshaped to `shape`. `rows`: sliced
    along the rows of a block (else along its batch dims only); `whole`: a 0-dim array, used as
    it is."""

    shape: tuple[int, ...]
    spec: tuple[int, ...] | None = None
    permutation: tuple[int, ...] | None = None
    rows: bool = True
    whole: bool = False

    def view(self, array: Any) -> Any:
        if self.whole:
            return array
        if self.spec is not None:
            array = array.reshape(self.spec)
        if self.permutation is not None:
            array = array.transpose(self.permutation)
        return array.reshape(self.shape)


@attrs.frozen
class _Instruction:
    """One row-wise step on a block: `kind` "map" (an elementwise kernel), "zero_rows" (a
    ZeroSelect of a per-row predicate, `_zero_rows`), "reduce" (a reduction over the last dim). `arguments` are
    ("value", n) block values, ("operand", i) the kernel's operands (sliced), ("literal", x).
    `target`: the buffer a "map" writes into (its number; None: the kernel's own result)."""

    step: Step
    kind: str
    kernel: Callable[..., Any]
    arguments: tuple[tuple[str, Any], ...]
    result: int
    target: int | None = None
    output_dtype: Any = None


@attrs.frozen
class _Buffer:
    """A per-thread buffer of a block: `row` values (one element per row) or the scores'."""

    row: bool
    dtype: np.dtype


class AttentionKernel:
    """The fused chain: called with its operands (q, k, the first product's epilogue operands, the
    row-wise steps' operands, v; `operands` says how each is seen) and `out=`, it returns the
    second product's result."""

    def __init__(
        self,
        steps: tuple[Step, Step],
        operands: tuple[_Canonical, ...],
        epilogue: tuple[tuple[np.ufunc, int | None, Any], ...],
        instructions: tuple[_Instruction, ...],
        buffers: tuple[_Buffer, ...],
        values: int,
        probabilities: int,
        result_shape: tuple[int, ...],
        result_dtype: np.dtype,
        canonical_result: tuple[int, ...],
        columns: int,
        parts: tuple[tuple[_Block, ...], ...],
    ) -> None:
        self.first, self.second = steps
        self.operands = operands
        self.epilogue = epilogue
        self.instructions = instructions
        self.buffers = buffers
        self.values = values
        self.probabilities = probabilities
        self.result_shape = result_shape
        self.result_dtype = result_dtype
        self.canonical_result = canonical_result
        self.columns = columns
        self.parts = parts
        self.block_rows = max(math.prod(block.shape) for part in parts for block in part)

    @property
    def blocks(self) -> int:
        return sum(len(part) for part in self.parts)

    def __call__(self, *operands: Any, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(self.result_shape, self.result_dtype)
        views = [spec.view(array) for spec, array in zip(self.operands, operands)]
        result = out.reshape(self.canonical_result)
        run_parts([_Part(self, views, result, part) for part in self.parts])
        return out

    def buffer_bytes(self) -> tuple[int, ...]:
        """The bytes of each block buffer (the largest block's)."""
        return tuple(
            self.block_rows * (1 if b.row else self.columns) * b.dtype.itemsize
            for b in self.buffers
        )

    def run_block(
        self,
        views: list[Any],
        result: np.ndarray,
        block: _Block,
        buffers: list[np.ndarray],
    ) -> None:
        by_batch = block.batch
        by_rows = (*by_batch, block.rows)
        shape = block.shape
        columns = self.columns
        step = self.first
        try:
            scores = _view(buffers[0], self.buffers[0], (*shape, columns))
            matmul(views[0][by_rows], views[1][by_batch], scores)
            for ufunc, operand, number in self.epilogue:
                other = number if operand is None else _sliced(views[operand], by_rows)
                ufunc(scores, other, out=scores)
            values: list[Any] = [None] * self.values
            values[0] = scores
            for instruction in self.instructions:
                step = instruction.step
                arguments = [
                    values[x]
                    if kind == "value"
                    else _sliced(views[x], by_rows)
                    if kind == "operand"
                    else x
                    for kind, x in instruction.arguments
                ]
                if instruction.kind == "reduce":
                    last = (len(shape),)  # the columns
                    reduced = instruction.kernel(arguments[0], last, instruction.output_dtype)
                    values[instruction.result] = np.asarray(reduced).reshape(*shape, 1)
                elif instruction.target is None:
                    values[instruction.result] = instruction.kernel(*arguments)
                else:
                    kind = self.buffers[instruction.target]
                    target = _view(
                        buffers[instruction.target], kind, (*shape, 1 if kind.row else columns)
                    )
                    if instruction.kind == "zero_rows":
                        select = instruction.kernel
                        assert isinstance(select, ZeroSelect)  # _member makes zero_rows of them
                        _zero_rows(select, arguments[0], arguments[1], target)
                    else:
                        instruction.kernel(*arguments, out=target)
                    values[instruction.result] = target
            step = self.second
            matmul(values[self.probabilities], views[-1][by_batch], result[by_rows])
        except Exception as error:  # name the step that failed
            raise ExecutionError(describe_failure(step, error)) from error


def _view(buffer: np.ndarray, kind: _Buffer, shape: tuple[int, ...]) -> np.ndarray:
    """The start of a thread's byte buffer as a C-contiguous array of `shape`."""
    return buffer[: math.prod(shape) * kind.dtype.itemsize].view(kind.dtype).reshape(shape)


def _thread_buffers(sizes: tuple[int, ...]) -> list[np.ndarray]:
    """This thread's block buffers (bytes), shared by every attention step it runs: a thread
    runs one block at a time, and keeps its buffers between calls (a steady-state call
    allocates none)."""
    return [
        kept_buffer(f"attention block {number}", (size,), _BYTE)
        for number, size in enumerate(sizes)
    ]


_BYTE = np.dtype(np.uint8)


def _zero_rows(
    select: ZeroSelect, predicate: np.ndarray, value: np.ndarray, out: np.ndarray
) -> None:
    """A ZeroSelect (`where(p, 0, value)` or `where(p, value, 0)`) whose predicate is one per
    row: the value's rows, with the rows it does not keep set to +0 (the bits the selection
    gives them), instead of a product of every element's bits."""
    if out is not value:
        np.copyto(out, value)
    rows = predicate[..., 0]
    dropped = np.logical_not(rows) if select.keep_when else rows
    out[dropped.astype(bool, copy=False)] = 0


def _sliced(array: Any, index: tuple[Any, ...]) -> Any:
    return array if array.ndim == 0 else array[index]


class _Part:
    """Some blocks of a chain, in order, on one thread (with that thread's buffers)."""

    __slots__ = ("blocks", "kernel", "result", "views")

    def __init__(
        self,
        kernel: AttentionKernel,
        views: list[Any],
        result: np.ndarray,
        blocks: tuple[_Block, ...],
    ) -> None:
        self.kernel = kernel
        self.views = views
        self.result = result
        self.blocks = blocks

    def __call__(self) -> None:
        kernel = self.kernel
        buffers = _thread_buffers(kernel.buffer_bytes())
        for block in self.blocks:
            kernel.run_block(self.views, self.result, block, buffers)


# -- finding chains --------------------------------------------------------------------------------


@attrs.frozen
class _Product:
    """A batched product's roles: `left` (0 or 1) is the operand holding the result's first free
    dim; labels: batch (in the result's order), the left and right free ones, the contracted."""

    left: int
    batch: tuple[int, ...]
    free: tuple[int, int]
    contracted: int


def _product(kernel: ContractionKernel) -> _Product | None:
    """The roles of a ContractionKernel's labels when it is a batched matrix product with the
    batch dims leading its result, or None."""
    (a, b), sizes = kernel.operands, kernel.sizes
    out = [label for label in kernel.out_labels if sizes[label] != 1]
    in_a, in_b = set(a.labels), set(b.labels)
    if len(a.labels) != len(in_a) or len(b.labels) != len(in_b):
        return None
    batch = tuple(label for label in out if label in in_a and label in in_b)
    contracted = [label for label in in_a & in_b if label not in out]
    free = out[len(batch) :]
    if not batch or len(contracted) != 1 or len(free) != 2 or tuple(out[: len(batch)]) != batch:
        return None
    first, second = free
    if in_a == {*batch, first, contracted[0]} and in_b == {*batch, second, contracted[0]}:
        left = 0
    elif in_b == {*batch, first, contracted[0]} and in_a == {*batch, second, contracted[0]}:
        left = 1
    else:
        return None
    return _Product(left, batch, (first, second), contracted[0])


def _refine(cuts: set[int], leading: Sequence[int]) -> None:
    """Adds the points where a value's leading dims split the flattened batch index (their
    running products)."""
    running = 1
    for size in leading:
        running *= size
        cuts.add(running)


def _batch_dims(cuts: set[int], batch: int) -> tuple[int, ...] | None:
    """The finest split of the batch index with these cut points, or None when some dims do not
    nest (no shape merges into every one of them)."""
    dims: list[int] = []
    previous = 1
    for cut in sorted(cuts | {batch}):
        if cut == 1:
            continue
        if cut % previous:
            return None
        dims.append(cut // previous)
        previous = cut
    return tuple(dims) or (1,)


@attrs.frozen
class _Pending:
    """A row-wise step of a chain being matched, before its buffers are chosen: `held` is the
    class of the array it makes (FULL or ROW)."""

    step: Step
    kind: str
    arguments: tuple[tuple[str, Any], ...]
    result: int
    held: str
    output_dtype: Any = None


@attrs.define
class _Chain:
    """A chain being matched: its steps, values (slot -> (class, dtype, value number)), the
    operands it reads from outside and how they are seen."""

    batch: int
    rows: int
    columns: int
    values: dict[int, tuple[str, np.dtype, int]] = attrs.Factory(dict)
    count: int = 0
    operands: list[tuple[int, str]] = attrs.Factory(list)  # (slot, how) in kernel order
    shapes: list[tuple[int, ...]] = attrs.Factory(list)  # batch shapes to split g by
    members: list[Step] = attrs.Factory(list)
    pending: list[_Pending] = attrs.Factory(list)

    def value(self, slot: int, kind: str, dtype: np.dtype) -> int:
        number = self.count
        self.values[slot] = (kind, dtype, number)
        self.count += 1
        return number

    def classify(self, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]] | None:
        """(class, leading dims) of a chain value's shape: [..., rows, columns] or per-row
        [..., rows] / [..., rows, 1], the leading dims' product being the batch; else None."""
        if any(type(size) is not int for size in shape):
            return None  # a symbolic size: plans of dynamic graphs keep their steps
        size = math.prod(shape)
        if size == self.batch * self.rows * self.columns and shape[-2:] == (
            self.rows,
            self.columns,
        ):
            return FULL, shape[:-2]
        if size == self.batch * self.rows:
            if shape[-2:] == (self.rows, 1):
                return ROW, shape[:-2]
            if shape[-1:] == (self.rows,):
                return ROW, shape[:-1]
        return None


def fuse_attention(
    steps: list[Step], meta_of: dict[int, Any], output_slots: tuple[int, ...]
) -> list[Step]:
    """The steps with every attention chain found replaced by one AttentionKernel step (the steps
    between its two products that do not read the chain moved before it)."""
    result = list(steps)
    index = 0
    returned = set(output_slots)
    while index < len(result):
        found = _match(result, index, meta_of, returned)
        if found is None:
            index += 1
            continue
        last, hoisted, step = found
        result[index : last + 1] = [*hoisted, step]
        index += len(hoisted) + 1
    return _read_through_copies(result, meta_of, returned)


def _same_elements(step: Step) -> bool:
    """specialize.py's row-major copy (a clone), or its view of a reshape prim (closures named
    so): a step whose result holds its one operand's elements in row-major order."""
    name = getattr(step.kernel, "__name__", "")
    definition = lookup(step.node.op)
    return (
        len(step.nodes) == 1
        and len(step.out_slots) == 1
        and len(step.arguments) == 1
        and type(step.arguments[0]) is SlotRef
        and not step.elementwise
        and (
            name == "row_major"
            or (name == "reshape" and definition is not None and definition.reshape)
        )
    )


def _read_through_copies(
    steps: list[Step], meta_of: dict[int, Any], returned: set[int]
) -> list[Step]:
    """Attention operands made by row-major copies and reshapes of a value already of the
    operand's canonical shape (v transposed to [batch, heads, rows, dim], cloned and collapsed
    for the batched product) are read from that value itself, and the copies go: each block
    slices the value in place (BLAS reads rows of any stride). The same elements in the same
    order, so the same products; a copy or reshape read by any other step stays."""
    producer = {slot: step for step in steps for slot in step.out_slots}
    readers: dict[int, int] = {}
    for step in steps:
        for slot in step.reads():
            readers[slot] = readers.get(slot, 0) + 1
    dropped: set[int] = set()
    for step in steps:
        kernel = step.kernel
        if type(kernel) is not AttentionKernel:
            continue
        arguments = list(step.arguments)
        operands = list(kernel.operands)
        for position, (argument, view) in enumerate(zip(arguments, operands)):
            if view.whole or view.permutation is not None:
                continue
            slot = int(argument)
            chain: list[Step] = []
            source: int | None = None
            copies = 0  # the steps up to the earliest value of the canonical shape
            made = producer.get(slot)
            while (
                made is not None
                and _same_elements(made)
                and readers.get(made.out_slots[0], 0) == 1
                and made.out_slots[0] not in returned
            ):
                chain.append(made)
                slot = int(made.arguments[0])
                meta = meta_of.get(slot)
                if type(meta) is TensorMeta and tuple(meta.shape) == view.shape:
                    source, copies = slot, len(chain)
                made = producer.get(slot)
            if source is None:
                continue
            arguments[position] = SlotRef(source)
            operands[position] = _Canonical(view.shape, rows=view.rows)
            dropped.update(id(copy) for copy in chain[:copies])
        if arguments != list(step.arguments):
            kernel.operands = tuple(operands)
            step.arguments = tuple(arguments)
    return [step for step in steps if id(step) not in dropped]


def _match(
    steps: list[Step], index: int, meta_of: dict[int, Any], returned: set[int]
) -> tuple[int, list[Step], Step] | None:
    first = steps[index]
    kernel = first.kernel
    if type(kernel) is not ContractionKernel or len(first.out_slots) != 1:
        return None
    roles = _product(kernel)
    if roles is None or any(type(size) is not int for size in kernel.sizes):
        return None
    sizes = kernel.sizes
    batch = math.prod(sizes[label] for label in roles.batch)
    rows, columns = sizes[roles.free[0]], sizes[roles.free[1]]
    meta = first.out_metas[0]
    if type(meta) is not TensorMeta or rows < 2 or columns < 2 or not meta.dtype.is_floating:
        return None
    dtype = np.dtype(meta.dtype.numpy)
    chain = _Chain(batch, rows, columns)
    if chain.classify(meta.shape) != (FULL, meta.shape[:-2]) or not all(
        type(a) is SlotRef for a in first.arguments
    ):
        return None
    chain.shapes.append(meta.shape[:-2])
    chain.shapes.append(tuple(sizes[label] for label in roles.batch))
    left, right = (0, 1) if roles.left == 0 else (1, 0)
    chain.operands.append((int(first.arguments[left]), "left1"))
    chain.operands.append((int(first.arguments[right]), "right1"))
    epilogue: list[tuple[np.ufunc, int | None, Any]] = []
    for entry in kernel.epilogue:
        if entry.ufunc is None:  # a reshape: no step in the canonical layout
            continue
        if entry.operand is None:
            number = number_as(entry.number, DType.from_numpy(dtype))
            epilogue.append((entry.ufunc, None, number))
            continue
        slot = int(first.arguments[2 + entry.operand])
        shape = meta_of[slot].shape
        if shape == ():
            chain.operands.append((slot, "whole"))
        else:
            classified = chain.classify(shape)
            if classified is None or classified[0] != FULL:
                return None
            chain.shapes.append(classified[1])
            chain.operands.append((slot, FULL))
        epilogue.append((entry.ufunc, len(chain.operands) - 1, None))
    chain.value(first.out_slots[0], FULL, dtype)
    hoisted: list[Step] = []
    second: Step | None = None
    end = min(len(steps), index + 1 + MAX_CHAIN_STEPS)
    position = index + 1
    while position < end:
        step = steps[position]
        reads = step.reads()
        if not any(slot in chain.values for slot in reads):
            hoisted.append(step)
            position += 1
            continue
        if type(step.kernel) is ContractionKernel:
            second = step
            break
        if not _member(chain, step, meta_of):
            return None
        chain.members.append(step)
        position += 1
    if second is None:
        return None
    built = _second(chain, second)
    if built is None:
        return None
    probabilities, out_shape = built
    internal = set(chain.values)
    if internal & returned or any(
        slot in internal for later in steps[position + 1 :] for slot in later.reads()
    ):
        return None
    batch_dims = _finest(chain)
    if batch_dims is None:
        return None
    fused = _build(chain, first, second, epilogue, probabilities, out_shape, batch_dims)
    if fused is None:
        return None
    return position, hoisted, fused


def _member(chain: _Chain, step: Step, meta_of: dict[int, Any]) -> bool:
    """Adds a row-wise step reading chain values to the chain; False when it is not one."""
    if len(step.out_slots) != 1 or step.random or len(step.nodes) != 1:
        return False
    meta = step.out_metas[0]
    if type(meta) is not TensorMeta or not meta.shape:
        return False
    classified = chain.classify(meta.shape)
    if classified is None:
        return False
    kind, leading = classified
    out = step.out_slots[0]
    dtype = np.dtype(meta.dtype.numpy)
    name = getattr(step.kernel, "__name__", "")
    node = step.node
    definition = lookup(node.op)
    if not step.elementwise and definition is not None and node.op == "prims.broadcast_in_dim":
        return _broadcast(chain, step, kind, leading, dtype)
    # specialize.py's row-major copy, or its view of a reshape prim (closures named so): the
    # operand's elements in row-major order, no step in the canonical layout
    same_elements = name == "row_major" or (
        name == "reshape" and definition is not None and definition.reshape
    )
    if same_elements and not step.elementwise and len(step.arguments) == 1:
        operand = step.arguments[0]
        if type(operand) is not SlotRef or int(operand) not in chain.values:
            return False
        held, held_dtype, number = chain.values[int(operand)]
        source_meta = meta_of[int(operand)]
        if math.prod(source_meta.shape) != math.prod(meta.shape) or held_dtype != dtype:
            return False
        chain.values[out] = (held, dtype, number)
        chain.shapes.append(leading)
        return True
    if step.elementwise:
        arguments: list[tuple[str, Any]] = []
        held = ROW
        for argument in step.arguments:
            if type(argument) is SlotRef:
                slot = int(argument)
                if slot in chain.values:
                    value_kind, _, number = chain.values[slot]
                    held = FULL if value_kind == FULL else held
                    arguments.append(("value", number))
                    continue
                shape = meta_of[slot].shape
                if shape == ():
                    chain.operands.append((slot, "whole"))
                elif shape == meta.shape:
                    chain.operands.append((slot, kind))
                    held = FULL if kind == FULL else held
                    chain.shapes.append(leading)
                else:
                    return False
                arguments.append(("operand", len(chain.operands) - 1))
            elif type(argument) is tuple:
                return False
            else:
                arguments.append(("literal", argument))
        chain.shapes.append(leading)
        number = chain.value(out, held, dtype)
        kind_of = {n: k for k, _, n in chain.values.values()}
        rows_selected = (
            isinstance(step.kernel, ZeroSelect)
            and [k for k, _ in arguments] == ["value", "value"]
            and kind_of[arguments[0][1]] == ROW
            and held == FULL
        )
        kind_made = "zero_rows" if rows_selected else "map"
        chain.pending.append(_Pending(step, kind_made, tuple(arguments), number, held))
        return True
    if definition is not None and definition.reduces and kind == ROW:
        if (
            len(step.arguments) != 3
            or type(step.arguments[0]) is not SlotRef
            or step.arguments[1] is None
        ):
            return False
        slot = int(step.arguments[0])
        if slot not in chain.values or chain.values[slot][0] != FULL:
            return False
        shape = meta_of[slot].shape
        if tuple(step.arguments[1]) != (len(shape) - 1,) or chain.classify(shape) is None:
            return False
        chain.shapes.append(leading)
        number = chain.value(out, ROW, dtype)
        chain.pending.append(
            _Pending(
                step,
                "reduce",
                (("value", chain.values[slot][2]),),
                number,
                ROW,
                output_dtype=step.arguments[2],
            )
        )
        return True
    return False


def _broadcast(chain: _Chain, step: Step, kind: str, leading: tuple[int, ...], dtype: Any) -> bool:
    """A broadcast of a per-row chain value to the scores' shape (or a reshape of it): the value
    itself, which NumPy broadcasts."""
    node = step.node
    operand = step.arguments[0] if len(step.arguments) == 1 else None
    if type(operand) is not SlotRef or int(operand) not in chain.values:
        return False
    held, held_dtype, number = chain.values[int(operand)]
    source = node.args[0]
    classified = chain.classify(tuple(source.shape))
    if classified is None or held_dtype != dtype:
        return False
    source_kind, source_leading = classified
    dims = tuple(node.kwargs["broadcast_dimensions"])
    if source_kind == FULL:
        if kind != FULL or source.shape != tuple(node.kwargs["shape"]):
            return False
    elif source_leading != leading or dims != tuple(range(len(source.shape))):
        return False
    chain.values[step.out_slots[0]] = (held, dtype, number)
    chain.shapes.append(leading)
    return True


def _second(chain: _Chain, step: Step) -> tuple[int, tuple[int, ...]] | None:
    """The second product, reading a chain value as its left operand (rows x columns, the
    columns contracted): (that value's number, the result's shape), the right operand added."""
    kernel = step.kernel
    assert type(kernel) is ContractionKernel
    roles = _product(kernel)
    if roles is None or any(e.ufunc is not None for e in kernel.epilogue):
        return None
    if not all(type(a) is SlotRef for a in step.arguments) or len(step.arguments) != 2:
        return None
    left = int(step.arguments[roles.left])
    right = int(step.arguments[1 - roles.left])
    if left not in chain.values or right in chain.values:
        return None
    held, _, number = chain.values[left]
    spec = kernel.operands[roles.left]
    sizes = kernel.sizes
    batch = math.prod(sizes[label] for label in roles.batch)
    if (
        held != FULL
        or spec.labels != (*roles.batch, roles.free[0], roles.contracted)
        or batch != chain.batch
        or sizes[roles.free[0]] != chain.rows
        or sizes[roles.contracted] != chain.columns
    ):
        return None
    meta = step.out_metas[0]
    if type(meta) is not TensorMeta or np.dtype(meta.dtype.numpy) != chain.values[left][1]:
        return None
    chain.shapes.append(tuple(sizes[label] for label in roles.batch))
    chain.operands.append((right, "right2"))
    chain.members.append(step)
    return number, meta.shape


def _finest(chain: _Chain) -> tuple[int, ...] | None:
    cuts: set[int] = set()
    for shape in chain.shapes:
        _refine(cuts, shape)
    dims = _batch_dims({c for c in cuts if c < chain.batch}, chain.batch)
    if dims is None or math.prod(dims) != chain.batch:
        return None
    return dims


def _operand_view(
    how: str,
    batch_dims: tuple[int, ...],
    chain: _Chain,
    kernel: ContractionKernel | None = None,
    roles: _Product | None = None,
    position: int = 0,
) -> _Canonical:
    """How an operand of the chain is seen: "whole" (0-dim), FULL or ROW (a value of the chain's
    shape, from outside), or an operand of a product (at `position` of `kernel`): "left1" the
    first product's left ([batch, rows, contracted]), "right1" / "right2" the products' right
    ones ([batch, contracted, free])."""
    if how == "whole":
        return _Canonical((), whole=True)
    if how in (FULL, ROW):
        return _Canonical(batch_dims + (chain.rows, chain.columns if how == FULL else 1))
    assert kernel is not None and roles is not None
    spec = kernel.operands[position]
    first, second = roles.free
    if how == "left1":
        order = (*roles.batch, first, roles.contracted)
    else:
        order = (*roles.batch, roles.contracted, second)
    permutation = tuple(spec.labels.index(label) for label in order)
    return _Canonical(
        batch_dims + (kernel.sizes[order[-2]], kernel.sizes[order[-1]]),
        spec=spec.shape,
        permutation=None if permutation == tuple(range(len(permutation))) else permutation,
        rows=how == "left1",
    )


def _build(
    chain: _Chain,
    first: Step,
    second: Step,
    epilogue: list[tuple[np.ufunc, int | None, Any]],
    probabilities: int,
    out_shape: tuple[int, ...],
    batch_dims: tuple[int, ...],
) -> Step | None:
    first_kernel = first.kernel
    second_kernel = second.kernel
    assert type(first_kernel) is ContractionKernel and type(second_kernel) is ContractionKernel
    first_roles, second_roles = _product(first_kernel), _product(second_kernel)
    assert first_roles is not None and second_roles is not None
    views: list[_Canonical] = []
    for _, how in chain.operands:
        if how in ("left1", "right1"):
            position = first_roles.left if how == "left1" else 1 - first_roles.left
            view = _operand_view(how, batch_dims, chain, first_kernel, first_roles, position)
        elif how == "right2":
            position = 1 - second_roles.left
            view = _operand_view(how, batch_dims, chain, second_kernel, second_roles, position)
        else:
            view = _operand_view(how, batch_dims, chain)
        views.append(view)
    # _second added the second product's right operand last, where the kernel reads it
    assert chain.operands[-1][1] == "right2"
    operand_slots = [slot for slot, _ in chain.operands]
    instructions, buffers = _allocate(chain, probabilities)
    free_dim = second_kernel.sizes[second_roles.free[1]]
    meta = second.out_metas[0]
    canonical_result = batch_dims + (chain.rows, free_dim)
    if math.prod(canonical_result) != math.prod(out_shape):
        return None
    dtype = chain.values[first.out_slots[0]][1]
    kernel = AttentionKernel(
        (first, second),
        tuple(views),
        tuple(epilogue),
        instructions,
        buffers,
        chain.count,
        probabilities,
        tuple(out_shape),
        np.dtype(meta.dtype.numpy),
        canonical_result,
        chain.columns,
        _parts(batch_dims, chain, dtype.itemsize, first_kernel, free_dim),
    )
    members = [first, *chain.members]
    return Step(
        tuple(node for step in members for node in step.nodes),
        kernel,
        tuple(SlotRef(slot) for slot in operand_slots),
        second.out_slots,
        second.out_metas,
        result_kind="fresh",
        takes_out=True,
    )


def _allocate(
    chain: _Chain, probabilities: int
) -> tuple[tuple[_Instruction, ...], tuple[_Buffer, ...]]:
    """The row-wise instructions with the buffers they write into: a value's buffer is free again
    after its last read; an elementwise ufunc writes into an operand's buffer dying there."""
    specs = chain.pending
    last_read: dict[int, int] = {}
    for position, spec in enumerate(specs):
        for kind, x in spec.arguments:
            if kind == "value":
                last_read[x] = position
    last_read[probabilities] = len(specs)
    dtype_of = {number: dtype for _, dtype, number in chain.values.values()}
    buffers: list[_Buffer] = [_Buffer(False, dtype_of[0])]
    holder: dict[int, int | None] = {0: 0}  # value number -> buffer (None: its own array)
    free: list[int] = []
    instructions: list[_Instruction] = []
    for position, spec in enumerate(specs):
        step = spec.step
        result = spec.result
        arguments = spec.arguments
        dying = [
            x for kind, x in spec.arguments if kind == "value" and last_read.get(x, -1) == position
        ]
        target: int | None = None
        if spec.kind in ("map", "zero_rows") and step.takes_out:
            row = spec.held == ROW
            dtype = dtype_of[result]
            writable = (
                range(len(spec.arguments))
                if isinstance(step.kernel, np.ufunc)
                else (1,)
                if spec.kind == "zero_rows"
                else step.out_operands
            )
            for index, (kind, x) in enumerate(spec.arguments):
                buffer = holder.get(x) if kind == "value" else None
                if (
                    buffer is not None
                    and x in dying
                    and index in writable
                    and buffers[buffer] == _Buffer(row, dtype)
                    and sum(holder.get(v) == buffer for v in _live(last_read, holder, position))
                    == 1
                ):
                    target = buffer
                    break
            if target is None:
                target = next((b for b in free if buffers[b] == _Buffer(row, dtype)), None)
                if target is None:
                    buffers.append(_Buffer(row, dtype))
                    target = len(buffers) - 1
                else:
                    free.remove(target)
        holder[result] = target
        instructions.append(
            _Instruction(
                step,
                spec.kind,
                step.kernel,
                arguments,
                result,
                target,
                spec.output_dtype,
            )
        )
        for x in dying:
            buffer = holder.get(x)
            if (
                buffer is not None
                and buffer != target
                and not any(
                    holder.get(v) == buffer for v in _live(last_read, holder, position) if v != x
                )
            ):
                if buffer not in free:
                    free.append(buffer)
    return tuple(instructions), tuple(buffers)


def _live(last_read: dict[int, int], holder: dict[int, int | None], position: int) -> list[int]:
    """The values made so far that are still read after `position` or at it."""
    return [v for v in holder if last_read.get(v, -1) >= position]


@attrs.frozen
class _Block:
    """One block: `batch` indexes the canonical batch dims (an index of the outer ones, a range of
    one, the inner ones whole), `rows` the rows; `shape` is the block's batch and row shape."""

    batch: tuple[Any, ...]
    rows: slice
    shape: tuple[int, ...]


def _parts(
    batch_dims: tuple[int, ...],
    chain: _Chain,
    itemsize: int,
    first: ContractionKernel,
    free_dim: int,
) -> tuple[tuple[_Block, ...], ...]:
    """The blocks of about BLOCK_BYTES of scores: ranges of the outermost batch dim whose one
    index fits (the dims after it whole), or, when a single head is larger, that head's rows in
    ranges. Each block is a part of its own when the products are large enough to share, else
    every block is in one part."""
    head_bytes = chain.rows * chain.columns * itemsize
    split = len(batch_dims) - 1  # the dim the blocks take ranges of
    while split > 0 and math.prod(batch_dims[split:]) * head_bytes <= BLOCK_BYTES:
        split -= 1
    inner = batch_dims[split + 1 :]
    unit = math.prod(inner) * head_bytes  # bytes of one index of the split dim
    if unit > BLOCK_BYTES:  # one head (inner is empty): its rows in ranges
        per_index, row_count = 1, math.ceil(unit / BLOCK_BYTES)
    else:
        per_index, row_count = BLOCK_BYTES // unit, 1
    length = batch_dims[split]
    count = math.ceil(length / per_index)
    spans = [slice(i * length // count, (i + 1) * length // count) for i in range(count)]
    rows = [
        slice(i * chain.rows // row_count, (i + 1) * chain.rows // row_count)
        for i in range(row_count)
    ]
    whole = (slice(None),) * len(inner)
    blocks = tuple(
        _Block(
            (*(int(i) for i in position), span, *whole),
            row,
            (span.stop - span.start, *inner, row.stop - row.start),
        )
        for position in np.ndindex(*batch_dims[:split])
        for span in spans
        for row in rows
    )
    contracted = first.sizes[_contracted(first)]
    work = chain.batch * chain.rows * chain.columns * (contracted + free_dim)
    if work < PARALLEL_MULTIPLY_ADDS or len(blocks) < 2:
        return (blocks,)
    return tuple((block,) for block in blocks)


def _contracted(kernel: ContractionKernel) -> int:
    roles = _product(kernel)
    assert roles is not None
    return roles.contracted
