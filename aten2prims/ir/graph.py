"""Graph and Node: an ordered list of SSA nodes over named, role-tagged inputs.

The ordered node list is the source of truth; `Graph.to_networkx()` gives a view for graph
algorithms. Passes build new graphs rather than rewriting one in place, so an error can never
leave a graph half-rewritten.

The text form (`str(graph)`, `repr(node)`) is written by printer.py, which depends on this
module: it installs its formatters here when the package is imported, so this module never
imports it.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import networkx as nx
import numpy as np

from .symbolic import Symbol, SymBool
from .values import Operand, Value, iter_values, literal_equal


@attrs.frozen(slots=True)
class Provenance:
    """Where a node came from: the op and result name of the node of the *input* graph it was
    lowered from (None on nodes of the input graph itself), and the user's source location when
    the frontend gave one."""

    origin_op: str | None = None
    origin: str | None = None
    source: str | None = None


NO_PROVENANCE = Provenance()


@attrs.define(slots=True)
class _TextForm:
    """The printer's formatters (set by `install_text_form`)."""

    node: Callable[[Node], str] | None = None
    graph: Callable[..., str] | None = None


_text_form = _TextForm()


def install_text_form(format_node: Callable[[Node], str], format_graph: Callable[..., str]) -> None:
    """Make `repr(node)`, `str(graph)` and `graph.format()` use the printer's text form."""
    _text_form.node = format_node
    _text_form.graph = format_graph


def _formatter(function: Callable[..., str] | None) -> Callable[..., str]:
    if function is None:
        raise RuntimeError("the IR's text form is not installed: import aten2prims.ir")
    return function


@attrs.define(eq=False, slots=True, repr=False)
class Node:
    """One operation. `args` are positional operands, `kwargs` named ones (for prims: the
    non-tensor attributes, all of them, in schema order)."""

    op: str
    args: tuple[Operand, ...]
    kwargs: dict[str, Operand]
    results: tuple[Value, ...]
    provenance: Provenance = NO_PROVENANCE

    @property
    def result(self) -> Value:
        """The single result of a one-result node."""
        if len(self.results) != 1:
            raise ValueError(f"{self.op} has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def namespace(self) -> str:
        return self.op.split(".", 1)[0]

    def operand_values(self) -> Iterator[Value]:
        """Every Value this node reads, in operand order (with repeats)."""
        for arg in (*self.args, *self.kwargs.values()):
            kind = type(arg)
            if kind is Value:
                yield arg
            elif kind is tuple:
                yield from iter_values(arg)

    def subgraphs(self) -> Iterator[Graph]:
        """The nested graphs among the operands (a higher-order op's branches or bodies)."""
        for arg in (*self.args, *self.kwargs.values()):
            if type(arg) is Graph:
                yield arg

    def __repr__(self) -> str:
        return _formatter(_text_form.node)(self)


class InputKind(enum.Enum):
    USER_INPUT = "user_input"
    PARAMETER = "parameter"
    BUFFER = "buffer"
    CONSTANT = "constant"


class OutputKind(enum.Enum):
    USER_OUTPUT = "user_output"
    BUFFER_MUTATION = "buffer_mutation"
    PARAMETER_MUTATION = "parameter_mutation"
    USER_INPUT_MUTATION = "user_input_mutation"
    LOSS_OUTPUT = "loss_output"
    GRADIENT_TO_PARAMETER = "gradient_to_parameter"
    GRADIENT_TO_USER_INPUT = "gradient_to_user_input"

    @property
    def is_user(self) -> bool:
        """What the caller asked for, as torch's `ExportGraphSignature.user_outputs` counts it:
        user outputs and a training step's loss (the rest is state: mutations, gradients)."""
        return self is OutputKind.USER_OUTPUT or self is OutputKind.LOSS_OUTPUT


@attrs.define(eq=False, slots=True)
class GraphInput:
    """A named input. Parameters, buffers and constants carry their fully qualified name in the
    model (`target`) and, when loaded from a file, their data."""

    value: Value
    kind: InputKind = InputKind.USER_INPUT
    target: str | None = None
    data: np.ndarray | None = None

    @property
    def name(self) -> str:
        return self.value.name


@attrs.define(eq=False, slots=True)
class GraphOutput:
    """A graph result; mutations of buffers or inputs name their target."""

    value: Value
    kind: OutputKind = OutputKind.USER_OUTPUT
    target: str | None = None


@attrs.define(eq=False, slots=True, repr=False)
class Graph:
    name: str = "graph"
    inputs: list[GraphInput] = attrs.Factory(list)
    nodes: list[Node] = attrs.Factory(list)
    outputs: list[GraphOutput] = attrs.Factory(list)
    # Dynamic shapes: the symbols sizes may use (range, example, backed or not), and the
    # conditions on them the executor checks before running (a lowering's size decisions that
    # the ranges did not settle). Both empty for a static graph.
    symbols: dict[str, Symbol] = attrs.Factory(dict)
    checks: list[SymBool] = attrs.Factory(list)

    @property
    def is_dynamic(self) -> bool:
        return bool(self.symbols)

    def with_body(
        self,
        inputs: list[GraphInput],
        nodes: list[Node],
        outputs: list[GraphOutput],
        replaced: Mapping[Value, Value] | None = None,
    ) -> Graph:
        """A graph of the same name, symbols and checks over other inputs, nodes and outputs.
        `replaced` maps values of this graph to the values now computing them: a symbol read
        from a replaced value is read from its replacement."""
        symbols = dict(self.symbols)
        if replaced:
            by_name = {old.name: new.name for old, new in replaced.items()}
            symbols = {
                name: attrs.evolve(declared, value=by_name[declared.value])
                if declared.value in by_name
                else declared
                for name, declared in symbols.items()
            }
        return Graph(self.name, inputs, nodes, outputs, symbols, list(self.checks))

    # -- queries ----------------------------------------------------------------------------
    @property
    def user_inputs(self) -> list[GraphInput]:
        return [i for i in self.inputs if i.kind is InputKind.USER_INPUT]

    @property
    def user_outputs(self) -> list[GraphOutput]:
        return [o for o in self.outputs if o.kind.is_user]

    def input(self, name: str) -> GraphInput:
        for graph_input in self.inputs:
            if graph_input.name == name:
                return graph_input
        raise KeyError(f"graph {self.name} has no input %{name}")

    def op_counts(self) -> Counter[str]:
        return Counter(node.op for node in self.nodes)

    def values(self) -> Iterator[Value]:
        """Every value the graph defines: inputs, then node results in order."""
        for graph_input in self.inputs:
            yield graph_input.value
        for node in self.nodes:
            yield from node.results

    def producers(self) -> dict[Value, Node]:
        return {result: node for node in self.nodes for result in node.results}

    def users(self) -> dict[Value, list[Node]]:
        uses: dict[Value, list[Node]] = {v: [] for v in self.values()}
        for node in self.nodes:
            for value in node.operand_values():
                if value in uses and (not uses[value] or uses[value][-1] is not node):
                    uses[value].append(node)
        return uses

    def to_networkx(self) -> nx.MultiDiGraph:
        """A view for graph algorithms: one vertex per input and node, one edge per operand use
        (edge attribute `value` is the Value carried). Vertices are GraphInput and Node objects;
        a vertex "output" collects the graph outputs."""
        view = nx.MultiDiGraph(name=self.name)
        definer: dict[Value, Any] = {}
        for graph_input in self.inputs:
            view.add_node(graph_input, kind="input")
            definer[graph_input.value] = graph_input
        for node in self.nodes:
            view.add_node(node, kind="node")
            for value in node.operand_values():
                if value in definer:
                    view.add_edge(definer[value], node, value=value)
            for result in node.results:
                definer[result] = node
        view.add_node("output", kind="output")
        for graph_output in self.outputs:
            if graph_output.value in definer:
                view.add_edge(definer[graph_output.value], "output", value=graph_output.value)
        return view

    # -- text form ---------------------------------------------------------------------------
    def __str__(self) -> str:
        return _formatter(_text_form.graph)(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs>"

    def format(self, *, nested: bool = False) -> str:
        return _formatter(_text_form.graph)(self, nested=nested)


def graphs_equal(a: Graph, b: Graph, *, compare_data: bool = False) -> bool:
    """Structural equality: same names, metas, ops, operands (literals compared exactly, 1 vs
    1.0 vs True told apart), provenance, input roles and outputs."""
    return graph_difference(a, b, compare_data=compare_data) is None


def graph_difference(a: Graph, b: Graph, *, compare_data: bool = False) -> str | None:
    """None when the graphs are structurally equal, else a sentence naming the first difference."""
    if a.name != b.name:
        return f"names differ: {a.name!r} vs {b.name!r}"
    if a.symbols != b.symbols:
        return f"symbols differ: {list(a.symbols.values())} vs {list(b.symbols.values())}"
    if a.checks != b.checks:
        return f"run-time checks differ: {a.checks} vs {b.checks}"
    if len(a.inputs) != len(b.inputs):
        return f"input counts differ: {len(a.inputs)} vs {len(b.inputs)}"
    for x, y in zip(a.inputs, b.inputs):
        if (x.name, x.value.meta, x.kind, x.target) != (y.name, y.value.meta, y.kind, y.target):
            return f"input %{x.name} differs from %{y.name}"
        if compare_data and not _same_data(x.data, y.data):
            return f"data of input %{x.name} differs"
    if len(a.nodes) != len(b.nodes):
        return f"node counts differ: {len(a.nodes)} vs {len(b.nodes)}"
    for index, (m, n) in enumerate(zip(a.nodes, b.nodes)):
        if m.op != n.op or m.provenance != n.provenance:
            return f"node {index} differs: {m!r} vs {n!r}"
        if [(r.name, r.meta) for r in m.results] != [(r.name, r.meta) for r in n.results]:
            return f"node {index} results differ: {m!r} vs {n!r}"
        if not _operands_equal(m.args, n.args) or list(m.kwargs) != list(n.kwargs):
            return f"node {index} operands differ: {m!r} vs {n!r}"
        if not all(_operands_equal(m.kwargs[k], n.kwargs[k]) for k in m.kwargs):
            return f"node {index} operands differ: {m!r} vs {n!r}"
    if len(a.outputs) != len(b.outputs):
        return f"output counts differ: {len(a.outputs)} vs {len(b.outputs)}"
    for p, q in zip(a.outputs, b.outputs):
        if (p.value.name, p.kind, p.target) != (q.value.name, q.kind, q.target):
            return f"output %{p.value.name} differs from %{q.value.name}"
    return None


def _operands_equal(a: Operand, b: Operand) -> bool:
    if type(a) is Graph or type(b) is Graph:  # a nested graph (a branch or a loop body)
        return type(a) is type(b) and graph_difference(a, b) is None
    if type(a) is Value or type(b) is Value:
        return type(a) is type(b) and a.name == b.name and a.meta == b.meta
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(_operands_equal(x, y) for x, y in zip(a, b))
    return literal_equal(a, b)


def _same_data(x: np.ndarray | None, y: np.ndarray | None) -> bool:
    if x is None or y is None:
        return x is None and y is None
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
