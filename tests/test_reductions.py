"""What the conformance harness cannot check for the reduction rules: behaviour eager torch
refuses on CPU but defines elsewhere (`half_to_float=True`), and the errors the rules raise
where torch raises.

`_softmax`/`_log_softmax(x, dim, half_to_float=True)` is defined by torch's meta (a float32
result for a float16 input; `_softmax`'s meta also takes bfloat16, and so do we for both) and
computed like the float32 op on the upcast input (torch's decomposition; CUDA's kernel). torch's
CPU kernel rejects it, so ours is compared against that float32 computation."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy
from aten2prims.passes.lower import lower
from aten2prims.testing.compare import compare
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import build_graph


def _aten(op: str) -> Any:
    _, name, overload = op.split(".")
    return getattr(getattr(torch.ops.aten, name), overload)


def _run(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], outputs: list[Any]) -> list[Any]:
    graph, arrays = build_graph(AtenCall(op, args, kwargs), outputs)
    return execute(lower(graph), arrays, check=True)


@pytest.mark.parametrize("op", ["aten._softmax.default", "aten._log_softmax.default"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("shape", "dim"), [((4, 33), 1), ((3, 4, 5), 0), ((6,), -1), ((2, 0), 1)])
def test_half_to_float_returns_the_float32_computation(
    op: str, dtype: torch.dtype, shape: tuple[int, ...], dim: int
) -> None:
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 8).to(dtype)
    with pytest.raises(RuntimeError, match="not supported on CPU"):
        _aten(op)(x, dim, True)  # why this is not a harness sample
    expected = _aten(op)(x.float(), dim, False)
    if (
        dtype is torch.float16
    ):  # torch's _log_softmax meta takes only float16 (its _softmax meta both)
        assert _aten(op)(x.to("meta"), dim, True).dtype == torch.float32
    (ours,) = _run(op, (x, dim, True), {}, [expected])
    verdict = compare(ours, to_numpy(expected))
    assert verdict, verdict.message


# (op, arguments, the Error subclass our lowering raises); torch must reject the same call.
REJECTED: list[tuple[str, tuple[Any, ...], dict[str, Any], type[Exception]]] = [
    ("aten.amax.default", (torch.zeros(0, 3), [0]), {}, ShapeError),
    ("aten.amin.default", (torch.zeros(2, 0), [-1], True), {}, ShapeError),
    ("aten.argmax.default", (torch.zeros(0),), {}, ShapeError),
    ("aten.argmin.default", (torch.zeros(0, 3), 0), {}, ShapeError),
    ("aten.argmax.default", (torch.tensor([True, False]),), {}, DTypeError),
    ("aten.max.dim", (torch.zeros(0, 3), 0), {}, ShapeError),
    ("aten.min.dim", (torch.zeros(3, 0), 1), {}, ShapeError),
    ("aten.mean.default", (torch.tensor([1, 2]),), {}, DTypeError),
    ("aten.mean.dim", (torch.tensor([1.0, 2.0]), [0]), {"dtype": torch.int64}, DTypeError),
    ("aten.var.correction", (torch.tensor([1, 2]),), {}, DTypeError),
    ("aten.cumsum.default", (torch.tensor([True, False]), 0), {"dtype": torch.bool}, DTypeError),
    ("aten._softmax.default", (torch.tensor([1, 2]), 0, False), {}, DTypeError),
    ("aten._log_softmax.default", (torch.tensor([1.0, 2.0]), 0, True), {}, DTypeError),
    ("aten.sum.dim_IntList", (torch.zeros(2, 3), [0, -2]), {}, ShapeError),
    ("aten.prod.dim_int", (torch.zeros(2, 3), 2), {}, ShapeError),
]


@pytest.mark.parametrize(
    ("op", "args", "kwargs", "error"), REJECTED, ids=[f"{r[0]}-{i}" for i, r in enumerate(REJECTED)]
)
def test_rejects_what_torch_rejects(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises((RuntimeError, IndexError, NotImplementedError, AssertionError)):
        _aten(op)(*args, **kwargs)
    placeholder = torch.zeros(())  # the result meta a frontend would declare; never reached
    graph, _ = build_graph(AtenCall(op, args, kwargs), [placeholder])
    with pytest.raises(error, match=rf"^lowering {re.escape(op)} "):
        lower(graph)
