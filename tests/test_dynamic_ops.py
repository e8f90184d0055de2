"""Core ATen families with a dynamic dimension: for each family a few ops, exported with
`torch.export` with a dynamic batch (and spatial or sequence) dimension, saved and loaded, lowered
once, and run at three sizes — the example's and two others — matching torch eager at each.
(Hand-picked calls per family; OpInfo samples with dynamic dims are in
tests/test_dynamic_opinfo.py; strided, dilated and ceil_mode convolution and pooling at sizes of
every remainder are in tests/test_dynamic_windows.py.) Also: scans along a dynamic dimension, and an int
argument exported with Dim.DYNAMIC, a scalar input whose value binds its symbol (load,
from_fx and the CLI's run)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import aten2prims
from aten2prims.cli import main
from aten2prims.errors import ShapeError
from aten2prims.ir import graph_difference, parse
from aten2prims.testing.compare import compare
from decompositions.reductions import SCAN_MAX_LENGTH

N = Dim("n", min=2, max=64)
M = Dim("m", min=3, max=64)  # narrow(0, 1, 2) needs three rows
H, W = Dim("h", min=6, max=64), Dim("w", min=6, max=64)  # a dilated 3x3 kernel spans 5
L = Dim("l", min=4, max=64)


class Call(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> Any:
        return self.fn(*args)


def _rows(*tail: int) -> Callable[[int], tuple[torch.Tensor, ...]]:
    return lambda n: (torch.randn(n, *tail),)


def _two(*tail: int) -> Callable[[int], tuple[torch.Tensor, ...]]:
    return lambda n: (torch.randn(n, *tail), torch.randn(n, *tail))


def _image(channels: int) -> Callable[[int], tuple[torch.Tensor, ...]]:
    return lambda n: (torch.randn(2, channels, n, n + 1),)


ROWS = {"args": ({0: N},)}
TWO = {"args": ({0: N}, {0: N})}
IMAGE = {"args": ({2: H, 3: W},)}
DERIVED = {"args": ({2: L, 3: L + 1},)}  # a derived dimension: l + 1
THREE = {"args": ({0: M},)}
weight = torch.randn(6, 5)
conv = torch.randn(4, 3, 3, 3)
table = torch.randn(10, 4)

# family -> (function, inputs for a size, dynamic_shapes, sizes)
CASES: dict[str, tuple[Callable[..., Any], Callable[[int], Any], Any, tuple[int, ...]]] = {
    "pointwise_unary": (lambda x: torch.sigmoid(x) + F.gelu(x).exp(), _rows(5), ROWS, (4, 9, 2)),
    "pointwise_binary_broadcast": (
        lambda x, y: torch.where(x > y, x * y, x - 1) + y[:1],
        _two(5),
        TWO,
        (4, 9, 2),
    ),
    "reductions": (lambda x: (x.sum(0), x.mean(1), x.amax(0), x.var(0)), _rows(5), ROWS, (4, 9, 3)),
    "softmax": (lambda x: (torch.softmax(x, 0), F.log_softmax(x, 1)), _rows(5), ROWS, (4, 9, 2)),
    "views": (
        lambda x: (
            x.reshape(-1),
            x.view(x.shape[0], 5, 1).transpose(0, 1),
            x.unsqueeze(1).expand(-1, 3, -1),
            x.flatten(),
        ),
        _rows(5),
        ROWS,
        (4, 9, 2),
    ),
    "cat_split": (
        lambda x: torch.cat([x, x * 2], 0).split(3, 1)[0].chunk(2, 1),
        _rows(6),
        ROWS,
        (4, 9, 2),
    ),
    "slicing": (
        lambda x: (x[1:], x[:-1, 2:], x[::2], x.narrow(0, 1, 2)),
        _rows(5),
        THREE,
        (4, 9, 3),
    ),
    "padding": (lambda x: F.pad(x, (1, 2)), _rows(5), ROWS, (4, 9, 2)),
    "linear": (
        lambda x: (
            F.linear(x, weight),
            x @ weight.T,
            torch.bmm(x.unsqueeze(0), weight.T.unsqueeze(0)),
        ),
        _rows(5),
        ROWS,
        (4, 9, 2),
    ),
    "convolution": (
        lambda x: (F.conv2d(x, conv, padding=1), F.conv2d(x, conv, dilation=2)),
        _image(3),
        IMAGE,
        (8, 11, 6),
    ),
    "pooling": (
        lambda x: (
            F.max_pool2d(x, 2),
            F.max_pool2d(x, 3, 1, padding=1),
            F.avg_pool2d(x, 2),
            F.adaptive_avg_pool2d(x, 1),
        ),
        _image(3),
        IMAGE,
        (8, 11, 6),
    ),
    "upsampling": (
        lambda x: (
            F.interpolate(x, scale_factor=2.0),
            F.interpolate(x, scale_factor=2.0, mode="bilinear"),
        ),
        _image(3),
        IMAGE,
        (8, 11, 6),
    ),
    "normalization": (
        lambda x: (F.layer_norm(x, (5,)), F.group_norm(x.unsqueeze(-1), 1)),
        _rows(5),
        ROWS,
        (4, 9, 2),
    ),
    "indexing": (
        lambda x: (
            F.embedding((x.abs() * 3).long() % 10, table),
            x.gather(1, (x.abs() * 2).long() % 5),
            x.index_select(1, torch.tensor([0, 2])),
        ),
        _rows(5),
        ROWS,
        (4, 9, 2),
    ),
    "creation": (
        lambda x: (
            torch.arange(x.shape[0]),
            torch.zeros(x.shape[0], 2),
            torch.full_like(x, 3.0),
            x.new_ones(x.shape),
        ),
        _rows(5),
        ROWS,
        (4, 9, 2),
    ),
    # Scans along the dynamic dimension: as many steps as its range (max 64) needs, so sizes
    # longer than the example (4: two steps) run from the one lowering.
    "scans": (
        lambda x: (
            torch.cumsum(x, 0),
            torch.cumprod(x, 0),
            torch.logcumsumexp(x, 0),
            torch.cummax(x, 0)[0],
            torch.cumsum(x, 1),
        ),
        _rows(5),
        ROWS,
        (4, 9, 64, 2),
    ),
    "sorting": (
        lambda x: (torch.sort(x, 1)[0], torch.topk(x, 2, 1)[0], x.argmax(0)),
        _rows(5),
        ROWS,
        (4, 9, 2),
    ),
}


@pytest.mark.parametrize("family", list(CASES))
def test_family_lowers_once_and_matches_torch_at_three_sizes(family: str, tmp_path: Path) -> None:
    fn, make, dynamic, sizes = CASES[family]
    module = Call(fn)
    torch.manual_seed(0)
    example = make(sizes[0])
    program = torch.export.export(module, example, dynamic_shapes=dynamic).run_decompositions()
    path = tmp_path / f"{family}.pt2"
    torch.export.save(program, path)
    graph = aten2prims.load(path)
    assert graph.symbols
    lowered = aten2prims.lower(graph)
    for size in sizes:
        inputs = make(size)
        outputs = aten2prims.execute(lowered, [t.numpy() for t in inputs], check=True)
        with torch.no_grad():
            expected = fn(*inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert len(outputs) == len(expected)
        for index, (ours, theirs) in enumerate(zip(outputs, expected)):
            verdict = compare(ours, theirs.numpy(), what=f"{family} output {index} at size {size}")
            assert verdict, verdict.message


def test_a_scan_along_an_unbounded_dimension_checks_its_step_count(tmp_path: Path) -> None:
    """Without a maximum in the Dim, a scan takes SCAN_MAX_LENGTH's 20 steps under a recorded
    check; sizes far beyond the example's step count run from the one lowering."""
    module = Call(lambda x: torch.cumsum(x, 0))
    program = torch.export.export(
        module, (torch.randn(3, 2),), dynamic_shapes={"args": ({0: Dim("n", min=2)},)}
    )
    path = tmp_path / "scan.pt2"
    torch.export.save(program.run_decompositions(), path)
    lowered = aten2prims.lower(aten2prims.load(path))
    (name,) = lowered.symbols
    assert [str(check) for check in lowered.checks] == [f"{name} <= {SCAN_MAX_LENGTH}"]
    for size in (3, 2, 100, 1000):
        x = torch.randn(size, 2, generator=torch.Generator().manual_seed(size))
        (ours,) = aten2prims.execute(lowered, [x.numpy()], check=True)
        verdict = compare(ours, torch.cumsum(x, 0).numpy(), what=f"cumsum at size {size}")
        assert verdict, verdict.message


class SliceByInt(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return x[:n] * 2 + n


def _int_input_program() -> Any:
    x = torch.randn(6, 2, generator=torch.Generator().manual_seed(0))
    return torch.export.export(
        SliceByInt(), (x, 3), dynamic_shapes={"x": None, "n": Dim.DYNAMIC}
    ).run_decompositions()


@pytest.mark.parametrize("frontend", ["load", "from_fx"])
def test_an_int_input_marked_dynamic_binds_its_symbol_when_run(
    frontend: str, tmp_path: Path
) -> None:
    """An int argument exported with Dim.DYNAMIC is a scalar user input; its value binds the
    symbol torch gave it (range checked), so one lowering runs every n in range."""
    program = _int_input_program()
    path = tmp_path / "slice_by_int.pt2"
    torch.export.save(program, path)
    graph = aten2prims.load(path) if frontend == "load" else aten2prims.from_fx(program)
    assert str(graph.inputs[1].value.meta) == "int"
    (declared,) = graph.symbols.values()
    assert (declared.backed, declared.value, declared.example) == (True, "n", 3)
    lowered = aten2prims.lower(graph)
    assert graph_difference(parse(str(lowered)), lowered) is None
    x = torch.randn(6, 2, generator=torch.Generator().manual_seed(1))
    for n in (3, declared.lower, 6, 5):
        (ours,) = aten2prims.execute(lowered, [x.numpy(), n], check=True)
        verdict = compare(ours, SliceByInt()(x, n).numpy(), what=f"n = {n}")
        assert verdict, verdict.message
    with pytest.raises(
        ShapeError, match=rf"symbol {declared.name} = 7 is outside its range .* input %n"
    ):
        aten2prims.execute(lowered, [x.numpy(), 7])


def test_cli_run_takes_an_int_input_from_the_npz(tmp_path: Path) -> None:
    path = tmp_path / "slice_by_int.pt2"
    torch.export.save(_int_input_program(), path)
    x = torch.randn(6, 2)
    given, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(given, x=x.numpy(), n=np.asarray(5))
    assert main(["run", str(path), "--seed", "1"]) == 0  # random x, n its example
    assert main(["run", str(path), "--inputs", str(given), "--output", str(out)]) == 0
    verdict = compare(np.load(out)["output_0"], SliceByInt()(x, 5).numpy(), what="cli output")
    assert verdict, verdict.message
    np.savez(given, x=x.numpy(), n=np.asarray(9))
    assert main(["run", str(path), "--inputs", str(given)]) == 2


class EveryOtherColumn(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x[:, ::2] * 2 + y


@pytest.mark.parametrize("frontend", ["pt2", "fx"])
def test_a_derived_input_dim_binds_its_root_symbol(frontend: str, tmp_path: Path) -> None:
    """An input size exported as a derived dim (`2 * Dim("h")`, only that size naming h) binds h
    by solving the size, which must then be even; the root is backed, with its example."""
    half = Dim("half", min=2, max=64)
    module = EveryOtherColumn()
    example = (torch.randn(3, 8), torch.randn(3, 4))
    program = torch.export.export(
        module, example, dynamic_shapes={"x": {1: 2 * half}, "y": {1: half}}
    )
    if frontend == "pt2":
        path = tmp_path / "derived.pt2"
        torch.export.save(program, path)
        graph = aten2prims.load(path)
    else:
        graph = aten2prims.from_fx(program)
    # the input of the bare root too: drop it to see the derived size bind alone
    only_derived = torch.export.export(
        EveryOtherColumnAlone(), example[:1], dynamic_shapes={"x": {1: 2 * half}}
    )
    lone = aten2prims.from_fx(only_derived)
    for imported in (graph, lone):
        (root,) = [s for s in imported.symbols.values() if s.backed]
        assert root.example == 4
    for module_, graph_, arity in ((module, graph, 2), (EveryOtherColumnAlone(), lone, 1)):
        lowered = aten2prims.lower(graph_)
        for columns in (4, 10, 30):
            inputs = (torch.randn(3, columns), torch.randn(3, columns // 2))[:arity]
            (ours,) = aten2prims.execute(lowered, [t.numpy() for t in inputs])
            verdict = compare(ours, module_(*inputs).numpy(), what=f"{columns} columns")
            assert verdict, verdict.message
    with pytest.raises(ShapeError, match=r"must have size 2\*s\d+ at dimension 1 for a whole"):
        aten2prims.execute(aten2prims.lower(lone), [np.zeros((3, 7), np.float32)])


class EveryOtherColumnAlone(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, ::2] * 2 + 1
