"""Plan-time constant folding: nodes computed from stored data alone (parameters, buffers and
constants the caller does not override, literals, and each other) run once, when the plan is
built, instead of at every call: transposes and conversions of weights, a batch norm's
`rsqrt(running_var + eps)`, the zeros an LSTM starts from.

A plan is built for one set of overridden inputs (run.py keys its plans by it): an input the
caller passes is not constant, and nothing computed from it is folded.

Folded values that unfolded nodes read (or the graph returns) become constant inputs of the
graph the plan runs; they are read-only, so no kernel, no output and no buffer reuse can ever
write into them. What is kept:
- a node is folded only when its result has at most `FOLD_ELEMENTS` elements or no more than
  the largest stored tensor it is computed from (folding never multiplies memory by
  materializing broadcasts);
- a `broadcast_in_dim` is folded only when every reader is folded too: on its own it is a free
  view, and the executor's fusions and broadcast relaxation want to see it;
- random prims never fold, and a node whose kernel fails at plan time is left to fail at run
  time, where the error names it.

The folded values are exactly what the nodes compute. Views among them (a weight's transpose)
are stored row-major when small or read more than once per run (SMALL_BYTES, REUSED_BYTES):
the values are the same, but an unfused NumPy sum over them may then add in another (pairwise)
order, so results can differ from an unfolded run by rounding (tests/test_passes.py checks both:
bit-identical as views, within rounding as copies).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from prims.registry import PrimDef, lookup

from ..ir.graph import Graph, GraphInput, InputKind, Node
from ..ir.values import TensorMeta, Value

# Results up to this many elements fold whatever they are computed from.
FOLD_ELEMENTS = 1 << 16
# Folded views are stored row-major (a copy) up to SMALL_BYTES, or up to REUSED_BYTES when the
# run reads them more than once (an LSTM's recurrent weight, once per time step): BLAS multiplies
# small batches by a row-major weight up to 1.5x faster than by the transposed view a linear
# layer's `permute` gives (OpenBLAS, 8x256 @ 256x1024: 133 against 180-240 us), and large
# batches as fast either way, where a second copy of a big weight would only cost memory.
# Except float32 transposed matrices: the contraction kernel multiplies small batches by those
# fastest of all, as (W @ x^T)^T with W row-major (85-110 us; ContractionTuning.swap_rows).
SMALL_BYTES = 256 << 10
REUSED_BYTES = 4 << 20


@attrs.frozen
class FoldedConstants:
    """What folding did: nodes folded, and bytes the new constants own (not views of stored data)."""

    folded_nodes: int = 0
    resident_bytes: int = 0


def fold_constants(
    graph: Graph, overridden: frozenset[str] = frozenset()
) -> tuple[Graph, FoldedConstants]:
    """The graph with its constant nodes computed (their needed results as constant inputs),
    or the same graph when nothing folds."""
    source_size: dict[Value, int] = {
        gi.value: gi.value.numel
        for gi in graph.inputs
        if gi.data is not None and gi.name not in overridden and gi.value.is_tensor
    }
    chosen: list[int] = []
    for index, node in enumerate(graph.nodes):
        size = _foldable(node, source_size)
        if size is not None:
            chosen.append(index)
            for result in node.results:
                source_size[result] = size
    if not chosen:
        return graph, FoldedConstants()
    readers = _unfolded_readers(graph, set(chosen))
    outputs = {graph_output.value for graph_output in graph.outputs}
    folded = {
        index
        for index in chosen
        if graph.nodes[index].op != "prims.broadcast_in_dim"
        or not any(r in outputs or readers.get(r) for r in graph.nodes[index].results)
    }
    return _evaluate(graph, folded, outputs)


def _foldable(node: Node, source_size: dict[Value, int]) -> int | None:
    """The largest stored tensor the node's result is computed from, if the node folds."""
    definition = lookup(node.op)
    if definition is None or definition.kernel is None or definition.random or not node.results:
        return None
    if any(type(result.meta) is not TensorMeta for result in node.results):
        return None
    meta_only = definition.meta_only_operands
    largest = 0
    for value in node.operand_values():
        if value in source_size:
            largest = max(largest, source_size[value])
        elif not (meta_only and value.is_tensor):
            return None
    if any(result.numel > max(FOLD_ELEMENTS, largest) for result in node.results):
        return None
    return largest


def _unfolded_readers(graph: Graph, folded: set[int]) -> dict[Value, bool]:
    """Values read by at least one node that does not fold."""
    read: dict[Value, bool] = {}
    for index, node in enumerate(graph.nodes):
        if index not in folded:
            for value in node.operand_values():
                read[value] = True
    return read


def _evaluate(graph: Graph, folded: set[int], outputs: set[Value]) -> tuple[Graph, FoldedConstants]:
    stored = {gi.value: gi.data for gi in graph.inputs if gi.data is not None}
    environment: dict[Value, Any] = dict(stored)
    done: set[int] = set()
    with np.errstate(all="ignore"):
        for index in sorted(folded):
            node = graph.nodes[index]
            definition = lookup(node.op)
            assert definition is not None  # only prims are chosen to fold
            if not definition.meta_only_operands and any(
                v not in environment for v in node.operand_values()
            ):
                continue  # an operand failed to fold
            try:
                results = _run(node, definition, environment)
            except Exception:
                continue
            environment.update(zip(node.results, results))
            done.add(index)
    if not done:
        return graph, FoldedConstants()
    needed: list[Value] = []
    seen: set[Value] = set()
    for index, node in enumerate(graph.nodes):
        if index in done:
            continue
        for value in node.operand_values():
            if value in environment and value not in stored and value not in seen:
                seen.add(value)
                needed.append(value)
    for value in outputs:
        if value in environment and value not in stored and value not in seen:
            seen.add(value)
            needed.append(value)
    readers: dict[Value, list[Node]] = {}
    for index, node in enumerate(graph.nodes):
        if index not in done:
            for operand in set(node.operand_values()):
                readers.setdefault(operand, []).append(node)
    constants: list[GraphInput] = []
    owners: dict[int, int] = {}
    stored_roots = {id(_root(array)) for array in stored.values()}
    for value in needed:
        array = environment[value]
        transposed_matrix = (
            array.ndim == 2 and array.dtype == np.float32 and array.T.flags.c_contiguous
        )
        if (
            not array.flags.c_contiguous
            and not transposed_matrix
            and 0 not in array.strides
            and (
                array.nbytes <= SMALL_BYTES
                or (array.nbytes <= REUSED_BYTES and _uses(value, readers) > 1)
            )
        ):
            array = np.ascontiguousarray(array)
        array = array.view()
        array.flags.writeable = False
        constants.append(GraphInput(value, InputKind.CONSTANT, None, array))
        root = _root(array)
        if id(root) not in stored_roots:
            owners[id(root)] = root.nbytes
    nodes = [node for index, node in enumerate(graph.nodes) if index not in done]
    folded_graph = graph.with_body([*graph.inputs, *constants], nodes, list(graph.outputs))
    return folded_graph, FoldedConstants(len(done), sum(owners.values()))


def _uses(value: Value, readers: dict[Value, list[Node]]) -> int:
    """How many nodes read `value`'s elements, through views that hold them whole (a read of
    such a view is a read of `value`)."""
    count = 0
    for reader in readers.get(value, ()):
        definition = lookup(reader.op)
        through_view = definition is not None and definition.element_view
        count += (
            _uses(reader.results[0], readers) if through_view and len(reader.results) == 1 else 1
        )
    return count


def _run(node: Node, definition: PrimDef, environment: dict[Value, Any]) -> tuple[Any, ...]:
    operands = [_resolve(operand, environment) for operand in node.args]
    arguments = definition.bind(operands, node.kwargs)
    assert definition.kernel is not None  # _foldable chose only prims with kernels
    result = definition.kernel_for(node.args)(*arguments)
    results = (result,) if len(node.results) == 1 else tuple(result)
    return tuple(np.asarray(r) for r in results)


def _resolve(operand: Any, environment: dict[Value, Any]) -> Any:
    if type(operand) is Value:
        return environment[operand] if operand in environment else _placeholder(operand)
    if type(operand) is tuple:
        return tuple(_resolve(item, environment) for item in operand)
    return operand


def _placeholder(value: Value) -> np.ndarray:
    """A meta-only operand (full_like's): an array of its shape and dtype that is never read."""
    meta = value.meta
    assert type(meta) is TensorMeta
    return np.broadcast_to(np.zeros((), meta.dtype.numpy), meta.shape)


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array
