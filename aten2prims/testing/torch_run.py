"""Running a graph with torch, as the oracle for `aten2prims check FILE` (torch imported lazily).

Whatever the file, torch runs the graph *we* read — node by node through `torch.ops`, on our
decoded weights. torch's own archive loader is never used here, since it would deserialize
pickled entries of the archive, and an archive is untrusted input (SECURITY.md)."""

from __future__ import annotations

import contextlib
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
from ..ir.dtypes import DType
from ..ir.graph import Graph
from ..ir.values import Value
from .runner import float64_promotions


def run_with_torch(
    path: str | Path, graph: Graph, inputs: dict[str, Any], *, float64: bool = False
) -> list[Any]:
    """torch's user outputs for the given inputs (by input name); with `float64`, of the graph
    run in float64 (see `interpret`)."""
    try:
        import torch
    except ImportError:
        raise LoadError(
            "checking against torch needs torch installed (or pass --expected OUT.npz)"
        ) from None
    with torch.no_grad():
        return interpret(graph, inputs, float64=float64)


def interpret(graph: Graph, inputs: dict[str, Any], *, float64: bool = False) -> list[Any]:
    """Run every node with torch.ops (aten or prims) and return the user outputs. With
    `float64`, the graph runs as the model would after `.double()` on float64 inputs: every
    floating input and weight is widened to float64 (complex to complex128), and so is every
    floating dtype argument (`_to_copy(x, dtype=torch.float16)`, `full(..., dtype=...)`) — the
    reference deep models are judged against (`model_outputs`). It runs under
    `float64_promotions`, so that an integer operand an op makes floating (int / int, sigmoid
    or an FFT of an int tensor) is computed in float64 too, as by the per-op reference."""
    with float64_promotions() if float64 else contextlib.nullcontext():
        return _interpret(graph, inputs, float64=float64)


def _interpret(graph: Graph, inputs: dict[str, Any], *, float64: bool) -> list[Any]:
    import torch

    def widened(value: Any) -> Any:
        if not float64 or not isinstance(value, torch.Tensor):
            return value
        if value.dtype.is_complex:
            return value.to(torch.complex128)
        return value.to(torch.float64) if value.dtype.is_floating_point else value

    env: dict[Value, Any] = {}
    for graph_input in graph.inputs:
        array = inputs[graph_input.name] if graph_input.name in inputs else graph_input.data
        env[graph_input.value] = widened(
            to_torch(array) if isinstance(array, np.ndarray) else array
        )

    def operand(x: Any) -> Any:
        if float64 and isinstance(x, DType) and (x.is_floating or x.is_complex):
            x = DType.complex128 if x.is_complex else DType.float64
        if isinstance(x, tuple):
            return [operand(item) for item in x]
        return to_torch_operand(x, env.__getitem__)

    for node in graph.nodes:
        result = torch_overload(node.op)(
            *[operand(a) for a in node.args], **{k: operand(v) for k, v in node.kwargs.items()}
        )
        results = list(result) if isinstance(result, list | tuple) else [result]
        env.update(zip(node.results, results))
    outputs = [env[o.value] for o in graph.user_outputs]
    return [to_numpy(o) if isinstance(o, torch.Tensor) else o for o in outputs]
