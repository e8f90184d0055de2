"""prims/openblas.py: NumPy's own OpenBLAS found and loaded for ctypes calls — the very library
NumPy runs (so threadpoolctl's limit governs it), its symbols' naming and integer size read from
it — and switched off on request."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import threadpoolctl

from prims import openblas


def _library() -> openblas.OpenBlas:
    library = openblas.library()
    assert library is not None, openblas.unavailable_reason
    return library


def test_it_is_the_openblas_numpy_runs() -> None:
    library = _library()
    numpy_blas = [
        Path(entry["filepath"]).resolve()
        for entry in threadpoolctl.threadpool_info()
        if entry.get("internal_api") == "openblas"
    ]
    assert library.path in numpy_blas
    if (Path(np.__file__).resolve().parent.parent / "numpy.libs") in library.path.parents:
        # NumPy's wheel: scipy-openblas's ILP64 build and its renamed symbols
        assert (library.prefix, library.suffix) == ("scipy_", "64_")
        assert "USE64BITINT" in library.config
    assert ctypes.sizeof(library.integer) == (8 if "USE64BITINT" in library.config else 4)


def test_threadpoolctls_limit_governs_its_calls() -> None:
    """Loading the library by its path handed back the copy NumPy loaded: the thread count
    threadpoolctl sets (the executor holds BLAS at one thread during a call) is the one these
    calls see."""
    library = _library()
    get_threads = getattr(
        library.handle, f"{library.prefix}openblas_get_num_threads{library.suffix}"
    )
    get_threads.restype = ctypes.c_int
    before = get_threads()
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        assert get_threads() == 1
    assert get_threads() == before


def test_disabled_turns_it_off_within_the_block_only() -> None:
    assert openblas.library() is not None
    with openblas.disabled():
        assert openblas.library() is None
        with openblas.disabled():
            assert openblas.library() is None
        assert openblas.library() is None
    assert openblas.library() is not None


def test_the_environment_variable_turns_it_off_for_the_process() -> None:
    code = "from prims import openblas; print(openblas.library(), openblas.unavailable_reason)"
    environment = dict(os.environ, ATEN2PRIMS_OPENBLAS="0")
    output = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True
    ).stdout
    assert output.strip() == "None ATEN2PRIMS_OPENBLAS=0"


def test_a_library_without_cblas_gemm_is_not_taken(tmp_path: Path) -> None:
    """A shared object that is no OpenBLAS (here: the C library) is refused, not half-used."""
    libc = ctypes.util.find_library("c")
    assert libc is not None
    assert openblas._open(Path(libc)) is None
    assert openblas._open(tmp_path / "missing.so") is None
