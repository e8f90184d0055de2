"""NumPy's own OpenBLAS called through `ctypes`: the matrix products the executor makes with
capabilities `np.matmul` lacks — adding the product into the output as it is made (gemm's
beta = 1), any leading dimension and transposed layouts read in place — when MKL is not in use
(prims/mkl.py; `aten2prims/executor/blas.py` asks for MKL first, then for this).

NumPy's wheels bundle OpenBLAS (`numpy.libs/libscipy_openblas64_-*.so`): an ILP64 build (64-bit
sizes) whose symbols carry a prefix and a suffix (`scipy_cblas_sgemm64_`); a NumPy built
against a system OpenBLAS names its library in threadpoolctl's report instead. The library is
found in that order, loaded by its path — the dynamic loader hands back the copy NumPy already
loaded, so threadpoolctl's thread limit (the executor holds BLAS at one thread during a call)
governs these calls too — and its naming and integer size are read from the library itself
(`openblas_get_config` says USE64BITINT for ILP64). ctypes releases the GIL for the call, so
the executor's threads make products side by side (each call runs on its calling thread while
BLAS is held at one thread).

`library()` is None when no OpenBLAS is found or it lacks cblas gemm, when
`ATEN2PRIMS_OPENBLAS=0` is set, and within `disabled()` (the tests and benchmarks compare it
with `np.matmul`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import numpy
import threadpoolctl

from prims.optional_library import OptionalLibrary

_pointer = ctypes.c_void_p


@attrs.frozen
class OpenBlas:
    """The loaded library, its symbols' naming and its integer type (c_longlong for ILP64)."""

    path: Path
    handle: ctypes.CDLL = attrs.field(repr=False)
    prefix: str
    suffix: str
    integer: type
    config: str
    # Whether it makes plain products (out = x @ y) too: no, only accumulating ones — a plain
    # product through ctypes measured no faster than np.matmul, which calls the same kernels.
    plain_products: bool = False
    # The kernels the library chose for this CPU (`openblas_get_corename`; OPENBLAS_CORETYPE
    # overrides it): its AVX-512 ones have small-matrix float32 products (`small_columns`).
    core: str = ""

    @property
    def max_int(self) -> int:
        """The largest size or leading dimension the library's integers hold."""
        return (1 << (8 * ctypes.sizeof(self.integer) - 1)) - 1

    def small_columns(self, rows: int, depth: int, y_transposed: bool) -> int:
        """The most columns a float32 product of a row-major x [rows, depth] and a y [depth,
        columns] may have to be made by the core's small-matrix kernels, which read x and y
        where they are, or 0 when it has none for this shape. Larger products copy (pack) y
        first, which costs more than the arithmetic when x has few rows. The sizes are those of
        OpenBLAS's own test for the AVX-512 cores (sgemm_small_kernel_permit_skylakex.c): at
        most 10^6 multiply-adds; with y stored transposed (a linear layer's weight), which that
        test sees as a transposed first operand of a column-major product, also at most 1200
        output elements and a depth of at least 32."""
        if self.core not in _SMALL_KERNEL_CORES or rows < 1 or depth < 1:
            return 0
        columns = _SMALL_KERNEL_MACS // (rows * depth)
        if y_transposed:
            columns = min(columns, _SMALL_KERNEL_TRANSPOSED_OUTPUT // rows) if depth >= 32 else 0
        return columns

    def gemm(self, float_type: type) -> Callable[..., None]:
        """cblas_sgemm (float_type c_float) or cblas_dgemm (c_double): (layout, transa,
        transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); the enumerations are C ints, the
        sizes the library's integers."""
        name = "cblas_sgemm" if float_type is ctypes.c_float else "cblas_dgemm"
        return _prototyped(
            self._symbol(name),
            [ctypes.c_int] * 3
            + [self.integer] * 3
            + [float_type, _pointer, self.integer, _pointer, self.integer, float_type]
            + [_pointer, self.integer],
        )

    def gemm_batch_strided(self, float_type: type) -> Callable[..., None] | None:
        """cblas_?gemm_batch_strided (MKL's argument order: layout, transa, transb, m, n, k,
        alpha, a, lda, stridea, b, ldb, strideb, beta, c, ldc, stridec, batch_size), or None for
        an OpenBLAS older than 0.3.30, which lacks it. scipy-openblas 0.3.31 exports it without
        its prefix and suffix (left out of its renaming), so both names are tried; the symbol
        is looked up in this library only."""
        name = "cblas_" + ("s" if float_type is ctypes.c_float else "d") + "gemm_batch_strided"
        for symbol in (self.prefix + name + self.suffix, name):
            function = getattr(self.handle, symbol, None)
            if function is not None:
                integer = self.integer
                return _prototyped(
                    function,
                    [ctypes.c_int] * 3
                    + [integer] * 3
                    + [float_type, _pointer, integer, integer, _pointer, integer, integer]
                    + [float_type, _pointer, integer, integer, integer],
                )
        return None

    def _symbol(self, name: str) -> Callable[..., None]:
        function: Callable[..., None] = getattr(self.handle, self.prefix + name + self.suffix)
        return function


def _prototyped(function: Callable[..., None], argtypes: list) -> Callable[..., None]:
    function.argtypes = argtypes  # type: ignore[attr-defined]  # a ctypes function pointer
    function.restype = None  # type: ignore[attr-defined]  # a ctypes function pointer
    return function


# OpenBLAS's cores whose float32 products of few multiply-adds take its small-matrix kernels
# (kernel/x86_64/KERNEL.SKYLAKEX, included by COOPERLAKE's, included by SAPPHIRERAPIDS'), and
# that kernel's limits (`OpenBlas.small_columns`).
_SMALL_KERNEL_CORES = frozenset({"SkylakeX", "Cooperlake", "SapphireRapids"})
_SMALL_KERNEL_MACS = 10**6
_SMALL_KERNEL_TRANSPOSED_OUTPUT = 1200

# (prefix, suffix) of the namings OpenBLAS builds use: scipy-openblas's ILP64 and LP64 wheels,
# an ILP64 build with the usual suffix, and a plain build.
_NAMINGS = (("scipy_", "64_"), ("scipy_", ""), ("", "64_"), ("", ""))

unavailable_reason = ""


def _bundled_paths() -> list[Path]:
    """NumPy's bundled OpenBLAS: the wheel's `numpy.libs` directory beside the package."""
    libs = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
    return sorted(libs.glob("lib*openblas*.so*")) if libs.is_dir() else []


def _loaded_paths() -> list[Path]:
    """Every OpenBLAS threadpoolctl finds loaded in the process (NumPy's, when it was built
    against a system one); asked only when NumPy bundles none (it scans the process's
    libraries)."""
    return [
        Path(entry["filepath"]).resolve()
        for entry in threadpoolctl.threadpool_info()
        if entry.get("internal_api") == "openblas" and entry.get("filepath")
    ]


def _open(path: Path) -> OpenBlas | None:
    try:
        handle = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    except OSError:
        return None
    for prefix, suffix in _NAMINGS:
        if not hasattr(handle, f"{prefix}cblas_sgemm{suffix}"):
            continue
        get_config = getattr(handle, f"{prefix}openblas_get_config{suffix}", None)
        if get_config is None:
            continue
        get_config.argtypes = []
        get_config.restype = ctypes.c_char_p
        config = (get_config() or b"").decode(errors="replace")
        integer = ctypes.c_longlong if "USE64BITINT" in config else ctypes.c_int
        get_core = getattr(handle, f"{prefix}openblas_get_corename{suffix}", None)
        core = ""
        if get_core is not None:
            get_core.argtypes = []
            get_core.restype = ctypes.c_char_p
            core = (get_core() or b"").decode(errors="replace")
        return OpenBlas(path, handle, prefix, suffix, integer, config, core=core)
    return None


def _load() -> OpenBlas | None:
    global unavailable_reason
    if os.environ.get("ATEN2PRIMS_OPENBLAS", "") == "0":
        unavailable_reason = "ATEN2PRIMS_OPENBLAS=0"
        return None
    for paths in (_bundled_paths, _loaded_paths):
        for path in paths():
            library = _open(path)
            if library is not None:
                return library
    unavailable_reason = "no OpenBLAS with cblas gemm found beside NumPy or in the process"
    return None


def library() -> OpenBlas | None:
    """NumPy's OpenBLAS if products should call it now, else None (see the module's docstring)."""
    return _library.get()


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within the block `library()` is None: products not made by MKL are np.matmul's."""
    with _library.disabled():
        yield


_library = OptionalLibrary(_load)
