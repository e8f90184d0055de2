"""The executor's oracle: a graph run node by node, each by its prim's own kernel, with nothing
planned (no passes, folding, fusion, specialization, buffer reuse). Slow and simple; the tests
check that the planned executor and every graph pass give what this gives (bit for bit, except
where a fused contraction sums in BLAS's order)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from prims.registry import lookup

from ..errors import ExecutionError
from ..ir.graph import Graph
from ..ir.values import TensorMeta, Value


def run_reference(
    graph: Graph, inputs: Mapping[str, Any] = {}, *, seed: int | None = None
) -> list[Any]:
    """All outputs of a prims graph (copies), stored input data used where `inputs` gives none."""
    environment: dict[Value, Any] = {}
    for graph_input in graph.inputs:
        if graph_input.name in inputs:
            environment[graph_input.value] = inputs[graph_input.name]
        elif graph_input.data is not None:
            environment[graph_input.value] = graph_input.data
        else:
            raise ExecutionError(f"run_reference: input %{graph_input.name} is missing")
    rng = np.random.default_rng(seed)
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            definition = lookup(node.op)
            if definition is None or definition.kernel is None:
                raise ExecutionError(f"run_reference: {node.op} is not an executable prim")
            operands = [_resolve(operand, environment) for operand in node.args]
            arguments = definition.bind(operands, node.kwargs)
            kernel = definition.kernel_for(node.args)
            result = kernel(*arguments, rng=rng) if definition.random else kernel(*arguments)
            results = (result,) if len(node.results) == 1 else tuple(result)
            for value, item in zip(node.results, results, strict=True):
                environment[value] = np.asarray(item) if type(value.meta) is TensorMeta else item
    return [_copy(environment[o.value]) for o in graph.outputs]


def _resolve(operand: Any, environment: dict[Value, Any]) -> Any:
    if type(operand) is Value:
        return environment[operand]
    if type(operand) is tuple:
        return tuple(_resolve(item, environment) for item in operand)
    return operand


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value
