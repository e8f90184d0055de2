"""Failures recorded on purpose, each with its reason; docs/coverage.md shows them.

An entry must name the overload, why it fails (a torch-vs-NumPy limitation we cannot fix, a
semantic we deliberately do not reproduce, …) and, where it is narrower than the whole op, the
dtypes and/or a regex over the call's description. Never add an entry to hide a bug."""

from __future__ import annotations

from ..ir.dtypes import DType
from .conformance import KnownFailure

KNOWN_FAILURES: list[KnownFailure] = [
    KnownFailure(
        "aten.convolution.default",
        "float32 accumulation order: our contraction runs as an OpenBLAS sgemm over im2col, torch's "
        "as a oneDNN direct convolution. With 576-term sums both errors against float64 sit at the "
        "1e-5 atol noise floor (ours ~1.5x torch's on average), so the per-element 'no worse than "
        "3x torch' rule fails on the odd element where torch happens to be exact (1 of 576 here); "
        "torch's own MKL mm on the same im2col matrices fails it likewise. Only computing float32 "
        "convolutions in float64 would avoid it.",
        dtypes=frozenset({DType.float32}),
        pattern=r"^aten\.convolution\.default\(float32\[2, 64, 6, 6\], float32\[8, 64, 3, 3\]",
    ),
    KnownFailure(
        "aten.convolution.default",
        "float32 accumulation order, as above, on OpInfo samples of the full budget whose values "
        "(uniform in [-9, 9]) make 64- to 108-term sums of magnitude ~100: our mean error against "
        "float64 is that of torch (6e-6 vs 9e-6 for the conv3d, 1.3e-5 vs 9e-6 for the "
        "conv_transpose3d), yet 1-9 elements in 1000s exceed 3x torch's own error where torch "
        "happened to be nearly exact. Whether a given draw fails depends on the (unseeded) OpInfo "
        "values.",
        dtypes=frozenset({DType.float32}),
        pattern=r"^aten\.convolution\.default\((float32\[1, 1, 11, 12, 13\], float32\[1, 1, 4, 4, 4\]|"
        r"float32\[1, 4, 5, 5, 5\], float32\[4, 8, 3, 3, 3\], None, \[1, 1, 1\], \[0, 0, 0\], \[1, 1, 1\], True)",
    ),
    KnownFailure(
        "aten._cdist_forward.default",
        "p=2 through torch's matrix-product path (compute_mode 1, or None/0 with more than 25 rows), "
        "which we reproduce: sqrt(clamp(|a|^2 - 2a.b + |b|^2, 0)) cancels completely for coincident "
        "rows, leaving rounding noise of order sqrt(eps)*|a| whose value depends on the BLAS "
        "accumulation order (torch's MKL vs NumPy's OpenBLAS): torch itself returns up to 4e-3 "
        "(float32) or 2.4e-7 (float64) for a distance of 0, and 0 for others. Only the direct "
        "formula (compute_mode 2) is exact there. Scope: the hand-written sample whose x2 repeats "
        "rows of x1.",
        pattern=r"^aten\._cdist_forward\.default\(float(32|64)\[6, 5\], float(32|64)\[4, 5\], 2\.0, 1\)$",
    ),
]
