"""The non-core overloads torch.export keeps in graphs (`aten2prims.schema.EXTRA_ATEN_SCHEMAS`):
each through the conformance harness (OpInfo samples where OpInfo reaches the overload, which the
recorder keeps as it keeps Core ATen ones, and hand-written samples), and end to end in an
exported model. The batch norm ones have their own tests (tests/test_batch_norm_functional.py;
the backward's every output_mask in tests/test_normalization.py and an exported training step in
tests/test_training.py)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
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


class VAE(torch.nn.Module):
    """A variational autoencoder's reparameterization: z = mu + eps · std, eps = randn_like."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.Linear(6, 8)
        self.decoder = torch.nn.Linear(4, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        mu, logvar = self.encoder(x).chunk(2, dim=-1)
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        z = mu + eps * std
        return self.decoder(z), mu, logvar, eps


class RandomMasking(torch.nn.Module):
    """Token masking as in masked language modelling (rand_like picks, randint_like replaces),
    with noise of torch.normal, tensor.uniform_ and torch.randint."""

    def forward(self, ids: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        picked = torch.rand_like(x) < 0.15
        replacement = torch.randint_like(ids, 5, 1000)
        masked = torch.where(picked, replacement, ids)
        noisy = torch.normal(x, 0.1)
        jitter = torch.empty_like(x).uniform_(-1.0, 1.0)
        shuffle = torch.randint(0, 10, (3, 4))
        return masked, picked, replacement, noisy, jitter, shuffle


def _exported_and_lowered(
    module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], tmp_path: Path, kept: set[str]
) -> aten2prims.Graph:
    program = torch.export.export(module, inputs).run_decompositions()
    targets = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    assert kept <= targets, targets
    path = tmp_path / f"{type(module).__name__}.pt2"
    torch.export.save(program, str(path))
    return aten2prims.lower(aten2prims.load(path))


def _same_arrays(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(a, b, strict=True))


def test_exported_vae_draws_its_noise_and_computes_the_rest_as_torch(tmp_path: Path) -> None:
    """Shapes and dtypes as torch's; given our eps, everything else is torch's; the same seed
    gives the same results, another seed other ones; eps is standard normal."""
    torch.manual_seed(0)
    model = VAE().eval()
    x = torch.randn(512, 6, generator=torch.Generator().manual_seed(1))
    graph = _exported_and_lowered(model, (x,), tmp_path, {"aten.randn_like.default"})
    ours = aten2prims.execute(graph, [x.numpy()], seed=1)
    with torch.no_grad():
        expected = model(x)
        mu, logvar = model.encoder(x).chunk(2, dim=-1)
        eps = torch.from_numpy(ours[3])
        decoded = model.decoder(mu + eps * torch.exp(0.5 * logvar))
    for mine, theirs in zip(ours, expected, strict=True):
        assert mine.dtype == to_numpy(theirs).dtype and mine.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours[1], to_numpy(mu), rtol=1.3e-6, atol=1e-5)
    np.testing.assert_allclose(ours[2], to_numpy(logvar), rtol=1.3e-6, atol=1e-5)
    np.testing.assert_allclose(ours[0], to_numpy(decoded), rtol=1.3e-6, atol=1e-5)
    draws = ours[3].astype(np.float64).reshape(-1)  # 2048 draws: mean 0 ± 5 SE, variance 1 ± 5 SE
    assert abs(draws.mean()) < 5 / np.sqrt(draws.size)
    assert abs(draws.var() - 1) < 5 * np.sqrt(2 / draws.size)
    assert _same_arrays(ours, aten2prims.execute(graph, [x.numpy()], seed=1))
    other = aten2prims.execute(graph, [x.numpy()], seed=2)
    assert not np.array_equal(other[3], ours[3]) and not np.array_equal(other[0], ours[0])
    assert _same_arrays(ours[1:3], other[1:3])  # the deterministic part


def test_exported_random_masking_matches_torch_given_its_draws(tmp_path: Path) -> None:
    model = RandomMasking()
    generator = torch.Generator().manual_seed(2)
    ids = torch.randint(0, 5, (64, 32), generator=generator)
    x = torch.randn(64, 32, generator=generator)
    kept = {
        "aten.rand_like.default",
        "aten.randint_like.low_dtype",
        "aten.normal.Tensor_float",
        "aten.uniform.default",
        "aten.randint.low",
    }
    graph = _exported_and_lowered(model, (ids, x), tmp_path, kept)
    feed = [ids.numpy(), x.numpy()]
    ours = aten2prims.execute(graph, feed, seed=1)
    expected = model(ids, x)
    for mine, theirs in zip(ours, expected, strict=True):
        assert mine.dtype == to_numpy(theirs).dtype and mine.shape == tuple(theirs.shape)
    masked, picked, replacement, noisy, jitter, shuffle = ours
    np.testing.assert_array_equal(masked, np.where(picked, replacement, ids.numpy()))
    assert 0.05 < picked.mean() < 0.25  # 2048 draws kept with probability 0.15
    assert replacement.min() >= 5 and replacement.max() < 1000
    assert np.abs(noisy - x.numpy()).max() < 0.1 * 6 and noisy.std() > 0
    assert jitter.min() >= -1.0 and jitter.max() < 1.0
    assert shuffle.min() >= 0 and shuffle.max() < 10
    assert _same_arrays(ours, aten2prims.execute(graph, feed, seed=1))
    other = aten2prims.execute(graph, feed, seed=2)
    assert all(not np.array_equal(a, b) for a, b in zip(ours[1:], other[1:], strict=True))


class Sampling(torch.nn.Module):
    """Sampling tokens from logits (multinomial with and without replacement), random integers
    like a tensor and of a size, and torch.normal's other forms and tensor.normal_()."""

    def forward(self, logits: torch.Tensor, std: torch.Tensor) -> tuple[torch.Tensor, ...]:
        probabilities = logits.softmax(dim=-1)
        return (
            torch.multinomial(probabilities, 1),
            torch.multinomial(probabilities, 3, replacement=True),
            torch.randint_like(logits, 7),
            torch.randint(100, (5, 2)),
            torch.normal(2.0, std),
            torch.normal(logits, std),
            torch.normal(0.0, 1.0, (4, 3)),
            torch.empty_like(std).normal_(1.0, 0.5),
        )


def test_exported_sampling_gives_torchs_shapes_and_dtypes_and_is_seeded(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(8, 5, generator=generator)
    logits[:, 2] = -math.inf  # a category of probability 0: never drawn
    std = torch.rand(8, 5, generator=generator) + 0.5
    kept = {
        "aten.multinomial.default",
        "aten.randint_like.default",
        "aten.randint.default",
        "aten.normal.float_Tensor",
        "aten.normal.Tensor_Tensor",
        "aten.normal.float_float",
        "aten.normal_functional.default",
    }
    graph = _exported_and_lowered(Sampling(), (logits, std), tmp_path, kept)
    feed = [logits.numpy(), std.numpy()]
    ours = aten2prims.execute(graph, feed, seed=1)
    expected = Sampling()(logits, std)
    for mine, theirs in zip(ours, expected, strict=True):
        assert mine.dtype == to_numpy(theirs).dtype and mine.shape == tuple(theirs.shape)
    one, three, integers, randint, around_two, around_logits, standard, normal_ = ours
    for drawn in (one, three):
        assert drawn.min() >= 0 and drawn.max() < 5 and not (drawn == 2).any()
    assert set(np.unique(integers)) <= set(range(7)) and integers.dtype == np.float32
    assert randint.min() >= 0 and randint.max() < 100
    assert np.isfinite(around_two).all() and np.isfinite(standard).all()
    assert np.isfinite(normal_).all() and normal_.std() > 0
    np.testing.assert_array_equal(np.isneginf(around_logits), np.isneginf(logits.numpy()))
    assert _same_arrays(ours, aten2prims.execute(graph, feed, seed=1))
    other = aten2prims.execute(graph, feed, seed=2)
    assert all(not np.array_equal(a, b) for a, b in zip(ours[1:], other[1:], strict=True))


class DynamicDraws(torch.nn.Module):
    """Draws of a batch of dynamic size."""

    def forward(self, x: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.randn_like(x) * x,
            torch.rand_like(x) < 0.5,
            torch.randint_like(x, 3, 9),
            torch.normal(x, 2.0),
            torch.empty_like(x).uniform_(-1.0, 1.0),
            torch.multinomial(p, 2),
        )


def test_draws_of_a_dynamic_batch_take_each_size(tmp_path: Path) -> None:
    batch = torch.export.Dim("batch", min=1, max=64)
    example = (torch.randn(4, 3), torch.rand(4, 5))
    program = torch.export.export(
        DynamicDraws(), example, dynamic_shapes=({0: batch}, {0: batch})
    ).run_decompositions()
    path = tmp_path / "dynamic_draws.pt2"
    torch.export.save(program, str(path))
    graph = aten2prims.lower(aten2prims.load(path))
    generator = torch.Generator().manual_seed(4)
    for size in (1, 7, 33):
        x, p = torch.randn(size, 3, generator=generator), torch.rand(size, 5, generator=generator)
        ours = aten2prims.execute(graph, [x.numpy(), p.numpy()], seed=size)
        for mine, theirs in zip(ours, DynamicDraws()(x, p), strict=True):
            assert mine.dtype == to_numpy(theirs).dtype and mine.shape == tuple(theirs.shape)
        integers, uniform, indices = ours[2], ours[4], ours[5]
        assert integers.min() >= 3 and integers.max() < 9
        assert uniform.min() >= -1.0 and uniform.max() < 1.0
        assert indices.min() >= 0 and indices.max() < 5 and (indices[:, 0] != indices[:, 1]).all()


class InPlaceDraws(torch.nn.Module):
    """The in-place draws of a tensor: log_normal_, cauchy_, geometric_, random_(to), random_()."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.empty_like(x).log_normal_(0.0, 0.5),
            torch.empty_like(x).cauchy_(1.0, 2.0),
            torch.empty_like(x).geometric_(0.3),
            torch.empty_like(n).random_(10),
            torch.empty_like(n).random_(),
        )


def test_exported_in_place_draws_give_torchs_shapes_dtypes_and_ranges(tmp_path: Path) -> None:
    x, n = torch.zeros(40, 50), torch.zeros(40, 50, dtype=torch.int16)
    kept = {
        "aten.log_normal.default",
        "aten.cauchy.default",
        "aten.geometric.default",
        "aten.random.to",
        "aten.random.default",
    }
    graph = _exported_and_lowered(InPlaceDraws(), (x, n), tmp_path, kept)
    feed = [x.numpy(), n.numpy()]
    ours = aten2prims.execute(graph, feed, seed=1)
    for mine, theirs in zip(ours, InPlaceDraws()(x, n), strict=True):
        assert mine.dtype == to_numpy(theirs).dtype and mine.shape == tuple(theirs.shape)
    log_normal, cauchy, geometric, below_ten, any_int16 = ours
    assert log_normal.min() > 0 and abs(np.median(np.log(log_normal))) < 0.1
    assert abs(np.median(cauchy) - 1.0) < 0.5
    assert geometric.min() >= 1 and (geometric == np.floor(geometric)).all()
    assert below_ten.min() >= 0 and below_ten.max() < 10
    assert any_int16.min() >= 0 and any_int16.max() > 2**14  # [0, 32767]
    assert _same_arrays(ours, aten2prims.execute(graph, feed, seed=1))
    other = aten2prims.execute(graph, feed, seed=2)
    assert all(not np.array_equal(a, b) for a, b in zip(ours, other, strict=True))


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


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ("f16[3, 2]", r"DTypeError.*aten\.view_as_complex: float16 gives complex32"),
        ("bf16[3, 2]", r"DTypeError.*aten\.view_as_complex: expected a float32 or float64"),
        ("f32[3, 3]", r"ShapeError.*aten\.view_as_complex: expected a last dim of size 2"),
        ("f32[2, 2]{1, 2}", r"ShapeError.*expected a last dim of stride 1"),
        ("f32[2, 2]{3, 1}", r"ShapeError.*expected even strides but for the last dim"),
        ("f32[2, 2]{2, 1}+1", r"ShapeError.*expected an even storage offset, got 1"),
    ],
)
def test_view_as_complex_refuses_what_torch_cannot_view(declared: str, expected: str) -> None:
    """torch's refusals (its messages: a last dimension of size 2, with stride 1, a storage
    offset and the other strides divisible by 2; half gives complex32, which we do not model;
    bfloat16 it refuses), each naming the overload and the node."""
    dtype = "c128" if declared.startswith("f64") else "c64"
    text = (
        f"graph g(%x: {declared}) -> ({dtype}[2]):\n"
        f"  %y: {dtype}[2] = aten.view_as_complex.default(%x)\n  return (%y)\n"
    )
    with pytest.raises(Exception, match=r"lowering aten\.view_as_complex\.default.* -> %y") as info:
        aten2prims.lower(parse(text))
    assert re.search(expected, f"{type(info.value).__name__}: {info.value}"), info.value


@pytest.mark.parametrize(
    ("op", "real", "imag", "expected"),
    [
        ("complex", "f32", "f64", "both parts must have one dtype"),
        ("polar", "f64", "f32", "both parts must have one dtype"),
        (
            "complex",
            "f16",
            "f16",
            "float16 parts are not supported .torch's result would be complex32",
        ),
        ("polar", "f16", "f16", "float16 parts are not supported .torch's CPU kernel refuses"),
        ("complex", "bf16", "bf16", "parts of dtype bf16 is not supported"),
        ("polar", "i64", "i64", "parts of dtype i64 is not supported"),
    ],
)
def test_complex_and_polar_refuse_what_torch_refuses(
    op: str, real: str, imag: str, expected: str
) -> None:
    """torch promotes neither part, refuses bfloat16 and integers; float16 is complex32 for
    torch.complex (which we do not model) and unimplemented in torch.polar."""
    text = (
        f"graph g(%a: {real}[3], %b: {imag}[3]) -> (c64[3]):\n"
        f"  %y: c64[3] = aten.{op}.default(%a, %b)\n  return (%y)\n"
    )
    with pytest.raises(
        DTypeError, match=rf"lowering aten\.{op}\.default.* -> %y: aten\.{op}: {expected}"
    ):
        aten2prims.lower(parse(text))


class GlobalFilter(torch.nn.Module):
    """GFNet's global filter layer: the tokens as an h x w grid, its 2-d real FFT times a learned
    complex filter stored as pairs of reals (view_as_complex of a parameter), and back."""

    def __init__(self, dim: int = 8, h: int = 6, w: int = 6) -> None:
        super().__init__()
        self.h, self.w = h, w
        self.complex_weight = torch.nn.Parameter(torch.randn(h, w // 2 + 1, dim, 2) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, channels = x.shape
        grid = x.view(batch, self.h, self.w, channels).to(torch.float32)
        spectrum = torch.fft.rfft2(grid, dim=(1, 2), norm="ortho")
        spectrum = spectrum * torch.view_as_complex(self.complex_weight)
        grid = torch.fft.irfft2(spectrum, s=(self.h, self.w), dim=(1, 2), norm="ortho")
        return grid.reshape(batch, tokens, channels)


class Rotary(torch.nn.Module):
    """A Llama-style rotary embedding: each head's pairs of features as complex numbers
    (view_as_complex of the reshaped queries and keys), times the rotations of their positions
    (torch.polar for the queries, torch.complex of cos and sin for the keys), back to pairs of
    reals with view_as_real."""

    inverse_frequencies: torch.Tensor

    def __init__(self, head_dim: int = 8, theta: float = 10000.0) -> None:
        super().__init__()
        exponents = torch.arange(0, head_dim, 2).float() / head_dim
        self.register_buffer("inverse_frequencies", 1.0 / theta**exponents)

    def forward(self, xq: torch.Tensor, xk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        length = xq.shape[1]
        positions = torch.arange(length, dtype=torch.float32)
        angles = torch.outer(positions, self.inverse_frequencies)[None, :, None, :]
        rotate_q = torch.polar(torch.ones_like(angles), angles)
        rotate_k = torch.complex(torch.cos(angles), torch.sin(angles))
        q = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        k = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        q_out = torch.view_as_real(q * rotate_q).flatten(3)
        k_out = torch.view_as_real(k * rotate_k).flatten(3)
        return q_out.type_as(xq), k_out.type_as(xk)


def _check_exported(
    model: torch.nn.Module,
    examples: tuple[torch.Tensor, ...],
    shapes: Any,
    kept: set[str],
    runs: Sequence[tuple[torch.Tensor, ...]],
    path: Path,
) -> None:
    """Saved, loaded, lowered, run on each input set against eager, and traced back into torch
    through to_fx."""
    program = torch.export.export(model, examples, dynamic_shapes=shapes).run_decompositions()
    targets = {str(node.target) for node in program.graph.nodes if node.op == "call_function"}
    assert kept <= targets, targets
    graph = _run_saved(program, path)
    traced = to_fx(graph)
    for inputs in runs:
        ours = aten2prims.execute(graph, [to_numpy(t) for t in inputs], check=True)
        with torch.no_grad():
            expected = model(*inputs)
            in_torch = traced(*inputs)
        if isinstance(expected, torch.Tensor):
            expected = (expected,)
        for mine, back, theirs in zip(ours, in_torch, expected, strict=True):
            theirs = to_numpy(theirs)
            assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
            np.testing.assert_allclose(mine, theirs, rtol=1.3e-6, atol=1e-5)
            np.testing.assert_allclose(to_numpy(back), theirs, rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_batch"])
def test_exported_gfnet_global_filter_matches_torch(dynamic: bool, tmp_path: Path) -> None:
    """The filter's grid is fixed by its weight, so the dynamic dim is the batch."""
    torch.manual_seed(0)
    model = GlobalFilter().eval()
    generator = torch.Generator().manual_seed(1)
    shapes = ({0: Dim("batch", min=1, max=16)},) if dynamic else None
    runs = [
        (torch.randn(batch, 36, 8, generator=generator),)
        for batch in ((2, 1, 5) if dynamic else (2,))
    ]
    _check_exported(
        model, runs[0], shapes, {"aten.view_as_complex.default"}, runs, tmp_path / "gfnet.pt2"
    )


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_sequence"])
def test_exported_rotary_embedding_matches_torch(dynamic: bool, tmp_path: Path) -> None:
    model = Rotary().eval()
    generator = torch.Generator().manual_seed(2)
    sequence = Dim("sequence", min=2, max=64)
    shapes = ({1: sequence}, {1: sequence}) if dynamic else None
    runs = [
        (
            torch.randn(2, length, 3, 8, generator=generator),
            torch.randn(2, length, 3, 8, generator=generator),
        )
        for length in ((10, 3, 17) if dynamic else (10,))
    ]
    kept = {"aten.view_as_complex.default", "aten.polar.default", "aten.complex.default"}
    _check_exported(model, runs[0], shapes, kept, runs, tmp_path / "rotary.pt2")


class WriteThroughComplexView(torch.nn.Module):
    """A write through view_as_complex's view, seen in the real tensor it views."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        torch.view_as_complex(x).mul_(2j)
        return x


def test_a_write_through_the_complex_view_is_functionalized(tmp_path: Path) -> None:
    """torch's view_as_complex shares its input's memory, but export functionalizes the write:
    the graph holds view_as_real of the product, so a copy computes the same."""
    x = torch.randn(4, 3, 2)
    program = torch.export.export(WriteThroughComplexView(), (x,)).run_decompositions()
    targets = [str(n.target) for n in program.graph.nodes if n.op == "call_function"]
    assert targets == [
        "aten.clone.default",
        "aten.view_as_complex.default",
        "aten.mul.Tensor",
        "aten.view_as_real.default",
    ]
    graph = _run_saved(program, tmp_path / "write.pt2")
    (ours,) = aten2prims.execute(graph, [to_numpy(x)], check=True)
    np.testing.assert_allclose(ours, to_numpy(WriteThroughComplexView()(x)), rtol=1.3e-6)
