"""Sibling products merged: matrix products of one activation by different stored weights (an
attention's separate query, key and value projections) run as one product against the weights
concatenated when the plan is made; each product's result is then a view of its columns.

    Q = x @ Wq + bq        K = x @ Wk + bk        V = x @ Wv + bv

becomes `x @ [Wq Wk Wv] + [bq bk bv]`, one ContractionKernel whose row parts (and their bias
adds) are one parallel region instead of three: at two threads a call pays one hand-off of the
second thread instead of three, and one thread makes one BLAS call of three times the columns
(788x192 @ 192x576 took 877 us against 932 for the three 192-column calls).

Each element is the same dot product of a row of x and a column of a weight, added to the same
bias element. NumPy's OpenBLAS computed each column of the wider product bit for bit as the
narrower one (measured on this machine's kernels); another BLAS may block a wider product
differently, as it may any product, which is why products are tested against torch's
tolerances, not bits.

Merged are steps that are a ContractionKernel of a matrix product (no batch dim, one
contracted and one free label) whose right operand is stored data (not an overridden input)
and whose epilogue is reshapes and at most one add of a stored vector broadcast along the
rows; siblings read the same activation through views (reshapes, broadcasts adding dims) and
all of them add a bias or none does (adding a zero would turn -0.0 into +0.0). The merged step
takes the place of the last sibling; steps between the siblings that read a sibling's result
move after it. When a call finds the siblings' left operands not to be the same memory (they
were copied on the way), it runs the original products instead.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from prims.registry import lookup

from ..ir.values import TensorMeta
from .contraction_fusion import ContractionKernel, matrix_product
from .steps import SlotRef, Step


@attrs.frozen
class _Sibling:
    """One product of a group as matched: its step, the position of its activation among the
    step's arguments, the weight as a [contracted, columns] matrix and its bias (or None)."""

    step: Step
    activation: int
    weight: np.ndarray
    bias: np.ndarray | None
    rows: int
    # The activation operand seen as [rows, contracted]: reshaped to its spec, indexed by this
    # (0 along the labels it is broadcast over), then reshaped.
    index: tuple[Any, ...]
    spec_shape: tuple[int, ...]


class MergedProducts:
    """The kernel of merged sibling products: called with every sibling's arguments in turn, it
    returns every sibling's result."""

    def __init__(self, siblings: Sequence[_Sibling]) -> None:
        first = siblings[0]
        self.kernels = tuple(s.step.kernel for s in siblings)
        self.arity = tuple(len(s.step.arguments) for s in siblings)
        self.activations = tuple(s.activation for s in siblings)
        self.indices = tuple(s.index for s in siblings)
        self.spec_shapes = tuple(s.spec_shape for s in siblings)
        contracted, rows = first.weight.shape[0], first.rows
        self.matrix = (rows, contracted)
        self.weights = np.ascontiguousarray(np.concatenate([s.weight for s in siblings], axis=1))
        columns = self.weights.shape[1]
        ends = tuple(itertools.accumulate(s.weight.shape[1] for s in siblings))
        self.bounds = tuple(zip((0, *ends[:-1]), ends))  # each sibling's columns
        self.result_shapes = tuple(tuple(s.step.out_metas[0].shape) for s in siblings)
        self.extra: tuple[np.ndarray, ...] = ()
        self.biases: np.ndarray | None = None
        if first.bias is not None:
            self.biases = np.concatenate([s.bias for s in siblings if s.bias is not None])
            self.extra = (np.broadcast_to(self.biases, (rows, columns)),)
        self.product = matrix_product(rows, contracted, columns, self.biases is not None)

    @property
    def stored_bytes(self) -> int:
        return self.weights.nbytes + (0 if self.biases is None else self.biases.nbytes)

    def __call__(self, *arguments: Any) -> tuple[np.ndarray, ...]:
        groups: list[tuple[Any, ...]] = []
        start = 0
        for count in self.arity:
            groups.append(arguments[start : start + count])
            start += count
        shared = self._activation(groups)
        if shared is None:  # copied on the way: the products one by one
            return tuple(kernel(*group) for kernel, group in zip(self.kernels, groups))
        result = self.product(shared, self.weights, *self.extra)
        return tuple(
            result[:, begin:end].reshape(shape)
            for (begin, end), shape in zip(self.bounds, self.result_shapes)
        )

    def _activation(self, groups: list[tuple[Any, ...]]) -> np.ndarray | None:
        """The siblings' common left operand as a [rows, contracted] matrix, or None when they
        do not see the same memory the same way."""
        seen: tuple[Any, ...] | None = None
        matrix: np.ndarray | None = None
        for group, position, index, spec_shape in zip(
            groups, self.activations, self.indices, self.spec_shapes
        ):
            array = group[position].reshape(spec_shape)
            if any(
                array.strides[axis] != 0 and array.shape[axis] != 1
                for axis, at in enumerate(index)
                if at == 0
            ):
                return None
            matrix = array[index].reshape(self.matrix)
            key = (matrix.__array_interface__["data"][0], matrix.strides)
            if seen is not None and key != seen:
                return None
            seen = key
        return matrix


def merge_sibling_products(steps: list[Step], constants: dict[int, Any]) -> tuple[list[Step], int]:
    """The steps with every group of sibling products merged into one step, and the bytes of
    the concatenated weights and biases the plan now keeps."""
    producer = {slot: step for step in steps for slot in step.out_slots}
    groups: dict[tuple[Any, ...], list[_Sibling]] = {}
    for step in steps:
        matched = _sibling(step, producer, constants)
        if matched is not None:
            key, sibling = matched
            groups.setdefault(key, []).append(sibling)
    stored = 0
    for siblings in groups.values():
        if len(siblings) < 2:
            continue
        position = {id(step): index for index, step in enumerate(steps)}  # after earlier merges
        merged = _merged_order(steps, [position[id(s.step)] for s in siblings], siblings)
        if merged is not None:
            steps, kernel = merged
            stored += kernel.stored_bytes
    return steps, stored


def _sibling(
    step: Step, producer: dict[int, Step], constants: dict[int, Any]
) -> tuple[tuple[Any, ...], _Sibling] | None:
    """The grouping key (the activation's root slot, its matrix shape, the dtype, whether a
    bias is added) and the sibling a step is, or None when it is no mergeable product."""
    kernel = step.kernel
    if type(kernel) is not ContractionKernel or len(step.out_slots) != 1 or step.random:
        return None
    if any(type(size) is not int for size in kernel.sizes):
        return None  # a symbolic size: the plan of a dynamic graph keeps its products
    meta = step.out_metas[0] if step.out_metas else None
    if type(meta) is not TensorMeta or not all(type(a) is SlotRef for a in step.arguments):
        return None
    dtype = np.dtype(meta.dtype.numpy)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        return None
    adds = [e for e in kernel.epilogue if e.function is not None or e.ufunc is not None]
    if len(adds) > 1 or any(e.function is not None or e.ufunc is not np.add for e in adds):
        return None
    slots = [int(a) for a in step.arguments]
    weight_position = next((p for p in (1, 0) if slots[p] in constants), None)
    if weight_position is None or slots[1 - weight_position] in constants:
        return None
    activation = 1 - weight_position
    x_spec, w_spec = kernel.operands[activation], kernel.operands[weight_position]
    sizes = kernel.sizes
    out = [label for label in kernel.out_labels if sizes[label] != 1]
    contracted = [label for label in w_spec.labels if label in x_spec.labels and label not in out]
    rows = [label for label in out if label not in w_spec.labels]
    free = [label for label in out if label in w_spec.labels]
    if len(contracted) != 1 or len(free) != 1 or out != rows + free:
        return None
    if set(w_spec.labels) != {contracted[0], free[0]}:
        return None
    kept = [label for label in x_spec.labels if label in rows or label == contracted[0]]
    if kept != rows + contracted or not set(x_spec.labels) <= {*rows, *contracted, *free}:
        return None
    weight = np.asarray(constants[slots[weight_position]])
    if weight.dtype != dtype or weight.size != math.prod(w_spec.shape):
        return None
    order = (w_spec.labels.index(contracted[0]), w_spec.labels.index(free[0]))
    matrix = weight.reshape(w_spec.shape).transpose(order)
    bias: np.ndarray | None = None
    if adds:
        operand = adds[0].operand
        if operand is None:
            return None
        bias = _stored_row_vector(slots[2 + operand], producer, constants, sizes[free[0]], dtype)
        if bias is None:
            return None
    index = tuple(slice(None) if label in kept else 0 for label in x_spec.labels)
    row_count = math.prod(sizes[label] for label in rows)
    root = _root(slots[activation], producer)
    key = (root, row_count, sizes[contracted[0]], dtype, bias is not None)
    return key, _Sibling(step, activation, matrix, bias, row_count, index, x_spec.shape)


def _stored_row_vector(
    slot: int, producer: dict[int, Step], constants: dict[int, Any], columns: int, dtype: Any
) -> np.ndarray | None:
    """The stored vector a broadcast along the rows makes of `slot` (its last dim the
    columns), or None."""
    step = producer.get(slot)
    if step is None or len(step.nodes) != 1 or step.node.op != "prims.broadcast_in_dim":
        return None
    shape = tuple(step.node.kwargs["shape"])
    source = step.arguments[0] if len(step.arguments) == 1 else None
    if type(source) is not SlotRef or int(source) not in constants:
        return None
    vector = np.asarray(constants[int(source)])
    if (
        vector.shape != (columns,)
        or vector.dtype != dtype
        or not shape
        or shape[-1] != columns
        or tuple(step.node.kwargs["broadcast_dimensions"]) != (len(shape) - 1,)
    ):
        return None
    return vector


def _root(slot: int, producer: dict[int, Step]) -> int:
    """The slot a value is a view of through reshapes and broadcasts (one node, one operand)."""
    while True:
        step = producer.get(slot)
        if step is None or len(step.nodes) != 1 or len(step.arguments) != 1:
            return slot
        definition = lookup(step.node.op)
        if not (
            step.node.op == "prims.broadcast_in_dim"
            or (definition is not None and definition.reshape)
        ):
            return slot
        source = step.arguments[0]
        if type(source) is not SlotRef:
            return slot
        slot = int(source)


def _merged_order(
    steps: list[Step], positions: list[int], siblings: list[_Sibling]
) -> tuple[list[Step], MergedProducts] | None:
    """The steps with the siblings (at `positions`) replaced by one merged step at the last
    one's place, the steps between them that read a sibling's result (or such a step's) moved
    after it; None when the merged step would read one of those."""
    last = positions[-1]
    made = {slot for index in positions for slot in steps[index].out_slots}
    moved: list[int] = []
    for index in range(positions[0] + 1, last):
        if index in positions:
            continue
        if any(slot in made for slot in steps[index].reads()):
            moved.append(index)
            made.update(steps[index].out_slots)
    reads = {slot for index in positions for slot in steps[index].reads()}
    if any(slot in reads for index in moved for slot in steps[index].out_slots):
        return None
    kernel = MergedProducts(siblings)
    members = [steps[index] for index in positions]
    merged = Step(
        tuple(node for step in members for node in step.nodes),
        kernel,
        tuple(argument for step in members for argument in step.arguments),
        tuple(slot for step in members for slot in step.out_slots),
        tuple(meta for step in members for meta in step.out_metas),
        result_kind="fresh",
    )
    skipped = set(positions) | set(moved)
    order = [step for index, step in enumerate(steps[:last]) if index not in skipped]
    order += [merged, *(steps[index] for index in moved), *steps[last + 1 :]]
    return order, kernel
