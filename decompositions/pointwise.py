"""Family E: elementwise arithmetic, comparisons, math functions, activations, copies and conversions.

The rules reproduce how torch's CPU kernels compute, not only what they compute:

- TensorIterator casts every operand to the result dtype, and a float16/bfloat16 result is
  computed in float32 (opmath) and rounded once. So an operand meeting a float16 tensor — an
  integer tensor, a 0-dim float64 tensor, a Python float — is rounded to float16 *before* the
  float32 computation (`_cast_operands`). The exception: mul and div read a single-element
  `other` at full precision (TensorIterator's "original scalar value").
- Exact operations (comparisons, min/max, selections, rounding, negation, bitwise ops) run in
  the operands' own dtype: computing them in float32 would give the same values with more nodes.
- Functions with several prims (sigmoid, gelu, elu, …) promote once, run their math in the
  computation dtype and convert the result once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import prims
from aten2prims.errors import DTypeError, LoweringError
from aten2prims.ir.dtypes import Category, DType
from aten2prims.ir.values import Layout, MemoryFormat, Value
from aten2prims.promotion import (
    COMPLEX32,
    DEFAULT_FLOAT,
    PromotionKind,
    broadcast,
    broadcast_shapes,
    broadcast_to,
    convert,
    elementwise,
    elementwise_dtypes,
    opmath_dtype,
    promote,
    promoted_dtype,
    result_type,
)

from .common import FLOATS, check_dtype, full, is_number, is_tensor, scalar, scalar_kind
from .registry import register

Kind = PromotionKind
Prim = Callable[..., Value]

# -- operands --------------------------------------------------------------------------------------

# A Python number's own dtype: torch wraps a Scalar argument as a 0-dim tensor of the widest
# dtype of its kind.
_WIDEST = {bool: DType.bool, int: DType.int64, float: DType.float64, complex: DType.complex128}


def _dtype_of(x: Any) -> DType:
    kind = scalar_kind(x)
    return x.dtype if kind is None else DType.from_python_type(kind)


def _single_element(x: Any) -> bool:
    """What TensorIterator treats as a CPU scalar: a number, or a tensor whose every dim is 1."""
    return not is_tensor(x) or all(size == 1 for size in x.shape)


def _rounded(x: bool | int | float, dtype: DType) -> float:
    """A real Python number rounded to a float16/bfloat16 value, as torch casts a Scalar (through
    float32), kept a Python float so it stays a literal operand."""
    with np.errstate(over="ignore"):  # out of range: ±inf, as torch's cast
        return float(np.asarray(float(x), np.float32).astype(dtype.numpy))


def _cast(x: Any, dtype: DType) -> Any:
    """x as TensorIterator hands it to a kernel whose common dtype is `dtype`."""
    if is_number(x):
        return _rounded(x, dtype) if dtype.is_low_precision and type(x) is not complex else x
    return convert(x, dtype)


def _cast_operands(
    operands: tuple[Any, ...], result: DType, *, exact_other: bool = False
) -> tuple[Any, ...]:
    """Round the operands to a float16/bfloat16 result dtype before they are computed in float32
    (see the module doc); `exact_other`: mul/div read a single-element `other` at full precision."""
    if not result.is_low_precision:
        return operands
    return tuple(
        x if x is None or (exact_other and i == 1 and _single_element(x)) else _cast(x, result)
        for i, x in enumerate(operands)
    )


def _pointwise(
    prim: Prim, *operands: Any, kind: Kind = Kind.DEFAULT, exact_other: bool = False
) -> Value:
    """One elementwise prim computed as torch's CPU kernel computes it."""
    _, result = elementwise_dtypes(*operands, kind=kind)
    return elementwise(prim, *_cast_operands(operands, result, exact_other=exact_other), kind=kind)


def _tensor(x: Any, dtype: DType, shape: tuple[int, ...]) -> Value:
    """x as a tensor of `dtype` broadcast to `shape`; a Python number becomes a 0-dim tensor of its
    own widest dtype, converted (wrapping or rounding as torch's casts do)."""
    if is_number(x):
        x = scalar(x, _WIDEST[type(x)])
    return broadcast_to(convert(x, dtype), shape)


def _shape_of(*operands: Any) -> tuple[int, ...]:
    return broadcast_shapes(*(x.shape for x in operands if is_tensor(x)))


def _copy(x: Value, dtype: DType) -> Value:
    """A new value holding x's elements as `dtype`."""
    return prims.clone(x) if x.dtype is dtype else prims.convert_element_type(x, dtype)


def _real_scalar(op: str, value: Any) -> Any:
    """A Scalar argument taken as a real number, as torch's Scalar.to<real type>() takes it: a
    complex number with a zero imaginary part is its real part; any other is an error."""
    if type(value) is complex:
        if value.imag != 0:
            raise DTypeError(
                f"{op}: {value!r} cannot be converted to a real number without overflow"
            )
        return value.real
    return value


def _require(op: str, ok: bool, expected: str, dtype: DType) -> None:
    if not ok:
        raise DTypeError(f"{op}: expected {expected}, got {dtype.short}")


def _numeric_real(dtype: DType) -> bool:
    return dtype.category in (Category.INTEGER, Category.FLOATING)


def _can_cast(source: DType, target: DType) -> bool:
    """torch's canCast: no complex -> real, float -> integer or non-bool -> bool casts."""
    return source is DType.bool or target.category >= source.category


# -- unary math --------------------------------------------------------------------------------------
# Functions of one operand computed in floating point: an integer or bool operand promotes to the
# default float dtype (INT_TO_FLOAT), float16/bfloat16 compute in float32.


@register("aten.acos.default")
def acos(self: Value) -> Value:
    return elementwise(prims.acos, self, kind=Kind.INT_TO_FLOAT)


@register("aten.acosh.default")
def acosh(self: Value) -> Value:
    return elementwise(prims.acosh, self, kind=Kind.INT_TO_FLOAT)


@register("aten.asin.default")
def asin(self: Value) -> Value:
    return elementwise(prims.asin, self, kind=Kind.INT_TO_FLOAT)


@register("aten.asinh.default")
def asinh(self: Value) -> Value:
    return elementwise(prims.asinh, self, kind=Kind.INT_TO_FLOAT)


@register("aten.atan.default")
def atan(self: Value) -> Value:
    return elementwise(prims.atan, self, kind=Kind.INT_TO_FLOAT)


@register("aten.atanh.default")
def atanh(self: Value) -> Value:
    return elementwise(prims.atanh, self, kind=Kind.INT_TO_FLOAT)


@register("aten.cos.default")
def cos(self: Value) -> Value:
    return elementwise(prims.cos, self, kind=Kind.INT_TO_FLOAT)


@register("aten.cosh.default")
def cosh(self: Value) -> Value:
    return elementwise(prims.cosh, self, kind=Kind.INT_TO_FLOAT)


@register("aten.erf.default")
def erf(self: Value) -> Value:
    return elementwise(prims.erf, self, kind=Kind.INT_TO_FLOAT)


@register("aten.exp.default")
def exp(self: Value) -> Value:
    return elementwise(prims.exp, self, kind=Kind.INT_TO_FLOAT)


@register("aten.expm1.default")
def expm1(self: Value) -> Value:
    return elementwise(prims.expm1, self, kind=Kind.INT_TO_FLOAT)


@register("aten.log.default")
def log(self: Value) -> Value:
    return elementwise(prims.log, self, kind=Kind.INT_TO_FLOAT)


@register("aten.log10.default")
def log10(self: Value) -> Value:
    return elementwise(prims.log10, self, kind=Kind.INT_TO_FLOAT)


@register("aten.log1p.default")
def log1p(self: Value) -> Value:
    return elementwise(prims.log1p, self, kind=Kind.INT_TO_FLOAT)


@register("aten.log2.default")
def log2(self: Value) -> Value:
    return elementwise(prims.log2, self, kind=Kind.INT_TO_FLOAT)


@register("aten.reciprocal.default")
def reciprocal(self: Value) -> Value:
    return elementwise(prims.reciprocal, self, kind=Kind.INT_TO_FLOAT)


@register("aten.rsqrt.default")
def rsqrt(self: Value) -> Value:
    return elementwise(prims.rsqrt, self, kind=Kind.INT_TO_FLOAT)


@register("aten.sin.default")
def sin(self: Value) -> Value:
    return elementwise(prims.sin, self, kind=Kind.INT_TO_FLOAT)


@register("aten.sinh.default")
def sinh(self: Value) -> Value:
    return elementwise(prims.sinh, self, kind=Kind.INT_TO_FLOAT)


@register("aten.sqrt.default")
def sqrt(self: Value) -> Value:
    return elementwise(prims.sqrt, self, kind=Kind.INT_TO_FLOAT)


@register("aten.tan.default")
def tan(self: Value) -> Value:
    return elementwise(prims.tan, self, kind=Kind.INT_TO_FLOAT)


@register("aten.tanh.default")
def tanh(self: Value) -> Value:
    return elementwise(prims.tanh, self, kind=Kind.INT_TO_FLOAT)


# Not Core ATen, but torch.export keeps them (aten2prims.schema.EXTRA_ATEN_SCHEMAS).


@register("aten.erfinv.default")
def erfinv(self: Value) -> Value:
    return elementwise(prims.erf_inv, self, kind=Kind.INT_TO_FLOAT)


@register("aten.lgamma.default")
def lgamma(self: Value) -> Value:
    return elementwise(prims.lgamma, self, kind=Kind.INT_TO_FLOAT)


@register("aten.digamma.default")
def digamma(self: Value) -> Value:
    return elementwise(prims.digamma, self, kind=Kind.INT_TO_FLOAT)


@register("aten.i0.default")
def i0(self: Value) -> Value:
    return elementwise(prims.bessel_i0, self, kind=Kind.INT_TO_FLOAT)


# Exact in every dtype, so computed in the operand's own dtype; the prim rejects the dtypes torch
# rejects.


@register("aten.abs.default")
def abs_default(self: Value) -> Value:
    return prims.abs(self)


@register("aten.neg.default")
def neg(self: Value) -> Value:
    return prims.neg(self)


@register("aten.sign.default")
def sign(self: Value) -> Value:
    return prims.sign(self)


@register("aten.ceil.default")
def ceil(self: Value) -> Value:
    return prims.ceil(self)


@register("aten.floor.default")
def floor(self: Value) -> Value:
    return prims.floor(self)


@register("aten.round.default")
def round_default(self: Value) -> Value:
    return prims.round(self)


@register("aten.trunc.default")
def trunc(self: Value) -> Value:
    return prims.trunc(self)


@register("aten.bitwise_not.default")
def bitwise_not(self: Value) -> Value:
    return prims.bitwise_not(self)


@register("aten.sigmoid.default")
def sigmoid(self: Value) -> Value:
    (x,), _, result = promote(self, kind=Kind.INT_TO_FLOAT)
    return convert(prims.reciprocal(prims.add(prims.exp(prims.neg(x)), 1)), result)


@register("aten.round.decimals")
def round_decimals(self: Value, decimals: int) -> Value:
    """Not Core ATen (torch.export keeps it). torch's CPU kernel, in opmath: round-half-even of
    x·10^d, divided by 10^d; for negative d, of x / 10^-d, times 10^-d (10^|d| computed in
    double, then rounded to opmath). Floating dtypes only."""
    check_dtype("aten.round.decimals", self, FLOATS, "self")
    compute = opmath_dtype(self.dtype)
    scale = float(compute.numpy.type(10.0 ** abs(decimals)))
    x = convert(self, compute)
    if decimals >= 0:
        rounded = prims.div(prims.round(prims.mul(x, scale)), scale)
    else:
        rounded = prims.mul(prims.round(prims.div(x, scale)), scale)
    return convert(rounded, self.dtype)


@register("aten.isnan.default")
def isnan(self: Value) -> Value:
    return prims.ne(self, self)


@register("aten.isinf.default")
def isinf(self: Value) -> Value:
    if self.dtype.is_complex:
        return prims.bitwise_or(isinf(prims.real(self)), isinf(prims.imag(self)))
    if not self.dtype.is_floating:
        return full(self.shape, False, DType.bool)
    return prims.eq(prims.abs(self), math.inf)


# -- binary arithmetic -------------------------------------------------------------------------------


@register("aten.mul.Tensor", "aten.mul.Scalar")
def mul(self: Any, other: Any) -> Value:
    return _pointwise(prims.mul, self, other, exact_other=True)


@register("aten.div.Tensor", "aten.div.Scalar")
def div(self: Any, other: Any) -> Value:
    return _pointwise(prims.div, self, other, kind=Kind.INT_TO_FLOAT, exact_other=True)


@register("aten.fmod.Tensor", "aten.fmod.Scalar")
def fmod(self: Any, other: Any) -> Value:
    return _pointwise(prims.fmod, self, other)


@register("aten.remainder.Tensor", "aten.remainder.Scalar")
def remainder(self: Any, other: Any) -> Value:
    return _pointwise(prims.remainder, self, other)


@register("aten.atan2.default")
def atan2(self: Value, other: Value) -> Value:
    return _pointwise(prims.atan2, self, other, kind=Kind.INT_TO_FLOAT)


@register("aten.maximum.default")
def maximum(self: Value, other: Value) -> Value:
    return _pointwise(prims.maximum, self, other, kind=Kind.NO_OPMATH)


@register("aten.minimum.default")
def minimum(self: Value, other: Value) -> Value:
    return _pointwise(prims.minimum, self, other, kind=Kind.NO_OPMATH)


@register("aten.bitwise_and.Tensor", "aten.bitwise_and.Scalar")
def bitwise_and(self: Any, other: Any) -> Value:
    return _pointwise(prims.bitwise_and, self, other, kind=Kind.NO_OPMATH)


@register("aten.bitwise_or.Tensor", "aten.bitwise_or.Scalar")
def bitwise_or(self: Any, other: Any) -> Value:
    return _pointwise(prims.bitwise_or, self, other, kind=Kind.NO_OPMATH)


@register("aten.bitwise_xor.Tensor", "aten.bitwise_xor.Scalar")
def bitwise_xor(self: Any, other: Any) -> Value:
    return _pointwise(prims.bitwise_xor, self, other, kind=Kind.NO_OPMATH)


# Not Core ATen, but torch.export keeps them (aten2prims.schema.EXTRA_ATEN_SCHEMAS).


@register("aten.hypot.default")
def hypot(self: Value, other: Value) -> Value:
    return _pointwise(prims.hypot, self, other)


@register("aten.nextafter.default")
def nextafter(self: Value, other: Value) -> Value:
    return _pointwise(prims.nextafter, self, other, kind=Kind.NO_OPMATH)


@register("aten.copysign.Tensor", "aten.copysign.Scalar")
def copysign(self: Any, other: Any) -> Value:
    """|self| with the sign bit of other (NaN and -0.0 included): a select on `signbit`."""
    (a, b), _, result = promote(self, other, kind=Kind.INT_TO_FLOAT)
    magnitude = prims.abs(a)
    if is_number(b):  # the sign is known now
        return convert(
            prims.neg(magnitude)
            if math.copysign(1.0, _real_scalar("copysign", b)) < 0
            else magnitude,
            result,
        )
    return convert(prims.where(prims.signbit(b), prims.neg(magnitude), magnitude), result)


# Conjugates and the phase: not Core ATen, but torch.export keeps them (ifft, hfft and ihfft of a
# real signal take conjugates).


@register("aten._conj.default")
def _conj(self: Value) -> Value:
    """torch's lazy conjugate, materialized (a functional graph has no conjugate bit), so the
    prim is conj_physical. torch asserts on a real input; we refuse it, naming the op."""
    if not self.dtype.is_complex:
        raise DTypeError(f"aten._conj: expected a complex tensor, got {self.dtype.name}")
    return prims.conj_physical(self)


@register("aten._conj_physical.default")
def _conj_physical(self: Value) -> Value:
    """The conjugate; of a tensor that is not complex, a copy of it (as torch)."""
    if not self.dtype.is_complex:
        return prims.clone(self, memory_format=None)
    return prims.conj_physical(self)


@register("aten.angle.default")
def angle(self: Value) -> Value:
    """Not Core ATen (torch.export keeps it: the phase of a spectrum). Of a complex element its
    argument atan2(imag, real), in the real dtype; of a real one π where it is negative and 0
    elsewhere (−0.0 and +inf too), NaN kept — integers and bool promoted to the default float."""
    if self.dtype.is_complex:
        return prims.atan2(prims.imag(self), prims.real(self))
    return elementwise(_real_angle, self, kind=Kind.INT_TO_FLOAT)


def _real_angle(x: Value) -> Value:
    zero = full(list(x.shape), 0.0, x.dtype)
    half_turn = full(list(x.shape), math.pi, x.dtype)
    return prims.where(prims.ne(x, x), x, prims.where(prims.lt(x, zero), half_turn, zero))


# -- complex numbers from real parts (torch.complex, torch.polar): not Core ATen -------------------


def _check_parts(op: str, first: Value, second: Value, *, half: str) -> None:
    """torch does not promote the parts: both of one dtype, float32 or float64 (float16 is
    refused for the reason `half` gives)."""
    if first.dtype is not second.dtype:
        raise DTypeError(
            f"{op}: both parts must have one dtype (torch does not promote them), got "
            f"{first.dtype.short} and {second.dtype.short}"
        )
    if first.dtype is DType.float16:
        raise DTypeError(f"{op}: float16 parts are not supported ({half})")
    check_dtype(op, first, frozenset({DType.float32, DType.float64}), "parts")


@register("aten.complex.default")
def complex_(real: Value, imag: Value) -> Value:
    """Not Core ATen (torch.export keeps it). The parts broadcast together, then
    `prims.complex` (ours: torch's prims cannot build a complex number from real parts)."""
    _check_parts(
        "aten.complex", real, imag, half="torch's result would be complex32, which we do not model"
    )
    return prims.complex(*broadcast(real, imag))


@register("aten.polar.default")
def polar(abs: Value, angle: Value) -> Value:
    """Not Core ATen (torch.export keeps it). abs·cos(angle) + abs·sin(angle)·i, as torch's CPU
    kernel computes each part in the parts' dtype."""
    _check_parts("aten.polar", abs, angle, half="torch's CPU kernel refuses them")
    magnitude, phase = broadcast(abs, angle)
    return prims.complex(
        prims.mul(magnitude, prims.cos(phase)), prims.mul(magnitude, prims.sin(phase))
    )


# `x << n`, `x >> n`: not Core ATen, but torch.export keeps them. Integers only (bool promotes
# with the shift amount); torch's shifts give 0, or the sign for >>, when the amount is negative
# or at least the bit width, as the prims do.


@register("aten.__lshift__.Tensor", "aten.__lshift__.Scalar")
def shift_left(self: Value, other: Any) -> Value:
    return _pointwise(prims.shift_left, self, other, kind=Kind.NO_OPMATH)


@register("aten.__rshift__.Tensor", "aten.__rshift__.Scalar")
def shift_right(self: Value, other: Any) -> Value:
    return _pointwise(prims.shift_right_arithmetic, self, other, kind=Kind.NO_OPMATH)


# -- comparisons: computed in the promoted dtype, not in float32 ---------------------------------------


@register("aten.ge.Tensor", "aten.ge.Scalar")
def ge(self: Any, other: Any) -> Value:
    return _pointwise(prims.ge, self, other, kind=Kind.ALWAYS_BOOL)


@register("aten.gt.Tensor", "aten.gt.Scalar")
def gt(self: Any, other: Any) -> Value:
    return _pointwise(prims.gt, self, other, kind=Kind.ALWAYS_BOOL)


@register("aten.le.Tensor", "aten.le.Scalar")
def le(self: Any, other: Any) -> Value:
    return _pointwise(prims.le, self, other, kind=Kind.ALWAYS_BOOL)


@register("aten.lt.Tensor", "aten.lt.Scalar")
def lt(self: Any, other: Any) -> Value:
    return _pointwise(prims.lt, self, other, kind=Kind.ALWAYS_BOOL)


def _half_parts(x: Any) -> tuple[Any, Any]:
    """x's real and imaginary parts rounded to float16: the halves of a complex32 value."""
    if is_tensor(x):
        if x.dtype.is_complex:
            return convert(prims.real(x), DType.float16), convert(prims.imag(x), DType.float16)
        return convert(x, DType.float16), 0.0
    if not is_number(x):
        raise DTypeError(f"a comparison in complex32 needs literal scalars, got {x!r}")
    z = complex(x)
    return _rounded(z.real, DType.float16), _rounded(z.imag, DType.float16)


def _equality(self: Any, other: Any, *, prim: Prim, same: bool, combine: Prim) -> Value:
    """eq (same=True) and ne. A float16 tensor meeting a complex operand compares in complex32,
    which NumPy lacks: the parts are compared in float16 instead (exactly what complex32's
    comparison does) and combined."""
    if promoted_dtype(self, other) is not COMPLEX32:
        return elementwise(prim, self, other, kind=Kind.ALWAYS_BOOL)
    shape = _shape_of(self, other)
    halves = []
    for x, y in zip(_half_parts(self), _half_parts(other)):
        if is_tensor(x) or is_tensor(y):
            halves.append(broadcast_to(elementwise(prim, x, y, kind=Kind.ALWAYS_BOOL), shape))
        else:
            halves.append(full(shape, (x == y) == same, DType.bool))
    return combine(*halves)


@register("aten.eq.Tensor", "aten.eq.Scalar")
def eq(self: Any, other: Any) -> Value:
    return _equality(self, other, prim=prims.eq, same=True, combine=prims.bitwise_and)


@register("aten.ne.Tensor", "aten.ne.Scalar")
def ne(self: Any, other: Any) -> Value:
    return _equality(self, other, prim=prims.ne, same=False, combine=prims.bitwise_or)


def _check_alpha(op: str, alpha: Any, result: DType) -> None:
    """torch's alpha_check against the result dtype."""
    kind = scalar_kind(alpha)
    if kind is None:
        raise DTypeError(f"{op}: alpha must be a scalar, got {alpha!r}")
    if kind is bool and result is not DType.bool:
        raise DTypeError(f"{op}: a bool alpha needs a bool result, got {result.short}")
    if result.is_integral and kind not in (bool, int):
        raise DTypeError(
            f"{op}: alpha must be an integer for an integral result ({result.short}), got {kind.__name__}"
        )
    if not result.is_complex and kind is complex:
        raise DTypeError(f"{op}: a complex alpha needs a complex result, got {result.short}")


def _plus_scaled(op: str, self: Any, other: Any, alpha: Any, *, negate: bool) -> Value:
    """self + alpha * other (alpha negated for sub), with alpha rounded to the result dtype as
    torch's kernel takes it."""
    _, result = elementwise_dtypes(self, other, kind=Kind.DEFAULT)
    _check_alpha(op, alpha, result)
    self, other, alpha = _cast_operands((self, other, alpha), result)
    (a, b), computation, result = promote(self, other)
    if is_number(alpha) and alpha == 1:
        return convert((prims.sub if negate else prims.add)(a, b), result)
    shape = _shape_of(a, b)
    if is_number(alpha):
        scale = convert(-alpha if negate else alpha, computation)
    else:
        scale = _tensor(alpha, computation, shape)
        scale = prims.neg(scale) if negate else scale
    if is_number(b) and is_number(scale):
        scaled = convert(b * scale, computation)  # both literals: fold
    else:
        scaled = prims.mul(b if is_tensor(b) else _tensor(b, computation, shape), scale)
    total = _complex_add(a, scaled, shape) if computation.is_complex else prims.add(a, scaled)
    return convert(total, result)


def _complex_add(a: Any, b: Any, shape: tuple[int, ...]) -> Value:
    """a + b as a plain complex sum. prims.add computes a + 1 * b, like torch's add, and that
    complex product turns an infinite part of b into a NaN in its other part; torch's
    add(a, b, alpha=...) adds its alpha * b without it. So the parts are added as reals."""
    if is_number(b):
        return prims.add(a, b)
    dtype = b.dtype
    a = _tensor(a, dtype, shape)
    if not shape:  # viewing as reals needs a last dimension
        return prims.squeeze(_complex_add(broadcast_to(a, (1,)), broadcast_to(b, (1,)), (1,)), [0])
    parts = prims.add(prims.view_of_dtype(a, dtype.real), prims.view_of_dtype(b, dtype.real))
    return prims.view_of_dtype(parts, dtype)


@register("aten.add.Tensor", "aten.add.Scalar")
def add(self: Any, other: Any, alpha: Any) -> Value:
    return _plus_scaled("aten.add", self, other, alpha, negate=False)


@register("aten.sub.Tensor", "aten.sub.Scalar")
def sub(self: Any, other: Any, alpha: Any) -> Value:
    if DType.bool in (_dtype_of(self), _dtype_of(other)):
        raise DTypeError(
            "aten.sub: subtraction with a bool operand is not supported (use logical_xor or logical_not)"
        )
    return _plus_scaled("aten.sub", self, other, alpha, negate=True)


# -- division with rounding ------------------------------------------------------------------------------


def _floor_divide_integer(a: Value, b: Value) -> Value:
    """Truncating division stepped down where the remainder's sign disagrees with the divisor's."""
    quotient = prims.div(a, b)
    if not a.dtype.is_signed:
        return quotient
    remainder = prims.fmod(a, b)
    step = prims.bitwise_and(
        prims.ne(remainder, 0), prims.ne(prims.lt(remainder, 0), prims.lt(b, 0))
    )
    return prims.sub(quotient, prims.convert_element_type(step, a.dtype))


def _floor_divide_float(a: Value, b: Value) -> Value:
    """torch's CPU floor division of floats (c10::div_floor_floating): the exact quotient of
    a - fmod(a, b) by b, corrected, rather than floor(a / b), whose rounding can be off by one."""
    mod = prims.fmod(a, b)
    quotient = prims.div(prims.sub(a, mod), b)
    # fmod's remainder has the dividend's sign: step down where it disagrees with the divisor's.
    step = prims.bitwise_and(prims.ne(mod, 0), prims.ne(prims.lt(b, 0), prims.lt(mod, 0)))
    quotient = prims.where(step, prims.sub(quotient, 1.0), quotient)
    floor = prims.floor(quotient)
    floor = prims.where(prims.gt(prims.sub(quotient, floor), 0.5), prims.add(floor, 1.0), floor)
    true_quotient = prims.div(a, b)
    # A zero quotient carries the sign of the true quotient; a zero divisor gives IEEE's a / b.
    floor = prims.where(prims.eq(quotient, 0.0), prims.mul(true_quotient, 0.0), floor)
    return prims.where(prims.eq(b, 0.0), true_quotient, floor)


def _trunc_divide(a: Any, b: Any) -> Value:
    quotient = prims.div(a, b)  # truncates integers
    return quotient if quotient.dtype.is_integer else prims.trunc(quotient)


@register("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div_mode(self: Any, other: Any, rounding_mode: str | None) -> Value:
    if rounding_mode is None:
        return _pointwise(prims.div, self, other, kind=Kind.INT_TO_FLOAT, exact_other=True)
    if rounding_mode not in ("trunc", "floor"):
        raise LoweringError(
            f"aten.div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}"
        )
    _, result = elementwise_dtypes(self, other, kind=Kind.DEFAULT)
    _require(
        f"aten.div (rounding_mode={rounding_mode!r})",
        _numeric_real(result),
        "a numeric real dtype",
        result,
    )
    (a, b), computation, result = promote(*_cast_operands((self, other), result, exact_other=True))
    if rounding_mode == "trunc":
        return convert(_trunc_divide(a, b), result)
    shape = _shape_of(a, b)
    a, b = _tensor(a, computation, shape), _tensor(b, computation, shape)
    floor_divide = _floor_divide_integer if computation.is_integer else _floor_divide_float
    return convert(floor_divide(a, b), result)


# -- pow ---------------------------------------------------------------------------------------------

# torch's float/double/bfloat16/complex pow(tensor, number) kernels take these fast paths (not
# float16's); 0.5 and -0.5 give other values than pow at -0.0 and -inf.
_POW_FAST_PATHS: dict[float, Callable[[Value], Value]] = {
    0.5: prims.sqrt,
    -0.5: prims.rsqrt,
    -1.0: prims.reciprocal,
    2.0: lambda x: prims.mul(x, x),
    3.0: lambda x: prims.mul(prims.mul(x, x), x),
    -2.0: lambda x: prims.reciprocal(prims.mul(x, x)),
}


@register("aten.pow.Tensor_Tensor")
def pow_tensor_tensor(self: Any, exponent: Any) -> Value:
    return _pointwise(prims.pow, self, exponent)


@register("aten.pow.Tensor_Scalar")
def pow_tensor_scalar(self: Value, exponent: Any) -> Value:
    if self.dtype.is_integral and type(exponent) is int and exponent < 0:
        raise DTypeError("aten.pow: integers to negative integer powers are not allowed")
    result = result_type(self, exponent)
    if is_number(exponent):
        if exponent == 0:  # x ** 0 is 1, NaN included
            return full(self.shape, 1, result)
        if exponent == 1:
            return _copy(self, result)
        if result is DType.float16:
            return _float16_pow(self, exponent)
        fast_path = None if result.is_integral else _POW_FAST_PATHS.get(exponent)
        if fast_path is not None:
            (x,), _, result = promote(convert(self, result))
            return convert(fast_path(x), result)
    return _pointwise(prims.pow, self, exponent)


def _float16_pow(self: Value, exponent: Any) -> Value:
    """torch's float16 pow(tensor, number) has no fast paths: pow with the exponent rounded to
    float16, computed in float32. A literal exponent would take prims.pow's own fast paths, so a
    fast-path exponent goes in as a tensor."""
    x, exponent = _cast_operands((self, exponent), DType.float16)
    if is_number(exponent) and exponent in _POW_FAST_PATHS:
        exponent = _tensor(exponent, DType.float16, self.shape)
    return elementwise(prims.pow, x, exponent)


@register("aten.pow.Scalar")
def pow_scalar(self: Any, exponent: Value) -> Value:
    result = result_type(self, exponent)
    if scalar_kind(self) is not bool and is_number(self) and self == 1:  # 1 ** x is 1 even for NaN
        return full(exponent.shape, 1, result)
    return _pointwise(prims.pow, self, exponent)


# -- logical ---------------------------------------------------------------------------------------------


def _truth(x: Any) -> Any:
    if is_tensor(x):
        return convert(x, DType.bool)  # nonzero (NaN included) is true
    return bool(x)


def _logical(prim: Prim, self: Any, other: Any) -> Value:
    """A logical binary op: both operands promoted (so a value that rounds to zero in the common
    dtype is false), each made a truth value, combined by `prim`."""
    (a, b), _, _ = promote(self, other, kind=Kind.ALWAYS_BOOL)
    return prim(_truth(a), _truth(b))


@register("aten.logical_and.default")
def logical_and(self: Any, other: Any) -> Value:
    return _logical(prims.bitwise_and, self, other)


@register("aten.logical_or.default")
def logical_or(self: Any, other: Any) -> Value:
    return _logical(prims.bitwise_or, self, other)


@register("aten.logical_xor.default")
def logical_xor(self: Any, other: Any) -> Value:
    return _logical(prims.ne, self, other)


@register("aten.logical_not.default")
def logical_not(self: Value) -> Value:
    return prims.eq(self, convert(0, self.dtype))


# -- selection and clamping --------------------------------------------------------------------------------


@register("aten.where.self")
def where(condition: Value, self: Any, other: Any) -> Value:
    return elementwise(prims.where, condition, self, other, kind=Kind.NO_OPMATH, promoting=[1, 2])


def _clamp(x: Value, low: Any, high: Any) -> Value:
    """min(max(x, low), high) in x's dtype; NaN in x or in a bound propagates."""
    if low is not None:
        x = prims.maximum(x, low)
    if high is not None:
        x = prims.minimum(x, high)
    return x


def _clamp_scalars(op: str, self: Value, low: Any, high: Any, result: DType) -> Value:
    _require(op, _numeric_real(result), "a numeric real dtype", result)
    x = convert(self, result)
    low, high = (_real_scalar(op, b) for b in (low, high))
    if (
        low is not None
        and high is not None
        and any(type(b) is float and math.isnan(b) for b in (low, high))
    ):
        return full(
            x.shape, math.nan, result
        )  # torch fills NaN when both bounds are given and one is NaN
    low, high = (
        None if b is None else convert(b, result) if is_number(b) else _tensor(b, result, x.shape)
        for b in (low, high)
    )
    if all(
        b is None or (is_number(b) and not (type(b) is float and math.isnan(b)))
        for b in (low, high)
    ):  # (a symbolic size bound is a number too, never NaN: asking would specialize it)
        return _clamp_to_numbers(x, low, high)
    return _clamp(x, low, high)


def _clamp_to_numbers(x: Value, low: Any, high: Any) -> Value:
    """torch's kernel for number bounds: x < low ? low : x, then x > high ? high : x. An x equal
    to a bound is kept, so clamp(-0.0, min=0) and relu(-0.0) are -0.0; a NaN x stays NaN."""
    if low is not None:
        x = prims.where(prims.lt(x, low), low, x)
    if high is not None:
        x = prims.where(prims.gt(x, high), high, x)
    return x


@register("aten.clamp.default")
def clamp(self: Value, min: Any, max: Any) -> Value:
    if min is None and max is None:
        raise DTypeError("aten.clamp: at least one of min and max must be given")
    _require("aten.clamp", not self.dtype.is_complex, "a real dtype", self.dtype)
    # Floating tensors keep their dtype; others promote with the bounds.
    result = self.dtype if self.dtype.is_floating else result_type(self, min, max)
    return _clamp_scalars("aten.clamp", self, min, max, result)


@register("aten.clamp.Tensor")
def clamp_tensor(self: Value, min: Value | None, max: Value | None) -> Value:
    if min is None and max is None:
        raise DTypeError("aten.clamp: at least one of min and max must be given")
    (x, low, high), _, result = promote(self, min, max, kind=Kind.NO_OPMATH)
    _require("aten.clamp", not result.is_complex, "a real dtype", result)
    # torch's kernel for both bounds lacks bool; its one-bound kernels (clamp_min/max) have it.
    one_bound = low is None or high is None
    _require(
        "aten.clamp (both bounds)", result is not DType.bool or one_bound, "a numeric dtype", result
    )
    return _clamp(x, low, high)


@register("aten.hardtanh.default")
def hardtanh(self: Value, min_val: Any, max_val: Any) -> Value:
    _require("aten.hardtanh", _numeric_real(self.dtype), "a numeric real dtype", self.dtype)
    if self.dtype.is_integer:
        # Integer tensors take the limits truncated to integers (no promotion); a run-time
        # limit is truncated by its conversion to the tensor's dtype.
        min_val, max_val = (
            int(_real_scalar("aten.hardtanh", v)) if is_number(v) else v for v in (min_val, max_val)
        )
        if not self.dtype.is_signed and any(is_number(v) and v < 0 for v in (min_val, max_val)):
            raise DTypeError("aten.hardtanh: an unsigned tensor cannot take negative limits")
    return _clamp_scalars("aten.hardtanh", self, min_val, max_val, self.dtype)


@register("aten.relu.default")
def relu(self: Value) -> Value:
    _require("aten.relu", _numeric_real(self.dtype), "a numeric real dtype", self.dtype)
    return _clamp_to_numbers(self, convert(0, self.dtype), None)


# -- activations ---------------------------------------------------------------------------------------------


@register("aten.leaky_relu.default")
def leaky_relu(self: Value, negative_slope: Any) -> Value:
    check_dtype("aten.leaky_relu", self, FLOATS, "self")
    (x,), _, result = promote(self, kind=Kind.INT_TO_FLOAT)
    slope = _literal("aten.leaky_relu", negative_slope)
    return convert(prims.where(prims.gt(x, 0), x, prims.mul(x, slope)), result)


@register("aten.elu.default")
def elu(self: Value, alpha: Any, scale: Any, input_scale: Any) -> Value:
    check_dtype("aten.elu", self, FLOATS, "self")
    (x,), _, result = promote(self, kind=Kind.INT_TO_FLOAT)
    alpha, scale, input_scale = (_literal("aten.elu", v) for v in (alpha, scale, input_scale))
    negative = prims.mul(prims.expm1(prims.mul(x, float(input_scale))), float(alpha * scale))
    return convert(prims.where(prims.gt(x, 0), prims.mul(x, float(scale)), negative), result)


_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
# torch runs float32 and (on CPUs with bfloat16 support) bfloat16 GELU through oneDNN, which
# computes (1 + erf(x / sqrt 2)) * x * 0.5: it overflows to inf above half the largest float
# and returns NaN for +inf.
_ONEDNN_GELU = (DType.float32, DType.bfloat16)


def _gelu(x: Value, approximate: str, *, onednn: bool) -> Value:
    if approximate == "tanh":
        cube = prims.mul(prims.mul(x, x), x)
        inner = prims.mul(prims.add(x, prims.mul(cube, 0.044715)), _SQRT_2_OVER_PI)
        return prims.mul(prims.mul(x, 0.5), prims.add(prims.tanh(inner), 1.0))
    if approximate != "none":
        raise LoweringError(f"aten.gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    cdf = prims.add(prims.erf(prims.mul(x, _SQRT_HALF)), 1.0)  # twice the normal CDF
    if not onednn:
        return prims.mul(prims.mul(x, 0.5), cdf)
    return prims.where(prims.eq(x, math.inf), math.nan, prims.mul(prims.mul(cdf, x), 0.5))


@register("aten.gelu.default")
def gelu(self: Value, approximate: str) -> Value:
    check_dtype("aten.gelu", self, FLOATS, "self")
    (x,), _, result = promote(self, kind=Kind.INT_TO_FLOAT)
    return convert(_gelu(x, approximate, onednn=result in _ONEDNN_GELU), result)


def _literal(op: str, value: Any) -> bool | int | float:
    """An activation parameter: exported graphs hold them as literals."""
    value = _real_scalar(op, value)
    if type(value) not in (bool, int, float):
        raise DTypeError(f"{op}: expected a real Python number for a parameter, got {value!r}")
    return value


# -- copies, conversions and scalars ------------------------------------------------------------------------


@register("aten.alias.default")
def alias(self: Value) -> Value:
    return prims.view_of(self)


@register("aten.clone.default")
def clone(self: Value, memory_format: MemoryFormat | None) -> Value:
    """A copy in `memory_format` (None: preserve_format, which keeps dense strides)."""
    return prims.clone(self, memory_format=memory_format)


@register("aten._to_copy.default")
def to_copy(
    self: Value,
    dtype: DType | None,
    layout: Any,
    device: Any,
    pin_memory: Any,
    non_blocking: bool,
    memory_format: Any,
) -> Value:
    if layout not in (None, Layout.strided):
        raise DTypeError(f"aten._to_copy: only the strided layout is supported, got {layout}")
    dtype = self.dtype if dtype is None else dtype
    if memory_format in (None, MemoryFormat.preserve_format):
        return _copy(self, dtype)
    # Laid out in the requested format first; the conversion keeps those (dense) strides.
    laid_out = prims.clone(self, memory_format=memory_format)
    return laid_out if dtype is self.dtype else prims.convert_element_type(laid_out, dtype)


@register("aten.copy.default")
def copy(self: Value, src: Value, non_blocking: bool) -> Value:
    """src's elements as self's dtype, broadcast to self's shape."""
    if src.dtype is self.dtype and src.shape == self.shape:
        return prims.clone(src)
    return broadcast_to(convert(src, self.dtype), self.shape)


@register("aten.fill.Scalar")
def fill(self: Value, value: Any) -> Value:
    return prims.fill(self, value)


@register("aten.scalar_tensor.default")
def scalar_tensor(s: Any, dtype: DType | None, layout: Any, device: Any, pin_memory: Any) -> Value:
    if layout not in (None, Layout.strided):
        raise DTypeError(f"aten.scalar_tensor: only the strided layout is supported, got {layout}")
    dtype = DEFAULT_FLOAT if dtype is None else dtype  # the default dtype, whatever s's kind
    if type(s) is complex and not dtype.is_complex:
        # aten converts a complex scalar to a real dtype when nothing is lost (bool: nonzero).
        if not dtype.is_bool and s.imag != 0:
            raise DTypeError(
                f"aten.scalar_tensor: {s!r} cannot be converted to {dtype.short} without overflow"
            )
        s = bool(s) if dtype.is_bool else s.real
    return prims.scalar_tensor(s, dtype=dtype)


@register("aten._local_scalar_dense.default")
def local_scalar_dense(self: Value) -> Value:
    return prims.item(self)


@register("aten.atan2.out")
def atan2_out(self: Any, other: Any, out: Value) -> Value:
    """The result written into `out`: computed in atan2's own dtype, then cast to out's dtype
    (which must be one torch casts to); the shape is the operands' broadcast shape."""
    value = _pointwise(prims.atan2, self, other, kind=Kind.INT_TO_FLOAT)
    if not _can_cast(value.dtype, out.dtype):
        raise DTypeError(
            f"aten.atan2.out: the result type {value.dtype.short} cannot be cast to out's dtype {out.dtype.short}"
        )
    return convert(value, out.dtype)
