"""Checks on data (torch's `_assert_async`, as `F.one_hot` exports its class-range checks): kept by
both frontends, lowered to `prims.check`, and raised when the graph runs, with torch's message;
never dropped by a pass (a dropped check is a silent wrong answer: one_hot of a class out of
range is a row of zeros)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import aten2prims
import prims
from aten2prims.backends.to_fx import to_fx
from aten2prims.errors import DTypeError, ExecutionError, ShapeError
from aten2prims.executor.folding import fold_constants
from aten2prims.ir import parse
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import TensorMeta
from aten2prims.passes import optimize
from prims import Builder


class OneHot(torch.nn.Module):
    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(labels, 5)


@pytest.fixture(scope="module")
def one_hot_graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, aten2prims.Graph]:
    program = torch.export.export(OneHot(), (torch.tensor([0, 3, 4, 1]),)).run_decompositions()
    path = Path(tmp_path_factory.mktemp("checks")) / "one_hot.pt2"
    torch.export.save(program, str(path))
    return {"pt2": aten2prims.load(path), "fx": aten2prims.from_fx(program)}


def _torch_message(labels: list[int]) -> str:
    with pytest.raises(RuntimeError) as raised:
        OneHot()(torch.tensor(labels))
    return str(raised.value)


@pytest.mark.parametrize("frontend", ["pt2", "fx"])
def test_one_hot_checks_are_kept_and_lowered(one_hot_graphs: dict, frontend: str) -> None:
    graph = one_hot_graphs[frontend]
    assert [n.op for n in graph.nodes].count("aten._assert_async.msg") == 2
    lowered = aten2prims.lower(graph)
    checks = [n for n in lowered.nodes if n.op == "prims.check"]
    assert [n.kwargs["message"] for n in checks] == [
        "one_hot: Class values must be non-negative.",
        "one_hot: Class values must be smaller than num_classes.",
    ]
    assert all(n.results == () for n in checks)
    assert optimize(lowered).nodes.count(checks[0]) == 1  # dead code elimination keeps them


@pytest.mark.parametrize("frontend", ["pt2", "fx"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("check", [False, True])
@pytest.mark.parametrize("labels", [[0, 7, 4, 1], [0, -1, 4, 1], [5, 5, 5, 5], [-3, 9, 0, 0]])
def test_a_false_check_raises_torchs_message(
    one_hot_graphs: dict, frontend: str, threads: int, check: bool, labels: list[int]
) -> None:
    lowered = aten2prims.lower(one_hot_graphs[frontend])
    expected = _torch_message(labels)
    with pytest.raises(ExecutionError, match=r"prims\.check failed") as raised:
        aten2prims.execute(lowered, [np.array(labels)], threads=threads, check=check)
    assert expected in str(raised.value)


@pytest.mark.parametrize("frontend", ["pt2", "fx"])
def test_true_checks_let_the_graph_run(one_hot_graphs: dict, frontend: str) -> None:
    lowered = aten2prims.lower(one_hot_graphs[frontend])
    for labels in ([0, 3, 4, 1], [4, 4, 4, 4], [0, 0, 0, 0]):
        (ours,) = aten2prims.execute(lowered, [np.array(labels)])
        np.testing.assert_array_equal(ours, OneHot()(torch.tensor(labels)).numpy())


def test_checks_survive_to_fx_and_fx_dead_code_elimination(one_hot_graphs: dict) -> None:
    module = to_fx(aten2prims.lower(one_hot_graphs["pt2"]))
    module.graph.eliminate_dead_code()
    module.recompile()
    targets = [n.target for n in module.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten2prims.check.default) == 2
    (result,) = module(torch.tensor([0, 3, 4, 1]))
    torch.testing.assert_close(result, OneHot()(torch.tensor([0, 3, 4, 1])))
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        module(torch.tensor([0, 7, 4, 1]))


_ASSERT_ASYNC = """
graph checks(%x: f32[2]) -> (f32[2]):
  %s: f32[] = aten.sum.dim_IntList(%x, [0])
  aten._assert_async.default(%s)
  %p: b8[] = aten.gt.Scalar(%s, 10)
  aten._assert_async.msg(%p, "sum above 10")
  %y: f32[2] = aten.mul.Tensor(%x, %x)
  return (%y)
"""


@pytest.mark.parametrize(
    "values",
    [[5.0, 6.0], [1.0, -1.0], [3.0, 4.0], [float("nan"), 1.0], [float("inf"), 0.0]],
)
def test_assert_async_of_a_number_checks_it_is_nonzero(values: list[float]) -> None:
    """`_assert_async(t)`: t's one element nonzero (NaN is); `.msg`: a bool, with a message."""
    graph = parse(_ASSERT_ASYNC)
    lowered = aten2prims.lower(graph)
    assert [n.op for n in lowered.nodes].count("prims.check") == 2
    x = torch.tensor(values)

    def torchs() -> torch.Tensor:
        total = torch.ops.aten.sum.dim_IntList(x, [0])
        torch.ops.aten._assert_async.default(total)
        torch.ops.aten._assert_async.msg(torch.ops.aten.gt.Scalar(total, 10), "sum above 10")
        return x * x

    try:
        expected = torchs()
    except RuntimeError as error:
        with pytest.raises(ExecutionError) as raised:
            aten2prims.execute(lowered, [x.numpy()])
        assert str(error) in str(raised.value)
    else:
        (ours,) = aten2prims.execute(lowered, [x.numpy()])
        np.testing.assert_array_equal(ours, expected.numpy())


_CONSTANT_CONDITION = """
graph constant(%x: f32[2]) -> (f32[2]):
  %c: b8[] = prims.full(shape=[], fill_value={value}, dtype=b8, device=device("cpu"), requires_grad=False)
  prims.check(%c, message="never true")
  %y: f32[2] = prims.mul(%x, 2.0)
  return (%y)
"""


@pytest.mark.parametrize("value", [False, True])
def test_a_constant_condition_is_checked_when_run_not_folded_away(value: bool) -> None:
    graph = parse(_CONSTANT_CONDITION.format(value=value))
    folded, _ = fold_constants(optimize(graph), frozenset())
    assert [n.op for n in folded.nodes].count("prims.check") == 1
    x = np.array([1.0, 2.0], np.float32)
    if value:
        np.testing.assert_array_equal(aten2prims.execute(graph, [x])[0], x * 2)
    else:
        with pytest.raises(ExecutionError, match="never true"):
            aten2prims.execute(graph, [x])


def test_a_check_prints_and_parses_back() -> None:
    graph = parse(_CONSTANT_CONDITION.format(value=True))
    assert str(parse(str(graph))) == str(graph)
    assert 'prims.check(%c, message="never true")' in str(graph)


@pytest.mark.parametrize(
    ("meta", "error", "expected"),
    [
        (TensorMeta((), DType.int64), DTypeError, "condition must be a bool tensor"),
        (TensorMeta((2,), DType.bool), ShapeError, "has 2 elements; check needs exactly one"),
    ],
)
def test_a_condition_must_be_one_bool(meta: TensorMeta, error: type, expected: str) -> None:
    with Builder("refused") as builder, pytest.raises(error, match=expected):
        prims.check(builder.add_input("c", meta), "m")
