"""Broadcasts NumPy reads in place (aten2prims/executor/unbuffered.py): elementwise steps whose
broadcast operand repeats along long runs of the result run with a short ufunc buffer. Results
are bit for bit the node-by-node kernels' (the reference run) at every thread count, special
values included, and the caller's buffer size is left as it was."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from prims_testing import bits_equal

import aten2prims
import prims
from aten2prims.executor import plan_for
from aten2prims.executor.chains import ChainKernel
from aten2prims.executor.reference import run_reference
from aten2prims.executor.segments import SegmentKernel
from aten2prims.executor.threads import Parted
from aten2prims.executor.unbuffered import Unbuffered, broadcast_run, buffer_size
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import Graph
from aten2prims.ir.values import TensorMeta, Value
from prims.builder import Builder


def build(inputs: dict[str, tuple[tuple[int, ...], DType]], body: Any) -> Graph:
    with Builder("g") as builder:
        values = {name: builder.add_input(name, TensorMeta(*spec)) for name, spec in inputs.items()}
        return builder.finish([body(**values)])


def unbuffered_sizes(graph: Graph) -> list[int]:
    """The buffer sizes of the plan's Unbuffered kernels and of its chains reading broadcasts
    (inside parts and segments too)."""
    kernels = []
    for step in plan_for(graph).steps:
        kernel = step.kernel
        members = kernel.members if isinstance(kernel, SegmentKernel) else ()
        for k in [kernel, *(member.kernel for member in members)]:
            k = k.kernel if isinstance(k, Parted) else k
            if isinstance(k, Unbuffered):
                kernels.append(k.size)
            if isinstance(k, ChainKernel) and k.buffer is not None:
                kernels.append(k.buffer)
    return kernels


def same_at_every_thread_count(graph: Graph, inputs: dict[str, np.ndarray]) -> None:
    expected = run_reference(graph, inputs)
    size = np.getbufsize()
    for threads in (1, 2, 3):
        bits_equal(aten2prims.execute(graph, inputs, threads=threads), expected)
    bits_equal(aten2prims.execute(graph, inputs, check=True), expected)
    assert np.getbufsize() == size


@pytest.mark.parametrize(
    ("result", "operands", "run"),
    [
        ((1568, 768), [(1568, 768), (1568, 1)], 768),  # a per-row statistic
        ((8, 196, 768), [(8, 196, 768), (1, 1, 768)], 768),  # a weight along the last dim
        ((8, 196, 768), [(768,)], 768),  # the same, its leading dims left out
        ((8, 64, 56, 56), [(8, 64, 56, 56), (1, 64, 1, 1)], 3136),  # a per-channel scale
        ((8, 64, 3136), [(8, 1, 3136), (1, 64, 1)], 3136),
        ((4, 1, 5), [(4, 1, 5), (4, 1, 1)], 5),  # size-1 dims of the result are no break
        ((6, 7), [(6, 7), (6, 7)], None),  # one flat loop
        ((6, 7), [(6, 7), ()], None),  # a 0-dim operand: a scalar throughout
        ((6, 7), [(1, 1)], None),
    ],
)
def test_the_run_is_the_trailing_dims_every_operand_covers_alike(
    result: tuple[int, ...], operands: list[tuple[int, ...]], run: int | None
) -> None:
    assert broadcast_run(result, operands) == run


def test_the_buffer_is_one_run_rounded_down_to_a_multiple_of_16() -> None:
    """NumPy 1.26 takes buffer sizes that are multiples of 16 only; a buffer shorter than two
    runs is read in place."""
    for run, size in ((768, 768), (1000, 992), (3136, 3136), (527, 512)):
        assert buffer_size(run) == size
        previous = np.setbufsize(size)
        np.setbufsize(previous)


def _norm(x: Value, rstd: Value, w: Value) -> Value:
    """A layer norm's scale and shift: a per-row statistic and a per-column weight."""
    shape = list(x.shape)
    scaled = prims.mul(x, prims.broadcast_in_dim(rstd, shape, [0]))
    return prims.add(prims.mul(scaled, prims.broadcast_in_dim(w, shape, [1])), 1.0)


@pytest.mark.parametrize("special", [False, True])
def test_a_norms_scale_and_shift_read_their_broadcasts_in_place(special: bool) -> None:
    """Rows of 768 (2.4 MB): the two products and the sum, one chain (chains.py), read their
    broadcast operands in place, with a buffer of one row; NaN, infinities and signed zeros in
    the operands give the reference's bits."""
    rows, columns = 784, 768
    graph = build(
        {
            "x": ((rows, columns), DType.float32),
            "rstd": ((rows,), DType.float32),
            "w": ((columns,), DType.float32),
        },
        _norm,
    )
    rng = np.random.default_rng(3)
    inputs = {
        "x": rng.standard_normal((rows, columns)).astype(np.float32),
        "rstd": rng.random(rows).astype(np.float32),
        "w": rng.standard_normal(columns).astype(np.float32),
    }
    if special:
        values = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)
        for array in inputs.values():
            flat = array.reshape(-1)
            picks = rng.random(flat.size) < 0.1
            flat[picks] = rng.choice(values, int(picks.sum()))
    assert unbuffered_sizes(graph) == [columns]
    same_at_every_thread_count(graph, inputs)


def test_short_runs_small_results_small_dtypes_and_maximum_keep_numpys_buffer() -> None:
    """Rows of 197 (a softmax's) gain from NumPy's copy into its buffer, a result of 256 KiB
    not from setting the buffer, 1- and 2-byte operands from neither, and maximum's stride-0
    loop is slower than the copy: none of them changes the buffer; int64's and float64's
    differences do."""

    def shifted(x: Value, m: Value) -> Value:
        return prims.sub(x, prims.broadcast_in_dim(m, list(x.shape), [0]))

    def clamped(x: Value, m: Value) -> Value:
        return prims.maximum(x, prims.broadcast_in_dim(m, list(x.shape), [0]))

    rng = np.random.default_rng(4)
    for rows, columns, body, dtype, expected in (
        (2364, 197, shifted, DType.float32, []),  # short rows
        (85, 768, shifted, DType.float32, []),  # 255 KiB
        (1568, 768, clamped, DType.float32, []),
        (1568, 768, shifted, DType.int8, []),
        (1568, 768, shifted, DType.int16, []),
        (1568, 768, shifted, DType.float32, [768]),
        (784, 768, shifted, DType.float64, [768]),
        (784, 768, shifted, DType.int64, [768]),
    ):
        graph = build({"x": ((rows, columns), dtype), "m": ((rows,), dtype)}, body)
        assert unbuffered_sizes(graph) == expected
        inputs = {
            "x": (rng.standard_normal((rows, columns)) * 50).astype(dtype.numpy),
            "m": (rng.standard_normal(rows) * 50).astype(dtype.numpy),
        }
        same_at_every_thread_count(graph, inputs)
