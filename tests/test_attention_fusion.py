"""Attention as one blocked step (aten2prims/executor/attention.py): the chain q @ k -> row-wise
steps (scale, mask, softmax, fully-masked rows) -> @ v runs block by block on the call's threads.
It fires on the suite's transformer-family models and on hand-written attentions, gives the
values of the unfused steps and of torch, the same bits on any number of threads, and leaves
chains it does not know to the unfused steps."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import aten2prims
from aten2prims.executor import attention, plan_for
from aten2prims.executor.attention import AttentionKernel
from aten2prims.executor.reference import run_reference
from aten2prims.frontends.torch_interop import to_numpy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from _benchmark_modules import load_benchmark
from _model_checks import assert_like_torch
from _plan_switches import plan_switches
from models import build as build_zoo

suite = load_benchmark("suite", "suite.py")


def _attention_steps(graph: aten2prims.Graph) -> list[AttentionKernel]:
    return [step.kernel for step in plan_for(graph).steps if type(step.kernel) is AttentionKernel]


def _export(model: nn.Module, inputs: tuple[torch.Tensor, ...], path: Path) -> aten2prims.Graph:
    program = torch.export.export(model, inputs).run_decompositions()
    torch.export.save(program, path)
    return aten2prims.lower(aten2prims.load(path))


def _unfused(path: Path) -> aten2prims.Graph:
    with plan_switches(FUSE_ATTENTION=False):
        graph = aten2prims.lower(aten2prims.load(path))
        assert not _attention_steps(graph)
    return graph


def _assert_close_to_unfused(fused: list[np.ndarray], unfused: list[np.ndarray]) -> None:
    """Tight float32 agreement (each block's product is its own BLAS call), NaNs in place."""
    assert len(fused) == len(unfused)
    for ours, theirs in zip(fused, unfused):
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6, equal_nan=True)


# -- the suite's transformer-family models (tiny configs) and the zoo's transformer -------------


@pytest.fixture(scope="module")
def suite_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("attention")
    made: dict[str, Any] = {}
    for name in ("bert", "gpt2", "llama"):
        model, inputs = suite.build(name, "tiny")
        path = directory / f"{name}.pt2"
        graph = _export(model, inputs, path)
        made[name] = (path, graph, [to_numpy(t) for t in inputs], (model, inputs))
    model, _ = build_zoo("transformer")
    torch.manual_seed(3)
    sequence = 128
    mask = torch.triu(torch.full((sequence, sequence), float("-inf")), diagonal=1)
    inputs = (torch.randn(8, sequence, 32), mask)
    path = directory / "transformer.pt2"
    graph = _export(model, inputs, path)
    made["transformer"] = (path, graph, [to_numpy(t) for t in inputs], (model, inputs))
    return made


# One attention per layer: the suite's tiny configs have one layer, the zoo's transformer two.
LAYERS = {"bert": 1, "gpt2": 1, "llama": 1, "transformer": 2}


@pytest.mark.parametrize("name", list(LAYERS))
def test_the_fusion_fires_on_the_suites_attention(name: str, suite_models: dict) -> None:
    path, graph, inputs, (model, tensors) = suite_models[name]
    assert len(_attention_steps(graph)) == LAYERS[name]
    fused = aten2prims.execute(graph, inputs, threads=1)
    unfused = aten2prims.execute(_unfused(path), inputs, threads=1)
    _assert_close_to_unfused(fused, unfused)
    assert_like_torch(fused, model, tensors)


@pytest.mark.parametrize("name", list(LAYERS))
def test_every_thread_count_gives_the_same_bits(name: str, suite_models: dict) -> None:
    _, graph, inputs, _ = suite_models[name]
    one = aten2prims.execute(graph, inputs, threads=1)
    for threads in (2, 3):
        many = aten2prims.execute(graph, inputs, threads=threads)
        assert [o.tobytes() for o in many] == [o.tobytes() for o in one], threads


def test_the_zoo_transformers_blocks_are_parts_of_their_own(suite_models: dict) -> None:
    """Large enough to share: every block is a part the threads claim."""
    _, graph, _, _ = suite_models["transformer"]
    for kernel in _attention_steps(graph):
        assert kernel.blocks > 1 and len(kernel.parts) == kernel.blocks


@pytest.mark.parametrize("name", list(LAYERS))
def test_operands_made_by_copies_are_read_in_place(
    name: str, suite_models: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """q, k and v cloned (and collapsed) only for the batched products are read from the values
    the copies were made of, the copies gone (not Llama's key and value, whose clones make the
    heads they share: a copy of another shape): the plan runs fewer steps, and the results are
    those of a plan that keeps the copies. The same products of the same values, but not always
    the same bits: BLAS may take another kernel for an operand read in place (its strides) than
    for its copy, and sum in another order (OpenBLAS did on an AMD Zen 4 for BERT and GPT-2, not
    on a Zen 5)."""
    path, graph, inputs, (model, tensors) = suite_models[name]
    plan = plan_for(graph)
    monkeypatch.setattr(attention, "_read_through_copies", lambda steps, meta_of, returned: steps)
    copied = aten2prims.lower(aten2prims.load(path))
    assert len(plan_for(copied).steps) > len(plan.steps)
    ours = aten2prims.execute(graph, inputs, threads=1)
    theirs = aten2prims.execute(copied, inputs, threads=1)
    _assert_close_to_unfused(ours, theirs)
    assert_like_torch(ours, model, tensors)


# -- hand-written attentions: masks, causal masks, fully masked rows ---------------------------


class Attention(nn.Module):
    def __init__(self, forward: Callable[..., Any]) -> None:
        super().__init__()
        self.function = forward

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.function(*inputs)


def _manual(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> Any:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask
    return torch.softmax(scores, dim=-1) @ v


def _manual_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    length = q.shape[-2]
    keep = torch.ones(length, length, dtype=torch.bool).tril()
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _sdpa_bool(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> Any:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _sdpa_float(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> Any:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _sdpa_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _qkv(batch: int, heads: int, length: int, width: int) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(5)
    return tuple(torch.randn(batch, heads, length, width) for _ in range(3))


def _masked_rows(batch: int, length: int) -> torch.Tensor:
    """A padding-style boolean mask [batch, 1, length, length] (broadcast over heads) with
    some rows masked entirely."""
    torch.manual_seed(6)
    keep = torch.rand(batch, 1, length, length) > 0.3
    keep[:, :, 0] = False
    keep[0, :, 5] = False
    return keep


def _float_mask(keep: torch.Tensor) -> torch.Tensor:
    return torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))


def _cases(length: int) -> dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]]:
    q, k, v = _qkv(2, 4, length, 32)
    keep = _masked_rows(2, length)
    return {
        "manual, additive mask with -inf rows": (_manual, (q, k, v, _float_mask(keep))),
        "manual, causal where": (_manual_causal, (q, k, v)),
        "sdpa, boolean mask with masked rows": (_sdpa_bool, (q, k, v, keep)),
        "sdpa, additive mask broadcast over heads": (_sdpa_float, (q, k, v, _float_mask(keep))),
        "sdpa, causal": (_sdpa_causal, (q, k, v)),
    }


@pytest.mark.parametrize("length", [24, 256])
@pytest.mark.parametrize("case", list(_cases(8)))
def test_masked_and_causal_attentions_fuse_and_agree(
    case: str, length: int, tmp_path: Path
) -> None:
    """The fusion fires, gives the unfused steps' values (NaN rows of a softmax over -inf alone
    included, zero rows where sdpa masks a row entirely), torch's exported program's and the
    node-by-node reference run's, and the same bits on 1, 2 and 3 threads. At length 256 two
    heads make a block, and each block is a part the threads share."""
    function, tensors = _cases(length)[case]
    model = Attention(function)
    path = tmp_path / "attention.pt2"
    graph = _export(model, tensors, path)
    kernels = _attention_steps(graph)
    assert len(kernels) == 1
    if length == 256:  # a head's scores are 256 KiB
        assert kernels[0].blocks == 4 and len(kernels[0].parts) == 4
    inputs = [to_numpy(t) for t in tensors]
    fused = aten2prims.execute(graph, inputs, threads=1)
    unfused = aten2prims.execute(_unfused(path), inputs, threads=1)
    _assert_close_to_unfused(fused, unfused)
    # Without the arena, every result checked against its meta (check mode runs each kernel
    # whole and without out=: the products before the attention may round otherwise).
    _assert_close_to_unfused(aten2prims.execute(graph, inputs, check=True), fused)
    names = [graph_input.name for graph_input in graph.inputs if graph_input.data is None]
    reference = run_reference(graph, dict(zip(names, inputs)))
    np.testing.assert_allclose(fused[0], reference[0], rtol=1e-5, atol=1e-5, equal_nan=True)
    assert_like_torch(fused, model, tensors)
    with torch.no_grad():
        expected = to_numpy(torch.export.load(path).module()(*tensors))
    assert np.isnan(expected).any() == case.startswith("manual, additive")
    for threads in (2, 3):
        many = aten2prims.execute(graph, inputs, threads=threads)
        assert [o.tobytes() for o in many] == [o.tobytes() for o in fused], threads


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_attention_of_other_dtypes_fuses_and_agrees(dtype: torch.dtype, tmp_path: Path) -> None:
    """float64 scores, and bfloat16 attention (its products and softmax computed in float32
    between converts, which the chain takes as row-wise steps)."""
    function, tensors = _cases(24)["sdpa, boolean mask with masked rows"]
    tensors = tuple(t.to(dtype) if t.is_floating_point() else t for t in tensors)
    path = tmp_path / "attention.pt2"
    graph = _export(Attention(function), tensors, path)
    assert len(_attention_steps(graph)) == 1
    inputs = [to_numpy(t) for t in tensors]
    fused = aten2prims.execute(graph, inputs, threads=1)
    _assert_close_to_unfused(fused, aten2prims.execute(_unfused(path), inputs, threads=1))
    many = aten2prims.execute(graph, inputs, threads=2)
    assert [o.tobytes() for o in many] == [o.tobytes() for o in fused]


# -- chains it does not know -------------------------------------------------------------------


def _softmax_over_rows(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    return torch.softmax(q @ k.transpose(-2, -1), dim=-2) @ v


def _scores_returned(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    probabilities = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return probabilities @ v, probabilities


def _probabilities_read_later(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    probabilities = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    result = probabilities @ v
    return result * (probabilities * result.amax()).amax()  # reads them after the product


def _transposed_probabilities(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1).transpose(-2, -1) @ v


@pytest.mark.parametrize(
    "function",
    [_softmax_over_rows, _scores_returned, _probabilities_read_later, _transposed_probabilities],
)
def test_chains_of_another_form_run_unfused(function: Callable[..., Any], tmp_path: Path) -> None:
    """A softmax over the rows (not the last dim), probabilities returned besides the result or
    read after the second product, and probabilities transposed before the second product are
    not fused; they run as the unfused steps and agree with torch."""
    tensors = _qkv(2, 2, 16, 8)
    model = Attention(function)
    path = tmp_path / "attention.pt2"
    graph = _export(model, tensors, path)
    assert not _attention_steps(graph)
    outputs = aten2prims.execute(graph, [to_numpy(t) for t in tensors])
    with torch.no_grad():
        expected = model(*tensors)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(expected)
    for ours, theirs in zip(outputs, expected):
        np.testing.assert_allclose(ours, to_numpy(theirs), rtol=1e-5, atol=1e-5)
