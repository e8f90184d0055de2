"""The non-core overloads torch.export keeps in graphs (`aten2prims.schema.EXTRA_ATEN_SCHEMAS`):
each through the conformance harness (OpInfo samples where OpInfo reaches the overload, which the
recorder keeps as it keeps Core ATen ones, and hand-written samples), and end to end in an
exported model. The batch norm ones have their own tests (tests/test_batch_norm_functional.py;
the backward's every output_mask in tests/test_normalization.py and an exported training step in
tests/test_training.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import aten2prims
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.schema.registry import EXTRA_COMPUTING_OPS
from aten2prims.testing.budgets import FAST_BUDGET, FULL_BUDGET
from aten2prims.testing.conformance import check_op, unexpected_failures

EXTRA = sorted(
    EXTRA_COMPUTING_OPS
    - {
        "aten._native_batch_norm_legit_functional.default",
        "aten.native_batch_norm_backward.default",
    }
)


@pytest.mark.parametrize("op", EXTRA)
def test_extra_overload_conforms(
    op: str, request: pytest.FixtureRequest, opinfo_cache_dir: str
) -> None:
    budget = FULL_BUDGET if request.config.getoption("--full-budget") else FAST_BUDGET
    report = check_op(op, budget=budget, cache_dir=opinfo_cache_dir)
    passed, run = report.totals
    assert run > 0, f"{op}: no sample ran"
    failures = unexpected_failures(report)
    assert not failures, "\n".join(
        f"[{d.short}] {o.call.describe()}: {o.message}" for d, o in failures[:5]
    )
    assert passed == run


def test_linalg_vector_norm_reaches_opinfo_samples(opinfo_cache_dir: str) -> None:
    """The recorder keeps the extra overloads, so OpInfo's linalg norm samples (every
    ord, dim and dtype they try) reach the rule."""
    report = check_op(
        "aten.linalg_vector_norm.default", budget=FULL_BUDGET, cache_dir=opinfo_cache_dir
    )
    origins = {
        outcome.call.origin.split()[0]
        for outcomes in report.outcomes.values()
        for outcome in outcomes
    }
    assert any(origin.startswith("opinfo:linalg.") for origin in origins), origins


class Exported(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            F.normalize(x, dim=1),
            torch.linalg.vector_norm(x, float("inf"), dim=0),
            torch.round(x * 100, decimals=-1),
            (n << 3) >> torch.tensor([1, 2, 3, 70]),
            *torch.nn.functional.adaptive_max_pool2d(x[None], (2, 3), return_indices=True),
        )


def test_exported_graph_with_extra_overloads_matches_torch(tmp_path: Path) -> None:
    inputs = (torch.randn(3, 4), torch.tensor([[1, -2, 300, -4000]] * 3))
    program = torch.export.export(Exported(), inputs).run_decompositions()
    kept = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    assert {
        "aten.linalg_vector_norm.default",
        "aten.round.decimals",
        "aten.__lshift__.Scalar",
        "aten.__rshift__.Tensor",
        "aten.adaptive_max_pool2d.default",
    } <= kept
    path = tmp_path / "extra.pt2"
    torch.export.save(program, str(path))
    graph = aten2prims.lower(aten2prims.load(path))
    ours = aten2prims.execute(graph, [to_numpy(t) for t in inputs])
    with torch.no_grad():
        expected = Exported()(*inputs)
    for mine, theirs in zip(ours, expected, strict=True):
        theirs = to_numpy(theirs)
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_allclose(mine, theirs, rtol=1.3e-6, atol=1e-5)


class ExportedSelections(torch.nn.Module):
    """The order statistics, scans, searches and modules whose overloads torch.export keeps."""

    def __init__(self) -> None:
        super().__init__()
        # A weight that requires no gradient: embedding_bag runs _embedding_bag_forward_only.
        self.register_buffer(
            "table", torch.randn(10, 3, generator=torch.Generator().manual_seed(1))
        )
        self.bilinear = torch.nn.Bilinear(6, 5, 2)

    def forward(
        self, x: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        boundaries = torch.tensor([-1.0, 0.0, 0.5])
        return (
            *torch.var_mean(x, 1, correction=0),
            torch.logcumsumexp(x, 0),
            *torch.cummax(x, 1),
            *torch.cummin(x, 0),
            torch.searchsorted(boundaries, x),
            torch.searchsorted(boundaries, 0.25, right=True),
            torch.bucketize(x, boundaries),
            torch.median(x, 1).values,
            torch.median(x),
            torch.nanmedian(x, 0).values,
            torch.kthvalue(x, 2, 1).values,
            torch.mode(torch.round(x), 1).values,
            torch.tril_indices(3, 4, 1),
            torch.triu_indices(4, 3, -1),
            self.bilinear(x, x[:, :5] * 2),
            *(
                F.embedding_bag(indices, self.table, offsets, mode=mode, include_last_offset=True)
                for mode in ("sum", "mean", "max")
            ),
            torch.nn.functional.rrelu(x, training=False),
        )


def test_exported_selections_match_torch(tmp_path: Path) -> None:
    model = ExportedSelections().eval()
    generator = torch.Generator().manual_seed(0)
    inputs = (
        torch.randn(3, 6, generator=generator),
        torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]),
        torch.tensor([0, 3, 3, 8]),
    )
    program = torch.export.export(model, inputs).run_decompositions()
    kept = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    assert {
        "aten.var_mean.correction",
        "aten.logcumsumexp.default",
        "aten.cummax.default",
        "aten.searchsorted.Tensor",
        "aten.searchsorted.Scalar",
        "aten.bucketize.Tensor",
        "aten.median.dim",
        "aten.kthvalue.default",
        "aten.mode.default",
        "aten.tril_indices.default",
        "aten._trilinear.default",
        "aten._embedding_bag_forward_only.default",
        "aten.rrelu_with_noise_functional.default",
    } <= kept
    path = tmp_path / "selections.pt2"
    torch.export.save(program, str(path))
    graph = aten2prims.lower(aten2prims.load(path))
    ours = aten2prims.execute(graph, [to_numpy(t) for t in inputs])
    with torch.no_grad():
        expected = model(*inputs)
    for mine, theirs in zip(ours, expected, strict=True):
        theirs = to_numpy(theirs)
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_allclose(mine, theirs, rtol=1.3e-6, atol=1e-5)
