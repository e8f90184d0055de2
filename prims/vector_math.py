"""Elementwise special functions computed by Intel oneMKL's vector math (VML) when MKL is loaded
(`prims/mkl.py`), by NumPy or SciPy otherwise: erf above all (GELU's cost).

Why: NumPy has no vectorized erf (our float32 erf, `erf_float32.py`, makes 15 passes), SciPy's
float64 erf, erfc, erfinv and ndtri run about 12 ns per element and NumPy's float64 sin and cos
15 ns, while VML computes each in one vectorized pass, within 1 ulp in its high-accuracy mode.
Measured at one thread (process CPU time, 1M and 64K elements, VML against the NumPy/SciPy
kernel): erf 3.4-3.6x faster in float32 and 9.5-13x in float64, erfc 6-9x, erfinv 9-21x,
ndtri 5-14x, float64 sin and cos 10-17x, float64 asinh 1.4x.

A function is here only where VML is faster on ordinary values and not much slower on special
ones. VML computes NaN, infinities, overflow, underflow and out-of-domain operands on a slow
path: with half the operands such, float32 exp ran 16-35x NumPy's time (exp(-inf) of a
causal mask, exp of x - max underflowing to 0), float32 log and 1/sqrt 22-29x (of zeros and
negative numbers), float64 expm1 5x (NaN), float64 tan, sinh, cosh, acos and acosh 1.2-1.9x,
so those stay NumPy's (as do float32 exp, log, tanh, sin, cos, whose NumPy SIMD loops gain
at most 2x on ordinary values and float64 exp and log, which gain less than 1.15x). The
functions kept cost at most NumPy's time on such operands, except float32 ndtri of zeros
(1.07x), float64 sin of subnormals (2.1x) and float64 ndtri of subnormal probabilities (3.1x).
VML's error mode "no error status" skips that slow path but gives wrong special values
(exp(+inf) = NaN), and flush-to-zero alone does not skip it; the mode stays `VML_HIGH_ACCURACY`
(errors ignored, status kept).

A kernel `f(a, out=None)` decides at each call (never cached in a plan, so `mkl.disabled()`
switches it back): VML when `mkl.library()` is not None and `a` is an array of a dtype its
entry lists, the fallback otherwise (other dtypes, complex, MKL absent or disabled). The
choice depends on nothing but the dtype and MKL: an operand that is not row-major, or
broadcast to `out`'s shape, is first copied into the result, which VML then computes in place
(VML's results were checked independent of an element's position and of the array's length
and alignment, so a block or a part of an array gets the bits the whole array gets). VML runs
with flush-to-zero and denormals-are-zero off: subnormal operands and results are kept, as
torch's CPU kernels keep them. NaN, infinities and signed zeros come out as the C99 functions
give them, as NumPy's and SciPy's do (`tests/test_vector_math.py` checks every entry within
1 ulp of the correctly rounded value, special values and subnormals included, and against
torch).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
import scipy.special as special

from . import mkl
from .erf_float32 import erf_float32, long_blocks

_FLOAT32: np.dtype = np.dtype(np.float32)
_FLOAT64: np.dtype = np.dtype(np.float64)
_MODE = mkl.VML_HIGH_ACCURACY | mkl.VML_FTZDAZ_OFF

Fallback = Callable[..., Any]  # fallback(a, out=None), out= as a ufunc takes it


class VectorFunction:
    """One prim's kernel: VML's `vms<name>` / `vmd<name>` for the dtypes in `dtypes`, the
    fallback for everything else (see the module's docstring)."""

    def __init__(
        self, name: str, vml_name: str, fallback: Fallback, dtypes: frozenset[np.dtype]
    ) -> None:
        self.name = name
        self.vml_name = vml_name
        self.fallback = fallback
        self.dtypes = dtypes
        # The prototyped functions of the library last seen, by dtype (looked up once).
        self._bound: tuple[mkl.Mkl, dict[np.dtype, Callable[..., None]]] | None = None

    @property
    def __name__(self) -> str:  # named in plan_profile's reports, as ufuncs are
        return self.name

    def __repr__(self) -> str:
        return f"VectorFunction({self.name!r})"

    def __call__(self, a: Any, out: np.ndarray | None = None) -> Any:
        library = mkl.library()
        dtype = getattr(a, "dtype", None)
        if library is None or dtype not in self.dtypes or (out is not None and out.dtype != dtype):
            return self.fallback(a) if out is None else self.fallback(a, out=out)
        function = self._function(library, dtype)
        if out is None:
            result = np.empty(np.shape(a), dtype)
        elif out.flags.c_contiguous:
            result = out
        else:  # computed contiguous, then copied into the strided `out`
            out[...] = self(a)
            return out
        if result.size == 0:
            return result
        source = a
        if not (
            type(a) is np.ndarray
            and a.shape == result.shape
            and a.flags.c_contiguous
            and (a.ctypes.data == result.ctypes.data or not np.may_share_memory(a, result))
        ):
            if np.may_share_memory(a, result):
                a = np.array(a)  # overlapping other than element for element
            np.copyto(result, a)
            source = result
        function(result.size, source.ctypes.data, result.ctypes.data, _MODE)
        return result

    def _function(self, library: mkl.Mkl, dtype: np.dtype) -> Callable[..., None]:
        bound = self._bound
        if bound is None or bound[0] is not library:
            bound = self._bound = (library, {})
        function = bound[1].get(dtype)
        if function is None:
            prefix = "vms" if dtype == _FLOAT32 else "vmd"
            function = bound[1][dtype] = library.vector_function(prefix + self.vml_name)
        return function


def _with_out(function: Callable[[np.ndarray], np.ndarray]) -> Fallback:
    """`function` given the ufunc's `out=`: its result copied into `out`."""

    def apply(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        result = function(a)
        if out is None:
            return result
        np.copyto(out, result)
        return out

    apply.__name__ = function.__name__
    return apply


def _erf(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float32 in vectorized passes (`erf_float32.py`, within 4 ulp), other floats by SciPy's
    double-precision routine."""
    if a.dtype == np.float32:
        return erf_float32(a, out=out)
    return special.erf(a, out=out)


def long_calls() -> AbstractContextManager[None]:
    """On this thread, the kernels here that make many short NumPy calls (float32 erf's passes
    without MKL) make fewer, longer ones: for a thread running one of several threads' parts of
    a step, which hand the GIL to each other at the end of every call. The same bits."""
    return long_blocks()


def _erf_inv(a: np.ndarray) -> np.ndarray:
    """SciPy's erfinv keeping the sign of zero, as torch's does: scipy's erfinv(-0.0) is +0.0."""
    result = special.erfinv(a)
    return np.where(a == 0, a, result).astype(result.dtype, copy=False)


_FLOAT64_ONLY: frozenset[np.dtype] = frozenset({_FLOAT64})
_BOTH: frozenset[np.dtype] = frozenset({_FLOAT32, _FLOAT64})

erf = VectorFunction("erf", "Erf", _erf, _BOTH)
erfc = VectorFunction("erfc", "Erfc", special.erfc, _BOTH)
erf_inv = VectorFunction("erf_inv", "ErfInv", _with_out(_erf_inv), _BOTH)
ndtri = VectorFunction("ndtri", "CdfNormInv", special.ndtri, _BOTH)
sin = VectorFunction("sin", "Sin", np.sin, _FLOAT64_ONLY)
cos = VectorFunction("cos", "Cos", np.cos, _FLOAT64_ONLY)
asinh = VectorFunction("asinh", "Asinh", np.arcsinh, _FLOAT64_ONLY)

# Every kernel, by the prim it computes.
KERNELS: dict[str, VectorFunction] = {
    kernel.name: kernel for kernel in (erf, erfc, erf_inv, ndtri, sin, cos, asinh)
}
