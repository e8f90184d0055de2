"""Per-channel scales folded into a product's constant weights at plan time.

In an eval-mode CNN every convolution is followed by a batch norm whose scale and shift are
constants: the graph computes `sum(mul(x, W)) · s + t`, s and t broadcast along the output
channels. Folded constants (folding.py) make s, t and W stored data the plan may rely on, so
the plan can multiply W by s once, along W's output axis, and drop the multiply: the product's
epilogue (contraction_fusion.py) keeps one pass over the result (the add) instead of two. A
per-channel constant added between the product and the multiply (a convolution's bias, b) is
scaled too: (y + b) · s is y·s + b·s; and when the multiply is followed by an add of a constant
of b's shape (the batch norm's shift t), the two constants become one, y·s + (b·s + t), and
that add goes too.

The rule, on the graph after folding: a `prims.sum` of a `prims.mul` whose result, through
reshapes and adds of constants, only one reader each, is multiplied by a constant (a number, a
stored tensor, or a broadcast of one) that varies only along output dims of the product which
one of the mul's operands, a constant, spans (its output channels, or columns). The
multiplier, the constant operand and the constants added are stored data the caller does not
override (a plan is built per set of overridden inputs): a scale the caller passes is never
folded, and the plan then multiplies by the value passed.

Not the same bits: the product sums w·s, not (Σ w·x)·s; tests compare with torch at its
tolerances. Special values keep torch's results: the fold is made only when every scale is
finite and nonzero and every scaled weight (and scaled bias) stays finite and nonzero where the
unscaled one was, so each term of the sum has the original term's sign scaled by the channel's,
and an inf or NaN in the input gives the inf or NaN that the multiply after the sum gave. (A
zero scale is left to the multiply: x·(w·0) is ±0 in a sign the sum decides, where y·0 has y's.)
The original weight, and a broadcast of it that CSE shared with another product, stay for the
other readers; the scaled weight is a new constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from prims.common import number_as
from prims.registry import lookup

from ..ir.dtypes import DType
from ..ir.graph import Graph, GraphInput, GraphOutput, InputKind, Node
from ..ir.values import TensorMeta, Value, map_values

_REAL_FLOATS = frozenset({DType.float32, DType.float64})

# The scaled weight is a second copy, kept as long as the plan, where the multiply it saves is
# one pass over the product's result per call: a weight is scaled only when it has no more
# elements than that result. ResNet-50's deep 3x3 weights (512 channels: 9.4 MB against
# results of 0.4 MB at batch 4) would have added 89 MB to its plan; its early layers, whose
# results are 10-80x their weights, hold most of the time the fold saves.


def fold_output_scales(graph: Graph, overridden: frozenset[str] = frozenset()) -> tuple[Graph, int]:
    """The graph with every product's constant per-channel multiplier folded into its constant
    operand (see the module doc), and how many bytes the plan's constants grow by (the same
    graph and 0 when nothing folds)."""
    rewrite = _Rewrite(graph, overridden)
    for index, node in enumerate(graph.nodes):
        if node.op == "prims.sum":
            rewrite.fold(index)
    return rewrite.graph()


class _Rewrite:
    """The folds found so far, applied to the graph by `graph()`."""

    def __init__(self, graph: Graph, overridden: frozenset[str]) -> None:
        self.source = graph
        self.constants: dict[Value, np.ndarray] = {
            gi.value: gi.data
            for gi in graph.inputs
            if gi.data is not None and gi.name not in overridden and gi.value.is_tensor
        }
        self.producer: dict[Value, int] = {}
        self.readers: dict[Value, list[int]] = {}
        for index, node in enumerate(graph.nodes):
            for result in node.results:
                self.producer[result] = index
            for value in set(node.operand_values()):
                self.readers.setdefault(value, []).append(index)
        self.outputs = {graph_output.value for graph_output in graph.outputs}
        self.names = {gi.name for gi in graph.inputs} | {
            r.name for node in graph.nodes for r in node.results
        }
        self.new_inputs: list[GraphInput] = []
        self.new_nodes: dict[int, Node] = {}  # index -> the node replacing it
        self.dropped: set[int] = set()
        self.inserted: dict[int, Node] = {}  # index -> a node made right before it
        self.replaced: dict[Value, Value] = {}
        self.scaled_sources: set[Value] = set()
        self.new_bytes = 0

    def fold(self, sum_index: int) -> None:
        node = self.source.nodes[sum_index]
        product = self._product(node)
        if product is None:
            return
        mul_index, joint, out_labels = product
        chain = self._chain(node.results[0])
        if chain is None:
            return
        scale_index, scale_position = chain
        scale_node = self.source.nodes[scale_index]
        scaled = scale_node.args[1 - scale_position]
        assert type(scaled) is Value  # the chain's value
        scale = self._compact(scale_node.args[scale_position], scale_node.results[0])
        if scale is None or not _safe_scale(scale):
            return
        # the scale at each add's shape, and at the sum's
        add_scales: list[tuple[int, np.ndarray]] = []
        at = scale
        for position in self._path(node.results[0], scaled):
            step = self.source.nodes[position]
            mapped = _regroup(at, step.results[0].shape, self._input_of(step).shape)
            if mapped is None:
                return
            at = mapped
            if step.op == "prims.add":
                add_scales.append((position, at))
        shift = self._shift_after(scale_node, scaled, add_scales)
        made = len(self.new_inputs)
        weight = self._weight(mul_index, joint, out_labels, at)
        add_rewrites = [
            self._scaled_add(position, s, shift[1] if shift and i == 0 else None)
            for i, (position, s) in enumerate(add_scales)
        ]
        if weight is None or any(r is None for r in add_rewrites):
            self._forget(made)
            self.inserted.pop(mul_index, None)
            return
        weight_index, weight_node = weight
        self.new_nodes[weight_index] = weight_node
        for rewrite in add_rewrites:
            assert rewrite is not None
            self.new_nodes[rewrite[0]] = rewrite[1]
        self._drop(scale_index, scale_node.args[scale_position], scaled)
        if shift is not None:  # added to the scaled bias
            shift_node = self.source.nodes[shift[0]]
            other = next(a for a in shift_node.args if a is not scale_node.results[0])
            self._drop(shift[0], other, scaled)

    def _drop(self, index: int, constant: Any, kept: Value) -> None:
        """Drop node `index` (its result is now `kept`'s) and the broadcast of its `constant`
        operand, if nothing else reads that."""
        self.dropped.add(index)
        self.replaced[self.source.nodes[index].results[0]] = kept
        broadcast = self._producer_node(constant)
        if broadcast is not None and self._only_reader(constant, index):
            self.dropped.add(broadcast[0])

    def _shift_after(
        self, scale_node: Node, scaled: Value, add_scales: list[tuple[int, np.ndarray]]
    ) -> tuple[int, np.ndarray] | None:
        """(index, constant) of an add of a constant right after the multiply, when the value
        multiplied is itself the result of an add of a constant of the same shape (a bias: the
        two constants become one, `b · s + t`, and the second add goes)."""
        if not add_scales or self.producer.get(scaled) != add_scales[0][0]:
            return None
        result = scale_node.results[0]
        readers = self.readers.get(result, [])
        if result in self.outputs or len(readers) != 1:
            return None
        node = self.source.nodes[readers[0]]
        if node.op != "prims.add" or len(node.args) != 2 or node.args.count(result) != 1:
            return None
        if node.results[0].meta != result.meta:
            return None
        other = next(a for a in node.args if a is not result)
        shift = self._compact(other, node.results[0])
        bias_node = self.source.nodes[add_scales[0][0]]
        bias = next(
            (
                c
                for a in bias_node.args
                if (c := self._compact(a, bias_node.results[0])) is not None
            ),
            None,
        )
        if shift is None or bias is None or shift.shape != bias.shape:
            return None
        return readers[0], shift

    # -- the pattern --------------------------------------------------------------------------

    def _product(self, node: Node) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
        """(the mul's index, the joint shape, the joint dims the sum keeps) of a contraction."""
        if len(node.args) != 1 or type(node.args[0]) is not Value:
            return None
        found = self._producer_node(node.args[0])
        if found is None or found[1].op != "prims.mul":
            return None
        mul_index, mul = found
        product = mul.results[0]
        if product.dtype not in _REAL_FLOATS or node.kwargs.get("output_dtype") not in (
            None,
            product.dtype,
        ):
            return None
        if not self._only_reader(product, self.producer[node.results[0]]):
            return None
        joint = tuple(product.shape)
        if not all(type(size) is int for size in joint):
            return None
        dims = node.kwargs.get("dims")
        reduced = set(range(len(joint))) if dims is None else set(dims)
        out_labels = tuple(d for d in range(len(joint)) if d not in reduced)
        return mul_index, joint, out_labels

    def _chain(self, value: Value) -> tuple[int, int] | None:
        """(the multiply's index, the position of its multiplier) after the sum, through
        reshapes and adds of constants, each the only reader of the value before it."""
        while True:
            readers = self.readers.get(value, [])
            if value in self.outputs or len(readers) != 1:
                return None
            index = readers[0]
            node = self.source.nodes[index]
            definition = lookup(node.op)
            if definition is not None and definition.reshape:
                value = node.results[0]
                continue
            if node.op not in ("prims.add", "prims.mul") or len(node.args) != 2:
                return None
            if node.args.count(value) != 1 or node.results[0].meta != value.meta:
                return None
            other = 1 - node.args.index(value)
            if self._compact(node.args[other], node.results[0]) is None:
                return None
            if node.op == "prims.mul":
                return index, other
            value = node.results[0]

    def _path(self, start: Value, end: Value) -> list[int]:
        """The nodes from the one reading `start` to the one making `end`, last first."""
        path: list[int] = []
        value = end
        while value is not start:
            index = self.producer[value]
            path.append(index)
            value = self._input_of(self.source.nodes[index])
        return path

    def _input_of(self, node: Node) -> Value:
        """The chain's value a chain node reads (a reshape's operand, an add's non-constant)."""
        for arg in node.args:
            if type(arg) is Value and self._compact(arg, node.results[0]) is None:
                return arg
        raise AssertionError(f"{node.op} reads no chain value")

    def _compact(self, operand: Any, result: Value) -> np.ndarray | None:
        """A constant operand of an elementwise node as an array of the result's rank that
        broadcasts to its shape (sizes 1 where it repeats), or None."""
        ndim = len(result.shape)
        if type(operand) in (int, float):
            return number_as(operand, result.dtype).reshape((1,) * ndim)
        if type(operand) is not Value or not operand.is_tensor or operand.dtype is not result.dtype:
            return None
        if operand in self.constants:
            data = self.constants[operand]
            if data.shape != tuple(result.shape):
                return None
            return data[tuple(slice(0, 1) if s == 0 else slice(None) for s in data.strides)]
        found = self._producer_node(operand)
        if found is None or found[1].op != "prims.broadcast_in_dim":
            return None
        source = found[1].args[0]
        if type(source) is not Value or source not in self.constants:
            return None
        shape = [1] * ndim
        for size, dim in zip(source.shape, found[1].kwargs["broadcast_dimensions"]):
            shape[dim] = size
        return self.constants[source].reshape(shape)

    def _weight(
        self,
        mul_index: int,
        joint: tuple[int, ...],
        out_labels: tuple[int, ...],
        scale: np.ndarray,
    ) -> tuple[int, Node] | None:
        """(index, node) replacing the node that gives the mul its constant operand, that
        operand scaled by `scale` (in the sum's shape) along the dims it spans."""
        placed = [1] * len(joint)
        for size, label in zip(scale.shape, out_labels):
            placed[label] = size
        varying = {d for d, size in enumerate(placed) if size != 1}
        joint_scale = scale.reshape(placed)
        mul = self.source.nodes[mul_index]
        # (index of the node reading the constant, the constant, the joint dims of its dims)
        candidates: list[tuple[int, Value, tuple[int, ...]]] = []
        for operand in mul.args:
            if type(operand) is not Value:
                continue
            if operand in self.constants:
                candidates.append((mul_index, operand, tuple(range(len(joint)))))
                continue
            found = self._producer_node(operand)
            if found is None or found[1].op != "prims.broadcast_in_dim":
                continue
            source = found[1].args[0]
            if type(source) is Value and source in self.constants:
                dims = tuple(found[1].kwargs["broadcast_dimensions"])
                candidates.append((found[0], source, dims))
        spanning = [
            (self.constants[source].size, index, source, dims)
            for index, source, dims in candidates
            if source.dtype is mul.results[0].dtype
            and varying
            <= {d for d, size in zip(dims, source.shape) if size == joint[d] and size != 1}
        ]
        if not spanning:
            return None
        _, index, source, dims = min(spanning, key=lambda c: c[0])  # the fewest to scale
        result_elements = 1
        for label in out_labels:
            result_elements *= joint[label]
        if self.constants[source].size > result_elements:
            return None  # a copy larger than the pass it saves (above)
        scaled = _scaled(self.constants[source], joint_scale.reshape([placed[d] for d in dims]))
        if scaled is None:
            return None
        new_source = self._constant(source, scaled)
        node = self.source.nodes[index]
        args = tuple(new_source if a is source else a for a in node.args)
        if index == mul_index or self._only_reader(node.results[0], mul_index):
            return index, Node(node.op, args, node.kwargs, node.results, node.provenance)
        # The broadcast is shared (CSE merged two products' broadcasts of one weight): the other
        # products keep it, this one reads a broadcast of its own, made right before it.
        value = Value(self._name(node.results[0].name), node.results[0].meta)
        self.inserted[mul_index] = Node(node.op, args, node.kwargs, (value,), node.provenance)
        mul_args = tuple(value if a is node.results[0] else a for a in mul.args)
        return mul_index, Node(mul.op, mul_args, mul.kwargs, mul.results, mul.provenance)

    def _scaled_add(
        self, index: int, scale: np.ndarray, shift: np.ndarray | None = None
    ) -> tuple[int, Node] | None:
        """(index, node) replacing the node that gives add `index` its constant, that constant
        scaled by `scale` (in the add's shape), plus `shift` (of its shape) if given, when the
        constant spans the scale's dims."""
        add = self.source.nodes[index]
        for operand in add.args:
            if type(operand) is not Value or self._compact(operand, add.results[0]) is None:
                continue
            if operand in self.constants:
                source, owner = operand, index
            else:
                found = self._producer_node(operand)
                assert found is not None  # _compact found the broadcast
                if not self._only_reader(operand, index):
                    return None
                source, owner = found[1].args[0], found[0]
            assert type(source) is Value
            compact = self._compact(operand, add.results[0])
            assert compact is not None
            if np.broadcast_shapes(compact.shape, scale.shape) != compact.shape:
                return None  # the scale varies where the constant repeats
            data = self.constants[source]
            if data.size != compact.size:
                return None  # a constant with repeats: its scaled copy would not be its shape
            scaled = _scaled(compact, scale)
            if scaled is None:
                return None
            if shift is not None:
                with np.errstate(all="ignore"):
                    shifted = scaled + shift
                if not np.all(np.isfinite(shifted) | ~(np.isfinite(scaled) & np.isfinite(shift))):
                    return None  # the sum overflows where the two adds did not
                scaled = shifted
            new_source = self._constant(source, np.ascontiguousarray(scaled).reshape(data.shape))
            node = self.source.nodes[owner]
            args = tuple(new_source if a is source else a for a in node.args)
            return owner, Node(node.op, args, node.kwargs, node.results, node.provenance)
        return None  # a number added: scaled, it would vary along the channels

    # -- helpers ------------------------------------------------------------------------------

    def _producer_node(self, value: Any) -> tuple[int, Node] | None:
        if type(value) is not Value or value not in self.producer:
            return None
        index = self.producer[value]
        if index in self.new_nodes or index in self.dropped:
            return None  # a node another fold rewrote
        return index, self.source.nodes[index]

    def _only_reader(self, value: Value, index: int) -> bool:
        return value not in self.outputs and self.readers.get(value, []) == [index]

    def _name(self, like: str) -> str:
        """A new value name from `like`, unique in the graph."""
        name, suffix = f"{like}_scaled", 1
        while name in self.names:
            suffix += 1
            name = f"{like}_scaled{suffix}"
        self.names.add(name)
        return name

    def _forget(self, made: int) -> None:
        """Drop the constants made after the first `made` (a fold that did not complete)."""
        for graph_input in self.new_inputs[made:]:
            assert graph_input.data is not None
            self.new_bytes -= graph_input.data.nbytes
        del self.new_inputs[made:]

    def _constant(self, like: Value, data: np.ndarray) -> Value:
        """A new constant input holding `data` (read-only), of `like`'s shape and dtype."""
        name = self._name(like.name)
        self.scaled_sources.add(like)
        strides = tuple(s // data.itemsize for s in data.strides)
        value = Value(name, TensorMeta(tuple(data.shape), like.dtype, strides))
        data.flags.writeable = False
        self.new_inputs.append(GraphInput(value, InputKind.CONSTANT, None, data))
        self.new_bytes += data.nbytes
        return value

    def graph(self) -> tuple[Graph, int]:
        if not self.dropped:
            return self.source, 0
        replaced = self.replaced

        def remap(operand: Any) -> Any:
            return map_values(operand, lambda v: replaced.get(v, v))

        nodes: list[Node] = []
        for index, node in enumerate(self.source.nodes):
            if index in self.dropped:
                continue
            if index in self.inserted:
                nodes.append(self.inserted[index])
            node = self.new_nodes.get(index, node)
            if any(value in replaced for value in node.operand_values()):
                args = tuple(remap(a) for a in node.args)
                kwargs = {name: remap(a) for name, a in node.kwargs.items()}
                node = Node(node.op, args, kwargs, node.results, node.provenance)
            nodes.append(node)
        read = {value for node in nodes for value in node.operand_values()} | self.outputs
        # A folded constant (no target) that only the folded products read goes, and with it
        # the memory it owns when no other input views that memory.
        unread = {
            gi.value
            for gi in self.source.inputs
            if gi.value in self.scaled_sources
            and gi.value not in read
            and gi.kind is InputKind.CONSTANT
            and gi.target is None
        }
        inputs = [gi for gi in self.source.inputs if gi.value not in unread]
        kept_roots = {id(_root(gi.data)) for gi in inputs if gi.data is not None}
        freed = {
            id(root): root.nbytes
            for gi in self.source.inputs
            if gi.value in unread and gi.data is not None
            for root in (_root(gi.data),)
            if id(root) not in kept_roots
        }
        outputs = [
            GraphOutput(replaced.get(o.value, o.value), o.kind, o.target)
            for o in self.source.outputs
        ]
        graph = self.source.with_body([*inputs, *self.new_inputs], nodes, outputs, replaced)
        return graph, self.new_bytes - sum(freed.values())


def _root(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _safe_scale(scale: np.ndarray) -> bool:
    """Every scale finite and nonzero (see the module doc)."""
    return bool(np.all(np.isfinite(scale)) and np.all(scale != 0))


def _scaled(data: np.ndarray, scale: np.ndarray) -> np.ndarray | None:
    """data · scale in data's layout, or None when a finite element became infinite or a
    nonzero one zero (an overflow or underflow the unscaled product did not have)."""
    scaled = np.empty_like(data)  # order "K": data's strides, so the product plans alike
    with np.errstate(all="ignore"):
        np.multiply(data, scale, out=scaled)
    finite = np.isfinite(data)
    if np.any(finite & ~np.isfinite(scaled)) or np.any((data != 0) & (scaled == 0)):
        return None
    return scaled


def _regroup(
    compact: np.ndarray, shape: tuple[int, ...], source_shape: tuple[int, ...]
) -> np.ndarray | None:
    """`compact` (broadcasting to `shape`) as an array broadcasting to `source_shape`, of which
    `shape` is a row-major reshape; None when it varies along only part of a group of dims the
    reshape merges or splits."""
    if 0 in shape or any(type(size) is not int for size in (*shape, *source_shape)):
        return None
    targets = [k for k, size in enumerate(shape) if size != 1]
    sources = [k for k, size in enumerate(source_shape) if size != 1]
    result = [1] * len(source_shape)
    i = j = 0
    while i < len(targets) and j < len(sources):
        group, source_group = [targets[i]], [sources[j]]
        a, b = shape[targets[i]], source_shape[sources[j]]
        i, j = i + 1, j + 1
        while a != b:
            if a < b and i < len(targets):
                a *= shape[targets[i]]
                group.append(targets[i])
                i += 1
            elif b < a and j < len(sources):
                b *= source_shape[sources[j]]
                source_group.append(sources[j])
                j += 1
            else:
                return None
        if all(compact.shape[k] == shape[k] for k in group):
            for k in source_group:
                result[k] = source_shape[k]
        elif any(compact.shape[k] != 1 for k in group):
            return None
    if i != len(targets) or j != len(sources):
        return None
    return np.ascontiguousarray(compact).reshape(result)
