"""The tolerance rule, torch-free, shared by the test suite, the harness and `aten2prims check`.

A result passes when its dtype and shape equal the expected ones and every element passes.
Integers and bools must be equal. A floating element (complex: each part) passes when
1. it is within torch's `assert_close` default tolerance of torch's value for the dtype (NaN
   matches NaN; infinities must match exactly), or, given a float64 (complex128) `reference`
   computed from the same inputs,
2. it is as accurate as torch's on *that element*: |ours - ref| <= k·|torch - ref| + atol +
   rtol·|ref| with k = `CLOSER_THAN_FACTOR`, where torch's value and the reference are finite
   (this admits another accumulation order, e.g. a float16 sum, where torch itself is inexact,
   and nothing less accurate), or
3. it equals the reference or the reference rounded to the result dtype (NaN matching NaN): the
   only way to differ from a torch NaN, infinity or overflow.
In every case a real zero must have torch's sign where both are zero and the sign is defined:
without a reference, always; with one, where torch's zero has the sign of the reference's value.
(torch leaves the signs of complex zeros undefined; see `_zero_sign_differs`.)
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
CLOSER_THAN_FACTOR = 4.0
# For a sum of products, the units of the accumulation dtype's epsilon, relative to the sum of
# the terms' magnitudes, that another summation order may add (OpenBLAS's float32 matrix
# products err by up to about 3.3 units of 2^-24, i.e. 1.6 of epsilon, at K = 576).
SUM_ROUNDING = 2.0


# Overloads of which torch does not define the sign of a zero result: maximum and minimum of
# +0.0 and -0.0 (and clamp with tensor bounds, built on them) give either zero depending on the
# element's position, in the tensor's vectorized body or its scalar tail
# (torch.maximum(torch.full((37,), -0.0), torch.zeros(37)) holds both signs). clamp with number
# bounds keeps an x equal to a bound, consistently.
ZERO_SIGN_UNDEFINED = frozenset(
    {"aten.maximum.default", "aten.minimum.default", "aten.clamp.Tensor"}
)


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
    sum_of_magnitudes: Any = None,
    signed_zeros: bool = True,
    what: str = "result",
    against: str = "torch",
) -> Comparison:
    """Compare our `actual` array with the `expected` one (torch's, or the named source's).
    `signed_zeros=False` leaves the sign of zeros free, for ops whose zero sign torch leaves
    undefined (`ZERO_SIGN_UNDEFINED`)."""
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
    if reference is None:
        bad = _outside(ours, theirs, rtol, atol)
        if signed_zeros:
            bad |= _zero_sign_differs(ours, theirs, None)
    else:
        ref = np.asarray(reference).astype(wide)
        with np.errstate(over="ignore"):  # a reference beyond the dtype rounds to infinity
            rounded = np.asarray(reference).astype(actual.dtype).astype(wide)
        rounding = np.zeros(actual.shape)
        if sum_of_magnitudes is not None:
            # The accumulation runs in float32 for float32 and narrower (float64 for float64).
            wide_result = dtype in (DType.float64, DType.complex128)
            accumulation = np.float64 if wide_result else np.float32
            epsilon = float(np.finfo(accumulation).eps)
            rounding = SUM_ROUNDING * epsilon * np.abs(np.asarray(sum_of_magnitudes).astype(wide))
        bad = _wrong_against_reference(ours, theirs, ref, rounded, rounding, rtol, atol)
        if signed_zeros:
            bad |= _zero_sign_differs(ours, theirs, ref)
    count = int(np.count_nonzero(bad))
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(ours) & np.isfinite(theirs)
        error = float(np.max(np.abs(ours - theirs)[finite], initial=0.0))
    if count == 0:
        return Comparison(
            True, "", f"{what}: close (max abs error {error:.3g})", max_abs_error=error
        )
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    against_reference = (
        f" and farther than {CLOSER_THAN_FACTOR:g}x torch's own error from the float64 reference"
        if reference is not None
        else ""
    )
    detail = (
        f" (reference {complex(np.asarray(reference)[index]) if dtype.is_complex else float(np.asarray(reference)[index])!r})"
        if reference is not None
        else ""
    )
    return Comparison(
        False,
        "value",
        f"{what}: {count} of {actual.size} element(s) outside rtol={rtol:g}, atol={atol:g} "
        f"(or of another sign of zero){against_reference}; first at {list(index)}: "
        f"{actual[index]!r} vs {against} {expected[index]!r}{detail}; max abs error {error:.3g}",
        max_abs_error=error,
        mismatches=count,
    )


def _parts(array: np.ndarray) -> list[np.ndarray]:
    return [array.real, array.imag] if np.iscomplexobj(array) else [array]


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


def _zero_sign_differs(ours: np.ndarray, theirs: np.ndarray, ref: np.ndarray | None) -> np.ndarray:
    """Elementwise: both results are zero but of different signs, where the sign is defined —
    torch's zero has the sign of the float64 reference's result (a zero or an underflow of the
    same sign). Without a reference torch's sign is taken as defined."""
    if np.iscomplexobj(ours):
        # torch's complex kernels do not define the sign of a zero part: the same input gives
        # different signs at different positions of one tensor (its vectorized body computes
        # neg as 0 - z, its scalar tail as -z: torch.neg(torch.full((9,), 2+0j)).imag has the
        # sign bit set at the last element only).
        return np.zeros(ours.shape, dtype=bool)
    differs = (ours == 0) & (theirs == 0) & (np.signbit(ours) != np.signbit(theirs))
    if ref is not None:
        differs &= ~np.isnan(ref) & (np.signbit(ref) == np.signbit(theirs))
    return differs


def _wrong_against_reference(
    ours: np.ndarray,
    theirs: np.ndarray,
    ref: np.ndarray,
    rounded: np.ndarray,
    rounding: np.ndarray,
    rtol: float,
    atol: float,
) -> np.ndarray:
    """Elementwise: neither close to torch's value nor as close to the float64 reference as
    torch's own value is (part by part for complex results)."""
    if np.iscomplexobj(ours):
        return _wrong_against_reference(
            ours.real, theirs.real, ref.real, rounded.real, rounding, rtol, atol
        ) | _wrong_against_reference(
            ours.imag, theirs.imag, ref.imag, rounded.imag, rounding, rtol, atol
        )
    with np.errstate(invalid="ignore", over="ignore"):
        # Only where torch's value and the reference are both finite does torch's error on this
        # element measure how inaccurate the computation legitimately is in this dtype; our
        # error may be a few times that, plus the dtype's tolerance. No tensor-wide floor: one
        # inaccurate element of torch's excuses nothing elsewhere.
        torch_error = np.abs(theirs - ref)
        allowed = CLOSER_THAN_FACTOR * torch_error + atol + rtol * np.abs(ref) + rounding
        accurate = (np.abs(ours - ref) <= allowed) & np.isfinite(torch_error)
        # Elsewhere (torch NaN or infinite where the reference is finite, or the reverse) only
        # the reference itself, or its rounding to the result dtype, is right.
        exact = (ours == ref) | (ours == rounded) | (np.isnan(ours) & np.isnan(ref))
        return ~(~_outside(ours, theirs, rtol, atol) | accurate | exact)


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
