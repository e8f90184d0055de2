"""Backward calls of decompositions/normalization.py the conformance harness does not sample.

- Every `output_mask` of the normalization backward ops, with and without weight/bias: torch
  returns None for an unrequested gradient; the graph's node has an undefined result there, the
  rule does not compute it, and the harness's runner judges the defined ones against torch. A
  requested gradient of a parameter that is None is refused, as torch refuses it.
- embedding_dense_backward of bool gradients (the harness files a bool tensor followed by int
  indices under the indices' dtype).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from aten2prims.errors import ShapeError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.passes.lower import lower
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import Status, build_graph, judge_outputs, run_call, torch_outputs

MASKS = list(itertools.product([False, True], repeat=3))


def _check_masks(
    op: str, args: tuple[Any, ...], declared: Sequence[torch.Tensor], needs: Sequence[bool]
) -> None:
    """Every mask through the harness's runner (torch's defined results against ours, its None
    results our undefined ones); masks requesting a result whose parameter is None (`needs[i]`
    False) must be refused by both. A masked result costs no work: the rule emits fewer nodes
    (counted before dead-code elimination) than with every result requested."""
    emitted = {}
    for mask in MASKS:
        call = AtenCall(op, (*args, list(mask)), {})
        if any(m and not ok for m, ok in zip(mask, needs)):
            with pytest.raises(RuntimeError):
                torch_outputs(call)
            graph, _ = build_graph(call, list(declared))
            with pytest.raises(ShapeError, match="output_mask requests result"):
                lower(graph)
            continue
        expected = torch_outputs(call)
        assert [e is not None for e in expected] == list(mask)
        outcome = run_call(call)
        assert outcome.status is Status.PASS, (mask, outcome.message)
        assert outcome.lowered is not None
        assert len(outcome.lowered.outputs) == sum(mask)
        graph, _ = build_graph(call, expected)
        emitted[mask] = len(lower(graph, dce=False).nodes)
    assert emitted[(False, False, False)] < emitted[(True, False, False)]
    every = max(emitted)  # the mask requesting the most results torch allows
    for mask, count in emitted.items():
        if mask != every:
            assert count < emitted[every], (mask, count, every, emitted[every])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("params", ["both", "weight", "none"])
def test_layer_norm_backward_masks(dtype: torch.dtype, params: str) -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, 5, generator=generator).to(dtype)
    shape = [4, 5]
    weight = torch.randn(shape, generator=generator).to(dtype) if params != "none" else None
    bias = torch.randn(shape, generator=generator).to(dtype) if params == "both" else None
    _, mean, rstd = torch.ops.aten.native_layer_norm.default(x, shape, weight, bias, 1e-5)
    grad = torch.randn(x.shape, generator=generator).to(dtype)
    declared = [
        torch.empty(x.shape, dtype=dtype),
        torch.empty(shape, dtype=dtype),
        torch.empty(shape, dtype=dtype),
    ]
    _check_masks(
        "aten.native_layer_norm_backward.default",
        (grad, x, shape, mean, rstd, weight, bias),
        declared,
        [True, weight is not None, bias is not None],
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("with_weight", [True, False])
def test_group_norm_backward_masks(dtype: torch.dtype, with_weight: bool) -> None:
    generator = torch.Generator().manual_seed(1)
    n, c, hxw, group = 2, 6, 4, 3
    x = torch.randn(n, c, 2, 2, generator=generator).to(dtype)
    weight = torch.randn(c, generator=generator).to(dtype) if with_weight else None
    _, mean, rstd = torch.ops.aten.native_group_norm.default(
        x, weight, None, n, c, hxw, group, 1e-5
    )
    grad = torch.randn(x.shape, generator=generator).to(dtype)
    declared = [
        torch.empty(x.shape, dtype=dtype),
        torch.empty(c, dtype=dtype),
        torch.empty(c, dtype=dtype),
    ]
    _check_masks(
        "aten.native_group_norm_backward.default",
        (grad, x, mean, rstd, weight, n, c, hxw, group),
        declared,
        [True, with_weight, with_weight],
    )


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("with_weight", [True, False])
@pytest.mark.parametrize(
    ("dtype", "parameters"),
    [
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
        (torch.bfloat16, torch.float32),  # torch's "mixed" kernel
        (torch.float16, torch.float16),
    ],
)
def test_batch_norm_backward_masks(
    dtype: torch.dtype, parameters: torch.dtype, with_weight: bool, train: bool
) -> None:
    """native_batch_norm_backward (non-core; a joint program keeping backward ops whole holds
    it). torch's meta, which exported graphs record, declares grad_input whatever the mask says
    (its CPU kernel returns None there): the graph and our rule follow the meta, and its values
    are the ones torch computes when grad_input is requested."""
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(4, 3, 5, generator=generator).to(dtype)
    weight = torch.randn(3, generator=generator).to(parameters) if with_weight else None
    running_mean = torch.randn(3, generator=generator).to(parameters)
    running_var = (torch.rand(3, generator=generator) + 0.5).to(parameters)
    _, save_mean, save_invstd = torch.ops.aten.native_batch_norm.default(
        x, weight, None, running_mean.clone(), running_var.clone(), True, 0.1, 1e-5
    )
    grad = torch.randn(x.shape, generator=generator).to(dtype)
    args = (grad, x, weight, running_mean, running_var, save_mean, save_invstd, train, 1e-5)
    op = "aten.native_batch_norm_backward.default"
    emitted = {}
    for mask in MASKS:
        call = AtenCall(op, (*args, list(mask)), {})
        with_input = AtenCall(op, (*args, [True, *mask[1:]]), {})
        expected = torch_outputs(with_input)
        assert [e is not None for e in expected] == [True, *mask[1:]]
        graph, arrays = build_graph(call, expected)
        lowered = lower(graph)
        assert len(lowered.outputs) == 1 + sum(mask[1:])
        ours = execute(lowered, arrays, check=True)
        for verdict in judge_outputs(
            with_input, ours, [to_numpy(e) for e in expected if e is not None]
        ):
            assert verdict, (mask, verdict.message)
        emitted[mask] = len(lower(graph, dce=False).nodes)
    # grad_weight is the one result of its own (grad_bias is Σ dy, which grad_input needs too)
    assert emitted[(True, False, False)] < emitted[(True, True, False)]
    assert emitted[(True, False, True)] < emitted[(True, True, True)]


@pytest.mark.parametrize("scale", [False, True])
def test_embedding_dense_backward_bool(scale: bool) -> None:
    grad = torch.tensor([[True, False], [False, False], [True, True], [False, True]])
    indices = torch.tensor([2, 0, 2, 3])
    call = AtenCall("aten.embedding_dense_backward.default", (grad, indices, 5, 3, scale), {})
    expected = torch.ops.aten.embedding_dense_backward.default(*call.args)
    graph, arrays = build_graph(call, [expected])
    (ours,) = execute(lower(graph), arrays, check=True)
    assert (ours == expected.numpy()).all()


def test_batch_norm_eval_needs_running_stats() -> None:
    x = torch.randn(2, 3)
    call = AtenCall(
        "aten.native_batch_norm.default", (x, None, None, None, None, False, 0.1, 1e-5), {}
    )
    graph, _ = build_graph(call, [x, torch.empty(0), torch.empty(0)])
    with pytest.raises(ShapeError, match="running_mean and running_var are required"):
        lower(graph)
