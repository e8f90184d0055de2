"""Creation prims: empty, empty_permuted, empty_strided, full, full_like, fill, scalar_tensor, iota,
and the random normal and uniform.

`empty*` tensors are zeros (deterministic; their values mean nothing). Layout arguments (strides,
physical layouts) are checked as torch checks them and otherwise have no meaning in a stride-free
graph. `device` and `requires_grad` are kept as attributes for fidelity and ignored.

Fill values are converted as torch's CPU fill converts a Scalar, including its overflow check
(c10's `overflows`): a value the dtype cannot hold is an error, not a wrap-around — except that
an integer may wrap into an unsigned dtype from down to -max (so -1 fills uint8 with 255), and
float16/bfloat16 results of exactly one element take the unchecked path (out-of-range values
round to ±inf), as torch's single-element fill does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.layout import permuted_strides, single_operand_strides
from aten2prims.ir.symbolic import SymExpr, is_size, is_symbolic, lenient_decisions
from aten2prims.ir.values import Device, ScalarMeta, TensorMeta, Value

from .common import (
    COMPLEX,
    FLOATS,
    INTS,
    check_dtype,
    check_tensor,
    elementwise_result,
    is_number,
)
from .conversion import convert_array
from .misc import dtype_limits
from .registry import register
from .shape import check_dtype_argument, check_shape, check_strides

# A torch Scalar holds Python ints from int64's minimum up to uint64's maximum.
_SCALAR_INTS = (int(np.iinfo(np.int64).min), int(np.iinfo(np.uint64).max))


# -- converting a fill value -----------------------------------------------------------------------


def _overflows(value: bool | int | float | complex, dtype: DType) -> bool:
    """torch's `c10::overflows<dtype>(value)` for a Python scalar."""
    if dtype.is_bool or type(value) is bool:
        return False
    if isinstance(value, complex):
        if not dtype.is_complex and value.imag != 0:
            return True
        return _overflows(value.real, dtype) or (dtype.is_complex and _overflows(value.imag, dtype))
    low, high = dtype_limits(dtype)
    if type(value) is int:
        if not dtype.is_signed and value < 0:
            return -value > high  # two's-complement wrap into unsigned is allowed
        return not low <= value <= high
    if math.isinf(value):
        return not dtype.is_floating and not dtype.is_complex
    if math.isnan(value):
        return dtype.is_integer
    return not low <= value <= high


def scalar_array(value: Any, dtype: DType, *, numel: int = 2) -> np.ndarray:
    """A Python scalar as a 0-dim array of dtype, converted and checked as torch's fill does for a
    result of `numel` elements. Raises DTypeError where torch reports an overflow."""
    if not is_number(value):
        raise DTypeError(f"fill value must be a Python bool, int, float or complex, got {value!r}")
    if type(value) is int and not _SCALAR_INTS[0] <= value <= _SCALAR_INTS[1]:
        raise DTypeError(f"the integer {value} does not fit a 64-bit Scalar")
    if (
        dtype.is_low_precision and numel == 1
    ):  # torch's single-element path checks only the imaginary part (dtype first: numel may be symbolic)
        overflows = type(value) is complex and value.imag != 0
    else:
        overflows = _overflows(value, dtype)
    if overflows:
        raise DTypeError(f"value {value!r} cannot be converted to {dtype.short} without overflow")
    if dtype.is_bool:
        return np.asarray(value != 0)
    if dtype.is_integer:
        whole = value.real if type(value) is complex else value
        return np.asarray(math.trunc(whole), np.int64).astype(
            dtype.numpy
        )  # in range, or wrapping into unsigned
    wide = np.asarray(value, np.complex128 if type(value) is complex else np.float64)
    with np.errstate(over="ignore"):
        return convert_array(wide, dtype)


def _check_fill_value(value: Any, dtype: DType, numel: int, what: str) -> None:
    """Check a literal fill value at build time; a run-time scalar is checked by the kernel."""
    if type(value) is Value:
        if type(value.meta) is not ScalarMeta:
            raise DTypeError(f"{what} must be a scalar, got the tensor {value!r}")
        return
    if is_symbolic(value):  # a symbolic size: its value is known once the symbols are bound
        return
    scalar_array(value, dtype, numel=numel)


def _filled(
    shape: Sequence[int], value: Any, dtype: DType, out: np.ndarray | None = None
) -> np.ndarray:
    fill = scalar_array(value, dtype, numel=math.prod(shape))
    if out is None:
        return np.full(tuple(shape), fill, dtype.numpy)
    out[...] = fill
    return out


# -- empty, empty_permuted, empty_strided ---------------------------------------------------------------


def _empty_meta(
    shape: Sequence[int], dtype: DType, device: Device, requires_grad: bool
) -> TensorMeta:
    return TensorMeta(check_shape(shape), check_dtype_argument(dtype))


def _empty_kernel(
    shape: Sequence[int], dtype: DType, device: Device, requires_grad: bool
) -> np.ndarray:
    return np.zeros(tuple(shape), dtype.numpy)


register(
    "empty(SymInt[] shape, *, ScalarType dtype, Device device, bool requires_grad) -> Tensor",
    meta=_empty_meta,
    kernel=_empty_kernel,
    doc="a tensor of unspecified values (zeros here)",
)


def _empty_permuted_meta(
    shape: Sequence[int],
    physical_layout: Sequence[int],
    dtype: DType,
    device: Device,
    requires_grad: bool,
) -> TensorMeta:
    shape = check_shape(shape)
    if not isinstance(physical_layout, tuple | list) or sorted(physical_layout) != list(
        range(len(shape))
    ):
        raise ShapeError(
            f"physical_layout {physical_layout!r} is not a permutation of the {len(shape)} dimension(s)"
        )
    return TensorMeta(
        shape, check_dtype_argument(dtype), permuted_strides(shape, tuple(physical_layout))
    )


def _empty_permuted_kernel(
    shape: Sequence[int],
    physical_layout: Sequence[int],
    dtype: DType,
    device: Device,
    requires_grad: bool,
) -> np.ndarray:
    return np.zeros(tuple(shape), dtype.numpy)


register(
    "empty_permuted(SymInt[] shape, int[] physical_layout, *, ScalarType dtype, Device device, bool requires_grad) -> Tensor",
    meta=_empty_permuted_meta,
    kernel=_empty_permuted_kernel,
    doc="empty with a physical layout (a permutation of the dims; a layout hint only)",
)


def _empty_strided_meta(
    shape: Sequence[int], strides: Sequence[int], dtype: DType, device: Device, requires_grad: bool
) -> TensorMeta:
    shape = check_shape(shape)
    return TensorMeta(
        shape, check_dtype_argument(dtype), check_strides(strides, len(shape), "strides")
    )


def _empty_strided_kernel(
    shape: Sequence[int], strides: Sequence[int], dtype: DType, device: Device, requires_grad: bool
) -> np.ndarray:
    return np.zeros(tuple(shape), dtype.numpy)


register(
    "empty_strided(SymInt[] shape, SymInt[] strides, *, ScalarType dtype, Device device, bool requires_grad) -> Tensor",
    meta=_empty_strided_meta,
    kernel=_empty_strided_kernel,
    doc="empty with strides (a layout hint only)",
)


# -- full, full_like, fill, scalar_tensor ------------------------------------------------------------------


def _full_meta(
    shape: Sequence[int], fill_value: Any, dtype: DType, device: Device, requires_grad: bool
) -> TensorMeta:
    shape = check_shape(shape)
    check_dtype_argument(dtype)
    _check_fill_value(fill_value, dtype, math.prod(shape), "fill_value")
    return TensorMeta(shape, dtype)


def _full_kernel(
    shape: Sequence[int],
    fill_value: Any,
    dtype: DType,
    device: Device,
    requires_grad: bool,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    return _filled(shape, fill_value, dtype, out)


register(
    "full(SymInt[] shape, Scalar fill_value, *, ScalarType dtype, Device device, bool requires_grad) -> Tensor",
    meta=_full_meta,
    kernel=_full_kernel,
    out=True,
    doc="a tensor of shape and dtype holding fill_value everywhere (converted as torch's fill converts)",
)


def _full_like_meta(
    a: Value, fill_value: Any, dtype: DType, device: Device, requires_grad: bool
) -> TensorMeta:
    check_tensor(a, "a")
    check_dtype_argument(dtype)
    _check_fill_value(fill_value, dtype, a.numel, "fill_value")
    # torch's meta: the operand's elementwise output strides (its own when it is empty)
    with lenient_decisions():  # strides only
        strides = a.strides if a.numel == 0 else single_operand_strides(a.shape, a.strides)
    return TensorMeta(a.shape, dtype, strides)


def _full_like_kernel(
    a: np.ndarray,
    fill_value: Any,
    dtype: DType,
    device: Device,
    requires_grad: bool,
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    return _filled(a.shape, fill_value, dtype, out)


register(
    "full_like(Tensor a, Scalar fill_value, *, ScalarType dtype, Device device, bool requires_grad) -> Tensor",
    meta=_full_like_meta,
    kernel=_full_like_kernel,
    meta_only_operands=True,
    out=True,
    doc="full with a's shape (the dtype is given explicitly)",
)


def _fill_meta(self: Value, value: Any) -> TensorMeta:
    check_tensor(self, "self")
    _check_fill_value(value, self.dtype, self.numel, "value")
    return elementwise_result(self.shape, self.dtype, (self,))


def _fill_kernel(self: np.ndarray, value: Any) -> np.ndarray:
    return _filled(self.shape, value, DType.from_numpy(self.dtype))


register(
    "fill(Tensor self, Scalar value) -> Tensor",
    meta=_fill_meta,
    kernel=_fill_kernel,
    meta_only_operands=True,
    doc="a tensor like self holding value everywhere",
)


def _scalar_kind(s: Any) -> type:
    if type(s) is Value and type(s.meta) is ScalarMeta:
        return s.meta.kind
    if is_number(s):
        return type(s)
    raise DTypeError(f"s must be a Python bool, int, float or complex, got {s!r}")


def _scalar_tensor_dtype(s: Any, dtype: DType | None) -> DType:
    kind = _scalar_kind(s)
    if dtype is None:
        return DType.from_python_type(kind)
    check_dtype_argument(dtype)
    if kind is complex and not dtype.is_complex:
        raise DTypeError(f"a complex scalar needs a complex dtype, got {dtype.short}")
    return dtype


def _scalar_tensor_meta(s: Any, dtype: DType | None, device: Device | None) -> TensorMeta:
    dtype = _scalar_tensor_dtype(s, dtype)
    _check_fill_value(s, dtype, 1, "s")
    return TensorMeta((), dtype)


def _scalar_tensor_kernel(s: Any, dtype: DType | None, device: Device | None) -> np.ndarray:
    return scalar_array(s, _scalar_tensor_dtype(s, dtype), numel=1).copy()


register(
    "scalar_tensor(Scalar s, *, ScalarType? dtype=None, Device? device=None) -> Tensor",
    meta=_scalar_tensor_meta,
    kernel=_scalar_tensor_kernel,
    doc="s as a 0-dim tensor; without dtype, the dtype of s's Python type (bool, int64, float32, complex64)",
)


# -- iota ----------------------------------------------------------------------------------------------


def _check_int(x: Any, what: str) -> None:
    if type(x) is Value:
        if type(x.meta) is not ScalarMeta or x.meta.kind is not int:
            raise DTypeError(f"{what} must be an int, got {x!r}")
    elif type(x) is not int and type(x) is not SymExpr:
        raise DTypeError(f"{what} must be an int, got {x!r}")


def _iota_meta(
    length: int, start: int, step: int, dtype: DType, device: Device, requires_grad: bool
) -> TensorMeta:
    if not is_size(length):
        raise ShapeError(f"length must be a non-negative int, got {length!r}")
    _check_int(start, "start")
    _check_int(step, "step")
    if step == 0:
        raise ShapeError("step must be nonzero")
    check_dtype(check_dtype_argument(dtype), INTS)
    return TensorMeta((length,), dtype)


def _iota_kernel(
    length: int, start: int, step: int, dtype: DType, device: Device, requires_grad: bool
) -> np.ndarray:
    if step == 0:
        raise ValueError("step must be nonzero")
    # Computed in int64 and narrowed: values beyond the dtype wrap around, as torch.arange's do.
    return (np.arange(length, dtype=np.int64) * np.int64(step) + np.int64(start)).astype(
        dtype.numpy
    )


register(
    "iota(SymInt length, *, SymInt start, SymInt step, ScalarType dtype, Device device, bool requires_grad) -> Tensor",
    meta=_iota_meta,
    kernel=_iota_kernel,
    doc="[start, start + step, ..., start + (length - 1) * step] in an integer dtype",
)


# -- random ----------------------------------------------------------------------------------------------

RANDOM_DTYPES = FLOATS | COMPLEX


def _check_real(x: Any, what: str) -> None:
    if type(x) is Value:
        if type(x.meta) is not ScalarMeta or x.meta.kind is complex:
            raise DTypeError(f"{what} must be a real scalar, got {x!r}")
    elif type(x) not in (bool, int, float):
        raise DTypeError(f"{what} must be a real number, got {x!r}")


def _check_generator(generator: Any) -> None:
    if generator is not None:
        raise DTypeError(
            f"generator must be None (the executor owns the random state), got {generator!r}"
        )


def _as_dtype(samples: np.ndarray, dtype: DType) -> np.ndarray:
    return convert_array(samples, dtype) if samples.dtype != dtype.numpy else samples


def _draw(shape: Sequence[int], dtype: DType, sample: Any) -> np.ndarray:
    """Samples of a real distribution in dtype; complex dtypes draw the real and imaginary parts
    independently (as torch does)."""
    shape = tuple(shape)
    wide = np.float64 if dtype in (DType.float64, DType.complex128) else np.float32
    if dtype.is_complex:
        return _as_dtype(sample(shape, wide) + 1j * sample(shape, wide), dtype)
    return _as_dtype(sample(shape, wide), dtype)


def _normal_meta(
    shape: Sequence[int],
    mean: Any,
    std: Any,
    dtype: DType,
    device: Device,
    requires_grad: bool,
    generator: Any,
) -> TensorMeta:
    shape = check_shape(shape)
    _check_real(mean, "mean")
    _check_real(std, "std")
    if is_number(std) and std < 0:
        raise DTypeError(f"std must be non-negative, got {std}")
    check_dtype(check_dtype_argument(dtype), RANDOM_DTYPES)
    _check_generator(generator)
    return TensorMeta(shape, dtype)


def _normal_kernel(
    shape: Sequence[int],
    mean: Any,
    std: Any,
    dtype: DType,
    device: Device,
    requires_grad: bool,
    generator: Any,
    *,
    rng: np.random.Generator,
) -> np.ndarray:
    # A complex normal of standard deviation std has parts of deviation std/√2, each centred on mean.
    part_std = std / math.sqrt(2) if dtype.is_complex else std

    def sample(size: tuple[int, ...], wide: type) -> np.ndarray:
        return (rng.standard_normal(size, dtype=wide) * wide(part_std) + wide(mean)).astype(
            wide, copy=False
        )

    return _draw(shape, dtype, sample)


register(
    "normal(SymInt[] shape, *, Scalar mean, Scalar std, ScalarType dtype, Device device, bool requires_grad, "
    "Generator? generator=None) -> Tensor",
    meta=_normal_meta,
    kernel=_normal_kernel,
    random=True,
    doc="samples of N(mean, std²); complex dtypes: real and imaginary parts each N(mean, std²/2)",
)


def _uniform_meta(
    shape: Sequence[int],
    low: Any,
    high: Any,
    dtype: DType,
    device: Device,
    stride: Sequence[int],
    generator: Any,
) -> TensorMeta:
    shape = check_shape(shape)
    stride = check_strides(stride, len(shape))
    _check_real(low, "low")
    _check_real(high, "high")
    if is_number(low) and is_number(high) and low > high:
        raise DTypeError(f"low {low} exceeds high {high}")
    check_dtype(check_dtype_argument(dtype), RANDOM_DTYPES)
    _check_generator(generator)
    return TensorMeta(shape, dtype, stride)


def _uniform_kernel(
    shape: Sequence[int],
    low: Any,
    high: Any,
    dtype: DType,
    device: Device,
    stride: Sequence[int],
    generator: Any,
    *,
    rng: np.random.Generator,
) -> np.ndarray:
    def sample(size: tuple[int, ...], wide: type) -> np.ndarray:
        return (rng.random(size, dtype=wide) * wide(high - low) + wide(low)).astype(
            wide, copy=False
        )

    result = _draw(shape, dtype, sample)
    if not dtype.is_complex and low < high:
        # Rounding (to float16/bfloat16 above all) can carry a draw just below high up to high.
        top = np.asarray(high).astype(dtype.numpy)
        below = top if float(top) < high else np.nextafter(top, np.asarray(-np.inf, dtype.numpy))
        result = np.where(result >= top, below, result).astype(dtype.numpy, copy=False)
    return result


register(
    "uniform(SymInt[] shape, *, Scalar low, Scalar high, ScalarType dtype, Device device, SymInt[] stride, "
    "Generator? generator=None) -> Tensor",
    meta=_uniform_meta,
    kernel=_uniform_kernel,
    random=True,
    doc="samples of U[low, high); complex dtypes: real and imaginary parts each U[low, high)",
)
