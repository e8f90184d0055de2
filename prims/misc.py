"""Scalar-valued, two-result and result-less prims: item, maximum_value, minimum_value, frexp,
check."""

from __future__ import annotations

import numpy as np

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.layout import preserved_strides
from aten2prims.ir.values import ScalarMeta, TensorMeta, Value

from .common import FLOATS, check_dtype, check_tensor
from .registry import register
from .shape import check_dtype_argument


def dtype_limits(dtype: DType) -> tuple[bool | int | float, bool | int | float]:
    """The lowest and highest finite values of a dtype (of its real part for complex dtypes)."""
    if dtype.is_bool:
        return False, True
    if dtype.is_integer:
        bounds = np.iinfo(dtype.numpy)
        return int(bounds.min), int(bounds.max)
    if dtype is not DType.bfloat16:
        float_bounds = np.finfo(dtype.real.numpy)
    else:  # NumPy's finfo knows NumPy's own floats only
        import ml_dtypes  # loaded already: bfloat16's NumPy dtype comes from it

        float_bounds = ml_dtypes.finfo(dtype.numpy)
    return float(float_bounds.min), float(float_bounds.max)


# -- item --------------------------------------------------------------------------------------------


def _item_meta(a: Value) -> ScalarMeta:
    check_tensor(a, "a")
    if a.numel != 1:
        raise ShapeError(
            f"a tensor of shape {list(a.shape)} has {a.numel} elements; item needs exactly one"
        )
    return ScalarMeta(a.dtype.python_type)


def _item_kernel(a: np.ndarray) -> bool | int | float | complex:
    kind = DType.from_numpy(a.dtype).python_type
    return kind(a.reshape(()).item())


register(
    "item(Tensor a) -> Scalar",
    meta=_item_meta,
    kernel=_item_kernel,
    doc="the one element of a as a Python bool, int, float or complex",
)


# -- maximum_value, minimum_value ------------------------------------------------------------------------


def _limit_meta(dtype: DType) -> ScalarMeta:
    return ScalarMeta(check_dtype_argument(dtype).python_type)


def _limit_kernel(which: int):
    def kernel(dtype: DType) -> bool | int | float | complex:
        return dtype.python_type(dtype_limits(dtype)[which])

    return kernel


register(
    "maximum_value(ScalarType dtype) -> Scalar",
    meta=_limit_meta,
    kernel=_limit_kernel(1),
    doc="the largest finite value of dtype (True for bool; for complex dtypes the real part's, as a "
    "complex number: torch's meta says complex while its kernel returns a float)",
)
register(
    "minimum_value(ScalarType dtype) -> Scalar",
    meta=_limit_meta,
    kernel=_limit_kernel(0),
    doc="the lowest finite value of dtype (False for bool; complex as for maximum_value)",
)


# -- frexp -----------------------------------------------------------------------------------------------


def _frexp_meta(self: Value) -> tuple[TensorMeta, TensorMeta]:
    check_tensor(self, "self")
    check_dtype(self.dtype, FLOATS)
    strides = preserved_strides(self.shape, self.strides)  # torch's meta: empty_like(self) twice
    return (
        TensorMeta(self.shape, self.dtype, strides),
        TensorMeta(self.shape, DType.int32, strides),
    )


def _frexp_kernel(self: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # bfloat16 has no NumPy frexp; float32 holds every bfloat16 exactly, so the split is exact.
    wide = self.astype(np.float32) if self.dtype == DType.bfloat16.numpy else self
    mantissa, exponent = np.frexp(wide)
    return np.asarray(mantissa).astype(self.dtype, copy=False), np.asarray(exponent).astype(
        np.int32, copy=False
    )


register(
    "frexp(Tensor self) -> (Tensor mantissa, Tensor exponent)",
    meta=_frexp_meta,
    kernel=_frexp_kernel,
    doc="self = mantissa * 2**exponent with 0.5 <= |mantissa| < 1; inf and NaN keep exponent 0",
)


# -- check ---------------------------------------------------------------------------------------------


def _check_meta(condition: Value, message: str) -> tuple[()]:
    check_tensor(condition, "condition")
    if condition.dtype is not DType.bool:
        raise DTypeError(f"condition must be a bool tensor, got {condition.dtype}")
    if condition.numel != 1:
        raise ShapeError(
            f"a condition of shape {list(condition.shape)} has {condition.numel} elements; "
            "check needs exactly one"
        )
    return ()


def _check_kernel(condition: np.ndarray, message: str) -> tuple[()]:
    if not condition.reshape(()).item():
        raise AssertionError(message)
    return ()


register(
    "check(Tensor condition, str message) -> ()",
    meta=_check_meta,
    kernel=_check_kernel,
    doc="raises `message` when the one element of `condition` is false (torch's _assert_async); "
    "no result",
    extension=True,
)
