"""Shared pieces of meta rules and kernels: dtype domains, operand checks, dimension handling and
the float16/bfloat16 "compute in float32" convention."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.layout import elementwise_strides
from aten2prims.ir.symbolic import SymBool, SymExpr, SymFloat, number_kind
from aten2prims.ir.values import TensorMeta, Value, is_tensor

# dtype domains (what a prim accepts on CPU, as probed against torch 2.13 eager)
BOOL = frozenset({DType.bool})
INTS = frozenset({DType.uint8, DType.int8, DType.int16, DType.int32, DType.int64})
FLOATS = frozenset({DType.float16, DType.bfloat16, DType.float32, DType.float64})
F32_F64 = frozenset({DType.float32, DType.float64})
COMPLEX = frozenset({DType.complex64, DType.complex128})
ALL = BOOL | INTS | FLOATS | COMPLEX

# A symbolic size is an int operand, a condition on sizes a bool one.
_NUMBER_TYPES = (bool, int, float, complex, SymExpr, SymBool, SymFloat)


def is_number(x: Any) -> bool:
    return type(x) in _NUMBER_TYPES


def domain_names(domain: frozenset[DType]) -> str:
    return " ".join(d.short for d in DType if d in domain)


def check_dtype(dtype: DType, domain: frozenset[DType], what: str = "tensor") -> None:
    if dtype not in domain:
        raise DTypeError(
            f"{what} of dtype {dtype.short} is not supported; expected one of {domain_names(domain)}"
        )


def check_tensor(x: Any, name: str) -> Value:
    if not is_tensor(x):
        raise DTypeError(f"{name} must be a tensor, got {x!r}")
    return x


def canonical_dim(dim: int, ndim: int) -> int:
    """Wrap a possibly negative dim into [0, ndim) (0-dim tensors accept -1 and 0)."""
    bound = max(ndim, 1)
    if not -bound <= dim < bound:
        raise ShapeError(
            f"dimension {dim} is out of range for a tensor of rank {ndim} "
            f"(expected [{-bound}, {bound - 1}])"
        )
    return dim + bound if dim < 0 else dim


def canonical_dims(dims: Sequence[int], ndim: int) -> tuple[int, ...]:
    result = tuple(canonical_dim(d, ndim) for d in dims)
    if len(set(result)) != len(result):
        raise ShapeError(f"dimensions {tuple(dims)} repeat a dimension")
    return result


def elementwise_operands(args: Sequence[Any]) -> tuple[tuple[int, ...], DType]:
    """Shape and dtype of elementwise operands, as torch's prims check them: every tensor has the
    same dtype; every tensor has the same shape, except that 0-dim tensors (CPU scalar tensors)
    may join tensors of any shape; Python numbers are scalar operands whose kind may not exceed
    the tensors' category (a float with an integer tensor must be converted first)."""
    tensors = [a for a in args if is_tensor(a)]
    for a in args:
        if not is_tensor(a) and not is_number(a):
            raise DTypeError(f"operands must be tensors or Python numbers, got {a!r}")
    if not tensors:
        raise DTypeError("needs at least one tensor operand")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not dtype:
            raise DTypeError(f"operands have different dtypes: {dtype.short} and {t.dtype.short}")
    shape: tuple[int, ...] | None = None
    for t in tensors:
        if t.ndim == 0:
            continue
        if shape is None:
            shape = t.shape
        elif t.shape != shape:
            raise ShapeError(f"operands have different shapes: {list(shape)} and {list(t.shape)}")
    for a in args:
        if is_number(a) and DType.from_python_type(number_kind(a)).category > dtype.category:
            raise DTypeError(
                f"a Python {type(a).__name__} operand cannot join a {dtype.short} tensor; convert it first"
            )
    return (shape if shape is not None else ()), dtype


def elementwise_result(shape: tuple[int, ...], dtype: DType, operands: Sequence[Any]) -> TensorMeta:
    """The meta of an elementwise result: its strides follow the tensor operands of rank > 0 as
    torch's `_prim_elementwise_meta` orders them (contiguous when all are), offset 0."""
    layouts = [a.strides for a in operands if is_tensor(a) and a.ndim > 0]
    return TensorMeta(shape, dtype, elementwise_strides(shape, layouts))


def number_as(x: bool | int | float | complex, dtype: DType) -> np.ndarray:
    """A Python number as a 0-dim array of `dtype`; integers wrap around as torch's casts do."""
    if dtype.is_integral and type(x) is int:
        info = np.iinfo(np.int64)
        if info.min <= x <= info.max:
            return np.asarray(x, dtype=np.int64).astype(dtype.numpy)
    return np.asarray(x).astype(dtype.numpy)


def opmath_call(fn: Callable[..., Any], arrays: Sequence[Any], dtype: DType) -> Any:
    """Call fn on the operands, computing float16/bfloat16 in float32 and rounding back, as
    torch's CPU kernels do."""
    if dtype.is_low_precision:
        upcast = [
            a.astype(np.float32) if isinstance(a, np.ndarray | np.generic) else a for a in arrays
        ]
        return np.asarray(fn(*upcast)).astype(dtype.numpy)
    return fn(*arrays)
