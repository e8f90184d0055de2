"""Rewrites into fewer passes (aten2prims/executor/fewer_passes.py): a product with a
reciprocal, `a · (1 / v)`, runs as one division `a / v`. Its results are bit for bit the
reference's of the division (at every thread count, as lone steps, in a chain, after a
product), each element at least as close to a / v as the product's, and torch's silu's values,
at ±inf, NaN, ±0.0 and where exp overflows too."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
from _plan_switches import plan_switches
from prims_testing import bits_equal

import aten2prims
import prims
from aten2prims.executor import plan_for
from aten2prims.executor.chains import _LITERAL, ChainKernel
from aten2prims.executor.contraction_fusion import ContractionKernel
from aten2prims.executor.reference import run_reference
from aten2prims.executor.steps import Step
from aten2prims.executor.threads import Parted
from aten2prims.frontends.fx import from_fx
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import Graph
from aten2prims.ir.values import TensorMeta, Value
from prims.builder import Builder

# Where torch's silu and our x / (1 + exp(-x)) meet the float32 range's edges: infinities, NaN,
# signed zeros, exp(-x) overflowing (x < -88.72), subnormal results, the largest floats.
EDGES = [
    math.inf,
    -math.inf,
    math.nan,
    -0.0,
    0.0,
    -87.3,
    -88.5,
    -88.8,
    -89.0,
    -100.0,
    -1e30,
    1e30,
    88.0,
    100.0,
    1e-45,
    -1e-45,
    1e-38,
    3.4e38,
    -3.4e38,
]


def build(spec: tuple[tuple[int, ...], DType], body: Callable[[Value], Any]) -> Graph:
    with Builder("g") as builder:
        outputs = body(builder.add_input("x", TensorMeta(*spec)))
        return builder.finish(list(outputs) if isinstance(outputs, tuple) else [outputs])


def silu(x: Value) -> Value:
    """x · sigmoid(x) as torch's decompositions write it."""
    return prims.mul(x, prims.reciprocal(prims.add(prims.exp(prims.neg(x)), 1.0)))


def divided(x: Value) -> Value:
    """x / (1 + exp(-x)): torch's silu kernel's formula."""
    return prims.div(x, prims.add(prims.exp(prims.neg(x)), 1.0))


def values(shape: tuple[int, ...], dtype: type, seed: int) -> np.ndarray:
    x = (np.random.default_rng(seed).standard_normal(shape) * 6).astype(dtype)
    flat = x.reshape(-1)
    flat[: len(EDGES)] = EDGES
    return x


@pytest.fixture
def unfolded() -> Iterator[None]:
    """Plans built meanwhile keep the product with the reciprocal."""
    with plan_switches(FOLD_RECIPROCALS=False):
        yield


def _is_one(argument: Any) -> bool:
    return type(argument) is np.ndarray and argument.ndim == 0 and argument == 1


def _calls(kernel: Any, arguments: tuple[Any, ...]) -> Iterator[tuple[Any, Any]]:
    """(function, first argument, None where it is not a literal) of every call a kernel makes:
    itself, its parts', its chain's links', its product's epilogue's."""
    if isinstance(kernel, Parted):
        yield from _calls(kernel.kernel, arguments)
    elif isinstance(kernel, ChainKernel):
        for link in kernel.links:
            kind, payload = link.arguments[0]
            yield link.kernel, payload if kind == _LITERAL else None
    elif isinstance(kernel, ContractionKernel):
        for entry in kernel.epilogue:
            if entry.function is not None:
                yield from _calls(entry.function, entry.arguments)
    else:
        yield kernel, arguments[0] if arguments else None


def division_steps(graph: Graph) -> list[Step]:
    """The plan's steps that divide by a reciprocal's operand (a lone step, a chain's link, in a
    product's epilogue) where the graph has a reciprocal and a product."""
    found = []
    for step in plan_for(graph).steps:
        if "prims.reciprocal" not in [node.op for node in step.nodes]:
            continue
        calls = list(_calls(step.kernel, step.arguments))
        if any(f is np.true_divide and not _is_one(first) for f, first in calls):
            found.append(step)
    return found


@pytest.mark.parametrize(
    ("shape", "dtype", "chained"),
    [
        ((64, 300), DType.float32, False),  # 77 KB: lone steps
        ((64, 300), DType.float64, False),
        ((4, 96, 56, 56), DType.float32, True),  # 4.8 MB: one chain, in parts
    ],
)
def test_a_silu_divides_once_with_the_bits_of_the_division(
    kernels: str, shape: tuple[int, ...], dtype: DType, chained: bool
) -> None:
    """x · reciprocal(1 + exp(-x)): the reciprocal and the product are one step (or chain
    link) dividing, whose bits are the reference's for x / (1 + exp(-x)) at 1 to 3 threads."""
    graph = build((shape, dtype), silu)
    (step,) = division_steps(graph)
    assert isinstance(step.kernel, Parted) == chained
    if not chained:
        assert step.kernel is np.true_divide and len(step.nodes) == 2
    x = values(shape, dtype.numpy.type, 0)
    expected = run_reference(build((shape, dtype), divided), {"x": x})
    for threads in (1, 2, 3):
        bits_equal(aten2prims.execute(graph, {"x": x}, threads=threads), expected)
    bits_equal(aten2prims.execute(graph, {"x": x}, check=True), expected)


def test_the_division_is_at_least_as_close_to_the_quotient(unfolded: None) -> None:
    """Each element of a / v is the float nearest to the quotient of the float operands, so at
    least as close to it as a · (1 / v), and closer somewhere (else the test shows nothing)."""
    shape = (256, 1024)
    x = values(shape, np.float32, 1)
    old = aten2prims.execute(build((shape, DType.float32), silu), {"x": x})[0]
    with plan_switches(FOLD_RECIPROCALS=True):
        new = aten2prims.execute(build((shape, DType.float32), silu), {"x": x})[0]

    def denominator(x: Value) -> Value:
        return prims.add(prims.exp(prims.neg(x)), 1.0)

    (d,) = run_reference(build((shape, DType.float32), denominator), {"x": x})
    finite = np.isfinite(x) & np.isfinite(d)
    quotient = x[finite].astype(np.float64) / d[finite].astype(np.float64)
    new_error = np.abs(new[finite].astype(np.float64) - quotient)
    old_error = np.abs(old[finite].astype(np.float64) - quotient)
    assert np.all(new_error <= old_error)
    assert np.any(new_error < old_error)
    # Where an operand is not finite both give the same value.
    bits_equal([new[~finite]], [old[~finite]])


def test_silu_and_a_gate_give_torchs_values_at_the_float_ranges_edges() -> None:
    """The exported SiLU against torch's silu (which divides): within float32 tolerance
    everywhere, and the same value where x or the result is not finite or zero (-0.0 for
    x = -0.0 and where exp(-x) overflows, NaN for -inf and NaN). A gate x · sigmoid(y) against
    torch's product of the two (within tolerance)."""
    x = torch.from_numpy(values((2, 64, 96, 96), np.float32, 2))
    program = torch.export.export(torch.nn.SiLU().eval(), (x,)).run_decompositions()
    graph = aten2prims.lower(from_fx(program))
    assert division_steps(graph)
    ours = torch.from_numpy(aten2prims.execute(graph, [x.numpy()])[0])
    with torch.no_grad():
        expected = torch.nn.functional.silu(x)
    torch.testing.assert_close(ours, expected, equal_nan=True)
    edges = ~torch.isfinite(expected) | (expected == 0) | ~torch.isfinite(x)
    bits_equal([ours[edges].numpy()], [expected[edges].numpy()])

    def gate(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(y)

    class Gate(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return gate(x, y)

    y = torch.flip(x, [3])
    program = torch.export.export(Gate(), (x, y)).run_decompositions()
    graph = aten2prims.lower(from_fx(program))
    assert division_steps(graph)
    ours = torch.from_numpy(aten2prims.execute(graph, [x.numpy(), y.numpy()])[0])
    torch.testing.assert_close(ours, gate(x, y), equal_nan=True)


def test_a_convolutions_silu_epilogue_divides() -> None:
    """A 1x1 convolution, a batch norm and SiLU (EfficientNet-B0's expansion): the division in
    the product's epilogue, torch's values within tolerance."""
    torch.manual_seed(3)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(16, 96, 1, bias=False), torch.nn.BatchNorm2d(96), torch.nn.SiLU()
    ).eval()
    x = torch.randn(2, 16, 56, 56)
    program = torch.export.export(model, (x,)).run_decompositions()
    graph = aten2prims.lower(from_fx(program))
    assert division_steps(graph)
    ours = torch.from_numpy(aten2prims.execute(graph, [x.numpy()])[0])
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(ours, expected)


def _kept(body: Callable[[Value], Any], dtype: DType = DType.float32) -> None:
    graph = build(((64, 300), dtype), body)
    assert not division_steps(graph)
    x = values((64, 300), dtype.numpy.type, 4)
    bits_equal(aten2prims.execute(graph, {"x": x}), run_reference(graph, {"x": x}))


def test_a_reciprocal_stays_where_it_is_read_twice_an_output_broadcast_or_complex() -> None:
    """Kept as the reference's steps (its bits): a reciprocal read by another step too, one
    that is a graph output, one of a smaller operand the product broadcasts (a per-row gate: the
    reciprocal's pass is short, a division over the whole result slower than the product), and
    complex numbers (whose
    division is not a product with the reciprocal)."""

    def twice(x: Value) -> tuple[Value, ...]:
        r = prims.reciprocal(prims.add(x, 1.0))
        return prims.mul(x, r), prims.add(r, 2.0)

    def output(x: Value) -> tuple[Value, ...]:
        r = prims.reciprocal(prims.add(x, 1.0))
        return prims.mul(x, r), r

    def row_gate(x: Value) -> Value:
        r = prims.reciprocal(prims.add(prims.amax(x, [1]), 1.0))
        return prims.mul(x, prims.broadcast_in_dim(r, [64, 300], [0]))

    for body in (twice, output, row_gate):
        _kept(body)
    _kept(lambda x: prims.mul(x, prims.reciprocal(prims.add(x, 1.0))), DType.complex64)
