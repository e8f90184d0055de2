"""Per-channel scales folded into a product's constant weights (executor/scaled_weights.py): an
eval batch norm after a convolution or a linear layer runs as the product of the scaled weight
and one add. Not the unfolded bits: compared with torch at the existing tolerances, in every
layout the executor runs, with special values in the input, zero, -0.0 and negative scales, a
scale the caller overrides, and at one and two threads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from _plan_switches import plan_switches
from _thread_checks import assert_one_threads_bits

import aten2prims
from aten2prims.executor import plan_for
from aten2prims.executor.contraction_fusion import ContractionKernel
from aten2prims.executor.scaled_weights import _regroup
from aten2prims.frontends.fx import from_fx
from aten2prims.ir.graph import Graph, InputKind
from aten2prims.passes.lower import lower
from aten2prims.testing.compare import compare

nn = torch.nn

# (in channels, out channels, kernel, stride, groups)
LAYOUTS = {
    "1x1": (16, 32, 1, 1, 1),
    "3x3": (8, 16, 3, 1, 1),
    "3x3 strided": (8, 16, 3, 2, 1),
    "depthwise": (16, 16, 3, 1, 16),
    "depthwise strided": (16, 16, 3, 2, 16),
    "grouped": (16, 32, 3, 1, 4),
}


def conv_bn(layout: str, bias: bool, dtype: torch.dtype, seed: int = 0) -> nn.Module:
    cin, cout, kernel, stride, groups = LAYOUTS[layout]
    torch.manual_seed(seed)
    module = nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=bias),
        nn.BatchNorm2d(cout),
    )
    randomize(module[1])
    return module.to(dtype).eval()


def randomize(norm: nn.Module) -> None:
    """Running statistics and affine parameters away from their defaults, scales of both signs."""
    channels = norm.num_features
    with torch.no_grad():
        norm.weight.copy_(torch.randn(channels) * 2)
        norm.weight[0] = -1.5
        norm.bias.copy_(torch.randn(channels))
        norm.running_mean.copy_(torch.randn(channels))
        norm.running_var.copy_(torch.rand(channels) + 0.5)


def exported(module: nn.Module, x: torch.Tensor) -> Graph:
    return lower(from_fx(torch.export.export(module, (x,)).run_decompositions()))


def scaled_constants(graph: Graph, overridden: frozenset[str] = frozenset()) -> int:
    plan = plan_for(graph, overridden)
    return sum(gi.kind is InputKind.CONSTANT and gi.name.endswith("_scaled") for gi in plan.inputs)


def epilogue_passes(graph: Graph) -> list[int]:
    """Per fused product of the graph's plan: how many in-place ufunc passes its epilogue makes."""
    return [
        sum(step.ufunc is not None for step in kernel.epilogue)
        for kernel in (
            getattr(step.kernel, "contraction", step.kernel)  # a padded product's own
            for step in plan_for(graph).steps
        )
        if isinstance(kernel, ContractionKernel)
    ]


def check(graph: Graph, inputs: Any, expected: torch.Tensor) -> list[np.ndarray]:
    ours = aten2prims.execute(graph, inputs, threads=1)
    result = compare(ours[0], expected.detach().numpy())
    assert result, result.message
    assert_one_threads_bits(graph, inputs, ours, counts=(2,))
    return ours


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_conv_batch_norm_folds_and_matches_torch(layout: str, bias: bool, dtype: torch.dtype):
    module = conv_bn(layout, bias, dtype)
    x = torch.randn(2, LAYOUTS[layout][0], 12, 12, dtype=dtype)
    graph = exported(module, x)
    assert scaled_constants(graph) >= 1
    assert epilogue_passes(graph) == [1]  # the shift alone (a bias joins it)
    with torch.no_grad():
        expected = module(x)
    check(graph, [x.numpy()], expected)


@pytest.mark.parametrize("bias", [False, True])
def test_linear_batch_norm_folds_and_matches_torch(bias: bool):
    torch.manual_seed(1)
    module = nn.Sequential(nn.Linear(24, 40, bias=bias), nn.BatchNorm1d(40))
    randomize(module[1])
    module.eval()
    x = torch.randn(32, 24)  # a result (32x40) no smaller than the weight (40x24)
    graph = exported(module, x)
    assert scaled_constants(graph) >= 1
    with torch.no_grad():
        expected = module(x)
    check(graph, [x.numpy()], expected)


@pytest.mark.parametrize("layout", ["1x1", "3x3", "depthwise"])
def test_special_values_in_the_input_propagate_as_torch(layout: str):
    module = conv_bn(layout, True, torch.float32, seed=2)
    x = torch.randn(2, LAYOUTS[layout][0], 12, 12)
    x[0, 0, 3, 3] = float("inf")
    x[0, 1, 6, 6] = float("-inf")
    x[1, 0, 2, 9] = float("nan")
    x[1, 2, 5, 5] = 3e38
    graph = exported(module, x)
    assert scaled_constants(graph) >= 1
    with torch.no_grad():
        expected = module(x)
    ours = check(graph, [x.numpy()], expected)
    assert np.isnan(ours[0]).any() and np.isinf(ours[0]).any()


@pytest.mark.parametrize("zero", [0.0, -0.0])
@pytest.mark.parametrize("layout", ["1x1", "depthwise"])
def test_zero_scales_are_left_to_the_multiply(layout: str, zero: float):
    """A zero scale keeps the multiply (the sign of a zero result is y's there), still torch's."""
    module = conv_bn(layout, False, torch.float32, seed=3)
    with torch.no_grad():
        module[1].weight[1] = zero
        module[1].bias[1] = 0.0
        module[1].running_mean[1] = 0.0
    x = torch.randn(2, LAYOUTS[layout][0], 12, 12)
    x[0, 0, 3, 3] = float("inf")
    graph = exported(module, x)
    assert scaled_constants(graph) == 0
    with torch.no_grad():
        expected = module(x)
    check(graph, [x.numpy()], expected)


def test_a_scale_the_caller_overrides_is_not_folded():
    module = conv_bn("1x1", False, torch.float32, seed=4)
    x = torch.randn(2, 16, 12, 12)
    graph = exported(module, x)
    weight = next(gi.name for gi in graph.inputs if gi.target == "1.weight")
    assert scaled_constants(graph) >= 1
    assert scaled_constants(graph, frozenset({weight})) == 0
    new_weight = torch.randn(32) * 3
    with torch.no_grad():
        module[1].weight.copy_(new_weight)
        expected = module(x)
    check(graph, {"input": x.numpy(), weight: new_weight.numpy()}, expected)


def test_folding_off_gives_the_same_values_within_torch_tolerance():
    module = conv_bn("3x3", True, torch.float32, seed=5)
    x = torch.randn(2, 8, 12, 12)
    graph = exported(module, x)
    folded = aten2prims.execute(graph, [x.numpy()])[0]
    with plan_switches(FOLD_SCALES=False):
        graph = exported(module, x)  # a new graph: plans are cached per graph
        assert scaled_constants(graph) == 0
        unfolded = aten2prims.execute(graph, [x.numpy()])[0]
    assert compare(folded, unfolded)


def test_regroup_maps_a_channel_scale_through_reshapes():
    scale = np.arange(1, 33, dtype=np.float32).reshape(1, 32, 1, 1)
    grouped = _regroup(scale, (2, 32, 4, 4), (2, 4, 8, 4, 4))
    assert grouped is not None and grouped.shape == (1, 4, 8, 1, 1)
    assert np.array_equal(grouped.reshape(-1), scale.reshape(-1))
    assert _regroup(scale, (2, 32, 4, 4), (2, 1, 32, 4, 4)).shape == (1, 1, 32, 1, 1)
    # varying along part of a merged group: not a per-channel constant of the source
    assert _regroup(np.ones((1, 4, 1, 1)), (2, 4, 8, 8), (2, 32, 8)) is None


class ScaledLinear(nn.Module):
    """A linear layer whose result, the graph's output, is multiplied by a number."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(24, 40)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * -0.75


def test_a_number_multiplying_the_output_folds_into_weight_and_bias():
    torch.manual_seed(6)
    module = ScaledLinear().eval()
    x = torch.randn(32, 24)
    graph = exported(module, x)
    assert scaled_constants(graph) == 2  # the weight and the bias
    with torch.no_grad():
        expected = module(x)
    check(graph, [x.numpy()], expected)


class SharedWeight(nn.Module):
    """One convolution's weight read twice: once before a batch norm, once alone."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 1, bias=False)
        self.norm = nn.BatchNorm2d(16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.norm(self.conv(x)), self.conv(x * 2)


def test_a_weight_other_products_read_keeps_its_values_for_them():
    torch.manual_seed(7)
    module = SharedWeight()
    randomize(module.norm)
    module.eval()
    x = torch.randn(2, 8, 10, 10)
    graph = exported(module, x)
    assert scaled_constants(graph) == 1
    with torch.no_grad():
        expected = module(x)
    ours = aten2prims.execute(graph, [x.numpy()], threads=1)
    for actual, wanted in zip(ours, expected, strict=True):
        result = compare(actual, wanted.numpy())
        assert result, result.message
    assert_one_threads_bits(graph, [x.numpy()], ours, counts=(2,))


def test_a_weight_larger_than_its_result_is_not_scaled():
    """The scaled weight is a second copy kept with the plan: made only where it is no larger
    than the result whose pass it saves (8 rows of 40 against a 40x24 weight: not folded)."""
    torch.manual_seed(7)
    module = nn.Sequential(nn.Linear(24, 40), nn.BatchNorm1d(40))
    randomize(module[1])
    module.eval()
    x = torch.randn(8, 24)
    graph = exported(module, x)
    assert scaled_constants(graph) == 0
    with torch.no_grad():
        expected = module(x)
    check(graph, [x.numpy()], expected)
