"""Intel oneMKL's matrix products and vector math, used by kernels when the optional `mkl`
package is installed (the `mkl` extra); NumPy's own kernels otherwise.

Why: NumPy's wheels carry OpenBLAS, whose float32 products run 1.1-1.35x slower than MKL's on
the shapes convolutions and linear layers make here, and NumPy has no vectorized erf (GELU's
cost). MKL's VML computes erf and its kin in one pass, within 1 ulp in its high-accuracy
mode (prims/vector_math.py uses it where it is faster). The library is called through `ctypes`
on NumPy arrays' memory: ctypes releases the GIL for the call, so the executor's threads run
MKL calls side by side.

MKL is loaded with its sequential threading layer (one thread per call: the executor splits
work into parts itself, so results do not depend on the thread count) and with conditional
numerical reproducibility set to AUTO (results do not depend on the arrays' alignment). When
the library is absent, cannot be loaded, or another MKL user in the process already chose a
threaded layer, `library()` is None and every kernel uses NumPy. `disabled()` turns it off
within a block (the tests run both kernels).

MKL is used on Intel CPUs only: on others (AMD's among them) it runs generic code paths, and its
sgemm measured 4.7x slower than NumPy's OpenBLAS on an AMD EPYC (1568x768 @ 768x3072: 91 ms
against 19; whole models 1.4-2.0x slower than with NumPy's kernels). `ATEN2PRIMS_MKL=0` in the
environment turns MKL off for the process, `ATEN2PRIMS_MKL=1` on for any x86-64 CPU (the tests
set it, so both kernels are tested on every machine); unset, the CPU's vendor decides.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs

from prims.optional_library import OptionalLibrary

# MKL's enumerations (mkl_types.h, mkl_vml_defines.h, mkl_cbwr.h); ROW_MAJOR, NO_TRANSPOSE and
# TRANSPOSE are cblas.h's, the same in every CBLAS (executor/blas.py passes them to OpenBLAS too).
_THREADING_SEQUENTIAL = 1
_CBWR_AUTO = 2
_CBWR_SUCCESS = 0
ROW_MAJOR = 101
NO_TRANSPOSE = 111
TRANSPOSE = 112
# High accuracy (at most 1 ulp), and no error callback or errno for domain errors: NaN and inf
# come out as IEEE arithmetic gives them, as NumPy's do.
VML_HIGH_ACCURACY = 0x2 | 0x100
# Subnormal operands and results kept (flush-to-zero and denormals-are-zero off for the call),
# whatever the caller's floating-point control word says: torch's CPU kernels keep them.
VML_FTZDAZ_OFF = 0x00140000

_int = ctypes.c_int
_long = ctypes.c_longlong
_pointer = ctypes.c_void_p


@attrs.frozen
class Mkl:
    """The loaded library with the prototypes of the functions kernels call."""

    path: Path
    handle: ctypes.CDLL = attrs.field(repr=False)
    # The largest size, leading dimension or stride its LP64 interface takes (32-bit ints)
    max_int: int = (1 << 31) - 1
    # Whether it makes plain products (out = x @ y) too, not only accumulating ones: MKL's gemm
    # is faster than NumPy's OpenBLAS on the Intel CPUs it is used on.
    plain_products: bool = True

    def gemm(self, float_type: type) -> Callable[..., None]:
        """cblas_sgemm (float_type c_float) or cblas_dgemm (c_double): (layout, transa,
        transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)."""
        return _prototyped(
            self.handle,
            "cblas_sgemm" if float_type is ctypes.c_float else "cblas_dgemm",
            [_int] * 6 + [float_type, _pointer, _int, _pointer, _int, float_type, _pointer, _int],
        )

    def gemm_batch_strided(self, float_type: type) -> Callable[..., None]:
        """cblas_?gemm_batch_strided: (layout, transa, transb, m, n, k, alpha, a, lda,
        stridea, b, ldb, strideb, beta, c, ldc, stridec, batch_size)."""
        name = (
            "cblas_sgemm_batch_strided"
            if float_type is ctypes.c_float
            else "cblas_dgemm_batch_strided"
        )
        return _prototyped(
            self.handle,
            name,
            [_int] * 6
            + [float_type, _pointer, _int, _long, _pointer, _int, _long, float_type]
            + [_pointer, _int, _long, _int],
        )

    def axpy_batch(self, float_type: type) -> Callable[..., None]:
        """cblas_saxpy_batch (c_float) or cblas_daxpy_batch (c_double), the group interface:
        (n, alpha, x, incx, y, incy, group_count, group_size), each but group_count an array
        with one entry per group (x and y: one pointer per problem). Each problem is
        y += alpha * x; a problem whose alpha is zero is skipped (BLAS's quick return), so its
        y does not become NaN where x is inf or NaN."""
        name = "cblas_saxpy_batch" if float_type is ctypes.c_float else "cblas_daxpy_batch"
        return _prototyped(self.handle, name, [_pointer] * 6 + [_int, _pointer])

    def vector_function(self, name: str) -> Callable[..., None]:
        """A VML function with an explicit mode, `vms<Name>` / `vmd<Name>` (e.g. "vmsErf"):
        (n, a, y, mode) for one operand, (n, a, b, y, mode) for two; n is a 64-bit count."""
        operands = 2 if name[3:] in _BINARY_VML else 1
        return _prototyped(self.handle, name, [_long] + [_pointer] * (operands + 1) + [_long])


_BINARY_VML = frozenset({"Pow", "Atan2", "Hypot", "Div", "Mul", "Add", "Sub", "Fmod", "Remainder"})


def _prototyped(handle: ctypes.CDLL, name: str, argtypes: list) -> Callable[..., None]:
    function = getattr(handle, name)
    function.argtypes = argtypes
    function.restype = None
    return function


unavailable_reason = ""


def _library_path() -> Path | None:
    """libmkl_rt from the installed `mkl` distribution (its data files go to the environment's
    lib directory), or None."""
    try:
        distribution = importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in distribution.files or ():
        if file.name.startswith("libmkl_rt.so"):
            path = Path(str(distribution.locate_file(file))).resolve()
            if path.exists():
                return path
    return None


INTEL = "GenuineIntel"


def cpu_vendor(cpuinfo: str | None = None) -> str:
    """The x86 vendor string of the CPU ("GenuineIntel", "AuthenticAMD", ...) from
    /proc/cpuinfo's `vendor_id` (or the text given), "" where that is not known."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "vendor_id":
            return value.strip()
    return ""


def _load() -> Mkl | None:
    global unavailable_reason
    setting = os.environ.get("ATEN2PRIMS_MKL", "")
    if setting == "0":
        unavailable_reason = "ATEN2PRIMS_MKL=0"
        return None
    if setting != "1":
        vendor = cpu_vendor()
        if vendor != INTEL:
            unavailable_reason = (
                f"the CPU's vendor is {vendor or 'unknown'}, not {INTEL}: MKL's kernels run "
                "generic code there, slower than NumPy's (ATEN2PRIMS_MKL=1 uses them anyway)"
            )
            return None
    path = _library_path()
    if path is None:
        unavailable_reason = "the mkl package is not installed"
        return None
    try:
        handle = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    except OSError as error:
        unavailable_reason = f"{path} could not be loaded: {error}"
        return None
    handle.MKL_Set_Threading_Layer.argtypes = [_int]
    handle.MKL_Set_Threading_Layer.restype = _int
    handle.MKL_CBWR_Set.argtypes = [_int]
    handle.MKL_CBWR_Set.restype = _int
    # Both settings must come before MKL's first computation; if another user of this
    # library in the process came first, its threaded layer would make results depend on the
    # thread count, so MKL is not used.
    if handle.MKL_Set_Threading_Layer(_THREADING_SEQUENTIAL) != _THREADING_SEQUENTIAL:
        unavailable_reason = f"{path} already runs a threaded layer in this process"
        return None
    handle.MKL_CBWR_Set(_CBWR_AUTO)
    return Mkl(path=path, handle=handle)


def library() -> Mkl | None:
    """MKL if kernels should use it now, else None (see the module's docstring for when)."""
    return _library.get()


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within the block `library()` is None: kernels, which ask at each call, use NumPy's
    routines (the tests compare both)."""
    with _library.disabled():
        yield


_library = OptionalLibrary(_load)
