"""Sliding windows at every size: strided, dilated and padded convolutions (also transposed),
max and average pooling with stride, padding and ceil_mode, adaptive pooling, each exported with
`torch.export` with its spatial dims dynamic, lowered ONCE and run at sizes whose remainders
modulo the stride differ, matching torch eager at each; also a residual CNN and a training step
through the backward ops. Their output sizes are floor divisions of the input size (ceil_mode's
dropped last window too: the lesser of two quotients), so the lowered graph holds no check on a
size modulo the stride: it runs at every size in range. Only where torch.export itself declared
a size valid at the example's remainder alone is there a check, and it refuses by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

import aten2prims
from aten2prims.errors import ShapeError
from aten2prims.ir import Graph
from aten2prims.ir.symbolic import format_expr
from aten2prims.testing.compare import compare

SIZES = (7, 8, 9, 10, 17)  # remainders 1, 2, 0, 1, 2 modulo 3 and 1, 0, 1, 0, 1 modulo 2
EXAMPLE = 12


class Call(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> Any:
        return self.fn(x)


def _tensor(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(sum(shape)))


torch.manual_seed(0)
W1 = torch.randn(4, 3, 3)
W2 = torch.randn(4, 3, 3, 3)
W2T = torch.randn(3, 2, 3, 3)
W1T = torch.randn(3, 2, 3)
W3 = torch.randn(2, 3, 3, 3, 3)

# name -> (function of x, rank of the spatial dims)
CASES: dict[str, tuple[Callable[[torch.Tensor], Any], int]] = {
    "conv1d_stride2_padding1": (lambda x: F.conv1d(x, W1, stride=2, padding=1), 1),
    "conv1d_stride3_dilation2": (lambda x: F.conv1d(x, W1, stride=3, dilation=2, padding=2), 1),
    "conv2d_stride2_padding1": (lambda x: F.conv2d(x, W2, stride=2, padding=1), 2),
    "conv2d_stride3_dilation2": (
        lambda x: F.conv2d(x, W2, stride=(3, 2), dilation=2, padding=2),
        2,
    ),
    "conv_transpose2d_stride2": (
        lambda x: F.conv_transpose2d(x, W2T, stride=2, padding=1, output_padding=1),
        2,
    ),
    "conv_transpose1d_stride3_dilation2": (
        lambda x: F.conv_transpose1d(x, W1T, stride=3, dilation=2, padding=2),
        1,
    ),
    "conv3d_stride2": (lambda x: F.conv3d(x, W3, stride=2, padding=1), 3),
    "max_pool2d_stride2": (lambda x: F.max_pool2d(x, 3, 2, padding=1), 2),
    "max_pool2d_stride2_ceil": (
        lambda x: F.max_pool2d(x, 3, 2, padding=1, ceil_mode=True, return_indices=True),
        2,
    ),
    "max_pool2d_stride3_ceil": (lambda x: F.max_pool2d(x, 3, 3, ceil_mode=True), 2),
    "max_pool2d_stride3_padding1_ceil": (lambda x: F.max_pool2d(x, 5, 3, 1, ceil_mode=True), 2),
    "max_pool2d_stride3_dilation2": (lambda x: F.max_pool2d(x, 3, 3, 1, dilation=2), 2),
    "avg_pool2d_ceil_include_pad": (
        lambda x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=True),
        2,
    ),
    "avg_pool2d_ceil_exclude_pad": (
        lambda x: F.avg_pool2d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        2,
    ),
    "avg_pool2d_stride3": (lambda x: F.avg_pool2d(x, 3, 3, ceil_mode=True), 2),
    # With indices: without, torch.export specializes the length (max_pool1d's CPU path).
    "max_pool1d_ceil": (
        lambda x: F.max_pool1d(x, 3, 2, padding=1, ceil_mode=True, return_indices=True),
        1,
    ),
    "max_pool3d_stride2": (lambda x: F.max_pool3d(x, 3, 2, padding=1, ceil_mode=True), 3),
    "avg_pool1d_ceil": (
        lambda x: F.avg_pool1d(x, 3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        1,
    ),
    "avg_pool3d_stride2": (lambda x: F.avg_pool3d(x, 3, 2, padding=1, ceil_mode=True), 3),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), 2),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True), 2),
}


def _shape(rank: int, size: int) -> tuple[int, ...]:
    """[2, 3, *spatial]: the spatial dims size, size + 1, ... (distinct, so none is taken for
    another); a 3-d pooling's kept small."""
    spatial = [size + d for d in range(rank)] if rank < 3 else [size, 5, size + 1]
    return (2, 3, *spatial)


def _dynamic(rank: int) -> dict[int, Any]:
    dims = range(2, 2 + rank) if rank < 3 else (2, 4)
    # From the smallest size run: torch.export refuses a range in which an output size may be 1.
    # Dim.DYNAMIC rather than a named Dim: torch.export cannot prove ceil_mode's guard on the
    # last window (2·(h//2) < h + 1) for a range, though it holds at every size.
    return {d: Dim.DYNAMIC(min=min(SIZES), max=40) for d in dims}


def _no_modulo_checks(lowered: Graph) -> None:
    for check in lowered.checks:
        assert "%" not in format_expr(check), f"a check on a size modulo the stride: {check}"


def _lowered(fn: Callable[[torch.Tensor], Any], rank: int) -> Graph:
    example = _tensor(_shape(rank, EXAMPLE))
    program = torch.export.export(Call(fn), (example,), dynamic_shapes=(_dynamic(rank),))
    graph = aten2prims.from_fx(program.run_decompositions())
    assert graph.symbols, "torch.export kept no dim dynamic"
    lowered = aten2prims.lower(graph)
    _no_modulo_checks(lowered)
    return lowered


def _matches_torch(lowered: Graph, fn: Callable[[torch.Tensor], Any], x: torch.Tensor) -> None:
    ours = aten2prims.execute(lowered, [x.numpy()], check=True)
    with torch.no_grad():
        expected = fn(x)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(ours) == len(expected)
    for index, (mine, theirs) in enumerate(zip(ours, expected)):
        verdict = compare(mine, theirs.numpy(), what=f"output {index} at {list(x.shape)}")
        assert verdict, verdict.message


@pytest.mark.parametrize("name", list(CASES))
def test_window_op_lowered_once_matches_torch_at_every_remainder(name: str) -> None:
    fn, rank = CASES[name]
    lowered = _lowered(fn, rank)
    for size in SIZES:
        _matches_torch(lowered, fn, _tensor(_shape(rank, size)))


class ResidualCNN(nn.Module):
    """A stride-2 stem, a ceil_mode max pool, a residual block and a strided projection."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.block = nn.Sequential(
            nn.Conv2d(8, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1),
        )
        self.down = nn.Conv2d(8, 16, 1, stride=2)
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.stem(x)))
        x = torch.relu(x + self.block(x))
        x = F.avg_pool2d(self.down(x), 2, ceil_mode=True)
        return self.head(x.mean((2, 3)))


def test_residual_cnn_with_strided_conv_and_ceil_mode_pool_runs_at_odd_and_even_sizes() -> None:
    torch.manual_seed(0)
    model = ResidualCNN().eval()
    h, w = Dim.DYNAMIC(min=8, max=96), Dim.DYNAMIC(min=8, max=96)
    example = _tensor((2, 3, 32, 29))
    program = torch.export.export(model, (example,), dynamic_shapes=({2: h, 3: w},))
    lowered = aten2prims.lower(aten2prims.from_fx(program.run_decompositions()))
    _no_modulo_checks(lowered)
    for height, width in ((32, 29), (17, 18), (33, 40), (9, 8), (64, 63)):
        _matches_torch(lowered, model, _tensor((2, 3, height, width)))


class TrainingStep(nn.Module):
    """Every backward op of the windows above: strided convolutions (plain, on a computed input,
    so its grad_input is needed; transposed), ceil_mode max and average pooling, adaptive average
    pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.strided = nn.Conv2d(4, 4, 3, stride=3, padding=1)
        self.up = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        y = self.stem(x)
        parts = (
            F.max_pool2d(y, 3, 2, 1, ceil_mode=True),
            F.avg_pool2d(y, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            F.adaptive_avg_pool2d(y, (3, 2)),
            self.strided(y),
            self.up(y),
        )
        return (sum((part * part).mean() for part in parts),)


def test_training_step_gradients_match_torch_at_every_remainder() -> None:
    from torch.export.experimental import _export_forward_backward

    torch.manual_seed(0)
    model = TrainingStep().train()
    dims = {2: Dim.DYNAMIC(min=7, max=40), 3: Dim.DYNAMIC(min=7, max=40)}
    program = torch.export.export(model, (_tensor((2, 3, 12, 13)),), dynamic_shapes=(dims,))
    joint = _export_forward_backward(program)
    ops = {str(node.target) for node in joint.graph.nodes if node.op == "call_function"}
    assert {
        "aten.convolution_backward.default",
        "aten.max_pool2d_with_indices_backward.default",
        "aten.avg_pool2d_backward.default",
        "aten._adaptive_avg_pool2d_backward.default",
    } <= ops
    graph = aten2prims.from_fx(joint)
    lowered = aten2prims.lower(graph)
    _no_modulo_checks(lowered)
    for height, width in ((12, 13), (7, 8), (9, 10), (17, 11)):
        x = _tensor((2, 3, height, width))
        ours = aten2prims.execute(lowered, [x.numpy()], return_all_outputs=True, check=True)
        model.zero_grad()
        (loss,) = model(x)
        loss.backward()
        expected = {name: p.grad for name, p in model.named_parameters()}
        expected["loss"] = loss.detach()
        compared = 0
        for output, mine in zip(graph.outputs, ours, strict=True):
            theirs = expected[output.target or "loss"]
            verdict = compare(mine, theirs.numpy(), what=f"{output.target} at {height}x{width}")
            assert verdict, verdict.message
            compared += 1
        assert compared == len(expected)


def test_a_size_torch_export_specialized_to_the_example_remainder_is_checked() -> None:
    """With ceil_mode, stride 3 and kernel 2, the last window is dropped at some remainders
    modulo 3 only; torch.export decides it at the example (height 12: dropped, width 13: kept)
    and declares `h//3` and `w//3 + 1`, recording nothing. Our output size is right at every
    size, so equating it with the declared one is a check: the graph runs at the example's
    remainders and refuses the others by name, rather than running with a wrong declared size."""

    def pool(x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, 2, 3, ceil_mode=True)

    dims = {2: Dim.AUTO, 3: Dim.AUTO}
    program = torch.export.export(Call(pool), (_tensor((2, 3, 12, 13)),), dynamic_shapes=(dims,))
    lowered = aten2prims.lower(aten2prims.from_fx(program.run_decompositions()))
    assert lowered.checks
    for height, width in ((12, 13), (15, 16), (30, 7)):
        _matches_torch(lowered, pool, _tensor((2, 3, height, width)))
    with pytest.raises(ShapeError, match="lowered assuming"):
        aten2prims.execute(lowered, [_tensor((2, 3, 13, 13)).numpy()], check=True)
