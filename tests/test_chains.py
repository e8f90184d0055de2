"""Elementwise chains (aten2prims/executor/chains.py): runs of elementwise steps, each reading
the one before it, run as one step block by block. Results are bit for bit the node-by-node
kernels' (the reference run) at every thread count, and the exported torch activations they
speed up stay within float32 tolerance of torch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from _thread_checks import assert_one_threads_bits
from prims_testing import bits_equal

import aten2prims
import prims
from aten2prims.executor import plan_for
from aten2prims.executor.chains import CHAIN_BYTES, ChainKernel
from aten2prims.executor.contraction_fusion import ContractionKernel
from aten2prims.executor.reference import run_reference
from aten2prims.executor.segments import SegmentKernel
from aten2prims.executor.steps import Step
from aten2prims.executor.threads import Parted
from aten2prims.frontends.fx import from_fx
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import Graph
from aten2prims.ir.values import TensorMeta, Value
from prims import vector_math
from prims.builder import Builder


def build(inputs: dict[str, tuple[tuple[int, ...], DType]], body: Any) -> Graph:
    with Builder("g") as builder:
        values = {name: builder.add_input(name, TensorMeta(*spec)) for name, spec in inputs.items()}
        outputs = body(**values)
        return builder.finish(list(outputs) if isinstance(outputs, tuple) else [outputs])


def chain_kernel(step: Step) -> ChainKernel | None:
    kernel = step.kernel
    kernel = kernel.kernel if isinstance(kernel, Parted) else kernel
    return kernel if isinstance(kernel, ChainKernel) else None


def chain_ops(graph: Graph) -> list[list[str]]:
    """The prims of every chain step of the graph's plan, in step order."""
    return [
        [node.op.removeprefix("prims.") for node in step.nodes]
        for step in plan_for(graph).steps
        if chain_kernel(step) is not None
    ]


def same_at_every_thread_count(
    graph: Graph, inputs: dict[str, np.ndarray], written: Graph | None = None
) -> list[Any]:
    """The reference's bits at every thread count: of `graph`, or of `written`, the same
    computation as the plan runs it (a SiLU's product with the reciprocal as one division,
    fewer_passes.py)."""
    expected = run_reference(graph if written is None else written, inputs)
    for threads in (1, 2, 3):
        bits_equal(aten2prims.execute(graph, inputs, threads=threads), expected)
    bits_equal(aten2prims.execute(graph, inputs, check=True), expected)  # each step checked
    return expected


def silu_by_division(name: str, spec: tuple[tuple[int, ...], DType]) -> Graph:
    """x / (1 + exp(-x)): a SiLU as the plan runs it (fewer_passes.py), input `name`."""

    def body(**values: Value) -> Value:
        (x,) = values.values()
        return prims.div(x, prims.add(prims.exp(prims.neg(x)), 1.0))

    return build({name: spec}, body)


def exported(module: torch.nn.Module, x: torch.Tensor) -> Graph:
    program = torch.export.export(module.eval(), (x,)).run_decompositions()
    return aten2prims.lower(from_fx(program))


@pytest.mark.parametrize(
    ("module", "ops"),
    [
        (torch.nn.SiLU(), ["neg", "exp", "add", "reciprocal", "mul"]),
        (torch.nn.Sigmoid(), ["neg", "exp", "add", "reciprocal"]),
    ],
)
def test_a_sigmoid_and_a_silu_run_as_one_chain(module: torch.nn.Module, ops: list[str]) -> None:
    """sigmoid (neg, exp, add, reciprocal) and SiLU (its product with x) as exported: one
    chain of all their prims, the reference's bits at 1 to 3 threads (4.7 MB: in parts; SiLU's
    those of x / (1 + exp(-x))), and torch's values within float32 tolerance."""
    x = torch.randn(2, 64, 96, 96, generator=torch.Generator().manual_seed(0)) * 4
    x[0, 0, 0, :4] = torch.tensor([math.inf, -math.inf, math.nan, -0.0])
    graph = exported(module, x)
    assert chain_ops(graph) == [ops]
    (step,) = [s for s in plan_for(graph).steps if chain_kernel(s) is not None]
    assert isinstance(step.kernel, Parted), "large enough to split among threads"
    name = graph.user_inputs[0].name
    # SiLU's product with the reciprocal runs as one division (fewer_passes.py).
    silu = isinstance(module, torch.nn.SiLU)
    written = silu_by_division(name, (tuple(x.shape), DType.float32)) if silu else None
    same_at_every_thread_count(graph, {name: x.numpy()}, written)
    with torch.no_grad():
        expected = module(x)
    ours = torch.from_numpy(aten2prims.execute(graph, [x.numpy()], threads=1)[0])
    torch.testing.assert_close(ours, expected, equal_nan=True)


def test_a_gelu_runs_as_one_chain_with_its_erf(kernels: str) -> None:
    """GELU as exported (x · 0.5 · (1 + erf(x / √2)), x == inf selected apart): the comparison,
    then one chain of mul, erf, add, mul, mul, where; erf by MKL's vector math or by the
    float32 passes, in blocks: the reference's bits at 1 to 3 threads, and torch's values."""
    x = torch.randn(2, 64, 96, 96, generator=torch.Generator().manual_seed(3)) * 3
    x[0, 0, 0, :6] = torch.tensor([math.inf, -math.inf, math.nan, -0.0, 1e-40, -1e-45])
    graph = exported(torch.nn.GELU(), x)
    # `x == inf`, read by the selection alone, is a side link: its booleans stay in a block.
    assert chain_ops(graph) == [["eq", "mul", "erf", "add", "mul", "mul", "where"]]
    (step,) = [s for s in plan_for(graph).steps if chain_kernel(s) is not None]
    kernel = chain_kernel(step)
    assert kernel is not None and kernel.links[2].kernel is vector_math.erf
    assert [link.side for link in kernel.links] == [True] + [False] * 6
    (expected,) = same_at_every_thread_count(graph, {graph.user_inputs[0].name: x.numpy()})
    # In blocks of any size, and over a transposed operand (blocks along the leading dims).
    for block in (1000, 1 << 16):
        blocked = ChainKernel(kernel.links, kernel.dtype, block)
        with np.errstate(all="ignore"):  # -inf · 0 gives NaN, as in execute()
            whole, swapped = blocked(x.numpy()), blocked(x.numpy().transpose(0, 1, 3, 2))
        bits_equal([whole], [expected])
        bits_equal([swapped], [expected.transpose(0, 1, 3, 2)])
    with torch.no_grad():
        expected = torch.nn.functional.gelu(x)
    ours = torch.from_numpy(aten2prims.execute(graph, [x.numpy()], threads=1)[0])
    torch.testing.assert_close(ours, expected, equal_nan=True)


def test_a_gelu_after_a_linear_layer_runs_in_its_epilogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """With its comparison a side link, GELU's chain reads only the linear layer's result, as a
    ReLU's does: it runs in the product's epilogue (no step of its own). Its float32 erf makes
    many short calls (direct_kernels.SHORT_CALLS): at one thread the chain runs on the whole
    result after the product, in erf's own blocks; when threads share the product's chunks,
    on each chunk, in long calls (`vector_math.long_calls`). Every thread count gives one
    thread's bits (the product's are BLAS's, not the reference's), torch's values within
    tolerance."""
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Linear(192, 768), torch.nn.GELU())
    x = torch.randn(4, 198, 192)
    graph = exported(model, x)
    steps = plan_for(graph).steps
    (product_step,) = [s for s in steps if isinstance(s.kernel, ContractionKernel)]
    ops = [node.op.removeprefix("prims.") for node in product_step.nodes]
    assert ops[-7:] == ["eq", "mul", "erf", "add", "mul", "mul", "where"], ops
    product = product_step.kernel
    absorbed = [entry.function for entry in product.epilogue if entry.function is not None]
    assert len(absorbed) == 1 and isinstance(absorbed[0], ChainKernel), product.epilogue
    assert absorbed[0].short_calls
    assert not [s for s in steps if chain_kernel(s) is not None], "no chain step of its own"
    long_calls: list[int] = []
    original = vector_math.long_calls

    def counted() -> Any:
        long_calls.append(1)
        return original()

    monkeypatch.setattr(vector_math, "long_calls", counted)
    sizes: list[int] = []
    chain_call = ChainKernel.__call__

    def recorded(self: ChainKernel, *operands: Any, out: np.ndarray) -> Any:
        sizes.append(out.size)
        return chain_call(self, *operands, out=out)

    monkeypatch.setattr(ChainKernel, "__call__", recorded)
    one = aten2prims.execute(graph, [x.numpy()], threads=1)
    assert sizes == [4 * 198 * 768], "one thread: the chain once, on the whole result"
    assert not long_calls, "one thread: erf's own blocks"
    (recipe,) = product.recipes()
    assert recipe.levels, "the product is made in chunks, each a task of the call's threads"
    assert_one_threads_bits(graph, [x.numpy()], one, counts=(2,))
    chunks = math.prod(-(-level.length // level.step) for level in recipe.levels)
    assert len(long_calls) == chunks >= 2, "two threads: on each chunk, in long calls"
    assert len(sizes) == 1 + chunks and sum(sizes[1:]) == sizes[0]
    assert_one_threads_bits(graph, [x.numpy()], one, counts=(3, 4))
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(torch.from_numpy(one[0]), expected)


def test_a_chain_gives_the_bits_of_its_steps_in_blocks_of_any_size(kernels: str) -> None:
    """erf (MKL's vector erf or NumPy's passes) after exp in a chain: the same bits whether the
    chain runs in blocks of 1K, 64K or all elements, as its steps run whole."""

    def body(x: Value) -> Value:
        return prims.mul(prims.erf(prims.exp(prims.mul(x, 0.25))), x)

    graph = build({"x": ((600, 1000), DType.float32)}, body)
    x = (np.random.default_rng(4).standard_normal((600, 1000)) * 8).astype(np.float32)
    expected = same_at_every_thread_count(graph, {"x": x})
    (step,) = [s for s in plan_for(graph).steps if chain_kernel(s) is not None]
    kernel = chain_kernel(step)
    assert kernel is not None
    for block in (1024, 1 << 16, x.size):
        blocked = ChainKernel(kernel.links, kernel.dtype, block)
        bits_equal([blocked(x)], expected)


def test_a_hardswish_runs_as_one_chain_with_its_clamp() -> None:
    """Hardswish as exported (x · clamp(x + 3, 0, 6) / 6): add, the clamp's fused np.clip (`Clamp`),
    mul and div in one chain; bit for bit the reference, equal to torch within tolerance."""
    x = torch.randn(1, 96, 112, 112, generator=torch.Generator().manual_seed(1)) * 4
    graph = exported(torch.nn.Hardswish(), x)
    (ops,) = chain_ops(graph)
    assert ops[0] == "add" and ops[-2:] == ["mul", "div"] and "where" in ops
    same_at_every_thread_count(graph, {graph.user_inputs[0].name: x.numpy()})
    with torch.no_grad():
        expected = torch.nn.functional.hardswish(x)
    ours = torch.from_numpy(aten2prims.execute(graph, [x.numpy()], threads=1)[0])
    torch.testing.assert_close(ours, expected)


def test_a_chain_writes_into_its_dying_operand() -> None:
    """x · sigmoid(x) of an intermediate that dies there: the chain's result overwrites it
    (buffer reuse), each block's last link after every read of that block."""

    def body(x: Value) -> Value:
        y = prims.exp(prims.mul(x, 0.5))  # a chain of its own: y is read twice
        silu = prims.mul(y, prims.reciprocal(prims.add(prims.exp(prims.neg(y)), 1.0)))
        return prims.amax(silu, [1])

    def divided(x: Value) -> Value:  # as the plan runs it (fewer_passes.py)
        y = prims.exp(prims.mul(x, 0.5))
        return prims.amax(prims.div(y, prims.add(prims.exp(prims.neg(y)), 1.0)), [1])

    graph = build({"x": ((512, 1024), DType.float32)}, body)
    x = np.random.default_rng(2).standard_normal((512, 1024)).astype(np.float32)
    same_at_every_thread_count(graph, {"x": x}, build({"x": ((512, 1024), DType.float32)}, divided))
    assert chain_ops(graph) == [["mul", "exp"], ["neg", "exp", "add", "reciprocal", "mul"]]
    first, second = [s for s in plan_for(graph).steps if chain_kernel(s) is not None]
    assert first.out_argument is None, "x is an input: never written"
    assert second.out_argument == 0, "written over y, which dies there"


def test_a_link_reading_two_results_joins_one_chain() -> None:
    """where(x == inf, nan, x · 2) then neg: the where reads the comparison's and the product's
    results, each read by nothing else; it joins the chain of the first (eq, where, neg) and
    the product, computed from the chain's operand x alone, is a side link run first in each
    block. The where reads the previous link as its predicate (another dtype) and writes into a
    scratch block of its own. In the second chain the where's branch t is read twice (once
    transposed): a step of its own."""

    def body(x: Value) -> tuple[Value, ...]:
        first = prims.neg(prims.where(prims.eq(x, math.inf), math.nan, prims.mul(x, 2.0)))
        t = prims.exp(x)
        second = prims.neg(prims.where(prims.gt(x, 0.5), prims.transpose(t, [1, 0]), t))
        return prims.sum(first, [0]), prims.sum(second, [0])

    graph = build({"x": ((600, 600), DType.float32)}, body)
    x = np.random.default_rng(3).standard_normal((600, 600)).astype(np.float32)
    x[0, :3] = np.inf
    same_at_every_thread_count(graph, {"x": x})
    assert chain_ops(graph) == [["mul", "eq", "where", "neg"], ["gt", "where", "neg"]]
    first, second = [s for s in plan_for(graph).steps if chain_kernel(s) is not None]
    kernel = chain_kernel(first)
    assert kernel is not None and [link.side for link in kernel.links] == [True] + [False] * 3
    assert first.out_argument is None, "not over the input x, its one operand"
    assert second.out_argument is None, "not over t: its other branch reads t transposed"


def test_chains_of_transposed_and_zero_dim_operands() -> None:
    """Operands that are not row-major (a transpose) or are 0-dim tensors: the chain runs in
    blocks along its leading dims, each operand's part sliced as the result's."""

    def body(x: Value, scale: Value) -> Value:
        t = prims.transpose(prims.exp(prims.mul(x, 0.25)), [1, 0])
        chained = prims.mul(prims.add(prims.neg(t), scale), t)
        return prims.sum(prims.sqrt(prims.abs(chained)), [0])

    graph = build({"x": ((700, 300), DType.float64), "scale": ((), DType.float64)}, body)
    rng = np.random.default_rng(4)
    inputs = {"x": rng.standard_normal((700, 300)), "scale": np.array(1.5)}
    same_at_every_thread_count(graph, inputs)
    assert chain_ops(graph) == [["mul", "exp"], ["neg", "add", "mul", "abs", "sqrt"]]


def test_broadcasts_along_long_runs_chain_and_short_ones_and_small_results_do_not() -> None:
    """A norm's scale and shift (a per-row statistic and a per-column weight, broadcast along
    rows of 768) chain, run with NumPy's buffer of one row (unbuffered.py), in blocks into a
    new result and whole over a dying operand; rows of 197 (a softmax's) and maximum's
    broadcasts, slower read in place, stay single steps; nor does a chain whose result stays
    in L2 whole."""

    def norm(x: Value, rstd: Value, w: Value) -> Value:
        scaled = prims.mul(x, prims.broadcast_in_dim(rstd, list(x.shape), [0]))
        return prims.add(prims.mul(scaled, prims.broadcast_in_dim(w, list(x.shape), [1])), 1.0)

    def over_dying(x: Value, rstd: Value, w: Value) -> tuple[Value, Value]:
        # exp(x), read by a row maximum first, dies at the first link: the chain writes over it
        e = prims.exp(x)
        return prims.amax(e, [1]), norm(e, rstd, w)

    def clamped(x: Value, rstd: Value, w: Value) -> Value:
        low = prims.maximum(x, prims.broadcast_in_dim(rstd, list(x.shape), [0]))
        return prims.mul(low, prims.broadcast_in_dim(w, list(x.shape), [1]))

    rng = np.random.default_rng(5)
    for rows, columns, body, ops in (
        (1568, 768, norm, [["mul", "mul", "add"]]),
        (1568, 768, over_dying, [["mul", "mul", "add"]]),
        (6000, 197, norm, []),
        (1568, 768, clamped, []),
    ):
        graph = build(
            {
                "x": ((rows, columns), DType.float32),
                "rstd": ((rows,), DType.float32),
                "w": ((columns,), DType.float32),
            },
            body,
        )
        inputs = {
            "x": rng.standard_normal((rows, columns)).astype(np.float32),
            "rstd": rng.random(rows).astype(np.float32),
            "w": rng.standard_normal(columns).astype(np.float32),
        }
        same_at_every_thread_count(graph, inputs)
        assert chain_ops(graph) == ops
        for step in plan_for(graph).steps:
            kernel = chain_kernel(step)
            if kernel is not None:
                assert kernel.buffer == columns
                assert (step.out_argument is not None) == (body is over_dying)

    elements = CHAIN_BYTES // 4

    def small(x: Value) -> Value:
        return prims.neg(prims.exp(x))

    for size, chained in ((elements, 0), (elements + 1, 1)):
        graph = build({"x": ((size,), DType.float32)}, small)
        same_at_every_thread_count(graph, {"x": np.linspace(-3, 3, size, dtype=np.float32)})
        assert len(chain_ops(graph)) == chained


def test_a_chain_runs_inside_a_segment_of_row_wise_steps() -> None:
    """A row statistic (a maximum: NumPy's, bit for bit, where a row sum is BLAS's,
    row_sums.py), the shifted rows and a chain over them: one segment (a row-wise region)
    whose parts run the chain on their rows; every thread count gives one thread's bits."""

    def body(x: Value) -> Value:
        peak = prims.broadcast_in_dim(prims.amax(x, [1]), [128, 8192], [0])
        c = prims.sub(x, peak)
        return prims.mul(c, prims.reciprocal(prims.add(prims.exp(prims.neg(c)), 1.0)))

    def divided(x: Value) -> Value:  # as the plan runs it (fewer_passes.py)
        peak = prims.broadcast_in_dim(prims.amax(x, [1]), [128, 8192], [0])
        c = prims.sub(x, peak)
        return prims.div(c, prims.add(prims.exp(prims.neg(c)), 1.0))

    graph = build({"x": ((128, 8192), DType.float32)}, body)
    x = np.random.default_rng(6).standard_normal((128, 8192)).astype(np.float32)
    same_at_every_thread_count(graph, {"x": x}, build({"x": ((128, 8192), DType.float32)}, divided))
    plan = plan_for(graph)
    namespace = plan.run.function.__globals__  # type: ignore[attr-defined]  # codegen's function
    segments = [k for k in namespace.values() if isinstance(k, SegmentKernel)]
    assert len(segments) == 1
    kinds = [type(member.kernel).__name__ for member in segments[0].members]
    assert "ChainKernel" in kinds and len(kinds) >= 3
