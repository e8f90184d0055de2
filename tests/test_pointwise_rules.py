"""What the conformance harness cannot see for decompositions/pointwise.py: calls torch rejects.

The harness counts a call torch rejects as "unsupported by torch" and never lowers it. Here each
such call must be rejected by us too, checked against torch itself: as a DTypeError naming the op
while lowering, or — integer division by zero, which depends on the data — when executing."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from aten2prims.errors import DTypeError, ExecutionError
from aten2prims.executor import execute
from aten2prims.passes.lower import lower
from aten2prims.testing.record import AtenCall
from aten2prims.testing.runner import build_graph, torch_outputs

A = torch.ops.aten


def _graph(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], result: torch.Tensor):
    """The one-node graph of the call (torch gave no result: `result` stands in for its meta)."""
    return build_graph(AtenCall(op, args, kwargs), [result])


def _torch_rejects(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises((RuntimeError, NotImplementedError, TypeError)):
        torch_outputs(AtenCall(op, args, kwargs))


ints = torch.tensor([7, -7, 3], dtype=torch.int32)
floats = torch.tensor([1.5, -2.0, 0.25])
bools = torch.tensor([True, False, True])

REJECTED: list[tuple[str, tuple[Any, ...], dict[str, Any], str]] = [
    ("aten.sub.Tensor", (bools, bools), {}, "bool"),
    ("aten.sub.Tensor", (floats, True), {}, "bool"),
    ("aten.sub.Scalar", (ints, True), {}, "bool"),
    ("aten.neg.default", (bools,), {}, "b8"),
    ("aten.add.Tensor", (ints, ints), {"alpha": 0.5}, "alpha"),
    ("aten.add.Tensor", (floats, floats), {"alpha": True}, "alpha"),
    ("aten.add.Tensor", (floats, floats), {"alpha": 1j}, "alpha"),
    ("aten.pow.Tensor_Scalar", (ints, -1), {}, "negative"),
    ("aten.pow.Tensor_Tensor", (bools, bools), {}, "b8"),
    ("aten.bitwise_and.Scalar", (ints, 2.0), {}, "f32"),
    ("aten.div.Tensor_mode", (bools, bools), {"rounding_mode": "floor"}, "b8"),
    (
        "aten.div.Tensor_mode",
        (floats.to(torch.complex64), floats),
        {"rounding_mode": "trunc"},
        "c64",
    ),
    ("aten.remainder.Tensor", (floats.to(torch.complex64), floats), {}, "c64"),
    ("aten.maximum.default", (floats.to(torch.complex64), floats), {}, "c64"),
    ("aten.clamp.default", (floats.to(torch.complex64), 0.0), {}, "c64"),
    ("aten.clamp.default", (bools, True, False), {}, "b8"),
    ("aten.clamp.Tensor", (bools, bools, bools), {}, "b8"),
    ("aten.relu.default", (bools,), {}, "b8"),
    ("aten.hardtanh.default", (ints.to(torch.uint8), -1, 1), {}, "unsigned"),
    ("aten.leaky_relu.default", (ints,), {}, "i32"),
    ("aten.gelu.default", (ints,), {}, "i32"),
    ("aten.atan2.out", (floats, floats), {"out": torch.zeros(3, dtype=torch.int64)}, "i64"),
    ("aten.scalar_tensor.default", (1 - 2j,), {"dtype": torch.float32}, "overflow"),
    ("aten.gt.Scalar", (floats, 1j), {}, "c64"),
]


def _ids(cases: list[tuple[Any, ...]]) -> list[str]:
    return [f"{case[0]}-{index}" for index, case in enumerate(cases)]


@pytest.mark.parametrize(("op", "args", "kwargs", "said"), REJECTED, ids=_ids(REJECTED))
def test_lowering_rejects_what_torch_rejects(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any], said: str
) -> None:
    _torch_rejects(op, args, kwargs)
    graph, _ = _graph(op, args, kwargs, torch.zeros(3))
    with pytest.raises(DTypeError, match=said) as error:
        lower(graph)
    assert op in str(error.value)


DIVISIONS = [
    (
        "aten.div.Tensor_mode",
        (ints, torch.tensor([1, 0, 2], dtype=torch.int32)),
        {"rounding_mode": "trunc"},
    ),
    (
        "aten.div.Tensor_mode",
        (ints, torch.tensor([1, 0, 2], dtype=torch.int32)),
        {"rounding_mode": "floor"},
    ),
    ("aten.div.Scalar_mode", (ints, 0), {"rounding_mode": "floor"}),
    ("aten.fmod.Tensor", (ints, torch.tensor([0, 1, 2], dtype=torch.int32)), {}),
    ("aten.remainder.Scalar", (ints, 0), {}),
]


@pytest.mark.parametrize(("op", "args", "kwargs"), DIVISIONS, ids=_ids(DIVISIONS))
def test_integer_division_by_zero_raises_when_executed(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    _torch_rejects(op, args, kwargs)
    graph, arrays = _graph(op, args, kwargs, torch.zeros(3, dtype=torch.int32))
    lowered = lower(graph)  # the divisor's values are data: lowering cannot know
    with pytest.raises(ExecutionError, match="division by zero"):
        execute(lowered, arrays)
    if all(isinstance(a, torch.Tensor) for a in args):  # the same graph runs on other data
        execute(lowered, {name: abs(a) + 1 for name, a in arrays.items()})
