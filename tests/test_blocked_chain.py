"""Elementwise chains around erf run block by block (aten2prims/executor/blocked_chain.py):
GELU's whole chain is one step, its bits are those of the unfused steps (whatever the blocks,
the operands' layout and the thread count) and it matches torch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import prims
from aten2prims.executor import blocked_chain, execute, plan, plan_for
from aten2prims.executor.blocked_chain import BlockedChain
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import Graph
from aten2prims.ir.values import TensorMeta, Value
from aten2prims.passes.lower import lower
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import build_graph, run_call, torch_outputs
from prims.builder import Builder

SPECIAL = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1e-40, -1e-40, 1e30, -1e30, 5.0]


def gelu_call(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[Graph, dict[str, Any], AtenCall]:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    x.view(-1)[: len(SPECIAL)] = torch.tensor(SPECIAL, dtype=torch.float64)
    call = AtenCall("aten.gelu.default", (x.to(dtype),), {})
    graph, arrays = build_graph(call, torch_outputs(call))
    return lower(graph), arrays, call


def chain_steps(graph: Graph) -> list[Any]:
    return [
        step
        for step in plan_for(graph).steps
        if isinstance(getattr(step.kernel, "kernel", step.kernel), BlockedChain)
    ]


def unfused(graph: Graph, inputs: dict[str, Any], threads: int = 1) -> list[Any]:
    """The graph run without the chain rule (a structurally equal graph: plans are cached per
    graph object)."""
    saved = plan.FUSION_RULES
    plan.FUSION_RULES = tuple(r for r in saved if r is not blocked_chain.blocked_chain_rule)
    try:
        twin = Graph(graph.name, list(graph.inputs), list(graph.nodes), list(graph.outputs))
        assert not chain_steps(twin)
        return execute(twin, inputs, threads=threads)
    finally:
        plan.FUSION_RULES = saved


def assert_same_bits(ours: list[Any], theirs: list[Any]) -> None:
    assert [(o.dtype, o.shape) for o in ours] == [(t.dtype, t.shape) for t in theirs]
    assert [o.tobytes() for o in ours] == [t.tobytes() for t in theirs]


@pytest.mark.parametrize(
    ("dtype", "ops"),
    [
        # oneDNN's GELU: (1 + erf(x / sqrt 2)) * x * 0.5, NaN where x is +inf.
        (torch.float32, ["mul", "erf", "add", "eq", "mul", "mul", "where"]),
        (torch.float64, ["mul", "erf", "add", "mul", "mul"]),
    ],
)
def test_gelu_is_one_blocked_step_with_the_unfused_bits(dtype: torch.dtype, ops: list[str]) -> None:
    """Several blocks and a remainder: one step covering the whole chain (x == inf included),
    with one scratch block of floats at most, the unfused steps' bits, torch's values."""
    graph, inputs, call = gelu_call((3, 70, 1001), dtype)
    (step,) = chain_steps(graph)
    assert [node.op for node in step.nodes] == [f"prims.{op}" for op in ops]
    assert len(plan_for(graph).steps) == 1
    # The last product is computed into the result's block: the selection reads b in place.
    *_, product, last = step.kernel.members
    assert product.out is None and ("result", None) in last.operands
    assert sum(d.kind == "f" for d in step.kernel.scratch_dtypes) == 1
    assert_same_bits(execute(graph, inputs, check=True), unfused(graph, inputs))
    outcome = run_call(call)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("block", [1, 7, 1 << 16])
def test_any_block_size_gives_the_same_bits(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of one element, of a few (a remainder in every row) or larger than the array."""
    monkeypatch.setattr(blocked_chain, "BLOCK", block)
    graph, inputs, _ = gelu_call((5, 31), torch.float32)
    assert chain_steps(graph)
    assert_same_bits(execute(graph, inputs), unfused(graph, inputs))


def test_strided_and_broadcast_operands_run_whole() -> None:
    """A transposed input (not C-contiguous) and a broadcast one (a row NumPy broadcasts) run
    the chain member by member: the unfused bits."""
    graph, inputs, _ = gelu_call((40, 30), torch.float32)
    (name,) = inputs
    transposed = {name: np.ascontiguousarray(inputs[name].T).T}
    assert not transposed[name].flags.c_contiguous
    assert_same_bits(execute(graph, transposed), unfused(graph, transposed))

    def body(x: Value, row: Value) -> Value:
        wide = prims.broadcast_in_dim(row, [40, 30], [1])
        return prims.mul(prims.erf(prims.mul(prims.add(x, wide), 0.5)), wide)

    graph = build({"x": ((40, 30), DType.float32), "row": ((30,), DType.float32)}, body)
    arrays = {"x": inputs[name], "row": inputs[name][0].copy()}
    (step,) = chain_steps(graph)
    assert [node.op for node in step.nodes] == ["prims.add", "prims.mul", "prims.erf", "prims.mul"]
    assert_same_bits(execute(graph, arrays, check=True), unfused(graph, arrays))


def test_values_read_outside_stay_outside() -> None:
    """erf's result is a graph output and its input is read twice: the chain stops at both."""

    def body(x: Value) -> tuple[Value, Value]:
        scaled = prims.mul(x, 0.7)
        error = prims.erf(prims.neg(scaled))
        return error, prims.add(prims.mul(error, 2.0), scaled)

    graph = build({"x": ((300,), DType.float32)}, body)
    (step,) = chain_steps(graph)
    assert [node.op for node in step.nodes] == ["prims.neg", "prims.erf"]
    arrays = {"x": np.linspace(-6, 6, 300, dtype=np.float32)}
    assert_same_bits(execute(graph, arrays, check=True), unfused(graph, arrays))


def test_threads_give_one_threads_bits() -> None:
    """Large enough for the threads to split it (parts or a segment): every thread count gives
    the bits of one."""
    graph, inputs, _ = gelu_call((4, 200, 1000), torch.float32)
    one = execute(graph, inputs, threads=1)
    assert_same_bits(one, unfused(graph, inputs))
    for threads in (2, 3):
        assert_same_bits(execute(graph, inputs, threads=threads), one)


def build(inputs: dict[str, tuple[tuple[int, ...], DType]], body: Any) -> Graph:
    with Builder("g") as builder:
        values = {
            name: builder.add_input(name, TensorMeta(shape, dtype))
            for name, (shape, dtype) in inputs.items()
        }
        outputs = body(**values)
        return builder.finish(list(outputs) if isinstance(outputs, tuple) else [outputs])
