"""The gather fusion (aten2prims/executor/gather.py): `gather_nd` whose indices are broadcasts of
small sources runs as takes along axes — per slice of the batch dims when an index also varies
along the dim of an identity ramp (grid sampling's flat positions) — in the cheapest order. Checked
against node-by-node execution on hand-built graphs of every shape the rule accepts, on the
gathers our resampling rules emit, and on out-of-range indices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _thread_checks import assert_one_threads_bits
from test_executor import assert_same, build

import aten2prims
import prims
from aten2prims.executor import plan_for
from aten2prims.executor.gather import OrthogonalGather
from aten2prims.executor.reference import run_reference
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import CPU, Value


def _iota(n: int) -> Value:
    return prims.iota(n, start=0, step=1, dtype=DType.int64, device=CPU, requires_grad=False)


def _gathers(graph: Any) -> list[OrthogonalGather]:
    return [
        step.kernel for step in plan_for(graph).steps if isinstance(step.kernel, OrthogonalGather)
    ]


# Each case: the source's shape, the indices' (shape, result dims spanned) — None for an iota
# ramp over the one dim given — and the result's shape.
CASES: dict[
    str,
    tuple[tuple[int, ...], list[tuple[tuple[int, ...] | None, tuple[int, ...]]], tuple[int, ...]],
] = {
    "nearest upsampling": ((6, 4, 5), [(None, (0,)), ((9,), (1,)), ((7,), (2,))], (6, 9, 7)),
    "one axis taken": ((6, 4, 5), [(None, (0,)), (None, (1,)), ((8,), (2,))], (6, 4, 8)),
    "a table over two dims": ((3, 10), [(None, (0,)), ((4, 5), (1, 2))], (3, 4, 5)),
    "every axis taken": ((4, 5, 6), [((3,), (0,)), ((2,), (1,)), ((7,), (2,))], (3, 2, 7)),
    "grid sampling": (
        (2, 3, 20),
        [(None, (0,)), (None, (1,)), ((2, 4, 5), (0, 2, 3))],
        (2, 3, 4, 5),
    ),
    "batch dim in the middle": (
        (5, 3, 7),
        [((4,), (0,)), (None, (1,)), ((3, 6), (1, 2))],
        (4, 3, 6),
    ),
    "two batch dims": ((2, 3, 9), [(None, (0,)), (None, (1,)), ((2, 3, 4), (0, 1, 2))], (2, 3, 4)),
    "only ramps": ((3, 4), [(None, (0,)), (None, (1,))], (3, 4)),
    # One element per batch position (nanmedian's pick per row): each slice is 0-dim.
    "one element per row": ((3, 5), [(None, (0,)), ((3,), (0,))], (3,)),
    # Index sources stretching size-1 dims (BERT's token-type ids: one row for every sequence).
    "a stretched index": ((3, 10), [((1, 5), (0, 1)), (None, (2,))], (4, 5, 10)),
    "a stretched index over a batch dim": (
        (2, 3, 20),
        [(None, (0,)), (None, (1,)), ((1, 4, 1), (0, 2, 3))],
        (2, 3, 4, 5),
    ),
}


def _case_graph(name: str) -> tuple[Any, dict[str, np.ndarray]]:
    shape, indices, result = CASES[name]
    rng = np.random.default_rng(0)
    specs: dict[str, Any] = {"a": (shape, DType.float32)}
    arrays = {"a": rng.standard_normal(shape).astype(np.float32)}
    for k, (index_shape, _) in enumerate(indices):
        if index_shape is not None:
            specs[f"i{k}"] = (index_shape, DType.int64)
            arrays[f"i{k}"] = rng.integers(0, shape[k], index_shape)

    def body(**values: Value) -> Value:
        operands = []
        for k, (index_shape, dims) in enumerate(indices):
            source = _iota(shape[k]) if index_shape is None else values[f"i{k}"]
            operands.append(prims.broadcast_in_dim(source, list(result), list(dims)))
        return prims.gather_nd(values["a"], tuple(operands))

    return build(specs, body), arrays


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_gathers_agree_with_the_kernel(name: str) -> None:
    graph, inputs = _case_graph(name)
    (kernel,) = _gathers(graph)
    assert bool(kernel.batch_sizes) == (
        name
        in (
            "grid sampling",
            "batch dim in the middle",
            "two batch dims",
            "one element per row",
            "a stretched index over a batch dim",
        )
    )
    assert bool(kernel.stretched) == name.startswith("a stretched index")
    expected = run_reference(graph, inputs)
    assert_same(aten2prims.execute(graph, inputs), expected)
    assert_same(aten2prims.execute(graph, inputs, check=True), expected)


def test_out_of_range_indices_fail_in_batched_gathers() -> None:
    graph, inputs = _case_graph("grid sampling")
    inputs["i2"][1, 3, 4] = 20
    with pytest.raises(
        aten2prims.ExecutionError, match="index 20 is out of bounds for dimension 2 with size 20"
    ):
        aten2prims.execute(graph, inputs)


def test_gathers_not_of_the_form_run_the_generic_kernel() -> None:
    """Indices whose blocks are out of order, or broadcast along a dim they do not index, keep
    the generic kernel."""

    def body(a: Value, rows: Value, columns: Value) -> Value:
        swapped = (
            prims.broadcast_in_dim(rows, [4, 3], [1]),
            prims.broadcast_in_dim(columns, [4, 3], [0]),
        )
        return prims.gather_nd(a, swapped)

    graph = build(
        {"a": ((5, 6), DType.float32), "rows": ((3,), DType.int64), "columns": ((4,), DType.int64)},
        body,
    )
    assert not _gathers(graph)
    inputs = {
        "a": np.arange(30, dtype=np.float32).reshape(5, 6),
        "rows": np.array([4, 0, 2]),
        "columns": np.array([5, 1, 0, 3]),
    }
    assert_same(aten2prims.execute(graph, inputs), run_reference(graph, inputs))


def test_columns_are_taken_before_rows() -> None:
    """Nearest upsampling takes single elements along the columns and whole rows along the rows:
    the columns go first, while the array is still short."""
    graph, _ = _case_graph("nearest upsampling")
    (kernel,) = _gathers(graph)
    assert [take.axis for take in kernel.takes] == [2, 1]


@pytest.mark.parametrize(
    "call",
    [
        ("aten.upsample_nearest2d.vec", lambda t: (t.randn(2, 3, 5, 7), None, [2.0, 1.5])),
        ("aten.upsample_bilinear2d.vec", lambda t: (t.randn(2, 3, 5, 7), [9, 4], False, None)),
        (
            "aten.grid_sampler_2d.default",
            lambda t: (t.randn(2, 3, 5, 7), t.rand(2, 4, 6, 2) * 2.2 - 1.1, 0, 0, False),
        ),
        # 32 channels: the reads of a channels-last copy (decompositions/resampling.py)
        (
            "aten.grid_sampler_2d.default",
            lambda t: (t.randn(2, 32, 5, 7), t.rand(2, 4, 6, 2) * 2.2 - 1.1, 2, 0, False),
        ),
    ],
    ids=["nearest", "bilinear", "grid", "grid channels-last"],
)
def test_resampling_gathers_are_fused(call: tuple[str, Any]) -> None:
    import torch
    from test_contraction import lowered_call

    op, make = call
    graph, inputs, _ = lowered_call(op, *make(torch))
    gathers = [node for node in graph.nodes if node.op == "prims.gather_nd"]
    assert gathers and len(_gathers(graph)) == len(gathers)
    expected = run_reference(graph, inputs)
    one = aten2prims.execute(graph, inputs, threads=1)
    assert_same(one, expected)
    assert_one_threads_bits(graph, inputs, one)
