"""Lowering throughput: how many aten nodes per second `aten2prims.lower` expands into prims.

A script, not a test. It builds a synthetic graph of Family E ops — a seeded random mix of
pointwise ops and reductions (sum, mean, amax, var, softmax, log_softmax, cumsum, max.dim,
argmax, any) over a few tensors with transformer-like shapes — and times `aten2prims.lower` on
it (best of several runs; lowering is pure Python, so one core). Every node's result meta comes
from a fixed recipe; when torch is importable each one is checked against torch's meta tensors.

For comparison it times torch's own comparable step on the same program, per aten node:
`make_fx` tracing with torch's refs decomposition table (aten → prims, the same job) and with
the Core ATen table (what `torch.export` runs; Core ATen ops stay, so this is tracing alone).

    .venv/bin/python benchmarks/lowering.py [--nodes 5000] [--runs 5] [--seed 0] [--no-torch] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aten2prims
from aten2prims.ir import Graph, GraphInput, GraphOutput, Node, TensorMeta, Value
from aten2prims.ir.dtypes import DType
from aten2prims.promotion import broadcast_shapes
from decompositions import RULES

INPUTS: dict[str, TensorMeta] = {
    "hidden": TensorMeta((8, 128, 768), DType.float32),
    "hidden_f16": TensorMeta((8, 128, 768), DType.float16),
    "scores": TensorMeta((8, 12, 128, 128), DType.float32),
    "logits": TensorMeta((64, 1000), DType.float32),
    "features_bf16": TensorMeta((32, 256), DType.bfloat16),
}

UNARY = (
    "aten.exp.default",
    "aten.neg.default",
    "aten.tanh.default",
    "aten.relu.default",
    "aten.sigmoid.default",
    "aten.abs.default",
    "aten.rsqrt.default",
)
BINARY = (
    "aten.add.Tensor",
    "aten.mul.Tensor",
    "aten.sub.Tensor",
    "aten.div.Tensor",
    "aten.maximum.default",
)


@attrs.frozen
class Step:
    """One aten node to append: op, arguments (Values and literals), result metas."""

    op: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    metas: tuple[TensorMeta, ...]


# -- the recipe: each generator picks operands from the pool and says what the node produces ----------


def _reduced(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if d in dims else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in dims)


def _pick(rng: random.Random, pool: list[Value]) -> Value:
    # Favour recent values, as a real program consumes what it just computed.
    return pool[-1 - min(int(rng.expovariate(1 / 12)), len(pool) - 1)]


def _dim(rng: random.Random, x: Value) -> int:
    bound = max(x.ndim, 1)  # a 0-dim tensor takes dim 0 or -1
    return rng.randrange(-bound, bound)


def unary(rng: random.Random, pool: list[Value]) -> Step:
    x = _pick(rng, pool)
    return Step(rng.choice(UNARY), (x,), {}, (x.meta,))


def binary(rng: random.Random, pool: list[Value]) -> Step:
    x = _pick(rng, pool)
    partners = [v for v in pool[-64:] if v.dtype is x.dtype and _broadcastable(v.shape, x.shape)]
    other: Any = (
        rng.choice(partners) if partners and rng.random() < 0.8 else rng.choice((0.5, 2.0, 1e-5))
    )
    if not isinstance(other, Value):  # a Python scalar operand, as export records `x * 0.5`
        return Step(rng.choice(BINARY[:4]), (x, other), {}, (x.meta,))
    shape = broadcast_shapes(x.shape, other.shape)
    return Step(rng.choice(BINARY), (x, other), {}, (TensorMeta(shape, x.dtype),))


def _broadcastable(a: Sequence[int], b: Sequence[int]) -> bool:
    try:
        broadcast_shapes(a, b)
    except aten2prims.ShapeError:
        return False
    return True


def reduce_dims(
    op: str, *, with_correction: bool = False
) -> Callable[[random.Random, list[Value]], Step]:
    def make(rng: random.Random, pool: list[Value]) -> Step:
        x = _pick(rng, [v for v in pool if v.ndim > 0] or pool)
        d = _dim(rng, x) % max(x.ndim, 1)
        keepdim = rng.random() < 0.5
        meta = TensorMeta(_reduced(x.shape, (d,) if x.ndim else (), keepdim), x.dtype)
        if with_correction:
            return Step(op, (x, [d]), {"correction": 1, "keepdim": keepdim}, (meta,))
        return Step(op, (x, [d], keepdim), {}, (meta,))

    return make


def along_dim(
    op: str, *, half_to_float: bool | None = None
) -> Callable[[random.Random, list[Value]], Step]:
    """Ops keeping x's shape: softmax-likes and cumsum."""

    def make(rng: random.Random, pool: list[Value]) -> Step:
        x = _pick(rng, pool)
        args = (x, _dim(rng, x)) if half_to_float is None else (x, _dim(rng, x), half_to_float)
        return Step(op, args, {}, (x.meta,))

    return make


def max_dim(rng: random.Random, pool: list[Value]) -> Step:
    x = _pick(rng, [v for v in pool if v.ndim > 0 and all(v.shape)] or pool)
    d = _dim(rng, x) % max(x.ndim, 1)
    keepdim = rng.random() < 0.5
    shape = _reduced(x.shape, (d,) if x.ndim else (), keepdim)
    return Step(
        "aten.max.dim",
        (x, d, keepdim),
        {},
        (TensorMeta(shape, x.dtype), TensorMeta(shape, DType.int64)),
    )


def argmax(rng: random.Random, pool: list[Value]) -> Step:
    x = _pick(rng, [v for v in pool if v.ndim > 0] or pool)
    d = _dim(rng, x) % max(x.ndim, 1)
    return Step(
        "aten.argmax.default",
        (x, d),
        {},
        (TensorMeta(_reduced(x.shape, (d,), False), DType.int64),),
    )


def any_dims(rng: random.Random, pool: list[Value]) -> Step:
    x = _pick(rng, [v for v in pool if v.ndim > 0] or pool)
    d = _dim(rng, x) % max(x.ndim, 1)
    return Step(
        "aten.any.dims", (x, [d]), {}, (TensorMeta(_reduced(x.shape, (d,), False), DType.bool),)
    )


GENERATORS: list[tuple[float, Callable[[random.Random, list[Value]], Step]]] = [
    (18, unary),
    (30, binary),
    (8, reduce_dims("aten.sum.dim_IntList")),
    (8, reduce_dims("aten.mean.dim")),
    (5, reduce_dims("aten.amax.default")),
    (4, reduce_dims("aten.var.correction", with_correction=True)),
    (6, along_dim("aten._softmax.default", half_to_float=False)),
    (4, along_dim("aten._log_softmax.default", half_to_float=False)),
    (3, along_dim("aten.cumsum.default")),
    (2, max_dim),
    (1, argmax),
    (1, any_dims),
]


def synthetic_graph(nodes: int, seed: int) -> Graph:
    """A graph of `nodes` aten nodes; every value nobody consumes is an output, so lowering's
    dead-code elimination keeps everything."""
    rng = random.Random(seed)
    inputs = [GraphInput(Value(name, meta)) for name, meta in INPUTS.items()]
    pool = [graph_input.value for graph_input in inputs]
    weights = [w for w, _ in GENERATORS]
    graph_nodes: list[Node] = []
    used: set[Value] = set()
    while len(graph_nodes) < nodes:
        (generate,) = rng.choices([g for _, g in GENERATORS], weights)
        step = generate(rng, pool)
        if step.op not in RULES:
            continue  # a pointwise rule not written yet
        results = tuple(
            Value(f"v{len(graph_nodes)}_{i}", meta) for i, meta in enumerate(step.metas)
        )
        graph_nodes.append(Node(step.op, step.args, step.kwargs, results))
        used.update(a for a in step.args if isinstance(a, Value))
        pool.extend(r for r in results if r.dtype.is_floating and r.numel > 0)
    outputs = [GraphOutput(r) for n in graph_nodes for r in n.results if r not in used]
    return Graph("synthetic", inputs, graph_nodes, outputs)


# -- torch: checking the recipe, and its own comparable step ---------------------------------------


def _torch_overload(op: str) -> Any:
    import torch

    _, name, overload = op.split(".")
    return getattr(getattr(torch.ops.aten, name), overload)


def _replay(graph: Graph, tensors: Sequence[Any], *, check: bool = False) -> list[Any]:
    """Run the graph's aten nodes with torch (on meta, fake or real tensors)."""
    from aten2prims.frontends.torch_interop import torch_dtype

    env: dict[Value, Any] = dict(zip((i.value for i in graph.inputs), tensors))
    for node in graph.nodes:
        args = [env.get(a, a) if isinstance(a, Value) else a for a in node.args]
        out = _torch_overload(node.op)(*args, **node.kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        for value, tensor in zip(node.results, outs):
            if check and (
                tuple(tensor.shape) != value.shape or tensor.dtype != torch_dtype(value.dtype)
            ):
                raise AssertionError(
                    f"recipe: {value.meta} for {node.op}; torch: {tensor.dtype}{list(tensor.shape)}"
                )
            env[value] = tensor
    return [env[o.value] for o in graph.outputs]


def check_metas_with_torch(graph: Graph) -> None:
    import torch

    from aten2prims.frontends.torch_interop import torch_dtype

    metas = [
        torch.empty(i.value.shape, dtype=torch_dtype(i.value.dtype), device="meta")
        for i in graph.inputs
    ]
    _replay(graph, metas, check=True)


def time_make_fx(graph: Graph, table: dict[Any, Any], runs: int) -> tuple[float, float, int]:
    """Best wall and CPU time of tracing the program with make_fx (fake tensors) and `table`,
    and the number of call nodes it produces."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from aten2prims.frontends.torch_interop import torch_dtype

    inputs = [torch.zeros(i.value.shape, dtype=torch_dtype(i.value.dtype)) for i in graph.inputs]
    best_wall, best_cpu, count = float("inf"), float("inf"), 0
    for _ in range(runs):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        traced = make_fx(
            lambda *xs: _replay(graph, xs), decomposition_table=table, tracing_mode="fake"
        )(*inputs)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
        count = sum(1 for n in traced.graph.nodes if n.op == "call_function")
    return best_wall, best_cpu, count


# -- main -----------------------------------------------------------------------------------------------


def time_lowering(graph: Graph, runs: int) -> tuple[float, float, Graph]:
    """Best wall-clock and best CPU (process) time of `aten2prims.lower` over `runs` runs; on a
    shared machine the CPU time is the one-core figure."""
    best_wall, best_cpu, lowered = float("inf"), float("inf"), graph
    for _ in range(runs):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        lowered = aten2prims.lower(graph)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu, lowered


def _rate(label: str, nodes: int, wall: float, cpu: float, runs: int) -> str:
    return (
        f"{label}: best of {runs}: {wall:.3f} s wall, {cpu:.3f} s CPU = {nodes / cpu:,.0f} aten nodes/s "
        f"({1e6 * cpu / nodes:.1f} µs/node CPU; {nodes / wall:,.0f}/s wall)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--torch-runs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-torch", action="store_true", help="skip the torch meta check and torch's timings"
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile one lowering and print the hot spots"
    )
    options = parser.parse_args(argv)

    graph = synthetic_graph(options.nodes, options.seed)
    ops = sorted({n.op for n in graph.nodes})
    print(
        f"graph: {len(graph.nodes)} aten nodes of {len(ops)} overloads, {len(graph.inputs)} inputs, "
        f"{len(graph.outputs)} outputs (seed {options.seed})"
    )
    have_torch = not options.no_torch and _torch_available()
    if have_torch:
        check_metas_with_torch(graph)
        print("result metas: recipe checked against torch's meta tensors")

    wall, cpu, lowered = time_lowering(graph, options.runs)
    print(
        _rate(
            f"aten2prims.lower: {len(graph.nodes)} aten nodes in -> {len(lowered.nodes)} prims nodes out",
            len(graph.nodes),
            wall,
            cpu,
            options.runs,
        )
    )

    if have_torch:
        from torch._decomp import core_aten_decompositions, decomposition_table

        for label, table in (
            ("refs table, aten -> prims", dict(decomposition_table)),
            ("Core ATen table (tracing only)", dict(core_aten_decompositions())),
        ):
            wall, cpu, count = time_make_fx(graph, table, options.torch_runs)
            print(
                _rate(
                    f"torch make_fx, {label}: {count} nodes out",
                    len(graph.nodes),
                    wall,
                    cpu,
                    options.torch_runs,
                )
            )

    if options.profile:
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        aten2prims.lower(graph)
        profiler.disable()
        stats = pstats.Stats(profiler).strip_dirs().sort_stats("tottime")
        stats.print_stats(25)
    return 0


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401 - only whether it imports
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
