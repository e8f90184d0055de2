"""Upsampling with dynamic sizes: `F.interpolate` exported with dynamic spatial dims (and batch),
saved with `torch.export.save`, read by `aten2prims.load` and by `from_fx` (the same graph),
lowered once and run at several sizes, matching torch eager at each. The output sizes of
non-integral scale factors are float expressions (`trunc(2.3*float(s0))`), evaluated as torch's
double arithmetic at every size in range; the source indices use the scale torch uses (the given
scale factor, or the ratio of sizes). Also a small U-Net (a stride-2 convolution down, an
upsampling x2 back, a concatenation with the skip), and the text form of such lowered graphs."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import aten2prims
from aten2prims.backends.to_fx import to_fx
from aten2prims.errors import ShapeError
from aten2prims.ir import graph_difference, parse
from aten2prims.ir.symbolic import SymExpr, evaluate
from aten2prims.testing.compare import compare

B = Dim("b", min=1, max=8)
H, W = Dim("h", min=2, max=96), Dim("w", min=2, max=96)
# Downscaling: torch.export wants every output size >= 2 (it refuses ranges reaching 0 or 1).
H3, W3 = Dim("h3", min=3, max=96), Dim("w3", min=3, max=96)
H6, W6 = Dim("h6", min=6, max=96), Dim("w6", min=6, max=96)
D1, D2, D3 = Dim("d1", min=2, max=24), Dim("d2", min=2, max=24), Dim("d3", min=3, max=24)
L, L3 = Dim("l", min=2, max=512), Dim("l3", min=3, max=512)


class Call(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> Any:
        return self.fn(x)


def _interpolate(**kwargs: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: F.interpolate(x, **kwargs)


# name -> (function, input shape at the example, dynamic dims, other shapes to run at)
IMAGE = ({0: B, 2: H, 3: W},)
CASES: dict[str, tuple[Callable[..., Any], tuple[int, ...], Any, list[tuple[int, ...]]]] = {
    "nearest_1.5": (
        _interpolate(scale_factor=1.5),
        (2, 3, 7, 9),
        IMAGE,
        [(1, 3, 2, 2), (3, 3, 8, 10), (2, 3, 31, 17), (4, 3, 64, 96)],
    ),
    "nearest_2.3_0.7": (
        _interpolate(scale_factor=(2.3, 0.7)),
        (2, 3, 7, 9),
        ({0: B, 2: H, 3: W3},),
        [(1, 3, 3, 3), (3, 3, 10, 11), (2, 3, 29, 43), (1, 3, 90, 95)],
    ),
    "nearest_third": (
        _interpolate(scale_factor=1 / 3),
        (2, 3, 9, 12),
        ({0: B, 2: H6, 3: W6},),
        [(1, 3, 6, 6), (2, 3, 10, 11), (2, 3, 31, 50), (1, 3, 96, 95)],
    ),
    "nearest_recompute": (
        _interpolate(scale_factor=1.7, recompute_scale_factor=True),
        (2, 3, 7, 9),
        IMAGE,
        [(1, 3, 2, 2), (3, 3, 10, 11), (2, 3, 31, 50)],
    ),
    "nearest_size_from_input": (
        lambda x: F.interpolate(x, size=(x.shape[2] * 2 + 1, x.shape[3] // 2 + 3)),
        (2, 3, 7, 9),
        IMAGE,
        [(1, 3, 2, 2), (3, 3, 10, 11), (2, 3, 31, 50)],
    ),
    "nearest_exact": (
        _interpolate(scale_factor=1.6, mode="nearest-exact"),
        (2, 3, 7, 9),
        IMAGE,
        [(1, 3, 2, 2), (3, 3, 10, 11), (2, 3, 31, 50)],
    ),
    "bilinear": (
        _interpolate(scale_factor=1.5, mode="bilinear"),
        (2, 3, 7, 9),
        IMAGE,
        [(1, 3, 2, 2), (3, 3, 10, 11), (2, 3, 31, 50), (1, 3, 64, 3)],
    ),
    "bilinear_align_corners": (
        _interpolate(scale_factor=2.3, mode="bilinear", align_corners=True),
        (2, 3, 7, 9),
        IMAGE,
        [(1, 3, 2, 2), (3, 3, 10, 11), (2, 3, 31, 50)],
    ),
    "bilinear_size_from_input": (
        lambda x: F.interpolate(x, size=(x.shape[2] + 3, x.shape[3] * 2), mode="bilinear"),
        (2, 3, 7, 9),
        IMAGE,
        [(1, 3, 2, 2), (3, 3, 10, 11), (2, 3, 31, 50)],
    ),
    "bicubic": (
        _interpolate(scale_factor=1.5, mode="bicubic"),
        (2, 3, 7, 9),
        IMAGE,
        [(1, 3, 2, 2), (3, 3, 10, 11), (2, 3, 31, 50)],
    ),
    "bicubic_align_corners": (
        _interpolate(scale_factor=0.7, mode="bicubic", align_corners=True),
        (2, 3, 7, 9),
        ({0: B, 2: H3, 3: W3},),
        [(1, 3, 3, 3), (3, 3, 10, 11), (2, 3, 31, 50)],
    ),
    "linear": (
        _interpolate(scale_factor=2.3, mode="linear"),
        (2, 3, 11),
        ({0: B, 2: L},),
        [(1, 3, 2), (3, 3, 12), (2, 3, 101), (1, 3, 512)],
    ),
    "nearest_1d": (
        _interpolate(scale_factor=0.7),
        (2, 3, 11),
        ({0: B, 2: L3},),
        [(1, 3, 3), (3, 3, 12), (2, 3, 101), (1, 3, 512)],
    ),
    "trilinear": (
        _interpolate(scale_factor=1.5, mode="trilinear"),
        (2, 2, 5, 6, 7),
        ({0: B, 2: D1, 3: D2, 4: D3},),
        [(1, 2, 2, 2, 3), (2, 2, 6, 7, 8), (1, 2, 13, 9, 24)],
    ),
    "nearest_3d": (
        _interpolate(scale_factor=(1.5, 2.0, 0.7)),
        (2, 2, 5, 6, 7),
        ({0: B, 2: D1, 3: D2, 4: D3},),
        [(1, 2, 2, 2, 3), (2, 2, 6, 7, 8), (1, 2, 13, 9, 24)],
    ),
}


def _export(fn: Callable[..., Any], shape: tuple[int, ...], dynamic: Any) -> Any:
    torch.manual_seed(0)
    program = torch.export.export(Call(fn), (torch.randn(shape),), dynamic_shapes=dynamic)
    return program.run_decompositions()


def _run_at(
    lowered: Any, fn: Callable[..., Any], shapes: list[tuple[int, ...]], label: str
) -> None:
    generator = torch.Generator().manual_seed(1)
    for shape in shapes:
        x = torch.randn(shape, generator=generator)
        (ours,) = aten2prims.execute(lowered, [x.numpy()], check=True)
        with torch.no_grad():
            theirs = fn(x).numpy()
        verdict = compare(ours, theirs, what=f"{label} at {list(shape)}")
        assert verdict, verdict.message


@pytest.mark.parametrize("case", list(CASES))
def test_interpolate_with_dynamic_sizes_lowers_once_and_matches_torch(
    case: str, tmp_path: Path
) -> None:
    fn, example, dynamic, shapes = CASES[case]
    program = _export(fn, example, dynamic)
    path = tmp_path / f"{case}.pt2"
    torch.export.save(program, path)
    loaded = aten2prims.load(path)
    imported = aten2prims.from_fx(program, name=loaded.name)
    assert graph_difference(imported, loaded, compare_data=True) is None
    assert loaded.symbols
    lowered = aten2prims.lower(loaded)
    assert not lowered.checks, [str(c) for c in lowered.checks]  # right at every size in range
    _run_at(lowered, fn, [example, *shapes], case)


@pytest.mark.parametrize("scale", [1.5, 2.3, 0.7, 1 / 3, 1.1, 2.9, 0.55, 3.7, 1e-3 + 1])
def test_output_sizes_are_torch_s_at_every_size_in_range(scale: float) -> None:
    """The lowered graph's output size, a float expression of the input size, is the size torch
    computes (floor of the double product) for every size in the symbol's range."""
    smallest = max(2, math.ceil(2 / scale) + 1)  # outputs of at least 2 (torch.export's demand)
    length = Dim("length", min=smallest, max=2048)
    program = _export(_interpolate(scale_factor=scale), (2, 3, smallest + 5), ({2: length},))
    lowered = aten2prims.lower(aten2prims.from_fx(program))
    (size,) = lowered.user_outputs[0].value.shape[2:]
    assert type(size) is SymExpr
    (name,) = lowered.symbols
    for n in range(smallest, 2049):
        expected = F.interpolate(torch.empty(1, 1, n), scale_factor=scale).shape[2]
        assert evaluate(size, {name: n}) == expected, n


class TinyUNet(torch.nn.Module):
    """Down by a stride-2 convolution, up by nearest x2 (or bilinear), padded to the skip
    connection's size (an odd size loses a row in the stride-2 convolution, as in the original
    U-Net), concatenated with it, then a 1x1 convolution."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.stem = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.down = torch.nn.Conv2d(4, 8, 2, stride=2)
        self.inner = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.head = torch.nn.Conv2d(12, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = torch.relu(self.stem(x))
        low = torch.relu(self.inner(torch.relu(self.down(skip))))
        up = F.interpolate(low, scale_factor=2.0, mode=self.mode)
        rows, columns = skip.shape[2] - up.shape[2], skip.shape[3] - up.shape[3]
        up = F.pad(up, (0, columns, 0, rows))
        return self.head(torch.cat([up, skip], 1))


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_a_small_unet_with_dynamic_height_and_width(mode: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyUNet(mode).eval()
    dynamic = ({0: B, 2: Dim("h4", min=4, max=96), 3: Dim("w4", min=4, max=96)},)
    program = torch.export.export(model, (torch.randn(2, 3, 16, 12),), dynamic_shapes=dynamic)
    program = program.run_decompositions()
    path = tmp_path / "unet.pt2"
    torch.export.save(program, path)
    loaded = aten2prims.load(path)
    imported = aten2prims.from_fx(program, name=loaded.name)
    assert graph_difference(imported, loaded, compare_data=True) is None
    lowered = aten2prims.lower(loaded)
    # Even sizes: the stride-2 convolution's lowering is exact for those (tests/test_dynamic_opinfo's
    # known gap: its output size records a check on the size modulo the stride).
    shapes = [(2, 3, 16, 12), (1, 3, 4, 4), (3, 3, 10, 22), (2, 3, 64, 96)]
    _run_at(lowered, model, shapes, "unet")


def test_lowered_graphs_with_float_sizes_print_and_parse_back() -> None:
    fn, example, dynamic, shapes = CASES["bilinear_align_corners"]
    lowered = aten2prims.lower(aten2prims.from_fx(_export(fn, example, dynamic)))
    text = str(lowered)
    assert "float(" in text and "trunc(" in text
    again = parse(text)
    assert graph_difference(again, lowered) is None
    assert str(again) == text
    _run_at(again, fn, shapes, "reparsed")


def test_to_fx_computes_float_sizes_with_torch_s_symbolic_arithmetic() -> None:
    """A lowered graph with float sizes maps back to torch: its sizes become sym_float, `*`,
    trunc on torch's SymInts, so the GraphModule runs at every size too."""
    fn, example, dynamic, shapes = CASES["nearest_exact"]
    module = to_fx(aten2prims.lower(aten2prims.from_fx(_export(fn, example, dynamic))))
    for shape in [example, *shapes]:
        x = torch.randn(shape)
        with torch.no_grad():
            (ours,) = module(x)
            verdict = compare(ours.numpy(), fn(x).numpy(), what=f"to_fx at {list(shape)}")
        assert verdict, verdict.message


def test_uint8_bilinear_is_specialized_under_checks_not_silently() -> None:
    """uint8 bilinear upsampling computes its fixed-point precision from every weight while
    lowering: symbolic sizes are specialized to the example's, under checks that refuse others."""
    x = (torch.rand(1, 3, 7, 9, generator=torch.Generator().manual_seed(0)) * 255).to(torch.uint8)
    fn = _interpolate(scale_factor=1.5, mode="bilinear")
    program = torch.export.export(Call(fn), (x,), dynamic_shapes=({2: H, 3: W},))
    lowered = aten2prims.lower(aten2prims.from_fx(program.run_decompositions()))
    assert lowered.checks
    (ours,) = aten2prims.execute(lowered, [x.numpy()])
    np.testing.assert_array_equal(ours, fn(x).numpy())
    with pytest.raises(ShapeError, match="lowered assuming"):
        aten2prims.execute(lowered, [np.zeros((1, 3, 8, 9), np.uint8)])
