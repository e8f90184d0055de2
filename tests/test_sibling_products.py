"""Sibling products merged (aten2prims/executor/sibling_products.py): products of one activation
by different stored weights run as one product against the concatenated weights. The merge
fires on separate query/key/value projections, gives the values of the separate products and
of torch, the same bits on any number of threads, and leaves alone what it cannot merge."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import aten2prims
from aten2prims.executor import plan_for
from aten2prims.executor.sibling_products import MergedProducts
from aten2prims.frontends.torch_interop import to_numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _benchmark_modules import load_benchmark
from _model_checks import assert_like_torch
from _plan_switches import plan_switches
from _thread_checks import assert_one_threads_bits

suite = load_benchmark("suite", "suite.py")


def _merged(graph: aten2prims.Graph) -> list[MergedProducts]:
    return [step.kernel for step in plan_for(graph).steps if type(step.kernel) is MergedProducts]


def _export(model: nn.Module, inputs: tuple[torch.Tensor, ...], path: Path) -> aten2prims.Graph:
    torch.export.save(torch.export.export(model, inputs).run_decompositions(), path)
    return aten2prims.lower(aten2prims.load(path))


def _separate(path: Path) -> aten2prims.Graph:
    with plan_switches(MERGE_SIBLING_PRODUCTS=False):
        graph = aten2prims.lower(aten2prims.load(path))
        assert not _merged(graph)
    return graph


class Projections(nn.Module):
    """Three projections of one activation (`bias`: which of them add a bias), returned and
    combined."""

    def __init__(self, bias: tuple[bool, bool, bool], width: int = 48) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.query = nn.Linear(width, width, bias=bias[0])
        self.key = nn.Linear(width, width // 2, bias=bias[1])
        self.value = nn.Linear(width, width // 2, bias=bias[2])

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = self.norm(x)
        q, k, v = self.query(x), self.key(x), self.value(x)
        return q, k, v, q.sum(-1, keepdim=True) * torch.cat([k, v], dim=-1) + torch.relu(q)


@pytest.mark.parametrize(
    ("bias", "merged_columns"),
    [((True, True, True), 96), ((False, False, False), 96), ((True, False, True), 72)],
)
def test_projections_of_one_activation_merge(
    bias: tuple[bool, bool, bool], merged_columns: int, tmp_path: Path
) -> None:
    """Siblings that all add a bias, or all none, merge (a zero bias would turn -0.0 into
    +0.0); the projections (returned as they are: views of the merged product's columns) agree
    with the separate products' to float32 rounding, and everything with torch."""
    torch.manual_seed(0)
    model = Projections(bias).eval()
    inputs = (torch.randn(4, 37, 48),)
    path = tmp_path / "projections.pt2"
    graph = _export(model, inputs, path)
    kernels = _merged(graph)
    assert [k.weights.shape[1] for k in kernels] == [merged_columns]
    arrays = [to_numpy(t) for t in inputs]
    ours = aten2prims.execute(graph, arrays, threads=1)
    assert_like_torch(ours, model, inputs)
    separate = aten2prims.execute(_separate(path), arrays, threads=1)
    for mine, theirs in zip(ours[:3], separate[:3]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-6)
    assert_one_threads_bits(graph, arrays, ours, counts=(2, 3))


def test_overridden_weights_are_not_merged(tmp_path: Path) -> None:
    """Weights a caller gives are not the plan's to copy: their products stay separate (the
    key's and value's stored ones still merge)."""
    torch.manual_seed(1)
    model = Projections((True, True, True)).eval()
    inputs = (torch.randn(2, 9, 48),)
    graph = _export(model, inputs, tmp_path / "projections.pt2")
    (user,) = [i.name for i in graph.inputs if i.data is None]
    (query,) = [i for i in graph.inputs if "query" in i.name and "weight" in i.name]
    given = {user: to_numpy(inputs[0]), query.name: np.asarray(query.data) * np.float32(2)}
    ours = aten2prims.execute(graph, given, threads=1)
    plan = plan_for(graph, frozenset({query.name}))
    merged = [s.kernel for s in plan.steps if type(s.kernel) is MergedProducts]
    assert [k.weights.shape[1] for k in merged] == [48]
    with torch.no_grad():
        model.query.weight.mul_(2)
    assert_like_torch(ours, model, inputs)


def test_siblings_reading_different_memory_run_one_by_one(tmp_path: Path) -> None:
    """A call whose siblings' left operands are not one array (equal values in other memory)
    runs the original products: results of their own, the merged product's to float32
    rounding."""
    torch.manual_seed(2)
    model = Projections((True, True, True)).eval()
    graph = _export(model, (torch.randn(3, 5, 48),), tmp_path / "projections.pt2")
    plan = plan_for(graph)
    (step,) = [s for s in plan.steps if type(s.kernel) is MergedProducts]
    kernel = step.kernel
    assert isinstance(kernel, MergedProducts)
    producer = {slot: s for s in plan.steps for slot in s.out_slots}
    x = np.random.default_rng(0).standard_normal((15, 48)).astype(np.float32)

    def value(slot: int, activation: np.ndarray) -> np.ndarray:
        stored = plan.initial_values[slot]
        if stored is not None:
            return np.asarray(stored)
        made = producer[slot]  # a bias broadcast of a stored vector, or the activation's view
        (source,) = made.arguments
        if plan.initial_values[int(source)] is not None:
            return np.asarray(made.kernel(np.asarray(plan.initial_values[int(source)])))
        shape = made.out_metas[0].shape
        return np.broadcast_to(activation.reshape(*activation.shape, 1), shape)

    def arguments(activations: list[np.ndarray]) -> list[np.ndarray]:
        made: list[np.ndarray] = []
        start = 0
        for count, position, activation in zip(kernel.arity, kernel.activations, activations):
            for offset, argument in enumerate(step.arguments[start : start + count]):
                if offset == position:
                    shape = producer[int(argument)].out_metas[0].shape
                    made.append(activation if len(shape) == 2 else value(int(argument), activation))
                else:
                    made.append(value(int(argument), activation))
            start += count
        return made

    siblings = len(kernel.arity)
    shared = kernel(*arguments([x] * siblings))
    separate = kernel(*arguments([x.copy() for _ in range(siblings)]))
    # columns of one product (within its bounds), or arrays of their own
    assert all(np.may_share_memory(shared[0], r) for r in shared[1:])
    assert not any(np.may_share_memory(separate[0], r) for r in separate[1:])
    for merged, alone in zip(shared, separate):
        np.testing.assert_allclose(merged, alone, rtol=1e-6, atol=1e-6)


# -- the suite's models (tiny configs) -------------------------------------------------------------

# Merged steps (one per layer): separate query/key/value projections (BERT, Llama, DeiT); GPT-2's are one
# product already.
MERGES = {"bert": 1, "llama": 1, "deit_tiny": 2, "gpt2": 0}


@pytest.mark.parametrize("name", list(MERGES))
def test_the_suites_projections_merge(name: str, tmp_path: Path) -> None:
    """Whole models are judged against torch (a product's rounding may differ from the separate
    products' in places, and the layers after it carry that on)."""
    model, inputs = suite.build(name, "tiny")
    path = tmp_path / f"{name}.pt2"
    graph = _export(model, inputs, path)
    assert len(_merged(graph)) == MERGES[name]
    arrays = [to_numpy(t) for t in inputs]
    ours = aten2prims.execute(graph, arrays, threads=1)
    assert_like_torch(ours, model, inputs)
    assert_one_threads_bits(graph, arrays, ours, counts=(2, 3))
