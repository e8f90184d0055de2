"""item, maximum_value/minimum_value, frexp (prims/misc.py), the FFTs (prims/fft.py) and svd
(prims/linalg.py) against torch.ops.prims; plus the registry's coverage of all 124 torch prims."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from prims_testing import (
    DTYPES,
    LAYOUTS,
    TP,
    assert_bitwise,
    assert_close,
    ours_meta,
    random_array,
    rng_for,
    run_prim,
    symbolic,
    torch_meta,
    torch_prim,
    with_layout,
)

import prims
from aten2prims.backends.to_fx import to_fx
from aten2prims.errors import DTypeError, SchemaError, ShapeError
from aten2prims.executor import execute
from aten2prims.frontends.torch_interop import to_numpy, to_torch, torch_dtype
from aten2prims.ir.dtypes import DType
from aten2prims.ir.graph import graphs_equal
from aten2prims.ir.parser import parse
from aten2prims.ir.values import CPU, Device, MemoryFormat, ScalarMeta, TensorMeta
from aten2prims.passes.verify import verify
from prims import Builder
from prims.common import COMPLEX, F32_F64, FLOATS
from prims.registry import PRIMS
from prims.torch_prims import TORCH_PRIMS

T = symbolic


# -- item, maximum_value, minimum_value -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_item(dtype: DType) -> None:
    rng = rng_for("item", dtype)
    for shape in ((), (1,), (1, 1, 1)):
        for _ in range(4):
            x = random_array(shape, dtype, rng)
            (ours,) = run_prim("item", x)
            theirs = torch_prim("item", x)
            assert type(ours) is dtype.python_type and type(theirs) is dtype.python_type
            assert_close(ours, theirs, what=f"item of {dtype.short}{list(shape)}")
        # torch's meta returns a 0-dim stand-in tensor that cannot run on "meta"; its kernel's
        # Python type is the specification.
        assert ours_meta("item", T(shape, dtype)) == ScalarMeta(type(theirs))


def test_item_needs_one_element() -> None:
    for shape in ((2,), (0,), (1, 3)):
        with pytest.raises(RuntimeError):
            TP.item(torch.zeros(shape))  # torch's kernel rejects it; its meta does not look
        with pytest.raises(ShapeError):
            ours_meta("item", T(shape, DType.float32))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_limits(dtype: DType) -> None:
    for name in ("maximum_value", "minimum_value"):
        (ours,) = run_prim(name, dtype)
        theirs = getattr(TP, name)(torch_dtype(dtype))
        # torch's kernel returns a float for complex dtypes while its meta says complex; ours
        # follows the meta (ScalarMeta(complex)) with torch's value as the real part.
        assert ours == theirs and type(ours) is dtype.python_type
        assert ours_meta(name, dtype) == ScalarMeta(dtype.python_type)
        if not dtype.is_complex:
            assert torch_meta(name, dtype) == ScalarMeta(type(theirs))


# -- frexp -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", sorted(FLOATS, key=DTYPES.index), ids=str)
def test_frexp(dtype: DType) -> None:
    info = np.finfo(np.float32) if dtype is DType.bfloat16 else np.finfo(dtype.numpy)
    specials = np.array(
        [
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            np.nan,
            1.0,
            -3.0,
            float(info.tiny),
            float(info.smallest_subnormal),
            float(info.max),
        ]
    )
    for shape, layout in [
        ((4, 5), "contiguous"),
        ((4, 5), "transposed"),
        ((3, 4), "strided"),
        ((), "contiguous"),
        ((0, 3), "contiguous"),
    ]:
        x = random_array(shape, dtype, rng_for("frexp", dtype, shape, layout), scale=1e4)
        if x.size >= specials.size:
            x.reshape(-1)[: specials.size] = specials.astype(dtype.numpy)
        x = with_layout(x, layout)
        mantissa, exponent = run_prim("frexp", x)
        torch_mantissa, torch_exponent = torch_prim("frexp", x)
        assert_bitwise(mantissa, torch_mantissa, what=f"mantissa of {dtype.short}")
        assert_bitwise(exponent, torch_exponent, what=f"exponent of {dtype.short}")
    assert ours_meta("frexp", T((2, 3), dtype)) == torch_meta("frexp", T((2, 3), dtype))


@pytest.mark.parametrize("dtype", [DType.int32, DType.bool, DType.complex64], ids=str)
def test_frexp_rejects_non_floats(dtype: DType) -> None:
    with pytest.raises(RuntimeError):
        torch_meta("frexp", T((2,), dtype))
    with pytest.raises(DTypeError):
        ours_meta("frexp", T((2,), dtype))


# -- FFT ---------------------------------------------------------------------------------------------------

FFT_SHAPES = [
    ((4, 6), [0, 1]),
    ((4, 6), [1]),
    ((4, 6), [1, 0]),
    ((7,), [0]),
    ((3, 4, 5), [0, 2]),
    ((2, 3, 5), [2]),
]


def _fft_reference(name: str, x: np.ndarray, **kwargs: Any) -> np.ndarray:
    wide = torch.complex128 if np.iscomplexobj(x) else torch.float64
    return to_numpy(getattr(TP, name)(to_torch(x).to(wide), **kwargs))


@pytest.mark.parametrize("dtype", sorted(F32_F64, key=DTYPES.index), ids=str)
@pytest.mark.parametrize("onesided", [True, False])
def test_fft_r2c(dtype: DType, onesided: bool) -> None:
    for (shape, dims), layout in zip(FFT_SHAPES, LAYOUTS * 2):
        x = with_layout(
            random_array(shape, dtype, rng_for("r2c", dtype, shape, dims), special=False), layout
        )
        kwargs = dict(dim=dims, onesided=onesided)
        (ours,) = run_prim("fft_r2c", x, **kwargs)
        assert_close(
            ours,
            torch_prim("fft_r2c", x, **kwargs),
            reference=_fft_reference("fft_r2c", x, **kwargs),
        )
        assert ours_meta("fft_r2c", T(shape, dtype), **kwargs) == torch_meta(
            "fft_r2c", T(shape, dtype), **kwargs
        )


@pytest.mark.parametrize("dtype", sorted(COMPLEX, key=DTYPES.index), ids=str)
@pytest.mark.parametrize("forward", [True, False])
def test_fft_c2c(dtype: DType, forward: bool) -> None:
    for (shape, dims), layout in zip([*FFT_SHAPES, ((2, 3), [])], LAYOUTS * 3):
        x = with_layout(
            random_array(shape, dtype, rng_for("c2c", dtype, shape, dims), special=False), layout
        )
        kwargs = dict(dim=dims, forward=forward)
        (ours,) = run_prim("fft_c2c", x, **kwargs)
        assert_close(
            ours,
            torch_prim("fft_c2c", x, **kwargs),
            reference=_fft_reference("fft_c2c", x, **kwargs),
        )
        assert ours_meta("fft_c2c", T(shape, dtype), **kwargs) == torch_meta(
            "fft_c2c", T(shape, dtype), **kwargs
        )


@pytest.mark.parametrize("dtype", sorted(COMPLEX, key=DTYPES.index), ids=str)
def test_fft_c2r(dtype: DType) -> None:
    for (shape, dims), layout in zip(FFT_SHAPES, LAYOUTS * 2):
        for last_dim_size in {2 * (shape[dims[-1]] - 1), 2 * shape[dims[-1]] - 1}:
            if last_dim_size < 1:
                continue
            x = with_layout(
                random_array(shape, dtype, rng_for("c2r", dtype, shape, dims), special=False),
                layout,
            )
            kwargs = dict(dim=dims, last_dim_size=last_dim_size)
            (ours,) = run_prim("fft_c2r", x, **kwargs)
            assert_close(
                ours,
                torch_prim("fft_c2r", x, **kwargs),
                reference=_fft_reference("fft_c2r", x, **kwargs),
            )
            assert ours_meta("fft_c2r", T(shape, dtype), **kwargs) == torch_meta(
                "fft_c2r", T(shape, dtype), **kwargs
            )


def test_fft_negative_dims_follow_the_meta() -> None:
    # torch's metas canonicalize negative dims (its eager kernels trip an internal assert on them).
    for name, dtype, kwargs in [
        ("fft_c2c", DType.complex64, dict(dim=[-1], forward=True)),
        ("fft_r2c", DType.float64, dict(dim=[-2, -1], onesided=True)),
        ("fft_c2r", DType.complex128, dict(dim=[-1], last_dim_size=10)),
    ]:
        assert ours_meta(name, T((4, 6), dtype), **kwargs) == torch_meta(
            name, T((4, 6), dtype), **kwargs
        )
    x = random_array((4, 6), DType.complex64, rng_for("negative dims"), special=False)
    (ours,) = run_prim("fft_c2c", x, dim=[-1], forward=True)
    assert_close(ours, torch_prim("fft_c2c", x, dim=[1], forward=True))


def test_fft_of_empty_untransformed_dims() -> None:
    # NumPy transforms a (0, 3) tensor along dim 1; torch's MKL backend refuses the configuration.
    (ours,) = run_prim("fft_c2c", np.zeros((0, 3), np.complex64), dim=[1], forward=True)
    assert ours.shape == (0, 3) and ours.dtype == np.complex64


f32, c64 = DType.float32, DType.complex64
FFT_REJECTED: list[tuple[str, Any, dict[str, Any]]] = [
    ("fft_r2c", T((4, 6), DType.float16), dict(dim=[1], onesided=True)),
    ("fft_r2c", T((4, 6), DType.bfloat16), dict(dim=[1], onesided=True)),
    ("fft_r2c", T((4, 6), c64), dict(dim=[1], onesided=True)),
    ("fft_r2c", T((4, 6), DType.int32), dict(dim=[1], onesided=True)),
    ("fft_r2c", T((4, 6), f32), dict(dim=[], onesided=True)),
    ("fft_r2c", T((4, 6), f32), dict(dim=[1, 1], onesided=True)),
    ("fft_c2c", T((4, 6), f32), dict(dim=[1], forward=True)),
    ("fft_c2c", T((4, 6), c64), dict(dim=[1, -1], forward=True)),
    ("fft_c2c", T((4, 6), c64), dict(dim=[2], forward=True)),
    ("fft_c2c", T((0, 3), c64), dict(dim=[0], forward=True)),
    ("fft_c2c", T((), c64), dict(dim=[0], forward=True)),
    ("fft_c2r", T((4, 6), f32), dict(dim=[1], last_dim_size=10)),
    ("fft_c2r", T((4, 6), c64), dict(dim=[1], last_dim_size=20)),
    ("fft_c2r", T((4, 6), c64), dict(dim=[1], last_dim_size=2)),
    ("fft_c2r", T((4, 6), c64), dict(dim=[1], last_dim_size=0)),
]


def _torch_rejects(name: str, meta: Any, kwargs: dict[str, Any]) -> bool:
    """torch rejects the call in its meta or in its CPU kernel."""
    for device in ("meta", "cpu"):
        try:
            getattr(TP, name)(
                torch.ones(meta.shape, dtype=torch_dtype(meta.dtype), device=device), **kwargs
            )
        except (RuntimeError, IndexError, KeyError):
            return True
    return False


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental:UserWarning")
@pytest.mark.parametrize(("name", "meta", "kwargs"), FFT_REJECTED, ids=lambda x: str(x)[:40])
def test_fft_rejected_like_torch(name: str, meta: Any, kwargs: dict[str, Any]) -> None:
    assert _torch_rejects(name, meta, kwargs)
    with pytest.raises((ShapeError, DTypeError)):
        ours_meta(name, meta, **kwargs)


# -- svd ---------------------------------------------------------------------------------------------------

SVD_SHAPES = [(4, 3), (3, 4), (3, 3), (2, 3, 5), (0, 3), (3, 0), (2, 1, 1)]


def _unitary_error(q: np.ndarray, rows: bool) -> float:
    """max |Q^H Q - I| over the orthonormal columns (rows=False) or rows (rows=True) of Q."""
    q = q.astype(np.complex128)
    gram = q @ np.conj(np.swapaxes(q, -1, -2)) if rows else np.conj(np.swapaxes(q, -1, -2)) @ q
    return float(np.max(np.abs(gram - np.eye(gram.shape[-1])), initial=0.0))


@pytest.mark.parametrize("dtype", sorted(F32_F64 | COMPLEX, key=DTYPES.index), ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd(dtype: DType, full_matrices: bool) -> None:
    # Singular vectors are unique only up to sign (phase) and LAPACK drivers choose differently:
    # compare S with torch's, and check U diag(S) Vh = A and the orthonormality of U and Vh.
    tolerance = 1e-4 if dtype in (DType.float32, DType.complex64) else 1e-10
    for shape, layout in zip(SVD_SHAPES, LAYOUTS * 3):
        a = with_layout(
            random_array(shape, dtype, rng_for("svd", dtype, shape), special=False), layout
        )
        u, s, vh = run_prim("svd", a, full_matrices=full_matrices)
        torch_u, torch_s, torch_vh = torch_prim("svd", a, full_matrices=full_matrices)
        for ours, theirs in ((u, torch_u), (s, torch_s), (vh, torch_vh)):
            assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        reference_s = to_numpy(
            TP.svd(
                to_torch(a).to(torch.complex128 if dtype.is_complex else torch.float64),
                full_matrices=False,
            )[1]
        )
        assert_close(s, torch_s, reference=reference_s, what=f"S of {dtype.short}{list(shape)}")
        k = s.shape[-1]
        rebuilt = (u[..., :, :k] * s[..., None, :].astype(u.dtype)) @ vh[..., :k, :]
        scale = max(1.0, float(np.max(np.abs(a), initial=0.0)))
        assert np.max(np.abs(rebuilt - a), initial=0.0) <= tolerance * scale * 10
        assert (
            _unitary_error(u, rows=False) <= tolerance
            and _unitary_error(vh, rows=True) <= tolerance
        )
        assert ours_meta("svd", T(shape, dtype), full_matrices=full_matrices) == torch_meta(
            "svd", T(shape, dtype), full_matrices=full_matrices
        )


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((3,), DType.float32),
        ((3, 3), DType.float16),
        ((3, 3), DType.bfloat16),
        ((3, 3), DType.int64),
    ],
)
def test_svd_rejected_like_torch(shape: tuple[int, ...], dtype: DType) -> None:
    with pytest.raises(RuntimeError):
        torch_meta("svd", T(shape, dtype), full_matrices=False)
    with pytest.raises((ShapeError, DTypeError)):
        ours_meta("svd", T(shape, dtype), full_matrices=False)


# -- the registry covers torch's opset -----------------------------------------------------------------------


def _torch_prim_names() -> list[str]:
    """torch 2.13's own prims: those a fresh interpreter that imports only torch lists.

    Asked in a subprocess because importing ``torch._inductor`` (which other tests may do first,
    e.g. through torch.export) registers eleven inductor-private prims into the same namespace.
    """
    program = (
        "import torch\n"
        "print('\\n'.join(n for n in dir(torch.ops.prims)"
        " if not n.startswith('_') and hasattr(getattr(torch.ops.prims, n), 'default')))"
    )
    listed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    return sorted(listed.split())


def test_every_torch_prim_is_registered() -> None:
    names = _torch_prim_names()
    assert len(names) == 124
    assert names == sorted(TORCH_PRIMS)
    assert sorted(n for n in names if n not in PRIMS) == []
    omitted = {n for n, d in PRIMS.items() if not d.implemented}
    assert omitted >= {"copy_to", "resize", "device_put"}
    assert all(PRIMS[n].omitted_reason for n in omitted)


def test_every_torch_prim_names_its_arguments_as_torch() -> None:
    """to_fx calls torch's prims with our schemas' argument names: they must be torch's (conj's
    operand is `a` there, where every other unary prim's is `self`)."""
    differing = {}
    for name in TORCH_PRIMS:
        theirs = [a.name for a in getattr(torch.ops.prims, name).default._schema.arguments]
        ours = [a.name for a in PRIMS[name].schema.arguments]
        if ours != theirs:
            differing[name] = (ours, theirs)
    assert differing == {}


def test_conj_traces_back_to_torch() -> None:
    """A prims graph holding conj runs in torch through to_fx (it failed on the operand's name)."""
    graph = parse(
        "graph g(%x: c64[3]) -> (c64[3]):\n  %y: c64[3] = prims.conj(%x)\n  return (%y)\n"
    )
    x = torch.randn(3, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    traced = to_fx(graph)(x)
    (result,) = traced if isinstance(traced, (tuple, list)) else (traced,)
    assert torch.equal(result.resolve_conj(), torch.conj_physical(x))


MISC = [
    "item",
    "maximum_value",
    "minimum_value",
    "frexp",
    "fft_r2c",
    "fft_c2c",
    "fft_c2r",
    "svd",
    "copy_to",
    "resize",
    "device_put",
]


@pytest.mark.parametrize("name", MISC)
def test_torch_schemas(name: str) -> None:
    schema = str(getattr(torch.ops.prims, name).default._schema).removeprefix("prims::")
    assert PRIMS[name].schema.text == schema


@pytest.mark.parametrize("name", ["copy_to", "resize", "device_put"])
def test_omitted_prims_cannot_be_built(name: str) -> None:
    args = {
        "copy_to": (T((2,), f32), T((2,), f32)),
        "resize": (T((2,), f32), [3]),
        "device_put": (T((2,), f32), Device("cpu")),
    }[name]
    with pytest.raises(SchemaError, match="not supported"):
        ours_meta(name, *args)


def test_docs_list_every_prim() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "prims.md").read_text()
    missing = [name for name in PRIMS if f"| `{name}` |" not in docs]
    assert missing == [], f"docs/prims.md does not list {missing}"


def test_graphs_of_these_prims_print_parse_verify_and_run() -> None:
    b8, bf16, f16, f64, i8 = DType.bool, DType.bfloat16, DType.float16, DType.float64, DType.int8
    creation = dict(device=CPU, requires_grad=False)
    with Builder("every_prim") as b:
        x = b.add_input("x", TensorMeta((3, 4), f32))
        c = b.add_input("c", TensorMeta((3, 4), c64))
        window = prims.as_strided(x, [2, 2], [4, 1], 1)
        total = prims.sum(x, None)
        iota = prims.iota(4, start=1, step=3, dtype=i8, **creation)
        outputs = [
            window,
            prims.as_strided_scatter(x, window, [2, 2], [4, 1], 0),
            prims.var(x, [0, 1], 1.0),
            prims.var(c, None, None),
            prims.amax(x, None, output_dtype=f64),
            prims.amin(x, [1]),
            prims.prod(x, [0], output_dtype=f64),
            prims.xor_sum(iota, [0]),
            prims.cat([x, x], 0),
            prims.transpose(x, [1, 0]),
            prims.split_dim(x, 1, 2),
            prims.collapse(x, 0, 1),
            prims.collapse_view(x, 0, 1),
            prims.squeeze(x, []),
            prims.view_of(x),
            prims.view_of_dtype(x, f16),
            prims.reshape(x, [12]),
            prims.rev(x, [0]),
            prims.clone(x, memory_format=MemoryFormat.contiguous_format),
            prims.copy_strided(x, [1, 3]),
            prims.full([2], 3.5, dtype=f16, **creation),
            prims.full_like(x, 1, dtype=i8, **creation),
            prims.fill(x, prims.item(total)),
            prims.empty([2], dtype=b8, **creation),
            prims.empty_permuted([2, 3], [1, 0], dtype=b8, **creation),
            prims.empty_strided([2, 3], [1, 2], dtype=b8, **creation),
            prims.normal([3], mean=0.0, std=1.0, dtype=c64, **creation),
            prims.uniform([3], low=0.0, high=1.0, dtype=f32, device=CPU, stride=[1]),
            prims.fft_r2c(x, dim=[0, 1], onesided=True),
            prims.fft_c2c(c, dim=[1], forward=False),
            prims.fft_c2r(c, dim=[0], last_dim_size=4),
            *prims.svd(x, full_matrices=False),
            *prims.frexp(x),
            prims.maximum_value(f16),
            prims.minimum_value(c64),
            prims.scalar_tensor(2.5, dtype=bf16, device=CPU),
        ]
        graph = b.finish(outputs)
    verify(graph)
    parsed = parse(str(graph))
    verify(parsed)
    assert graphs_equal(graph, parsed)
    inputs = {
        "x": np.arange(12, dtype=np.float32).reshape(3, 4),
        "c": np.ones((3, 4), np.complex64),
    }
    assert len(execute(parsed, inputs, check=True, seed=0)) == len(outputs)
