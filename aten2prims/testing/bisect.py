"""Where does a lowering diverge from torch? `bisect(graph, inputs)` runs an aten graph in torch
node by node and checks each aten node's prims expansion on the very inputs torch used for that
node, so an error is pinned on one decomposition rule instead of surfacing at the model's output.

For every aten node: torch runs `torch.ops.aten.<op>.<overload>`; the node alone becomes a
one-node graph (its operands as inputs, as the harness builds a sample's graph), is lowered
(with `rules`, a `RuleRegistry`, when given) and executed on NumPy; each result is compared with
torch's under the tolerance rule (`compare`, with the float64 reference where torch's own noise
decides). torch's values, not ours, flow on to the next node, so one wrong rule is reported once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..errors import Error
from ..executor import execute
from ..frontends.torch_interop import (
    to_numpy,
    to_torch,
    to_torch_operand,
    torch_overload,
)
from ..ir.graph import Graph, GraphInput, GraphOutput, Node
from ..ir.printer import format_graph
from ..ir.values import Value, map_values
from ..passes.lower import lower
from .record import AtenCall
from .runner import judge_outputs


@attrs.frozen
class NodeCheck:
    """The verdict on one aten node's expansion."""

    op: str
    node: str  # the name of the node's first result
    source: str | None  # the user's source location, from the node's provenance
    ok: bool
    max_abs_error: float
    message: str
    expansion: Graph | None = attrs.field(default=None, repr=False)

    @property
    def location(self) -> str:
        return f"%{self.node} ({self.op})" + (f' at "{self.source}"' if self.source else "")


@attrs.frozen
class BisectReport:
    """Every aten node's verdict in graph order; `first_divergence` is what to look at first."""

    graph: str
    checks: tuple[NodeCheck, ...]

    @property
    def first_divergence(self) -> NodeCheck | None:
        return next((check for check in self.checks if not check.ok), None)

    @property
    def ok(self) -> bool:
        return self.first_divergence is None

    def largest_errors(self) -> dict[str, float]:
        """Per aten op, the largest absolute error any of its nodes showed."""
        errors: dict[str, float] = {}
        for check in self.checks:
            errors[check.op] = max(errors.get(check.op, 0.0), check.max_abs_error)
        return errors

    def __str__(self) -> str:
        lines = [f"bisect of graph {self.graph}: {len(self.checks)} aten nodes checked"]
        first = self.first_divergence
        if first is None:
            lines.append("no divergence: every node's prims expansion matches torch")
        else:
            failing = sum(not check.ok for check in self.checks)
            lines.append(f"first divergence: {first.location}")
            lines.append(f"  max abs error {first.max_abs_error:.3g}; {first.message}")
            if failing > 1:
                lines.append(f"  ({failing} diverging nodes in all)")
            if first.expansion is not None:
                lines.append("  prims expansion:")
                lines.extend("    " + line for line in format_graph(first.expansion).splitlines())
        lines.append("largest error per op:")
        counts: dict[str, list[bool]] = {}
        for check in self.checks:
            counts.setdefault(check.op, []).append(check.ok)
        width = max((len(op) for op in counts), default=0)
        for op, error in sorted(self.largest_errors().items()):
            verdicts = counts[op]
            bad = verdicts.count(False)
            noun = "node" if len(verdicts) == 1 else "nodes"
            status = (
                f"{bad} of {len(verdicts)} {noun} diverge" if bad else f"{len(verdicts)} {noun} ok"
            )
            lines.append(f"  {op:<{width}}  {error:.3g}  ({status})")
        return "\n".join(lines)


def _one_node_graph(node: Node) -> Graph:
    """The node alone, reading its operands as graph inputs (an undefined operand as the None
    it stands for: a graph input is never undefined)."""

    def defined(operand: Any) -> Any:
        return map_values(operand, lambda value: None if value.is_undefined else value)

    node = Node(
        node.op,
        tuple(defined(a) for a in node.args),
        {name: defined(a) for name, a in node.kwargs.items()},
        node.results,
        node.provenance,
    )
    operands: dict[Value, None] = dict.fromkeys(node.operand_values())
    return Graph(
        f"bisect_{node.results[0].name if node.results else 'node'}",
        [GraphInput(value) for value in operands],
        [node],
        [GraphOutput(result) for result in node.results if not result.is_undefined],
    )


def bisect(
    graph: Graph,
    inputs: Mapping[str, Any] | Sequence[Any] = (),
    rules: Any = None,
    *,
    seed: int = 0,
) -> BisectReport:
    """Check every aten node's expansion of `graph` against torch (see the module docstring).
    `inputs` maps user input names to arrays or lists the user inputs in order; inputs with
    stored data (parameters, buffers, constants) are filled in."""
    try:
        import torch
    except ImportError:
        raise Error("bisect runs the graph in torch: it needs torch installed") from None

    if not isinstance(inputs, Mapping):
        inputs = {i.name: array for i, array in zip(graph.user_inputs, inputs)}
    env: dict[Value, Any] = {}
    for graph_input in graph.inputs:
        array = inputs.get(graph_input.name, graph_input.data)
        if array is None:
            raise Error(f"bisect: no value for input %{graph_input.name} of graph {graph.name}")
        env[graph_input.value] = (
            to_torch(np.asarray(array)) if graph_input.value.is_tensor else array
        )

    def operand(x: Any) -> Any:
        return to_torch_operand(x, env.__getitem__)

    checks: list[NodeCheck] = []
    for node in graph.nodes:
        function = torch_overload(node.op)
        args = [operand(a) for a in node.args]
        kwargs = {key: operand(v) for key, v in node.kwargs.items()}
        # Clone the tensors the op reads: our expansion must see exactly what torch saw.
        seen = {
            value: to_numpy(env[value]) if isinstance(env[value], torch.Tensor) else env[value]
            for value in node.operand_values()
            if not value.is_undefined
        }
        result = function(*args, **kwargs)
        results = list(result) if isinstance(result, list | tuple) else [result]
        env.update(zip(node.results, results))
        if node.namespace == "aten":
            call = AtenCall(node.op, tuple(args), kwargs)
            checks.append(_check(node, call, seen, results, rules, seed))
    return BisectReport(graph.name, tuple(checks))


def _check(
    node: Node, call: AtenCall, seen: dict[Value, Any], results: list[Any], rules: Any, seed: int
) -> NodeCheck:
    import torch

    source = node.provenance.source
    name = node.results[0].name if node.results else node.op

    def verdict(ok: bool, error: float, message: str, expansion: Graph | None = None) -> NodeCheck:
        return NodeCheck(node.op, name, source, ok, error, message, expansion)

    try:
        expansion = lower(_one_node_graph(node), registry=rules)
        ours = execute(expansion, {value.name: array for value, array in seen.items()}, seed=seed)
    except Error as error:
        return verdict(False, float("inf"), f"{type(error).__name__}: {error}")
    # Our outputs are the node's defined results. torch's kernel returns None for a result its
    # output_mask does not request, where the graph (torch's meta) may still declare one
    # (native_batch_norm_backward's grad_input), and the reverse (convolution_backward's
    # grad_weight beside a lone grad_bias): the results both computed are judged, each with its
    # place among torch's defined results (which the float64 reference lists).
    defined = iter(ours)
    judged: list[tuple[Any, Any, int]] = []
    rank = 0
    for node_result, result in zip(node.results, results):
        our = None if node_result.is_undefined else next(defined)
        if result is None:
            continue
        if not node_result.is_undefined:
            judged.append(
                (our, to_numpy(result) if isinstance(result, torch.Tensor) else result, rank)
            )
        rank += 1
    comparisons = judge_outputs(
        call, [j[0] for j in judged], [j[1] for j in judged], [j[2] for j in judged]
    )
    worst = max((comparison.max_abs_error for comparison in comparisons), default=0.0)
    messages = [comparison.message for comparison in comparisons if not comparison]
    return verdict(not messages, worst, "; ".join(messages) or "close", expansion)
