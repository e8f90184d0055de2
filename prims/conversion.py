"""`convert_element_type` and `broadcast_in_dim`: the two prims through which every type
promotion and every broadcast is made explicit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.layout import is_non_overlapping_and_dense, single_operand_strides
from aten2prims.ir.symbolic import is_literal_one, is_size, remembered, same_size
from aten2prims.ir.values import TensorMeta, Value

from .common import check_tensor
from .registry import register


def _convert_meta(a: Value, dtype: DType) -> TensorMeta:
    check_tensor(a, "a")
    if type(dtype) is not DType:
        raise DTypeError(f"dtype must be a dtype, got {dtype!r}")
    # A conversion keeps dense strides (torch's meta); others become elementwise output strides.
    if is_non_overlapping_and_dense(a.shape, a.strides):
        return TensorMeta(a.shape, dtype, a.strides)
    return TensorMeta(a.shape, dtype, single_operand_strides(a.shape, a.strides))


# Integer width through which torch's CPU casts a float to each integer dtype: int8/int16 go
# through int32 and uint8 through int64, keeping the low bits (300.0 -> uint8 44).
_FLOAT_TO_INT_WIDTH: dict[DType, np.dtype[Any]] = {
    DType.uint8: np.dtype(np.int64),
    DType.int8: np.dtype(np.int32),
    DType.int16: np.dtype(np.int32),
    DType.int32: np.dtype(np.int32),
    DType.int64: np.dtype(np.int64),
}


_EXACT_BOUNDS = (np.dtype(np.float32), np.dtype(np.float64))


def float_to_integer(a: np.ndarray, dtype: DType) -> np.ndarray:
    """A float array cast to an integer dtype as x86-64's truncating conversions (cvtt*) do:
    toward zero, with NaN, ±inf and values outside the intermediate width becoming that width's
    minimum ("integer indefinite"), then narrowed by keeping the low bits. NumPy's own cast of
    those values is undefined behaviour (its result differs between CPUs and code paths), so
    they never reach it."""
    wide = _FLOAT_TO_INT_WIDTH[dtype]
    bits = 8 * wide.itemsize
    if wide == dtype.numpy and a.dtype in _EXACT_BOUNDS:
        # The bounds ±2^(bits-1) are float32 and float64 values, and a value passes them
        # exactly when its truncation does: the common case, every value in range, is NumPy's
        # own cast (truncating toward zero), defined for such values, without float64 copies.
        low, high = a.dtype.type(-(2.0 ** (bits - 1))), a.dtype.type(2.0 ** (bits - 1))
        if ((a >= low) & (a < high)).all():
            return a.astype(wide)
    # float64 holds every float16/bfloat16/float32 value exactly, so the bounds test is exact.
    x = np.trunc(a.astype(np.float64))
    valid = (x >= -(2.0 ** (bits - 1))) & (x < 2.0 ** (bits - 1))
    result = np.where(valid, x, 0.0).astype(wide)
    result[~valid] = np.iinfo(wide).min
    return result.astype(dtype.numpy)


def convert_array(a: np.ndarray, dtype: DType) -> np.ndarray:
    """Cast as torch's CPU casts do: complex to real keeps the real part; anything to
    float16/bfloat16 goes through float32 (torch rounds twice, NumPy's direct casts once);
    float to integer as `float_to_integer` (defined for every value, NaN and ±inf included)."""
    source = a.dtype
    if source == dtype.numpy:
        return a.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        if source.kind == "c" and dtype.is_bool:
            return a != 0
        if source.kind == "c" and not dtype.is_complex:
            a = a.real
        if dtype.is_low_precision and source not in (np.float32, np.dtype(np.bool_)):
            return a.astype(np.float32).astype(dtype.numpy)
        if dtype.is_integer and a.dtype.kind in "fV":
            return float_to_integer(a, dtype)
        return a.astype(dtype.numpy)


def _convert_kernel(a: np.ndarray, dtype: DType) -> np.ndarray:
    return convert_array(a, dtype)


register(
    "convert_element_type(Tensor a, ScalarType dtype) -> Tensor",
    meta=_convert_meta,
    kernel=_convert_kernel,
    doc=(
        "torch's CPU casts: complex to real keeps the real part, to bool tests != 0; to f16/bf16 "
        "through f32; float to integer truncates, NaN/±inf/out-of-range give the x86-64 'integer indefinite' "
        "(u8 through int64, i8/i16 through int32, keeping the low bits)"
    ),
)


def _broadcast_in_dim_meta(
    a: Value, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> TensorMeta:
    check_tensor(a, "a")
    shape = tuple(shape)
    if len(broadcast_dimensions) != a.ndim:
        raise ShapeError(
            f"broadcast_dimensions {list(broadcast_dimensions)} must name one output dimension per input "
            f"dimension ({a.ndim})"
        )
    if len(shape) < a.ndim:
        raise ShapeError(f"cannot broadcast rank {a.ndim} to the lower rank {len(shape)}")
    previous = -1
    for input_dim, output_dim in enumerate(broadcast_dimensions):
        if output_dim <= previous:
            raise ShapeError(
                f"broadcast_dimensions {list(broadcast_dimensions)} must be strictly ascending"
            )
        if output_dim >= len(shape):
            raise ShapeError(
                f"broadcast dimension {output_dim} is out of range for shape {list(shape)}"
            )
        previous = output_dim
        size = a.shape[input_dim]
        # Known-equal sizes and a literal 1 first: a symbolic size is not guessed to be 1.
        target = shape[output_dim]
        if same_size(size, target) or is_literal_one(size):
            continue
        if size != target and size != 1:
            raise ShapeError(
                f"size {size} of dimension {input_dim} cannot broadcast to {shape[output_dim]}"
            )
    for size in shape:
        if not is_size(size):
            raise ShapeError(f"shape {list(shape)} must hold non-negative ints")
    return TensorMeta(
        shape,
        a.dtype,
        _broadcast_strides(a.shape, a.strides, shape, tuple(broadcast_dimensions)),
        a.storage_offset,
    )


@remembered
def _broadcast_strides(
    sizes: tuple[int, ...],
    strides: tuple[int, ...],
    shape: tuple[int, ...],
    broadcast_dimensions: tuple[int, ...],
) -> tuple[int, ...]:
    """torch's `_broadcast_in_dim_meta` for an operand of these sizes and strides: a kept dim
    keeps its stride, a broadcast one gets 0, a new dim of length 1 the stride it would have
    had."""
    result: list[int] = []
    source = 0
    for index, size in enumerate(shape):
        if index in broadcast_dimensions:
            if sizes[source] == 1 and size != 1:
                result.append(0)
            else:
                result.append(strides[source])
            source += 1
        elif size != 1:
            result.append(0)
        elif source == len(sizes):
            result.append(1)
        else:
            result.append(strides[source] * sizes[source])
    return tuple(result)


def _broadcast_in_dim_kernel(
    a: np.ndarray, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> np.ndarray:
    expanded = [1] * len(shape)
    for input_dim, output_dim in enumerate(broadcast_dimensions):
        expanded[output_dim] = a.shape[input_dim]
    return np.broadcast_to(a.reshape(expanded), tuple(shape))


register(
    "broadcast_in_dim(Tensor(a) a, SymInt[] shape, int[] broadcast_dimensions) -> Tensor(a)",
    meta=_broadcast_in_dim_meta,
    kernel=_broadcast_in_dim_kernel,
    element_view=True,
    view=True,
    doc="input dim i becomes output dim broadcast_dimensions[i]; other output dims are new",
)
