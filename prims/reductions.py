"""Reduction prims: sum, prod, amax, amin, var, xor_sum.

`dims` follows torch's `_reduction_meta`: canonical dims (0 <= d < rank; 0 is also accepted for a
0-dim tensor), the reduced dims are dropped (no keepdim), an empty list reduces nothing. Beyond
torch's meta: `dims=None` reduces every dim (torch's meta crashes on it), and a repeated dim is
rejected (torch's kernels reject it; its meta does not look).

`output_dtype`, when given, is the result dtype: the operand is converted to it first and reduced
in it (torch.sum's `dtype=` semantics), so `sum(int8, output_dtype=int8)` wraps around. Without it
the result keeps the operand's dtype, as torch's meta says (torch's eager kernel would promote
integer sums to int64: the refs convert explicitly before calling the prim, and so do we).
float16/bfloat16 are reduced in float32 and rounded once, as torch's CPU kernels accumulate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import TensorMeta, Value

from .common import ALL, BOOL, COMPLEX, FLOATS, INTS, check_dtype, check_tensor
from .conversion import convert_array
from .registry import register
from .shape import check_dtype_argument, check_indices

ORDERED = BOOL | INTS | FLOATS


def reduction_dims(inp: Value, dims: Sequence[int] | None) -> tuple[int, ...]:
    """The dims a reduction removes from inp's shape."""
    if dims is None:
        return tuple(range(inp.ndim))
    return tuple(d for d in check_indices(dims, inp.ndim) if d < inp.ndim)


def _kernel_axes(ndim: int, dims: Sequence[int] | None) -> tuple[int, ...]:
    if dims is None:
        return tuple(range(ndim))
    return tuple(d for d in dims if d < ndim)


def _reduced_shape(inp: Value, dims: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for i, n in enumerate(inp.shape) if i not in dims)


def _compute_dtype(inp: Value, output_dtype: DType | None) -> DType:
    return inp.dtype if output_dtype is None else check_dtype_argument(output_dtype, "output_dtype")


def _reduction_meta(
    domain: frozenset[DType], *, needs_elements: bool = False
) -> Callable[..., TensorMeta]:
    def meta(inp: Value, dims: Sequence[int] | None, output_dtype: DType | None) -> TensorMeta:
        check_tensor(inp, "inp")
        reduced = reduction_dims(inp, dims)
        dtype = _compute_dtype(inp, output_dtype)
        check_dtype(dtype, domain)
        if needs_elements:
            empty = [d for d in reduced if inp.shape[d] == 0]
            if empty:
                raise ShapeError(
                    f"cannot reduce dimension {empty[0]} of size 0: the reduction has no identity"
                )
        return TensorMeta(_reduced_shape(inp, reduced), dtype)

    return meta


def _in_opmath(
    fn: Callable[[np.ndarray, tuple[int, ...], Any], Any],
) -> Callable[[np.ndarray, tuple[int, ...]], Any]:
    """Reduce float16/bfloat16 in float32; everything else in its own dtype (integers wrap). The
    reduction converts as it goes (`dtype=`), so a strided view such as a pooling window is
    never materialized in float32."""

    def reduce(a: np.ndarray, axes: tuple[int, ...]) -> Any:
        if DType.from_numpy(a.dtype).is_low_precision:
            return fn(a, axes, np.float32)
        return fn(a, axes, a.dtype)

    return reduce


def _reduction_kernel(
    reduce: Callable[[np.ndarray, tuple[int, ...]], Any],
) -> Callable[..., np.ndarray]:
    def kernel(
        inp: np.ndarray, dims: Sequence[int] | None, output_dtype: DType | None
    ) -> np.ndarray:
        if output_dtype is not None and inp.dtype != output_dtype.numpy:
            inp = convert_array(inp, output_dtype)
        with np.errstate(all="ignore"):
            result = reduce(inp, _kernel_axes(inp.ndim, dims))
        return np.asarray(result).astype(inp.dtype, copy=False)

    return kernel


def reduction(
    name: str, domain: frozenset[DType], reduce: Callable[..., Any], doc: str, **meta_options: Any
) -> None:
    register(
        f"{name}(Tensor inp, int[]? dims, *, ScalarType? output_dtype=None) -> Tensor",
        meta=_reduction_meta(domain, **meta_options),
        kernel=_reduction_kernel(reduce),
        reduces=True,
        doc=doc,
    )


def _sum(a: np.ndarray, axes: tuple[int, ...], dtype: Any) -> Any:
    return np.sum(a, axis=axes, dtype=dtype)  # bool: logical or; integers wrap around


def _prod(a: np.ndarray, axes: tuple[int, ...], dtype: Any) -> Any:
    return np.prod(a, axis=axes, dtype=dtype)  # bool: logical and; integers wrap around


def _amax(a: np.ndarray, axes: tuple[int, ...]) -> Any:
    return np.amax(a, axis=axes)  # propagates NaN


def _amin(a: np.ndarray, axes: tuple[int, ...]) -> Any:
    return np.amin(a, axis=axes)


def _xor_sum(a: np.ndarray, axes: tuple[int, ...]) -> Any:
    return np.bitwise_xor.reduce(a, axis=axes)


reduction("sum", ALL, _in_opmath(_sum), "sum over dims (of nothing: 0)")
reduction("prod", ALL, _in_opmath(_prod), "product over dims (of nothing: 1)")
reduction(
    "amax",
    ORDERED,
    _amax,
    "maximum over dims; NaN wins; an empty reduction is an error",
    needs_elements=True,
)
reduction(
    "amin",
    ORDERED,
    _amin,
    "minimum over dims; NaN wins; an empty reduction is an error",
    needs_elements=True,
)
reduction(
    "xor_sum",
    BOOL | INTS,
    _xor_sum,
    "bitwise xor over dims (of nothing: 0); torch implements it only in inductor",
)


# -- var -------------------------------------------------------------------------------------------


def _var_meta(
    inp: Value, dims: Sequence[int] | None, correction: float | None, output_dtype: DType | None
) -> TensorMeta:
    check_tensor(inp, "inp")
    reduced = reduction_dims(inp, dims)
    check_dtype(inp.dtype, FLOATS | COMPLEX)
    if output_dtype is not None:
        raise DTypeError(
            f"output_dtype must be None (the result is inp's real dtype), got {output_dtype!r}"
        )
    if correction is not None and type(correction) not in (int, float, Value):
        raise DTypeError(f"correction must be a float, got {correction!r}")
    return TensorMeta(_reduced_shape(inp, reduced), inp.dtype.real)


def _var_kernel(
    inp: np.ndarray,
    dims: Sequence[int] | None,
    correction: float | None,
    output_dtype: DType | None,
) -> np.ndarray:
    dtype = DType.from_numpy(inp.dtype)
    a = inp.astype(np.float32) if dtype.is_low_precision else inp
    axes = _kernel_axes(a.ndim, dims)
    count = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    divisor = max(count - (1.0 if correction is None else correction), 0.0)
    with np.errstate(all="ignore"):
        mean = np.sum(a, axis=axes, keepdims=True) / np.asarray(
            count, a.dtype
        )  # 0/0 = NaN when empty
        deviation = a - mean
        squares = (
            deviation.real**2 + deviation.imag**2 if dtype.is_complex else deviation * deviation
        )
        result = np.sum(squares, axis=axes) / np.asarray(divisor, squares.dtype)
    return np.asarray(result).astype(dtype.real.numpy, copy=False)


register(
    "var(Tensor inp, int[]? dims, float? correction=1, *, ScalarType? output_dtype=None) -> Tensor",
    meta=_var_meta,
    kernel=_var_kernel,
    doc="sum of squared deviations over dims divided by max(N - correction, 0); complex inputs give "
    "a real result; output_dtype must be None (torch's meta rejects it)",
)
