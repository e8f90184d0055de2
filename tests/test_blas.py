"""aten2prims/executor/blas.py: the executor's matrix products, by MKL's gemm when MKL is in use
and the layout allows it, else by np.matmul; np.matmul's results either way (against a float64
product, within the rounding-error bound of a float sum), in both modes."""

from __future__ import annotations

import ast
import math
import platform
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from _model_checks import assert_like_torch

import aten2prims
from aten2prims.executor import blas
from aten2prims.frontends.torch_interop import to_numpy
from prims import mkl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import build

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["mkl", "numpy"])
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs with MKL's products and, inside `mkl.disabled()`, with NumPy's."""
    if request.param == "numpy":
        with mkl.disabled():
            yield "numpy"
        return
    if platform.machine() != "x86_64":
        pytest.skip("the mkl package exists for x86-64 only")
    assert mkl.library() is not None, mkl.unavailable_reason
    yield "mkl"


def _random(shape: tuple[int, ...], dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _transposed(shape: tuple[int, ...], dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    """An array of `shape` whose last two dims are column-major."""
    return _random((*shape[:-2], shape[-1], shape[-2]), dtype, seed).swapaxes(-1, -2)


def _padded(shape: tuple[int, ...], dtype: type = np.float32, seed: int = 0) -> np.ndarray:
    """An array of `shape` whose rows are 7 elements apart more than their length."""
    return _random((*shape[:-1], shape[-1] + 7), dtype, seed)[..., : shape[-1]]


def _out(shape: tuple[int, ...], dtype: np.dtype, layout: str) -> np.ndarray:
    """A NaN-filled output of `shape`: row-major, column-major or with padded rows."""
    if layout == "transposed":
        out = np.empty((*shape[:-2], shape[-1], shape[-2]), dtype).swapaxes(-1, -2)
    elif layout == "padded":
        out = np.empty((*shape[:-1], shape[-1] + 5), dtype)[..., : shape[-1]]
    else:
        out = np.empty(shape, dtype)
    out.fill(np.nan)
    return out


def _assert_product(out: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """out is x @ y within the bound on any order's rounding error of a sum of k products,
    k·eps·(|x| @ |y|) (plus the rounding of the result), against the float64 product."""
    exact = np.matmul(x.astype(np.float64), y.astype(np.float64))
    magnitude = np.matmul(np.abs(x).astype(np.float64), np.abs(y).astype(np.float64))
    eps = np.finfo(out.dtype).eps
    bound = (x.shape[-1] + 1) * eps * magnitude
    assert out.shape == exact.shape
    assert not np.isnan(out).any()
    assert (np.abs(out.astype(np.float64) - exact) <= bound).all()


def _assert_size(x: np.ndarray, y: np.ndarray) -> None:
    """x @ y is large enough for MKL: only its layout decides."""
    matrix = x.shape[-2] * x.shape[-1] * y.shape[-1]
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    assert matrix >= blas.MKL_MIN_MATRIX_MACS
    assert matrix * math.prod(batch) >= blas.MKL_MIN_CALL_MACS


# Layouts MKL takes: (x, y, out's layout), each of a size MKL takes (_assert_size).
MKL_CASES: dict[str, Callable[[], tuple[np.ndarray, np.ndarray, str]]] = {
    "row-major": lambda: (_random((70, 90)), _random((90, 700), seed=1), "row-major"),
    "x transposed": lambda: (_transposed((70, 90)), _random((90, 700), seed=1), "row-major"),
    "y transposed": lambda: (_random((70, 90)), _transposed((90, 700), seed=1), "row-major"),
    "both transposed": lambda: (
        _transposed((70, 90)),
        _transposed((90, 700), seed=1),
        "row-major",
    ),
    "padded rows": lambda: (_padded((70, 90)), _padded((90, 700), seed=1), "padded"),
    "out transposed": lambda: (_random((70, 90)), _transposed((90, 700), seed=1), "transposed"),
    "a row": lambda: (_random((1, 2048)), _random((2048, 2048), seed=1), "row-major"),
    "a column": lambda: (_random((2048, 2048)), _random((2048, 1), seed=1), "row-major"),
    "float64": lambda: (
        _random((70, 90), np.float64),
        _transposed((90, 700), np.float64, seed=1),
        "row-major",
    ),
    "batched": lambda: (_random((3, 4, 70, 90)), _random((3, 4, 90, 700), seed=1), "row-major"),
    "broadcast batch": lambda: (
        _random((3, 1, 70, 90)),
        _random((4, 90, 700), seed=1),
        "row-major",
    ),
    "stride-0 batch": lambda: (
        _transposed((2, 5, 70, 90)),
        np.broadcast_to(_random((90, 700), seed=1), (5, 90, 700)),
        "row-major",
    ),
    "matrix times a batch": lambda: (_random((70, 90)), _random((3, 90, 700), seed=1), "padded"),
    "batch strides that do not merge": lambda: (  # x's batch dims: strides 5 and 1 matrices
        _random((3, 5, 70, 90))[:, :4],
        _random((3, 4, 90, 700), seed=1),
        "transposed",
    ),
}


@pytest.mark.parametrize("case", MKL_CASES)
def test_products_in_layouts_mkl_takes(case: str, kernels: str) -> None:
    x, y, layout = MKL_CASES[case]()
    shape = (*np.broadcast_shapes(x.shape[:-2], y.shape[:-2]), x.shape[-2], y.shape[-1])
    _assert_size(x, y)
    x_before, y_before = x.copy(), y.copy()
    out = _out(shape, x.dtype, layout)
    blas.matmul(x, y, out)
    _assert_product(out, x, y)
    assert np.array_equal(x, x_before) and np.array_equal(y, y_before)
    library = mkl.library()
    if kernels == "mkl":
        assert library is not None
        again = _out(shape, x.dtype, layout)
        assert blas.mkl_matmul(library, x, y, again)  # MKL took it: the same bits as matmul's
        assert again.tobytes() == out.tobytes()
    else:
        assert library is None
        # np.matmul's own bits for an out of this layout (which BLAS call it makes, and so the
        # summation order, depends on out's layout: OpenBLAS's differ on some CPUs, AMD's)
        expected = _out(shape, x.dtype, layout)
        np.matmul(x, y, out=expected)
        assert out.tobytes() == expected.tobytes()


@pytest.mark.parametrize(
    "case", ["row-major", "padded rows", "out transposed", "batched", "too small"]
)
def test_accumulating_products_add_to_out(case: str, kernels: str) -> None:
    """With `accumulate`, out += x @ y: MKL's gemm with beta = 1 where it takes the product,
    else NumPy's product added to out."""
    if case == "too small":
        x, y, layout = _random((16, 32)), _random((32, 16), seed=1), "row-major"
    else:
        x, y, layout = MKL_CASES[case]()
    shape = (*np.broadcast_shapes(x.shape[:-2], y.shape[:-2]), x.shape[-2], y.shape[-1])
    out = _out(shape, x.dtype, layout)
    start = _random(shape, x.dtype, seed=2)
    np.copyto(out, start)
    blas.matmul(x, y, out, accumulate=True)
    # within the bound of _assert_product plus the rounding of the sum
    exact = start.astype(np.float64) + np.matmul(x.astype(np.float64), y.astype(np.float64))
    magnitude = np.abs(start).astype(np.float64) + np.matmul(
        np.abs(x).astype(np.float64), np.abs(y).astype(np.float64)
    )
    bound = (x.shape[-1] + 2) * np.finfo(x.dtype).eps * magnitude
    assert (np.abs(out.astype(np.float64) - exact) <= bound).all()
    library = mkl.library()
    if kernels == "numpy" or case == "too small":
        assert library is None or not blas.mkl_matmul(library, x, y, out.copy(), accumulate=True)
        assert out.tobytes() == (start + np.matmul(x, y)).tobytes()
    else:
        assert library is not None
        again = _out(shape, x.dtype, layout)
        np.copyto(again, start)
        assert blas.mkl_matmul(library, x, y, again, accumulate=True)
        assert again.tobytes() == out.tobytes()


@pytest.mark.parametrize("size", ["large", "too small"])
def test_summed_products_are_accumulating_products(size: str, kernels: str) -> None:
    """matmul_sum(x, y, out, 2) over x [3, 2, M, K] and overlapping shifted views y [3, 2, K, N]
    of one array (a convolution's kernel offsets) is out = x[0, 0] @ y[0, 0], then out +=
    each other product in order: the bits of those `matmul` calls, within the rounding bound
    of the whole sum."""
    m, k, n = (70, 90, 700) if size == "large" else (8, 16, 24)
    x = _random((3, 2, m, k))
    memory = _random((k, n + 40), seed=1)
    y = np.lib.stride_tricks.as_strided(
        memory, (3, 2, k, n), (12 * 4, 4, memory.strides[0], 4), writeable=False
    )
    out = np.full((m, n), np.nan, np.float32)
    library = mkl.library()
    if library is not None:  # MKL makes the large ones
        assert blas.mkl_matmul(library, x[0, 0], y[0, 0], out.copy()) == (size == "large")
    blas.matmul_sum(x, y, out, 2)
    expected = np.full((m, n), np.nan, np.float32)
    for number, position in enumerate(np.ndindex(3, 2)):
        blas.matmul(x[position], y[position], expected, accumulate=number > 0)
    assert out.tobytes() == expected.tobytes()
    wide_x, wide_y = x.astype(np.float64), y.astype(np.float64)
    exact = np.einsum("abmk,abkn->mn", wide_x, wide_y)
    magnitude = np.einsum("abmk,abkn->mn", np.abs(wide_x), np.abs(wide_y))
    assert (np.abs(out - exact) <= (6 * k + 6) * np.finfo(np.float32).eps * magnitude).all()
    empty = np.full((m, n), np.nan, np.float32)
    blas.matmul_sum(x[:0], y[:0], empty, 2)
    assert empty.tobytes() == np.zeros_like(empty).tobytes()


# Products MKL does not take for their layout or dtype (np.matmul's, in both modes).
NUMPY_CASES: dict[str, Callable[[], tuple[np.ndarray, np.ndarray, np.ndarray]]] = {
    "no unit stride": lambda: (
        _random((140, 180))[::2, ::2],
        _random((90, 700), seed=1),
        np.empty((70, 700), np.float32),
    ),
    "a negative row stride": lambda: (
        _random((70, 90))[::-1],
        _random((90, 700), seed=1),
        np.empty((70, 700), np.float32),
    ),
    "a negative batch stride": lambda: (
        _random((4, 70, 90))[::-1],
        _random((4, 90, 700), seed=1),
        np.empty((4, 70, 700), np.float32),
    ),
    "out with no unit stride": lambda: (
        _random((70, 90)),
        _random((90, 700), seed=1),
        np.empty((70, 1400), np.float32)[:, ::2],
    ),
    "float16": lambda: (
        _random((70, 90), np.float16),
        _random((90, 700), np.float16, seed=1),
        np.empty((70, 700), np.float16),
    ),
    "int32": lambda: (
        np.arange(70 * 90, dtype=np.int32).reshape(70, 90) % 7,
        np.arange(90 * 700, dtype=np.int32).reshape(90, 700) % 5,
        np.empty((70, 700), np.int32),
    ),
    "mixed dtypes": lambda: (
        _random((70, 90)),
        _random((90, 700), np.float64, seed=1),
        np.empty((70, 700), np.float64),
    ),
    "too small to pay": lambda: (
        _random((16, 32)),
        _random((32, 16), seed=1),
        np.empty((16, 16), np.float32),
    ),
}


@pytest.mark.parametrize("case", NUMPY_CASES)
def test_other_products_are_numpys(case: str, kernels: str) -> None:
    x, y, out = NUMPY_CASES[case]()
    if case != "too small to pay":
        _assert_size(x, y)
    out.fill(0 if out.dtype.kind == "i" else np.nan)
    library = mkl.library()
    if library is not None:
        assert not blas.mkl_matmul(library, x, y, out)
        assert (out == 0).all() if out.dtype.kind == "i" else np.isnan(out).all()  # untouched
    blas.matmul(x, y, out)
    assert out.tobytes() == np.matmul(x, y).astype(out.dtype).tobytes()


def test_an_out_overlapping_an_operand_is_numpys(kernels: str) -> None:
    memory = _random((300, 300))
    x, y = memory[:, :250], _random((250, 250), seed=1)
    out = memory[:, 50:]  # overlaps x's columns 50..249
    _assert_size(x, y)
    expected = np.matmul(x.copy(), y)
    library = mkl.library()
    if library is not None:
        assert not blas.mkl_matmul(library, x, y, out)
    blas.matmul(x, y, out)
    assert out.tobytes() == expected.tobytes()


def test_a_read_only_out_is_refused_and_left_alone(kernels: str) -> None:
    x, y = _random((70, 90)), _random((90, 700), seed=1)
    out = np.full((70, 700), np.nan, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        blas.matmul(x, y, out)
    assert np.isnan(out).all()


@pytest.mark.parametrize(
    ("x_shape", "y_shape"),
    [((0, 90), (90, 700)), ((70, 90), (90, 0)), ((70, 0), (0, 200)), ((0, 70, 90), (90, 700))],
    ids=["no rows", "no columns", "nothing contracted", "no batches"],
)
def test_empty_products(x_shape: tuple, y_shape: tuple, kernels: str) -> None:
    x, y = _random(x_shape), _random(y_shape, seed=1)
    out = np.full((*x_shape[:-1], y_shape[-1]), np.nan, np.float32)
    blas.matmul(x, y, out)
    assert out.tobytes() == np.zeros_like(out).tobytes()  # nothing contracted: +0.0


def test_the_numpy_swap_is_the_same_product(kernels: str) -> None:
    x, y = _random((16, 256)), _transposed((256, 1024), seed=1)
    out = np.full((16, 1024), np.nan, np.float32)
    blas.matmul(x, y, out, swap_for_numpy=True)
    _assert_product(out, x, y)
    if kernels == "numpy":
        assert out.tobytes() == np.ascontiguousarray(np.matmul(y.T, x.T).T).tobytes()


def test_the_executor_makes_every_matrix_product_through_blas() -> None:
    """No module of the executor calls np.matmul (or @) but blas.py: every product can be
    MKL's."""
    offenders = []
    for path in sorted((ROOT / "aten2prims" / "executor").glob("*.py")):
        if path.name == "blas.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("matmul", "dot", "einsum"):
                offenders.append(f"{path.name}:{node.lineno} {node.attr}")
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                offenders.append(f"{path.name}:{node.lineno} @")
    assert not offenders


def _model(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """A model and inputs at which its products (convolutions, linear layers, attention blocks
    of 64-wide heads) are large enough for MKL, made in parts and chunks."""
    torch.manual_seed(4)
    if name == "encoder layer":
        layer = torch.nn.TransformerEncoderLayer(
            256, 4, dim_feedforward=512, dropout=0.0, batch_first=True
        )
        return layer.eval(), (torch.randn(2, 256, 256),)
    model, _ = build(name)
    if name == "cnn":
        return model, (torch.randn(8, 3, 64, 64),)
    if name == "mlp":
        return model, (torch.randn(16384, 16),)
    sequence = 1024
    mask = torch.triu(torch.full((sequence, sequence), float("-inf")), diagonal=1)
    return model, (torch.randn(2, sequence, 32), mask)


@pytest.mark.parametrize("name", ["cnn", "transformer", "mlp", "encoder layer"])
def test_models_like_torch_with_one_threads_bits(name: str, kernels: str, tmp_path: Path) -> None:
    model, inputs = _model(name)
    path = tmp_path / "model.pt2"
    torch.export.save(torch.export.export(model, inputs).run_decompositions(), path)
    graph = aten2prims.lower(aten2prims.load(path))
    arrays = [to_numpy(t) for t in inputs]
    one = aten2prims.execute(graph, arrays, threads=1)
    assert_like_torch(one, model, inputs)
    for threads in (2, 3):
        many = aten2prims.execute(graph, arrays, threads=threads)
        assert [o.tobytes() for o in many] == [o.tobytes() for o in one], threads
