"""What the conformance harness cannot sample for decompositions/normalization.py.

- Every `output_mask` of the normalization backward ops, with and without weight/bias: torch
  returns None for an unrequested gradient, which our IR cannot hold. A graph declares all three
  results (as our IR must) and outputs the ones torch defines; dead-code elimination drops the
  rest. A requested gradient of a parameter that is None is refused, as torch refuses it.
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
from aten2prims.ir.graph import GraphOutput
from aten2prims.passes.lower import lower
from aten2prims.testing.compare import compare
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import build_graph, float64_reference

MASKS = list(itertools.product([False, True], repeat=3))


def _run_masked(
    call: AtenCall, declared: Sequence[torch.Tensor], mask: Sequence[bool]
) -> tuple[list[Any], int]:
    """Our results of the requested outputs of a graph declaring all three, and its node count."""
    graph, arrays = build_graph(call, list(declared))
    results = graph.nodes[0].results
    graph.outputs = [GraphOutput(results[i]) for i in range(3) if mask[i]]
    lowered = lower(graph)
    return (execute(lowered, arrays, check=True) if graph.outputs else []), len(lowered.nodes)


def _check_masks(
    op: str, args: tuple[Any, ...], declared: Sequence[torch.Tensor], needs: Sequence[bool]
) -> None:
    """Every mask: torch's defined results against ours; masks requesting a result whose
    parameter is None (`needs[i]` False) must be refused by both."""
    sizes = {}
    for mask in MASKS:
        call = AtenCall(op, (*args, list(mask)), {})
        if any(m and not ok for m, ok in zip(mask, needs)):
            with pytest.raises(RuntimeError):
                getattr(torch.ops.aten, op.split(".")[1]).default(*call.args)
            with pytest.raises(ShapeError, match="output_mask requests result"):
                _run_masked(call, declared, mask)
            continue
        expected = getattr(torch.ops.aten, op.split(".")[1]).default(*call.args)
        assert [e is not None for e in expected] == list(mask)
        ours, sizes[mask] = _run_masked(call, declared, mask)
        wanted = [to_numpy(e) for e in expected if e is not None]
        reference = [r for r in float64_reference(call) or [] if r is not None]
        for index, (our, their) in enumerate(zip(ours, wanted)):
            verdict = compare(
                our,
                their,
                reference=reference[index] if reference else None,
                what=f"{mask} output {index}",
            )
            assert verdict, verdict.message
    assert sizes[(False, False, False)] == 0
    if (True, True, True) in sizes:
        assert (
            sizes[(False, False, True)] < sizes[(True, True, True)]
        )  # the unrequested work is gone


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
