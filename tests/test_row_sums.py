"""Row sums through BLAS (aten2prims/executor/row_sums.py): a float sum over the trailing dims
runs as a matrix-vector product with ones. Its terms are NumPy's, its order BLAS's: results
within the rounding a sum allows of the prim's own kernel (NumPy's pairwise sum) and within
float32 tolerance of torch, the same bits on 1, 2 and 3 threads, and the prim's kernel itself
where the operand's rows are no strided matrix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from _thread_checks import assert_one_threads_bits

import aten2prims
import prims
from aten2prims.executor import plan_for
from aten2prims.executor.reference import run_reference
from aten2prims.executor.row_sums import MAX_ROW_LENGTH, RowSums
from aten2prims.executor.threads import ReducedParted
from aten2prims.frontends.fx import from_fx
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import Graph
from aten2prims.ir.values import TensorMeta
from prims.builder import Builder
from prims.registry import lookup


def _row_sums_kernels(graph: Graph) -> list[RowSums]:
    kernels = []
    for step in plan_for(graph).steps:
        kernel = step.kernel.kernel if isinstance(step.kernel, ReducedParted) else step.kernel
        if isinstance(kernel, RowSums):
            kernels.append(kernel)
    return kernels


def _sum_graph(shape: tuple[int, ...], dims: list[int], dtype: DType) -> Graph:
    with Builder("g") as builder:
        x = builder.add_input("x", TensorMeta(shape, dtype))
        return builder.finish([prims.sum(x, dims)])


# BLAS's row sums err by up to 3.2 eps of the sum of the terms' magnitudes (measured over
# all-positive rows of 128 to 50,176 elements; NumPy's pairwise sum 1.5): row_sums.py.
SUM_EPSILONS = 4


def _within_a_sums_rounding(ours: np.ndarray, x: np.ndarray, reduced: tuple[int, ...]) -> None:
    """Each sum within SUM_EPSILONS eps of the sum of its terms' magnitudes of the exact sum
    (in float64)."""
    exact = np.sum(x.astype(np.float64), axis=reduced)
    magnitude = np.sum(np.abs(x.astype(np.float64)), axis=reduced)
    allowance = SUM_EPSILONS * np.finfo(x.dtype).eps * magnitude
    assert np.all(np.abs(ours.astype(np.float64) - exact) <= allowance)


@pytest.mark.parametrize(
    ("shape", "dims", "dtype"),
    [
        ((8, 196, 768), [2], DType.float32),  # a layer norm's rows (split into parts)
        ((4, 3, 197, 197), [3], DType.float32),  # a softmax's
        ((4, 64, 7, 7), [2, 3], DType.float32),  # a mean over an image's positions
        ((300, 5), [1], DType.float64),
        ((64, 4096), [1], DType.float32),  # rows where BLAS rounds most (all positive below)
    ],
)
def test_trailing_sums_are_products_with_ones(
    shape: tuple[int, ...], dims: list[int], dtype: DType
) -> None:
    graph = _sum_graph(shape, dims, dtype)
    assert len(_row_sums_kernels(graph)) == 1
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype.numpy)
    if shape[-1] == 4096:  # all positive: the rounding errors add up
        x = (rng.random(shape) + 0.5).astype(dtype.numpy)
    (ours,) = aten2prims.execute(graph, {"x": x}, threads=1)
    assert ours.dtype == x.dtype and ours.shape == shape[: len(shape) - len(dims)]
    _within_a_sums_rounding(ours, x, tuple(dims))
    (reference,) = run_reference(graph, {"x": x})
    assert not np.array_equal(ours, reference) or shape[-1] < 8  # BLAS's order, not NumPy's
    for threads in (2, 3):
        (many,) = aten2prims.execute(graph, {"x": x}, threads=threads)
        assert many.tobytes() == ours.tobytes(), threads
    torch.testing.assert_close(
        torch.from_numpy(ours), torch.from_numpy(x).sum(dim=dims), rtol=1.3e-6, atol=1e-5
    )


def test_other_sums_keep_the_prims_kernel() -> None:
    """Leading dims, a whole-tensor sum, an output dtype, integers and rows longer than
    MAX_ROW_LENGTH keep NumPy's sum (the same bits as the reference run)."""
    cases = [
        ((64, 32), [0], DType.float32, None),
        ((64, 32), [0, 1], DType.float32, None),
        ((64, 32), [1], DType.float32, DType.float64),
        ((64, 32), [1], DType.int64, None),
        ((4, MAX_ROW_LENGTH + 1), [1], DType.float32, None),
    ]
    for shape, dims, dtype, output_dtype in cases:
        with Builder("g") as builder:
            x = builder.add_input("x", TensorMeta(shape, dtype))
            graph = builder.finish([prims.sum(x, dims, output_dtype=output_dtype)])
        assert not _row_sums_kernels(graph), (shape, dims, dtype, output_dtype)
        data = (np.random.default_rng(1).standard_normal(shape) * 100).astype(dtype.numpy)
        (ours,) = aten2prims.execute(graph, {"x": data})
        assert ours.tobytes() == run_reference(graph, {"x": data})[0].tobytes()


def test_special_values_sum_as_torch_sums_them() -> None:
    """Rows of -0.0 sum to +0.0, inf and -inf to NaN, a NaN anywhere to NaN, as torch's sum."""
    rows = np.array(
        [
            [-0.0] * 6,
            [np.inf, 1, 2, 3, 4, 5],
            [np.inf, -np.inf, 0, 0, 0, 0],
            [1, 2, np.nan, 3, 4, 5],
            [-np.inf, -1, -2, -3, -4, -5],
            [3.4e38, 3.4e38, 0, 0, 0, 0],  # overflows to inf
        ],
        np.float32,
    )
    graph = _sum_graph(rows.shape, [1], DType.float32)
    assert len(_row_sums_kernels(graph)) == 1
    (ours,) = aten2prims.execute(graph, {"x": rows})
    expected = torch.from_numpy(rows).sum(dim=1).numpy()
    assert ours.tobytes() == expected.tobytes()


def test_rows_that_are_no_strided_matrix_take_the_prims_kernel() -> None:
    """Given a view whose rows cannot be one matrix without a copy (a transposed operand), the
    kernel falls back to the prim's own: NumPy's bits."""
    definition = lookup("prims.sum")
    assert definition is not None and definition.kernel is not None
    kernel = RowSums(definition.kernel, 1, 16, np.dtype(np.float32))
    x = np.random.default_rng(2).standard_normal((16, 16)).astype(np.float32)
    for view in (x.T, x[:, ::-1]):
        assert kernel(view, (1,), None).tobytes() == np.sum(view, axis=1).tobytes()
    # Every other row, one row repeated: matrices with a row stride (0 too), no copy.
    for rows in (x[::2], np.broadcast_to(x[:1], (16, 16))):
        _within_a_sums_rounding(kernel(rows, (1,), None), rows, (1,))


def test_layer_norm_and_softmax_stay_within_torchs_tolerance() -> None:
    """Exported modules whose means and denominators are row sums: the plan takes them, and the
    results stay within float32 tolerance of torch's (the model rule: tests/_model_checks.py)."""

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(256)

        def forward(self, x: torch.Tensor) -> Any:
            return torch.softmax(self.norm(x), dim=-1), self.norm(x).mean(dim=-1)

    module = Block().eval()
    with torch.no_grad():
        module.norm.weight.normal_()
        module.norm.bias.normal_()
    x = torch.randn(4, 128, 256, generator=torch.Generator().manual_seed(3)) * 4 + 2
    program = torch.export.export(module, (x,)).run_decompositions()
    graph = aten2prims.lower(from_fx(program))
    assert len(_row_sums_kernels(graph)) >= 3
    ours = aten2prims.execute(graph, [x.numpy()])
    with torch.no_grad():
        expected = module(x)
    for a, b in zip(ours, expected):
        torch.testing.assert_close(torch.from_numpy(a), b, rtol=1.3e-6, atol=1e-5)


def test_a_large_layer_norm_gives_one_threads_bits_on_every_thread_count() -> None:
    """8x196x768 (benchmarks/ops.py's case): the row sums run in parts of a segment and the
    output is the array its centred rows were written into (arena.py); 1 to 4 threads give the
    same bits, within float32 tolerance of torch."""
    module = torch.nn.LayerNorm(768).eval()
    with torch.no_grad():
        module.weight.normal_()
        module.bias.normal_()
    x = torch.randn(8, 196, 768, generator=torch.Generator().manual_seed(4)) + 3
    program = torch.export.export(module, (x,)).run_decompositions()
    graph = aten2prims.lower(from_fx(program))
    plan = plan_for(graph)
    assert len(_row_sums_kernels(graph)) == 1
    last = next(step for step in plan.steps if plan.output_slots[0] in step.out_slots)
    assert last.out_argument is not None, "the output's step writes in place"
    outputs = aten2prims.execute(graph, [x.numpy()], threads=1)
    assert_one_threads_bits(graph, [x.numpy()], outputs)
    (one,) = outputs
    with torch.no_grad():
        expected = module(x)
    torch.testing.assert_close(torch.from_numpy(one), expected, rtol=1.3e-6, atol=1e-5)
