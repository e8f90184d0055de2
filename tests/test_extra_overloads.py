"""The non-core overloads torch.export keeps in graphs (`aten2prims.schema.EXTRA_ATEN_SCHEMAS`):
each through the conformance harness (OpInfo samples where OpInfo reaches the overload, which the
recorder keeps as it keeps Core ATen ones, and hand-written samples), and end to end in an
exported model. The batch norm ones have their own tests (tests/test_batch_norm_functional.py;
the backward's every output_mask in tests/test_normalization.py and an exported training step in
tests/test_training.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import aten2prims
from aten2prims.backends.to_fx import to_fx
from aten2prims.errors import DTypeError
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.ir import parse
from aten2prims.ir.symbolic import is_symbolic
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


def test_complex_fft_reaches_opinfo_samples(opinfo_cache_dir: str) -> None:
    """The recorder keeps `_fft_c2c`, so OpInfo's n-dimensional FFT samples reach it in complex64
    and complex128. (fft.fft and fft.ifft of a complex signal reach it too, but the discovery
    map runs each OpInfo in its first dtype, float32, where they run `_fft_r2c` instead.)"""
    report = check_op("aten._fft_c2c.default", budget=FULL_BUDGET, cache_dir=opinfo_cache_dir)
    origins = {
        outcome.call.origin.split()[0]
        for outcomes in report.outcomes.values()
        for outcome in outcomes
    }
    assert {
        "opinfo:fft.fft2",
        "opinfo:fft.fftn",
        "opinfo:fft.ifft2",
        "opinfo:fft.ifftn",
    } <= origins, origins


class FNetBlock(torch.nn.Module):
    """FNet's token mixing (the real part of a 2-d FFT over the sequence and hidden dims) in a
    residual block, and beside it an inverse FFT over the sequence with norm="ortho": a complex
    transform scaled by 1/sqrt(sequence length)."""

    def __init__(self) -> None:
        super().__init__()
        self.mixing_norm = torch.nn.LayerNorm(16)
        self.feed_forward = torch.nn.Linear(16, 16)
        self.output_norm = torch.nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mixed = self.mixing_norm(x + torch.fft.fft2(x).real)
        hidden = self.output_norm(mixed + F.gelu(self.feed_forward(mixed)))
        return hidden, torch.fft.ifft(torch.fft.fft2(x), dim=1, norm="ortho")


def _run_saved(program: torch.export.ExportedProgram, path: Path) -> Any:
    torch.export.save(program, str(path))
    return aten2prims.lower(aten2prims.load(path))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_sequence"])
def test_exported_fnet_token_mixing_matches_torch(dynamic: bool, tmp_path: Path) -> None:
    """Saved, loaded, lowered and run against eager; with a dynamic sequence dim, one lowering
    runs every length (the ortho scale's square root computed when the graph runs)."""
    torch.manual_seed(0)
    model = FNetBlock().eval()
    example = torch.randn(2, 10, 16)
    shapes = ({1: Dim("sequence", min=2, max=64)},) if dynamic else None
    program = torch.export.export(model, (example,), dynamic_shapes=shapes).run_decompositions()
    kept = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    assert {"aten._fft_c2c.default", "aten.view_as_real.default"} <= kept
    graph = _run_saved(program, tmp_path / "fnet.pt2")
    assert is_symbolic(graph.user_inputs[0].value.shape[1]) is dynamic
    generator = torch.Generator().manual_seed(1)
    for length in (10, 3, 17, 32) if dynamic else (10,):
        x = torch.randn(2, length, 16, generator=generator)
        ours = aten2prims.execute(graph, [to_numpy(x)], check=True)
        with torch.no_grad():
            expected = model(x)
        for mine, theirs in zip(ours, expected, strict=True):
            theirs = to_numpy(theirs)
            assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
            np.testing.assert_allclose(mine, theirs, rtol=1.3e-6, atol=1e-5)


class ComplexTransforms(torch.nn.Module):
    """Every torch.fft function whose export holds `_fft_c2c` or a conjugate, on a real and on
    a complex signal, the imaginary part of a transposed transform, a spectrum's phase, and
    sample frequencies."""

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.fft.fft(z),
            torch.fft.ifft(z),
            torch.fft.ifft(x),
            torch.fft.fft2(x, norm="forward"),
            torch.fft.fftn(z, norm="ortho"),
            torch.fft.ifftn(z, dim=(0, 2), norm="forward"),
            torch.fft.ifft2(x, norm="ortho"),
            torch.fft.hfft(z),
            torch.fft.ihfft(x),
            torch.fft.hfft2(z),
            torch.fft.ihfftn(x),
            torch.fft.fft(z, dim=0).transpose(0, 2).imag,
            torch.fft.rfft(x).angle(),
            torch.fft.fftfreq(7, 0.1),
            x * torch.fft.rfftfreq(10, 0.5),
        )


def test_exported_complex_transforms_match_torch(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    inputs = (
        torch.randn(3, 4, 6, generator=generator),
        torch.randn(3, 4, 6, generator=generator, dtype=torch.complex64),
    )
    program = torch.export.export(ComplexTransforms(), inputs).run_decompositions()
    kept = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    assert {
        "aten._fft_c2c.default",
        "aten._conj.default",
        "aten._conj_physical.default",
        "aten.view_as_real.default",
        "aten.fft_fftfreq.default",
        "aten.fft_rfftfreq.default",
        "aten.angle.default",
    } <= kept
    graph = _run_saved(program, tmp_path / "transforms.pt2")
    ours = aten2prims.execute(graph, [to_numpy(t) for t in inputs], check=True)
    with torch.no_grad():
        expected = ComplexTransforms()(*inputs)
        # the prims graph traced back into torch runs there too (torch's prims take its operands)
        traced = to_fx(graph)(*inputs)
    for mine, in_torch, theirs in zip(ours, traced, expected, strict=True):
        theirs = to_numpy(theirs)
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        np.testing.assert_allclose(mine, theirs, rtol=1.3e-6, atol=1e-5)
        np.testing.assert_allclose(to_numpy(in_torch), theirs, rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ("%y: f32[3] = aten._conj.default(%x)", "aten._conj: expected a complex tensor"),
        (
            "%y: f32[3, 2] = aten.view_as_real.default(%x)",
            "aten.view_as_real: expected a complex tensor",
        ),
        (
            "%y: c64[3] = aten.fft_fftfreq.default(3, 1.0, dtype=c64)",
            "aten.fft_fftfreq: dtype c64 is not supported",
        ),
    ],
)
def test_what_torch_refuses_is_refused_naming_the_op_and_node(node: str, expected: str) -> None:
    """torch asserts on `_conj` of a real tensor, refuses `view_as_real` of one and has no
    complex arange for fftfreq: each is a DTypeError naming the overload and the node."""
    result = node.split(":")[1].split("=")[0].strip()
    text = f"graph g(%x: f32[3]) -> ({result}):\n  {node}\n  return (%y)\n"
    with pytest.raises(DTypeError, match=rf"lowering aten\..* -> %y: {re.escape(expected)}"):
        aten2prims.lower(parse(text))
