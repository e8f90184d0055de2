"""The tolerance rule, torch-free, shared by the test suite, the harness and `aten2prims check`.

A result passes when its dtype and shape equal the expected ones and its values are
1. within torch's `assert_close` default tolerance for the dtype (exact for integers and bool;
   NaN matches NaN; infinities must match exactly), or
2. "no worse than torch": given a float64 (complex128) reference computed from the same inputs,
   every element of ours is within `CLOSER_THAN_FACTOR` times torch's largest error against that
   reference (the computation's noise floor), plus the dtype's tolerance (Thunder's "closer than"
   rule; it applies where accumulation order legitimately differs, e.g. float16 sums).
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from ..ir.dtypes import DType

# torch.testing's default (rtol, atol) per dtype; integers and bool compare exactly.
TOLERANCES: dict[DType, tuple[float, float]] = {
    DType.float16: (1e-3, 1e-5),
    DType.bfloat16: (1.6e-2, 1e-5),
    DType.float32: (1.3e-6, 1e-5),
    DType.float64: (1e-7, 1e-7),
    DType.complex64: (1.3e-6, 1e-5),
    DType.complex128: (1e-7, 1e-7),
}
CLOSER_THAN_FACTOR = 3.0


@attrs.frozen
class Comparison:
    ok: bool
    reason: str  # "" when ok; else "dtype", "shape" or "value"
    message: str
    max_abs_error: float = 0.0
    mismatches: int = 0

    def __bool__(self) -> bool:
        return self.ok


def tolerance(dtype: DType) -> tuple[float, float]:
    return TOLERANCES.get(dtype, (0.0, 0.0))


def compare(
    actual: Any,
    expected: Any,
    *,
    reference: Any = None,
    what: str = "result",
    against: str = "torch",
) -> Comparison:
    """Compare our `actual` array with the `expected` one (torch's, or the named source's)."""
    if not isinstance(expected, np.ndarray) or not isinstance(actual, np.ndarray):
        return _compare_scalars(actual, expected, what, against)
    if actual.dtype != expected.dtype:
        return Comparison(
            False,
            "dtype",
            f"{what}: dtype {actual.dtype} differs from {against}'s {expected.dtype}",
        )
    if actual.shape != expected.shape:
        return Comparison(
            False,
            "shape",
            f"{what}: shape {list(actual.shape)} differs from {against}'s {list(expected.shape)}",
        )
    dtype = DType.from_numpy(actual.dtype)
    if dtype.is_integral:
        wrong = actual != expected
        count = int(np.count_nonzero(wrong))
        if count == 0:
            return Comparison(True, "", f"{what}: equal")
        index = tuple(int(i) for i in np.argwhere(wrong)[0])
        return Comparison(
            False,
            "value",
            f"{what}: {count} of {actual.size} element(s) differ; first at {list(index)}: "
            f"{actual[index]!r} vs {against} {expected[index]!r}",
            mismatches=count,
        )
    rtol, atol = tolerance(dtype)
    wide = np.complex128 if dtype.is_complex else np.float64
    ours = actual.astype(wide)
    theirs = expected.astype(wide)
    bad = _outside(ours, theirs, rtol, atol)
    if reference is not None and bad.any():
        ref = np.asarray(reference).astype(wide)
        bad &= _worse_than_torch(ours, theirs, ref, rtol, atol)
    count = int(np.count_nonzero(bad))
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(ours) & np.isfinite(theirs)
        error = float(np.max(np.abs(ours - theirs)[finite], initial=0.0))
    if count == 0:
        return Comparison(
            True, "", f"{what}: close (max abs error {error:.3g})", max_abs_error=error
        )
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return Comparison(
        False,
        "value",
        f"{what}: {count} of {actual.size} element(s) outside rtol={rtol:g}, atol={atol:g}"
        f"{' and worse than torch against the float64 reference' if reference is not None else ''}; "
        f"first at {list(index)}: {actual[index]!r} vs {against} {expected[index]!r}; max abs error {error:.3g}",
        max_abs_error=error,
        mismatches=count,
    )


def _outside(ours: np.ndarray, theirs: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise: not within tolerance, with NaN == NaN and exact infinities."""
    with np.errstate(invalid="ignore", over="ignore"):
        if np.iscomplexobj(ours):
            return _outside(ours.real, theirs.real, rtol, atol) | _outside(
                ours.imag, theirs.imag, rtol, atol
            )
        both_nan = np.isnan(ours) & np.isnan(theirs)
        exact = ours == theirs
        close = np.abs(ours - theirs) <= atol + rtol * np.abs(theirs)
        close &= np.isfinite(ours) & np.isfinite(theirs)
        return ~(both_nan | exact | close)


def _worse_than_torch(
    ours: np.ndarray, theirs: np.ndarray, ref: np.ndarray, rtol: float, atol: float
) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        our_error = np.abs(ours - ref)
        torch_error = np.abs(theirs - ref)
        # torch's largest error over the tensor is the noise floor of this computation in this
        # dtype (accumulation order, rounding of intermediates): an element of ours passes when
        # it is within a few times that floor. Judging each element against torch's error on the
        # same element would fail wherever torch happens to be exact by luck. Where torch is NaN
        # or infinite but the reference is finite, torch's error says nothing about ours.
        finite = np.isfinite(torch_error)
        floor = float(np.max(torch_error[finite], initial=0.0))
        allowed = CLOSER_THAN_FACTOR * floor + atol + rtol * np.abs(ref)
        worse = ~(our_error <= allowed)
        # Where the reference itself is NaN/inf, only the plain comparison can judge, except
        # that an element equal to the reference is right whatever torch gave (e.g. torch's
        # vectorized float16 gelu(inf) is NaN on some CPUs; the exact value is inf).
        return (worse | ~np.isfinite(ref)) & ~(ours == ref)


def _compare_scalars(actual: Any, expected: Any, what: str, against: str) -> Comparison:
    if type(actual) is not type(expected):
        return Comparison(
            False,
            "dtype",
            f"{what}: {type(actual).__name__} {actual!r} vs {against}'s {type(expected).__name__} {expected!r}",
        )
    if isinstance(actual, float | complex):
        ok = not _outside(
            np.asarray(actual), np.asarray(expected), *TOLERANCES[DType.float64]
        ).any()
    else:
        ok = actual == expected
    if ok:
        return Comparison(True, "", f"{what}: equal")
    return Comparison(False, "value", f"{what}: {actual!r} vs {against} {expected!r}", mismatches=1)
