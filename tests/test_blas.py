"""aten2prims/executor/blas.py: the executor's matrix products, by MKL's gemm when MKL is in use
and the layout allows it, else by np.matmul, with NumPy's own OpenBLAS through ctypes making the
accumulating ones; np.matmul's results either way (against a float64 product, within the
rounding-error bound of a float sum), in the three modes."""

from __future__ import annotations

import ast
import ctypes
import math
import mmap
import platform
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import numpy as np
import pytest
import threadpoolctl
import torch
from _model_checks import assert_like_torch

import aten2prims
from aten2prims.executor import blas
from aten2prims.frontends.torch_interop import to_numpy
from prims import mkl, openblas

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import build

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["mkl", "openblas", "numpy"])
def kernels(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test runs with MKL's products, inside `mkl.disabled()` with NumPy's (its OpenBLAS
    through ctypes making the accumulating ones), and inside `openblas.disabled()` too with
    np.matmul's only."""
    if request.param == "openblas":
        with mkl.disabled():
            assert openblas.library() is not None, openblas.unavailable_reason
            yield "openblas"
        return
    if request.param == "numpy":
        with mkl.disabled(), openblas.disabled():
            assert blas.library() is None
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
    """x @ y is large enough for gemm through ctypes: only its layout decides."""
    matrix = x.shape[-2] * x.shape[-1] * y.shape[-1]
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    assert matrix >= blas.GEMM_MIN_MATRIX_MACS
    assert matrix * math.prod(batch) >= blas.GEMM_MIN_CALL_MACS


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
    library = blas.library()
    if kernels == "mkl":
        assert library is mkl.library() is not None
        again = _out(shape, x.dtype, layout)
        assert blas.gemm_matmul(library, x, y, again)  # MKL took it: the same bits as matmul's
        assert again.tobytes() == out.tobytes()
    else:
        assert mkl.library() is None
        # A product np.matmul can make is np.matmul's (OpenBLAS through ctypes is no faster):
        # its own bits for an out of this layout (which BLAS call it makes, and so the
        # summation order, depends on out's layout: OpenBLAS's differ on some CPUs, AMD's)
        expected = _out(shape, x.dtype, layout)
        np.matmul(x, y, out=expected)
        assert out.tobytes() == expected.tobytes()
    if kernels == "openblas":
        assert library is openblas.library() is not None
        # ... and OpenBLAS through ctypes takes the layout (as it does for accumulating ones)
        again = _out(shape, x.dtype, layout)
        assert blas.gemm_matmul(library, x, y, again)
        _assert_product(again, x, y)


@pytest.mark.parametrize(
    "case", ["row-major", "padded rows", "out transposed", "batched", "too small"]
)
def test_accumulating_products_add_to_out(case: str, kernels: str) -> None:
    """With `accumulate`, out += x @ y: gemm with beta = 1 (MKL's, else NumPy's OpenBLAS
    through ctypes) where it takes the product, else NumPy's product added to out."""
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
    library = blas.library()
    if kernels == "numpy" or case == "too small":
        assert library is None or not blas.gemm_matmul(library, x, y, out.copy(), accumulate=True)
        assert out.tobytes() == (start + np.matmul(x, y)).tobytes()
    else:
        assert library is (mkl.library() if kernels == "mkl" else openblas.library())
        assert library is not None
        again = _out(shape, x.dtype, layout)
        np.copyto(again, start)
        assert blas.gemm_matmul(library, x, y, again, accumulate=True)
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
    library = blas.library()
    if library is not None:  # gemm through ctypes makes the large ones
        assert blas.gemm_matmul(library, x[0, 0], y[0, 0], out.copy()) == (size == "large")
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


# Products gemm through ctypes does not take for their layout or dtype (np.matmul's, in every
# mode).
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
    library = blas.library()
    if library is not None:
        assert not blas.gemm_matmul(library, x, y, out)
        assert not blas.gemm_matmul(library, x, y, out, accumulate=True)
        assert (out == 0).all() if out.dtype.kind == "i" else np.isnan(out).all()  # untouched
    blas.matmul(x, y, out)
    assert out.tobytes() == np.matmul(x, y).astype(out.dtype).tobytes()


def test_an_out_overlapping_an_operand_is_numpys(kernels: str) -> None:
    memory = _random((300, 300))
    x, y = memory[:, :250], _random((250, 250), seed=1)
    out = memory[:, 50:]  # overlaps x's columns 50..249
    _assert_size(x, y)
    expected = np.matmul(x.copy(), y)
    library = blas.library()
    if library is not None:
        assert not blas.gemm_matmul(library, x, y, out)
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
    if kernels != "mkl":  # OpenBLAS's order through np.matmul, not ctypes
        assert out.tobytes() == np.ascontiguousarray(np.matmul(y.T, x.T).T).tobytes()


def test_the_executor_makes_every_matrix_product_through_blas() -> None:
    """No module of the executor calls np.matmul (or @) but blas.py: every product can be
    gemm's through ctypes."""
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


# -- products with few rows in blocks of OpenBLAS's small-matrix kernels ---------------------------


@pytest.fixture
def small_kernels(monkeypatch: pytest.MonkeyPatch) -> openblas.OpenBlas:
    """NumPy's OpenBLAS seen as running its AVX-512 cores' kernels, which have small-matrix
    products (the tests' OPENBLAS_CORETYPE may choose others: the blocks are then the other
    kernels' products, which checks the blocking and not its speed)."""
    library = attrs.evolve(_openblas(), core="SkylakeX")
    monkeypatch.setattr(openblas, "library", lambda: library)
    return library


def test_the_small_kernels_sizes() -> None:
    """OpenBLAS's limits: 10^6 multiply-adds, and for a transposed y at most 1200 output
    elements and a depth of at least 32; other cores have no small-matrix kernels."""
    library = attrs.evolve(_openblas(), core="SkylakeX")
    assert library.small_columns(8, 256, y_transposed=True) == 150
    assert library.small_columns(8, 256, y_transposed=False) == 488
    assert library.small_columns(8, 16, y_transposed=True) == 0
    assert library.small_columns(8, 1024, y_transposed=False) == 122
    assert attrs.evolve(library, core="Haswell").small_columns(8, 256, y_transposed=True) == 0


@pytest.mark.parametrize(
    ("rows", "y_layout", "blocked"),
    [
        (8, "transposed", True),
        (2, "transposed", True),
        (8, "row-major", True),
        (8, "padded", True),
        (1, "transposed", False),
        (9, "transposed", False),
    ],
)
def test_few_rows_are_made_in_small_kernel_blocks(
    rows: int, y_layout: str, blocked: bool, small_kernels: openblas.OpenBlas
) -> None:
    """x [rows, 256] @ y [256, 1000]: a few rows (2 to 8) are made in column blocks of at most
    the small kernels' width, each np.matmul's product of those columns; one row or more than 8
    are left to np.matmul whole."""
    make = {"transposed": _transposed, "row-major": _random, "padded": _padded}[y_layout]
    x, y = _random((rows, 256)), make((256, 1000), seed=1)
    out = np.full((rows, 1000), np.nan, np.float32)
    with mkl.disabled():
        assert blas._in_small_blocks(x, y, out) is blocked
        if not blocked:
            return
        _assert_product(out, x, y)
        widest = small_kernels.small_columns(rows, 256, y_layout == "transposed")
        count = -(-1000 // widest)
        width = -(-1000 // count)
        for start in range(0, 1000, width):  # each block as np.matmul makes those columns
            part = np.matmul(x, y[:, start : start + width])
            assert out[:, start : start + width].tobytes() == part.tobytes()
        again = np.full_like(out, np.nan)
        blas.matmul(x, y, again, swap_for_numpy=True)
        assert again.tobytes() == out.tobytes()


def test_an_lstm_in_small_kernel_blocks_like_torch_with_one_threads_bits(
    small_kernels: openblas.OpenBlas,
) -> None:
    """An LSTM of batch 8 makes its recurrent products (8x256 @ 256x1024 per time step) in
    small-kernel blocks: like torch, and the same bits at every thread count."""
    torch.manual_seed(5)
    model, inputs = torch.nn.LSTM(256, 256).eval(), (torch.randn(12, 8, 256),)
    program = torch.export.export(model, inputs).run_decompositions()
    graph = aten2prims.lower(aten2prims.from_fx(program))
    arrays = [to_numpy(t) for t in inputs]
    calls = []
    real = blas._in_small_blocks

    def counted(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> bool:
        made = real(x, y, out)
        calls.append(made)
        return made

    with mkl.disabled():
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(blas, "_in_small_blocks", counted)
            one = aten2prims.execute(graph, arrays, threads=1)
        assert calls.count(True) == 12  # one product per time step
        assert_like_torch(one, model, inputs)
        for threads in (2, 3):
            many = aten2prims.execute(graph, arrays, threads=threads)
            assert [o.tobytes() for o in many] == [o.tobytes() for o in one], threads


# -- NumPy's OpenBLAS through ctypes (prims/openblas.py) ----------------------------------------


def _openblas() -> openblas.OpenBlas:
    library = openblas.library()
    assert library is not None, openblas.unavailable_reason
    return library


def test_leading_dimensions_beyond_32_bits_are_only_ilp64s() -> None:
    """A leading dimension of 2**31 elements fits OpenBLAS's 64-bit ints (NumPy's ILP64 build)
    and not MKL's LP64 32-bit ones: the call is planned for the one and refused for the other
    (planned only: the operand is a view of reserved address space, never read)."""
    library = _openblas()
    assert ctypes.sizeof(library.integer) == 8 and library.max_int == (1 << 63) - 1
    lead = 1 << 31
    space = mmap.mmap(-1, (lead + 1024) * 4, prot=mmap.PROT_READ)  # read-only: not committed
    try:
        memory = np.frombuffer(space, np.float32)
        # x [1024, 2], column-major: its two columns 2**31 elements apart
        x = np.lib.stride_tricks.as_strided(memory, (1024, 2), (4, lead * 4), writeable=False)
        y, out = _random((2, 2048)), np.empty((1024, 2048), np.float32)
        assert blas._gemm_call(library, x, y, out) is not None
        lp64 = mkl.Mkl(path=Path("unused"), handle=None)  # type: ignore[arg-type]  # never called
        assert lp64.max_int == (1 << 31) - 1
        assert blas._gemm_call(lp64, x, y, out) is None
        del memory, x
    finally:
        space.close()


@pytest.mark.parametrize("batch_call", ["strided batch", "a loop of gemm calls"])
def test_openblas_batches(batch_call: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batched accumulating products through OpenBLAS's strided batch gemm, or, where the
    library lacks it (OpenBLAS before 0.3.30), one gemm call per matrix: the same bits with
    BLAS at one thread, as the executor holds it (at two, OpenBLAS splits a lone gemm among
    its threads, and its bits change)."""
    library = _openblas()
    assert library.gemm_batch_strided(ctypes.c_float) is not None  # NumPy's 0.3.31 has it
    x, y = _transposed((3, 4, 70, 90)), _random((4, 90, 700), seed=1)
    start = _random((3, 4, 70, 700), seed=2)
    expected = start + np.matmul(x, y)
    with mkl.disabled(), threadpoolctl.threadpool_limits(1, user_api="blas"):
        out = start.copy()
        blas.matmul(x, y, out, accumulate=True)
        if batch_call == "a loop of gemm calls":
            monkeypatch.setattr(blas, "_functions", {})
            monkeypatch.setattr(openblas.OpenBlas, "gemm_batch_strided", lambda self, t: None)
        looped = start.copy()
        assert blas.gemm_matmul(library, x, y, looped, accumulate=True)
    assert looped.tobytes() == out.tobytes()
    bound = 100 * np.finfo(np.float32).eps * (np.abs(start) + np.abs(x) @ np.abs(y))
    assert (np.abs(out - expected) <= bound).all()


def test_openblas_products_propagate_nan_and_overwrite_out() -> None:
    """0 * inf is NaN and NaN operands give NaN, as np.matmul's; the first product of a sum
    (beta = 0) overwrites out, NaN included, and does not read it."""
    library = _openblas()
    x, y = _random((70, 90)), _random((90, 700), seed=1)
    x[3, :] = 0.0
    y[:, 5] = np.inf
    x[10, 7] = np.nan
    out = np.full((70, 700), np.nan, np.float32)
    assert blas.gemm_matmul(library, x, y, out)
    expected = np.matmul(x, y)
    assert np.array_equal(np.isnan(out), np.isnan(expected))
    assert np.isnan(out[3, 5]) and np.isnan(out[10]).all()
    finite = np.isfinite(expected)
    assert np.array_equal(np.isfinite(out), finite)
    added = np.zeros((70, 700), np.float32)
    added[0, 0] = np.nan
    assert blas.gemm_matmul(library, x, y, added, accumulate=True)
    assert np.isnan(added[0, 0]) and np.array_equal(np.isnan(added[1:]), np.isnan(expected[1:]))


def test_openblas_calls_from_threads_at_once_give_one_calls_bits() -> None:
    """Two threads making OpenBLAS's accumulating products at once (ctypes releases the GIL),
    with BLAS held at one thread as the executor holds it: each result has the bits of the
    same sum made alone."""
    library = _openblas()
    x = _random((9, 64, 128))
    memory = _random((128, 3000), seed=1)
    y = np.lib.stride_tricks.as_strided(
        memory, (9, 128, 2800), (20 * 4, memory.strides[0], 4), writeable=False
    )
    assert blas._gemm_call(library, x[0], y[0], np.empty((64, 2800), np.float32)) is not None
    with mkl.disabled(), threadpoolctl.threadpool_limits(1, user_api="blas"):
        alone = np.empty((64, 2800), np.float32)
        blas.matmul_sum(x, y, alone, 1)
        outs = [np.full((64, 2800), np.nan, np.float32) for _ in range(8)]
        threads = [
            threading.Thread(target=lambda o=o: [blas.matmul_sum(x, y, o, 1) for _ in range(3)])
            for o in outs
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert all(o.tobytes() == alone.tobytes() for o in outs)
