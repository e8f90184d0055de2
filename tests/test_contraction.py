"""The executor's contraction fusion (aten2prims/executor/contraction_fusion.py, on the engine of
contraction.py): broadcast/mul/sum runs as BLAS matrix products. Checked on the graphs our
matrix-product and convolution rules emit and on hand-built prims graphs: the fusion fires (the plan's steps say so), fused and unfused
execution agree (dtype and shape exactly, values within tolerance), values reaching outside the
group stop it, and a 4096² matrix product stays within 3x its operands' memory.

convolution_backward's output_mask is tested here for every combination, through the harness's
runner: masked results are undefined (None) in torch and in our graph, and cost no contraction."""

from __future__ import annotations

import contextlib
import itertools
import math
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from _plan_switches import plan_switches
from _thread_checks import assert_one_threads_bits

import prims
from aten2prims.executor import (
    blas,
    contraction,
    execute,
    kept_buffers,
    multiply_accumulate,
    plan,
    plan_for,
)
from aten2prims.executor.contraction import DEFAULT_TUNING, contract, plan_contraction
from aten2prims.executor.contraction_fusion import ContractionFusion, ContractionKernel
from aten2prims.executor.filled_scatter import FilledScatter
from aten2prims.executor.fusion import FusionRule
from aten2prims.executor.multiply_accumulate import (
    MultiplyAccumulateRecipe,
    plan_multiply_accumulate,
)
from aten2prims.executor.padded_products import PaddedContraction
from aten2prims.executor.stacked_copies import StackedCopies
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import Graph
from aten2prims.ir.values import TensorMeta, Value
from aten2prims.passes.lower import lower
from aten2prims.testing.compare import compare
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import build_graph, judge_outputs, run_call, torch_outputs
from prims import mkl
from prims.builder import Builder


@contextlib.contextmanager
def fusion_rules(rules: Sequence[FusionRule]) -> Iterator[None]:
    """Plans built inside use these fusion rules (plans are cached per graph: use new graphs)."""
    with plan_switches(FUSION_RULES=tuple(rules)):
        yield


def fusion_disabled() -> contextlib.AbstractContextManager[None]:
    return fusion_rules(())


def small_chunks(budget: int) -> contextlib.AbstractContextManager[None]:
    """The contraction fusion with copy and output chunks of about `budget` bytes (and at least 4
    columns), so that small graphs take every chunking path."""
    tuning = attrs.evolve(
        DEFAULT_TUNING, copy_chunk_bytes=budget, output_chunk_bytes=budget, min_chunk_columns=4
    )
    return fusion_rules(
        [
            ContractionFusion(tuning) if isinstance(rule, ContractionFusion) else rule
            for rule in plan.FUSION_RULES
        ]
    )


def contraction_steps(graph: Graph) -> list[Any]:
    return [
        step
        for step in plan_for(graph).steps
        if isinstance(step.kernel, (ContractionKernel, PaddedContraction))
    ]


def contraction_recipes(graph: Graph) -> list[Any]:
    """The engine's recipes the graph's contraction steps have planned so far."""
    return [recipe for step in contraction_steps(graph) for recipe in step.kernel.recipes()]


def lowered_call(
    op: str, *args: Any, **kwargs: Any
) -> tuple[Graph, dict[str, np.ndarray], AtenCall]:
    """The call's one-node graph, lowered, with its inputs; `run_call(call)` checks it against
    torch under the harness's full rule (tolerances, then "closer than" a float64 reference)."""
    call = AtenCall(op, args, kwargs)
    graph, arrays = build_graph(call, torch_outputs(call))
    return lower(graph), arrays, call


def run_both_ways(graph: Graph, inputs: dict[str, np.ndarray]) -> tuple[list[Any], list[Any]]:
    fused = execute(graph, inputs, check=True)
    with fusion_disabled():
        # A structurally equal graph: plans are cached per graph object.
        twin = Graph(graph.name, list(graph.inputs), list(graph.nodes), list(graph.outputs))
        assert not contraction_steps(twin)
        unfused = execute(twin, inputs, check=True)
    return fused, unfused


def assert_agree(ours: list[Any], theirs: list[Any], against: str) -> None:
    assert len(ours) == len(theirs)
    for index, (a, b) in enumerate(zip(ours, theirs)):
        verdict = compare(a, b, what=f"output {index}", against=against)
        assert verdict, verdict.message


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)
    return torch.randint(-5, 6, shape, generator=generator).to(dtype)


# -- the fusion fires on what our rules emit ------------------------------------------------------

CASES = {
    "mm": ("aten.mm.default", lambda d: (randn(5, 7, dtype=d), randn(7, 3, dtype=d, seed=1)), {}),
    "bmm": (
        "aten.bmm.default",
        lambda d: (randn(4, 5, 7, dtype=d), randn(4, 7, 3, dtype=d, seed=1)),
        {},
    ),
    "addmm": (
        "aten.addmm.default",
        lambda d: (randn(3, dtype=d, seed=2), randn(5, 7, dtype=d), randn(7, 3, dtype=d, seed=1)),
        {"beta": 2, "alpha": 3},
    ),
    "conv2d": (
        "aten.convolution.default",
        lambda d: (
            randn(2, 4, 9, 8, dtype=d),
            randn(6, 2, 3, 3, dtype=d, seed=1),
            randn(6, dtype=d, seed=2),
            [2, 1],
            [1, 2],
            [1, 2],
            False,
            [0, 0],
            2,
        ),
        {},
    ),
    "conv_transpose1d": (
        "aten.convolution.default",
        lambda d: (
            randn(2, 4, 9, dtype=d),
            randn(4, 3, 3, dtype=d, seed=1),
            None,
            [2],
            [1],
            [1],
            True,
            [1],
            1,
        ),
        {},
    ),
    "conv3d": (
        "aten.convolution.default",
        lambda d: (
            randn(1, 2, 5, 4, 6, dtype=d),
            randn(3, 2, 2, 3, 2, dtype=d, seed=1),
            None,
            [1, 1, 2],
            [0, 1, 1],
            [2, 1, 1],
            False,
            [0, 0, 0],
            1,
        ),
        {},
    ),
}


# torch has no int64 transposed convolution on CPU, so there is nothing to compare those with.
FUSION_PARAMS = [
    (case, dtype)
    for case in sorted(CASES)
    for dtype in (torch.float32, torch.float16, torch.int64, torch.float64)
    if not (dtype == torch.int64 and case.startswith("conv_transpose"))
]


@pytest.mark.parametrize(("case", "dtype"), FUSION_PARAMS)
def test_fusion_fires_and_matches_torch(case: str, dtype: torch.dtype) -> None:
    op, make_args, kwargs = CASES[case]
    graph, inputs, call = lowered_call(op, *make_args(dtype), **kwargs)
    steps = contraction_steps(graph)
    assert len(steps) == 1
    (anchor,) = [node for node in steps[0].nodes if node.op == "prims.sum"]
    # No other step makes anything as large as the joint product the fusion avoids.
    product = math.prod(anchor.args[0].shape)
    for step in plan_for(graph).steps:
        if step is not steps[0]:
            assert all(math.prod(meta.shape) < product for meta in step.out_metas), step.node
    fused, unfused = run_both_ways(graph, inputs)
    assert_agree(fused, unfused, "unfused execution")
    outcome = run_call(call)
    assert outcome.passed, outcome.message


def test_epilogues_join_the_group() -> None:
    """A convolution's bias and addmm's alpha and bias run in place on the contraction's result,
    which the group returns as an array of its own (no view, so no copy as a graph output)."""
    graph, inputs, _ = lowered_call(*CASES["conv2d"][:1], *CASES["conv2d"][1](torch.float32))
    (step,) = contraction_steps(graph)
    assert [node.op for node in step.nodes][-3:] == [
        "prims.sum",
        "prims.collapse_view",
        "prims.add",
    ]
    assert step.node is graph.nodes[-1]
    graph, inputs, _ = lowered_call(
        "aten.addmm.default", *CASES["addmm"][1](torch.float64), beta=2, alpha=3
    )
    (step,) = contraction_steps(graph)
    assert [node.op for node in step.nodes][-3:] == ["prims.sum", "prims.mul", "prims.add"]
    fused, unfused = run_both_ways(graph, inputs)
    assert fused[0].base is None and fused[0].flags.c_contiguous
    assert_agree(fused, unfused, "unfused execution")


@pytest.mark.parametrize("budget", [64, 2048, 1 << 16])
def test_chunked_copies_agree(budget: int) -> None:
    """Small budgets force every chunking path (batch, free and contracted axes; epilogues run
    per output chunk)."""
    chunked = False
    for make in (
        lambda: lowered_call(
            "aten.convolution.default",
            randn(3, 4, 9, 10),
            randn(6, 4, 3, 3, seed=1),
            randn(6, seed=2),
            [1, 1],
            [1, 1],
            [1, 1],
            False,
            [0, 0],
            1,
        ),
        lambda: lowered_call(
            "aten.addmm.default",
            randn(7),
            randn(5, 9, seed=1),
            randn(9, 7, seed=2),
            beta=2,
            alpha=3,
        ),
        lambda: lowered_call(
            "aten.convolution_backward.default",
            randn(3, 6, 9, 10),
            randn(3, 4, 9, 10, seed=1),
            randn(6, 4, 3, 3, seed=2),
            [6],
            [1, 1],
            [1, 1],
            [1, 1],
            False,
            [0, 0],
            1,
            [True, True, True],
        ),
    ):
        graph, inputs, _call = make()
        with small_chunks(budget):
            fused, unfused = run_both_ways(graph, inputs)
        assert_agree(fused, unfused, "unfused execution")
        chunked |= any(recipe.levels for recipe in contraction_recipes(graph))
    assert chunked or budget > 2048  # (the largest budget fits these small graphs whole)


def test_convolution_backward_fuses_every_contraction() -> None:
    graph, inputs, call = lowered_call(
        "aten.convolution_backward.default",
        randn(2, 6, 4, 4),
        randn(2, 4, 8, 8, seed=1),
        randn(6, 2, 3, 3, seed=2),
        [6],
        [2, 2],
        [1, 1],
        [1, 1],
        False,
        [0, 0],
        2,
        [True, True, True],
    )
    assert len(contraction_steps(graph)) == 2  # grad_input and grad_weight
    fused, unfused = run_both_ways(graph, inputs)
    assert_agree(fused, unfused, "unfused execution")
    outcome = run_call(call)
    assert outcome.passed, outcome.message


# -- hand-built prims graphs ------------------------------------------------------------------------


def build(inputs: dict[str, tuple[tuple[int, ...], DType]], body: Any) -> Graph:
    with Builder("g") as builder:
        values = {
            name: builder.add_input(name, TensorMeta(shape, dtype))
            for name, (shape, dtype) in inputs.items()
        }
        outputs = body(**values)
        return builder.finish(list(outputs) if isinstance(outputs, tuple) else [outputs])


def arrays_for(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    result = {}
    for graph_input in graph.inputs:
        meta = graph_input.value.meta
        if meta.dtype.is_bool:
            result[graph_input.name] = rng.random(meta.shape) < 0.5
        elif meta.dtype.is_integral:
            result[graph_input.name] = rng.integers(-50, 50, meta.shape).astype(meta.dtype.numpy)
        elif meta.dtype.is_complex:
            result[graph_input.name] = (
                rng.standard_normal(meta.shape) + 1j * rng.standard_normal(meta.shape)
            ).astype(meta.dtype.numpy)
        else:
            result[graph_input.name] = rng.standard_normal(meta.shape).astype(meta.dtype.numpy)
    return result


def _transposed_operands(x: Value, y: Value) -> Value:
    # out[j, i] = sum_k x[k, i] * y[j, k]: a transposed (strided) operand
    xb = prims.broadcast_in_dim(prims.transpose(x, [1, 0]), [5, 4, 3], [1, 2])
    yb = prims.broadcast_in_dim(y, [5, 4, 3], [0, 2])
    return prims.sum(prims.mul(xb, yb), [2])


def _lone_and_absent_labels(x: Value, y: Value) -> Value:
    # x[i, l] indexes l alone (summed out first); joint dim 3 belongs to neither (a multiplicity)
    xb = prims.broadcast_in_dim(x, [4, 3, 6, 2], [0, 2])
    yb = prims.broadcast_in_dim(y, [4, 3, 6, 2], [1])
    return prims.sum(prims.mul(xb, yb), [2, 3])


def _unbroadcast_full_shape(x: Value, y: Value) -> Value:
    # a dot product of same-shape operands: no broadcast at all
    return prims.sum(prims.mul(x, y), None)


def _windows(x: Value, w: Value) -> Value:
    # a 1-d convolution written by hand: overlapping windows of x contracted with w
    windows = prims.as_strided(x, [2, 3, 6, 3], [24, 8, 1, 1], 0)
    xb = prims.broadcast_in_dim(windows, [2, 5, 3, 6, 3], [0, 2, 3, 4])
    wb = prims.broadcast_in_dim(w, [2, 5, 3, 6, 3], [1, 2, 4])
    return prims.sum(prims.mul(xb, wb), [2, 4])


def _batch_outer(x: Value, y: Value) -> Value:
    # a batched outer product kept whole except for one lone label of y
    xb = prims.broadcast_in_dim(x, [3, 4, 5, 2], [0, 1])
    yb = prims.broadcast_in_dim(y, [3, 4, 5, 2], [0, 2, 3])
    return prims.sum(prims.mul(xb, yb), [3])


GRAPHS = {
    "transposed": (
        {"x": ((3, 4), DType.float32), "y": ((5, 3), DType.float32)},
        _transposed_operands,
    ),
    "lone_and_absent": (
        {"x": ((4, 6), DType.float64), "y": ((3,), DType.float64)},
        _lone_and_absent_labels,
    ),
    "dot": ({"x": ((3, 4), DType.float32), "y": ((3, 4), DType.float32)}, _unbroadcast_full_shape),
    "windows": ({"x": ((2, 3, 8), DType.float32), "w": ((5, 3, 3), DType.float32)}, _windows),
    "batch_outer": ({"x": ((3, 4), DType.float32), "y": ((3, 5, 2), DType.float32)}, _batch_outer),
    "int8_wraps": (
        {"x": ((3, 40), DType.int8), "y": ((40,), DType.int8)},
        lambda x, y: prims.sum(prims.mul(x, prims.broadcast_in_dim(y, [3, 40], [1])), [1]),
    ),
    "bool": (
        {"x": ((3, 4), DType.bool), "y": ((4, 2), DType.bool)},
        lambda x, y: prims.sum(
            prims.mul(
                prims.broadcast_in_dim(x, [3, 4, 2], [0, 1]),
                prims.broadcast_in_dim(y, [3, 4, 2], [1, 2]),
            ),
            [1],
        ),
    ),
    "complex": (
        {"x": ((3, 4), DType.complex64), "y": ((4, 2), DType.complex64)},
        lambda x, y: prims.sum(
            prims.mul(
                prims.broadcast_in_dim(x, [3, 4, 2], [0, 1]),
                prims.broadcast_in_dim(y, [3, 4, 2], [1, 2]),
            ),
            [1],
        ),
    ),
    "empty_contraction": (
        {"x": ((3, 0), DType.float32), "y": ((0, 2), DType.float32)},
        lambda x, y: prims.sum(
            prims.mul(
                prims.broadcast_in_dim(x, [3, 0, 2], [0, 1]),
                prims.broadcast_in_dim(y, [3, 0, 2], [1, 2]),
            ),
            [1],
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_prims_graphs_fuse_and_agree(name: str) -> None:
    inputs, body = GRAPHS[name]
    graph = build(inputs, body)
    assert len(contraction_steps(graph)) == 1
    arrays = arrays_for(graph)
    fused, unfused = run_both_ways(graph, arrays)
    assert_agree(fused, unfused, "unfused execution")


def test_caller_arrays_are_not_written() -> None:
    graph = build(GRAPHS["windows"][0], GRAPHS["windows"][1])
    arrays = arrays_for(graph)
    copies = {name: array.copy() for name, array in arrays.items()}
    execute(graph, arrays)
    for name, array in arrays.items():
        assert np.array_equal(array, copies[name])


# -- values reaching outside the group stop the fusion -----------------------------------------------


def test_product_with_an_outside_user_is_not_fused() -> None:
    def body(x: Value, y: Value) -> tuple[Value, Value]:
        product = prims.mul(
            prims.broadcast_in_dim(x, [3, 4, 2], [0, 1]),
            prims.broadcast_in_dim(y, [3, 4, 2], [1, 2]),
        )
        return prims.sum(product, [1]), prims.exp(product)

    graph = build({"x": ((3, 4), DType.float32), "y": ((4, 2), DType.float32)}, body)
    assert not contraction_steps(graph)
    assert any(step.node.op == "prims.mul" for step in plan_for(graph).steps)


def test_product_that_is_an_output_is_not_fused() -> None:
    def body(x: Value, y: Value) -> tuple[Value, Value]:
        product = prims.mul(
            prims.broadcast_in_dim(x, [3, 4, 2], [0, 1]),
            prims.broadcast_in_dim(y, [3, 4, 2], [1, 2]),
        )
        return prims.sum(product, [1]), product

    graph = build({"x": ((3, 4), DType.float32), "y": ((4, 2), DType.float32)}, body)
    assert not contraction_steps(graph)


def test_shared_broadcast_stays_outside_the_group() -> None:
    def body(x: Value, y: Value) -> tuple[Value, Value]:
        xb = prims.broadcast_in_dim(x, [3, 4, 2], [0, 1])
        product = prims.mul(xb, prims.broadcast_in_dim(y, [3, 4, 2], [1, 2]))
        return prims.sum(product, [1]), prims.neg(xb)

    graph = build({"x": ((3, 4), DType.float32), "y": ((4, 2), DType.float32)}, body)
    (step,) = contraction_steps(graph)
    assert [node.op for node in step.nodes] == ["prims.broadcast_in_dim", "prims.mul", "prims.sum"]
    assert any(
        s.node.op == "prims.broadcast_in_dim" and len(s.nodes) == 1 for s in plan_for(graph).steps
    )
    fused, unfused = run_both_ways(graph, arrays_for(graph))
    assert_agree(fused, unfused, "unfused execution")


def test_low_precision_products_are_not_fused() -> None:
    # prims.mul rounds each float16 product to float16: BLAS cannot reproduce that.
    def body(x: Value, y: Value) -> Value:
        return prims.sum(
            prims.mul(
                prims.broadcast_in_dim(x, [3, 4, 2], [0, 1]),
                prims.broadcast_in_dim(y, [3, 4, 2], [1, 2]),
            ),
            [1],
        )

    graph = build({"x": ((3, 4), DType.float16), "y": ((4, 2), DType.float16)}, body)
    assert not contraction_steps(graph)


# -- convolution_backward: every output_mask -------------------------------------------------------------


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("mask", list(itertools.product([False, True], repeat=3)))
def test_convolution_backward_output_masks(mask: tuple[bool, bool, bool], transposed: bool) -> None:
    x, w = randn(2, 4, 7, 6), randn(4, 3, 3, 2, seed=1) if transposed else randn(6, 2, 3, 2, seed=1)
    groups = 2 if not transposed else 1
    stride, padding, dilation, output_padding = (
        [2, 1],
        [1, 0],
        [1, 2],
        [1, 0] if transposed else [0, 0],
    )
    forward = torch.ops.aten.convolution.default(
        x, w, None, stride, padding, dilation, transposed, output_padding, groups
    )
    grad = randn(*forward.shape, seed=2)
    arguments = (
        grad,
        x,
        w,
        [forward.shape[1]],
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        list(mask),
    )
    call = AtenCall("aten.convolution_backward.default", arguments, {})
    # torch's CPU kernel also returns grad_weight when only grad_bias is asked for; its meta
    # (what torch.export records) and the schema's output_mask say None, as our rule does.
    expected = [t if wanted else None for t, wanted in zip(torch_outputs(call), mask)]
    graph, arrays = build_graph(call, expected)
    lowered = lower(graph)
    assert len(lowered.outputs) == sum(mask)
    # Only the requested gradients are computed: one contraction each for input and weight.
    assert len(contraction_steps(lowered)) == int(mask[0]) + int(mask[1])
    ours = execute(lowered, arrays, check=True)
    for verdict in judge_outputs(call, ours, [t.numpy() for t in expected if t is not None]):
        assert verdict, verdict.message


# -- memory ---------------------------------------------------------------------------------------------


def test_large_matrix_product_memory() -> None:
    """mm of two 4096² float32 matrices: no M·K·N product, peak under 3x inputs + output."""
    n = 4096
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    graph = build(
        {"a": ((n, n), DType.float32), "b": ((n, n), DType.float32)}, lambda a, b: _mm(a, b)
    )
    assert len(contraction_steps(graph)) == 1
    tracemalloc.start()
    try:
        (result,) = execute(graph, {"a": a, "b": b})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    budget = 3 * (a.nbytes + b.nbytes + result.nbytes)
    assert peak < budget, f"peak {peak / 2**20:.0f} MiB exceeds {budget / 2**20:.0f} MiB"
    rows = rng.choice(n, 8, replace=False)
    np.testing.assert_allclose(
        result[rows], a[rows].astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-2
    )


def _mm(a: Value, b: Value) -> Value:
    from decompositions.registry import aten

    return aten.mm.default(a, b)


def _random_operand(
    generator: np.random.Generator, labels: list[int], sizes: list[int], dtype: type
) -> np.ndarray:
    """An operand of the labels' sizes in one of the layouts the engine must handle: row-major,
    a transposed view, or a broadcast view (zero strides) along one of its labels."""
    shape = [sizes[label] for label in labels]
    layout = generator.integers(3)
    if layout == 1 and len(shape) > 1:
        return (generator.standard_normal(shape[::-1]) * 4).astype(dtype).T
    if layout == 2 and shape:
        axis = int(generator.integers(len(shape)))
        narrow = [1 if i == axis else n for i, n in enumerate(shape)]
        return np.broadcast_to((generator.standard_normal(narrow) * 4).astype(dtype), shape)
    return (generator.standard_normal(shape) * 4).astype(dtype)


def _einsum_by_joint_product(
    a: np.ndarray,
    a_labels: list[int],
    b: np.ndarray,
    b_labels: list[int],
    out_labels: list[int],
    sizes: list[int],
) -> np.ndarray:
    """The contraction the slow way: both operands broadcast to the joint shape, multiplied,
    summed over the labels the output drops, then broadcast along the output's other labels."""

    def joint(x: np.ndarray, labels: list[int]) -> np.ndarray:
        order = sorted(range(len(labels)), key=lambda axis: labels[axis])
        shape = [sizes[label] if label in labels else 1 for label in range(len(sizes))]
        return np.broadcast_to(x.transpose(order).reshape(shape), sizes)

    product = joint(a, a_labels) * joint(b, b_labels)
    reduced = tuple(label for label in range(len(sizes)) if label not in out_labels)
    summed = product.sum(axis=reduced, dtype=a.dtype)
    kept = sorted(out_labels)
    return np.ascontiguousarray(summed.transpose([kept.index(label) for label in out_labels]))


@pytest.mark.parametrize("budget", [None, 64, 512])
@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_engine_agrees_with_the_joint_product(budget: int | None, dtype: type) -> None:
    """The engine alone, on random label sets (batch, free, contracted and lone reduced labels,
    output labels neither operand has, size-1 and zero-stride dims, transposed operands), with
    the default tuning and with tiny chunks: its result equals the joint product's sum (exactly,
    for integers), and the epilogue sees every output element exactly once."""
    tuning = DEFAULT_TUNING
    if budget is not None:
        tuning = attrs.evolve(
            DEFAULT_TUNING, copy_chunk_bytes=budget, output_chunk_bytes=budget, min_chunk_columns=4
        )
    generator = np.random.default_rng(0)
    chunked = spread = 0
    for _ in range(150):
        count = int(generator.integers(1, 6))
        sizes = [int(generator.integers(1, 6)) for _ in range(count)]
        a_labels = [
            int(label) for label in generator.permutation(count) if generator.random() < 0.7
        ]
        b_labels = [
            int(label) for label in generator.permutation(count) if generator.random() < 0.7
        ]
        out_labels = [
            int(label) for label in generator.permutation(count) if generator.random() < 0.5
        ]
        a = _random_operand(generator, a_labels, sizes, dtype)
        b = _random_operand(generator, b_labels, sizes, dtype)
        expected = _einsum_by_joint_product(a, a_labels, b, b_labels, out_labels, sizes)
        out = np.empty(expected.shape, dtype)
        seen = np.zeros(expected.shape, np.int64)

        def epilogue(
            index: tuple[slice, ...], out: np.ndarray = out, seen: np.ndarray = seen
        ) -> None:
            seen[index] += 1
            out[index] *= 3

        recipe = plan_contraction(
            a, a_labels, b, b_labels, out_labels, sizes, with_epilogue=True, tuning=tuning
        )
        recipe.run(a, b, out, epilogue)
        chunked += bool(recipe.levels)
        # chunks of an output with size-1 dims neither operand has (a convolution's group)
        spread += bool(recipe.levels) and recipe.present_axes is not None
        assert (seen == 1).all()
        if dtype is np.int64:
            np.testing.assert_array_equal(out, 3 * expected)
        else:
            np.testing.assert_allclose(out, 3 * expected, rtol=1e-12, atol=1e-12)
        # `contract` (plan and run, no epilogue) into a fresh array.
        fresh = contract(a, a_labels, b, b_labels, out_labels, sizes, tuning=tuning)
        np.testing.assert_allclose(fresh, expected, rtol=1e-12, atol=1e-12)
    assert chunked or budget != 64  # the tiniest chunks split many of these contractions
    assert spread or budget != 64


@pytest.mark.parametrize(("rows", "swapped"), [(8, True), (128, True), (256, False), (1, False)])
def test_small_batch_by_transposed_weight_runs_swapped(rows: int, swapped: bool) -> None:
    """x[M, K] @ W^T with W row-major (a linear layer's weight, float32) runs as (W @ x^T)^T for
    M up to SWAP_ROWS (OpenBLAS is faster with the long side first); the result is the same
    matrix product, into the row-major output, with the epilogue applied."""
    generator = np.random.default_rng(0)
    x = generator.standard_normal((rows, 64)).astype(np.float32)
    weight = generator.standard_normal((512, 64)).astype(np.float32)
    sizes = [rows, 64, 512]
    recipe = plan_contraction(x, [0, 1], weight.T, [1, 2], [0, 2], sizes)
    assert recipe.swapped is swapped and not recipe.levels
    result = np.empty((rows, 512), np.float32)
    recipe.run(x, weight.T, result)
    np.testing.assert_allclose(
        result, x.astype(np.float64) @ weight.T.astype(np.float64), rtol=1e-5, atol=1e-4
    )
    # float64 and row-major weights keep the direct product.
    x64, weight64 = x.astype(np.float64), weight.T.astype(np.float64)
    assert not plan_contraction(x64, [0, 1], weight64, [1, 2], [0, 2], sizes).swapped
    row_major = np.ascontiguousarray(weight.T)
    assert not plan_contraction(x, [0, 1], row_major, [1, 2], [0, 2], sizes).swapped


@pytest.mark.parametrize(
    ("rows", "depth", "columns", "axis"),
    [(512, 1024, 256, 1), (792, 768, 192, 1), (4096, 256, 256, 0), (512, 512, 96, 0)],
)
def test_a_product_in_parts_splits_its_rows_only_where_they_stay_long(
    rows: int, depth: int, columns: int, axis: int
) -> None:
    """A product made in parts splits its rows where each part keeps row_part_min_rows of
    them or its columns cannot be split (96 columns: one part of 64), else its columns; the
    parts make the product."""
    generator = np.random.default_rng(1)
    x = generator.standard_normal((rows, depth)).astype(np.float32)
    weight = generator.standard_normal((columns, depth)).astype(np.float32)
    recipe = plan_contraction(x, [0, 1], weight.T, [1, 2], [0, 2], [rows, depth, columns])
    assert recipe.parts is not None and not recipe.levels
    part_axis, bounds = recipe.parts
    assert part_axis == axis and len(bounds) >= 2
    if axis == 0 and columns >= 2 * DEFAULT_TUNING.min_part_rows:
        assert all(stop - start >= DEFAULT_TUNING.row_part_min_rows for start, stop in bounds)
    result = np.empty((rows, columns), np.float32)
    recipe.run(x, weight.T, result)
    np.testing.assert_allclose(
        result, x.astype(np.float64) @ weight.T.astype(np.float64), rtol=1e-5, atol=1e-3
    )


def test_addmm_with_transposed_weight_matches_torch() -> None:
    """A linear layer as exported: addmm(bias, x, weight^T) with the weight row-major, so its
    transpose is a view: the swapped product with its bias epilogue, checked against torch."""
    x, weight, bias = randn(8, 96), randn(384, 96, seed=1), randn(384, seed=2)
    graph, inputs, _ = lowered_call("aten.addmm.default", bias, x, weight.t())
    (name,) = [n for n, a in inputs.items() if a.shape == (96, 384)]
    inputs[name] = weight.numpy().T  # the transposed view
    (ours,) = execute(graph, inputs)
    assert [recipe.swapped for recipe in contraction_recipes(graph)] == [True]
    expected = torch.addmm(bias, x, weight.t()).numpy()
    verdict = compare(ours, expected)
    assert verdict.ok, verdict.message


# -- contractions without labels of one operand's own: sums of elementwise products -----------


DEPTHWISE = [
    # (N, C, H, W, kernel, stride, padding, dilation, bias)
    (1, 6, 12, 12, 3, 1, 1, 1, True),  # rows merged into one run
    (2, 5, 9, 11, 7, 1, 3, 1, True),  # ConvNeXt's kernel
    (2, 4, 15, 17, 3, 2, 1, 1, True),  # strided: phase images
    (1, 6, 16, 16, 3, 2, 0, 1, True),  # strided, no padding (even size)
    (2, 3, 13, 11, 5, 2, 2, 2, False),  # strided and dilated
    (2, 4, 16, 13, 5, 2, 2, 1, True),  # EfficientNet's strided 5x5: phase images
    (1, 4, 9, 10, 3, 3, 1, 1, True),  # stride 3
    (1, 7, 8, 8, 3, 2, 1, 1, True),  # strided, more channels than a chunk's budget below
    (1, 3, 10, 13, 5, 1, 4, 2, False),  # dilated, no bias
    (1, 4, 9, 9, 3, 1, 0, 1, True),  # no padding
    (3, 5, 1, 7, 3, 1, 1, 1, True),  # one row
    (1, 1, 6, 6, 3, 1, 1, 1, False),  # one channel
    (2, 6, 7, 7, 7, 1, 3, 1, True),  # ConvNeXt's last stage: padding columns 6 of 13
]


def _depthwise_convolution(case: tuple[int, ...], dtype: torch.dtype) -> tuple[Any, Any, Any]:
    """The lowered depthwise convolution of a DEPTHWISE case, its inputs and its call, on an
    input holding NaN, -0.0 and inf, and a channel of zero weights over negative inputs
    (products -0.0: the sum must be +0.0)."""
    n, c, h, w, k, stride, padding, dilation, bias = case
    x = randn(n, c, h, w, dtype=dtype)
    x[0, 0, 0, :2] = torch.tensor([float("nan"), -0.0])
    x[-1, -1, -1, -1] = float("inf")
    weight = randn(c, 1, k, k, dtype=dtype, seed=1)
    weight[-1] = 0.0
    x[:, -1] = -x[:, -1].abs() - 1
    return lowered_call(
        "aten.convolution.default",
        x,
        weight,
        randn(c, dtype=dtype, seed=2) if bias else None,
        [stride, stride],
        [padding, padding],
        [dilation, dilation],
        False,
        [0, 0],
        c,
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", DEPTHWISE)
def test_depthwise_convolution_runs_as_products_and_matches_torch(
    case: tuple[int, ...], dtype: torch.dtype
) -> None:
    _, _, h, w, k, stride, padding, dilation, _ = case
    graph, inputs, call = _depthwise_convolution(case, dtype)
    fused, unfused = run_both_ways(graph, inputs)
    (recipe,) = contraction_recipes(graph)
    assert isinstance(recipe, MultiplyAccumulateRecipe)
    # Strided: 3x3 windows gathered directly, larger kernels through phase images.
    assert (recipe.window_strides is not None) == (stride > 1 and k * k <= 12)
    assert (recipe.phases is not None) == (stride > 1 and k * k > 12)
    assert recipe.gathered  # a per-channel kernel: the runs summed by matrix-vector products
    rows = (h + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    columns = (w + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    # 7x7 kernels at stride 1 gather 7 shifted copies, not 49 runs; 3x3 ones 3 copies on images
    # of 7x7 and more, the runs on smaller ones (the copies' extra rows then weigh).
    if (stride, k) == (1, 7):
        assert recipe.copies is not None
    elif k == 3:
        assert (recipe.copies is not None) == (stride == 1 and min(rows, columns) >= 7)
    assert recipe.out_view[-2] == rows  # merged
    assert_agree(fused, unfused, "unfused execution")
    outcome = run_call(call)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", DEPTHWISE)
def test_a_padding_fused_with_its_depthwise_product_gives_the_padded_inputs_bits(
    case: tuple[int, ...],
    dtype: torch.dtype,
    channels_last: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The zero padding, its windows and the depthwise product as one step (padded_products.py):
    where the product reads the unpadded input itself (shifted copies of a stride-1 kernel over
    merged rows, a strided kernel's gathered windows or phase images; a C-contiguous input;
    from the second call on: the first makes the padded input and plans), and where it makes
    the padded input (a dilated kernel's phase images, one row, channels-last), the bits of the
    three steps over the padded input, and torch's values."""
    n, c, h, w, k, stride, padding, dilation, _ = case
    graph, inputs, call = _depthwise_convolution(case, dtype)
    (name,) = [name for name, array in inputs.items() if array.shape == (n, c, h, w)]
    if channels_last:  # the same values, channels innermost in memory
        inputs[name] = np.ascontiguousarray(inputs[name].transpose(0, 2, 3, 1)).transpose(
            0, 3, 1, 2
        )
    with mkl.disabled():  # MKL's batched axpys read the padded input
        calls = [execute(graph, inputs) for _ in range(3)]
        monkeypatch.setattr(plan, "FUSE_PADDINGS", False)
        twin = Graph(graph.name, list(graph.inputs), list(graph.nodes), list(graph.outputs))
        (padded,) = execute(twin, inputs)
    for (ours,) in calls:
        assert ours.tobytes() == padded.tobytes()
    fused = [s.kernel for s in plan_for(graph).steps if isinstance(s.kernel, PaddedContraction)]
    assert len(fused) == (1 if padding else 0)
    (recipe,) = contraction_recipes(graph)
    rows = (h + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    # Phase images read the source when their rows are the padded rows (not dilated ones).
    padded_row = (w + 2 * padding) * inputs[name].itemsize
    phase_rows = recipe.phases is not None and recipe.phases.row_bytes == padded_row
    runs_read = (
        recipe.window_strides is not None or (recipe.copies is not None and rows > 1) or phase_rows
    )
    reads = runs_read and not channels_last
    assert [kernel.reads_source() for kernel in fused] == [reads] * len(fused)
    if (stride, padding, channels_last) == (1, k // 2 * dilation, False) and rows > 6:
        assert reads, "a stride-1 2-d kernel's shifted copies read the unpadded input"
    outcome = run_call(call)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("case", [case for case in DEPTHWISE if case[6]])
def test_products_of_zero_padded_inputs_write_every_scratch_position_they_read(
    case: tuple[int, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The products that read a zero padding's source (shifted copies, strided windows, phase
    images) write every position of the thread's scratch buffers they read, zeros for the
    padding's: with every kept buffer filled with NaN before each call, the bits of the padded
    input's."""
    graph, inputs, _ = _depthwise_convolution(case, torch.float32)
    with mkl.disabled():  # MKL's batched axpys read the padded input
        execute(graph, inputs, threads=1)  # plans: the source is read from the next call on
        calls = []
        for _ in range(2):
            # The thread's kept buffers (private: no API lists them).
            for kept in kept_buffers._KEPT.buffers.values():
                kept.buffer.fill(0xFF)  # float NaN
            calls.append(execute(graph, inputs, threads=1))
        monkeypatch.setattr(plan, "FUSE_PADDINGS", False)
        twin = Graph(graph.name, list(graph.inputs), list(graph.nodes), list(graph.outputs))
        (padded,) = execute(twin, inputs)
    for (ours,) in calls:
        assert ours.tobytes() == padded.tobytes()


@pytest.mark.parametrize(
    ("case", "masked"),
    [
        ((2, 5, 9, 11, 7, 1, 3, 1, True), True),  # 11 columns, a 7x7 kernel
        ((2, 6, 7, 7, 7, 1, 3, 1, True), True),  # ConvNeXt's last stage
        ((1, 3, 10, 13, 5, 1, 4, 2, False), True),  # dilated 5x5: shifts of 2 and 4
        ((2, 4, 12, 12, 3, 1, 1, 1, True), False),  # 3x3: runs of one element, call by call
        ((1, 2, 20, 20, 5, 1, 2, 1, True), False),  # 20 columns: call by call
    ],
)
def test_shifted_copies_zero_the_padding_by_a_mask_or_call_by_call_alike(
    case: tuple[int, ...], masked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shifted copies read from a zero padding's source zero the positions the padding holds
    with one AND of their bits (narrow images, copies shifted by 2 columns and more) or call
    by call: the same bits, every chunk's scratch filled with NaN before it is used. Chunks of
    one channel: all but the first and last read every copy in one strided copy."""
    monkeypatch.setattr(multiply_accumulate, "GATHER_BYTES", 1)
    graph, inputs, _ = _depthwise_convolution(case, torch.float32)
    masks: list[Any] = []
    kept_positions, kept_buffer = (
        multiply_accumulate._kept_positions,
        multiply_accumulate.kept_buffer,
    )

    def recorded(*arguments: Any) -> Any:
        masks.append(kept_positions(*arguments))
        return masks[-1]

    def filled(*arguments: Any) -> np.ndarray:
        buffer = kept_buffer(*arguments)
        buffer.view(np.uint8).fill(0xFF)  # float NaN
        return buffer

    monkeypatch.setattr(multiply_accumulate, "_kept_positions", recorded)
    monkeypatch.setattr(multiply_accumulate, "kept_buffer", filled)
    outputs = []
    with mkl.disabled():  # MKL's batched axpys read the padded input
        for most_columns in (multiply_accumulate.MASK_MAX_COLUMNS, -1):
            monkeypatch.setattr(multiply_accumulate, "MASK_MAX_COLUMNS", most_columns)
            kept_positions.cache_clear()
            execute(graph, inputs, threads=1)  # plans: the source is read from the next call on
            masks.clear()
            (result,) = execute(graph, inputs, threads=1)
            outputs.append(result.tobytes())
            assert len(masks) == 1, "the product read the padding's source"
            assert (masks[0] is not None) == (masked and most_columns >= 0)
        monkeypatch.setattr(plan, "FUSE_PADDINGS", False)
        twin = Graph(graph.name, list(graph.inputs), list(graph.nodes), list(graph.outputs))
        (padded,) = execute(twin, inputs)
    kept_positions.cache_clear()
    assert outputs[0] == outputs[1] == padded.tobytes()


@pytest.mark.parametrize(
    ("kernel", "stride", "padding", "dilation"),
    [
        ((3, 3), (2, 1), (1, 1), (1, 1)),  # rows strided only
        ((3, 3), (1, 2), (1, 0), (1, 1)),  # columns strided only
        ((3, 1), (2, 2), (1, 0), (1, 1)),  # one reduced label, along the rows
        ((1, 5), (2, 3), (0, 2), (1, 2)),  # one reduced label, along the columns, dilated
    ],
)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("windows", [False, True])
def test_strided_depthwise_convolutions_run_on_phase_images(
    kernel: tuple[int, int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
    channels_last: bool,
    windows: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Strides along one axis or both, kernels reducing over one axis, channels-last inputs, and
    chunks of one channel (a small budget): the phase images, and the windows gathered
    directly, agree with the unfused products."""
    monkeypatch.setattr(multiply_accumulate, "CHUNK_BYTES", 256)
    monkeypatch.setattr(multiply_accumulate, "PHASE_CHUNK_BYTES", 256)
    monkeypatch.setattr(multiply_accumulate, "GATHER_BYTES", 256)
    if not windows:
        monkeypatch.setattr(multiply_accumulate, "WINDOW_MAX_POSITIONS", 0)
    x = randn(2, 5, 11, 14)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    graph, inputs, call = lowered_call(
        "aten.convolution.default",
        x,
        randn(5, 1, *kernel, seed=1),
        randn(5, seed=2),
        list(stride),
        list(padding),
        list(dilation),
        False,
        [0, 0],
        5,
    )
    fused, unfused = run_both_ways(graph, inputs)
    (recipe,) = contraction_recipes(graph)
    assert isinstance(recipe, MultiplyAccumulateRecipe)
    assert (recipe.phases is None) == windows
    assert (recipe.window_strides is not None) == windows
    assert recipe.chunk == 1
    assert_agree(fused, unfused, "unfused execution")
    outcome = run_call(call)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize(
    ("shape", "kernel", "padding", "dilation"),
    [
        ((2, 5, 9, 11), (3, 3), (1, 1), (1, 1)),
        ((1, 3, 10, 13), (5, 5), (4, 4), (2, 2)),  # dilated
        ((3, 5, 1, 7), (3, 3), (1, 1), (1, 1)),  # one row
        ((1, 4, 9, 10), (3, 5), (0, 2), (1, 1)),  # no row padding
        ((1, 4, 5, 6, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1)),  # 3-d: two labels offset the copies
    ],
)
@pytest.mark.parametrize("budget", [64, 1 << 20])
def test_shifted_copies_agree(
    shape: tuple[int, ...],
    kernel: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    budget: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gathered runs as shifted copies (forced, whatever the traffic), in chunks of one index of
    the chunked dim (channels; depth in 3-d) or of all: they agree with the unfused products
    and with torch."""
    monkeypatch.setattr(multiply_accumulate, "COPIES_MAX_TRAFFIC", math.inf)
    monkeypatch.setattr(multiply_accumulate, "GATHER_BYTES", budget)
    channels = shape[1]
    x = randn(*shape)
    x[0, 0].view(-1)[:2] = torch.tensor([float("nan"), float("inf")])
    graph, inputs, call = lowered_call(
        "aten.convolution.default",
        x,
        randn(channels, 1, *kernel, seed=1),
        randn(channels, seed=2),
        [1] * len(kernel),
        list(padding),
        list(dilation),
        False,
        [0] * len(kernel),
        channels,
    )
    fused, unfused = run_both_ways(graph, inputs)
    (recipe,) = contraction_recipes(graph)
    assert isinstance(recipe, MultiplyAccumulateRecipe)
    assert recipe.copies is not None
    assert recipe.chunk == (1 if budget == 64 else recipe.chunked)
    assert_agree(fused, unfused, "unfused execution")
    outcome = run_call(call)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("gather", [True, False])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("budget", [64, 1 << 20])
def test_products_in_chunks_agree(
    budget: int, stride: int, gather: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of one channel (a tiny budget) or of all, the runs gathered or multiply-added (a
    channel's gathered runs over the limit): every chunk and the bias epilogue on it."""
    monkeypatch.setattr(multiply_accumulate, "CHUNK_BYTES", budget)
    monkeypatch.setattr(multiply_accumulate, "GATHER_BYTES", budget)
    monkeypatch.setattr(multiply_accumulate, "COPIES_MAX_TRAFFIC", 0.0)  # runs, not copies
    if not gather:
        monkeypatch.setattr(multiply_accumulate, "GATHER_MAX_BYTES", 0)
    graph, inputs, call = lowered_call(
        "aten.convolution.default",
        randn(2, 6, 8, 9),
        randn(6, 1, 3, 3, seed=1),
        randn(6, seed=2),
        [stride, stride],
        [1, 1],
        [1, 1],
        False,
        [0, 0],
        6,
    )
    fused, unfused = run_both_ways(graph, inputs)
    (recipe,) = contraction_recipes(graph)
    assert isinstance(recipe, MultiplyAccumulateRecipe)
    assert recipe.gathered == gather
    assert recipe.chunk == (1 if budget == 64 else 6)
    assert_agree(fused, unfused, "unfused execution")
    outcome = run_call(call)
    assert outcome.passed, outcome.message


def test_products_need_few_positions_and_short_steps() -> None:
    """A matrix-vector product (4096 reduced positions) and products whose output runs step 64
    elements stay with the matrix engine; a small window does not."""
    matrix = np.ones((8, 4096), np.float32)
    vector = np.ones(4096, np.float32)
    assert plan_multiply_accumulate(matrix, (0, 1), vector, (1,), (0,), (8, 4096)) is None
    rows = np.ones((100, 64), np.float32)
    assert plan_multiply_accumulate(rows, (0, 1), vector[:64], (1,), (0,), (100, 64)) is None
    window = np.lib.stride_tricks.as_strided(np.ones(20, np.float32), (18, 3), (4, 4))
    recipe = plan_multiply_accumulate(window, (0, 1), vector[:3], (1,), (0,), (18, 3))
    assert isinstance(recipe, MultiplyAccumulateRecipe)
    out = np.empty(18, np.float32)
    recipe.run_into(window, vector[:3], out)
    np.testing.assert_array_equal(out, np.full(18, 3, np.float32))


@pytest.mark.parametrize(
    ("shape", "kernel"),
    [((2, 6, 17), (3,)), ((1, 4, 5, 6, 7), (3, 3, 3)), ((2, 3, 9, 9), (1, 5))],
)
def test_depthwise_convolutions_of_other_ranks_run_as_products(
    shape: tuple[int, ...], kernel: tuple[int, ...]
) -> None:
    """1-d (the weight differs per channel: no run merges channels), 3-d and a 1x5 kernel."""
    channels, spatial = shape[1], len(kernel)
    graph, inputs, call = lowered_call(
        "aten.convolution.default",
        randn(*shape),
        randn(channels, 1, *kernel, seed=1),
        randn(channels, seed=2),
        [1] * spatial,
        [k // 2 for k in kernel],
        [1] * spatial,
        False,
        [0] * spatial,
        channels,
    )
    fused, unfused = run_both_ways(graph, inputs)
    (recipe,) = contraction_recipes(graph)
    assert isinstance(recipe, MultiplyAccumulateRecipe)
    assert_agree(fused, unfused, "unfused execution")
    outcome = run_call(call)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("use_mkl", [True, False])
def test_depthwise_chunks_on_threads_give_one_threads_bits(
    use_mkl: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunks of a depthwise product (gathered runs or shifted copies; strided: windows or
    phase images), and with MKL the parts of its batched axpys (strided: over phase images),
    are shared among the call's threads: every thread count gives the bits of one."""
    if use_mkl and mkl.library() is None:
        pytest.skip(mkl.unavailable_reason)
    monkeypatch.setattr(multiply_accumulate, "CHUNK_BYTES", 512)
    monkeypatch.setattr(multiply_accumulate, "PHASE_CHUNK_BYTES", 512)
    monkeypatch.setattr(multiply_accumulate, "GATHER_BYTES", 4096)
    monkeypatch.setattr(multiply_accumulate, "AXPY_PART_BYTES", 1024)
    with contextlib.nullcontext() if use_mkl else mkl.disabled():
        _assert_depthwise_thread_counts_agree(monkeypatch)


def _assert_depthwise_thread_counts_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    regions: list[int] = []
    shared = multiply_accumulate.run_parts

    def counted(parts: list[Callable[[], None]]) -> None:
        regions.append(len(parts))
        shared(parts)

    monkeypatch.setattr(multiply_accumulate, "run_parts", counted)
    # Runs, shifted copies (forced), strided windows, phase images.
    for stride, windows, copies in ((1, 12, 0.0), (1, 12, math.inf), (2, 12, 0.0), (2, 0, 0.0)):
        monkeypatch.setattr(multiply_accumulate, "WINDOW_MAX_POSITIONS", windows)
        monkeypatch.setattr(multiply_accumulate, "COPIES_MAX_TRAFFIC", copies)
        graph, inputs, _ = lowered_call(
            "aten.convolution.default",
            randn(3, 8, 13, 12),
            randn(8, 1, 3, 3, seed=1),
            randn(8, seed=2),
            [stride, stride],
            [1, 1],
            [1, 1],
            False,
            [0, 0],
            8,
        )
        one = execute(graph, inputs, threads=1)
        (recipe,) = contraction_recipes(graph)
        assert recipe.chunk < recipe.chunked or recipe.outer_shape
        assert (recipe.copies is not None) == (copies > 0)
        assert recipe.axpy is not None
        assert (recipe.axpy.phases is not None) == (stride == 2)
        assert len(recipe.axpy.parts) == 3 * 8, "one channel per part (of 1 KiB)"
        regions.clear()
        for threads in (2, 3):
            many = execute(graph, inputs, threads=threads)
            assert [o.tobytes() for o in many] == [o.tobytes() for o in one], (stride, windows)
        # Each call hands its chunks (or parts) to the threads as one region of several.
        assert len(regions) == 2 and min(regions) > 1, regions


needs_mkl = pytest.mark.skipif(
    mkl.library() is None, reason=f"MKL is not available: {mkl.unavailable_reason}"
)

# (N, C, spatial...), kernel, stride, padding, dilation
AXPY_CASES = [
    ((2, 5, 12, 12), (3, 3), (1, 1), (1, 1), (1, 1)),  # merged rows
    ((2, 6, 9, 11), (7, 7), (1, 1), (3, 3), (1, 1)),  # ConvNeXt's (shifted copies without MKL)
    ((1, 4, 10, 13), (5, 5), (1, 1), (4, 4), (2, 2)),  # dilated
    ((2, 3, 9, 9), (3, 3), (1, 1), (0, 0), (1, 1)),  # no padding
    ((2, 6, 17), (3,), (1,), (1,), (1,)),  # 1-d: one run per channel
    ((1, 4, 5, 6, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1)),  # 3-d
    ((2, 5, 15, 17), (3, 3), (2, 2), (1, 1), (1, 1)),  # strided: phase images
    ((1, 4, 16, 13), (5, 5), (2, 2), (2, 2), (1, 1)),  # EfficientNet's strided 5x5
    ((1, 3, 10, 11), (3, 3), (3, 2), (1, 1), (1, 1)),  # strides of 3 and 2
]


@needs_mkl
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", AXPY_CASES)
def test_depthwise_products_as_batched_axpys(
    case: tuple[tuple[int, ...], ...], dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With MKL, a depthwise product runs as MKL's batched axpys, part by part (small parts
    here; strided: over phase images): it agrees with the NumPy chunks (MKL disabled), with the
    unfused products and with torch, NaN and inf included; a channel of -0.0 inputs sums to
    +0.0, as torch's does."""
    shape, kernel, stride, padding, dilation = case
    monkeypatch.setattr(multiply_accumulate, "AXPY_PART_BYTES", 256)
    channels = shape[1]
    x = randn(*shape, dtype=dtype)
    x[0, 0].view(-1)[:2] = torch.tensor([float("nan"), float("inf")], dtype=dtype)
    x[:, -1] = -0.0
    weight = randn(channels, 1, *kernel, dtype=dtype, seed=1).abs() + 0.5  # no zero weight
    graph, inputs, call = lowered_call(
        "aten.convolution.default",
        x,
        weight,
        None,
        list(stride),
        list(padding),
        list(dilation),
        False,
        [0] * len(kernel),
        channels,
    )
    fused, unfused = run_both_ways(graph, inputs)
    (recipe,) = contraction_recipes(graph)
    assert isinstance(recipe, MultiplyAccumulateRecipe)
    assert recipe.axpy is not None and len(recipe.axpy.parts) > shape[0]
    assert (recipe.axpy.phases is not None) == (max(stride) > 1)
    assert_agree(fused, unfused, "unfused execution")
    last = fused[0][:, -1]
    assert not np.signbit(last).any() and not last.any(), "-0.0 products sum to +0.0"
    with mkl.disabled():
        twin = Graph(graph.name, list(graph.inputs), list(graph.nodes), list(graph.outputs))
        numpy_chunks = execute(twin, inputs, check=True)
    assert_agree(fused, numpy_chunks, "the NumPy chunks")
    outcome = run_call(call)
    assert outcome.passed, outcome.message


@needs_mkl
def test_a_zero_weight_takes_the_numpy_chunks() -> None:
    """MKL's axpy skips a problem whose weight is zero (BLAS's quick return), where 0 * inf must
    be NaN: a kernel holding a zero runs as the NumPy chunks, which torch agrees with."""
    x = randn(1, 3, 6, 6)
    x[0, 1, 2, 3] = float("inf")
    weight = randn(3, 1, 3, 3, seed=1).abs() + 0.5
    weight[1, 0, 1, 1] = 0.0  # the centre tap: reads the inf at (2, 3) itself
    graph, inputs, call = lowered_call(
        "aten.convolution.default", x, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 3
    )
    (result,) = execute(graph, inputs)
    (recipe,) = contraction_recipes(graph)
    assert recipe.axpy is not None
    assert np.isnan(result[0, 1, 2, 3]), "0 * inf"
    outcome = run_call(call)
    assert outcome.passed, outcome.message


# -- dense convolutions as shifted products -------------------------------------------------------

# (N, C_in, C_out, spatial sizes, kernel, padding, dilation, groups, bias, dtype), each large
# enough for the shifted products (ContractionTuning.shifted_min_columns, MKL's call size).
SHIFTED = {
    "odd sizes": (2, 96, 64, (30, 31), 3, 1, 1, 1, True, torch.float32),
    "no padding": (4, 48, 160, (30, 23), 3, 0, 1, 1, False, torch.float32),
    "5x5, padding 2": (1, 128, 96, (21, 40), 5, 2, 1, 1, True, torch.float32),
    "dilated": (2, 64, 64, (33, 35), 3, 2, 2, 1, True, torch.float32),
    "512 channels": (1, 512, 64, (26, 27), 3, 1, 1, 1, True, torch.float32),
    "groups": (2, 128, 128, (40, 40), 3, 1, 1, 2, False, torch.float32),
    "one image in bands": (1, 128, 256, (40, 28), 3, 1, 1, 1, True, torch.float32),
    "1-d": (2, 64, 64, (2000,), 3, 1, 1, 1, True, torch.float32),
    "3-d": (1, 48, 32, (12, 14, 15), 3, 1, 1, 1, False, torch.float32),
    "float64": (2, 96, 64, (30, 31), 3, 1, 1, 1, True, torch.float64),
}


def _dense_convolution(case: str) -> tuple[Graph, dict[str, np.ndarray], AtenCall]:
    n, c_in, c_out, spatial, kernel, padding, dilation, groups, bias, dtype = SHIFTED[case]
    rank = len(spatial)
    return lowered_call(
        "aten.convolution.default",
        randn(n, c_in, *spatial, dtype=dtype),
        randn(c_out, c_in // groups, *(kernel,) * rank, dtype=dtype, seed=1),
        randn(c_out, dtype=dtype, seed=2) if bias else None,
        [1] * rank,
        [padding] * rank,
        [dilation] * rank,
        False,
        [0] * rank,
        groups,
    )


@pytest.mark.parametrize("kernels", ["mkl", "openblas", "numpy"])
@pytest.mark.parametrize("case", SHIFTED)
def test_dense_convolutions_run_as_shifted_products_and_match_torch(
    case: str, kernels: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stride-1 convolution's windows are not copied as im2col: with a gemm through ctypes
    accumulating (gemm's beta = 1: MKL's, or NumPy's OpenBLAS), a padded 2-d one reads its
    unpadded input by stacked copies (stacked_copies.py), the others read the padded input at
    each kernel offset (shifted products); with np.matmul only, the windows are copied (im2col)
    as before; all match torch."""
    graph, _, call = _dense_convolution(case)
    with contextlib.ExitStack() as stack:
        if kernels != "mkl":
            stack.enter_context(prims.mkl.disabled())
        if kernels == "numpy":
            stack.enter_context(prims.openblas.disabled())
        library = blas.library()
        assert library is {"mkl": prims.mkl.library(), "openblas": prims.openblas.library()}.get(
            kernels
        )
        assert kernels == "numpy" or library is not None
        outcome = run_call(call)
        assert outcome.passed, outcome.message
        graph, inputs, _ = _dense_convolution(case)
        shifted_runs: list[int] = []
        stacked_runs: list[int] = []
        run_shifted = contraction._shifted_product
        monkeypatch.setattr(
            contraction,
            "_shifted_product",
            lambda *args: shifted_runs.append(1) or run_shifted(*args),
        )
        run_stacked = StackedCopies.run
        monkeypatch.setattr(
            StackedCopies,
            "run",
            lambda *args: stacked_runs.append(1) or run_stacked(*args),
        )
        execute(graph, inputs)
        _, _, _, _, _, padding, *_ = SHIFTED[case]
        stacks = kernels != "numpy" and padding > 0 and len(SHIFTED[case][3]) == 2
        assert len(stacked_runs) == int(stacks)
        assert len(shifted_runs) == int(kernels != "numpy" and not stacks)
    (recipe,) = contraction_recipes(graph)
    assert recipe.shifted is not None


def test_small_dense_convolutions_copy_their_windows() -> None:
    """Products of few columns (a 7x7 image) or few channels keep im2col's copies."""
    for x, weight in (
        (randn(2, 256, 7, 7), randn(256, 256, 3, 3, seed=1)),
        (randn(1, 3, 64, 64), randn(16, 3, 3, 3, seed=1)),
    ):
        graph, inputs, _ = lowered_call(
            "aten.convolution.default", x, weight, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1
        )
        execute(graph, inputs)
        (recipe,) = contraction_recipes(graph)
        assert recipe.shifted is None


# Stacked copies (stacked_copies.py) where the copies' reads reach past the source in every
# way, each large enough for the shifted products they replace (`shifted_min_columns`, gemm's
# call size): (N, C_in, C_out, rows, columns, kernel, padding, dilation, groups, bias).
STACKED = {
    "3x3 same": (2, 64, 96, 40, 41, (3, 3), (1, 1), (1, 1), 1, True),
    "padding wider than the kernel": (2, 64, 64, 37, 39, (3, 3), (3, 2), (1, 1), 1, True),
    "3x5 kernel, uneven padding": (1, 64, 96, 45, 41, (3, 5), (0, 2), (1, 1), 1, False),
    "2x3 kernel": (2, 64, 64, 40, 36, (2, 3), (1, 1), (1, 1), 1, True),
    "dilated, not same": (2, 64, 64, 36, 35, (3, 3), (1, 3), (2, 2), 1, True),
    "groups": (2, 128, 128, 48, 48, (3, 3), (1, 1), (1, 1), 2, False),
    "one image in bands": (1, 96, 160, 40, 30, (3, 3), (1, 1), (1, 1), 1, True),
}


@pytest.mark.parametrize("case", STACKED)
def test_stacked_copies_match_torch_with_one_threads_bits(case: str) -> None:
    """A padded 2-d convolution whose products read its unpadded input by stacked copies: its
    padding step is gone (one step), its first call makes the products later calls make, and
    every thread count gives one thread's bits; all match torch."""
    n, c_in, c_out, rows, columns, kernel, padding, dilation, groups, bias = STACKED[case]
    graph, inputs, call = lowered_call(
        "aten.convolution.default",
        randn(n, c_in, rows, columns),
        randn(c_out, c_in // groups, *kernel, seed=1),
        randn(c_out, seed=2) if bias else None,
        [1, 1],
        list(padding),
        list(dilation),
        False,
        [0, 0],
        groups,
    )
    outcome = run_call(call)
    assert outcome.passed, outcome.message
    one = execute(graph, inputs, threads=1)
    (step,) = contraction_steps(graph)
    assert type(step.kernel) is PaddedContraction and step.kernel.stacks_copies()
    assert not any(type(s.kernel) is FilledScatter for s in plan_for(graph).steps)
    assert_one_threads_bits(graph, inputs, one)


def test_unstacked_padded_convolutions_keep_their_padding_step() -> None:
    """A padded dense convolution whose products do not stack copies (a kernel of one column,
    a strided one, a small image's im2col) keeps its padding step and its products, as before."""
    for weight, stride, size in (
        (randn(32, 32, 3, 1, seed=1), 1, 40),
        (randn(32, 32, 3, 3, seed=1), 2, 40),
        (randn(256, 256, 3, 3, seed=1), 1, 7),
    ):
        graph, inputs, call = lowered_call(
            "aten.convolution.default",
            randn(2, weight.shape[1], size, size),
            weight,
            None,
            [stride, stride],
            [1, 1],
            [1, 1],
            False,
            [0, 0],
            1,
        )
        assert run_call(call).passed
        execute(graph, inputs)
        assert any(type(s.kernel) is FilledScatter for s in plan_for(graph).steps)
        assert not any(type(s.kernel) is PaddedContraction for s in plan_for(graph).steps)


def test_shifted_products_on_threads_give_one_threads_bits() -> None:
    """The shifted products' bands are shared among the call's threads: every thread count
    gives one thread's bits."""
    graph, inputs, _ = _dense_convolution("one image in bands")
    one = execute(graph, inputs, threads=1)
    (recipe,) = contraction_recipes(graph)
    assert recipe.shifted is not None and len(recipe.shifted.bands) > 1  # bands per image
    assert_one_threads_bits(graph, inputs, one)
