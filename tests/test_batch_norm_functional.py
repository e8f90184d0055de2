"""A BatchNorm exported with torch.export: train mode becomes
`_native_batch_norm_legit_functional`, whose updated running stats are buffer_mutation outputs;
saved, loaded without torch, lowered and executed, it must give torch's output and torch's
updated running_mean, running_var and num_batches_tracked. Eval mode becomes
`_native_batch_norm_legit_no_training` and mutates nothing."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

import aten2prims
from aten2prims.executor.run import execute
from aten2prims.ir.graph import OutputKind
from aten2prims.testing.compare import compare
from aten2prims.testing.conformance import check_op, unexpected_failures


class ConvBatchNorm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4, momentum=0.3, eps=1e-3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def _modules() -> dict[str, tuple[torch.nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    affine = torch.nn.BatchNorm2d(3, momentum=0.2)
    plain = torch.nn.BatchNorm2d(3, affine=False)
    for bn in (affine, plain):  # start from stats that are not the defaults
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    if affine.weight is not None:
        torch.nn.init.uniform_(affine.weight, 0.5, 1.5)
        torch.nn.init.uniform_(affine.bias, -0.5, 0.5)
    wide = copy.deepcopy(affine).double()
    return {
        "affine": (affine, torch.randn(4, 3, 5, 6) * 2 + 1),
        "no-affine": (plain, torch.randn(2, 3, 4, 4)),
        "float64": (wide, torch.randn(3, 3, 2, 5, dtype=torch.float64)),
        "conv-bn-relu": (ConvBatchNorm(), torch.randn(2, 2, 6, 5)),
    }


MODULES = _modules()


def _roundtrip(module: torch.nn.Module, x: torch.Tensor, tmp_path: Path) -> aten2prims.Graph:
    program = torch.export.export(copy.deepcopy(module), (x,)).run_decompositions()
    path = tmp_path / "model.pt2"
    torch.export.save(program, path)
    return aten2prims.load(path)


def _assert_close(ours: np.ndarray, theirs: torch.Tensor, what: str) -> None:
    verdict = compare(ours, theirs.detach().numpy(), what=what)
    assert verdict, verdict.message


@pytest.mark.parametrize("name", sorted(MODULES))
def test_train_mode_output_and_running_stats(name: str, tmp_path: Path) -> None:
    module, x = MODULES[name]
    graph = _roundtrip(module.train(), x, tmp_path)
    assert "aten._native_batch_norm_legit_functional.default" in {node.op for node in graph.nodes}
    lowered = aten2prims.lower(graph)
    assert all(node.namespace == "prims" for node in lowered.nodes)

    results = execute(lowered, [x.numpy()], check=True, return_all_outputs=True)

    reference = copy.deepcopy(module).train()
    with torch.no_grad():
        expected = reference(x)
    buffers = dict(reference.named_buffers())
    mutations = 0
    for output, ours in zip(lowered.outputs, results):
        if output.kind is OutputKind.BUFFER_MUTATION:
            _assert_close(ours, buffers[output.target], f"buffer {output.target}")
            mutations += 1
        else:
            _assert_close(ours, expected, "output")
    assert mutations == 3  # running_mean, running_var, num_batches_tracked


@pytest.mark.parametrize("name", ["affine", "float64", "conv-bn-relu"])
def test_eval_mode(name: str, tmp_path: Path) -> None:
    module, x = MODULES[name]
    graph = _roundtrip(module.eval(), x, tmp_path)
    assert "aten._native_batch_norm_legit_no_training.default" in {node.op for node in graph.nodes}
    assert not [o for o in graph.outputs if o.kind is OutputKind.BUFFER_MUTATION]
    (ours,) = execute(aten2prims.lower(graph), [x.numpy()], check=True)
    with torch.no_grad():
        expected = copy.deepcopy(module).eval()(x)
    _assert_close(ours, expected, "output")


def test_functional_overload_conforms(opinfo_cache_dir: str) -> None:
    """The non-core overload is not in tests/test_conformance.py's list: its hand-written samples
    (training and eval, mixed float32 parameters, one value per channel) run here."""
    op = "aten._native_batch_norm_legit_functional.default"
    report = check_op(op, cache_dir=opinfo_cache_dir)
    _passed, run = report.totals
    assert run > 0
    failures = unexpected_failures(report)
    assert not failures, "\n".join(
        f"[{d.short}] {o.call.describe()}: {o.message}" for d, o in failures[:5]
    )
