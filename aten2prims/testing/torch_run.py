"""Running a graph with torch, as the oracle for `aten2prims check FILE` (torch imported lazily).

Whatever the file, torch runs the graph *we* read — node by node through `torch.ops`, on our
decoded weights. torch's own archive loader is never used here, since it would deserialize
pickled entries of the archive, and an archive is untrusted input (SECURITY.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import LoadError
from ..frontends.torch_interop import (
    to_numpy,
    to_torch,
    to_torch_operand,
    torch_overload,
)
from ..ir.graph import Graph
from ..ir.values import Value


def run_with_torch(path: str | Path, graph: Graph, inputs: dict[str, Any]) -> list[Any]:
    """torch's user outputs for the given inputs (by input name)."""
    try:
        import torch
    except ImportError:
        raise LoadError(
            "checking against torch needs torch installed (or pass --expected OUT.npz)"
        ) from None
    with torch.no_grad():
        return interpret(graph, inputs)


def interpret(graph: Graph, inputs: dict[str, Any]) -> list[Any]:
    """Run every node with torch.ops (aten or prims) and return the user outputs."""
    import torch

    env: dict[Value, Any] = {}
    for graph_input in graph.inputs:
        array = inputs[graph_input.name] if graph_input.name in inputs else graph_input.data
        env[graph_input.value] = to_torch(array) if isinstance(array, np.ndarray) else array

    def operand(x: Any) -> Any:
        return to_torch_operand(x, env.__getitem__)

    for node in graph.nodes:
        result = torch_overload(node.op)(
            *[operand(a) for a in node.args], **{k: operand(v) for k, v in node.kwargs.items()}
        )
        results = list(result) if isinstance(result, list | tuple) else [result]
        env.update(zip(node.results, results))
    outputs = [env[o.value] for o in graph.user_outputs]
    return [to_numpy(o) if isinstance(o, torch.Tensor) else o for o in outputs]
