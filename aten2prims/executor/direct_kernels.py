"""Direct kernels: the plain NumPy call an elementwise prim's kernel makes for standard dtypes.

For operands of one dtype that NumPy computes natively (no float16/bfloat16 opmath, no complex
special case of the function), an elementwise kernel reduces to one call of its table function
on the operands, Python numbers converted with `number_as` to that dtype first; that function's
result already has the prim's result dtype. The executor calls it directly, its numbers
converted once at plan time (tests/test_executor.py checks every entry bit for bit against the
kernel)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from prims import vector_math
from prims.common import BOOL, COMPLEX, F32_F64, INTS
from prims.elementwise import (
    FLOAT_COMPLEX_UNARY,
    isfinite_of,
    reciprocal_of,
    rsqrt_of,
    sign_of,
)

from ..ir.dtypes import DType

REAL_STANDARD = BOOL | INTS | F32_F64
STANDARD = REAL_STANDARD | COMPLEX

# prim name -> (function, operand dtypes for which it is the kernel's whole computation)
DIRECT_KERNELS: dict[str, tuple[Callable[..., Any], frozenset[DType]]] = {
    "add": (np.add, REAL_STANDARD),
    "sub": (np.subtract, REAL_STANDARD),
    "mul": (np.multiply, REAL_STANDARD),
    "div": (np.true_divide, F32_F64),
    "eq": (np.equal, STANDARD),
    "ne": (np.not_equal, STANDARD),
    "ge": (np.greater_equal, REAL_STANDARD),
    "gt": (np.greater, REAL_STANDARD),
    "le": (np.less_equal, REAL_STANDARD),
    "lt": (np.less, REAL_STANDARD),
    "maximum": (np.maximum, REAL_STANDARD),
    "minimum": (np.minimum, REAL_STANDARD),
    "fmax": (np.fmax, REAL_STANDARD),
    "fmin": (np.fmin, REAL_STANDARD),
    "bitwise_and": (np.bitwise_and, BOOL | INTS),
    "bitwise_or": (np.bitwise_or, BOOL | INTS),
    "bitwise_xor": (np.bitwise_xor, BOOL | INTS),
    "bitwise_not": (np.invert, BOOL | INTS),
    "neg": (np.negative, INTS | F32_F64 | COMPLEX),
    "abs": (np.abs, INTS | F32_F64 | COMPLEX),
    "sign": (sign_of, REAL_STANDARD),
    "isfinite": (isfinite_of, STANDARD),
    "ceil": (np.ceil, F32_F64),
    "floor": (np.floor, F32_F64),
    "round": (np.rint, F32_F64),
    "trunc": (np.trunc, F32_F64),
    "exp2": (np.exp2, F32_F64),
    "log1p": (np.log1p, F32_F64),
    "reciprocal": (reciprocal_of, F32_F64 | COMPLEX),
    "rsqrt": (rsqrt_of, F32_F64 | COMPLEX),
    "sqrt": (np.sqrt, F32_F64 | COMPLEX),
    # The float/complex unary prims whose kernel is one ufunc or one vector_math kernel (MKL's
    # vector math or NumPy's, chosen at each call): that function, where NumPy's dtype is the
    # prim's (no float16/bfloat16 opmath).
    **{
        name: (function, F32_F64 | COMPLEX)
        for name, function in FLOAT_COMPLEX_UNARY.items()
        if isinstance(function, np.ufunc | vector_math.VectorFunction)
    },
    # The float-only prims of vector_math (erf, erfc, erf_inv, ndtri).
    **{
        name: (function, F32_F64)
        for name, function in vector_math.KERNELS.items()
        if name not in FLOAT_COMPLEX_UNARY
    },
    "where": (np.where, STANDARD),
}

# Direct kernels that are not ufuncs but take `out=` as one does (an array of the result's shape
# and dtype, written with the result, which is returned; it may be an operand itself, element
# for element: buffer reuse writes into a dying operand).
TAKE_OUT: frozenset[Callable[..., Any]] = frozenset(vector_math.KERNELS.values())


# Direct kernels that make many short NumPy calls on any operand (float32 erf without MKL:
# fifteen passes over blocks of 64K elements, erf_float32.py). Two threads each making such
# calls hand the GIL to each other at nearly every call, each hand-over tens of microseconds on
# a VM whose idle cores halt: GELU's passes over 0.5 to 4.8M elements in four parts on two
# threads took 0.94 to 1.31 times as long as whole on one. Their steps are no segment's
# members and split into parts only when large (threads.SHORT_CALLS_PART_BYTES, their parts then
# over longer blocks); the others run whole, on the
# calling thread (docs/executor.md#where-a-two-thread-call-goes). vector_math.erf is MKL's one
# call or those passes, chosen at each call; with MKL, GELU in parts on two threads was no
# faster either (0.5M, 0.6M and 4.8M elements: 1.21, 1.17 and 8.62 ms against 1.13, 1.17 and
# 8.23 whole), so it counts as making short calls in both modes.
SHORT_CALLS: frozenset[Callable[..., Any]] = frozenset({vector_math.erf})


# Ufuncs whose NumPy loops run an operand of stride 0 (broadcast along the innermost dims)
# through their SIMD code, as fast as a contiguous one, for operands of the dtypes of
# IN_PLACE_BROADCAST_DTYPES: read in place rather than copied into NumPy's buffer
# (unbuffered.py). maximum, minimum, fmax, fmin and arctan2 run such an operand through scalar
# code, twice as slow as copying it (float32 over 1 MiB: maximum 105 against 48 us), and are
# not here.
IN_PLACE_BROADCASTS: frozenset[Callable[..., Any]] = frozenset(
    {
        np.add,
        np.subtract,
        np.multiply,
        np.true_divide,
        np.equal,
        np.not_equal,
        np.greater,
        np.greater_equal,
        np.less,
        np.less_equal,
    }
)


# The operand dtypes for which IN_PLACE_BROADCASTS gain (rows of 768, 1 MiB of float32 or the
# same elements of the others: float32, float64, int32, int64 1.5-2.1x faster in place); with
# 1- and 2-byte operands NumPy's copy into its buffer is cheap and its stride-0 loops are not
# faster (int8 add 12 against 19 us in place, bool add 11 against 155, float16 multiply 1.07
# against 1.79 ms).
IN_PLACE_BROADCAST_DTYPES: frozenset[DType] = frozenset(
    {DType.float32, DType.float64, DType.int32, DType.int64}
)


def makes_short_calls(kernel: Any) -> bool:
    """Whether a step's kernel works in many short NumPy calls (`SHORT_CALLS`, or a fused
    kernel saying so through its `short_calls` attribute): not worth sharing between threads."""
    if getattr(kernel, "short_calls", False):
        return True
    try:
        return kernel in SHORT_CALLS
    except TypeError:  # an unhashable kernel (a mutable attrs instance) is none of them
        return False


def takes_out(function: Callable[..., Any]) -> bool:
    """Whether a direct kernel writes its result into `out=` (single-output ufuncs and TAKE_OUT)."""
    if isinstance(function, np.ufunc):
        return function.nout == 1
    return function in TAKE_OUT


def direct_kernel(name: str, dtype: DType) -> Callable[..., Any] | None:
    """The function that computes prims.<name> on operands of `dtype` (numbers converted with
    `number_as` first) exactly as its kernel does, or None. For `where`, `dtype` is that of a
    and b (the predicate is bool)."""
    entry = DIRECT_KERNELS.get(name)
    if entry is None or dtype not in entry[1]:
        return None
    return entry[0]
