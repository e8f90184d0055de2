"""Elementwise prims: unary, binary and `where`, with torch's CPU dtype domains.

Each prim is one line of a table: its name, the dtypes it accepts (probed against torch 2.13
eager, see docs/prims.md), how its result dtype follows from the operand dtype, and a NumPy
function. float16/bfloat16 compute in float32 and round back, as torch's CPU kernels do.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
import scipy.special as special

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import TensorMeta

from . import vector_math
from .common import (
    ALL,
    BOOL,
    COMPLEX,
    F32_F64,
    FLOATS,
    INTS,
    check_dtype,
    elementwise_operands,
    elementwise_result,
    is_number,
    is_tensor,
    number_as,
    opmath_call,
)
from .registry import register


class ResultKind(enum.Enum):
    SAME = "same"  # result dtype = operand dtype
    BOOL = "bool"  # comparisons and predicates
    REAL = "real"  # complex -> its real counterpart (abs, real, imag)


@attrs.frozen(slots=True)
class ElementwiseSpec:
    """What the table says about one elementwise prim (the tests read it to stay honest)."""

    name: str
    arity: int
    domain: frozenset[DType]
    kind: ResultKind


# Every prim this module registers, by name.
ELEMENTWISE: dict[str, ElementwiseSpec] = {}


def _result_dtype(dtype: DType, kind: ResultKind) -> DType:
    if kind is ResultKind.BOOL:
        return DType.bool
    if kind is ResultKind.REAL:
        return dtype.real
    return dtype


def _elementwise_meta(
    domain: frozenset[DType], kind: ResultKind, *, bool_numbers: bool = True
) -> Callable[..., TensorMeta]:
    def meta(*args: Any) -> TensorMeta:
        shape, dtype = elementwise_operands(args)
        check_dtype(dtype, domain)
        if not bool_numbers and any(type(a) is bool for a in args):
            raise DTypeError(
                "a Python bool operand is not supported (torch refuses bool operands here)"
            )
        return elementwise_result(shape, _result_dtype(dtype, kind), args)

    return meta


def _arrays(args: tuple[Any, ...]) -> tuple[list[Any], DType]:
    """Operands as arrays of one dtype: Python numbers become 0-dim arrays of the tensors' dtype."""
    dtype = next(DType.from_numpy(a.dtype) for a in args if not is_number(a))
    return [number_as(a, dtype) if is_number(a) else a for a in args], dtype


# A kernel used instead of the table's function when `other` is a Python number (torch's Scalar
# overloads differ: pow special-cases exponents, mul/div keep the number in float32 for
# float16/bfloat16). It receives the tensor operand and the number and returns the result.
NumberKernel = Callable[[np.ndarray, Any], Any]


def _elementwise_kernel(
    fn: Callable[..., Any],
    kind: ResultKind,
    *,
    opmath: bool = True,
    number_other: NumberKernel | None = None,
) -> Callable[..., Any]:
    def kernel(*args: Any) -> np.ndarray:
        # torch returns IEEE results (inf, nan, wrapped integers) silently; so do we.
        with np.errstate(all="ignore"):
            if (
                number_other is not None
                and len(args) == 2
                and is_number(args[1])
                and not is_number(args[0])
            ):
                result = number_other(args[0], args[1])
                dtype = DType.from_numpy(args[0].dtype)
            else:
                arrays, dtype = _arrays(args)
                result = opmath_call(fn, arrays, dtype) if opmath else fn(*arrays)
            return np.asarray(result).astype(_result_dtype(dtype, kind).numpy, copy=False)

    return kernel


def _with_names(function: Callable[..., Any], names: tuple[str, ...]) -> Callable[..., Any]:
    """Give a generic (*args) function the schema's parameter names, so the registry can check
    them and callers can bind by name."""
    namespace: dict[str, Any] = {"_f": function}
    params = ", ".join(names)
    exec(f"def bound({params}):\n    return _f({params})\n", namespace)
    return namespace["bound"]


def unary(
    name: str,
    domain: frozenset[DType],
    fn: Callable[[Any], Any],
    kind: ResultKind = ResultKind.SAME,
    *,
    opmath: bool = True,
    view: bool = False,
    doc: str = "",
    operand: str = "self",
) -> None:
    """`operand`: the operand's name in torch's schema of the prim (`self`, but `a` for conj)."""
    ELEMENTWISE[name] = ElementwiseSpec(name, 1, domain, kind)
    register(
        f"{name}(Tensor {operand}) -> Tensor",
        meta=_with_names(_elementwise_meta(domain, kind), (operand,)),
        kernel=_with_names(_elementwise_kernel(fn, kind, opmath=opmath), (operand,)),
        view=view,
        doc=doc,
    )


def binary(
    name: str,
    domain: frozenset[DType],
    fn: Callable[[Any, Any], Any],
    kind: ResultKind = ResultKind.SAME,
    *,
    opmath: bool = True,
    number_other: NumberKernel | None = None,
    bool_numbers: bool = True,
    doc: str = "",
) -> None:
    ELEMENTWISE[name] = ElementwiseSpec(name, 2, domain, kind)
    register(
        f"{name}(Tensor self, Tensor other) -> Tensor",
        meta=_with_names(
            _elementwise_meta(domain, kind, bool_numbers=bool_numbers), ("self", "other")
        ),
        kernel=_with_names(
            _elementwise_kernel(fn, kind, opmath=opmath, number_other=number_other),
            ("self", "other"),
        ),
        doc=doc,
    )


# -- kernels NumPy lacks or gets differently from torch -----------------------------------------
# torch's CPU kernels are the specification: ATen's BinaryOps/UnaryOps kernels, c10's complex
# arithmetic (textbook formulas, no C99 Annex G rescue) and glibc's libm behind them.


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _is_complex(a: np.ndarray) -> bool:
    return a.dtype.kind == "c"


def _make_complex(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """A complex array from its parts, without the NaNs `real + 1j * imag` makes of infinities."""
    real, imag = np.broadcast_arrays(real, imag)
    out = np.empty(real.shape, np.result_type(real.dtype, np.complex64))
    out.real = real
    out.imag = imag
    return out


def _complex_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(ac - bd) + (ad + bc)i, as c10::complex and torch's vectorized loops compute it: an
    infinite operand times a finite one can give NaN parts, which NumPy avoids."""
    return _make_complex(a.real * b.real - a.imag * b.imag, a.real * b.imag + a.imag * b.real)


def _c99_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Complex multiplication with the C99 Annex G rescue of infinities (libgcc's __muldc3, used
    inside glibc's cpow): when both parts of the textbook product are NaN but an operand or a
    partial product is infinite, recompute with infinities boxed to ±1 and NaNs to ±0."""
    a, b = np.broadcast_arrays(a, b)
    x_re, x_im, y_re, y_im = (np.array(p, copy=True) for p in (a.real, a.imag, b.real, b.imag))
    ac, bd, ad, bc = x_re * y_re, x_im * y_im, x_re * y_im, x_im * y_re
    real, imag = ac - bd, ad + bc
    lost = np.isnan(real) & np.isnan(imag)
    if not lost.any():
        return _make_complex(real, imag)
    recompute = np.zeros(lost.shape, bool)
    for first, second in (((x_re, x_im), (y_re, y_im)), ((y_re, y_im), (x_re, x_im))):
        infinite = lost & (np.isinf(first[0]) | np.isinf(first[1]))
        for part in first:
            part[infinite] = np.copysign(
                np.isinf(part[infinite]).astype(part.dtype), part[infinite]
            )
        for part in second:
            fix = infinite & np.isnan(part)
            part[fix] = np.copysign(np.zeros((), part.dtype), part[fix])
        recompute |= infinite
    overflowed = lost & ~recompute & (np.isinf(ac) | np.isinf(bd) | np.isinf(ad) | np.isinf(bc))
    for part in (x_re, x_im, y_re, y_im):
        fix = overflowed & np.isnan(part)
        part[fix] = np.copysign(np.zeros((), part.dtype), part[fix])
    recompute |= overflowed
    inf = np.asarray(np.inf, real.dtype)
    real = np.where(recompute, inf * (x_re * y_re - x_im * y_im), real)
    imag = np.where(recompute, inf * (x_re * y_im + x_im * y_re), imag)
    return _make_complex(real, imag)


def _scale_complex(z: np.ndarray, factor: float) -> np.ndarray:
    """A real factor times a complex array, part by part (no 0 * inf cross terms)."""
    scale = np.asarray(factor, z.real.dtype)
    return _make_complex(z.real * scale, z.imag * scale)


def _add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch computes add as self + alpha * other with alpha = 1; for complex operands that is a
    complex product, so an infinite part of `other` turns the other part into NaN."""
    if _is_complex(a) or _is_complex(b):
        return np.add(a, _complex_mul(b, np.asarray(1, b.dtype)))
    return np.add(a, b)


def _sub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """self + alpha * other with alpha = -1 (see `_add`)."""
    if _is_complex(a) or _is_complex(b):
        return np.add(a, _complex_mul(b, np.asarray(-1, b.dtype)))
    return np.subtract(a, b)


def _mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_complex(a):
        return _complex_mul(a, b)
    return np.multiply(a, b)


def _check_integer_divisor(b: np.ndarray) -> None:
    if _is_int(b) and np.any(b == 0):
        raise ZeroDivisionError("integer division by zero")


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_int(a):
        _check_integer_divisor(b)
        # C-style truncation: the quotient of the magnitudes, signed. MIN / -1 wraps to MIN
        # (torch's own kernel traps there for int32/int64: SIGFPE).
        quotient = np.floor_divide(a, b)
        inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return quotient + inexact.astype(a.dtype)
    return np.true_divide(a, b)


def _opmath_number(fn: Callable[[Any, Any], Any]) -> NumberKernel:
    """torch's mul and div read a Python-number divisor/factor in float32 for float16/bfloat16
    tensors (TensorIterator's original scalar value) rather than rounding it to the tensor's
    dtype first; every other dtype and prim rounds it to the tensor's dtype."""

    def call(a: np.ndarray, number: Any) -> Any:
        dtype = DType.from_numpy(a.dtype)
        if dtype.is_low_precision:
            return fn(a.astype(np.float32), number_as(number, DType.float32))
        return fn(a, number_as(number, dtype))

    return call


def _fmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's fmod: the result takes the dividend's sign (the exact result, as torch's scalar loop
    computes it; its vectorized loop returns NaN where a / b overflows)."""
    if _is_int(a):
        _check_integer_divisor(b)
    return np.fmod(a, b)


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Result takes the divisor's sign. For floats torch computes fmod and adds the divisor when
    the signs disagree (keeping fmod's signed zero), which NumPy's divmod-based remainder does not."""
    if _is_int(a):
        _check_integer_divisor(b)
        return np.remainder(a, b)
    mod = np.fmod(a, b)
    fix = (mod != 0) & ((b < 0) != (mod < 0))
    return np.where(fix, mod + b, mod)


def _integer_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Powers by squaring wrap around like torch's; a negative exponent gives 0 except for the
    bases 1 and -1 (whose powers are ±1), as in torch."""
    negative = b < 0
    result = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    if np.any(negative):
        odd = (b.astype(np.int64) % 2) != 0
        inverse = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(a.dtype)
        result = np.where(negative, inverse, result)
    return result


def _complex_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """std::pow on complex numbers, i.e. glibc's cpow: exp(b * log(a))."""
    return np.exp(_c99_mul(b, np.log(a)))


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_int(a):
        return _integer_pow(a, b)
    if _is_complex(a):
        return _complex_pow(a, b)
    return np.power(a, b)


def _pow_number(a: np.ndarray, exponent: Any) -> np.ndarray:
    """torch.pow(tensor, number) (what prims.pow does with a Python-number exponent) takes fast
    paths whose special values differ from pow's: 0 -> ones, 1 -> a copy, and except for float16
    0.5 -> sqrt, -0.5 -> rsqrt, -1 -> reciprocal, 2 -> a*a, 3 -> a*a*a, -2 -> 1/(a*a) (bfloat16
    rounding after every operation). Integer tensors reject negative exponents."""
    dtype = DType.from_numpy(a.dtype)
    if exponent == 0:
        return np.ones(a.shape, a.dtype)
    if exponent == 1:
        return a.copy()
    if dtype.is_integral:
        if exponent < 0:
            raise ValueError("integers to negative integer powers are not allowed (torch.pow)")
        return _integer_pow(a, number_as(exponent, dtype))
    if dtype is not DType.float16:
        special_case = {0.5: _sqrt, -0.5: rsqrt_of, -1: reciprocal_of}.get(exponent)
        if special_case is not None:
            return opmath_call(special_case, [a], dtype)
        if exponent in (2, 3, -2):
            square = opmath_call(_mul, [a, a], dtype)
            if exponent == 3:
                return opmath_call(_mul, [square, a], dtype)
            return opmath_call(reciprocal_of, [square], dtype) if exponent == -2 else square
    return opmath_call(_pow, [a, number_as(exponent, dtype)], dtype)


def _gcd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Euclid's algorithm on the absolute values as torch runs it: the absolute value of the
    most negative integer wraps to itself, so gcd(MIN, x) can be negative. Iterates over the
    remainder sequence (at most ~90 steps for int64), vectorized over elements."""
    a, b = np.broadcast_arrays(a, b)
    x = np.array(np.abs(a), dtype=a.dtype, ndmin=1)
    y = np.array(np.abs(b), dtype=a.dtype, ndmin=1)
    active = x != 0
    while active.any():
        xs, ys = x[active], y[active]
        x[active] = np.fmod(ys, xs)
        y[active] = xs
        active = x != 0
    return y.reshape(a.shape)


def _shift_bits(a: np.ndarray) -> int:
    return a.dtype.itemsize * 8


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # torch gives 0 for shifts that are negative or at least the bit width.
    out_of_range = (b < 0) | (b >= _shift_bits(a))
    safe = np.where(out_of_range, 0, b).astype(a.dtype)
    return np.where(out_of_range, 0, np.left_shift(a, safe)).astype(a.dtype)


def _shift_right_arithmetic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # A shift that is negative or at least the bit width fills with the sign: -1 or 0.
    width = _shift_bits(a)
    out_of_range = (b < 0) | (b >= width)
    shift = np.where(out_of_range, 0, b).astype(a.dtype)
    sign_fill = (
        np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == "i" else np.zeros((), a.dtype)
    )
    return np.where(out_of_range, sign_fill, np.right_shift(a, shift)).astype(a.dtype)


def _nextafter(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's nextafter: b itself when a == b (so -0.0 toward 0.0 is 0.0)."""
    if a.dtype == DType.bfloat16.numpy:
        # NumPy has no nextafter for bfloat16: step the bit pattern.
        a, b = np.broadcast_arrays(a, b)
        bits = a.view(np.uint16).astype(np.int32)
        toward_larger = b > a
        positive = (bits & 0x8000) == 0
        step = np.where(toward_larger == positive, 1, -1)
        stepped = (bits + step) & 0xFFFF
        smallest = np.where(b > 0, 0x0001, 0x8001)
        stepped = np.where(a == 0, smallest, stepped)
        result = stepped.astype(np.uint16).view(a.dtype)
    else:
        result = np.nextafter(a, b)
    result = np.where(a == b, b, result)
    return np.where(np.isnan(a) | np.isnan(b), np.asarray(np.nan, a.dtype), result).astype(a.dtype)


def _signbit(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iub":
        return a < 0
    return np.signbit(a)


def sign_of(a: np.ndarray) -> np.ndarray:
    """(0 < a) - (a < 0): zero (of either sign) and NaN give +0."""
    if a.dtype == np.bool_:
        return a.copy()
    return (a > 0).astype(a.dtype) - (a < 0).astype(a.dtype)


def _integer_identity_or(
    fn: Callable[[np.ndarray], np.ndarray],
) -> Callable[[np.ndarray], np.ndarray]:
    """Rounding functions: integers are already whole."""

    def apply(a: np.ndarray) -> np.ndarray:
        return a.copy() if _is_int(a) else fn(a)

    return apply


def isfinite_of(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iub":
        return np.ones(a.shape, dtype=np.bool_)
    return np.isfinite(a)


def _exp2(a: np.ndarray) -> np.ndarray:
    # 2**z = exp(ln 2 * z), scaling the parts separately as torch does.
    return np.exp(_scale_complex(a, np.log(2.0))) if _is_complex(a) else np.exp2(a)


def _sqrt(a: np.ndarray) -> np.ndarray:
    return np.sqrt(a)


def reciprocal_of(a: np.ndarray) -> np.ndarray:
    return np.asarray(1, a.dtype) / a


def rsqrt_of(a: np.ndarray) -> np.ndarray:
    return reciprocal_of(_sqrt(a))


# MKL's vector erf when MKL is loaded (`vector_math.py`); without it float32 in vectorized
# passes (`erf_float32.py`, within 4 ulp), float64 by SciPy's double-precision routine
# (float16/bfloat16 reach here upcast to float32).
erf_of = vector_math.erf


def _complex_log1p(z: np.ndarray) -> np.ndarray:
    """torch's CPU log1p for complex numbers (Kahan's trick): with u = 1 + z, log(u) scaled by
    z / (u - 1), which keeps accuracy for small z and cannot overflow for huge z."""
    one = np.asarray(1, z.real.dtype)
    u = _make_complex(z.real + one, z.imag)
    log_u = np.log(u)
    shifted = _make_complex(u.real - one, u.imag)
    scaled = _complex_mul(log_u, z / shifted)
    result = np.where(shifted == z, log_u, scaled)
    return np.where(u == one, z, result)


def _log1p(a: np.ndarray) -> np.ndarray:
    return _complex_log1p(a) if _is_complex(a) else np.log1p(a)


def _lgamma(a: np.ndarray) -> np.ndarray:
    """lgamma as glibc computes it. scipy's gammaln overflows to inf below the smallest normal
    double (where lgamma(x) = -log|x| to double precision) and gives -inf at -inf (lgamma: +inf)."""
    result = special.gammaln(a)
    tiny = (np.abs(a) < np.finfo(np.float64).tiny) & (a != 0)
    result = np.where(tiny, -np.log(np.abs(a.astype(np.float64))), result)
    return np.where(np.isneginf(a), np.inf, result).astype(result.dtype)


def _incomplete_gamma(regularized: Callable[[Any, Any], Any], *, upper: bool) -> Callable[..., Any]:
    """torch's igamma/igammac: scipy's values, with torch's boundary rules applied first (they
    decide before looking at NaN: igamma(NaN, 0) = 0, igamma(inf, NaN) = 0, igamma(NaN, inf) = 1)."""

    # The values at x = 0 and at x = inf (the regularized lower function goes from 0 to 1).
    at_zero, at_inf = (1.0, 0.0) if upper else (0.0, 1.0)

    def apply(a: np.ndarray, x: np.ndarray) -> np.ndarray:
        nan = np.nan
        result = regularized(a, x)
        return np.select(
            [
                (x < 0) | (a < 0),
                a == 0,
                x == 0,
                np.isinf(a),
                np.isinf(x),
            ],
            [
                nan,
                np.where(x > 0, at_inf, nan),
                at_zero,
                np.where(np.isinf(x), nan, at_zero),
                at_inf,
            ],
            result,
        ).astype(result.dtype)

    return apply


# torch's zeta runs the Euler-Maclaurin correction with a_j = x (x+1) ... (x+2j) for j < 12.
_ZETA_FACTORS = np.arange(23)


def _zeta(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta with torch's rules: inf at x == 1 (even for NaN q), NaN for x < 1, inf at
    non-positive integer q, NaN at other negative q unless x is an integer, NaN for q = inf.
    When the sum underflows to 0, torch's correction terms evaluate 0 * a_j, which is NaN once
    the product a_j overflows (huge x): NaN there too."""
    result = special.zeta(x, q)
    wide = np.asarray(x, np.float64)[..., None]
    overflowing = np.sum(np.log(wide + _ZETA_FACTORS), axis=-1) > np.log(np.finfo(np.float64).max)
    nan = np.asarray(np.nan, result.dtype)
    inf = np.asarray(np.inf, result.dtype)
    non_positive = q <= 0
    return np.select(
        [
            x == 1,
            x < 1,
            non_positive & (q == np.floor(q)),
            non_positive & (x != np.floor(x)),
            np.isposinf(q) | ((result == 0) & overflowing),
        ],
        [inf, nan, inf, nan, nan],
        result,
    ).astype(result.dtype)


def _spherical_bessel_j0(a: np.ndarray) -> np.ndarray:
    return special.spherical_jn(0, a)


NUMERIC = INTS | FLOATS | COMPLEX
REAL_NUMERIC = BOOL | INTS | FLOATS
FLOAT_COMPLEX = FLOATS | COMPLEX
ORDERED = BOOL | INTS | FLOATS

# -- unary -------------------------------------------------------------------------------------
unary("abs", NUMERIC, np.abs, ResultKind.REAL)
unary("neg", NUMERIC, np.negative)
unary("sign", ORDERED, sign_of, doc="0 for zeros and NaN")
unary(
    "signbit",
    ORDERED,
    _signbit,
    ResultKind.BOOL,
    doc="torch's meta keeps the operand dtype; its CPU kernel (and this prim) return bool",
)
unary("isfinite", ALL, isfinite_of, ResultKind.BOOL)
unary("bitwise_not", BOOL | INTS, np.invert)
unary("ceil", INTS | FLOATS, _integer_identity_or(np.ceil))
unary("floor", INTS | FLOATS, _integer_identity_or(np.floor))
unary("round", INTS | FLOATS, _integer_identity_or(np.rint), doc="round half to even")
unary("trunc", INTS | FLOATS, _integer_identity_or(np.trunc))
FLOAT_COMPLEX_UNARY: dict[str, Callable[..., Any]] = {
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": vector_math.asinh,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "cos": vector_math.cos,
    "cosh": np.cosh,
    "exp": np.exp,
    "exp2": _exp2,
    "expm1": np.expm1,
    "log": np.log,
    "log10": np.log10,
    "log1p": _log1p,
    "log2": np.log2,
    "reciprocal": reciprocal_of,
    "rsqrt": rsqrt_of,
    "sin": vector_math.sin,
    "sinh": np.sinh,
    "sqrt": _sqrt,
    "tan": np.tan,
    "tanh": np.tanh,
}
for _name, _fn in FLOAT_COMPLEX_UNARY.items():
    unary(_name, FLOAT_COMPLEX, _fn)
_FLOAT_UNARY: dict[str, Callable[..., Any]] = {
    "bessel_i0": special.i0,
    "bessel_i0e": special.i0e,
    "bessel_i1": special.i1,
    "bessel_i1e": special.i1e,
    "cbrt": np.cbrt,
    "digamma": special.psi,
    "erf": erf_of,
    "erf_inv": vector_math.erf_inv,
    "erfc": vector_math.erfc,
    "lgamma": _lgamma,
}
for _name, _fn in _FLOAT_UNARY.items():
    unary(_name, FLOATS, _fn)
_F32_F64_UNARY: dict[str, Callable[..., Any]] = {
    "bessel_j0": special.j0,
    "bessel_j1": special.j1,
    "erfcx": special.erfcx,
    "ndtri": vector_math.ndtri,
    "spherical_bessel_j0": _spherical_bessel_j0,
}
for _name, _fn in _F32_F64_UNARY.items():
    unary(_name, F32_F64, _fn)
unary("conj_physical", COMPLEX, np.conjugate)
unary(
    "conj",
    COMPLEX,
    np.conjugate,
    doc="torch's lazy conjugate view; a functional graph materializes it",
    operand="a",
)
unary("real", COMPLEX, np.real, ResultKind.REAL, opmath=False, view=True)
unary("imag", COMPLEX, np.imag, ResultKind.REAL, opmath=False, view=True)

# -- binary -------------------------------------------------------------------------------------
binary("add", ALL, _add)
binary("mul", ALL, _mul, number_other=_opmath_number(_mul))
binary("sub", NUMERIC, _sub, bool_numbers=False)
binary(
    "div",
    NUMERIC,
    _div,
    number_other=_opmath_number(_div),
    doc="true division for floats and complex, truncation for integers",
)
binary("atan2", FLOATS, np.arctan2)
binary("hypot", FLOATS, np.hypot)
binary("igamma", FLOATS, _incomplete_gamma(special.gammainc, upper=False))
binary("igammac", FLOATS, _incomplete_gamma(special.gammaincc, upper=True))
binary("nextafter", FLOATS, _nextafter, opmath=False)
binary("zeta", F32_F64, _zeta)
binary("bitwise_and", BOOL | INTS, np.bitwise_and)
binary("bitwise_or", BOOL | INTS, np.bitwise_or)
binary("bitwise_xor", BOOL | INTS, np.bitwise_xor)
binary("gcd", INTS, _gcd)
binary("shift_left", INTS, _shift_left)
binary("shift_right_arithmetic", INTS, _shift_right_arithmetic)
binary("eq", ALL, np.equal, ResultKind.BOOL, opmath=False)
binary("ne", ALL, np.not_equal, ResultKind.BOOL, opmath=False)
binary("ge", ORDERED, np.greater_equal, ResultKind.BOOL, opmath=False)
binary("gt", ORDERED, np.greater, ResultKind.BOOL, opmath=False)
binary("le", ORDERED, np.less_equal, ResultKind.BOOL, opmath=False)
binary("lt", ORDERED, np.less, ResultKind.BOOL, opmath=False)
binary("maximum", ORDERED, np.maximum, opmath=False, doc="propagates NaN")
binary("minimum", ORDERED, np.minimum, opmath=False, doc="propagates NaN")
binary("fmax", ORDERED, np.fmax, opmath=False, doc="ignores NaN")
binary("fmin", ORDERED, np.fmin, opmath=False, doc="ignores NaN")
binary("fmod", INTS | FLOATS, _fmod, doc="result takes the dividend's sign")
binary("remainder", INTS | FLOATS, _remainder, doc="result takes the divisor's sign")
binary("pow", NUMERIC, _pow, number_other=_pow_number)


# -- where ----------------------------------------------------------------------------------------
def _where_meta(pred: Any, a: Any, b: Any) -> TensorMeta:
    if not is_tensor(pred) or pred.dtype is not DType.bool:
        raise DTypeError(f"pred must be a bool tensor, got {pred!r}")
    shape, dtype = elementwise_operands((a, b))
    if pred.ndim != 0 and shape != () and pred.shape != shape:
        raise ShapeError(f"pred shape {list(pred.shape)} differs from the operands' {list(shape)}")
    return elementwise_result(shape if shape != () else pred.shape, dtype, (pred, a, b))


def _where_kernel(pred: np.ndarray, a: Any, b: Any) -> np.ndarray:
    (a, b), dtype = _arrays((a, b))
    return np.where(pred, a, b).astype(dtype.numpy, copy=False)


ELEMENTWISE["where"] = ElementwiseSpec("where", 3, ALL, ResultKind.SAME)
register(
    "where(Tensor pred, Tensor a, Tensor b) -> Tensor",
    meta=_where_meta,
    kernel=_where_kernel,
    doc="selects a where pred is true, else b",
)
