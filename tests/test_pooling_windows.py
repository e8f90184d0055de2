"""Pooling windows stay views: lowering a pooling op must not materialize its N·C·K·K·H·W window
elements. The conformance harness checks the values; this checks the memory, by running the
lowered graphs under tracemalloc (NumPy reports its allocations to it)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from aten2prims.executor import execute
from aten2prims.ir import Graph, GraphInput, GraphOutput, Node, TensorMeta, Value
from aten2prims.ir.dtypes import DType
from aten2prims.passes.lower import lower

SHAPE = (2, 8, 96, 96)
KERNEL = 5  # 25 window elements per output: a materialized window view would be 25x the input


def _graph(op: str, args: Sequence[Any], results: Sequence[TensorMeta], dtype: DType) -> Graph:
    x = Value("x", TensorMeta(SHAPE, dtype))
    outs = tuple(Value(f"out{i}", meta) for i, meta in enumerate(results))
    node = Node(op, (x, *args), {}, outs)
    return lower(Graph("pool", [GraphInput(x)], [node], [GraphOutput(v) for v in outs]))


def _peak_bytes(graph: Graph, x: np.ndarray) -> tuple[int, list[np.ndarray]]:
    execute(graph, {"x": x})  # plan once outside the measurement
    tracemalloc.start()
    try:
        outputs = execute(graph, {"x": x})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, outputs


@pytest.mark.parametrize("dtype", [DType.float32, DType.float16])
def test_max_pool2d_does_not_materialize_windows(dtype: DType) -> None:
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(dtype.numpy)
    out = TensorMeta(SHAPE, dtype)
    graph = _graph(
        "aten.max_pool2d_with_indices.default",
        ([KERNEL, KERNEL], [1, 1], [2, 2], [1, 1], False),
        [out, TensorMeta(SHAPE, DType.int64)],
        dtype,
    )
    peak, (values, indices) = _peak_bytes(graph, x)
    # The padded input, the running maximum and index, and one step's temporaries.
    assert peak < 2.5 * (x.nbytes + values.nbytes + indices.nbytes), f"peak {peak} bytes"
    assert peak < x.nbytes * KERNEL * KERNEL / 2
    # Spot check against a direct computation at one interior position.
    window = x[1, 3, 40:45, 50:55]
    assert values[1, 3, 42, 52] == window.max()
    assert indices[1, 3, 42, 52] == np.ravel_multi_index(
        np.add(np.unravel_index(window.argmax(), window.shape), (40, 50)), SHAPE[2:]
    )


@pytest.mark.parametrize("dtype", [DType.float32, DType.float16])
def test_avg_pool2d_sums_a_window_view(dtype: DType) -> None:
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(dtype.numpy)
    graph = _graph(
        "aten.avg_pool2d.default",
        ([KERNEL, KERNEL], [1, 1], [2, 2], False, True, None),
        [TensorMeta(SHAPE, dtype)],
        dtype,
    )
    peak, (values,) = _peak_bytes(graph, x)
    as_float32 = x.size * 4  # float16 is converted to float32 (before padding) and summed in it
    assert peak < 2.5 * (as_float32 + values.nbytes), f"peak {peak} bytes"
    assert peak < as_float32 * KERNEL * KERNEL / 4
    expected = x[0, 5, 10:15, 20:25].astype(np.float64).mean()
    np.testing.assert_allclose(
        float(values[0, 5, 12, 22]), expected, rtol=2e-3 if dtype is DType.float16 else 1e-5
    )
