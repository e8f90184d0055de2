"""Plan-time kernel choices: where a node's static types (shapes, dtypes, literal attributes) let
a simpler call compute exactly what its generic kernel would, the step calls that instead. The
generic kernels re-derive at every call what the plan already knows (Python numbers converted to
the tensor dtype, broadcast shapes, window decompositions); each choice here is the same NumPy
computation with that work done once.

- elementwise prims on standard dtypes: the function the kernel would end up calling
  (`direct_kernels.direct_kernel`), Python-number operands converted once; a `where` with a
  zero branch as a product of bit patterns (`select.zero_select`);
- shape prims whose kernel is a reshape or a transpose (`squeeze`, `split_dim`, `collapse_view`,
  `transpose`, and `broadcast_in_dim` that only inserts size-1 dims): that method with the
  shape computed once;
- copies into row-major order (`clone`, `copy_strided`, `reshape`, `collapse`) of an operand
  that already is C-contiguous: the operand itself, reshaped;
- `as_strided` windows that are basic slices of the operand's storage (`select`, `slice`,
  `narrow`) when its layout is dense, contiguous or permuted (a transposed q's halves): that
  index on the operand transposed into storage order, a view; and
  `as_strided_scatter` into such a window (padding): two copies, the second into that index;
- `full`, `full_like` with a literal value: the value converted once, copied in parts;
- broadcasts whose every reader is a direct elementwise call that NumPy's broadcasting brings to
  the full shape anyway (`relax_broadcasts`): the operand with size-1 dims inserted, no
  `np.broadcast_to` view.

Each choice also says what its result is memory-wise (`Result`), which buffer reuse
(inplace.py) relies on.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from prims.common import is_number, number_as
from prims.elementwise import ELEMENTWISE
from prims.registry import lookup

from ..ir.graph import Node
from ..ir.values import TensorMeta, Value
from .direct_kernels import TAKE_OUT, direct_kernel, takes_out
from .select import zero_select
from .steps import SlotRef, Step
from .threads import copy_in_parts


class Result(enum.Enum):
    """What a kernel's result is, memory-wise (inplace.py reasons with it)."""

    FRESH = "fresh"  # a new array sharing memory with nothing
    REVIEW = "review"  # a view of all of its one operand's elements, each once (reshape, transpose)
    VIEW = "view"  # anything else that may share memory with an operand (broadcasts, windows)


@attrs.frozen
class Specialized:
    """A kernel computing a node as its prim's kernel does, called with `operands` (values,
    literals); `elementwise` when it is a plain elementwise NumPy function of them (NumPy's
    broadcasting of its operands is then fine; a ufunc also takes `out=`)."""

    kernel: Callable[..., Any]
    operands: Sequence[Any]
    result: Result
    elementwise: bool = False
    # The kernel also takes `out=` (Step.takes_out).
    takes_out: bool = False
    # Operands it may write its result into (Step.out_operands).
    out_operands: tuple[int, ...] = ()


def specialized(node: Node) -> Specialized | None:
    name = node.op[len("prims.") :]
    if name in ELEMENTWISE:
        return _elementwise(node, name)
    rule = _SHAPE_RULES.get(name)
    return rule(node) if rule is not None else None


# -- elementwise ----------------------------------------------------------------------------------


def _elementwise(node: Node, name: str) -> Specialized | None:
    if name == "where":
        selection = zero_select(node)
        if selection is not None:
            # The value's bits times the predicate, element for element: the value may be
            # overwritten (inplace.py), and the selection may join a product's epilogue.
            return Specialized(
                selection[0],
                selection[1],
                Result.FRESH,
                elementwise=True,
                takes_out=True,
                out_operands=(1,),
            )
    operands = node.args[1:] if name == "where" else node.args
    tensors = [a for a in operands if type(a) is Value]
    if (
        not tensors
        or any(not t.is_tensor for t in tensors)
        or (name == "where" and type(node.args[0]) is not Value)
    ):
        return None
    dtype = tensors[0].dtype
    function = direct_kernel(name, dtype)
    if function is None:
        return None
    with np.errstate(all="ignore"):  # wrapping or overflowing numbers, as the kernel converts them
        converted = [number_as(a, dtype) if is_number(a) else a for a in node.args]
    if name == "reciprocal":  # 1 / a, as the kernel computes it, as a ufunc (out= works)
        return Specialized(
            np.true_divide,
            (number_as(1, dtype), *converted),
            Result.FRESH,
            elementwise=True,
            takes_out=True,
        )
    if function is np.where:
        return Specialized(
            select, converted, Result.FRESH, elementwise=True, takes_out=True, out_operands=(2,)
        )
    return Specialized(
        function,
        converted,
        Result.FRESH,
        elementwise=True,
        takes_out=takes_out(function),
        # Not ufuncs but taking out= as one does (direct_kernels.TAKE_OUT), exact aliasing too.
        out_operands=tuple(range(len(converted))) if function in TAKE_OUT else (),
    )


def select(pred: Any, a: Any, b: Any, out: np.ndarray | None = None) -> Any:
    """np.where(pred, a, b) for operands of the result's dtype, written into `out` when given
    (b copied, then a where pred holds: each element is a copy of the one np.where picks; `out`
    may be b itself, whose copy is then skipped: inplace.py). A predicate true nowhere — GELU's
    `x == inf`, a mask of rows that are all -inf — costs a check of its bytes (a twentieth of a
    masked write) instead of the masked write."""
    if out is None:
        return np.where(pred, a, b)
    if not _same_elements(out, b):
        np.copyto(out, b)
    if not np.any(pred):
        return out
    if np.shape(pred) == out.shape and np.ndim(a) in (0, out.ndim) and np.size(a) in (1, out.size):
        np.putmask(out, pred, a)  # one pass, where every operand is whole (no broadcasting)
    else:
        np.copyto(out, a, where=pred)
    return out


def _same_elements(out: np.ndarray, b: Any) -> bool:
    """`b` is `out`'s memory seen element for element (a part of a dying operand given as out)."""
    return b is out or (
        type(b) is np.ndarray
        and b.shape == out.shape
        and b.strides == out.strides
        and b.ctypes.data == out.ctypes.data
    )


# -- shape prims --------------------------------------------------------------------------------------


def _reshaper(shape: tuple[int, ...]) -> Callable[[np.ndarray], np.ndarray]:
    def reshape(a: np.ndarray) -> np.ndarray:
        return a.reshape(shape)

    return reshape


def _to_result_shape(node: Node) -> Specialized:
    """squeeze, split_dim, collapse_view: their kernels reshape (a view where NumPy can)."""
    return Specialized(_reshaper(node.results[0].shape), (node.args[0],), Result.REVIEW)


def _transpose(node: Node) -> Specialized:
    permutation = tuple(node.kwargs["permutation"])

    def transpose(a: np.ndarray) -> np.ndarray:
        return a.transpose(permutation)

    return Specialized(transpose, (node.args[0],), Result.REVIEW)


def expanded_shape(
    operand_shape: Sequence[int], ndim: int, broadcast_dimensions: Sequence[int]
) -> tuple[int, ...]:
    """The operand's shape with size-1 dims where broadcast_in_dim creates new dims."""
    expanded = [1] * ndim
    for input_dim, output_dim in enumerate(broadcast_dimensions):
        expanded[output_dim] = operand_shape[input_dim]
    return tuple(expanded)


def _broadcast_in_dim(node: Node) -> Specialized | None:
    operand = node.args[0]
    if type(operand) is not Value:
        return None
    shape = tuple(node.kwargs["shape"])
    expanded = expanded_shape(operand.shape, len(shape), node.kwargs["broadcast_dimensions"])
    if expanded == shape:  # only size-1 dims inserted: the kernel's broadcast_to changes nothing
        return Specialized(_reshaper(shape), (operand,), Result.REVIEW)

    # For a C-contiguous operand the broadcast view is made directly (np.broadcast_to costs four
    # times as much): its strides are the expanded shape's row-major strides, 0 where stretched.
    itemsize = operand.dtype.itemsize
    strides = tuple(
        0 if size == 1 else math.prod(expanded[d + 1 :]) * itemsize
        for d, size in enumerate(expanded)
    )
    dtype = operand.dtype.numpy
    direct = dtype.kind in "biufc"  # NumPy's own dtypes export their buffer (not bfloat16)

    def broadcast(a: np.ndarray) -> np.ndarray:
        if direct and a.flags.c_contiguous and a.dtype == dtype:
            view = np.ndarray(shape, dtype, a, 0, strides)
            view.flags.writeable = False  # as np.broadcast_to's
            return view
        return np.broadcast_to(a.reshape(expanded), shape)

    return Specialized(broadcast, (operand,), Result.VIEW)


def _as_strided(node: Node) -> Specialized | None:
    """A window that is a transpose of `a.transpose(order)[index]`, when the operand's layout is
    dense (its strides a permutation of row-major strides): its storage is then the row-major
    elements of `a.transpose(order)`, whatever NumPy's layout of `a` (values are logical). A view,
    never a copy (RoPE's halves of a transposed q or k, a contiguous operand's select and
    slice)."""
    operand = node.args[0]
    if type(operand) is not Value or not operand.is_tensor:
        return None
    size, stride = tuple(node.kwargs["size"]), tuple(node.kwargs["stride"])
    offset = node.kwargs["storage_offset"] - operand.storage_offset
    if math.prod(size) == 0:
        return None
    found = permuted_window(operand.shape, operand.strides, size, stride, offset)
    if found is None:
        return None
    order, index, back = found
    identity = tuple(range(len(order))), tuple(range(len(back)))
    if (order, back) == identity:

        def window(a: np.ndarray) -> np.ndarray:
            return a[index]

    else:

        def window(a: np.ndarray) -> np.ndarray:
            return a.transpose(order)[index].transpose(back)

    return Specialized(window, (operand,), Result.VIEW)


def storage_order(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...] | None:
    """The dims of a dense layout (no gaps, no overlaps) from the largest stride to the smallest
    (size-1 dims, whose strides say nothing, last), or None for any other layout: a tensor of
    this layout holds, in storage, the row-major elements of its transpose by that order."""
    order = tuple(sorted(range(len(shape)), key=lambda d: (-strides[d] if shape[d] > 1 else 1, d)))
    expected = 1
    for d in reversed(order):
        if shape[d] == 1:
            continue
        if strides[d] != expected:
            return None
        expected *= shape[d]
    return order


def permuted_window(
    shape: Sequence[int],
    strides: Sequence[int],
    size: Sequence[int],
    stride: Sequence[int],
    offset: int,
) -> tuple[tuple[int, ...], tuple[Any, ...], tuple[int, ...]] | None:
    """(order, index, back) such that `a.transpose(order)[index].transpose(back)` is the
    as_strided window (size, stride, storage offset relative to the operand's) of a tensor `a` of
    this shape and dense layout (`storage_order`), or None. The window's dims are taken from the
    largest stride to the smallest (`back` restores their order), so that `basic_index` can find
    the index in the storage-ordered array."""
    order = storage_order(shape, strides)
    if order is None:
        return None
    by_stride = sorted(range(len(size)), key=lambda i: (-stride[i] if size[i] > 1 else 1, i))
    index = basic_index(
        tuple(shape[d] for d in order),
        tuple(size[i] for i in by_stride),
        tuple(stride[i] for i in by_stride),
        offset,
    )
    if index is None:
        return None
    back = tuple(by_stride.index(i) for i in range(len(size)))
    return order, index, back


def _as_strided_scatter(node: Node) -> Specialized | None:
    """A scatter into a window of self's storage (`permuted_window`: self's layout dense): self
    copied into the result, then src into that window of it, a view of the result transposed
    into storage order (both copies in parts, threads.py)."""
    operand, source = node.args[0], node.args[1]
    if type(operand) is not Value or type(source) is not Value or not operand.is_tensor:
        return None
    size, stride = tuple(node.kwargs["size"]), tuple(node.kwargs["stride"])
    offset = node.kwargs["storage_offset"] - operand.storage_offset
    if math.prod(size) == 0 or source.shape != size:
        return None
    found = permuted_window(operand.shape, operand.strides, size, stride, offset)
    if found is None:
        return None
    order, index, back = found
    shape, dtype = operand.shape, operand.dtype.numpy

    def scatter(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(shape, dtype)
        copy_in_parts(out, a)
        copy_in_parts(out.transpose(order)[index].transpose(back), b)
        return out

    return Specialized(scatter, (operand, source), Result.FRESH, takes_out=True)


def basic_index(
    shape: Sequence[int], size: Sequence[int], stride: Sequence[int], offset: int
) -> tuple[Any, ...] | None:
    """An index of ints, slices and None (new axes) that takes, from a C-contiguous array of
    `shape`, exactly the as_strided window (size, stride, storage offset, in elements), or None.

    The offset splits into one start per array dim (mixed radix); each window dim of size > 1
    steps along one array dim, in the array's dim order (its stride a positive multiple of that
    dim's row-major stride); size-1 window dims become new axes. The candidate is checked on a
    stride-only view (no memory is read), so a wrong guess only means no index."""
    if not shape or 0 in shape:
        return None
    row = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    starts: list[int] = []
    rest = offset
    for length in row:
        start, rest = divmod(rest, length)
        starts.append(start)
    stepped: dict[int, slice] = {}
    new_axes_before: dict[int, int] = {}
    pending = 0
    last = -1
    for n, s in zip(size, stride):
        if n == 1:
            pending += 1
            continue
        fits = [
            i
            for i in range(last + 1, len(shape))
            if s > 0 and s % row[i] == 0 and starts[i] + (n - 1) * (s // row[i]) < shape[i]
        ]
        if not fits:
            return None
        dim = next((i for i in fits if row[i] == s), fits[0])
        step = s // row[dim]
        stepped[dim] = slice(starts[dim], starts[dim] + (n - 1) * step + 1, step)
        new_axes_before[dim] = pending
        pending = 0
        last = dim
    index: list[Any] = []
    for i, length in enumerate(shape):
        if i in stepped:
            index.extend([None] * new_axes_before[i])
            index.append(stepped[i])
        elif starts[i] >= length:
            return None
        else:
            index.append(starts[i])
    index.extend([None] * pending)
    candidate = tuple(index)
    return candidate if _verified(shape, candidate, size, stride, offset) else None


def _verified(
    shape: Sequence[int],
    index: tuple[Any, ...],
    size: Sequence[int],
    stride: Sequence[int],
    offset: int,
) -> bool:
    """`index` applied to a stride-only array of `shape` gives the window's shape, strides and
    start (for 8-byte elements)."""
    itemsize = 8
    base = np.lib.stride_tricks.as_strided(
        np.zeros(1),
        shape=tuple(shape),
        strides=tuple(math.prod(shape[i + 1 :]) * itemsize for i in range(len(shape))),
    )
    try:
        view = base[index]
    except IndexError:
        return False
    start = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if view.shape != tuple(size) or start != offset * itemsize:
        return False
    return all(n == 1 or s * itemsize == actual for n, s, actual in zip(size, stride, view.strides))


def _row_major(node: Node) -> Specialized | None:
    """clone, copy_strided, reshape, collapse: copies into row-major order. An operand already
    C-contiguous holds exactly those elements in that order: it is reused (reshaped, a view)
    instead of copied, since no kernel writes into its operands and the executor copies outputs
    that are inputs or views. Other operands take the generic kernel (the copy)."""
    operand = node.args[0]
    if type(operand) is not Value or not operand.is_tensor:
        return None
    definition = lookup(node.op)
    generic = definition.kernel if definition is not None else None
    if definition is None or generic is None:
        return None
    shape = node.results[0].shape
    attributes = tuple(node.kwargs[name] for name in definition.attribute_names)

    def row_major(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if a.flags.c_contiguous:
            return a.reshape(shape)
        if out is None:
            return generic(a, *attributes)
        copy_in_parts(out.reshape(a.shape), a)  # out is C-contiguous: a's elements, row-major
        return out

    return Specialized(row_major, (operand,), Result.REVIEW, takes_out=True)


def _filled(node: Node) -> Specialized | None:
    """full, full_like with a literal fill value: the value as the generic kernel converts it
    (taken from one call of it at plan time), written in parts (threads.py)."""
    definition = lookup(node.op)
    if definition is None or definition.kernel is None or type(node.kwargs["fill_value"]) is Value:
        return None
    result = node.results[0]
    shape, dtype = result.shape, result.dtype.numpy
    if not shape or math.prod(shape) == 0:
        return None
    # Operands (full_like's `a`) are read for their shape only: a broadcast view stands in.
    stand_ins = [np.broadcast_to(np.zeros((), o.dtype.numpy), o.shape) for o in node.args]
    first = np.asarray(definition.kernel(*definition.bind(stand_ins, node.kwargs))).reshape(-1)
    value = first[:1].reshape(())

    def fill(*operands: Any, out: np.ndarray | None = None) -> np.ndarray:
        if out is None:
            out = np.empty(shape, dtype)
        copy_in_parts(out, np.broadcast_to(value, shape))
        return out

    return Specialized(fill, tuple(node.args), Result.FRESH, takes_out=True)


_SHAPE_RULES: dict[str, Callable[[Node], Specialized | None]] = {
    "full": _filled,
    "full_like": _filled,
    "clone": _row_major,
    "copy_strided": _row_major,
    "reshape": _row_major,
    "collapse": _row_major,
    "squeeze": _to_result_shape,
    "split_dim": _to_result_shape,
    "collapse_view": _to_result_shape,
    "transpose": _transpose,
    "broadcast_in_dim": _broadcast_in_dim,
    "as_strided": _as_strided,
    "as_strided_scatter": _as_strided_scatter,
}


# -- broadcasts left to NumPy -------------------------------------------------------------------------


def relax_broadcasts(
    steps: list[Step], output_slots: tuple[int, ...], meta_of: dict[int, Any]
) -> None:
    """Broadcast steps whose every reader is an elementwise step get the operand with size-1
    dims inserted (a reshape) instead of a full broadcast view, when NumPy's broadcasting of every
    such reader's operands still gives the reader's full result shape. The reader then computes
    the same elements (an elementwise function does not see how an operand's elements are laid
    out). `meta_of` gives each slot's meta."""
    outputs = set(output_slots)
    readers: dict[int, list[Step]] = {}
    for step in steps:
        for slot in set(step.reads()):
            readers.setdefault(slot, []).append(step)
    candidates: dict[int, tuple[int, ...]] = {}
    for step in steps:
        node = step.node
        if (
            len(step.nodes) != 1
            or node.op != "prims.broadcast_in_dim"
            or step.out_slots[0] in outputs
        ):
            continue
        operand = node.args[0]
        if type(operand) is not Value:
            continue
        shape = tuple(node.kwargs["shape"])
        expanded = expanded_shape(operand.shape, len(shape), node.kwargs["broadcast_dimensions"])
        users = readers.get(step.out_slots[0], [])
        if expanded != shape and users and all(user.elementwise for user in users):
            candidates[step.out_slots[0]] = expanded
    changed = True
    while changed:  # drop candidates a reader cannot take; that may spoil another reader
        changed = False
        for slot in list(candidates):
            if not all(_broadcasts_to_full(user, candidates, meta_of) for user in readers[slot]):
                del candidates[slot]
                changed = True
    for step in steps:
        if step.out_slots and step.out_slots[0] in candidates and len(step.nodes) == 1:
            expanded = candidates[step.out_slots[0]]
            step.kernel = _reshaper(expanded)
            step.relaxed_shape = expanded


def _broadcasts_to_full(
    step: Step, candidates: dict[int, tuple[int, ...]], meta_of: dict[int, Any]
) -> bool:
    shapes = []
    for argument in step.arguments:
        if type(argument) is SlotRef:
            meta = meta_of[int(argument)]
            shapes.append(
                candidates.get(int(argument), meta.shape if type(meta) is TensorMeta else ())
            )
        elif isinstance(argument, np.ndarray):
            shapes.append(argument.shape)
    try:
        return np.broadcast_shapes(*shapes) == step.node.results[0].shape
    except ValueError:
        return False
