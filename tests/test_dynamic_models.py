"""Real models exported with dynamic shapes (`examples/dynamic_models.py`: a residual CNN with
dynamic batch and spatial size, an LSTM with dynamic batch, transformers' BERT, GPT-2 and Llama
with dynamic batch and sequence length), saved with `torch.export.save`, read back with
`aten2prims.load`, lowered once and run at three sizes — the example's and two others — each
matching torch eager on the same inputs. Sizes outside a symbol's range are refused with a
ShapeError naming the symbol, its range and the input."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import torch
from torch.utils._pytree import tree_leaves

import aten2prims
from aten2prims.errors import ShapeError
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir import Graph, graph_difference, parse
from aten2prims.passes.verify import verify
from aten2prims.testing.compare import compare

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from dynamic_models import MODELS, build, export_program


@attrs.frozen
class Case:
    path: Path
    graph: Graph
    lowered: Graph
    model: Any
    sizes: list[tuple[Any, ...]]


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Case]:
    made: dict[str, Case] = {}
    directory = tmp_path_factory.mktemp("dynamic")

    def case(name: str) -> Case:
        if name not in made:
            model, _, _, sizes = build(name)
            path = directory / f"{name}.pt2"
            torch.export.save(export_program(name), path)
            graph = aten2prims.load(path)
            made[name] = Case(path, graph, aten2prims.lower(graph), model, sizes)
        return made[name]

    return case


def _torch_outputs(model: Any, inputs: tuple[Any, ...]) -> list[np.ndarray]:
    with torch.no_grad():
        return [to_numpy(t) for t in tree_leaves(model(*inputs))]


@pytest.mark.parametrize("name", list(MODELS))
def test_lowered_once_matches_torch_at_three_sizes(name: str, cases: Callable[[str], Case]) -> None:
    case = cases(name)
    assert case.graph.symbols and case.lowered.symbols
    assert any(not isinstance(n, int) for i in case.lowered.user_inputs for n in i.value.shape)
    verify(case.lowered)
    shapes = set()
    for inputs in case.sizes:
        feed = [to_numpy(t) for t in inputs]
        shapes.add(tuple(a.shape for a in feed))
        outputs = aten2prims.execute(case.lowered, feed, check=True)
        expected = _torch_outputs(case.model, inputs)
        assert len(outputs) == len(expected)
        for index, (ours, theirs) in enumerate(zip(outputs, expected)):
            verdict = compare(ours, theirs, what=f"{name} output {index} at {shapes}")
            assert verdict, verdict.message
    assert len(shapes) == 3  # three distinct sizes, from one lowering


@pytest.mark.parametrize("name", list(MODELS))
def test_dynamic_graphs_print_and_parse_back_exactly(
    name: str, cases: Callable[[str], Case]
) -> None:
    case = cases(name)
    for graph in (case.graph, case.lowered):
        again = parse(str(graph))
        assert graph_difference(graph, again) is None
        assert str(again) == str(graph)


@pytest.mark.parametrize("name", ["cnn", "bert"])
def test_sizes_out_of_range_are_refused_naming_symbol_range_and_input(
    name: str, cases: Callable[[str], Case]
) -> None:
    case = cases(name)
    user = case.lowered.user_inputs[0]
    symbols = case.lowered.symbols
    # The first dynamic dimension of the first input, one past its upper bound.
    dim, size = next((d, n) for d, n in enumerate(user.value.shape) if not isinstance(n, int))
    declared = symbols[str(size)]
    shape = [n if isinstance(n, int) else symbols[str(n)].example for n in user.value.shape]
    shape[dim] = declared.upper + 1
    dtype = user.value.dtype.numpy
    array = np.zeros(shape, dtype)
    with pytest.raises(ShapeError) as error:
        aten2prims.execute(case.lowered, [array])
    message = str(error.value)
    assert str(size) in message and f"[{declared.lower}, {declared.upper}]" in message
    assert f"%{user.name}" in message


def test_a_repeated_size_reuses_its_plan(cases: Callable[[str], Case]) -> None:
    from aten2prims.executor.run import _PLANNED

    case = cases("bert")
    feed = [to_numpy(t) for t in case.sizes[1]]
    aten2prims.execute(case.lowered, feed)
    planned = _PLANNED[case.lowered]
    count = len(planned.specialized)
    static = planned.specialized[next(iter(planned.specialized))]
    aten2prims.execute(case.lowered, feed)
    assert len(planned.specialized) == count
    assert not static.symbols  # what the executor plans is a static graph


def test_cli_runs_any_size_in_range_and_refuses_others_with_exit_2(
    cases: Callable[[str], Case], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aten2prims.cli import main

    case = cases("cnn")
    path = str(case.path)
    (name,) = [i.name for i in case.graph.user_inputs]
    assert main(["run", path, "--seed", "3"]) == 0  # random inputs of the example sizes
    assert "output_0: f32[2, 5]" in capsys.readouterr().out
    inputs = case.sizes[1]
    given, out = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(given, **{name: to_numpy(inputs[0])})
    assert main(["run", path, "--inputs", str(given), "--output", str(out)]) == 0
    (expected,) = _torch_outputs(case.model, inputs)
    verdict = compare(np.load(out)["output_0"], expected, what="cli output")
    assert verdict, verdict.message
    np.savez(given, **{name: np.zeros((17, 3, 8, 8), np.float32)})  # batch in [1, 16]
    assert main(["run", path, "--inputs", str(given)]) == 2
    error = capsys.readouterr().err
    assert "= 17 is outside its range [1, 16]" in error and f"%{name}" in error


@pytest.mark.parametrize("name", ["cnn", "bert"])
def test_to_fx_of_a_dynamic_lowering_runs_at_three_sizes(
    name: str, cases: Callable[[str], Case]
) -> None:
    """Symbols become aten.sym_size.int of the inputs, expressions Python operators on them."""
    case = cases(name)
    module = aten2prims.to_fx(case.lowered)
    assert any("sym_size" in str(node.target) for node in module.graph.nodes)
    for inputs in case.sizes:
        with torch.no_grad():
            ours = module(*inputs)
        for index, (mine, theirs) in enumerate(zip(ours, _torch_outputs(case.model, inputs))):
            verdict = compare(to_numpy(mine), theirs, what=f"{name} via to_fx, output {index}")
            assert verdict, verdict.message


def test_specializations_kept_are_the_most_recently_used() -> None:
    """A process seeing ever new sizes keeps a bounded number of specializations (each holds its
    plans and arenas): the least recently used are dropped, with the shapes that found them, and
    a dropped size is planned again, with the same results."""
    from aten2prims.executor.run import _MAX_SPECIALIZATIONS, _PLANNED

    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(x) * 2 + 1

    n = torch.export.Dim("n", min=1, max=4 * _MAX_SPECIALIZATIONS)
    program = torch.export.export(Scale(), (torch.ones(3, 4),), dynamic_shapes={"x": {0: n}})
    lowered = aten2prims.lower(aten2prims.from_fx(program))
    sizes = list(range(1, _MAX_SPECIALIZATIONS + 11))
    rng = np.random.default_rng(0)
    arrays = {size: rng.standard_normal((size, 4)).astype(np.float32) for size in sizes}

    first: dict[int, np.ndarray] = {}

    def run(size: int) -> None:
        (ours,) = aten2prims.execute(lowered, [arrays[size]])
        if size in first:  # planned again or not, the same bits
            np.testing.assert_array_equal(ours, first[size])
            return
        first[size] = ours
        verdict = compare(ours, Scale()(torch.from_numpy(arrays[size])).numpy(), what=str(size))
        assert verdict, verdict.message

    for size in sizes:
        run(size)
    planned = _PLANNED[lowered]
    kept = {key[0] for key in planned.specialized}
    assert kept == set(sizes[-_MAX_SPECIALIZATIONS:])
    assert {found[2][0] for found in planned.by_shapes.values()} == kept
    run(sizes[20])  # kept: becomes the most recent
    run(sizes[0])  # dropped: planned again, dropping the least recent (sizes[10])
    assert len(planned.specialized) == _MAX_SPECIALIZATIONS
    assert [key[0] for key in planned.specialized][-2:] == [sizes[20], sizes[0]]
    assert sizes[10] not in {key[0] for key in planned.specialized}
