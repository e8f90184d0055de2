"""Transposed convolutions by stride phases (decompositions/linear.py, `_PhaseDim`): checked
against torch over a spread of strides, kernels, dilations, paddings, output paddings and groups
in 1, 2 and 3 dims (forward, and the backward whose grad_input is a transposed convolution), and
checked to multiply no inserted zeros: the fused contraction's joint product holds exactly the
products a phase needs (plus the window taps a phase shares with others, when the kernel does not
split evenly)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from test_contraction import (
    assert_agree,
    contraction_recipes,
    contraction_steps,
    lowered_call,
    randn,
    run_both_ways,
    small_chunks,
)

from aten2prims.executor import execute, plan_for
from aten2prims.testing.runner import run_call

# (input spatial, kernel, stride, padding, dilation, output_padding, groups)
CONFIGS: dict[str, tuple[Any, ...]] = {
    "k2s2 (U-Net)": ([5, 6], [2, 2], [2, 2], [0, 0], [1, 1], [0, 0], 1),
    "k4s2p1 (DCGAN)": ([4, 5], [4, 4], [2, 2], [1, 1], [1, 1], [0, 0], 1),
    "k3s2p1op1": ([5, 4], [3, 3], [2, 2], [1, 1], [1, 1], [1, 1], 1),
    "k1s3 (taps fewer than phases)": ([4, 3], [1, 1], [3, 3], [0, 0], [1, 1], [2, 0], 1),
    "k5s3 groups": ([4, 5], [5, 2], [3, 2], [2, 0], [1, 1], [0, 1], 2),
    "dilation multiple of stride": ([5, 4], [3, 2], [2, 3], [1, 2], [4, 3], [1, 0], 1),
    "dilation above stride": ([4, 4], [3, 2], [2, 2], [0, 1], [3, 5], [2, 1], 2),
    "stride 1 dilated": ([5, 6], [3, 2], [1, 1], [2, 1], [2, 3], [0, 0], 1),
    "padding beyond a phase": ([6, 5], [3, 4], [4, 3], [5, 4], [1, 2], [3, 2], 1),
    "1d": ([7], [4], [3], [2], [1], [1], 3),
    "3d": ([3, 4, 2], [2, 3, 2], [2, 2, 3], [0, 1, 1], [1, 1, 2], [1, 0, 2], 1),
}


def _transposed_call(
    config: tuple[Any, ...], dtype: torch.dtype, bias: bool = True
) -> tuple[Any, ...]:
    spatial, kernel, stride, padding, dilation, output_padding, groups = config
    x = randn(2, 3 * groups, *spatial, dtype=dtype)
    w = randn(3 * groups, 2, *kernel, dtype=dtype, seed=1)
    b = randn(2 * groups, dtype=dtype, seed=2) if bias else None
    return (x, w, b, stride, padding, dilation, True, output_padding, groups)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_transposed_convolution_matches_torch(name: str, dtype: torch.dtype) -> None:
    graph, inputs, call = lowered_call(
        "aten.convolution.default", *_transposed_call(CONFIGS[name], dtype)
    )
    outcome = run_call(call)
    assert outcome.passed, outcome.message
    fused, unfused = run_both_ways(graph, inputs)
    assert_agree(fused, unfused, "unfused execution")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_transposed_convolution(dtype: torch.dtype) -> None:
    for name in ("k3s2p1op1", "dilation above stride"):
        _, _, call = lowered_call(
            "aten.convolution.default", *_transposed_call(CONFIGS[name], dtype, bias=False)
        )
        outcome = run_call(call)
        assert outcome.passed, f"{name}: {outcome.message}"


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("name", ["k3s2p1op1", "k5s3 groups", "dilation above stride", "1d", "3d"])
def test_backward_matches_torch(name: str, transposed: bool) -> None:
    """grad_input of a strided convolution is a transposed convolution (and grad_input of a
    transposed one an ordinary convolution); the input size makes the forward windows miss
    trailing rows, which come back as output padding."""
    spatial, kernel, stride, padding, dilation, output_padding, groups = CONFIGS[name]
    x = randn(2, 3 * groups, *spatial, dtype=torch.float64)
    if transposed:
        w = randn(3 * groups, 2, *kernel, dtype=torch.float64, seed=1)
        y = torch.ops.aten.convolution.default(
            x, w, None, stride, padding, dilation, True, output_padding, groups
        )
    else:
        spatial = [
            n * s + s - 1 + d * (k - 1) for n, s, d, k in zip(spatial, stride, dilation, kernel)
        ]
        x = randn(2, 3 * groups, *spatial, dtype=torch.float64)
        w = randn(2 * groups, 3, *kernel, dtype=torch.float64, seed=1)
        y = torch.ops.aten.convolution.default(
            x, w, None, stride, padding, dilation, False, [0] * len(kernel), groups
        )
    grad = randn(*y.shape, dtype=torch.float64, seed=3)
    _, _, call = lowered_call(
        "aten.convolution_backward.default",
        grad,
        x,
        w,
        [w.shape[1] * groups if transposed else w.shape[0]],
        stride,
        padding,
        dilation,
        transposed,
        output_padding if transposed else [0] * len(kernel),
        groups,
        [True, True, True],
    )
    outcome = run_call(call)
    assert outcome.passed, outcome.message


@pytest.mark.parametrize("name", ["k2s2 (U-Net)", "k4s2p1 (DCGAN)", "k3s2p1op1", "3d"])
def test_no_product_with_inserted_zeros(name: str) -> None:
    """The joint product of the one contraction has N·C_out·C_in/groups products per output
    position and window tap; the taps per phase are ceil-ish K/s, never K (a spread input would
    make every output position multiply all K taps, most of them with zeros)."""
    config = CONFIGS[name]
    _spatial, kernel, stride, padding, dilation, _, _groups = config
    graph, _, _ = lowered_call("aten.convolution.default", *_transposed_call(config, torch.float32))
    (step,) = contraction_steps(graph)
    (anchor,) = [node for node in step.nodes if node.op == "prims.sum"]
    product = math.prod(anchor.args[0].shape)
    output = graph.outputs[0].value.shape
    taps = [(k - 1) * d // s + 1 for k, s, d in zip(kernel, stride, dilation)]
    # Phases are computed over whole strides: at most stride - 1 extra positions per dim.
    positions = math.prod(-(-(p % s + o) // s) * s for p, s, o in zip(padding, stride, output[2:]))
    assert product == output[0] * output[1] * 3 * positions * math.prod(taps)
    # With the kernel a multiple of the stride, every product is needed.
    if all(k % s == 0 for k, s in zip(kernel, stride)) and not any(padding):
        assert product == math.prod(output) * 3 * math.prod(k // s for k, s in zip(kernel, stride))
    for other in plan_for(graph).steps:
        if other is not step:
            assert all(math.prod(meta.shape) < product for meta in other.out_metas), other.node


@pytest.mark.parametrize("budget", [64, 4096])
def test_chunked_reordered_output_agrees(budget: int) -> None:
    """The phases are computed in a reordered layout and copied into the interleaved output chunk
    by chunk (executor/contraction.py); small budgets force many chunks and the bias epilogue
    runs on each."""
    for name in ("k2s2 (U-Net)", "k3s2p1op1", "3d"):
        graph, inputs, call = lowered_call(
            "aten.convolution.default", *_transposed_call(CONFIGS[name], torch.float64)
        )
        with small_chunks(budget):
            fused, unfused = run_both_ways(graph, inputs)
        assert_agree(fused, unfused, "unfused execution")
        (recipe,) = contraction_recipes(graph)
        assert recipe.reorder is not None and (recipe.levels or budget > 64)
        outcome = run_call(call)
        assert outcome.passed, f"{name}: {outcome.message}"


def test_small_phases_replay_one_recipe() -> None:
    """A small transposed convolution (no chunking) is one matrix product in the phases' order
    plus one copy into the interleaved output: the kernel's remembered direct recipe, replayed
    on every call with the same result."""
    graph, inputs, call = lowered_call(
        "aten.convolution.default", *_transposed_call(CONFIGS["k2s2 (U-Net)"], torch.float32)
    )
    first = execute(graph, inputs)
    (recipe,) = contraction_recipes(graph)
    assert recipe.reorder is not None and not recipe.levels
    again = execute(graph, inputs)
    np.testing.assert_array_equal(again[0], first[0])
    outcome = run_call(call)
    assert outcome.passed, outcome.message
