"""An exported training step (forward, loss and backward in one graph) loads, lowers to prims and
matches torch's loss, gradients and updated buffers.

The program is what torch.export offers for training: `torch.export.export` of a module whose
forward returns the loss, then its joint forward-backward decomposition, saved with
`torch.export.save` and read by the `.pt2` reader (and imported by `from_fx`, which must give the
same graph). The model holds the layers whose backward ops leave results undefined: a
convolution whose input needs no gradient, convolutions with and without bias, layer and group
norms with and without affine parameters, batch norms in training mode (one over the target,
which needs no gradient), max and average pooling and an embedding. Two decompositions: torch's
Core ATen table (which expands the normalization and embedding backward ops), and the same table
keeping `native_layer_norm_backward`, `native_group_norm_backward`, `embedding_dense_backward`
and `native_batch_norm_backward` whole, so that their masked forms reach the graph too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import aten2prims
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir import Graph, OutputKind, format_graph, graph_difference, parse
from aten2prims.passes.verify import verify
from aten2prims.testing.compare import compare

KEPT_BACKWARD_OPS = (
    torch.ops.aten.native_layer_norm_backward.default,
    torch.ops.aten.native_group_norm_backward.default,
    torch.ops.aten.embedding_dense_backward.default,
    torch.ops.aten.native_batch_norm_backward.default,
)


class TrainingStep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(1, 4, 3, padding=1)  # its input needs no gradient
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.emb = nn.Embedding(10, 8)
        self.tokens = nn.Conv2d(1, 4, 3, stride=2, padding=1, bias=False)
        self.mix = nn.Conv2d(4, 4, 3, padding=1)
        self.gn = nn.GroupNorm(2, 4)
        self.gn_plain = nn.GroupNorm(2, 4, affine=False)
        self.avg = nn.AvgPool2d(2)
        self.ln_plain = nn.LayerNorm(4, elementwise_affine=False)
        self.ln = nn.LayerNorm(4)
        self.target_norm = nn.BatchNorm1d(4)  # its input, the target, needs no gradient

    def forward(self, image: torch.Tensor, idx: torch.Tensor, target: torch.Tensor) -> Any:
        x = self.pool(torch.relu(self.bn(self.stem(image))))  # [2, 4, 4, 4]
        x = x + self.tokens(self.emb(idx).unsqueeze(1))  # [2, 4, 4, 4]
        x = self.avg(self.gn_plain(self.gn(self.mix(x))))  # [2, 4, 2, 2]
        x = self.ln(self.ln_plain(x.flatten(2).transpose(1, 2)))  # [2, 4, 4]
        return (nn.functional.mse_loss(x, self.target_norm(target)),)


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    image = torch.randn(2, 1, 8, 8, generator=generator)
    idx = torch.randint(0, 10, (2, 8), generator=generator)
    target = torch.randn(2, 4, 4, generator=generator)
    return image, idx, target


def _joint_program(decomposition: str) -> Any:
    model = TrainingStep().train()
    program = torch.export.export(model, _inputs())
    if decomposition == "core":
        from torch.export.experimental import _export_forward_backward

        return _export_forward_backward(program)
    # The joint decomposition _export_forward_backward runs, with a table that keeps the
    # backward ops of KEPT_BACKWARD_OPS whole.
    from torch._decomp import core_aten_decompositions
    from torch.export.exported_program import _decompose_exported_program

    table = {op: fn for op, fn in core_aten_decompositions().items() if op not in KEPT_BACKWARD_OPS}
    return _decompose_exported_program(
        program,
        cia_to_decomp={},
        python_decomp_table=table,
        joint_loss_index=0,
        decompose_custom_triton_ops=False,
    )


def _torch_step(dtype: torch.dtype) -> dict[tuple[OutputKind, str | None], np.ndarray]:
    """torch's own training step (eager autograd), by output role and target."""
    model = TrainingStep().train().to(dtype)
    image, idx, target = _inputs()
    (loss,) = model(image.to(dtype), idx, target.to(dtype))
    loss.backward()
    results: dict[tuple[OutputKind, str | None], np.ndarray] = {
        (OutputKind.LOSS_OUTPUT, None): to_numpy(loss.detach())
    }
    for name, parameter in model.named_parameters():
        results[(OutputKind.GRADIENT_TO_PARAMETER, name)] = to_numpy(parameter.grad)
    for name, buffer in model.named_buffers():
        results[(OutputKind.BUFFER_MUTATION, name)] = to_numpy(buffer)
    return results


@pytest.fixture(scope="module", params=["core", "backward_ops"])
def step(request: Any, tmp_path_factory: Any) -> tuple[str, Any, Graph]:
    program = _joint_program(request.param)
    path = Path(tmp_path_factory.mktemp("training")) / "step.pt2"
    torch.export.save(program, path)
    return request.param, program, aten2prims.load(path)


def test_the_archive_holds_masked_backward_ops(step: tuple[str, Any, Graph]) -> None:
    decomposition, _, graph = step
    masked = {
        node.op: [not r.is_undefined for r in node.results]
        for node in graph.nodes
        if any(r.is_undefined for r in node.results)
    }
    # The stem's input needs no gradient: grad_input undefined (the tokens convolution, without
    # bias, leaves grad_bias undefined instead).
    masks = [
        [not r.is_undefined for r in node.results]
        for node in graph.nodes
        if node.op == "aten.convolution_backward.default"
    ]
    assert [False, True, True] in masks and [True, True, False] in masks, masks
    if decomposition == "backward_ops":
        assert masked["aten.native_group_norm_backward.default"] == [True, False, False]
        assert masked["aten.native_layer_norm_backward.default"] == [True, False, False]
        assert "aten.embedding_dense_backward.default" in {node.op for node in graph.nodes}
        # torch's meta declares a batch norm's grad_input even when its mask says no
        batch_norms = [
            node.args[-1]
            for node in graph.nodes
            if node.op == "aten.native_batch_norm_backward.default"
            and not node.results[0].is_undefined
        ]
        assert (False, True, True) in batch_norms and (True, True, True) in batch_norms
    undefined = [r.name for node in graph.nodes for r in node.results if r.is_undefined]
    assert undefined == [f"undefined_{k}" for k in range(len(undefined))]
    assert graph_difference(graph, parse(format_graph(graph))) is None
    # The joint program's stack traces are frames of torch's generated code: no source.
    assert {node.provenance.source for node in graph.nodes} == {None}
    kinds = [output.kind for output in graph.outputs]
    assert kinds.count(OutputKind.GRADIENT_TO_PARAMETER) == 14
    assert kinds.count(OutputKind.LOSS_OUTPUT) == 1


def test_from_fx_gives_the_graph_load_reads(step: tuple[str, Any, Graph]) -> None:
    _, program, graph = step
    imported = aten2prims.from_fx(program, name=graph.name)
    assert graph_difference(graph, imported, compare_data=True) is None


def test_lowers_to_prims_and_matches_torch(step: tuple[str, Any, Graph]) -> None:
    _, _, graph = step
    lowered = aten2prims.lower(graph)
    verify(lowered)
    assert {node.namespace for node in lowered.nodes} == {"prims"}
    assert not any(value.is_undefined for node in lowered.nodes for value in node.results)
    image, idx, target = _inputs()
    feed = {"image": to_numpy(image), "idx": to_numpy(idx), "target": to_numpy(target)}
    ours = execute(lowered, feed, return_all_outputs=True, check=True)
    (loss,) = aten2prims.execute(lowered, feed)  # the loss is the step's one user output
    assert (
        loss.tobytes()
        == ours[[o.kind for o in graph.outputs].index(OutputKind.LOSS_OUTPUT)].tobytes()
    )
    expected = _torch_step(torch.float32)
    reference = _torch_step(torch.float64)
    assert len(ours) == len(graph.outputs) == len(expected)
    for output, our in zip(graph.outputs, ours):
        key = (output.kind, output.target)
        verdict = compare(
            our,
            expected[key],
            reference=reference[key],
            what=f"{output.kind.value} {output.target}",
        )
        assert verdict, verdict.message


def test_bisect_judges_every_node_of_the_step(step: tuple[str, Any, Graph]) -> None:
    """bisect runs each aten node in torch and its expansion on NumPy: the masked backward
    nodes are judged on their defined results."""
    _, _, graph = step
    image, idx, target = _inputs()
    report = aten2prims.bisect(
        graph, {"image": to_numpy(image), "idx": to_numpy(idx), "target": to_numpy(target)}
    )
    assert report.ok, str(report)
    checked = {check.op for check in report.checks}
    assert "aten.convolution_backward.default" in checked
