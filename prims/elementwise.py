"""Elementwise prims: unary, binary and `where`, with torch's CPU dtype domains.

Each prim is one line of a table: its name, the dtypes it accepts (probed against torch 2.13
eager, see docs/prims.md), how its result dtype follows from the operand dtype, and a NumPy
function. float16/bfloat16 compute in float32 and round back, as torch's CPU kernels do.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as special

from aten2prims.errors import DTypeError, ShapeError
from aten2prims.ir.dtypes import DType
from aten2prims.ir.values import TensorMeta

from .common import (
    ALL,
    BOOL,
    COMPLEX,
    F32_F64,
    FLOATS,
    INTS,
    check_dtype,
    elementwise_operands,
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


def _result_dtype(dtype: DType, kind: ResultKind) -> DType:
    if kind is ResultKind.BOOL:
        return DType.bool
    if kind is ResultKind.REAL:
        return dtype.real
    return dtype


def _elementwise_meta(domain: frozenset[DType], kind: ResultKind) -> Callable[..., TensorMeta]:
    def meta(*args: Any) -> TensorMeta:
        shape, dtype = elementwise_operands(args)
        check_dtype(dtype, domain)
        return TensorMeta(shape, _result_dtype(dtype, kind))

    return meta


def _arrays(args: tuple[Any, ...]) -> tuple[list[Any], DType]:
    """Operands as arrays of one dtype: Python numbers become 0-dim arrays of the tensors' dtype."""
    dtype = next(DType.from_numpy(a.dtype) for a in args if not is_number(a))
    return [number_as(a, dtype) if is_number(a) else a for a in args], dtype


def _elementwise_kernel(fn: Callable[..., Any], kind: ResultKind, *, opmath: bool = True) -> Callable[..., Any]:
    def kernel(*args: Any) -> np.ndarray:
        arrays, dtype = _arrays(args)
        result = opmath_call(fn, arrays, dtype) if opmath else fn(*arrays)
        return np.asarray(result).astype(_result_dtype(dtype, kind).numpy, copy=False)

    return kernel


def _with_names(function: Callable[..., Any], names: tuple[str, ...]) -> Callable[..., Any]:
    """Give a generic (*args) function the schema's parameter names, so the registry can check
    them and callers can bind by name."""
    namespace: dict[str, Any] = {"_f": function}
    params = ", ".join(names)
    exec(f"def bound({params}):\n    return _f({params})\n", namespace)  # noqa: S102 - fixed template
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
) -> None:
    register(
        f"{name}(Tensor self) -> Tensor",
        meta=_with_names(_elementwise_meta(domain, kind), ("self",)),
        kernel=_with_names(_elementwise_kernel(fn, kind, opmath=opmath), ("self",)),
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
    doc: str = "",
) -> None:
    register(
        f"{name}(Tensor self, Tensor other) -> Tensor",
        meta=_with_names(_elementwise_meta(domain, kind), ("self", "other")),
        kernel=_with_names(_elementwise_kernel(fn, kind, opmath=opmath), ("self", "other")),
        doc=doc,
    )


# -- kernels NumPy lacks or gets differently from torch -----------------------------------------


def _is_int(a: np.ndarray) -> bool:
    return a.dtype.kind in "iu"


def _check_integer_divisor(b: np.ndarray) -> None:
    if _is_int(b) and np.any(b == 0):
        raise ZeroDivisionError("integer division by zero")


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_int(a):
        _check_integer_divisor(b)
        # C-style truncation: the quotient of the magnitudes, signed.
        quotient = np.floor_divide(a, b)
        inexact = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return quotient + inexact.astype(a.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.true_divide(a, b)


def _fmod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_int(a):
        _check_integer_divisor(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Result takes the divisor's sign. For floats torch computes fmod and adds the divisor when
    the signs disagree (keeping fmod's signed zero), which NumPy's divmod-based remainder does not."""
    if _is_int(a):
        _check_integer_divisor(b)
        return np.remainder(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        mod = np.fmod(a, b)
        fix = (mod != 0) & ((b < 0) != (mod < 0))
        return np.where(fix, mod + b, mod)


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _is_int(a):
        # Integer powers: negative exponents give 0 except for bases 1 and -1, as in torch.
        negative = b < 0
        result = np.power(a, np.where(negative, 0, b).astype(b.dtype))
        if np.any(negative):
            odd = (np.abs(b.astype(np.int64)) % 2) == 1
            inverse = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(a.dtype)
            result = np.where(negative, inverse, result)
        return result
    with np.errstate(all="ignore"):
        return np.power(a, b)


def _shift_bits(a: np.ndarray) -> int:
    return a.dtype.itemsize * 8


def _shift_left(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # torch gives 0 for shifts that are negative or at least the bit width.
    out_of_range = (b < 0) | (b >= _shift_bits(a))
    safe = np.where(out_of_range, 0, b).astype(a.dtype)
    return np.where(out_of_range, 0, np.left_shift(a, safe)).astype(a.dtype)


def _shift_right_arithmetic(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # torch shifts by width-1 (sign fill) when the shift is negative or at least the bit width.
    width = _shift_bits(a)
    shift = np.where((b < 0) | (b >= width), width - 1, b).astype(a.dtype)
    return np.right_shift(a, shift)


def _nextafter(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype in (np.float32, np.float64, np.float16):
        return np.nextafter(a, b)
    # bfloat16: step the bit pattern (NumPy has no nextafter for it).
    a, b = np.broadcast_arrays(a, b)
    bits = a.view(np.uint16).astype(np.int32)
    toward_larger = b > a
    positive = (bits & 0x8000) == 0
    step = np.where(toward_larger == positive, 1, -1)
    stepped = (bits + step) & 0xFFFF
    zero = a == 0
    smallest = np.where(b > 0, 0x0001, 0x8001)
    stepped = np.where(zero, smallest, stepped)
    result = stepped.astype(np.uint16).view(a.dtype)
    result = np.where(a == b, b, result)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, result).astype(a.dtype)


def _signbit(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iub":
        return a < 0
    return np.signbit(a)


def _sign(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.bool_:
        return a.copy()
    return np.sign(a)


def _integer_identity_or(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """Rounding functions: integers are already whole."""

    def apply(a: np.ndarray) -> np.ndarray:
        return a.copy() if _is_int(a) else fn(a)

    return apply


def _isfinite(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iub":
        return np.ones(a.shape, dtype=np.bool_)
    return np.isfinite(a)


def _exp2(a: np.ndarray) -> np.ndarray:
    return np.power(np.asarray(2, a.dtype), a) if a.dtype.kind == "c" else np.exp2(a)


def _rsqrt(a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(1, a.dtype) / np.sqrt(a)


def _reciprocal(a: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(1, a.dtype) / a


def _spherical_bessel_j0(a: np.ndarray) -> np.ndarray:
    return special.spherical_jn(0, a)


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy warns where torch silently returns inf/nan; the values are what torch gives."""

    def call(*arrays: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*arrays)

    return call


NUMERIC = INTS | FLOATS | COMPLEX
REAL_NUMERIC = BOOL | INTS | FLOATS
FLOAT_COMPLEX = FLOATS | COMPLEX
ORDERED = BOOL | INTS | FLOATS

# -- unary -------------------------------------------------------------------------------------
unary("abs", NUMERIC, np.abs, ResultKind.REAL)
unary("neg", NUMERIC, np.negative)
unary("sign", ORDERED, _sign)
unary("signbit", ORDERED, _signbit, ResultKind.BOOL, doc="torch's meta keeps the operand dtype; its CPU kernel (and this prim) return bool")
unary("isfinite", ALL, _isfinite, ResultKind.BOOL)
unary("bitwise_not", BOOL | INTS, np.invert)
unary("ceil", INTS | FLOATS, _integer_identity_or(np.ceil))
unary("floor", INTS | FLOATS, _integer_identity_or(np.floor))
unary("round", INTS | FLOATS, _integer_identity_or(np.rint), doc="round half to even")
unary("trunc", INTS | FLOATS, _integer_identity_or(np.trunc))
for _name, _fn in {
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "cos": np.cos, "cosh": np.cosh, "exp": np.exp,
    "exp2": _exp2, "expm1": np.expm1, "log": np.log, "log10": np.log10, "log1p": np.log1p,
    "log2": np.log2, "reciprocal": _reciprocal, "rsqrt": _rsqrt, "sin": np.sin, "sinh": np.sinh,
    "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh,
}.items():  # fmt: skip
    unary(_name, FLOAT_COMPLEX, _quiet(_fn))
for _name, _fn in {
    "bessel_i0": special.i0, "bessel_i0e": special.i0e, "bessel_i1": special.i1,
    "bessel_i1e": special.i1e, "cbrt": np.cbrt, "digamma": special.psi, "erf": special.erf,
    "erf_inv": special.erfinv, "erfc": special.erfc, "lgamma": special.gammaln,
}.items():  # fmt: skip
    unary(_name, FLOATS, _quiet(_fn))
for _name, _fn in {
    "bessel_j0": special.j0, "bessel_j1": special.j1, "erfcx": special.erfcx,
    "ndtri": special.ndtri, "spherical_bessel_j0": _spherical_bessel_j0,
}.items():  # fmt: skip
    unary(_name, F32_F64, _quiet(_fn))
unary("conj_physical", COMPLEX, np.conjugate)
unary("conj", COMPLEX, np.conjugate, doc="torch's lazy conjugate view; a functional graph materializes it")
unary("real", COMPLEX, np.real, ResultKind.REAL, opmath=False, view=True)
unary("imag", COMPLEX, np.imag, ResultKind.REAL, opmath=False, view=True)

# -- binary -------------------------------------------------------------------------------------
binary("add", ALL, np.add)
binary("mul", ALL, np.multiply)
binary("sub", NUMERIC, np.subtract)
binary("div", NUMERIC, _div, doc="true division for floats and complex, truncation for integers")
binary("atan2", FLOATS, np.arctan2)
binary("hypot", FLOATS, np.hypot)
binary("igamma", FLOATS, _quiet(special.gammainc))
binary("igammac", FLOATS, _quiet(special.gammaincc))
binary("nextafter", FLOATS, _nextafter, opmath=False)
binary("zeta", F32_F64, _quiet(special.zeta))
binary("bitwise_and", BOOL | INTS, np.bitwise_and)
binary("bitwise_or", BOOL | INTS, np.bitwise_or)
binary("bitwise_xor", BOOL | INTS, np.bitwise_xor)
binary("gcd", INTS, np.gcd)
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
binary("pow", NUMERIC, _pow)


# -- where ----------------------------------------------------------------------------------------
def _where_meta(pred: Any, a: Any, b: Any) -> TensorMeta:
    if not is_tensor(pred) or pred.dtype is not DType.bool:
        raise DTypeError(f"pred must be a bool tensor, got {pred!r}")
    shape, dtype = elementwise_operands((a, b))
    if pred.ndim != 0 and shape != () and pred.shape != shape:
        raise ShapeError(f"pred shape {list(pred.shape)} differs from the operands' {list(shape)}")
    return TensorMeta(shape if shape != () else pred.shape, dtype)


def _where_kernel(pred: np.ndarray, a: Any, b: Any) -> np.ndarray:
    (a, b), dtype = _arrays((a, b))
    return np.where(pred, a, b).astype(dtype.numpy, copy=False)


register(
    "where(Tensor pred, Tensor a, Tensor b) -> Tensor",
    meta=_where_meta,
    kernel=_where_kernel,
    doc="selects a where pred is true, else b",
)
