"""Reduction prims (prims/reductions.py) against torch.ops.prims: every accepted dtype, several
layouts, special values, empty and 0-dim inputs, integer wrap-around, meta rules and rejections.

torch's eager prims disagree with their own metas in three places, and the metas are the
specification: (1) integer/bool sum and prod return int64 eagerly but the input dtype in the meta
— we compare torch's eager value cast to the meta dtype (wrap-around is modular, so this is exact);
(2) `dims=[]` reduces everything eagerly but nothing in the meta — the oracle reduces an added
size-1 dim instead; (3) passing `output_dtype` crashes the eager kernels — the oracle converts the
operand first, which is torch.sum's `dtype=` semantics (checked against torch.sum too).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import torch
from prims_testing import (
    LAYOUTS,
    TP,
    assert_close,
    ours_meta,
    random_array,
    rng_for,
    run_prim,
    symbolic,
    torch_meta,
    with_layout,
)

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.frontends.torch_interop import to_numpy, to_torch, torch_dtype
from aten2prims.ir.dtypes import DType
from prims.common import ALL, BOOL, COMPLEX, FLOATS, INTS
from prims.registry import PRIMS

T = symbolic
pytestmark = pytest.mark.filterwarnings("ignore:var... degrees of freedom is <= 0:UserWarning")
DOMAINS = {
    "sum": ALL,
    "prod": ALL,
    "amax": BOOL | INTS | FLOATS,
    "amin": BOOL | INTS | FLOATS,
    "var": FLOATS | COMPLEX,
    "xor_sum": BOOL | INTS,
}
SHAPES_AND_DIMS: list[tuple[tuple[int, ...], list[int] | None]] = [
    ((3, 4, 5), [0]),
    ((3, 4, 5), [1, 2]),
    ((3, 4, 5), [2, 0]),
    ((3, 4, 5), [0, 1, 2]),
    ((3, 4, 5), []),
    ((3, 4, 5), None),
    ((70,), [0]),
    ((), [0]),
    ((), []),
    ((2, 0), [0]),
    ((0, 4), [0]),  # an empty reduction: sum 0, prod 1, var NaN, amax/amin rejected
]


def _is_empty_extremum(name: str, shape: tuple[int, ...], dims: list[int] | None) -> bool:
    """amax/amin over a size-0 dim: rejected (test_empty_amax_amin_rejected), so no value to compare."""
    reduced = range(len(shape)) if dims is None else [d for d in dims if d < len(shape)]
    return name in ("amax", "amin") and any(shape[d] == 0 for d in reduced)


def _cases() -> list[Any]:
    return [
        pytest.param(
            name,
            dtype,
            shape,
            dims,
            id=f"{name}-{dtype.short}-{list(shape)}-{dims}".replace(" ", ""),
        )
        for name, domain in DOMAINS.items()
        for dtype in DType
        if dtype in domain
        for shape, dims in SHAPES_AND_DIMS
        if not _is_empty_extremum(name, shape, dims)
    ]


def _xor_fold(t: torch.Tensor, dims: list[int]) -> torch.Tensor:
    for d in sorted((d for d in dims if d < t.ndim), reverse=True):
        zero = torch.zeros(t.shape[:d] + t.shape[d + 1 :], dtype=t.dtype)
        t = functools.reduce(torch.bitwise_xor, t.unbind(d), zero)
    return t


def torch_reduction(
    name: str, t: torch.Tensor, dims: list[int] | None, correction: float = 1.0
) -> torch.Tensor:
    """torch's value of the prim as its meta specifies it (see the module docstring)."""
    result_dtype = t.dtype
    if dims is None:
        dims = list(range(t.ndim))
    elif dims == []:
        t = t.unsqueeze(-1)
        dims = [t.ndim - 1]
    if name == "xor_sum":
        return _xor_fold(t, dims)
    if name == "var":
        return TP.var(t, dims, correction)
    result = getattr(TP, name)(t, dims)
    return result.to(result_dtype)


@pytest.mark.parametrize(("name", "dtype", "shape", "dims"), _cases())
def test_against_torch(
    name: str, dtype: DType, shape: tuple[int, ...], dims: list[int] | None
) -> None:
    # Non-finite complex products depend on torch's evaluation order: see test_complex_prod_of_infinities.
    special = not (name == "prod" and dtype.is_complex)
    for layout in LAYOUTS:
        rng = rng_for(name, dtype, shape, dims, layout)
        x = with_layout(random_array(shape, dtype, rng, special=special), layout)
        extra = (1.0,) if name == "var" else ()
        (ours,) = run_prim(name, x, dims, *extra)
        expected = to_numpy(torch_reduction(name, to_torch(x), dims))
        reference = None
        if dtype.is_floating or dtype.is_complex:
            wide = torch.complex128 if dtype.is_complex else torch.float64
            reference = to_numpy(torch_reduction(name, to_torch(x).to(wide), dims))
        assert_close(
            ours,
            expected,
            reference=reference,
            what=f"prims.{name} of {layout} {dtype.short}{list(shape)}",
        )


@pytest.mark.xfail(
    strict=True,
    reason="torch's vectorized complex prod along an outer dim gives nan+nanj where its own "
    "element-by-element product (torch.prod of the same column) and NumPy give inf+infj",
)
def test_complex_prod_of_infinities() -> None:
    column = np.array(
        [-0.60107315 + 2.9269292j, 0.15340696 + 0.8314259j, -np.inf - 0.19513503j], np.complex64
    )
    x = np.ascontiguousarray(np.broadcast_to(column[:, None], (3, 8)))
    assert to_numpy(torch.prod(to_torch(column))) == np.complex64(
        np.inf + np.inf * 1j
    )  # torch, one column
    (ours,) = run_prim("prod", x, [0])
    assert_close(ours, to_numpy(TP.prod(to_torch(x), [0])))


@pytest.mark.parametrize("correction", [0.0, 1.0, 2.5, 4.0, 7.0, None])
@pytest.mark.parametrize("dtype", sorted(FLOATS | COMPLEX, key=list(DType).index), ids=str)
def test_var_corrections(dtype: DType, correction: float | None) -> None:
    # N - correction <= 0 divides by zero (inf, or NaN for a zero sum), as torch does.
    x = random_array((3, 4), dtype, rng_for("var", dtype, correction), special=False)
    (ours,) = run_prim("var", x, [1], correction)
    t = to_torch(x)
    expected = to_numpy(TP.var(t, [1], 1.0 if correction is None else correction))
    wide = torch.complex128 if dtype.is_complex else torch.float64
    reference = to_numpy(TP.var(t.to(wide), [1], 1.0 if correction is None else correction))
    assert_close(ours, expected, reference=reference)


OUTPUT_DTYPES = [
    ("sum", DType.int8, DType.int8),
    ("sum", DType.int32, DType.int64),
    ("sum", DType.bool, DType.bool),
    ("sum", DType.bool, DType.int32),
    ("sum", DType.float16, DType.float32),
    ("sum", DType.float32, DType.float64),
    ("sum", DType.float32, DType.int32),
    ("sum", DType.int64, DType.float32),
    ("sum", DType.bfloat16, DType.complex64),
    ("prod", DType.int16, DType.int16),
    ("prod", DType.uint8, DType.int64),
    ("prod", DType.bool, DType.bool),
    ("prod", DType.float32, DType.float64),
    ("amax", DType.int32, DType.float32),
    ("amax", DType.float64, DType.float16),
    ("amin", DType.float16, DType.float32),
    ("amin", DType.uint8, DType.int8),
    ("xor_sum", DType.int32, DType.int8),
]


@pytest.mark.parametrize(("name", "source", "target"), OUTPUT_DTYPES, ids=lambda x: str(x))
def test_output_dtype(name: str, source: DType, target: DType) -> None:
    x = random_array((4, 6), source, rng_for(name, source, target), special=False, scale=100.0)
    (ours,) = run_prim(name, x, [1], output_dtype=target)
    meta = T((4, 6), source)
    assert ours_meta(name, meta, [1], output_dtype=target) == torch_meta(
        name, meta, [1], output_dtype=target
    )
    converted = to_torch(x).to(torch_dtype(target))
    assert_close(ours, to_numpy(torch_reduction(name, converted, [1])))
    if name in ("sum", "prod"):  # the same as torch.sum/prod's `dtype=`
        eager = getattr(torch, name)(to_torch(x), 1, dtype=torch_dtype(target))
        assert_close(ours, to_numpy(eager))


def test_integer_sums_wrap_around() -> None:
    x = np.array([100, 100, 100], np.int8)
    (ours,) = run_prim("sum", x, [0], output_dtype=DType.int8)
    assert ours.dtype == np.int8 and ours == 44
    assert ours == to_numpy(torch.sum(to_torch(x), 0, dtype=torch.int8))
    (product,) = run_prim("prod", np.array([16, 16, 3], np.uint8), [0])
    assert product == 0


def test_empty_reductions() -> None:
    empty = np.zeros((0, 3), np.float32)
    assert (run_prim("sum", empty, [0])[0] == 0).all()
    assert (run_prim("prod", empty, [0])[0] == 1).all()
    assert np.isnan(run_prim("var", empty, [0], 1.0)[0]).all()
    assert (run_prim("xor_sum", np.zeros((0, 3), np.int16), [0])[0] == 0).all()


@pytest.mark.parametrize("name", ["amax", "amin"])
def test_empty_amax_amin_rejected(name: str) -> None:
    with pytest.raises(IndexError):
        getattr(TP, name)(torch.zeros(0, 3), [0])
    with pytest.raises(ShapeError):
        ours_meta(name, T((0, 3), DType.float32), [0])
    # reducing a non-empty dim of an empty tensor is fine
    assert ours_meta(name, T((0, 3), DType.float32), [1]) == torch_meta(
        name, T((0, 3), DType.float32), [1]
    )


def test_nan_propagates_through_amax_amin() -> None:
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, 2.0, np.inf]], np.float32)
    for name in ("amax", "amin"):
        (ours,) = run_prim(name, x, [1])
        assert_close(ours, to_numpy(getattr(TP, name)(to_torch(x), [1])))
        assert np.isnan(ours[0]) and not np.isnan(ours[1])


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_meta_matches_torch(name: str) -> None:
    for dtype in DType:
        if dtype not in DOMAINS[name]:
            continue
        for shape, dims in SHAPES_AND_DIMS:
            if dims is None:
                continue  # torch's meta cannot take None (ours: every dim)
            args: tuple[Any, ...] = (T(shape, dtype), dims) + ((1.0,) if name == "var" else ())
            if _is_empty_extremum(name, shape, dims):
                continue
            assert ours_meta(name, *args) == torch_meta(name, *args), (name, dtype, shape, dims)


def test_dims_none_reduces_everything() -> None:
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert run_prim("sum", x, None)[0] == 15
    assert ours_meta("amax", T((2, 3), DType.float32), None) == torch_meta(
        "amax", T((2, 3), DType.float32), [0, 1]
    )


f32 = DType.float32
REJECTED_BY_TORCH_META = [
    ("sum", (T((2, 3), f32), [-1]), {}),
    ("sum", (T((2, 3), f32), [2]), {}),
    ("prod", (T((2, 3), f32), [0, 3]), {}),
    ("amax", (T((2, 3), f32), [-2]), {}),
    ("var", (T((2, 3), f32), [1], 1.0), dict(output_dtype=DType.float64)),
    ("var", (T((2, 3), f32), [5], 1.0), {}),
]


@pytest.mark.parametrize(
    ("name", "args", "kwargs"), REJECTED_BY_TORCH_META, ids=lambda x: str(x)[:50]
)
def test_rejected_like_torch_meta(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    with pytest.raises(Exception):  # noqa: B017 - torch raises assorted exception types
        torch_meta(name, *args, **kwargs)
    with pytest.raises((ShapeError, DTypeError)):
        ours_meta(name, *args, **kwargs)


# Accepted by torch's metas, rejected by its CPU kernels: rejected by ours at build time.
REJECTED_BY_TORCH_KERNEL = [
    ("sum", np.zeros((2, 3), np.float32), [1, 1]),
    ("amax", np.zeros((2, 3), np.complex64), [1]),
    ("amin", np.zeros((2, 3), np.complex128), [1]),
    ("var", np.zeros((2, 3), np.int32), [1]),
    ("var", np.zeros((2, 3), np.bool_), [1]),
]


@pytest.mark.parametrize(("name", "x", "dims"), REJECTED_BY_TORCH_KERNEL, ids=lambda x: str(x)[:30])
def test_rejected_like_torch_kernels(name: str, x: np.ndarray, dims: list[int]) -> None:
    extra = (1.0,) if name == "var" else ()
    with pytest.raises((RuntimeError, NotImplementedError)):
        getattr(TP, name)(to_torch(x), dims, *extra)
    with pytest.raises((ShapeError, DTypeError)):
        run_prim(name, x, dims, *extra)


def test_xor_sum_has_no_eager_torch_kernel() -> None:
    # torch implements xor_sum only in inductor; the oracle above folds torch.bitwise_xor.
    with pytest.raises(NotImplementedError):
        TP.xor_sum(torch.zeros(2, dtype=torch.int32), [0])
    with pytest.raises(DTypeError):
        ours_meta("xor_sum", T((2,), f32), [0])


def test_torch_schemas() -> None:
    for name in DOMAINS:
        schema = str(getattr(torch.ops.prims, name).default._schema).removeprefix("prims::")
        assert PRIMS[name].schema.text == schema
