"""`torch.compile(model, backend="aten2prims")`: a dynamo backend lowering to our prims.

dynamo graph → AOT autograd (functionalized, with torch's Core ATen decompositions; a forward and,
when gradients are needed, a backward graph) → `aten2prims.from_fx` → `lower` → execution on NumPy
(`options={"executor": "numpy"}`, the default) or in torch through `to_fx`
(`options={"executor": "torch"}`). Shapes must be static: compile with `dynamic=False`
(the importer refuses symbolic sizes). Registered under the name "aten2prims" through the
`torch_dynamo_backends` entry point (pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..errors import Error
from ..executor import execute
from ..frontends.fx import from_fx
from ..frontends.torch_interop import to_numpy, to_torch
from ..ir.graph import Graph
from ..passes.lower import lower
from .to_fx import to_fx

EXECUTORS = ("numpy", "torch")


@attrs.frozen
class CompiledGraph:
    """One AOT graph (forward or backward) lowered to prims, callable on torch tensors.

    `positions` maps the lowered graph's user outputs back into the AOT graph's output list,
    whose other entries are None (gradients of inputs that need none)."""

    aten: Graph
    lowered: Graph
    output_count: int
    positions: tuple[int, ...]
    executor: str
    module: Any = None  # the to_fx module when executor == "torch"

    def __call__(self, *args: Any) -> list[Any]:
        import torch

        if self.module is not None:
            with torch.no_grad():
                results = list(self.module(*args))
        else:
            arrays = [to_numpy(a) if isinstance(a, torch.Tensor) else a for a in args]
            results = [to_torch(r) for r in execute(self.lowered, arrays)]
        outputs: list[Any] = [None] * self.output_count
        for position, result in zip(self.positions, results):
            outputs[position] = result
        return outputs


def compile_aot_graph(gm: Any, *, executor: str = "numpy", name: str = "graph") -> CompiledGraph:
    """Lower one AOT autograd graph (a GraphModule of Core ATen ops whose output may hold None
    entries) and make it callable on torch tensors."""
    import torch.fx

    if executor not in EXECUTORS:
        raise Error(f"aten2prims backend: executor must be one of {EXECUTORS}, got {executor!r}")
    (output_node,) = [n for n in gm.graph.nodes if n.op == "output"]
    (returned,) = output_node.args
    returned = list(returned) if isinstance(returned, list | tuple) else [returned]
    positions = tuple(i for i, r in enumerate(returned) if r is not None)
    # Work on a copy (AOT autograd's graph stays as it was) that returns only the tensors: the
    # importer refuses None outputs.
    copy = torch.fx.Graph()
    mapping: dict[Any, Any] = {}
    for node in gm.graph.nodes:
        if node.op == "output":
            copy.output(tuple(mapping[returned[i]] for i in positions))
        else:
            mapping[node] = copy.node_copy(node, lambda n: mapping[n])
    gm = torch.fx.GraphModule(gm, copy)
    aten = from_fx(gm, name=name)
    lowered = lower(aten)
    module = to_fx(lowered) if executor == "torch" else None
    return CompiledGraph(aten, lowered, len(returned), positions, executor, module)


def aten2prims_backend(
    gm: Any, example_inputs: Sequence[Any], *, options: dict[str, Any] | None = None
) -> Callable[..., Any]:
    """The dynamo backend: `torch.compile(model, backend=aten2prims_backend, dynamic=False,
    options={"executor": "torch"})`. Every compiled graph is appended to
    `options["graphs"]` when that key holds a list (for inspection)."""
    from torch._decomp import core_aten_decompositions
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    options = dict(options or {})
    executor = options.get("executor", "numpy")
    collected = options.get("graphs")

    def compiler(kind: str) -> Callable[..., Any]:
        def compile_graph(aot_gm: Any, aot_inputs: Sequence[Any]) -> Callable[..., Any]:
            compiled = compile_aot_graph(aot_gm, executor=executor, name=kind)
            if isinstance(collected, list):
                collected.append(compiled)
            # AOT autograd's calling convention: one list of arguments it may free early.
            return make_boxed_func(compiled)

        return compile_graph

    backend = aot_autograd(
        fw_compiler=compiler("forward"),
        bw_compiler=compiler("backward"),
        inference_compiler=compiler("inference"),
        decompositions=core_aten_decompositions(),
    )
    return backend(gm, example_inputs)
